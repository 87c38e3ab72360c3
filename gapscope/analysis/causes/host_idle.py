"""``host-idle``: the launching thread recorded nothing for most of the CPU's part of the gap (blocked on I/O,
the GIL, another thread, a sleep in C code, or code the profiler did not trace)."""

from __future__ import annotations

from ..units import fmt_ns
from . import HOST_IDLE, Cause


def rule(c):
    return (c.thread < 0) | (c.wpos & (c.bd["idle"] > c.cfg.most * c.w))


def gather(a, x):
    return a.stacks.stack_at(x.thr, x.t0), {"last_activity": a.evidence.last_before(x.thr, x.tl)}


def explain(a, d, tl):
    w = max(tl - d.start_ns, 0)
    nk = f"`{d.next_op or d.next_kernel}`"
    last = d.extra.get("last_activity")
    tail = f"; last activity: {last}" if last else ""
    return (f"The launching thread recorded nothing for {fmt_ns(d.breakdown.get('idle', w))} of the {fmt_ns(w)} "
            f"before {nk}; GPU idle {fmt_ns(d.dur_ns)}{tail}.")


CAUSE = Cause(
    name=HOST_IDLE, order=80, letter="H", colour="white",
    summary="the launching thread recorded nothing for most of the gap (blocked, sleeping, another thread, or not "
            "traced)",
    title="{n} gaps while the launching thread was idle cost {t} of GPU idle",
    suggestion="The launching thread was not working: check for blocking I/O, sleeps, data loading on the main "
               "thread, GIL contention with other threads, or code the profiler did not trace.",
    rule=rule, gather=gather, explain=explain,
)
