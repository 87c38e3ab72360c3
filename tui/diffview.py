"""Before/after: the screen of a ``DiffScene`` (tui/diffscene.py), A's lanes above B's on one step-aligned
time axis.

``gapscope diff A B`` opens it (``DiffApp``, tui/diffapp.py); in the explorer, ``D`` opens it on the current
tab and the next one. The lanes are the explorer's own (``LanesView``) with two more rows (``DiffLanes``): B's new
gaps, and the A gap matching the selected B gap. The list under the lanes shows the comparison's numbers
(``tui.analysis.compare``, per step), biggest change first.
"""

from __future__ import annotations

import os

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
from .diffscene import ROLE, SIDE, DiffScene
from .lanes import Lane, Segments, cell_edges, segment_text
from .loading import debugging, failure
from .safe import short_kernel, shown
from .shown import DiffShown
from .tables import Table
from .timefmt import fmt_dur
from .timeline import Axis, LanesView, label_width, style_runs

NEW_STYLE = Style(color="bright_red", bold=True)
MATCH_STYLE = Style(color="bright_cyan", bold=True)
VERDICT_STYLE = {"faster": "bold green", "slower": "bold bright_red", "no clear change": "bold yellow"}


class DiffLanes(LanesView):
    """The explorer's lanes, with two more rows: B's new gaps and the A gap matching the selected B gap."""

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

    def _mark_row(self, ln: Lane, is_cursor: bool, lw: int, cw: int) -> Strip:
        sc: DiffScene = self.scene
        g = self.glyphs
        v = sc.view
        edges = cell_edges(v.t0, v.t1, cw)
        if ln.kind == "match":
            gid = sc.match_gid
            segs = Segments(sc.gaps.start[[gid]], sc.gaps.end[[gid]], np.array([gid])) if gid >= 0 else \
                Segments(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
            style, word = MATCH_STYLE, "match"
        else:
            segs, style, word = ln.segs, NEW_STYLE, "new"
        refs = segs.cells(edges)
        chars, _ = segment_text(refs, lambda r: f"{word} {fmt_dur(int(sc.gaps.dur[int(segs.ref[r])]), ascii=g.ascii)}",
                                bar=g.bar, open_=g.open)
        sel = sc.gaps.selected_gap
        codes = np.where(refs < 0, 0, 1).astype(np.intp)
        if ln.kind == "marks" and sel >= 0 and refs.size and (refs >= 0).any():
            codes[(refs >= 0) & (np.asarray(segs.ref)[np.maximum(refs, 0)] == sel)] = 2
        label = self._text(ln.label)[:lw].ljust(lw)
        lstyle = G.CURSOR_STYLE if is_cursor and self.has_focus else G.LABEL_STYLE
        table = [Style(), style, style + G.SELECTED_STYLE]
        return Strip([Segment(label, lstyle), Segment(" ", Style())] + style_runs(chars, codes, table), lw + 1 + cw)


class DiffScreen(Screen):
    """Before/after of two analysed traces. What is on screen is one frozen value (``shown``,
    tui/shown.py ``DiffShown``): a key changes the scene and calls ``update``; ``watch_shown`` redraws the
    header, the lanes and the status line where the fields they depend on changed."""

    BINDINGS = [
        Binding("n", "gap(1)", "next gap"),
        Binding("N", "gap(-1)", "prev gap", key_display="N", show=False),
        Binding("m", "new_gap(1)", "new gap"),
        Binding("M", "new_gap(-1)", "prev new gap", key_display="M", show=False),
        Binding("right_square_bracket", "step(1)", "step", key_display="]"),
        Binding("left_square_bracket", "step(-1)", "prev step", key_display="[", show=False),
        Binding("left,h,a", "pan(-0.25)", "pan", show=False),
        Binding("right,l,d", "pan(0.25)", "pan", show=False),
        Binding("w,plus,equals_sign", "zoom(2.0)", "zoom", key_display="w/s"),
        Binding("s,minus", "zoom(0.5)", "zoom out", show=False),
        Binding("0,home", "fit", "fit step", show=False),
        Binding("x", "swap", "swap A/B"),
        Binding("escape,q", "leave", "back"),
    ]

    shown: reactive[DiffShown] = reactive(DiffShown(), init=False, always_update=False, repaint=False)

    def __init__(self, scene: DiffScene, glyphs: G.Glyphs, *, quit_on_leave: bool = False):
        super().__init__()
        self.scene = scene
        self.glyphs = glyphs
        self.quit_on_leave = quit_on_leave
        self.gap_pos = -1  # position in scene.b_order
        self.new_pos = -1

    def compose(self) -> ComposeResult:
        yield Static(id="dhead")
        lv = DiffLanes(self.glyphs, id="dlanes")
        yield Axis(self.glyphs, lv, id="daxis")
        yield lv
        yield Static(id="dstatus")
        yield Table(id="deltas", cursor_type="row", zebra_stripes=False, cell_padding=1)
        yield Footer()

    def on_mount(self) -> None:
        if self.glyphs.ascii:
            self.add_class("-ascii")
        self._fill_deltas()
        self.update()
        self._lanes().focus()

    # ---------------------------------------------------------------- text
    def _t(self, s: str) -> str:
        return shown(s, self.glyphs.ascii)

    def _d(self, us: float) -> str:
        return fmt_dur(int(round(us * 1e3)), ascii=self.glyphs.ascii)

    def _signed(self, us: float) -> str:
        ns = int(round(us * 1e3))
        return "0" if ns == 0 else ("+" if ns > 0 else "-") + fmt_dur(abs(ns), ascii=self.glyphs.ascii)

    def _head(self) -> Text:
        sc = self.scene
        c = sc.cmp
        t = Text(no_wrap=True, overflow="ellipsis")
        for pi in (0, 1):
            s = c.a if pi == 0 else c.b
            t.append(f"{SIDE[pi]} {ROLE[pi]}: ", style="bold")
            t.append(self._t(os.path.basename(sc.parts[pi].path)))
            t.append(f" ({s.steps} step{'s' if s.steps != 1 else ''})   ")
        t.append("\n")
        # the verdict in un-profiled step time first (compare/steptime.py): profiled idle can rise while the step
        # gets faster; verdict word leading, so that an 80-column header that cuts the line still shows it
        sv = c.step
        head = sv.headline(lead=True)
        word = head[:len(sv.verdict)]
        t.append(self._t(word), style=VERDICT_STYLE.get(sv.verdict, ""))
        t.append(self._t(head[len(word):]))
        if sv.warnings:
            t.append(self._t(f"   ! distortion {sv.a.distortion:.2f}x vs {sv.b.distortion:.2f}x: profiled idle "
                             "does not compare"), style="yellow")
        elif sv.stands_in:
            t.append(self._t("   ! no un-profiled time: profiled step time stands in"), style="yellow")
        t.append("\n")
        t.append(self._t(sc.step_label()), style="bold")
        t.append(self._t(f"   GPU idle per step {self._d(c.a.idle_us_per_step)} -> {self._d(c.b.idle_us_per_step)} "
                         f"({self._signed(c.idle_delta_us_per_step)}, profiled)"))
        return t

    def _fill_deltas(self) -> None:
        c = self.scene.cmp
        tb = self.query_one("#deltas", DataTable)
        tb.clear(columns=True)
        for key, lab, w in (("a", "A/step", 9), ("b", "B/step", 9), ("d", "B-A", 10), ("what", "what", None)):
            tb.add_column(Text(lab, justify="left" if key == "what" else "right"), key=key, width=w)

        def row(what: str, a: float, b: float, d: float, style: str | None = None, key: str | None = None):
            r = lambda s: Text(s, justify="right")  # noqa: E731
            tb.add_row(r(self._d(a)), r(self._d(b)), r(self._signed(d)), Text(self._t(what), style=style or ""),
                       key=key)

        sv = c.step  # the same order as the report: step time, kernel time, then GPU span and idle
        row("step time, un-profiled (median)" if sv.basis == "unprofiled" else "step time, profiled (stand-in)",
            sv.a.us, sv.b.us, sv.delta_us, VERDICT_STYLE.get(sv.verdict))
        row("kernel time", c.a.kernel_us_per_step, c.b.kernel_us_per_step,
            c.b.kernel_us_per_step - c.a.kernel_us_per_step)
        row("GPU span", c.a.gpu_span_us_per_step, c.b.gpu_span_us_per_step,
            c.b.gpu_span_us_per_step - c.a.gpu_span_us_per_step)
        row("GPU idle", c.a.idle_us_per_step, c.b.idle_us_per_step, c.idle_delta_us_per_step, "bold")
        for d in c.causes:
            row(f"cause {d.cause} ({d.a_count_per_step:g} -> {d.b_count_per_step:g} gaps)", d.a_idle_us_per_step,
                d.b_idle_us_per_step, d.per_step_delta_us, G.CAUSE_COLOURS.get(d.cause))
        for f in c.findings:
            if f.status in ("new", "gone"):
                title = f.title_b if f.status == "new" else f.title_a
                row(f"{f.status}: {title.replace('`', '')}", f.a_idle_us_per_step, f.b_idle_us_per_step,
                    f.per_step_delta_us, "bright_red" if f.status == "new" else "green")
        for k in [k for k in c.kernels if k.per_step_delta_us][:30]:
            tag = {"new": " (new)", "gone": " (gone)"}.get(k.status, "")
            via = " ".join(x for x in (k.op, k.shapes) if x)  # the same short name often covers several kernels
            row(f"kernel {short_kernel(k.name)}{tag}" + (f"  {via}" if via else ""), k.a_us_per_step, k.b_us_per_step,
                k.per_step_delta_us)
        al = c.alignment
        if al is not None and not al.note:
            n = al.counts()
            parts = ", ".join(f"{v} {k}" for k, v in n.items() if v) or "the same sequence"
            tb.add_row(Text(""), Text(""), Text(""),
                       Text(self._t(f"kernel sequence of {c.steps_a.names[al.step_a]}: {al.a_kernels} -> "
                                    f"{al.b_kernels} kernels, {al.matched} in order; {parts}"), style="dim"))
        for note in c.step.warnings + c.step.notes + c.notes:
            tb.add_row(Text(""), Text(""), Text(""), Text(self._t("note: " + note), style="dim"))

    def _status(self) -> Text:
        sc = self.scene
        t = Text(no_wrap=True, overflow="ellipsis")
        gid = sc.gaps.selected_gap
        if gid < 0 or sc.gaps.part[gid] != 1:
            nb, nn = sc.b_order.size, sc.new_order.size
            t.append(self._t(f"{nb} listed gaps in B, {nn} new: n / m to visit them, ] / [ for the steps"))
            return t
        from ..analysis import CAUSES

        d = lambda ns: fmt_dur(int(ns), ascii=self.glyphs.ascii)  # noqa: E731
        t.append(self._t(f"B gap {d(sc.gaps.dur[gid])} {CAUSES[int(sc.gaps.cause[gid])]}"), style="bold")
        if sc.b_new[gid]:
            t.append(" new in B", style=NEW_STYLE)
        m = sc.match_gid
        if m >= 0:
            g = sc.gaps
            t.append(self._t(f"; in A at the same place: {d(g.dur[m])} {CAUSES[int(g.cause[m])]} "
                             f"({'+' if g.dur[gid] >= g.dur[m] else '-'}{d(abs(int(g.dur[gid]) - int(g.dur[m])))})"))
        elif not sc.b_new[gid]:
            t.append(self._t("; A's gap there is not listed"))
        b = sc.parts[1].analysis
        nxt = int(b.gaps.next_idx[int(sc.gaps.row[gid])])
        if nxt >= 0:
            t.append(self._t(f"; next {short_kernel(b.model.name(nxt))}"))
        return t

    # ---------------------------------------------------------------- state
    def update(self, msg: str = "", *, keep_msg: bool = False) -> None:
        """A new ``DiffShown`` from the scene as it is now (``msg`` on the status line: a move clears it)."""
        self.shown = DiffShown.of(self.scene, self.shown.msg if keep_msg else msg)

    def watch_shown(self, old: DiffShown, new: DiffShown) -> None:
        sc = self.scene
        lv = self._lanes()
        axis = self.query_one(Axis)
        if new.scene != old.scene:
            lv.set_scene(sc)
            axis.scene = sc
        elif new.moved != old.moved:
            lv.lanes_moved()  # B moved in time: every drawn row is forgotten
        elif len(sc.display.rows()) != lv.virtual_size.height:
            lv.sync_rows()  # lanes folded or unfolded by the zoom
        if (new.scene, new.step) != (old.scene, old.step):
            self.query_one("#dhead", Static).update(self._head())
        if (new.scene, new.moved, new.selected, new.msg) != (old.scene, old.moved, old.selected, old.msg):
            self.query_one("#dstatus", Static).update(Text(new.msg) if new.msg else self._status())
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
        sc = self.scene
        sc.align_on_gap(gid)
        sc.select_gid(gid)
        a, b, _ = sc.gaps.span(gid)
        if sc.match_gid >= 0:
            ma, mb, _ = sc.gaps.span(sc.match_gid)
            a, b = min(a, ma), max(b, mb)
        sc.view.focus(a, b, self._lanes().cells_width(), context=3.0)
        sc.view.cursor = int(sc.gaps.start[gid])
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
            return self.update("no gap of B is new")
        self.new_pos = (self.new_pos + d) % sc.new_order.size if self.new_pos >= 0 else (0 if d > 0 else -1) % sc.new_order.size
        self._goto(int(sc.new_order[self.new_pos]))

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

    def action_leave(self) -> None:
        if self.quit_on_leave:
            self.app.exit()
        else:
            self.app.pop_screen()

    def on_resize(self, event) -> None:
        self._lanes().sync_rows()
