"""``gapscope diff A B``: before/after in the explorer."""

from __future__ import annotations

from .common import add_ascii, add_trace_args

NAME = "diff"
HELP = "before/after: two traces' lanes on one step-aligned axis, with the changes"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help=HELP)
    add_trace_args(p, nargs=2, help_text="A (before) and B (after): .json or .json.gz")
    add_ascii(p)


def run(args) -> int:
    from ..tui.diffapp import run_diff

    return run_diff(args)
