"""What the explorer's screen (tui/main.py ``MainScreen``) redraws when what it shows changes: ``ScreenDraw``, a part
the screen holds. The screen's watcher hands it the old and the new ``Shown`` (tui/shown.py) and it redraws the
header, the lanes, the gap list, the tables, the stack panel, the status line and the footer where the fields they
depend on changed, and only those; a new size of the terminal refits them (``resized``)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .cut import cut
from .gaplist import MAX_LIST, NARROW, GapList
from .navigate import event_under_cursor, status_parts
from .panels import HEADER_LINES, StackPanel, header_text, match_text, panel_stack_text
from .shown import Shown
from .tables import TableView
from .timeline import Axis


class ScreenDraw:
    """The redraws of the screen ``main``."""

    def __init__(self, main) -> None:
        self.main = main
        self.header_lines = 2  # the header's lines the lanes' height was fitted to
        self.tables_width = 0  # the terminal width the kernels table was filled for

    def shown_changed(self, old: Shown, new: Shown) -> None:
        """Redraw what depends on the fields of ``new`` that differ from ``old``."""
        main = self.main
        sc = main.scene
        lv = main.lanes
        axis = main.widget("#axis", Axis)
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
        if data or new.selected != old.selected or new.gaps != old.gaps or new.time_mode != old.time_mode or \
                new.search != old.search:
            self.move_list_cursor()
            panel = main.widget("#stack", StackPanel)
            if sc.search.in_panel and sc.search.current() is not None:  # a search's match: its detail
                panel.show(match_text(sc, main.glyphs), "match")
            else:
                panel.show(panel_stack_text(sc, main.glyphs), "stack")
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
        self.draw_status(new.msg)
        if new.keys != old.keys:
            main.refresh_bindings()

    def refresh_header(self) -> None:
        main = self.main
        sc = main.scene
        if sc is None:
            return
        hd = main.query_one("#header", Static)
        width = hd.size.width or main.size.width
        tab, tabs = main.app.tab
        text = header_text(sc, tab, tabs, main.glyphs, width=width)
        hd.update(text)
        self.fit_lanes(min(len(text.plain.split("\n")), HEADER_LINES))  # the header's max-height (gapscope.tcss)

    def fit_lanes(self, header_lines: int | None = None) -> None:
        """The lanes' height cap, as rows: what the screen has left after the header, the axis, the status and
        key lines, shared with the gap list (half each on a short terminal, 60% to the lanes on a tall one).
        The lanes' own height is the cap (not a percentage of a parent that clips them), so scrolling a lane
        into view scrolls it into what is shown."""
        if header_lines is None:
            header_lines = self.header_lines
        self.header_lines = header_lines
        h = self.main.size.height
        avail = max(h - header_lines - 2 - 2, 0)
        cap = max(int(avail * (0.5 if h < 36 else 0.6)), 1)
        lv = self.main.lanes
        if lv.styles.max_height is None or int(lv.styles.max_height.value) != cap:
            lv.styles.max_height = cap
            self.main.call_after_refresh(lv.ensure_cursor_visible)

    def draw_status(self, msg: str) -> None:
        main = self.main
        sc = main.scene
        rows = sc.display.rows()
        ev = event_under_cursor(sc, main.lanes.cells_width()) if rows and 0 <= sc.display.cursor < len(rows) else -1
        if sc.launch.mark(sc.active, ev):
            main.lanes.refresh()  # the mark of the other end moved
        parts = ([msg] if msg else []) + status_parts(sc, ev, main.fmt.d)
        # fixed height: no layout pass, only this line is redrawn (cut with "..." on an ASCII terminal, whose status
        # line clips without a mark)
        line = main.fmt.text("  " + " | ".join(parts))
        if main.fmt.ascii:
            line = cut(line, main.size.width, True)
        main.widget("#status", Static).update(Text(line, no_wrap=True, overflow=main.fmt.ov), layout=False)

    def move_list_cursor(self) -> None:
        sc = self.main.scene
        gl = self.main.widget(GapList)
        if 0 <= sc.gaps.selected < MAX_LIST and gl.row_count > sc.gaps.selected:
            gl.move_cursor(row=sc.gaps.selected, animate=False, notify=False)  # the selection is there already

    def fill_gap_list(self) -> None:
        main = self.main
        main.query_one(GapList).fill(main.scene, main.glyphs, main.size.width)

    def fill_tables(self) -> None:
        main = self.main
        if main.query(TableView):  # else filled when first shown (``shown_changed``: the view changed)
            self.tables_width = main.size.width
            for view in main.query(TableView):
                row = view.table.cursor_row
                view.fill(main.scene, main.size.width)
                if 0 < row < view.table.row_count:  # a resize keeps the highlighted row (and its info box)
                    view.table.move_cursor(row=row)

    def resized(self) -> None:
        """The terminal's new size: the lanes' height, and what is fitted to the width."""
        main = self.main
        self.fit_lanes()
        if main.scene is not None:
            main.lanes.sync_rows()
            if main.scene.multi:
                self.refresh_header()  # the ranks line is fitted to the width
            if (main.size.width < NARROW) != main.query_one(GapList).narrow:
                self.fill_gap_list()  # the cause column's width and names follow the width
            if main.query(TableView) and main.size.width != self.tables_width:
                self.fill_tables()  # the kernels' columns follow the width
