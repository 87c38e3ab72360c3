"""Replay of each device's dependency chain, and what a finding's fix would save (issue #14).

The model, built once from the trace (``Replay``):

* **GPU work** (kernels, copies, memsets) keeps its recorded duration. An item starts at the latest of
  (its launch call's replayed time + its launch latency) and (the end of the previous item on its stream
  + the GPU-side dispatch gap). The launch latency is the observed one (start - launch call start) for
  an item that was *not* queued behind its stream (it started more than ``QUEUED_NS`` after the previous
  item ended); for a queued item, whose observed latency says only how long it sat in the queue, it is
  the trace's median latency of un-queued items (capped at its observed one). The dispatch gap is the
  observed one for a queued item, the median of those (capped) for the others. With these choices a
  replay of the unchanged trace reproduces every recorded start; the residual reported is what the
  host side does not reproduce.
* **Host threads.** Each thread's own time between its anchors (launch calls and synchronising calls)
  is kept as recorded, less the profiler's overhead ``c`` per recorded host event when calibrated
  (below), less what a fix removes: a replayed time is ``f(t) + shift`` where ``f`` maps recorded thread
  time to replayed time (removed intervals squeezed out, ``c`` taken off per event since the window's
  origin) and ``shift`` is what the waits replayed so far added or took away. An un-queued item's launch
  latency also loses ``c`` (the launch call's own overhead).
* **Synchronising calls** return when the GPU work they wait for ends: a call named as a sync
  (``cuda*Synchronize``, blocking ``cudaMemcpy``; see names.py) always waits; a call that may wait
  (``cudaMemcpyAsync`` from pageable memory, ``cudaFree`` and other allocator calls, ``empty_cache``)
  waits only where the trace shows it waited (it ended after the GPU work launched before it). A wait
  covers all work launched before the call on the devices its thread launches to (a stream sync is
  treated as a device sync). The call returns at ``max(replayed call start, replayed end of that work)
  + tail``, the tail being the recorded time the call took after the work ended.
* **Event waits across streams** (``cudaEventRecord`` + ``cudaStreamWaitEvent``): Kineto records these
  calls without their event or stream ids, so they cannot be paired; an item whose start the recorded
  trace shows was held up by something other than its own stream keeps that delay through its observed
  launch latency (the replay of the unchanged trace stays exact), and a fix that moves host time does
  not move it earlier.
* **Collectives** (multi-rank traces, each rank replayed alone): an NCCL kernel keeps its recorded
  duration, its wait for the peer ranks included. A fix on one rank is projected as if the others
  kept their timing.

The measured span of a device is from the window's origin (the start of the first ``gapscope.step#k``
range, else the device window's first GPU start) to the end of its last GPU item inside the analysis
window, per step. **Calibration**: when the trace carries an un-profiled time of the same steps (our
capture's metadata, ``Analysis.distortion``), the replay takes a fixed overhead ``c`` off every host
event the profiler recorded (op, Python frame, runtime call, annotation), ``c`` chosen so that the replayed
span equals the un-profiled time ("un-profiled, calibrated"). Profiler distortion is per recorded event, not
proportional: a pure-Python loop that records one frame keeps its time, a dispatch path of 20 events per
kernel loses most of it. Otherwise projections are in profiled time and host-side savings may be
overstated (the profiler inflates host time, not GPU time).

**What-if per finding** (``project``): the fix removes host intervals from the launching threads, the
trace is replayed, and the saving is baseline - projection (per step, of the slowest device):

* ``python``: the frame's own time: its intervals minus the ops, runtime calls and other user frames
  inside them (library and built-in Python called from it counts as its own);
* ``sync``: the synchronising ops (``aten::item`` ...) and calls under the frame: their wait, and the
  run-ahead the host loses in them, come back through the replay. When the frame is a check (every
  synchronising op under it is a scalar read, every call of the frame holds one, and no GPU work is
  launched in a call after its last read), a second figure removes the whole check (``with_ops_ns``): the
  frame's host time (other user frames inside it excepted) and the GPU work launched from it, i.e. the ops
  computing the value read as well. The trace cannot show that nothing else uses those ops' results
  (Kineto records no tensor identities), so the fix text says "if nothing else uses them";
* ``allocator``: the allocator calls and ``empty_cache`` under the frame, and the implicit syncs in them;
* ``copy``: a pageable copy's blocking: its launch call beyond the median launch-call cost, and the sync
  calls inside the op that issued it; on the GPU the copy takes what a pinned one of the same bytes takes
  (the trace's pinned bandwidth for that direction, else ``PINNED_GBPS``);
* ``launch`` (the launch-bound finding; else the short-gaps one): "the step as one graph replay": the
  window's GPU items back to back, each after the observed graph dispatch gap (the median gap between
  nodes of one ``cudaGraphLaunch``, or ``DEFAULT_GRAPH_GAP_NS`` when the trace has no graph launch).

Other causes (collective, host-idle, profiler) are not projected (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
#: a per-event overhead that takes all recorded host time off (calibration's upper end)
NO_HOST = 1e12
#: host-to-device / device-to-host bandwidth of a pinned copy when the trace has none to measure (GB/s = bytes/ns):
#: a conservative PCIe Gen4 x16 figure (an H200's Gen5 link does about twice that)
PINNED_GBPS = 25.0
#: synchronising ops that hand one value of a device tensor to the host (a check's read)
SCALAR_READS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero")
#: calls that may wait for the GPU: they wait in the replay only where the trace shows they waited
_MAYBE_WAIT = ("cudaMemcpyAsync", "cudaMemsetAsync", "hipMemcpyAsync", "hipMemsetAsync", "cuMemcpyAsync",
               "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2")
_WORK = (int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET))
_CALLS = (int(Kind.RUNTIME), int(Kind.DRIVER))


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


def _inside(s, e, t):
    """t inside one of the sorted disjoint intervals [s, e)."""
    if s.size == 0:
        return np.zeros(np.shape(t), bool)
    j = np.searchsorted(s, t, side="right") - 1
    return (j >= 0) & (t < e[np.clip(j, 0, None)])


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


# ----------------------------------------------------------------------------- results
@dataclass
class DeviceProjection:
    device: int
    steps: int
    recorded_ns: int  # recorded span of the window (origin .. last GPU end), all steps
    replayed_ns: int  # replay of the unchanged trace
    baseline_ns: int  # replay with the calibrated overhead taken off (= replayed_ns when not calibrated)
    floor_ns: int  # GPU busy (union of GPU work) in the window: the GPU-side lower bound
    graph_ns: int  # the window's GPU items back to back at the graph dispatch gap
    residual_pct: float
    calibrated: bool
    overhead_ns: float  # calibrated profiler overhead per recorded host event (0 when not calibrated)

    def per_step(self, ns) -> float:
        return ns / max(self.steps, 1)


@dataclass
class Projection:
    """Per device projections and, per finding id, the saving per step (ns) of its fix (None: not projected)."""

    devices: list[DeviceProjection] = field(default_factory=list)
    saving_ns: dict[str, int | None] = field(default_factory=dict)  # per step
    what: dict[str, str] = field(default_factory=dict)  # finding id -> the fix that was replayed
    #: per step, a sync finding's whole check removed (its ops and their GPU work too), where the frame is a check
    with_ops_ns: dict[str, int] = field(default_factory=dict)
    calibrated: bool = False
    steps: int = 1
    unprofiled_range_ns: tuple[int, int] | None = None  # per step, from the capture's samples
    graph_gap_ns: int = DEFAULT_GRAPH_GAP_NS
    graph_gap_observed: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def baseline_ns(self) -> int:
        """The step time (slowest device), per step."""
        return max((d.baseline_ns // max(d.steps, 1) for d in self.devices), default=0)

    @property
    def floor_ns(self) -> int:
        return max((d.floor_ns // max(d.steps, 1) for d in self.devices), default=0)

    def ranked(self, findings: list) -> list:
        """``findings`` ranked by the projected saving of their fix (the report's order); those not projected
        follow in their own order (by idle time). The Markdown, the JSON and the explorer all rank this way."""
        sv = self.saving_ns
        return sorted(findings, key=lambda f: (sv.get(f.id) is None, -(sv.get(f.id) or 0)))

    def saving_pct(self, fid: str) -> float | None:
        s = self.saving_ns.get(fid)
        b = self.baseline_ns
        return None if s is None or b <= 0 else 100.0 * s / b

    def headline(self) -> str | None:
        """"step 14.8 ms un-profiled (7.7–15.1); GPU floor 1.7 ms: host-bound, up to 8.7x faster with the
        host out of the way"."""
        if not self.devices:
            return None
        from .units import fmt_ns

        b, fl = self.baseline_ns, self.floor_ns
        what = "un-profiled" if self.calibrated else "profiled"
        rng = ""
        if self.calibrated and self.unprofiled_range_ns:
            lo, hi = self.unprofiled_range_ns
            rng = f" ({lo / 1e6:.1f}–{hi / 1e6:.1f} ms)" if b >= 1e6 else f" ({lo / 1e3:.0f}–{hi / 1e3:.0f} µs)"
        s = f"step {fmt_ns(b)} {what}{rng}; GPU floor {fmt_ns(fl)}"
        if fl > 0 and b > 1.25 * fl:
            s += f": host-bound, up to {b / fl:.1f}x faster with the host out of the way"
        elif fl > 0:
            s += ": GPU-bound, the host is not what limits this step"
        if not self.calibrated:
            s += " (profiled time: host-side savings may be overstated)"
        return s


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
        queued = (~first) & (qgap_obs <= QUEUED_NS)
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
            drop=None) -> np.ndarray:
        """Replayed end of every item (``self.items`` order), with ``removed`` host time squeezed out of the
        threads and ``c`` ns of profiler overhead taken off every host event the thread recorded; ``dur``
        replaces the items' durations (``self.items`` order); the calls in ``nowait`` (event indices) no longer
        wait for the GPU; the items in ``drop`` (a mask, ``self.items`` order) do not run: they take no time,
        hold up nothing, and their end is -1e30."""
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
            fs[sel] = o + a
            fe[sel] = o + b
        # the launch latency includes the launch call's recorded overhead: it loses c too
        lat = np.maximum(self.lat - c, 0).tolist() if c > 0 else self.lat.tolist()
        qg, start = self.qgap.tolist(), self.start.tolist()
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

    def graph(self) -> dict[int, int]:
        """The window's GPU items back to back, one graph dispatch gap before each (per stream, the longest
        stream counts)."""
        out = {}
        for dv in self.devices:
            sel = self.in_window & (self.dev == dv)
            if not sel.any():
                continue
            best = 0
            for t in np.unique(self.trk[sel]).tolist():
                ss = sel & (self.trk == t)
                best = max(best, int(self.dur[ss].sum()) + int(ss.sum()) * self.graph_gap_ns)
            out[dv] = best
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


