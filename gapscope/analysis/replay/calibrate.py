"""Calibration of a replay to the trace's un-profiled time: the number of steps the window holds (``_steps``) and
the per-event profiler overhead ``c`` that makes the replayed span equal the un-profiled one (``_calibrate``)."""

from __future__ import annotations

import numpy as np

from ...trace.model import Kind
from ..intervals import isin, uniq
from ..thresholds import CAL_SLACK
from .model import Replay

#: a per-event overhead that takes all recorded host time off (calibration's upper end)
NO_HOST = 1e12


def steps_of(a) -> int:
    """Steps in the analysis window: the capture's step ranges, else torch.profiler's ProfilerStep#N, else 1."""
    w = a.window
    n = len(set(w.steps)) if getattr(w, "clipped", False) else 0
    if n:
        return n
    # other traces: torch.profiler's ProfilerStep#N ranges, when the schedule recorded some
    m = a.model
    ps = [i for i, nm in enumerate(m.names) if nm.startswith("ProfilerStep#")]
    if ps:
        idx = np.flatnonzero(isin(m.name_id, np.array(ps, np.int32)) & (m.kind == int(Kind.ANNOTATION)))
        if idx.size:
            return int(uniq(m.name_id[idx]).size)
    return 1


#: the name the older modules use
_steps = steps_of


def _calibrate(r: Replay, target: float, dev: int, rtol: float = 5e-4) -> float:
    """The per-event overhead c (ns) that makes the replayed span of ``dev`` equal ``target`` (within rtol)."""

    def span(c):
        return r.span(r.run(None, c)).get(dev, 0)

    s0 = span(0.0)
    if s0 <= target:
        return 0.0
    if span(NO_HOST) >= target:  # even without any host time the replay is longer: take it all off
        return NO_HOST
    # taking c off each of n host events shortens the span by at most c * n: c is at least (s0 - target) / n
    n = sum(int(v.size) for v in r.host_ev.values()) or 1
    lo = (s0 - target) / n
    hi = 2 * lo + 1.0
    while span(hi) > target and hi < 1e9:
        lo, hi = hi, hi * 2
    for _ in range(40):
        mid = (lo + hi) / 2
        sm = span(mid)
        if abs(sm - target) <= rtol * target:
            return mid
        if sm > target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1.0:
            break
    return hi
