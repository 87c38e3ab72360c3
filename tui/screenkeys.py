"""The explorer screen's own keys (tui/main.py ``MainScreen``; the panes' are in lanekeys.py, gapkeys.py and
search.py): the views (1 2 3) and Enter on a table's row, j / k in an info box, the next tab (t), before/after (D),
detail (Enter), help, legend, export and Esc; and what the tables' messages ask (a kernel in the lanes, a finding's
gaps, an action's kernels).

``ScreenKeys`` is a part the screen holds (tui/keys.py ``Pane``): each action changes the scene or the view shown and
calls the screen's ``update``; the screen binds ``SCREEN_KEYS`` with the panes' keys and hands their actions here.
"""

from __future__ import annotations

import os
from functools import partial

import numpy as np
from textual.binding import Binding
from textual.widgets import ContentSwitcher, DataTable

from .gaplist import GapList
from .keys import Key, Pane
from .loading import debugging, failure
from .navigate import event_under_cursor, gap_under_cursor
from .panels import event_text, stack_text
from .screens import DetailScreen, HelpScreen
from .tables import TableView, kernels_of, table_views
from .timeline import LanesView

#: the screen's own keys (the actions below; ``at``: their place among the panes' keys in the help and the footer)
SCREEN_KEYS = [
    # Enter on a table row (its own binding, which the footer does not show): what it does there, in the footer.
    # Bound with priority so that the footer shows it over the table's own; ``check_action`` lets it through only
    # where a table row has the focus (elsewhere the key goes on as before: the search box, the lanes' detail)
    Key("Enter", "detail of what is under the cursor (lanes) or of the gap (gap list); a kernel: its first call "
        "in the lanes; a finding: its gaps",
        (Binding("enter", "open_row('kernels')", "in the lanes", key_display="Enter", priority=True),
         Binding("enter", "open_row('findings')", "its gaps", key_display="Enter", priority=True),
         Binding("enter", "detail", "detail", show=False)), at=110),
    # the panes bind these themselves (the lanes, the gap list, the tables, the stack panel); the screen's, for a
    # pane that does not (the kernels and findings views' info boxes bind only the arrows): j / k scroll it
    Key("↑ ↓ / j k", "move in the focused pane: lanes, gaps, table rows; scroll the stack panel or an info box "
        "(PgUp / PgDn: a page)",
        (Binding("down,j", "scroll_text(1)", "scroll down", show=False),
         Binding("up,k", "scroll_text(-1)", "scroll up", show=False)), at=60),
    Key("Tab", "next pane: lanes, gap list, stack panel (2, 3: table, info box); the focused one's title is "
        "reversed", bound_by="Screen", at=130),
    # each view's key twice: shown in the footer of the other table views (``view(name, True)``: hidden where it
    # does nothing new, so the lanes' footer keeps its room), and hidden, for the lanes view and the view itself
    Key("1 2 3", "views: lanes, kernels, findings",
        (Binding("1", "view('lanes', True)", "lanes"), Binding("2", "view('kernels', True)", "kernels"),
         Binding("3", "view('findings', True)", "findings"),
         Binding("1", "view('lanes')", "lanes", show=False), Binding("2", "view('kernels')", "kernels", show=False),
         Binding("3", "view('findings')", "findings", show=False)), at=140),
    Key("t", "next loaded trace (prefill / decode ...)", (Binding("t", "next_trace", "trace", show=False),), at=150),
    Key("D", "before/after: this tab and the next, the earlier one as A (before), step by step (gapscope diff A B; "
        "x there swaps)", (Binding("D", "diff", "diff", key_display="D", show=False),), at=160),
    Key("Esc", "end the search, range or filter; back to the lanes", (Binding("escape", "escape", "back", show=False),),
        at=210),
    Key("e", "export: findings (Markdown + JSON) and an SVG of the screen", (Binding("e", "export", "export"),),
        at=220),
    Key("g", "legend", (Binding("g", "legend", "legend", show=False),), at=230),
    Key("? / F1", "this help", (Binding("question_mark,f1", "help", "help"),), at=240),
    Key("q", "quit", (Binding("q", "app.quit", "quit"),), at=250),
]

