"""Everything the explorer knows about what it shows in one tab: one trace, or the ranks of one job side by
side (lanes grouped by rank). A scene holds its parts (the traces, their analyses and lanes) and which one is
active, and is made of parts with one responsibility each:

- ``view``: the time window and the cursor (tui/view.py ``View``);
- ``display``: the display rows and the lane cursor on them (tui/rows.py ``DisplayRows``);
- ``gaps``: the listed gaps, the gap list's filter and the selected gap (tui/scenegaps.py ``GapSelection``);
- ``search``: the / query and its matches (tui/matches.py ``SearchState``);
- ``launch``: the other end of the launch under the cursor (``LaunchLink``).

What is left here is what ties them to the parts: the rows' grouping, the time origin, the range marks and the
active part following the selected gap or match. The rows' grouping is a function the scene is given
(``Scene(..., rows=...)``: the before/after scene's, tui/diffscene.py), its own by default. No textual here."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..analysis import Analysis
from ..trace.model import Kind, TraceModel
from .lanes import Lane, build_lanes
from .loadstate import NOT_YET, AnalysisState
from .matches import SearchState
from .rows import DisplayRows, Row
from .scenegaps import GapSelection, listed_counts, merge_gaps, top_action_position
from .view import View


@dataclass
class Part:
    """One loaded trace of a scene; ``offset`` (ns) aligns its times with the other parts; ``state``: where its
    analysis is (tui/loadstate.py ``AnalysisState``: pending, provisional, ready, failed)."""

    path: str
    model: TraceModel
    offset: int = 0
    state: AnalysisState = NOT_YET
    min_listed_ns: int = 2000
    lanes: list = field(default_factory=list)

    @property
    def analysis(self):
        """What the part's gaps are listed from (``AnalysisState.source``): the full analysis (ready, or pending
        with its findings being built), a preview's numbers (provisional), or None. What else the part has (its
        findings, plan, tables, notes) is asked of ``state``."""
        return self.state.source

    @analysis.setter
    def analysis(self, a) -> None:
        """The final analysis (None: none)."""
        self.state = as_state(a)

    @property
    def analysis_error(self) -> str | None:
        return self.state.error

    @analysis_error.setter
    def analysis_error(self, error: str | None) -> None:
        self.state = NOT_YET if error is None else AnalysisState.failed_with(error)


def device_label(model, dev: int) -> str:
    """``cuda:N`` and the GPU's name (``TraceModel.device_name``: the report and the JSON use the same)."""
    nm = model.device_name(dev)
    props = [p for p in model.devices if isinstance(p, dict)]
    if not nm:  # no name recorded (some ROCm traces): what `gapscope info` shows, SMs and memory
        p = next((p for p in props if p.get("id") == dev), props[0] if props else None)
        sms, mem = (p.get("numSms"), p.get("totalGlobalMem")) if p else (None, None)
        if isinstance(sms, int) and isinstance(mem, (int, float)):
            nm = f"({sms} SMs, {mem / 2**30:.0f} GiB)"
    return f"cuda:{dev}" + (f" {nm}" if nm else "")


def as_state(a) -> AnalysisState:
    """``a`` as a part's state: an ``AnalysisState`` as it is, an analysis as the final one, None as none yet."""
    if a is None:
        return NOT_YET
    return a if isinstance(a, AnalysisState) else AnalysisState.ready_of(a)


def _base_ns(model: TraceModel) -> int | None:
    b = model.metadata.get("baseTimeNanoseconds")
    return int(b) if isinstance(b, (int, float)) and not isinstance(b, bool) else None


def device_title(model: TraceModel, dev: int, rank) -> str:
    """A device's group row: ``cuda:N`` and its name, after ``rank r · `` when a rank is given."""
    return (f"rank {rank} · " if rank is not None else "") + device_label(model, dev)


def lanes_extent(lanes: list[Lane], model: TraceModel) -> tuple[int, int]:
    """The span (aligned ns) the lanes cover; the trace's own window when they hold nothing."""
    lo, hi = None, None
    for ln in lanes:
        if ln.iv is not None and len(ln.iv):
            a, b = int(ln.iv.starts[0]), int(ln.iv.ends.max())
        elif ln.segs is not None and ln.segs.starts.size:
            a, b = int(ln.segs.starts[0]), int(ln.segs.ends.max())
        else:
            continue
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else max(hi, b)
    if lo is None:
        lo, hi = model.window_ns()
    return lo, max(hi, lo + 1)


