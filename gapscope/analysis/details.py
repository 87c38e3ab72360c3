"""One gap's detail on demand (``GapDetails``, an analysis' ``details``): the stack its cause points to, the stack
when the GPU went idle and the launch stack, the CPU breakdown, the cause's own evidence (its registry entry's
``gather``) and the sentence explaining it; the frames findings group by, taken for many gaps at once
(``signatures``); the one call, op or range holding a gap (``holder_of``) and the Python frame holding the CPU in a
Python-held gap (``holder``). Kept apart from the pipeline (core.py) that owns it: made once per gap, cached here."""

from __future__ import annotations

import numpy as np

from . import causes
from .gaps import CAUSES
from .stacks import signature_frame
from .types import GapContext, GapDetail
from .units import fmt_ns


class GapDetails:
    """The details of analysis ``a``'s gaps; ``held``: per gap row the classifier's one holder (event, own ns, of
    which ns; ``gaps.one_holder``)."""

    def __init__(self, a, held: tuple) -> None:
        self.a = a
        self._held = held
        self._made: dict[int, GapDetail] = {}
        #: gap row -> (time, event) of ``holder_points``, for the Python-held gaps whose frame was taken
        self._holders: dict[int, tuple[int, int]] = {}

    def detail(self, i: int) -> GapDetail:
        i = int(i)
        d = self._made.get(i)
        if d is None:
            d = self._made[i] = self._build(i)
        return d

    def prefetch(self, rows) -> None:
        """Ready at once what ``detail`` of each row will ask gap by gap: the host time of the python gaps
        (``Evidence.prefetch_host_times``)."""
        g = self.a.gaps
        rows = np.asarray(rows, np.int64)
        py = rows[g.cause[rows] == causes.code(causes.PYTHON)]
        self.a.evidence.prefetch_host_times(g.thread[py], g.start_ns[py], g.t_launch_ns[py])

    def _build(self, i: int) -> GapDetail:
        a = self.a
        m, g, st = a.model, a.gaps, a.stacks
        cause = CAUSES[int(g.cause[i])]
        t0, t1 = int(g.start_ns[i]), int(g.end_ns[i])
        nxt, L, thr, tl = int(g.next_idx[i]), int(g.launch_idx[i]), int(g.thread[i]), int(g.t_launch_ns[i])
        bd = {k: int(v[i]) for k, v in g.breakdown.items()}
        nk = m.name(nxt) if nxt >= 0 else "(end of window)"
        launch = m.name(L) if L >= 0 else None
        op_i = int(m.op[nxt]) if nxt >= 0 else -1
        next_op = m.name(op_i) if op_i >= 0 else None
        launch_stack = st.stack_at(thr, int(m.ts_ns[L])) if L >= 0 and thr >= 0 else []
        dur = t1 - t0
        c = causes.get(cause)
        x = GapContext(i=i, t0=t0, t1=t1, tl=tl, thr=thr, L=L, nxt=nxt, dev=int(g.device[i]),
                       launch_stack=launch_stack, bd=bd)
        if c.gather is not None:
            stack, extra = c.gather(a, x)
        else:
            stack, extra = st.stack_at(thr, t0), {}
        sig = signature_frame(stack)
        idle_stack = st.stack_at(thr, t0) if thr >= 0 else []
        det = GapDetail(i, cause, "", stack, bd, nk, launch, next_op, launch_stack, thr, t0, dur, int(g.device[i]),
                        sig.name if sig else None, extra, idle_stack)
        det.explanation = c.explain(a, det, tl) if c.explain is not None else f"{c.summary}; GPU idle {fmt_ns(dur)}."
        return det

    def signatures(self, rows) -> list[str | None]:
        """``detail(r).signature`` for each row, without building the details: the stacks of the Python-held, sync
        and collective gaps are taken all at once (``holder_points``, ``evidence.sync_anchor``,
        ``signature_events``); other causes, and rows already detailed, go through ``detail``."""
        a = self.a
        m, g = a.model, a.gaps
        rows = np.asarray(rows, np.int64)
        out: list[str | None] = [None] * rows.size
        cause = g.cause[rows]
        py_c, coll_c, sync_c = CAUSES.index("python"), CAUSES.index("collective"), CAUSES.index("sync")
        fast = np.array([c in (py_c, coll_c, sync_c) and r not in self._made
                         for r, c in zip(rows.tolist(), cause.tolist())], dtype=bool)
        for k in np.flatnonzero(~fast).tolist():
            out[k] = self.detail(int(rows[k])).signature
        k = np.flatnonzero(fast)
        if k.size:
            r = rows[k]
            thr, t = g.thread[r], g.start_ns[r].copy()
            py = cause[k] == py_c
            if py.any():
                at, ev = self.holder_points(thr[py], g.start_ns[r[py]], g.t_launch_ns[r[py]])
                t[py] = at
                self._holders.update(zip(r[py].tolist(), zip(at.tolist(), ev.tolist())))
            # a sync gap's stack is taken inside its synchronising call (causes/sync.py's gather)
            for j in np.flatnonzero(cause[k] == sync_c).tolist():
                rr = int(r[j])
                t[j] = a.evidence.sync_anchor(int(g.thread[rr]), int(g.start_ns[rr]), int(g.t_launch_ns[rr]))
            sig = a.stacks.signature_events(thr, t)
            for j, e in zip(k.tolist(), sig.tolist()):
                out[j] = m.name(e) if e >= 0 else None
        return out

    def holder_of(self, i: int) -> tuple[int, int, int]:
        """(event, ns, of which ns) of the one call, op or range holding gap ``i`` (``gaps.one_holder``;
        event -1: none)."""
        ev, ns, of = self._held
        return int(ev[i]), int(ns[i]), int(of[i])

    def holder(self, row: int, thr: int, t0: int, tl: int) -> tuple[int, int]:
        """(time to take the stack at, event or -1): the Python frame holding the CPU in gap ``row``
        (``holder_points`` of one gap, kept from the findings' pass when it took it)."""
        h = self._holders.get(row)
        if h is None:
            at, ev = self.holder_points(np.array([thr], np.int64), np.array([t0], np.int64), np.array([tl], np.int64))
            h = self._holders[row] = (int(at[0]), int(ev[0]))
        return h

    def holder_points(self, thr: np.ndarray, t0: np.ndarray, tl: np.ndarray):
        """For each gap (thread, t0, t_launch): the Python frame holding the CPU in [t0, tl], the most common
        innermost Python frame among 33 sample points where no op or runtime call runs (ties: the lowest event
        index), and the first sample point inside it. Without such frames, the most common annotation holding the
        CPU there; the capture's own step loop is not a frame to name. Returns (time to take the stack at, event or
        -1 when no frame is named: then the time is t0). Vectorised over all gaps."""
        from .hosttime import holder_points

        return holder_points(self.a.stacks, self.a.model, self.a.flags, thr, t0, tl)