# ----------------------------------------------------------------------------- the fixes
def _frame_intervals(m, name: str | None, kinds=(int(Kind.PYTHON),)):
    """(start, end, thread) of the events named ``name`` of the given kinds."""
    if not name:
        return None
    try:
        nid = m.names.index(name)
    except ValueError:
        return None
    idx = np.flatnonzero((m.name_id == nid) & np.isin(m.kind, np.array(kinds, np.uint8)))
    if idx.size == 0:
        idx = np.flatnonzero(m.name_id == nid)
    if idx.size == 0:
        return None
    return m.ts_ns[idx], m.ts_ns[idx] + m.dur_ns[idx], m.track[idx].astype(np.int64)


def _within(m, idx, fr, window=None):
    """Mask over idx: the event starts inside one of the frame intervals on its own thread (all True without a
    frame: then, when the window is clipped, inside the measured steps)."""
    if fr is None:
        if window is not None and getattr(window, "clipped", False):
            return window.cpu_in(m, idx)
        return np.ones(idx.size, bool)
    fs, fe, ft = fr
    ok = np.zeros(idx.size, bool)
    for t in np.unique(ft).tolist():
        us, ue = union(fs[ft == t], fe[ft == t])
        sel = m.track[idx] == t
        ok[sel] = _inside(us, ue, m.ts_ns[idx[sel]])
    return ok


