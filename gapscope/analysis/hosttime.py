"""Who spent a thread's time in an interval: each nanosecond of [a, b) on one CPU thread is credited to
exactly one event, the one running *innermost* at that instant, or to nothing (the thread recorded no
activity). A frame is never credited with time its callees spent.

The rule, per instant t (``ts <= t < end``):

1. the innermost event of the 'cpu' family (aten op, runtime or driver call) when it is not an annotation:
   dispatch, a launch, a synchronising call, host computation inside an op; where Python frames were
   recorded, ranges are looked through: in a range inside an op (``nccl:all_reduce`` in
   ``record_param_comms``) the op is running. Unless the innermost Python frame started after it (same start:
   ends sooner): a frame that starts inside an op is nested in it, whatever depth the model gave either (an op
   that calls into Python: ``TorchDynamo Cache Lookup`` evaluating guards, a custom op's Python body), and a
   frame that starts inside one and outlives it (the ``__exit__`` that closes a ``Pregraph bytecode`` range) is
   the innermost from its start on: the frame runs there (2.). Of the two, the one that started last;
2. else the innermost Python frame (``python_function`` events, built-ins such as ``time.sleep`` or numpy
   functions included): the code that was running, by time (the frame opened last among those open at t;
   ``Python parent id`` only orders frames with the same start and end);
3. else the innermost annotation (``record_function`` range) when no Python frame was recorded, unless it is
   a step range (``ProfilerStep#N``, ``gapscope.step#k``: those wrap a whole step);
4. else nothing: idle (blocked, sleeping in C code, or not traced).

Annotations never take time from a Python frame inside or around them: a ``record_function`` range is a
label around code, not code. The time is exact (integer ns): the interval is cut at every start and end of
the thread's events inside it and each piece goes to one event. ``benchmarks/audit.py`` recomputes the same
numbers from the raw JSON independently.

Every own-time rule of the analysis lives here, as one of these variants:

- ``owners_at``: the rule above at given instants (vectorised); ``step_ranges=True`` credits a step range
  like any other annotation instead of leaving the instant idle.
- ``host_time``: the rule over an interval of one thread: every piece of it credited (the causes' and the
  explorer's "who spent [a, b)"); ``host_times``: the same over many intervals at once.
- ``holder_points``: the rule at ``HOLDER_POINTS`` sample points of each gap, the most common Python frame
  (else annotation, step ranges included) named as the gap's holder (core.py, the python cause).
- ``frame_own_intervals``: one frame's own time as intervals, its calls less its children, where the caller
  says which events count as children (the replay's fused-call what-if: runtime calls, the ops that issue
  them, other user frames; an op that issues nothing is the frame's own host work); ``minus_inside``: the
  subtraction it ends with, of children that lie inside the calls.
- ``nesting_segments``: by nesting alone, of chosen kinds: the event open that started last owns the instant,
  annotations included (ranks/owntime.py's per-frame excess of a late rank, keyed by frame name).

Why ``nesting_segments`` is still a sweep of its own and not ``owners_at`` with a variant. Its rule is
expressible through ``owners_at``'s lookups: of the innermost 'cpu' and innermost Python event at an instant
(stacks.py), the one that started later (same start: the shorter) is the innermost open event, and over every CPU
thread of the 51 sample and third-party traces, each thread whole as the interval, that gives the owner the loop
gives for all 1,062,559 of its segments; it is no slower (hf-generate: 300 ms against the loop's 380 ms), though
ranks/owntime.py would then need a StackIndex, built before the ranks are analysed. What it cannot express is the
loop's dependence on the interval: the loop clips the events to [t0, t1) before ordering them, so where two events
that overlap without nesting are both open at t0, the one that ends sooner counts as the inner one, not the one
that started later. On demo-eager-tp's prefill, rank 0, one interval of ``own_times`` starts while the
``attention`` range (which ends 2.8 µs later) and the built-in call that closes it (started after the range, ends
5.6 µs later) are open: the loop credits the range, the per-instant rule the call. The owner of an instant then
depends on where the caller's interval starts, which no per-instant rule gives; switching changes the two-rank
prefill report's JSON (``others_median_us`` 2.798 -> 0.0 for ``attention``, 2.785 -> 5.583 for the built-in call)
though no report of benchmarks/check_reports_same.py, so the loop stays until that change is made on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..trace.model import Kind
from .intervals import member, subtract, union, uniq
from .thresholds import HOLDER_POINTS

_ANN, _PY = int(Kind.ANNOTATION), int(Kind.PYTHON)


class Owners(NamedTuple):
    """Per instant: the credited ``event`` (the module's rule; -1: idle), and the innermost 'cpu' and Python events
    it was chosen from (-1 where none is open)."""

    event: np.ndarray
    cpu: np.ndarray
    py: np.ndarray


def owners_at(stacks, model, thread: np.ndarray, t: np.ndarray, *, step_ranges: bool = False) -> Owners:
    """The module's rule at instants: for each (thread[i], t[i]), the event credited with that instant.
    Vectorised. ``step_ranges``: a step range with nothing else open under it is credited like any annotation
    (rule 3) instead of leaving the instant idle: the Python holder of a gap (core.py) names it where the
    trace has no Python frames, the capture's own step loop being dropped there by name instead."""
    cpu = stacks.innermost("cpu", thread, t)
    py = stacks.innermost("py", thread, t)
    kind = model.kind
    cpu_ann = (cpu >= 0) & (kind[np.maximum(cpu, 0)] == _ANN)
    # a range inside an op (``nccl:all_reduce`` in ``record_param_comms``) labels the op: the op runs there
    work = np.full(cpu.shape, -1, np.int64)
    look = cpu_ann & (py >= 0)
    if look.any():
        work[look] = stacks.through_annotations(cpu[look], np.broadcast_to(t, cpu.shape)[look])
    ann = cpu_ann
    if not step_ranges:
        # a step range (ProfilerStep#N, gapscope.step#k) wraps a whole step: never the thing that ran
        ann = cpu_ann & ~stacks.flags["step_range"][model.name_id[np.maximum(cpu, 0)]]
    op = np.where((cpu >= 0) & ~cpu_ann, cpu, work)
    # a frame that started inside the op (or call) is nested in it, whatever depth the model gave it (an op that
    # calls into Python: ``TorchDynamo Cache Lookup`` evaluating guards): the frame runs there, not the op.
    # Same start: the shorter is the inner one; the same interval: the op (a frame around the op it calls)
    o, p = np.maximum(op, 0), np.maximum(py, 0)
    ts, end = model.ts_ns, stacks.end
    frame_in = (op >= 0) & (py >= 0) & ((ts[p] > ts[o]) | ((ts[p] == ts[o]) & (end[p] < end[o])))
    who = np.where((op >= 0) & ~frame_in, op, np.where(py >= 0, py, np.where(ann, cpu, -1)))
    return Owners(who, cpu, py)


@dataclass(frozen=True)
class HostTime:
    """Credit of [a, b) on one thread: ``events`` (indices, most time first) and their ``ns``; ``idle_ns``."""

    thread: int
    a: int
    b: int
    events: np.ndarray
    ns: np.ndarray
    idle_ns: int

    def top(self, k: int = 5, mask: np.ndarray | None = None) -> list[tuple[int, int]]:
        """(event, ns) of the first k credited events (those where ``mask[event]`` when given)."""
        ev, ns = self.events, self.ns
        if mask is not None and ev.size:
            keep = mask[ev]
            ev, ns = ev[keep], ns[keep]
        return list(zip(ev[:k].tolist(), ns[:k].tolist()))

    def by_name(self, model, mask: np.ndarray | None = None, k: int = 5) -> list[tuple[int, int]]:
        """(first event, ns) per name, most time first: a function called twice in the interval is one frame
        with both calls' time. With ``mask`` (over events), only names of which some credited event is in it."""
        ev, ns = self.events, self.ns
        if ev.size == 0:
            return []
        nid = model.name_id[ev]
        if mask is not None:
            keep = mask[ev]
            if not keep.any():
                return []
            named = np.zeros(len(model.names), bool)
            named[nid[keep]] = True
            sel = named[nid]
            ev, ns, nid = ev[sel], ns[sel], nid[sel]
        u, first, inv = np.unique(nid, return_index=True, return_inverse=True)
        tot = np.zeros(u.size, np.int64)
        np.add.at(tot, inv, ns)
        o = np.lexsort((u, -tot))
        return list(zip(ev[first[o]][:k].tolist(), tot[o][:k].tolist()))

    def of(self, event: int) -> int:
        hit = np.flatnonzero(self.events == event)
        return int(self.ns[hit[0]]) if hit.size else 0


def _longest(model, thread: int, sl) -> int:
    """The longest event duration on ``thread`` (cached on the model: a property of the loaded trace)."""
    cache = model.__dict__.setdefault("_longest_by_track", {})
    v = cache.get(thread)
    if v is None:
        d = model.dur_ns[sl]
        v = cache[thread] = int(d.max()) if d.size else 0
    return v


def host_time(stacks, model, thread: int, a: int, b: int) -> HostTime:
    """Credit every nanosecond of [a, b) on ``thread`` to one event (see the module's rule)."""
    a, b = int(a), int(b)
    z = np.zeros(0, np.int64)
    if thread < 0 or b <= a:
        return HostTime(thread, a, b, z, z, max(b - a, 0))
    sl = model.track_slice(thread)
    ts = model.ts_ns[sl]
    # every boundary of the thread's events inside (a, b): events are sorted by start on their track, and an
    # event that ends inside (a, b) started before b
    hi = int(ts.searchsorted(b, side="left"))
    # events that end after a started at most the thread's longest duration before it: no need to scan the
    # thread's whole history (one call per gap on a long thread was O(events) each)
    lo = int(ts.searchsorted(a - _longest(model, thread, sl), side="left"))
    s_in = ts[lo:hi]
    e_in = stacks.end[sl.start + lo:sl.start + hi]  # the index's end column: ts + dur, computed once
    cuts = np.concatenate(([a, b], s_in[(s_in > a) & (s_in < b)], e_in[(e_in > a) & (e_in < b)]))
    cuts = uniq(cuts)
    lo_t, hi_t = cuts[:-1], cuts[1:]
    length = hi_t - lo_t
    who = owners_at(stacks, model, np.full(lo_t.shape, thread, np.int64), lo_t).event
    idle = int(length[who < 0].sum())
    k = who >= 0
    if not k.any():
        return HostTime(thread, a, b, z, z, idle)
    u, inv = np.unique(who[k], return_inverse=True)
    tot = np.zeros(u.size, np.int64)
    np.add.at(tot, inv, length[k])
    o = np.lexsort((u, -tot))
    return HostTime(thread, a, b, u[o].astype(np.int64), tot[o], idle)


def host_times(stacks, model, thread, a, b) -> list[HostTime]:
    """``host_time`` of many intervals (``thread[i]``, ``a[i]``, ``b[i]``) at once: the same credit, the rule
    applied once over the pieces of them all (one ``owners_at`` instead of one per interval)."""
    thread = np.asarray(thread, np.int64).tolist()
    a, b = np.asarray(a, np.int64).tolist(), np.asarray(b, np.int64).tolist()
    z = np.zeros(0, np.int64)
    out: list = [None] * len(a)
    LO, HI, TH, SEG = [], [], [], []
    for i, (th, x, y) in enumerate(zip(thread, a, b)):
        if th < 0 or y <= x:
            out[i] = HostTime(th, x, y, z, z, max(y - x, 0))
            continue
        sl = model.track_slice(th)
        ts = model.ts_ns[sl]
        hi = int(ts.searchsorted(y, side="left"))
        lo = int(ts.searchsorted(x - _longest(model, th, sl), side="left"))
        s_in = ts[lo:hi]
        e_in = stacks.end[sl.start + lo:sl.start + hi]
        cuts = uniq(np.concatenate(([x, y], s_in[(s_in > x) & (s_in < y)], e_in[(e_in > x) & (e_in < y)])))
        LO.append(cuts[:-1])
        HI.append(cuts[1:])
        TH.append(np.full(cuts.size - 1, th, np.int64))
        SEG.append(np.full(cuts.size - 1, i, np.int64))
    if not LO:
        return out
    lo_t, hi_t, th_t, seg = (np.concatenate(v) for v in (LO, HI, TH, SEG))
    length = hi_t - lo_t
    who = owners_at(stacks, model, th_t, lo_t).event
    idle = np.zeros(len(a), np.int64)
    np.add.at(idle, seg[who < 0], length[who < 0])
    k = who >= 0
    # per interval: the credited events, most time first (ties: the lower index), as host_time orders them
    sk, wk, lk = seg[k], who[k], length[k]
    o = np.lexsort((wk, sk))
    sk, wk, lk = sk[o], wk[o], lk[o]
    first = np.flatnonzero(np.r_[True, (sk[1:] != sk[:-1]) | (wk[1:] != wk[:-1])]) if sk.size else z
    us, uw = sk[first], wk[first]
    tot = np.add.reduceat(lk, first) if sk.size else z
    o = np.lexsort((uw, -tot, us))
    us, uw, tot = us[o], uw[o], tot[o]
    bounds = np.searchsorted(us, np.arange(len(a) + 1))
    for i, (th, x, y) in enumerate(zip(thread, a, b)):
        if out[i] is None:
            j0, j1 = int(bounds[i]), int(bounds[i + 1])
            if j0 == j1:
                out[i] = HostTime(th, x, y, z, z, int(idle[i]))
            else:
                out[i] = HostTime(th, x, y, uw[j0:j1].astype(np.int64), tot[j0:j1].copy(), int(idle[i]))
    return out


def holder_points(stacks, model, flags, thr: np.ndarray, t0: np.ndarray, tl: np.ndarray):
    """For each gap (thread, t0, t_launch): the Python frame holding the CPU in [t0, tl], the most common
    frame credited (the module's rule) at ``HOLDER_POINTS`` sample points (ties: the lowest event index), and the
    first sample point where it is innermost. Without such frames, the most common annotation credited there
    (``owners_at(step_ranges=True)``: a step range included); the capture's own step loop is not a frame to name. Returns
    (time to take the stack at, event or -1 when no frame is named: then the time is t0). Vectorised over all
    gaps."""
    m = model
    n = t0.shape[0]
    at = t0.astype(np.int64).copy()
    ev = np.full(n, -1, np.int64)
    ok = np.flatnonzero((thr >= 0) & (tl > t0))
    if ok.size == 0:
        return at, ev
    pts = np.linspace(t0[ok], tl[ok] - 1, HOLDER_POINTS, axis=1).astype(np.int64)  # == np.linspace per gap
    th = np.repeat(thr[ok], HOLDER_POINTS).reshape(pts.shape)
    # who held the CPU at each sample point: hosttime's rule (step ranges kept: rule 3 here names them)
    own = owners_at(stacks, m, th.ravel(), pts.ravel(), step_ranges=True)
    who, cpu_in, py_in = (x.reshape(pts.shape) for x in own)
    held = m.kind[np.maximum(who, 0)]
    cand = (who >= 0) & (held == _PY)  # a Python frame ran there, no op or runtime call under it
    scaffold = flags["capture_frame"][m.name_id[np.maximum(py_in, 0)]]
    has_cand = cand.any(axis=1)
    named = cand & ~scaffold
    only_scaffold = has_cand & ~named.any(axis=1)  # the capture's loop only: no frame, the stack at t0
    # no Python frames: the annotation holding the CPU
    ann = (who >= 0) & (held == _ANN) & ~has_cand[:, None]
    for mask, col in ((named, py_in), (ann, cpu_in)):
        r, c = np.nonzero(mask)
        if r.size == 0:
            continue
        e = col[r, c]
        o = np.lexsort((e, r))
        r, e = r[o], e[o]
        new = np.r_[True, (r[1:] != r[:-1]) | (e[1:] != e[:-1])]
        first = np.flatnonzero(new)
        cnt = np.diff(np.r_[first, r.size])
        ur, ue = r[first], e[first]
        # per row: the highest count, then the lowest event
        o = np.lexsort((ue, -cnt, ur))
        ur, ue = ur[o], ue[o]
        top = np.r_[True, ur[1:] != ur[:-1]]
        ur, ue = ur[top], ue[top]
        hit = col[ur] == ue[:, None]
        gi = ok[ur]
        at[gi] = pts[ur, hit.argmax(axis=1)]
        ev[gi] = ue
    keep = ok[only_scaffold]
    at[keep], ev[keep] = t0[keep], -1
    return at, ev


def frame_own_intervals(model, calls, children: np.ndarray):
    """A frame's own time as intervals: its calls ``calls`` = (start, end, thread) arrays, less the time events of
    ``children`` (a mask over all events: which kinds count as the frame's children is the caller's variant) ran
    inside them on the same thread. Only what runs inside a call is a child: an event that encloses one, or is the
    same interval as it, is an ancestor. Returns (start, end, thread) arrays, sorted per thread."""
    m = model
    fs, fe, ft = calls
    S, E, T = [], [], []
    for t in uniq(ft).tolist():
        a_s, a_e = fs[ft == t], fe[ft == t]
        sl = m.track_slice(int(t))
        us, ue = union(a_s, a_e)
        # only the thread's events starting in one of the calls' intervals (the model sorts a thread's events by
        # start) can be inside one: their index ranges, in event order
        if us.size == 0:  # no call of positive length: no own time
            s, e = subtract(a_s, a_e, a_s[:0], a_e[:0])
            S.append(s), E.append(e), T.append(np.full(s.size, t, np.int64))
            continue
        tts = m.ts_ns[sl]
        lo = np.searchsorted(tts, us, side="left")
        hi = np.searchsorted(tts, ue, side="right")
        n = hi - lo
        ev = sl.start + np.repeat(lo - np.concatenate(([0], np.cumsum(n)[:-1])), n) + np.arange(int(n.sum()))
        # the interval each event starts in: the one whose index range holds it (the intervals are disjoint and
        # never touch, so it is the last one starting at or before the event)
        j = np.repeat(np.arange(us.size), n)
        keep = children[ev]
        ev, j = ev[keep], j[keep]
        es, ee = m.ts_ns[ev], m.ts_ns[ev] + m.dur_ns[ev]
        inside = (es >= us[j]) & (ee <= ue[j]) & ~((es == us[j]) & (ee == ue[j]))
        s, e = minus_inside(us, ue, es[inside], ee[inside])
        S.append(s), E.append(e), T.append(np.full(s.size, t, np.int64))
    return np.concatenate(S), np.concatenate(E), np.concatenate(T)


def minus_inside(us, ue, b_s, b_e) -> tuple[np.ndarray, np.ndarray]:
    """``subtract(us, ue, b_s, b_e)`` where [us, ue) are disjoint, sorted, never touching intervals (a ``union``)
    and every interval of b lies inside one of them. Then each interval of a, less the union of the b inside it,
    is the pieces [us, first b start), [a b end, the next b start), ..., [last b end, ue): the starts (us and the
    b ends) and the ends (the b starts and ue) each in increasing order, paired in turn, the empty ones dropped:
    the same maximal intervals ``subtract`` gives, without its sort of every boundary and its two searches."""
    bs, be = union(b_s, b_e)
    if bs.size == 0:
        return us, ue
    st = np.concatenate((us, be))
    st.sort(kind="stable")
    en = np.concatenate((bs, ue))
    en.sort(kind="stable")
    keep = en > st
    return st[keep], en[keep]


def nesting_segments(model, thread: int, t0: int, t1: int, kinds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, owner event or -1) of the thread's time in [t0, t1), cut where the innermost event changes:
    the variant by nesting alone. Of the thread's events of ``kinds`` (positive duration), the one open that
    started last owns each instant (same start: the shorter), whatever its kind: an annotation owns time like a
    frame, and an op owns no time from a Python frame it calls. Cost: a Python loop over the events in [t0, t1)."""
    m = model
    owning = np.array(sorted(int(k) for k in kinds), np.int64)
    sl = m.track_slice(thread)
    idx = np.arange(sl.start, sl.stop, dtype=np.int64)
    idx = idx[member(m.kind[idx], owning) & (m.dur_ns[idx] > 0)]
    ts = m.ts_ns[idx].astype(np.int64)
    te = ts + m.dur_ns[idx].astype(np.int64)
    keep = (te > t0) & (ts < t1)
    idx, ts, te = idx[keep], np.maximum(ts[keep], t0), np.minimum(te[keep], t1)
    o = np.lexsort((-(te - ts), ts))  # by start, the longer (outer) first
    idx, ts, te = idx[o].tolist(), ts[o].tolist(), te[o].tolist()
    s_out, e_out, own = [], [], []
    stack: list[int] = []  # positions in idx, by start; ended ones are dropped lazily when they reach the top
    cur = t0  # the time up to which segments were written

    def close_until(t: int) -> None:  # write the segments of the innermost open events up to t
        nonlocal cur
        while cur < t:
            while stack and te[stack[-1]] <= cur:
                stack.pop()
            top = stack[-1] if stack else -1
            end = min(te[top], t) if top >= 0 else t
            s_out.append(cur)
            e_out.append(end)
            own.append(idx[top] if top >= 0 else -1)
            cur = end

    for j in range(len(idx)):
        close_until(ts[j])
        stack.append(j)
    close_until(t1)
    return np.asarray(s_out, np.int64), np.asarray(e_out, np.int64), np.asarray(own, np.int64)
