"""Op patterns that make kernels slow, read from the trace alone (torch.profiler's ``_pattern_matcher`` needs the
live profiler object; this works on a file): each is the op calls that form it, their kernel time, the evidence
(ops, shapes, dtypes), the fix, and what the fix leaves of their kernel time.

- ``eager-attention``: a [.., L, S] score matrix materialised by a matmul of Q [.., L, d] with K^T [.., d, S]
  (d at most ``ATTN_MAX_HEAD_DIM``, L and S at least ``attn_min_seq``) and a softmax over it. Every op call
  that reads or writes a tensor of that shape is part of it (the two matmuls, the mask add, the scale, the
  softmax and its dtype casts, the copies). Fix: ``scaled_dot_product_attention`` (flash / memory-efficient);
  it leaves the two matmuls' work in one fused kernel, estimated at the rate the trace's own matmuls of the
  pattern ran (their kernel time kept), everything else removed. Where a mask is added to the scores (an
  operand [b, 1, L, S] that broadcasts over the heads), the frames that build it go too (``mask_builder``: sdpa
  takes ``is_causal`` and never materialises it): host time, the syncs inside (Hugging Face's
  ``torch.tensor(min_dtype)``) and the GPU work they launch.
- ``fp32-matmul``: float32 matmuls and convolutions. Without TF32 (no ``tf32`` in the kernel name) two fixes,
  each estimated: TF32, each call's time scaled by the device's fp32 -> TF32 peak ratio, never below its floor;
  bf16 autocast, scaled by fp32 -> bf16, never below its bf16 floor (``bf16_after_ns``: the FLOPs at the bf16
  peak, the HBM bytes halved). The one that leaves less is recommended, ranks and is replayed. With TF32, bf16,
  scaled by TF32 -> bf16, never below the call's floor. A GPU without known peaks gets no estimate, so no
  finding. A float call whose kernels ran in bf16/fp16 (autocast cast its inputs inside it: activity.run_dtypes)
  is not one.
- ``unaligned-matmul``: fp16/bf16 matmuls with an inner or output dimension not a multiple of 8 (16 bytes):
  tensor-core kernels need aligned rows, so cuBLAS falls back to slower kernels (5633 -> a cutlass sm75 kernel).
  Fix: pad the dimension; estimated as each call at the floor / time ratio the trace's aligned matmuls of the
  same type reach (their time-weighted mean), never slower than it ran.
- ``copies``: large copies and dtype conversions (``copy_``, ``to``, ``contiguous``, ``clone`` moving at least
  ``large_copy_bytes``), with the dtype round trips among them (up to float32 and back); fix: keep one dtype and
  layout; estimated as the copies removed. Evidence in the expert's words (``Pattern.evidence``): ``weight_casts``,
  the casts of a matmul's fp32 weight to bf16/fp16 inside that matmul op (autocast over fp32 weights, again on
  every forward; when they are most of the copied bytes the fix says to cast the model once), and
  ``weight_transposes``, ``w.t().contiguous()`` in a user frame on every call of it (store it transposed once);
  ``weight_recasts``, a weight cast to bf16/fp16 by a user frame outside autocast on every call of it (store it in
  that dtype once); ``weight_clones``, a weight copied as it is (``.clone()``, ``.contiguous()``) on every call of
  a user frame (use it as it is). A user frame's copy is a weight's when a matmul of that frame's call takes it as
  its weight.

- ``tiny-kernel-loop``: a Python loop over elements or experts launching many kernels shorter than their launch
  calls, with data-dependent syncs and a repeated op sequence (patterns_loop.py); its saving is its frame's
  fused what-if (replay/frames.py), not a kernel-time estimate.

- ``optimizer``: an ``Optimizer.step#...`` range whose kernels come from per-parameter ops (at least
  ``optimizer_min_ops`` calls per step, no ``_foreach_`` / ``_fused_`` op): fix ``foreach=True`` / ``fused=True``;
  estimated as each kernel at its op's floor and the per-parameter ops' host dispatch removed.

Calls claimed by one pattern are not counted again by a later one. A pattern is a finding when its kernel time
is at least ``pattern_min_share`` of the window's kernel time (the optimizer's, whose cost is mostly host
dispatch, whatever its kernel time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace.model import TrackKind
from .activity import args_keys
from .floors import CONV_OPS, MATMUL_OPS, peaks_for
from .intervals import isin, member, name_ids, uniq
from .thresholds import ATTN_MAX_HEAD_DIM
from .types import Pattern

HALF = ("c10::BFloat16", "c10::Half")
SOFTMAX_OPS = {"aten::softmax", "aten::_softmax", "aten::_safe_softmax", "aten::log_softmax", "aten::_log_softmax"}
COPY_OPS = {"aten::copy_", "aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone"}
SHORT_TYPE = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32", "double": "fp64", "long int": "int64",
              "int": "int32", "bool": "bool"}


@dataclass
class _Calls:
    """The op calls that launched kernels of the window (one row per call), with their parsed shapes."""

    call: np.ndarray  # op event
    op: list  # op names
    dims: list  # input dims (list of lists, [] where not a tensor)
    types: list  # input types
    kernel_ns: np.ndarray
    floor: np.ndarray  # NaN: none
    dev: np.ndarray
    first: np.ndarray  # kernel position (of cf.k) of its first kernel
    kernels: list  # per call, kernel positions (of cf.k)
    names: list  # per call, the first kernel's name
    #: bool per call: a graph replay's, its op event the eager reference run's (no host dispatch of its own to remove)
    replayed: np.ndarray | None = None


def _gather(a, wanted: set) -> _Calls | None:
    m, cf = a.model, a.call_floors
    pos = np.flatnonzero(cf.call >= 0)
    if pos.size == 0:
        return None
    isw = np.array([n in wanted for n in m.names], bool)
    pos = pos[isw[m.name_id[cf.call[pos]]]]
    if pos.size == 0:
        return None
    # one row per call instance (a graph replay's calls share the reference run's op events: activity.CallFloors)
    inst = cf.inst if cf.inst is not None else cf.call
    o = np.lexsort((m.ts_ns[cf.k[pos]], inst[pos]))
    pos = pos[o]
    c = inst[pos]
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    ends = np.r_[starts[1:], c.size]
    calls = cf.call[pos][starts]
    kn = np.add.reduceat(m.dur_ns[cf.k[pos]], starts) if pos.size else np.zeros(0, np.int64)
    gdev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in m.tracks] + [-1], np.int64)
    first = pos[starts]
    # the args decoded once per distinct (op, args without the per-call ids): shapes repeat every layer and step
    keys = args_keys(m, calls)  # 0, 1, ... in order of first appearance
    u_first = np.unique(keys, return_index=True)[1].tolist()
    decoded = []
    for e in calls[u_first].tolist():
        args = m.event_args(e)
        d = args.get("Input Dims") or []
        t = args.get("Input type") or []
        decoded.append(([x if isinstance(x, list) and all(isinstance(v, int) for v in x) else [] for x in d],
                        [x if isinstance(x, str) else "" for x in t]))
    per_call = [decoded[k] for k in keys.tolist()]
    dims = [r[0] for r in per_call]
    types = [r[1] for r in per_call]
    names = m.names
    ops = [names[i] for i in m.name_id[calls].tolist()]
    return _Calls(calls, ops, dims, types, kn.astype(np.int64), cf.floor[first], gdev[m.track[cf.k[first]]], first,
                  [pos[s:e] for s, e in zip(starts.tolist(), ends.tolist())],
                  [names[i] for i in m.name_id[cf.k[first]].tolist()],
                  cf.replayed[first] if cf.replayed is not None else None)


def _short(t: str) -> str:
    return SHORT_TYPE.get(t, t)


def _ops_evidence(C: _Calls, rows: list[int], limit: int = 8) -> list[dict]:
    """Group the calls by (op, shapes, types): the evidence table, by kernel time."""
    g: dict[tuple, list] = {}
    for i in rows:
        key = (C.op[i], repr([d for d in C.dims[i] if d]), repr([_short(t) for t, d in zip(C.types[i], C.dims[i]) if d]))
        e = g.setdefault(key, [0, 0, i])
        e[0] += 1
        e[1] += int(C.kernel_ns[i])
    out = []
    for (op, _, _), (n, ns, i) in sorted(g.items(), key=lambda kv: -kv[1][1])[:limit]:
        out.append({"op": op, "shapes": [d for d in C.dims[i] if d],
                    "dtypes": [_short(t) for t, d in zip(C.types[i], C.dims[i]) if d], "calls": n,
                    "kernel_us": round(ns / 1e3, 3), "kernel": C.names[i]})
    return out


def _kernels_after(a, C: _Calls, rows: list[int], after_call: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """The kernels of the calls ``rows`` and their durations once fixed: each call's ``after_call`` time shared
    over its kernels in proportion to their durations."""
    m, cf = a.model, a.call_floors
    ks, ds = [], []
    for i in rows:
        p = C.kernels[i]
        k = cf.k[p]
        d = m.dur_ns[k].astype(np.float64)
        tot = d.sum()
        f = (after_call.get(i, 0.0) / tot) if tot > 0 else 0.0
        ks.append(k)
        ds.append(np.floor(d * min(f, 1.0)).astype(np.int64))
    if not ks:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(ks), np.concatenate(ds)


def _outermost_ops(a, calls: np.ndarray) -> np.ndarray:
    """Each op call's outermost enclosing aten op (``aten::softmax`` above ``aten::_softmax``, ``aten::to`` above
    ``aten::copy_``): the host dispatch a fix that removes the op takes away."""
    m = a.model
    from ..trace.model import Kind

    cur = calls.copy()
    for _ in range(64):
        par = m.parent[cur]
        up = (par >= 0)
        up[up] &= (m.kind[par[up]] == int(Kind.CPU_OP))
        if not up.any():
            break
        cur = np.where(up, par, cur)
    return uniq(cur)


def _make(a, C, kind, rows, after_call, title, fix, estimate, remove_host: bool = False) -> Pattern:
    kernels, after = _kernels_after(a, C, rows, after_call)
    kns = int(sum(int(C.kernel_ns[i]) for i in rows))
    # a replayed call's op is the reference run's, after the window: the replay has no host dispatch of it to remove
    gone = np.array([C.call[i] for i in rows if after_call.get(i, 0.0) <= 0.0
                     and not (C.replayed is not None and C.replayed[i])], np.int64)
    host = _outermost_ops(a, gone) if remove_host and gone.size else np.zeros(0, np.int64)
    return Pattern(kind, title, fix, estimate, kns, int(after.sum()), len(rows), _ops_evidence(C, rows), kernels,
                   after, list(rows), host)


def _is_half(t: str) -> bool:
    return t in HALF


def _attention(a, C: _Calls, claimed: set) -> Pattern | None:
    cfg = a.config
    scores: dict[tuple, list] = {}  # (batch, L, S) of QK^T outputs -> those matmul calls
    for i, (op, d) in enumerate(zip(C.op, C.dims)):
        if op not in MATMUL_OPS or op == "aten::linear":
            continue
        mats = [x for x in d if len(x) >= 3]
        if len(mats) < 2:
            continue
        q, kt = mats[-2], mats[-1]
        L, dh, S = q[-2], q[-1], kt[-1]
        if kt[-2] == dh and dh <= ATTN_MAX_HEAD_DIM and L >= cfg.attn_min_seq and S >= cfg.attn_min_seq:
            lead = q[:-2] if len(q) >= len(kt) else kt[:-2]
            scores.setdefault((int(np.prod(lead)), L, S), []).append(i)
    if not scores:
        return None
    sm = set()
    for i, (op, d) in enumerate(zip(C.op, C.dims)):
        if op in SOFTMAX_OPS and d and d[0] and len(d[0]) >= 3:
            x = d[0]
            key = (int(np.prod(x[:-2])), x[-2], x[-1])
            if key in scores:
                sm.add(key)
    if not sm:
        return None
    qk = {i for key in sm for i in scores[key]}
    rows = []
    for i, d in enumerate(C.dims):
        if i in claimed:
            continue
        if i in qk:  # writes the scores (its inputs are Q and K)
            rows.append(i)
            continue
        for x in d:
            if len(x) >= 3 and (int(np.prod(x[:-2])), x[-2], x[-1]) in sm:
                rows.append(i)
                break
    # the matmuls of the pattern (QK^T writes the scores, PV reads them) keep their time: the fused kernel does
    # their FLOPs at about the rate they ran; the rest (softmax, mask, scale, casts, copies) goes
    after = {i: float(C.kernel_ns[i]) for i in rows if C.op[i] in MATMUL_OPS}
    b, L, S = max(sm, key=lambda s: s[0] * s[1] * s[2])
    n_sm = sum(1 for i in rows if C.op[i] in SOFTMAX_OPS)
    title = (f"eager attention: a [{b}, {L}, {S}] score matrix is written, softmaxed and read back by "
             f"{len(rows)} op calls ({n_sm} softmax)")
    fix = ("Use fused attention: torch.nn.functional.scaled_dot_product_attention (Hugging Face: "
           "attn_implementation=\"sdpa\" or \"flash_attention_2\"). The score matrix then never reaches memory: the "
           "softmax, mask, scale, dtype casts and copies around it disappear, and the two matmuls become one "
           "flash-attention kernel.")
    est = ("the fix keeps the two matmuls' kernel time (one fused kernel doing their FLOPs at the rate they ran) "
           "and removes every other op that reads or writes the score matrix, kernels and host dispatch")
    p = _make(a, C, "eager-attention", rows, after, title, fix, est, remove_host=True)
    mb = mask_builder(a, C, rows, sm)
    if mb is not None:
        # the additive mask sdpa never needs (is_causal): its builder frames go, host time, syncs and kernels
        p.mask = mb
        p.host_removed = uniq(np.concatenate((p.host_removed, mb["removed"])))
        p.kernels = np.concatenate([p.kernels, mb["kernels"]])
        p.kernel_after_ns = np.concatenate([p.kernel_after_ns, np.zeros(mb["kernels"].size, np.int64)])
        p.fix += (f" The [{', '.join(str(v) for v in mb['shape'])}] additive mask is not built either "
                  f"(is_causal instead): {mb['what']} removed.")
        p.estimate += (", and the frames that build the additive mask (the ops whose inputs have the mask's shape, "
                       "their innermost common Python frame) removed whole: host time, syncs and kernels")
    return p


#: ops through which a mask reaches the scores: the other operand of these, of the mask's broadcast shape
MASK_APPLY_OPS = {"aten::add", "aten::add_", "aten::masked_fill", "aten::masked_fill_", "aten::where", "aten::sub"}


def _mask_shapes(C: _Calls, rows: list[int], keys: set) -> set:
    """The shapes of the masks added to the scores: an operand [.., L, S] of a score op in ``rows`` whose leading
    dims broadcast over the scores' (the heads: [b, 1, L, S] against [b, h, L, S])."""
    out = set()
    for i in rows:
        if C.op[i] not in MASK_APPLY_OPS:
            continue
        for x in C.dims[i]:
            if len(x) < 3:
                continue
            lead = int(np.prod(x[:-2]))
            for b, L, S in keys:
                if x[-2] == L and x[-1] == S and lead < b and b % max(lead, 1) == 0:
                    out.add(tuple(x))
    return out


