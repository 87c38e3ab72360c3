"""Lower bounds on kernel time from the launching op's shapes: max(flops / peak, HBM bytes / bandwidth).

Peak rates are the vendors' published dense (no sparsity) tensor-core figures per data type and the
HBM/GDDR bandwidth, keyed by a substring of ``deviceProperties[].name``. An unknown GPU has no floor.
float32 matmuls use the TF32 tensor rate: it is the highest the hardware can reach, so the floor stays
a lower bound whatever the matmul precision setting was. A float32 call whose kernels ran in bf16/fp16 (autocast
cast its inputs inside it, or its kernel's name says so: activity.run_dtypes) takes that type's peak and element
size instead (``run_dtype``).

A floor must never exceed the time a kernel can take, so each term is counted the way that gives the least:
compute peaks allow for clocks above the rated boost (``CLOCK_HEADROOM``); bytes are those the op must touch
(``op_cost``). Every byte crosses HBM (``floor_ns``) unless it can be in the L2 when the kernel starts: an
input that an earlier kernel of the step just wrote, with less than the L2 touched since (the caller models
that reuse over the step, activity.py, and passes the reused bytes as ``l2_reused``). Weights re-read once per
step by a many-layer model are not: between two reads the step touches far more than the L2. A call that
still runs faster than that floor had data in the L2 the model cannot see; it is *L2-resident* and its floor
is the one that only counts the bytes beyond twice the L2 (``resident=True``), for that call alone.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from .thresholds import CLOCK_HEADROOM

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
    # AMD Instinct (dense matrix rates; no TF32 before MI300, so fp32 matmuls take the fp32 matrix rate; the
    # cache is the last level the GPU has: MI300's 256 MB Infinity Cache, MI200's L2)
    ("MI325X", (1307.4, 653.7, 163.4, 6000.0, 256.0)),
    ("MI300X", (1307.4, 653.7, 163.4, 5300.0, 256.0)),
    ("MI300A", (980.6, 490.3, 122.6, 5300.0, 256.0)),
    ("MI250X", (383.0, 95.7, 95.7, 3277.0, 16.0)),
    ("MI250", (362.1, 90.5, 90.5, 3277.0, 16.0)),
    ("MI210", (181.0, 45.3, 45.3, 1638.0, 16.0)),
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
    # x plus per-channel parameters (each counted with its own element size) in, y as large as x out; a
    # training batch norm reads x twice (statistics, then normalise): counting it once keeps a lower bound
    "aten::cudnn_batch_norm", "aten::native_batch_norm", "aten::_native_batch_norm_legit",
    "aten::_native_batch_norm_legit_no_training", "aten::miopen_batch_norm", "aten::native_group_norm",
    "aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::hardtanh", "aten::threshold",
    "aten::remainder", "aten::fmod",
}
#: comparisons: every input read once, a bool output (one byte an element) as large as the largest input
COMPARE_OPS = {"aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge"}
#: ``index_copy_(self, dim, index, source)``: the source rows read and written into self, the index read
INDEX_COPY_OPS = {"aten::index_copy_", "aten::index_copy"}
#: ``arange(start, end, step, out)``: writes ceil((end - start) / step) elements of the out tensor's type
ARANGE_OPS = {"aten::arange"}
#: Inductor's generated Triton kernels, recorded as an op of the kernel's own name (``triton_poi_fused_...``) with
#: its tensors and its numel arguments (``_triton_cost``); templates and foreach kernels have no cost model
TRITON_PREFIXES = ("triton_poi_", "triton_red_", "triton_per_")
#: conversions: the output's element type is not among the inputs (counted at one byte per element)
CONVERT_OPS = {"aten::to", "aten::_to_copy"}
#: in-place ops: the output is the first input, counted once
INPLACE_OPS = {"aten::add_", "aten::sub_", "aten::mul_", "aten::div_", "aten::relu_", "aten::silu_",
               "aten::masked_fill_", "aten::fill_", "aten::zero_", "aten::copy_", "aten::clamp_", "aten::clamp_min_",
               "aten::clamp_max_", "aten::hardtanh_", "aten::threshold_", "aten::gelu_", "aten::sigmoid_"}
#: reductions: each input element read once; the (smaller) output is not counted
REDUCE_OPS = {"aten::sum", "aten::mean", "aten::amax", "aten::max", "aten::argmax", "aten::topk", "aten::sort"}
#: concatenation: the output is the sum of the inputs
CAT_OPS = {"aten::cat"}
#: gathers read only the rows they return: embedding(weight, indices), index_select(self, dim, index)
GATHER_OPS = {"aten::embedding", "aten::index_select"}
#: advanced indexing ``x[idx, ...]`` (self, indices): the output is what it reads (see ``_index_cost``)
INDEX_OPS = {"aten::index"}
#: pooling -> positions of (kernel, stride, padding, dilation) in their arguments (``Concrete Inputs``);
#: dilation None: the op has none (1). Adaptive pooling -> None: its output size is its second argument
POOL_OPS = {"aten::max_pool2d": (1, 2, 3, 4), "aten::max_pool2d_with_indices": (1, 2, 3, 4),
            "aten::max_pool1d": (1, 2, 3, 4), "aten::max_pool3d": (1, 2, 3, 4),
            "aten::max_pool3d_with_indices": (1, 2, 3, 4), "aten::avg_pool2d": (1, 2, 3, None),
            "aten::avg_pool1d": (1, 2, 3, None), "aten::avg_pool3d": (1, 2, 3, None),
            "aten::adaptive_avg_pool2d": None, "aten::_adaptive_avg_pool2d": None,
            "aten::adaptive_avg_pool1d": None, "aten::adaptive_avg_pool3d": None,
            "aten::_adaptive_avg_pool3d": None, "aten::adaptive_max_pool2d": None,
            "aten::adaptive_max_pool1d": None, "aten::adaptive_max_pool3d": None}
#: convolutions -> positions of (stride, padding, dilation, transposed, groups) in their arguments
#: (``Concrete Inputs``); None: the op has no such argument (cudnn_convolution is never transposed)
CONV_OPS = {"aten::conv2d": (3, 4, 5, None, 6), "aten::conv1d": (3, 4, 5, None, 6),
            "aten::conv3d": (3, 4, 5, None, 6), "aten::convolution": (3, 4, 5, 6, 8),
            "aten::_convolution": (3, 4, 5, 6, 8), "aten::cudnn_convolution": (3, 2, 4, None, 5),
            "aten::miopen_convolution": (4, 3, 5, None, 6)}
#: every op with a cost model (kept for callers that test membership)
MEMORY_OPS = (ELEMENTWISE_OPS | CONVERT_OPS | INPLACE_OPS | REDUCE_OPS | CAT_OPS | GATHER_OPS | INDEX_OPS
              | set(POOL_OPS) | COMPARE_OPS | INDEX_COPY_OPS | ARANGE_OPS)
FLOOR_OPS = MATMUL_OPS | set(SDPA_OPS) | MEMORY_OPS | set(CONV_OPS)
#: ops whose kernel may run in a narrower type than the inputs they record: under ``torch.autocast`` an
#: ``aten::linear`` records its float inputs, casts them to bf16/fp16 inside (``aten::to`` / ``aten::_to_copy``
#: children) and its GEMM runs in that type (``run_dtype``)
AUTOCAST_OPS = MATMUL_OPS | set(SDPA_OPS) | set(CONV_OPS)
#: the element types a conversion's ``dtype`` argument (``Concrete Inputs``) is recorded as: c10::ScalarType codes
SCALAR_TYPE_CODES = {"5": "c10::Half", "15": "c10::BFloat16"}
#: a kernel name that says it computes in bf16 / fp16: cutlass, cuBLAS (``*_bf16_*``, ``f16f16``), cuDNN
#: (``_f16_``), PyTorch's templates (``c10::BFloat16``, ``__nv_bfloat16``, ``__half``), and cuBLAS's nvjet kernels,
#: whose ``nvjet_[sm90_]ABC`` letters give the input and the output types (bf16 matmuls launch ``nvjet_sm90_tst_*``:
#: t bf16, h fp16, s fp32; a TF32 GEMM writes fp32, so the output letter tells it apart)
_BF16_NAME = re.compile(r"bf16|bfloat16|nvjet_(?:sm\d+_)?t[a-z]t_")
_HALF_NAME = re.compile(r"f16|fp16|half|nvjet_(?:sm\d+_)?h[a-z]h_")


#: the type of a cost whose elements were counted at one byte each (a TensorList records no element type)
TENSORLIST = "TensorList"
_OPAQUE = re.compile(r"OpaqueType<(\d+)u?>")


def opaque_bytes(kernel: str) -> int | None:
    """The element size a kernel's name gives where PyTorch moves elements as raw bytes (``aten::cat``'s
    ``CatArrayBatchedCopy<OpaqueType<2u>, ...>``), else None."""
    m = _OPAQUE.search(kernel) if isinstance(kernel, str) else None
    return int(m.group(1)) if m else None


def has_cost_model(op: str) -> bool:
    """Whether ``op`` (an op's or an Inductor kernel's name) has a cost model here."""
    return op in FLOOR_OPS or (isinstance(op, str) and op.startswith(TRITON_PREFIXES))


def peaks_for(device_name: str | None):
    if not device_name:
        return None
    for key, p in PEAKS:
        if key in device_name:
            return p
    return None


def kernel_dtype(name: str) -> str | None:
    """'c10::BFloat16' / 'c10::Half' where a kernel's name says it computes in that type, else None. TF32 and
    fp32 names give None: a float op's floor already takes the TF32 rate, the highest float can reach."""
    n = name.lower() if isinstance(name, str) else ""
    if _BF16_NAME.search(n):
        return "c10::BFloat16"
    if _HALF_NAME.search(n):
        return "c10::Half"
    return None


