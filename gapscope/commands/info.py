"""``gapscope info TRACE... [--json]``: what a trace holds."""

from __future__ import annotations

from .common import add_trace_args

NAME = "info"
HELP = "summarise what a trace holds"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help=HELP)
    add_trace_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args) -> int:
    from ..trace.info import run_info

    return run_info(args)