def _is_mask_piece(x: list, shapes: set) -> bool:
    """A tensor of the mask's shape or one of the pieces broadcast into it ([.., 1, S] and [.., L, 1])."""
    for M in shapes:
        if len(x) == len(M) and tuple(x[:-2]) == M[:-2] and (x[-2], x[-1]) in (
                (M[-2], M[-1]), (1, M[-1]), (M[-2], 1)):
            return True
    return False


def mask_builder(a, C: _Calls, rows: list[int], keys: set) -> dict | None:
    """The host frames that build an eager-attention's additive mask, from the trace's events alone.

    The mask's shape is the operand of the score add that broadcasts over the heads (``_mask_shapes``). Every
    outermost CPU op of the window with an input of that shape or of its broadcast pieces is a mask op (the
    comparison that makes the causal mask, its expand, the ``where`` that turns it additive, the per-layer
    slices). Each mask op's Python frames that hold none of the pattern's own calls are its builder frames; the
    mask ops that share the outermost of them are one mask, built by their innermost common frame (Hugging Face:
    ``masking_utils.py(539): eager_mask``, with the ``torch.tensor(min_dtype)`` copy and its sync). That frame is
    removed whole when it holds no matmul or convolution (else only the ops). Returns None when no mask is seen;
    else {shape, frames (names), removed (host events), kernels (GPU work they launched), host_ns, syncs,
    kernel_ns, what}."""
    from ..trace.model import GPU_WORK_KINDS, Kind

    m = a.model
    shapes = _mask_shapes(C, rows, keys)
    if not shapes:
        return None
    cpu = int(Kind.CPU_OP)
    ops = np.flatnonzero(m.kind == cpu)
    par = m.parent[ops]
    ops = ops[(par < 0) | (m.kind[np.maximum(par, 0)] != cpu)]
    if getattr(a.window, "clipped", False) and ops.size:
        ops = ops[a.window.cpu_in(m, ops)]
    pat = np.array(sorted({int(C.call[i]) for i in rows}), np.int64)
    # the score ops themselves (and their outermost ops) are the pattern's, not the mask's
    pat_out = set(_outermost_ops(a, pat).tolist()) if pat.size else set()
    hits = []
    # only ops whose args name the mask's last dimension are parsed (a window holds tens of thousands of ops)
    needles = {str(M[-1]).encode() for M in shapes}
    aid = m.args_id[ops]
    for e, ai in zip(ops.tolist(), aid.tolist()):
        if e in pat_out or ai < 0:
            continue
        raw = m.args[ai]  # JSON bytes (a str where the model was built from a list)
        raw = raw.encode() if isinstance(raw, str) else raw
        if not any(n in raw for n in needles):
            continue
        d = m.event_args(e).get("Input Dims") or []
        if any(isinstance(x, list) and len(x) >= 3 and all(isinstance(v, int) for v in x) and _is_mask_piece(x, shapes)
               for x in d):
            hits.append(e)
    if not hits:
        return None
    py = np.flatnonzero(m.kind == int(Kind.PYTHON))
    py_end = m.ts_ns[py] + m.dur_ns[py]
    mm = np.array(sorted(int(C.call[i]) for i, o in enumerate(C.op) if o in MATMUL_OPS or o in CONV_OPS), np.int64)

    def holds(fr, calls):
        """Mask over the frames ``fr``: those that hold one of ``calls`` on their thread."""
        out = np.zeros(fr.size, bool)
        for j, f in enumerate(fr.tolist()):
            c = calls[m.track[calls] == m.track[f]] if calls.size else calls
            if c.size:
                t = m.ts_ns[c]
                out[j] = bool(((t >= m.ts_ns[f]) & (t <= m.ts_ns[f] + m.dur_ns[f])).any())
        return out

    groups: dict[int, list] = {}  # outermost clean frame (or -1 - op: none) -> [op, its clean frames]
    for e in hits:
        t0, t1 = int(m.ts_ns[e]), int(m.ts_ns[e] + m.dur_ns[e])
        enc = py[(m.track[py] == m.track[e]) & (m.ts_ns[py] <= t0) & (py_end >= t1)]
        enc = enc[~holds(enc, pat)] if enc.size else enc
        root = int(enc[np.lexsort((-m.dur_ns[enc], m.ts_ns[enc]))[0]]) if enc.size else -1 - e
        groups.setdefault(root, []).append((e, set(enc.tolist())))
    removed, frames = [], []
    for root, members in groups.items():
        common = set.intersection(*(s for _, s in members))
        if root >= 0 and common:
            c = np.array(sorted(common), np.int64)
            lca = int(c[np.lexsort((m.dur_ns[c], -m.ts_ns[c]))[0]])  # the innermost: latest start, shortest
            if not holds(np.array([lca], np.int64), mm)[0]:
                removed.append(lca)
                frames.append(m.names[m.name_id[lca]])
                continue
        removed.extend(e for e, _ in members)
        frames.extend(m.names[m.name_id[e]] for e, _ in members)
    removed = uniq(np.array(removed, np.int64))
    # the GPU work launched inside them (the mask's kernels, the scalar's copy): gone with them
    work = np.flatnonzero(member(m.kind, [int(k) for k in GPU_WORK_KINDS]) & (m.launch >= 0))
    if getattr(a.window, "clipped", False) and work.size:
        work = work[a.window.gpu_in(m, work)]
    L = m.launch[work]
    inside = np.zeros(work.size, bool)
    for r in removed.tolist():
        inside |= (m.track[L] == m.track[r]) & (m.ts_ns[L] >= m.ts_ns[r]) & (m.ts_ns[L] <= m.ts_ns[r] + m.dur_ns[r])
    kernels = work[inside]
    # syncs inside them: the runtime calls that block the host
    fl = a.flags
    rt = np.flatnonzero(member(m.kind, [int(Kind.RUNTIME), int(Kind.DRIVER)])
                        & (fl["sync_rt"] | fl["blocking_copy"])[name_ids(m)])
    syncs = 0
    for r in removed.tolist():
        syncs += int(((m.track[rt] == m.track[r]) & (m.ts_ns[rt] >= m.ts_ns[r])
                      & (m.ts_ns[rt] + m.dur_ns[rt] <= m.ts_ns[r] + m.dur_ns[r])).sum())
    host = int(m.dur_ns[removed].sum())
    from collections import Counter

    cnt = Counter(frames)
    names = ", ".join(f"`{n}`" + (f" x{c}" if c > 1 else "") for n, c in cnt.most_common(4))
    what = (f"{names} ({len(removed)} host call{'s' if len(removed) != 1 else ''}, {syncs} sync"
            f"{'s' if syncs != 1 else ''}, {kernels.size} GPU launch{'es' if kernels.size != 1 else ''})")
    return {"shape": list(max(shapes, key=lambda s: int(np.prod(s)))), "frames": [{"name": n, "calls": c}
            for n, c in cnt.most_common()], "removed": removed, "kernels": kernels.astype(np.int64),
            "host_ns": host, "syncs": syncs, "kernel_ns": int(m.dur_ns[kernels].sum()), "what": what}


