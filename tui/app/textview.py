"""A scrollable block of rich Text drawn with the Line API: replacing its text redraws this widget only,
without a layout pass over the whole screen (the stack panel changes on every gap jump)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


#: the style of unstyled runs: Textual's NO_COLOR (monochrome) filter needs a Style on every segment, never None
_PLAIN = Style()


def _styled(segments) -> list[Segment]:
    return [sg if sg.style is not None else Segment(sg.text, _PLAIN, sg.control) for sg in segments]


class TextView(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up,k", "scroll_up", "scroll up", show=False),
        Binding("down,j", "scroll_down", "scroll down", show=False),
        Binding("pageup", "page_up", "page up", show=False),
        Binding("pagedown", "page_down", "page down", show=False),
    ]

    def __init__(self, **kw):
        super().__init__(**kw)
        self._text = Text()
        self._lines: list = []  # the wrapped lines (rich Text), turned into strips when first drawn
        self._strips: dict[int, Strip] = {}
        self._wrapped_at = -1

    def set_text(self, text: Text) -> None:
        self._text = text
        self._wrapped_at = -1
        self.scroll_to(y=0, animate=False)
        self._wrap()
        self.refresh()

    @property
    def plain(self) -> str:
        return self._text.plain

    def _content_width(self) -> int:
        w = self.scrollable_content_region.width or self.size.width
        return max(w, 1)

    def _wrap(self) -> None:
        width = self._content_width()
        if width == self._wrapped_at:
            return
        console = self.app.console
        opts = console.options.update_width(width)
        self._lines = list(self._text.wrap(console, width, overflow="fold")) if self._text else []
        self._strips = {}  # only the lines on screen are rendered (a long stack is mostly off screen)
        del opts
        self._wrapped_at = width
        self.virtual_size = Size(width, len(self._lines))

    def on_resize(self, event) -> None:
        self._wrap()

    def render_line(self, y: int) -> Strip:
        self._wrap()
        width = self.scrollable_content_region.width or self.size.width
        y += int(self.scroll_offset.y)
        if 0 <= y < len(self._lines):
            st = self._strips.get(y)
            if st is None:
                line = self._lines[y]
                st = self._strips[y] = Strip(_styled(line.render(self.app.console, end="")), line.cell_len)
            return st.crop_extend(0, width, _PLAIN)
        return Strip([Segment(" " * width, _PLAIN)], width)
