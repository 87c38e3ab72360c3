"""``gil``: another Python thread of the launching thread's process held the GIL for a large share of the CPU's part
of the gap (``gil_share``): the launching thread's ops and frames stretched while it waited to run again. The holds
come from the trace alone (gilholds.py): a thread inside a Python frame that does not block with the GIL released,
while the launching thread neither started nor returned from any Python call.

The finding names the holding thread, the share of the window it held the GIL and the calls its own code made while
holding it (a metrics thread's ``json.dumps``); its own fix takes those holds off the launching thread (the replay,
replay/fixes.py). A thread that only sleeps or waits on a queue or an event holds nothing."""

from __future__ import annotations

import numpy as np

from ..gilholds import holder_stack, holders_in, holds
from ..names import display_frame
from ..thresholds import GIL_TOP_FRAMES as TOP_FRAMES
from ..units import fmt_ns
from . import GIL, Cause


def rule(c):
    none = np.zeros(c.n, bool)
    if c.stacks is None or c.n == 0:
        return none
    h = holds(c.model, c.stacks)
    if not h.holders:
        return none
    ns = h.by_others(c.thread, c.t0, c.t_launch)
    return c.wpos & ~c.late & (ns > 0) & (ns >= c.cfg.gil_share * c.w)


def _holder(a, thr: int, t0: int, tl: int) -> tuple[int, int]:
    """(the thread that held the GIL longest in [t0, tl) against ``thr``, its ns there), or (-1, 0)."""
    per = holds(a.model, a.stacks).per_holder(np.array([thr], np.int64), np.array([t0], np.int64),
                                              np.array([tl], np.int64))
    if not per:
        return -1, 0
    h = max(per, key=lambda k: (int(per[k][0]), -k))
    return int(h), int(per[h][0])


def gather(a, x):
    h, ns = _holder(a, x.thr, x.t0, x.tl)
    if h < 0:
        return a.stacks.stack_at(x.thr, x.t0), {}
    s, e = holds(a.model, a.stacks).intervals(h, x.t0, x.tl)
    k = int(np.argmax(e - s)) if s.size else 0
    at = int(s[k] + (e[k] - s[k]) // 2) if s.size else x.t0
    mine, below = holder_stack(a, h, at)
    info = {"track": h, "tid": a.model.tracks[h].tid, "held_ns": ns, "of_ns": max(x.tl - x.t0, 0),
            "running": [f.name for f in below[:TOP_FRAMES]]}
    return mine, {"gil": info}


def explain(a, d, tl):
    g = d.extra.get("gil") or {}
    nk = f"`{d.next_op or d.next_kernel}`"
    if not g:
        return f"Another thread held the GIL before {nk} was launched; GPU idle {fmt_ns(d.dur_ns)}."
    run = g.get("running") or []
    what = f" (`{display_frame(run[0])}`" + (f" from `{d.signature}`)" if d.signature else ")") if run else \
        (f" (in `{d.signature}`)" if d.signature else "")
    return (f"The launching thread waited for the GIL: thread {g['tid']} ran Python for {fmt_ns(g['held_ns'])} of the "
            f"{fmt_ns(g['of_ns'])} before {nk} was launched{what}; GPU idle {fmt_ns(d.dur_ns)}.")


def group(a, d):
    g = d.extra.get("gil") or {}
    return str(g["tid"]) if g else None


def evidence(a, rows, ev) -> dict:
    """The holding threads over the analysis window: how long each held the GIL there, that share of the window,
    and the calls their own code made while holding it."""
    lo = a.window_start_ns
    hs = holders_in(a, lo, lo + a.window_ns, TOP_FRAMES)
    return {"gil": {"threads": [{"tid": h.tid, "held_us": h.held_ns / 1e3, "window_share_pct": h.share_pct,
                                 "frames": [{"name": n, "held_us": ns / 1e3} for n, ns in h.frames]} for h in hs]}}


def holder_of(f) -> dict | None:
    """The thread a ``gil`` finding blames, from its evidence (the one its gaps' group key names): tid, held_us,
    window_share_pct, frames; None when the evidence does not say."""
    ev = f.evidence or {}
    threads = (ev.get("gil") or {}).get("threads") or []
    want = ev.get("kind")
    for t in threads:
        if want is None or str(t.get("tid")) == str(want):
            return t
    return None


def advise(a, details, ev):
    threads = (ev.get("gil") or {}).get("threads") or []
    want = ev.get("kind")
    t = next((x for x in threads if str(x["tid"]) == str(want)), threads[0] if threads else None)
    if t is None:
        return CAUSE.suggestion
    frames = ", ".join(f"`{display_frame(x['name'])}` {fmt_ns(x['held_us'] * 1e3)}" for x in t["frames"])
    its = f" (its frames: {frames})" if frames else ""
    return (f"The launching thread waited for the GIL: thread {t['tid']} ran Python for {t['window_share_pct']:.0f}% "
            f"of the window{its}. " + CAUSE.suggestion)


CAUSE = Cause(
    name=GIL, action="gil-thread", order=45, letter="G", colour="bright_blue",
    summary="another Python thread of the process held the GIL while the launching thread waited to run: its ops "
            "and frames stretched far past their own work",
    title="{n} gaps while thread {what} held the GIL{where} cost {t} of GPU idle",
    suggestion="Take that thread's Python work off the process that feeds the GPU (a subprocess or a "
               "multiprocessing worker), run it between steps, or make each piece small enough to hand the GIL back "
               "quickly; CUDA graphs shrink the launching thread's need for the GIL but do not remove the wait.",
    rule=rule, gather=gather, explain=explain, group=group, advise=advise, evidence=evidence, by_frame=True,
)
