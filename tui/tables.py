"""The kernels (2) and findings (3) views: a table and, below it, every field of the highlighted row. They are
mounted the first time one of them is shown; Enter on a kernel finds it in the lanes, on a finding lists its
gaps in the gap list."""

from __future__ import annotations

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
from ..analysis.ranks import effect_ns
from . import glyphs as G
from .evidence import evidence_lines
from .safe import short_kernel, shown
from .scene import Scene, analysis_pending
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
    out = [(pi, i, k) for pi in parts for i, k in enumerate(getattr(sc.parts[pi].analysis, "kernels", None)
                                                              or [])]
    if tables_multi(sc):
        out.sort(key=lambda e: (-int(e[2].total_ns), e[0], e[1]))
    return out[:200]

def _located(f) -> str:
    """A finding's title with its place first (``demo.py(51): check · 32 syncs from ...``), so that a narrow
    table cuts the sentence, not where to look."""
    fr = (f.evidence or {}).get("frame") if isinstance(getattr(f, "evidence", None), dict) else None
    if not isinstance(fr, str) or not fr:
        return f.title
    return f"{display_frame(fr).rsplit('/', 1)[-1]} · {f.title}"


def projection_of(a):
    """The analysis' projection (analysis/replay/__init__.py) once the loader computed it (app/loading.py); else None."""
    if a is None or not hasattr(a, "findings"):
        return None
    return a.projection_if_ready


def findings_of(sc: Scene | None) -> list:
    """(part, index, finding) listed in the findings view: the active trace's in the report's order (ranked by
    the projected saving of their fix, as ``gapscope report``; by idle time where there is no projection); in
    a multi-rank tab every rank's (the waiting rank's finding names the late one), largest effect first (idle
    time; the waits a late rank caused for its finding, which explains no idle of its own), as the report."""
    if sc is None:
        return []
    parts = range(len(sc.parts)) if sc.multi else [sc.active]
    out = [(pi, i, f) for pi in parts for i, f in enumerate(getattr(sc.parts[pi].analysis, "findings", None)
                                                               or [])]
    if sc.multi:
        # on a tie (the late rank's finding and the wait it caused) the late rank first, as the report
        out.sort(key=lambda e: (-effect_ns(e[2]), not str(e[2].id).startswith("late-rank-"), e[0], e[1]))
    elif out:
        pj = projection_of(sc.parts[sc.active].analysis)
        if pj is not None:  # the report's order (Projection.ranked; sorted() is stable)
            at = {id(f): k for k, f in enumerate(pj.ranked([e[2] for e in out]))}
            out.sort(key=lambda e: at[id(e[2])])
    return out


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
        """Enter on a finding: the screen's gap list holds its gaps (``rows`` of part ``part``), named ``label``."""

        def __init__(self, part: int, rows: np.ndarray, label: str) -> None:
            super().__init__()
            self.part, self.rows, self.label = part, rows, label

    def on_data_table_row_highlighted(self, ev: DataTable.RowHighlighted) -> None:
        k = row_key(ev.row_key.value) if ev.row_key is not None else None
        if k is not None:
            self.show_info(k)


