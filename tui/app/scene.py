"""Everything the explorer knows about one loaded trace: lanes, view, selection, search. No textual here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace.model import Kind, TraceModel
from .lanes import Lane, Segments, UnionIndex, build_lanes
from .view import View

# kinds that / finds: what a person would call a kernel, an op, a range or a Python function
SEARCH_KINDS = np.array([Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON,
                         Kind.RUNTIME], dtype=np.uint8)


@dataclass
class Row:
    """One display row: a lane, or a group header (lane is None)."""

    lane: Lane | None
    title: str = ""

    @property
    def key(self) -> str:
        return self.lane.key if self.lane is not None else f"group:{self.title}"


class Scene:
    def __init__(self, path: str, model: TraceModel):
        self.path = path
        self.model = model
        self.lanes: list[Lane] = build_lanes(model)
        lo, hi = self._extent()
        self.view = View(lo, hi)
        self.analysis = None
        self.analysis_error: str | None = None
        self.gap_lanes: dict[int, Lane] = {}
        self.gap_cover: dict[int, UnionIndex] = {}
        self.order = np.zeros(0, dtype=np.int64)  # listed gap rows (of analysis.gaps) in order of size
        self.all_listed = np.zeros(0, dtype=np.int64)
        self.selected = -1  # position in self.order
        self.cause_filter: int | None = None
        self.lane_cursor = 0
        self.search_query = ""
        self.matches = np.zeros(0, dtype=np.int64)
        self.match_pos = -1
        self._rows: list[Row] | None = None

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
            lo, hi = self.model.window_ns()
        return lo, max(hi, lo + 1)

    # ------------------------------------------------------------------ rows
    def rows(self) -> list[Row]:
        if self._rows is None:
            self._rows = self._build_rows()
            self.lane_cursor = min(self.lane_cursor, max(len(self._rows) - 1, 0))
        return self._rows

    def invalidate_rows(self) -> None:
        self._rows = None

    def _device_title(self, dev: int, rank) -> str:
        nm = self.model.device_name(dev)
        t = f"cuda:{dev}" + (f" {nm}" if nm else "")
        return (f"rank {rank} · " if rank is not None else "") + t

    def _build_rows(self) -> list[Row]:
        out: list[Row] = []
        rank = self.model.rank
        host = [ln for ln in self.lanes if ln.kind in ("ranges", "cpu")]
        if host:
            out.append(Row(None, (f"rank {rank} · " if rank is not None else "") + "host"))
            for ln in host:
                out.append(Row(ln))
                if ln.kind == "cpu" and ln.expanded:
                    out.extend(Row(d) for d in ln.depth_rows)
        devs = sorted({ln.device for ln in self.lanes if ln.device >= 0} | set(self.gap_lanes))
        for dev in devs:
            out.append(Row(None, self._device_title(dev, rank)))
            for ln in self.lanes:
                if ln.device == dev and ln.kind == "stream":
                    out.append(Row(ln))
            if dev in self.gap_lanes:
                out.append(Row(self.gap_lanes[dev]))
            for ln in self.lanes:
                if ln.device == dev and ln.kind == "copy":
                    out.append(Row(ln))
        return out

    def toggle_expand(self) -> bool:
        rows = self.rows()
        if not rows:
            return False
        ln = rows[self.lane_cursor].lane
        if ln is None or ln.kind not in ("cpu", "depth"):
            return False
        if ln.kind == "depth":  # collapse the parent thread
            for p in self.lanes:
                if p.kind == "cpu" and p.track == ln.track:
                    ln = p
        if not ln.depth_rows:
            return False
        ln.expanded = not ln.expanded
        self.invalidate_rows()
        rows = self.rows()
        for i, r in enumerate(rows):
            if r.lane is ln:
                self.lane_cursor = i
        return True

    # --------------------------------------------------------------- analysis
    def set_analysis(self, a, min_listed_ns: int) -> None:
        self.analysis = a
        g = a.gaps
        n = len(g)
        dur = np.asarray(g.dur_ns[:n], dtype=np.int64)
        listed = np.flatnonzero(dur >= min_listed_ns)
        self.all_listed = listed
        self.gap_lanes.clear()
        self.gap_cover.clear()
        dev = np.asarray(g.device[:n])
        for d in sorted(set(dev[listed].tolist())):
            rows = listed[dev[listed] == d]
            st = np.asarray(g.start_ns)[rows]
            en = np.asarray(g.end_ns)[rows]
            o = np.argsort(st, kind="stable")
            rows, st, en = rows[o], st[o], en[o]
            self.gap_lanes[int(d)] = Lane("gaps", "idle gaps", device=int(d), segs=Segments(st, en, rows))
            self.gap_cover[int(d)] = UnionIndex(st, en)
        self.apply_filter(self.cause_filter)
        self.invalidate_rows()

    def apply_filter(self, cause: int | None) -> None:
        self.cause_filter = cause
        if self.analysis is None:
            return
        rows = self.all_listed
        if cause is not None:
            rows = rows[np.asarray(self.analysis.gaps.cause)[rows] == cause]
        self.order = rows
        self.selected = 0 if rows.size else -1

    @property
    def selected_row(self) -> int:
        if 0 <= self.selected < self.order.size:
            return int(self.order[self.selected])
        return -1

    def gap_span(self, row: int) -> tuple[int, int, int]:
        g = self.analysis.gaps
        return int(g.start_ns[row]), int(g.end_ns[row]), int(g.device[row])

    # ----------------------------------------------------------------- search
    def search(self, query: str) -> int:
        self.search_query = query
        q = query.lower()
        if not q:
            self.matches = np.zeros(0, dtype=np.int64)
            self.match_pos = -1
            return 0
        ids = [i for i, nm in enumerate(self.model.names) if q in nm.lower()]
        if not ids:
            self.matches = np.zeros(0, dtype=np.int64)
            self.match_pos = -1
            return 0
        m = self.model
        hit = np.flatnonzero(np.isin(m.name_id, np.asarray(ids, dtype=np.int32)) & np.isin(m.kind, SEARCH_KINDS))
        hit = hit[np.argsort(m.ts_ns[hit], kind="stable")]
        self.matches = hit
        # start from the first match at or after the cursor
        i = int(np.searchsorted(m.ts_ns[hit], self.view.cursor, side="left")) if hit.size else -1
        self.match_pos = i if 0 <= i < hit.size else (0 if hit.size else -1)
        return int(hit.size)

    def step_match(self, d: int) -> int:
        if not self.matches.size:
            return -1
        self.match_pos = (self.match_pos + d) % self.matches.size
        return int(self.matches[self.match_pos])

    def row_of_event(self, ev: int) -> int:
        """The display row holding event ``ev`` (its stream / copy lane / thread), or -1."""
        m = self.model
        tr = int(m.track[ev])
        k = int(m.kind[ev])
        rows = self.rows()
        for i, r in enumerate(rows):
            ln = r.lane
            if ln is None:
                continue
            if k in (Kind.MEMCPY, Kind.MEMSET):
                if ln.kind == "copy" and ln.iv is not None:
                    j = int(np.searchsorted(ln.iv.starts, m.ts_ns[ev]))
                    hi = int(np.searchsorted(ln.iv.starts, m.ts_ns[ev], side="right"))
                    if ev in ln.iv.idx[j:hi].tolist():
                        return i
            elif k == Kind.ANNOTATION and ln.kind == "ranges":
                return i
            elif ln.track == tr and ln.kind in ("stream", "cpu"):
                return i
        return -1
