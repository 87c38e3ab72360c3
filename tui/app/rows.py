"""The explorer's display rows: a lane, or a group header; and the fold of the lanes with nothing in the time
window (a pure function of the rows, the cursor's row and the window: the scene caches what it returns)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lanes import Lane


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