def cast_dtype(op: str, args: dict) -> str | None:
    """The bf16/fp16 type a conversion call turns a float tensor into (an autocast cast), else None:
    ``aten::to`` / ``aten::_to_copy`` (self, dtype, ...) with a float input and that dtype, or ``aten::copy_``
    (dst, src) from float into a bf16/fp16 tensor."""
    types = args.get("Input type") or []
    if not types or types[0] not in ("float", "c10::BFloat16", "c10::Half"):
        return None
    if op == "aten::copy_":
        if len(types) > 1 and types[1] == "float" and types[0] in ("c10::BFloat16", "c10::Half"):
            return types[0]
        return None
    if op in CONVERT_OPS and types[0] == "float":
        c = _concrete(args, 1)
        return SCALAR_TYPE_CODES.get(c.strip()) if isinstance(c, str) else None
    return None


def run_args(op: str, args: dict, run_dtype: str | None) -> dict:
    """``args`` as the kernel saw them when it ran in ``run_dtype`` (bf16/fp16: autocast cast the float inputs
    first, ``cast_dtype``, or the kernel's name says so, ``kernel_dtype``): the float inputs of an
    ``AUTOCAST_OPS`` call recorded as ``run_dtype``, so its floor takes that type's peak and element size. Other
    ops, or no ``run_dtype``: ``args`` unchanged."""
    if not run_dtype or op not in AUTOCAST_OPS:
        return args
    types = args.get("Input type")
    if not isinstance(types, list) or "float" not in types:
        return args
    return {**args, "Input type": [run_dtype if t == "float" else t for t in types]}


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


