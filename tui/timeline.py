"""The lanes widget (Line API) and the time axis above it.

Each row is drawn by ``render_line`` from the lane's precomputed index: a few vectorised calls over the
W+1 cell edges, cached as a Strip keyed by everything that changes the row.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

#: blank lines carry a style (Textual's NO_COLOR filter cannot take a segment without one)
_NO_STYLE = Style()
#: a kernel's name written inside its bar (zoomed in far enough)
_BAR_NAME_STYLE = Style(color="black", bgcolor="bright_cyan")
_LINK_STYLE = Style(color="bright_magenta", bold=True)
_RANGE_STYLE = Style(color="bright_magenta", bold=True)
#: a row's unstyled cells, a folded row, a group's header row
_PLAIN_CELL = Style()
_FOLDED_STYLE = Style(dim=True, italic=True)
_GROUP_STYLE = Style(bold=True, color="bright_white")
#: the axis under the selected gap, and at the cursor
_GAP_AXIS_STYLE = Style(color="yellow", bold=True)
_CURSOR_AXIS_STYLE = Style(bold=True, color="bright_white")
#: a bar this many cells wide and more shows its name
MIN_NAME_CELLS = 6
_UNFOCUSED_CURSOR = Style(bold=True, underline=True, reverse=True, dim=True)
from textual.widget import Widget

from ..analysis import causes as cause_registry
from ..analysis.names import display_frame
from . import glyphs as G
from .lanes import (
    C_BAR,
    C_LABEL,
    C_MARK,
    cell_edges,
    cpu_categories,
    cpu_cells,
    density_cells,
    segment_text,
    time_to_col,
)
from .rows import Row
from .cut import cut, cut_pad, mark
from .kernelname import kernel_label
from .safe import shown
from .steady import SteadyBars
from .scene import Scene
from .timefmt import fmt_dur, fmt_tick, nice_step


#: drawn rows kept (panning back and forth redraws nothing; each strip is ~50 objects the garbage collector
#: walks in a full collection, so not more than a few windows' worth)
ROW_CACHE = 256


def label_width(total: int) -> int:
    return max(4, min(20, total // 5))


class _Base:
    scene: Scene | None
    glyphs: G.Glyphs

    def _text(self, s: str) -> str:
        return shown(s, self.glyphs.ascii)


class LanesView(SteadyBars, ScrollView, _Base, can_focus=True):
    """One row per lane; vertical scrolling only (time is panned by the view, not scrolled)."""

    BINDINGS = [
        Binding("up,k", "screen.lane(-1)", "lane up", show=False),
        Binding("down,j", "screen.lane(1)", "lane down", show=False),
        Binding("pageup", "screen.lane(-10)", "page up", show=False),
        Binding("pagedown", "screen.lane(10)", "page down", show=False),
    ]
    DEFAULT_CSS = """
    LanesView { height: auto; scrollbar-size-vertical: 1; scrollbar-size-horizontal: 0; }
    """

    def __init__(self, glyphs: G.Glyphs, **kw):
        super().__init__(**kw)
        self.scene: Scene | None = None
        self.glyphs = glyphs
        self._cache: OrderedDict = OrderedDict()
        self.axis: Axis | None = None  # set by the axis drawn above these lanes
        self.renders = 0  # rows drawn without the cache (tests and benchmarks read it)
        self._edges_at: tuple | None = None  # the window the cell edges below are of (``_edges``)
        self._edges_val: np.ndarray | None = None
        self._frame: tuple | None = None  # (width, focus, scroll offset) while a frame is drawn (``render_lines``)

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        # the axis is drawn to the lanes' width less their scroll bar: when the bar comes or goes (rows added by
        # the analysis), a layout pass changes that width, and nothing else would redraw the axis
        if getattr(self, "axis", None) is not None:
            self.axis.refresh()

    # ------------------------------------------------------------- plumbing
    def set_scene(self, scene: Scene | None) -> None:
        self.scene = scene
        self.sync_rows()

    def sync_rows(self) -> None:
        n = len(self.scene.display.rows()) if self.scene is not None else 0
        self.virtual_size = Size(max(self.size.width, 1), n)
        self.refresh(layout=True)

    def lanes_moved(self) -> None:
        """The lanes themselves changed under the same keys (the diff view shifted B in time): every drawn row
        is forgotten, and the rows counted again."""
        self._cache.clear()
        self.sync_rows()

    def cells_width(self) -> int:
        w = self.size.width - (self.styles.scrollbar_size_vertical if self.show_vertical_scrollbar else 0)
        return max(w - label_width(w) - 1, 1)

    def ensure_cursor_visible(self) -> None:
        if self.scene is None:
            return
        y = self.scene.display.cursor
        top = int(self.scroll_offset.y)
        h = max(self.size.height, 1)
        if y < top:
            self.scroll_to(y=y, animate=False)
        elif y >= top + h:
            self.scroll_to(y=y - h + 1, animate=False)

    def cursor_row_moved(self, old: int, new: int) -> bool:
        """Only the lane cursor moved, from row ``old`` to ``new``: the two rows whose label changed are redrawn
        (small updates over slow links), everything when the view had to scroll to keep the cursor in it (then
        True)."""
        top = self.scroll_offset.y
        self.ensure_cursor_visible()
        if self.scroll_offset.y == top:
            self.refresh_line(old)
            self.refresh_line(new)
            return False
        self.refresh()
        return True

    # ----------------------------------------------------------------- mouse
    def on_click(self, event) -> None:
        """A click puts the lane cursor on the row and the time cursor on the cell under the pointer."""
        sc = self.scene
        if sc is None:
            return
        y = int(event.y) + int(self.scroll_offset.y)
        if 0 <= y < len(sc.display.rows()):
            sc.display.cursor = y
        width = self.size.width - (self.styles.scrollbar_size_vertical if self.show_vertical_scrollbar else 0)
        lw = label_width(width)
        col = int(event.x) - lw - 1
        cw = max(width - lw - 1, 1)
        if 0 <= col < cw:
            from .lanes import col_to_time

            sc.view.cursor = col_to_time(col, sc.view.t0, sc.view.t1, cw)
        self.post_message(self.Clicked())

    def on_mouse_scroll_down(self, event) -> None:
        if event.ctrl or event.shift:
            event.stop()
            self.post_message(self.Zoom(0.5))

    def on_mouse_scroll_up(self, event) -> None:
        if event.ctrl or event.shift:
            event.stop()
            self.post_message(self.Zoom(2.0))

    class Clicked(Message):
        """A click moved the lane and time cursors (the scene is changed already): the screen redraws."""

    class Zoom(Message):
        """Ctrl or Shift and the wheel: zoom by ``factor`` about the cursor (the screen's zoom)."""

        def __init__(self, factor: float) -> None:
            super().__init__()
            self.factor = factor

    # ---------------------------------------------------------------- render
    def render_lines(self, crop):
        # what every row of a frame reads the same, read once a frame, not once a row: the focus (a walk up the
        # DOM to the screen), the width less the scroll bar (the styles), the scroll offset
        self._frame = (self.size.width - (self.styles.scrollbar_size_vertical if self.show_vertical_scrollbar
                                          else 0), self.has_focus, int(self.scroll_offset.y))
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        sc = self.scene
        frame = self._frame
        if frame is None:  # (called on its own)
            frame = (self.size.width - (self.styles.scrollbar_size_vertical if self.show_vertical_scrollbar
                                        else 0), self.has_focus, int(self.scroll_offset.y))
        width, focus, top = frame
        if sc is None or width <= 0:
            return Strip.blank(max(width, 0), _NO_STYLE)
        y += top
        rows = sc.display.rows()
        if y >= len(rows):
            return Strip.blank(width, _NO_STYLE)
        row = rows[y]
        v = sc.view
        lw = label_width(width)
        cw = max(width - lw - 1, 1)
        ccol = time_to_col(v.cursor, v.t0, v.t1, cw) if v.t0 <= v.cursor < v.t1 else -1
        sel = sc.gaps.selected_gap
        link = sc.launch.link[3] if sc.launch.link is not None and sc.launch.link[2] == y else None
        key = (id(sc), row.key, v.t0, v.t1, width, ccol, y == sc.display.cursor, sel,
               self.glyphs.ascii, sc.any_analysis, focus, link)
        strip = self._cache.get(key)
        if strip is not None:
            self._cache.move_to_end(key)
            return strip
        strip = self._draw(row, y == sc.display.cursor, lw, cw, ccol, sel, link)
        self.renders += 1
        self._cache[key] = strip
        if len(self._cache) > ROW_CACHE:
            self._cache.popitem(last=False)
        return strip

    def _edges(self, t0: int, t1: int, cw: int) -> np.ndarray:
        """``cell_edges(t0, t1, cw)``, made once for all the rows of a frame (read-only: the rows share it)."""
        key = (t0, t1, cw)
        if self._edges_at != key:
            e = cell_edges(t0, t1, cw)
            e.flags.writeable = False
            self._edges_at, self._edges_val = key, e
        return self._edges_val

    def _bar_names(self, ln, m, t0: int, t1: int, cw: int, chars_a: np.ndarray, codes: np.ndarray,
                   code: int, graph_map=None) -> None:
        """Write each kernel's name inside its bar where the bar is MIN_NAME_CELLS cells wide or more (zoomed
        in): ``chars_a`` and ``codes`` are changed in place. Skipped when the view holds more kernels than
        cells (no bar is that wide then). A CUDA graph replay's kernel reads its op from the eager reference run
        (``graph_map``, analysis/graphs.py)."""
        st, en, idx = ln.iv.starts, ln.iv.ends, ln.iv.idx
        i1 = int(np.searchsorted(st, t1, side="left"))
        i0 = max(int(np.searchsorted(st, t0, side="left")) - 1, 0)
        if i1 <= i0 or i1 - i0 > cw:
            return
        span = max(t1 - t0, 1)
        a = (np.maximum(st[i0:i1], t0) - t0) * cw // span
        b = (np.minimum(en[i0:i1], t1) - t0) * cw // span
        wide = np.flatnonzero(b - a >= MIN_NAME_CELLS)
        evs = np.asarray(idx[i0:i1], np.int64)[wide]
        ops = graph_map.op_of(m, evs) if graph_map is not None else np.asarray(m.op)[evs]
        for k, ev, op in zip(wide.tolist(), evs.tolist(), np.asarray(ops).tolist()):
            name = _bar_label(m.name(ev), m.name(op) if op >= 0 else None, self.glyphs.ascii)
            c0, c1 = int(a[k]) + 1, min(int(b[k]), cw)  # a cell of bar before the name
            text = cut(name, max(c1 - c0, 0), self.glyphs.ascii)
            if len(text) < 3:
                continue
            chars_a[c0:c0 + len(text)] = list(text)
            codes[c0:c0 + len(text)] = code

    def _draw(self, row: Row, is_cursor: bool, lw: int, cw: int, ccol: int, sel: int, link: int | None = None) \
            -> Strip:
        """One row: the label, then per cell a glyph and a style. Styles are kept as small integer codes into
        ``table`` (numpy per cell, no Python loop over the cells); runs of one style become one Segment."""
        sc = self.scene
        g = self.glyphs
        ln = row.lane
        if ln is None and row.folded:  # lanes with nothing in view, one line
            text = cut_pad(self._text(f"  {g.sep} {row.title}"), lw + 1 + cw, g.ascii)
            st = G.CURSOR_STYLE if is_cursor and self.has_focus else _FOLDED_STYLE
            return Strip([Segment(text, st)])
        if ln is None:  # group header
            title = self._text(f"{g.rule} {row.title} ")
            if len(title) > lw + 1 + cw:  # a title wider than the row: cut with the mark, no rule after it
                title = cut(title.rstrip(), lw + 1 + cw, g.ascii)
            text = (title + g.rule * (lw + 1 + cw))[: lw + 1 + cw]
            return Strip([Segment(text, _GROUP_STYLE)])
        label = ln.label
        if ln.kind == "cpu":
            label = (g.collapse if ln.expanded else g.expand) + label if ln.has_depth else " " + label
        label = cut_pad(self._text(label), lw, g.ascii)
        # the lane cursor stays plain to see when the focus is elsewhere (gap list, stack panel)
        lstyle = G.CURSOR_STYLE if is_cursor and self.has_focus else (
            _UNFOCUSED_CURSOR if is_cursor else G.LABEL_STYLE)
        v = sc.view
        edges = self._edges(v.t0, v.t1, cw)
        plain = _PLAIN_CELL
        if ln.kind == "cpu":
            cats = cpu_cells(ln, edges)
            chars = "".join(_glyph_array(g.cpu)[cats].tolist())
            codes = cats.astype(np.intp)
            table = _CPU_TABLE
        elif ln.kind in ("stream", "copy"):
            lvl = density_cells(ln, edges)
            chars_a = _glyph_array(tuple(g.density))[lvl]
            codes = (lvl > 0).astype(np.intp)  # 0 plain, 1 busy, 2 idle in a gap, 3 the selected gap
            table = [plain, G.KERNEL_STYLE if ln.kind == "stream" else G.COPY_STYLE, G.GAP_STYLE,
                     G.SELECTED_GAP_STYLE, _BAR_NAME_STYLE]
            cover = sc.gaps.cover_for(ln) if ln.kind == "stream" else None
            if cover is not None:
                gc = cover.covered(edges) * 2 >= np.maximum(np.diff(edges), 1)
                idle = gc & (lvl == 0)
                chars_a[idle] = g.gap
                codes[idle] = 2
                if sel >= 0 and int(sc.gaps.part[sel]) == ln.part and int(sc.gaps.device[sel]) == ln.device:
                    # the selected gap stands out on its device's streams too
                    a, b, _ = sc.gaps.span(sel)
                    ca = max(time_to_col(a, v.t0, v.t1, cw), 0)
                    cb = min(time_to_col(max(b - 1, a), v.t0, v.t1, cw), cw - 1)
                    if cb >= ca:
                        part = codes[ca:cb + 1]
                        part[lvl[ca:cb + 1] == 0] = 3
            if ln.iv is not None and len(ln.iv):
                self._bar_names(ln, sc.parts[ln.part].model, v.t0, v.t1, cw, chars_a, codes, 4,
                                sc.parts[ln.part].state.graph_map)
            chars = "".join(chars_a.tolist())
        elif ln.kind == "gaps":
            refs = ln.segs.cells(edges)
            causes = registry_cause_names()

            def lab(r: int) -> str:
                gid = int(ln.segs.ref[r])
                cn = causes[int(sc.gaps.cause[gid])] if causes else "?"
                return f"{G.CAUSE_LETTERS.get(cn, '?')} {cn} {fmt_dur(int(sc.gaps.dur[gid]), ascii=g.ascii)}"

            chars, _ = segment_text(refs, lab, bar=g.bar, open_=g.open, more=mark(g.ascii))
            # codes: 0 plain, 1 + cause, 1 + len(causes) + cause for the selected gap
            names = causes or ("",)
            nc = len(names)
            if len(ln.segs.ref) and (refs >= 0).any():
                gids = np.asarray(ln.segs.ref)[np.maximum(refs, 0)]
                cause = np.minimum(np.maximum(sc.gaps.cause[gids], 0), nc - 1) if causes else \
                    np.zeros(refs.size, np.int64)
                codes = np.where(refs < 0, 0, 1 + cause + np.where(gids == sel, nc, 0)).astype(np.intp)
            else:
                codes = np.zeros(refs.size, np.intp)
            table = gap_styles(names)
        else:  # ranges, depth rows: named pieces
            refs = ln.segs.cells(edges)
            m = sc.parts[ln.part].model
            ascii = g.ascii
            chars, scodes = segment_text(refs, lambda r: _frame_label(m.name(int(ln.segs.ref[r])), ascii),
                                         bar=g.bar, open_=g.open, more=mark(ascii))
            if ln.kind == "depth":
                cats = cpu_categories(m, ln.segs.ref[np.maximum(refs, 0)])
                codes = np.where(refs >= 0, cats.astype(np.intp) + 1, 0)
                table = [plain] + _CPU_TABLE
            else:
                # np.isin(scodes, (C_LABEL, C_BAR, C_MARK)): the three codes are consecutive
                codes = ((scodes >= C_LABEL) & (scodes <= C_MARK)).astype(np.intp)
                table = [plain, G.RANGE_STYLE]
        lcol = time_to_col(link, v.t0, v.t1, cw) if link is not None and v.t0 <= link < v.t1 else -1
        if 0 <= lcol < cw and lcol != ccol:
            # the other end of the launch under the cursor (a kernel's launch call, or a launch's kernel)
            chars = chars[:lcol] + ("*" if g.ascii else "◆") + chars[lcol + 1:]
            table = list(table) + [_LINK_STYLE]
            codes = codes.copy()
            codes[lcol] = len(table) - 1
        if 0 <= ccol < cw:
            chars = chars[:ccol] + (chars[ccol] if chars[ccol] != " " else g.sep) + chars[ccol + 1:]
            table = list(table) + [table[int(codes[ccol])] + G.CURSOR_STYLE]
            codes = codes.copy()
            codes[ccol] = len(table) - 1
        segs = [Segment(label, lstyle), Segment(" ", plain)] + style_runs(chars, codes, table)
        return Strip(segs, lw + 1 + cw)


@lru_cache(maxsize=4096)
def _frame_label(name: str, ascii: bool) -> str:
    """A range's or frame's name as a named piece shows it (kept by name: a redraw asks for the same few)."""
    return shown(display_frame(name), ascii)


def bar_name(name: str, op: str | None = None) -> str:
    """A kernel's or copy's name for the inside of its bar: the op that launched it and the kernel's family
    (``mm · nvjet_sm90 128x128``, tui/kernelname.py), no return type, template or namespace."""
    return kernel_label(name, op)


@lru_cache(maxsize=4096)
def _bar_label(name: str, op: str | None, ascii: bool) -> str:
    """``bar_name`` made safe to draw, kept by name and op: a redraw asks for the same few."""
    return shown(bar_name(name, op), ascii)


def style_runs(chars: str, codes: np.ndarray, table: list[Style]) -> list[Segment]:
    """Segments of ``chars`` where cell k has style ``table[codes[k]]``; neighbouring cells whose styles are
    the same object share a segment."""
    n = len(chars)
    if not n:
        return []
    # codes of one style object are made equal first (a table may hold one Style twice)
    first: dict = {}
    canon = np.array([first.setdefault(id(st), i) for i, st in enumerate(table)], dtype=np.intp)
    c = canon[np.asarray(codes, dtype=np.intp)]
    cut = np.flatnonzero(c[1:] != c[:-1]) + 1
    starts = [0] + cut.tolist()
    ends = starts[1:] + [n]
    # the style of each run read in one go (not a numpy scalar a run), each Segment made as the tuple it is
    # (not through the named tuple's __new__): ~100 runs a CPU row, every row of every redrawn frame
    styles = [table[i] for i in c[np.r_[0, cut]].tolist()]
    new, seg = tuple.__new__, Segment
    return [new(seg, (chars[a:b], st, None)) for a, b, st in zip(starts, ends, styles)]


_CPU_TABLE = [G.CPU_STYLES[c] for c in range(max(G.CPU_STYLES) + 1)]

_GLYPHS: dict = {}


def _glyph_array(glyphs) -> np.ndarray:
    """A glyph table (a string, tuple or {code: glyph}) as an object array indexable by code arrays."""
    key = tuple(sorted(glyphs.items())) if isinstance(glyphs, dict) else tuple(glyphs)
    arr = _GLYPHS.get(key)
    if arr is None:
        if isinstance(glyphs, dict):
            arr = np.empty(max(glyphs) + 1, dtype=object)
            arr[:] = " "
            for k, ch in glyphs.items():
                arr[k] = ch
        else:
            arr = np.array(list(glyphs), dtype=object)
        _GLYPHS[key] = arr
    return arr  # indexed with an array of codes, which copies


#: the gap rows' style tables, one per process for each (cause names, NO_COLOR): every lanes widget and app shares
#: them (a colour's style is made once), and one made with colour is not taken under NO_COLOR (tui/glyphs.py
#: ``CAUSE_COLOURS``: the terminal's own colour there)
_GAP_TABLES: dict = {}


def gap_styles(names: tuple) -> list[Style]:
    """Style 0 plain, 1 + cause its colour, 1 + len(names) + cause the selected gap's."""
    key = (names, G.no_color())
    t = _GAP_TABLES.get(key)
    if t is None:
        base = [Style(color=G.CAUSE_COLOURS.get(cn, "white")) for cn in names]
        t = _GAP_TABLES[key] = [Style()] + base + [G.SELECTED_STYLE + st for st in base]
    return t


#: the registry's cause names in rule order, per registry version (a cause registered later is drawn too)
_CAUSE_NAMES: dict = {}


def registry_cause_names() -> tuple:
    v = cause_registry.version()
    got = _CAUSE_NAMES.get(v)
    if got is None:
        got = _CAUSE_NAMES[v] = tuple(c.name for c in cause_registry.all_causes())
    return got


class Axis(Widget, _Base):
    """Two lines: tick labels, then ticks with the cursor and the selected gap marked."""

    DEFAULT_CSS = "Axis { height: 2; }"

    def __init__(self, glyphs: G.Glyphs, lanes: LanesView, **kw):
        super().__init__(**kw)
        self.glyphs = glyphs
        self.lanes = lanes
        lanes.axis = self
        self.scene = None
        self._cache: OrderedDict = OrderedDict()  # the two lines by everything that changes them (pan repeats)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        sc = self.scene
        if sc is None or width <= 0:
            return Strip.blank(max(width, 0), _NO_STYLE)
        g = self.glyphs
        lv = self.lanes
        full = lv.size.width - (lv.styles.scrollbar_size_vertical if lv.show_vertical_scrollbar else 0)
        if full <= 0:
            full = width
        lw = label_width(full)
        cw = max(full - lw - 1, 1)
        v = sc.view
        gid = sc.gaps.selected_gap
        key = (y, id(sc), sc.origin, v.t0, v.t1, v.cursor, width, full, sc.gaps.span(gid) if gid >= 0 else None,
               g.ascii, sc.mark, sc.span_sel)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._cache[key] = self._draw(y, sc, width, lw, cw)
            if len(self._cache) > 64:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return strip

    def _draw(self, y: int, sc: Scene, width: int, lw: int, cw: int) -> Strip:
        g = self.glyphs
        v = sc.view
        step = nice_step(v.span, cw)
        o = sc.origin
        first = ((v.t0 - o) // step + 1) * step + o
        ticks = list(range(first, v.t1, step))[:400]
        dim = Style(color="bright_black")
        if y == 0:
            ref = max((abs(t - o) for t in ticks), default=step)
            head = cut_pad(self._text(fmt_dur(v.span, ascii=g.ascii) + " span"), lw, g.ascii) + " "
            buf = [" "] * cw
            for t in ticks:
                c = time_to_col(t, v.t0, v.t1, cw)
                lab = fmt_tick(t - o, step, ascii=g.ascii, ref=ref)
                if c + len(lab) > cw or any(ch != " " for ch in buf[max(c - 1, 0):c + len(lab) + 1]):
                    continue
                buf[c:c + len(lab)] = list(lab)
            return Strip([Segment(head, dim), Segment("".join(buf), dim)]).adjust_cell_length(width, _NO_STYLE)
        buf = [g.rule] * cw
        # per cell a run id: cells of one id side by side are one segment (the style of each id in ``style``):
        # the selected gap's cells one segment (they were one each: ~60 segments after `n`, each styled and
        # filtered again by Textual on every frame), the cursor's cell one of its own
        run = np.zeros(cw, np.int64)  # 0: the rule (dim)
        style = {0: dim, 1: _RANGE_STYLE, 2: _GAP_AXIS_STYLE}
        for t in ticks:
            c = time_to_col(t, v.t0, v.t1, cw)
            if 0 <= c < cw:
                buf[c] = g.tick
        gid = sc.gaps.selected_gap
        if gid >= 0:
            a, b, _ = sc.gaps.span(gid)
            ca = max(time_to_col(a, v.t0, v.t1, cw), 0)
            cb = min(time_to_col(max(b - 1, a), v.t0, v.t1, cw), cw - 1)
            if cb >= ca:
                buf[ca:cb + 1] = ["=" if g.ascii else "━"] * (cb + 1 - ca)
                run[ca:cb + 1] = 2
        if sc.span_sel is not None:  # the selected range (m m, or M)
            a, b = sc.span_sel
            ca = max(time_to_col(a, v.t0, v.t1, cw), 0)
            cb = min(time_to_col(max(b - 1, a), v.t0, v.t1, cw), cw - 1)
            if cb >= ca:
                buf[ca:cb + 1] = ["#" if g.ascii else "▬"] * (cb + 1 - ca)
                run[ca:cb + 1] = 1
        if sc.mark is not None and v.t0 <= sc.mark < v.t1:
            c = time_to_col(sc.mark, v.t0, v.t1, cw)
            buf[c] = "|" if g.ascii else "┃"
            run[c] = 1
        if v.t0 <= v.cursor < v.t1:
            c = time_to_col(v.cursor, v.t0, v.t1, cw)
            buf[c] = g.cursor
            run[c] = -1
            style[-1] = _CURSOR_AXIS_STYLE
        elif v.cursor < v.t0:
            buf[0] = g.left
        else:
            buf[-1] = g.right
        cur = cut_pad(self._text("@" + fmt_dur(v.cursor - o, ascii=g.ascii)), lw, g.ascii) + " "
        # to the axis' full width: a lanes scroll bar leaves its column to the axis, which must draw (blank) it
        chars = "".join(buf)
        starts = [0] + (np.flatnonzero(run[1:] != run[:-1]) + 1).tolist()
        ids = run[starts].tolist()
        segs = [Segment(cur, dim)] + [Segment(chars[a:b], style[i]) for a, b, i in zip(starts, starts[1:] + [cw], ids)]
        return Strip(segs).adjust_cell_length(width, _NO_STYLE)
