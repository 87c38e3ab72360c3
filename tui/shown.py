"""What the explorer's screen shows, as one frozen value (``Shown``): the screen holds it in a reactive attribute,
and its watcher redraws what depends on the fields that changed (tui/main.py ``MainScreen.watch_shown``).
A key changes the scene (tui/scene.py) and takes a new ``Shown``; it never calls the redraws itself.
``DiffShown`` is the same for the before/after screen (tui/diffview.py).

No textual here: a test builds and compares these without an app.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shown:
    scene: int = 0  # id() of the scene on screen; 0 before the first
    tabs: tuple = (0, 0)  # (this tab, tabs loaded)
    data: int = 0  # counted up by the app each time the scene's analyses (or their projections) change
    time_mode: str = ""
    gaps: tuple = ()  # the gap list's rows: (id of the gap order, cause filter, finding filter)
    selected: tuple = (-1, 0)  # (selected gap id, active part)
    window: tuple = ()  # (t0, t1, cursor, lo, hi): the time window and the cursor
    rows: tuple = ()  # (id of the display rows, how many)
    lane: int = 0  # the lane cursor (a display row)
    marks: tuple = ()  # (`m`'s mark, the selected range)
    search: tuple = ()  # (query, match shown, id of the matches, the stack panel shows the match)
    view: str = "lanes"  # lanes, kernels or findings (1 2 3)
    keys: tuple = ()  # what decides which keys apply (check_action): the footer is redrawn when it changes
    msg: str = ""  # the status line's message: it lasts until the next move

    @classmethod
    def of(cls, sc, *, tabs: tuple, data: int, view: str, msg: str, diff: bool) -> "Shown":
        """What ``sc`` shows now (``diff``: D has a pair to compare)."""
        rows = sc.display.rows()  # first: folding the rows can move the lane cursor
        v, g, f = sc.view, sc.gaps, sc.search
        keys = (sc.any_analysis, bool(g.order.size), bool(g.all_listed.size), f.stepping, tabs[1], view, diff)
        return cls(id(sc), tabs, data, sc.time_mode, (id(g.order), g.cause_filter, g.finding_filter),
                   (g.selected_gap, sc.active), (v.t0, v.t1, v.cursor, v.lo, v.hi), (id(rows), len(rows)),
                   sc.display.cursor, (sc.mark, sc.span_sel), (f.query, f.pos, id(f.matches), f.in_panel), view, keys, msg)

    def lanes_changed(self, old: "Shown") -> bool:
        """Anything the lanes and the axis draw, other than the lane cursor."""
        return (self.scene, self.data, self.time_mode, self.gaps, self.selected, self.window, self.rows, self.marks,
                self.search) != (old.scene, old.data, old.time_mode, old.gaps, old.selected, old.window, old.rows,
                                 old.marks, old.search)


@dataclass(frozen=True)
class DiffShown:
    """What the before/after screen shows (tui/diffview.py ``DiffScreen.watch_shown``), made from its
    ``DiffScene``: a key moves the scene and takes a new one, as ``Shown`` on the explorer's screen."""

    scene: int = 0  # id() of the scene on screen; 0 before the first
    step: tuple = ()  # (the step, what the axis is aligned on): the header's step line
    moved: int = 0  # counted up by the scene each time it moves B in time (every lane is drawn again)
    selected: tuple = ()  # (the selected gap, the A gap it matches): the status line and the marks
    window: tuple = ()  # (t0, t1, cursor, lo, hi): the time window and the cursor
    rows: tuple = ()  # (id of the display rows, how many)
    lane: int = 0  # the lane cursor (a display row)
    msg: str = ""  # shown on the status line in place of the selected gap: it lasts until the next move

    @classmethod
    def of(cls, sc, msg: str = "") -> "DiffShown":
        """What the diff scene ``sc`` shows now."""
        rows = sc.display.rows()  # first: folding the rows can move the lane cursor
        v = sc.view
        return cls(id(sc), (sc.step, sc.aligned_on), sc.moves, (sc.gaps.selected_gap, sc.match_gid),
                   (v.t0, v.t1, v.cursor, v.lo, v.hi), (id(rows), len(rows)), sc.display.cursor, msg)

    def lanes_changed(self, old: "DiffShown") -> bool:
        """Anything the lanes and the axis draw, other than the lane cursor."""
        return (self.scene, self.moved, self.selected, self.window, self.rows) != \
            (old.scene, old.moved, old.selected, old.window, old.rows)
