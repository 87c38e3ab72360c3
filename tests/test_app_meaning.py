"""Text that keeps its meaning at 80 columns (issue 38): kernels named by their op and family where the name does
not fit (the kernels view, the range stats, the lanes), an ellipsis wherever text is cut, the profiler's distortion
kept with the idle figures it qualifies, an export notice that fits, a search that names its match and shows it."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from rich.text import Text
from textual.widgets import DataTable

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import diff_ready, opened, run, three_gaps
from gapscope.trace.model import Kind
from gapscope.tui.cut import cut, cut_text, cut_words
from gapscope.tui.diffapp import DiffApp
from gapscope.tui.export import export_message, grouped_names, notice_width
from gapscope.tui.kernelname import kernel_family, kernel_label, kernel_labels, op_short
from gapscope.tui.lanes import segment_text
from gapscope.tui.tables import kernels_of
from gapscope.tui.textdump import screen_text

EAGER = SAMPLE_TRACES / "hf-attn.prefill_eager.json.gz"
SDPA = SAMPLE_TRACES / "hf-attn.prefill_sdpa.json.gz"
#: a pair whose profiler distortions differ (3.02x, 1.05x): their profiled idle does not compare
WCOPY = (SAMPLE_TRACES / "mlp-wcopy.fwd_stored.json.gz", SAMPLE_TRACES / "mlp-wcopy.fwd_transpose.json.gz")


def _need(*paths):
    for p in paths:
        if not p.exists():
            pytest.skip(f"{p.name} is not present")


# ----------------------------------------------------------------------------------- kernel names by meaning
# (the kernel's name as the profiler records it, its family as a person reads it): written by hand
FAMILIES = [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
     "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)", "vectorized_elementwise"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(int)",
     "unrolled_elementwise"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add"
     "<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1}>(int, "
     "{lambda(int)#1})", "elementwise"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, "
     "int, int, int, bool const*, int, bool)", "softmax_warp_forward"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
     "float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float>)", "reduce"),
    ("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT", "nvjet_sm90 128x128"),
    ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "nvjet_sm90 64x8"),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x256x32_warpgroupsize2x1x1_g1_"
     "execute_segment_k_off_kernel__5x_cudnn", "xmma_fprop 128x256"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_"
     "kernel__5x_cublas", "xmma_gemm 32x32"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::"
     "Params)", "cutlass sgemm 128x32"),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_32x5_nhwc_align8>("
     "cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_32x5_nhwc_align8::Params)",
     "cutlass s16816fprop 128x128"),
    ("ampere_sgemm_128x64_tn", "ampere_sgemm 128x64"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0",
     "cudnn sdpa flash_fprop 64x128"),
    ("triton_poi_fused_mul_0", "triton_poi_fused_mul_0"),
    ("[bold]", "[bold]"),
]


@pytest.mark.parametrize("name,family", FAMILIES, ids=[f[1] or "empty" for f in FAMILIES])
def test_a_kernel_family_is_what_a_person_calls_it(name, family):
    assert kernel_family(name) == family


def test_a_label_is_the_op_then_the_family_and_same_labels_are_told_apart():
    nv = "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT"
    assert kernel_label(nv, "aten::mm") == "mm · nvjet_sm90 128x128"
    assert kernel_label(nv, None) == "nvjet_sm90 128x128"
    # a long op by the word people use for it
    assert kernel_label("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x32x8_stage3_"
                        "warpsize2x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
                        "aten::cudnn_convolution") == "conv · xmma_fprop 128x32"
    assert [op_short(o) for o in ("aten::_scaled_dot_product_cudnn_attention", "aten::cudnn_batch_norm",
                                  "aten::max_pool2d_with_indices", "aten::_softmax", "aten::copy_", "my::op")] == \
        ["sdpa", "batch_norm", "max_pool2d", "softmax", "copy_", "my::op"]
    vec = "void at::native::vectorized_elementwise_kernel<4, F>(int)"
    vec8 = "void at::native::vectorized_elementwise_kernel<8, G>(int)"
    rows = [(vec, "aten::add", "c10::BFloat16", [[1, 2]]), (vec8, "aten::add", "float", [[1, 2]]),
            (vec, "aten::mul", "float", [[1, 16], []]), (vec8, "aten::mul", "float", [[4, 5], [4, 5]]),
            (vec, "aten::pow", "float", [[3]]), (vec8, "aten::pow", "float", [[3]])]
    assert kernel_labels(rows) == ["add bf16 · vectorized_elementwise", "add f32 · vectorized_elementwise",
                                   "mul 1x16 · vectorized_elementwise", "mul 4x5 · vectorized_elementwise",
                                   "pow · vectorized_elementwise", "pow · vectorized_elementwise #2"]


def _cells(table: DataTable, col: int = 0) -> list[str]:
    return [table.get_row_at(i)[col].plain for i in range(table.row_count)]


def test_the_kernels_view_at_80_columns_names_each_kernel_by_its_op_and_family():
    """hf-attn prefill (eager attention) at 80x24: the rows read ``copy_ · unrolled_…``, ``mm · nvjet_sm90 128x128``
    (eight read ``at::native::vectorized_…`` / ``at::native::unrolled_el…`` alike), no two alike, each starting with
    the op of its kernel's calls in the trace; the info box keeps the kernel's full name."""
    _need(EAGER)

    async def go():
        async with opened(EAGER, size=(80, 24)) as (app, pilot):
            await pilot.press("2")
            await pilot.pause()
            table = app.query_one("#kernels", DataTable)
            info = str(app.query_one("#kernelinfo").render())
            return _cells(table), [k for _, _, k in kernels_of(app.scene)], app.scene.model, info, screen_text(app)

    cells, ks, m, info, txt = run(go())
    assert not any(c.startswith("at::native::") for c in cells), cells
    assert len(set(cells)) == len(cells), cells
    # the op from the raw events: the op event enclosing each call of the kernel, the most common one
    kernel = np.flatnonzero(m.kind == Kind.KERNEL)
    for cell, k in list(zip(cells, ks))[:10]:
        calls = [e for e in kernel.tolist() if m.name(e) == k.name and int(m.op[e]) >= 0]
        ops = [m.name(int(m.op[e])) for e in calls]
        top = max(set(ops), key=ops.count).removeprefix("aten::").lstrip("_")
        assert cell.split(" ")[0] == top, (cell, top)
    assert "mm · nvjet_sm90 128x128" in cells
    assert any(c.startswith("copy_") and "unrolled_el" in c for c in cells)
    assert ks[0].name in info  # the full name where there is room for it
    assert "at::native::vectorized_…" not in txt and "at::native::unrolled_el…" not in txt


def test_range_stats_rows_never_read_the_same_and_add_up_to_the_raw_kernels():
    """Range stats over hf-attn's whole step: one row per op and kernel family (four rows read
    ``at::native::vectorized_elementwise_kernel<>`` alike), their times the kernels' own in the range."""
    _need(EAGER)
    from gapscope.tui import glyphs as G
    from gapscope.tui.rangestats import range_stats, range_text

    async def go():
        async with opened(EAGER, size=(120, 40)) as (app, pilot):
            sc = app.scene
            a, b = sc.fit_extent()
            return range_stats(sc, a, b), range_text(sc, a, b, G.UNICODE).plain, sc.model, sc.parts[0].offset, (a, b)

    st, txt, m, off, (a, b) = run(go())
    rows = st["parts"][0]["kernels"]
    labels = [r[0] for r in rows]
    assert len(set(labels)) == len(labels), labels
    assert not any(lab.startswith("at::native::") for lab in labels)
    # from the raw events: each kernel's time inside [a, b), by the op that launched it and its family
    want: dict = {}
    for e in np.flatnonzero(m.kind == Kind.KERNEL).tolist():
        s = int(m.ts_ns[e]) + off
        ns = min(s + int(m.dur_ns[e]), b) - max(s, a)
        if ns > 0:
            op = int(m.op[e])
            key = kernel_label(m.name(e), m.name(op) if op >= 0 else None)
            n, t = want.get(key, (0, 0))
            want[key] = (n + 1, t + ns)
    assert {lab: (n, ns) for lab, n, ns in rows} == want
    listed = re.findall(r"^\s+\S+ \S+\s+\d+x  (.+)$", txt, flags=re.M)
    assert listed == labels[:len(listed)] and len(listed) >= 10


