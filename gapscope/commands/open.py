"""``gapscope open TRACE...`` (also plain ``gapscope TRACE...``): the explorer."""

from __future__ import annotations

from .common import add_ascii, add_trace_args

NAME = "open"
HELP = "open the explorer (the default command)"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help=HELP)
    add_trace_args(p)
    add_ascii(p)


def run(args) -> int:
    from ..tui import run_app

    return run_app(args)
