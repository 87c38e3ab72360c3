"""The explorer's keys, written once: each entry holds the keys as the help screen shows them, what they do,
and the bindings that make them work. The explorer's BINDINGS and the help screen's key table are both made
from this list; tests check that each entry's shown keys are its bindings' keys and that the README's key
table lists the same keys.

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


KEYS: list[Key] = [
    Key("n / N", "next / previous gap, largest first (jumps there, updates the stack panel)",
        (Binding("n", "next_gap", "next gap"), Binding("N", "prev_gap", "prev gap", key_display="N"))),
    Key("← → / h l / a d", "pan the time window",
        (Binding("left,h,a", "pan(-0.25)", "pan", show=False), Binding("right,l,d", "pan(0.25)", "pan", show=False))),
    Key("w s / + - / =", "zoom in / out about the cursor",
        (Binding("w,plus,equals_sign", "zoom(2.0)", "zoom", key_display="w/s"),
         Binding("s,minus", "zoom(0.5)", "zoom out", show=False))),
    Key("shift+← → / H L", "move the cursor one cell",
        (Binding("shift+left,H", "cursor(-1)", "cursor", show=False),
         Binding("shift+right,L", "cursor(1)", "cursor", show=False))),
    Key("[ ]", "cursor to the previous / next event on the lane",
        (Binding("left_square_bracket", "event(-1)", "prev event", show=False),
         Binding("right_square_bracket", "event(1)", "next event", show=False))),
    Key("↑ ↓ / j k", "move between lanes (gap list: between gaps)", bound_by="LanesView, GapList"),
    Key("space / x", "expand / collapse a CPU thread into its stack depth rows (on the launcher row: its outer "
        "frames; on a folded row: every lane)",
        (Binding("space,x", "expand", "expand", show=False),)),
    Key("0 / Home", "fit the analysed window (the span the report's numbers are of)", (Binding("0,home", "fit", "fit", show=False),)),
    Key("f / z", "zoom to the selected gap (again, or right after n: tighter, the gap fills the window)", (Binding("f,z", "focus_gap", "zoom gap", show=False),)),
    Key("c / C", "filter the gap list by cause (next / previous cause)",
        (Binding("c", "cause(1)", "cause"), Binding("C", "cause(-1)", "cause", show=False))),
    Key("Enter", "detail of what is under the cursor (lanes) or of the gap (gap list); a finding: its gaps",
        (Binding("enter", "detail", "detail", show=False),)),
    Key("/", "find a kernel or op by name; Enter finds, then n / N step through the matches, Esc ends",
        (Binding("slash", "search", "find"),)),
    Key("Tab", "next pane: lanes, gap list, stack panel", bound_by="Screen"),
    Key("1 2 3", "views: lanes, kernels, findings",
        (Binding("1", "view('lanes')", "lanes", show=False), Binding("2", "view('kernels')", "kernels", show=False),
         Binding("3", "view('findings')", "findings", show=False))),
    Key("t", "next loaded trace (prefill / decode ...)", (Binding("t", "next_trace", "trace", show=False),)),
    Key("D", "before/after: this tab and the next, the earlier one as A (before), step by step (gapscope diff A B; x there swaps)",
        (Binding("D", "diff", "diff", key_display="D", show=False),)),
    Key("o", "times from the analysed window's start (as the report) or in the trace's own time",
        (Binding("o", "origin", "time origin", show=False),)),
    Key("v", "jump between a kernel and its launch call (the other end is marked on the lanes)",
        (Binding("v", "link", "launch/kernel", show=False),)),
    Key("m", "mark the cursor's time; m again: stats of the range between (busy, idle, causes, kernels, host "
        "frames and ops by own time)",
        (Binding("m", "mark", "range", show=False),)),
    Key("M", "the same for the step, range or event under the cursor",
        (Binding("M", "mark_range", "range of a step", show=False),)),
    Key("Esc", "end the search, range or filter; back to the lanes",
        (Binding("escape", "escape", "back", show=False),)),
    Key("e", "export: findings (Markdown + JSON) and an SVG of the screen", (Binding("e", "export", "export"),)),
    Key("g", "legend", (Binding("g", "legend", "legend", show=False),)),
    Key("? / F1", "this help", (Binding("question_mark,f1", "help", "help"),)),
    Key("q", "quit", (Binding("q", "app.quit", "quit"),)),
]

#: the explorer's bindings, in the order of the help (the footer shows those with show=True in this order)
BINDINGS: list[Binding] = [b for k in KEYS for b in k.bindings]

#: the help screen's key table: (keys, what they do)
HELP: list[tuple[str, str]] = [(k.shown, k.help) for k in KEYS]

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
