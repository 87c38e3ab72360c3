"""Own time per frame on one CPU thread inside given intervals: what the thread was doing, innermost first.

At every instant of a thread the innermost open event (the one that started last and has not ended: a Python
frame, an op, a runtime call, an annotation) owns the time; an event's **own time** inside [t0, t1) is the part
of the interval it owned, exclusive of its children. Built-in frames count like any other (``time.sleep``
owns the time it slept). Time no event covered is owned by ``NOTHING`` (the thread recorded nothing: without
Python stacks, that is where a sleep or pure-Python work shows). Time inside the collective API (any
``torch/distributed/`` Python frame or collective op, with everything under it) is owned by ``COMM``: that is
communication and waiting for the other ranks (gloo's ``work.wait()``), not the rank's own work. Frames are
keyed by ``display_frame`` of their name (a built-in method loses its ``object at 0x...`` tail, so the same call
has the same key on every rank).

The cut is hosttime.py's nesting variant (``nesting_segments``). Cost: one pass over the thread's events that
overlap the intervals (Python loop, O(events)), then a searchsorted and a bincount per interval.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace.model import CPU_NEST_KINDS, Kind, TraceModel
from ..hosttime import nesting_segments
from ..intervals import union
from ..names import COLLECTIVE_OP_RE, display_frame

#: the key of time in which the thread recorded no event
NOTHING = "(no event recorded)"
#: the key of time inside the collective API (a ``torch/distributed/`` Python frame, or a collective op or
#: range): communication and waiting for the other ranks (``work.wait()`` on gloo), not the rank's own work
COMM = "(inside collective calls)"
_COMM_FRAME_RE = re.compile(r"(^|/)torch/distributed/")
#: the kinds that own time here: Python frames, ops, runtime and driver calls, and annotations alike
OWNING_KINDS = (Kind.PYTHON, *CPU_NEST_KINDS)


def _comm_spans(model: TraceModel, thread: int, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
    """The union of the thread's collective-API events (torch/distributed frames, collective ops) in [t0, t1)."""
    m = model
    sl = m.track_slice(thread)
    idx = np.arange(sl.start, sl.stop, dtype=np.int64)
    hit = np.array([bool(_COMM_FRAME_RE.search(n) or COLLECTIVE_OP_RE.match(n)) for n in m.names], bool)
    idx = idx[hit[m.name_id[idx]] & (m.dur_ns[idx] > 0)]
    a = m.ts_ns[idx].astype(np.int64)
    b = a + m.dur_ns[idx].astype(np.int64)
    keep = (b > t0) & (a < t1)
    return union(a[keep], b[keep])


def own_times(model: TraceModel, thread: int, intervals: list[tuple[int, int]]) -> list[dict[str, int]]:
    """Per interval [t0, t1): {frame key: own time ns}; every interval's values sum to t1 - t0."""
    if not intervals:
        return []
    lo = min(a for a, _ in intervals)
    hi = max(b for _, b in intervals)
    if hi <= lo:
        return [{} for _ in intervals]
    s, e, own = nesting_segments(model, thread, lo, hi, OWNING_KINDS)
    # key per name (not per segment): -1 (nothing) and the owners' name ids
    nid = np.where(own >= 0, model.name_id[np.maximum(own, 0)].astype(np.int64), -1)
    names, inv = np.unique(nid, return_inverse=True)
    keys = [NOTHING if n < 0 else display_frame(model.names[int(n)]) for n in names.tolist()]
    uniq = sorted(set(keys) | {COMM})
    pos = {k: i for i, k in enumerate(uniq)}
    code = np.array([pos[k] for k in keys], np.int64)[inv.reshape(-1)]
    cs, ce = _comm_spans(model, thread, lo, hi)
    if cs.size:  # segments inside the collective API
        k = np.searchsorted(cs, s, "right") - 1
        code[(k >= 0) & (s < ce[np.maximum(k, 0)])] = pos[COMM]
    out = []
    for a, b in intervals:
        i0 = int(np.searchsorted(e, a, "right"))
        i1 = int(np.searchsorted(s, b, "left"))
        if i1 <= i0:
            out.append({})
            continue
        d = np.minimum(e[i0:i1], b) - np.maximum(s[i0:i1], a)
        tot = np.zeros(len(uniq), np.int64)
        np.add.at(tot, code[i0:i1], d)
        out.append({uniq[k]: int(tot[k]) for k in np.flatnonzero(tot > 0).tolist()})
    return out
