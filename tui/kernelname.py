"""Kernel names by meaning, for the places a full name does not fit: the op that launched the kernel and the
kernel's family (``copy_ · unrolled_elementwise``, ``mm · nvjet_sm90 128x128``) rather than a template prefix cut
short (``at::native::vectorized_…``, the same for eight different kernels). The full name stays where there is
room for it (the info boxes, the detail screens). No textual here."""

from __future__ import annotations

import re
from functools import lru_cache

from .safe import short_kernel

#: vendor GEMM, convolution and attention kernels: (pattern on the kernel's base name, the family it reads as,
#: from the pattern's groups). Their names are a library, an architecture, a data layout and a tile; the library,
#: the architecture and the tile tell them apart
FAMILIES = [
    (re.compile(r"^nvjet_(sm\d+)_.*?(\d+x\d+)(?:_|$)"), "nvjet_{0} {1}"),
    (re.compile(r"^sm\d+_xmma_(gemm|fprop|dgrad|wgrad)_.*?tilesize(\d+x\d+)"), "xmma_{0} {1}"),
    (re.compile(r"^cutlass_.*?([a-z0-9]*(?:gemm|fprop|dgrad|wgrad))_.*?(\d+x\d+)(?:_|$)"), "cutlass {0} {1}"),
    (re.compile(r"^(ampere|volta|turing|hopper|sm\d+)_([a-z0-9]*gemm)_.*?(\d+x\d+)(?:_|$)"), "{0}_{1} {2}"),
    (re.compile(r"^cudnn_generated_.*?(sdpa)_(sm\d+)_(flash_[a-z]+)_.*?(\d+x\d+)x\d+"), "cudnn {0} {2} {3}"),
]
#: a kernel whose name is a wrapper around its real name, the first template argument (CUTLASS's ``Kernel2<...>``)
WRAPPERS = frozenset({"Kernel", "Kernel2", "kernel"})
#: element types as the kernels view writes them (KernelStat.dtype)
DTYPES = {"c10::BFloat16": "bf16", "c10::Half": "f16", "float": "f32", "double": "f64", "long int": "i64",
          "long": "i64", "int": "i32", "bool": "bool", "unsigned char": "u8", "signed char": "i8",
          "c10::Float8_e4m3fn": "f8e4m3", "c10::Float8_e5m2": "f8e5m2"}
#: what joins an op and a kernel's family
SEP = " · "


def _first_template_arg(name: str) -> str:
    """The first template argument of ``name`` (``void cutlass::Kernel2<X>(X::Params)`` -> ``X``), or ""."""
    i = name.find("<")
    if i < 0:
        return ""
    depth, j = 0, i + 1
    for j in range(i + 1, len(name)):
        ch = name[j]
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch in ",>" and not depth:
            break
    return name[i + 1:j].strip()


@lru_cache(maxsize=4096)
def kernel_family(name: str) -> str:
    """What a kernel is, in a few words: its base name without namespaces, template, parameters and the
    ``_kernel`` suffix (``void at::native::vectorized_elementwise_kernel<4, ...>(...)`` ->
    ``vectorized_elementwise``), a vendor kernel its library, architecture and tile (``FAMILIES``:
    ``nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT`` -> ``nvjet_sm90 128x128``)."""
    base = short_kernel(name).replace("<>", "")
    last = base.rsplit("::", 1)[-1].strip() or base
    if last in WRAPPERS:
        inner = _first_template_arg(name.strip().removeprefix("void "))
        if inner:
            last = inner.rsplit("::", 1)[-1]
    for pat, fmt in FAMILIES:
        mt = pat.search(last)
        if mt is not None:
            return fmt.format(*mt.groups())
    if last.endswith("_kernel") and len(last) > len("_kernel"):
        last = last[:-len("_kernel")]
    return last or name


