"""Device windows, busy time, compute gaps and their causes, all vectorised.

A gap on a device is a maximal interval of its window where no kernel (of positive duration) runs on
any of its streams. Window = first GPU activity start .. last GPU activity end on that device
(kernels, memcpys, memsets), or the window given by ``window.py`` (the measured steps); GPU work is
clipped to it. Busy + idle = window exactly, in integer nanoseconds.

Per-stream numbers (``DeviceStats.stream_gaps``) are measured against the same device window: a
stream's gaps are the parts of the window where that stream runs no kernel, leading and trailing
idle included, so their sum is the stream's idle time (window - stream busy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from ..trace.model import Kind, TraceModel, TrackKind
from .hosttime import host_times, owners_at
from .intervals import Coverage, GroupedCoverage, median, name_ids
from .names import STEP_ANNOTATION_RE, name_flags
from .thresholds import MAX_CHAIN, SCREEN_POINTS, SCREEN_SHARE, Thresholds

#: Kind as plain ints: numpy compares a column with an IntEnum member ~10x slower than with an int
KI = SimpleNamespace(**{k.name: int(k) for k in Kind})

from .causes import CAUSES  # noqa: E402,F401  (re-exported: the registry's live list of cause names)

#: how the launching thread spent [t0, t_launch] (priority: sync > allocator > runtime > profiler > op > python)
BUCKETS = ("sync", "allocator", "runtime", "profiler", "op", "python", "idle")


@dataclass
class DeviceStats:
    rank: int | None
    device: int
    name: str | None
    window_start_ns: int
    window_end_ns: int
    kernel_busy_ns: int
    copy_busy_ns: int
    stream_busy_ns: dict[int, int] = field(default_factory=dict)
    kernel_count: int = 0
    #: stream -> {"busy_ns", "idle_ns", "gaps", "largest_gap_ns", "kernels"} within the device window
    stream_gaps: dict[int, dict] = field(default_factory=dict)
    #: time in collective kernels spent waiting for the last rank (from the ranks' job, ranks.job.RankJob; 0 otherwise)
    collective_wait_ns: int = 0
    collective_late_rank: int | None = None

    @property
    def window_ns(self) -> int:
        return self.window_end_ns - self.window_start_ns

    @property
    def idle_ns(self) -> int:
        return self.window_ns - self.kernel_busy_ns

    @property
    def idle_pct(self) -> float:
        # min: 100.0 * idle / window rounds past 100 on windows near 1e18 ns where idle == window
        return min(100.0, 100.0 * self.idle_ns / self.window_ns) if self.window_ns > 0 else 0.0


def _gaps_from_kernels(ks, ke, kidx, w0, w1):
    """Gaps of [w0, w1) not covered by kernels (ks, ke sorted by ks); next kernel index per gap."""
    if ks.size == 0:
        if w1 > w0:
            return (np.array([w0], np.int64), np.array([w1], np.int64), np.array([-1], np.int64), 0)
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    run = np.maximum.accumulate(ke)
    new = np.empty(ks.size, dtype=bool)
    new[0] = True
    new[1:] = ks[1:] > run[:-1]
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:] - 1, [ks.size - 1]))
    bs, be = ks[first], run[last]
    busy = int((be - bs).sum())
    gs = np.concatenate(([w0], be))
    ge = np.concatenate((bs, [w1]))
    nxt = np.concatenate((kidx[first], [-1]))
    keep = ge > gs
    return gs[keep], ge[keep], nxt[keep], busy


def device_stats_and_gaps(model: TraceModel, window: dict[int, tuple[int, int]] | None = None):
    """Per device stats and the raw (unsorted) gap columns. ``window``: device -> [start, end) to analyse
    (GPU work clipped to it; devices not in it are left out); None: each device's whole activity."""
    kind = model.kind
    ts = model.ts_ns
    end = ts + model.dur_ns
    gtracks = [t for t in model.tracks if t.kind is TrackKind.GPU and t.device >= 0]
    stats: list[DeviceStats] = []
    cols = {"device": [], "start": [], "end": [], "next": []}
    for dev in sorted({t.device for t in gtracks}):
        if window is not None and dev not in window:
            continue
        lo, hi = window[dev] if window is not None else (None, None)
        tids = [t for t in gtracks if t.device == dev]
        ks_l, ke_l, ki_l, w_s, w_e, cs_l, ce_l = [], [], [], [], [], [], []
        per_stream: dict[int, tuple[list, list]] = {}
        for t in tids:
            sl = model.track_slice(t.id)
            k = kind[sl]
            idx = np.arange(sl.start, sl.stop, dtype=np.int64)
            work = (k == KI.KERNEL) | (k == KI.MEMCPY) | (k == KI.MEMSET)
            if lo is not None:
                work &= (ts[sl] < hi) & ((end[sl] > lo) | ((end[sl] == ts[sl]) & (ts[sl] >= lo)))
            if not work.any():
                continue
            w_s.append(int(ts[sl][work].min()))
            w_e.append(int(end[sl][work].max()))
            isk = work & (k == KI.KERNEL) & (model.dur_ns[sl] > 0)
            ki = idx[isk]
            s_, e_ = ts[ki], end[ki]
            if lo is not None:
                s_, e_ = np.maximum(s_, lo), np.minimum(e_, hi)
            ks_l.append(s_)
            ke_l.append(e_)
            ki_l.append(ki)
            ps = per_stream.setdefault(t.stream, ([], []))
            ps[0].append(s_)
            ps[1].append(e_)
            ci = idx[work & ((k == KI.MEMCPY) | (k == KI.MEMSET))]
            s_, e_ = ts[ci], end[ci]
            if lo is not None:
                s_, e_ = np.maximum(s_, lo), np.minimum(e_, hi)
            cs_l.append(s_)
            ce_l.append(e_)
        if not w_s:
            continue
        w0, w1 = (min(w_s), max(w_e)) if lo is None else (lo, hi)
        stream_busy: dict[int, int] = {}
        sgaps: dict[int, dict] = {}
        for sid, (ss, se) in per_stream.items():
            ss_, se_ = np.concatenate(ss), np.concatenate(se)
            cov = Coverage(ss_, se_)
            stream_busy[sid] = cov.total
            if ss_.size == 0:
                continue
            gs_ = np.concatenate(([w0], cov.e))
            ge_ = np.concatenate((cov.s, [w1]))
            gl = ge_ - gs_
            gl = gl[gl > 0]
            sgaps[sid] = {"busy_ns": cov.total, "idle_ns": (w1 - w0) - cov.total, "gaps": int(gl.size),
                          "largest_gap_ns": int(gl.max()) if gl.size else 0, "kernels": int(ss_.size)}
        ks = np.concatenate(ks_l) if ks_l else np.zeros(0, np.int64)
        ke = np.concatenate(ke_l) if ke_l else np.zeros(0, np.int64)
        ki = np.concatenate(ki_l) if ki_l else np.zeros(0, np.int64)
        o = np.lexsort((-ke, ks))
        ks, ke, ki = ks[o], ke[o], ki[o]
        gs, ge, nx, busy = _gaps_from_kernels(ks, ke, ki, w0, w1)
        copy_busy = Coverage(np.concatenate(cs_l) if cs_l else [], np.concatenate(ce_l) if ce_l else []).total
        stats.append(
            DeviceStats(model.rank, dev, model.device_name(dev), w0, w1, busy, copy_busy, stream_busy, int(ks.size),
                        sgaps)
        )
        cols["device"].append(np.full(gs.size, dev, np.int32))
        cols["start"].append(gs)
        cols["end"].append(ge)
        cols["next"].append(nx)
    out = {k: (np.concatenate(v) if v else np.zeros(0, np.int32 if k == "device" else np.int64)) for k, v in cols.items()}
    return stats, out


