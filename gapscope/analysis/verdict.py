"""Per-device verdict: was the GPU the bottleneck (``gpu-bound``), the host that feeds it (``host-bound``), or
each in turn (``mixed``)? Read from the launch queue, not from the idle share alone.

A kernel is *queued* from the start of the runtime call that launched it until it starts on the GPU. Over the
device window every instant is one of:

- **busy**: a kernel runs;
- **starved**: no kernel runs and none is queued: the GPU waits for the host to issue the next one;
- **stalled**: no kernel runs though one is queued: the GPU waits on a dependency (an event, another stream,
  a copy, work the trace does not show) or on its own launch latency, not on the host.

The queue is *empty* where no kernel is queued (busy or not). When it is empty most of the window, each kernel
starts about when the host issues it: the host paces the GPU (host-bound), however busy the GPU is. When the
GPU always has work waiting, the host runs ahead and the GPU paces the run (gpu-bound). Graph replays
(``cudaGraphLaunch`` / ``hipGraphLaunch``) are counted: one call queues many kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..trace.model import Kind, TraceModel, TrackKind
from .intervals import Coverage, median, percentile, union, uniq
from .thresholds import (GPU_BOUND_TOP, GPU_BUSY_SHARE, GPU_EMPTY_SHARE, GPU_SATURATED_SHARE, HOST_EMPTY_SHARE,
                         HOST_STARVED_SHARE, LIMIT_LATENCY_SHARE, LIMIT_MIN_FLOORED)

_KERNEL = int(Kind.KERNEL)

#: queue depth histogram over time: (lowest depth, label)
DEPTH_BINS = ((0, "0"), (1, "1"), (2, "2-7"), (8, "8+"))


@dataclass(frozen=True)
class Limit:
    """What bounds a GPU-bound device's kernels, per measured step, from their op calls' floors
    (activity.call_floors): the HBM bytes the memory-bound calls must move and the FLOPs of the compute-bound
    ones, at the device's peaks, against the time their kernels took; the matmuls apart (a decode's GEMVs read
    every weight once); the kernels that lose the most time against their floors."""

    bound: str  # "memory" | "compute": the larger of the two floors; "latency": both far below the kernel time
    steps: int
    kernel_ns: float  # per step: the device's kernel time
    floored_ns: float  # per step: of which, kernels whose call has a floor
    memory_bytes: float  # per step: bytes the memory-bound calls' floors make cross HBM
    memory_floor_ns: float  # those bytes at the HBM bandwidth
    memory_ns: float  # the memory-bound calls' kernel time
    compute_flops: float
    compute_floor_ns: float  # the compute-bound calls' FLOPs at the dense peak of their type
    compute_ns: float
    matmul_bytes: float  # per step: of the memory-bound calls, the matmuls'
    matmul_floor_ns: float
    matmul_ns: float
    bandwidth_gbps: float
    far: tuple = ()  # (kernel name, floor per call ns, average per call ns, ns lost per step) of the farthest kernels
    kernels: float = 0.0  # per step: the device's kernels
    median_kernel_ns: float = 0.0

    def text(self) -> str:
        from .units import fmt_bytes

        def pct(a, b):
            return f"{100 * a / b:.0f}%" if b > 0 else "–"

        bw = f"{self.bandwidth_gbps / 1e3:.1f} TB/s"
        if self.bound == "latency":
            need = self.memory_floor_ns + self.compute_floor_ns
            out = (f"latency-bound: per step {self.kernels:.0f} kernels of {_fmt(self.median_kernel_ns)} (median); the "
                   f"calls with a floor ({pct(self.floored_ns, self.kernel_ns)} of kernel time) need only {_fmt(need)} "
                   f"at the device's peaks ({fmt_bytes(self.memory_bytes)} through HBM) and took "
                   f"{_fmt(self.floored_ns)} ({pct(need, self.floored_ns)}): kernels too small to reach its bandwidth "
                   f"or its peak")
            if self.matmul_bytes > 0:
                out += (f"; the matmuls read {fmt_bytes(self.matmul_bytes)}, {_fmt(self.matmul_floor_ns)} at {bw}, in "
                        f"{_fmt(self.matmul_ns)} ({pct(self.matmul_floor_ns, self.matmul_ns)} of HBM)")
        elif self.bound == "memory":
            out = "memory-bound: per step "
            if self.matmul_bytes > 0.5 * self.memory_bytes:
                out += (f"the matmuls read {fmt_bytes(self.matmul_bytes)}, {_fmt(self.matmul_floor_ns)} at {bw}; they "
                        f"took {_fmt(self.matmul_ns)} ({pct(self.matmul_floor_ns, self.matmul_ns)} of HBM); ")
            out += (f"the calls with a floor ({pct(self.floored_ns, self.kernel_ns)} of kernel time) move "
                    f"{fmt_bytes(self.memory_bytes)} through HBM, {_fmt(self.memory_floor_ns)} at {bw}, in "
                    f"{_fmt(self.memory_ns)} ({pct(self.memory_floor_ns, self.memory_ns)} of HBM)")
            if self.compute_ns > 0:
                out += (f", and compute-bound ones {_fmt(self.compute_floor_ns)} at peak in {_fmt(self.compute_ns)}")
        else:
            out = (f"compute-bound: per step the calls with a floor ({pct(self.floored_ns, self.kernel_ns)} of kernel "
                   f"time) do {self.compute_flops / 1e12:.3g} TFLOP, {_fmt(self.compute_floor_ns)} at peak, in "
                   f"{_fmt(self.compute_ns)} ({pct(self.compute_floor_ns, self.compute_ns)} of peak)")
            if self.memory_ns > 0:
                out += (f", and memory-bound ones {fmt_bytes(self.memory_bytes)}, {_fmt(self.memory_floor_ns)} at "
                        f"{bw}, in {_fmt(self.memory_ns)}")
        if self.far:
            out += "; farthest from their floors: " + ", ".join(
                f"{_short(n)} ({_fmt(fl)} floor, {_fmt(avg)} a call, {_fmt(lost)} over per step)"
                for n, fl, avg, lost in self.far)
        return out

    def entry(self) -> dict:
        def us(ns):
            return round(float(ns) / 1e3, 3)

        return {"bound": self.bound, "steps": self.steps, "kernel_us_per_step": us(self.kernel_ns),
                "floored_us_per_step": us(self.floored_ns), "memory_bytes_per_step": round(self.memory_bytes),
                "memory_floor_us_per_step": us(self.memory_floor_ns), "memory_us_per_step": us(self.memory_ns),
                "compute_flops_per_step": round(self.compute_flops),
                "compute_floor_us_per_step": us(self.compute_floor_ns),
                "compute_us_per_step": us(self.compute_ns), "matmul_bytes_per_step": round(self.matmul_bytes),
                "matmul_floor_us_per_step": us(self.matmul_floor_ns), "matmul_us_per_step": us(self.matmul_ns),
                "hbm_gbps": self.bandwidth_gbps, "kernels_per_step": round(self.kernels, 3),
                "median_kernel_us": us(self.median_kernel_ns),
                "farthest": [{"kernel": n, "floor_us": us(fl), "avg_us": us(avg), "over_us_per_step": us(lost)}
                             for n, fl, avg, lost in self.far]}


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


@dataclass
class Verdict:
    device: int
    rank: int | None
    kind: str  # "gpu-bound" | "host-bound" | "mixed" | "unknown"
    reason: str  # one sentence: why this kind
    window_ns: int
    busy_ns: int
    starved_ns: int  # idle with nothing queued
    stalled_ns: int  # idle with a kernel queued
    queue_empty_ns: int  # no kernel queued (busy or not)
    queue_depth_mean: float  # time-average of kernels queued (launched, not started) over the window
    queue_depth_max: int
    kernels: int
    linked_kernels: int  # kernels whose launch call is in the trace (the queue covers only these)
    latency_ns: dict = field(default_factory=dict)  # launch start -> kernel start: p10, median, p90, max
    graph_kernels: int = 0  # kernels launched by a graph launch
    graph_replays: int = 0  # graph launch calls that launched them
    issue_lead_ns: int | None = None  # last kernel end minus the end of the last launch call (linked kernels)
    collective_ns: int = 0  # time only collective kernels ran (not busy: they wait for other ranks)
    depth_ns: dict = field(default_factory=dict)  # queue depth over time: "0", "1", "2-7", "8+" -> ns held
    limit: Limit | None = None  # a GPU-bound device: what bounds its kernels (``gpu_limit``)

    def share(self, ns: int) -> float:
        return ns / self.window_ns if self.window_ns > 0 else 0.0

    def evidence(self) -> dict:
        """The numbers behind the kind, in µs and percent of the device window (the JSON report's)."""

        def us(ns):
            return None if ns is None else round(float(ns) / 1e3, 3)

        def pct(ns):
            return round(100.0 * self.share(ns), 2)

        return {
            "busy_pct": pct(self.busy_ns), "starved_pct": pct(self.starved_ns), "stalled_pct": pct(self.stalled_ns),
            "collective_pct": pct(self.collective_ns), "queue_empty_pct": pct(self.queue_empty_ns),
            "queue_depth_mean": round(self.queue_depth_mean, 3), "queue_depth_max": self.queue_depth_max,
            "queue_depth_pct": {k: pct(v) for k, v in self.depth_ns.items()},
            "launch_to_start_us": {k: us(v) for k, v in self.latency_ns.items()},
            "kernels": self.kernels, "linked_kernels": self.linked_kernels,
            "graph_kernels": self.graph_kernels, "graph_replays": self.graph_replays,
            "issue_lead_us": us(self.issue_lead_ns),
            **({"limit": self.limit.entry()} if self.limit is not None else {}),
        }

    def graph_text(self) -> str | None:
        """'421 of 425 kernels from 1 graph replay' (None without replays)."""
        if not self.graph_replays:
            return None
        r = "replay" if self.graph_replays == 1 else "replays"
        return f"{self.graph_kernels} of {self.kernels} kernels from {self.graph_replays} graph {r}"

    def summary(self) -> str:
        """One line: 'gpu-bound: kernels were waiting in the queue 97% of the window (...); 421 of 425 kernels
        from 1 graph replay'."""
        g = self.graph_text()
        return f"{self.kind}: {self.reason}" + (f"; {g}" if g else "")


def _fmt(ns: float) -> str:
    from .units import fmt_ns

    return fmt_ns(int(ns))


def device_verdicts(model: TraceModel, devices, flags, window=None) -> list[Verdict]:
    """One Verdict per DeviceStats in ``devices`` (their windows bound everything)."""
    k = np.flatnonzero(model.kind == _KERNEL)
    if window is not None and k.size:
        k = k[window.gpu_in(model, k)]
    gdev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in model.tracks] + [-1], np.int64)
    kdev = gdev[model.track[k]] if k.size else np.zeros(0, np.int64)
    out = []
    for d in devices:
        kk = k[kdev == d.device]
        out.append(_one(model, d, kk, flags))
    return out


