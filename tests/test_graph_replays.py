"""CUDA graph replays mapped to the eager reference run the capture records (analysis/graphs.py): synthetic traces
built here, where the mapping holds (counts and names agree), where it must be refused and said (a name or the
count differs), a graph's copy node, several graphs a step, and what the replayed kernels then get: op, shapes,
floors, op patterns, the before/after comparison, the report's line and JSON; the cost models the recorded graph
traces need."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers import SCHEMA_PATH, model_of
from tests.synth import Synth
from gapscope.analysis import analyze
from gapscope.analysis.floors import op_cost_detail

BF = "c10::BFloat16"
BW = 4800.0  # the H200's HBM bytes per ns (its data sheet's 4.8 TB/s), written out


def _gemv_floor(m, k, n):
    """x [m, k] @ W [k, n] -> y [m, n] in bf16, every byte once through HBM, ns."""
    return (m * k + k * n + m * n) * 2 / BW


#: the step: (op, input dims, input types, kernel names it launches); three ops with their own kernels
STEP = [
    ("aten::mm", [[4, 2048], [2048, 6144]], [BF, BF], ["gemv_a"]),
    ("aten::rms_norm", [[4, 1, 2048], [2048]], [BF, BF], ["rms"]),
    ("aten::mm", [[4, 5632], [5632, 2048]], [BF, BF], ["gemv_splitk", "splitk_reduce"]),
]


def _reference(s: Synth, t0: float, step=STEP) -> float:
    """The eager reference run: each op launching its kernels one by one inside ``gapscope.graph_reference``."""
    t = t0
    start = t
    for op, dims, types, kernels in step:
        s.cpu_op(op, t, 4 + 3 * len(kernels), **{"Input Dims": dims, "Input type": types})
        for i, name in enumerate(kernels):
            s.launch(ts=t + 1 + 3 * i, dur=2, kernel=name, k_ts=t + 30 + 3 * i, k_dur=2)
        t += 10 + 3 * len(kernels)
    s.annotation("gapscope.graph_reference", start - 1, t - start + 2)
    return t + 50


def _replays(s: Synth, t0: float, names_per_graph: list[list[str]], steps: int = 2, dur=(20, 5)) -> float:
    """``steps`` measured steps, each replaying one graph per entry of ``names_per_graph``: a cudaGraphLaunch whose
    kernels (durations alternating ``dur`` µs) all share its correlation."""
    t = t0
    for k in range(steps):
        s0 = t
        for names in names_per_graph:
            rt = s.runtime("cudaGraphLaunch", t, 5)
            c = rt["args"]["correlation"]
            kt = t + 10
            for i, n in enumerate(names):
                d = dur[i % len(dur)]
                s.kernel(n, kt, d, corr=c)
                kt += d + 1
            t = kt + 5
        s.annotation(f"gapscope.step#{k}", s0, t - s0)
        t += 5
    return t


def _names(step=STEP):
    return [n for *_, ks in step for n in ks]


def _trace(replay_names=None, reference=True, steps=2) -> Synth:
    s = Synth()
    t = _replays(s, 0, [replay_names or _names()], steps)
    if reference:
        _reference(s, t + 100)
    return s


# ------------------------------------------------------------------------------------------ the map
def test_replayed_kernels_get_the_reference_ops_shapes_and_floors():
    a = analyze(model_of(_trace()))
    gm = a.graph_map
    assert [r.status for r in gm.replays] == ["mapped", "mapped"] and gm.reference_runs == 1
    ks = {k.name: k for k in a.kernels}
    g = ks["gemv_a"]
    assert (g.op, g.shapes, g.count, g.floored_count) == ("aten::mm", [[4, 2048], [2048, 6144]], 2, 2)
    # each replay is a call of its own: two floors of one GEMV each (written out: weights, x and y once at 4.8 TB/s),
    # but the second replay's x [4, 2048] is the [4, 2048] the first replay's last GEMV just wrote (in the L2)
    assert g.floor_total_ns == pytest.approx(2 * _gemv_floor(4, 2048, 6144) - 4 * 2048 * 2 / BW)
    assert g.bound == "memory" and g.gbps is not None
    assert ks["rms"].op == "aten::rms_norm" and ks["rms"].floor_ns is not None
    # the split-K pair is one call of aten::mm in every replay: its floor is the op's, once per replay
    assert ks["gemv_splitk"].floor_ns is None and ks["gemv_splitk"].op_floor_calls == 2
    (o,) = a.op_floors
    assert (o.op, o.kernels, o.count) == ("aten::mm", ["gemv_splitk", "splitk_reduce"], 2)
    # the reference's x [4, 5632] was written by nothing before it: the whole GEMV crosses HBM
    assert o.floor_total_ns == pytest.approx(2 * _gemv_floor(4, 5632, 2048))
    assert o.floor_total_ns <= o.total_ns
    cov = a.call_floors.graphs
    assert (cov.replays, cov.kernels, cov.mapped, cov.mismatched) == (2, 8, 8, 0)
    assert cov.mapped_pct == 100.0 and cov.floored_pct == 100.0
    # the reference run is outside the window: its kernels are not in the table's counts
    assert sum(k.count for k in a.kernels) == 8


def test_stack_and_op_of_a_replayed_kernel_are_the_reference_kernel_launch():
    a = analyze(model_of(_trace()))
    m, gm = a.model, a.graph_map
    k = gm.kernels[m.kind[gm.kernels] == 0]
    ref = gm.reference_of(k)
    assert (ref >= 0).all()
    assert [m.name(int(r)) for r in ref] == [m.name(int(x)) for x in k]  # same kernel names, position by position
    ops = gm.op_of(m, k)
    assert {m.name(int(o)) for o in ops} == {"aten::mm", "aten::rms_norm"}
    la = gm.launch_of(m, k)
    assert {m.name(int(x)) for x in la} == {"cudaLaunchKernel"}  # the reference's launch, not the graph launch
    assert (m.op[k] == -1).all()  # the model itself still has no op for them


@pytest.mark.parametrize("replay, why", [
    (["gemv_a", "rms", "gemv_splitk", "other_reduce"], "then the replay has `other_reduce` where the reference has "
                                                       "`splitk_reduce`"),
    (["gemv_a", "rms", "gemv_splitk", "splitk_reduce", "extra"], "the replay has 5 kernels, the reference only 4"),
    (["rms", "gemv_a", "gemv_splitk", "splitk_reduce"], "from the reference's kernel 1 the first 1 agree, then the "
                                                        "replay has `gemv_a` where the reference has `gemv_splitk`"),
], ids=["name", "count", "order"])
def test_a_mismatch_is_reported_never_guessed(replay, why):
    a = analyze(model_of(_trace(replay)))
    gm = a.graph_map
    assert [r.status for r in gm.replays] == ["mismatch", "mismatch"]
    assert all(why in r.detail for r in gm.replays), [r.detail for r in gm.replays]
    assert (gm.ref == -1).all()
    assert all(k.op is None and k.floor_ns is None and k.op_floor_calls == 0 for k in a.kernels)
    cov = a.call_floors.graphs
    assert cov.mapped == 0 and cov.mismatched == 2 and "2 replays not mapped" in cov.text() and why in cov.text()


def test_no_reference_run_says_so():
    a = analyze(model_of(_trace(reference=False)))
    assert {r.status for r in a.graph_map.replays} == {"no-reference"}
    assert "no eager reference run in the trace" in a.call_floors.graphs.text()
    assert all(k.op is None for k in a.kernels)


def test_a_graph_copy_node_runs_as_a_driver_kernel_where_the_reference_copied():
    """``memcpy32_post`` in the replay where the eager run had a Memcpy DtoD: one copy on both sides, mapped to the
    copy's op (aten::copy_), whose one piece of work it is."""
    s = Synth()
    t = _replays(s, 0, [["gemv_a", "memcpy32_post"]], steps=1)
    t0 = t + 100
    s.cpu_op("aten::mm", t0, 7, **{"Input Dims": [[4, 2048], [2048, 6144]], "Input type": [BF, BF]})
    s.launch(ts=t0 + 1, dur=2, kernel="gemv_a", k_ts=t0 + 30, k_dur=2)
    s.cpu_op("aten::copy_", t0 + 10, 7, **{"Input Dims": [[4, 1], [4, 1]], "Input type": ["long int", "long int"]})
    rt = s.runtime("cudaMemcpyAsync", t0 + 11, 2)
    s.memcpy("DtoD", t0 + 40, 1, nbytes=32, corr=rt["args"]["correlation"], src="Device", dst="Device")
    s.annotation("gapscope.graph_reference", t0 - 1, 30)
    a = analyze(model_of(s))
    assert [r.status for r in a.graph_map.replays] == ["mapped"]
    ks = {k.name: k for k in a.kernels}
    assert ks["memcpy32_post"].op == "aten::copy_" and ks["memcpy32_post"].floor_ns is not None


