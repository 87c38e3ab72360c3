"""The ``gapscope`` command line.

    gapscope TRACE [TRACE...]          open the explorer
    gapscope info TRACE...             what is in a trace
    gapscope report TRACE... [--json]  findings as Markdown or JSON
    gapscope capture demo|run ...      record traces (needs torch)

Each command is one module of ``commands/`` (``add_parser`` and ``run``); this module builds the parser from them,
runs the one chosen and turns every failure into one line. A command imports what it needs inside ``run``, so
``gapscope info`` never pays for textual and nothing but ``capture`` touches torch.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__
from .commands import BY_NAME, COMMANDS
from .commands.common import VALUE_OPTIONS
from .errors import GapscopeError


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


def build_parser() -> argparse.ArgumentParser:
    """The whole parser, one sub-parser per module of ``commands``."""
    parser = _Parser(
        prog="gapscope",
        description="Why was the GPU idle? Explore PyTorch profiler traces in the terminal.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gapscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
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


def _first_positional(argv: list[str]) -> str | None:
    """The first word that is not an option (or an option's value), or None."""
    skip = False
    for tok in argv:
        if skip:
            skip = False
            continue
        if tok == "--":
            return None
        if tok in VALUE_OPTIONS:
            skip = True
            continue
        if tok.startswith("-"):
            continue
        return tok
    return None


def _main(argv: list[str]) -> int:
    # `gapscope [OPTIONS] TRACE` is `gapscope open [OPTIONS] TRACE`
    if _first_positional(argv) not in (None, *BY_NAME):
        argv = ["open", *argv]
    if argv and argv[0] == "capture":  # capture parses its own words (and needs torch only once it records)
        return BY_NAME["capture"].run_argv(argv[1:])
    if argv[:1] == ["report"] and "--schema" in argv:  # the schema needs no trace
        return BY_NAME["report"].run(argparse.Namespace(schema=True))
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return BY_NAME[args.command].run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
