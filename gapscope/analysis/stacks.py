"""CPU stacks at a point in time on one thread: Python frames, record_function ranges, aten ops and
runtime calls, outermost first. ``innermost`` is vectorised over (thread, time) pairs; ``stack_at``
builds the frame list for one point (per-gap work, on demand)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..trace.model import Kind, TraceModel, TrackKind
from .names import parse_frame
from .thresholds import MAX_CHAIN, MAX_PARENT_STEPS

#: Kind as plain ints: numpy compares a column with an IntEnum member ~10x slower than with an int
KI = SimpleNamespace(**{k.name: int(k) for k in Kind})


@dataclass(frozen=True)
class Frame:
    kind: str  # "python" | "annotation" | "op" | "runtime" | "sync"
    name: str
    event: int
    file: str | None = None
    line: int | None = None

    def label(self) -> str:
        return self.name


_PY, _ANN, _OP = int(Kind.PYTHON), int(Kind.ANNOTATION), int(Kind.CPU_OP)


class StackIndex:
    def __init__(self, model: TraceModel, flags: dict[str, np.ndarray]):
        self.m = model
        self._frames: dict[int, Frame] = {}
        self._parsed: dict[int, tuple] = {}
        self._step_ann: dict[int, bool] = {}
        self._stacks: dict[tuple[int, int], list[Frame]] = {}
        self.flags = flags
        kind = model.kind
        cpu_track = np.array([t.kind is TrackKind.CPU for t in model.tracks] + [False], dtype=bool)
        on_cpu = cpu_track[model.track] if model.n else np.zeros(0, bool)
        fam_cpu = on_cpu & ((kind == KI.CPU_OP) | (kind == KI.ANNOTATION) | (kind == KI.RUNTIME)
                            | (kind == KI.DRIVER))
        self.end = model.ts_ns + model.dur_ns
        base = int(model.ts_ns.min()) if model.n else 0
        span = (int(self.end.max()) - base + 2) if model.n else 2
        span = min(span, (2**62) // max(len(model.tracks), 1))
        self.base, self.span = base, span
        self.fams = {}
        self._up = {"cpu": model.parent}
        for nm, mask in (("cpu", fam_cpu), ("py", on_cpu & (kind == KI.PYTHON))):
            idx = np.flatnonzero(mask)  # model order: sorted by (track, ts, -dur)
            if nm == "py" and idx.size:
                # same (track, ts, dur): the caller first (Python ids are given in call order), so the callee
                # is the later, innermost one
                t_, d_, k_ = model.track[idx], model.ts_ns[idx], model.dur_ns[idx]
                if ((t_[1:] == t_[:-1]) & (d_[1:] == d_[:-1]) & (k_[1:] == k_[:-1])).any():
                    idx = idx[np.lexsort((model.py_id[idx], -k_, d_, t_))]
                # a property of the loaded trace: kept on the model for the next analysis of it
                cached = getattr(model, "_py_time_parent", None)
                if cached is None or cached[0] is not model.parent:
                    cached = (model.parent, _py_time_parent(model, idx))
                    model._py_time_parent = cached
                self._up["py"] = cached[1]
            keys = model.track[idx].astype(np.int64) * span + np.clip(model.ts_ns[idx] - base, 0, span - 1)
            self.fams[nm] = (idx, keys)

    def innermost(self, fam: str, thread, t) -> np.ndarray:
        """Innermost event of family ``fam`` ('cpu' or 'py') on ``thread`` containing time t
        (ts <= t < end), or -1. Vectorised over arrays of (thread, t)."""
        m = self.m
        idx, keys = self.fams[fam]
        thread = np.atleast_1d(np.asarray(thread, np.int64))
        t = np.atleast_1d(np.asarray(t, np.int64))
        out = np.full(t.shape, -1, np.int64)
        if idx.size == 0:
            return out
        # np.minimum / np.maximum: np.clip costs ~10 µs a call on the small arrays of per-gap work
        q = np.where(thread >= 0, thread, 0) * self.span + np.minimum(np.maximum(t - self.base, 0), self.span - 1)
        j = np.searchsorted(keys, q, side="right") - 1
        ok = (j >= 0) & (thread >= 0)
        cand = np.where(ok, idx[np.maximum(j, 0)], -1)
        ok &= np.where(cand >= 0, m.track[np.maximum(cand, 0)].astype(np.int64), -2) == thread
        cand = np.where(ok, cand, -1)
        # walk up the parent chain; only the points whose candidate does not contain t move on
        live = np.flatnonzero(cand >= 0)
        end, ts, par = self.end, m.ts_ns, self._up.get(fam, m.parent)
        for _ in range(MAX_PARENT_STEPS):
            if not live.size:
                break
            c = cand[live]
            tl = t[live]
            bad = (end[c] <= tl) | (ts[c] > tl)
            if not bad.any():
                break
            live = live[bad]
            up = par[c[bad]]
            cand[live] = up
            live = live[up >= 0]
        return cand

    def parents(self, fam: str) -> np.ndarray:
        """Each event's parent in family ``fam`` ('cpu' or 'py': the Python frames' parents by time), -1 for none."""
        return self._up.get(fam, self.m.parent)

    def through_annotations(self, cpu: np.ndarray, t) -> np.ndarray:
        """For each innermost 'cpu' event (``innermost("cpu", ...)``) at t: the innermost one that is not a
        record_function range, looking through ranges (``nccl:all_reduce`` inside ``record_param_comms``: the op
        runs there, the range only labels it), or -1."""
        m = self.m
        cur = np.array(cpu, dtype=np.int64, copy=True)
        t = np.broadcast_to(np.asarray(t, np.int64), cur.shape)
        for _ in range(MAX_PARENT_STEPS):
            c = np.maximum(cur, 0)
            bad = (cur >= 0) & ((m.kind[c] == _ANN) | (m.ts_ns[c] > t) | (self.end[c] <= t))
            if not bad.any():
                break
            cur = np.where(bad, m.parent[c], cur)
        return cur

    def user_frame(self, thread, t) -> np.ndarray:
        """Innermost Python frame of user code (not torch/library/built-in) containing t, or -1."""
        cur = self.innermost("py", thread, t)
        uf = self.flags["user_frame"]
        m = self.m
        up = self._up.get("py", m.parent)
        for _ in range(MAX_PARENT_STEPS):
            live = cur >= 0
            if not live.any():
                break
            c = np.where(live, cur, 0)
            bad = live & ~uf[m.name_id[c]]
            if not bad.any():
                break
            cur = np.where(bad, up[c], cur)
        return cur

    def _innermost_one(self, fam: str, thread: int, t: int) -> int:
        """Scalar fast path of ``innermost`` (per-gap detail work)."""
        m = self.m
        idx, keys = self.fams[fam]
        if idx.size == 0 or thread < 0:
            return -1
        q = thread * self.span + min(max(t - self.base, 0), self.span - 1)
        j = int(keys.searchsorted(q, side="right")) - 1
        if j < 0:
            return -1
        c = int(idx[j])
        if int(m.track[c]) != thread:
            return -1
        ts, end, par = m.ts_ns, self.end, self._up.get(fam, m.parent)
        for _ in range(MAX_PARENT_STEPS):
            if c < 0 or (ts[c] <= t < end[c]):
                return c
            c = int(par[c])
        return -1

    def _chain(self, i: int, t: int, fam: str = "cpu") -> list[int]:
        out = []
        m = self.m
        up = self._up.get(fam, m.parent)
        ts, end, dur = m.ts_ns, self.end, m.dur_ns
        i = int(i)
        while i >= 0 and len(out) < MAX_CHAIN:
            if ts.item(i) <= t < end.item(i) or dur.item(i) == 0:
                out.append(i)
            i = up.item(i)
        return out

    def open_events(self, thread: int, t: int) -> list[int]:
        """The events of ``stack_at(thread, t)`` unsorted: the chain of the innermost 'cpu' event, then the
        Python one's (innermost first; zero-length ancestors included)."""
        return (self._chain(self._innermost_one("cpu", thread, t), t)
                + self._chain(self._innermost_one("py", thread, t), t, "py"))

    def stack_at(self, thread: int, t: int) -> list[Frame]:
        """Frames containing time t on the thread, outermost first (a new list each call; a gap's detail asks for
        the same point more than once: its stack, its idle stack, its cause's)."""
        thread, t = int(thread), int(t)
        if thread < 0:
            return []
        got = self._stacks.get((thread, t))
        if got is None:
            got = self._stacks[(thread, t)] = self._stack_at(thread, t)
        return list(got)

    def _stack_at(self, thread: int, t: int) -> list[Frame]:
        m = self.m
        evs = self._chain(self._innermost_one("cpu", thread, t), t) + self._chain(
            self._innermost_one("py", thread, t), t, "py")
        ts = m.ts_ns[evs].tolist() if evs else []
        en = self.end[evs].tolist() if evs else []
        kd = m.kind[evs].tolist() if evs else []
        # frames of the same interval (integer-µs traces: aten::to and the aten::_to_copy it calls): the caller
        # first, as it is further up its chain (a chain lists innermost first)
        order = sorted(range(len(evs)), key=lambda k: (ts[k], -en[k], 0 if kd[k] == _PY else 1, -k))
        return [self.frame(evs[k]) for k in order]

    def signature_events(self, thread, t) -> np.ndarray:
        """``signature_frame(stack_at(thread, t)).event`` (-1 for None), vectorised over arrays of (thread, t):
        the same frames (the ``_chain`` of the innermost 'cpu' and 'py' events, zero-length ancestors
        included), in the same order (``stack_at``'s sort, ties outermost first) and the same choice (innermost
        user Python frame, else innermost annotation that is not a step range, else innermost op or sync
        call), without building Frame lists. For the findings, which group ~2,000 gaps by this frame."""
        m = self.m
        thread = np.atleast_1d(np.asarray(thread, np.int64))
        t = np.atleast_1d(np.asarray(t, np.int64))
        n = t.shape[0]
        if n == 0:
            return np.full(0, -1, np.int64)
        # The best frame so far per point, by the key (rank, ts, -end, not Python, chain position): the last of
        # stack_at's order among those of the best rank. Kept as one running best while the chains are walked
        # one level at a time: every (point, frame) pair at once was points x depth in memory and one sort of
        # it (2,000 gaps under 20,000 nested Python frames: 40M rows, 2 GB)
        best_ev = np.full(n, -1, np.int64)
        best = [np.full(n, -1, np.int64) for _ in range(5)]
        for fam_no, fam in enumerate(("cpu", "py")):
            cur = self.innermost(fam, thread, t)
            pts = np.flatnonzero(cur >= 0)
            cur = cur[pts]
            level = 0
            # as ``_chain``, at most MAX_CHAIN frames (a parent cycle is never in a loaded trace, but must end)
            while pts.size and level < MAX_CHAIN:
                tp = t[pts]
                keep = ((m.ts_ns[cur] <= tp) & (tp < self.end[cur])) | (m.dur_ns[cur] == 0)
                if keep.any():
                    # stack_at puts a caller before a callee of the same interval: the later one is the inner
                    self._offer(best, best_ev, pts[keep], cur[keep], fam_no * 100_000 - level)
                cur = self._up.get(fam, m.parent)[cur].astype(np.int64)
                live = cur >= 0
                pts, cur = pts[live], cur[live]
                level += 1
        return np.where(best[0] > 0, best_ev, -1)

    def _offer(self, best: list, best_ev: np.ndarray, p: np.ndarray, ev: np.ndarray, pos: int) -> None:
        """Make frame ``ev[i]`` the best of point ``p[i]`` where its key is greater (``p`` holds no repeats)."""
        m = self.m
        k = m.kind[ev]
        nid = m.name_id[ev]
        f = self.flags
        is_py, is_ann = k == _PY, k == _ANN
        user = is_py & f["user_frame"][nid]
        ann = is_ann.copy()
        if ann.any():
            ann[is_ann] = ~self._step_annotation(nid[is_ann])
        opish = ~is_py & ~is_ann & (f["sync_rt"][nid] | f["blocking_copy"][nid] | f["sync_op"][nid] | (k == _OP))
        rank = np.where(user, 3, np.where(ann, 2, np.where(opish, 1, 0)))
        key = (rank, m.ts_ns[ev], -self.end[ev], np.where(is_py, 0, 1), np.full(ev.size, pos, np.int64))
        gt = np.zeros(ev.size, bool)
        eq = np.ones(ev.size, bool)
        for c, b in zip(key, best):
            b = b[p]
            gt |= eq & (c > b)
            eq &= c == b
        w = p[gt]
        for c, b in zip(key, best):
            b[w] = c[gt]
        best_ev[w] = ev[gt]

    def _step_annotation(self, nid: np.ndarray) -> np.ndarray:
        """Whether each name id is a step range (``STEP_ANNOTATION_RE``); names tested once, on demand."""
        from .names import STEP_ANNOTATION_RE

        cache = self._step_ann
        u, inv = np.unique(nid, return_inverse=True)
        for i in u.tolist():
            if i not in cache:
                cache[i] = bool(STEP_ANNOTATION_RE.match(self.m.names[i]))
        return np.array([cache[i] for i in u.tolist()], dtype=bool)[inv.reshape(-1)]

    def frame(self, i: int) -> Frame:
        f = self._frames.get(i)
        if f is None:
            f = self._frames[i] = self._frame(i)
        return f

    def _frame(self, i: int) -> Frame:
        m = self.m
        i = int(i)
        nid = int(m.name_id[i])
        nm = m.names[nid]
        k = int(m.kind[i])
        if k == _PY:
            got = self._parsed.get(nid)  # a frame's name is parsed once (its calls repeat every step)
            if got is None:
                got = self._parsed[nid] = parse_frame(nm)[:2]
            return Frame("python", nm, i, got[0], got[1])
        if k == _ANN:
            return Frame("annotation", nm, i)
        if self.flags["sync_rt"][nid] or self.flags["blocking_copy"][nid] or self.flags["sync_op"][nid]:
            return Frame("sync", nm, i)
        if k == _OP:
            return Frame("op", nm, i)
        return Frame("runtime", nm, i)


