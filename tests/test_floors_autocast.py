"""Floors under ``torch.autocast``: an ``aten::linear`` that records float inputs but casts them to bf16 inside
(``aten::to`` > ``aten::_to_copy`` > ``aten::copy_`` children) runs a bf16 GEMM; its floor must be the bf16 one
(the bf16 peak, two-byte elements), never the TF32 one the recorded types alone would give."""

from __future__ import annotations

import pytest

from tests.helpers import model_of
from tests.synth import Synth
from gapscope.analysis import analyze
from gapscope.analysis.floors import cast_dtype, kernel_dtype

BF = "c10::BFloat16"
H = 1.15  # thresholds.CLOCK_HEADROOM, written out
BF16_TFLOPS, TF32_TFLOPS, GBPS = 989.0, 494.5, 4800.0  # the H200's datasheet
GEMM_BF16 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_kernel__5x_cublas"


def _cast(s: Synth, ts: float, dims: list, k_ts: float) -> None:
    """autocast's cast of a float tensor to bf16, as torch records it: aten::to > aten::_to_copy > aten::copy_,
    the copy launching its own kernel."""
    s.cpu_op("aten::to", ts, 20, **{"Input Dims": [dims, [], [], [], []],
                                    "Input type": ["float", "Scalar", "Scalar", "Scalar", ""],
                                    "Concrete Inputs": ["", "15", "False", "False", ""]})
    s.cpu_op("aten::_to_copy", ts + 1, 18, **{"Input Dims": [dims, [], [], [], [], [], []],
                                              "Input type": ["float", "Scalar", "", "", "", "Scalar", ""],
                                              "Concrete Inputs": ["", "15", "", "", "", "False", ""]})
    s.cpu_op("aten::copy_", ts + 2, 15, **{"Input Dims": [dims, dims, []], "Input type": [BF, "float", "Scalar"]})
    s.launch(ts=ts + 3, dur=2, kernel="void at::native::vectorized_elementwise_kernel<4, copy>", k_ts=k_ts, k_dur=5)


def _autocast_linear(x: list, n: int, gemm: str, gemm_us: float, casts: bool = True):
    """An fp32 ``aten::linear`` of x [.., k] and a weight [n, k] under bf16 autocast: both cast inside it (when
    ``casts``), then the GEMM launched from the linear itself."""
    s = Synth()
    w = [n, x[-1]]
    s.cpu_op("aten::linear", 0, 100, **{"Input Dims": [x, w, []], "Input type": ["float", "float", ""],
                                        "Concrete Inputs": ["", "", ""]})
    if casts:
        _cast(s, 1, w, 200)
        _cast(s, 25, x, 210)
    s.launch(ts=60, dur=5, kernel=gemm, k_ts=300, k_dur=gemm_us)
    a = analyze(model_of(s))
    return next(k for k in a.kernels if k.name == gemm)


def test_autocast_linear_is_floored_at_the_bf16_rate():
    """[1, 4096, 8192] x [8192, 8192]: 550 GFLOP. At the TF32 peak the floor would be 967 µs, above the 700 µs
    the bf16 GEMM took; at the bf16 peak it is 483 µs (compute-bound: 268 MB of bf16 take 56 µs)."""
    x, n = [1, 4096, 8192], 8192
    flops = 2.0 * 4096 * 8192 * n
    tf32_floor = flops / (TF32_TFLOPS * H * 1e3)
    bf16_floor = flops / (BF16_TFLOPS * H * 1e3)
    assert bf16_floor < 700_000 < tf32_floor  # the trace's kernel sits between the two
    k = _autocast_linear(x, n, GEMM_BF16, 700)
    assert k.op == "aten::linear" and k.floored_count == 1
    assert k.dtype == BF and k.bound == "compute"
    assert k.floor_ns == pytest.approx(bf16_floor)
    assert k.floor_ns <= k.avg_ns
    assert k.flops == flops and k.nbytes == (4096 * 8192 + 8192 * 8192 + 4096 * 8192) * 2  # x, w, out in bf16


def test_autocast_casts_alone_say_bf16():
    """The GEMM's name says nothing (nvjet with no type letters): the bf16 casts inside the linear do."""
    x, n = [1, 4096, 8192], 8192
    k = _autocast_linear(x, n, "gemm", 700)
    assert k.dtype == BF and k.floor_ns == pytest.approx(2.0 * 4096 * 8192 * n / (BF16_TFLOPS * H * 1e3))