def _python_own(r: Replay, name: str):
    m = r.model
    fr = _frame_intervals(m, name)
    if fr is None:
        return None
    fs, fe, ft = fr
    py = m.kind == int(Kind.PYTHON)
    user = (r.flags["user_frame"][m.name_id] | r.flags["launcher_frame"][m.name_id]) & py \
        & (m.name_id != m.names.index(name))
    # kept: runtime calls, the ops that issue them, other user frames and kernel launchers; ops that issue no
    # runtime call (CPU tensor work, views) are host work of the frame
    calls = np.flatnonzero(np.isin(m.kind, np.array(_CALLS, np.uint8)))
    ops = np.flatnonzero(m.kind == int(Kind.CPU_OP))
    issuing = np.zeros(m.n, bool)
    for t in np.unique(m.track[calls]).tolist():
        ct = calls[m.track[calls] == t]
        ot = ops[m.track[ops] == t]
        if ot.size == 0:
            continue
        cs = np.sort(m.ts_ns[ct])
        # an op issues a call when a call starts inside it
        a = np.searchsorted(cs, m.ts_ns[ot], side="left")
        b = np.searchsorted(cs, m.ts_ns[ot] + m.dur_ns[ot], side="left")
        issuing[ot[b > a]] = True
    keep_k = np.isin(m.kind, np.array(_CALLS, np.uint8)) | issuing | user
    S, E, T = [], [], []
    for t in np.unique(ft).tolist():
        a_s, a_e = fs[ft == t], fe[ft == t]
        sl = m.track_slice(int(t))
        ev = np.arange(sl.start, sl.stop)
        ev = ev[keep_k[ev]]
        # only what runs inside the frame (its ancestors enclose it: they are not its children)
        us, ue = union(a_s, a_e)
        es, ee = m.ts_ns[ev], m.ts_ns[ev] + m.dur_ns[ev]
        j = np.clip(np.searchsorted(us, es, side="right") - 1, 0, None)
        inside = (us.size > 0) & (es >= us[j]) & (ee <= ue[j]) & ~((es == us[j]) & (ee == ue[j]))
        ev = ev[inside]
        s, e = _subtract(a_s, a_e, m.ts_ns[ev], m.ts_ns[ev] + m.dur_ns[ev])
        S.append(s), E.append(e), T.append(np.full(s.size, t, np.int64))
    return np.concatenate(S), np.concatenate(E), np.concatenate(T)