def bf16_after_ns(t_ns: float, frm_tflops: float, flops: float, hbm_bytes: float, p) -> float:
    """A float32 call of ``t_ns`` (which ran at the rate ``frm_tflops`` allows) under bf16 autocast: its time
    scaled by ``frm_tflops`` -> the bf16 tensor-core peak, never below its bf16 floor (its FLOPs at that peak,
    its HBM bytes halved: two-byte elements), never above what it took."""
    from .floors import compute_ns, memory_ns

    t = t_ns * frm_tflops / p[0]
    fl = max(compute_ns(flops, "c10::BFloat16", p) if np.isfinite(flops) else 0.0,
             memory_ns(hbm_bytes / 2, p) if np.isfinite(hbm_bytes) else 0.0)
    return min(max(t, fl), t_ns)


def _fp32(a, C: _Calls, claimed: set) -> Pattern | None:
    m, cf = a.model, a.call_floors
    # a float call whose kernels ran in bf16/fp16 (autocast cast its inputs: activity.run_dtypes) is not one
    has, dts = cf.has.tolist(), cf.dtype.tolist()  # (``has`` is a property over every call: read once)
    ran = [cf.dtypes[dts[j]] if has[j] and cf.dtypes else None for j in C.first.tolist()]
    rows = [i for i, (op, t) in enumerate(zip(C.op, C.types)) if i not in claimed and (op in MATMUL_OPS or op in CONV_OPS)
            and t and t[0] == "float" and not _is_half(ran[i] or "")]
    if not rows:
        return None
    after, bf16 = {}, {}
    no_tf32 = 0
    for i in rows:
        p = peaks_for(m.device_name(int(C.dev[i]))) if C.dev[i] >= 0 else None
        if p is None:
            return None
        tf32 = "tf32" in C.names[i].lower()
        no_tf32 += (not tf32)
        half, t32, f32 = p[0], p[1], p[2]
        frm, to = (t32, half) if tf32 or t32 <= f32 else (f32, t32)
        t = float(C.kernel_ns[i]) * frm / to
        fl = C.floor[i]
        after[i] = max(t, fl) if not np.isnan(fl) else t
        after[i] = min(after[i], float(C.kernel_ns[i]))
        # bf16 autocast from where it ran (the fp32 or the TF32 rate): the bf16 peak, the same bytes halved
        j = int(C.first[i])
        bf16[i] = bf16_after_ns(float(C.kernel_ns[i]), t32 if tf32 else f32, float(cf.flops[j]),
                                float(cf.hbm_bytes[j]), p)
    convs = sum(1 for i in rows if C.op[i] in CONV_OPS)
    what = " and ".join(x for x in (f"{len(rows) - convs} matmuls" if len(rows) > convs else "",
                                    f"{convs} convolutions" if convs else "") if x)
    est_bf16 = ("each call's time scaled by the device's {frm} -> bf16 tensor-core peak ratio, never below its bf16 "
                "floor (its FLOPs at the bf16 peak, its HBM bytes halved)")
    if no_tf32 >= len(rows) / 2:
        title = f"fp32 without TF32: {what} run on the CUDA cores in float32"
        est_tf32 = "each call's time scaled by the device's fp32 -> TF32 peak ratio, never below its floor"
        tf = sum(after.values())
        bf = sum(bf16.values())
        # both fixes, each with its own estimate; the one that leaves less is recommended, ranks and is replayed
        fixes = [{"fix": "bf16", "after_ns": bf, "estimate": est_bf16.format(frm="fp32")},
                 {"fix": "tf32", "after_ns": tf, "estimate": est_tf32}]
        fixes.sort(key=lambda x: x["after_ns"])
        fixes[0]["recommended"] = True
        fixes[1]["recommended"] = False
        best = fixes[0]["fix"]
        tf32_txt = ("let fp32 matmuls use the tensor cores: torch.backends.cuda.matmul.allow_tf32 = True and "
                    "torch.backends.cudnn.allow_tf32 = True (or torch.set_float32_matmul_precision(\"high\"))")
        bf16_txt = ("run the model in bf16 (torch.autocast(\"cuda\", dtype=torch.bfloat16)): the bf16 tensor-core "
                    "rate and half the bytes")
        first, second = (bf16_txt, tf32_txt) if best == "bf16" else (tf32_txt, bf16_txt)
        fix = (first[0].upper() + first[1:] + "; or " + second + "; convolutions also like channels_last "
               "(model.to(memory_format=torch.channels_last)).")
        est = fixes[0]["estimate"] + (" (bf16 autocast, recommended: it leaves less than TF32)" if best == "bf16"
                                      else " (TF32, recommended: it leaves less than bf16)")
        chosen = bf16 if best == "bf16" else after
    else:
        title = f"fp32 matmuls: {what} in TF32 where bf16 would do"
        fix = ("Run the model in bf16 (torch.autocast(\"cuda\", dtype=torch.bfloat16)): twice the tensor-core rate "
               "of TF32 and half the bytes.")
        est = "each call's time scaled by the device's TF32 -> bf16 peak ratio, never below its floor"
        fixes, chosen = None, after
    p = _make(a, C, "fp32-matmul", rows, chosen, title, fix, est)
    if fixes is not None:
        # each fix's figure as the replay gets it: its per-call times shared over the calls' kernels (floored)
        for x in fixes:
            x["after_ns"] = int(_kernels_after(a, C, rows, bf16 if x["fix"] == "bf16" else after)[1].sum())
        p.fixes = fixes
    return p


