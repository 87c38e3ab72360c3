"""Kernel floors: max(flops / peak, bytes / bandwidth) from the launching op's recorded shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.synth import Synth
from tests.helpers import all_traces, model_of
from gapscope.analysis import analyze
from gapscope.analysis.floors import floor_ns, op_cost, peaks_for

BF = "c10::BFloat16"


def test_peak_table_names():
    assert peaks_for("NVIDIA H200")[3] == 4800.0
    assert peaks_for("NVIDIA H100 80GB HBM3")[3] == 3350.0
    assert peaks_for("NVIDIA H100 PCIe")[3] == 2000.0
    assert peaks_for("NVIDIA A100-SXM4-80GB")[3] == 2039.0
    assert peaks_for("NVIDIA A100-SXM4-40GB")[3] == 1555.0
    assert peaks_for("NVIDIA L4")[3] == 300.0
    assert peaks_for("NVIDIA L40S")[3] == 864.0
    assert peaks_for("NVIDIA GeForce RTX 4090")[3] == 1008.0
    assert peaks_for("AMD Instinct MI250X")[3] == 3277.0 and peaks_for("AMD Instinct MI210")[3] == 1638.0
    assert peaks_for("AMD Instinct MI300X")[0] == 1307.4
    assert peaks_for("Mystery GPU") is None and peaks_for(None) is None


H = 1.15  # thresholds.CLOCK_HEADROOM, written out: compute peaks are 15% above the datasheet's
L2 = 2 * 50e6  # twice the H200's 50 MB L2: bytes below this may never reach HBM


def test_gh200_is_not_read_as_h200():
    assert peaks_for("NVIDIA GH200 480GB")[3] == 4000.0
    assert peaks_for("NVIDIA H200")[3] == 4800.0


def test_big_matmul_is_compute_bound():
    args = {"Input Dims": [[8192, 8192], [8192, 8192]], "Input type": [BF, BF]}
    f, b = floor_ns("aten::mm", args, "NVIDIA H200")
    assert b == "compute"
    assert f == pytest.approx(2 * 8192**3 / (989.0 * H * 1e3))


def test_lm_head_matmul_is_memory_bound():
    # [4, 2048] @ [2048, 128000]: 524 MB of weights cross HBM; resident, only what exceeds 2 x L2
    args = {"Input Dims": [[4, 2048], [2048, 128000]], "Input type": [BF, BF]}
    f, b = floor_ns("aten::mm", args, "NVIDIA H200")
    nbytes = (4 * 2048 + 2048 * 128000 + 4 * 128000) * 2
    assert b == "memory" and f == pytest.approx(nbytes / 4800.0)
    f, b = floor_ns("aten::mm", args, "NVIDIA H200", resident=True)
    assert b == "memory" and f == pytest.approx((nbytes - L2) / 4800.0)


def test_a_decode_gemv_reads_its_weights_from_hbm():
    """Mixtral's [1,1024] x [1024,5632] bf16: 11.5 MB of weights, 2.4 µs at 4.8 TB/s (it was a 16 ns compute
    floor when every byte under twice the L2 was free); only an L2-resident call gets the compute floor."""
    args = {"Input Dims": [[1, 1024], [1024, 5632]], "Input type": [BF, BF]}
    f, b = floor_ns("aten::mm", args, "NVIDIA H200")
    assert b == "memory" and f == pytest.approx((1024 + 1024 * 5632 + 5632) * 2 / 4800.0)
    assert f == pytest.approx(2405.76)
    f, b = floor_ns("aten::mm", args, "NVIDIA H200", resident=True)
    assert b == "compute" and f == pytest.approx(2 * 1024 * 5632 / (989.0 * H * 1e3))


# (op, args, flops, bytes) written by hand: what one call must at least do
COSTS = [
    ("aten::addmm", {"Input Dims": [[64], [32, 128], [128, 64]], "Input type": ["float"] * 3},
     2 * 32 * 128 * 64, (32 * 128 + 128 * 64 + 32 * 64) * 4),
    ("aten::linear", {"Input Dims": [[2, 3, 128], [64, 128], [64]], "Input type": [BF] * 3},
     2 * 6 * 128 * 64, (6 * 128 + 64 * 128 + 6 * 64) * 2),
    # SDPA without is_causal recorded: a causal mask may skip all but a triangle of 16 * 17 / 2 pairs
    ("aten::scaled_dot_product_attention",
     {"Input Dims": [[1, 2, 16, 8], [1, 2, 32, 8], [1, 2, 32, 8]], "Input type": [BF] * 3},
     2 * 2 * (16 * 17 // 2) * 16, (2 * 16 * 8 * 2 + 2 * 16 * 8 * 2) * 2),  # q + out, 16 key and value rows
    # ... and with is_causal=False recorded, every pair and every key
    ("aten::scaled_dot_product_attention",
     {"Input Dims": [[1, 2, 16, 8], [1, 2, 32, 8], [1, 2, 32, 8], [], [], [], [], []], "Input type": [BF] * 3,
      "Concrete Inputs": ["", "", "", "", "0.", "False", "", "False"]},
     2 * 2 * 16 * 32 * 16, (2 * 16 * 8 * 2 + 2 * 32 * 8 * 2) * 2),
    ("aten::add", {"Input Dims": [[1, 256, 5632], [1, 256, 5632], []], "Input type": [BF, BF, "Scalar"]},
     0, 256 * 5632 * 2 * 2),  # the last tensor could be an out= argument: the output is not counted twice
    ("aten::silu", {"Input Dims": [[1, 1, 5632]], "Input type": [BF]}, 0, 5632 * 2 * 2),
    ("aten::fill_", {"Input Dims": [[268435456], []], "Input type": ["float", "Scalar"]}, 0, 268435456 * 4),
    ("aten::copy_", {"Input Dims": [[4, 2048], [4, 2048], []], "Input type": [BF, "float", "Scalar"]},
     0, 4 * 2048 * (2 + 4)),
    ("aten::sum", {"Input Dims": [[1024, 1024], [], []], "Input type": ["float", "", "Scalar"]}, 0, 1024 * 1024 * 4),
    ("aten::_to_copy", {"Input Dims": [[1000]], "Input type": ["float"]}, 0, 1000 * 4 + 1000 * 1),
    # a TensorList without element types: its elements read and written once, counted at one byte each (the caller
    # scales them by the element size the kernel's name gives: activity.call_floors, floors.opaque_bytes)
    ("aten::cat", {"Input Dims": [[[2, 8], [3, 8]], []], "Input type": ["GenericList[Tensor, Tensor]", "Scalar"]},
     0, 2 * (16 + 24) * 1),
    ("aten::embedding", {"Input Dims": [[32000, 2048], [1, 4]], "Input type": [BF, "long int"]},
     0, 2 * 4 * 2048 * 2 + 4 * 8),
    ("aten::index_select", {"Input Dims": [[32000, 2048], [], [4]], "Input type": [BF, "Scalar", "long int"],
                            "Concrete Inputs": ["", "0", ""]}, 0, 2 * 4 * 2048 * 2 + 4 * 8),
    ("aten::index_select", {"Input Dims": [[32000, 2048], [], [4]], "Input type": [BF, "Scalar", "long int"]},
     None, None),  # the dim is not recorded
    # ResNet-50's inference batch norm: x read, y written, four [64] fp32 parameters
    ("aten::cudnn_batch_norm", {"Input Dims": [[32, 64, 112, 112], [64], [64], [64], [64], [], [], []],
                                "Input type": ["float"] * 5 + ["Scalar"] * 3},
     0, 2 * 32 * 64 * 112 * 112 * 4 + 4 * 64 * 4),
    ("aten::native_batch_norm", {"Input Dims": [[32, 64, 56, 56], [64], [64], [64], [64], [], [], []],
                                 "Input type": [BF] * 5 + ["Scalar"] * 3},
     0, 2 * 32 * 64 * 56 * 56 * 2 + 4 * 64 * 2),
    # relu_ launches its kernel from clamp_min_(x, 0): in place, x counted once
    ("aten::clamp_min_", {"Input Dims": [[32, 64, 112, 112], []], "Input type": ["float", "Scalar"]},
     0, 32 * 64 * 112 * 112 * 4),
    ("aten::clamp_min", {"Input Dims": [[8, 100], []], "Input type": [BF, "Scalar"]}, 0, 2 * 800 * 2),
    # 3x3 stride 2 padding 1: 112 -> 56; the int64 indices are written too
    ("aten::max_pool2d_with_indices", {"Input Dims": [[32, 64, 112, 112], [], [], [], [], []],
                                       "Input type": ["float"] + ["ScalarList"] * 4 + ["Scalar"],
                                       "Concrete Inputs": ["", "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", "False"]},
     0, 32 * 64 * 112 * 112 * 4 + 32 * 64 * 56 * 56 * (4 + 8)),
    # stride [] is the kernel size: 2x2 over 8x8 -> 4x4
    ("aten::avg_pool2d", {"Input Dims": [[1, 3, 8, 8], [], [], []], "Input type": [BF] + ["ScalarList"] * 3,
                          "Concrete Inputs": ["", "[2, 2]", "[]", "[0, 0]", "False", "True", ""]},
     0, (3 * 64 + 3 * 16) * 2),
    ("aten::adaptive_avg_pool2d", {"Input Dims": [[32, 2048, 7, 7], []], "Input type": ["float", "ScalarList"],
                                   "Concrete Inputs": ["", "[1, 1]"]}, 0, (32 * 2048 * 49 + 32 * 2048) * 4),
    ("aten::adaptive_avg_pool2d", {"Input Dims": [[32, 2048, 7, 7], []], "Input type": ["float", "ScalarList"]},
     None, None),  # the output size is not recorded
    # x[idx] with 5 int64 indices into [100, 1024]: which dim they index is not known, so at least 5 x 100
    # elements (the largest dim taken as the indexed one) read and written, plus the 40 index bytes
    ("aten::index", {"Input Dims": [[100, 1024], [[5]]], "Input type": [BF, "long int"]},
     0, 2 * 5 * 100 * 2 + 5 * 8),
    # a bool mask selects as many rows as the data says: only its read is known
    ("aten::index", {"Input Dims": [[100, 1024], [[100]]], "Input type": [BF, "bool"]}, 0, 100),
    # the index list recorded empty (HF Mixtral's `x[None, top_x]`): no cost
    ("aten::index", {"Input Dims": [[1, 1024], []], "Input type": [BF, ""]}, None, None),
]


@pytest.mark.parametrize("op,args,flops,nbytes", COSTS, ids=[f"{c[0]}-{i}" for i, c in enumerate(COSTS)])
def test_op_cost_table(op, args, flops, nbytes):
    c = op_cost(op, args)
    if flops is None:
        assert c is None
    else:
        assert c[0] == pytest.approx(flops) and c[1] == pytest.approx(nbytes)


def test_unknowns():
    assert floor_ns("aten::mm", {"Input Dims": [[4, 4], [4, 4]], "Input type": [BF, BF]}, "Mystery GPU") == (None, None)
    assert op_cost("aten::some_custom_op", {"Input Dims": [[4]], "Input type": [BF]}) is None
    assert op_cost("aten::mm", {}) is None


def _mm(s, ts, m, k, n, kernels, k_ts, k_durs):
    """An aten::mm call of [m, k] @ [k, n] launching ``kernels`` (names) at k_ts with k_durs (µs)."""
    s.cpu_op("aten::mm", ts, 9, **{"Input Dims": [[m, k], [k, n]], "Input type": [BF, BF]})
    t = k_ts
    for i, (name, d) in enumerate(zip(kernels, k_durs)):
        s.launch(ts=ts + 1 + 3 * i, dur=2, kernel=name, k_ts=t, k_dur=d)
        t += d + 1


def _fl(m, k, n):
    """The HBM floor of a bf16 [m, k] @ [k, n]: nothing before it wrote its inputs."""
    return max(2 * m * k * n / (989.0 * H * 1e3), (m * k + k * n + m * n) * 2 / 4800.0)


def test_floor_per_call_from_its_own_shapes():
    """One elementwise kernel name called with a prefill shape once and a decode shape three times: the row's
    floor is the sum of each call's floor, not four times the most common shape's."""
    s = Synth()
    _mm(s, 0, 256, 4096, 4096, ["gemm"], 100, [50])
    for i in range(3):
        _mm(s, 200 + 20 * i, 1, 4096, 4096, ["gemm"], 300 + 20 * i, [10])
    a = analyze(model_of(s))
    (k,) = a.kernels
    assert (k.name, k.count, k.floored_count, k.total_ns) == ("gemm", 4, 4, 80_000)
    # the 2nd and 3rd decode calls read a [1, 4096] like the one the call before them just wrote: those 8 KB are
    # taken as still in the L2 (shapes and types match, nothing touched in between)
    assert k.floor_total_ns == pytest.approx(_fl(256, 4096, 4096) + 3 * _fl(1, 4096, 4096) - 2 * 4096 * 2 / 4800.0)
    assert k.floor_ns == pytest.approx(k.floor_total_ns / 4)
    assert k.shapes == [[1, 4096], [4096, 4096]] and k.bound == "memory"
    assert a.op_floors == []


def test_an_op_with_two_kernels_owns_one_floor():
    """aten::mm launching a split-K GEMM and its reduction: the floor goes to the op's row, neither kernel's."""
    s = Synth()
    for i in range(2):
        _mm(s, 100 * i, 64, 4096, 4096, ["gemm_splitK", "splitKreduce"], 100 * i + 20, [12, 2])
    _mm(s, 300, 64, 4096, 4096, ["gemm"], 320, [11])
    a = analyze(model_of(s))
    ks = {k.name: k for k in a.kernels}
    assert ks["splitKreduce"].floor_ns is None and ks["splitKreduce"].op_floor_calls == 2
    assert ks["gemm_splitK"].floor_ns is None and ks["gemm_splitK"].op_floor_calls == 2
    # each call after the first reads a [64, 4096] like the one the call before it wrote (512 KB from the L2)
    reuse = 64 * 4096 * 2 / 4800.0
    assert ks["gemm"].floor_total_ns == pytest.approx(_fl(64, 4096, 4096) - reuse) and ks["gemm"].op_floor_calls == 0
    (o,) = a.op_floors
    assert (o.op, o.kernels, o.count, o.total_ns) == ("aten::mm", ["gemm_splitK", "splitKreduce"], 2, 28_000)
    assert o.floor_total_ns == pytest.approx(2 * _fl(64, 4096, 4096) - reuse)


def test_graph_replay_kernels_take_no_floor_from_the_op_around_the_replay():
    s = Synth()
    s.cpu_op("aten::mm", 0, 30, **{"Input Dims": [[64, 4096], [4096, 4096]], "Input type": [BF, BF]})
    rt, _ = s.launch("cudaGraphLaunch", ts=1, dur=5, kernel="g1", k_ts=40, k_dur=3)
    s.kernel("g2", 44, 3, corr=rt["args"]["correlation"])
    a = analyze(model_of(s))
    assert all(k.floor_ns is None and k.op_floor_calls == 0 for k in a.kernels) and a.op_floors == []


@pytest.mark.parametrize("path", all_traces(), ids=lambda p: p.name)
def test_no_row_is_below_its_floor(path):
    """A floor is a lower bound: on every sample and shared trace, the floored calls of each kernel row (and
    each multi-kernel op row) took at least their summed floors."""
    from gapscope.trace import load

    a = analyze(load(path))
    for k in a.kernels:
        if k.floor_ns is None:
            continue
        n = getattr(k, "floored_count", k.count)
        took = getattr(k, "floored_total_ns", k.total_ns)
        assert k.floor_ns * n <= took, (k.name, k.op, k.shapes)
    for o in getattr(a, "op_floors", []):
        assert o.floor_total_ns <= o.total_ns, (o.op, o.kernels)


def test_json_carries_op_floors_and_the_floored_calls():
    import json
    from pathlib import Path

    import jsonschema

    from gapscope.report import build_json

    s = Synth()
    _mm(s, 0, 64, 4096, 4096, ["gemm_splitK", "splitKreduce"], 20, [12, 2])
    _mm(s, 100, 64, 4096, 4096, ["gemm"], 120, [11])
    doc = build_json(analyze(model_of(s)))
    schema = json.loads((Path(__file__).resolve().parent.parent / "gapscope" / "report" / "findings.schema.json").read_text())
    jsonschema.validate(doc, schema)
    ks = {k["name"]: k for k in doc["kernels"]}
    assert (ks["gemm"]["floored_calls"], ks["gemm"]["floored_total_us"], ks["gemm"]["op_floor_calls"]) == (1, 11.0, 0)
    assert ks["splitKreduce"]["floor_us"] is None and ks["splitKreduce"]["op_floor_calls"] == 1
    (o,) = doc["op_floors"]
    assert (o["op"], o["kernels"], o["count"], o["total_us"]) == ("aten::mm", ["gemm_splitK", "splitKreduce"], 1, 14.0)
    assert o["floor_us"] == round(_fl(64, 4096, 4096) / 1e3, 3)


def _op(s, ts, name, dims, types, kernel, k_ts, k_dur, concrete=None):
    """One op call at ``ts`` (µs) launching ``kernel`` at k_ts for k_dur µs."""
    args = {"Input Dims": dims, "Input type": types}
    if concrete is not None:
        args["Concrete Inputs"] = concrete
    s.cpu_op(name, ts, 9, **args)
    s.launch(ts=ts + 1, dur=2, kernel=kernel, k_ts=k_ts, k_dur=k_dur)


SCORES = 16 * 1024 * 1024 * 2  # a [16, 1024, 1024] bf16 score matrix: 33.5 MB, fits the 50 MB L2


def _bmm_softmax(between: bool):
    s = Synth()
    _op(s, 0, "aten::bmm", [[16, 1024, 64], [16, 64, 1024]], [BF, BF], "bmm", 100, 50)
    t = 160
    if between:  # 2 x 134 MB touched after the scores were written: they cannot still be in the L2
        _op(s, 20, "aten::add", [[64 * 1024 * 1024], [64 * 1024 * 1024]], [BF, BF], "add", t, 100)
        t += 110
    _op(s, 40, "aten::_softmax", [[16, 1024, 1024], [], []], [BF, "Scalar", "Scalar"], "softmax", t, 30)
    return {k.name: k for k in analyze(model_of(s)).kernels}


def test_l2_reuse_of_what_the_previous_kernel_wrote():
    """The softmax reads the scores the bmm just wrote (33.5 MB <= L2): only its own output crosses HBM."""
    ks = _bmm_softmax(between=False)
    assert ks["softmax"].floor_total_ns == pytest.approx(SCORES / 4800.0)
    assert ks["softmax"].bound == "memory" and ks["softmax"].l2_resident == 0
    # the bmm's inputs were written by nobody: all its bytes cross HBM
    assert ks["bmm"].floor_total_ns == pytest.approx(max(2 * 16 * 1024 * 64 * 1024 / (989.0 * H * 1e3),
                                                          (2 * 16 * 1024 * 64 * 2 + SCORES) / 4800.0))


def test_no_l2_reuse_after_more_than_the_l2_was_touched():
    ks = _bmm_softmax(between=True)
    assert ks["softmax"].floor_total_ns == pytest.approx(2 * SCORES / 4800.0)
    # two 134 MB inputs (the output may be the last argument of an out= variant: not counted again)
    assert ks["add"].floor_total_ns == pytest.approx(2 * 64 * 1024 * 1024 * 2 / 4800.0)


def test_a_call_faster_than_its_hbm_floor_is_l2_resident_alone():
    """Two GEMV calls [1,1024] x [1024,5632]: one at 5 µs keeps the 2.4 µs HBM floor, one at 1.5 µs beat it,
    so it alone gets the resident floor (its compute term): the other's floor is not lowered."""
    s = Synth()
    g = [[1, 1024], [1024, 5632]]
    _op(s, 0, "aten::mm", g, [BF, BF], "gemv", 100, 5)
    _op(s, 20, "aten::mm", g, [BF, BF], "gemv", 120, 1.5)
    a = analyze(model_of(s))
    (k,) = a.kernels
    hbm = (1024 + 1024 * 5632 + 5632) * 2 / 4800.0
    comp = 2 * 1024 * 5632 / (989.0 * H * 1e3)
    assert (k.floored_count, k.l2_resident) == (2, 1)
    assert k.floor_total_ns == pytest.approx(hbm + comp)
    assert k.floor_total_ns <= k.floored_total_ns