def kernel_patterns(sc, pi: int, name: str) -> list:
    """The op patterns of part ``pi`` that hold kernels named ``name``."""
    pt = sc.parts[pi] if sc is not None and 0 <= pi < len(sc.parts) else None
    a = pt.analysis if pt is not None else None
    if a is None:
        return []
    m = a.model
    out = []
    for p in getattr(a, "patterns", []) or []:
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
        if sc is None or sc.analysis is None or analysis_pending(sc.analysis):
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
        for pi, i, k in kernels_of(sc):
            cells = {"rank": Text(str(rank_of(sc, pi)), justify="right"),
                     "calls": Text(str(k.count), justify="right"),
                     "total": Text(fm.d(k.total_ns), justify="right"),
                     "%": Text(f"{float(k.pct):.1f}", justify="right"),
                     "floor": Text(fm.d(k.floor_ns) if getattr(k, "floor_ns", None) else "-", justify="right"),
                     "bound": Text(str(k.bound or "-") + ("*" if getattr(k, "l2_resident", 0) else "")),
                     "peak": Text("-" if getattr(k, "peak_pct", None) is None else f"{k.peak_pct:.0f}%",
                                  justify="right"),
                     "achieved": Text(fm.text(achieved_text(k)), no_wrap=True, overflow=fm.ov),
                     "op": Text(fm.text(str(k.op or "-")), no_wrap=True, overflow=fm.ov),
                     "shapes": Text(fm.text(str(k.shapes or "-")), no_wrap=True, overflow=fm.ov)}
            kt.add_row(Text(fm.text(short_kernel(k.name)), no_wrap=True, overflow=fm.ov),
                       *(cells[c] for c, _ in cols), key=f"{pi}:{i}")
        self.show_info(0)

    def show_info(self, i: int | tuple[int, int]) -> None:
        sc, fm = self.scene, self.fmt
        k = None
        if isinstance(i, tuple):
            pt = sc.parts[i[0]] if sc is not None and i[0] < len(sc.parts) else None
            ks = (getattr(pt.analysis, "kernels", None) or []) if pt is not None else []
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
            if getattr(k, "floor_ns", None):
                t.append(fm.text(f"; floor {fm.d(k.floor_ns)} ({k.bound or '?'}-bound)"))
            t.append("\n")
            if getattr(k, "floor_pct", None) is not None:
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
    NAME = "findings"

    def fill(self, sc: Scene | None, width: int) -> None:
        """The findings of ``sc``, in the report's order, with the projected saving per step of each fix."""
        self.scene = sc
        fm, ft = self.fmt, self.table
        ft.clear(columns=True)
        if sc is None or sc.analysis is None or analysis_pending(sc.analysis):
            ft.add_column(Text("findings appear once the analysis is done"))
            return
        pj = None if sc.multi else projection_of(sc.analysis)
        cols = ("#", "rank", "severity", "idle", "finding") if sc.multi else \
            ("#", "severity", "idle", "saves/step", "finding") if pj is not None else ("#", "severity", "idle", "finding")
        rows = []
        # what ranks each finding and sets its severity (its own fix, the frame's fused call it carries, or the
        # fix it unlocks with it: Projection.rank_ns), as the report orders them
        ranks = pj.rank_ns(sc.analysis.findings) if pj is not None else {}
        for n, (pi, i, f) in enumerate(findings_of(sc)):
            cells = [Text(str(n + 1)), Text(str(f.severity)), Text(fm.d(f.idle_ns)),
                     Text(fm.text(_located(f)), no_wrap=True, overflow=fm.ov)]
            if sc.multi:
                cells.insert(1, Text(str(rank_of(sc, pi))))
            elif pj is not None:
                s = ranks.get(f.id)
                cells.insert(3, Text("–" if s is None else fm.text(f"−{fm.d(s)}" if s > 0 else fm.d(0)),
                                     justify="right"))
            rows.append((cells, f"{pi}:{i}"))
        # explicit widths, as in the kernels view: a table refilled while shown (a resize) kept its auto widths at
        # the headers' ("idle" cut 136.1 µs to "136.") until it was filled again; the finding takes what is left
        ws = [max([len(c)] + [r[0][k].cell_len for r in rows]) for k, c in enumerate(cols[:-1])]
        for c, w in zip(cols[:-1], ws):
            ft.add_column(Text(c), key=c, width=w)
        ft.add_column(Text(cols[-1]), key=cols[-1], width=max(width - 1 - sum(w + 2 for w in ws) - 2, 12))
        for cells, key in rows:
            ft.add_row(*cells, key=key)
        self.show_info(0)

    def show_info(self, i: int | tuple[int, int]) -> None:
        sc, fm = self.scene, self.fmt
        t = Text()
        f = None
        if isinstance(i, tuple):
            pt = sc.parts[i[0]] if sc is not None and i[0] < len(sc.parts) else None
            fs = (getattr(pt.analysis, "findings", None) or []) if pt is not None else []
            f = fs[i[1]] if 0 <= i[1] < len(fs) else None
        else:
            fs = findings_of(sc)
            f = fs[i][2] if 0 <= i < len(fs) else None
        if f is not None:
            t.append(fm.text(f.title) + "\n", style="bold")
            ng = np.asarray(getattr(f, 'gap_rows', ())).size
            t.append(fm.text(f"{f.severity}, {fm.d(f.idle_ns)} of GPU idle explained, "
                                f"{ng} gap{'' if ng == 1 else 's'}") + "\n")
            pa = pt.analysis if isinstance(i, tuple) and pt is not None else getattr(sc, "analysis", None)
            pj = projection_of(pa)
            if pj is not None:
                s = pj.saving_ns.get(f.id)
                if s is not None:
                    how = "un-profiled, calibrated" if pj.calibrated else "profiled time"
                    t.append(fm.text(f"fix → −{fm.d(s)} per step (−{pj.saving_pct(f.id):.1f}%), {how}: "
                                        f"{pj.what.get(f.id, '')}") + "\n", style="bold")
                dep = pj.unlocks(pa.findings).get(f.id) if pa is not None else None
                if dep is not None and pj.saving_ns.get(dep) is not None and pj.saving_pct(dep) is not None:
                    t.append(fm.text(f"with finding {dep} after it, which needs it first: −{fm.d(pj.saving_ns[dep])} "
                                        f"per step (−{pj.saving_pct(dep):.1f}%)") + "\n", style="bold")
                w = pj.frame_whatif(f.id)
                if w is not None and pj.baseline_ns > 0:
                    owner = pj.ranked_with(f.id)
                    shared = f"; the fix of finding {owner}, ranked there" if owner != f.id else ""
                    t.append(fm.text(f"replace the function → −{fm.d(w.saving_ns)} per step "
                                        f"(−{100.0 * w.saving_ns / pj.baseline_ns:.1f}%) with {w.frame} as one fused "
                                        f"GPU call{shared}") + "\n", style="bold")
            if f.suggestion:
                t.append("suggestion: ", style="bold green")
                t.append(fm.text(str(f.suggestion)) + "\n")
            for ln in evidence_lines(f.evidence, ascii=fm.ascii)[:16]:
                t.append(fm.text("  " + ln)[:300] + "\n", style="dim")
            if pj is not None and pj.frames and pj.baseline_ns > 0:
                # the report's "Functions as one fused GPU call" table (replay/frames.py), its first rows
                t.append("functions as one fused GPU call (saving per step, host per step):\n", style="bold")
                for w in pj.frames[:5]:
                    t.append(fm.text(f"  −{fm.d(w.saving_ns)} (−{100.0 * w.saving_ns / pj.baseline_ns:.1f}%)  "
                                        f"host {fm.d(w.host_ns)}  {w.frame}")[:300] + "\n")
            t.append("Enter: its gaps in the gap list (n walks them, Esc: all gaps)", style="dim")
        self.query_one("#findinginfo", Static).update(t)

    @on(DataTable.RowSelected)
    def _selected(self, ev: DataTable.RowSelected) -> None:
        sc = self.scene
        k = row_key(ev.row_key.value) if ev.row_key is not None else None
        if sc is None or k is None or not 0 <= k[0] < len(sc.parts) or sc.parts[k[0]].analysis is None:
            return
        f = sc.parts[k[0]].analysis.findings[k[1]]
        rows = np.asarray(getattr(f, "gap_rows", []), dtype=np.int64)
        listed = findings_of(sc)
        n = listed.index((k[0], k[1], f)) + 1 if (k[0], k[1], f) in listed else k[1] + 1
        self.post_message(self.ShowGaps(k[0], rows, f"finding {n}"))


def table_views(glyphs: G.Glyphs) -> list[TableView]:
    """The kernels and findings views, hidden (the screen's views switcher shows one on 2 or 3)."""
    views = [KernelsView(glyphs), FindingsView(glyphs)]
    for v in views:
        v.display = False
    return views
