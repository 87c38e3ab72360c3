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
    if len(models) > 1 and same_job(models):
        return analyze_ranks(models)
    return [analyze(m) for m in models]


def run_report(args) -> int:
    top = getattr(args, "top", 10)
    if top is None or top < 1:
        raise GapscopeError("--top must be a positive number")
    analyses = analyses_for(args.traces, args)
    from . import render_markdown, to_json_text

    text = to_json_text(analyses, top=max(top, 50) if top == 10 else top) if args.json else render_markdown(analyses, top)
    out = getattr(args, "output", None)
    if out:
        from ..fsutil import atomic_write_text

        atomic_write_text(out, text, overwrite=bool(getattr(args, "force", False)))
        sys.stderr.write(f"gapscope: wrote {out}\n")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
