"""``copy``: a memcpy/memset on the device covered most of the gap, or the launching thread sat in a blocking
copy call for most of it (unless the next kernel was already queued: then the GPU waited on something else)."""

from __future__ import annotations

from ..units import fmt_bytes, fmt_ns
from ..thresholds import SMALL_COPY_BYTES
from . import COPY, Cause


def rule(c):
    most = c.cfg.most * c.g
    return (c.copy_share > most) | ((c.bcopy_share > most) & ~c.late)


def gather(a, x):
    stack, info = a.evidence.copy_stack(x.dev, x.t0, x.t1)
    extra = {"copy": info}
    # before the window: before the first measured step began on the CPU (a step's first copy is issued before
    # its GPU work starts, inside the step: hf-pageable.step_pageable's input copy read "an edge effect"); without
    # steps, before the device window
    w = a.window
    start = int(w.cpu_start[0]) if w.clipped and w.cpu_start.size else a.window_start_ns
    if info and info.get("issued_ns") is not None and info["issued_ns"] < start:
        extra["window_edge"] = True
    return (stack or a.stacks.stack_at(x.thr, x.t0)), extra


def explain(a, d, tl):
    c = d.extra.get("copy") or {}
    sig = f" in `{d.signature}`" if d.signature else ""
    if c:
        rate = f" at {c['gbps']:.1f} GB/s" if c.get("gbps") else ""
        s = (f"GPU idle {fmt_ns(d.dur_ns)} while a {c['kind']} copy of {fmt_bytes(c['bytes'])} ran for "
             f"{fmt_ns(c['dur_ns'])}{rate}{sig}.")
        if d.extra.get("window_edge"):
            s += (" The copy was issued before the analysed window began: this gap is an edge effect of the "
                  "window, not of the step.")
        return s
    return f"GPU idle {fmt_ns(d.dur_ns)} while the launching thread sat in a blocking copy{sig}."


def group(a, d):
    c = d.extra.get("copy") or {}
    return c.get("kind")


def advise(a, details, ev):
    copies = [d.extra.get("copy") or {} for d in details]
    kinds = {c.get("kind") or "" for c in copies if c}
    nbytes = max((c.get("bytes") or 0 for c in copies if c), default=0)
    if details and all(d.extra.get("window_edge") for d in details):
        return ("These copies were issued before the analysed window: widen the window (gapscope report "
                "--whole-trace) or capture more warm-up steps before judging them.")
    if any("Pageable" in k for k in kinds) and nbytes >= SMALL_COPY_BYTES:
        return ("Copy from pinned host memory (tensor.pin_memory(), once) with .to(device, non_blocking=True) so "
                "the copy runs asynchronously, move it off the critical path (prefetch on a side stream), or keep "
                "the data on the GPU.")
    if kinds and all(k.startswith(("DtoD", "PtoP")) for k in kinds):
        return ("A device-to-device copy stood between kernels: avoid the copy (views instead of .contiguous()/"
                ".clone(), in-place ops, out=), or let it overlap compute on another stream.")
    if nbytes and nbytes < SMALL_COPY_BYTES:
        return ("Small copies are bound by their fixed latency, not bandwidth: batch them into one, keep the "
                "values on the GPU, or issue them earlier (non_blocking) so they overlap compute.")
    return ("Move the copy off the critical path: issue it earlier on a side stream (non_blocking, from pinned "
            "memory) so it overlaps compute, or keep the data on the GPU.")


CAUSE = Cause(
    name=COPY, action="pinned-copy", order=10, letter="C", colour="magenta",
    summary="a memory copy on the device, or a blocking copy call on the launching thread, covered most of the gap",
    title="{n} gaps behind {what} copies{where} cost {t} of GPU idle",
    suggestion="Move the copy off the critical path (prefetch on a side stream, non_blocking from pinned memory) or "
               "keep the data on the GPU.",
    rule=rule, gather=gather, explain=explain, group=group, advise=advise, by_frame=True,
)