def _unaligned(a, C: _Calls, claimed: set) -> Pattern | None:
    cfg = a.config

    def dims_of(i):
        mats = [x for x in C.dims[i] if len(x) >= 2]
        if C.op[i] in ("aten::addmm", "aten::baddbmm", "aten::addbmm") and len(mats) >= 3:
            mats = mats[1:3]
        if len(mats) < 2:
            return None
        x, w = mats[0], mats[1]
        if C.op[i] == "aten::linear":
            return x[-1], w[0]
        return x[-1], w[-1]

    half = [i for i, (op, t) in enumerate(zip(C.op, C.types)) if op in MATMUL_OPS and t and _is_half(t[0])]
    bad, good = [], []
    seen: dict = {}  # (op, dims list) -> aligned or not: calls with the same args share one dims list (_gather)
    for i in half:
        key = (C.op[i], id(C.dims[i]))
        al = seen.get(key)
        if al is None:
            kn = dims_of(i)
            al = seen[key] = -1 if kn is None else int(any(v % cfg.matmul_align for v in kn))
        if al >= 0:
            (bad if al else good).append(i)
    bad = [i for i in bad if i not in claimed]
    if not bad:
        return None
    # the efficiency (floor / time) the aligned matmuls reach, time-weighted
    fl_g = C.floor[good].tolist() if good else []
    gf = [i for i, x in zip(good, fl_g) if x == x]  # NaN: no floor
    gt = sum(C.kernel_ns[gf].astype(np.float64).tolist()) if gf else 0
    eff = sum(C.floor[gf].tolist()) / gt if gt > 0 else None
    after = {}
    for i in bad:
        fl = C.floor[i]
        if eff is None or np.isnan(fl) or eff <= 0:
            after[i] = float(C.kernel_ns[i])
        else:
            after[i] = min(float(fl) / eff, float(C.kernel_ns[i]))
    odd = sorted({v for i in bad for v in (dims_of(i) or ()) if v % cfg.matmul_align})
    title = (f"matmul dimensions not multiples of {cfg.matmul_align}: {len(bad)} fp16/bf16 matmul calls with "
             f"{', '.join(str(v) for v in odd[:4])}")
    fix = (f"Pad the dimension to a multiple of {cfg.matmul_align} (64 is better still: e.g. intermediate_size "
           f"{odd[0]} -> {odd[0] + (-odd[0]) % 64}); tensor-core GEMM kernels need rows aligned to 16 bytes, so "
           "cuBLAS falls back to slower kernels for these shapes.")
    est = ("each call at the floor / time ratio the trace's aligned fp16/bf16 matmuls reach "
           + (f"({100 * eff:.0f}%, time-weighted)" if eff else "(none here: no saving estimated)"))
    return _make(a, C, "unaligned-matmul", bad, after, title, fix, est)


