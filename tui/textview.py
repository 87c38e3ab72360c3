"""A scrollable block of rich Text drawn with the Line API: replacing its text redraws this widget only,
without a layout pass over the whole screen (the stack panel changes on every gap jump).

Replacing the text repaints only the screen lines whose content changed (the stack panels of two gaps share
most of their frames), and a line's strip is kept by its content, so a line seen before is not rendered again.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import OrderedDict

from rich.cells import cell_len
from rich.control import STRIP_CONTROL_CODES
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .steady import SteadyBars


#: the style of unstyled runs: Textual's NO_COLOR (monochrome) filter needs a Style on every segment, never None
_PLAIN = Style()

#: strips kept by line content (the lines of the last few texts shown; every cached Strip is ~10 objects the
#: garbage collector walks)
STRIP_CACHE = 512


def _styled(segments) -> list[Segment]:
    return [sg if sg.style is not None else Segment(sg.text, _PLAIN, sg.control) for sg in segments]


def _line_key(line: Text) -> tuple:
    """Everything that decides how a wrapped line is drawn."""
    return (line.plain, line.style, tuple(line.spans))


def wrap_lines(text: Text, console, width: int) -> list[Text]:
    """``text`` wrapped to ``width``: the lines that fit as they are; a longer line broken after a space or a
    ``/`` (a path breaks between its folders, not inside a name); an indented line's continuation lines go
    under its own indent plus two, so that a wrapped frame still reads as one frame (a bare fold put
    ``utils.py:2`` / ``394`` at the left edge of an 80x24 stack panel).

    A long line's pieces are kept by its content and the width (``_HUNG``): the stack panels of two gaps share
    most of their frames, and the returned lines are never changed by their users."""
    if not text:
        return []
    if "\t" in text.plain or text.justify not in (None, "default"):
        return list(text.wrap(console, width, overflow="fold"))
    out: list[Text] = []
    for line in split_lines(text):
        if line.cell_len <= width:
            out.append(line)
        else:
            out.extend(lru_get(_HUNG, (_line_key(line), width), lambda: hang(line, width), HUNG_CACHE))
    return out


#: long lines wrapped, by (_line_key, width): the frames and explanations gap jumps show again
HUNG_CACHE = 512


def lru_get(cache: OrderedDict, key, build, limit: int):
    """``cache[key]``, made by ``build()`` when missing; the least recently used entry goes past ``limit``."""
    value = cache.get(key)
    if value is None:
        value = cache[key] = build()
        if len(cache) > limit:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return value
_HUNG: OrderedDict = OrderedDict()


def split_lines(text: Text) -> list[Text]:
    """``text.split("\\n", allow_blank=True)``: one Text per line, with the text's style, justify and overflow
    and its spans cut to each line, in their order. Made here in one pass over the spans: rich's ``divide``
    also makes a Text of every newline, and placed each span by a search (half the cost of a stack panel's
    wrap, every gap jump)."""
    plain = text.plain
    if "\n" not in plain:
        return list(text.split(allow_blank=True))
    pieces = plain.split("\n")
    starts = []
    pos = 0
    for piece in pieces:
        starts.append(pos)
        pos += len(piece) + 1
    spans: list[list[Span]] = [[] for _ in pieces]
    n = len(pieces)
    for start, end, style in text._spans:
        i = max(bisect_right(starts, start) - 1, 0)
        while i < n and starts[i] < end:
            ls = starts[i]
            a, b = max(0, start - ls), min(end - ls, len(pieces[i]))
            if b > a:
                spans[i].append(Span(a, b, style))
            i += 1
    st, just, ov = text.style, text.justify, text.overflow
    if _STRIPPED.search(plain):  # (never from rich's own API: it strips them as text goes in)
        return [Text(piece, style=st, justify=just, overflow=ov, spans=sp) for piece, sp in zip(pieces, spans)]
    out = []
    for piece, sp in zip(pieces, spans):
        # Text(piece, ...) without its strip_control_codes: the text holds none of them (above), and the strip's
        # str.translate leaves its fast path at the first non-ASCII character: ~0.4 ms a stack panel
        line = Text("", style=st, justify=just, overflow=ov, spans=sp)
        line._text = [piece]
        line._length = len(piece)
        out.append(line)
    return out


#: the control codes rich's Text strips from what goes in (``rich.control.strip_control_codes``)
_STRIPPED = re.compile("[" + "".join(re.escape(chr(c)) for c in STRIP_CONTROL_CODES) + "]")


def hang(line: Text, width: int) -> list[Text]:
    """One line too long for ``width``, broken as ``wrap_lines`` says (styles kept)."""
    plain = line.plain
    lead = len(plain) - len(plain.lstrip(" "))
    indent = min(lead + 2, max(width // 3, 0)) if lead else 0  # prose (no indent) wraps flush
    cuts: list[int] = []
    pos, room = 0, width
    while cell_len(plain[pos:]) > room:
        end = pos + max(room, 1)
        while end > pos + 1 and cell_len(plain[pos:end]) > room:
            end -= 1  # wide characters
        lo = pos + max(room // 3, 1)
        sp = plain.rfind(" ", lo, end + 1)  # a space just past the width is dropped: the word before fits
        sl = plain.rfind("/", lo, end)
        nxt = plain.find(" ", sp + 1) if sp >= lo else -1
        word = (nxt if nxt >= 0 else len(plain)) - sp - 1  # the word after that space
        # at a space, unless the word after it (a path) is too long for a line of its own: then after a "/"
        cut = sp if sp >= lo and (word <= width - indent or sl < sp) else sl + 1 if sl >= lo else end
        cuts.append(cut)
        pos = cut
        while pos < len(plain) and plain[pos] == " ":  # a break at spaces drops them
            pos += 1
        if pos > cut:
            cuts.append(pos)
        room = max(width - indent, 1)
    pieces = list(line.divide(cuts))
    out = [pieces[0]]
    for k, piece in enumerate(pieces[1:], 1):
        if not piece.plain.strip(" "):
            continue  # the spaces dropped at a break
        out.append(Text(" " * indent) + piece)
    return out


class TextView(SteadyBars, ScrollView, can_focus=True):
    """Rich Text, wrapped to the width, scrolled by the keys below while it has the focus. A ``heading`` (the stack
    panel's "stack") is a line of its own on top that does not scroll: bold on the panel colour as the gap list's
    header beside it, reversed while this view has the focus (Tab to it shows that it has it, also without colour)."""

    # the text is wrapped to the width: never a horizontal scrollbar (with overflow-x auto, the vertical one
    # appearing made the old wrap 1 cell too wide for a frame, and a horizontal one came and went: two layouts)
    COMPONENT_CLASSES = {"textview--heading"}
    DEFAULT_CSS = """
    TextView {
        overflow-x: hidden;
        & > .textview--heading { text-style: bold; background: $panel; color: $foreground; }
        &:focus > .textview--heading { text-style: bold reverse; }
    }
    """

    BINDINGS = [
        Binding("up,k", "scroll_up", "scroll up", show=False),
        Binding("down,j", "scroll_down", "scroll down", show=False),
        Binding("pageup", "page_up", "page up", show=False),
        Binding("pagedown", "page_down", "page down", show=False),
    ]

    def __init__(self, *, heading: str = "", **kw):
        super().__init__(**kw)
        self.heading = heading
        self._text = Text()
        self._lines: list = []  # the wrapped lines (rich Text), turned into strips when first drawn
        self._keys: list = []  # _line_key of every wrapped line
        self._strips: OrderedDict = OrderedDict()  # (line key, width) -> Strip, across texts
        self._heading_strip: tuple | None = None  # (width, focus, Strip) of the heading last drawn
        self._wrapped_at = -1
        self._partial = False  # set_text repaints what changed itself (``_set_virtual_size``)

    @property
    def top(self) -> int:
        """Rows above the text (the heading's)."""
        return 1 if self.heading else 0

    def set_text(self, text: Text) -> None:
        # the content region once (a look-up in the compositor each time: it was asked three times a call)
        region = self.scrollable_content_region
        width = max(region.width or self.size.width, 1)
        at_top = int(self.scroll_offset.y) == 0
        old = self._keys if self._wrapped_at == width and at_top else None
        self._text = text
        self._wrapped_at = -1
        if not at_top or self.scroll_target_y != 0:
            self.scroll_to(y=0, animate=False)
        # same width, same scroll: only the lines on screen whose content changed are repainted, also where
        # the number of lines (the virtual size) changes: the lines compared below are all those shown
        self._partial = old is not None
        try:
            self._wrap(width)
        finally:
            self._partial = False
        if old is None:
            self.refresh()
            return
        new = self._keys
        top = self.top
        h = max(region.height - top, 0)  # (the text's length changes the scroll bar, which takes width, not height)
        full = self.size.width
        changed = [Region(0, y + top, full, 1) for y in range(h)
                   if (old[y] if y < len(old) else None) != (new[y] if y < len(new) else None)]
        if changed:
            self.refresh(*changed)

    @property
    def plain(self) -> str:
        return self._text.plain

    def _content_width(self) -> int:
        w = self.scrollable_content_region.width or self.size.width
        return max(w, 1)

    def _wrap(self, width: int | None = None) -> None:
        if width is None:
            width = self._content_width()
        if width == self._wrapped_at:
            return
        self._lines = wrap_lines(self._text, self.app.console, width)
        self._keys = [_line_key(ln) for ln in self._lines]
        self._wrapped_at = width
        self._set_virtual_size(Size(width, len(self._lines) + self.top))

    def _set_virtual_size(self, size: Size) -> None:
        """``virtual_size`` is a layout reactive: setting it lays out the whole screen, which repainted every
        widget on most gap jumps of a real trace (the stack's length changes), 20-140 ms. This panel's own size
        does not depend on its text (unless its height is auto), so only its scrollbars and itself are updated
        here; a scrollbar that appears or goes still lays the screen out (the text gets narrower)."""
        if size == self.virtual_size:
            return
        h = self.styles.height
        if not self.is_mounted or not self.container_size or (h is not None and h.is_auto):
            self.virtual_size = size
            return
        self.set_reactive(TextView.virtual_size, size)
        self._scroll_update(size)
        if not self._partial:  # (set_text repaints the lines that changed)
            self.refresh()

    def on_resize(self, event) -> None:
        self._wrap()

    def _on_focus(self, event) -> None:
        self._refresh_heading()

    def _on_blur(self, event) -> None:
        self._refresh_heading()

    def notify_style_update(self) -> None:
        self._heading_strip = None
        super().notify_style_update()

    def _refresh_heading(self) -> None:
        if self.heading:
            self._heading_strip = None
            self.refresh(Region(0, 0, self.size.width, 1))

    def action_page_up(self) -> None:
        self.scroll_to(y=max(self.scroll_y - self._page(), 0), animate=False)

    def action_page_down(self) -> None:
        self.scroll_to(y=min(self.scroll_y + self._page(), self.max_scroll_y), animate=False)

    def _page(self) -> int:
        """The text lines shown (a page: the heading does not count)."""
        return max(self.scrollable_content_region.height - self.top, 1)

    def _heading_line(self, width: int) -> Strip:
        focus = self.has_focus
        got = self._heading_strip
        if got is None or got[:2] != (width, focus):
            style = self.rich_style + self.get_component_rich_style("textview--heading")
            label = Text(" " + self.heading, no_wrap=True, overflow="crop", end="")
            label.truncate(width, pad=True)
            got = self._heading_strip = (width, focus, Strip(list(label.render(self.app.console, end="")),
                                                                 width).apply_style(style))
        return got[2]

    def render_lines(self, crop):
        self._wrap()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        if self._wrapped_at < 0:
            self._wrap()
        width = self._wrapped_at
        top = self.top
        if y < top:
            return self._heading_line(width)
        y += int(self.scroll_offset.y) - top
        if 0 <= y < len(self._lines):
            key = (self._keys[y], width)
            cache = self._strips
            st = cache.get(key)
            if st is None:
                line = self._lines[y]
                segs = _styled(line.render(self.app.console, end=""))
                n = line.cell_len
                if n > width:
                    st = Strip(segs, n).crop_extend(0, width, _PLAIN)
                else:  # what crop_extend makes of it, as one Strip
                    if n < width:
                        segs.append(Segment(" " * (width - n), _PLAIN))
                    st = Strip(segs, width)
                cache[key] = st
                if len(cache) > STRIP_CACHE:
                    cache.popitem(last=False)
            else:
                cache.move_to_end(key)
            return st
        return Strip([Segment(" " * width, _PLAIN)], width)
