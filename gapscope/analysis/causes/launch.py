"""``launch``: the launching thread was busy dispatching (aten ops, launch calls) through the CPU's part of
the gap: the GPU drains work faster than the CPU issues it. Only for gaps where the CPU's issuing is the
critical path (a kernel queued long before it ran is ``gpu-wait``)."""

from __future__ import annotations

from ..units import fmt_ns
from . import LAUNCH, Cause


def rule(c):
    return (c.wpos & (c.dispatch > c.cfg.most * c.w)) | (c.late & ~c.long_wait & ~c.queued) | c.in_launch


def gather(a, x):
    return x.launch_stack, {"issued_ops": a.evidence.ops_in(x.thr, x.t0, x.tl)}


def explain(a, d, tl):
    w = max(tl - d.start_ns, 0)
    nk = f"`{d.next_op or d.next_kernel}`"
    m = a.model
    L = int(a.gaps.launch_idx[d.row])
    if L >= 0:
        ls, le = int(m.ts_ns[L]), int(m.ts_ns[L] + m.dur_ns[L])
        inside = min(le, d.start_ns + d.dur_ns) - max(ls, d.start_ns)
        if inside > a.config.most * d.dur_ns:
            return (f"The launch call `{d.launch}` itself ran on the CPU for {fmt_ns(inside)} of the gap before "
                    f"{nk} could start (a slow launch: a first launch loading its module, a graph upload, or a full "
                    f"launch queue); GPU idle {fmt_ns(d.dur_ns)}.")
    if w < a.config.late_launch_share * d.dur_ns and d.launch is not None:
        return (f"{nk} was launched {fmt_ns(w)} into the gap and started {fmt_ns(d.dur_ns - w)} later, the usual "
                f"launch-to-start latency of this trace; GPU idle {fmt_ns(d.dur_ns)}.")
    busy = sum(d.breakdown.get(k, 0) for k in ("op", "runtime", "sync", "allocator"))
    return (f"The CPU spent {fmt_ns(busy)} of {fmt_ns(w)} dispatching ops before launching {nk}; "
            f"GPU idle {fmt_ns(d.dur_ns)}.")


def advise(a, details, ev):
    base = ("The GPU finishes kernels faster than the CPU launches them: fuse small ops (torch.compile) or batch more "
            "work per kernel")
    if ev.get("data_dependent_host"):
        return base + ("; this step makes host decisions on GPU values (syncs), so move those onto the GPU first: a "
                       "CUDA graph cannot capture them.")
    if ev.get("graphed"):
        return base + "; the step already replays CUDA graphs: capture the parts still launched one by one."
    return base + (", or capture the step in a CUDA graph (torch.cuda.graphs, torch.compile(mode='reduce-overhead')).")


CAUSE = Cause(
    name=LAUNCH, action="cuda-graph", order=70, letter="L", colour="yellow",
    summary="the launching thread was busy dispatching ops and launches: the GPU drains work faster than the CPU "
            "issues it",
    title="launch-bound: {n} gaps while the CPU dispatched ops cost {t} of GPU idle",
    suggestion="The GPU finishes kernels faster than the CPU launches them: capture the step in a CUDA graph "
               "(torch.cuda.graphs, torch.compile(mode='reduce-overhead')), fuse small ops (torch.compile), or batch "
               "more work per kernel.",
    rule=rule, gather=gather, explain=explain, advise=advise, extra_keys=("issued_ops",),
)