#: the actions of the lanes view's panes (the lanes, the gap list, the stack panel, the search): hidden from the
#: footer and doing nothing in the kernels and findings views (n there moved the hidden gap list's cursor)
LANES_ONLY = frozenset({"next_gap", "prev_gap", "focus_gap", "cause", "pan", "zoom", "fit", "cursor", "event",
                        "expand", "search", "mark", "mark_range", "link", "origin", "detail"})


class ScreenKeys(Pane):
    """The screen's own actions (a part of ``MainScreen``)."""

    KEYS = SCREEN_KEYS

    # ================================================================ views
    async def action_view(self, name: str, footer: bool = False) -> None:
        """1 2 3 (``footer``: the binding the table views' footer shows; the same action)."""
        main = self.main
        if name != "lanes" and not main.query(TableView):  # mounted (hidden) the first time one of them is shown
            await main.query_one("#views", ContentSwitcher).mount_all(table_views(main.glyphs))
            for box in main.query(".infobox"):  # its title shows when it has the focus (Tab from the table)
                box.border_title = "detail"
        self.switch_view(name)  # the watcher fills the table shown (``Shown.view``)
        main.update(keep_msg=True)

    def switch_view(self, name: str) -> None:
        main = self.main
        main.query_one("#views", ContentSwitcher).current = "lanesview" if name == "lanes" else name + "view"
        if name == "lanes":
            main.lanes.focus()
        else:
            main.query_one(f"#{name}", DataTable).focus()

    def action_open_row(self, view: str) -> None:
        """Enter on a row of the kernels or findings table (``view``): what the table's own Enter does (the footer
        shows this binding, which says what that is there)."""
        table = self.main.focused
        if isinstance(table, DataTable):
            table.action_select_cursor()

    def scrolled(self):
        """The widget with the focus when it scrolls vertically and binds no up / down of its own to j / k (an
        info box of the kernels or findings view); else None."""
        w = self.main.focused
        if w is None or isinstance(w, (LanesView, GapList, DataTable)) or not w.allow_vertical_scroll:
            return None
        return w

    def action_scroll_text(self, d: int) -> None:
        """↑ ↓ / j k on a pane that scrolls (its own bindings take the arrows first: these are j and k)."""
        w = self.scrolled()
        if w is not None:
            w.scroll_relative(y=int(d), animate=False, immediate=True)

    # ================================================================ tabs, before/after
    def action_next_trace(self) -> None:
        if not self.main.app.next_tab():
            self.main.say("t: one trace loaded, no other tab")

    def action_diff(self) -> None:
        """Before/after (tui/diffview.py): this tab (A) against the next one (B)."""
        pair = self.main.app.diff_pair()
        if pair is None:
            return self.main.say("D compares two analysed single-trace tabs: open two traces")
        a, b = (os.path.basename(p.path) for p in pair)
        self.main.say(f"comparing {a} (A, before) with {b} (B, after) ... (x in the diff swaps them)")
        self.main.run_worker(partial(self.build_diff, *pair), thread=True, exclusive=True, group="diff")

    def build_diff(self, a, b) -> None:
        """The diff's own lanes and comparison, built off the event loop (the screen's worker: seconds on a large
        trace), then its screen pushed."""
        from .diffscene import DiffScene
        from .diffview import DiffScreen

        app = self.main.app
        try:
            sc = DiffScene(a.path, a.model, a.analysis, b.path, b.model, b.analysis)
        except Exception as exc:  # noqa: BLE001 - one line in the status bar, the explorer stays
            if debugging(exc):
                raise
            app.call_from_thread(self.main.say, failure("before/after", exc))
            return
        app.call_from_thread(app.push_screen, DiffScreen(sc, self.main.glyphs))

    # ================================================================ detail, help, export, Esc
    def action_detail(self) -> None:
        main, sc = self.main, self.scene
        if sc is None:
            return
        glyphs = main.glyphs
        if main.focused is main.query_one(GapList) or main.focused is main.query_one("#stack"):
            if sc.gaps.selected_gap >= 0:
                main.app.push_screen(DetailScreen(stack_text(sc, glyphs, full=True), glyphs.ascii))
            return
        gid = gap_under_cursor(sc, main.lanes.cells_width())
        if gid >= 0:
            where = np.flatnonzero(sc.gaps.order == gid)
            if where.size:
                main.gap_keys.goto_gap(int(where[0]))
            main.app.push_screen(DetailScreen(stack_text(sc, glyphs, full=True), glyphs.ascii))
            return
        ev = event_under_cursor(sc, main.lanes.cells_width())
        if ev < 0:
            return main.say("nothing under the cursor")
        main.app.push_screen(DetailScreen(event_text(sc, ev, glyphs), glyphs.ascii))

    def action_help(self) -> None:
        self.main.app.push_screen(HelpScreen(self.main.glyphs, self.main.KEY_HELP))

    def action_legend(self) -> None:
        self.main.app.push_screen(HelpScreen(self.main.glyphs, self.main.KEY_HELP, legend_only=True))

    def action_export(self) -> None:
        from .export import export_message, notice_lines

        main = self.main
        if self.scene is None:
            return
        try:
            paths = main.app.export_findings()
        except Exception as exc:  # noqa: BLE001 - a full disk, a folder we cannot write: one line
            return main.say(failure("export", exc))
        status, lines = export_message(paths)
        main.say(status)
        # one line each, broken to the notice's width after a "/", "-", "." or "_" (a toast folds a name mid-word);
        # made safe line by line (safe() shows a newline inside a name as "\n")
        text = "\n".join(notice_lines([main.fmt.text(s) for s in lines], main.app.size.width))
        main.notify(text, title="export", timeout=8, markup=False)

    def action_escape(self) -> None:
        main, sc = self.main, self.scene
        if main.view_name() != "lanes":  # first back to the lanes (the search there ended on the hidden lanes)
            self.switch_view("lanes")
            return main.update(keep_msg=True)
        inp = main.search_keys.search_box()
        if (inp is not None and inp.has_class("-on")) or (sc is not None and sc.search.query):
            if inp is not None:
                inp.close()
                inp.value = ""
            if sc is not None:
                sc.find("")
            main.lanes.focus()
            return main.update()
        if sc is not None and (sc.mark is not None or sc.span_sel is not None):
            sc.mark = sc.span_sel = None  # the range selection ends
            main.update("range cleared")
        elif sc is not None and (sc.gaps.finding_filter is not None or sc.gaps.cause_filter is not None):
            keep = sc.gaps.selected_gap  # every gap again, the selected one still selected
            sc.apply_filter(None)
            where = np.flatnonzero(sc.gaps.order == keep)
            main.gap_keys.select_gap(int(where[0]) if where.size else 0)
            main.update("all gaps")
        elif main.app.loading is not None:  # nothing else to end (a preview, or no trace yet): the load stops
            main.app.action_cancel_load()

    # ================================================================ what the tables ask (their messages)
    def find_kernel(self, name: str) -> None:
        """Enter on a kernel (view 2): the lanes, on its first call."""
        main, sc = self.main, self.scene
        self.switch_view("lanes")
        if sc.find(name):
            main.search_keys.show_match(sc.current_match())
        main.update()

    def show_finding_gaps(self, ev: TableView.ShowGaps) -> None:
        """Enter on an action or a finding (view 3): the gap list holds its gaps, largest first (n / N walk them,
        Esc shows all gaps again)."""
        main, sc = self.main, self.scene
        if ev.rows.size and sc.apply_finding(ev.part, ev.rows, ev.label):
            self.switch_view("lanes")
            main.gap_keys.select_gap(0)
            main.lanes.focus()
            main.update()
        else:
            main.say(f"{ev.label} lists no gap")

    async def show_action_kernels(self, names) -> None:
        """Enter on a kernel action (view 3), or a trace whose plan leads with one (``opening_kernels``): the
        kernels view, its cursor on the first kernel listed of the action's."""
        await self.action_view("kernels")
        want = set(names)
        at = next((n for n, (_, _, k) in enumerate(kernels_of(self.scene)) if k.name in want), None)
        if at is not None:
            self.main.query_one("#kernels", DataTable).move_cursor(row=at)