def _copies(a, C: _Calls, claimed: set) -> Pattern | None:
    from .floors import ELEM_BYTES

    cfg = a.config
    rows = []
    up, down = set(), set()
    for i, (op, d, t) in enumerate(zip(C.op, C.dims, C.types)):
        if i in claimed or op not in COPY_OPS or not d or not d[0]:
            continue
        nb = int(np.prod(d[0])) * ELEM_BYTES.get(t[0] if t else "", 0)
        if nb < cfg.large_copy_bytes:
            continue
        rows.append(i)
        if op == "aten::copy_" and len(d) > 1 and len(t) > 1:
            dst, src = t[0], t[1]
            if dst == "float" and _is_half(src):
                up.add(repr(d[0]))
            elif _is_half(dst) and src == "float":
                down.add(repr(d[0]))
    if not rows:
        return None
    trips = up & down
    title = f"large copies: {len(rows)} copy or conversion calls of at least {cfg.large_copy_bytes // (1 << 20)} MiB"
    if trips:
        title += f", {len(trips)} shape(s) converted to float32 and back"
    fix = ("Avoid the copies: keep one dtype end to end (no .float() ... .to(bfloat16) around an op; softmax and "
           "norms take dtype= or compute in float32 internally), use views instead of .contiguous() / .clone() where "
           "the next op accepts strided input, or let torch.compile fuse the conversions into their neighbours.")
    est = "the copies removed, kernels and host dispatch"
    casts = _weight_casts(a, C, rows)
    moves = _weight_transposes(a, C, rows)
    recasts, clones = _user_weight_copies(a, C, rows)
    first = []
    total = sum(_row_bytes(C, i) for i in rows)
    if casts is not None and 2 * casts["bytes"] > total:  # most of the copied bytes: autocast's weight casts
        to = "torch.float16" if casts.pop("dtype") == "c10::Half" else "torch.bfloat16"
        short = "fp16" if to == "torch.float16" else "bf16"
        casts["most"], casts["to"] = True, short  # the plan words its action from these (analysis/plan.py)
        first.append(f"Cast the model to {short} once (model.to({to})) instead of letting autocast cast the fp32 "
                     f"weights on every forward ({casts['calls']} weight casts inside "
                     f"{', '.join(casts['ops'])}).")
    elif casts is not None:
        casts.pop("dtype")
        casts["most"] = False
    mine = []  # (bytes, sentence): the user's own copies of weights, the largest first
    if moves is not None:
        where = ", ".join(moves["frames"][:3])
        mine.append((moves["bytes"], f"In {where} the weight is transposed and copied on every call: store it "
                     "transposed once (a parameter or buffer made at load time) instead of .t().contiguous() in the "
                     "forward."))
    if recasts is not None:
        where, to = ", ".join(recasts["frames"][:3]), recasts["to"]
        dt = "torch.float16" if to == "fp16" else "torch.bfloat16"
        mine.append((recasts["bytes"], f"In {where} the weight is cast to {to} on every call: store it in {to} once "
                     f"(model.to({dt})) instead of casting it in the forward."))
    if clones is not None:
        where = ", ".join(clones["frames"][:3])
        mine.append((clones["bytes"], f"In {where} the weight is copied on every call: use it as it is (drop the "
                     ".contiguous()/.clone())."))
    first += [x for _, x in sorted(mine, key=lambda y: -y[0])]
    if first:
        fix = " ".join(first) + " " + fix
    p = _make(a, C, "copies", rows, {}, title, fix, est, remove_host=True)
    if casts is not None:
        p.evidence["weight_casts"] = casts
    if moves is not None:
        p.evidence["weight_transposes"] = moves
    if recasts is not None:
        p.evidence["weight_recasts"] = recasts
    if clones is not None:
        p.evidence["weight_clones"] = clones
    return p


