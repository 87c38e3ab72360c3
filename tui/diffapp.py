"""``gapscope diff A B``: an App that loads and analyses both traces in a worker, then shows the before/after
screen (tui/diffview.py); ``run_diff`` checks the two paths first."""

from __future__ import annotations

import os

from textual import work
from textual.app import App, ComposeResult
from textual.widgets import Static

from . import glyphs as G
from .diffscene import DiffScene
from .diffview import DiffScreen
from .loading import debugging, failure, read_trace
from .safe import shown


class DiffApp(App):
    """``gapscope diff A B``: loads and analyses both traces in a worker, then shows the before/after screen."""

    TITLE = "gapscope diff"
    ENABLE_COMMAND_PALETTE = False
    CSS_PATH = "gapscope.tcss"  # the explorer's styles (the before/after screen's are there too)

    def __init__(self, path_a: str, path_b: str, *, ascii: bool = False, load_opts: dict | None = None):
        super().__init__()
        self.paths = [path_a, path_b]
        self.glyphs = G.ASCII if ascii else G.UNICODE
        self.load_opts = dict(load_opts or {})
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._t(f"loading {os.path.basename(self.paths[0])} and {os.path.basename(self.paths[1])} "
                             "..."), id="loading")

    def _t(self, s: str) -> str:
        return shown(s, self.glyphs.ascii)

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True)
    def load(self) -> None:
        """Both traces read as the explorer reads them (tui/loading.py: ``read_trace`` with the app's options)
        and analysed; a failure is put into words by the explorer's one formatter (``failure``)."""
        from ..analysis import analyze
        from ..trace import load

        models = []
        for p in self.paths:
            try:
                models.append(read_trace(load, p, self.load_opts))
            except Exception as exc:  # noqa: BLE001 - a reader bug too: one line, never a traceback
                if debugging(exc):
                    raise
                return self.call_from_thread(self._fail, failure("loading", exc, p))
        analyses = []
        for p, m in zip(self.paths, models):
            try:
                analyses.append(analyze(m))
            except Exception as exc:  # noqa: BLE001 - no comparison without both analyses: one line
                if debugging(exc):
                    raise
                return self.call_from_thread(self._fail, failure("analysis", exc, p))
        try:
            scene = DiffScene(self.paths[0], models[0], analyses[0], self.paths[1], models[1], analyses[1])
        except Exception as exc:  # noqa: BLE001
            if debugging(exc):
                raise
            return self.call_from_thread(self._fail, failure("before/after", exc))
        self.call_from_thread(self._show_diff, scene)

    def _show_diff(self, scene: DiffScene) -> None:
        self.push_screen(DiffScreen(scene, self.glyphs, quit_on_leave=True))

    def _fail(self, msg: str) -> None:
        self.error = msg
        self.exit(return_code=2)


def run_diff(args) -> int:
    """``gapscope diff A B``: check the two paths, then run the app."""
    import sys

    from ..errors import GapscopeError
    from .glyphs import locale_is_utf8

    paths = list(args.traces)
    if len(paths) != 2:
        raise GapscopeError(f"diff compares two traces, not {len(paths)}")
    for p in paths:
        if not os.path.exists(p):
            raise GapscopeError(f"{p}: no such file")
        if os.path.isdir(p):
            raise GapscopeError(f"{p}: is a directory, not a trace file")
    opts = {}
    if getattr(args, "no_cache", False):
        opts["no_cache"] = True
    if getattr(args, "max_size", None) is not None:
        from ..trace.read import parse_size

        opts["max_size"] = parse_size(args.max_size)
    if not sys.stdout.isatty() and not os.environ.get("GAPSCOPE_FORCE_TUI"):
        raise GapscopeError("the diff view needs a terminal; for text output use: gapscope report A B")
    app = DiffApp(paths[0], paths[1], ascii=bool(getattr(args, "ascii", False)) or not locale_is_utf8(),
                  load_opts=opts)
    app.run()
    if app.error:
        sys.stderr.write(f"gapscope: error: {app.error}\n")
        return 2
    return 0
