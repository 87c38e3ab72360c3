"""The gaps of a scene (tui/scene.py): the listed gaps of its analysed parts merged into one set of columns
by global gap id, largest first; the gap row each (part, device) draws them on; the analysed window they lie in;
how many are listed; and the gap the list opens on: pure functions of the parts. ``GapSelection`` (the scene's
``gaps``) holds what they return, and the gap list's filter (a cause, or one finding's gaps) and selection.

No textual here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lanes import Lane, Segments, UnionIndex
from .plantext import top_action


@dataclass(frozen=True)
class ListedGaps:
    """Every listed gap of the analysed parts (those of at least the part's ``min_listed_ns``); a gap's global
    id is its index into each column. Times are aligned (the part's offset added)."""

    part: np.ndarray
    row: np.ndarray  # the gap's row in its part's ``analysis.gaps``
    start: np.ndarray
    end: np.ndarray
    dur: np.ndarray
    cause: np.ndarray
    device: np.ndarray
    largest_first: np.ndarray  # every id, largest first; ties by start, so the order is stable
    window: tuple  # (start, end) of the analysed window over the parts (aligned), each None when unknown


def listed_gaps(parts) -> ListedGaps:
    starts = [int(pt.analysis.window_start_ns) + pt.offset for pt in parts if pt.analysis is not None]
    win0 = min(starts) if starts else None
    ends = [max(int(d.window_end_ns) for d in pt.analysis.devices) + pt.offset for pt in parts
            if pt.analysis is not None and pt.analysis.devices]
    win1 = max(ends) if ends and win0 is not None else None
    cols = {k: [] for k in ("part", "row", "start", "end", "dur", "cause", "device")}
    for pi, pt in enumerate(parts):
        a = pt.analysis
        if a is None:
            continue
        g = a.gaps
        n = len(g)
        dur = np.asarray(g.dur_ns[:n], dtype=np.int64)
        rows = np.flatnonzero(dur >= pt.min_listed_ns)
        cols["part"].append(np.full(rows.size, pi, np.int64))
        cols["row"].append(rows.astype(np.int64))
        cols["start"].append(np.asarray(g.start_ns, dtype=np.int64)[rows] + pt.offset)
        cols["end"].append(np.asarray(g.end_ns, dtype=np.int64)[rows] + pt.offset)
        cols["dur"].append(dur[rows])
        cols["cause"].append(np.asarray(g.cause, dtype=np.int64)[rows])
        cols["device"].append(np.asarray(g.device, dtype=np.int64)[rows])
    cat = {k: (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in cols.items()}
    order = np.lexsort((cat["start"], -cat["dur"])).astype(np.int64)
    return ListedGaps(**cat, largest_first=order, window=(win0, win1))


class GapSelection:
    """The listed gaps of a scene's analysed parts, as columns by global gap id (``part``, ``row``: the gap's row
    in its part's ``analysis.gaps``, aligned ``start`` / ``end``, ``dur``, ``cause``, ``device``); the gap list
    (``order``: ``all_listed`` after the filter) and the gap selected in it (``selected``: a position in
    ``order``, -1 for none). Which part is active is the scene's: it follows the selected gap (``Scene.select``)."""

    def __init__(self) -> None:
        z = np.zeros(0, np.int64)
        self.part = self.row = self.start = self.end = self.dur = self.cause = self.device = z
        self.all_listed = z  # every listed gap, largest first
        self.order = z  # the gap list's gaps, largest first (after the filter)
        self.selected = -1
        self.cause_filter: int | None = None
        self.finding_filter: str | None = None  # the gap list holds one finding's gaps (Enter on a finding)
        self.lanes: dict[tuple[int, int], Lane] = {}  # the "idle gaps" row of each (part, device)
        self.cover: dict[tuple[int, int], UnionIndex] = {}
        self.window: tuple = (None, None)  # the analysed window over the parts (aligned), each None when unknown

    def merge(self, parts, merged: "MergedGaps | None" = None) -> None:
        """The listed gaps of the analysed ``parts``, merged by global gap id, and their rows (the filter and the
        selection are made again by the scene); ``merged``: that merge made beforehand (``merge_gaps``, in the
        load thread), used when it was made of these parts' analyses."""
        if merged is None or not merged.of(parts):
            merged = merge_gaps(parts)
        g = merged.gaps
        self.window = g.window
        self.part, self.row, self.start, self.end = g.part, g.row, g.start, g.end
        self.dur, self.cause, self.device = g.dur, g.cause, g.device
        self.all_listed = g.largest_first
        self.lanes, self.cover = merged.lanes, merged.cover

    def filter_cause(self, cause: int | None) -> None:
        """Only the gaps of ``cause`` (every gap: None), largest first; the largest selected."""
        self.finding_filter = None
        self.cause_filter = cause
        ids = self.all_listed
        if cause is not None:
            ids = ids[self.cause[ids] == cause]
        self.order = ids
        self.selected = 0 if ids.size else -1

    def filter_finding(self, part: int, rows, label: str) -> int:
        """Only the gaps of one finding (its ``gap_rows`` in part ``part``), largest first; returns how many."""
        rows = np.asarray(rows, dtype=np.int64)
        ids = self.all_listed[(self.part[self.all_listed] == part) & np.isin(self.row[self.all_listed], rows)]
        self.cause_filter = None
        self.finding_filter = label
        self.order = ids
        self.selected = 0 if ids.size else -1
        return int(ids.size)

    def select(self, pos: int) -> int:
        """Select the gap at ``pos`` of the order (clipped); returns its id, -1 when the list is empty."""
        if not self.order.size:
            self.selected = -1
            return -1
        self.selected = max(0, min(int(pos), self.order.size - 1))
        return int(self.order[self.selected])

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
        return int(self.row[gid]) if gid >= 0 else -1

    def span(self, gid: int) -> tuple[int, int, int]:
        """Aligned (start, end, device) of gap ``gid``."""
        return int(self.start[gid]), int(self.end[gid]), int(self.device[gid])

    def cover_for(self, lane: Lane) -> UnionIndex | None:
        return self.cover.get((lane.part, lane.device))


@dataclass(frozen=True)
class MergedGaps:
    """What ``GapSelection.merge`` makes of a scene's parts (``merge_gaps``): the listed gaps, their rows and the
    union of each row's gaps; ``analyses``: the parts' analyses (and listing thresholds) it was made of."""

    gaps: ListedGaps
    lanes: dict
    cover: dict
    analyses: tuple

    def of(self, parts) -> bool:
        """Made of these parts' analyses (the same objects, offsets and thresholds)."""
        return len(parts) == len(self.analyses) and all(
            pt.analysis is a and pt.offset == off and pt.min_listed_ns == ml
            for pt, (a, off, ml) in zip(parts, self.analyses))


def merge_gaps(parts) -> MergedGaps:
    """The listed gaps of ``parts`` (objects with ``analysis``, ``offset``, ``min_listed_ns``: a scene's parts, or
    copies with the analysis about to be installed) and their rows: pure, so the load thread makes it for a large
    trace (0.1-0.3 s of the screen's thread at 1 GB otherwise)."""
    g = listed_gaps(parts)
    lanes, cover = gap_lanes_of(g)
    return MergedGaps(g, lanes, cover, tuple((pt.analysis, pt.offset, pt.min_listed_ns) for pt in parts))


def gap_lanes_of(g: ListedGaps) -> tuple[dict, dict]:
    """The "idle gaps" row of each (part, device) with listed gaps, and the union of its gaps (for the cells
    they cover), both keyed by (part, device)."""
    lanes: dict[tuple[int, int], Lane] = {}
    cover: dict[tuple[int, int], UnionIndex] = {}
    for key in sorted(set(zip(g.part.tolist(), g.device.tolist()))):
        ids = np.flatnonzero((g.part == key[0]) & (g.device == key[1]))
        ids = ids[np.argsort(g.start[ids], kind="stable")]
        st, en = g.start[ids], g.end[ids]
        lanes[key] = Lane("gaps", "idle gaps", device=int(key[1]), segs=Segments(st, en, ids), part=int(key[0]))
        cover[key] = UnionIndex(st, en)
    return lanes, cover


def listed_counts(parts) -> tuple[int, int, int]:
    """(listed, all, shortest listed ns) over the analysed parts: listed gaps are those
    ``Analysis.listed_rows()`` lists (at least ``min_listed_gap_ns``); all of them are counted in totals."""
    listed = total = 0
    lim = 0
    for pt in parts:
        if pt.analysis is None:
            continue
        total += len(pt.analysis.gaps)
        listed += int(np.count_nonzero(np.asarray(pt.analysis.gaps.dur_ns[:len(pt.analysis.gaps)])
                                       >= pt.min_listed_ns))
        lim = max(lim, pt.min_listed_ns)
    return listed, total, lim


def top_action_position(state, part: int, g_part: np.ndarray, g_row: np.ndarray, order: np.ndarray) -> int:
    """The position in ``order`` (largest first) of the largest gap of the plan's top action for part ``part``
    (``state``, its ``AnalysisState``): the header's action 1, its findings' gaps (``Action.gap_rows``); 0 (the
    largest gap) without one, for an action without gaps (a kernel change), or before the plan (a large trace)."""
    x = top_action(state)
    rows = np.asarray(x.gap_rows if x is not None else (), np.int64)
    if rows.size == 0:
        return 0
    hit = np.flatnonzero((g_part[order] == part) & np.isin(g_row[order], rows))
    return int(hit[0]) if hit.size else 0
