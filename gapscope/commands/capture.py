"""``gapscope capture demo|run ...``: record traces with torch.profiler (its own parser: ``capture/cli.py``)."""

from __future__ import annotations

NAME = "capture"
HELP = "record traces with torch.profiler (see: gapscope capture --help)"


def add_parser(sub) -> None:
    # a placeholder for --help: the words after ``capture`` go to capture's own parser unparsed (see run_argv)
    sub.add_parser(NAME, help=HELP, add_help=False)


def run_argv(argv: list[str]) -> int:
    from ..capture.cli import main as capture_main

    return capture_main(argv)