def align_ranks(models: list[TraceModel], offsets: list[int]) -> tuple[list[int], list[str], dict[int, str]]:
    """Time bases checked against the collectives' end times (gapscope.analysis.ranks.align_clocks): a rank whose
    ends are consistently off is shifted by what they say. Returns (the offsets, the clock check's warnings, per
    part a short note for its rank's group rows); the offsets as given when the check cannot be made."""
    try:
        from ..analysis.ranks import align_clocks

        new, warns = align_clocks(models)
    except Exception:  # noqa: BLE001 - the lanes stay usable on the time bases alone
        return offsets, [], {}
    notes = {}
    for i, (a, b) in enumerate(zip(offsets, new)):
        for w in warns:
            if w.startswith(f"rank {models[i].rank}:"):
                notes[i] = (f"clock corrected {(b - a) / 1e3:+.1f} µs from collectives"
                            if "corrected" in w else "clock unchecked: collective ends do not line up")
    lo = min(new)
    return [o - lo for o in new], warns, notes


class LaunchLink:
    """The other end of the launch under the cursor: a kernel's (copy's) launching runtime call, or the GPU work a
    runtime call launched. ``link``: (part, event, display row, aligned time) of that other end, or None."""

    def __init__(self, parts: list[Part], display: DisplayRows) -> None:
        self.parts = parts
        self.display = display
        self.link: tuple | None = None
        self._launched: dict = {}  # part -> (runtime call ids sorted, the first GPU event each launched)

    def other_end(self, part: int, ev: int) -> int:
        """The other end of event ``ev``'s launch in part ``part``; -1 when there is none."""
        m = self.parts[part].model
        if int(m.kind[ev]) in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET):
            return int(m.launch[ev])
        if int(m.kind[ev]) not in (Kind.RUNTIME, Kind.DRIVER):
            return -1
        inv = self._launched.get(part)
        if inv is None:  # runtime call -> the first GPU event it launched (built once per trace)
            gpu = np.flatnonzero(m.launch >= 0)
            la = m.launch[gpu]
            o = np.lexsort((m.ts_ns[gpu], la))
            la, gpu = la[o], gpu[o]
            first = np.ones(la.size, dtype=bool)
            first[1:] = la[1:] != la[:-1]
            inv = self._launched[part] = (la[first], gpu[first])
        i = int(np.searchsorted(inv[0], ev))
        return int(inv[1][i]) if i < inv[0].size and int(inv[0][i]) == ev else -1

    def mark(self, part: int, ev: int) -> bool:
        """Mark the other end of event ``ev``'s launch (``link``), or clear the mark (ev < 0). True when the mark
        changed."""
        new = None
        if ev >= 0:
            other = self.other_end(part, ev)
            if other >= 0:
                pt = self.parts[part]
                row = self.display.row_of_event(other, part, pt.model, pt.offset)
                new = (part, other, row, int(pt.model.ts_ns[other]) + pt.offset)
        changed = new != self.link
        self.link = new
        return changed


