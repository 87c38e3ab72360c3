"""What several commands share: the trace arguments and the load options they give."""

from __future__ import annotations

import argparse


def add_trace_args(p: argparse.ArgumentParser, *, nargs="+", help_text: str = "trace file(s): .json or .json.gz") -> None:
    p.add_argument("traces", nargs=nargs, metavar="TRACE", help=help_text)
    p.add_argument("--no-cache", action="store_true", help="do not read or write the columnar cache")
    p.add_argument("--max-size", metavar="BYTES", default=None,
                   help="refuse traces larger than this once decompressed (default 8G; suffixes K, M, G)")


def add_ascii(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ascii", action="store_true", help="plain ASCII glyphs (default when the locale is not UTF-8)")


#: options that take a value (``gapscope --max-size 1G TRACE`` still finds TRACE as the first positional)
VALUE_OPTIONS = ("--max-size",)
