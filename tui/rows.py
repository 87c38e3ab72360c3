"""The explorer's display rows: a lane, or a group header; the fold of the lanes with nothing in the time window
(a pure function of the rows, the cursor's row and the window); and ``DisplayRows`` (the scene's ``display``),
which caches the rows shown and holds the lane cursor on them. No textual here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..trace.model import Kind
from .lanes import Lane
from .view import View


@dataclass
class Row:
    """One display row: a lane, or a group header (lane is None)."""

    lane: Lane | None
    title: str = ""
    folded: tuple = ()  # lanes with nothing in view, folded into this one row

    @property
    def key(self) -> str:
        if self.lane is not None:
            return self.lane.key
        return f"fold:{self.title}" if self.folded else f"group:{self.title}"


def lane_empty(ln: Lane, t0: int, t1: int) -> bool:
    """Nothing of lane ``ln`` in [t0, t1) (gap rows are never empty: they are where gaps are walked)."""
    if ln.kind == "gaps":
        return False
    edges = np.array([t0, t1], dtype=np.int64)
    for u in (ln.union, ln.busy_all):
        if u is not None:
            return int(u.covered(edges)[0]) <= 0
    if ln.segs is not None:  # disjoint pieces: starts and ends both sorted
        i = int(np.searchsorted(ln.segs.starts, t1, side="left"))
        j = int(np.searchsorted(ln.segs.ends, t0, side="right"))
        return i <= j
    if ln.iv is not None and len(ln.iv):
        i = int(np.searchsorted(ln.iv.starts, t1, side="left"))
        return i == 0 or int(ln.iv.ends[:i].max()) <= t0
    return True


def fold_rows(full: list[Row], cur: str | None, t0: int, t1: int) -> list[Row]:
    """``full`` with the lanes that have nothing in [t0, t1) folded, two or more of one group into one row
    (never the row keyed ``cur``, an expanded thread, or a gap row)."""
    out: list[Row] = []
    group: list[Row] = []

    def flush():
        empty = [r for r in group if r.lane is not None and r.key != cur
                 and not (r.lane.kind == "cpu" and r.lane.expanded) and lane_empty(r.lane, t0, t1)]
        if len(empty) < 2:
            out.extend(group)
        else:
            gone = {id(r) for r in empty}
            names = ", ".join(r.lane.label for r in empty)
            title = f"{len(empty)} lanes empty here: {names}"
            placed = False
            for r in group:
                if id(r) not in gone:
                    out.append(r)
                elif not placed:
                    out.append(Row(None, title, folded=tuple(x.lane for x in empty)))
                    placed = True
        group.clear()

    for r in full:
        if r.lane is None:
            flush()
            out.append(r)
        else:
            group.append(r)
    flush()
    return out


class DisplayRows:
    """The rows a scene shows, top to bottom, and the lane cursor (``cursor``: a row). ``build`` makes every row
    (the scene's grouping of its lanes); the lanes with nothing in ``view`` are folded (``fold_empty``)."""

    def __init__(self, build: Callable[[], list[Row]], view: View) -> None:
        self._build = build
        self.view = view
        self.cursor = 0
        self.fold_empty = True
        self._rows: list[Row] | None = None
        self._full: list[Row] | None = None  # every row, before the lanes with nothing in view are folded
        self._key: int | None = None  # the view span the rows were folded for

    def rows(self) -> list[Row]:
        """The display rows: lanes with nothing in view are folded, two or more of one group into one line
        (never the lane under the cursor, an expanded thread, or a gap row). The lane cursor stays on its lane
        when rows come and go.

        The fold is decided again when the zoom changes by 2x or more, not on every move: a change in the
        number of rows is a layout of the whole screen (~45 ms at 200x50 on a 100 MB trace), and pans that
        folded and unfolded a lane each time made every pan that slow (bench_open --keys-only)."""
        if self._full is None:
            self._full = self._build()
        span = self.view.t1 - self.view.t0
        key = self._key
        if self._rows is None or key is None or not key // 2 < span < key * 2:
            old = self._rows
            cur = old[self.cursor].key if old and 0 <= self.cursor < len(old) else None
            new = fold_rows(self._full, cur, self.view.t0, self.view.t1) if self.fold_empty else self._full
            self._key = span
            if old is None or len(new) != len(old) or any(a.key != b.key for a, b in zip(new, old)):
                self._rows = new
                if cur is not None:
                    for i, r in enumerate(new):
                        if r.key == cur:
                            self.cursor = i
                            break
                self.cursor = min(self.cursor, max(len(new) - 1, 0))
        return self._rows

    def invalidate(self) -> None:
        """The rows are made again (lanes expanded, gap rows added) on the next ``rows``."""
        self._rows = None
        self._full = None
        self._key = None

    def cursor_lane(self) -> Lane | None:
        rows = self.rows()
        if not rows:
            return None
        return rows[min(self.cursor, len(rows) - 1)].lane

    def _cursor_to(self, lane: Lane) -> None:
        for i, r in enumerate(self.rows()):
            if r.lane is lane:
                self.cursor = i

    def toggle_expand(self, lanes: list[Lane]) -> bool:
        """Expand or collapse the CPU thread under the cursor (``lanes``: the scene's); on its launcher rows, show
        or fold the launcher levels. False when there is nothing to expand."""
        ln = self.cursor_lane()
        if ln is None or ln.kind not in ("cpu", "depth"):
            return False
        if ln.kind == "depth":  # collapse the parent thread (on a launcher row: show / fold the launcher levels)
            row = ln
            for p in lanes:
                if p.kind == "cpu" and p.track == ln.track and p.part == ln.part:
                    ln = p
            if (row.harness_fold or row.harness) and ln.kind == "cpu":
                ln.show_harness = not ln.show_harness
                self.invalidate()
                want = row if row.harness_fold else next((d for d in ln.depth_rows if d.harness_fold), row)
                if ln.show_harness:
                    want = next((d for d in ln.depth_rows if d.harness), row)
                self._cursor_to(want)
                return True
        if not ln.depth_rows:
            return False
        ln.expanded = not ln.expanded
        self.invalidate()
        self._cursor_to(ln)
        return True

    def row_of_event(self, ev: int, part: int, model, offset: int) -> int:
        """The display row holding event ``ev`` of part ``part`` (``model``, aligned by ``offset``): its stream,
        copy lane or thread, or -1."""
        m = model
        tr = int(m.track[ev])
        k = int(m.kind[ev])
        t = int(m.ts_ns[ev]) + offset
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
