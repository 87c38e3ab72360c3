"""Before/after: ``compare(a, b) -> Comparison`` of two analysed traces, step by step. No UI here.

Two captures rarely cover the same amount of work (4 decode steps against 1 ``generate()`` step, 3 profiler
steps against 5), so every number is **per step**: a total divided by the trace's number of steps.

* **Steps** come from gapscope's metadata (the ``gapscope.step#k`` ranges, see window.py), else from torch's
  ``ProfilerStep#N`` ranges, else the analysis window is one step (and ``note`` says so). A kernel belongs to
  the step in which the CPU call that launched it started (its aten op, then its own start, when there is no
  launch; before the first step: the first step; between two steps: the earlier one); a gap to the step of the
  kernel that ends it.
* **Causes**: per cause, idle time and gap count per step in A and B, and ``per_step_delta_us`` (B - A).
* **Kernels** are matched by name and the input shapes of the op that launched them; per step time and count.
* **Findings** are matched by cause and frame (and the kind of finding: queued, short gaps, pageable copies,
  distortion): ``new`` (only in B), ``gone`` (only in A), ``changed`` or ``same`` (per step idle within 5%).
* **Alignment** of one step's GPU kernel sequence in A against B: a longest common subsequence over kernel
  names (``align``), bit-parallel on Python integers (Hyyrö 2004): O(n·m/64) word operations and one bit
  vector per row kept for the trace-back, after the common prefix and suffix are cut off. A step of 10k
  kernels against 10k takes about a tenth of a second; pairs larger than ``MAX_ALIGN_CELLS`` are not aligned
  (the comparison says so). The differences are hunks between matched kernels: ``added`` (only B kernels),
  ``removed`` (only A kernels), ``fused`` (several A kernels replaced by one B kernel in the same place) and
  ``replaced`` (anything else).
* **Step time** (``step``, compare/steptime.py): the verdict "faster / slower / no clear change" on the captures'
  un-profiled step time (their p25–p75 spreads decide), a profiled stand-in where a trace has none, and a
  warning when the two captures' distortions differ (their profiled idle is then not comparable). Every
  rendering opens with it, before kernel time, GPU span and idle.
* **Gaps** (``match_gaps``): a listed gap of B is *new* when the kernel that ends it is aligned to an A kernel
  that no listed gap of A ends, or is not aligned at all; the explorer marks those.

This module matches steps, causes, kernels, findings and gaps; the steps are found in compare/steps.py and
the kernel sequences aligned in compare/align.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

try:  # as in the trace model: orjson where the viewer runs, json on GPU nodes that only have torch
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

from ...trace.model import TraceModel
from .align import Alignment, _seq_names, align, align_names
from .steps import Steps, find_steps
from .steptime import StepTime, StepVerdict, step_verdict
from ..gaps import CAUSES
from ..thresholds import SAME_SHARE

#: the comparison of two traces; its alignment (align.py), steps (steps.py) and un-profiled verdict (steptime.py)
#: are imported from their own modules
__all__ = ["compare", "match_gaps", "Comparison", "CauseDelta", "KernelDelta", "FindingDelta", "StepSummary",
           "GapMatch", "finding_kind"]


# ------------------------------------------------------------------------------------------- the model
@dataclass
class CauseDelta:
    cause: str
    a_idle_ns: int  # totals over the trace's steps
    b_idle_ns: int
    a_count: int
    b_count: int
    a_idle_us_per_step: float
    b_idle_us_per_step: float
    a_count_per_step: float
    b_count_per_step: float
    per_step_delta_us: float  # b - a
    count_delta_per_step: float
    a_by_step_us: list[float] = field(default_factory=list)  # idle of each step
    b_by_step_us: list[float] = field(default_factory=list)


@dataclass
class KernelDelta:
    name: str
    shapes: str | None  # the launching op's input shapes, as recorded, compact JSON ("[[4,1,2048],[2048,2048]]")
    op: str | None
    status: str  # "new" (only in B), "gone" (only in A), "both"
    a_count: int
    b_count: int
    a_ns: int
    b_ns: int
    a_us_per_step: float
    b_us_per_step: float
    per_step_delta_us: float
    a_count_per_step: float
    b_count_per_step: float
    count_delta_per_step: float


@dataclass
class FindingDelta:
    status: str  # "new" | "gone" | "changed" | "same"
    cause: str | None
    frame: str | None
    kind: str  # "" for a gap group, else queued / short / pageable / distortion
    title_a: str | None
    title_b: str | None
    a_idle_us_per_step: float
    b_idle_us_per_step: float
    per_step_delta_us: float
    a_gaps: int = 0
    b_gaps: int = 0


@dataclass
class StepSummary:
    """Per trace: the mean step (totals over its steps divided by their number)."""

    steps: int
    source: str
    names: list[str]
    idle_us_per_step: float
    gaps_per_step: float
    kernels_per_step: float
    kernel_us_per_step: float  # kernel time (sum of durations)
    gpu_span_us_per_step: float  # first kernel start .. last kernel end, averaged over the steps with kernels
    idle_by_step_us: list[float]
    kernels_by_step: list[int]


@dataclass
class Comparison:
    a: StepSummary
    b: StepSummary
    causes: list[CauseDelta]  # biggest |per_step_delta_us| first
    kernels: list[KernelDelta]  # biggest |per_step_delta_us| first
    findings: list[FindingDelta]  # new and gone and changed first, by |per_step_delta_us|
    alignment: Alignment | None
    notes: list[str]
    step: StepVerdict | None = None  # the verdict in un-profiled step time (or its profiled stand-in)
    steps_a: Steps = field(repr=False, default=None)
    steps_b: Steps = field(repr=False, default=None)

    @property
    def idle_delta_us_per_step(self) -> float:
        return self.b.idle_us_per_step - self.a.idle_us_per_step


# ------------------------------------------------------------------------------------------- pieces
def _per(x, n) -> float:
    return float(x) / n if n else 0.0


def _summary(a, st: Steps) -> StepSummary:
    n = st.n
    g = a.gaps
    idle = np.zeros(n, np.int64)
    np.add.at(idle, st.gap_step, g.dur_ns.astype(np.int64))
    kc = np.bincount(st.kernel_step, minlength=n)
    kt = np.zeros(n, np.int64)
    np.add.at(kt, st.kernel_step, a.model.dur_ns[st.kernels].astype(np.int64))
    has = st.gpu_end_ns > 0
    span = float((st.gpu_end_ns - st.gpu_start_ns)[has].mean()) / 1e3 if has.any() else 0.0
    return StepSummary(n, st.source, list(st.names), _per(int(g.dur_ns.sum()), n * 1e3), _per(len(g), n),
                       _per(st.kernels.size, n), _per(int(kt.sum()), n * 1e3), span,
                       [float(x) / 1e3 for x in idle.tolist()], [int(x) for x in kc.tolist()])


def _cause_deltas(a, b, sa: Steps, sb: Steps) -> list[CauseDelta]:
    out = []
    na, nb = sa.n, sb.n

    def by_step(an, st):
        g = an.gaps
        tot = np.zeros((st.n, len(CAUSES)), np.int64)
        cnt = np.zeros((st.n, len(CAUSES)), np.int64)
        np.add.at(tot, (st.gap_step, g.cause.astype(np.intp)), g.dur_ns.astype(np.int64))
        np.add.at(cnt, (st.gap_step, g.cause.astype(np.intp)), 1)
        return tot, cnt

    ta, ca = by_step(a, sa)
    tb, cb = by_step(b, sb)
    for i, c in enumerate(CAUSES):
        ai, bi, ac, bc = int(ta[:, i].sum()), int(tb[:, i].sum()), int(ca[:, i].sum()), int(cb[:, i].sum())
        if not (ac or bc):
            continue
        out.append(CauseDelta(c, ai, bi, ac, bc, _per(ai, na * 1e3), _per(bi, nb * 1e3), _per(ac, na),
                              _per(bc, nb), _per(bi, nb * 1e3) - _per(ai, na * 1e3), _per(bc, nb) - _per(ac, na),
                              [x / 1e3 for x in ta[:, i].tolist()], [x / 1e3 for x in tb[:, i].tolist()]))
    out.sort(key=lambda d: (-abs(d.per_step_delta_us), d.cause))
    return out


_DIMS = b'"Input Dims"'


def _shapes_text(raw: bytes) -> str | None:
    """The "Input Dims" of one op's args (JSON bytes) as compact JSON, or None."""
    if _DIMS not in raw:
        return None
    if _orjson is not None:
        dims = _orjson.loads(raw).get("Input Dims")
        return _orjson.dumps(dims).decode() if dims is not None else None
    dims = json.loads(raw).get("Input Dims")  # pragma: no cover - GPU nodes without orjson
    return json.dumps(dims, separators=(",", ":")) if dims is not None else None