class Scene:
    def __init__(self, path: str | list[str], model: TraceModel | list[TraceModel], *,
                 rows: Callable[[], list[Row]] | None = None):
        """``rows``: the scene's display rows, top to bottom (the before/after scene's); by default one group of
        rows per rank (or trace): its host, then per device its streams, its idle gaps and its copies."""
        paths = [path] if isinstance(path, str) else list(path)
        models = [model] if isinstance(model, TraceModel) else list(model)
        bases = [_base_ns(m) for m in models]
        # ranks written with different time bases are lined up on the earliest base
        if len(models) > 1 and all(b is not None for b in bases):
            lo = min(bases)
            offsets = [b - lo for b in bases]
        else:
            offsets = [0] * len(models)
        #: what the clock check said (a rank whose collective end times disagree with its time base)
        self.clock_warnings: list[str] = []
        self.clock_notes: dict[int, str] = {}  # part -> short note for its rank's group rows
        #: why the ranks were analysed one by one (cross-rank matching failed), or None
        self.rank_error: str | None = None
        if len(models) > 1 and all(m.rank is not None for m in models):
            offsets, self.clock_warnings, self.clock_notes = align_ranks(models, offsets)
        self.parts = [Part(p, m, off) for p, m, off in zip(paths, models, offsets)]
        for i, pt in enumerate(self.parts):
            pt.lanes = build_lanes(pt.model, part=i, offset=pt.offset)
        self.lanes: list[Lane] = [ln for pt in self.parts for ln in pt.lanes]
        self.active = 0  # the part whose analysis, stack and tables are shown
        self.view = View(*lanes_extent(self.lanes, self.parts[0].model))
        self.display = DisplayRows(rows or self._build_rows, self.view)
        self.gaps = GapSelection()
        self.search = SearchState()
        self.launch = LaunchLink(self.parts, self.display)
        self.mark: int | None = None  # `m`: one end of a range, aligned ns
        self.span_sel: tuple[int, int] | None = None  # the selected range [a, b), aligned ns
        #: what times are counted from: "window" (the analysed window's start, as the report) or "trace"
        #: (the trace's own timestamps)
        self.time_mode = "window"
        self.visited = False  # shown once on screen (a tab opens on its top action's gap the first time)
        self.kernels_opened = False  # a plan led by a kernel change opened the kernels view (once)

    @property
    def origin(self) -> int:
        """Aligned time shown as 0: the analysed window's start (``Analysis.window_start_ns``, the report's
        origin; the earliest rank's in a multi-rank tab), the trace's start until the analysis is in, or in
        "trace" mode the active trace's own time 0."""
        if self.time_mode == "trace":
            return self.offset
        # (Analysis.window_start_ns walks the devices: ~0.8 ms on a 100 MB trace, and the axis asks per frame)
        w0 = self.gaps.window[0]
        return w0 if w0 is not None else self.view.lo

    def fit_extent(self) -> tuple[int, int]:
        """What `0` fits (aligned ns): the analysed window, the span the report's numbers are of (the union of
        the parts' windows in a multi-rank tab); the whole trace until the analysis is in or where it has no
        device window."""
        w0, w1 = self.gaps.window
        if w0 is not None and w1 is not None and w1 > w0:
            return w0, w1
        return self.view.lo, self.view.hi

    def listed_counts(self) -> tuple[int, int, int]:
        """(listed, all, shortest listed ns) over the analysed parts (tui/scenegaps.py ``listed_counts``),
        kept while every part has the same analysis and gap table (the same objects), number of gaps and
        threshold: it counts every gap of the trace (~0.3 ms at 1 GB), and the stack panel asks on every gap
        jump."""
        key = tuple((pt.analysis, None if pt.analysis is None else pt.analysis.gaps,
                     (pt.min_listed_ns, 0 if pt.analysis is None else len(pt.analysis.gaps))) for pt in self.parts)
        hit = self.__dict__.get("_listed_counts")
        if hit is None or len(hit[0]) != len(key) or not all(
                a is b and ga is gb and m == n for (a, ga, m), (b, gb, n) in zip(hit[0], key)):
            hit = self._listed_counts = (key, listed_counts(self.parts))
        return hit[1]

    # ------------------------------------------------------------- the active part
    @property
    def multi(self) -> bool:
        return len(self.parts) > 1

    @property
    def part(self) -> Part:
        return self.parts[self.active]

    @property
    def model(self) -> TraceModel:
        return self.part.model

    @property
    def path(self) -> str:
        return self.part.path

    @property
    def offset(self) -> int:
        return self.part.offset

    @property
    def analysis(self):
        """What the active part's gaps are listed from (``Part.analysis``)."""
        return self.part.analysis

    @property
    def state(self) -> AnalysisState:
        """Where the active part's analysis is (tui/loadstate.py)."""
        return self.part.state

    @property
    def analysis_error(self) -> str | None:
        return self.part.analysis_error

    @property
    def any_analysis(self) -> bool:
        return any(p.analysis is not None for p in self.parts)

    @property
    def exportable(self) -> bool:
        """No preview and no analysis in progress (``AnalysisState.in_progress``): what an export writes is final."""
        return not any(p.model.partial or p.state.in_progress for p in self.parts)

    def title(self) -> str:
        b = os.path.basename(self.parts[0].path)
        n = len(self.parts) - 1
        return b + (f" +{n} rank{'s' if n > 1 else ''}" if n else "")

    # ------------------------------------------------------------------ rows
    def _build_rows(self) -> list[Row]:
        out: list[Row] = []
        for pi, pt in enumerate(self.parts):
            rank = pt.model.rank
            if rank is None and self.multi:
                rank = pi
            host = [ln for ln in pt.lanes if ln.kind in ("ranges", "cpu")]
            if host:
                note = f" · {self.clock_notes[pi]}" if pi in self.clock_notes else ""
                out.append(Row(None, (f"rank {rank} · " if rank is not None else "") + "host" + note))
                for ln in host:
                    out.append(Row(ln))
                    if ln.kind == "cpu" and ln.expanded:
                        out.extend(Row(d) for d in ln.depth_rows if not (d.harness if not ln.show_harness
                                                                         else d.harness_fold))
            devs = sorted({ln.device for ln in pt.lanes if ln.device >= 0} |
                          {d for (p, d) in self.gaps.lanes if p == pi})
            for dev in devs:
                out.append(Row(None, device_title(pt.model, dev, rank)))
                for ln in pt.lanes:
                    if ln.device == dev and ln.kind == "stream":
                        out.append(Row(ln))
                if (pi, dev) in self.gaps.lanes:
                    out.append(Row(self.gaps.lanes[(pi, dev)]))
                for ln in pt.lanes:
                    if ln.device == dev and ln.kind == "copy":
                        out.append(Row(ln))
        return out

    # --------------------------------------------------------------- analysis
    def set_analysis(self, a: Analysis | AnalysisState, min_listed_ns: int, part: int = 0, merged=None) -> None:
        """Install part ``part``'s final analysis, or where its analysis is (an ``AnalysisState``: a preview's
        numbers, gaps whose findings are being built)."""
        self.set_analyses([(part, a, min_listed_ns)], merged)

    def set_analyses(self, items, merged=None) -> None:
        """Install several parts' analyses at once (``(part, analysis or AnalysisState, min_listed_ns)``): one merge
        of the gaps (``merged``: made beforehand by ``premerge``, when it is of these analyses)."""
        for part, a, min_listed_ns in items:
            pt = self.parts[part]
            pt.state = as_state(a)
            pt.min_listed_ns = int(min_listed_ns)
        self.gaps.merge(self.parts, merged)  # the listed gaps of the analysed parts, by global gap id
        self.apply_filter(self.gaps.cause_filter)  # (a finding's filter ends when analyses land)
        self.select(self.opening_position())
        self.display.invalidate()

    def opening_position(self) -> int:
        """Where the gap list opens: the largest gap of the active part's top action of the plan (tui/scenegaps.py
        ``top_action_position``); 0 (the largest gap) without one."""
        g = self.gaps
        return top_action_position(self.state, self.active, g.part, g.row, g.order)

    def rank_summary(self) -> list[dict]:
        """Per rank of a multi-rank tab, in rank order (tui/ranksummary.py)."""
        from .ranksummary import rank_summary

        return rank_summary(self)

    def premerge(self, part: int, a, min_listed_ns: int):
        """The merge ``set_analysis(a, min_listed_ns, part)`` would make
        (tui/scenegaps.py ``merge_gaps``), made without touching the scene: the load thread makes it, the screen's
        thread installs it."""
        from dataclasses import replace

        return merge_gaps([replace(pt, state=as_state(a), min_listed_ns=int(min_listed_ns)) if i == part else pt
                           for i, pt in enumerate(self.parts)])

    # ------------------------------------------------- the active part follows the selected gap or match
    def _follow_gap(self) -> None:
        gid = self.gaps.selected_gap
        if gid >= 0:
            self.active = int(self.gaps.part[gid])

    def apply_finding(self, part: int, rows, label: str) -> int:
        """Only the gaps of one finding (``GapSelection.filter_finding``); returns how many."""
        n = self.gaps.filter_finding(part, rows, label)
        self._follow_gap()
        return n

    def apply_filter(self, cause: int | None) -> None:
        """Only the gaps of ``cause`` (every gap: None); the largest selected."""
        self.gaps.filter_cause(cause)
        self._follow_gap()

    def select(self, pos: int) -> int:
        """Select the gap at ``pos`` of the gap list; its part becomes the active one. Returns the gap id."""
        gid = self.gaps.select(pos)
        self._follow_gap()
        self.search.in_panel = False  # the stack panel shows the gap again, not the last match
        return gid

    def find(self, query: str) -> int:
        """Every kernel, copy, op, range, frame and runtime call whose name holds ``query`` (tui/matches.py),
        in time order; the first shown is the nearest the cursor, and its part becomes the active one."""
        n = self.search.run(self.parts, query, self.view.cursor)
        if n:
            self.current_match()
        return n

    def current_match(self) -> int:
        """The event of the match shown (its part becomes the active one), or -1."""
        hit = self.search.current()
        if hit is None:
            return -1
        self.active = hit[0]
        return hit[1]

    def step_match(self, d: int) -> int:
        if not self.search.matches.size:
            return -1
        self.search.step(d)
        return self.current_match()

    # ------------------------------------------------------------ rows of events
    def row_of_event(self, ev: int, part: int | None = None) -> int:
        """The display row holding event ``ev`` of ``part`` (the active part when None), or -1."""
        part = self.active if part is None else part
        pt = self.parts[part]
        return self.display.row_of_event(ev, part, pt.model, pt.offset)