def _row_bytes(C: _Calls, i: int) -> int:
    """The bytes a copy call of the table moves, as ``_copies`` counts them: its first tensor (the destination)."""
    from .floors import ELEM_BYTES

    d, t = C.dims[i], C.types[i]
    return int(np.prod(d[0])) * ELEM_BYTES.get(t[0] if t else "", 0) if d and d[0] else 0


def _enclosing(m, e: int, names: set, depth: int = 6) -> int:
    """The innermost op named in ``names`` enclosing event ``e`` (``depth`` levels up at most), or -1."""
    cur = int(m.parent[e])
    for _ in range(depth):
        if cur < 0:
            return -1
        if m.names[m.name_id[cur]] in names:
            return cur
        cur = int(m.parent[cur])
    return -1


def _weight_operand(op: str, dims: list) -> list | None:
    """The weight of a matmul call's recorded inputs: linear(input, weight, bias), addmm(self, mat1, mat2), the
    second matrix of the others."""
    if op == "aten::linear":
        return dims[1] if len(dims) > 1 and isinstance(dims[1], list) else None
    mats = [x for x in dims if isinstance(x, list) and len(x) >= 2]
    if op in ("aten::addmm", "aten::baddbmm", "aten::addbmm") and len(mats) >= 3:
        return mats[2]
    return mats[1] if len(mats) >= 2 else None


def _weight_casts(a, C: _Calls, rows: list[int]) -> dict | None:
    """Of the copy calls ``rows``: the casts of a matmul's weight from float to bf16/fp16 inside that matmul op
    (``torch.autocast`` over fp32 weights: aten::linear > aten::to > aten::_to_copy > aten::copy_, the weight
    cast again on every forward). {calls, bytes, ops (the matmul ops), dtype (the type most bytes go to)}, or
    None when there are none."""
    from .floors import cast_dtype

    m = a.model
    n, nb, ops, by_type = 0, 0, [], {}
    weights: dict[int, list | None] = {}
    for i in rows:
        op, d, t = C.op[i], C.dims[i], C.types[i]
        e = int(C.call[i])
        if op == "aten::copy_":
            to = t[0] if len(t) > 1 and t[1] == "float" and _is_half(t[0]) else None
            src = d[1] if len(d) > 1 else None
        elif op in ("aten::to", "aten::_to_copy"):
            to, src = cast_dtype(op, m.event_args(e)), d[0]
        else:
            continue
        if not to or not src:
            continue
        mm = _enclosing(m, e, MATMUL_OPS)
        if mm < 0:
            continue
        if mm not in weights:
            weights[mm] = _weight_operand(m.names[m.name_id[mm]], m.event_args(mm).get("Input Dims") or [])
        if weights[mm] != src:  # an activation cast, not the weight's
            continue
        b = _row_bytes(C, i)
        n += 1
        nb += b
        by_type[to] = by_type.get(to, 0) + b
        name = m.names[m.name_id[mm]]
        if name not in ops:
            ops.append(name)
    if not n:
        return None
    return {"calls": n, "bytes": int(nb), "ops": ops, "dtype": max(by_type, key=by_type.get)}


def _transposed(dims, strides) -> bool:
    """A 2-D tensor laid out column-major: the view ``w.t()`` of a contiguous [k, n] weight ([n, k], strides
    [1, n])."""
    return (isinstance(dims, list) and isinstance(strides, list) and len(dims) == 2 and len(strides) == 2
            and all(isinstance(v, int) for v in dims + strides) and dims[0] > 1 and dims[1] > 1
            and strides[0] == 1 and strides[1] >= dims[0])