def _check_ops(r: Replay, frame: str | None, reads):
    """The whole check of a sync finding: ((s, e, thread) to remove, items to drop, number of ops), or None when the
    frame is not a check (see ``project``'s sync entry in the module docstring)."""
    m = r.model
    if not frame or reads.size == 0:
        return None
    names = np.array([m.names[i] for i in m.name_id[reads].tolist()])
    if not np.isin(names, SCALAR_READS).all() or (m.kind[reads] != int(Kind.CPU_OP)).any():
        return None
    fr = _frame_intervals(m, frame)
    if fr is None:
        return None
    fs, fe, ft = fr
    nid = m.names.index(frame)
    py = np.flatnonzero((m.kind == int(Kind.PYTHON)) & (m.name_id != nid) & r.flags["user_frame"][m.name_id])
    L = m.launch[r.items]
    S, E, T = [], [], []
    drop = np.zeros(r.items.size, bool)
    n_ops = 0
    ops = np.flatnonzero(m.kind == int(Kind.CPU_OP))
    for t in np.unique(ft).tolist():
        us, ue = union(fs[ft == t], fe[ft == t])
        rd = reads[m.track[reads] == t]
        rs, re_ = m.ts_ns[rd], m.ts_ns[rd] + m.dur_ns[rd]
        lt = L[(L >= 0)]
        lt = lt[m.track[lt] == t]
        for a, b in zip(us.tolist(), ue.tolist()):
            inn = (rs >= a) & (rs < b)
            if not inn.any():
                return None  # a call of the frame without a read: the frame does more than check
            last = int(re_[inn].max())
            if ((m.ts_ns[lt] >= last) & (m.ts_ns[lt] < b)).any():
                return None  # GPU work after the read: it may use what was computed
        # the frame's own time: nested user frames excepted (they may do other work)
        pt = py[m.track[py] == t]
        ps, pe = m.ts_ns[pt], m.ts_ns[pt] + m.dur_ns[pt]
        j = np.clip(np.searchsorted(us, ps, side="right") - 1, 0, None)
        nested = (us.size > 0) & (ps >= us[j]) & (pe <= ue[j]) & ~((ps == us[j]) & (pe == ue[j]))
        s_, e_ = _subtract(us, ue, ps[nested], pe[nested])
        S.append(s_), E.append(e_), T.append(np.full(s_.size, t, np.int64))
        own = _outermost(m, ops[(m.track[ops] == t) & _inside(s_, e_, m.ts_ns[ops])])
        n_ops += int((~np.isin(own, rd)).sum())
        sel = (L >= 0) & (m.track[np.where(L >= 0, L, 0)] == t)
        drop[sel] = _inside(s_, e_, m.ts_ns[L[sel]])
    return (np.concatenate(S), np.concatenate(E), np.concatenate(T)), drop, n_ops


