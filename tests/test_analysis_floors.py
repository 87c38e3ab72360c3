"""Kernel floors: max(flops / peak, bytes / bandwidth) from the launching op's recorded shapes."""

from __future__ import annotations

import pytest

from tests.synth import Synth
from tests.test_analysis import model_of
from tui.analysis import analyze
from tui.analysis.floors import floor_ns, op_cost, peaks_for

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
    assert peaks_for("AMD Instinct MI250X") is None and peaks_for(None) is None


def test_big_matmul_is_compute_bound():
    args = {"Input Dims": [[8192, 8192], [8192, 8192]], "Input type": [BF, BF]}
    f, b = floor_ns("aten::mm", args, "NVIDIA H200")
    assert b == "compute"
    assert f == pytest.approx(2 * 8192**3 / (989.0 * 1e3))


def test_decode_matmul_is_memory_bound():
    args = {"Input Dims": [[4, 2048], [2048, 6144]], "Input type": [BF, BF]}
    f, b = floor_ns("aten::mm", args, "NVIDIA H200")
    assert b == "memory"
    assert f == pytest.approx((4 * 2048 + 2048 * 6144 + 4 * 6144) * 2 / 4800.0)


def test_addmm_linear_sdpa_and_unknowns():
    fl, by, _ = op_cost("aten::addmm", {"Input Dims": [[64], [32, 128], [128, 64]], "Input type": ["float"] * 3})
    assert fl == 2 * 32 * 128 * 64
    fl, _, _ = op_cost("aten::linear", {"Input Dims": [[2, 3, 128], [64, 128], [64]], "Input type": [BF] * 3})
    assert fl == 2 * 6 * 128 * 64
    fl, _, _ = op_cost("aten::scaled_dot_product_attention",
                       {"Input Dims": [[1, 2, 16, 8], [1, 2, 32, 8], [1, 2, 32, 8]], "Input type": [BF] * 3})
    assert fl == 2 * 1 * 2 * 16 * 32 * 16
    assert floor_ns("aten::mm", {"Input Dims": [[4, 4], [4, 4]], "Input type": [BF, BF]}, "Mystery GPU") == (None, None)
    assert op_cost("aten::some_custom_op", {"Input Dims": [[4]], "Input type": [BF]}) is None
    assert op_cost("aten::mm", {}) is None


def test_kernel_table_uses_launching_op_shapes():
    s = Synth()
    s.cpu_op("aten::mm", 0, 10, **{"Input Dims": [[4, 2048], [2048, 6144]], "Input type": [BF, BF]})
    s.launch(ts=1, dur=2, kernel="gemm", k_ts=20, k_dur=8)
    s.launch(ts=30, dur=2, kernel="other", k_ts=40, k_dur=1)
    a = analyze(model_of(s))
    k = a.kernels[0]
    assert (k.name, k.count, k.total_ns, k.op, k.bound) == ("gemm", 1, 8000, "aten::mm", "memory")
    assert k.shapes == [[4, 2048], [2048, 6144]]
    assert k.floor_ns == pytest.approx((4 * 2048 + 2048 * 6144 + 4 * 6144) * 2 / 4800.0)
    assert k.pct == pytest.approx(100 * 8 / 9)
    assert a.kernels[1].floor_ns is None