def op_shapes_text(model: TraceModel, op: int) -> str | None:
    """Op event ``op``'s input shapes as the comparison groups kernels by them (compact JSON of its "Input Dims"),
    or None: what the before/after view matches a kernel row by."""
    ai = int(model.args_id[op]) if op >= 0 else -1
    return _shapes_text(model.args[ai]) if ai >= 0 else None


def _kernel_groups(model: TraceModel, k: np.ndarray, op: np.ndarray | None = None) -> dict[tuple, list]:
    """Kernels ``k`` grouped by (name, shapes of the launching op): [count, total ns, op name]. The args of each
    distinct op are decoded once; the grouping itself is a numpy unique over (name id, shapes id). ``op``: each
    kernel's op where it is not ``model.op`` (a graph replay's kernels: the reference run's, graphs.GraphMap)."""
    op = model.op[k] if op is None else np.asarray(op, np.int64)
    uop, inv = np.unique(op, return_inverse=True)
    sid_of: dict[str | None, int] = {None: 0}
    texts: list[str | None] = [None]
    usid = np.zeros(uop.size, np.int64)
    args = model.args
    ai = np.where(uop >= 0, model.args_id[np.maximum(uop, 0)], -1).astype(np.int64)
    offs = getattr(args, "offs", None)
    if offs is not None:  # a BlobList: slice its buffer directly (its __getitem__ per op was half the time)
        data = args.data
        s0, s1 = offs[np.maximum(ai, 0)].tolist(), offs[np.maximum(ai, 0) + 1].tolist()
        raw = lambda i: data[s0[i]:s1[i]]  # noqa: E731
    else:
        raw = lambda i: args[int(ai[i])]  # noqa: E731
    for i, a_i in enumerate(ai.tolist()):
        if a_i < 0:
            continue
        t = _shapes_text(raw(i))
        sid = sid_of.get(t)
        if sid is None:
            sid = sid_of[t] = len(texts)
            texts.append(t)
        usid[i] = sid
    sid = usid[inv.reshape(-1)]
    key = model.name_id[k].astype(np.int64) * len(texts) + sid
    ukey, first, kinv, cnt = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    tot = np.zeros(ukey.size, np.int64)
    np.add.at(tot, kinv.reshape(-1), model.dur_ns[k].astype(np.int64))
    out: dict[tuple, list] = {}
    for u, f, c, t in zip(ukey.tolist(), first.tolist(), cnt.tolist(), tot.tolist()):
        o = int(op[f])
        out[(model.names[u // len(texts)], texts[u % len(texts)])] = [c, t, model.name(o) if o >= 0 else None]
    return out


def _kernel_deltas(a, b, sa: Steps, sb: Steps) -> list[KernelDelta]:
    acc: dict[tuple, list] = {}
    ops: dict[tuple, str | None] = {}
    for side, an, st in ((0, a, sa), (1, b, sb)):
        gm = getattr(an, "graph_map", None)
        op = gm.op_of(an.model, st.kernels) if gm is not None and gm.has_replays else None
        for key, (c, t, opname) in _kernel_groups(an.model, st.kernels, op).items():
            if opname is not None:
                ops.setdefault(key, opname)
            e = acc.get(key)
            if e is None:
                e = acc[key] = [0, 0, 0, 0]
            e[side] += c
            e[2 + side] += t
    # a kernel whose shapes one trace does not record (a CUDA graph replay has no launching op) is matched by
    # its name alone: all its shapes of the other trace become one entry
    by_name: dict[str, list[tuple]] = {}
    for key in acc:
        by_name.setdefault(key[0], []).append(key)
    for name, keys in by_name.items():
        sides = [{k[1] for k in keys if acc[k][s]} for s in (0, 1)]
        if any(sd == {None} for sd in sides) and not (None in sides[0] and None in sides[1]) and all(sides):
            shaped = sorted(x for x in sides[0] | sides[1] if x is not None)
            merged = [sum(acc[k][i] for k in keys) for i in range(4)]
            op = next((ops[k] for k in keys if ops.get(k)), None)
            for k in keys:
                del acc[k]
            key = (name, shaped[0] if len(shaped) == 1 else None)
            acc[key], ops[key] = merged, op
    na, nb = sa.n, sb.n
    out = []
    for (name, shapes), (ac, bc, at, bt) in acc.items():
        status = "new" if ac == 0 else "gone" if bc == 0 else "both"
        aps, bps = _per(at, na * 1e3), _per(bt, nb * 1e3)
        out.append(KernelDelta(name, shapes, ops.get((name, shapes)), status, ac, bc, at, bt, aps, bps, bps - aps,
                               _per(ac, na), _per(bc, nb), _per(bc, nb) - _per(ac, na)))
    out.sort(key=lambda d: (-abs(d.per_step_delta_us), d.name, d.shapes or ""))
    return out


def finding_kind(f) -> str:
    """What sort of finding, beyond its cause and frame (several launch findings have no frame)."""
    ev = f.evidence or {}
    if ev.get("pattern") or ev.get("kind"):  # a round trip; a gpu-wait's or a copy finding's kind
        return str(ev.get("pattern") or ev.get("kind"))
    t = f.title or ""
    if "shorter than" in t:
        return "short"
    if "pageable" in t:
        return "pageable"
    if "profiler slowed" in t:
        return "distortion"
    return ""


def _finding_deltas(a, b, na: int, nb: int) -> list[FindingDelta]:
    def table(an):
        out: dict[tuple, object] = {}
        for f in an.findings:
            key = (f.cause, (f.evidence or {}).get("frame"), finding_kind(f))
            if key in out:  # same key twice (copy kinds): keep them apart by order
                key = key + (sum(1 for k in out if k[:3] == key),)
            out[key] = f
        return out

    fa, fb = table(a), table(b)
    out = []
    for key in list(fa) + [k for k in fb if k not in fa]:
        x, y = fa.get(key), fb.get(key)
        ai = _per(x.idle_ns, na * 1e3) if x is not None else 0.0
        bi = _per(y.idle_ns, nb * 1e3) if y is not None else 0.0
        if x is None:
            status = "new"
        elif y is None:
            status = "gone"
        else:
            status = "same" if abs(bi - ai) <= SAME_SHARE * max(ai, bi) else "changed"

        def gaps(f):
            return int((f.evidence or {}).get("gaps") or 0) if f is not None else 0

        out.append(FindingDelta(status, key[0], key[1], key[2], x.title if x else None, y.title if y else None,
                                ai, bi, bi - ai, gaps(x), gaps(y)))
    rank = {"new": 0, "gone": 0, "changed": 1, "same": 2}
    out.sort(key=lambda d: (rank[d.status], -abs(d.per_step_delta_us)))
    return out


def compare(a, b, align_step: int = 0) -> Comparison:
    """Compare analysis ``a`` (before) with ``b`` (after), per step. ``align_step``: the step of A whose kernel
    sequence is aligned against B's step of the same index (B's last step when B has fewer)."""
    sa, sb = find_steps(a), find_steps(b)
    notes = []
    for lab, st in (("A", sa), ("B", sb)):
        if st.note:
            notes.append(f"{lab}: {st.note}")
    if sa.source != sb.source:
        notes.append(f"the two traces count steps differently (A: {sa.source}, B: {sb.source})")
    if sa.n != sb.n:
        notes.append(f"A has {sa.n} step{'s' if sa.n != 1 else ''}, B {sb.n}: numbers are per step")
    al = None
    if sa.kernels.size or sb.kernels.size:
        al = align(a, b, sa, sb, min(max(align_step, 0), sa.n - 1))
        if al.note:
            notes.append(al.note)
    sv = step_verdict(a, b, sa, sb)  # its own notes (timed in different runs) stay with it: sv.notes
    return Comparison(_summary(a, sa), _summary(b, sb), _cause_deltas(a, b, sa, sb), _kernel_deltas(a, b, sa, sb),
                      _finding_deltas(a, b, sa.n, sb.n), al, notes, sv, sa, sb)


# ------------------------------------------------------------------------------------------------ gaps
@dataclass
class GapMatch:
    """For each gap row of B (``b_rows``, listed only), the matching A row or -1, and whether it is new."""

    b_rows: np.ndarray
    a_rows: np.ndarray  # matching A gap row (any length), or -1
    new: np.ndarray  # bool: no listed gap of A at that place


def match_gaps(a, b, cmp: Comparison, min_listed_a: int | None = None, min_listed_b: int | None = None,
               steps: int | None = None) -> GapMatch:
    """Match B's listed gaps to A's through the kernel alignment of each step both traces have (step k with
    step k; B's steps past A's last step against A's last): the gap that ends at B kernel j matches the gap that
    ends at the A kernel aligned with j."""
    sa, sb = cmp.steps_a, cmp.steps_b
    la = a.config.min_listed_gap_ns if min_listed_a is None else min_listed_a
    lb = b.config.min_listed_gap_ns if min_listed_b is None else min_listed_b
    ga, gb = a.gaps, b.gaps
    b_rows = np.flatnonzero(gb.dur_ns >= lb)
    a_of = np.full(b_rows.size, -1, np.int64)
    # A: kernel event -> gap row it ends
    a_end = {int(e): r for r, e in enumerate(ga.next_idx.tolist()) if e >= 0}
    b_step = sb.gap_step[b_rows]
    for k in range(sb.n if steps is None else min(steps, sb.n)):
        sel = np.flatnonzero(b_step == k)
        if sel.size == 0 or not sa.n:
            continue
        ka, kb = sa.step_kernels(min(k, sa.n - 1)), sb.step_kernels(k)
        pairs, _, _ = align_names(_seq_names(a.model, ka), _seq_names(b.model, kb))
        b_pos = {int(e): j for j, e in enumerate(kb.tolist())}
        to_a = dict(zip(pairs[:, 1].tolist(), pairs[:, 0].tolist()))
        for s in sel.tolist():
            j = b_pos.get(int(gb.next_idx[b_rows[s]]))
            i = to_a.get(j) if j is not None else None
            if i is not None:
                a_of[s] = a_end.get(int(ka[i]), -1)
    new = (a_of < 0) | (ga.dur_ns[np.maximum(a_of, 0)] < la) if len(ga) else np.ones(b_rows.size, bool)
    return GapMatch(b_rows, a_of, np.asarray(new, bool))