def _outermost(m, idx):
    """Drop events of idx nested (by time, on the same thread) inside another event of idx."""
    if idx.size == 0:
        return idx
    keep = np.ones(idx.size, bool)
    for t in np.unique(m.track[idx]).tolist():
        sel = np.flatnonzero(m.track[idx] == t)
        ii = idx[sel]
        o = np.lexsort((-m.dur_ns[ii], m.ts_ns[ii]))
        s, e = m.ts_ns[ii][o], (m.ts_ns[ii] + m.dur_ns[ii])[o]
        run = np.maximum.accumulate(e)
        inner = np.r_[False, e[1:] <= run[:-1]]
        keep[sel[o]] = ~inner
    return idx[keep]


def _calls_under(r: Replay, mask_names, frame, kinds=(int(Kind.CPU_OP), int(Kind.RUNTIME), int(Kind.DRIVER))):
    m = r.model
    idx = np.flatnonzero(mask_names[m.name_id] & np.isin(m.kind, np.array(kinds, np.uint8)))
    fr = _frame_intervals(m, frame)
    if frame and fr is None:
        return np.zeros(0, np.int64)
    idx = idx[_within(m, idx, fr, r.window)]
    return _outermost(m, idx)


def _copy_removal(r: Replay, kind: str | None, pageable_only: bool, frame):
    from .activity import copy_kind

    m = r.model
    memk = int(Kind.MEMCPY)
    sel = (m.kind[r.items] == memk) & r.has_launch & r.in_window
    cand = r.items[sel]
    ok = []
    for i in cand.tolist():
        nm = m.name(i)
        ck = copy_kind(nm)
        if not ck.startswith(("HtoD", "DtoH")):  # pinned memory and non_blocking are about host copies
            continue
        if kind and ck != kind:
            continue
        if pageable_only and "Pageable" not in nm:
            continue
        ok.append(i)
    if not ok:
        return None
    ok = np.array(ok, np.int64)
    L = m.launch[ok]
    fr = _frame_intervals(m, frame)
    if frame and fr is not None:
        inn = _within(m, L, fr)
        ok, L = ok[inn], L[inn]
    if L.size == 0:
        return None
    # on the GPU, a pinned copy of the same bytes: at the trace's pinned bandwidth for this direction
    pos = np.searchsorted(r.items, ok, sorter=r.item_sort)
    pos = r.item_sort[pos]
    dur = r.dur.copy()
    page = np.array(["Pageable" in m.name(i) for i in ok.tolist()], bool)
    bw = _pinned_gbps(r, kind)
    nb = m.nbytes[ok]
    dur[pos[page]] = np.minimum(dur[pos[page]], np.ceil(nb[page] / bw).astype(np.int64))
    # median launch-call cost of kernel launches
    lk = m.launch[r.items[(m.kind[r.items] == int(Kind.KERNEL)) & r.has_launch]]
    cost = int(np.median(m.dur_ns[lk])) if lk.size else 0
    S = [m.ts_ns[L] + np.minimum(cost, m.dur_ns[L])]
    E = [m.ts_ns[L] + m.dur_ns[L]]
    T = [m.track[L].astype(np.int64)]
    # sync calls inside the op that issued each copy
    ops = m.op[L]
    ops = np.unique(ops[ops >= 0])
    if ops.size:
        syn = np.flatnonzero(r.flags["sync_rt"][m.name_id] & np.isin(m.kind, np.array(_CALLS, np.uint8)))
        for o in ops.tolist():
            os_, oe = int(m.ts_ns[o]), int(m.ts_ns[o] + m.dur_ns[o])
            inn = syn[(m.track[syn] == m.track[o]) & (m.ts_ns[syn] >= os_) & (m.ts_ns[syn] < oe)]
            S.append(m.ts_ns[inn]), E.append(m.ts_ns[inn] + m.dur_ns[inn]), T.append(m.track[inn].astype(np.int64))
    return (np.concatenate(S), np.concatenate(E), np.concatenate(T)), dur, bw, L


