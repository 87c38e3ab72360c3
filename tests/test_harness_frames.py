"""gapscope's own command line is scaffolding, not the workload: run as ``python -m gapscope capture`` from a
checkout, its frames (``gapscope/__main__.py``, ``gapscope/cli.py``'s main, ``gapscope/commands/capture.py``) sit above the
capture's step loop on every stack, and no finding may be about them (traces/demo-eager-cli.decode.json.gz, recorded
that way on an H200, when they lived in ``tui/``: one gap's host work was credited to `tui/commands/capture.py(17): run_argv`)."""

from __future__ import annotations

from gapscope.analysis import analyze
from gapscope.analysis.names import CAPTURE_FRAME_RE, HARNESS_FRAME_RE
from gapscope.report.jsonout import build_json
from gapscope.trace import load
from tests.helpers import SAMPLE_TRACES

CLI_TRACE = SAMPLE_TRACES / "demo-eager-cli.decode.json.gz"
# as recorded (the command line lived in tui/ then); the same frames of today's layout are harness frames too
CLI_FRAMES = ("gapscope/__main__.py(7): <module>", "tui/cli.py(63): main", "tui/cli.py(113): _main",
              "tui/commands/capture.py(17): run_argv")
CLI_FRAMES_NOW = ("gapscope/cli.py(63): main", "gapscope/cli.py(113): _main", "gapscope/commands/capture.py(17): run_argv")


def test_the_command_line_frames_are_harness_frames():
    for fr in CLI_FRAMES + CLI_FRAMES_NOW:
        assert CAPTURE_FRAME_RE.search(fr) and HARNESS_FRAME_RE.search(fr), fr
    # the workload, and a user's own module of the same file name, stay user frames
    for fr in ("capture/demo.py(307): _decode", "myproj/tui/cli.py(40): render", "myproj/tui/cli.py(12): main_loop",
               "myproj/gapscope/cli.py(40): render"):
        assert not CAPTURE_FRAME_RE.search(fr) and not HARNESS_FRAME_RE.search(fr), fr


def test_no_finding_is_about_the_command_line():
    m = load(str(CLI_TRACE), no_cache=True)
    # the trace has them: every CPU op's stack starts with them
    names = {m.name(i) for i in range(m.n)}
    assert set(CLI_FRAMES) <= names
    a = analyze(m)
    doc = build_json([a])
    about = [f["title"] for f in doc["findings"]] + [(f["evidence"] or {}).get("frame") or "" for f in doc["findings"]]
    assert not [t for t in about if any(fr.split("(")[0] in t for fr in CLI_FRAMES)], about
    assert any("capture/demo.py(204): forward" in t for t in about)
