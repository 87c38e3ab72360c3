"""``gapscope diff A B``: an App that loads and analyses both traces in a worker, then shows the before/after
screen (tui/app/diffview.py); ``run_diff`` checks the two paths first."""

from __future__ import annotations

import os

from textual import work
from textual.app import App, ComposeResult
from textual.widgets import Static

from . import glyphs as G
from .diffview import DiffScene, DiffScreen
from .safe import ascii_safe, safe


class DiffApp(App):
    """``gapscope diff A B``: loads and analyses both traces in a worker, then shows the before/after screen."""

    TITLE = "gapscope diff"
    ENABLE_COMMAND_PALETTE = False

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
        s = safe(s)
        return ascii_safe(s) if self.glyphs.ascii else s

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True)
    def load(self) -> None:
        from ..analysis import analyze
        from ..errors import GapscopeError
        from ..trace import load

        try:
            models = [load(p, **self.load_opts) for p in self.paths]
            analyses = [analyze(m) for m in models]
            scene = DiffScene(self.paths[0], models[0], analyses[0], self.paths[1], models[1], analyses[1])
        except GapscopeError as exc:
            self.call_from_thread(self._fail, str(exc))
            return
        except MemoryError:
            self.call_from_thread(self._fail, "out of memory (try --max-size or smaller traces)")
            return
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            if os.environ.get("GAPSCOPE_DEBUG"):
                raise
            self.call_from_thread(self._fail, f"internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})")
            return
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