def _pinned_gbps(r: Replay, kind: str | None) -> float:
    """Median bandwidth (GB/s = bytes/ns) of the trace's pinned copies of ``kind`` of 1 MiB or more, else
    ``PINNED_GBPS``."""
    from .activity import copy_kind

    m = r.model
    it = r.items[m.kind[r.items] == int(Kind.MEMCPY)]
    bws = [m.nbytes[i] / m.dur_ns[i] for i in it.tolist() if "Pinned" in m.name(i) and m.nbytes[i] >= 1 << 20
           and m.dur_ns[i] > 0 and (not kind or copy_kind(m.name(i)) == kind)]
    return float(np.median(bws)) if bws else PINNED_GBPS


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def fix_for(a, r: Replay, f):
    """What fixing finding ``f`` means: ("remove", (s, e, thread), what, None or (item durations, calls that
    no longer wait)), or ("graph", None, what, None), or None."""
    m = r.model
    ev = f.evidence or {}
    cause = f.cause
    frame = ev.get("frame")
    where = f" in `{frame}`" if frame else ""
    if cause == "launch":
        # a step that syncs with the host cannot be captured as it is (the launch advice says so): the projection
        # is of the step once those syncs are on the GPU
        return ("graph", None, "the step as one CUDA graph replay" + (
            ", its host syncs moved onto the GPU first" if a.syncs else ""), None)
    if cause == "python" and frame:
        iv = _python_own(r, frame)
        return ("remove", iv, f"remove `{frame}`'s own host time", None) if iv is not None else None
    if cause == "sync":
        mask = r.flags["sync_op"] | r.flags["sync_rt"] | r.flags["blocking_copy"]
        idx = _calls_under(r, mask, frame)
        if idx.size == 0:
            return None
        return ("remove", (m.ts_ns[idx], m.ts_ns[idx] + m.dur_ns[idx], m.track[idx].astype(np.int64)),
                f"remove the {_n(idx.size, 'synchronising call')}{where}", None)
    if cause == "allocator":
        mask = r.flags["alloc"] | r.flags["empty_cache"]
        idx = _calls_under(r, mask, frame)
        if idx.size == 0:
            return None
        return ("remove", (m.ts_ns[idx], m.ts_ns[idx] + m.dur_ns[idx], m.track[idx].astype(np.int64)),
                f"remove the {_n(idx.size, 'allocator call')}{where} and their implicit syncs", None)
    if cause == "copy":
        kind = ev.get("kind")
        pageable = bool(ev.get("pageable"))
        if not kind and f.gap_rows.size:
            kind = (a.gap_detail(int(f.gap_rows[0])).extra.get("copy") or {}).get("kind")
        got = _copy_removal(r, kind, pageable, frame)
        if got is None:
            return None
        iv, dur, bw, calls = got
        return ("remove", iv, f"pinned memory and non_blocking=True: the copies stop blocking the host and run at "
                              f"{bw:.0f} GB/s", (dur, calls))
    return None


