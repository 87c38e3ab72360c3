"""``render_markdown(analyses, top=10) -> str``: the report a person reads in a minute.

Trace strings (kernel names, frames, paths) are data: they go into code spans (``code``), which
Markdown does not interpret, with ``|`` escaped inside tables and backticks handled by a longer fence.

The report is chosen by the traces given (``render_markdown``): one trace (markdown_single.py), the ranks of one
job (markdown_ranks.py), two as before/after, three side by side or more one row each (markdown_compare.py); the
escaping and labels all of them use are in markdown_text.py.
"""

from __future__ import annotations

from .markdown_compare import _num, _pct, _signed, _span, _steps_text, before_after, compare, overview
from .markdown_ranks import ranks_headline, ranks_table
from .markdown_single import (_COLL_RE, _coll_label, _fence, _sections, _stack_lines, _wait_text, by_saving, headline,
                              projection_line, saving_line, single, streams_section, window_line)
from .markdown_text import _CODE_SPAN, _CTRL, _MD_SPECIAL, _biggest_cause, _bytes, _ctrl_esc, _label, code, esc, inline

#: the entry; the other names are re-exported from the modules that now hold them, so that
#: ``from tui.report.markdown import ...`` keeps working
__all__ = ["render_markdown", "MAX_SIDE_BY_SIDE", "esc", "inline", "code", "_MD_SPECIAL", "_CODE_SPAN", "_CTRL",
           "_ctrl_esc", "_bytes", "_label", "_biggest_cause", "_COLL_RE", "_coll_label", "_wait_text", "window_line",
           "by_saving", "saving_line", "projection_line", "headline", "_stack_lines", "_fence", "single",
           "streams_section", "_sections", "compare", "_signed", "_pct", "_num", "_span", "_steps_text",
           "before_after", "overview", "ranks_headline", "ranks_table"]


#: side by side up to this many traces; more get one row each (a table 18 columns wide reads as noise)
MAX_SIDE_BY_SIDE = 3


def render_markdown(analyses, top: int = 10) -> str:
    if not isinstance(analyses, (list, tuple)):
        analyses = [analyses]
    ranks = [a.rank for a in analyses]
    if len(analyses) > 1 and all(r is not None for r in ranks) and len(set(ranks)) == len(ranks):
        L = ["# gapscope report: " + esc(f"{len(analyses)} ranks"), ""]
        L += ranks_table(analyses) + _sections(analyses, top)
    elif len(analyses) > MAX_SIDE_BY_SIDE:
        L = overview(analyses, top)
    elif len(analyses) == 2:
        L = before_after(analyses, top)
    elif len(analyses) > 1:
        L = compare(analyses, top)
    else:
        L = single(analyses[0], top)
    return _CTRL.sub(_ctrl_esc, "\n".join(L).rstrip() + "\n")
