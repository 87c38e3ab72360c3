"""``render_markdown(analyses, top=10) -> str``: the report a person reads in a minute.

Trace strings (kernel names, frames, paths) are data: they go into code spans (``code``), which
Markdown does not interpret, with ``|`` escaped inside tables and backticks handled by a longer fence.

The report is chosen by the traces given (``render_markdown``): one trace (markdown_single.py), the ranks of one
job (markdown_ranks.py), two as before/after, three side by side or more one row each (markdown_compare.py); the
escaping and labels all of them use are in markdown_text.py.
"""

from __future__ import annotations

from ..analysis.diagnosis import diagnose
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
    """The report of a trace set: its analyses, or their diagnosis (analysis/diagnosis.py), which decides the
    kind of set; ``many`` is side by side up to ``MAX_SIDE_BY_SIDE`` traces, one row each beyond."""
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
        L = single(analyses[0], top)
    return _CTRL.sub(_ctrl_esc, "\n".join(L).rstrip() + "\n")
