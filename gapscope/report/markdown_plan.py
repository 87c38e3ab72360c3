"""The plan of actions in Markdown (analysis/plan.py): what to change, where, what it buys, in the plan's order and
numbers; the first thing a report shows, one screen long (the minor actions fold into one line unless asked for)."""

from __future__ import annotations

from ..analysis.units import fmt_ns as t
from .markdown_text import code, esc, spans_md


def text_md(change) -> str:
    """An action's text (``Span``s): code names as code spans, the prose escaped."""
    return spans_md(change, 90)


def where_md(w) -> str:
    """" at `capture/demo.py:51` (`_inject_sync_check`)", or nothing when the change names no frame."""
    if w is None or w.file is None:
        return ""
    return f" — {code(f'{w.file}:{w.line}', False)}"


def _pct(p) -> str:
    return f"−{p:.1f}%"


def action_lines(plan, x) -> list[str]:
    """One action: its number, severity and saving first, the change, where; then what it needs first, what it sits
    inside or unlocks, and its evidence."""
    L = [f"{x.rank}. **{_pct(x.saving_pct)}** \\[{x.severity}\\] {text_md(x.change)}{where_md(x.where)}  "]
    for n in x.needs:
        alone = f"{_pct(n.saving_pct)} alone" if n.saving_pct is not None else "not projected alone"
        also = f", action {n.action}" if n.action is not None else ""
        L.append(f"   first: {text_md(n.change)} ({alone}{also}): a CUDA graph cannot capture them  ")
    notes = []
    if x.inside is not None:
        outer = plan.action(x.inside)
        notes.append(f"inside action {x.inside} once " + ("the step is a CUDA graph" if outer is not None and
                                                           outer.kind == "cuda-graph" else "that is done"))
    if x.unlocks:
        notes.append("needed first by action " + ", ".join(str(k) for k in x.unlocks))
    ev = []
    if x.gap_rows:
        ev.append(f"{len(x.gap_rows)} gap{'s' if len(x.gap_rows) != 1 else ''}")
    if x.kernels:
        ev.append(f"{x.kernels} kernels")
    ev.append("findings " + ", ".join(x.findings))
    L.append(f"   {t(x.saving_ns)} per step alone" + "".join(f"; {n}" for n in notes) + f"; evidence: {esc(', '.join(ev))}  ")
    return L


def plan_section(a, minor: bool = False) -> list[str]:
    """## Plan: the actions (the minor ones as one line unless ``minor``) and what all of them buy together."""
    plan = a.plan
    if not plan.actions:
        return []
    how = "un-profiled" if plan.calibrated else "profiled time"
    L = [f"## Plan (step {t(plan.baseline_ns)} {how}; all of it together: −{t(plan.saving_ns)}, "
         f"{_pct(plan.saving_pct)})", ""]
    shown = plan.actions if minor else plan.major
    for x in shown:
        L += action_lines(plan, x)
    rest = len(plan.actions) - len(shown)
    if rest:
        L.append(f"\nminor: {rest} more action{'s' if rest != 1 else ''} under 1% each (gapscope report --all)")
    if plan.unplanned:
        # no action: a fix replayed that buys nothing measurable, or a finding no replay covers (a wait, the profiler)
        pj = a.projection
        zero = [k for k in plan.unplanned if pj.saving_ns.get(k) is not None]
        other = [k for k in plan.unplanned if pj.saving_ns.get(k) is None]
        parts = []
        if zero:
            parts.append(f"{esc(', '.join(zero))} (each fix alone buys nothing measurable)")
        if other:
            parts.append(f"{esc(', '.join(other))} (not projected)")
        L.append(f"\nNo action: {'; '.join(parts)}; see the findings below.")
    L.append("")
    return L
