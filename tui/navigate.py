"""What is under the cursor, and where the cursor goes: plain functions of a scene and the lanes' width in
cells (no widget). The screen's keys call them and then redraw; tests call them without an app."""

from __future__ import annotations

import numpy as np

from ..analysis.names import display_frame
from ..trace.model import Kind
from .gaplist import cause_name
from .lanes import cell_edges, col_to_time, time_to_col
from .cut import cut
from .kernelname import event_kernel_label
from .scene import Scene


def event_under_cursor(sc: Scene | None, cw: int) -> int:
    """The event under the time cursor on the cursor's lane (and that lane's part made active), or -1."""
    if sc is None:
        return -1
    ln = sc.display.cursor_lane()
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


def gap_under_cursor(sc: Scene | None, cw: int, kinds: tuple = ("gaps",)) -> int:
    """The gap under the time cursor on a lane of one of ``kinds`` (the gaps lane; the diff view's marks too), or
    -1."""
    ln = sc.display.cursor_lane() if sc else None
    if ln is None or ln.kind not in kinds or ln.segs is None:
        return -1
    v = sc.view
    e = cell_edges(v.t0, v.t1, cw)
    col = min(max(time_to_col(v.cursor, v.t0, v.t1, cw), 0), cw - 1)
    r = ln.segs.cells(e[col:col + 2])[0]
    return int(ln.segs.ref[r]) if r >= 0 else -1


#: what a search's match is, by its kind
KIND_WORD = {Kind.KERNEL: "kernel", Kind.MEMCPY: "copy", Kind.MEMSET: "memset", Kind.CPU_OP: "op",
             Kind.ANNOTATION: "range", Kind.PYTHON: "python", Kind.RUNTIME: "runtime"}

#: `f` on a gap already shown with its context (after `n`): the context on each side, as a fraction of the gap
TIGHT_CONTEXT = 0.05


def focus_gap(sc: Scene, gid: int, cw: int, context: float = 1.0) -> None:
    """The view on gap ``gid`` (with ``context`` times its length on each side), the lane cursor on its
    device's gap row so Enter explains it."""
    a, b, dev = sc.gaps.span(gid)
    part = int(sc.gaps.part[gid])
    sc.view.focus(a, b, cw, context=context)
    for i, r in enumerate(sc.display.rows()):
        if r.lane is not None and r.lane.kind == "gaps" and r.lane.device == dev and r.lane.part == part:
            sc.display.cursor = i


def focus_context(sc: Scene, cw: int) -> tuple[float, str]:
    """(context, message) for `f` on the selected gap: its usual context, or where the view shows it so
    already (right after `n`), TIGHT_CONTEXT (the gap fills the window), and where it is that tight already,
    the same with a message saying so."""
    v = sc.view
    now = (v.t0, v.t1, v.cursor)
    a, b, _ = sc.gaps.span(sc.gaps.selected_gap)
    targets = []
    for ctx in (1.0, TIGHT_CONTEXT):
        v.focus(a, b, cw, context=ctx)
        targets.append((v.t0, v.t1))
    v.t0, v.t1, v.cursor = now
    if now[:2] == targets[1]:
        return TIGHT_CONTEXT, "f: zoomed to the gap already (w zooms further, 0 fits the window)"
    if now[:2] == targets[0]:
        return TIGHT_CONTEXT, "f again: the gap fills the window (n shows the next with its context)"
    return 1.0, ""


def move_cursor(sc: Scene, d: int, cw: int) -> None:
    """The time cursor ``d`` cells on; past an edge of the window, the window pans a quarter."""
    v = sc.view
    col = time_to_col(v.cursor, v.t0, v.t1, cw) if v.t0 <= v.cursor < v.t1 else (0 if d > 0 else cw - 1) - d
    col += int(d)
    if col < 0:
        v.pan(-0.25)
        col = time_to_col(v.cursor, v.t0, v.t1, cw) - 1
    elif col >= cw:
        v.pan(0.25)
        col = time_to_col(v.cursor, v.t0, v.t1, cw) + 1
    v.cursor = col_to_time(min(max(col, 0), cw - 1), v.t0, v.t1, cw)


