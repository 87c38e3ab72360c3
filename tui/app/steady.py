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
screen's boxes.
"""

from __future__ import annotations

import inspect

from textual.containers import Horizontal, Vertical
from textual.scrollbar import ScrollBar
from textual.widget import Widget


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


class SteadyVertical(SteadySize, Vertical):
    """A vertical box whose new size (a child grown or shrunk) is one layout."""


class SteadyHorizontal(SteadySize, Horizontal):
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
