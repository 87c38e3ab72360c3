"""The replay model: each device's dependency chain (``Replay``), built once from the trace, and its replay with
host intervals removed, host time scaled down by a per-event overhead, item durations replaced or items dropped.

What the chain holds (launch latencies, stream order, synchronising calls, event waits, collectives) and why each
choice reproduces the recorded trace: replay.py's module docstring.
"""

from __future__ import annotations

import numpy as np

from ...trace.model import Kind, TrackKind
from ..intervals import isin, median, member, union, uniq
from ..thresholds import DEFAULT_GRAPH_GAP_NS, DEFAULT_LAUNCH_NS, QUEUED_NS

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
    usual = float(median(lat[idle])) if idle.any() else DEFAULT_LAUNCH_NS
    return q | ((~first) & has & (behind > usual))


# ----------------------------------------------------------------------------- intervals
def inside(s, e, t):
    """t inside one of the sorted disjoint intervals [s, e)."""
    if s.size == 0:
        return np.zeros(np.shape(t), bool)
    j = np.searchsorted(s, t, side="right") - 1
    return (j >= 0) & (t < e[np.clip(j, 0, None)])


#: the name the older modules use
_inside = inside


class Removed:
    """Removed time on one thread: sorted disjoint intervals; ``before(t)`` = removed measure before t."""

    def __init__(self, s, e, uncounted: "Removed | None" = None):
        self.s, self.e = union(np.asarray(s, np.int64), np.asarray(e, np.int64))
        ln = self.e - self.s
        self.cum = np.concatenate(([0], np.cumsum(ln)))
        #: the part whose recorded events no longer count for the profiler's per-event overhead (all of it unless
        #: told: ``Replay.removal``'s ``counted`` intervals keep theirs)
        self.uncounted = self if uncounted is None else uncounted

    def last(self, t) -> np.ndarray:
        """Index of the last interval starting at or before each t (-1: none)."""
        return np.searchsorted(self.s, np.asarray(t, np.int64), side="right") - 1

    def before(self, t, j=None):
        t = np.asarray(t, np.int64)
        if self.s.size == 0:
            return np.zeros(t.shape, np.int64)
        j = self.last(t) if j is None else j
        jj = np.clip(j, 0, None)
        part = np.clip(t - self.s[jj], 0, self.e[jj] - self.s[jj])
        return np.where(j >= 0, self.cum[jj] + part, 0)

    @property
    def total(self) -> int:
        return int(self.cum[-1])


def chain_loop(a, q, d, e0: float) -> np.ndarray:
    """One stream's items one at a time: each ends at max(a, previous end + q) + d (the first after ``e0``)."""
    out = []
    e = e0
    for x, qq, dd in zip(a.tolist(), q.tolist(), d.tolist()):
        b = e + qq
        e = (x if x > b else b) + dd
        out.append(e)
    return np.array(out, np.float64)


def chain_vector(a, q, d, e0: float):
    """``chain_loop`` with arrays, or None where the result would not be the loop's bit for bit.

    An item's end is the end of its chain's last restart r (the item that started at its own time ``a`` rather
    than behind its predecessor) plus the integer sum of the dispatch gaps and durations since: e = a[r] + d[r] +
    P - P[r] (P the running sum of q + d), or, with no restart yet, e0 + P. The restart is where a + d - P is
    largest so far. The loop's result is then checked element by element with its own operations."""
    n = a.size
    P = np.cumsum(q + d)
    v = a + (d - P)
    mv = np.maximum.accumulate(v)
    r = np.maximum.accumulate(np.where(v >= mv, np.arange(n), 0))
    en = np.where(mv <= e0, e0 + P, a[r] + (d[r] + (P - P[r])))
    return en if chain_holds(a, q, d, e0, en) else None


