"""``gapscope report TRACE... [--json] [--top N] [-o FILE] [--force]``."""

from __future__ import annotations

import inspect
import sys

from ..errors import GapscopeError


def _load(path, args):
    from .. import trace

    kw = {}
    try:
        params = inspect.signature(trace.load).parameters
    except (TypeError, ValueError):
        params = {}
    if "no_cache" in params:
        kw["no_cache"] = bool(getattr(args, "no_cache", False))
    if "max_size" in params and getattr(args, "max_size", None) is not None:
        kw["max_size"] = args.max_size
    return trace.load(path, **kw)


def analyses_for(paths, args) -> list:
    from ..analysis import analyze
    from ..analysis.ranks import analyze_ranks, same_job

    try:
        from ..trace.multi import load_many
    except ImportError:
        load_many = None
    if load_many is not None:
        models = load_many(paths, no_cache=bool(getattr(args, "no_cache", False)),
                           max_size=getattr(args, "max_size", None))
    else:
        models = [_load(p, args) for p in paths]
    # window: "steps" (the measured gapscope.step#k ranges, the default) or "all" (a --whole-trace flag)
    window = "all" if getattr(args, "whole_trace", False) else "steps"
    if len(models) > 1 and same_job(models):
        return analyze_ranks(models, window=window)
    return [analyze(m, window=window) for m in models]


#: what --top means when it is not given: 10 for Markdown (a person reads it), 50 gaps for --json
DEFAULT_TOP_MARKDOWN = 10
DEFAULT_TOP_JSON = 50


def _parser_top_default():
    """The default ``gapscope report --top`` has in tui/cli.py (None once it leaves the choice to us)."""
    try:
        from ..cli import build_parser

        sub = next(a for a in build_parser()._actions if a.dest == "command")
        rep = sub.choices["report"]
        return next(a.default for a in rep._actions if a.dest == "top")
    except Exception:
        return None


def report_top(args) -> int:
    """The number of gaps/kernels/findings to list. ``args.top`` None = not given on the command line
    (Markdown 10, JSON 50); an explicit --top N is used as given, for JSON too."""
    top = getattr(args, "top", None)
    if top is not None and top == _parser_top_default():
        top = None  # tui/cli.py still fills in its own default: --top was (most likely) not given
    if top is None:
        return DEFAULT_TOP_JSON if getattr(args, "json", False) else DEFAULT_TOP_MARKDOWN
    if top < 1:
        raise GapscopeError("--top must be a positive number")
    return top


def run_report(args) -> int:
    top = report_top(args)
    analyses = analyses_for(args.traces, args)
    from . import render_markdown, to_json_text

    text = to_json_text(analyses, top=top) if args.json else render_markdown(analyses, top)
    out = getattr(args, "output", None)
    if out:
        from ..fsutil import atomic_write_text

        atomic_write_text(out, text, overwrite=bool(getattr(args, "force", False)))
        sys.stderr.write(f"gapscope: wrote {out}\n")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