def test_several_graphs_a_step_map_in_order():
    """Two graphs a step with the same kernel names (two layers): each replay maps to its own layer's calls (the
    first run at or after the previous one's end), and the next step starts again from the reference's start."""
    layer1 = [("aten::mm", [[4, 1024], [1024, 1024]], [BF, BF], ["gemv"])]
    layer2 = [("aten::mm", [[4, 1024], [1024, 4096]], [BF, BF], ["gemv"])]
    s = Synth()
    t = _replays(s, 0, [["gemv"], ["gemv"]], steps=2)
    _reference(s, t + 100, layer1 + layer2)
    a = analyze(model_of(s))
    gm, m = a.graph_map, a.model
    assert [r.ref_start for r in gm.replays] == [0, 1, 0, 1]
    k = gm.kernels[np.argsort(m.ts_ns[gm.kernels])]
    shapes = [m.event_args(int(o))["Input Dims"][1] for o in gm.op_of(m, k)]
    assert shapes == [[1024, 1024], [1024, 4096]] * 2
    (g,) = a.kernels
    # x [4, 1024] of the second layer is the first layer's output, of the next step's first layer too (in the L2)
    x = 4 * 1024 * 2 / BW
    assert g.floor_total_ns == pytest.approx(2 * (_gemv_floor(4, 1024, 1024) + _gemv_floor(4, 1024, 4096)) - 3 * x)