def chain_holds(a, q, d, e0: float, en) -> bool:
    """Whether ``en`` is ``chain_loop``'s result: every end is max(a, the previous end + q) + d in the loop's
    float operations (by induction from ``e0``, the loop's result is the only array that satisfies this)."""
    b = np.empty(en.size, np.float64)
    b[0] = e0
    b[1:] = en[:-1]
    b += q  # in place: the previous ends are not needed again
    t = np.where(a > b, a, b)
    t += d
    return bool(np.array_equal(t, en))


def _positions(anc, L, has) -> np.ndarray:
    """Position in ``anc`` (event indices, unique, any order) of each ``L`` where ``has``, else -1."""
    srt = np.argsort(anc, kind="stable")
    p = np.searchsorted(anc, np.where(has, L, anc[srt[0]] if anc.size else 0), sorter=srt) if anc.size else \
        np.zeros(L.size, np.int64)
    return np.where(has, srt[np.minimum(p, max(anc.size - 1, 0))] if anc.size else -1, -1).astype(np.int64)


def _recorded_targets(order, ptr, e, dev, is_w, a_thr, thr_devs, all_devs, g_rec) -> np.ndarray:
    """Per waiting anchor k: the latest recorded end, over the devices its thread launches to, of the items
    triggered at anchors up to k (those before the first anchor not counted), -(1 << 62) when there is none; the
    other anchors keep ``g_rec``. Per device a running maximum over the items in trigger order."""
    none = -(1 << 62)
    g_rec = g_rec.copy()
    w = np.flatnonzero(is_w)
    if w.size == 0:
        return g_rec
    seq = order[ptr[0]:]
    last = ptr[w + 1] - ptr[0] - 1  # position in seq of the last item triggered at or before each waiter
    at = {}
    for dv in sorted(set(dev.tolist())):
        run = np.maximum.accumulate(np.where(dev[seq] == dv, e[seq], none)) if seq.size else seq
        at[dv] = np.where(last >= 0, run[np.maximum(last, 0)] if seq.size else none, none)
    thr_w = a_thr[w]
    for t in uniq(thr_w).tolist():
        sel = thr_w == t
        devs = thr_devs.get(int(t), all_devs)
        g = np.full(int(sel.sum()), none, np.int64)
        for dv in devs:
            if dv in at:
                g = np.maximum(g, at[dv][sel])
        g_rec[w[sel]] = g
    return g_rec


