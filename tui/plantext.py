"""The plan of actions (gapscope/analysis/plan.py) in the explorer's words: the header's first action, the gap
detail's "action k", the findings view's rows and info box. The explorer ranks nothing itself: it shows
``analysis.plan`` once the loader made it (tui/loading.py ``Loader.project``), in its order and numbers, as a part's
state has it (tui/loadstate.py ``AnalysisState.plan``: None before the analysis is ready).

Text stays data until it is drawn: an action's ``change`` is a tuple of ``Span`` (prose, or a code name), turned
here into (text, style) pieces; the caller makes each piece safe (tui/safe.py ``shown``) and appends it with its
style, never through markup."""

from __future__ import annotations

import numpy as np

from ..analysis.names import display_frame

#: the style of a code name inside an action's text (a frame, an op, a call to make)
CODE = "bright_cyan"


def top_action(state):
    """The plan's first action that is not minor (``Plan.top``) of a part's state (``AnalysisState``), or None (no
    plan yet, or nothing worth 1%)."""
    plan = state.plan
    return plan.top if plan is not None else None


def pct(p) -> str:
    """"−77.9%": what an action buys, in percent of the step."""
    return f"−{float(p):.1f}%"


def how(plan) -> str:
    """Whose step the figures are of: the un-profiled one (calibrated) or the profiled trace's."""
    return "un-profiled" if plan.calibrated else "profiled time"


def action_pieces(change) -> list[tuple[str, str | None]]:
    """An action's text as (text, style) pieces: prose plain, code names in ``CODE``."""
    return [(s.text, CODE if s.code else None) for s in change]


def alone(step) -> str:
    """"−5.0% alone, action 4" for a prerequisite (``Step``), or "not projected alone"."""
    s = f"{pct(step.saving_pct)} alone" if step.saving_pct is not None else "not projected alone"
    return s + (f", action {step.action}" if step.action is not None else "")


def need_pieces(step, lead: str = "first: ") -> list[tuple[str, str | None]]:
    """"first: <its change> (−5.0% alone, action 4)"."""
    return [(lead, "bold"), *action_pieces(step.change), (f" ({alone(step)})", None)]


def where_text(w) -> str:
    """Where an action's change goes: ``file:line``, else the frame as the trace names it; "" without one."""
    if w is None:
        return ""
    if w.file and w.line is not None:
        return f"{w.file}:{w.line}"
    return display_frame(w.frame)


def action_kernel_names(a, action) -> list[str]:
    """The names of the kernels a kernel action of ``a``'s plan changes (its findings' kernels), each once."""
    m = a.model
    by_id = {f.id: f for f in a.findings}
    out: dict[str, None] = {}
    for fid in action.findings:
        f = by_id.get(fid)
        ks = np.asarray(f.kernels if f is not None else (), np.int64)
        for n in np.unique(m.name_id[ks]).tolist() if ks.size else ():
            out.setdefault(m.names[n], None)
    return list(out)