# ----------------------------------------------------------------------------------------- the cut mark
def test_cut_marks_the_cut_and_prose_is_cut_at_a_word():
    assert cut("abcdefghij", 10) == "abcdefghij"
    assert cut("abcdefghijk", 10) == "abcdefghi…"
    assert cut("abcdefghijk", 10, ascii=True) == "abcdefg..."
    s = "gone: 3 gaps each held by one aten::cudnn_convolution call"
    assert cut_words(s, 44) == "gone: 3 gaps each held by one…"
    assert cut_words(s, 44, ascii=True) == "gone: 3 gaps each held by one..."
    # no space near the limit: mid-word
    assert cut_words("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bb", 20) == "aaaaaaaaaaaaaaaaaaa…"
    t = cut_text(Text("kernel name here", style="bold"), 10, ascii=True)
    assert t.plain == "kernel..." and t.cell_len <= 10
    t = cut_text(Text("kernel name here", overflow="ellipsis"), 10)  # one mark, not the Text's own as well
    assert t.plain == "kernel na…"


def test_a_named_piece_of_a_lane_cut_short_ends_in_the_mark():
    refs = np.array([-1, 0, 0, 0, 0, 0, 0, 1, -1, 2, 2], dtype=np.int64)
    label = ["alpha beta", "b", "long name"]
    assert segment_text(refs, lambda r: label[r], bar="-", open_="|", more="…")[0] == " |alph…| |l"
    assert segment_text(refs, lambda r: label[r], bar="-", open_="|", more="...")[0] == " |al...| |l"
    # a run too short for two letters and the mark: cropped
    assert segment_text(refs[:4], lambda r: label[r], bar="-", open_="|", more="…")[0] == " |al"


