"""The explorer's screen: the header, the lanes over a time axis, the gap list and the stack panel of the
selected gap (the kernels and findings views behind 2 and 3), the status line and the keys. The App
(tui/app/app.py) loads the traces and hands the scenes over; this screen draws them and answers the keys."""

from __future__ import annotations

import os

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import ContentSwitcher, DataTable, Footer, Input, Static

from . import glyphs as G
from . import keys
from .diffview import diff_pair
from .gaplist import MAX_LIST, NARROW, GapList
from .loading import debugging, failure
from .navigate import (event_under_cursor, focus_context, focus_gap, gap_under_cursor, move_cursor,
                       next_event_start, range_at_cursor, show_event, status_parts)
from .panels import StackPanel, event_text, header_text, stack_text
from .scene import Scene
from .screens import DetailScreen, HelpScreen
from .search import SearchInput
from .tables import Fmt, TableView, table_views
from .timeline import Axis, LanesView


class MainScreen(Screen):
    BINDINGS = keys.BINDINGS  # tui/app/keys.py: each key with its help text

    def __init__(self, glyphs: G.Glyphs) -> None:
        super().__init__()
        self.glyphs = glyphs
        self.fmt = Fmt(glyphs)
        self._status_msg = ""
        self._header_lines = 2
        self._tables_width = 0  # the terminal width the kernels table was filled for

    # ================================================================ layout
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with ContentSwitcher(initial="lanesview", id="views"):
            with Vertical(id="lanesview"):
                with Vertical(id="timeline"):
                    lv = LanesView(self.glyphs, id="lanes")
                    yield Axis(self.glyphs, lv, id="axis")
                    yield lv
                with Horizontal(id="bottom"):
                    yield GapList(id="gaplist")
                    yield StackPanel(id="stack")
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
        if not app.scenes and app.error is None:
            self.show_loading(app.loading or f"loading {os.path.basename(app.paths[0])} ... (Esc cancels)")
        self.lanes.focus()
        app.screen_mounted()

    @property
    def scene(self) -> Scene | None:
        return self.app.scene

    @property
    def lanes(self) -> LanesView:
        return self.query_one("#lanes", LanesView)

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

    # ================================================================ drawing
    def show_scene(self, i: int) -> None:
        self.app.current = i
        sc = self.scene
        self.lanes.set_scene(sc)
        self.query_one("#axis", Axis).scene = sc
        self.fill_gap_list()
        self.fill_tables()
        if not sc.visited and sc.order.size and sc.selected >= 0:
            sc.visited = True  # a tab opens on its largest gap, as the first one does
            self.goto_gap(sc.selected)
        self.refresh_all()

    def refresh_header(self) -> None:
        sc = self.scene
        if sc is None:
            return
        hd = self.query_one("#header", Static)
        width = hd.size.width or self.size.width
        text = header_text(sc, self.app.current, len(self.app.scenes), self.glyphs, width=width)
        hd.update(text)
        self._fit_lanes(min(len(text.plain.split("\n")), 6))  # the header's max-height (gapscope.tcss)

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

    def refresh_all(self) -> None:
        self.refresh_header()
        self.refresh_view()
        self.refresh_stack()
        self.refresh_bindings()

    def refresh_view(self) -> None:
        self._status_msg = ""  # messages last until the next move
        sc = self.scene
        if sc is not None and len(sc.rows()) != self.lanes.virtual_size.height:
            # lanes folded or unfolded by the move (nothing in view)
            self.lanes.sync_rows()
            self.lanes.ensure_cursor_visible()
        self.lanes.refresh()
        self.query_one("#axis", Axis).refresh()
        self.refresh_status()

    def refresh_stack(self) -> None:
        sc = self.scene
        if sc is None:
            return
        self.query_one("#stack", StackPanel).set_text(stack_text(sc, self.glyphs))

    def refresh_status(self, msg: str | None = None) -> None:
        sc = self.scene
        if msg is not None:
            self._status_msg = msg
        if sc is None:
            return
        rows = sc.rows()
        ev = event_under_cursor(sc, self.lanes.cells_width()) if rows and 0 <= sc.lane_cursor < len(rows) else -1
        if sc.set_link(sc.active, ev):
            self.lanes.refresh()  # the mark of the other end moved
        parts = ([self._status_msg] if self._status_msg else []) + status_parts(sc, ev, self.fmt.d)
        # fixed height: no layout pass, only this line is redrawn
        self.query_one("#status", Static).update(Text(self.fmt.text("  " + " | ".join(parts)), no_wrap=True,
                                                      overflow=self.fmt.ov), layout=False)

    def goto_gap(self, pos: int, *, list_cursor: bool = True, context: float = 1.0) -> None:
        sc = self.scene
        if sc is None or not sc.any_analysis or not sc.order.size:
            return
        gid = sc.select(pos)
        pos = sc.selected
        focus_gap(sc, gid, self.lanes.cells_width(), context=context)
        self.lanes.ensure_cursor_visible()
        if list_cursor and pos < MAX_LIST:
            gl = self.query_one(GapList)
            if gl.row_count > pos:
                gl.move_cursor(row=pos, animate=False)
        self.refresh_stack()
        self.refresh_view()

    def action_next_gap(self) -> None:
        self.app.user_picked = True
        sc = self.scene
        if sc is not None and sc.search_query and sc.matches.size:
            return self.step_match(1)
        if sc is not None and sc.order.size:
            self.goto_gap(min(sc.selected + 1, sc.order.size - 1) if sc.selected >= 0 else 0)

    def action_prev_gap(self) -> None:
        self.app.user_picked = True
        sc = self.scene
        if sc is not None and sc.search_query and sc.matches.size:
            return self.step_match(-1)
        if sc is not None and sc.order.size:
            self.goto_gap(max(sc.selected - 1, 0))

    def action_focus_gap(self) -> None:
        """`f`: the selected gap with its context; shown so already (after `n`), tighter (focus_context)."""
        sc = self.scene
        if sc is not None and sc.selected_gap >= 0:
            ctx, msg = focus_context(sc, self.lanes.cells_width())
            self.goto_gap(sc.selected, context=ctx)
            if msg:
                self.refresh_status(msg)

    @on(GapList.Highlighted, "#gaplist")
    def _gap_highlighted(self, ev: GapList.Highlighted) -> None:
        sc = self.scene
        key = ev.key
        if sc is None or key is None or not str(key).isdigit():
            return
        pos = int(key)
        if pos != sc.selected:
            self.app.user_picked = True
            self.goto_gap(pos, list_cursor=False)

    def action_pan(self, frac: float) -> None:
        if self.scene is not None:
            self.scene.view.pan(float(frac))
            self.refresh_view()

    def action_zoom(self, factor: float) -> None:
        if self.scene is not None:
            self.scene.view.zoom(float(factor), self.lanes.cells_width())
            self.refresh_view()

    def action_fit(self) -> None:
        if self.scene is not None:
            self.scene.view.fit(*self.scene.fit_extent())
            self.refresh_view()

    def action_cursor(self, d: int) -> None:
        if self.scene is not None:
            move_cursor(self.scene, int(d), self.lanes.cells_width())
            self.refresh_view()

    def action_event(self, d: int) -> None:
        sc = self.scene
        if sc is None:
            return
        t = next_event_start(sc, d)
        if isinstance(t, str):  # why there is none
            self.refresh_status(t)
            return
        sc.view.ensure_visible(t)
        self.refresh_status("")
        self.refresh_view()

    def move_lane(self, d: int) -> None:
        sc = self.scene
        if sc is None:
            return
        n = len(sc.rows())
        if not n:
            return
        old = sc.lane_cursor
        sc.lane_cursor = max(0, min(sc.lane_cursor + d, n - 1))
        top = self.lanes.scroll_offset.y
        self.lanes.ensure_cursor_visible()
        if self.lanes.scroll_offset.y == top:
            # only the two rows whose label changed are redrawn (small updates over slow links)
            self.lanes.refresh_line(old)
            self.lanes.refresh_line(sc.lane_cursor)
            self._status_msg = ""
            self.refresh_status()
        else:
            self.refresh_view()

    def action_lane(self, d: int) -> None:
        self.move_lane(int(d))

    def action_expand(self) -> None:
        sc = self.scene
        if sc is None:
            return
        rows = sc.rows()
        row = rows[sc.lane_cursor] if 0 <= sc.lane_cursor < len(rows) else None
        if row is not None and row.lane is None:
            # a folded row shows its lanes (every lane, until space on a group header folds them again)
            if not (row.folded or not sc.fold_empty):
                return self.refresh_status("space: nothing to expand on a group header")
            sc.fold_empty = not sc.fold_empty
            sc.invalidate_rows()
            self._relayout()
            self.refresh_status("every lane shown (space on a group header folds the empty ones again)"
                                if not sc.fold_empty else "lanes with nothing in view folded")
        elif sc.toggle_expand():
            self._relayout()
        else:
            self.refresh_status("space: only a CPU thread with a recorded stack expands")

    def _relayout(self) -> None:
        """The lanes' rows changed (folded, expanded): their number, the cursor's row in view, the screen."""
        self.lanes.sync_rows()
        self.lanes.ensure_cursor_visible()
        self.refresh_view()

    def action_cause(self, d: int) -> None:
        sc = self.scene
        if sc is None or not sc.any_analysis:
            return
        from ..analysis import CAUSES

        present = sorted(set(sc.g_cause[sc.all_listed].tolist()))
        cycle = [None] + present
        i = cycle.index(sc.cause_filter) if sc.cause_filter in cycle else 0
        sc.apply_filter(cycle[(i + int(d)) % len(cycle)])
        self.fill_gap_list()
        if sc.selected >= 0:
            self.goto_gap(0)
        name = "all causes" if sc.cause_filter is None else CAUSES[sc.cause_filter]
        self.refresh_status(f"gaps: {name} ({sc.order.size})")
        self.refresh_stack()
        self.lanes.refresh()
        self.query_one("#axis", Axis).refresh()

    async def action_view(self, name: str) -> None:
        if name != "lanes":
            if not self.query(TableView):  # mounted (hidden) the first time one of them is shown
                await self.query_one("#views", ContentSwitcher).mount_all(table_views(self.glyphs))
            self.fill_tables()  # the tables follow the active rank
        self._switch_view(name)

    def _switch_view(self, name: str) -> None:
        self.query_one("#views", ContentSwitcher).current = "lanesview" if name == "lanes" else name + "view"
        if name == "lanes":
            self.lanes.focus()
        else:
            self.query_one(f"#{name}", DataTable).focus()
        self.refresh_bindings()

    def action_diff(self) -> None:
        """Before/after (tui/app/diffview.py): this tab (A) against the next one (B)."""
        pair = diff_pair(self.app.scenes, self.app.current)
        if pair is None:
            self.refresh_status("D compares two analysed single-trace tabs: open two traces")
            return
        a, b = (os.path.basename(p.path) for p in pair)
        self.refresh_status(f"comparing {a} (A, before) with {b} (B, after) ... (x in the diff swaps them)")
        self._build_diff(*pair)

    @work(thread=True, exclusive=True, group="diff")
    def _build_diff(self, a, b) -> None:
        """The diff's own lanes and comparison are built off the event loop (seconds on a large trace)."""
        from .diffview import DiffScene, DiffScreen

        try:
            sc = DiffScene(a.path, a.model, a.analysis, b.path, b.model, b.analysis)
        except Exception as exc:  # noqa: BLE001 - one line in the status bar, the explorer stays
            if debugging(exc):
                raise
            self.app.call_from_thread(self.refresh_status, failure("before/after", exc))
            return
        self.app.call_from_thread(self.app.push_screen, DiffScreen(sc, self.glyphs))

    def action_next_trace(self) -> None:
        if len(self.app.scenes) > 1:
            self.show_scene((self.app.current + 1) % len(self.app.scenes))
        else:
            self.refresh_status("t: one trace loaded, no other tab")

    def action_mark(self) -> None:
        """`m`: mark the cursor's time; the second `m` selects the range between the two and shows its stats."""
        sc = self.scene
        if sc is None:
            return
        t = sc.view.cursor
        if sc.mark is None or sc.mark == t:
            sc.mark, sc.span_sel = t, None
            self.refresh_view()
            self.refresh_status(f"range starts at +{self.fmt.d(t - sc.origin)}: move the cursor, m again ends it")
            return
        a, b = sorted((sc.mark, t))
        sc.mark = None
        self._show_range(a, b)

    def action_mark_range(self) -> None:
        """`M`: the range (step, record_function) or event under the cursor as the selected range."""
        sc = self.scene
        if sc is None:
            return
        span = range_at_cursor(sc, event_under_cursor(sc, self.lanes.cells_width()))
        if span is not None:
            self._show_range(*span)
        else:
            self.refresh_status("M: put the cursor on a step, a range or an event (or use m twice)")

    def _show_range(self, a: int, b: int) -> None:
        from .rangestats import range_text

        sc = self.scene
        sc.span_sel = (a, max(b, a + 1))
        self.refresh_view()
        self.app.push_screen(DetailScreen(range_text(sc, a, max(b, a + 1), self.glyphs), self.glyphs.ascii))

    def action_link(self) -> None:
        """Jump between a kernel and its launch (the other end marked on the lanes)."""
        sc = self.scene
        if sc is None:
            return
        if sc.link is None:
            self.refresh_status("v: put the cursor on a kernel, a copy or a launch call first")
            return
        part, ev, row, t = sc.link
        sc.view.ensure_visible(t)
        r = sc.row_of_event(ev, part)
        if r >= 0:
            sc.lane_cursor = r
            self.lanes.ensure_cursor_visible()
        self.refresh_view()

    def action_origin(self) -> None:
        """Times from the analysed window's start (the report's) or in the trace's own time."""
        sc = self.scene
        if sc is None:
            return
        sc.time_mode = "trace" if sc.time_mode == "window" else "window"
        self.fill_gap_list()
        self.refresh_all()
        self.refresh_status("times: " + ("the trace's own timestamps" if sc.time_mode == "trace"
                                         else "from the analysed window's start, as the report"))

    async def action_search(self) -> None:
        inp = self._search_box()
        if inp is None:
            inp = SearchInput()
            await self.mount(inp, before=self.query_one("#status"))
        inp.open(self.scene.search_query if self.scene is not None else "")

    def _search_box(self) -> Input | None:
        """The search box, once mounted (the first /)."""
        try:
            return self.query_one("#search", Input)
        except NoMatches:
            return None

    def step_match(self, d: int) -> None:
        sc = self.scene
        ev = sc.step_match(d)
        if ev >= 0:
            self.show_match(ev)

    def show_match(self, ev: int) -> None:
        if show_event(self.scene, ev, self.lanes.cells_width()):
            self.lanes.ensure_cursor_visible()
        self.refresh_view()

    def action_prev_match(self) -> None:
        sc = self.scene
        if sc is not None and sc.matches.size:
            self.step_match(-1)

    def action_detail(self) -> None:
        sc = self.scene
        if sc is None:
            return
        if self.focused is self.query_one(GapList) or self.focused is self.query_one("#stack"):
            if sc.selected_gap >= 0:
                self.app.push_screen(DetailScreen(stack_text(sc, self.glyphs, full=True), self.glyphs.ascii))
            return
        gid = gap_under_cursor(self.scene, self.lanes.cells_width())
        if gid >= 0:
            where = np.flatnonzero(sc.order == gid)
            if where.size:
                self.goto_gap(int(where[0]))
            self.app.push_screen(DetailScreen(stack_text(sc, self.glyphs, full=True), self.glyphs.ascii))
            return
        ev = event_under_cursor(self.scene, self.lanes.cells_width())
        if ev < 0:
            self.refresh_status("nothing under the cursor")
            return
        self.app.push_screen(DetailScreen(event_text(sc, ev, self.glyphs), self.glyphs.ascii))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.glyphs))

    def action_legend(self) -> None:
        self.app.push_screen(HelpScreen(self.glyphs, legend_only=True))

    def action_export(self) -> None:
        from .export import export_all, export_message

        sc = self.scene
        if sc is None:
            return
        analyses = [p.analysis for s in self.app.scenes for p in s.parts if p.analysis is not None]
        try:
            svg = self.app.export_screenshot()
            paths = export_all(analyses, sc.parts[0].path, svg)
        except Exception as exc:  # noqa: BLE001 - a full disk, a folder we cannot write: one line
            return self.refresh_status(failure("export", exc))
        self.app.last_export, (status, lines) = paths, export_message(paths)
        self.refresh_status(status)
        # one line each: the text is made safe line by line (safe() shows a newline inside a name as "\n")
        self.notify("\n".join(self.fmt.text(s) for s in lines), title="export", timeout=8)

    def action_escape(self) -> None:
        if self.app.loading is not None:
            return self.app.action_cancel_load()
        sc = self.scene
        inp = self._search_box()
        if (inp is not None and inp.has_class("-on")) or (sc is not None and sc.search_query):
            if inp is not None:
                inp.remove_class("-on")
                inp.value = ""
            if sc is not None:
                sc.search("")
            self.lanes.focus()
            self.refresh_status("")
            return
        sw = self.query_one("#views", ContentSwitcher)
        if sw.current != "lanesview":
            self._switch_view("lanes")
        elif sc is not None and (sc.mark is not None or sc.span_sel is not None):
            sc.mark = sc.span_sel = None  # the range selection ends
            self.refresh_view()
            self.refresh_status("range cleared")
        elif sc is not None and (sc.finding_filter is not None or sc.cause_filter is not None):
            keep = sc.selected_gap  # every gap again, the selected one still selected
            sc.apply_filter(None)
            self.fill_gap_list()
            where = np.flatnonzero(sc.order == keep)
            self.goto_gap(int(where[0]) if where.size else 0)
            self.refresh_status("all gaps")

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        sc = self.scene
        if action in ("next_gap", "prev_gap", "focus_gap", "cause"):
            if sc is None:
                return None
            if action in ("next_gap", "prev_gap") and sc.search_query and sc.matches.size:
                return True
            if not sc.any_analysis or not sc.order.size:
                return None
            if action == "cause" and not sc.all_listed.size:
                return None
            return True
        if action == "next_trace":
            return True if self.app.scenes else None
        if action in ("origin", "link", "mark", "mark_range"):
            return True if sc is not None else None
        if action == "diff":
            return True if diff_pair(self.app.scenes, self.app.current) is not None else None
        if action in ("pan", "zoom", "fit", "cursor", "event", "expand", "search", "detail", "export"):
            if sc is None or (action == "export" and sc.model.partial):  # a preview is never exported
                return None
            sw = self.query_one("#views", ContentSwitcher)
            if action in ("pan", "zoom", "cursor", "event", "expand") and sw.current != "lanesview":
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
        if self.query(TableView):  # else filled when first shown (action_view)
            self._tables_width = self.size.width
            for view in self.query(TableView):
                row = view.table.cursor_row
                view.fill(self.scene, self.size.width)
                if 0 < row < view.table.row_count:  # a resize keeps the highlighted row (and its info box)
                    view.table.move_cursor(row=row)

    def find_in_lanes(self, name: str) -> None:
        """Enter on a kernel (view 2): the lanes, on its first call."""
        sc = self.scene
        self._switch_view("lanes")
        if sc.search(name):
            self.show_match(sc.current_match())
        self.refresh_bindings()

    def show_finding_gaps(self, part: int, rows, label: str) -> None:
        """Enter on a finding (view 3): the gap list holds its gaps, largest first (n / N walk them, Esc shows
        all gaps again)."""
        sc = self.scene
        if rows.size and sc.apply_finding(part, rows, label):
            self._switch_view("lanes")
            self.fill_gap_list()
            self.goto_gap(0)
            self.lanes.focus()
            self.refresh_bindings()
        else:
            self.refresh_status("this finding lists no gap")
