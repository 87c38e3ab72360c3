"""The progressive first screen of a big trace: the preview's lanes (tui/trace/progressive.py) while the trace is
read, a bar under the header with the bytes and events read so far, then the full scene in the preview's place
(``GapscopeApp.show_preview`` / ``replace_preview``; the bar's helpers are here).

The preview is a Scene over a partial model (``TraceModel.partial``): lanes and keys only. It has no analysis, the
export key is off on it, and ``analyze`` refuses its model, so nothing counted (gaps, findings, report, export)
ever comes from it. The full model comes from the one load path, as without a preview.
"""

from __future__ import annotations

import os

from rich.text import Text
from textual.widgets import Static

from ..trace.progressive import LoadProgress


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 10e6 else f"{n / 1e6:.1f} MB"


def _count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n:,}"


def bar_text(p: LoadProgress | None, name: str, width: int, ascii: bool = False, phase: str | None = None) -> str:
    """The bar's line: what is being done, a bar of ``done``/``total``, bytes and events. A pure function of its
    arguments (tests)."""
    if phase == "analysing":
        return f"finding gaps in {name} ... (the gap list and findings come when they are in)"
    if p is None:
        return f"loading {name} ... (Esc cancels)"
    if p.phase == "building":
        return f"building the model of {name}: sorting and linking {_count(p.events)} events ..."
    done, total, events = p.done, p.total, p.events
    frac = done / total if total > 0 else 0.0
    tail = f" {_mb(done)} of {_mb(total)}, {_count(events)} events  (Esc cancels)"
    head = f"loading {name} "
    cells = max(10, min(40, width - len(head) - len(tail) - 2))
    full = int(round(frac * cells))
    on, off = ("#", "-") if ascii else ("━", "─")
    return head + on * full + off * (cells - full) + tail


class LoadBar(Static):
    """One line under the header while a trace with a preview is read and analysed."""

    DEFAULT_CSS = """
    LoadBar { height: 1; background: $panel; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, name: str, ascii: bool = False) -> None:
        super().__init__(id="loadbar", markup=False)
        self.trace_name = name
        self.ascii = ascii
        self.last: LoadProgress | None = None
        self.phase: str | None = "reading"

    def on_mount(self) -> None:
        self.show()

    def set_progress(self, p: LoadProgress) -> None:
        self.last = p
        self.show()

    def analysing(self) -> None:
        self.phase = "analysing"
        self.show()

    def show(self) -> None:
        width = self.size.width or (self.app.size.width if self.app is not None else 80)
        phase = self.phase if self.phase == "analysing" else None
        t = bar_text(self.last, self.trace_name, width, self.ascii, phase)
        self.update(Text(t, no_wrap=True), layout=False)


# ====================================================================== the app's side (hooks in app.py)
def bar(app) -> LoadBar | None:
    main = getattr(app, "main", None)
    if main is None or not main.is_mounted:
        return None
    q = main.query(LoadBar)
    return q.first() if q else None


def progress(app, p: LoadProgress) -> None:
    b = bar(app)
    if b is not None:
        b.set_progress(p)


def is_preview(app) -> bool:
    return bool(app.scenes) and any(pt.model.partial for pt in app.scenes[0].parts)


def mount_bar(app, scene) -> None:
    """The bar under the header, for the trace whose preview is shown."""
    if bar(app) is None:
        app.main.mount(LoadBar(os.path.basename(scene.path), app.glyphs.ascii), after="#header")


def moved(old) -> bool:
    """Whether the person moved on the preview's scene (pan, zoom, cursor, lane) since it was shown."""
    from .view import View

    v, fresh = old.view, View(old.view.lo, old.view.hi)
    return (v.t0, v.t1, v.cursor) != (fresh.t0, fresh.t1, fresh.cursor) or old.display.cursor != 0


def full_scene_in(app) -> None:
    """The full scene took the preview's place: the bar says the gaps are being found (or goes, without an
    analysis)."""
    b = bar(app)
    if b is not None:
        if app.run_analysis:
            b.analysing()
        else:
            b.remove()


def analysis_in(app) -> None:
    """The analysis (or its failure) is in: the bar goes."""
    b = bar(app)
    if b is not None:
        b.remove()
