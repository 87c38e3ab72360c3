"""Before/after: the screen of a ``DiffScene`` (tui/diffscene.py), A's lanes above B's on one step-aligned
time axis.

``gapscope diff A B`` opens it (``DiffApp``, tui/diffapp.py); in the explorer, ``D`` opens it on the current
tab and the next one. The lanes are the explorer's own (``LanesView``) with two more rows (``DiffLanes``): B's gaps
not in A, and the A gap matching the selected B gap. The list under the lanes shows the comparison's numbers
(``gapscope.analysis.compare``, per step; its words: tui/difftext.py), biggest change first; Enter on one shows it
in both traces (``DiffScene.goto_change``). The keys are one table (``DIFF_KEYS``, tui/keys.py ``Key``): the
bindings and the help (``?`` / F1, with the legend: ``g``, tui/screens.py ``HelpKeys``) are made from it; ``e`` writes
``gapscope report A B``'s Markdown next to the traces (``export_report``). A key means what it means in the
explorer where the action is the same; "not in A" is the one word for what B has and A has not.
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import DataTable, Footer, Static

from . import glyphs as G
from . import keys
from .cut import cut_pad, fit_lines, mark
from .diffscene import DiffScene, export_report
from .difftext import MATCH_STYLE, NEW_STYLE, VERDICT_STYLE, DiffText
from .export import export_message, notice_lines
from .keys import Key
from .lanes import Lane, Segments, cell_edges, segment_text
from .loading import debugging, failure
from .screens import HelpKeys
from .shown import DiffShown
from .tables import Table
from .timefmt import fmt_dur
from .timeline import Axis, LanesView, label_width, style_runs

#: the diff view's keys: its bindings (the footer shows those with show=True, in this order) and its help are made
#: from this one table. Where the explorer has the same action, the same key (n, w s, pan, 0, e, g, ?, Esc back, q
#: quit); a key the explorer gives to another action is not used for a new one here (b / B: no explorer key), but
#: for x and [ ], whose explorer actions (expand, the next event) the diff view has not: swap and step here, as
#: the explorer's help for D says
DIFF_KEYS = [
    Key("n / N", "next / previous gap of B, largest first, lined up with the gap of A at the same place",
        (Binding("n", "gap(1)", "next gap"), Binding("N", "gap(-1)", "prev gap", key_display="N", show=False))),
    Key("b / B", "next / previous gap of B not in A (no listed gap of A at the same place), largest first",
        (Binding("b", "new_gap(1)", "not in A"),
         Binding("B", "new_gap(-1)", "prev not in A", key_display="B", show=False))),
    Key("] / [", "next / previous step (both traces move to the matching step)",
        (Binding("right_square_bracket", "step(1)", "step", key_display="]"),
         Binding("left_square_bracket", "step(-1)", "prev step", key_display="[", show=False))),
    Key("w s / + - / =", "zoom in / out about the cursor",
        (Binding("w,plus,equals_sign", "zoom(2.0)", "zoom", key_display="w/s"),
         Binding("s,minus", "zoom(0.5)", "zoom out", show=False))),
    Key("← → / h l / a d", "pan the time window",
        (Binding("left,h,a", "pan(-0.25)", "pan", show=False), Binding("right,l,d", "pan(0.25)", "pan", show=False))),
    Key("0 / Home", "fit the step", (Binding("0,home", "fit", "fit step", show=False),)),
    Key("↑ ↓ / j k", "move between lanes (in the list of changes: between changes)", bound_by="DiffLanes, Table"),
    Key("Tab", "lanes / list of changes", bound_by="Screen"),
    Key("Enter", "on a change in the list: show it in both traces (a cause or a finding: its largest gap of B, "
        "with A's gap at the same place; a gap not in A; a kernel: its first run in A and in B, lined up; a step's "
        "totals: the step); on a gap in the lanes: visit it",
        (Binding("enter", "enter", "show", show=False),)),
    Key("x", "swap before and after (B becomes A)", (Binding("x", "swap", "swap"),)),
    Key("e", "export: the before/after report (gapscope report A B, Markdown) next to A, never overwriting",
        (Binding("e", "export", "export"),)),
    Key("g", "legend", (Binding("g", "legend", "legend", show=False),)),
    Key("? / F1", "this help", (Binding("question_mark,f1", "help", "help"),)),
    # Esc's footer entry says what it does: back (opened by D in the explorer) or quit (gapscope diff)
    Key("Esc", "back to the explorer (quit when opened by gapscope diff)",
        (Binding("escape", "leave('back')", "back"), Binding("escape", "leave('quit')", "quit"))),
    Key("q", "quit, as in the explorer", (Binding("q", "app.quit", "quit", show=False),)),
]


class DiffLanes(LanesView):
    """The explorer's lanes, with two more rows: B's new gaps and the A gap matching the selected B gap. They draw
    the diff scene's ``lanes_scene``; ``diff``: the diff scene (the selected gap's match)."""

    BINDINGS = [
        Binding("up,k", "screen.lane(-1)", "lane up", show=False),
        Binding("down,j", "screen.lane(1)", "lane down", show=False),
        Binding("pageup", "screen.lane(-10)", "page up", show=False),
        Binding("pagedown", "screen.lane(10)", "page down", show=False),
    ]

    def render_line(self, y: int) -> Strip:
        sc = self.scene
        if sc is not None:
            rows = sc.display.rows()
            yy = y + int(self.scroll_offset.y)
            if 0 <= yy < len(rows) and rows[yy].lane is not None and rows[yy].lane.kind in ("marks", "match"):
                width = self.size.width - (self.styles.scrollbar_size_vertical if self.show_vertical_scrollbar
                                           else 0)
                lw = label_width(width)
                return self._mark_row(rows[yy].lane, yy == sc.display.cursor, lw, max(width - lw - 1, 1))
        return super().render_line(y)

    def __init__(self, glyphs: G.Glyphs, diff: DiffScene, **kw) -> None:
        super().__init__(glyphs, **kw)
        self.diff = diff

    def _mark_row(self, ln: Lane, is_cursor: bool, lw: int, cw: int) -> Strip:
        sc = self.diff
        g = self.glyphs
        v = sc.view
        edges = cell_edges(v.t0, v.t1, cw)
        if ln.kind == "match":
            gid = sc.match_gid
            segs = Segments(sc.gaps.start[[gid]], sc.gaps.end[[gid]], np.array([gid])) if gid >= 0 else \
                Segments(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
            style, word = MATCH_STYLE, "match "
        else:  # the row's label says "not in A": the gaps say their length
            segs, style, word = ln.segs, NEW_STYLE, ""
        refs = segs.cells(edges)
        chars, _ = segment_text(refs, lambda r: f"{word}{fmt_dur(int(sc.gaps.dur[int(segs.ref[r])]), ascii=g.ascii)}",
                                bar=g.bar, open_=g.open, more=mark(g.ascii))
        sel = sc.gaps.selected_gap
        codes = np.where(refs < 0, 0, 1).astype(np.intp)
        if ln.kind == "marks" and sel >= 0 and refs.size and (refs >= 0).any():
            codes[(refs >= 0) & (np.asarray(segs.ref)[np.maximum(refs, 0)] == sel)] = 2
        label = cut_pad(self._text(ln.label), lw, g.ascii)
        lstyle = G.CURSOR_STYLE if is_cursor and self.has_focus else G.LABEL_STYLE
        table = [Style(), style, style + G.SELECTED_STYLE]
        return Strip([Segment(label, lstyle), Segment(" ", Style())] + style_runs(chars, codes, table), lw + 1 + cw)


class DiffScreen(HelpKeys, Screen):
    """Before/after of two analysed traces. What is on screen is one frozen value (``shown``,
    tui/shown.py ``DiffShown``): a key changes the scene and calls ``update``; ``watch_shown`` redraws the
    header, the lanes and the status line where the fields they depend on changed. Help and legend: ``HelpKeys``
    (tui/screens.py), the explorer's help screen with this screen's key table."""

    KEYS = DIFF_KEYS
    BINDINGS = keys.bindings(DIFF_KEYS)
    KEY_HELP = keys.help_rows(DIFF_KEYS)  # the help screen's key table
    HELP_TITLE = "Keys of the before/after view"

    shown: reactive[DiffShown] = reactive(DiffShown(), init=False, always_update=False, repaint=False)

    def __init__(self, scene: DiffScene, glyphs: G.Glyphs, *, quit_on_leave: bool = False):
        super().__init__()
        self.scene = scene
        self.glyphs = glyphs
        self.words = DiffText(scene, glyphs)  # the header, the list of changes, the status line
        self.quit_on_leave = quit_on_leave
        self.gap_pos = -1  # position in scene.b_order
        self.new_pos = -1
        self.changes_width = 0  # the width the list of changes was filled for

    def compose(self) -> ComposeResult:
        yield Static(id="dhead")
        lv = DiffLanes(self.glyphs, self.scene, id="dlanes")
        yield Axis(self.glyphs, lv, id="daxis")
        yield lv
        yield Static(id="dstatus")
        yield Table(id="deltas", cursor_type="row", zebra_stripes=False, cell_padding=1)
        yield Footer()

    def on_mount(self) -> None:
        if self.glyphs.ascii:
            self.add_class("-ascii")
        self.fill_changes()
        self.update()
        self._lanes().focus()

    # ---------------------------------------------------------------- state
    def update(self, msg: str = "", *, keep_msg: bool = False) -> None:
        """A new ``DiffShown`` from the scene as it is now (``msg`` on the status line: a move clears it)."""
        self.shown = DiffShown.of(self.scene, self.shown.msg if keep_msg else msg)

    def watch_shown(self, old: DiffShown, new: DiffShown) -> None:
        sc = self.scene
        lv = self._lanes()
        axis = self.query_one(Axis)
        if new.scene != old.scene:
            lv.set_scene(sc.lanes_scene)
            axis.scene = sc.lanes_scene
        elif new.moved != old.moved:
            lv.lanes_moved()  # B moved in time: every drawn row is forgotten
        elif len(sc.display.rows()) != lv.virtual_size.height:
            lv.sync_rows()  # lanes folded or unfolded by the zoom
        # (an ASCII terminal's lines clip without a mark: cut there with "...", ``fit_lines``)
        width, ascii = self.app.size.width, self.glyphs.ascii
        if (new.scene, new.step) != (old.scene, old.step):
            self.query_one("#dhead", Static).update(fit_lines(self.words.head(), width, ascii))
        if (new.scene, new.moved, new.selected, new.msg) != (old.scene, old.moved, old.selected, old.msg):
            line = Text(new.msg) if new.msg else self.words.status()
            self.query_one("#dstatus", Static).update(fit_lines(line, width, ascii))
        if new.lanes_changed(old):
            if new.lane != old.lane:
                lv.ensure_cursor_visible()
            lv.refresh()
            axis.refresh()
        elif new.lane != old.lane:
            lv.cursor_row_moved(old.lane, new.lane)

    @on(LanesView.Clicked)
    def _clicked(self, ev: LanesView.Clicked) -> None:
        self.update()

    @on(LanesView.Zoom)
    def _wheel_zoom(self, ev: LanesView.Zoom) -> None:
        self.action_zoom(ev.factor)

    def _lanes(self) -> DiffLanes:
        return self.query_one(DiffLanes)

    # ---------------------------------------------------------------- actions: each changes the scene, then ``update``
    def action_step(self, d: int) -> None:
        sc = self.scene
        sc.set_step((sc.step + d) % sc.n_steps)
        self.update()

    def _goto(self, gid: int) -> None:
        self.scene.goto_gap(gid, self._lanes().cells_width())
        self.update()

    def action_gap(self, d: int) -> None:
        sc = self.scene
        if not sc.b_order.size:
            return
        self.gap_pos = (self.gap_pos + d) % sc.b_order.size if self.gap_pos >= 0 else (0 if d > 0 else -1) % sc.b_order.size
        self._goto(int(sc.b_order[self.gap_pos]))

    def action_new_gap(self, d: int) -> None:
        sc = self.scene
        if not sc.new_order.size:
            return self.update("every listed gap of B has a gap of A at the same place: none is not in A")
        self.new_pos = (self.new_pos + d) % sc.new_order.size if self.new_pos >= 0 else (0 if d > 0 else -1) % sc.new_order.size
        self._goto(int(sc.new_order[self.new_pos]))

    def action_enter(self) -> None:
        """Enter in the lanes (the list of changes answers its own: ``_change_selected``): the gap under the
        cursor visited, as n visits one."""
        gid = self.scene.gap_at_cursor(self._lanes().cells_width())
        if gid < 0:
            return self.update("Enter: on a gap in the lanes, or on a change in the list under them (Tab)")
        self._goto(gid)

    @on(DataTable.RowSelected, "#deltas")
    def _change_selected(self, ev: DataTable.RowSelected) -> None:
        """Enter on a change: shown in both traces (``DiffScene.goto_change``); the list keeps the focus, so the
        next change is one key away."""
        key = ev.row_key.value if ev.row_key is not None else None
        if not key:
            return self.update("a note: nothing to show on the lanes")
        msg = self.scene.goto_change(str(key), self._lanes().cells_width())
        self.update(self.words.t(msg))

    def action_lane(self, d: int) -> None:
        sc = self.scene
        n = len(sc.display.rows())
        if n:
            sc.display.cursor = max(0, min(sc.display.cursor + d, n - 1))
            self.update(keep_msg=True)

    def action_pan(self, frac: float) -> None:
        self.scene.view.pan(frac)
        self.update()

    def action_zoom(self, factor: float) -> None:
        self.scene.view.zoom(factor, self._lanes().cells_width())
        self.update()

    def action_fit(self) -> None:
        self.scene.fit_step()
        self.update()

    def action_swap(self) -> None:
        """B before A: the same two traces the other way round (a new comparison, off the event loop)."""
        self.update("swapping before and after ...")
        self._swap()

    @work(thread=True, exclusive=True, group="swap")
    def _swap(self) -> None:
        a, b = self.scene.parts
        try:
            sc = DiffScene(b.path, b.model, b.analysis, a.path, a.model, a.analysis)
        except Exception as exc:  # noqa: BLE001 - one line in the status bar, the view stays
            if debugging(exc):
                raise
            return self.app.call_from_thread(self.update, failure("swap", exc))
        self.app.call_from_thread(self.app.switch_screen, DiffScreen(sc, self.glyphs, quit_on_leave=self.quit_on_leave))

    def action_export(self) -> None:
        """The before/after report (``gapscope report A B``'s Markdown) written next to A, off the event loop."""
        self.update("writing the before/after report ...")
        self._export()

    @work(thread=True, exclusive=True, group="export")
    def _export(self) -> None:
        try:
            path = export_report(self.scene)
        except Exception as exc:  # noqa: BLE001 - a full disk, a folder we cannot write: one line
            if debugging(exc):
                raise
            return self.app.call_from_thread(self.update, failure("export", exc))
        self.app.call_from_thread(self._exported, path)

    def _exported(self, path: str) -> None:
        """The path written: on the status line, and in a notice whose lines break only after a "/", "-", "." or
        "_" (a toast folds a long name mid-word; at 80 columns it is 30 wide)."""
        status, lines = export_message([path])
        self.update(self.words.t(status))
        text = "\n".join(notice_lines([self.words.t(s) for s in lines], self.app.size.width))
        self.notify(text, title="export", timeout=10, markup=False)

    def legend_extra(self) -> Text:
        """The before/after view's rows of the legend (``g``, and under its keys in the help); plain ASCII words, so
        the same under --ascii."""
        t = Text()
        t.append("before/after (A above, B below, one time axis):\n", style="bold")
        t.append("  B's lanes are moved so that its step starts where A's does; n, b and Enter line the two up on "
                 "the gap or kernel shown instead (the header says on what)\n")
        t.append("  not in A  ", style=NEW_STYLE)
        t.append("row under B's idle gaps: gaps of B with no listed gap of A at the same place in the aligned "
                 "kernel sequence\n")
        t.append("  matches B ", style=MATCH_STYLE)
        t.append("row under A's idle gaps: the gap of A at the same place as the selected gap of B\n")
        t.append("list of changes (per step, B - A): ", style="bold")
        for word, style in VERDICT_STYLE.items():
            t.append(word, style=style)
            t.append(" ")
        t.append("(the verdict); ")
        t.append("not in A", style=NEW_STYLE)
        t.append(": B has it, A has not; ")
        t.append("gone in B", style="green")
        t.append(": A has it, B has not\n\n")
        return t

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """Esc's two bindings: the one that says what it does here acts and shows (``quit_on_leave``: quit)."""
        if action == "leave":
            return (parameters[0] == "quit") == self.quit_on_leave
        return True

    def action_leave(self, what: str) -> None:
        """Esc: back to the explorer, or the end of ``gapscope diff`` (``what``: the footer's word for it)."""
        if self.quit_on_leave:
            self.app.exit()
        else:
            self.app.pop_screen()

    def fill_changes(self) -> None:
        """The list of changes, its "what" column fitted to the screen's width (its cursor row kept)."""
        tb = self.query_one("#deltas", DataTable)
        row = tb.cursor_row
        self.changes_width = self.app.size.width
        self.words.fill_changes(tb, self.changes_width)
        if 0 < row < tb.row_count:
            tb.move_cursor(row=row, animate=False)

    def on_resize(self, event) -> None:
        self._lanes().sync_rows()
        if self.app.size.width != self.changes_width:
            self.fill_changes()
