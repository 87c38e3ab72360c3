"""The explorer's keys on the gaps pane (the gap list, tui/gaplist.py, and the stack panel beside it): the
next and previous gap (n, N), the selected gap in focus (f), the cause filter (c, C), and which gap a tab
opens on (``opening_gap``; ``opening_kernels``: the kernels view instead, for a plan led by a kernel change).

``GapKeys`` is a part the explorer's screen holds (``MainScreen``, tui/main.py; tui/keys.py ``Pane``): each action
changes the scene and calls the screen's ``update``; the gap list and the stack panel are redrawn from the new
state. Its keys are ``GapKeys.KEYS``, bound by the screen with the other panes' (tui/keys.py).
"""

from __future__ import annotations

from textual.binding import Binding

from .keys import Key, Pane
from .navigate import focus_context, focus_gap
from .plantext import action_kernel_names, top_action
from .scene import Scene


class GapKeys(Pane):
    """The gaps pane's actions (a part of ``MainScreen``)."""

    #: the gaps' keys, in the order of the actions below (``at``: their place in the help and the footer)
    KEYS = [
        Key("n / N", "next / previous gap, largest first (jumps there, updates the stack panel)",
            (Binding("n", "next_gap", "next gap"), Binding("N", "prev_gap", "prev gap", key_display="N")), at=10),
        Key("f / z", "zoom to the selected gap (again, or right after n: tighter, the gap fills the window)",
            (Binding("f,z", "focus_gap", "zoom gap", show=False),), at=90),
        Key("c / C", "filter the gap list by cause (next / previous cause)",
            (Binding("c", "cause(1)", "cause"), Binding("C", "cause(-1)", "cause", show=False)), at=100),
    ]

    def select_gap(self, pos: int, *, context: float = 1.0) -> None:
        """The gap at ``pos`` of the list selected, the view on it (the redraw follows from the new state)."""
        sc = self.scene
        if sc is None or not sc.any_analysis or not sc.gaps.order.size:
            return
        gid = sc.select(pos)
        focus_gap(sc, gid, self.main.lanes.cells_width(), context=context)

    def goto_gap(self, pos: int, *, context: float = 1.0) -> None:
        self.select_gap(pos, context=context)
        self.main.update()

    def action_next_gap(self) -> None:
        self.main.app.user_picked = True
        sc = self.scene
        if sc is not None and sc.search.stepping:
            return self.main.search_keys.step_match(1)
        if sc is not None and sc.gaps.order.size:
            self.goto_gap(min(sc.gaps.selected + 1, sc.gaps.order.size - 1) if sc.gaps.selected >= 0 else 0)

    def action_prev_gap(self) -> None:
        self.main.app.user_picked = True
        sc = self.scene
        if sc is not None and sc.search.stepping:
            return self.main.search_keys.step_match(-1)
        if sc is not None and sc.gaps.order.size:
            self.goto_gap(max(sc.gaps.selected - 1, 0))

    def action_focus_gap(self) -> None:
        """`f`: the selected gap with its context; shown so already (after `n`), tighter (focus_context)."""
        sc = self.scene
        if sc is not None and sc.gaps.selected_gap >= 0:
            ctx, msg = focus_context(sc, self.main.lanes.cells_width())
            self.select_gap(sc.gaps.selected, context=ctx)
            self.main.update(msg)

    def gap_highlighted(self, key) -> None:
        """The gap list's cursor moved to the row ``key`` (the screen hands its Highlighted message over)."""
        sc = self.scene
        if sc is None or key is None or not str(key).isdigit():
            return
        pos = int(key)
        if pos != sc.gaps.selected:
            self.main.app.user_picked = True
            self.goto_gap(pos)

    def action_cause(self, d: int) -> None:
        sc = self.scene
        if sc is None or not sc.any_analysis:
            return
        from ..analysis import CAUSES

        present = sorted(set(sc.gaps.cause[sc.gaps.all_listed].tolist()))
        cycle = [None] + present
        i = cycle.index(sc.gaps.cause_filter) if sc.gaps.cause_filter in cycle else 0
        sc.apply_filter(cycle[(i + int(d)) % len(cycle)])
        if sc.gaps.selected >= 0:
            self.select_gap(0)
        name = "all causes" if sc.gaps.cause_filter is None else CAUSES[sc.gaps.cause_filter]
        self.main.update(f"gaps: {name} ({sc.gaps.order.size})")


def opening_gap(sc: Scene) -> int:
    """The position in the gap list a tab opens on (the first time it is shown, and when its analysis lands):
    the one selected: the largest gap of the plan's top action (``Scene.opening_position``), else the largest gap."""
    return sc.gaps.selected


def opening_kernels(sc: Scene, view: str) -> list[str] | None:
    """The kernels a tab opens the kernels view on, once: those of its plan's top action when that is a kernel
    change (a GPU-bound trace: fp32 matmuls, eager attention; no gap of its own to open on) and the lanes are the
    view shown (``view``); else None."""
    x = top_action(sc.state)
    if x is None or x.kind != "kernels" or sc.kernels_opened or view != "lanes":
        return None
    sc.kernels_opened = True
    return action_kernel_names(sc.state.final, x)
