"""The kernels (2) and findings (3) views: a table and, below it, every field of the highlighted row. They are
mounted the first time one of them is shown; Enter on a kernel finds it in the lanes. The findings view is the plan
of actions (analysis/plan.py, as the report numbers it): Enter on an action lists its gaps in the gap list (a kernel
action: its kernels in the kernels view), on a finding its gaps."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from ..analysis.activity import achieved_text
from ..analysis.names import display_frame
from ..analysis.plan import Where
from ..analysis.text import plain, sentence
from ..analysis.ranks import effect_ns
from . import glyphs as G
from .evidence import evidence_lines
from .plantext import action_kernel_names, action_pieces, how, need_pieces, pct, where_text
from .cut import cut, cut_text, cut_words
from .kernelname import kernel_family, kernel_labels
from .safe import short_kernel, shown
from .scene import Scene
from .timefmt import fmt_dur


class Fmt:
    """Text made safe (and ASCII on an ASCII terminal), durations, the overflow mark."""

    def __init__(self, glyphs: G.Glyphs) -> None:
        self.ascii = glyphs.ascii
        self.ov = "crop" if glyphs.ascii else "ellipsis"  # no "…" on terminals that are not UTF-8

    def text(self, s: str) -> str:
        return shown(s, self.ascii)

    def d(self, ns) -> str:
        return fmt_dur(int(ns), ascii=self.ascii)

    def cell(self, s: str, width: int, style: str = "") -> Text:
        """A table cell of ``width`` columns: ``s`` made safe; the table cuts it with "…", an ASCII terminal's
        crops it, so there it is cut here, with "..."."""
        s = self.text(s)
        return Text(cut(s, width, True) if self.ascii else s, no_wrap=True, overflow=self.ov, style=style)

    def fit(self, t: Text, width: int) -> Text:
        """A rich Text cell of ``width`` columns: as ``cell``, cut here on an ASCII terminal only (``cut_text``)."""
        return cut_text(t, width, True) if self.ascii else t


def tables_multi(sc: Scene) -> bool:
    return sc.multi and sum(pt.analysis is not None for pt in sc.parts) > 1


def rank_of(sc: Scene, pi: int):
    r = sc.parts[pi].model.rank
    return r if r is not None else pi


def row_key(key) -> tuple[int, int] | None:
    """(part, index) of a row key "part:index"."""
    a, _, b = str(key).partition(":")
    return (int(a), int(b)) if a.isdigit() and b.isdigit() else None


def kernels_of(sc: Scene | None) -> list:
    """(part, index, kernel) of the kernels view: the active trace's; in a multi-rank tab every rank's,
    largest total first (a rank column says whose), 200 at most."""
    if sc is None:
        return []
    parts = range(len(sc.parts)) if tables_multi(sc) else [sc.active]
    out = [(pi, i, k) for pi in parts for i, k in enumerate(sc.parts[pi].state.kernels)]
    if tables_multi(sc):
        out.sort(key=lambda e: (-int(e[2].total_ns), e[0], e[1]))
    return out[:200]

def _located(f) -> str:
    """A finding's title with its place first (``demo.py(51): check · 32 syncs from ...``), so that a narrow
    table cuts the sentence, not where to look."""
    fr = f.evidence.get("frame") if isinstance(f.evidence, dict) else None
    if not isinstance(fr, str) or not fr:
        return plain(f.title_text)
    return f"{display_frame(fr).rsplit('/', 1)[-1]} · {plain(f.title_text)}"


def _frame_where(f) -> str:
    """Where a finding points (``file:line`` of its frame), or ""."""
    fr = f.evidence.get("frame") if isinstance(f.evidence, dict) else None
    return where_text(Where.of(fr)) if isinstance(fr, str) and fr else ""


def severity_of(plan, f) -> str:
    """A finding's severity: its action's, as the ``plan`` says (``Plan.severity_of``); its own before the plan
    (``plan`` None)."""
    return str(plan.severity_of.get(f.id, f.severity) if plan is not None else f.severity)


def findings_of(sc: Scene | None) -> list:
    """(part, index, finding) of the active trace in the plan's order (``Plan.ordered_findings``: by their action,
    then those no action fixes; the analysis' order before the plan); in a multi-rank tab every rank's (the
    waiting rank's finding names the late one), largest effect first (idle time; the waits a late rank caused for
    its finding, which explains no idle of its own), as the report."""
    if sc is None:
        return []
    parts = range(len(sc.parts)) if sc.multi else [sc.active]
    out = [(pi, i, f) for pi in parts for i, f in enumerate(sc.parts[pi].state.findings)]
    if sc.multi:
        # on a tie (the late rank's finding and the wait it caused) the late rank first, as the report
        out.sort(key=lambda e: (-effect_ns(e[2]), not str(e[2].id).startswith("late-rank-"), e[0], e[1]))
    elif out:
        plan = sc.parts[sc.active].state.plan
        if plan is not None:
            at = {id(f): k for k, f in enumerate(plan.ordered_findings([e[2] for e in out]))}
            out.sort(key=lambda e: at[id(e[2])])
    return out


class PlanRow(NamedTuple):
    """A row of the findings view: an action of the plan (``action``, with its lead finding), or a finding no
    action fixes, or (before the plan, in a multi-rank tab) a finding."""
    part: int
    action: object | None
    finding: object | None


def plan_rows(sc: Scene | None) -> list[PlanRow]:
    """The rows of the findings view: the plan of the active trace, one row per action in its order (the minor ones
    last), then the findings no action fixes; before the plan (or without one) its findings; in a multi-rank tab
    every rank's findings (``findings_of``)."""
    if sc is None:
        return []
    if sc.multi:
        return [PlanRow(pi, None, f) for pi, _, f in findings_of(sc)]
    fs = sc.parts[sc.active].state.findings
    plan = sc.parts[sc.active].state.plan
    if plan is None:
        return [PlanRow(sc.active, None, f) for f in fs]
    by_id = {f.id: f for f in fs}
    rows = [PlanRow(sc.active, x, by_id.get(x.findings[0]) if x.findings else None) for x in plan.actions]
    return rows + [PlanRow(sc.active, None, by_id[fid]) for fid in plan.unplanned if fid in by_id]