def test_the_lanes_cut_their_labels_with_the_mark(tmp_path):
    """At 80 columns the lanes' labels are 16 wide: "thread 496 (python3)" was cut to "thread 496 (py"."""
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p, size=(80, 24)) as (app, pilot):
            for ln in app.scene.lanes:
                ln.label = "a lane label much longer than sixteen"
            app.lanes.sync_rows()
            app.lanes.refresh()
            await pilot.pause()
            return screen_text(app)

    txt = run(go())
    assert "a lane label m…" in txt


@pytest.mark.parametrize("ascii", [False, True], ids=["unicode", "ascii"])
def test_the_diff_list_cuts_its_rows_at_a_word_with_the_mark(ascii):
    """eager -> sdpa at 80x24: "gone in B: 1 gap after a sync from transformers/masking_utils.py(729): ..." was
    clipped by the table, mid-word and with no mark."""
    _need(EAGER, SDPA)

    async def go():
        app = DiffApp(str(EAGER), str(SDPA), ascii=ascii, load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24)) as pilot:
            await diff_ready(pilot)
            tb = app.screen.query_one("#deltas", DataTable)
            return [tb.get_row_at(i)[3].plain for i in range(tb.row_count)], tb.columns, app.screen.words.what_width

    whats, cols, width = run(go())
    m = "..." if ascii else "…"
    assert 20 <= width <= 80 - 35
    assert all(len(w) <= width for w in whats), [w for w in whats if len(w) > width]
    gone = [w for w in whats if w.startswith("gone in B: 1 gap after a sync")]
    assert gone and all(w.endswith(m) for w in gone), gone
    assert all(w.endswith(m) or len(w) < width for w in whats)
    assert not any(w.endswith(f"{m}") and w[:-len(m)].endswith(" ") for w in whats)