def next_event_start(sc: Scene, d: int) -> int | str:
    """The start of the next (``d`` > 0) or previous event on the cursor's lane, or why there is none."""
    ln = sc.display.cursor_lane()
    if ln is None or (ln.iv is None and ln.segs is None):
        return "[ ]: no events on this row"
    s = ln.iv.starts if ln.iv is not None else ln.segs.starts
    cur = sc.view.cursor
    i = int(np.searchsorted(s, cur, side="right")) if int(d) > 0 else int(np.searchsorted(s, cur, side="left")) - 1
    return int(s[i]) if 0 <= i < s.size else "no more events on this lane"


def show_event(sc: Scene, ev: int, cw: int) -> bool:
    """The view on event ``ev`` of the active part (zoomed to it when it is much longer or shorter than a cell
    of the window), the time cursor at its start and the lane cursor on its row; True when the row is known."""
    m = sc.model
    t = int(m.ts_ns[ev]) + sc.offset
    dur = int(m.dur_ns[ev])
    v = sc.view
    if dur > v.span // 3 or dur * cw < v.span // 4:
        v.focus(t, t + max(dur, 1), cw, context=2.0)
    else:
        v.centre_on(t)
    v.cursor = t
    r = sc.row_of_event(ev)
    if r >= 0:
        sc.display.cursor = r
    return r >= 0


def range_at_cursor(sc: Scene, ev: int) -> tuple[int, int] | None:
    """The range (step, record_function) under the cursor on a ranges row, else the span of event ``ev``."""
    ln = sc.display.cursor_lane()
    if ln is not None and ln.kind == "ranges" and ln.segs is not None:
        r = ln.segs.cells(np.array([sc.view.cursor, sc.view.cursor + 1], dtype=np.int64))[0]
        if r >= 0:
            return int(ln.segs.starts[r]), int(ln.segs.ends[r])
    if ev >= 0:
        s = int(sc.model.ts_ns[ev]) + sc.offset
        return s, s + max(int(sc.model.dur_ns[ev]), 1)
    return None


#: the most characters of a CPU event's name on the status line (a kernel's: its op and family)
NAME_CHARS = 60


def event_name(m, ev: int) -> str:
    """Event ``ev`` of model ``m`` as the status line names it: a kernel or copy by its op and family
    (tui/kernelname.py), anything else by its name (a Python frame's without its object address), cut with the
    mark."""
    if int(m.kind[ev]) in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET):
        return event_kernel_label(m, ev)
    return cut(display_frame(m.name(ev)), NAME_CHARS)


def match_name(sc: Scene, part: int, ev: int) -> str:
    """A search's match named: what it is (kernel, op, python ...) and its name (``event_name``)."""
    m = sc.parts[part].model
    return f"{KIND_WORD.get(int(m.kind[ev]), 'event')} {event_name(m, ev)}"


def status_parts(sc: Scene, ev: int, d) -> list[str]:
    """The status line after the message: the search, the filters, the event under the cursor (``ev``) and the
    other end of its launch link, the cursor's time (``d`` formats a duration)."""
    parts = []
    f = sc.search
    hit = f.current() if f.query else None
    if f.query:
        q = cut(f.query, 40)  # the count stays in view
        if f.matches.size:
            # what matched first, by name (the kernel's op and family), then where it is among the matches
            n_in = int(np.count_nonzero(f.inside))
            out = int(f.matches.size) - n_in
            where = "" if f.inside[f.pos] else ", outside the analysed window"
            parts.append(f"find '{q}' {f.pos + 1}/{f.matches.size}: {match_name(sc, *hit)}{where}"
                         + (f" ({n_in} in the window, {out} outside)" if out else "") + " (n/N, Esc ends)")
        else:
            parts.append(f"find '{q}': no match")
    if sc.gaps.cause_filter is not None:
        parts.append(f"filter: {cause_name(sc.gaps.cause_filter)}")
    if sc.gaps.finding_filter is not None:
        parts.append(f"gaps of {sc.gaps.finding_filter}: {sc.gaps.order.size} (n/N walk them, Esc: all gaps)")
    if ev >= 0 and hit != (sc.active, ev):  # (the match under the cursor is named above)
        parts.append(f"{event_name(sc.model, ev)} {d(sc.model.dur_ns[ev])}")
    link = sc.launch.link
    if link is not None:
        other = sc.parts[link[0]].model
        what = "launched by" if int(other.kind[link[1]]) in (Kind.RUNTIME, Kind.DRIVER) else "launches"
        parts.append(f"{what} {event_name(other, link[1])} (v jumps)")
    parts.append(f"cursor {d(sc.view.cursor - sc.origin)}" + (" (trace time)" if sc.time_mode == "trace" else ""))
    return parts
