"""The explorer's keys on the lanes pane (tui/timeline.py): the time window (pan, zoom, fit), the time and
lane cursors, folding and expanding lanes, the range (m, M), the launch link (v) and the time origin (o).

``LaneKeys`` is a part the explorer's screen holds (``MainScreen``, tui/main.py; tui/keys.py ``Pane``): each
action changes the scene and calls the screen's ``update``, whose new state redraws what changed (tui/shown.py).
Its keys are ``LaneKeys.KEYS`` (tui/keys.py ``Key``: the keys, their help and their bindings); the screen binds
them with the other panes' (``MainScreen.BINDINGS``) and hands their actions here; the help and the README are
checked against them. A zoom with the wheel (``LanesView.Zoom``) is the screen's message, answered by
``action_zoom``.
"""

from __future__ import annotations

from textual.binding import Binding

from .keys import Key, Pane
from .navigate import event_under_cursor, move_cursor, next_event_start, range_at_cursor
from .screens import DetailScreen


class LaneKeys(Pane):
    """The lanes pane's actions (a part of ``MainScreen``)."""

    #: the lanes' keys, in the order of the actions below (``at``: their place in the help and the footer)
    KEYS = [
        Key("← → / h l / a d", "pan the time window",
            (Binding("left,h,a", "pan(-0.25)", "pan", show=False),
             Binding("right,l,d", "pan(0.25)", "pan", show=False)), at=20),
        Key("w s / + - / =", "zoom in / out about the cursor",
            (Binding("w,plus,equals_sign", "zoom(2.0)", "zoom", key_display="w/s"),
             Binding("s,minus", "zoom(0.5)", "zoom out", show=False)), at=30),
        Key("0 / Home", "fit the analysed window (the span the report's numbers are of)",
            (Binding("0,home", "fit", "fit", show=False),), at=80),
        Key("shift+← → / H L", "move the cursor one cell",
            (Binding("shift+left,H", "cursor(-1)", "cursor", show=False),
             Binding("shift+right,L", "cursor(1)", "cursor", show=False)), at=40),
        Key("[ ]", "cursor to the previous / next event on the lane",
            (Binding("left_square_bracket", "event(-1)", "prev event", show=False),
             Binding("right_square_bracket", "event(1)", "next event", show=False)), at=50),
        Key("space / x", "expand / collapse a CPU thread into its stack depth rows (on the launcher row: its outer "
            "frames; on a folded row: every lane)", (Binding("space,x", "expand", "expand", show=False),), at=70),
        Key("m", "mark the cursor's time; m again: stats of the range between (busy, idle, causes, kernels, host "
            "frames and ops by own time)", (Binding("m", "mark", "range", show=False),), at=190),
        Key("M", "the same for the step, range or event under the cursor",
            (Binding("M", "mark_range", "range of a step", show=False),), at=200),
        Key("v", "jump between a kernel and its launch call (the other end is marked on the lanes)",
            (Binding("v", "link", "launch/kernel", show=False),), at=180),
        Key("o", "times from the analysed window's start (as the report) or in the trace's own time",
            (Binding("o", "origin", "time origin", show=False),), at=170),
    ]

    def action_pan(self, frac: float) -> None:
        if self.scene is not None:
            self.scene.view.pan(float(frac))
            self.main.update()

    def action_zoom(self, factor: float) -> None:
        if self.scene is not None:
            self.scene.view.zoom(float(factor), self.main.lanes.cells_width())
            self.main.update()

    def action_fit(self) -> None:
        if self.scene is not None:
            self.scene.view.fit(*self.scene.fit_extent())
            self.main.update()

    def action_cursor(self, d: int) -> None:
        if self.scene is not None:
            move_cursor(self.scene, int(d), self.main.lanes.cells_width())
            self.main.update()

    def action_event(self, d: int) -> None:
        sc = self.scene
        if sc is None:
            return
        t = next_event_start(sc, d)
        if isinstance(t, str):  # why there is none
            return self.main.say(t)
        sc.view.ensure_visible(t)
        self.main.update()

    def action_lane(self, d: int) -> None:
        sc = self.scene
        if sc is None:
            return
        n = len(sc.display.rows())
        if n:
            sc.display.cursor = max(0, min(sc.display.cursor + int(d), n - 1))
            self.main.update()

    def action_expand(self) -> None:
        sc = self.scene
        if sc is None:
            return
        rows = sc.display.rows()
        row = rows[sc.display.cursor] if 0 <= sc.display.cursor < len(rows) else None
        if row is not None and row.lane is None:
            # a folded row shows its lanes (every lane, until space on a group header folds them again)
            if not (row.folded or not sc.display.fold_empty):
                return self.main.say("space: nothing to expand on a group header")
            sc.display.fold_empty = not sc.display.fold_empty
            sc.display.invalidate()
            self.main.update("every lane shown (space on a group header folds the empty ones again)"
                        if not sc.display.fold_empty else "lanes with nothing in view folded")
        elif sc.display.toggle_expand(sc.lanes):
            self.main.update()
        else:
            self.main.say("space: only a CPU thread with a recorded stack expands")

    def action_mark(self) -> None:
        """`m`: mark the cursor's time; the second `m` selects the range between the two and shows its stats."""
        sc = self.scene
        if sc is None:
            return
        t = sc.view.cursor
        if sc.mark is None or sc.mark == t:
            sc.mark, sc.span_sel = t, None
            return self.main.update(f"range starts at +{self.main.fmt.d(t - sc.origin)}: move the cursor, m again "
                                    "ends it")
        a, b = sorted((sc.mark, t))
        sc.mark = None
        self.show_range(a, b)

    def action_mark_range(self) -> None:
        """`M`: the range (step, record_function) or event under the cursor as the selected range."""
        sc = self.scene
        if sc is None:
            return
        span = range_at_cursor(sc, event_under_cursor(sc, self.main.lanes.cells_width()))
        if span is not None:
            self.show_range(*span)
        else:
            self.main.say("M: put the cursor on a step, a range or an event (or use m twice)")

    def show_range(self, a: int, b: int) -> None:
        from .rangestats import range_text

        sc = self.scene
        sc.span_sel = (a, max(b, a + 1))
        self.main.update()
        glyphs = self.main.glyphs
        self.main.app.push_screen(DetailScreen(range_text(sc, a, max(b, a + 1), glyphs), glyphs.ascii))

    def action_link(self) -> None:
        """Jump between a kernel and its launch (the other end marked on the lanes)."""
        sc = self.scene
        if sc is None:
            return
        if sc.launch.link is None:
            return self.main.say("v: put the cursor on a kernel, a copy or a launch call first")
        part, ev, row, t = sc.launch.link
        sc.view.ensure_visible(t)
        r = sc.row_of_event(ev, part)
        if r >= 0:
            sc.display.cursor = r
        self.main.update()

    def action_origin(self) -> None:
        """Times from the analysed window's start (the report's) or in the trace's own time."""
        sc = self.scene
        if sc is None:
            return
        sc.time_mode = "trace" if sc.time_mode == "window" else "window"
        self.main.update("times: " + ("the trace's own timestamps" if sc.time_mode == "trace"
                                 else "from the analysed window's start, as the report"))