# ----------------------------------------------------------------------------- entry point
def _steps(a) -> int:
    w = a.window
    n = len(set(w.steps)) if getattr(w, "clipped", False) else 0
    if n:
        return n
    # other traces: torch.profiler's ProfilerStep#N ranges, when the schedule recorded some
    m = a.model
    ps = [i for i, nm in enumerate(m.names) if nm.startswith("ProfilerStep#")]
    if ps:
        idx = np.flatnonzero(np.isin(m.name_id, np.array(ps, np.int32)) & (m.kind == int(Kind.ANNOTATION)))
        if idx.size:
            return int(np.unique(m.name_id[idx]).size)
    return 1


#: an un-profiled time up to this factor above the replayed recording is the same step within timing noise
#: (calibrated with no overhead taken off); above it, it was not measured under the recording's conditions
CAL_SLACK = 1.05


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


def _graph_owner(a) -> str | None:
    """The launch finding that gets the graph-replay fix: of those whose gaps mostly came before the next
    kernel's launch (the CPU was late, not the GPU's own dispatch of queued work), the one explaining the most
    idle time. Titles are not read: the findings may be worded differently tomorrow."""
    g, m = a.gaps, a.model
    best, best_idle = None, -1
    for f in a.findings:
        if f.cause != "launch":
            continue
        rows = np.asarray(f.gap_rows, np.int64)
        if rows.size:
            li = g.launch_idx[rows]
            queued = (li >= 0) & (m.ts_ns[np.where(li >= 0, li, 0)] < g.start_ns[rows])
            if queued.mean() > 0.5:
                continue
        if f.idle_ns > best_idle:
            best, best_idle = f.id, f.idle_ns
    return best