def test_replayed_calls_take_part_in_op_patterns():
    """fp32 matmuls replayed from a graph are found as the fp32 pattern, one call per replay."""
    step = [("aten::mm", [[512, 4096], [4096, 4096]], ["float", "float"], ["sgemm"])]
    s = Synth()
    t = _replays(s, 0, [["sgemm"]], steps=2, dur=(900,))
    _reference(s, t + 100, step)
    a = analyze(model_of(s))
    (p,) = [p for p in a.patterns if p.kind == "fp32-matmul"]
    assert p.calls == 2 and sorted(a.model.name(int(k)) for k in p.kernels) == ["sgemm", "sgemm"]
    assert p.kernel_ns == 1_800_000


def test_eager_and_graph_traces_compare_kernel_by_kernel():
    """One kernel name for two GEMVs of different shapes: the graph's side splits by the reference's shapes as the
    eager side does (without the map its kernels would match by name alone, both shapes in one row)."""
    from gapscope.analysis.diagnosis import diagnose

    step = [("aten::mm", [[4, 1024], [1024, 1024]], [BF, BF], ["gemv"]),
            ("aten::mm", [[4, 1024], [1024, 4096]], [BF, BF], ["gemv"])]
    eager = Synth()
    t = 0
    for k in range(2):
        t0 = t
        for op, dims, types, kernels in step:
            eager.cpu_op(op, t, 7, **{"Input Dims": dims, "Input type": types})
            eager.launch(ts=t + 1, dur=2, kernel=kernels[0], k_ts=t + 5, k_dur=2)
            t += 15
        eager.annotation(f"gapscope.step#{k}", t0, t - t0)
    graph = Synth()
    _reference(graph, _replays(graph, 0, [["gemv", "gemv"]], steps=2) + 100, step)
    d = diagnose([analyze(model_of(eager)), analyze(model_of(graph))])
    rows = {(r.name, r.shapes): r for r in d.comparison.kernels}
    assert set(rows) == {("gemv", "[[4,1024],[1024,1024]]"), ("gemv", "[[4,1024],[1024,4096]]")}
    assert all((r.status, r.a_count, r.b_count, r.op) == ("both", 2, 2, "aten::mm") for r in rows.values())


def test_report_line_and_json_entry(tmp_path):
    import jsonschema

    from gapscope.report import build_json, render_markdown

    a = analyze(model_of(_trace(["gemv_a", "rms", "gemv_splitk", "wrong"])))
    md = render_markdown([a])
    assert "Graph replays: 8 kernels from 2 replays; 0 mapped" in md and "`wrong`" in md
    doc = build_json([a])
    jsonschema.validate(doc, json.loads(SCHEMA_PATH.read_text()))
    (g,) = doc["graphs"]
    assert (g["replays"], g["kernels"], g["mapped"], g["mismatched_replays"], g["reference_runs"]) == (2, 8, 0, 2, 1)
    assert "then the replay has `wrong`" in g["mismatches"][0]


def test_gpu_bound_verdict_says_what_limits_it():
    """A replayed GEMV decode that keeps the GPU busy: the verdict names the bound and the matmuls' bytes."""
    step = [("aten::mm", [[4, 8192], [8192, 8192]], [BF, BF], ["gemv"])]
    s = Synth()
    t = _replays(s, 0, [["gemv"] * 4], steps=2, dur=(40,))
    _reference(s, t + 100, step * 4)
    a = analyze(model_of(s))
    (v,) = a.verdicts
    assert v.kind == "gpu-bound" and v.limit is not None and v.limit.bound == "memory"
    per_step = 4 * (4 * 8192 + 8192 * 8192 + 4 * 8192) * 2  # bytes: four GEMVs a step
    # every x [4, 8192] but the first step's first is the output the GEMV before it just wrote: 7 of 8 in the L2
    assert v.limit.matmul_bytes == pytest.approx(per_step - 7 / 2 * 4 * 8192 * 2)
    assert "memory-bound: per step the matmuls read" in v.reason and "of HBM" in v.reason
    assert v.evidence()["limit"]["bound"] == "memory"