def stream_gaps(model: TraceModel, track_id: int, window: tuple[int, int] | None = None):
    """(start, end, next kernel) of the gaps of one stream, within the stream's own kernel window
    (only kernels that overlap ``window``, when given, count)."""
    sl = model.track_slice(track_id)
    k = model.kind[sl]
    sel = (k == KI.KERNEL) & (model.dur_ns[sl] > 0)
    if window is not None:
        sel &= (model.ts_ns[sl] < window[1]) & (model.ts_ns[sl] + model.dur_ns[sl] > window[0])
    idx = np.arange(sl.start, sl.stop, dtype=np.int64)[sel]
    if idx.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    ks = model.ts_ns[idx]
    ke = ks + model.dur_ns[idx]
    o = np.lexsort((-ke, ks))
    ks, ke, idx = ks[o], ke[o], idx[o]
    gs, ge, nx, _ = _gaps_from_kernels(ks, ke, idx, int(ks[0]), int(ke.max()))
    return gs, ge, nx


class CpuSets:
    """Grouped (per CPU thread) coverage sets used by the cause rules and the CPU breakdown."""

    def __init__(self, model: TraceModel, flags: dict[str, np.ndarray], cfg: Thresholds | None = None):
        cfg = cfg or Thresholds()
        kind = model.kind
        trk = model.track
        cpu_track = np.array([t.kind is TrackKind.CPU for t in model.tracks], dtype=bool)
        on_cpu = cpu_track[trk] if trk.size else np.zeros(0, bool)
        nid = name_ids(model)
        ts = model.ts_ns
        end = ts + model.dur_ns
        rt = ((kind == KI.RUNTIME) | (kind == KI.DRIVER)) & on_cpu
        op = (kind == KI.CPU_OP) & on_cpu
        py = (kind == KI.PYTHON) & on_cpu
        ann = (kind == KI.ANNOTATION) & on_cpu
        if ann.any():
            # step ranges (torch's and the capture's) wrap the whole step: not activity of their own
            step = np.array([bool(STEP_ANNOTATION_RE.match(n)) for n in model.names], dtype=bool)
            ann &= ~step[nid]
        sync_rt = rt & (flags["sync_rt"][nid] | flags["blocking_copy"][nid])
        # aten ops holding a synchronising runtime call (``.cpu()`` is aten::to -> ... -> cudaStreamSynchronize)
        # are synchronising calls themselves; so are the sync ops by name (aten::item, ...)
        is_aten = np.array([n.startswith("aten::") for n in model.names], dtype=bool)[nid] if model.n else on_cpu
        sync_anc = _ancestor_mark(model.parent, np.flatnonzero(sync_rt), op & is_aten)
        has_rt = _ancestor_mark(model.parent, np.flatnonzero(rt), op)
        sync = sync_rt | (op & flags["sync_op"][nid]) | sync_anc
        # long CPU-only ops (nothing launched below them) are host computation, not dispatch
        coll = (op | ann) & flags["coll_op"][nid]
        host_op = op & ~has_rt & ~coll & ~sync & (model.dur_ns >= cfg.host_op_ns)
        alloc = ((rt | op) & flags["alloc"][nid]) | (py & flags["empty_cache"][nid])
        # the profiler's own work on a thread: record_function enter/exit (the built-ins, torch's profiler.py
        # frames, the profiler:: ops below them), prof.step(), and Kineto's overhead events
        ov = (kind == KI.OVERHEAD) & on_cpu
        prof = ((py | op) & flags["profiler_frame"][nid]) | ov
        self.blocking_copy = rt & flags["blocking_copy"][nid]
        self.host_op = host_op
        if on_cpu.any():
            base = int(ts[on_cpu].min())
            span = int(end[on_cpu].max()) - base + 2
        else:
            base, span = 0, 2
        ntr = max(len(model.tracks), 1)
        span = min(span, (2**62) // ntr)
        self.base, self.span = base, span

        # every set's intervals in their thread's band, computed once for all events
        ks = GroupedCoverage.band_keys(trk, ts, base, span)
        ke = GroupedCoverage.band_keys(trk, end, base, span)

        def gc(mask):
            i = np.flatnonzero(mask)
            return GroupedCoverage.of_keys(ks[i], ke[i], base, span)

        self.sync_mask = sync
        # nested unions, one per priority level of the breakdown
        self.sync = gc(sync)
        self.sync_alloc = gc(sync | alloc)
        self.to_runtime = gc(sync | alloc | rt)
        self.to_profiler = gc(sync | alloc | rt | prof)
        self.to_host_op = gc(sync | alloc | rt | prof | host_op)
        launcher = py & flags["launcher_frame"][nid]
        self.to_op = gc(sync | alloc | rt | prof | op | launcher)
        self.any_activity = gc(sync | alloc | rt | prof | op | py | ann)
        self.bcopy = gc(self.blocking_copy)
        self.coll = gc(coll)
        self.overhead = gc(ov)

    def breakdown(self, thread, a, b) -> dict[str, np.ndarray]:
        """ns of [a, b) per activity on each thread, each instant counted once, in the priority
        sync > allocator > runtime > profiler > op > python (host computation in long CPU-only ops counts
        as python) > idle."""
        c_sync = self.sync.covered(thread, a, b)
        c_alloc = self.sync_alloc.covered(thread, a, b)
        c_rt = self.to_runtime.covered(thread, a, b)
        c_prof = self.to_profiler.covered(thread, a, b)
        c_host = self.to_host_op.covered(thread, a, b)
        c_op = self.to_op.covered(thread, a, b)
        c_any = self.any_activity.covered(thread, a, b)
        w = np.maximum(np.asarray(b, np.int64) - np.asarray(a, np.int64), 0)
        return {"sync": c_sync, "allocator": c_alloc - c_sync, "runtime": c_rt - c_alloc,
                "profiler": c_prof - c_rt, "op": c_op - c_host, "python": (c_any - c_op) + (c_host - c_prof),
                "idle": w - c_any}


def _ancestor_mark(parent: np.ndarray, start: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Mask of the events in ``allowed`` that are ancestors of some event in ``start``."""
    n = parent.shape[0]
    seen = np.zeros(n, dtype=bool)
    if start.size == 0:
        return seen & allowed
    cur = parent[start]
    # each ancestor walked once: the ones not seen yet, each kept once per level (the last write of its
    # position into ``owner`` wins): no sort, unlike np.unique
    owner = np.empty(n, np.int64)
    ar = np.arange(cur.size, dtype=np.int64)
    for _ in range(MAX_CHAIN):
        cur = cur[cur >= 0]
        cur = cur[~seen[cur]]
        if cur.size == 0:
            break
        owner[cur] = ar[: cur.size]
        cur = cur[owner[cur] == ar[: cur.size]]
        seen[cur] = True
        cur = parent[cur]
    return seen & allowed


def default_threads(model: TraceModel) -> dict[int, int]:
    """Per device: the CPU track that launched most of its GPU work (stand-in for unlinked kernels)."""
    out: dict[int, int] = {}
    gpu = np.flatnonzero(((model.kind == KI.KERNEL) | (model.kind == KI.MEMCPY) | (model.kind == KI.MEMSET))
                         & (model.launch >= 0))
    if gpu.size == 0:
        cpu = [t for t in model.tracks if t.kind is TrackKind.CPU]
        if cpu:
            counts = [(model.track_offsets[t.id + 1] - model.track_offsets[t.id], t.id) for t in cpu]
            best = max(counts)[1]
            for t in model.tracks:
                if t.kind is TrackKind.GPU:
                    out[t.device] = best
        return out
    devs = np.array([t.device for t in model.tracks], dtype=np.int64)[model.track[gpu]]
    thr = model.track[model.launch[gpu]].astype(np.int64)
    key = devs * (len(model.tracks) + 1) + thr
    u, cnt = np.unique(key, return_counts=True)
    for k, c in sorted(zip(u.tolist(), cnt.tolist()), key=lambda x: x[1]):
        out[int(k // (len(model.tracks) + 1))] = int(k % (len(model.tracks) + 1))
    return out


@dataclass
class RuleContext:
    """What the cause rules (``causes/*.py``) see: one entry per gap, all numpy arrays of the same length
    except ``model``, ``cfg``, ``flags`` and ``cpu``. Times are integer ns."""

    model: TraceModel
    cfg: Thresholds
    flags: dict
    cpu: "CpuSets"
    n: int
    device: np.ndarray
    t0: np.ndarray
    t1: np.ndarray
    g: np.ndarray  # gap duration
    launch: np.ndarray  # launching call of the next kernel, or -1
    has_launch: np.ndarray
    thread: np.ndarray  # launching thread (a CPU track), or -1
    t_launch: np.ndarray  # launch time clipped to [t0, t1]
    w: np.ndarray  # t_launch - t0: the CPU's part of the gap
    wpos: np.ndarray
    #: the next kernel was launched before the gap began (a graph's nodes, kernels launched ahead)
    queued: np.ndarray
    #: launched so early that less than ``late_launch_share`` of the gap lies before the launch
    late: np.ndarray
    #: after its launch, the kernel waited far longer than this trace's usual launch-to-start latency
    long_wait: np.ndarray
    bd: dict  # breakdown of [t0, t_launch] on the launching thread (BUCKETS)
    dispatch: np.ndarray  # op + runtime + sync + allocator time of the breakdown
    copy_share: np.ndarray  # ns of the gap covered by copies/memsets on the device
    bcopy_share: np.ndarray  # ns of the gap the launching thread spent in blocking copy calls
    coll_dev_share: np.ndarray  # ns of the gap covered by collective kernels on the device
    coll_thr_share: np.ndarray  # ns of the gap the launching thread spent in collective ops
    in_sync_at_t0: np.ndarray
    sync_in_gap: np.ndarray
    overhead_share: np.ndarray  # ns of the gap covered by profiler overhead events on the launching thread
    #: the launch call itself (e.g. a cudaGraphLaunch uploading its graph) ran on the CPU for most of the gap
    in_launch: np.ndarray
    #: the one event holding the gap (``one_holder``): the event or -1, its own ns, and what it is a share of
    held_ev: np.ndarray = None
    held_ns: np.ndarray = None
    held_of: np.ndarray = None
    #: the analysis' stack index (stacks.StackIndex): rules that look at other threads' stacks (causes/gil.py) or at
    #: the Python frames around a call (causes/user_sync.py) ask it
    stacks: object = None


def idle_start_kernels(model: TraceModel, flags) -> np.ndarray:
    """Kernels launched one by one (graph replays excluded: all their kernels hang off one launch call) that
    started on an idle device: no kernel, copy or memset of their device ran at any instant between their
    launch call and their start. Only their launch-to-start latency is the GPU's own launch latency; a kernel
    queued behind busy kernels (a prefill's deep queue: 229 ms on the sglang server) measures the queue."""
    kind = model.kind
    gpu = np.flatnonzero((kind == KI.KERNEL) | (kind == KI.MEMCPY) | (kind == KI.MEMSET))
    if gpu.size == 0:
        return gpu
    trk_dev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in model.tracks], dtype=np.int64)
    dev = trk_dev[model.track[gpu]]
    gpu, dev = gpu[dev >= 0], dev[dev >= 0]
    ts = model.ts_ns[gpu]
    end = ts + model.dur_ns[gpu]
    o = np.lexsort((ts, dev))
    gpu, dev, ts, end = gpu[o], dev[o], ts[o], end[o]
    # per device, the latest end of the work that started before each item (exclusive running max)
    prev_end = np.full(gpu.size, np.iinfo(np.int64).min, np.int64)
    first = np.r_[True, dev[1:] != dev[:-1]]
    starts = np.flatnonzero(first)
    for a, b in zip(starts.tolist(), np.r_[starts[1:], gpu.size].tolist()):
        if b - a > 1:
            prev_end[a + 1:b] = np.maximum.accumulate(end[a:b - 1])
    L = model.launch[gpu]
    ok = (kind[gpu] == KI.KERNEL) & (L >= 0)
    Ls = np.where(ok, L, 0)
    ok &= ~flags["graph_launch"][model.name_id[Ls]]
    lts = model.ts_ns[Ls]
    # idle from the launch to the start: everything that started earlier had ended by the launch (work that
    # starts in between ends after it starts, so it is caught by the same running maximum)
    ok &= (prev_end <= lts) & (ts >= lts)
    return gpu[ok]


def typical_launch_delay(model: TraceModel, flags) -> int:
    """Median launch-to-start latency of the kernels that started on an idle device (``idle_start_kernels``);
    10 µs when the trace has none."""
    k = idle_start_kernels(model, flags)
    if k.size:
        return int(median(model.ts_ns[k] - model.ts_ns[model.launch[k]]))
    return 10_000


#: ranges named for what they are (compile, guards, data loading), not for the code they run: a holder even
#: when nothing was launched below them (other long CPU-only ops are host work: the ``python`` cause's)
NAMED_RANGE = ("Torch-Compiled Region", "TorchDynamo", "CompiledFunction", "DataLoader")


def one_holder(stacks, model: TraceModel, cfg: Thresholds, thread, t0, t1, tl, launch, late, in_launch,
               host_op=None):
    """Per gap, the one call, op or range that holds it (-1 when none is named), its ns and what they are a
    share of. A launch call that ran on the CPU for most of the gap holds the gap (``of`` = the gap); else the
    event with the most own time in [t0, t_launch] on the launching thread (``hosttime``'s rule: each instant
    goes to the innermost event running), when it is a runtime/driver call, an aten op or a range, not a
    Python frame nor a long CPU-only op (host work: the ``python`` cause names those with their own time) unless
    it is a compile or data-loader range (``NAMED_RANGE``), and the launch was not late (``of`` = t_launch - t0).
    Only gaps of at least ``stall_min_ns`` are looked at: the rule is for one-off stalls."""
    n = t0.shape[0]
    ev = np.full(n, -1, np.int64)
    ns = np.zeros(n, np.int64)
    of = np.maximum(tl - t0, 0).astype(np.int64)
    g = t1 - t0
    has_l = launch >= 0
    Ls = np.where(has_l, launch, 0)
    lts = model.ts_ns[Ls] if n else np.zeros(0, np.int64)
    inside = (np.minimum(lts + model.dur_ns[Ls], t1) - np.maximum(lts, t0)) if n else np.zeros(0, np.int64)
    il = in_launch & (inside >= cfg.stall_min_ns)
    ev[il], ns[il], of[il] = launch[il], inside[il], g[il]
    cand = np.flatnonzero(~il & (thread >= 0) & ~late & (of >= cfg.stall_min_ns))
    kind = model.kind
    ok_kind = np.zeros(len(Kind) + 1, bool)
    ok_kind[[KI.RUNTIME, KI.DRIVER, KI.CPU_OP, KI.ANNOTATION]] = True
    named = np.array([any(k in nm for k in NAMED_RANGE) for nm in model.names], dtype=bool)
    if cand.size:
        # a cheap screen before the exact credit: 33 evenly spaced points of [t0, t_launch], the event running
        # innermost at each (hosttime's rule); only a gap where one non-Python event runs at 13 of them or more
        # (40%) can have one holding more than half of it
        pts = np.linspace(t0[cand], tl[cand] - 1, SCREEN_POINTS, axis=1).astype(np.int64)
        th = np.repeat(thread[cand], SCREEN_POINTS).reshape(pts.shape)
        who = owners_at(stacks, model, th.ravel(), pts.ravel()).event.reshape(pts.shape)
        who = np.where((who >= 0) & (kind[np.maximum(who, 0)] == KI.PYTHON), -1, who)  # a Python frame: no holder
        srt = np.sort(who, axis=1)
        # the longest run of one event per row (sorted, so a run is equal neighbours)
        brk = np.ones(srt.shape, bool)
        brk[:, 1:] = srt[:, 1:] != srt[:, :-1]
        run_id = np.cumsum(brk, axis=1)
        best = np.zeros(cand.size, np.int64)
        mode = np.full(cand.size, -1, np.int64)
        for k in range(1, SCREEN_POINTS + 1):  # count per run id: fine, 33 columns
            hit = (run_id == k) & (srt >= 0)
            c = hit.sum(axis=1)
            up = c > best
            best = np.where(up, c, best)
            mode = np.where(up, srt[np.arange(cand.size), np.argmax(hit, axis=1)], mode)
        # and that event's time inside the interval must exceed the share itself (its own time is no more)
        me = np.maximum(mode, 0)
        inside = np.minimum(model.ts_ns[me] + model.dur_ns[me], tl[cand]) - np.maximum(model.ts_ns[me], t0[cand])
        keep = (best >= int(SCREEN_SHARE * SCREEN_POINTS)) & (mode >= 0) & (inside > cfg.most * of[cand])
        # an upper bound of its own time: its time inside minus its direct children's there (ranges excepted:
        # a range inside an op can count as the op's time); one pass over the parent column for all rows
        cand, mode, inside = cand[keep], mode[keep], inside[keep]
        if cand.size:
            um, first = np.unique(mode, return_index=True)
            held = np.zeros(model.n + 1, bool)  # a mark over the events (index -1: no parent, never marked)
            held[um] = True
            child = np.flatnonzero(held[model.parent] & (kind != KI.ANNOTATION))
            pos = np.searchsorted(um, model.parent[child])
            row = cand[first[pos]]  # a child is clipped to the interval of the first gap its parent holds
            cl = np.maximum(np.minimum(model.ts_ns[child] + model.dur_ns[child], tl[row])
                            - np.maximum(model.ts_ns[child], t0[row]), 0)
            sub = np.bincount(pos, weights=cl, minlength=um.size)[np.searchsorted(um, mode)]
            # a parent shared by two gaps: its children were clipped to one of them only, so no bound there
            shared = np.bincount(np.searchsorted(um, mode), minlength=um.size)[np.searchsorted(um, mode)] > 1
            cand = cand[shared | (inside - sub > cfg.most * of[cand])]
    for r, ht in zip(cand.tolist(), host_times(stacks, model, thread[cand], t0[cand], tl[cand])):
        if ht.events.size and ok_kind[kind[ht.events[0]]]:
            e = int(ht.events[0])
            if host_op is not None and host_op[e] and not named[model.name_id[e]]:
                continue
            ev[r], ns[r] = e, int(ht.ns[0])
    return ev, ns, of


def classify(model: TraceModel, cols: dict, cfg: Thresholds, flags=None, cpu: CpuSets | None = None, stacks=None):
    """Cause index per gap plus the columns the details need (launch, thread, breakdown). The rules are
    the registry's (``causes/``), tried in order; a gap no rule claims gets the largest of python,
    dispatch (launch) and idle (host-idle) in its breakdown."""
    from . import causes as registry

    flags = flags if flags is not None else name_flags(model.names)
    cpu = cpu if cpu is not None else CpuSets(model, flags, cfg)
    dev = cols["device"].astype(np.int64)
    t0 = cols["start"]
    t1 = cols["end"]
    nxt = cols["next"]
    n = t0.size
    g = t1 - t0
    has_next = nxt >= 0
    launch = np.where(has_next, model.launch[np.where(has_next, nxt, 0)], -1) if n else np.zeros(0, np.int64)
    has_l = launch >= 0
    dthreads = default_threads(model)
    dflt = np.array([dthreads.get(int(d), -1) for d in range(int(dev.max()) + 1)] if n else [], dtype=np.int64)
    thread = np.where(has_l, model.track[np.where(has_l, launch, 0)].astype(np.int64),
                      dflt[dev] if n else np.zeros(0, np.int64))
    # the launch call's thread must be a CPU thread
    is_cpu_track = np.array([t.kind is TrackKind.CPU for t in model.tracks] + [False], dtype=bool)
    thread = np.where(is_cpu_track[np.where(thread >= 0, thread, len(model.tracks))], thread, -1)
    lts = np.where(has_l, model.ts_ns[np.where(has_l, launch, 0)], t1)
    tl = np.minimum(np.maximum(lts, t0), t1)
    w = tl - t0

    kind, ts, end = model.kind, model.ts_ns, model.ts_ns + model.dur_ns
    trk_dev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in model.tracks] + [-1], dtype=np.int64)
    ev_dev = trk_dev[model.track] if model.n else np.zeros(0, np.int64)
    base = int(ts.min()) if model.n else 0
    span = (int(end.max()) - base + 2) if model.n else 2
    ndev = int(max(ev_dev.max(initial=-1), dev.max(initial=-1))) + 2
    span = min(span, (2**62) // ndev)
    cp = np.flatnonzero(((kind == KI.MEMCPY) | (kind == KI.MEMSET)) & (ev_dev >= 0))
    copy_cov = GroupedCoverage(ev_dev[cp], ts[cp], end[cp], base, span)
    nk = np.flatnonzero((kind == KI.KERNEL) & (ev_dev >= 0) & flags["coll_kernel"][name_ids(model)])
    coll_cov = GroupedCoverage(ev_dev[nk], ts[nk], end[nk], base, span)

    bd = cpu.breakdown(thread, t0, tl)
    wpos = w > 0
    late = has_l & (w < cfg.late_launch_share * g)
    wait_floor = max(cfg.wait_min_ns, cfg.wait_latency_factor * typical_launch_delay(model, flags))
    ctx = RuleContext(
        model=model, cfg=cfg, flags=flags, cpu=cpu, n=n, device=dev, t0=t0, t1=t1, g=g, launch=launch,
        has_launch=has_l, thread=thread, t_launch=tl, w=w, wpos=wpos,
        queued=has_l & (lts < t0), late=late, long_wait=late & ((t1 - lts) > wait_floor),
        bd=bd, dispatch=bd["op"] + bd["runtime"] + bd["sync"] + bd["allocator"],
        copy_share=copy_cov.covered(dev, t0, t1), bcopy_share=cpu.bcopy.covered(thread, t0, t1),
        coll_dev_share=coll_cov.covered(dev, t0, t1), coll_thr_share=cpu.coll.covered(thread, t0, t1),
        in_sync_at_t0=cpu.sync.touches(thread, t0 - cfg.sync_slack_ns, t0),
        sync_in_gap=wpos & (bd["sync"] >= cfg.sync_share * w) & (bd["sync"] > 0),
        overhead_share=cpu.overhead.covered(thread, t0, t1),
        in_launch=has_l & ((np.minimum(lts + np.where(has_l, model.dur_ns[np.where(has_l, launch, 0)], 0), t1)
                            - np.maximum(lts, t0)) > cfg.most * g),
    )
    if stacks is None:
        from .stacks import StackIndex

        stacks = StackIndex(model, flags)
    ctx.stacks = stacks
    ctx.held_ev, ctx.held_ns, ctx.held_of = one_holder(stacks, model, cfg, thread, t0, t1, tl, launch, late,
                                                       ctx.in_launch, cpu.host_op)
    rules = registry.all_causes()
    if n:
        conds = [np.asarray(c.rule(ctx), dtype=bool) for c in rules]
        cause = np.select(conds, [np.uint8(i) for i in range(len(rules))], default=0).astype(np.uint8)
        fallback = np.argmax(np.stack([bd["python"], ctx.dispatch, bd["idle"]]), axis=0)
        fb = np.array([registry.code(registry.PYTHON), registry.code(registry.LAUNCH), registry.code(registry.HOST_IDLE)],
                      dtype=np.uint8)[fallback]
        cause = np.where(np.any(np.stack(conds), axis=0), cause, fb).astype(np.uint8)
    else:
        cause = np.zeros(0, np.uint8)
    return {
        "cause": cause,
        "launch": launch,
        "thread": thread,
        "t_launch": tl,
        "breakdown": bd,
        "held": (ctx.held_ev, ctx.held_ns, ctx.held_of),
    }, cpu, flags
