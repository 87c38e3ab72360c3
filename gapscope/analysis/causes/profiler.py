"""``profiler``: the profiler's own work on the launching thread held most of the gap: its overhead events
there, or record_function enter/exit (the capture's step boundaries included) before the next launch. Only
the launching thread decides: another thread's profiler events say nothing about this gap."""

from __future__ import annotations

from ..units import fmt_ns
from . import PROFILER, Cause


def rule(c):
    most = c.cfg.most
    return (c.overhead_share > most * c.g) | (c.wpos & (c.bd["profiler"] > most * c.w))


def explain(a, d, tl):
    w = max(tl - d.start_ns, 0)
    pb = d.breakdown.get("profiler", 0)
    if pb:
        return (f"The profiler's own work (record_function enter/exit, step bookkeeping) held the launching thread "
                f"for {fmt_ns(pb)} of the {fmt_ns(w)} before the next launch; GPU idle {fmt_ns(d.dur_ns)}. Not a "
                f"property of the model: un-profiled, this gap is shorter or gone.")
    return f"GPU idle {fmt_ns(d.dur_ns)} inside the profiler's own overhead; not a property of the model."


CAUSE = Cause(
    name=PROFILER, order=40, letter="P", colour="bright_black",
    summary="the profiler's own work on the launching thread (overhead events, record_function enter/exit) covered "
            "most of the gap",
    title="{n} gaps inside the profiler's own work cost {t} of GPU idle",
    suggestion="This idle time is the profiler's own: profile a narrower window (schedule with warmup/active), with "
               "fewer record_function ranges or without with_stack to see the model's real behaviour.",
    rule=rule, explain=explain,
)
