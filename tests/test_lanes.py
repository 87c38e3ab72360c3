"""The explorer's pure layer: lane indexes, (window, width) -> cells, view arithmetic, formatting.
No app is started here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.synth import Synth
from tests.helpers import ROOT
from gapscope.tui.lanes import (
    C_ALLOC,
    C_LAUNCH,
    C_OP,
    C_PYTHON,
    C_SYNC,
    UnionIndex,
    build_lanes,
    cell_edges,
    col_to_time,
    copy_kind,
    cpu_cells,
    density_cells,
    flatten_nested,
    segment_text,
    time_to_col,
)
from gapscope.tui.safe import safe
from gapscope.tui.timefmt import fmt_dur, fmt_tick, nice_step
from gapscope.tui.view import View
from gapscope.trace.read import load

intervals = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 500)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(intervals, st.integers(-100, 10_000), st.integers(1, 5_000), st.integers(1, 60))
def test_union_covered_matches_brute_force(iv, t0, span, width):
    s = np.array([a for a, _ in iv], dtype=np.int64)
    e = np.array([a + d for a, d in iv], dtype=np.int64)
    u = UnionIndex(s, e)
    edges = cell_edges(t0, t0 + span, width)
    got = u.covered(edges)
    # brute force on a 1 ns grid
    lo, hi = int(edges[0]), int(edges[-1])
    cov = np.zeros(hi - lo, dtype=bool)
    for a, b in zip(s.tolist(), e.tolist()):
        cov[max(a - lo, 0):max(min(b - lo, hi - lo), 0)] = True
    want = np.array([cov[int(edges[k]) - lo:int(edges[k + 1]) - lo].sum() for k in range(width)])
    assert got.tolist() == want.tolist()


def test_cell_edges_are_exact_integers():
    e = cell_edges(1_000_000_000_000_007, 1_000_000_000_000_007 + 10_000_003, 7)
    assert e.dtype == np.int64
    assert int(e[0]) == 1_000_000_000_000_007 and int(e[-1]) == 1_000_000_000_000_007 + 10_000_003
    assert (np.diff(e) > 0).all()
    # the middle of a cell maps back to that cell
    for c in range(7):
        t = col_to_time(c, int(e[0]), int(e[-1]), 7)
        assert time_to_col(t, int(e[0]), int(e[-1]), 7) == c


def _model(tmp_path, synth: Synth, name="t.json"):
    return load(str(synth.write(tmp_path / name)), no_cache=True)


def test_one_nanosecond_kernel_still_shows_at_full_zoom_out(tmp_path):
    s = Synth()
    s.launch(ts=0, dur=2, kernel="big", k_ts=10, k_dur=1000)
    s.launch(ts=5000, dur=2, kernel="tiny", k_ts=50_000.0, k_dur=0.001)  # 1 ns
    s.launch(ts=99_000, dur=2, kernel="end", k_ts=100_000, k_dur=10)
    m = _model(tmp_path, s)
    lanes = build_lanes(m)
    stream = [ln for ln in lanes if ln.kind == "stream"][0]
    edges = cell_edges(0, 100_010_000, 80)
    lvl = density_cells(stream, edges)
    col = time_to_col(50_000_000, 0, 100_010_000, 80)
    assert lvl[col] >= 1  # a 1 ns kernel in a 1.25 ms cell is not dropped
    assert lvl[col + 2] == 0
    assert lvl[0] >= 1


def test_cpu_row_dominant_activity(tmp_path):
    s = Synth()
    with s.frame("model.py(10): forward", 0, 1000):
        s.cpu_op("aten::mm", 100, 300)  # op with nothing below
        s.runtime("cudaLaunchKernel", 500, 100)
        s.runtime("cudaStreamSynchronize", 700, 100)
        s.runtime("cudaMalloc", 850, 100)
    m = _model(tmp_path, s)
    cpu = [ln for ln in build_lanes(m) if ln.kind == "cpu"][0]
    edges = cell_edges(0, 1_000_000, 20)  # 50 µs cells
    cats = cpu_cells(cpu, edges).tolist()
    assert cats[0] == C_PYTHON  # frame only
    assert cats[3] == C_OP  # 150-200 µs inside aten::mm
    assert cats[10] == C_LAUNCH
    assert cats[14] == C_SYNC
    assert cats[18] == C_ALLOC
    # after the frame: idle
    edges2 = cell_edges(0, 2_000_000, 20)
    assert cpu_cells(cpu, edges2).tolist()[-1] == 0
    # expanded rows: one python depth and one op depth
    assert [d.label.strip() for d in cpu.depth_rows] == ["py 0", "op 0"]


def test_flatten_nested_gives_innermost_range():
    s = np.array([0, 10, 20, 50], dtype=np.int64)
    e = np.array([100, 40, 30, 60], dtype=np.int64)
    seg = flatten_nested(s, e, np.arange(4))
    got = list(zip(seg.starts.tolist(), seg.ends.tolist(), seg.ref.tolist()))
    assert got == [(0, 10, 0), (10, 20, 1), (20, 30, 2), (30, 40, 1), (40, 50, 0), (50, 60, 3), (60, 100, 0)]


def test_segment_text_labels_runs_and_marks_narrow_pieces():
    refs = np.array([-1, 0, 0, 0, 0, 0, 0, 1, -1, 2, 2], dtype=np.int64)
    text, _ = segment_text(refs, lambda r: ["alpha", "b", "long name"][r], bar="-", open_="|")
    assert text == " |alpha| |l"


def test_copy_kinds():
    from gapscope.trace.model import Kind

    assert copy_kind("Memcpy HtoD (Pageable -> Device)", Kind.MEMCPY) == "HtoD"
    assert copy_kind("Memcpy DtoH (Device -> Pinned)", Kind.MEMCPY) == "DtoH"
    assert copy_kind("Memcpy PtoP (Device -> Device)", Kind.MEMCPY) == "DtoD"
    assert copy_kind("Memset (Device)", Kind.MEMSET) == "memset"


def test_lanes_of_a_real_trace(shared_traces):
    m = load(str(shared_traces / "h200" / "stack_memory_compile_graph.pt.trace.json.gz"), no_cache=True)
    lanes = build_lanes(m)
    kinds = [ln.kind for ln in lanes]
    assert kinds[0] == "ranges"
    assert kinds.count("stream") == 2
    assert [ln.label for ln in lanes if ln.kind == "copy"] == ["DtoH"]
    # busiest CPU thread first: the python main thread, not the autograd thread
    cpu = [ln for ln in lanes if ln.kind == "cpu"]
    assert "python3" in cpu[0].label
    # every kernel of the trace is in exactly one stream lane
    from gapscope.trace.model import Kind

    n_k = int(np.count_nonzero(m.kind == Kind.KERNEL))
    assert sum(len(ln.iv) for ln in lanes if ln.kind == "stream") == n_k


def test_view_zoom_keeps_cursor_time_and_column():
    v = View(0, 1_000_000)
    v.cursor = 300_000
    col = time_to_col(v.cursor, v.t0, v.t1, 100)
    for f in (2.0, 2.0, 0.5, 4.0, 0.25):
        v.zoom(f, 100)
        assert v.cursor == 300_000
        assert abs(time_to_col(v.cursor, v.t0, v.t1, 100) - col) <= 1
    span = v.span
    v.pan(0.25)
    assert v.cursor == 300_000 and v.span == span


def test_view_zoom_limits_and_focus():
    v = View(0, 1_000)
    for _ in range(40):
        v.zoom(2.0, 100)
    assert v.span >= 100  # never below 1 ns per cell
    for _ in range(40):
        v.zoom(0.5, 100)
    assert v.span <= 4_000
    v.focus(400, 500, 100)
    assert v.t0 < 400 and v.t1 > 500 and v.cursor == 400
    assert 400 - v.t0 >= 90 and v.t1 - 500 >= 90  # context on both sides


def test_time_formatting():
    assert fmt_dur(850) == "850 ns"
    assert fmt_dur(12_340) == "12.3 µs"
    assert fmt_dur(4_560_000) == "4.56 ms"
    assert fmt_dur(1_230_000_000) == "1.23 s"
    assert fmt_dur(12_340, ascii=True) == "12.3 us"
    assert nice_step(1_000_000, 100, 10) == 100_000
    assert nice_step(10_000, 100, 12) == 2_000
    assert fmt_tick(1_500_000, 500_000) == "1.5ms"
    assert fmt_tick(2_000, 1_000) == "2µs"
    assert fmt_tick(5_100_000, 50_000, ref=5_200_000) == "5.10ms"
    assert fmt_tick(100, 50, ref=150) == "100ns"
    assert fmt_tick(3_000_000_000, 1_000_000_000) == "3s"


@pytest.mark.parametrize("raw,shown", [("[bold]", "[bold]"), ("\x1b[31m", "\\x1b[31m"), ("a\nb", "a\\nb"),
                                       ("x\x07", "x\\x07"), ("[0]", "[0]")])
def test_safe_escapes_control_characters(raw, shown):
    assert safe(raw) == shown


def test_short_kernel_names():
    from gapscope.tui.safe import short_kernel

    assert short_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                        "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)") \
        == "at::native::vectorized_elementwise_kernel<>"
    assert short_kernel("triton_poi_fused_mul_0") == "triton_poi_fused_mul_0"
    assert short_kernel("[bold]") == "[bold]"


def test_explorer_modules_never_import_torch():
    import subprocess
    import sys

    from tests.helpers import ROOT

    code = "import sys, gapscope.tui.app, gapscope.tui.lanes; print('torch' in sys.modules, 'textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_user_ranges_count_as_python_but_profiler_steps_do_not(tmp_path):
    s = Synth()
    s.annotation("ProfilerStep#3", 0, 1000)
    s.annotation("decode_layer", 0, 400)  # user code inside a record_function, nothing traced below
    s.cpu_op("aten::add", 600, 100)
    m = _model(tmp_path, s)
    cpu = [ln for ln in build_lanes(m) if ln.kind == "cpu"][0]
    cats = cpu_cells(cpu, cell_edges(0, 1_000_000, 10)).tolist()
    assert cats[:4] == [C_PYTHON] * 4
    assert cats[4] == 0 and cats[5] == 0  # only the ProfilerStep range: idle
    assert cats[6] == C_OP


@pytest.mark.parametrize("env,utf8", [
    ({"LANG": "en_US.UTF-8"}, True),
    ({"LC_ALL": "C", "LANG": "en_US.UTF-8"}, False),  # LC_ALL wins
    ({"LC_CTYPE": "C.utf8"}, True),
    ({"LANG": "POSIX"}, False),
    ({}, False),
])
def test_locale_decides_unicode_or_ascii(env, utf8):
    from gapscope.tui.glyphs import ASCII, UNICODE, locale_is_utf8, pick

    assert locale_is_utf8(env) is utf8
    assert pick(False, env) is (UNICODE if utf8 else ASCII)
    assert pick(True, env) is ASCII


def test_distinct_ids_are_np_unique():
    from gapscope.tui.lanes import distinct_ids

    rng = np.random.default_rng(7)
    for n, hi in ((0, 1), (1, 1), (50, 5), (10_000, 3_000)):
        a = rng.integers(0, hi, n).astype(np.int32)
        assert np.array_equal(distinct_ids(a), np.unique(a))


def test_style_runs_are_the_cells_merged_by_style_object():
    """``style_runs``: one Segment per run of cells whose styles are the same object (a table may hold one
    Style twice), each a plain rich Segment, text and style as drawn cell by cell."""
    import random

    from rich.segment import Segment
    from rich.style import Style

    from gapscope.tui.timeline import style_runs

    a, b = Style(bold=True), Style(color="red")
    table = [a, b, a, Style()]
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(0, 40)
        chars = "".join(rng.choice("ab▁ ") for _ in range(n))
        codes = np.array([rng.randint(0, 3) for _ in range(n)], dtype=np.uint8)
        segs = style_runs(chars, codes, table)
        assert all(type(s) is Segment and s.control is None for s in segs)
        assert "".join(s.text for s in segs) == chars
        cells = [(ch, table[int(k)]) for ch, k in zip(chars, codes)]
        assert [(ch, s.style) for s in segs for ch in s.text] == [(ch, st) for ch, st in cells]
        assert all(segs[i].style is not segs[i + 1].style for i in range(len(segs) - 1))


def test_the_lanes_mark_the_syncs_the_analysis_counts():
    """One definition of a synchronising call (analysis/names.py): the lanes marked cudaEventQuery (a query that
    never waits) and aten::to_dense as syncs while the causes did not."""
    from gapscope.analysis.names import is_allocator_name, is_sync_name

    for name, want in (("cudaStreamSynchronize", True), ("hipDeviceSynchronize", True), ("aten::item", True),
                       ("aten::_local_scalar_dense", True), ("cudaMemcpy", True), ("cudaMemcpyAsync", False),
                       ("cudaEventQuery", False), ("aten::to_dense", False), ("cudaLaunchKernel", False)):
        assert is_sync_name(name) is want, name
    assert is_allocator_name("cudaFree") and is_allocator_name("torch.cuda.empty_cache")
    assert not is_allocator_name("cudaLaunchKernel")
    src = (ROOT / "tui" / "lanes.py").read_text()
    assert "Synchron" not in src and "EventQuery" not in src and "aten::item" not in src
