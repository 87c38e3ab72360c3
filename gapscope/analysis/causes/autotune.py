"""``autotune``: an autotuner benchmarked inside the step (autotuning.py): cuDNN trying every convolution algorithm
for a new input shape (``torch.backends.cudnn.benchmark``), a Triton kernel's configs. The launching thread was inside
the tuning call for most of the CPU's part of the gap, or the kernel that ended the gap is one of its trials.

Its rule comes first: a tuning call's synchronisations would otherwise make its gaps ``sync`` gaps (with the advice
to stop reading GPU values, which the user's code does not do), its memsets ``copy`` gaps. The finding says which
autotuner, how many trial items for how many calls, and the shapes that triggered them; its own fix drops the trials
and the host time before each call's real run (replay/fixes.py)."""

from __future__ import annotations

import numpy as np

from ..autotuning import tuning
from ..intervals import GroupedCoverage
from ..thresholds import AUTOTUNE_TOP_SHAPES
from ..units import fmt_ns
from . import AUTOTUNE, Cause


def _cover(c):
    t = tuning(c.model, c.flags, c.cfg)
    got = c.model.__dict__.get("_autotune_cover")
    if got is not None and got[0] is t:
        return t, got[1]
    cov = GroupedCoverage(t.thread, t.start, t.end, c.cpu.base, c.cpu.span)
    c.model.__dict__["_autotune_cover"] = (t, cov)
    return t, cov


def rule(c):
    none = np.zeros(c.n, bool)
    if c.n == 0:
        return none
    t, cov = _cover(c)
    if t.n == 0:
        return none
    inside = cov.covered(c.thread, c.t0, c.t_launch)
    L = np.where(c.has_launch, c.launch, 0)
    lt = c.model.ts_ns[L]
    trial = c.has_launch & (cov.covered(c.thread, lt, lt + 1) > 0)
    return (c.thread >= 0) & (trial | (c.wpos & (inside > c.cfg.most * c.w)))


def _call_at(a, thr: int, t0: int, tl: int) -> int:
    """The tuning call (row of ``tuning``) overlapping [t0, tl] on ``thr`` the longest, or -1."""
    t = tuning(a.model, a.flags, a.config)
    ov = np.minimum(t.end, tl + 1) - np.maximum(t.start, t0)
    ok = (t.thread == thr) & (ov > 0)
    return int(np.flatnonzero(ok)[np.argmax(ov[ok])]) if ok.any() else -1


def _shape(a, e: int) -> str | None:
    dims = a.model.event_args(e).get("Input Dims")
    if not isinstance(dims, list):
        return None
    shown = [d for d in dims if isinstance(d, list) and d]
    return ", ".join(str(d) for d in shown[:2]) if shown else None


def gather(a, x):
    t = tuning(a.model, a.flags, a.config)
    k = _call_at(a, x.thr, x.t0, x.tl)
    if k < 0:
        return a.stacks.stack_at(x.thr, x.t0), {}
    e = int(t.event[k])
    m = a.model
    st = a.stacks.stack_at(x.thr, int(m.ts_ns[e]) + int(m.dur_ns[e]) // 2)
    return st, {"autotune": {"kind": t.kind[k], "call": m.name(e), "shape": _shape(a, e), "trials": int(t.trials[k]),
                             "syncs": int(t.syncs[k]), "call_ns": int(t.end[k] - t.start[k])}}


def explain(a, d, tl):
    at = d.extra.get("autotune") or {}
    if not at:
        return f"An autotuner benchmarked inside the step; GPU idle {fmt_ns(d.dur_ns)}."
    shape = f" for the new shape {at['shape']}" if at.get("shape") else ""
    return (f"{at['kind']} autotuned `{at['call']}`{shape}: {at['trials']} trial items and {at['syncs']} "
            f"synchronisations in one call of {fmt_ns(at['call_ns'])}; GPU idle {fmt_ns(d.dur_ns)}.")


def group(a, d):
    at = d.extra.get("autotune") or {}
    return at.get("kind")


def evidence(a, rows, ev) -> dict:
    """The tuning calls of the measured steps of the finding's autotuner: how many, their trial items, per step, and
    the input shapes that triggered them (most trials first)."""
    m = a.model
    t = tuning(m, a.flags, a.config)
    sel = np.array([k == ev.get("kind") for k in t.kind], bool) if ev.get("kind") else np.ones(t.n, bool)
    w = a.window
    if getattr(w, "clipped", False) and t.n:
        sel &= w.cpu_in(m, t.event)
    steps = a.step_count or 1
    idx = np.flatnonzero(sel)
    shapes: dict[str, int] = {}
    for k in idx.tolist():
        sh = _shape(a, int(t.event[k]))
        if sh:
            shapes[sh] = shapes.get(sh, 0) + int(t.trials[k])
    top = sorted(shapes.items(), key=lambda kv: -kv[1])[:AUTOTUNE_TOP_SHAPES]
    ops = sorted({m.name(int(e)) for e in t.event[idx].tolist()})
    return {"autotune": {"kind": ev.get("kind"), "calls": int(idx.size), "trials": int(t.trials[idx].sum()),
                         "syncs": int(t.syncs[idx].sum()), "per_step_calls": idx.size / steps,
                         "host_us_per_step": float((t.end[idx] - t.start[idx]).sum()) / 1e3 / steps,
                         "ops": ops, "shapes": [s for s, _ in top], "distinct_shapes": len(shapes)}}


def tune_words(ev: dict) -> str:
    """"cuDNN is autotuning every new shape (1401 trial kernels for 15 convolutions)" from a finding's evidence."""
    at = ev.get("autotune") or {}
    kind = at.get("kind") or "An autotuner"
    n, trials = int(at.get("calls") or 0), int(at.get("trials") or 0)
    what = "convolutions" if kind in ("cuDNN", "MIOpen") else "kernels"
    if n == 1:
        what = what[:-1]
    return f"{kind} is autotuning every new shape ({trials} trial kernels for {n} {what})"


ADVICE = {
    "cuDNN": "Fix the input shapes (pad or bucket them to a few sizes, warmed up before the timed steps) or turn "
             "benchmark off (torch.backends.cudnn.benchmark = False): each new shape makes cuDNN time every "
             "algorithm again.",
    "MIOpen": "Fix the input shapes (pad or bucket them to a few sizes, warmed up first) or turn MIOpen's search off "
              "(MIOPEN_FIND_MODE=FAST): each new shape makes it time the algorithms again.",
    "Triton": "Warm the kernels up on every shape before the timed steps (or cache the tuning: "
              "TRITON_CACHE_DIR, Inductor's FX graph cache), mark the changing sizes dynamic, or autotune fewer "
              "configs: each new key benchmarks all of them again.",
}


def advise(a, details, ev):
    kind = (ev.get("autotune") or {}).get("kind") or ev.get("kind")
    shapes = (ev.get("autotune") or {}).get("shapes") or []
    sh = f" Shapes that triggered it: {'; '.join(shapes)}." if shapes else ""
    return f"{tune_words(ev)}.{sh} " + ADVICE.get(kind, ADVICE["cuDNN"])


CAUSE = Cause(
    name=AUTOTUNE, action="autotune", order=8, letter="B", colour="bright_cyan",
    summary="an autotuner (cuDNN's benchmark mode, a Triton kernel's configs) ran its trials inside the step: trial "
            "kernels, synchronisations and memsets for a shape it had not seen",
    title="{n} gaps while {what} autotuned{where} cost {t} of GPU idle",
    suggestion=ADVICE["cuDNN"],
    rule=rule, gather=gather, explain=explain, group=group, advise=advise, evidence=evidence,
)