def _one(model: TraceModel, d, kk: np.ndarray, flags) -> Verdict:
    w0, w1 = int(d.window_start_ns), int(d.window_end_ns)
    W = max(w1 - w0, 0)
    ks = np.clip(model.ts_ns[kk], w0, w1)
    ke = np.clip(model.ts_ns[kk] + model.dur_ns[kk], w0, w1)
    # collective kernels spin while they wait for other ranks: their time is not the GPU computing
    coll = flags["coll_kernel"][model.name_id[kk]]
    kcov = Coverage(ks[~coll], ke[~coll])
    busy = kcov.total
    coll_only = 0
    if coll.any():
        cs, ce = union(ks[coll], ke[coll])
        coll_only = int((ce - cs).sum() - kcov.covered(cs, ce).sum())
    L = model.launch[kk]
    linked = L >= 0
    kl, Ll = kk[linked], L[linked]
    t_in = model.ts_ns[Ll]
    t_out = model.ts_ns[kl]
    lat = t_out - t_in
    # the queue: [launch start, kernel start) of each linked kernel, clipped to the window
    qs, qe = np.clip(t_in, w0, w1), np.clip(t_out, w0, w1)
    qs_u, qe_u = union(qs, qe)
    queued = int((qe_u - qs_u).sum())
    queued_busy = int(kcov.covered(qs_u, qe_u).sum()) if qs_u.size else 0
    stalled = queued - queued_busy
    starved = max(W - busy - stalled, 0)
    empty = W - queued
    depth_mean = float(np.maximum(qe - qs, 0).sum()) / W if W else 0.0
    depth_max = 0
    depth_time = np.zeros(len(DEPTH_BINS), np.int64)
    depth_time[0] = W
    live = qe > qs  # kernels queued for no time inside the window change no depth
    if live.any():
        t = np.concatenate((qs[live], qe[live]))
        n = int(live.sum())
        step = np.concatenate((np.ones(n, np.int64), -np.ones(n, np.int64)))
        o = np.lexsort((step, t))  # at equal times a start leaves before the next arrives
        t, depth = t[o], np.cumsum(step[o])
        depth_max = int(depth.max())
        # the depth after each change holds until the next change (the last until the window's end)
        held = np.diff(np.append(t, w1))
        b = np.searchsorted(np.array([lo for lo, _ in DEPTH_BINS]), depth, side="right") - 1
        depth_time = np.bincount(b, weights=held, minlength=len(DEPTH_BINS)).astype(np.int64)
        depth_time[0] += int(t[0]) - w0
    latency = {}
    if lat.size:
        latency = {"p10": percentile(lat, 10), "median": float(median(lat)),
                   "p90": percentile(lat, 90), "max": int(lat.max())}
    gl = flags["graph_launch"][model.name_id[Ll]] if Ll.size else np.zeros(0, bool)
    graph_kernels = int(np.count_nonzero(gl))
    graph_replays = int(uniq(Ll[gl]).size) if graph_kernels else 0
    lead = None
    if Ll.size:  # how long the GPU kept running the linked kernels after the host's last launch returned
        lead = int((model.ts_ns[kl] + model.dur_ns[kl]).max() - (model.ts_ns[Ll] + model.dur_ns[Ll]).max())
    v = Verdict(d.device, d.rank, "unknown", "", W, busy, starved, stalled, empty, depth_mean, depth_max,
                int(kk.size), int(kl.size), latency, graph_kernels, graph_replays, lead, coll_only,
                {label: int(x) for (_, label), x in zip(DEPTH_BINS, depth_time.tolist())})
    v.kind, v.reason = _decide(v)
    return v


