"""Lower bounds on kernel time from the launching op's shapes: max(flops / peak, bytes / bandwidth).

Peak rates are the vendors' published dense (no sparsity) tensor-core figures per data type and the
HBM/GDDR bandwidth, keyed by a substring of ``deviceProperties[].name``. An unknown GPU has no floor.
float32 matmuls use the TF32 tensor rate: it is the highest the hardware can reach, so the floor stays
a lower bound whatever the matmul precision setting was.
"""

from __future__ import annotations

import math

# name substring -> (bf16/fp16 dense TFLOP/s, tf32 dense TFLOP/s, fp32 non-tensor TFLOP/s, GB/s). First match wins.
PEAKS: list[tuple[str, tuple[float, float, float, float]]] = [
    ("H200", (989.0, 494.5, 67.0, 4800.0)),
    ("H100 PCIe", (756.0, 378.0, 51.0, 2000.0)),
    ("H100 NVL", (835.0, 417.5, 60.0, 3900.0)),
    ("H100", (989.0, 494.5, 67.0, 3350.0)),  # SXM5
    ("GH200", (989.0, 494.5, 67.0, 4000.0)),
    ("B200", (2250.0, 1100.0, 80.0, 8000.0)),
    ("A100-SXM4-80GB", (312.0, 156.0, 19.5, 2039.0)),
    ("A100-PCIE-80GB", (312.0, 156.0, 19.5, 1935.0)),
    ("A100 80GB", (312.0, 156.0, 19.5, 2039.0)),
    ("A100", (312.0, 156.0, 19.5, 1555.0)),  # 40GB
    ("L40S", (362.0, 183.0, 91.6, 864.0)),
    ("L4", (121.0, 60.0, 30.3, 300.0)),
    ("RTX 4090", (165.2, 82.6, 82.6, 1008.0)),
]

ELEM_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
    "bool": 1, "unsigned char": 1, "signed char": 1, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1, "c10::complex<float>": 8,
}
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul",
              "aten::_scaled_mm", "aten::addbmm"}
SDPA_OPS = {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
            "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
            "aten::_flash_attention_forward", "aten::_efficient_attention_forward",
            "aten::_cudnn_attention_forward"}
MEMORY_OPS = {
    "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_", "aten::div", "aten::div_",
    "aten::relu", "aten::relu_", "aten::gelu", "aten::silu", "aten::silu_", "aten::sigmoid", "aten::tanh",
    "aten::exp", "aten::neg", "aten::pow", "aten::rsqrt", "aten::sqrt", "aten::copy_", "aten::clone",
    "aten::contiguous", "aten::where", "aten::masked_fill", "aten::masked_fill_", "aten::fill_", "aten::zero_",
    "aten::sum", "aten::mean", "aten::amax", "aten::max", "aten::softmax", "aten::_softmax", "aten::log_softmax",
    "aten::_log_softmax", "aten::layer_norm", "aten::native_layer_norm", "aten::rms_norm", "aten::_fused_rms_norm",
    "aten::cat", "aten::index_select", "aten::embedding", "aten::dropout", "aten::native_dropout", "aten::cumsum",
    "aten::argmax", "aten::topk", "aten::sort", "aten::to", "aten::_to_copy", "aten::add_relu",
}


def peaks_for(device_name: str | None):
    if not device_name:
        return None
    for key, p in PEAKS:
        if key in device_name:
            return p
    return None


def _numel(d) -> int:
    if not isinstance(d, list) or not all(isinstance(x, int) for x in d):
        return 0
    return math.prod(d) if d else 1


def _shapes(args: dict):
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    out = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        if isinstance(d, list) and d and isinstance(d[0], list):  # TensorList: flatten one level
            for x in d:
                out.append((x, t))
        else:
            out.append((d, t))
    return out


def _tensors(args):
    return [(d, t) for d, t in _shapes(args) if isinstance(d, list) and all(isinstance(x, int) for x in d) and d]


def op_cost(op: str, args: dict) -> tuple[float, float, str] | None:
    """(flops, bytes, dtype) for one call of ``op`` with recorded shapes, or None when unknown."""
    ts = _tensors(args)
    if not ts:
        return None
    dtype = ts[0][1] if isinstance(ts[0][1], str) else ""
    eb = ELEM_BYTES.get(dtype, 0)
    if not eb:
        return None
    flops = 0.0
    out_elems = 0
    if op in MATMUL_OPS:
        mats = [d for d, _ in ts if len(d) >= 2]
        if op in ("aten::addmm", "aten::baddbmm") and len(mats) >= 3:
            mats = mats[1:3]
        if op == "aten::linear":
            if len(mats) < 2:
                return None
            a, w = mats[0], mats[1]
            m_ = math.prod(a[:-1])
            k, n = a[-1], w[0]
            flops = 2.0 * m_ * k * n
            out_elems = m_ * n
        else:
            if len(mats) < 2:
                return None
            a, b = mats[0], mats[1]
            batch_a = math.prod(a[:-2]) if len(a) > 2 else 1
            batch_b = math.prod(b[:-2]) if len(b) > 2 else 1
            batch = max(batch_a, batch_b)
            m_, k, n = a[-2], a[-1], b[-1]
            flops = 2.0 * batch * m_ * k * n
            out_elems = batch * m_ * n
    elif op in SDPA_OPS:
        if len(ts) < 3 or len(ts[0][0]) != 4:
            return None
        q, k_, v = ts[0][0], ts[1][0], ts[2][0]
        b, h, L, e = q
        s = k_[-2]
        ev = v[-1]
        flops = 2.0 * b * h * L * s * (e + ev)
        out_elems = b * h * L * ev
    elif op in MEMORY_OPS:
        out_elems = max(_numel(d) for d, _ in ts)
    else:
        return None
    nbytes = float(sum(_numel(d) for d, _ in ts) + out_elems) * eb
    return flops, nbytes, dtype


def floor_ns(op: str, args: dict, device_name: str | None) -> tuple[float | None, str | None]:
    """(floor in ns, 'compute' | 'memory') or (None, None) when shapes or the GPU are unknown."""
    p = peaks_for(device_name)
    if p is None:
        return None, None
    c = op_cost(op, args)
    if c is None:
        return None, None
    flops, nbytes, dtype = c
    half, tf32, fp32, bw = p
    if dtype in ("c10::Half", "c10::BFloat16"):
        peak = half
    elif dtype.startswith("c10::Float8"):
        peak = 2 * half
    elif dtype == "float":
        peak = tf32
    else:
        peak = fp32
    t_compute = flops / (peak * 1e3) if flops else 0.0  # TFLOP/s = 1e3 flop/ns
    t_mem = nbytes / bw  # GB/s = bytes/ns
    if t_compute >= t_mem:
        return t_compute, "compute"
    return t_mem, "memory"
