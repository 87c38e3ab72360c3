"""Gap explanations read as sentences: built-in frames are named by their function, not their repr."""

import numpy as np

from tests.helpers import SAMPLE_TRACES
from gapscope.analysis import CAUSES, analyze
from gapscope.analysis.names import builtin_name, display_frame
from gapscope.trace import load


def test_builtin_frame_names():
    rf = "<built-in method _record_function_enter_new of pybind11_builtins.pybind11_detail_function_record object at 0x7f>"
    assert builtin_name(rf) == "_record_function_enter_new"
    assert display_frame("<built-in method view of Tensor object at 0x7f0bd60954a0>") == "built-in view"
    assert builtin_name("capture/demo.py(183): forward") is None
    unnamed = "<built-in method  of pybind11_builtins.pybind11_detail_function_record_v1 object at 0x7f0f13ff9cb0>"
    assert builtin_name(unnamed) == "(unnamed C++ binding)"
    assert display_frame("capture/demo.py(183): forward") == "capture/demo.py(183): forward"


def test_python_gaps_on_sample_never_show_builtin_reprs():
    a = analyze(load(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"))
    rows = np.flatnonzero(a.gaps.cause == CAUSES.index("python"))[:40]
    assert rows.size
    texts = [a.gap_detail(int(r)).explanation for r in rows]
    assert not any("pybind11" in t or " object at 0x" in t for t in texts), texts
    # the demo's per-layer record_function ranges: their enter/exit is the profiler's own time, said apart,
    # and never the frame a gap is blamed on
    rf = [t for t in texts if "record_function enter/exit took another" in t]
    assert rf and any(t.startswith("Host work in `capture/demo.py") for t in rf)
    assert not any("`built-in _record_function" in t for t in texts)
