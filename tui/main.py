"""The explorer's screen: the header, the lanes over a time axis, the gap list and the stack panel of the
selected gap (the kernels and findings views behind 2 and 3), the status line and the keys. The App
(tui/app.py) loads the traces and hands the scenes over; this screen draws them and answers the keys.

What is on screen is one frozen value (``shown``, tui/shown.py) in a reactive attribute: a key changes the
scene and calls ``update``; ``watch_shown`` redraws the header, the lanes, the gap list, the stack panel, the
status line and the footer where the fields they depend on changed. The keys are the panes' (lanekeys.py,
gapkeys.py, search.py: the lanes, the gaps and the search; each pane's ``KEYS`` next to its actions) and this
module's (``SCREEN_KEYS``: views, tabs, before/after, detail, help, export, Esc); ``MainScreen`` binds them all
(``PANES``, one place) and the help shows them in the same order; the widgets talk back through messages
(LanesView.Clicked and Zoom, GapList.Highlighted, SearchInput.Find, TableView.FindKernel and ShowGaps)."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import ContentSwitcher, DataTable, Footer, Static

from . import glyphs as G
from . import keys
from .keys import Key
from .gapkeys import GapKeys, opening_gap, opening_kernels
from .gaplist import MAX_LIST, NARROW, GapList
from .lanekeys import LaneKeys
from .loading import debugging, failure
from .navigate import event_under_cursor, gap_under_cursor, status_parts
from .panels import HEADER_LINES, StackPanel, event_text, header_text, panel_stack_text, stack_text
from .scene import Scene
from .screens import DetailScreen, HelpScreen
from .search import SearchInput, SearchKeys
from .shown import Shown
from .steady import PlainBox, PlainSwitcher, PlainVertical, SteadyHorizontal, SteadyVertical
from .tables import Fmt, TableView, kernels_of, table_views
from .timeline import Axis, LanesView


#: the panes whose actions are a part of the screen; their ``KEYS`` are bound by it (a new pane: its mixin here)
PANES = (LaneKeys, GapKeys, SearchKeys)

#: the screen's own keys (its actions below; ``at``: their place among the panes' keys in the help and the footer)
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


class MainScreen(*PANES, PlainBox, Screen):
    #: every key of the screen, the panes' and its own, in the help's order (tui/keys.py)
    KEYS = keys.in_help_order(*(p.KEYS for p in PANES), SCREEN_KEYS)
    BINDINGS = keys.bindings(KEYS)
    KEY_HELP = keys.help_rows(KEYS)  # the help screen's key table (not HELP: Textual's help panel text)

    #: what is on screen (tui/shown.py); every change redraws what depends on it (``watch_shown``), and only
    #: that: a repaint of the whole screen on each change (Textual's default) made n and N twice as slow
    #: (bench_keys.py, 1M events: n median 41 -> 73 ms of CPU)
    shown: reactive[Shown] = reactive(Shown(), init=False, always_update=False, repaint=False)

    def __init__(self, glyphs: G.Glyphs) -> None:
        super().__init__()
        self.glyphs = glyphs
        self.fmt = Fmt(glyphs)
        self.data = 0  # counted up each time the app says the scene's analyses changed
        self._header_lines = 2
        self._tables_width = 0  # the terminal width the kernels table was filled for
        self._widgets: dict = {}  # ``widget``'s look-ups

    # ================================================================ layout
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with PlainSwitcher(initial="lanesview", id="views"):
            with PlainVertical(id="lanesview"):
                with SteadyVertical(id="timeline"):
                    lv = LanesView(self.glyphs, id="lanes")
                    yield Axis(self.glyphs, lv, id="axis")
                    yield lv
                with SteadyHorizontal(id="bottom"):
                    yield GapList(id="gaplist")
                    yield StackPanel(id="stack", heading="stack")
            # the kernels and findings views (2, 3) and the search box (/) are mounted when first asked for:
            # their widgets and styles made the screen's construction ~25 ms longer on the way to the first frame
        yield Static(id="status")
        # the key bar is mounted once the first frame of the trace is drawn: Textual's Footer styles a widget per
        # key, which made the screen's construction ~0.1 s longer while the trace was being read
        yield Static(id="keybar")

    def on_mount(self) -> None:
        app = self.app
        if self.glyphs.ascii:
            self.add_class("-ascii")
        self.query_one(GapList).set_columns(self.size.width < NARROW)
        if app.scene is None and app.error is None:
            self.show_loading(app.loading or f"loading {os.path.basename(app.paths[0])} ... (Esc cancels)")
        self.lanes.focus()
        app.screen_mounted()

    @property
    def scene(self) -> Scene | None:
        return self.app.scene

    @property
    def lanes(self) -> LanesView:
        return self.widget("#lanes", LanesView)

    def widget(self, selector, expect=None):
        """``query_one(selector, expect)`` for the screen's own widgets (composed once, never replaced), kept
        after the first look-up: a key press looked up eight of them (a walk of the DOM each) per redraw."""
        key = (selector, expect)
        w = self._widgets.get(key)
        if w is None or w.parent is None:  # (removed: looked up again)
            w = self._widgets[key] = self.query_one(selector, expect) if expect is not None else \
                self.query_one(selector)
        return w

    @property
    def _status_msg(self) -> str:
        """The status line's message (tests read it)."""
        return self.shown.msg

    # ================================================================ what the app tells the screen
    def show_loading(self, msg: str) -> None:
        """The loading message in the header (before the first trace is shown)."""
        self.query_one("#header", Static).update(Text(self.fmt.text(msg), style="bold"))

    def mount_footer(self) -> None:
        try:
            slot = self.query_one("#keybar", Static)
        except NoMatches:
            return
        self.mount(Footer(), before=slot)
        slot.remove()

    def show_tab(self) -> None:
        """The app's current tab (``app.scene``) is the one to show; a tab opens on its top action's gap the first
        time (``opening_gap``), or on the kernels view for a kernel action (``opening_kernels``)."""
        sc = self.scene
        if not sc.visited and sc.gaps.order.size and sc.gaps.selected >= 0:
            sc.visited = True
            self.select_gap(opening_gap(sc))
            names = opening_kernels(sc, self.view_name())
            if names is not None:
                self.post_message(TableView.ShowKernels(names))
        self.update()

    def scene_changed(self, *, open_gap: bool = False) -> None:
        """The scene's analyses changed (one landed, failed, or its projection came): everything made from
        them is made again; ``open_gap``: the view goes to the gap a tab opens on."""
        self.data += 1
        sc = self.scene
        if open_gap and sc.gaps.selected >= 0:
            sc.visited = True
            self.select_gap(opening_gap(sc))
        names = opening_kernels(sc, self.view_name()) if open_gap else None
        if names is not None:
            self.post_message(TableView.ShowKernels(names))
        self.update()

    # ================================================================ state
    def update(self, msg: str = "", *, keep_msg: bool = False) -> None:
        """A new ``Shown`` from the scene as it is now (the status line's ``msg``: a move clears it)."""
        sc = self.scene
        if sc is None:
            if msg:
                self.shown = replace(self.shown, msg=msg)
            return
        app = self.app
        self.shown = Shown.of(sc, tabs=app.tab, data=self.data, view=self.view_name(),
                              msg=self.shown.msg if keep_msg else msg, diff=app.diff_pair() is not None)

    def refresh_view(self) -> None:
        """The scene was changed from outside a key (a click; tests): redraw what changed."""
        self.update()

    def say(self, msg: str) -> None:
        """A message on the status line (until the next move)."""
        self.update(msg)

    def watch_shown(self, old: Shown, new: Shown) -> None:
        sc = self.scene
        if sc is None:
            return
        lv = self.lanes
        axis = self.widget("#axis", Axis)
        tab = new.scene != old.scene
        data = tab or new.data != old.data
        if tab:
            lv.set_scene(sc)
            axis.scene = sc
        elif data or new.rows != old.rows:
            lv.sync_rows()  # lanes folded, expanded, or gap rows added by an analysis
        if data or new.gaps != old.gaps or new.time_mode != old.time_mode:
            self.fill_gap_list()
        if data or (new.view != "lanes" and (new.view, new.selected[1]) != (old.view, old.selected[1])):
            self.fill_tables()  # the tables follow the analyses, and the active rank when a table is shown
        if data or new.tabs != old.tabs or new.time_mode != old.time_mode:
            self.refresh_header()
        if data or new.selected != old.selected or new.gaps != old.gaps or new.time_mode != old.time_mode:
            self._move_list_cursor()
            self.widget("#stack", StackPanel).set_text(panel_stack_text(sc, self.glyphs))
        if len(sc.display.rows()) != lv.virtual_size.height:
            lv.sync_rows()  # lanes folded or unfolded by the move (nothing in view)
        if new.lanes_changed(old):
            if (new.lane, new.selected, new.search, new.rows) != (old.lane, old.selected, old.search, old.rows):
                lv.ensure_cursor_visible()
            lv.refresh()
            axis.refresh()
        elif new.lane != old.lane:
            if lv.cursor_row_moved(old.lane, new.lane):
                axis.refresh()
        self._draw_status(new.msg)
        if new.keys != old.keys:
            self.refresh_bindings()

    # ================================================================ drawing
    def refresh_header(self) -> None:
        sc = self.scene
        if sc is None:
            return
        hd = self.query_one("#header", Static)
        width = hd.size.width or self.size.width
        tab, tabs = self.app.tab
        text = header_text(sc, tab, tabs, self.glyphs, width=width)
        hd.update(text)
        self._fit_lanes(min(len(text.plain.split("\n")), HEADER_LINES))  # the header's max-height (gapscope.tcss)

    def _fit_lanes(self, header_lines: int | None = None) -> None:
        """The lanes' height cap, as rows: what the screen has left after the header, the axis, the status and
        key lines, shared with the gap list (half each on a short terminal, 60% to the lanes on a tall one).
        The lanes' own height is the cap (not a percentage of a parent that clips them), so scrolling a lane
        into view scrolls it into what is shown."""
        if header_lines is None:
            header_lines = self._header_lines
        self._header_lines = header_lines
        h = self.size.height
        avail = max(h - header_lines - 2 - 2, 0)
        cap = max(int(avail * (0.5 if h < 36 else 0.6)), 1)
        lv = self.lanes
        if lv.styles.max_height is None or int(lv.styles.max_height.value) != cap:
            lv.styles.max_height = cap
            self.call_after_refresh(lv.ensure_cursor_visible)

    def _draw_status(self, msg: str) -> None:
        sc = self.scene
        rows = sc.display.rows()
        ev = event_under_cursor(sc, self.lanes.cells_width()) if rows and 0 <= sc.display.cursor < len(rows) else -1
        if sc.set_link(sc.active, ev):
            self.lanes.refresh()  # the mark of the other end moved
        parts = ([msg] if msg else []) + status_parts(sc, ev, self.fmt.d)
        # fixed height: no layout pass, only this line is redrawn
        self.widget("#status", Static).update(Text(self.fmt.text("  " + " | ".join(parts)), no_wrap=True,
                                                      overflow=self.fmt.ov), layout=False)

    def _move_list_cursor(self) -> None:
        sc = self.scene
        gl = self.widget(GapList)
        if 0 <= sc.gaps.selected < MAX_LIST and gl.row_count > sc.gaps.selected:
            gl.move_cursor(row=sc.gaps.selected, animate=False, notify=False)  # the selection is there already

    # ================================================================ the keys: each changes the scene, then ``update``
    async def action_view(self, name: str, footer: bool = False) -> None:
        """1 2 3 (``footer``: the binding the table views' footer shows; the same action)."""
        if name != "lanes" and not self.query(TableView):  # mounted (hidden) the first time one of them is shown
            await self.query_one("#views", ContentSwitcher).mount_all(table_views(self.glyphs))
            for box in self.query(".infobox"):  # its title shows when it has the focus (Tab from the table)
                box.border_title = "detail"
        self.switch_view(name)  # the watcher fills the table shown (``Shown.view``)
        self.update(keep_msg=True)

    def view_name(self) -> str:
        try:
            current = self.widget("#views", ContentSwitcher).current or "lanesview"
        except NoMatches:  # (not composed yet: the footer asks check_action early)
            return "lanes"
        return current[:-len("view")]

    def action_open_row(self, view: str) -> None:
        """Enter on a row of the kernels or findings table (``view``): what the table's own Enter does (the footer
        shows this binding, which says what that is there)."""
        table = self.focused
        if isinstance(table, DataTable):
            table.action_select_cursor()

    def _scrolled(self):
        """The widget with the focus when it scrolls vertically and binds no up / down of its own to j / k (an
        info box of the kernels or findings view); else None."""
        w = self.focused
        if w is None or isinstance(w, (LanesView, GapList, DataTable)) or not w.allow_vertical_scroll:
            return None
        return w

    def action_scroll_text(self, d: int) -> None:
        """↑ ↓ / j k on a pane that scrolls (its own bindings take the arrows first: these are j and k)."""
        w = self._scrolled()
        if w is not None:
            w.scroll_relative(y=int(d), animate=False, immediate=True)

    def switch_view(self, name: str) -> None:
        self.query_one("#views", ContentSwitcher).current = "lanesview" if name == "lanes" else name + "view"
        if name == "lanes":
            self.lanes.focus()
        else:
            self.query_one(f"#{name}", DataTable).focus()

    def action_diff(self) -> None:
        """Before/after (tui/diffview.py): this tab (A) against the next one (B)."""
        pair = self.app.diff_pair()
        if pair is None:
            return self.say("D compares two analysed single-trace tabs: open two traces")
        a, b = (os.path.basename(p.path) for p in pair)
        self.say(f"comparing {a} (A, before) with {b} (B, after) ... (x in the diff swaps them)")
        self._build_diff(*pair)

    @work(thread=True, exclusive=True, group="diff")
    def _build_diff(self, a, b) -> None:
        """The diff's own lanes and comparison are built off the event loop (seconds on a large trace)."""
        from .diffscene import DiffScene
        from .diffview import DiffScreen

        try:
            sc = DiffScene(a.path, a.model, a.analysis, b.path, b.model, b.analysis)
        except Exception as exc:  # noqa: BLE001 - one line in the status bar, the explorer stays
            if debugging(exc):
                raise
            self.app.call_from_thread(self.say, failure("before/after", exc))
            return
        self.app.call_from_thread(self.app.push_screen, DiffScreen(sc, self.glyphs))

    def action_next_trace(self) -> None:
        if not self.app.next_tab():
            self.say("t: one trace loaded, no other tab")

    @on(GapList.Highlighted, "#gaplist")
    def _gap_highlighted(self, ev: GapList.Highlighted) -> None:
        self.gap_highlighted(ev.key)

    # ================================================================ detail, help, export
    def action_detail(self) -> None:
        sc = self.scene
        if sc is None:
            return
        if self.focused is self.query_one(GapList) or self.focused is self.query_one("#stack"):
            if sc.gaps.selected_gap >= 0:
                self.app.push_screen(DetailScreen(stack_text(sc, self.glyphs, full=True), self.glyphs.ascii))
            return
        gid = gap_under_cursor(self.scene, self.lanes.cells_width())
        if gid >= 0:
            where = np.flatnonzero(sc.gaps.order == gid)
            if where.size:
                self.goto_gap(int(where[0]))
            self.app.push_screen(DetailScreen(stack_text(sc, self.glyphs, full=True), self.glyphs.ascii))
            return
        ev = event_under_cursor(self.scene, self.lanes.cells_width())
        if ev < 0:
            return self.say("nothing under the cursor")
        self.app.push_screen(DetailScreen(event_text(sc, ev, self.glyphs), self.glyphs.ascii))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.glyphs, self.KEY_HELP))

    def action_legend(self) -> None:
        self.app.push_screen(HelpScreen(self.glyphs, self.KEY_HELP, legend_only=True))

    def action_export(self) -> None:
        from .export import export_message

        if self.scene is None:
            return
        try:
            paths = self.app.export_findings()
        except Exception as exc:  # noqa: BLE001 - a full disk, a folder we cannot write: one line
            return self.say(failure("export", exc))
        status, lines = export_message(paths)
        self.say(status)
        # one line each: the text is made safe line by line (safe() shows a newline inside a name as "\n")
        self.notify("\n".join(self.fmt.text(s) for s in lines), title="export", timeout=8)

    def action_escape(self) -> None:
        sc = self.scene
        if self.view_name() != "lanes":  # first back to the lanes (the search there ended on the hidden lanes)
            self.switch_view("lanes")
            return self.update(keep_msg=True)
        inp = self.search_box()
        if (inp is not None and inp.has_class("-on")) or (sc is not None and sc.search.query):
            if inp is not None:
                inp.close()
                inp.value = ""
            if sc is not None:
                sc.find("")
            self.lanes.focus()
            return self.update()
        if sc is not None and (sc.mark is not None or sc.span_sel is not None):
            sc.mark = sc.span_sel = None  # the range selection ends
            self.update("range cleared")
        elif sc is not None and (sc.gaps.finding_filter is not None or sc.gaps.cause_filter is not None):
            keep = sc.gaps.selected_gap  # every gap again, the selected one still selected
            sc.apply_filter(None)
            where = np.flatnonzero(sc.gaps.order == keep)
            self.select_gap(int(where[0]) if where.size else 0)
            self.update("all gaps")
        elif self.app.loading is not None:  # nothing else to end (a preview, or no trace yet): the load stops
            self.app.action_cancel_load()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """Whether a key acts now: True; False: it does not apply here (not in the footer, and the key does
        nothing: the lanes' keys in the kernels and findings views); None: it applies, not yet (greyed: no
        analysis yet, one trace for t)."""
        sc = self.scene
        view = self.view_name()
        if action in LANES_ONLY and view != "lanes":
            return False
        if action == "view":
            # the footer's entry (a second parameter): only in a table view, for another view
            return view != "lanes" and parameters[0] != view if len(parameters) > 1 else True
        if action == "open_row":
            return view == parameters[0] and isinstance(self.focused, DataTable)
        if action == "scroll_text":
            return self._scrolled() is not None
        if action in ("next_gap", "prev_gap", "focus_gap", "cause"):
            if sc is None:
                return None
            if action in ("next_gap", "prev_gap") and sc.search.stepping:
                return True
            if not sc.any_analysis or not sc.gaps.order.size:
                return None
            if action == "cause" and not sc.gaps.all_listed.size:
                return None
            return True
        if action == "next_trace":
            return True if self.app.tab[1] else None
        if action in ("origin", "link", "mark", "mark_range"):
            return True if sc is not None else None
        if action == "diff":
            return True if self.app.diff_pair() is not None else None
        if action in ("pan", "zoom", "fit", "cursor", "event", "expand", "search", "detail", "export"):
            if sc is None or (action == "export" and not sc.exportable):  # a preview, a pending list: never
                return None
            return True
        return True

    def on_resize(self, event) -> None:
        self._fit_lanes()
        if self.scene is not None:
            self.lanes.sync_rows()
            if self.scene.multi:
                self.refresh_header()  # the ranks line is fitted to the width
            if (self.size.width < NARROW) != self.query_one(GapList).narrow:
                self.fill_gap_list()  # the cause column's width and names follow the width
            if self.query(TableView) and self.size.width != self._tables_width:
                self.fill_tables()  # the kernels' columns follow the width

    # ================================================================ the gap list and the tables
    def fill_gap_list(self) -> None:
        self.query_one(GapList).fill(self.scene, self.glyphs, self.size.width)

    def fill_tables(self) -> None:
        if self.query(TableView):  # else filled when first shown (``watch_shown``: the view changed)
            self._tables_width = self.size.width
            for view in self.query(TableView):
                row = view.table.cursor_row
                view.fill(self.scene, self.size.width)
                if 0 < row < view.table.row_count:  # a resize keeps the highlighted row (and its info box)
                    view.table.move_cursor(row=row)

    @on(TableView.FindKernel)
    def _find_kernel(self, ev: TableView.FindKernel) -> None:
        """Enter on a kernel (view 2): the lanes, on its first call."""
        sc = self.scene
        self.switch_view("lanes")
        if sc.find(ev.name):
            self.show_match(sc.current_match())
        self.update()

    @on(TableView.ShowGaps)
    def _show_finding_gaps(self, ev: TableView.ShowGaps) -> None:
        """Enter on an action or a finding (view 3): the gap list holds its gaps, largest first (n / N walk them,
        Esc shows all gaps again)."""
        sc = self.scene
        if ev.rows.size and sc.apply_finding(ev.part, ev.rows, ev.label):
            self.switch_view("lanes")
            self.select_gap(0)
            self.lanes.focus()
            self.update()
        else:
            self.say(f"{ev.label} lists no gap")

    @on(TableView.ShowKernels)
    async def _show_action_kernels(self, ev: TableView.ShowKernels) -> None:
        """Enter on a kernel action (view 3), or a trace whose plan leads with one (``opening_kernels``): the
        kernels view, its cursor on the first kernel listed of the action's."""
        await self.action_view("kernels")
        want = set(ev.names)
        at = next((n for n, (_, _, k) in enumerate(kernels_of(self.scene)) if k.name in want), None)
        if at is not None:
            self.query_one("#kernels", DataTable).move_cursor(row=at)