def _decide(v: Verdict) -> tuple[str, str]:
    B, E, S, T = v.share(v.busy_ns), v.share(v.queue_empty_ns), v.share(v.starved_ns), v.share(v.stalled_ns)
    if v.window_ns <= 0 or v.kernels == 0:
        return "unknown", "no kernels in the window"
    med = v.latency_ns.get("median")
    lat = f", median launch-to-start {_fmt(med)}" if med is not None else ""
    if v.issue_lead_ns is not None and v.issue_lead_ns > 0.1 * v.window_ns:
        lat += f"; the host's last launch returned {_fmt(v.issue_lead_ns)} before the last kernel ended"
    if B >= GPU_SATURATED_SHARE:
        return "gpu-bound", f"kernels ran {100 * B:.0f}% of the window{lat}"
    if v.linked_kernels == 0:
        return "unknown", (f"kernels ran {100 * B:.0f}% of the window; no kernel is linked to its launch call, so "
                           "the queue cannot be read")
    if v.linked_kernels < 0.5 * v.kernels:
        tail = f" (only {v.linked_kernels} of {v.kernels} kernels are linked to their launch)"
    else:
        tail = ""
    if E <= GPU_EMPTY_SHARE and B >= GPU_BUSY_SHARE:
        return "gpu-bound", (f"kernels were waiting in the queue {100 * (1 - E):.0f}% of the window and ran "
                             f"{100 * B:.0f}% of it{lat}{tail}")
    if E >= HOST_EMPTY_SHARE and S >= HOST_STARVED_SHARE:
        return "host-bound", (f"the queue was empty {100 * E:.0f}% of the window: kernels started about when they "
                              f"were launched{lat}; the GPU sat idle with nothing queued {100 * S:.0f}% of it{tail}")
    C = v.share(v.collective_ns)
    parts = [f"kernels ran {100 * B:.0f}% of the window", f"idle with nothing queued {100 * S:.0f}%",
             f"idle with a kernel queued {100 * T:.0f}%"]
    why = "; ".join(parts)
    if C >= 0.5 * T and C > 0:
        why += f" ({100 * C:.0f}% in collectives alone: waiting for other ranks)"
    elif T > S and T > B:
        why += " (the GPU waited on a dependency, not on the host)"
    return "mixed", why + lat + tail


