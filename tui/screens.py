"""Modal screens: help (keys and legend) and detail of one thing. (Bad input ends the explorer with the one-line
error, printed by the command line.) ``HelpKeys``: `?` / F1 and `g` for another screen than the explorer's (the
before/after view), on the same help screen with that screen's own key table and legend."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from . import glyphs as G


def legend_text(glyphs: G.Glyphs) -> Text:
    from .lanes import C_ALLOC, C_LAUNCH, C_OP, C_PYTHON, C_SYNC

    t = Text()
    t.append("CPU thread rows (dominant activity per cell):\n", style="bold")
    for c, nm in ((C_PYTHON, "Python"), (C_OP, "aten op"), (C_LAUNCH, "launch / runtime call"), (C_SYNC, "sync"),
                  (C_ALLOC, "allocator")):
        t.append(f"  {glyphs.cpu[c]} ", style=G.CPU_STYLES[c])
        t.append(f" {nm}\n")
    t.append("  (blank) idle: nothing recorded\n")
    t.append("GPU stream / copy rows (busy share of each cell):\n", style="bold")
    t.append("  " + glyphs.density[1:] + "  ", style=G.KERNEL_STYLE)
    t.append("low to full; any kernel in a cell shows at least " + repr(glyphs.density[1]) + "\n")
    t.append(f"  {glyphs.gap}  ", style=G.GAP_STYLE)
    t.append("inside a GPU idle gap (no kernel on any stream)\n")
    t.append("idle gaps row: cause letter, cause, duration:\n", style="bold")
    for cn, letter in G.CAUSE_LETTERS.items():
        t.append(f"  {letter} ", style=G.CAUSE_COLOURS.get(cn, "white"))
        t.append(f"{cn}\n")
    t.append(f"ranges row: {glyphs.open}name{glyphs.bar * 3} innermost record_function / ProfilerStep\n", style="bold")
    t.append(f"axis: {glyphs.cursor} cursor, {'=' if glyphs.ascii else '━'} selected gap\n")
    return t


class _Scrolling:
    """Keys that move the text of a modal screen, whatever has the focus: Home and End to the ends, pages,
    lines."""

    SCROLL_KEYS = [
        Binding("end,G", "move('end')", "end", show=False),
        Binding("home", "move('home')", "top", show=False),
        Binding("pagedown,space", "move('pagedown')", "page down", show=False),
        Binding("pageup", "move('pageup')", "page up", show=False),
        Binding("down,j", "move('down')", "down", show=False),
        Binding("up,k", "move('up')", "up", show=False),
    ]

    def action_move(self, where: str) -> None:
        vs = self.query_one(VerticalScroll)
        if where == "end":
            vs.scroll_to(y=vs.max_scroll_y, animate=False, immediate=True)
        elif where == "home":
            vs.scroll_to(y=0, animate=False, immediate=True)
        else:
            step = {"pagedown": vs.scrollable_content_region.height, "pageup": -vs.scrollable_content_region.height,
                    "down": 1, "up": -1}[where]
            vs.scroll_to(y=max(0, min(vs.scroll_y + step, vs.max_scroll_y)), animate=False, immediate=True)


class HelpScreen(_Scrolling, ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark,f1,g", "app.pop_screen", "close"), *_Scrolling.SCROLL_KEYS]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent; background: $surface; }
    HelpScreen.-ascii > VerticalScroll { border: ascii $accent; scrollbar-size: 0 0; }
    """

    def __init__(self, glyphs: G.Glyphs, keys: list[tuple[str, str]], legend_only: bool = False, *,
                 title: str = "Keys", legend_extra: Text | None = None):
        """``keys``: the key table of the screen it helps with, (keys, what they do) in order; ``title``: the key
        table's heading; ``legend_extra``: that screen's own rows of the legend, before the lanes' legend."""
        super().__init__(classes="-ascii" if glyphs.ascii else "")
        self.glyphs = glyphs
        self.key_rows = keys
        self.legend_only = legend_only
        self.key_title = title
        self.legend_extra = legend_extra

    def compose(self) -> ComposeResult:
        from rich.table import Table

        with VerticalScroll():
            if not self.legend_only:
                yield Static(Text(self.key_title, style="bold underline"))
                table = Table(box=None, show_header=False, padding=(0, 1), expand=True)
                # no "…" where a column is cut (narrow terminals): a non-UTF-8 terminal cannot show it
                table.add_column(no_wrap=True, style="bold", overflow="crop" if self.glyphs.ascii else "ellipsis")
                table.add_column(ratio=1, overflow="fold" if self.glyphs.ascii else "ellipsis")
                for k, what in self.key_rows:
                    if self.glyphs.ascii:
                        k = k.replace("←", "left").replace("→", "right").replace("↑", "up").replace("↓", "down")
                    table.add_row(Text(k), Text(what))
                yield Static(table)
            t = Text()
            t.append("\nLegend\n", style="bold underline")
            if self.legend_extra is not None:
                t.append_text(self.legend_extra)
            t.append_text(legend_text(self.glyphs))
            t.append("\nEsc closes.", style="dim")
            yield Static(t)


class HelpKeys:
    """`?` / F1 (help) and `g` (legend) for a screen other than the explorer's: ``HelpScreen`` with the screen's
    ``KEY_HELP`` (made from its key table, tui/keys.py ``help_rows``), under ``HELP_TITLE``, and its own legend rows
    (``legend_extra``). The screen has ``glyphs``."""

    KEY_HELP: list[tuple[str, str]] = []
    HELP_TITLE = "Keys"

    def legend_extra(self) -> Text | None:
        return None

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.glyphs, self.KEY_HELP, title=self.HELP_TITLE,
                                        legend_extra=self.legend_extra()))

    def action_legend(self) -> None:
        self.app.push_screen(HelpScreen(self.glyphs, self.KEY_HELP, legend_only=True,
                                        legend_extra=self.legend_extra()))


class DetailScreen(_Scrolling, ModalScreen):
    BINDINGS = [Binding("escape,q,enter", "app.pop_screen", "close"), *_Scrolling.SCROLL_KEYS]
    DEFAULT_CSS = """
    DetailScreen { align: center middle; }
    DetailScreen > VerticalScroll { width: 90%; height: 85%; border: round $accent; background: $surface; }
    DetailScreen.-ascii > VerticalScroll { border: ascii $accent; scrollbar-size: 0 0; }
    """

    def __init__(self, text: Text, ascii: bool = False):
        super().__init__(classes="-ascii" if ascii else "")
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text)