#: ops as people say them, for the labels (the op's full name is in the info box): (pattern, word); the first that
#: matches. At 80 columns ``cudnn_convolution · sm8…`` left the kernel four characters
OP_WORDS = [
    (re.compile(r"^_?scaled_dot_product_\w*attention\w*$"), "sdpa"),
    (re.compile(r"^_?(cudnn_|mkldnn_|miopen_)?convolution(_relu|_add_relu)?$"), "conv"),
    (re.compile(r"^_?(cudnn_|native_|miopen_)?batch_norm(_legit\w*)?$"), "batch_norm"),
    (re.compile(r"^(max_pool\dd)_with_indices$"), "{0}"),
    (re.compile(r"^_(log_)?softmax$"), "{0}softmax"),
]


def op_short(op: str | None) -> str:
    """An op as the kernels' labels name it: ``aten::copy_`` -> ``copy_`` (other namespaces kept), a long one by
    its usual word (``OP_WORDS``: ``aten::cudnn_convolution`` -> ``conv``); "" for None."""
    if not op:
        return ""
    o = op[len("aten::"):] if op.startswith("aten::") and len(op) > len("aten::") else op
    for pat, word in OP_WORDS:
        mt = pat.match(o)
        if mt is not None:
            return word.format(*(g or "" for g in mt.groups()))
    return o


def kernel_label(name: str, op: str | None, extra: str = "") -> str:
    """``op · family`` (``copy_ · unrolled_elementwise``); ``extra`` (an element type, a shape) after the op where
    two kernels would read the same; the family alone for a kernel no op launched."""
    o = op_short(op)
    if extra:
        o = f"{o} {extra}" if o else extra
    fam = kernel_family(name)
    return f"{o}{SEP}{fam}" if o else fam


def dtype_short(dtype: str | None) -> str:
    """An element type in a few characters (``c10::BFloat16`` -> ``bf16``; an opaque ``2-byte`` -> ``2B``)."""
    if not dtype:
        return ""
    mt = re.fullmatch(r"(\d+)-byte", dtype)
    return f"{mt.group(1)}B" if mt else DTYPES.get(dtype, dtype)


def shape_short(shapes) -> str:
    """The first input's shape as ``1x16x1024x1024`` ("" when there is none)."""
    first = shapes[0] if isinstance(shapes, (list, tuple)) and shapes else None
    while isinstance(first, (list, tuple)) and first and isinstance(first[0], (list, tuple)):
        first = first[0]  # a list of tensors (cat): its first
    if isinstance(first, (list, tuple)) and first and all(isinstance(x, int) for x in first):
        return "x".join(str(x) for x in first)
    return ""


def kernel_labels(rows) -> list[str]:
    """The labels of kernels ``rows`` (each ``(name, op, dtype, shapes)``), told apart where two would read the
    same: by the element type where that differs among them, else by the first input's shape, else numbered."""
    out = [kernel_label(n, op) for n, op, _, _ in rows]
    for hint in (lambda r: dtype_short(r[2]), lambda r: shape_short(r[3])):
        groups: dict[str, list[int]] = {}
        for i, lab in enumerate(out):
            groups.setdefault(lab, []).append(i)
        for lab, idx in groups.items():
            if len(idx) < 2:
                continue
            hints = [hint(rows[i]) for i in idx]
            if all(hints) and len(set(hints)) == len(hints):
                for i, h in zip(idx, hints):
                    out[i] = kernel_label(rows[i][0], rows[i][1], h)
    seen: dict[str, int] = {}
    for i, lab in enumerate(out):
        k = seen[lab] = seen.get(lab, 0) + 1
        if k > 1:
            out[i] = f"{lab} #{k}"
    return out


def event_kernel_label(model, ev: int) -> str:
    """``kernel_label`` of GPU event ``ev`` of ``model`` (a trace model): its name and the op that launched it."""
    op = int(model.op[ev])
    return kernel_label(model.name(ev), model.name(op) if op >= 0 else None)
