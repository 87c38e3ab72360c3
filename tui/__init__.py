"""The explorer (Textual). ``run_app(args)`` is what ``gapscope TRACE...`` calls.

textual is imported inside ``run_app`` only, so ``gapscope info`` and ``gapscope report`` never pay for it.

Where things are: ``app.py`` the App (scenes, the load worker's messages, the heap freeze, and what the screen
asks of it: ``tab``, ``next_tab``, ``diff_pair``, ``export_findings``); ``loading.py`` the load worker and the one
failure formatter (``gapscope diff`` reads through it too); ``main.py`` the explorer's screen: its layout, its
state (``shown.py``: one frozen value whose changes redraw the screen) and the keys of no one pane; the panes'
keys in ``lanekeys.py`` (lanes), ``gapkeys.py`` (gap list and stack) and ``search.py`` (the / box), each pane's
``KEYS`` table next to its actions, all bound by the screen (``main.PANES``; ``keys.py``: what a key entry is);
``gaplist.py``, ``tables.py``, ``panels.py``, ``timeline.py`` the widgets, which talk to the screen by messages;
``navigate.py`` what is under the cursor and where it goes; ``scene.py`` what one tab shows, made of ``view.py``
(the time window), ``rows.py`` (the display rows and the lane cursor), ``scenegaps.py`` (its listed gaps, merged
over its parts, the gap list's filter and selection) and ``matches.py`` (the search);
``gapscope.tcss`` the styles (the before/after screen's too); ``screens.py`` the help and detail screens;
``diffscene.py`` the before/after scene, ``diffview.py`` its screen (its state in ``shown.py`` too),
``diffapp.py`` its App (``gapscope diff A B``).
"""

from __future__ import annotations

import os
import sys


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
    load_opts = {}
    if getattr(args, "no_cache", False):
        load_opts["no_cache"] = True
    if getattr(args, "max_size", None) is not None:
        from ..trace.read import parse_size

        load_opts["max_size"] = parse_size(args.max_size)  # a bad value is reported before the app starts
    if not sys.stdout.isatty() and not os.environ.get("GAPSCOPE_FORCE_TUI"):
        raise GapscopeError("the explorer needs a terminal; for text output use: gapscope report TRACE")
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