def _weight_transposes(a, C: _Calls, rows: list[int]) -> dict | None:
    """Of the copy calls ``rows``: ``.t().contiguous()`` (or ``.clone()``) of a 2-D tensor with transposed strides,
    inside a user Python frame, on every call of that frame (as many such copies as the frame has calls in the
    window): a weight transposed and copied on every call. {calls, bytes, ops, frames}, or None."""
    m = a.model
    stacks = _stack_index(a)
    wrap = {"aten::contiguous", "aten::clone"}
    hits = []  # (row, enclosing op, user frame)
    for i in rows:
        op, d = C.op[i], C.dims[i]
        e = int(C.call[i])
        if op == "aten::copy_":
            src = 1
            outer = _enclosing(m, e, wrap)
        elif op in wrap:
            src, outer = 0, e
        else:
            continue
        if outer < 0 or len(d) <= src:
            continue
        # contiguous > clone: the one the user called
        while m.parent[outer] >= 0 and m.names[m.name_id[m.parent[outer]]] in wrap:
            outer = int(m.parent[outer])
        strides = m.event_args(e).get("Input Strides") or []
        if len(strides) <= src or not _transposed(d[src], strides[src]):
            continue
        fr = int(stacks.user_frame(np.array([m.track[e]]), np.array([m.ts_ns[e]]))[0])
        if fr < 0:
            continue
        hits.append((i, outer, fr))
    if not hits:
        return None
    return _summary(a, C, _on_every_call(a, hits))


def _on_every_call(a, hits: list) -> list:
    """Of ``hits`` (row, op, user frame, ...): those whose frame (by name) holds as many of them as it has calls in
    the window (the copy made on every call of it, not once and kept)."""
    m = a.model
    per: dict[int, int] = {}
    for h in hits:
        nid = int(m.name_id[h[2]])
        per[nid] = per.get(nid, 0) + 1
    keep = []
    for nid, cnt in per.items():
        ev = np.flatnonzero(m.name_id == nid)
        if getattr(a.window, "clipped", False) and ev.size:
            ev = ev[a.window.cpu_in(m, ev)]
        if cnt >= ev.size:
            keep.append(nid)
    return [h for h in hits if int(m.name_id[h[2]]) in keep]


def _summary(a, C: _Calls, hits: list) -> dict | None:
    """{calls, bytes, ops (the ops the user called), frames} of the hits (row, op, user frame, ...), or None."""
    if not hits:
        return None
    m = a.model
    ops, frames = [], []
    for h in hits:
        for lst, x in ((ops, m.names[m.name_id[h[1]]]), (frames, m.names[m.name_id[h[2]]])):
            if x not in lst:
                lst.append(x)
    nb = int(sum(_row_bytes(C, h[0]) for h in hits))
    return {"calls": len(hits), "bytes": nb, "ops": ops, "frames": frames}


def _stack_index(a):
    stacks = getattr(a, "stacks", None)
    if stacks is None:  # the kernels' side in a forked child (core._kernel_side) runs before the parent made it
        from .stacks import StackIndex

        stacks = StackIndex(a.model, a.flags)
    return stacks


def _feeds_weight(m, mm_ev: np.ndarray, fr: int, e: int, dims: list) -> bool:
    """Whether a matmul op after event ``e`` inside the call of frame ``fr`` (same thread) takes a tensor of
    ``dims`` (or its transpose) as its weight."""
    t0, t1, tr = int(m.ts_ns[e]), int(m.ts_ns[fr] + m.dur_ns[fr]), int(m.track[fr])
    cand = mm_ev[(m.track[mm_ev] == tr) & (m.ts_ns[mm_ev] > t0) & (m.ts_ns[mm_ev] <= t1)]
    for x in cand.tolist():
        w = _weight_operand(m.names[m.name_id[x]], m.event_args(x).get("Input Dims") or [])
        if w is not None and (w == dims or w == dims[::-1]):
            return True
    return False


def _user_weight_copies(a, C: _Calls, rows: list[int]) -> tuple[dict | None, dict | None]:
    """Of the copy calls ``rows``: a 2-D tensor cast from float to bf16/fp16 (``w.to(torch.bfloat16)``,
    ``w.half()``) or copied as it is (``w.clone()``, ``.contiguous()`` of a strided view, not a transpose: that is
    ``_weight_transposes``) by a user Python frame outside autocast (no matmul op around the copy: those are
    ``_weight_casts``), the copy then taken by a matmul of that frame's call as its weight, on every call of that
    frame. ({calls, bytes, ops, frames, to}, {calls, bytes, ops, frames}), each None when there are none."""
    m = a.model
    stacks = _stack_index(a)
    wrap = {"aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone"}
    mm_ev = None  # the matmul op events, found when a candidate needs them
    casts, clones = [], []
    for i in rows:
        d, t = C.dims[i], C.types[i]
        if C.op[i] != "aten::copy_" or len(d) < 2 or len(t) < 2 or len(d[1]) != 2 or d[0] != d[1]:
            continue
        cast = t[1] == "float" and _is_half(t[0])
        if not cast and t[0] != t[1]:
            continue
        e = int(C.call[i])
        if _enclosing(m, e, MATMUL_OPS) >= 0:
            continue
        outer = _enclosing(m, e, wrap)
        if outer < 0:
            continue
        while m.parent[outer] >= 0 and m.names[m.name_id[m.parent[outer]]] in wrap:
            outer = int(m.parent[outer])
        if not cast:
            strides = m.event_args(e).get("Input Strides") or []
            if len(strides) > 1 and _transposed(d[1], strides[1]):
                continue
        fr = int(stacks.user_frame(np.array([m.track[e]]), np.array([m.ts_ns[e]]))[0])
        if fr < 0:
            continue
        if mm_ev is None:
            mm_ev = np.flatnonzero(np.array([n in MATMUL_OPS for n in m.names], bool)[name_ids(m)])
        if not _feeds_weight(m, mm_ev, fr, e, d[1]):
            continue
        (casts if cast else clones).append((i, outer, fr, t[0]))
    casts, clones = _on_every_call(a, casts), _on_every_call(a, clones)
    out = _summary(a, C, casts)
    if out is not None:
        by: dict[str, int] = {}
        for h in casts:
            by[h[3]] = by.get(h[3], 0) + _row_bytes(C, h[0])
        out["to"] = "fp16" if max(by, key=by.get) == "c10::Half" else "bf16"
    return out, _summary(a, C, clones)