# ----------------------------------------------------------------------------- the model
class Replay:
    """The dependency chain of a trace, replayable with host intervals removed and host time scaled.

    It pickles without the trace it reads (the model, the window, the name flags): a forked child of the analysis
    builds it ahead and sends it (replay.start_ahead); the parent puts its own trace back (``attach``)."""

    _TRACE = ("model", "window", "flags")

    def __getstate__(self):
        return {k: v for k, v in vars(self).items() if k not in self._TRACE}

    def attach(self, model, window, flags) -> "Replay":
        """This replay (unpickled: no trace) reading ``model`` with its ``window`` and name ``flags`` again."""
        self.model, self.window, self.flags = model, window, flags
        return self

    def __init__(self, model, window=None, flags=None):
        from ..names import name_flags

        m = self.model = model
        self.window = window
        fl = self.flags = flags if flags is not None else name_flags(model.names)
        ntr = len(m.tracks)
        tdev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in m.tracks] + [-1], np.int64)
        gw = np.flatnonzero(member(m.kind, _WORK) & (tdev[m.track] >= 0)) if m.n else \
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
        self.launch_lat_ns = int(median(free_lat)) if free_lat.size else DEFAULT_LAUNCH_NS
        qg = qgap_obs[queued]
        self.dispatch_gap_ns = int(median(np.clip(qg, 0, None))) if qg.size else 0
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
        self.graph_gap_ns = int(median(gg)) if gg.size else DEFAULT_GRAPH_GAP_NS

        # ---- anchors: launch calls of items, and calls that may wait for the GPU
        calls = np.flatnonzero(member(m.kind, _CALLS))
        nid = m.name_id[calls]
        always = fl["sync_rt"][nid] | fl["blocking_copy"][nid]
        maybe_names = np.array([n in _MAYBE_WAIT for n in m.names], bool) | (fl["alloc"] & ~fl["launch"])
        maybe = maybe_names[nid] & ~always
        launchers = uniq(L[has])
        waiters = calls[always | maybe]
        anc = uniq(np.concatenate((launchers, waiters)))
        anc = anc[np.lexsort((anc, m.ts_ns[anc]))]
        self.anchors = anc
        na = anc.size
        self.a_ts = m.ts_ns[anc]
        self.a_end = m.ts_ns[anc] + m.dur_ns[anc]
        self.a_thr = m.track[anc].astype(np.int64)
        # items triggered at anchors: their launch anchor, never before their stream predecessor's trigger
        trig = _positions(anc, L, has) if gw.size else np.zeros(0, np.int64)
        self.item_anchor = trig.copy()
        if gw.size:
            grp = np.cumsum(first) - 1
            big = na + 2
            t2 = np.maximum.accumulate(trig + 1 + grp * big) - grp * big - 1
            trig = t2
        self.trig = trig
        # devices each thread launches to
        thr_devs: dict[int, set] = {}
        # the distinct (thread, device) pairs once, in order of first launch (each repeats thousands of times)
        pairs = dict.fromkeys(zip(m.track[L[has]].tolist(), self.dev[has].tolist()))
        for t, dv in pairs:
            thr_devs.setdefault(int(t), set()).add(int(dv))
        all_devs = sorted(set(self.dev.tolist()))
        self.thr_devs = {t: sorted(v) for t, v in thr_devs.items()}
        self.devices = all_devs
        # recorded wait target of each waiter: max end of items triggered at anchors <= its own position
        # membership of event indices through a mark over the events (np.isin sorts or tables them first)
        mark = np.zeros(m.n, bool)
        mark[waiters] = True
        is_w = mark[anc]
        mark[:] = False
        mark[calls[always]] = True
        is_always = mark[anc]
        g_rec = np.full(na, np.iinfo(np.int64).min // 4, np.int64)
        if na:
            order = np.argsort(trig, kind="stable")
            ptr = np.searchsorted(trig[order], np.arange(na + 1), side="left")
            g_rec = _recorded_targets(order, ptr, e, self.dev, is_w, self.a_thr, self.thr_devs, all_devs, g_rec)
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
        mark[:] = False
        mark[launchers] = True
        self.is_launcher = mark[anc]
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
        for thr in uniq(self.a_thr).tolist():
            sl = m.track_slice(int(thr))
            ev = np.arange(sl.start, sl.stop)
            hts = m.ts_ns[ev[member(m.kind[ev], hk)]]
            # a thread's events are in start order already (the model's order): sorted only if not
            self.host_ev[int(thr)] = hts if (hts[1:] >= hts[:-1]).all() else np.sort(hts)

    # ------------------------------------------------------------------ running
    def run(self, removed: dict[int, Removed] | None = None, c: float = 0.0, dur=None, nowait=None,
            drop=None, fuse=None, insert=None) -> np.ndarray:
        """Replayed end of every item (``self.items`` order), with ``removed`` host time squeezed out of the
        threads and ``c`` ns of profiler overhead taken off every host event the thread recorded; ``dur``
        replaces the items' durations (``self.items`` order); the calls in ``nowait`` (event indices) no longer
        wait for the GPU; the items in ``drop`` (a mask, ``self.items`` order) do not run: they take no time,
        hold up nothing, and their end is -1e30; the items in ``fuse`` (a mask, ``self.items`` order) run as the
        nodes of one CUDA graph: each at the trace's median launch latency after its (replayed) launch call, and
        one graph dispatch gap after its stream's previous item (replay/frames.py: a frame as one fused call);
        ``insert`` ({thread: (points, ns)}, recorded times) adds host time on a thread: every anchor at or after a
        point (since the origin) starts that much later, in replayed (un-profiled) time: the fused call's own
        dispatch."""
        plain = not removed and dur is None and nowait is None and drop is None and fuse is None and not insert
        if plain:
            # the recorded replay and the calibrated base are asked for again (calibration, the base, the fixes)
            got = self.__dict__.setdefault("_plain_runs", {}).get(float(c))
            if got is not None:
                return got
        end = self._run(removed, c, dur, nowait, drop, fuse, insert)
        if plain:
            end.flags.writeable = False
            self._plain_runs[float(c)] = end
        return end

    def _run(self, removed, c, dur, nowait, drop, fuse, insert) -> np.ndarray:
        removed = removed or {}
        o = self.origin
        na = self.anchors.size
        fs = np.empty(na, np.float64)
        fe = np.empty(na, np.float64)
        skip = np.zeros(na, bool)
        for thr, sel in self._thread_anchors():
            ts, te = self.a_ts[sel], self.a_end[sel]
            R = removed.get(int(thr))
            if R is not None and R.s.size:
                # the removed interval at or before each start and end: shared by the removed time and the count
                # of removed events below
                j = (R.last(np.array([o], np.int64)), R.last(ts), R.last(te))
                r_o = R.before(np.array([o]), j[0])[0]
                rs, re_ = R.before(ts, j[1]), R.before(te, j[2])
                skip[sel] = (re_ - rs) >= (te - ts)
            else:
                r_o, rs, re_ = 0, 0, 0
                R = j = None
            a = ((ts - o) - (rs - r_o)).astype(np.float64)
            b = ((te - o) - (re_ - r_o)).astype(np.float64)
            if c > 0:
                # only the events since the origin lose their overhead, and no time goes before the origin
                RE = R.uncounted if R is not None and R.uncounted.s.size else None
                n_ts, n_te = self._events_before(int(thr), ts, te, RE, j if RE is R else None)
                a = np.where(ts >= o, np.maximum(a - c * n_ts, 0), a)
                b = np.where(te >= o, np.maximum(b - c * n_te, 0), b)
                # overhead never makes time run backwards: each anchor's start and end keep their order (one
                # array of start, end, start, ... filled in place: no stacked copy)
                seq = np.empty(2 * a.size, np.float64)
                seq[0::2], seq[1::2] = a, b
                np.maximum.accumulate(seq, out=seq)
                a, b = seq[0::2], seq[1::2]
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
        if nowait is not None and len(nowait):
            skip |= isin(self.anchors, np.asarray(nowait, np.int64))
        d = self.dur if dur is None else np.asarray(dur, np.int64)
        return self._chain(fs, fe, skip, np.asarray(lat), np.asarray(qg), d,
                           np.asarray(drop, bool) if drop is not None else None)

    def _events_before(self, thr: int, ts, te, R, j=None):
        """Per anchor of ``thr``: the recorded host events since the origin before its start and before its end
        (those in the removed intervals ``R`` not counted; ``j``: ``R.last`` of the origin, the starts and the
        ends). Without removals the same for every overhead: kept."""
        memo = self.__dict__.setdefault("_ev_memo", {})
        ev = self.host_ev.get(thr, np.zeros(0, np.int64))
        if thr not in memo:
            at_s, at_e = np.searchsorted(ev, ts), np.searchsorted(ev, te)
            at_o = int(np.searchsorted(ev, self.origin))
            memo[thr] = (at_s, at_e, at_o, np.clip(at_s - at_o, 0, None), np.clip(at_e - at_o, 0, None))
        at_s, at_e, at_o, n_s, n_e = memo[thr]
        if R is None:
            return n_s, n_e
        # events before t less those inside the removed intervals before t: per interval its events (a count of
        # the sorted events), summed over the intervals before t, and the part of the one t falls in
        ps, pe = np.searchsorted(ev, R.s), np.searchsorted(ev, R.e)
        cum = np.concatenate(([0], np.cumsum(pe - ps)))

        # of the interval t falls in or after: all its events when t is past its end, else those before t
        # (``at``: the events before t, the same count)
        if j is None:
            j = (R.last(np.array([self.origin], np.int64)), R.last(ts), R.last(te))

        def kept(t, at, jt):
            jj = np.maximum(jt, 0)
            part = np.maximum(np.where(t < R.e[jj], at, pe[jj]) - ps[jj], 0)
            return at - np.where(jt >= 0, cum[jj] + part, 0)

        n_o = kept(np.array([self.origin], np.int64), np.array([at_o]), j[0])[0]
        return np.clip(kept(ts, at_s, j[1]) - n_o, 0, None), np.clip(kept(te, at_e, j[2]) - n_o, 0, None)

    def _chain(self, fs, fe, skip, lat, qg, dur, dropped) -> np.ndarray:
        """The run's event loop: the items in trigger order (each at max(its launch call's replayed start + its
        latency, its stream's previous end + its dispatch gap), plus its duration), and at each synchronising
        call that waits, its thread's shift (the call returns when the work it waits for ends, plus its tail).

        Between two waits every thread's shift is constant, so an *epoch* (the anchors up to and including the
        next wait) is computed with arrays: the anchors' replayed starts at once, each stream's chain of items as
        a running maximum over restarts (an item that starts at its launch rather than behind its predecessor)
        plus exact integer sums. The float results must be those of the one-item-at-a-time loop, operation for
        operation (the report prints them rounded, and a calibration bisects on them), so every stream's chain
        is checked against that loop's recurrence, element by element, with the loop's own float operations
        (``max(a, prev + qgap) + dur``): a chain that satisfies it is the loop's result by induction. A chain
        that does not (an addition rounded in a long queue) and a short chain are run item by item."""
        na = self.anchors.size
        NEG = -1e30
        seq = self._order if na else self._pre
        ptr = self._ptr
        end = np.zeros(self.items.size, np.float64)
        lprime = np.zeros(na, np.float64)
        slot, nslot = self._thread_slots()
        shv = np.zeros(max(nslot, 1), np.float64)
        stream_end: dict[int, float] = {}
        dev_end: dict[int, float] = {}
        tdevs, alld = self.thr_devs, self.devices
        startf = self.start.astype(np.float64)
        eff = np.flatnonzero(self.waits & ~skip).tolist() if na else []
        lo = 0
        i_lo = 0
        for k in range(len(eff) + 1):
            hi = eff[k] + 1 if k < len(eff) else na
            lprime[lo:hi] = fs[lo:hi] + shv[slot[lo:hi]]
            i_hi = int(ptr[hi]) if na else seq.size
            if i_hi > i_lo:
                self._epoch_items(seq[i_lo:i_hi], lprime, lat, qg, dur, dropped, startf, end, stream_end, dev_end,
                                  (i_lo, i_hi))
            if k < len(eff):
                p = hi - 1
                th = int(self.a_thr[p])
                sp = float(lprime[p])
                g = max((dev_end.get(dv, NEG) for dv in tdevs.get(th, alld)), default=NEG)
                ret = (sp if sp > g else g) + int(self.tail[p])
                shv[slot[p]] = ret - float(fe[p])
            lo, i_lo = hi, i_hi
        return end

    #: a stream's chain in one epoch shorter than this runs item by item (fewer array operations)
    _SHORT_CHAIN = 48

    def _epoch_items(self, J, lprime, lat, qg, dur, dropped, startf, end, stream_end, dev_end, key=None) -> None:
        """The items ``J`` (trigger order) of one epoch, every anchor they launch from already placed. ``key``:
        the epoch's item range in trigger order; its layout (the items by stream, the streams' bounds) is kept
        for the next run with the same epoch and nothing dropped in it (the fixes' runs share most epochs)."""
        NEG = -1e30
        if dropped is not None:
            dj = dropped[J]
            if dj.any():
                end[J[dj]] = NEG
                J = J[~dj]
                key = None
                if J.size == 0:
                    return
        memo = self.__dict__.setdefault("_epoch_memo", {})
        lay = memo.get(key) if key is not None else None
        if lay is None:
            tr = self.trk[J]
            if tr[0] != tr[-1] or not (tr == tr[0]).all():
                o = np.argsort(tr, kind="stable")
                J2, tr2 = J[o], tr[o]
                cuts = np.flatnonzero(tr2[1:] != tr2[:-1]) + 1
                bounds = [0, *cuts.tolist(), J.size]
            else:
                o, J2, tr2 = None, J, tr
                bounds = [0, J.size]
            groups = [(g0, g1, int(tr2[g0]), int(self.dev[J2[g0]])) for g0, g1 in zip(bounds[:-1], bounds[1:])]
            lay = (o, J2, self.has_launch[J], np.maximum(self.item_anchor[J], 0), groups)
            if key is not None:
                memo[key] = lay
        o, J2, has, anc, groups = lay
        if has.any():
            a = np.where(has, lprime[anc] + lat[J], startf[J])
        else:  # a stream head launched before any anchor (or a trace without launch calls)
            a = startf[J]
        if o is not None:
            a = a[o]
        J = J2
        q_all, d_all = qg[J], dur[J]
        for g0, g1, t, dev in groups:
            e0 = stream_end.get(t, NEG)
            ag, qv, dv = a[g0:g1], q_all[g0:g1], d_all[g0:g1]
            en = None if g1 - g0 < self._SHORT_CHAIN else chain_vector(ag, qv, dv, e0)
            if en is None:
                en = chain_loop(ag, qv, dv, e0)
            end[J[g0:g1]] = en
            stream_end[t] = float(en[-1])
            top = float(en.max())
            if top > dev_end.get(dev, NEG):
                dev_end[dev] = top

    def _thread_anchors(self) -> list:
        """(thread, its anchors' positions) per thread with anchors, in thread order (once per replay)."""
        got = self.__dict__.get("_thr_anchors")
        if got is None:
            slot, _ = self._thread_slots()
            u = uniq(self.a_thr)
            got = self._thr_anchors = [(int(t), np.flatnonzero(slot == i)) for i, t in enumerate(u.tolist())]
        return got

    def _thread_slots(self):
        """Each anchor's thread as a small index (the shifts live in an array), and their number."""
        got = getattr(self, "_slots", None)
        if got is None:
            u, inv = np.unique(self.a_thr, return_inverse=True)
            got = self._slots = (inv.astype(np.int64), int(u.size))
        return got

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
        GPU waited on dependencies a graph does not remove (replay/fixes.py, ``dependency_waits``). On hta's
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
            for t in uniq(self.trk[sel]).tolist():
                ss = sel & (self.trk == t)
                best = max(best, int(self.dur[ss].sum()) + int(ss.sum()) * self.graph_gap_ns)
            out[dv] = max(best, busy.get(dv, 0)) + int(keep.get(dv, 0))
        return out

    # ----------------------------------------------------------- removals
    def thread_events(self, kinds) -> np.ndarray:
        m = self.model
        return np.flatnonzero(member(m.kind, kinds))

    def removal(self, idx_s, idx_e, thr, counted=None) -> dict[int, Removed]:
        """Intervals [idx_s, idx_e) on threads thr -> per thread removed sets. ``counted``: more (start, end, thread)
        intervals removed whose recorded events keep counting for the per-event overhead (a fix that takes off an
        un-profiled estimate of dense host code rather than its recorded events: replay/fixes.py, user-sync)."""
        out = {}
        idx_s, idx_e, thr = (np.asarray(x, np.int64) for x in (idx_s, idx_e, thr))
        if counted is not None:
            cs, ce, ct = (np.asarray(x, np.int64) for x in counted)
        else:
            cs = ce = ct = np.zeros(0, np.int64)
        for t in uniq(np.concatenate((thr, ct))).tolist():
            sel, cel = thr == t, ct == t
            if not cel.any():
                out[int(t)] = Removed(idx_s[sel], idx_e[sel])
                continue
            out[int(t)] = Removed(np.concatenate((idx_s[sel], cs[cel])), np.concatenate((idx_e[sel], ce[cel])),
                                  Removed(idx_s[sel], idx_e[sel]))
        return out
