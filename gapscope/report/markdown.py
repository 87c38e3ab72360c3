"""``render_markdown(analyses, top=10) -> str``: the report a person reads in a minute.

Trace strings (kernel names, frames, paths) are data: they go into code spans (``code``), which
Markdown does not interpret, with ``|`` escaped inside tables and backticks handled by a longer fence.

The report is chosen by the traces given (``render_markdown``): one trace (markdown_single.py), the ranks of one
job (markdown_ranks.py), two as before/after, three side by side or more one row each (markdown_compare.py); the
escaping and labels all of them use are in markdown_text.py.
"""

from __future__ import annotations

from ..analysis.diagnosis import diagnose
from .markdown_compare import before_after, compare, overview
from .markdown_ranks import ranks_table
from .markdown_single import _sections, single
from .markdown_text import _CTRL, _ctrl_esc, esc

#: the entry of the Markdown report; its parts are imported from the modules that hold them
__all__ = ["render_markdown", "MAX_SIDE_BY_SIDE"]


#: side by side up to this many traces; more get one row each (a table 18 columns wide reads as noise)
MAX_SIDE_BY_SIDE = 3


def render_markdown(analyses, top: int = 10, minor: bool = False) -> str:
    """The report of a trace set: its analyses, or their diagnosis (analysis/diagnosis.py), which decides the
    kind of set; ``many`` is side by side up to ``MAX_SIDE_BY_SIDE`` traces, one row each beyond. ``minor``: the plan
    lists its minor actions too (``--all``)."""
    d = diagnose(analyses)
    analyses = d.analyses
    if d.kind == "ranks":
        L = ["# gapscope report: " + esc(f"{len(analyses)} ranks"), ""]
        L += ranks_table(analyses) + _sections(analyses, top)
    elif d.kind == "pair":
        L = before_after(d, top)
    elif d.kind == "many":
        L = overview(analyses, top) if len(analyses) > MAX_SIDE_BY_SIDE else compare(analyses, top)
    else:
        L = single(analyses[0], top, minor=minor)
    return _CTRL.sub(_ctrl_esc, "\n".join(L).rstrip() + "\n")
