"""A list of rows drawn with Textual's Line API: the widget owns its rows (cells as rich Text) and draws each
visible line itself (``render_line``), caching one strip per (row, cursor on it, hover on it, focus, width).
A header line stays on top; a row cursor moves with the keys or the mouse and posts ``Highlighted``.

It replaces a DataTable subclass that cached DataTable's own rendering through its private members: this one
reads nothing of Textual's but the public ScrollView / Line API (``virtual_size``, ``scroll_offset``,
``get_component_rich_style``)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .steady import SteadyBars


def plain_cells_line(cells: list[Text], widths: list[int], pad: int, console, more: str = "…") -> \
        list[Segment] | None:
    """The segments ``rich_cells_line`` makes of a line whose cells are plain text, each with one style (or
    none) and no spans of its own: the same texts and styles, cut at the same places, without building and
    rendering a rich Text per line (a page of new gap list rows took ~10 ms of a key press at 1 GB). None
    where a cell has spans, or an overflow this does not do: the caller renders those with rich. ``more``: the mark
    of a cell cut short (an ellipsis overflow; "..." on an ASCII terminal)."""
    blank = " " * pad
    k = cell_len(more)
    out: list[Segment] = []
    buf: list[str] = []  # unstyled text since the last styled cell (the pads, cells without a style)
    styled = False
    for cell, w in zip(cells, widths):
        if cell.spans:
            return None
        overflow = cell.overflow or "ellipsis"
        if overflow == "ignore":
            return None
        plain = cell.plain
        length = cell_len(plain)
        if length > w:  # Text.truncate
            plain = set_cell_size(plain, w - k) + more if overflow == "ellipsis" and w >= k else set_cell_size(plain, w)
        if cell.justify == "right":
            plain = " " * (w - cell_len(plain)) + plain
        elif length < w:
            plain += " " * (w - length)
        buf.append(blank)
        if cell.style:
            styled = True
            if "".join(buf):
                out.append(Segment("".join(buf), _NULL))
            buf = []
            out.append(Segment(plain, console.get_style(cell.style, default=_NULL)))
        else:
            buf.append(plain)
        buf.append(blank)
    rest = "".join(buf)
    if not styled:  # rich's Text.render of a text without spans: one segment, no style
        return [Segment(rest)]
    if rest:
        out.append(Segment(rest, _NULL))
    return out


_NULL = Style.null()


def rich_cells_line(cells: list[Text], widths: list[int], pad: int, console, more: str = "…") -> list[Segment]:
    """The segments of one line as rich renders it: each cell truncated (or padded) to its width between ``pad``
    blanks, one Text rendered; a cell cut short ends in ``more`` (rich's "…", or "..." on an ASCII terminal).
    ``plain_cells_line`` makes the same segments without it."""
    blank = " " * pad
    line = Text(no_wrap=True, end="")
    for cell, w in zip(cells, widths):
        t = cell.copy()
        t.no_wrap = True
        if more != "…" and (cell.overflow or "ellipsis") == "ellipsis" and t.cell_len > w >= cell_len(more):
            t.truncate(w - cell_len(more), overflow="crop")
            t.append(more)
        if cell.justify == "right":
            t.truncate(w, overflow=cell.overflow or "ellipsis")
            t.pad_left(w - t.cell_len)
        else:
            t.truncate(w, overflow=cell.overflow or "ellipsis", pad=True)
        line.append(blank)
        line.append_text(t)
        line.append(blank)
    return list(line.render(console))


def cells_strip(cells: list[Text], widths: list[int], pad: int, style: Style, width: int, console,
                more: str = "…") -> Strip:
    """One line of cells (``widths`` wide, ``pad`` blanks each side), ``width`` cells in all, in ``style``; a cell cut
    short ends in ``more``."""
    segs = plain_cells_line(cells, widths, pad, console, more)
    if segs is None:  # a cell with spans of its own: rich lays the line out
        segs = rich_cells_line(cells, widths, pad, console, more)
    n = sum(cell_len(sg.text) for sg in segs)
    if n > width:
        return Strip(segs).crop_extend(0, width, None).apply_style(style)
    # what crop_extend and apply_style make of it, as one Strip (not three, each with its caches)
    if n < width:
        segs.append(Segment(" " * (width - n), None))
    if style:
        add = style.__add__
        segs = [Segment(sg.text, add(sg.style)) for sg in segs]
    return Strip(segs, width)


@dataclass
class Column:
    label: Text
    key: str
    width: int | None  # None: the last column takes what is left


def cell_widths(columns: list[Column], total: int, pad: int) -> list[int]:
    """Each column's width in a line ``total`` cells wide: its own, or for the last (None) what is left."""
    fixed = sum(c.width + 2 * pad for c in columns if c.width is not None)
    return [c.width if c.width is not None else max(total - fixed - 2 * pad, 1) for c in columns]


def row_at(y: int, scroll_y: int, n_rows: int) -> int:
    """The row drawn on line ``y`` under the header, scrolled by ``scroll_y``; -1 for the header or no row."""
    r = y - 1 + scroll_y
    return r if y >= 1 and 0 <= r < n_rows else -1


class StripCache(OrderedDict):
    """Strips by key, at most ``size``: the oldest kept goes first."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def keep(self, key, strip: Strip) -> Strip:
        self[key] = strip
        if len(self) > self.size:
            self.popitem(last=False)
        return strip


class RowList(SteadyBars, ScrollView, can_focus=True):
    """Rows of cells under a header, with a row cursor."""

    BINDINGS = [
        Binding("up", "cursor_up", "up", show=False),
        Binding("down", "cursor_down", "down", show=False),
        Binding("pageup", "page_up", "page up", show=False),
        Binding("pagedown", "page_down", "page down", show=False),
        Binding("home", "first", "first", show=False),
        Binding("end", "last", "last", show=False),
    ]
    COMPONENT_CLASSES = {"rowlist--header", "rowlist--cursor", "rowlist--hover"}
    DEFAULT_CSS = """
    RowList {
        background: $surface;
        color: $foreground;
        & > .rowlist--header { text-style: bold; background: $panel; color: $foreground; }
        & > .rowlist--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .rowlist--hover { background: $block-hover-background; }
        &:focus {
            background-tint: $foreground 5%;
            & > .rowlist--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            /* the header is the list's title: reversed while the list has the focus (Tab shows where it went) */
            & > .rowlist--header { background-tint: $foreground 5%; text-style: bold reverse; }
        }
        /* NO_COLOR: Textual turns colours into greys, and the cursor's background was 236 on 234: reversed */
        &:nocolor > .rowlist--cursor { text-style: reverse; }
        &:nocolor:focus > .rowlist--cursor { text-style: bold reverse; }
    }
    """
    #: cached strips at most
    ROW_CACHE = 512
    #: blank columns each side of a cell
    PAD = 1
    #: the mark of a cell cut short ("..." on an ASCII terminal: the owner sets it)
    more = "…"

    cursor_row: reactive[int] = reactive(0, always_update=False, repaint=False)

    class Highlighted(Message):
        """The cursor moved to ``row`` (its key ``key``)."""

        def __init__(self, rowlist: "RowList", row: int, key: str | None) -> None:
            super().__init__()
            self.rowlist, self.row, self.key = rowlist, row, key

        @property
        def control(self) -> "RowList":
            return self.rowlist

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns: list[Column] = []
        self.rows: list[tuple[str | None, list[Text]]] = []
        self._strips = StripCache(self.ROW_CACHE)
        self._strips_width = -1  # the width the strips were made at (``on_resize``)
        self._hover = -1
        self._version = 0
        self._base: Style | None = None  # the widget's style while a frame is drawn (render_lines)

    # ------------------------------------------------------------------ contents
    @property
    def row_count(self) -> int:
        return len(self.rows)

    def add_column(self, label: Text | str, *, key: str, width: int | None = None) -> None:
        self.columns.append(Column(label if isinstance(label, Text) else Text(label), key, width))
        self._changed()

    def add_row(self, *cells: Text, key: str | None = None) -> None:
        self.rows.append((key, list(cells)))
        self._changed()

    def clear(self, columns: bool = False) -> None:
        self.rows = []
        if columns:
            self.columns = []
        self._hover = -1
        self.set_reactive(RowList.cursor_row, 0)
        self._changed()

    def row_key(self, row: int) -> str | None:
        return self.rows[row][0] if 0 <= row < len(self.rows) else None

    def _changed(self) -> None:
        self._version += 1
        self._strips.clear()
        self.virtual_size = Size(self.size.width, len(self.rows) + 1)
        self.refresh()

    def notify_style_update(self) -> None:
        self._strips.clear()
        super().notify_style_update()

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows) + 1)
        # the strips are kept by width (their keys hold it): a new height (lanes folded or unfolded above the gap
        # list) keeps them; a page of rows built again was ~5 ms of such a key press at 1 GB
        width = self.size.width
        if width != self._strips_width:
            self._strips_width = width
            self._strips.clear()

    def _on_focus(self, event: events.Focus) -> None:
        self._strips.clear()
        self.refresh()

    def _on_blur(self, event: events.Blur) -> None:
        self._strips.clear()
        self.refresh()

    # ------------------------------------------------------------------ cursor
    def move_cursor(self, *, row: int, animate: bool = False, notify: bool = True) -> None:
        """The cursor on ``row``; ``notify``: a Highlighted message says so (not when the owner moved it to
        what it shows already, as the gap list's owner does on every gap jump)."""
        if not self.rows:
            return
        row = max(0, min(int(row), len(self.rows) - 1))
        old = self.cursor_row
        self.cursor_row = row
        if row != old:
            self.refresh_row(old)
            self.refresh_row(row)
            if notify:
                self.post_message(self.Highlighted(self, row, self.row_key(row)))
        self.scroll_cursor_into_view()

    def refresh_row(self, row: int) -> None:
        y = row + 1 - int(self.scroll_offset.y)
        if 1 <= y < self.size.height:
            self.refresh_lines(y)

    @property
    def shown_rows(self) -> int:
        return max(self.size.height - 1, 1)

    def scroll_cursor_into_view(self) -> None:
        """Keep the cursor's row in view; when it leaves the rows shown, page so that it lands a quarter of the
        way in from the edge it crossed (stepping through the gaps with `n` then scrolls on one press in ~25,
        not on two in three)."""
        h = self.shown_rows
        sy = int(self.scroll_offset.y)
        r = self.cursor_row
        lead = h // 4
        if r < sy:
            self.scroll_to(y=max(0, r - (h - 1 - lead)), animate=False, force=True, immediate=True)
        elif r >= sy + h:
            self.scroll_to(y=max(0, r - lead), animate=False, force=True, immediate=True)

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self.cursor_row + 1)

    def action_page_up(self) -> None:
        self.move_cursor(row=self.cursor_row - self.shown_rows)

    def action_page_down(self) -> None:
        self.move_cursor(row=self.cursor_row + self.shown_rows)

    def action_first(self) -> None:
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self.move_cursor(row=len(self.rows) - 1)

    def on_click(self, event: events.Click) -> None:
        r = row_at(event.y, int(self.scroll_offset.y), len(self.rows))
        if r >= 0:
            self.focus()
            self.move_cursor(row=r)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        r = row_at(event.y, int(self.scroll_offset.y), len(self.rows))
        if r != self._hover:
            old, self._hover = self._hover, r
            self.refresh_row(old)
            self.refresh_row(r)

    def on_leave(self, event: events.Leave) -> None:
        if self._hover >= 0:
            old, self._hover = self._hover, -1
            self.refresh_row(old)

    # ------------------------------------------------------------------ drawing
    def render_lines(self, crop):
        # the widget's rich_style is a walk up the DOM: once a frame, not once a line
        self._base = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._base = None

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self._base if self._base is not None else self.rich_style
        if y == 0:
            key = ("header", width, self.has_focus, self._version)
            strip = self._strips.get(key)
            if strip is None:
                strip = self._strips.keep(key, cells_strip(
                    [c.label for c in self.columns], cell_widths(self.columns, width, self.PAD), self.PAD,
                    base + self.get_component_rich_style("rowlist--header"), width, self.app.console, self.more))
            return strip
        r = row_at(y, int(self.scroll_offset.y), len(self.rows))
        if r < 0:
            return Strip([Segment(" " * width, base)], width)
        cur, hov = r == self.cursor_row, r == self._hover
        key = (r, cur, hov, self.has_focus, width, self._version)
        strip = self._strips.get(key)
        if strip is None:
            style = base
            if hov and not cur:
                style = style + self.get_component_rich_style("rowlist--hover")
            if cur:
                style = style + self.get_component_rich_style("rowlist--cursor")
            strip = self._strips.keep(key, cells_strip(self.rows[r][1], cell_widths(self.columns, width, self.PAD),
                                                       self.PAD, style, width, self.app.console, self.more))
        return strip