def _py_time_parent(model: TraceModel, idx: np.ndarray) -> np.ndarray:
    """Parent of each Python frame by time on its thread (the frame open around its start), for ``innermost``.

    The frames open at t on one thread are its Python stack then, and the one opened last is running: time
    decides. ``Python parent id`` only breaks ties (``idx`` is in (track, ts, -dur, Python id) order): torch
    writes a wrong parent id at times (demo-eager-tp.prefill rank 1: the calls mlp makes after its first module
    call name forward as their parent while mlp's frame stays open around them), and a walk up those ids from a
    zero-length call skips the frame actually running (integer-µs traces: ``all`` credited with its generator's
    microsecond). Where every frame's parent id is its time parent (most traces: checked by depth, one sort),
    the model's parents are returned as they are; else an array over all events (-1 elsewhere)."""
    from ..trace.relate import time_nesting

    ts, dur, tr = model.ts_ns[idx], model.dur_ns[idx], model.track[idx].astype(np.int64)
    end = ts + dur
    span = int(end.max() - ts.min()) + 2
    if span * (int(tr.max()) + 1) < 2**62:
        # the time depth of each frame (frames open at its start), as time_nesting counts it
        s_b = ts - int(ts.min()) + tr * span
        e_b = end - int(ts.min()) + tr * span
        pos = np.arange(idx.size, dtype=np.int64)
        # (a stable sort: the ends are nearly sorted already, frames nesting)
        ends_le = np.searchsorted(np.sort(e_b, kind="stable"), s_b, side="right")
        zc = np.concatenate(([0], np.cumsum(e_b == s_b)))
        if (s_b[1:] >= s_b[:-1]).all():  # (track, start) order: each start's right insertion point in them is
            last = np.flatnonzero(np.r_[s_b[1:] != s_b[:-1], True])  # one past the last of its equals
            right = np.repeat(last + 1, np.diff(np.r_[-1, last]))
        else:
            right = np.searchsorted(s_b, s_b, side="right")
        later_zero = zc[right] - zc[pos]
        td = pos - (ends_le - later_zero)
        local = np.full(model.n, -1, np.int64)
        local[idx] = pos
        par = model.parent[idx]
        lp = np.where(par >= 0, local[np.maximum(par, 0)], -1)
        pl = np.maximum(lp, 0)
        # the id parent is the time parent: one level up, before it, still open at its start (frames open at the
        # window's end are stretched to it and may outlast their parent by a rounding ns)
        agree = np.where(lp >= 0, (td == td[pl] + 1) & (pl < pos) & (end[pl] >= ts), td == 0)
        if agree.all():
            return model.parent
    parent = np.full(model.n, -1, np.int64)
    depth = np.zeros(model.n, np.int16)
    time_nesting(idx, model.ts_ns, model.dur_ns, model.track.astype(np.int64), depth, parent)
    return parent


def frame_text(f: Frame) -> str:
    return f.name


def signature_frame(frames: list[Frame]) -> Frame | None:
    """The frame a person would fix: innermost user Python frame (not torch or library code, not
    gapscope's capture scaffolding such as ``capture/recorder.py``); else innermost annotation that is
    not a step range; else innermost op. None when only scaffolding, library frames and step ranges
    are on the stack (e.g. the capture's own loop between two measured steps)."""
    from .names import STEP_ANNOTATION_RE, is_user_frame

    for f in reversed(frames):
        if f.kind == "python" and is_user_frame(f.name):
            return f
    for f in reversed(frames):
        if f.kind == "annotation" and not STEP_ANNOTATION_RE.match(f.name):
            return f
    for f in reversed(frames):
        if f.kind in ("op", "sync"):
            return f
    return None