CONV_ARGS = (["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "False"],)  # padding, stride, dilation, groups


def test_convolution_floor_and_achieved_figures():
    """cudnn_convolution fp32 [32,64,56,56] * [64,64,3,3], stride 1, padding 1: out [32,64,56,56];
    2*32*64*56*56*64*9 FLOPs at the TF32 peak (13.0 µs) beat 51.5 MB at 4.8 TB/s (10.7 µs): compute-bound. At
    40 µs it achieves 185 TFLOP/s, 37.4% of the 494.5 TF32 peak."""
    s = Synth()
    _op(s, 0, "aten::cudnn_convolution", [[32, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []],
        ["float", "float"] + ["ScalarList"] * 3 + ["Scalar"] * 4, "conv", 100, 40, concrete=CONV_ARGS[0])
    (k,) = analyze(model_of(s)).kernels
    flops = 2 * 32 * 64 * 56 * 56 * 64 * 9
    nbytes = (2 * 32 * 64 * 56 * 56 + 64 * 64 * 9) * 4
    assert k.bound == "compute" and k.floor_total_ns == pytest.approx(flops / (494.5 * H * 1e3))
    assert k.flops == flops and k.nbytes == nbytes
    assert k.tflops == pytest.approx(flops / 40_000 / 1e3)
    assert k.gbps == pytest.approx(nbytes / 40_000)
    assert k.peak_pct == pytest.approx(100 * flops / (494.5 * 1e3) / 40_000)
    assert k.floor_pct == pytest.approx(100 * k.floor_total_ns / 40_000)


def test_conv_op_cost_reads_stride_and_padding():
    from gapscope.analysis.floors import op_cost

    # conv2d(input, weight, bias, stride, padding, dilation, groups): 7x7 stride 2 padding 3 -> 112 x 112
    c = op_cost("aten::conv2d", {"Input Dims": [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []],
                                 "Input type": ["c10::BFloat16"] * 2,
                                 "Concrete Inputs": ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"]})
    assert c == (2.0 * 32 * 64 * 112 * 112 * 3 * 49, float((32 * 3 * 224 * 224 + 64 * 3 * 49 + 32 * 64 * 112 * 112) * 2),
                 "c10::BFloat16")
    # a transposed convolution has no cost model
    assert op_cost("aten::convolution", {"Input Dims": [[1, 4, 8, 8], [4, 4, 3, 3]], "Input type": ["float"] * 2,
                                         "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "True", "[0, 0]",
                                                             "1"]}) is None


def test_resnet_batch_norm_and_relu_rows_have_memory_floors():
    """resnet50.fp32 (H200): the inference batch norm row (53 calls, 11% of kernel time) read "–" before it
    had a cost model; now every call has a memory floor, below what it took."""
    from gapscope.trace import load

    a = analyze(load(Path(__file__).resolve().parents[1] / "traces" / "resnet50.fp32.json.gz"))
    bn = [k for k in a.kernels if k.op == "aten::cudnn_batch_norm"]
    assert bn and all(k.floor_ns is not None and k.bound == "memory" for k in bn)
    assert sum(k.count for k in bn) == 53 and all(k.floored_count == k.count for k in bn)
    assert all(k.floor_total_ns <= k.floored_total_ns for k in bn)
    for op in ("aten::clamp_min_", "aten::max_pool2d_with_indices"):
        rows = [k for k in a.kernels if k.op == op]
        assert rows and any(k.floor_ns is not None for k in rows), op