def _optimizer(a, claimed_kernels: np.ndarray) -> Pattern | None:
    """``Optimizer.step#...`` ranges whose kernels come from per-parameter ops (no ``_foreach_`` / ``_fused_`` op
    inside): a Python loop over the parameters, one small kernel per op and parameter."""
    m, cf, cfg = a.model, a.call_floors, a.config
    names = [i for i, n in enumerate(m.names) if n.startswith("Optimizer.step#")]
    if not names:
        return None
    rng = np.flatnonzero(isin(m.name_id, np.array(names, m.name_id.dtype)) & (m.dur_ns > 0))
    if rng.size == 0:
        return None
    L = m.launch[cf.k]
    inside = np.zeros(cf.k.size, bool)
    for r in rng.tolist():
        t0, t1, tr = int(m.ts_ns[r]), int(m.ts_ns[r] + m.dur_ns[r]), int(m.track[r])
        ok = L >= 0
        lt = np.where(ok, L, 0)
        inside |= ok & (m.track[lt] == tr) & (m.ts_ns[lt] >= t0) & (m.ts_ns[lt] < t1)
    inside &= ~isin(cf.k, claimed_kernels) & (cf.call >= 0)
    if not inside.any():
        return None
    calls = uniq(cf.call[inside])
    opn = [m.names[m.name_id[c]] for c in calls.tolist()]
    if any("_foreach_" in n or "_fused_" in n for n in opn):
        return None
    n_steps = int(rng.size)
    if calls.size < cfg.optimizer_min_ops * n_steps:
        return None
    ks = cf.k[inside]
    kns = int(m.dur_ns[ks].sum())
    # no floor (an unknown GPU, an op without a cost model): no kernel saving is claimed for it
    fl = np.where(np.isnan(cf.floor[inside]), np.inf, cf.floor[inside])
    # the fused update moves at least the bytes the per-parameter ops move: each kernel at most at its call's
    # floor (shared over the call's kernels), none above its recorded time
    after = np.minimum(np.floor(fl * m.dur_ns[ks] / np.maximum(
        np.bincount(np.searchsorted(calls, cf.call[inside]), weights=m.dur_ns[ks])[np.searchsorted(calls, cf.call[inside])],
        1)), m.dur_ns[ks]).astype(np.int64)
    from collections import Counter

    cnt = Counter(opn)
    opt = m.names[m.name_id[rng[0]]].split("#", 1)[1]
    ops = [{"op": o, "shapes": [], "dtypes": [], "calls": c, "kernel_us": round(float(m.dur_ns[ks][isin(
        cf.call[inside], calls[np.array([x == o for x in opn])])].sum()) / 1e3, 3), "kernel": ""}
           for o, c in cnt.most_common(8)]
    title = (f"optimizer without foreach/fused: {opt} runs {calls.size // n_steps} per-parameter op calls per "
             f"optimizer step ({len(cnt)} kinds of op, {n_steps} step{'' if n_steps == 1 else 's'})")
    fix = ("Use the multi-tensor optimizer: torch.optim.<Optimizer>(params, foreach=True), or fused=True where the "
           "optimizer has it (Adam, AdamW, SGD on CUDA): one kernel updates many parameters instead of one small "
           "kernel per op and parameter, and the host stops dispatching them one by one.")
    est = ("each kernel at most at its op's floor (a fused update moves the same bytes once; kept as recorded where "
           "the op has no floor), and the per-parameter ops' host dispatch removed")
    host = _outermost_ops(a, calls)
    return Pattern("optimizer", title, fix, est, kns, int(after.sum()), int(calls.size), ops, ks, after, [], host)


WANTED = MATMUL_OPS | set(CONV_OPS) | SOFTMAX_OPS | COPY_OPS | {
    "aten::add", "aten::add_", "aten::mul", "aten::div", "aten::masked_fill", "aten::masked_fill_", "aten::where",
    "aten::dropout", "aten::native_dropout", "aten::sub", "aten::exp"}


def find_patterns(a) -> list[Pattern]:
    """The patterns of the analysis window whose kernel time is at least ``pattern_min_share`` of it."""
    k = a.call_floors.k
    if k.size == 0:
        return []
    total = int(a.model.dur_ns[k].sum())
    C = _gather(a, WANTED)
    if C is None or total <= 0:
        return []
    out, claimed = [], set()
    for fn in (_attention, _fp32, _unaligned, _copies):
        p = fn(a, C, claimed)
        if p is None or p.kernel_ns < a.config.pattern_min_share * total:
            continue
        claimed |= set(p.rows)
        out.append(p)
    taken = np.concatenate([p.kernels for p in out]) if out else np.zeros(0, np.int64)
    p = _optimizer(a, taken)  # its cost is mostly host dispatch: no kernel-share threshold
    if p is not None:
        out.append(p)
    from .patterns_loop import loop_patterns

    out.extend(loop_patterns(a))  # host-bound too: its saving is its frame's fused what-if, no kernel share
    out.sort(key=lambda p: -p.saving_ns)
    return out


def pattern_extra_lines(ev: dict, code_fn, esc_fn, indent: str) -> list[str]:
    """An op pattern's further evidence, the same words in every view: the additive mask's builders that the
    eager-attention fix removes, and each fp32 fix with its own estimate."""
    from .units import fmt_ns

    out = []
    mk = ev.get("mask")
    per = " per step" if ev.get("measured_steps") else ""
    if mk:
        fr = ", ".join(code_fn(x["name"]) + (f" x{x['calls']}" if x["calls"] > 1 else "") for x in mk["frames"][:3])
        shp = ",".join(str(v) for v in mk["shape"])
        out.append(f"{indent}- mask {code_fn('[' + shp + ']')} built by {fr}: {fmt_ns(int(mk['host_per_step_us'] * 1e3))} "
                   f"of host time{per}, {mk['syncs']} sync{'s' if mk['syncs'] != 1 else ''}, "
                   f"{mk['gpu_launches']} GPU launches ({fmt_ns(int(mk['kernel_us'] * 1e3))}): removed by the fix  ")
    for x in ev.get("fixes") or []:
        out.append(f"{indent}- fix {x['fix']}{' (recommended)' if x['recommended'] else ''}: leaves "
                   f"{fmt_ns(int(x['after_us'] * 1e3 / max(ev.get('steps', 1), 1)))}, "
                   f"−{fmt_ns(int(x['kernel_saving_per_step_us'] * 1e3))} of kernel time{per} "
                   f"({esc_fn(x['estimate'])})  ")
    return out
