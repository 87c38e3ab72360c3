"""Everything the explorer knows about what it shows in one tab: one trace, or the ranks of one job side by
side (lanes grouped by rank). Lanes, view, gap selection, search; the listed gaps it selects from are merged
by tui/app/scenegaps.py. No textual here."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..trace.model import Kind, TraceModel
from .lanes import Lane, UnionIndex, build_lanes
from .rows import Row, fold_rows
from .scenegaps import gap_lanes_of, listed_counts, listed_gaps, top_fix_position
from .view import View


@dataclass
class Part:
    """One loaded trace of a scene; ``offset`` (ns) aligns its times with the other parts."""

    path: str
    model: TraceModel
    offset: int = 0
    analysis: object = None
    analysis_error: str | None = None
    min_listed_ns: int = 2000
    lanes: list = field(default_factory=list)


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


def _base_ns(model: TraceModel) -> int | None:
    b = model.metadata.get("baseTimeNanoseconds")
    return int(b) if isinstance(b, (int, float)) and not isinstance(b, bool) else None


class Scene:
    def __init__(self, path: str | list[str], model: TraceModel | list[TraceModel]):
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
            offsets = self._align_ranks(models, offsets)
        self.parts = [Part(p, m, off) for p, m, off in zip(paths, models, offsets)]
        for i, pt in enumerate(self.parts):
            pt.lanes = build_lanes(pt.model, part=i, offset=pt.offset)
        self.lanes: list[Lane] = [ln for pt in self.parts for ln in pt.lanes]
        self.active = 0  # the part whose analysis, stack and tables are shown
        lo, hi = self._extent()
        self.view = View(lo, hi)
        self.gap_lanes: dict[tuple[int, int], Lane] = {}
        self.gap_cover: dict[tuple[int, int], UnionIndex] = {}
        # every listed gap of every part, by global gap id
        self.g_part = np.zeros(0, np.int64)
        self.g_row = np.zeros(0, np.int64)
        self.g_start = np.zeros(0, np.int64)
        self.g_end = np.zeros(0, np.int64)
        self.g_dur = np.zeros(0, np.int64)
        self.g_cause = np.zeros(0, np.int64)
        self.g_device = np.zeros(0, np.int64)
        self.order = np.zeros(0, dtype=np.int64)  # gap ids in order of size (after the cause filter)
        self.all_listed = np.zeros(0, dtype=np.int64)
        self.selected = -1  # position in self.order
        self.cause_filter: int | None = None
        self.finding_filter: str | None = None  # the gap list holds one finding's gaps (Enter on a finding)
        self.lane_cursor = 0
        self.search_query = ""
        self.matches = np.zeros(0, dtype=np.int64)
        self.match_parts = np.zeros(0, dtype=np.int64)
        self.match_pos = -1
        self.match_in = np.zeros(0, dtype=bool)  # the matches inside the analysed window
        self._rows: list[Row] | None = None
        self._full: list[Row] | None = None  # every row, before the lanes with nothing in view are folded
        self._rows_key: int | None = None  # the view span the rows were folded for
        self.fold_empty = True
        #: the other end of the launch under the cursor: (part, event, display row, aligned time), or None
        self.link: tuple | None = None
        self.mark: int | None = None  # `m`: one end of a range, aligned ns
        self.span_sel: tuple[int, int] | None = None  # the selected range [a, b), aligned ns
        self._launched: dict = {}  # part -> (runtime call ids sorted, the first GPU event each launched)
        #: what times are counted from: "window" (the analysed window's start, as the report) or "trace"
        #: (the trace's own timestamps)
        self.time_mode = "window"
        self._win0: int | None = None  # the analysed window's start (aligned), set when analyses land
        self._win1: int | None = None  # and its end (aligned)
        self.visited = False  # shown once on screen (a tab opens on its top fix's gap the first time)

    @property
    def origin(self) -> int:
        """Aligned time shown as 0: the analysed window's start (``Analysis.window_start_ns``, the report's
        origin; the earliest rank's in a multi-rank tab), the trace's start until the analysis is in, or in
        "trace" mode the active trace's own time 0."""
        if self.time_mode == "trace":
            return self.offset
        # (Analysis.window_start_ns walks the devices: ~0.8 ms on a 100 MB trace, and the axis asks per frame)
        return self._win0 if self._win0 is not None else self.view.lo

    def fit_extent(self) -> tuple[int, int]:
        """What `0` fits (aligned ns): the analysed window, the span the report's numbers are of (the union of
        the parts' windows in a multi-rank tab); the whole trace until the analysis is in or where it has no
        device window."""
        if self._win0 is not None and self._win1 is not None and self._win1 > self._win0:
            return self._win0, self._win1
        return self.view.lo, self.view.hi

    @property
    def origin_label(self) -> str:
        return "trace time" if self.time_mode == "trace" else "from window start"

    def listed_counts(self) -> tuple[int, int, int]:
        """(listed, all, shortest listed ns) over the analysed parts (tui/app/scenegaps.py ``listed_counts``)."""
        return listed_counts(self.parts)

    def _align_ranks(self, models: list[TraceModel], offsets: list[int]) -> list[int]:
        """Time bases checked against the collectives' end times (tui.analysis.ranks.align_clocks): a rank
        whose ends are consistently off is shifted by what they say, and its group rows say so."""
        try:
            from ..analysis.ranks import align_clocks

            new, warns = align_clocks(models)
        except Exception:  # noqa: BLE001 - the lanes stay usable on the time bases alone
            return offsets
        self.clock_warnings = warns
        for i, (a, b) in enumerate(zip(offsets, new)):
            for w in warns:
                if w.startswith(f"rank {models[i].rank}:"):
                    self.clock_notes[i] = (f"clock corrected {(b - a) / 1e3:+.1f} µs from collectives"
                                           if "corrected" in w else "clock unchecked: collective ends do not line up")
        lo = min(new)
        return [o - lo for o in new]

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
        return self.part.analysis

    @property
    def analysis_error(self) -> str | None:
        return self.part.analysis_error

    @analysis_error.setter
    def analysis_error(self, v) -> None:
        self.part.analysis_error = v

    @property
    def any_analysis(self) -> bool:
        return any(p.analysis is not None for p in self.parts)

    def title(self) -> str:
        b = os.path.basename(self.parts[0].path)
        n = len(self.parts) - 1
        return b + (f" +{n} rank{'s' if n > 1 else ''}" if n else "")

    # ---------------------------------------------------------------- extent
    def _extent(self) -> tuple[int, int]:
        lo, hi = None, None
        for ln in self.lanes:
            if ln.iv is not None and len(ln.iv):
                a, b = int(ln.iv.starts[0]), int(ln.iv.ends.max())
            elif ln.segs is not None and ln.segs.starts.size:
                a, b = int(ln.segs.starts[0]), int(ln.segs.ends.max())
            else:
                continue
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        if lo is None:
            lo, hi = self.parts[0].model.window_ns()
        return lo, max(hi, lo + 1)

    # ------------------------------------------------------------------ rows
    def rows(self) -> list[Row]:
        """The display rows: lanes with nothing in view are folded, two or more of one group into one line
        (never the lane under the cursor, an expanded thread, or a gap row). The lane cursor stays on its lane
        when rows come and go.

        The fold is decided again when the zoom changes by 2x or more, not on every move: a change in the
        number of rows is a layout of the whole screen (~45 ms at 200x50 on a 100 MB trace), and pans that
        folded and unfolded a lane each time made every pan that slow (bench_open --keys-only)."""
        if self._full is None:
            self._full = self._build_rows()
        span = self.view.t1 - self.view.t0
        key = self._rows_key
        if self._rows is None or key is None or not key // 2 < span < key * 2:
            old = self._rows
            cur = old[self.lane_cursor].key if old and 0 <= self.lane_cursor < len(old) else None
            new = fold_rows(self._full, cur, self.view.t0, self.view.t1) if self.fold_empty else self._full
            self._rows_key = span
            if old is None or len(new) != len(old) or any(a.key != b.key for a, b in zip(new, old)):
                self._rows = new
                if cur is not None:
                    for i, r in enumerate(new):
                        if r.key == cur:
                            self.lane_cursor = i
                            break
                self.lane_cursor = min(self.lane_cursor, max(len(new) - 1, 0))
        return self._rows

    def invalidate_rows(self) -> None:
        self._rows = None
        self._full = None
        self._rows_key = None

    def _device_title(self, model: TraceModel, dev: int, rank) -> str:
        t = device_label(model, dev)
        return (f"rank {rank} · " if rank is not None else "") + t

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
                          {d for (p, d) in self.gap_lanes if p == pi})
            for dev in devs:
                out.append(Row(None, self._device_title(pt.model, dev, rank)))
                for ln in pt.lanes:
                    if ln.device == dev and ln.kind == "stream":
                        out.append(Row(ln))
                if (pi, dev) in self.gap_lanes:
                    out.append(Row(self.gap_lanes[(pi, dev)]))
                for ln in pt.lanes:
                    if ln.device == dev and ln.kind == "copy":
                        out.append(Row(ln))
        return out

    def cursor_lane(self) -> Lane | None:
        rows = self.rows()
        if not rows:
            return None
        return rows[min(self.lane_cursor, len(rows) - 1)].lane

    def toggle_expand(self) -> bool:
        ln = self.cursor_lane()
        if ln is None or ln.kind not in ("cpu", "depth"):
            return False
        if ln.kind == "depth":  # collapse the parent thread (on a launcher row: show / fold the launcher levels)
            row = ln
            for p in self.lanes:
                if p.kind == "cpu" and p.track == ln.track and p.part == ln.part:
                    ln = p
            if (row.harness_fold or row.harness) and ln.kind == "cpu":
                ln.show_harness = not ln.show_harness
                self.invalidate_rows()
                want = row if row.harness_fold else next((d for d in ln.depth_rows if d.harness_fold), row)
                if ln.show_harness:
                    want = next((d for d in ln.depth_rows if d.harness), row)
                for i, r in enumerate(self.rows()):
                    if r.lane is want:
                        self.lane_cursor = i
                return True
        if not ln.depth_rows:
            return False
        ln.expanded = not ln.expanded
        self.invalidate_rows()
        for i, r in enumerate(self.rows()):
            if r.lane is ln:
                self.lane_cursor = i
        return True

    # --------------------------------------------------------------- analysis
    def set_analysis(self, a, min_listed_ns: int, part: int = 0) -> None:
        self.set_analyses([(part, a, min_listed_ns)])

    def set_analyses(self, items) -> None:
        """Install several parts' analyses at once (``(part, analysis, min_listed_ns)``): one merge of the gaps."""
        for part, a, min_listed_ns in items:
            pt = self.parts[part]
            pt.analysis = a
            pt.min_listed_ns = int(min_listed_ns)
        self.merge_gaps()
        self.apply_filter(self.cause_filter)  # (a finding's filter ends when analyses land)
        self.select(self.opening_position())
        self.invalidate_rows()

    def opening_position(self) -> int:
        """Where the gap list opens: the largest gap of the active part's top fix (tui/app/scenegaps.py
        ``top_fix_position``); 0 (the largest gap) without one."""
        return top_fix_position(self.analysis, self.active, self.g_part, self.g_row, self.order)

    def rank_summary(self) -> list[dict]:
        """Per rank of a multi-rank tab, in rank order (tui/app/ranksummary.py)."""
        from .ranksummary import rank_summary

        return rank_summary(self)

    def merge_gaps(self) -> None:
        """The listed gaps of the analysed parts, merged by global gap id (tui/app/scenegaps.py), and their rows."""
        g = listed_gaps(self.parts)
        self._win0, self._win1 = g.window
        self.g_part, self.g_row, self.g_start, self.g_end = g.part, g.row, g.start, g.end
        self.g_dur, self.g_cause, self.g_device = g.dur, g.cause, g.device
        self.all_listed = g.largest_first
        self.gap_lanes, self.gap_cover = gap_lanes_of(g)

    def apply_finding(self, part: int, rows, label: str) -> int:
        """Only the gaps of one finding (its ``gap_rows`` in part ``part``), largest first; returns how many."""
        rows = np.asarray(rows, dtype=np.int64)
        ids = self.all_listed[(self.g_part[self.all_listed] == part) & np.isin(self.g_row[self.all_listed], rows)]
        self.cause_filter = None
        self.finding_filter = label
        self.order = ids
        self.selected = 0 if ids.size else -1
        if self.selected >= 0:
            self.active = int(self.g_part[ids[0]])
        return int(ids.size)

    def apply_filter(self, cause: int | None) -> None:
        self.finding_filter = None
        self.cause_filter = cause
        ids = self.all_listed
        if cause is not None:
            ids = ids[self.g_cause[ids] == cause]
        self.order = ids
        self.selected = 0 if ids.size else -1
        if self.selected >= 0:
            self.active = int(self.g_part[ids[0]])

    def select(self, pos: int) -> int:
        """Select the gap at ``pos`` of the order; its part becomes the active one. Returns the gap id."""
        if not self.order.size:
            self.selected = -1
            return -1
        self.selected = max(0, min(int(pos), self.order.size - 1))
        gid = int(self.order[self.selected])
        self.active = int(self.g_part[gid])
        return gid

    @property
    def selected_gap(self) -> int:
        """Global id of the selected gap, or -1."""
        if 0 <= self.selected < self.order.size:
            return int(self.order[self.selected])
        return -1

    @property
    def selected_row(self) -> int:
        """Row of the selected gap in its part's ``analysis.gaps`` (the active part), or -1."""
        gid = self.selected_gap
        return int(self.g_row[gid]) if gid >= 0 else -1

    def gap_span(self, gid: int) -> tuple[int, int, int]:
        """Aligned (start, end, device) of gap ``gid``."""
        return int(self.g_start[gid]), int(self.g_end[gid]), int(self.g_device[gid])

    def gap_cover_for(self, lane: Lane) -> UnionIndex | None:
        return self.gap_cover.get((lane.part, lane.device))

    # ----------------------------------------------------------------- search
    def search(self, query: str) -> int:
        """Every kernel, copy, op, range, frame and runtime call whose name holds ``query`` (tui/app/matches.py),
        in time order, ``match_in`` those in the analysed window; the first shown is the nearest the cursor."""
        from .matches import find, nearest

        self.search_query = query
        self.matches, self.match_parts, t, self.match_in = find(self.parts, query)
        if not self.matches.size:
            self.match_pos = -1
            return 0
        self.match_pos = nearest(t, self.view.cursor)
        self.active = int(self.match_parts[self.match_pos])
        return int(self.matches.size)

    def current_match(self) -> int:
        if 0 <= self.match_pos < self.matches.size:
            self.active = int(self.match_parts[self.match_pos])
            return int(self.matches[self.match_pos])
        return -1

    def step_match(self, d: int) -> int:
        if not self.matches.size:
            return -1
        self.match_pos = (self.match_pos + d) % self.matches.size
        return self.current_match()

    def linked(self, part: int, ev: int) -> int:
        """The other end of a launch: a kernel's (copy's) launching runtime call, or the GPU work a runtime
        call launched; -1 when there is none."""
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

    def set_link(self, part: int, ev: int) -> bool:
        """Mark the other end of event ``ev``'s launch (``self.link``: part, event, display row, aligned
        time), or clear the mark (ev < 0). True when the mark changed."""
        new = None
        if ev >= 0:
            other = self.linked(part, ev)
            if other >= 0:
                row = self.row_of_event(other, part)
                t = int(self.parts[part].model.ts_ns[other]) + self.parts[part].offset
                new = (part, other, row, t)
        changed = new != self.link
        self.link = new
        return changed

    def row_of_event(self, ev: int, part: int | None = None) -> int:
        """The display row holding event ``ev`` of ``part`` (its stream / copy lane / thread), or -1."""
        part = self.active if part is None else part
        m = self.parts[part].model
        tr = int(m.track[ev])
        k = int(m.kind[ev])
        t = int(m.ts_ns[ev]) + self.parts[part].offset
        thread = -1  # an expanded thread's row: the event's own depth row below it is the better answer
        for i, r in enumerate(self.rows()):
            ln = r.lane
            if ln is None or ln.part != part:
                continue
            if thread >= 0:
                if ln.kind != "depth":
                    return thread
                if ln.iv is not None and not ln.harness_fold:
                    j = int(np.searchsorted(ln.iv.starts, t))
                    hi = int(np.searchsorted(ln.iv.starts, t, side="right"))
                    if ev in ln.iv.idx[j:hi].tolist():
                        return i
                continue
            if k in (Kind.MEMCPY, Kind.MEMSET):
                if ln.kind == "copy" and ln.iv is not None:
                    j = int(np.searchsorted(ln.iv.starts, t))
                    hi = int(np.searchsorted(ln.iv.starts, t, side="right"))
                    if ev in ln.iv.idx[j:hi].tolist():
                        return i
            elif k == Kind.ANNOTATION and ln.kind == "ranges":
                return i
            elif ln.track == tr and ln.kind == "cpu" and ln.expanded:
                thread = i
            elif ln.track == tr and ln.kind in ("stream", "cpu"):
                return i
        return thread
