"""Lower bounds on kernel time from the launching op's shapes: max(flops / peak, HBM bytes / bandwidth).

Peak rates are the vendors' published dense (no sparsity) tensor-core figures per data type and the
HBM/GDDR bandwidth, keyed by a substring of ``deviceProperties[].name``. An unknown GPU has no floor.
float32 matmuls use the TF32 tensor rate: it is the highest the hardware can reach, so the floor stays
a lower bound whatever the matmul precision setting was.

A floor must never exceed the time a kernel can take, so each term is counted the way that gives the least:
compute peaks allow for clocks above the rated boost (``CLOCK_HEADROOM``); bytes are those the op must touch
(``op_cost``) and only those beyond twice the L2 must cross HBM, since the cache can hold inputs at the
kernel's start and outputs at its end (a softmax on scores the matmul just wrote reads them from L2).
"""

from __future__ import annotations

import math

# name substring -> (bf16/fp16 dense TFLOP/s, tf32 dense TFLOP/s, fp32 non-tensor TFLOP/s, GB/s, L2 MB).
# First match wins: "GH200" before "H200", which it contains.
PEAKS: list[tuple[str, tuple[float, float, float, float, float]]] = [
    ("GH200", (989.0, 494.5, 67.0, 4000.0, 60.0)),
    ("H200", (989.0, 494.5, 67.0, 4800.0, 50.0)),
    ("H100 PCIe", (756.0, 378.0, 51.0, 2000.0, 50.0)),
    ("H100 NVL", (835.0, 417.5, 60.0, 3900.0, 50.0)),
    ("H100", (989.0, 494.5, 67.0, 3350.0, 50.0)),  # SXM5
    ("B200", (2250.0, 1100.0, 80.0, 8000.0, 128.0)),
    ("A100-SXM4-80GB", (312.0, 156.0, 19.5, 2039.0, 40.0)),
    ("A100-PCIE-80GB", (312.0, 156.0, 19.5, 1935.0, 40.0)),
    ("A100 80GB", (312.0, 156.0, 19.5, 2039.0, 40.0)),
    ("A100", (312.0, 156.0, 19.5, 1555.0, 40.0)),  # 40GB
    ("L40S", (362.0, 183.0, 91.6, 864.0, 96.0)),
    ("L4", (121.0, 60.0, 30.3, 300.0, 48.0)),
    ("RTX 4090", (165.2, 82.6, 82.6, 1008.0, 72.0)),
]

ELEM_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
    "bool": 1, "unsigned char": 1, "signed char": 1, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1, "c10::complex<float>": 8,
}
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul",
              "aten::_scaled_mm", "aten::addbmm"}
#: attention ops -> the position of ``is_causal`` in their arguments (``Concrete Inputs``); None: the op takes
#: a mask kind instead (``custom_mask_type``, 0 = none)
SDPA_OPS = {"aten::scaled_dot_product_attention": 5, "aten::_scaled_dot_product_flash_attention": 4,
            "aten::_scaled_dot_product_efficient_attention": 6, "aten::_scaled_dot_product_cudnn_attention": 6,
            "aten::_flash_attention_forward": 8, "aten::_cudnn_attention_forward": 10,
            "aten::_efficient_attention_forward": None}
#: out-of-place ops that read every element of every input and write an output as large as the largest input
ELEMENTWISE_OPS = {
    "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::relu", "aten::gelu", "aten::silu", "aten::sigmoid",
    "aten::tanh", "aten::exp", "aten::neg", "aten::pow", "aten::rsqrt", "aten::sqrt", "aten::clone",
    "aten::contiguous", "aten::where", "aten::masked_fill", "aten::softmax", "aten::_softmax", "aten::log_softmax",
    "aten::_log_softmax", "aten::layer_norm", "aten::native_layer_norm", "aten::rms_norm", "aten::_fused_rms_norm",
    "aten::dropout", "aten::native_dropout", "aten::add_relu", "aten::cumsum",
}
#: conversions: the output's element type is not among the inputs (counted at one byte per element)
CONVERT_OPS = {"aten::to", "aten::_to_copy"}
#: in-place ops: the output is the first input, counted once
INPLACE_OPS = {"aten::add_", "aten::sub_", "aten::mul_", "aten::div_", "aten::relu_", "aten::silu_",
               "aten::masked_fill_", "aten::fill_", "aten::zero_", "aten::copy_"}