# ------------------------------------------------------------------------ warnings that qualify a number
def test_the_distortion_warning_has_one_wording_and_comes_first(tmp_path):
    """"profiler distortion" at 80 columns and at 160 (it was "capture distortion" there), ahead of the ranks' and
    the loader's warnings."""
    _need(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz")
    from gapscope.tui.panels import header_warnings

    async def go():
        async with opened(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz", size=(160, 45)) as (app, pilot):
            sc = app.scene
            sc.clock_warnings = ["rank clocks disagree by 3 ms"]
            return header_warnings(sc), header_warnings(sc, narrow=True)

    wide, narrow = run(go())
    assert wide[0].startswith("profiler distortion 2.25x (profiled / un-profiled time)")
    assert narrow[0].startswith("profiler distortion 2.25x")
    assert not any("capture distortion" in w for w in wide + narrow)


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
def test_the_header_keeps_the_distortion_while_it_shows_the_idle_figure(size):
    """A header with more warnings than lines (clock warnings, a failed cross-rank analysis, loader warnings): the
    profiler's distortion stays beside the GPU idle figure, the others counted on the last line."""
    trace = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"
    _need(trace)
    from gapscope.tui.panels import HEADER_LINES

    async def go():
        async with opened(trace, size=size) as (app, pilot):
            sc = app.scene
            sc.clock_warnings = ["rank 1's clock is 3 ms ahead", "rank 2's clock is 1 ms ahead"]
            sc.rank_error = "ranks analysed one by one: cross-rank analysis failed"
            sc.model.warnings = list(sc.model.warnings or []) + ["cut off at 1.2 GB", "12 events repaired"]
            app.main.painter.refresh_header()
            await pilot.pause()
            return screen_text(app).splitlines()

    lines = run(go())
    head = lines[:HEADER_LINES]
    assert any("GPU idle" in ln for ln in head)
    assert any("profiler distortion" in ln for ln in head), head
    # the warnings that did not fit are counted, not dropped unsaid
    shown = "\n".join(head)
    assert "more warnings" in shown or all(w in shown for w in ("rank 1's clock", "ranks analysed", "cut off")), head


def test_the_diff_view_keeps_the_distortion_with_the_idle_figures():
    """Two traces the profiler slowed 3.02x and 1.05x: their profiled idle does not compare. The header writes the
    warning before the idle figure (it was at the end of the verdict's line, cut at 80 columns) and the list's GPU
    idle and GPU span rows carry it."""
    _need(*WCOPY)

    async def go():
        app = DiffApp(*(str(p) for p in WCOPY), load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24)) as pilot:
            await diff_ready(pilot)
            tb = app.screen.query_one("#deltas", DataTable)
            return str(app.screen.words.head().plain), [tb.get_row_at(i)[3].plain for i in range(tb.row_count)], \
                screen_text(app)

    head, whats, txt = run(go())
    line3 = head.splitlines()[2]
    assert "profiler distortion 3.02x vs 1.05x" in line3
    assert line3.index("profiler distortion") < line3.index("GPU idle per step")
    idle = next(w for w in whats if w.startswith("GPU idle"))
    span = next(w for w in whats if w.startswith("GPU span"))
    assert "profiler distortion" in idle and "profiler distortion" in span
    assert "GPU idle ⚠ profiler distortion" in txt  # on screen at 80 columns, beside the idle row's numbers
    assert "capture distortion" not in txt


# ----------------------------------------------------------------------------------------- the export notice
def test_export_names_the_files_once_with_their_extensions():
    paths = ["/t/hf-attn.prefill_eager.gapscope.md", "/t/hf-attn.prefill_eager.gapscope.json",
             "/t/hf-attn.prefill_eager.gapscope.svg"]
    assert grouped_names([p.rsplit("/", 1)[1] for p in paths]) == ["hf-attn.prefill_eager.gapscope.{md,json,svg}"]
    assert export_message(paths) == ("wrote hf-attn.prefill_eager.gapscope.{md,json,svg} in /t",
                                     ["wrote in /t:", "hf-attn.prefill_eager.gapscope.{md,json,svg}"])
    assert grouped_names(["a.md", "b.md", "a.json"]) == ["a.{md,json}", "b.md"]


def test_the_export_notice_fits_80_columns_and_breaks_between_words(tmp_path):
    """At 80x24 the notice is 29 characters wide: "hf-attn.prefill_eager.gapscope.md" (33) was folded mid-word
    ("...gapscop" / "e.md"); it now reads "hf-attn.prefill_eager." / "gapscope.{md,json,svg}"."""
    p = three_gaps(tmp_path)
    trace = tmp_path / "hf-attn.prefill_eager.json"
    shutil.move(p, trace)

    async def go():
        async with opened(trace, size=(80, 24)) as (app, pilot):
            await pilot.press("e")
            await pilot.pause()
            return [n.message for n in app._notifications][-1], app.main._status_msg, screen_text(app)

    msg, status, txt = run(go())
    lines = msg.split("\n")
    assert all(len(ln) <= notice_width(80) for ln in lines), lines
    assert lines[-2:] == ["hf-attn.prefill_eager.", "gapscope.{md,json,svg}"]
    assert status == f"wrote hf-attn.prefill_eager.gapscope.{{md,json,svg}} in {tmp_path}"
    assert "gapscope.{md,json,svg}" in txt


# ----------------------------------------------------------------------------------------- search
def test_search_names_its_match_and_shows_its_detail(tmp_path):
    """/ gemm: the status line says which match of how many and what it is; the panel beside the gap list shows
    the match (it kept the previous gap's stack), until a gap is picked again."""
    p = three_gaps(tmp_path, names=("gemm_a", "k1", "gemm_b", "k3"))

    async def go():
        async with opened(p, size=(120, 40)) as (app, pilot):
            from gapscope.tui.panels import StackPanel

            panel = app.query_one("#stack", StackPanel)
            await pilot.press("slash", *"gemm", "enter")
            await pilot.pause()
            first = (app.query_one("#status").render(), panel.heading, panel.plain)
            await pilot.press("n")
            await pilot.pause()
            second = (app.query_one("#status").render(), panel.heading, panel.plain)
            await pilot.press("escape")
            await pilot.pause()
            back = (panel.heading, panel.plain)
            return first, second, back

    first, second, back = run(go())
    assert "find 'gemm' 1/2: kernel gemm_a" in str(first[0])
    assert first[1] == "match" and first[2].startswith("match 1/2 of 'gemm'") and "kernel: gemm_a" in first[2]
    assert "find 'gemm' 2/2: kernel gemm_b" in str(second[0])
    assert second[2].startswith("match 2/2 of 'gemm'") and "kernel: gemm_b" in second[2]
    assert back[0] == "stack" and back[1].startswith("gap ")


def test_a_findings_long_detail_line_is_cut_at_a_word_with_the_mark(tmp_path, monkeypatch):
    """The findings view's info box cut an evidence line at 300 characters, mid-word and with no mark (at 160 columns
    a line wraps once and ends in half a word)."""
    import gapscope.tui.tables as tables

    long = " ".join(f"word{i:03d}" for i in range(60))  # 479 characters, a space every 8
    monkeypatch.setattr(tables, "evidence_lines", lambda ev, ascii=False: [long])
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p, size=(160, 45)) as (app, pilot):
            await pilot.press("3")
            await pilot.pause()
            return str(app.query_one("#findinginfo").render())

    info = run(go())
    line = next(ln for ln in info.splitlines() if "word000" in ln)
    assert line.endswith("…") and len(line) <= 300
    assert re.fullmatch(r"(word\d{3} )*word\d{3}…", line.strip()), line


@pytest.mark.parametrize("ascii", [False, True], ids=["unicode", "ascii"])
def test_the_gap_lists_next_op_cut_short_ends_in_the_mark(ascii):
    """hf-pageable at 80x24: the gap list's "next op" column is 12 wide; "_cudnn_attention_forward" was cropped to
    "_cudnn_atten" on an ASCII terminal, with no mark."""
    trace = SAMPLE_TRACES / "hf-pageable.step_pageable.json.gz"
    _need(trace)

    async def go():
        async with opened(trace, size=(80, 24), ascii=ascii) as (app, pilot):
            return screen_text(app).splitlines()

    lines = run(go())
    top = next(i for i, ln in enumerate(lines) if "next op" in ln)
    m = "..." if ascii else "…"
    cells = [re.split(r"\s{2,}", ln.split("|" if ascii else "▏")[0].strip())[-1] for ln in lines[top + 1:top + 8]]
    assert any(c.endswith(m) for c in cells), cells
    assert not any("_cudnn_atten" in c and not c.endswith(m) for c in cells), cells
