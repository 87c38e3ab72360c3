"""``python``: host work with no GPU launch below it (Python frames, built-ins such as ``time.sleep`` or numpy,
long CPU-only aten ops) held the launching thread for most of the CPU's part of the gap.

The frames named are credited only with their own time inside [gap start, launch] (``hosttime``): the one
with the most own time first; when no frame holds most of the host time, the top few are listed."""

from __future__ import annotations

import numpy as np

from ...trace.model import Kind
from ..names import display_frame
from ..thresholds import HOLDS_SHARE
from ..units import fmt_ns
from . import PYTHON, Cause


def rule(c):
    return c.wpos & (c.bd["python"] > c.cfg.most * c.w) & ~c.late


def host_frames(a, thr: int, t0: int, tl: int, k: int = 5) -> dict:
    """The host-work frames of [t0, tl) on ``thr`` by own time: Python frames, annotations, host-computation
    ops. ``{"from_ns", "to_ns", "frames": [(event, ns)], "host_ns"}``."""
    m = a.model
    ht = a.evidence.host_time(thr, t0, tl)
    kind = m.kind
    ev = ht.events
    if ev.size:
        # the profiler's own frames have their own bucket; gapscope's capture loop is not the workload
        prof = a.flags["profiler_frame"][m.name_id[ev]] | a.flags["capture_frame"][m.name_id[ev]]
        hostish = ((kind[ev] == Kind.PYTHON) | (kind[ev] == Kind.ANNOTATION) | a.cpu.host_op[ev]) & ~prof
    else:
        hostish = ev
    mask = np.zeros(m.n, bool)
    mask[ev[hostish]] = True
    host_ns = int(ht.ns[hostish].sum()) if ev.size else 0
    frames = ht.by_name(m, mask, k)
    return {"from_ns": int(t0), "to_ns": int(tl), "frames": frames, "host_ns": host_ns}


def gather(a, x):
    at, ev = a.details.holder(x.i, x.thr, x.t0, x.tl)
    hf = host_frames(a, x.thr, x.t0, x.tl)
    extra = {"python_frame": a.model.name(int(ev)) if ev >= 0 else None, "host": hf}
    if hf["frames"]:
        top = hf["frames"][0][0]
        extra["credited"] = top
    return a.stacks.stack_at(x.thr, int(at)), extra


def _frame_list(a, frames) -> str:
    return ", ".join(f"`{display_frame(a.model.name(e))}` {fmt_ns(ns)}" for e, ns in frames)


def explain(a, d, tl):
    w = max(tl - d.start_ns, 0)
    nk = f"`{d.next_op or d.next_kernel}`"
    held_ns = d.breakdown.get("python", 0)
    hf = d.extra.get("host") or {}
    frames = hf.get("frames") or []
    where = f" in `{d.signature}`" if d.signature else ""
    lead = f"Host work{where} held the CPU for {fmt_ns(held_ns)} of the {fmt_ns(w)} before {nk} was launched"
    if not frames:
        return f"{lead}; GPU idle {fmt_ns(d.dur_ns)}."
    pb = d.breakdown.get("profiler", 0)
    prof = (f" The profiler's own record_function enter/exit took another {fmt_ns(pb)} (cheap un-profiled)."
            if pb >= 0.1 * max(w, 1) else "")
    top_e, top_ns = frames[0]
    top_name = a.model.name(top_e)
    if top_ns >= HOLDS_SHARE * max(hf.get("host_ns", 0), 1):
        rest = f" (then {_frame_list(a, frames[1:3])})" if len(frames) > 1 else ""
        return (f"{lead}; `{display_frame(top_name)}` ran {fmt_ns(top_ns)} of it itself{rest}; "
                f"GPU idle {fmt_ns(d.dur_ns)}.{prof}")
    return (f"{lead}, spread over many frames; the most own time: {_frame_list(a, frames[:4])}; "
            f"GPU idle {fmt_ns(d.dur_ns)}.{prof}")


CAUSE = Cause(
    name=PYTHON, action="host-work", order=60, letter="Y", colour="green",
    summary="Python code with no PyTorch op below it held the launching thread for most of the gap",
    title="{n} gaps while host work{where} held the CPU cost {t} of GPU idle",
    suggestion="Move this host work out of the step (precompute, cache, or vectorise it on the GPU), or hide it "
               "behind GPU work with CUDA graphs / torch.compile.",
    rule=rule, gather=gather, explain=explain, by_frame=True,
)