def _tensors_or_0d(args):
    """``_tensors``, or where an op has none but zero-dimensional tensors (``[]`` with an element type: a step
    counter, a scalar kept on the device), those, one element each."""
    ts = _tensors(args)
    if ts:
        return ts
    return [([], t) for d, t in _shapes(args) if d == [] and _eb(t)]


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


class Cost(NamedTuple):
    """What one op call must at least do. ``reads``: its inputs as (signature, bytes), a signature being
    (dims, element type); ``write``: its output the same way (None when its type or shape is unknown). The
    signatures let the caller see an input that an earlier call wrote (activity.py's L2 reuse)."""

    flops: float
    nbytes: float
    dtype: str
    reads: tuple = ()
    write: tuple | None = None


def _sig(d, t) -> tuple:
    return (tuple(d), t)


def _ints(v) -> list[int] | None:
    """'[2, 2]' -> [2, 2]; '1' -> [1]; anything else None."""
    if not isinstance(v, str):
        return None
    v = v.strip().strip("[]").strip()
    if not v:
        return None
    try:
        return [int(x) for x in v.split(",")]
    except ValueError:
        return None


def _conv_cost(op: str, args: dict, ts) -> Cost | None:
    """A forward convolution: input [N, C, *spatial], weight [K, C/groups, *kernel]; the output's spatial size
    from stride, padding and dilation (``Concrete Inputs``). FLOPs 2 * N * K * prod(out) * C/groups *
    prod(kernel); bytes: input, weight and output once each. A transposed convolution is left out."""
    if len(ts) < 2:
        return None
    (x, tx), (w, tw) = ts[0], ts[1]
    nd = len(x) - 2
    if nd < 1 or len(w) != len(x):
        return None
    st, pa, di, tr, gr = CONV_OPS[op]
    if tr is not None and _concrete(args, tr) != "False":
        return None
    stride, pad, dil = (_ints(_concrete(args, j)) for j in (st, pa, di))
    groups = _ints(_concrete(args, gr))
    if stride is None or pad is None or dil is None or groups is None or len(groups) != 1 or groups[0] < 1:
        return None
    stride, pad, dil = ([v[0]] * nd if len(v) == 1 else v for v in (stride, pad, dil))
    if not (len(stride) == len(pad) == len(dil) == nd) or min(stride) < 1 or min(dil) < 1:
        return None
    out_sp = [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    if min(out_sp) < 1 or w[1] * groups[0] != x[1]:
        return None
    eb = _eb(tx)
    out = [x[0], w[0]] + out_sp
    flops = 2.0 * _numel(out) * w[1] * math.prod(w[2:])
    nbytes = _numel(x) * eb + _numel(w) * _eb(tw) + _numel(out) * eb
    return Cost(flops, float(nbytes), tx, ((_sig(x, tx), _numel(x) * eb), (_sig(w, tw), _numel(w) * _eb(tw))),
                (_sig(out, tx), _numel(out) * eb))


def _pool_cost(op: str, args: dict, ts) -> Cost | None:
    """Pooling over the trailing spatial dims of x [.., *spatial]: x read once, the output written once (with
    int64 indices for ``*_with_indices`` / adaptive max). The output size from kernel, stride (empty: the
    kernel), padding and dilation, rounded down (``ceil_mode`` can only add a row: the lower count stays a
    lower bound); an adaptive pool's is its ``output_size`` argument."""
    x, tx = ts[0]
    eb = _eb(tx)
    pos = POOL_OPS[op]
    nd = 3 if op.endswith(("3d", "3d_with_indices")) else 1 if op.endswith("1d") else 2
    if len(x) < nd + 1:
        return None
    if pos is None:
        out_sp = _ints(_concrete(args, 1))
        if out_sp is None:
            return None
        out_sp = [out_sp[0]] * nd if len(out_sp) == 1 else out_sp
    else:
        kp, sp, pp, dp = pos
        ks, st, pa = (_ints(_concrete(args, j)) for j in (kp, sp, pp))
        dil = [1] if dp is None else _ints(_concrete(args, dp))
        if st is None and _concrete(args, sp) == "[]":
            st = ks  # stride=[] means the kernel size
        if ks is None or st is None or pa is None or dil is None:
            return None
        ks, st, pa, dil = ([v[0]] * nd if len(v) == 1 else v for v in (ks, st, pa, dil))
        if not (len(ks) == len(st) == len(pa) == len(dil) == nd) or min(st) < 1 or min(dil) < 1:
            return None
        sp_in = x[-nd:]
        out_sp = [(sp_in[i] + 2 * pa[i] - dil[i] * (ks[i] - 1) - 1) // st[i] + 1 for i in range(nd)]
    if len(out_sp) != nd or min(out_sp) < 1:
        return None
    odims = list(x[:-nd]) + out_sp
    out = _numel(odims)
    idx = 8 * out if op.endswith("with_indices") or op.startswith("aten::adaptive_max") else 0
    nbytes = _numel(x) * eb + out * eb + idx
    return Cost(0.0, float(nbytes), tx, ((_sig(x, tx), _numel(x) * eb),), (_sig(odims, tx), out * eb))


def _index_cost(args: dict, ts, dtype: str) -> Cost | None:
    """``x[i0, i1, ..]`` with the index tensors recorded (a TensorList; when the profiler records it as an
    empty list there is no cost). Integer indices broadcast to at least the largest index's elements; each
    picks one element of the dims it indexes, so the output has at least that many times the elements of x
    over its k largest dims (k indices; the dims they index are not recorded when a None precedes them):
    read and written once each, plus the indices. A bool mask selects a number of elements only the data
    says: its read is the whole lower bound."""
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    if len(dims) < 2 or not isinstance(dims[1], list) or not dims[1] or not isinstance(dims[1][0], list):
        return None
    x = ts[0][0]
    eb = _eb(dtype)
    idx = [d for d in dims[1] if isinstance(d, list) and all(isinstance(v, int) for v in d)]
    t = types[1] if len(types) > 1 else ""
    if not idx or len(idx) != len(dims[1]) or len(idx) > len(x):
        return None
    ieb = {"long int": 8, "int": 4, "bool": 1, "unsigned char": 1}.get(t)
    if ieb is None:  # an unrecorded index type could be a mask: nothing is known to be read
        return None
    ibytes = sum(_numel(d) for d in idx) * ieb
    if ieb == 1:
        return Cost(0.0, float(ibytes), dtype)
    big = sorted(x, reverse=True)[:len(idx)]
    out = max(_numel(d) for d in idx) * (_numel(x) // max(math.prod(big), 1))
    return Cost(0.0, float(2 * out * eb + ibytes), dtype)


def op_cost(op: str, args: dict, run_dtype: str | None = None) -> tuple[float, float, str] | None:
    """(flops, bytes, dtype) that one call of ``op`` must at least do, from its recorded shapes; None when
    unknown (see ``op_cost_detail``)."""
    c = op_cost_detail(op, args, run_dtype)
    return None if c is None else (c.flops, c.nbytes, c.dtype)


def op_cost_detail(op: str, args: dict, run_dtype: str | None = None) -> Cost | None:
    """What one call of ``op`` must at least do, from its recorded shapes; None when unknown. Each input is
    counted with its own element size; a count that could exceed the work really done (an output whose type
    is not recorded, the rows a gather skips, keys a causal mask skips) is left out. ``run_dtype``: the type
    the call's kernels ran in where autocast cast its float inputs (``run_args``): its inputs are read as that
    type (what the casts inside it wrote), the first one also under its recorded float signature, so that an
    earlier op's float output still counts as in the L2 (the reuse may only be overstated: a lower bound)."""
    ran = run_args(op, args, run_dtype)
    c = _op_cost(op, ran)
    if c is None or ran is args or not c.reads:
        return c
    (dims, t), nb = c.reads[0]
    ts = _tensors(args)
    if ts and ts[0][1] == "float" and t != "float":
        c = c._replace(reads=c.reads + ((_sig(dims, "float"), nb),))
    return c


def _triton_cost(op: str, args: dict) -> Cost | None:
    """An Inductor Triton kernel, from the tensors and the numel arguments its op records: it writes at least its
    output space (the numels but the reduction ones) in the smallest element type it is given, and it touches
    every element of the largest tensor no bigger than its whole iteration space (a tensor of the iteration space
    or smaller that the kernel is handed is read or written whole; larger ones, an embedding table, the KV cache it
    writes one position of, may be touched in part and are left out). Atomic stores (scatter, index_put) can
    write one address many times: no cost. The numel arguments are the trailing scalars: one for a pointwise kernel
    (two when tiled, ``YBLOCK``), the outputs' and the reduction's for a reduction (one more with ``R1_BLOCK``)."""
    if "scatter" in op or "index_put" in op:
        return None
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    conc = args.get("Concrete Inputs") or []
    kw = str(args.get("kernel_kwargs") or "")
    if not (isinstance(dims, list) and isinstance(types, list) and isinstance(conc, list)):
        return None
    n_r = 0 if op.startswith("triton_poi_") else (2 if "R1_BLOCK" in kw else 1)
    n_x = 2 if "YBLOCK" in kw else 1
    tail = []
    i = len(types) - 1
    while i >= 0 and types[i] == "Scalar" and i < len(conc) and len(tail) < n_x + n_r:
        v = conc[i]
        if not (isinstance(v, str) and v.strip().isdigit()):
            return None
        tail.append(int(v))
        i -= 1
    if len(tail) < n_x + n_r:
        return None
    tail.reverse()  # (.., xnumel, r0_numel): outputs first
    N = math.prod(tail)
    Nx = math.prod(tail[:n_x])
    ts = [(d, t) for d, t in zip(dims, types) if isinstance(d, list) and all(isinstance(x, int) for x in d)
          and _eb(t)]
    if not ts or N < 1:
        return None
    whole = [(_numel(d) * _eb(t), t) for d, t in ts if 0 < _numel(d) <= N]
    min_eb = min(_eb(t) for _, t in ts)
    big = max(whole, default=(0, ts[0][1]))
    nbytes = max(big[0], Nx * min_eb)
    return Cost(0.0, float(nbytes), big[1])


def _op_cost(op: str, args: dict) -> Cost | None:
    if op.startswith(TRITON_PREFIXES):
        return _triton_cost(op, args)
    ts = _tensors_or_0d(args)
    if not ts:
        return None
    dtype = ts[0][1] if isinstance(ts[0][1], str) else ""
    eb = _eb(dtype)
    if op in CAT_OPS and not eb and all(not _eb(t) for _, t in ts):
        # a TensorList records no element type: its elements read and written once, counted at one byte each and
        # typed TENSORLIST, for the caller to scale by the element size its kernel's name gives (``opaque_bytes``)
        n = sum(_numel(d) for d, _ in ts)
        return Cost(0.0, float(2 * n), TENSORLIST)
    if not eb:
        return None
    if op in ARANGE_OPS:
        return _arange_cost(args, ts)
    if op in INDEX_COPY_OPS:
        if len(ts) < 3:
            return None
        (ix, ti), (src, tsrc) = ts[1], ts[2]
        nb = 2 * _numel(src) * _eb(tsrc) + _numel(ix) * _eb(ti)
        return Cost(0.0, float(nb), dtype, ((_sig(src, tsrc), _numel(src) * _eb(tsrc)),))
    flops = 0.0
    if op in CONV_OPS:
        return _conv_cost(op, args, ts)
    if op in POOL_OPS:
        return _pool_cost(op, args, ts)
    if op in INDEX_OPS:
        return _index_cost(args, ts, dtype)
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
            odims = list(a[:-1]) + [n]
        else:
            batch_a = math.prod(a[:-2]) if len(a) > 2 else 1
            batch_b = math.prod(b[:-2]) if len(b) > 2 else 1
            batch = max(batch_a, batch_b)
            lead = list(a[:-2]) if batch_a >= batch_b else list(b[:-2])
            if op == "aten::addbmm":  # the batch is summed into one [m, n] output
                out = a[-2] * b[-1]
                lead = []
            else:
                out = batch * a[-2] * b[-1]
            odims = lead + [a[-2], b[-1]]
            flops = 2.0 * batch * a[-2] * a[-1] * b[-1]
        oe = min(_eb(ta) or eb, _eb(tb) or eb)
        nbytes = _numel(a) * _eb(ta) + _numel(b) * _eb(tb) + out * oe
        return Cost(flops, float(nbytes), dtype, ((_sig(a, ta), _numel(a) * _eb(ta)), (_sig(b, tb), _numel(b) * _eb(tb))),
                    (_sig(odims, ta), out * oe) if _eb(ta) == oe else None)
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
        return Cost(flops, float(nbytes), dtype, ((_sig(q, tq), _numel(q) * _eb(tq)),),
                    (_sig([b, h, L, ev], tq), b * h * L * ev * _eb(tq)))
    ins = sum(_numel(d) * _eb(t) for d, t in ts)
    big = max(_numel(d) for d, _ in ts)
    bigd = next(d for d, _ in ts if _numel(d) == big)
    reads = tuple((_sig(d, t), _numel(d) * _eb(t)) for d, t in ts)
    write = (_sig(bigd, dtype), big * eb)
    # an out= variant records its output as the last tensor argument: when the last tensor could be the
    # output, the output is not counted a second time
    out = 0 if len(ts) > 1 and _numel(ts[-1][0]) == big else big
    if op in ELEMENTWISE_OPS:
        nbytes = ins + out * eb
    elif op in COMPARE_OPS:
        nbytes = ins + out * 1
        write = (_sig(bigd, "bool"), big)
    elif op in CONVERT_OPS:
        nbytes = ins + out * 1
        write = None  # its type is not recorded
    elif op in INPLACE_OPS:
        nbytes = ins
        d0, t0 = ts[0]
        write = (_sig(d0, t0), _numel(d0) * _eb(t0))
        if op == "aten::copy_":  # the destination is written, not read
            reads = reads[1:]
    elif op in REDUCE_OPS:
        nbytes = _numel(ts[0][0]) * eb
        write = None
    elif op in CAT_OPS:
        nbytes = 2 * ins
        write = None
    elif op in GATHER_OPS:
        write = None
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
        reads = ()  # only the rows it returns are read
    else:
        return None
    return Cost(flops, float(nbytes), dtype, reads, write)


def _arange_cost(args: dict, ts) -> Cost | None:
    """``arange(start, end, step, out)``: ceil((end - start) / step) elements of the out tensor's type written."""
    conc = args.get("Concrete Inputs") or []
    d, t = ts[-1]
    if len(conc) < 3:
        return None
    try:
        a, b, s = (float(conc[j]) for j in range(3))
    except (TypeError, ValueError):
        return None
    if s == 0 or not all(math.isfinite(x) for x in (a, b, s)):
        return None
    n = max(math.ceil((b - a) / s), 0)
    return Cost(0.0, float(n * _eb(t)), t, (), (_sig([n], t), n * _eb(t))) if n else None


def peak_for_dtype(p, dtype: str) -> float:
    """The dense TFLOP/s a matmul of ``dtype`` can reach on a GPU with peaks ``p`` (a PEAKS entry)."""
    half, tf32, fp32 = p[0], p[1], p[2]
    if dtype in ("c10::Half", "c10::BFloat16"):
        return half
    if dtype.startswith("c10::Float8"):
        return 2 * half
    if dtype == "float":
        return tf32
    return fp32


def compute_ns(flops: float, dtype: str, p) -> float:
    """Time of ``flops`` at the peak rate (with clock headroom), ns."""
    return flops / (peak_for_dtype(p, dtype) * CLOCK_HEADROOM * 1e3) if flops else 0.0  # TFLOP/s = 1e3 flop/ns


def memory_ns(nbytes: float, p, resident: bool = False) -> float:
    """Time to move ``nbytes`` through HBM, ns; ``resident``: only the bytes beyond twice the L2."""
    return max(nbytes - (2 * p[4] * 1e6 if resident else 0.0), 0.0) / p[3]  # GB/s = bytes/ns


def floor_ns(op: str, args: dict, device_name: str | None, resident: bool = False,
             l2_reused: float = 0.0, run_dtype: str | None = None) -> tuple[float | None, str | None]:
    """(floor in ns, 'compute' | 'memory') or (None, None) when shapes or the GPU are unknown. Every byte
    crosses HBM but ``l2_reused`` (inputs still in the L2); ``resident``: only the bytes beyond twice the L2;
    ``run_dtype``: the type the kernel ran in under autocast (``run_args``)."""
    p = peaks_for(device_name)
    if p is None:
        return None, None
    c = op_cost_detail(op, args, run_dtype)
    if c is None:
        return None, None
    t_compute = compute_ns(c.flops, c.dtype, p)
    t_mem = memory_ns(max(c.nbytes - l2_reused, 0.0), p, resident)
    if t_compute == t_mem == 0.0:
        return None, None
    if t_compute >= t_mem:
        return t_compute, "compute"
    return t_mem, "memory"