class Table(DataTable):
    """A DataTable that also answers ``j`` / ``k`` (the lanes' and the gap list's down / up): the kernels and
    findings views and the diff view's list of changes, where they did nothing."""

    BINDINGS = [Binding("j", "cursor_down", "down", show=False), Binding("k", "cursor_up", "up", show=False)]


class TableView(Vertical):
    """A table of ``NAME`` (id NAME) above an info box (id NAME[:-1] + "info"); the view's id is NAME + "view"."""

    NAME = ""

    def __init__(self, glyphs: G.Glyphs) -> None:
        super().__init__(id=self.NAME + "view")
        self.fmt = Fmt(glyphs)
        self.scene: Scene | None = None

    def compose(self) -> ComposeResult:
        yield Table(id=self.NAME, cursor_type="row")
        with VerticalScroll(classes="infobox"):
            yield Static(id=self.NAME[:-1] + "info")

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    def show_info(self, i: int | tuple[int, int]) -> None:
        raise NotImplementedError

    class FindKernel(Message):
        """Enter on a kernel: the screen shows its first call in the lanes."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    class ShowGaps(Message):
        """Enter on an action or a finding: the screen's gap list holds its gaps (``rows`` of part ``part``), named
        ``label``."""

        def __init__(self, part: int, rows: np.ndarray, label: str) -> None:
            super().__init__()
            self.part, self.rows, self.label = part, rows, label

    class ShowKernels(Message):
        """Enter on a kernel action (fp32 matmuls, eager attention): the screen shows the kernels view on the first
        of its kernels (``names``) listed."""

        def __init__(self, names: list[str]) -> None:
            super().__init__()
            self.names = names

    def on_data_table_row_highlighted(self, ev: DataTable.RowHighlighted) -> None:
        k = row_key(ev.row_key.value) if ev.row_key is not None else None
        if k is not None:
            self.show_info(k)


def kernel_cells(ks: list, width: int, op_column: bool) -> list[str]:
    """The kernel column of the kernels view (``ks``: ``kernels_of``) in ``width`` characters: the names without
    their template and parameters where every one fits, else by meaning (tui/kernelname.py): beside an op column
    each kernel's family (``unrolled_elementwise``), without one the op and the family (``copy_ ·
    unrolled_elementwise``), rows that would read the same told apart. A template prefix cut short
    (``at::native::vectorized_…``) named eight different kernels alike."""
    names = [short_kernel(k.name) for _, _, k in ks]
    if op_column and all(len(n) <= width for n in names):
        return names
    if op_column:
        return [kernel_family(k.name) for _, _, k in ks]
    return kernel_labels([(k.name, k.op, k.dtype, k.shapes) for _, _, k in ks])


def kernel_patterns(sc, pi: int, name: str) -> list:
    """The op patterns of part ``pi`` that hold kernels named ``name``."""
    pt = sc.parts[pi] if sc is not None and 0 <= pi < len(sc.parts) else None
    a = pt.analysis if pt is not None else None
    if a is None:
        return []
    m = a.model
    out = []
    for p in pt.state.patterns:
        if p.kernels.size and any(m.names[n] == name for n in np.unique(m.name_id[p.kernels]).tolist()):
            out.append(p)
    return out


class KernelsView(TableView):
    NAME = "kernels"

    def fill(self, sc: Scene | None, width: int) -> None:
        """The kernels of ``sc`` in the columns that fit ``width``."""
        self.scene = sc
        fm, kt = self.fmt, self.table
        kt.clear(columns=True)
        if sc is None or not sc.state.ready:  # (a preview's list, or findings still being built)
            kt.add_column(Text("kernels appear once the analysis is done"))
            return
        # the columns that fit the width (the info box below the table shows every field of the kernel); the
        # kernel's name gets what is left. A multi-rank tab lists every rank's kernels with a rank column.
        cols = [("calls", 6), ("total", 9), ("%", 5), ("floor", 9), ("bound", 7), ("peak", 5)]
        if tables_multi(sc):
            cols.insert(0, ("rank", 4))
        if width >= 110:
            cols.append(("achieved", 22))
            cols.append(("op", 16))
        if width >= 150:
            cols.append(("shapes", 24))
        name_w = max(width - 1 - sum(w + 2 for _, w in cols) - 2, 12)
        kt.add_column(Text("kernel"), key="kernel", width=name_w)
        for c, w in cols:
            kt.add_column(Text(c, justify="left" if c in ("bound", "op", "shapes", "achieved") else "right"), key=c,
                          width=w)
        ks = kernels_of(sc)
        widths = dict(cols)
        for (pi, i, k), name in zip(ks, kernel_cells(ks, name_w, "op" in widths)):
            cells = {"rank": Text(str(rank_of(sc, pi)), justify="right"),
                     "calls": Text(str(k.count), justify="right"),
                     "total": Text(fm.d(k.total_ns), justify="right"),
                     "%": Text(f"{float(k.pct):.1f}", justify="right"),
                     "floor": Text(fm.d(k.floor_ns) if k.floor_ns else "-", justify="right"),
                     "bound": Text(str(k.bound or "-") + ("*" if k.l2_resident else "")),
                     "peak": Text("-" if k.peak_pct is None else f"{k.peak_pct:.0f}%",
                                  justify="right"),
                     "achieved": fm.cell(achieved_text(k), widths.get("achieved", 0)),
                     "op": fm.cell(str(k.op or "-"), widths.get("op", 0)),
                     "shapes": fm.cell(str(k.shapes or "-"), widths.get("shapes", 0))}
            kt.add_row(fm.cell(name, name_w), *(cells[c] for c, _ in cols), key=f"{pi}:{i}")
        self.show_info(0)

    def show_info(self, i: int | tuple[int, int]) -> None:
        sc, fm = self.scene, self.fmt
        k = None
        if isinstance(i, tuple):
            pt = sc.parts[i[0]] if sc is not None and i[0] < len(sc.parts) else None
            ks = pt.state.kernels if pt is not None else []
            k = ks[i[1]] if 0 <= i[1] < len(ks) else None
        else:
            ks = kernels_of(sc)
            k = ks[i][2] if 0 <= i < len(ks) else None
        t = Text()
        if k is not None:
            if sc.multi:
                t.append(f"rank {rank_of(sc, i[0] if isinstance(i, tuple) else ks[i][0])}: ", style="bold")
            t.append(fm.text(k.name) + "\n", style="bold bright_cyan")
            t.append(fm.text(f"{k.count} calls, {fm.d(k.total_ns)} total ({float(k.pct):.1f}% of kernel time)"))
            if k.floor_ns:
                t.append(fm.text(f"; floor {fm.d(k.floor_ns)} ({k.bound or '?'}-bound)"))
            t.append("\n")
            if k.floor_pct is not None:
                t.append(fm.text(f"achieved {achieved_text(k)}, {k.peak_pct:.0f}% of peak, at {k.floor_pct:.0f}% of its "
                                 f"floor over {k.floored_count} calls"))
                if k.l2_resident:
                    t.append(fm.text(f"; L2-resident in {k.l2_resident} of them (faster than their HBM floor)"))
                t.append("\n")
            if k.op:
                t.append(fm.text(f"from {k.op}") + (fm.text(f"  shapes {k.shapes}") if k.shapes else "") + "\n")
            pi = i[0] if isinstance(i, tuple) else (ks[i][0] if 0 <= i < len(ks) else 0)
            for p in kernel_patterns(sc, pi, k.name):
                # a loop of tiny kernels claims no kernel time: its saving is its frame's fused what-if
                what = ("its fix: the loop as one batched call, projected in its finding" if p.kind == "tiny-kernel-loop"
                        else f"fix saves about {fm.d(p.saving_ns)} of kernel time")
                t.append(fm.text(f"pattern: {p.title} ({what})") + "\n", style="yellow")
            st = sc.parts[pi].state if 0 <= pi < len(sc.parts) else None
            plan = st.plan if st is not None else None
            for x in plan.actions if plan is not None else ():
                if x.kind == "kernels" and k.name in action_kernel_names(st.final, x):  # the plan's change to it
                    t.append(f"action {x.rank}: ", style="bold")
                    t.append(fm.text(pct(x.saving_pct)), style="bold green")
                    t.append(" ")
                    for s, style in action_pieces(x.change):
                        t.append(fm.text(s), style=style)
                    t.append("\n")
            t.append("Enter: find it in the lanes", style="dim")
        self.query_one("#kernelinfo", Static).update(t)

    @on(DataTable.RowSelected)
    def _selected(self, ev: DataTable.RowSelected) -> None:
        sc = self.scene
        key = row_key(ev.row_key.value) if ev.row_key is not None else None
        if sc is None or key is None or sc.parts[key[0]].analysis is None:
            return
        self.post_message(self.FindKernel(sc.parts[key[0]].analysis.kernels[key[1]].name))


class FindingsView(TableView):
    """The plan (view 3): one row per action, numbered as the report (``Action.rank``), with its severity, what it
    buys alone and the change; then the findings no action fixes, unnumbered. Enter on an action lists its gaps in
    the gap list, or shows a kernel action's kernels."""

    NAME = "findings"
    #: the narrowest terminal with the "where" column (file:line of the change)
    WHERE_MIN = 120
    #: the most findings named under an action in the info box, and the evidence lines of its lead finding
    INFO_FINDINGS, INFO_EVIDENCE = 6, 8
    #: the evidence lines of a finding no action fixes
    INFO_LINES = 16

    def __init__(self, glyphs: G.Glyphs) -> None:
        super().__init__(glyphs)
        self.rows: list[PlanRow] = []

    def fill(self, sc: Scene | None, width: int) -> None:
        """The plan of ``sc`` in the columns that fit ``width`` (its findings before the plan is made)."""
        self.scene = sc
        ft = self.table
        ft.clear(columns=True)
        self.rows = []
        if sc is None or not sc.state.ready:  # (a preview's list, or findings still being built)
            ft.add_column(Text("findings appear once the analysis is done"))
            return
        plan = None if sc.multi else sc.state.plan
        self.rows = plan_rows(sc)
        if plan is not None:
            cols = ["#", "severity", "saving", "change"] + (["where"] if width >= self.WHERE_MIN else [])
            flex = "change"
        else:
            cols = ["#", "rank", "severity", "idle", "finding"] if sc.multi else ["#", "severity", "idle", "finding"]
            flex = "finding"
        rows = [(self.cells(n, e, plan), f"{e.part}:{n}") for n, e in enumerate(self.rows)]
        # explicit widths, as in the kernels view: a table refilled while shown (a resize) kept its auto widths at
        # the headers' ("idle" cut 136.1 µs to "136.") until it was filled again; the change takes what is left
        ws = {c: max([len(c)] + [r[0][c].cell_len for r in rows]) for c in cols if c != flex}
        if "where" in ws:
            ws["where"] = min(ws["where"], 40)
        for c in cols:
            w = ws[c] = ws.get(c, max(width - 1 - sum(v + 2 for v in ws.values()) - 2, 12))
            ft.add_column(Text(c, justify="right" if c == "saving" else "left"), key=c, width=w)
        for cells, key in rows:  # cut with the mark (an ASCII terminal's table crops without one)
            ft.add_row(*(self.fmt.fit(cells[c], ws[c]) for c in cols), key=key)
        self.show_info(0)

    def cells(self, n: int, e: PlanRow, plan) -> dict:
        """The cells of row ``n`` (``e``) by column."""
        fm, sc = self.fmt, self.scene
        x, f = e.action, e.finding
        if x is not None:  # an action: its number, severity, saving alone, the change, where it goes
            dim = "dim" if x.minor else ""
            change = Text(no_wrap=True, overflow=fm.ov, style=dim)
            for s, style in action_pieces(x.change):
                change.append(fm.text(s), style=style)
            return {"#": Text(str(x.rank), style=dim), "severity": Text(x.severity, style=dim),
                    "saving": Text(fm.text(pct(x.saving_pct)), justify="right", style=dim), "change": change,
                    "where": Text(fm.text(where_text(x.where)), no_wrap=True, overflow=fm.ov, style=dim)}
        title = Text(fm.text(_located(f)), no_wrap=True, overflow=fm.ov)
        if plan is not None:  # a finding no action fixes: unnumbered, after the actions
            return {"#": Text(fm.text("–")), "severity": Text(severity_of(sc.parts[e.part].state.plan, f)),
                    "saving": Text(fm.text("–"), justify="right"), "change": title,
                    "where": Text(fm.text(_frame_where(f)), no_wrap=True, overflow=fm.ov)}
        return {"#": Text(str(n + 1)), "rank": Text(str(rank_of(sc, e.part))),
                "severity": Text(severity_of(sc.parts[e.part].state.plan, f)), "idle": Text(fm.d(f.idle_ns)),
                "finding": title}

    def show_info(self, i: int | tuple[int, int]) -> None:
        n = i[1] if isinstance(i, tuple) else i
        e = self.rows[n] if 0 <= n < len(self.rows) else None
        t = Text()
        if e is not None and e.action is not None:
            self.action_info(t, e)
        elif e is not None and e.finding is not None:
            self.finding_info(t, e)
        self.query_one("#findinginfo", Static).update(t)

    def action_info(self, t: Text, e: PlanRow) -> None:
        """An action: the change, where, what it buys alone, what it sits inside, needs first or is needed first
        by, how that was measured, the findings it fixes, and where Enter goes."""
        fm, x = self.fmt, e.action
        st = self.scene.parts[e.part].state
        plan = st.plan
        t.append(f"{x.rank}. ", style="bold")
        for s, style in action_pieces(x.change):
            t.append(fm.text(s), style=f"bold {style}" if style else "bold")
        t.append("\n")
        t.append(fm.text(f"{x.severity}{' (minor: under 1% of the step)' if x.minor else ''}: "))
        t.append(fm.text(f"{pct(x.saving_pct)} alone"), style="bold green")
        t.append(fm.text(f", −{fm.d(x.saving_ns)} per step of {fm.d(plan.baseline_ns)}, {how(plan)}") + "\n")
        if x.where is not None:
            t.append("where: ", style="bold")
            t.append(fm.text(where_text(x.where) + (f" ({x.where.func})" if x.where.file and x.where.func else ""))
                     + "\n")
        if x.inside is not None:
            outer = plan.action(x.inside)
            t.append(fm.text(f"inside action {x.inside} once " + ("the step is a CUDA graph" if outer is not None and
                                                                  outer.kind == "cuda-graph" else "that is done")
                             + ": its saving is part of that one's") + "\n")
        for step in x.needs:
            for s, style in need_pieces(step):
                t.append(fm.text(s), style=style)
            t.append("\n")
        if x.unlocks:
            t.append(fm.text("needed first by action " + ", ".join(str(k) for k in x.unlocks)) + "\n", style="bold")
        if x.fix:
            t.append("measured: ", style="bold")
            for s, style in action_pieces(sentence(cut_words(x.fix, 600, fm.ascii))):
                t.append(fm.text(s), style=style)
            t.append("\n")
        by_id = {f.id: f for f in st.findings}
        fs = [by_id[k] for k in x.findings if k in by_id]
        t.append(f"fixes {len(fs)} finding{'s' if len(fs) != 1 else ''}:\n", style="bold")
        for f in fs[:self.INFO_FINDINGS]:
            t.append(cut_words(fm.text(f"  {f.id}: {plain(f.title_text)}"), 300, fm.ascii) + "\n")
        if len(fs) > self.INFO_FINDINGS:
            t.append(f"  (+{len(fs) - self.INFO_FINDINGS} more)\n", style="dim")
        ev = evidence_lines(fs[0].evidence, ascii=fm.ascii) if fs else []
        for ln in ev[:self.INFO_EVIDENCE]:
            t.append(cut_words(fm.text("  " + ln), 300, fm.ascii) + "\n", style="dim")
        if len(ev) > self.INFO_EVIDENCE:
            t.append(fm.text(f"  (+{len(ev) - self.INFO_EVIDENCE} more lines: the report has them)\n"), style="dim")
        ng = len(x.gap_rows)
        if ng:
            t.append(f"Enter: its {ng} gap{'s' if ng != 1 else ''} in the gap list (n walks them, Esc: all gaps)",
                     style="dim")
        elif x.kind == "kernels" and x.kernels:
            t.append(f"Enter: its {x.kernels} kernel{'s' if x.kernels != 1 else ''} in the kernels view", style="dim")

    def finding_info(self, t: Text, e: PlanRow) -> None:
        """A finding (no action fixes it, or there is no plan yet): what it says, its evidence, its gaps."""
        fm, f = self.fmt, e.finding
        plan = self.scene.parts[e.part].state.plan
        for s, style in action_pieces(f.title_text):
            t.append(fm.text(s), style="bold " + style if style else "bold")
        t.append("\n")
        ng = np.asarray(f.gap_rows).size
        t.append(fm.text(f"{f.id}, {severity_of(plan, f)}, {fm.d(f.idle_ns)} of GPU idle explained, "
                         f"{ng} gap{'' if ng == 1 else 's'}") + "\n")
        if plan is not None and not self.scene.multi:
            t.append("no action: its fix is not projected\n", style="dim")
        if f.suggestion:
            t.append("suggestion: ", style="bold green")
            for s, style in action_pieces(f.suggestion_text):
                t.append(fm.text(s), style=style)
            t.append("\n")
        ev = evidence_lines(f.evidence, ascii=fm.ascii)
        for ln in ev[:self.INFO_LINES]:
            t.append(cut_words(fm.text("  " + ln), 300, fm.ascii) + "\n", style="dim")
        if len(ev) > self.INFO_LINES:
            t.append(fm.text(f"  (+{len(ev) - self.INFO_LINES} more lines: the report has them)\n"), style="dim")
        if ng:
            t.append("Enter: its gaps in the gap list (n walks them, Esc: all gaps)", style="dim")

    @on(DataTable.RowSelected)
    def _selected(self, ev: DataTable.RowSelected) -> None:
        sc = self.scene
        k = row_key(ev.row_key.value) if ev.row_key is not None else None
        if sc is None or k is None or not 0 <= k[1] < len(self.rows):
            return
        e = self.rows[k[1]]
        if not 0 <= e.part < len(sc.parts) or sc.parts[e.part].analysis is None:
            return
        x = e.action
        if x is not None and not x.gap_rows and x.kind == "kernels" and x.kernels:
            self.post_message(self.ShowKernels(action_kernel_names(sc.parts[e.part].state.final, x)))
        elif x is not None:
            self.post_message(self.ShowGaps(e.part, np.asarray(x.gap_rows, np.int64), f"action {x.rank}"))
        else:
            f = e.finding
            label = f.id if sc.parts[e.part].state.plan is not None and not sc.multi else f"finding {k[1] + 1}"
            self.post_message(self.ShowGaps(e.part, np.asarray(f.gap_rows, np.int64), label))


def table_views(glyphs: G.Glyphs) -> list[TableView]:
    """The kernels and findings views, hidden (the screen's views switcher shows one on 2 or 3)."""
    views = [KernelsView(glyphs), FindingsView(glyphs)]
    for v in views:
        v.display = False
    return views