def gpu_limit(model: TraceModel, cf, device: int, steps: int | None, kernels: list) -> Limit | None:
    """What bounds device ``device``'s kernels (``Limit``), from the call floors ``cf`` (activity.CallFloors) and the
    kernels table ``kernels``; None when its GPU has no known peaks or under half its kernel time has a floor."""
    from .floors import MATMUL_OPS, peaks_for

    p = peaks_for(model.device_name(device))
    if p is None or cf.k.size == 0:
        return None
    gdev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in model.tracks] + [-1], np.int64)
    mine = gdev[model.track[cf.k]] == device
    if not mine.any():
        return None
    dur = model.dur_ns[cf.k].astype(np.float64)
    total = float(dur[mine].sum())
    fl = mine & cf.has & (cf.single | cf.multi)
    if total <= 0 or float(dur[fl].sum()) < LIMIT_MIN_FLOORED * total:
        return None
    inst = cf.inst if cf.inst is not None else cf.call
    pos = np.flatnonzero(fl)
    key, first, inv = np.unique(inst[pos], return_index=True, return_inverse=True)
    t_call = np.bincount(inv.reshape(-1), weights=dur[pos], minlength=key.size)
    c0 = pos[first]  # each call's figures sit on every one of its kernels: the first one's
    comp = cf.compute[c0]
    mm = np.array([model.names[int(model.name_id[c])] in MATMUL_OPS for c in cf.call[c0].tolist()], bool)
    n = max(int(steps or 1), 1)
    mem = ~comp
    m_bytes = float(cf.hbm_bytes[c0][mem].sum())
    c_floor = float(cf.peak_ns[c0][comp].sum())
    m_floor = float(cf.peak_ns[c0][mem].sum())
    bound = "memory" if m_floor >= c_floor else "compute"
    if m_floor + c_floor < LIMIT_LATENCY_SHARE * float(dur[fl].sum()):
        bound = "latency"
    far = []
    rows = [k for k in kernels if k.device in (None, device) and k.floor_total_ns is not None and k.floored_count]
    rows.sort(key=lambda k: -(k.floored_total_ns - k.floor_total_ns))
    for k in rows[:3]:
        lost = (k.floored_total_ns - k.floor_total_ns) / n
        if lost > 0:
            far.append((k.name, k.floor_total_ns / k.floored_count, k.floored_total_ns / k.floored_count, lost))
    return Limit(bound, n, total / n, float(dur[fl].sum()) / n, m_bytes / n, m_bytes / p[3] / n,
                 float(t_call[mem].sum()) / n, float(cf.flops[c0][comp].sum()) / n, c_floor / n,
                 float(t_call[comp].sum()) / n, float(cf.hbm_bytes[c0][mem & mm].sum()) / n,
                 float(cf.hbm_bytes[c0][mem & mm].sum()) / p[3] / n, float(t_call[mem & mm].sum()) / n, float(p[3]),
                 tuple(far), float(mine.sum()) / n, median(dur[mine]))


def gpu_bound_reason(v: Verdict, kernels: list, patterns: list) -> str:
    """'kernels ran 96% of the window; the top 5 kernels are 71% of it, at 38–90% of their floors; 2 patterns
    found' (the floors part only where the top rows have floors), then the launch evidence of ``v.reason``."""
    # the busy share (or the queue evidence) that made it gpu-bound comes first; the launch latency last
    head, sep, tail = v.reason.partition(", median launch-to-start")
    mine = [k for k in kernels if k.device in (None, v.device)][:GPU_BOUND_TOP]
    out = head
    if mine and v.window_ns > 0:
        top = sum(k.total_ns for k in mine)
        out += f"; the top {len(mine)} kernels are {100 * top / v.window_ns:.0f}% of it"
        pct = [k.floor_pct for k in mine if k.floor_pct is not None]
        if pct:
            lo, hi = min(pct), max(pct)
            rng = f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}%"
            out += f", at {rng} of their floors" + (f" ({len(pct)} of {len(mine)} have one)" if len(pct) < len(mine)
                                                    else "")
    n = len(patterns)
    out += f"; {n} pattern{'' if n == 1 else 's'} found"
    if v.limit is not None:
        out += "; " + v.limit.text()
    return out + sep + tail