#: reductions: each input element read once; the (smaller) output is not counted
REDUCE_OPS = {"aten::sum", "aten::mean", "aten::amax", "aten::max", "aten::argmax", "aten::topk", "aten::sort"}
#: concatenation: the output is the sum of the inputs
CAT_OPS = {"aten::cat"}
#: gathers read only the rows they return: embedding(weight, indices), index_select(self, dim, index)
GATHER_OPS = {"aten::embedding", "aten::index_select"}
#: every op with a cost model (kept for callers that test membership)
MEMORY_OPS = ELEMENTWISE_OPS | CONVERT_OPS | INPLACE_OPS | REDUCE_OPS | CAT_OPS | GATHER_OPS
FLOOR_OPS = MATMUL_OPS | set(SDPA_OPS) | MEMORY_OPS

#: the vendors' TFLOP/s are at the rated boost clock; GPUs run above it (H100/H200 SXM: 1980 MHz against the
#: 1830 MHz of the datasheet, +8%), so the compute floor uses peaks 15% higher to stay a lower bound
CLOCK_HEADROOM = 1.15


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
            tt = t if isinstance(t, str) and not t.startswith("GenericList") else ""
            for x in d:
                out.append((x, tt))
        else:
            out.append((d, t))
    return out


def _tensors(args):
    return [(d, t) for d, t in _shapes(args) if isinstance(d, list) and all(isinstance(x, int) for x in d) and d]


def _eb(t) -> int:
    return ELEM_BYTES.get(t, 0) if isinstance(t, str) else 0


def _concrete(args: dict, i: int):
    c = args.get("Concrete Inputs")
    return c[i] if isinstance(c, list) and 0 <= i < len(c) else None


def _causal(op: str, args: dict) -> bool:
    """True unless the op's recorded arguments say the attention is not masked (a mask can only skip work)."""
    pos = SDPA_OPS[op]
    if pos is None:
        return _concrete(args, 9) != "0"  # custom_mask_type
    if _concrete(args, pos) != "False":
        return True
    if op == "aten::_flash_attention_forward":  # a sliding window skips work too
        return any(_concrete(args, j) not in ("", "-1", None) for j in (11, 12))
    return False


