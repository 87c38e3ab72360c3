"""What several fixes buy together: one replay with all of them applied at once (the plan's figure), not a sum of
the figures each buys alone (replay/__init__.py ``project`` keeps what each fix removes; analysis/plan.py asks).

Each finding's own fix is what ``fixes.fix_for`` (or the round trip's ``frames.round_trip_fix``) removes: host
intervals, shortened kernels, calls that no longer wait, items dropped. A frame as one fused GPU call is its whole
subtree of host time out, its GPU work run as graph nodes, one op's dispatch per call in its place
(``frames.frame_parts``). The union of them all is replayed once; with the step as one CUDA graph among them, the
graph's figure (every GPU item back to back, the kernel fixes applied to their durations) is taken when it is the
shorter. A figure is per step, of the slowest device, against the same calibrated base as each fix's."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..intervals import uniq
from .model import Replay


@dataclass
class FixParts:
    """What one finding's fix changes in the replay (the arguments of ``Replay.run``, in pieces)."""
    iv: tuple | None = None  # (start, end, thread) host intervals removed
    dur: np.ndarray | None = None  # the items' durations after the fix (``Replay.items`` order)
    nowait: np.ndarray | None = None  # calls that no longer wait for the GPU
    drop: np.ndarray | None = None  # items that no longer run (mask)
    counted: tuple | None = None  # (start, end, thread) host intervals removed whose events keep their overhead


@dataclass
class Together:
    """A replay kept for the plan: ``saving_ns(parts, frames, graph)`` replays the fixes in ``parts`` (finding id ->
    FixParts) and the frames in ``frames`` (each as one fused GPU call) all at once, and the step as one CUDA graph
    too when ``graph``."""
    a: object
    r: Replay
    c: float
    base_step: float
    steps: int
    keep: dict = field(default_factory=dict)  # device -> ns of dependency waits a graph keeps

    def saving_ns(self, parts: list[FixParts], frames: list[str] = (), graph: bool = False) -> int:
        from .frames import frame_parts

        r = self.r
        S, E, T = [], [], []
        dur = None
        nowait, drop, fuse, insert = [], None, None, {}
        CS, CE, CT = [], [], []
        for p in parts:
            if p.counted is not None:
                CS.append(np.asarray(p.counted[0], np.int64)), CE.append(np.asarray(p.counted[1], np.int64))
                CT.append(np.asarray(p.counted[2], np.int64))
            if p.iv is not None:
                S.append(np.asarray(p.iv[0], np.int64)), E.append(np.asarray(p.iv[1], np.int64))
                T.append(np.asarray(p.iv[2], np.int64))
            if p.dur is not None:
                dur = p.dur.copy() if dur is None else np.minimum(dur, p.dur)
            if p.nowait is not None:
                nowait.append(np.asarray(p.nowait, np.int64))
            if p.drop is not None:
                drop = p.drop.copy() if drop is None else drop | p.drop
        for name in frames:
            got = frame_parts(self.a, r, name, self.c)
            if got is None:
                continue
            iv, fz, ins = got
            S.append(iv[0]), E.append(iv[1]), T.append(iv[2])
            fuse = fz.copy() if fuse is None else fuse | fz
            for t, (pts, ns) in ins.items():
                if t in insert:
                    insert[t] = (np.concatenate([insert[t][0], pts]), np.concatenate([insert[t][1], ns]))
                else:
                    insert[t] = (pts, ns)
        counted = (np.concatenate(CS), np.concatenate(CE), np.concatenate(CT)) if CS else None
        z = np.zeros(0, np.int64)
        removed = r.removal(np.concatenate(S) if S else z, np.concatenate(E) if S else z,
                            np.concatenate(T) if S else z, counted) if S or CS else None
        end = r.run(removed, self.c, dur, np.concatenate(nowait) if nowait else None, drop, fuse, insert or None)
        proj = max(r.span(end).values()) / self.steps
        if graph:
            proj = min(proj, self.graph_step(dur))
        return int(round(max(self.base_step - proj, 0.0)))

    def graph_step(self, dur: np.ndarray | None) -> float:
        """The step as one CUDA graph (``Replay.graph``) with the items' durations ``dur`` (the kernel fixes): per
        device its longest stream back to back at the graph gap, never less than its recorded busy time less what
        the fixes took off its items, plus the waits a graph keeps; per step, of the slowest device."""
        r = self.r
        if dur is None:
            return max(r.graph(self.keep).values()) / self.steps
        busy = r.floor()
        out = []
        for dv in r.devices:
            sel = r.in_window & (r.dev == dv)
            if not sel.any():
                continue
            best = 0
            for t in uniq(r.trk[sel]).tolist():
                ss = sel & (r.trk == t)
                best = max(best, int(dur[ss].sum()) + int(ss.sum()) * r.graph_gap_ns)
            cut = int(r.dur[sel].sum()) - int(dur[sel].sum())
            out.append(max(best, busy.get(dv, 0) - cut) + int(self.keep.get(dv, 0)))
        return max(out) / self.steps if out else 0.0
