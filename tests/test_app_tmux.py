"""Smoke test: the real command in a real terminal (tmux), driven by keys, read back with capture-pane."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TMUX = shutil.which("tmux") or ("/usr/bin/tmux" if os.path.exists("/usr/bin/tmux") else None)

pytestmark = pytest.mark.skipif(TMUX is None and not os.environ.get("CI"), reason="tmux is not installed")


def _tmux(*args, check=True) -> str:
    return subprocess.run([TMUX, *args], check=check, capture_output=True, text=True, timeout=30).stdout


def _wait_for(session: str, needle: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = _tmux("capture-pane", "-p", "-t", session)
        if needle in text:
            return text
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} did not appear; screen was:\n{text}")


def _wait_for_re(session: str, pattern: str, timeout: float = 30.0) -> re.Match:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = _tmux("capture-pane", "-p", "-t", session)
        m = re.search(pattern, text)
        if m:
            return m
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} did not appear; screen was:\n{text}")


def _report_largest(trace) -> tuple[int, str, str]:
    """(gaps counted, largest gap's duration, its start) from `gapscope report`."""
    md = subprocess.run([sys.executable, "-m", "gapscope", "report", str(trace), "--no-cache"], cwd=ROOT, check=True,
                        capture_output=True, text=True, timeout=120).stdout
    total = int(re.search(r"## Largest gaps \(top \d+ of (\d+)\)", md).group(1))
    m = re.search(r"^1\. \*\*([^*]+)\*\* at \+(\S+ \S+) on", md, re.M)
    return total, m.group(1), m.group(2)


def _wait_for_panel(session: str, needle: str, timeout: float = 30.0) -> str:
    """The stack panel's text (right of the gap list, from its first line down), lines joined by spaces."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        lines = _tmux("capture-pane", "-p", "-t", session).splitlines()
        top = next((i for i, ln in enumerate(lines) if "gap 1/" in ln), None)
        if top is not None:
            col = lines[top].index("gap 1/")
            # (less the panel's scroll bar, drawn in its last column)
            text = " ".join(" ".join(ln[col:].rstrip(" ▁▂▃▄▅▆▇█").split())
                            for ln in lines[top:] if len(ln) > col)
            if needle in text:
                return text
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} did not appear in the stack panel: {text}")


@pytest.mark.parametrize("lang", ["C.UTF-8", "C"])
def test_real_command_in_tmux(shared_traces, tmp_path, lang):
    if TMUX is None:
        pytest.fail("CI needs tmux for the terminal smoke test")
    trace = shared_traces / "h200" / "stack_memory_compile_graph.pt.trace.json.gz"
    session = f"gapscope-test-{os.getpid()}-{lang.replace('.', '')}"
    env = f"cd {ROOT} && LANG={lang} LC_ALL={lang} TERM=xterm-256color GAPSCOPE_CACHE_DIR={tmp_path}"
    cmd = f"{env} {sys.executable} -m gapscope {trace} --no-cache; echo EXIT=$?; sleep 30"
    _tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", cmd)
    try:
        # a trace opens on the gap of the plan's first action (the header names it, its saving first); N walks back
        # to the largest
        k = int(_wait_for_re(session, r"gap (\d+)/\d+").group(1))
        # (under 100 columns the action's headline: "1. −86.0%: CUDA-graph the step, ...")
        _wait_for_re(session, r"(?m)^1\. [−-]\d+\.\d%( un-profiled| profiled time)?: \w")
        screen = _wait_for(session, "gap ")
        for j in range(k - 1, 0, -1):
            _tmux("send-keys", "-t", session, "N")
            screen = _wait_for(session, f"gap {j}/")
        assert "stack_memory_compile_graph" in screen
        # the explorer agrees with `gapscope report` on the same trace: the gaps counted, the largest gap's
        # duration and its time from the window start
        total, dur, at = _report_largest(trace)
        panel = _wait_for_panel(session, " at +")
        m = re.search(r"gap 1/(\d+) (?:\((\d+) under \S+ \S+ not listed, (\d+) in all\) )?(\S+ \S+) idle on "
                      r"cuda:\d+ at \+(\S+ \S+)", panel)
        assert m, panel
        listed, hidden, counted = int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or m.group(1))
        assert counted == total and listed + hidden == total
        unit = (lambda x: x.replace("µs", "us")) if lang == "C" else (lambda x: x)
        assert (m.group(4), m.group(5)) == (unit(dur), unit(at))
        assert "GPU idle" in screen and "cause:" in screen
        lanes = [ln for ln in screen.splitlines() if ln.startswith("stream ")]
        assert lanes, screen
        if lang == "C":  # not UTF-8: plain ASCII lanes
            assert all(ln.isascii() for ln in lanes), lanes
        else:
            assert not all(ln.isascii() for ln in lanes), lanes
        for key, needle in (("n", "gap 2/"), ("n", "gap 3/"), ("N", "gap 2/")):
            _tmux("send-keys", "-t", session, key)
            screen = _wait_for(session, needle)
        _tmux("send-keys", "-t", session, "?")
        screen = _wait_for(session, "next / previous gap")
        # the help box lists the keys (the legend below it may need scrolling at this size)
        assert "Keys" in screen and "quit" in screen
        _tmux("send-keys", "-t", session, "Escape")
        # a key right after Escape would read as Alt+key: wait for the help to close first
        deadline = time.monotonic() + 10
        while "next / previous gap" in _tmux("capture-pane", "-p", "-t", session) and time.monotonic() < deadline:
            time.sleep(0.2)
        _tmux("send-keys", "-t", session, "q")
        screen = _wait_for(session, "EXIT=0")
        assert "Traceback" not in screen
    finally:
        _tmux("kill-session", "-t", session, check=False)