def op_cost(op: str, args: dict) -> tuple[float, float, str] | None:
    """(flops, bytes, dtype) that one call of ``op`` must at least do, from its recorded shapes; None when
    unknown. Each input is counted with its own element size; a count that could exceed the work really done
    (an output whose type is not recorded, the rows a gather skips, keys a causal mask skips) is left out."""
    ts = _tensors(args)
    if not ts:
        return None
    dtype = ts[0][1] if isinstance(ts[0][1], str) else ""
    eb = _eb(dtype)
    if not eb:
        return None
    flops = 0.0
    if op in MATMUL_OPS:
        mats = [(d, t) for d, t in ts if len(d) >= 2]
        if op in ("aten::addmm", "aten::baddbmm", "aten::addbmm") and len(mats) >= 3:
            mats = mats[1:3]  # self (the added term) is not read when beta == 0
        if len(mats) < 2:
            return None
        (a, ta), (b, tb) = mats[0], mats[1]
        if op == "aten::linear":
            m_, k, n = math.prod(a[:-1]), a[-1], b[0]
            flops = 2.0 * m_ * k * n
            out = m_ * n
        else:
            batch_a = math.prod(a[:-2]) if len(a) > 2 else 1
            batch_b = math.prod(b[:-2]) if len(b) > 2 else 1
            batch = max(batch_a, batch_b)
            if op == "aten::addbmm":  # the batch is summed into one [m, n] output
                out = a[-2] * b[-1]
            else:
                out = batch * a[-2] * b[-1]
            flops = 2.0 * batch * a[-2] * a[-1] * b[-1]
        nbytes = _numel(a) * _eb(ta) + _numel(b) * _eb(tb) + out * min(_eb(ta) or eb, _eb(tb) or eb)
        return flops, float(nbytes), dtype
    if op in SDPA_OPS:
        if len(ts) < 3 or len(ts[0][0]) != 4 or len(ts[1][0]) != 4 or len(ts[2][0]) != 4:
            return None
        (q, tq), (k_, tk), (v, tv) = ts[0], ts[1], ts[2]
        b, h, L, e = q
        s, ev = k_[-2], v[-1]
        if _causal(op, args):
            # a mask can skip every (query, key) pair but a triangle: min(L, S) * (min(L, S) + 1) / 2 pairs,
            # reading that many key and value rows
            mm = min(L, s)
            pairs, keys = mm * (mm + 1) / 2, mm
        else:
            pairs, keys = L * s, s
        flops = 2.0 * b * h * pairs * (e + ev)
        nbytes = (_numel(q) * _eb(tq) + b * h * L * ev * _eb(tq)
                  + b * k_[1] * keys * k_[-1] * _eb(tk) + b * v[1] * keys * ev * _eb(tv))
        return flops, float(nbytes), dtype
    ins = sum(_numel(d) * _eb(t) for d, t in ts)
    big = max(_numel(d) for d, _ in ts)
    # an out= variant records its output as the last tensor argument: when the last tensor could be the
    # output, the output is not counted a second time
    out = 0 if len(ts) > 1 and _numel(ts[-1][0]) == big else big
    if op in ELEMENTWISE_OPS:
        nbytes = ins + out * eb
    elif op in CONVERT_OPS:
        nbytes = ins + out * 1
    elif op in INPLACE_OPS:
        nbytes = ins
    elif op in REDUCE_OPS:
        nbytes = _numel(ts[0][0]) * eb
    elif op in CAT_OPS:
        nbytes = 2 * ins
    elif op in GATHER_OPS:
        if op == "aten::embedding":
            w, idx = ts[0][0], (ts[1] if len(ts) > 1 else None)
            if idx is None or len(w) != 2:
                return None
            rows = _numel(idx[0])
            nbytes = 2 * rows * w[1] * eb + rows * _eb(idx[1])
        else:
            dim = _concrete(args, 1)
            if len(ts) < 2 or not isinstance(dim, str) or not dim.lstrip("-").isdigit():
                return None
            x, (ix, ti) = ts[0][0], ts[1]
            d = int(dim) % len(x)
            rows = _numel(ix)
            nbytes = 2 * (_numel(x) // max(x[d], 1)) * rows * eb + rows * _eb(ti)
    else:
        return None
    return flops, float(nbytes), dtype


def floor_ns(op: str, args: dict, device_name: str | None) -> tuple[float | None, str | None]:
    """(floor in ns, 'compute' | 'memory') or (None, None) when shapes or the GPU are unknown."""
    p = peaks_for(device_name)
    if p is None:
        return None, None
    c = op_cost(op, args)
    if c is None:
        return None, None
    flops, nbytes, dtype = c
    half, tf32, fp32, bw, l2_mb = p
    if dtype in ("c10::Half", "c10::BFloat16"):
        peak = half
    elif dtype.startswith("c10::Float8"):
        peak = 2 * half
    elif dtype == "float":
        peak = tf32
    else:
        peak = fp32
    t_compute = flops / (peak * CLOCK_HEADROOM * 1e3) if flops else 0.0  # TFLOP/s = 1e3 flop/ns
    t_mem = max(nbytes - 2 * l2_mb * 1e6, 0.0) / bw  # GB/s = bytes/ns
    if t_compute == t_mem == 0.0:
        return None, None
    if t_compute >= t_mem:
        return t_compute, "compute"
    return t_mem, "memory"
