"""The evidence queries the causes (``gather``) and the findings make about one gap: the events of a thread in
an interval, the ops issued there, the allocator call or copy behind a gap, the synchronising call that made it,
what the thread last did. ``Evidence`` is built once per analysis (``Analysis.evidence``) over the model, the
stack index and the CPU sets the classifier found; every method is a pure query (the copy lookup keeps a cache
of each GPU track's longest event, ``host_time`` one of the intervals asked for)."""

from __future__ import annotations

import numpy as np

from ..trace.model import Kind, TraceModel
from . import activity
from .hosttime import HostTime, host_times
from .intervals import uniq
from .stacks import Frame, StackIndex
from .thresholds import Thresholds
from .units import fmt_ns as _us


class Evidence:
    def __init__(self, model: TraceModel, stacks: StackIndex, flags: dict, cpu, config: Thresholds):
        self.model = model
        self.stacks = stacks
        self.flags = flags
        #: the classifier's CPU sets (``gaps.CpuSets``: sync calls, blocking copies, host ops)
        self.cpu = cpu
        self.config = config
        self._max_dur: dict[int, int] = {}
        self._host: dict[tuple[int, int, int], HostTime] = {}

    def host_time(self, thr: int, t0: int, t1: int) -> HostTime:
        """``hosttime.host_time`` of [t0, t1) on ``thr``: who spent the thread's time there (kept; the findings
        take those of the gaps they detail at once, ``prefetch_host_times``)."""
        key = (int(thr), int(t0), int(t1))
        h = self._host.get(key)
        if h is None:
            h = self._host[key] = host_times(self.stacks, self.model, [key[0]], [key[1]], [key[2]])[0]
        return h

    def prefetch_host_times(self, thr, t0, t1) -> None:
        """``host_time`` of many intervals, computed together (one pass of the rule over all their pieces)."""
        keys = [k for k in dict.fromkeys(zip(np.asarray(thr, np.int64).tolist(), np.asarray(t0, np.int64).tolist(),
                                              np.asarray(t1, np.int64).tolist())) if k not in self._host]
        if keys:
            th, a, b = zip(*keys)
            self._host.update(zip(keys, host_times(self.stacks, self.model, th, a, b)))

    def thread_events(self, thr: int, t0: int, t1: int) -> np.ndarray:
        """Events of thread ``thr`` overlapping [t0, t1): those starting inside (a searchsorted range)
        plus those open at t0 (the stack chains), without scanning the thread's earlier history."""
        m = self.model
        if thr < 0:
            return np.zeros(0, np.int64)
        sl = m.track_slice(thr)
        ts = m.ts_ns[sl]
        lo = int(np.searchsorted(ts, t0, side="left"))
        hi = int(np.searchsorted(ts, t1, side="left"))
        inside = np.arange(sl.start + lo, sl.start + max(hi, lo), dtype=np.int64)
        open_at = self.stacks.open_events(thr, t0)
        open_at = [i for i in open_at if int(m.track[i]) == thr and m.ts_ns[i] < t0]
        if open_at:
            inside = uniq(np.concatenate((inside, np.array(open_at, dtype=np.int64))))
        e = m.ts_ns[inside] + m.dur_ns[inside]
        return inside[(e > t0) | (m.ts_ns[inside] >= t0)]

    def sync_anchor(self, thr: int, t0: int, tl: int) -> int:
        """A time inside the synchronising call that makes the gap: the one open at t0 (or ending just
        before it), else the longest one in [t0, t_launch]; the point is inside its innermost sync child."""
        m = self.model
        idx = self.thread_events(thr, t0 - self.config.sync_slack_ns, max(tl, t0 + 1))
        idx = idx[self.cpu.sync_mask[idx]]
        if idx.size == 0:
            return t0
        end = m.ts_ns[idx] + m.dur_ns[idx]
        at0 = idx[m.ts_ns[idx] <= t0]
        if at0.size:
            top = int(at0[np.argmax(m.dur_ns[at0])])
        else:
            top = int(idx[np.argmax(m.dur_ns[idx])])
        s, e = int(m.ts_ns[top]), int(m.ts_ns[top] + m.dur_ns[top])
        inner = idx[(m.ts_ns[idx] >= s) & (end <= e)]
        best = int(inner[np.argmax(m.depth[inner])]) if inner.size else top
        return int(m.ts_ns[best]) + int(m.dur_ns[best]) // 2

    def ops_in(self, thr: int, t0: int, tl: int, limit: int = 12) -> list[str]:
        """The names of the first ``limit`` outermost ops starting in [t0, tl) on ``thr``."""
        if thr < 0 or tl <= t0:
            return []
        m = self.model
        idx = self.thread_events(thr, t0, tl)
        idx = idx[(m.kind[idx] == Kind.CPU_OP) & (m.ts_ns[idx] >= t0)]
        if idx.size:  # outermost ops only
            p = m.parent[idx]
            idx = idx[(p < 0) | (m.kind[np.where(p >= 0, p, 0)] != Kind.CPU_OP) | (m.ts_ns[np.where(p >= 0, p, 0)] < t0)]
        return [m.name(j) for j in idx[:limit].tolist()]

    def ops_in_counts(self, thr: np.ndarray, t0: np.ndarray, tl: np.ndarray, limit: int = 12) -> dict[str, int]:
        """``ops_in`` of many (thread, t0, t_launch), names counted over all of them (one count per op issued),
        vectorised per thread: the first ``limit`` outermost ops starting in [t0, tl) of each."""
        m = self.model
        thr, t0, tl = (np.asarray(x, np.int64) for x in (thr, t0, tl))
        ok = (thr >= 0) & (tl > t0)
        counts = np.zeros(len(m.names), np.int64)
        for th in uniq(thr[ok]).tolist():
            sl = m.track_slice(th)
            ops = np.flatnonzero(m.kind[sl] == Kind.CPU_OP) + sl.start  # by start on the track
            if ops.size == 0:
                continue
            ts = m.ts_ns[ops]
            p = m.parent[ops]
            # an op is outermost in [t0, tl) unless its parent is an op that started at or after t0
            pts = np.where((p >= 0) & (m.kind[np.maximum(p, 0)] == Kind.CPU_OP), m.ts_ns[np.maximum(p, 0)],
                           np.iinfo(np.int64).min)
            sel = ok & (thr == th)
            a0, al = t0[sel], tl[sel]
            lo = np.searchsorted(ts, a0, side="left")
            hi = np.searchsorted(ts, al, side="left")
            n = np.maximum(hi - lo, 0)
            if not n.any():
                continue
            gid = np.repeat(np.arange(n.size), n)
            flat = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
            keep = pts[flat] < a0[gid]
            gid, flat = gid[keep], flat[keep]
            # rank of each kept op within its gap: only the first ``limit``
            first = np.searchsorted(gid, gid, side="left")
            take = (np.arange(gid.size) - first) < limit
            counts += np.bincount(m.name_id[ops[flat[take]]], minlength=counts.size)
        nz = np.flatnonzero(counts)
        return {m.names[i]: int(counts[i]) for i in nz.tolist()}

    def alloc_stack(self, thr: int, t0: int, tl: int) -> list[Frame]:
        """The stack inside the longest allocator call (cudaMalloc, empty_cache, ...) of [t0, tl) on ``thr``."""
        if thr < 0:
            return []
        m = self.model
        idx = self.thread_events(thr, t0, max(tl, t0 + 1))
        a = idx[self.flags["alloc"][m.name_id[idx]] | self.flags["empty_cache"][m.name_id[idx]]]
        if a.size == 0:
            return []
        j = int(a[np.argmax(m.dur_ns[a])])
        return self.stacks.stack_at(thr, int(m.ts_ns[j]) + max(int(m.dur_ns[j]) // 2, 0))

    def copy_stack(self, dev: int, t0: int, t1: int):
        """(the stack of the call that issued it, its description) for the copy or memset overlapping [t0, t1)
        on device ``dev`` the most; ([], None) without one."""
        m = self.model
        best, best_ov = -1, 0
        for t in m.gpu_tracks():
            if t.device != dev:
                continue
            sl = m.track_slice(t.id)
            if sl.stop <= sl.start:
                continue
            md = self._max_dur.get(t.id)
            if md is None:
                md = self._max_dur[t.id] = int(m.dur_ns[sl].max())
            lo = int(np.searchsorted(m.ts_ns[sl], t0 - md, side="left"))
            hi = int(np.searchsorted(m.ts_ns[sl], t1, side="left"))
            idx = np.arange(sl.start + lo, sl.start + max(hi, lo))
            idx = idx[((m.kind[idx] == Kind.MEMCPY) | (m.kind[idx] == Kind.MEMSET))]
            if idx.size == 0:
                continue
            ov = np.minimum(m.ts_ns[idx] + m.dur_ns[idx], t1) - np.maximum(m.ts_ns[idx], t0)
            j = int(np.argmax(ov))
            if ov[j] > best_ov:
                best, best_ov = int(idx[j]), int(ov[j])
        if best < 0:
            return [], None
        info = {"name": m.name(best), "bytes": int(m.nbytes[best]), "dur_ns": int(m.dur_ns[best]),
                "kind": activity.copy_kind(m.name(best))}
        if m.dur_ns[best] > 0 and m.nbytes[best] > 0:
            info["gbps"] = float(m.nbytes[best]) / float(m.dur_ns[best])
        L = int(m.launch[best])
        if L < 0:
            return [], info
        info["launch"] = m.name(L)
        info["issued_ns"] = int(m.ts_ns[L])
        return self.stacks.stack_at(int(m.track[L]), int(m.ts_ns[L])), info

    def last_before(self, thr: int, t: int) -> str | None:
        """"`name` (ended 12.0 µs before the launch)": of the events on ``thr`` that ended by ``t``, the one that
        started last (instants left out)."""
        if thr < 0:
            return None
        m = self.model
        sl = m.track_slice(thr)
        k = int(np.searchsorted(m.ts_ns[sl], t, side="left")) - 1
        while k >= 0:
            j = sl.start + k
            if m.kind[j] != Kind.INSTANT and m.ts_ns[j] + m.dur_ns[j] <= t:
                return f"`{m.name(j)}` (ended {_us(t - int(m.ts_ns[j] + m.dur_ns[j]))} before the launch)"
            k -= 1
        return None
