"""The replay model: each device's dependency chain (``Replay``), built once from the trace, and its replay with
host intervals removed, host time scaled down by a per-event overhead, item durations replaced or items dropped.

What the chain holds (launch latencies, stream order, synchronising calls, event waits, collectives) and why each
choice reproduces the recorded trace: replay.py's module docstring.
"""

from __future__ import annotations

import numpy as np

from ..trace.model import Kind, TrackKind
from .intervals import union

#: an item that starts within this of its stream's previous end was queued behind it
QUEUED_NS = 2_000
#: launch latency of an un-queued item when the trace has none to measure (ns)
DEFAULT_LAUNCH_NS = 5_000
#: GPU-side gap between two nodes of a CUDA graph when the trace has no graph launch: the median measured in
#: traces/demo-graph.decode.json.gz (H200, torch 2.11, CUDA 13.0), 417 ns
DEFAULT_GRAPH_GAP_NS = 417
#: calls that may wait for the GPU: they wait in the replay only where the trace shows they waited
_MAYBE_WAIT = ("cudaMemcpyAsync", "cudaMemsetAsync", "hipMemcpyAsync", "hipMemsetAsync", "cuMemcpyAsync",
               "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2")
_WORK = (int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET))
_CALLS = (int(Kind.RUNTIME), int(Kind.DRIVER))


def queued_behind(first, qgap, behind, has):
    """Mask over a device's GPU items in stream order: those whose start their stream's previous item set (queued
    behind it), not their launch. ``qgap``: start - the stream's previous end; ``behind``: that end - the launch
    call's start; ``first``: the stream's first item; ``has``: the item has a launch call.

    Queued: an item that started within ``QUEUED_NS`` of the previous end, and one launched more than the usual
    launch latency before the previous end (the median launch-to-start of the items launched onto an idle stream,
    ``DEFAULT_LAUNCH_NS`` without any): its launch had reached the GPU while the stream was still busy, so the
    previous end set its start, and what came after that end (``qgap``) is kept as a GPU-side gap. One launched
    less than that before the previous end started when its launch arrived: it keeps its latency. resnet50.fp32
    (GPU-bound, its queue 1.8 ms deep): 69 convolutions and their neighbours started 2.0-2.8 µs after their
    predecessor's end, 0.6-3.9 ms after their launch, and kept that latency when their predecessors were made
    faster (32.2% projected for 64.2% measured); demo-eager-copy.decode's cuDNN reductions, launched 5.5 µs before
    their predecessor's end, started 2-4 µs after it: 8 µs after their launch, the usual latency (8.2 µs)."""
    q = (~first) & (qgap <= QUEUED_NS)
    lat = behind + qgap
    idle = has & ~q & (behind <= 0) & (lat >= 0)
    usual = float(np.median(lat[idle])) if idle.any() else DEFAULT_LAUNCH_NS
    return q | ((~first) & has & (behind > usual))


# ----------------------------------------------------------------------------- intervals
def _subtract(a_s, a_e, b_s, b_e):
    """Union of [a) minus union of [b), both given as arrays (any order); returns sorted disjoint arrays."""
    a_s, a_e = union(np.asarray(a_s, np.int64), np.asarray(a_e, np.int64))
    if a_s.size == 0:
        return a_s, a_e
    b_s, b_e = union(np.asarray(b_s, np.int64), np.asarray(b_e, np.int64))
    if b_s.size == 0:
        return a_s, a_e
    # boundaries of both; a point is kept when inside a and not inside b
    pts = np.unique(np.concatenate((a_s, a_e, b_s, b_e)))
    lo, hi = pts[:-1], pts[1:]

    def inside(s, e, t):
        j = np.searchsorted(s, t, side="right") - 1
        return (j >= 0) & (t < e[np.clip(j, 0, None)])

    keep = inside(a_s, a_e, lo) & ~inside(b_s, b_e, lo)
    return union(lo[keep], hi[keep])


def inside(s, e, t):
    """t inside one of the sorted disjoint intervals [s, e)."""
    if s.size == 0:
        return np.zeros(np.shape(t), bool)
    j = np.searchsorted(s, t, side="right") - 1
    return (j >= 0) & (t < e[np.clip(j, 0, None)])


