"""The explorer (Textual). ``run_app(args)`` is what ``gapscope TRACE...`` calls.

textual is imported inside ``run_app`` only, so ``gapscope info`` and ``gapscope report`` never pay for it.
"""

from __future__ import annotations

import os
import sys


def _parse_size(v) -> int | None:
    if v is None:
        return None
    if isinstance(v, int):
        return v
    s = str(v).strip().upper()
    mult = 1
    for suf, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if s.endswith(suf + "B"):
            s = s[:-2]
            mult = m
            break
        if s.endswith(suf):
            s = s[:-1]
            mult = m
            break
    try:
        return int(float(s) * mult)
    except ValueError:
        from ..errors import GapscopeError

        raise GapscopeError(f"--max-size: not a size: {v!r} (use e.g. 800M or 8G)") from None


def run_app(args) -> int:
    from ..errors import GapscopeError
    from .glyphs import locale_is_utf8

    paths = list(getattr(args, "traces", []) or [])
    try:  # folders and glob patterns name every trace in them (the ranks of one job)
        from ..trace.multi import expand

        paths = expand(paths)
    except ImportError:  # pragma: no cover - the multi-trace loader is optional
        pass
    for p in paths:
        if not os.path.exists(p):
            raise GapscopeError(f"{p}: no such file")
        if os.path.isdir(p):
            raise GapscopeError(f"{p}: is a directory, not a trace file")
        if not os.access(p, os.R_OK):
            raise GapscopeError(f"{p}: cannot read (permission denied)")
    if not sys.stdout.isatty() and not os.environ.get("GAPSCOPE_FORCE_TUI"):
        raise GapscopeError("the explorer needs a terminal; for text output use: gapscope report TRACE")
    load_opts = {}
    if getattr(args, "no_cache", False):
        load_opts["no_cache"] = True
    ms = _parse_size(getattr(args, "max_size", None))
    if ms is not None:
        load_opts["max_size"] = ms
    ascii_mode = bool(getattr(args, "ascii", False)) or not locale_is_utf8()

    from .app import GapscopeApp

    app = GapscopeApp(paths, ascii=ascii_mode, load_opts=load_opts)
    app.run()
    if app.cancelled:
        # the reader thread cannot be interrupted mid-parse; leave now rather than wait for it
        sys.stderr.write("gapscope: cancelled\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(130)
    if app.error:
        sys.stderr.write(f"gapscope: error: {app.error}\n")
        return 2
    return int(app.return_code or 0)
