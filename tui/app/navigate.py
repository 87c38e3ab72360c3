"""What is under the cursor: plain functions of a scene and the lanes' width in cells (no widget), so that
the screen's keys and the tests ask the same question."""

from __future__ import annotations

import numpy as np

from .lanes import cell_edges, time_to_col
from .scene import Scene


def event_under_cursor(sc: Scene | None, cw: int) -> int:
    """The event under the time cursor on the cursor's lane (and that lane's part made active), or -1."""
    if sc is None:
        return -1
    ln = sc.cursor_lane()
    if ln is None or ln.kind == "gaps":
        return -1
    sc.active = ln.part
    v = sc.view
    col = time_to_col(v.cursor, v.t0, v.t1, cw)
    e = cell_edges(v.t0, v.t1, cw)
    col = min(max(col, 0), cw - 1)
    a, b = int(e[col]), int(e[col + 1])
    if ln.iv is not None:
        return ln.iv.at(a, b, innermost=ln.kind == "cpu", mid=min(max(v.cursor, a), b - 1))
    if ln.segs is not None:
        r = ln.segs.cells(np.array([a, b], dtype=np.int64))[0]
        return int(ln.segs.ref[r]) if r >= 0 else -1
    return -1


def gap_under_cursor(sc: Scene | None, cw: int) -> int:
    """The gap under the time cursor on a gaps lane, or -1."""
    ln = sc.cursor_lane() if sc else None
    if ln is None or ln.kind != "gaps":
        return -1
    v = sc.view
    e = cell_edges(v.t0, v.t1, cw)
    col = min(max(time_to_col(v.cursor, v.t0, v.t1, cw), 0), cw - 1)
    r = ln.segs.cells(e[col:col + 2])[0]
    return int(ln.segs.ref[r]) if r >= 0 else -1
