"""The ``gapscope`` command line.

    gapscope TRACE [TRACE...]          open the explorer
    gapscope info TRACE...             what is in a trace
    gapscope report TRACE... [--json]  findings as Markdown or JSON
    gapscope capture demo|run ...      record traces (needs torch)

Subcommand modules are imported only when used, so ``gapscope info`` never pays for textual
and nothing but ``capture`` touches torch.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__
from .errors import GapscopeError

SUBCOMMANDS = ("info", "report", "capture", "open", "diff")

EPILOG = """\
examples:
  gapscope traces/decode_sync.json.gz          explore a trace; n / N jump between the largest GPU idle gaps
  gapscope traces/prefill.json.gz traces/decode.json.gz   two traces in tabs
  gapscope report traces/decode_sync.json.gz   why the GPU was idle, as Markdown
  gapscope report --json -o findings.json TRACE
  gapscope diff before.json.gz after.json.gz   before/after, step by step (report A B: the same as text)
  gapscope info TRACE                          events, devices, streams, threads, warnings
  gapscope capture demo --phase both --out traces   record the built-in demo model (needs torch)
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line in gapscope's format, exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        sys.stderr.write(f"gapscope: error: {message}\n")
        raise SystemExit(2)


def _trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", nargs="+", metavar="TRACE", help="trace file(s): .json or .json.gz")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the columnar cache")
    p.add_argument(
        "--max-size",
        metavar="BYTES",
        default=None,
        help="refuse traces larger than this once decompressed (default 8G; suffixes K, M, G)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gapscope",
        description="Why was the GPU idle? Explore PyTorch profiler traces in the terminal.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gapscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p_open = sub.add_parser("open", help="open the explorer (the default command)")
    _trace_args(p_open)
    p_open.add_argument("--ascii", action="store_true", help="plain ASCII glyphs (default when the locale is not UTF-8)")

    p_info = sub.add_parser("info", help="summarise what a trace holds")
    _trace_args(p_info)
    p_info.add_argument("--json", action="store_true", help="print JSON instead of text")

    p_rep = sub.add_parser("report", help="write the findings report (Markdown, or JSON with --json)")
    _trace_args(p_rep)
    p_rep.add_argument("--json", action="store_true", help="JSON following findings.schema.json")
    p_rep.add_argument("--schema", action="store_true",
                       help="print the JSON report's schema (the contract shipped in the package) and exit")
    p_rep.add_argument(
        "--top", type=int, default=None, metavar="N",
        help="gaps, kernels and findings to list (default 10; 50 gaps with --json)",
    )
    p_rep.add_argument(
        "--whole-trace", action="store_true",
        help="analyse the whole trace, not only the measured gapscope.step ranges of a gapscope capture",
    )
    p_rep.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout (never overwrites unless --force)")
    p_rep.add_argument("--force", action="store_true", help="allow -o to replace an existing file")

    p_diff = sub.add_parser("diff", help="before/after: two traces' lanes on one step-aligned axis, with the changes")
    p_diff.add_argument("traces", nargs=2, metavar="TRACE", help="A (before) and B (after): .json or .json.gz")
    p_diff.add_argument("--no-cache", action="store_true", help="do not read or write the columnar cache")
    p_diff.add_argument("--max-size", metavar="BYTES", default=None,
                        help="refuse traces larger than this once decompressed (default 8G; suffixes K, M, G)")
    p_diff.add_argument("--ascii", action="store_true", help="plain ASCII glyphs (default when the locale is not UTF-8)")

    sub.add_parser("capture", help="record traces with torch.profiler (see: gapscope capture --help)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except GapscopeError as exc:
        sys.stderr.write(f"gapscope: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("gapscope: interrupted\n")
        return 130
    except BrokenPipeError:
        # `gapscope report ... | head`: the reader went away; not an error worth a traceback
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except MemoryError:
        sys.stderr.write("gapscope: error: out of memory (try --max-size or a smaller trace)\n")
        return 2
    except Exception as exc:  # a bug: still one line by default, full traceback on request
        if os.environ.get("GAPSCOPE_DEBUG"):
            raise
        sys.stderr.write(
            f"gapscope: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            " (set GAPSCOPE_DEBUG=1 for the traceback)\n"
        )
        return 3


_VALUE_OPTIONS = ("--max-size",)


def _first_positional(argv: list[str]) -> str | None:
    """The first word that is not an option (or an option's value), or None."""
    skip = False
    for tok in argv:
        if skip:
            skip = False
            continue
        if tok == "--":
            return None
        if tok in _VALUE_OPTIONS:
            skip = True
            continue
        if tok.startswith("-"):
            continue
        return tok
    return None


def _main(argv: list[str]) -> int:
    # `gapscope [OPTIONS] TRACE` is `gapscope open [OPTIONS] TRACE`
    if _first_positional(argv) not in (None, *SUBCOMMANDS):
        argv = ["open", *argv]
    if argv and argv[0] == "capture":
        from ..capture.cli import main as capture_main

        return capture_main(argv[1:])
    if argv[:1] == ["report"] and "--schema" in argv:
        from .report import schema_text

        sys.stdout.write(schema_text())
        return 0
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "info":
        from .trace.info import run_info

        return run_info(args)
    if args.command == "report":
        from .report.cli import run_report

        return run_report(args)
    if args.command == "diff":
        from .app.diffview import run_diff

        return run_diff(args)
    if args.command == "open":
        from .app import run_app

        return run_app(args)
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