def project(a) -> Projection:
    """Replay ``a``'s trace, calibrate it to the un-profiled time when the trace has one, and project the
    saving of each finding's fix."""
    m = a.model
    r = Replay(m, a.window, a.flags)
    p = Projection(graph_gap_ns=r.graph_gap_ns, graph_gap_observed=r.graph_gap_observed)
    if not r.devices or r.items.size == 0:
        return p
    steps = _steps(a)
    p.steps = steps
    rec = r.span(r.end.astype(np.float64))
    rep = r.span(r.run())
    floor, graph = r.floor(), r.graph()
    dist = a.distortion
    c = 0.0
    slow = max(rec, key=lambda d: rec[d]) if rec else None
    unprof_long = False
    if dist and slow is not None and dist.get("unprofiled_us") and \
            float(dist["unprofiled_us"]) * 1e3 > CAL_SLACK * rep[slow]:
        # the profiler only adds time: an un-profiled time well above the recording is not this recording's
        # (hf-llama.decode: 213.5 ms measured for a 49.7 ms recording on a loaded node); c would be 0 and the
        # projection the profiled one, so it is not called calibrated
        from .units import fmt_ns

        unprof_long = True
        p.notes.append(f"the capture's un-profiled time ({fmt_ns(float(dist['unprofiled_us']) * 1e3 / steps)} per "
                       f"step) is longer than the profiled step ({fmt_ns(rep[slow] / steps)}): it was not measured "
                       "under the same conditions, so nothing is calibrated")
    if dist and slow is not None and dist.get("unprofiled_us") and not unprof_long:
        target = float(dist["unprofiled_us"]) * 1e3
        # the capture times the same steps with a synchronize at each end: the recorded span is that window
        c = _calibrate(r, target, slow)
        p.calibrated = True
        g = m.gapscope_meta or {}
        smp = g.get("unprofiled_samples_us")
        if isinstance(smp, list) and smp and all(isinstance(x, (int, float)) for x in smp):
            p.unprofiled_range_ns = (int(min(smp) * 1e3 / steps), int(max(smp) * 1e3 / steps))
        elif isinstance(g.get("unprofiled"), dict):
            u = g["unprofiled"]
            if isinstance(u.get("min_us"), (int, float)) and isinstance(u.get("max_us"), (int, float)):
                p.unprofiled_range_ns = (int(u["min_us"] * 1e3 / steps), int(u["max_us"] * 1e3 / steps))
    base_end = r.run(None, c) if c else None
    base = r.span(base_end) if base_end is not None else rep
    for dv in r.devices:
        if dv not in rec:
            continue
        res = 100.0 * abs(rep[dv] - rec[dv]) / rec[dv] if rec[dv] > 0 else 0.0
        p.devices.append(DeviceProjection(dv, steps, rec[dv], rep[dv], base[dv], floor.get(dv, 0),
                                          graph.get(dv, 0), res, p.calibrated, c))
    if p.calibrated and p.devices and max(base.values()) > 1.01 * float(dist["unprofiled_us"]) * 1e3:
        over = 100.0 * (max(base.values()) / (float(dist["unprofiled_us"]) * 1e3) - 1)
        p.notes.append(f"the replay without any host time is still {over:.0f}% above the un-profiled time (the "
                       "profiler also slows the GPU side): the projection starts from that longer step")
    if r.items.size and a.flags["coll_kernel"][m.name_id[r.items[r.in_window]]].any():
        p.notes.append("each rank is replayed alone: collective kernels keep their recorded duration, their wait "
                       "for the other ranks included")
    base_step = max(base.values()) / steps
    graph_owner = _graph_owner(a)
    seen: dict[tuple, str] = {}
    for f in a.findings:
        if f.cause == "launch" and f.id != graph_owner:
            p.saving_ns[f.id] = None
            continue
        try:
            fx = fix_for(a, r, f)
        except (ValueError, IndexError, KeyError):
            fx = None
        if fx is None:
            p.saving_ns[f.id] = None
            continue
        kind, iv, what, dur = fx
        if kind == "graph":
            proj_step = max(graph.values()) / steps
        else:
            s, e, t = iv
            d, nw = dur if dur is not None else (None, None)
            end = r.run(r.removal(s, e, t), c, d, nw)
            proj_step = max(r.span(end).values()) / steps
        sv = int(round(max(base_step - proj_step, 0.0)))
        if f.cause == "sync" and kind == "remove":
            frame = (f.evidence or {}).get("frame")
            try:
                reads = _calls_under(r, r.flags["sync_op"] | r.flags["sync_rt"] | r.flags["blocking_copy"], frame)
                chk = _check_ops(r, frame, reads)
            except (ValueError, IndexError, KeyError):
                chk = None
            if chk is not None:
                (cs, ce, ct), drop, n_ops = chk
                end = r.run(r.removal(cs, ce, ct), c, drop=drop)
                sv2 = int(round(max(base_step - max(r.span(end).values()) / steps, sv)))
                p.with_ops_ns[f.id] = sv2
                from .units import fmt_ns

                what = (f"{what}; with the {_n(n_ops, 'op')} computing the values read, if nothing else uses "
                        f"them: −{fmt_ns(sv2)} per step")
        # two findings with the same fix (a copy's gaps and its pageable memory) are one saving, not two
        first = seen.get((what, sv))
        if first is not None:
            p.saving_ns[f.id] = None
            p.what[f.id] = f"the same fix as {first}"
            continue
        seen[(what, sv)] = f.id
        p.saving_ns[f.id] = sv
        p.what[f.id] = what
    return p
