"""Who spent a thread's time in an interval: each nanosecond of [a, b) on one CPU thread is credited to
exactly one event, the one running *innermost* at that instant, or to nothing (the thread recorded no
activity). A frame is never credited with time its callees spent.

The rule, per instant t (``ts <= t < end``):

1. the innermost event of the 'cpu' family (aten op, runtime or driver call) when it is not an annotation:
   dispatch, a launch, a synchronising call, host computation inside an op; where Python frames were
   recorded, ranges are looked through: in a range inside an op (``nccl:all_reduce`` in
   ``record_param_comms``) the op is running;
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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace.model import Kind

_ANN = int(Kind.ANNOTATION)


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
            sel = np.isin(nid, nid[keep])
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
    end = ts + model.dur_ns[sl]
    # every boundary of the thread's events inside (a, b): events are sorted by start on their track, and an
    # event that ends inside (a, b) started before b
    hi = int(np.searchsorted(ts, b, side="left"))
    # events that end after a started at most the thread's longest duration before it: no need to scan the
    # thread's whole history (one call per gap on a long thread was O(events) each)
    lo = int(np.searchsorted(ts, a - _longest(model, thread, sl), side="left"))
    s_in = ts[lo:hi]
    e_in = end[lo:hi]
    cuts = np.concatenate(([a, b], s_in[(s_in > a) & (s_in < b)], e_in[(e_in > a) & (e_in < b)]))
    cuts = np.unique(cuts)
    lo_t, hi_t = cuts[:-1], cuts[1:]
    length = hi_t - lo_t
    th = np.full(lo_t.shape, thread, np.int64)
    cpu = stacks.innermost("cpu", th, lo_t)
    py = stacks.innermost("py", th, lo_t)
    kind = model.kind
    cpu_ann = (cpu >= 0) & (kind[np.maximum(cpu, 0)] == _ANN)
    # a step range (ProfilerStep#N, gapscope.step#k) wraps a whole step: never the thing that ran
    step = cpu_ann & stacks.flags["step_range"][model.name_id[np.maximum(cpu, 0)]]
    # a range inside an op (``nccl:all_reduce`` in ``record_param_comms``) labels the op: the op runs there
    work = np.where(cpu_ann & (py >= 0), stacks.through_annotations(cpu, lo_t), -1)
    who = np.where((cpu >= 0) & ~cpu_ann, cpu,
                   np.where(work >= 0, work, np.where(py >= 0, py, np.where(cpu_ann & ~step, cpu, -1))))
    idle = int(length[who < 0].sum())
    k = who >= 0
    if not k.any():
        return HostTime(thread, a, b, z, z, idle)
    u, inv = np.unique(who[k], return_inverse=True)
    tot = np.zeros(u.size, np.int64)
    np.add.at(tot, inv, length[k])
    o = np.lexsort((u, -tot))
    return HostTime(thread, a, b, u[o].astype(np.int64), tot[o], idle)