#: the name the older modules use
_inside = inside


class _Removed:
    """Removed time on one thread: sorted disjoint intervals; ``before(t)`` = removed measure before t."""

    def __init__(self, s, e):
        self.s, self.e = union(np.asarray(s, np.int64), np.asarray(e, np.int64))
        ln = self.e - self.s
        self.cum = np.concatenate(([0], np.cumsum(ln)))

    def before(self, t):
        t = np.asarray(t, np.int64)
        if self.s.size == 0:
            return np.zeros(t.shape, np.int64)
        j = np.searchsorted(self.s, t, side="right") - 1
        jj = np.clip(j, 0, None)
        part = np.clip(t - self.s[jj], 0, self.e[jj] - self.s[jj])
        return np.where(j >= 0, self.cum[jj] + part, 0)

    @property
    def total(self) -> int:
        return int(self.cum[-1])


# ----------------------------------------------------------------------------- the model
class Replay:
    """The dependency chain of a trace, replayable with host intervals removed and host time scaled."""

    def __init__(self, model, window=None, flags=None):
        from .names import name_flags

        m = self.model = model
        self.window = window
        fl = self.flags = flags if flags is not None else name_flags(model.names)
        ntr = len(m.tracks)
        tdev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in m.tracks] + [-1], np.int64)
        gw = np.flatnonzero(np.isin(m.kind, np.array(_WORK, np.uint8)) & (tdev[m.track] >= 0)) if m.n else \
            np.zeros(0, np.int64)
        # stream order: by track then start (the model's order already)
        gw = gw[np.lexsort((m.ts_ns[gw], m.track[gw]))]
        self.items = gw
        self.item_sort = np.argsort(gw, kind="stable")
        s = m.ts_ns[gw]
        d = m.dur_ns[gw]
        e = s + d
        trk = m.track[gw].astype(np.int64)
        L = m.launch[gw]
        has = L >= 0
        Lc = np.where(has, L, 0)
        lts = np.where(has, m.ts_ns[Lc], s)
        # the previous end on the same stream (running max within the track)
        first = np.r_[True, trk[1:] != trk[:-1]] if gw.size else np.zeros(0, bool)
        prev = np.full(gw.size, np.iinfo(np.int64).min // 4, np.int64)
        if gw.size:
            run = e.copy()
            # running max of ends restarting at each track: offset trick
            grp = np.cumsum(first) - 1
            big = (e.max() - e.min() + 1) if e.size else 1
            run = np.maximum.accumulate(e + grp * big) - grp * big
            prev[1:] = run[:-1]
            prev[first] = np.iinfo(np.int64).min // 4
        qgap_obs = s - prev
        queued = queued_behind(first, qgap_obs, prev - lts, has)
        lat_obs = s - lts
        free_lat = lat_obs[has & ~queued & (lat_obs >= 0)]
        self.launch_lat_ns = int(np.median(free_lat)) if free_lat.size else DEFAULT_LAUNCH_NS
        qg = qgap_obs[queued]
        self.dispatch_gap_ns = int(np.median(np.clip(qg, 0, None))) if qg.size else 0
        self.lat = np.where(queued, np.minimum(lat_obs, self.launch_lat_ns), lat_obs)
        self.qgap = np.where(queued, np.clip(qgap_obs, 0, None), np.minimum(np.clip(qgap_obs, 0, None),
                                                                                  self.dispatch_gap_ns))
        self.qgap[first] = 0
        self.start, self.dur, self.end = s, d, e
        self.trk, self.dev = trk, tdev[trk]
        self.has_launch = has
        # graph dispatch gap: consecutive items of one graph launch on a stream
        same = (~first[1:]) & has[1:] & has[:-1] & (L[1:] == L[:-1]) if gw.size > 1 else np.zeros(0, bool)
        gg = (s[1:] - e[:-1])[same] if gw.size > 1 else np.zeros(0, np.int64)
        gg = gg[gg >= 0]
        self.graph_gap_observed = bool(gg.size)
        self.graph_gap_ns = int(np.median(gg)) if gg.size else DEFAULT_GRAPH_GAP_NS

        # ---- anchors: launch calls of items, and calls that may wait for the GPU
        calls = np.flatnonzero(np.isin(m.kind, np.array(_CALLS, np.uint8)))
        nid = m.name_id[calls]
        always = fl["sync_rt"][nid] | fl["blocking_copy"][nid]
        maybe_names = np.array([n in _MAYBE_WAIT for n in m.names], bool) | (fl["alloc"] & ~fl["launch"])
        maybe = maybe_names[nid] & ~always
        launchers = np.unique(L[has])
        waiters = calls[always | maybe]
        anc = np.union1d(launchers, waiters)
        anc = anc[np.lexsort((anc, m.ts_ns[anc]))]
        self.anchors = anc
        na = anc.size
        pos = {int(a): i for i, a in enumerate(anc.tolist())}
        self.a_ts = m.ts_ns[anc]
        self.a_end = m.ts_ns[anc] + m.dur_ns[anc]
        self.a_thr = m.track[anc].astype(np.int64)
        # items triggered at anchors: their launch anchor, never before their stream predecessor's trigger
        trig = np.array([pos[int(x)] if h else -1 for x, h in zip(L.tolist(), has.tolist())], np.int64) \
            if gw.size else np.zeros(0, np.int64)
        self.item_anchor = trig.copy()
        if gw.size:
            grp = np.cumsum(first) - 1
            big = na + 2
            t2 = np.maximum.accumulate(trig + 1 + grp * big) - grp * big - 1
            trig = t2
        self.trig = trig
        # devices each thread launches to
        thr_devs: dict[int, set] = {}
        for t, dv in zip(m.track[L[has]].tolist(), self.dev[has].tolist()):
            thr_devs.setdefault(int(t), set()).add(int(dv))
        all_devs = sorted(set(self.dev.tolist()))
        self.thr_devs = {t: sorted(v) for t, v in thr_devs.items()}
        self.devices = all_devs
        # recorded wait target of each waiter: max end of items triggered at anchors <= its own position
        is_w = np.isin(anc, waiters)
        is_always = np.isin(anc, calls[always])
        g_rec = np.full(na, np.iinfo(np.int64).min // 4, np.int64)
        if na:
            order = np.argsort(trig, kind="stable")
            ptr = np.searchsorted(trig[order], np.arange(na + 1), side="left")
            dev_end: dict[int, int] = {}
            tl, el, dl = order.tolist(), e.tolist(), self.dev.tolist()
            ptrl = ptr.tolist()
            # items triggered before the first anchor (no-launch items at stream heads)
            for k in range(na):
                for j in tl[ptrl[k]:ptrl[k + 1]]:
                    dv = dl[j]
                    if el[j] > dev_end.get(dv, -(1 << 62)):
                        dev_end[dv] = el[j]
                if is_w[k]:
                    devs = self.thr_devs.get(int(self.a_thr[k]), all_devs)
                    g_rec[k] = max((dev_end.get(dv, -(1 << 62)) for dv in devs), default=-(1 << 62))
            self._order, self._ptr = order, ptr
            pre = np.flatnonzero(trig < 0)
            self._pre = pre
        else:
            self._order = np.zeros(0, np.int64)
            self._ptr = np.zeros(1, np.int64)
            self._pre = np.flatnonzero(trig < 0) if gw.size else np.zeros(0, np.int64)
        waits = is_w & (self.a_end >= g_rec) & (is_always | (g_rec > self.a_ts))
        self.waits = waits
        self.tail = np.where(waits, self.a_end - np.maximum(self.a_ts, g_rec), 0)
        self.is_launcher = np.isin(anc, launchers)
        # window items and origin
        if window is not None and getattr(window, "clipped", False):
            self.in_window = window.gpu_in(m, gw)
        else:
            self.in_window = np.ones(gw.size, bool)
        if window is not None and getattr(window, "clipped", False) and window.cpu_start.size:
            self.origin = int(window.cpu_start[0])
        else:
            self.origin = int(s[self.in_window].min()) if self.in_window.any() else 0
        self.ntracks = ntr
        # every recorded host event's start, per thread with anchors: the profiler's overhead is per event
        hk = np.array([int(Kind.CPU_OP), int(Kind.PYTHON), int(Kind.RUNTIME), int(Kind.DRIVER),
                       int(Kind.ANNOTATION)], np.uint8)
        self.host_ev = {}
        for thr in np.unique(self.a_thr).tolist():
            sl = m.track_slice(int(thr))
            ev = np.arange(sl.start, sl.stop)
            self.host_ev[int(thr)] = np.sort(m.ts_ns[ev[np.isin(m.kind[ev], hk)]])

    # ------------------------------------------------------------------ running
    def run(self, removed: dict[int, _Removed] | None = None, c: float = 0.0, dur=None, nowait=None,
            drop=None, fuse=None, insert=None) -> np.ndarray:
        """Replayed end of every item (``self.items`` order), with ``removed`` host time squeezed out of the
        threads and ``c`` ns of profiler overhead taken off every host event the thread recorded; ``dur``
        replaces the items' durations (``self.items`` order); the calls in ``nowait`` (event indices) no longer
        wait for the GPU; the items in ``drop`` (a mask, ``self.items`` order) do not run: they take no time,
        hold up nothing, and their end is -1e30; the items in ``fuse`` (a mask, ``self.items`` order) run as the
        nodes of one CUDA graph: each at the trace's median launch latency after its (replayed) launch call, and
        one graph dispatch gap after its stream's previous item (replay_frames.py: a frame as one fused call);
        ``insert`` ({thread: (points, ns)}, recorded times) adds host time on a thread: every anchor at or after a
        point (since the origin) starts that much later, in replayed (un-profiled) time: the fused call's own
        dispatch."""
        removed = removed or {}
        o = self.origin
        na = self.anchors.size
        fs = np.empty(na, np.float64)
        fe = np.empty(na, np.float64)
        skip = np.zeros(na, bool)
        for thr in np.unique(self.a_thr).tolist() if na else []:
            sel = self.a_thr == thr
            ts, te = self.a_ts[sel], self.a_end[sel]
            R = removed.get(int(thr))
            if R is not None and R.s.size:
                r_o = R.before(np.array([o]))[0]
                rs, re_ = R.before(ts), R.before(te)
                skip[sel] = (re_ - rs) >= (te - ts)
            else:
                r_o, rs, re_ = 0, 0, 0
                R = None
            a = ((ts - o) - (rs - r_o)).astype(np.float64)
            b = ((te - o) - (re_ - r_o)).astype(np.float64)
            if c > 0:
                ev = self.host_ev.get(int(thr), np.zeros(0, np.int64))
                if R is not None:
                    ev = ev[~_inside(R.s, R.e, ev)]
                # only the events since the origin lose their overhead, and no time goes before the origin
                n_o = np.searchsorted(ev, o)
                a = np.where(ts >= o, np.maximum(a - c * np.clip(np.searchsorted(ev, ts) - n_o, 0, None), 0), a)
                b = np.where(te >= o, np.maximum(b - c * np.clip(np.searchsorted(ev, te) - n_o, 0, None), 0), b)
                # overhead never makes time run backwards: each anchor's start and end keep their order
                seq = np.maximum.accumulate(np.column_stack((a, b)).ravel()).reshape(-1, 2)
                a, b = seq[:, 0], seq[:, 1]
            ins = (insert or {}).get(int(thr))
            if ins is not None:
                pts, add = (np.asarray(x) for x in ins)
                keep = pts >= o
                pts, add = pts[keep], add[keep].astype(np.float64)
                if pts.size:
                    oo = np.argsort(pts, kind="stable")
                    pts, cum = pts[oo], np.concatenate(([0.0], np.cumsum(add[oo])))
                    a = a + cum[np.searchsorted(pts, ts, side="right")]
                    b = b + cum[np.searchsorted(pts, te, side="right")]
            fs[sel] = o + a
            fe[sel] = o + b
        # the launch latency includes the launch call's recorded overhead: it loses c too
        lat = np.maximum(self.lat - c, 0) if c > 0 else self.lat
        qg = self.qgap
        if fuse is not None:
            fz = np.asarray(fuse, bool)
            lat = np.where(fz, max(self.launch_lat_ns - c, 0), lat)
            qg = np.where(fz, self.graph_gap_ns, qg)
        lat, qg, start = lat.tolist(), qg.tolist(), self.start.tolist()
        dur = (self.dur if dur is None else np.asarray(dur, np.int64)).tolist()
        trk, dev, has, ia = self.trk.tolist(), self.dev.tolist(), self.has_launch.tolist(), self.item_anchor.tolist()
        dropped = np.asarray(drop, bool).tolist() if drop is not None else None
        end = [0.0] * len(lat)
        stream_end: dict[int, float] = {}
        dev_end: dict[int, float] = {}
        shift: dict[int, float] = {}
        lprime = [0.0] * na
        NEG = -1e30

        def item(j):
            if dropped is not None and dropped[j]:
                end[j] = NEG
                return
            a = lprime[ia[j]] + lat[j] if has[j] else float(start[j])
            b = stream_end.get(trk[j], NEG) + qg[j]
            st = a if a > b else b
            en = st + dur[j]
            end[j] = en
            stream_end[trk[j]] = en
            if en > dev_end.get(dev[j], NEG):
                dev_end[dev[j]] = en

        for j in self._pre.tolist():
            item(j)
        order, ptr = self._order.tolist(), self._ptr.tolist()
        thr_l, fsl, fel = self.a_thr.tolist(), fs.tolist(), fe.tolist()
        if nowait is not None and len(nowait):
            skip |= np.isin(self.anchors, np.asarray(nowait, np.int64))
        waits, tail, skl = self.waits.tolist(), self.tail.tolist(), skip.tolist()
        tdevs, alld = self.thr_devs, self.devices
        for p in range(na):
            th = thr_l[p]
            sh = shift.get(th, 0.0)
            sp = fsl[p] + sh
            lprime[p] = sp
            for j in order[ptr[p]:ptr[p + 1]]:
                item(j)
            if waits[p] and not skl[p]:
                g = max((dev_end.get(dv, NEG) for dv in tdevs.get(th, alld)), default=NEG)
                ret = (sp if sp > g else g) + tail[p]
                shift[th] = ret - fel[p]
        return np.asarray(end, np.float64)

    def span(self, end: np.ndarray) -> dict[int, int]:
        """Per device: last end of a window item - origin."""
        out = {}
        for dv in self.devices:
            sel = self.in_window & (self.dev == dv)
            if sel.any():
                out[dv] = int(round(float(end[sel].max()) - self.origin))
        return out

    def floor(self) -> dict[int, int]:
        out = {}
        for dv in self.devices:
            sel = self.in_window & (self.dev == dv)
            if sel.any():
                us, ue = union(self.start[sel], self.end[sel])
                out[dv] = int((ue - us).sum())
        return out

    def graph(self, keep: dict[int, int] | None = None) -> dict[int, int]:
        """The window's GPU items back to back, one graph dispatch gap before each (per stream, the longest
        stream counts, and never less than the device's recorded busy time: a graph keeps the dependencies
        between streams, so their work overlaps no more than it did), plus ``keep`` (device -> ns): the time the
        GPU waited on dependencies a graph does not remove (replay_fixes.py, ``dependency_waits``). On hta's
        trace_filter_sampled rank-0 the longest stream holds 290 of the 548 ms the device was busy: the rest
        counted as removable idle, and the fix projected 1.9x the idle outside gpu-wait."""
        keep = keep or {}
        busy = self.floor()
        out = {}
        for dv in self.devices:
            sel = self.in_window & (self.dev == dv)
            if not sel.any():
                continue
            best = 0
            for t in np.unique(self.trk[sel]).tolist():
                ss = sel & (self.trk == t)
                best = max(best, int(self.dur[ss].sum()) + int(ss.sum()) * self.graph_gap_ns)
            out[dv] = max(best, busy.get(dv, 0)) + int(keep.get(dv, 0))
        return out

    # ----------------------------------------------------------- removals
    def thread_events(self, kinds) -> np.ndarray:
        m = self.model
        return np.flatnonzero(np.isin(m.kind, np.array(kinds, np.uint8)))

    def removal(self, idx_s, idx_e, thr) -> dict[int, _Removed]:
        """Intervals [idx_s, idx_e) on threads thr -> per thread removed sets."""
        out = {}
        idx_s, idx_e, thr = (np.asarray(x, np.int64) for x in (idx_s, idx_e, thr))
        for t in np.unique(thr).tolist():
            sel = thr == t
            out[int(t)] = _Removed(idx_s[sel], idx_e[sel])
        return out
