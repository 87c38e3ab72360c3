"""One layout pass when the lanes' height changes (lanes folded or unfolded by a zoom, rows expanded).

Textual answers a new size of a container or of a scroll bar with a second layout of the whole screen: the layout
pass sets each resized widget's ``virtual_size``, a reactive that asks for a layout again. For the explorer's
boxes (the lanes over their axis, the gap list beside the stack panel) and the scroll bars of its own scrolling
widgets, that second pass arranges nothing new: the first one placed every child, and a scroll bar is drawn from
what its widget tells it (its window and position), not from its own virtual size. It made a zoom press that
folded lanes two layouts and three frames (~55 ms of CPU at 1 GB, bench_keys.py); with these, one layout, and a
frame for the scroll bar.

``SteadySize`` keeps the virtual size up to date without that second pass; ``SteadyBars`` (a mix-in of the
explorer's Line API widgets) gives them such scroll bars; ``SteadyVertical`` and ``SteadyHorizontal`` are the
screen's boxes. ``PlainBox`` (the screen and its boxes) draws a box under its children as one blank row repeated.
"""

from __future__ import annotations

import inspect

from textual.containers import Horizontal, Vertical
from textual.geometry import Region
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import ContentSwitcher


def _takes_layout() -> bool:
    """Whether this Textual's ``Widget._size_updated`` (a private method) has the ``layout`` flag the steady
    classes pass; without it they are Textual's own classes, unchanged (a second layout, the same screen)."""
    try:
        return "layout" in inspect.signature(Widget._size_updated).parameters
    except (AttributeError, TypeError, ValueError):
        return False


#: whether the steady classes skip the second layout on this Textual (checked once, at import)
STEADY = _takes_layout()


class SteadySize:
    """A widget whose new size is taken without asking for another layout (the one that gave it is enough)."""

    if STEADY:
        def _size_updated(self, size, virtual_size, container_size, layout: bool = True) -> bool:
            return super()._size_updated(size, virtual_size, container_size, layout=False)


class SteadyScrollBar(SteadySize, ScrollBar):
    """Textual's scroll bar, drawn the same; a new height (its widget resized) is no second layout."""


#: the edge types that draw nothing and take no room
_NO_EDGE = ("", "none")


class PlainBox:
    """A box without border, outline, padding or title: every row it draws is the same blank row (its background,
    through the app's line filters), drawn once and repeated. Textual draws each box under its children whole (the
    screen, the view switcher, the lanes view and its two boxes: 50, 44, 44 and 2 x ~20 rows at 200x50), row by row
    through its styles cache, again after each new size: the rows the children cover. A box with any of those is
    drawn by Textual."""

    def render_lines(self, crop: Region) -> list[Strip]:
        st = self.styles
        if (crop.height <= 1 or self.border_title is not None or self.border_subtitle is not None
                or any(t not in _NO_EDGE for t, _ in st.border) or any(t not in _NO_EDGE for t, _ in st.outline)
                or any(st.padding) or st.hatch is not None):
            return super().render_lines(crop)
        row = super().render_lines(Region(crop.x, crop.y, crop.width, 1))[0]
        return [row] * crop.height


class PlainVertical(PlainBox, Vertical):
    """A vertical box drawn as one blank row repeated (``PlainBox``)."""


class PlainSwitcher(PlainBox, ContentSwitcher):
    """Textual's content switcher drawn as one blank row repeated (``PlainBox``)."""


class SteadyVertical(SteadySize, PlainBox, Vertical):
    """A vertical box whose new size (a child grown or shrunk) is one layout."""


class SteadyHorizontal(SteadySize, PlainBox, Horizontal):
    """A horizontal box whose new size is one layout."""


class SteadyBars:
    """A mix-in of a scrolling widget: its vertical scroll bar is a ``SteadyScrollBar`` (made by Textual as
    always, then given the steady class: the same object, the same state)."""

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        bar = super().vertical_scrollbar
        if type(bar) is ScrollBar:
            bar.__class__ = SteadyScrollBar
        return bar