def test_kernel_name_alone_says_bf16_and_halves_the_bytes():
    """A decode GEMV [1, 8192] x [8192, 8192] with no casts recorded, a bf16 kernel: memory-bound, so the
    fp32 bytes (268 MB, 55.9 µs) would floor it above its 40 µs; its bf16 bytes take 28.0 µs."""
    x, n = [1, 8192], 8192
    fp32_floor = (8192 + 8192 * n + n) * 4 / GBPS
    bf16_floor = (8192 + 8192 * n + n) * 2 / GBPS
    assert bf16_floor < 40_000 < fp32_floor
    k = _autocast_linear(x, n, "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT", 40, casts=False)
    assert k.dtype == BF and k.bound == "memory"
    assert k.floor_ns == pytest.approx(bf16_floor)
    assert k.floor_ns <= k.avg_ns


def test_fp32_linear_without_casts_keeps_the_tf32_floor():
    """No cast inside, an fp32 kernel: the float floor (TF32 peak, four-byte elements) as before."""
    x, n = [1, 4096, 8192], 8192
    k = _autocast_linear(x, n, "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", 1200, casts=False)
    assert k.dtype == "float"
    assert k.floor_ns == pytest.approx(2.0 * 4096 * 8192 * n / (TF32_TFLOPS * H * 1e3))


@pytest.mark.parametrize("name, want", [
    (GEMM_BF16, BF),
    ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8", BF),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(Params)", BF),
    ("nvjet_sm90_tst_256x64_64x5_4x1_v_bz_TNT", BF),
    ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNT", "c10::Half"),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", "c10::Half"),
    ("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
     "c10::Half"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", None),
    ("ampere_sgemm_128x64_tn", None),
    ("nvjet_sm90_sss_128x64_64x4_2x1_v_bz_TNT", None),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>(Params)", None),
])
def test_kernel_dtype_from_names(name, want):
    assert kernel_dtype(name) == want


def test_cast_dtype():
    assert cast_dtype("aten::_to_copy", {"Input type": ["float", "Scalar"], "Concrete Inputs": ["", "15"]}) == BF
    assert cast_dtype("aten::to", {"Input type": ["float", "Scalar"], "Concrete Inputs": ["", "5"]}) == "c10::Half"
    assert cast_dtype("aten::copy_", {"Input type": [BF, "float", "Scalar"]}) == BF
    # float -> float, bf16 -> float (an upcast) and fp32 -> int are not autocast's casts
    assert cast_dtype("aten::_to_copy", {"Input type": ["float", "Scalar"], "Concrete Inputs": ["", "6"]}) is None
    assert cast_dtype("aten::copy_", {"Input type": ["float", BF, "Scalar"]}) is None
    assert cast_dtype("aten::to", {"Input type": [BF, "Scalar"], "Concrete Inputs": ["", "15"]}) is None


def test_an_input_an_earlier_float_op_wrote_stays_in_the_l2():
    """x [1, 4096, 64] written in float by the add just before (1 MiB: fits the L2), then an fp32 linear by a
    [16, 64] weight whose kernel ran in bf16 (no cast recorded): x is read from the L2 as before, so the floor is
    the weight and the output in bf16 (27.7 ns), below the float floor with x in the L2 (55.5 ns). Were x read
    from HBM as bf16 only, the floor would rise to 137 ns, above the float one."""
    x, w, out = [1, 4096, 64], [16, 64], 4096 * 16
    s = Synth()
    s.cpu_op("aten::add", 0, 9, **{"Input Dims": [x, x, []], "Input type": ["float", "float", "Scalar"]})
    s.launch(ts=1, dur=2, kernel="add_kernel", k_ts=100, k_dur=30)
    s.cpu_op("aten::linear", 20, 9, **{"Input Dims": [x, w, []], "Input type": ["float", "float", ""]})
    s.launch(ts=21, dur=2, kernel="nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", k_ts=140, k_dur=10)
    k = next(k for k in analyze(model_of(s)).kernels if k.name.startswith("nvjet"))
    assert k.dtype == BF
    assert k.bound == "memory" and k.floor_ns == pytest.approx((16 * 64 + out) * 2 / GBPS)
    assert k.floor_ns <= (16 * 64 + out) * 4 / GBPS  # the float floor with x in the L2


def test_op_cost_reads_the_run_type_and_the_recorded_one():
    from gapscope.analysis.floors import op_cost_detail

    args = {"Input Dims": [[1, 64, 8192], [8192, 8192], []], "Input type": ["float", "float", ""]}
    c = op_cost_detail("aten::linear", args, BF)
    assert c.dtype == BF and c.nbytes == (64 * 8192 + 8192 * 8192 + 64 * 8192) * 2
    assert [r[0] for r in c.reads] == [((1, 64, 8192), BF), ((8192, 8192), BF), ((1, 64, 8192), "float")]
    assert all(r[1] == r[0][0][-1] * 2 * (64 if len(r[0][0]) == 3 else 8192) for r in c.reads)
    assert op_cost_detail("aten::linear", args).dtype == "float"  # no run type: as recorded
    # other ops keep their recorded types
    assert op_cost_detail("aten::add", {"Input Dims": [[4, 4], [4, 4]], "Input type": ["float"] * 2}, BF).dtype == "float"
