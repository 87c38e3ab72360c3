"""The words of the before/after screen (tui/diffview.py ``DiffScreen``) for its scene (tui/diffscene.py): the
header, the list of changes under the lanes (the comparison's numbers per step, biggest change first; each row's key
says what Enter shows of it, ``DiffScene.goto_change``) and the status line of the selected gap."""

from __future__ import annotations

import os

from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable

from ..analysis.text import plain, sentence
from . import glyphs as G
from .diffscene import ROLE, SIDE, DiffScene
from .cut import cut_words
from .kernelname import event_kernel_label, kernel_label
from .safe import shown
from .timefmt import fmt_dur

NEW_STYLE = Style(color="bright_red", bold=True)
MATCH_STYLE = Style(color="bright_cyan", bold=True)
VERDICT_STYLE = {"faster": "bold green", "slower": "bold bright_red", "no clear change": "bold yellow"}
#: the largest gaps of B not in A listed among the changes (b / B visit every one)
GAPS_LISTED = 5
#: the kernels whose time changed listed among the changes, largest change first (the report lists them all)
KERNELS_LISTED = 30


class DiffText:
    """The before/after screen's text for ``scene``, made safe to draw (``t``) and in ``glyphs``' units."""

    def __init__(self, scene: DiffScene, glyphs: G.Glyphs) -> None:
        self.scene = scene
        self.glyphs = glyphs
        self.what_width = 0  # the "what" column's width (``fill_changes``); 0: as wide as its longest row

    def t(self, s: str) -> str:
        return shown(s, self.glyphs.ascii)

    def d(self, us: float) -> str:
        return fmt_dur(int(round(us * 1e3)), ascii=self.glyphs.ascii)

    def signed(self, us: float) -> str:
        ns = int(round(us * 1e3))
        return "0" if ns == 0 else ("+" if ns > 0 else "-") + fmt_dur(abs(ns), ascii=self.glyphs.ascii)

    def head(self) -> Text:
        sc = self.scene
        c = sc.cmp
        t = Text(no_wrap=True, overflow="ellipsis")
        for pi in (0, 1):
            s = c.a if pi == 0 else c.b
            t.append(f"{SIDE[pi]} {ROLE[pi]}: ", style="bold")
            t.append(self.t(os.path.basename(sc.parts[pi].path)))
            t.append(f" ({s.steps} step{'s' if s.steps != 1 else ''})   ")
        t.append("\n")
        # the verdict in un-profiled step time first (compare/steptime.py): profiled idle can rise while the step
        # gets faster; verdict word leading, so that an 80-column header that cuts the line still shows it
        sv = c.step
        head = sv.headline(lead=True)
        word = head[:len(sv.verdict)]
        t.append(self.t(word), style=VERDICT_STYLE.get(sv.verdict, ""))
        t.append(self.t(head[len(word):]))
        if sv.stands_in and not sv.warnings:
            t.append(self.t("   ! no un-profiled time: profiled step time stands in"), style="yellow")
        t.append("\n")
        t.append(self.t(sc.step_label()), style="bold")
        t.append("   ")
        # the profiler's distortion qualifies the profiled idle: written before it, so that a line cut at the
        # terminal's edge never shows the figure without it
        warn = self.distortion()
        if warn:
            t.append(self.t(f"{self.glyphs.warn} {warn}: "), style="bold yellow")
        t.append(self.t(f"GPU idle per step {self.d(c.a.idle_us_per_step)} -> {self.d(c.b.idle_us_per_step)} "
                         f"({self.signed(c.idle_delta_us_per_step)}, profiled)"))
        return t

    def distortion(self) -> str:
        """"profiler distortion 3.02x vs 1.05x" where the two traces' distortions differ (their profiled idle
        and GPU span do not compare: ``StepVerdict.warnings``), else ""."""
        sv = self.scene.cmp.step
        if not sv.warnings or sv.a.distortion is None or sv.b.distortion is None:
            return ""
        return f"profiler distortion {sv.a.distortion:.2f}x vs {sv.b.distortion:.2f}x"

    def what(self, s: str, style=None) -> Text:
        """A cell of the "what" column: made safe and cut at a word with the mark to the column's width
        (``what_width``; the table clipped it mid-word, with no mark: "gone: 3 gaps each held by one
        aten::cudnn_co")."""
        s = self.t(s)
        if self.what_width:
            s = cut_words(s, self.what_width, self.glyphs.ascii)
        return Text(s, style=style or "", no_wrap=True)

    def fill_changes(self, tb: DataTable, width: int = 0) -> None:
        """The list of changes in ``tb``: its columns and one row per change, biggest first within each kind;
        ``width``: the table's, the "what" column taking what the numbers leave (0: as wide as its longest row)."""
        c = self.scene.cmp
        tb.clear(columns=True)
        nums = (("a", "A/step", 9), ("b", "B/step", 9), ("d", "B-A", 10))
        # each column takes its width and a cell of padding on each side; one column for the scroll bar
        self.what_width = max(width - sum(w + 2 for _, _, w in nums) - 2 - 1, 20) if width else 0
        for key, lab, w in (*nums, ("what", "what", self.what_width or None)):
            tb.add_column(Text(lab, justify="left" if key == "what" else "right"), key=key, width=w)

        def row(what: str, a: float, b: float, d: float, style: str | None = None, key: str | None = None):
            r = lambda s: Text(s, justify="right")  # noqa: E731
            tb.add_row(r(self.d(a)), r(self.d(b)), r(self.signed(d)), self.what(what, style), key=key)

        # each row's key says what Enter shows of it (DiffScene.goto_change): the step, a cause, a finding, a gap
        # of B not in A, a kernel (its index in the comparison's list); notes have none
        sv = c.step  # the same order as the report: step time, kernel time, then GPU span and idle
        row("step time, un-profiled (median)" if sv.basis == "unprofiled" else "step time, profiled (stand-in)",
            sv.a.us, sv.b.us, sv.delta_us, VERDICT_STYLE.get(sv.verdict), key="step:")
        row("kernel time", c.a.kernel_us_per_step, c.b.kernel_us_per_step,
            c.b.kernel_us_per_step - c.a.kernel_us_per_step, key="step:kernels")
        # the profiled rows the profiler's distortion makes incomparable say so on the row itself
        warn = self.distortion()
        tag = f" {self.glyphs.warn} {warn}: does not compare" if warn else ""
        row("GPU span" + tag, c.a.gpu_span_us_per_step, c.b.gpu_span_us_per_step,
            c.b.gpu_span_us_per_step - c.a.gpu_span_us_per_step, key="step:span")
        row("GPU idle" + tag, c.a.idle_us_per_step, c.b.idle_us_per_step, c.idle_delta_us_per_step, "bold",
            key="step:idle")
        for i, d in enumerate(c.causes):
            row(f"cause {d.cause} ({d.a_count_per_step:g} -> {d.b_count_per_step:g} gaps)", d.a_idle_us_per_step,
                d.b_idle_us_per_step, d.per_step_delta_us, G.CAUSE_COLOURS.get(d.cause), key=f"cause:{i}")
        for i, f in enumerate(c.findings):
            if f.status in ("new", "gone"):
                title = f.title_b if f.status == "new" else f.title_a
                word = "not in A" if f.status == "new" else "gone in B"
                row(f"{word}: {plain(sentence(title))}", f.a_idle_us_per_step, f.b_idle_us_per_step,
                    f.per_step_delta_us, NEW_STYLE if f.status == "new" else "green", key=f"finding:{i}")
        self.gap_rows(tb)
        changed = [(i, k) for i, k in enumerate(c.kernels) if k.per_step_delta_us]
        for i, k in changed[:KERNELS_LISTED]:
            tag = {"new": " (not in A)", "gone": " (gone in B)"}.get(k.status, "")
            # the op and the family (tui/kernelname.py), then the shapes: one family often covers several kernels
            row(f"kernel {kernel_label(k.name, k.op)}{tag}" + (f"  {k.shapes}" if k.shapes else ""), k.a_us_per_step,
                k.b_us_per_step, k.per_step_delta_us, key=f"kernel:{i}")
        if len(changed) > KERNELS_LISTED:
            tb.add_row(Text(""), Text(""), Text(""),
                       self.what(f"{len(changed) - KERNELS_LISTED} more kernels changed: the report (e) lists them",
                                 "dim"))
        al = c.alignment
        if al is not None and not al.note:
            n = al.counts()
            parts = ", ".join(f"{v} {k}" for k, v in n.items() if v) or "the same sequence"
            tb.add_row(Text(""), Text(""), Text(""),
                       self.what(f"kernel sequence of {c.steps_a.names[al.step_a]}: {al.a_kernels} -> "
                                 f"{al.b_kernels} kernels, {al.matched} in order; {parts}", "dim"),
                       key="step:align")
        for note in c.step.warnings + c.step.notes + c.notes:
            tb.add_row(Text(""), Text(""), Text(""), self.what("note: " + note, "dim"))

    def gap_rows(self, tb: DataTable) -> None:
        """The largest gaps of B not in A (``GAPS_LISTED``), each a row of the changes (Enter visits it), and how
        many more there are."""
        from ..analysis import CAUSES

        sc = self.scene
        b = sc.parts[1].analysis
        new = sc.new_order
        d = lambda ns: fmt_dur(int(ns), ascii=self.glyphs.ascii)  # noqa: E731
        for gid in new[:GAPS_LISTED].tolist():
            row = int(sc.gaps.row[gid])
            nxt = int(b.gaps.next_idx[row])
            before = f", before {event_kernel_label(b.model, nxt)}" if nxt >= 0 else ""
            # one gap, not a number per step: its length in the text, the per-step columns empty
            tb.add_row(Text(""), Text(""), Text(""),
                       self.what(f"gap not in A: {d(sc.gaps.dur[gid])} {CAUSES[int(sc.gaps.cause[gid])]} in step "
                                 f"{sc.step_of_gap(gid) + 1}{before}", NEW_STYLE), key=f"gap:{row}")
        if new.size > GAPS_LISTED:
            tb.add_row(Text(""), Text(""), Text(""),
                       self.what(f"{new.size - GAPS_LISTED} more gaps of B not in A: b / B visit them all", "dim"))

    def status(self) -> Text:
        sc = self.scene
        t = Text(no_wrap=True, overflow="ellipsis")
        gid = sc.gaps.selected_gap
        from ..analysis import CAUSES

        d = lambda ns: fmt_dur(int(ns), ascii=self.glyphs.ascii)  # noqa: E731
        if gid < 0:
            nb, nn = sc.b_order.size, sc.new_order.size
            t.append(self.t(f"{nb} listed gap{'s' if nb != 1 else ''} in B, {nn} of them not in A: n / b visit "
                             "them, Tab the changes"))
            return t
        if sc.gaps.part[gid] != 1:  # a gap of A (Enter on a cause or a finding gone in B)
            t.append(self.t(f"A gap {d(sc.gaps.dur[gid])} {CAUSES[int(sc.gaps.cause[gid])]}"), style="bold")
            bs = sc.b_matches(gid)
            if bs.size:
                g = sc.gaps
                t.append(self.t(f"; in B at the same place: {d(g.dur[bs[0]])} {CAUSES[int(g.cause[bs[0]])]}"))
            else:
                t.append(self.t("; no listed gap of B at the same place"))
            an = sc.parts[0].analysis
            nxt = int(an.gaps.next_idx[int(sc.gaps.row[gid])])
            if nxt >= 0:
                t.append(self.t(f"; next {event_kernel_label(an.model, nxt)}"))
            return t
        t.append(self.t(f"B gap {d(sc.gaps.dur[gid])} {CAUSES[int(sc.gaps.cause[gid])]}"), style="bold")
        if sc.b_new[gid]:
            t.append(" not in A", style=NEW_STYLE)
        m = sc.match_gid
        if m >= 0:
            g = sc.gaps
            t.append(self.t(f"; in A at the same place: {d(g.dur[m])} {CAUSES[int(g.cause[m])]} "
                             f"({'+' if g.dur[gid] >= g.dur[m] else '-'}{d(abs(int(g.dur[gid]) - int(g.dur[m])))})"))
        elif not sc.b_new[gid]:
            t.append(self.t("; A's gap there is not listed"))
        b = sc.parts[1].analysis
        nxt = int(b.gaps.next_idx[int(sc.gaps.row[gid])])
        if nxt >= 0:
            t.append(self.t(f"; next {event_kernel_label(b.model, nxt)}"))
        return t
