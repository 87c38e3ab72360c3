"""The explorer's keys on the lanes pane (tui/app/timeline.py): the time window (pan, zoom, fit), the time and
lane cursors, folding and expanding lanes, the range (m, M), the launch link (v) and the time origin (o).

``LaneKeys`` is a part of the explorer's screen (``MainScreen``, tui/app/main.py): each action changes the
scene and calls the screen's ``update``, whose new state redraws what changed (tui/app/shown.py). The keys
themselves are bound in tui/app/keys.py, the one table the help and the README are checked against.
"""

from __future__ import annotations

from .navigate import event_under_cursor, move_cursor, next_event_start, range_at_cursor
from .screens import DetailScreen


class LaneKeys:
    """The lanes pane's actions (a part of ``MainScreen``)."""

    def action_pan(self, frac: float) -> None:
        if self.scene is not None:
            self.scene.view.pan(float(frac))
            self.update()

    def action_zoom(self, factor: float) -> None:
        if self.scene is not None:
            self.scene.view.zoom(float(factor), self.lanes.cells_width())
            self.update()

    def on_lanes_view_zoom(self, ev) -> None:
        """Ctrl or Shift and the wheel on the lanes."""
        self.action_zoom(ev.factor)

    def on_lanes_view_clicked(self, ev) -> None:
        """A click on the lanes moved its cursors."""
        self.update()

    def action_fit(self) -> None:
        if self.scene is not None:
            self.scene.view.fit(*self.scene.fit_extent())
            self.update()

    def action_cursor(self, d: int) -> None:
        if self.scene is not None:
            move_cursor(self.scene, int(d), self.lanes.cells_width())
            self.update()

    def action_event(self, d: int) -> None:
        sc = self.scene
        if sc is None:
            return
        t = next_event_start(sc, d)
        if isinstance(t, str):  # why there is none
            return self.say(t)
        sc.view.ensure_visible(t)
        self.update()

    def action_lane(self, d: int) -> None:
        sc = self.scene
        if sc is None:
            return
        n = len(sc.rows())
        if n:
            sc.lane_cursor = max(0, min(sc.lane_cursor + int(d), n - 1))
            self.update()

    def action_expand(self) -> None:
        sc = self.scene
        if sc is None:
            return
        rows = sc.rows()
        row = rows[sc.lane_cursor] if 0 <= sc.lane_cursor < len(rows) else None
        if row is not None and row.lane is None:
            # a folded row shows its lanes (every lane, until space on a group header folds them again)
            if not (row.folded or not sc.fold_empty):
                return self.say("space: nothing to expand on a group header")
            sc.fold_empty = not sc.fold_empty
            sc.invalidate_rows()
            self.update("every lane shown (space on a group header folds the empty ones again)"
                        if not sc.fold_empty else "lanes with nothing in view folded")
        elif sc.toggle_expand():
            self.update()
        else:
            self.say("space: only a CPU thread with a recorded stack expands")

    def action_mark(self) -> None:
        """`m`: mark the cursor's time; the second `m` selects the range between the two and shows its stats."""
        sc = self.scene
        if sc is None:
            return
        t = sc.view.cursor
        if sc.mark is None or sc.mark == t:
            sc.mark, sc.span_sel = t, None
            return self.update(f"range starts at +{self.fmt.d(t - sc.origin)}: move the cursor, m again ends it")
        a, b = sorted((sc.mark, t))
        sc.mark = None
        self.show_range(a, b)

    def action_mark_range(self) -> None:
        """`M`: the range (step, record_function) or event under the cursor as the selected range."""
        sc = self.scene
        if sc is None:
            return
        span = range_at_cursor(sc, event_under_cursor(sc, self.lanes.cells_width()))
        if span is not None:
            self.show_range(*span)
        else:
            self.say("M: put the cursor on a step, a range or an event (or use m twice)")

    def show_range(self, a: int, b: int) -> None:
        from .rangestats import range_text

        sc = self.scene
        sc.span_sel = (a, max(b, a + 1))
        self.update()
        self.app.push_screen(DetailScreen(range_text(sc, a, max(b, a + 1), self.glyphs), self.glyphs.ascii))

    def action_link(self) -> None:
        """Jump between a kernel and its launch (the other end marked on the lanes)."""
        sc = self.scene
        if sc is None:
            return
        if sc.link is None:
            return self.say("v: put the cursor on a kernel, a copy or a launch call first")
        part, ev, row, t = sc.link
        sc.view.ensure_visible(t)
        r = sc.row_of_event(ev, part)
        if r >= 0:
            sc.lane_cursor = r
        self.update()

    def action_origin(self) -> None:
        """Times from the analysed window's start (the report's) or in the trace's own time."""
        sc = self.scene
        if sc is None:
            return
        sc.time_mode = "trace" if sc.time_mode == "window" else "window"
        self.update("times: " + ("the trace's own timestamps" if sc.time_mode == "trace"
                                 else "from the analysed window's start, as the report"))
