"""``gpu-wait``: the kernel that ends the gap was already queued (launched before the gap began, or early in
it and then held far longer than this trace's usual launch latency). The CPU's issuing was not the critical
path: the GPU waited on something else. The detail says what (an event wait on its stream, its own graph
dispatch, a copy on another stream that ended just before it, or work the trace does not show) and what the
launching thread was blocked in meanwhile."""

from __future__ import annotations

import numpy as np

from ...trace.model import Kind
from ..hosttime import host_time
from ..names import display_frame
from ..thresholds import MEANWHILE_MIN_NS
from ..units import fmt_ns
from . import GPU_WAIT, Cause


def rule(c):
    return (c.queued | c.long_wait) & ~c.in_launch


def _waited_for(a, x) -> dict:
    """What the queued kernel waited on, from the events around it."""
    m = a.model
    out: dict = {}
    nxt = x.nxt
    if nxt < 0:
        return out
    trk = m.tracks[int(m.track[nxt])]
    out["stream"] = trk.stream
    L = x.L
    if L >= 0:
        out["launch_call"] = m.name(L)
        out["graph"] = bool(a.flags["graph_launch"][m.name_id[L]])
        out["launched_before_start_ns"] = int(m.ts_ns[nxt] - m.ts_ns[L])
        # a stream-wait call issued by the same thread after the previous launch and before this one
        if x.thr >= 0:
            sl = m.track_slice(x.thr)
            ts = m.ts_ns[sl]
            lo = int(np.searchsorted(ts, min(x.t0, int(m.ts_ns[L])) - 1_000_000, side="left"))
            hi = int(np.searchsorted(ts, int(m.ts_ns[L]), side="left"))
            idx = np.arange(sl.start + lo, sl.start + hi)
            if idx.size:
                waits = idx[a.flags["stream_wait"][m.name_id[idx]]]
                launches = idx[a.flags["launch"][m.name_id[idx]]]
                if launches.size:
                    waits = waits[waits > launches.max()] if waits.size else waits
                if waits.size:
                    j = int(waits[-1])
                    out["wait_call"] = m.name(j)
                    out["wait_at_ns"] = int(m.ts_ns[j])
    # a copy on another stream of the device that ended shortly before the kernel started
    best = None
    for t in m.gpu_tracks():
        if t.device != x.dev or t.stream == trk.stream:
            continue
        sl = m.track_slice(t.id)
        if sl.stop <= sl.start:
            continue
        e = m.ts_ns[sl] + m.dur_ns[sl]
        k = m.kind[sl]
        near = np.flatnonzero(((k == Kind.MEMCPY) | (k == Kind.MEMSET)) & (e <= x.t1) & (e >= x.t1 - max(x.t1 - x.t0, 1) // 10 - 2_000)
                              & (e > x.t0))
        if near.size:
            j = sl.start + int(near[np.argmax(e[near])])
            if best is None or m.ts_ns[j] + m.dur_ns[j] > m.ts_ns[best] + m.dur_ns[best]:
                best = j
    if best is not None:
        out["copy_before"] = {"name": m.name(best), "stream": m.tracks[int(m.track[best])].stream,
                              "ended_before_ns": int(x.t1 - (m.ts_ns[best] + m.dur_ns[best]))}
    return out


def gather(a, x):
    extra = {"waited": _waited_for(a, x)}
    # what the launching thread did while the kernel waited (from the launch, or the gap start, to the gap end)
    if x.thr >= 0:
        start = max(x.tl, x.t0)
        ht = host_time(a.stacks, a.model, x.thr, start, x.t1)
        top = ht.by_name(a.model, k=1)
        if top:
            j, ns = top[0]
            extra["meanwhile"] = {"name": a.model.name(j), "ns": int(ns), "of_ns": int(x.t1 - start), "event": int(j),
                                  "blocking_copy": bool(a.cpu.blocking_copy[j]), "sync": bool(a.cpu.sync_mask[j])}
            st = a.stacks.stack_at(x.thr, int(a.model.ts_ns[j]) + max(int(a.model.dur_ns[j]) // 2, 0))
            return st, extra
    return x.launch_stack or a.stacks.stack_at(x.thr, x.t0), extra


def kind_of(extra) -> str:
    w = extra.get("waited") or {}
    if w.get("wait_call"):
        return "event"
    if w.get("copy_before"):
        return "copy"
    if w.get("graph"):
        return "graph"
    return "unknown"


def explain(a, d, tl):
    nk = f"`{d.next_op or d.next_kernel}`"
    w = d.extra.get("waited") or {}
    lead = w.get("launched_before_start_ns")
    when = (f"was launched {fmt_ns(max(tl - d.start_ns, 0))} into the gap" if tl > d.start_ns
            else "was already queued when the GPU went idle")
    s = f"{nk} {when}"
    if lead is not None:
        s += f" and started {fmt_ns(lead)} after its launch call"
    k = kind_of(d.extra)
    if k == "event":
        s += (f": its stream {w.get('stream')} was told to wait for an event (`{w['wait_call']}`), recorded by "
              f"another stream or process that the trace does not show finishing earlier")
    elif k == "copy":
        c = w["copy_before"]
        s += (f": it started {fmt_ns(c['ended_before_ns'])} after `{c['name']}` ended on stream {c['stream']}, "
              f"a cross-stream dependency")
    elif k == "graph":
        s += ": it is a node of a graph replay, dispatched by the GPU itself"
    else:
        s += ": the GPU waited on work or a dependency the trace does not show (another process, a stream wait, "
        s += "or launch latency)"
    s += f"; GPU idle {fmt_ns(d.dur_ns)}."
    mw = d.extra.get("meanwhile")
    if mw and mw["ns"] >= 0.5 * mw["of_ns"] and mw["ns"] >= MEANWHILE_MIN_NS:
        what = "a blocking copy" if mw["blocking_copy"] else ("a synchronising call" if mw["sync"] else "")
        sig = f" from `{d.signature}`" if d.signature and d.signature != mw["name"] else ""
        s += (f" Meanwhile, in the {fmt_ns(mw['of_ns'])} until the kernel started, the launching thread spent "
              f"{fmt_ns(mw['ns'])} in `{display_frame(mw['name'])}`{sig}"
              + (f" ({what} queued behind the wait)" if what else "") + ".")
    return s


def group(a, d):
    return kind_of(d.extra)


def advise(a, details, ev):
    kinds = {kind_of(d.extra) for d in details}
    parts = ["The CPU had already issued the next kernel, so faster host code or CUDA graphs will not shorten "
             "these gaps: look at what the GPU waited for."]
    if "event" in kinds:
        parts.append("Find the stream or process that records the awaited event and why it records it late "
                     "(a cross-stream or cross-process dependency: another scheduler thread, a copy stream).")
    if "copy" in kinds:
        parts.append("A copy on another stream gated the kernel: issue it earlier or split it so compute can start.")
    if "graph" in kinds:
        parts.append("Between the nodes of a graph replay only the GPU's own dispatch remains: fewer, larger (fused) "
                     "kernels shorten it.")
    if any((d.extra.get("meanwhile") or {}).get("blocking_copy") for d in details):
        parts.append("The launching thread sat in a blocking copy queued behind the wait: a non_blocking copy from "
                     "pinned memory would let the host run ahead.")
    return " ".join(parts)


CAUSE = Cause(
    name=GPU_WAIT, order=35, letter="W", colour="blue",
    summary="the next kernel was already queued: the GPU waited on a dependency (an event from another stream or "
            "process, its graph's dispatch, work not in the trace), not on the CPU",
    title="{n} gaps where the GPU waited on a dependency, not on the CPU,{where} cost {t} of GPU idle",
    suggestion="The CPU had already issued the next kernel: look at what the GPU waited for (stream/event "
               "dependencies, other processes), not at host code.",
    rule=rule, gather=gather, explain=explain, group=group, advise=advise,
)