# ------------------------------------------------------------------------- cost models for the graph traces
@pytest.mark.parametrize("op, dims, types, conc, nbytes", [
    ("aten::index_copy_", [[4, 8, 320, 64], [], [1], [4, 8, 1, 64]], [BF, "Scalar", "long int", BF], ["", "2", "", ""],
     2 * 4 * 8 * 64 * 2 + 8),
    ("aten::le", [[1, 1, 1, 320], [1, 1, 1, 1]], ["long int", "long int"], ["", ""], 320 * 8 + 8 + 320),
    ("aten::sub", [[], [], []], ["long int", "long int", "Scalar"], ["", "", "1"], 16),
    ("aten::fill_", [[], []], [BF, "Scalar"], ["", "0."], 2),
    ("aten::arange", [[], [], [], [0]], ["Scalar", "Scalar", "Scalar", "long int"], ["0", "5", "2", ""], 3 * 8),
    ("aten::cat", [[[4, 16, 1, 32], [4, 16, 1, 32]], []], ["TensorList", "Scalar"], ["", "-1"], 2 * 4096),  # x 1 B
    ("aten::remainder", [[1], []], ["long int", "Scalar"], ["", "64"], 16),
])
def test_cost_models_of_the_graph_decodes_ops(op, dims, types, conc, nbytes):
    c = op_cost_detail(op, {"Input Dims": dims, "Input type": types, "Concrete Inputs": conc})
    assert c is not None and c.flops == 0 and c.nbytes == nbytes


def test_a_concatenation_of_a_tensor_list_takes_its_element_size_from_its_kernel():
    """aten::cat records a TensorList with no element type: its kernel's name (OpaqueType<2u>) gives two bytes an
    element; a kernel whose name says nothing leaves the call without a floor."""
    for kernel, nbytes in (("CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int>", 2),
                           ("some_cat_kernel", None)):
        s = Synth()
        s.cpu_op("aten::cat", 0, 9, **{"Input Dims": [[[4, 16, 1, 32], [4, 16, 1, 32]], []],
                                        "Input type": ["TensorList", "Scalar"]})
        s.launch(ts=1, dur=2, kernel=kernel, k_ts=20, k_dur=3)
        (k,) = analyze(model_of(s)).kernels
        if nbytes is None:
            assert k.floor_ns is None
        else:
            assert k.nbytes == 2 * 4096 * nbytes and k.dtype == "2-byte"
            assert k.floor_ns == pytest.approx(2 * 4096 * nbytes / BW)


@pytest.mark.parametrize("name, dims, types, conc, kw, nbytes", [
    # an RMS norm over [4, 1024]: the largest tensor of the iteration space (4 x 1024) is the [4, 1, 1024] output
    ("triton_per_fused_add_mean_mul_pow_rsqrt_12", [[4, 1, 1024], [4, 1024], [1024], [4, 1, 1024], [], []],
     [BF] * 4 + ["Scalar"] * 2, ["", "", "", "", "4", "1024"], "XBLOCK=1", 4 * 1024 * 2),
    # writing one position of the KV cache: the cache is larger than the iteration space and left out
    ("triton_poi_fused_index_copy_4", [[], [4, 512], [4, 8, 320, 64], []], ["long int", BF, BF, "Scalar"],
     ["", "", "", "2048"], "XBLOCK=128", 2048 * 2),
    # an embedding table larger than the iteration space: only the output space counts
    ("triton_red_fused_embedding_0", [[4, 1], [32000, 1024], [], []], ["long int", BF, "Scalar", "Scalar"],
     ["", "", "4", "1024"], "XBLOCK=2,R0_BLOCK=1024", 4 * 8),
    ("triton_poi_fused_scatter_add_3", [[64], [64]], [BF, BF], ["", ""], "XBLOCK=64", None),
    ("triton_tem_fused_mm_1", [[4, 1024], [1024, 1024], []], [BF, BF, "Scalar"], ["", "", "4"], "", None),
])
def test_triton_kernel_cost_is_a_lower_bound(name, dims, types, conc, kw, nbytes):
    c = op_cost_detail(name, {"Input Dims": dims, "Input type": types, "Concrete Inputs": conc, "kernel_kwargs": kw})
    assert (c.nbytes if c is not None else None) == nbytes
