"""``user-sync``: the user's own code synchronised with the GPU (``torch.cuda.synchronize()``, ``Event.synchronize()``,
``Stream.synchronize()``: no aten op around the call, usersyncs.py) in the gap, and that call with the code around it
that launches nothing (a per-layer timer's context manager and clock reads) took a fair share of the CPU's part of
the gap (``user_sync_share``).

Its rule comes right after ``sync``'s: a gap whose GPU ran dry while the thread waited in the call, or whose call
took a share of it, is a ``sync`` gap whoever made the call. In a host-bound step the GPU has drained before the call
is made, so the call itself is short and the gap is mostly host time: the ``sync`` rule does not see it, and the time
went to ``python`` gaps of whatever frame ran next. The fix a person makes removes the caller's code
(drop the timer, or time with CUDA events without synchronising); its own fix in the replay removes each call's site
(replay/fixes.py)."""

from __future__ import annotations

import numpy as np

from ..intervals import GroupedCoverage, uniq
from ..names import display_frame
from ..units import fmt_ns
from ..usersyncs import user_syncs
from . import USER_SYNC, Cause


def _sites(c):
    got = c.model.__dict__.get("_user_sync_sites")
    u = user_syncs(c.model, c.flags, c.stacks)
    if got is not None and got[0] is u:
        return got[1]
    cov = GroupedCoverage(u.thread, u.site_s, u.site_e, c.cpu.base, c.cpu.span)
    c.model.__dict__["_user_sync_sites"] = (u, cov)
    return cov


def rule(c):
    none = np.zeros(c.n, bool)
    if c.stacks is None or c.n == 0:
        return none
    if user_syncs(c.model, c.flags, c.stacks).n == 0:
        return none
    share = _sites(c).covered(c.thread, c.t0, c.t_launch)
    return (c.thread >= 0) & ~c.queued & c.wpos & (share > 0) & (share >= c.cfg.user_sync_share * c.w)


def _rows_of(a, thr: int, t0: int, tl: int) -> np.ndarray:
    """The user-sync rows whose site overlaps [t0 - slack, tl] on ``thr``."""
    u = user_syncs(a.model, a.flags, a.stacks)
    return np.flatnonzero((u.thread == thr) & (u.site_e >= t0 - a.config.sync_slack_ns) & (u.site_s <= tl))


def gather(a, x):
    u = user_syncs(a.model, a.flags, a.stacks)
    rows = _rows_of(a, x.thr, x.t0, x.tl)
    if rows.size == 0:
        return a.stacks.stack_at(x.thr, x.t0), {}
    m = a.model
    k = int(rows[np.argmax(u.site_e[rows] - u.site_s[rows])])
    ci = int(u.call[k])
    st = a.stacks.stack_at(x.thr, int(m.ts_ns[ci]) + int(m.dur_ns[ci]) // 2)
    # down to the frame the finding names (the wrapper that calls the timer): its signature
    cut = [j for j, f in enumerate(st) if f.event == int(u.frame[k])]
    st = st[:cut[0] + 1] if cut else st
    site_ns = int(np.clip(np.minimum(u.site_e[rows], x.tl) - np.maximum(u.site_s[rows], x.t0), 0, None).sum())
    return st, {"user_sync": {"calls": [m.name(int(i)) for i in u.call[rows].tolist()], "site_ns": site_ns,
                              "timer": bool(u.timer[rows].any()),
                              "caller": m.name(int(u.caller[k])) if u.caller[k] >= 0 else None}}


def explain(a, d, tl):
    us = d.extra.get("user_sync") or {}
    nk = f"`{d.next_op or d.next_kernel}`"
    w = max(tl - d.start_ns, 0)
    where = f" in `{d.signature}`" if d.signature else ""
    calls = us.get("calls") or []
    what = f"`{calls[0]}`" + (f" ({len(calls)} calls)" if len(calls) > 1 else "") if calls else "a synchronising call"
    timer = " (a timer: it reads the clock around it)" if us.get("timer") else ""
    return (f"The user's code{where} synchronised with the GPU ({what}){timer}; that code took "
            f"{fmt_ns(us.get('site_ns', 0))} of the {fmt_ns(w)} before {nk} was launched; GPU idle "
            f"{fmt_ns(d.dur_ns)}.")


def evidence(a, rows, ev) -> dict:
    """The calls of the finding's frame in the measured steps: how many per step, per call of the frame that calls
    them (a per-layer wrapper's calls), their sites' host time per step, and whether they time something."""
    m = a.model
    u = user_syncs(a.model, a.flags, a.stacks)
    fr = ev.get("frame")
    sel = np.array([m.name(int(e)) == fr for e in u.frame.tolist()], bool) if fr else np.ones(u.n, bool)
    w = a.window
    if getattr(w, "clipped", False) and u.n:
        sel &= w.cpu_in(m, u.call)
    steps = a.step_count or 1
    n = int(sel.sum())
    callers = u.caller[sel]
    caller = None
    per_call = None
    if callers.size and (callers >= 0).all():
        names = {m.name(int(e)) for e in callers.tolist()}
        if len(names) == 1:
            caller = names.pop()
            per_call = n / max(int(uniq(callers).size), 1)
    return {"user_sync": {"calls": n, "per_step": n / steps, "caller": caller, "per_caller_call": per_call,
                          "site_us_per_step": float((u.site_e[sel] - u.site_s[sel]).sum()) / 1e3 / steps,
                          "timer": bool(u.timer[sel].any()),
                          "apis": sorted({m.name(int(i)) for i in u.call[sel].tolist()})}}


def _times(n: float) -> str:
    n = round(n, 1)
    words = {1: "once", 2: "twice"}
    return words.get(n, f"{n:g} times")


def sync_words(ev: dict) -> tuple[str, str]:
    """(how often: "twice per call of `forward` (16 times per step)", the change: "drop it or time with CUDA events
    without synchronising") from a user-sync finding's evidence."""
    us = ev.get("user_sync") or {}
    per_step = us.get("per_step") or 0
    often = f"{_times(per_step)} per step"
    if us.get("caller") and us.get("per_caller_call"):
        of = "" if us["caller"] == ev.get("frame") else f" of `{display_frame(us['caller'])}`"
        often = f"{_times(us['per_caller_call'])} per call{of} ({often})"
    if us.get("timer"):
        return often, "drop it, or time with CUDA events (torch.cuda.Event(enable_timing=True)) without synchronising"
    return often, "remove the synchronisation, or wait on a CUDA event only where the host needs the result"


def advise(a, details, ev):
    often, change = sync_words(ev)
    us = ev.get("user_sync") or {}
    who = "Your timer" if us.get("timer") else "Your code"
    return f"{who} synchronises with the GPU {often}: {change}. " + CAUSE.suggestion


CAUSE = Cause(
    name=USER_SYNC, action="user-sync", order=31, letter="U", colour="bright_yellow",
    summary="the user's own code synchronised with the GPU (torch.cuda.synchronize(), an event's or a stream's "
            "synchronize()) in the gap, and that code took a fair share of the time before the next launch",
    title="{n} gaps after explicit synchronisations{where} cost {t} of GPU idle",
    suggestion="Every synchronisation drains the GPU's queue and costs the host a round trip; in a host-bound step "
               "the code around it (the timer itself) is on the critical path too.",
    rule=rule, gather=gather, explain=explain, advise=advise, evidence=evidence, by_frame=True,
)
