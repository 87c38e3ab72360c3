"""Odd terminals: resizing down to 20x5 and back, TERM=vt100/xterm/screen, LANG=C (ASCII glyphs), NO_COLOR,
keys only (no mouse). Pilot tests on the sample traces, then the real command in a detached tmux session of
80x24 per terminal kind: the screen shows the header and the gap text, n / ? / Escape / q work, the process
exits 0, no traceback."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.app import settle
from gapscope.tui.app import GapscopeApp
from gapscope.tui.textdump import screen_text

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "traces" / "demo-eager-sync.decode.json.gz"
TMUX = shutil.which("tmux")


# ----------------------------------------------------------------------------------------- Pilot
@pytest.mark.parametrize("ascii_mode", [False, True], ids=["unicode", "ascii"])
def test_resize_down_to_20x5_and_back_keeps_a_sensible_layout(ascii_mode):
    async def go():
        app = GapscopeApp([str(SAMPLE)], ascii=ascii_mode, load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            before = screen_text(app)
            sizes = []
            for size in ((20, 5), (33, 9), (80, 24)):
                await pilot.resize_terminal(*size)
                await pilot.press("n", "w", "d", "N", "s", "question_mark")
                await pilot.pause()
                help_text = screen_text(app)
                await pilot.press("escape")
                await pilot.pause()
                sizes.append((size, screen_text(app), help_text))
            return app, before, sizes

    app, before, sizes = asyncio.run(asyncio.wait_for(go(), timeout=120))
    assert app.error is None
    for (w, h), txt, help_text in sizes:
        lines = txt.splitlines()
        assert len(lines) <= h and all(len(ln) <= w for ln in lines), ((w, h), txt)
        if ascii_mode:
            assert txt.isascii() and help_text.isascii()
    # back at 80x24: the same layout as before (header, lanes, gap list with the stack panel)
    after = sizes[-1][1]
    assert after.splitlines()[0] == before.splitlines()[0]
    assert "GPU idle" in after and "cause:" in after and "gap " in after
    assert "next / previous gap" in sizes[-1][2]


def test_no_color_env_reaches_the_app(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        app = GapscopeApp([str(SAMPLE)], load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            await pilot.press("n")
            await pilot.pause()
            return app, screen_text(app)

    app, txt = asyncio.run(asyncio.wait_for(go(), timeout=60))
    assert app.no_color and "GPU idle" in txt


# ------------------------------------------------------------------------------------------ tmux
def _tmux(*args, check=True) -> str:
    return subprocess.run([TMUX, *args], check=check, capture_output=True, text=True, timeout=30).stdout


def _pane(session: str) -> str:
    return _tmux("capture-pane", "-p", "-t", session)


def _wait_for(session: str, needle: str, timeout: float = 30.0, gone: bool = False, regex: bool = False) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = _pane(session)
        found = re.search(needle, text) is not None if regex else needle in text
        if found != gone:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} did not {'go' if gone else 'appear'}; screen was:\n{text}")


_GREYS_256 = {0, 7, 8, 15, 16, 231, *range(232, 256)}


def _hues(screen: str) -> list[str]:
    """The SGR colours in ``screen`` that are not a shade of grey."""
    bad = []
    for params in re.findall(r"\x1b\[([0-9;]*)m", screen):
        p = [int(x) if x else 0 for x in params.split(";")]
        i = 0
        while i < len(p):
            if p[i] in (38, 48) and i + 2 < len(p) and p[i + 1] == 5:
                if p[i + 2] not in _GREYS_256:
                    bad.append(params)
                i += 3
            elif p[i] in (38, 48) and i + 4 < len(p) and p[i + 1] == 2:
                if not p[i + 2] == p[i + 3] == p[i + 4]:
                    bad.append(params)
                i += 5
            else:
                if p[i] in (31, 32, 33, 34, 35, 36, 41, 42, 43, 44, 45, 46, *range(91, 97), *range(101, 107)):
                    bad.append(params)
                i += 1
    return bad


TERMINALS = [
    pytest.param({"TERM": "vt100", "LANG": "C.UTF-8"}, id="vt100"),
    pytest.param({"TERM": "xterm", "LANG": "C.UTF-8"}, id="xterm"),
    pytest.param({"TERM": "screen", "LANG": "C.UTF-8"}, id="screen"),
    pytest.param({"TERM": "xterm-256color", "LANG": "C"}, id="LANG=C"),
    pytest.param({"TERM": "xterm-256color", "LANG": "C.UTF-8", "NO_COLOR": "1"}, id="NO_COLOR"),
]


@pytest.mark.skipif(TMUX is None and not os.environ.get("CI"), reason="tmux is not installed")
@pytest.mark.parametrize("env", TERMINALS)
def test_sample_trace_in_tmux(tmp_path, env):
    if TMUX is None:
        pytest.fail("CI needs tmux for the terminal tests")
    session = f"gapscope-term-{os.getpid()}-{env['TERM']}-{env['LANG'].replace('.', '')}-{len(env)}"
    exports = " ".join(f"{k}={v}" for k, v in {**env, "LC_ALL": env["LANG"]}.items())
    cmd = (f"cd {ROOT} && env -u NO_COLOR -u GAPSCOPE_FORCE_TUI {exports} GAPSCOPE_CACHE_DIR={tmp_path} "
           f"{sys.executable} -m gapscope {SAMPLE}; echo EXIT=$?; sleep 30")
    _tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd)
    try:
        _tmux("set-option", "-t", session, "mouse", "off", check=False)
        # the trace opens on the top action's gap (gap k of n); n goes to the next one down the list. Waiting for the
        # gap panel's title, not for "cause:", which the header ("biggest cause:") can show a frame earlier
        screen = _wait_for(session, r"gap \d+/\d+", regex=True)
        k = int(re.search(r"gap (\d+)/\d+", screen).group(1))
        # the header's first action: its number, its saving, verb first
        assert "demo-eager-sync" in screen and "GPU idle" in screen and re.search(r"^1\. [−-]77\.9%", screen, re.M)
        if env["LANG"] == "C":  # not UTF-8: plain ASCII everywhere
            assert screen.isascii(), screen
        _tmux("send-keys", "-t", session, "n")
        screen = _wait_for(session, f"gap {k + 1}/")
        _tmux("send-keys", "-t", session, "?")
        screen = _wait_for(session, "next / previous gap")
        _tmux("send-keys", "-t", session, "Escape")
        _wait_for(session, "next / previous gap", timeout=10, gone=True)  # a key right after Esc reads as Alt+key
        if env.get("NO_COLOR"):  # Textual's monochrome filter: shades of grey, no hues
            assert not _hues(_tmux("capture-pane", "-p", "-e", "-t", session))
        _tmux("send-keys", "-t", session, "q")
        _wait_for(session, "EXIT=")
        screen = _tmux("capture-pane", "-p", "-S", "-1000", "-t", session)  # with what scrolled away
        assert "EXIT=0" in screen, screen
        assert "Traceback" not in screen and "Error" not in screen, screen
    finally:
        _tmux("kill-session", "-t", session, check=False)


@pytest.mark.skipif(TMUX is None and not os.environ.get("CI"), reason="tmux is not installed")
def test_bad_trace_in_tmux_shows_the_error_screen_then_one_line(tmp_path):
    if TMUX is None:
        pytest.fail("CI needs tmux for the terminal tests")
    bad = tmp_path / "cut.json"
    bad.write_bytes(b"not a trace")
    session = f"gapscope-term-{os.getpid()}-bad"
    cmd = (f"cd {ROOT} && env -u NO_COLOR -u GAPSCOPE_FORCE_TUI TERM=xterm LANG=C.UTF-8 LC_ALL=C.UTF-8 "
           f"GAPSCOPE_CACHE_DIR={tmp_path} {sys.executable} -m gapscope {bad}; echo EXIT=$?; sleep 30")
    _tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd)
    try:
        screen = _wait_for(session, "gapscope: error:")
        assert "profiler trace (not JSON" in screen and "Traceback" not in screen
        _tmux("send-keys", "-t", session, "q")
        _wait_for(session, "EXIT=")
        screen = _tmux("capture-pane", "-p", "-J", "-S", "-1000", "-t", session)  # -J: wrapped lines joined
        assert "EXIT=2" in screen and "Traceback" not in screen
        errs = [ln for ln in screen.splitlines() if ln.startswith("gapscope: error:")]
        assert len(errs) == 1 and "cut.json" in errs[0], screen
    finally:
        _tmux("kill-session", "-t", session, check=False)
