"""The walk an engineer takes at 2 a.m., in a real 80x24 terminal (tmux), keys only: open a before/after pair, read
the top action in the header, the plan in the findings view (3), Enter on the kernel action (its kernels), help (?),
the before/after view (D) with its verdict and its help, back (Esc), export (e), quit (q). Expectations come from
the analysis (its plan and its comparison), not from the screen's code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from gapscope.analysis import analyze
from gapscope.analysis.text import plain
from gapscope.trace import load
from tests.helpers import ROOT, SAMPLE_TRACES

TMUX = shutil.which("tmux") or ("/usr/bin/tmux" if os.path.exists("/usr/bin/tmux") else None)

pytestmark = pytest.mark.skipif(TMUX is None and not os.environ.get("CI"), reason="tmux is not installed")

A, B = "hf-attn.prefill_eager.json.gz", "hf-attn.prefill_sdpa.json.gz"


def _tmux(*args) -> str:
    return subprocess.run([TMUX, *args], check=True, capture_output=True, text=True, timeout=30).stdout


def _screen(s: str) -> str:
    return _tmux("capture-pane", "-p", "-t", s)


def _wait(s: str, test, what: str, timeout: float = 40.0) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = _screen(s)
        if test(text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"{what} did not appear; the screen was:\n{text}")


def _keys(s: str, *keys: str) -> None:
    for k in keys:
        _tmux("send-keys", "-t", s, k)
        time.sleep(0.3)


def test_the_two_am_walk_at_80x24(tmp_path):
    if TMUX is None:
        pytest.fail("CI needs tmux for the terminal walk")
    for name in (A, B):
        shutil.copy(SAMPLE_TRACES / name, tmp_path / name)
    a = analyze(load(str(SAMPLE_TRACES / A)))
    top, kern = a.plan.actions[0], next(x for x in a.plan.actions if x.kind == "kernels")
    s = f"gapscope-walk-{os.getpid()}"
    env = f"cd {tmp_path} && PYTHONPATH={ROOT} LANG=C.UTF-8 TERM=xterm-256color"
    _tmux("new-session", "-d", "-s", s, "-x", "80", "-y", "24",
          f"{env} {sys.executable} -m gapscope --no-cache {A} {B}; echo EXIT=$?; sleep 60")
    try:
        # the header: the plan's first action, verb first, with what it buys
        head = f"1. −{top.saving_pct:.1f}%: {plain(top.headline)}"
        scr = _wait(s, lambda t: head in t and "idle" in t, head)
        assert all(len(ln) <= 80 for ln in scr.splitlines())
        # the findings view: the plan, numbered as the report
        _keys(s, "3")
        scr = _wait(s, lambda t: "severity" in t and "saving" in t, "the findings view")
        for x in a.plan.major:
            assert f"−{x.saving_pct:.1f}%" in scr, x.rank
        # Enter on the kernel action: the kernels view on its kernels
        _keys(s, *["j"] * (kern.rank - 1), "Enter")
        scr = _wait(s, lambda t: "kernel" in t and "bound" in t and "calls" in t, "the kernels view")
        # help, and back
        _keys(s, "?")
        _wait(s, lambda t: "Keys" in t, "the help")
        _keys(s, "Escape", "1")
        # before/after: the verdict in un-profiled step time, its own help, back to the explorer
        _keys(s, "D")
        scr = _wait(s, lambda t: "un-profiled" in t and "A before" in t, "the before/after view")
        verdict = next(ln for ln in scr.splitlines() if "un-profiled" in ln)
        assert verdict.startswith("faster: step ")  # 6.17 ms -> 5.34 ms in traces/README.md
        _keys(s, "?")
        _wait(s, lambda t: "Keys of the before/after view" in t, "the before/after help")
        _keys(s, "Escape", "Escape")
        _wait(s, lambda t: head in t, "the explorer again")
        # export: the findings and the screen next to the trace, nothing overwritten
        _keys(s, "e")
        deadline = time.monotonic() + 30
        stem = A.removesuffix(".json.gz")
        want = {f"{stem}.gapscope.md", f"{stem}.gapscope.json", f"{stem}.gapscope.svg"}
        while time.monotonic() < deadline and not want <= {p.name for p in tmp_path.iterdir()}:
            time.sleep(0.2)
        assert want <= {p.name for p in tmp_path.iterdir()}
        md = (tmp_path / f"{stem}.gapscope.md").read_text()
        assert md.startswith("# gapscope report: ") and " vs " in md.splitlines()[0]  # both tabs: the pair
        assert "## Plan" in md
        _keys(s, "q")
        scr = _wait(s, lambda t: "EXIT=" in t, "the exit")
        assert "EXIT=0" in scr and "Traceback" not in scr
    finally:
        subprocess.run([TMUX, "kill-session", "-t", s], capture_output=True)
