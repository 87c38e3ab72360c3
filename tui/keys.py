"""What an explorer key is: the keys as the help screen shows them, what they do, the bindings that make them
work, and where the help lists it. Each pane declares its own keys next to its actions (``LaneKeys.KEYS`` in
lanekeys.py, ``GapKeys.KEYS`` in gapkeys.py, ``SearchKeys.KEYS`` in search.py) and the screen its own
(``SCREEN_KEYS``, ``ScreenKeys`` in screenkeys.py); the screen's BINDINGS and the help screen's key table are both
made from those tables, in one place (``MainScreen`` in main.py, with ``in_help_order``, ``bindings`` and
``help_rows``). Tests check that each entry's shown keys are its bindings' keys and that the README's key table
lists the same keys.

Each of those is a ``Pane``: an object the screen holds, whose actions change the screen's scene and ask it to
``update``; the screen hands a bound action to the pane that has it (``MainScreen.__getattr__``).

The bindings stay on the screen, not on the pane widgets: Textual builds the footer and answers a key along the
focus chain, so a key bound on the lanes would neither work nor show while the gap list has the focus, and n, pan
or zoom work whatever has it.

An entry without bindings documents keys that a widget binds itself (the lanes' and the gap list's up/down,
Textual's Tab); ``bound_by`` names it, and the test looks the keys up there.
"""

from __future__ import annotations

from typing import NamedTuple

from textual.binding import Binding


class Key(NamedTuple):
    shown: str  # the keys as the help screen shows them
    help: str  # what they do, for the help screen
    bindings: tuple[Binding, ...] = ()
    bound_by: str = ""  # the widget that binds them, for an entry without bindings
    #: where the help and the footer list it, among every table's keys (smaller first); the help reads in the
    #: order a user learns the keys, not pane by pane
    at: int = 0


class Pane:
    """A part of the explorer's screen with keys of its own: its ``KEYS`` and, next to them, their actions
    (``action_*``), which change the scene of ``main`` (the screen) and call its ``update``."""

    KEYS: list[Key] = []

    def __init__(self, main) -> None:
        self.main = main

    @property
    def scene(self):
        """The scene on the screen (None before the first trace)."""
        return self.main.scene


def in_help_order(*tables: list[Key]) -> list[Key]:
    """The keys of every table, in the help's order (``Key.at``)."""
    out = sorted((k for t in tables for k in t), key=lambda k: k.at)
    ats = [k.at for k in out]
    if len(set(ats)) != len(ats) or 0 in ats:
        raise ValueError(f"two keys at the same place in the help, or one without a place: {ats}")
    return out


def bindings(table: list[Key]) -> list[Binding]:
    """The bindings of ``table``, in its order (the footer shows those with show=True in this order)."""
    return [b for k in table for b in k.bindings]


def help_rows(table: list[Key]) -> list[tuple[str, str]]:
    """The help screen's key table: (keys, what they do)."""
    return [(k.shown, k.help) for k in table]


#: how the help writes a Textual key name (the rest: as it is)
SHOWN_NAME = {"left": "←", "right": "→", "up": "↑", "down": "↓", "shift+left": "shift+←", "home": "Home",
              "enter": "Enter", "escape": "Esc", "tab": "Tab", "question_mark": "?", "f1": "F1",
              "left_square_bracket": "[", "right_square_bracket": "]", "plus": "+", "minus": "-",
              "equals_sign": "="}


def shown_keys(shown: str) -> set[str]:
    """The Textual key names an entry's shown text stands for: words are keys, a "/" between them separates
    alternatives, "shift+← →" is shift+left and shift+right."""
    names = {v: k for k, v in SHOWN_NAME.items()}
    words = shown.split()
    if words == ["/"]:
        return {"slash"}
    out = set()
    for i, w in enumerate(words):
        if w == "/":
            continue
        out.add("shift+right" if w == "→" and i and words[i - 1] == "shift+←" else names.get(w, w))
    return out
