"""Lanes: the rows the explorer draws, their per-lane indexes, and the (time window, width) -> cells layout.

Nothing here imports textual. Every lane is built once from the model into sorted arrays; drawing a
window of W cells is a handful of ``searchsorted`` calls over W+1 cell edges, so the cost of a redraw
depends on the number of lanes and the width, never on the number of events.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analysis.names import HARNESS_FRAME_RE, is_allocator_name, is_sync_name
from ..trace.model import Kind, TraceModel

# --------------------------------------------------------------------------- categories
# One code per cell; the widget maps codes to a glyph and a style. 0 is always "nothing".
C_EMPTY = 0
# CPU thread activities (collapsed row): the dominant one per cell
C_PYTHON, C_OP, C_LAUNCH, C_SYNC, C_ALLOC = 1, 2, 3, 4, 5
CPU_CAT_NAMES = {C_PYTHON: "python", C_OP: "aten op", C_LAUNCH: "launch/runtime", C_SYNC: "sync", C_ALLOC: "allocator"}
# density lanes (streams, copies): 1..8 = busy fraction levels
DENSITY_LEVELS = 8
C_GAP = 20  # idle cell inside a listed device gap (on stream rows)
C_LABEL = 21  # text of a named interval (ranges, depth rows, gap row)
C_BAR = 22  # filler of a named interval
C_MARK = 23  # a named interval narrower than its cell

COPY_KINDS = ("HtoD", "DtoH", "DtoD", "memset")



def copy_kind(name: str, kind: int) -> str:
    """Copy lane for a GPU memcpy/memset by its name (Kineto: ``Memcpy HtoD (Pageable -> Device)``)."""
    if kind == Kind.MEMSET:
        return "memset"
    n = name.upper()
    if "HTOD" in n or "H2D" in n:
        return "HtoD"
    if "DTOH" in n or "D2H" in n:
        return "DtoH"
    return "DtoD"  # DtoD, PtoP, peer copies, unknown directions


# --------------------------------------------------------------------------- indexes
class UnionIndex:
    """The union of a set of intervals as sorted disjoint pieces with a prefix sum of covered time.

    ``covered(edges)`` gives the covered ns of every cell [edges[k], edges[k+1]) in one vectorised call.
    """

    __slots__ = ("starts", "ends", "cum")

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        if starts.size:
            o = np.argsort(starts, kind="stable")
            s = starts[o]
            e = np.maximum.accumulate(ends[o])
            # a new piece starts where the start is beyond every end so far
            new = np.ones(s.size, dtype=bool)
            new[1:] = s[1:] > e[:-1]
            first = np.flatnonzero(new)
            last = np.r_[first[1:] - 1, s.size - 1]
            self.starts = s[first]
            self.ends = e[last]
        else:
            self.starts = np.zeros(0, np.int64)
            self.ends = np.zeros(0, np.int64)
        self.cum = np.zeros(self.starts.size + 1, dtype=np.int64)
        if self.starts.size:
            np.cumsum(self.ends - self.starts, out=self.cum[1:])

    def __len__(self) -> int:
        return int(self.starts.size)

    def before(self, t: np.ndarray, *, ascending: bool = False) -> np.ndarray:
        """Covered ns in (-inf, t) for every t (``ascending``: t is sorted, see ``search_sorted``)."""
        t = np.asarray(t, dtype=np.int64)
        i = search_sorted(self.starts, t, "right") if ascending else np.searchsorted(self.starts, t, side="right")
        out = self.cum[i]  # (a copy: fancy indexing)
        if self.starts.size:
            # the piece holding t, if any, is covered only up to t: what of it lies past t comes off
            over = self.ends[np.maximum(i - 1, 0)] - t
            over[i == 0] = 0
            np.maximum(over, 0, out=over)
            out -= over
        return out

    def covered(self, edges: np.ndarray) -> np.ndarray:
        """Covered ns of every cell [edges[k], edges[k+1]) (edges ascending, as ``cell_edges`` makes them)."""
        return np.diff(self.before(edges, ascending=True))


def search_sorted(a: np.ndarray, v: np.ndarray, side: str = "left") -> np.ndarray:
    """``np.searchsorted(a, v, side)`` for an ascending ``v`` (a window's cell edges): two searches find the
    part of ``a`` between v's first and last value, and v is searched in that part only. The same indices; a
    lane of millions of events is then not searched end to end for every edge of a window that holds a few
    hundred of them (each search a walk through memory far bigger than the CPU's caches)."""
    if v.size < 2 or v[-1] < v[0]:  # (two values the wrong way round: searched as they are)
        return np.searchsorted(a, v, side=side)
    lo = int(np.searchsorted(a, v[0], side=side))
    hi = int(np.searchsorted(a, v[-1], side=side))
    return np.searchsorted(a[lo:hi], v, side=side) + lo


@dataclass
class Intervals:
    """Events of one lane sorted by start: starts, ends and event indices."""

    starts: np.ndarray
    ends: np.ndarray
    idx: np.ndarray

    @classmethod
    def of(cls, model: TraceModel, idx: np.ndarray) -> "Intervals":
        idx = np.asarray(idx, dtype=np.int64)
        s = model.ts_ns[idx]
        o = np.argsort(s, kind="stable")
        idx = idx[o]
        return cls(model.ts_ns[idx], model.ts_ns[idx] + model.dur_ns[idx], idx)

    def __len__(self) -> int:
        return int(self.idx.size)

    def starts_in(self, edges: np.ndarray) -> np.ndarray:
        """Number of events starting in each cell (edges ascending)."""
        return np.diff(search_sorted(self.starts, edges, "left"))

    def at(self, a: int, b: int, innermost: bool = False, mid: int | None = None) -> int:
        """Event index most worth showing in [a, b): the one overlapping it most, or -1. With
        ``innermost`` (nested CPU events), the shortest event covering the cell's middle comes first."""
        if not self.idx.size:
            return -1
        lo = int(np.searchsorted(self.starts, a, side="right")) - 1
        hi = int(np.searchsorted(self.starts, b, side="left"))
        # the event that began before a and is still running, plus every event starting inside
        lo = max(lo, 0)
        # events that started long before a may still cover it (nesting); look back a bounded way
        back = max(0, lo - 64)
        cand = np.arange(back, max(hi, lo + 1))
        if cand.size > 4096:
            cand = cand[-4096:]
        cand = cand[cand < self.idx.size]
        if not cand.size:
            return -1
        s = self.starts[cand]
        e = self.ends[cand]
        ov = np.minimum(e, b) - np.maximum(s, a)
        ov = np.where((e > a) & (s < b), np.maximum(ov, 1), 0)  # zero-length events count when inside
        if not ov.any():
            return -1
        if innermost:
            mid = a + (b - a) // 2 if mid is None else int(mid)
            cov = (s <= mid) & (e > mid)
            if cov.any():
                d = np.where(cov, e - s, np.iinfo(np.int64).max)
                return int(self.idx[cand[int(np.argmin(d))]])
        return int(self.idx[cand[int(np.argmax(ov))]])

    def next_after(self, t: int) -> int:
        i = int(np.searchsorted(self.starts, t, side="right"))
        return int(self.idx[i]) if i < self.idx.size else -1

    def prev_before(self, t: int) -> int:
        i = int(np.searchsorted(self.starts, t, side="left")) - 1
        return int(self.idx[i]) if i >= 0 else -1


@dataclass
class Segments:
    """Disjoint labelled pieces of time (the innermost range at each instant, or gaps)."""

    starts: np.ndarray
    ends: np.ndarray
    ref: np.ndarray  # event index or gap row
    labels: list[str] | None = None  # one per ref when refs are not events

    def cells(self, edges: np.ndarray) -> np.ndarray:
        """Per cell: the position in ``ref`` of the piece covering the cell's middle, else of any piece
        starting inside the cell (so a piece narrower than a cell still shows), else -1."""
        if not self.starts.size:
            return np.full(edges.size - 1, -1, dtype=np.int64)
        a = edges[:-1]
        b = edges[1:]
        mid = a + (b - a) // 2
        i = search_sorted(self.starts, mid, "right") - 1
        ok = (i >= 0) & (self.ends[np.maximum(i, 0)] > mid)
        out = np.where(ok, i, -1)
        j = search_sorted(self.starts, a, "left")
        inside = (j < self.starts.size) & (self.starts[np.minimum(j, self.starts.size - 1)] < b)
        return np.where(ok, out, np.where(inside, j, -1)).astype(np.int64)


def flatten_nested(starts: np.ndarray, ends: np.ndarray, refs: np.ndarray) -> Segments:
    """Innermost interval at each instant for properly nested intervals (record_function ranges)."""
    o = np.lexsort((-(ends - starts), starts))
    out_s: list[int] = []
    out_e: list[int] = []
    out_r: list[int] = []
    stack: list[tuple[int, int]] = []  # (end, ref)
    cur = None  # (start, ref) of the open piece

    def emit(until: int) -> None:
        nonlocal cur
        if cur is not None and until > cur[0]:
            out_s.append(cur[0])
            out_e.append(until)
            out_r.append(cur[1])
        cur = None

    for k in o.tolist():
        s, e, r = int(starts[k]), int(ends[k]), int(refs[k])
        while stack and stack[-1][0] <= s:
            end, _ = stack.pop()
            emit(end)
            if stack:
                cur = (end, stack[-1][1])
        emit(s)
        if stack and e > stack[-1][0]:
            e = stack[-1][0]  # clip a badly nested child to its parent
        stack.append((e, r))
        cur = (s, r)
    while stack:
        end, _ = stack.pop()
        emit(end)
        if stack:
            cur = (end, stack[-1][1])
    return Segments(np.asarray(out_s, np.int64), np.asarray(out_e, np.int64), np.asarray(out_r, np.int64))


# --------------------------------------------------------------------------- lanes
@dataclass
class Lane:
    """One drawable row. ``kind``: cpu, depth, ranges, stream, copy, gaps, group (a rank/device header)."""

    kind: str
    label: str
    rank: int | None = None
    device: int = -1
    track: int = -1
    iv: Intervals | None = None  # events (cpu, depth, stream, copy)
    union: UnionIndex | None = None  # busy time (stream, copy)
    cats: dict[int, UnionIndex] = field(default_factory=dict)  # cpu: per activity
    busy_all: UnionIndex | None = None  # cpu: any activity
    not_python: UnionIndex | None = None  # cpu: any activity other than python frames
    segs: Segments | None = None  # ranges, depth rows
    expanded: bool = False
    # depth rows: ``harness`` on a launcher level (runpy, the capture's cli/recorder), ``harness_fold`` (the number
    # of such levels) on the one row that stands for them; cpu: ``show_harness`` shows those levels instead
    harness: bool = False
    harness_fold: int = 0
    show_harness: bool = False
    part: int = 0  # which loaded trace (rank) of the scene the lane belongs to
    # cpu: the expandable stack depth rows are built on first use (most threads are never expanded, and they
    # were a third of the time to build the lanes of a big trace); has_depth says whether there are any
    has_depth: bool = False
    depth_fn: object = field(default=None, repr=False, compare=False)  # () -> list[Lane]
    _depth: list | None = field(default=None, repr=False, compare=False)
    _offset: int = field(default=0, repr=False, compare=False)

    @property
    def depth_rows(self) -> list["Lane"]:
        if self._depth is None:
            rows = self.depth_fn() if self.depth_fn is not None else []
            for d in rows:
                d.part = self.part
                d.shift(self._offset)
            self._depth, self.depth_fn = rows, None
        return self._depth

    @property
    def key(self) -> str:
        return f"{self.part}:{self.kind}:{self.rank}:{self.device}:{self.track}:{self.label}"

    def shift(self, offset: int) -> None:
        """Move every time of the lane by ``offset`` ns (aligning ranks recorded with different time bases)."""
        if not offset:
            return
        for obj in (self.iv, self.union, self.busy_all, self.not_python, self.segs, *self.cats.values()):
            if obj is not None:
                obj.starts = obj.starts + offset
                obj.ends = obj.ends + offset
        if self._depth is None:  # not built yet: shifted when they are
            self._offset += offset
            return
        for d in self._depth:
            if d.iv is not None and d.segs is not None and d.segs.starts is d.iv.starts:
                d.iv.starts = d.iv.starts + offset
                d.iv.ends = d.iv.ends + offset
                d.segs.starts, d.segs.ends = d.iv.starts, d.iv.ends
            else:
                d.shift(offset)


def cpu_categories(model: TraceModel, idx: np.ndarray) -> np.ndarray:
    """Activity code (python, op, launch, sync, allocator) of each CPU event in ``idx``."""
    kinds = model.kind[idx]
    cat = np.zeros(idx.size, dtype=np.uint8)
    cat[kinds == Kind.PYTHON] = C_PYTHON
    cat[kinds == Kind.CPU_OP] = C_OP
    rt = (kinds == Kind.RUNTIME) | (kinds == Kind.DRIVER)
    cat[rt] = C_LAUNCH
    cat[kinds == Kind.SYNC] = C_SYNC
    # names are interned: classify each distinct name once
    nid = model.name_id[idx]
    sel = rt | (kinds == Kind.CPU_OP)
    if sel.any():
        uniq = distinct_ids(nid[sel])
        # the analysis' own definitions (names.py): the lanes mark what the causes count
        sync_ids = [u for u in uniq.tolist() if is_sync_name(model.names[u])]
        alloc_ids = [u for u in uniq.tolist() if is_allocator_name(model.names[u])]
        if sync_ids:
            cat[sel & np.isin(nid, sync_ids)] = C_SYNC
        if alloc_ids:
            cat[sel & np.isin(nid, alloc_ids)] = C_ALLOC
    return cat


def distinct_ids(ids: np.ndarray) -> np.ndarray:
    """The distinct interned ids (names: non-negative, dense), sorted. Not `np.unique`: its first call in a
    process imports numpy.ma (~8 ms), and the lanes are on the way to the first frame."""
    return np.flatnonzero(np.bincount(ids)) if ids.size else ids[:0]


def _cpu_lane(model: TraceModel, tr, rank) -> Lane | None:
    sl = model.track_slice(tr.id)
    idx = np.arange(sl.start, sl.stop, dtype=np.int64)
    k = model.kind[idx]
    ann = idx[k == Kind.ANNOTATION]
    # record_function ranges other than ProfilerStep#N are user code: counted as Python on the thread row
    # (the analysis does the same); the profiler's step ranges cover everything and are left out
    if ann.size:
        step_ids = [i for i in distinct_ids(model.name_id[ann]).tolist() if model.names[i].startswith("ProfilerStep#")]
        user_ann = ann[~np.isin(model.name_id[ann], step_ids)] if step_ids else ann
    else:
        user_ann = ann
    act = idx[np.isin(k, [Kind.PYTHON, Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER, Kind.SYNC])]
    if user_ann.size:
        act = np.sort(np.concatenate([act, user_ann]))
    if not act.size and not ann.size:
        return None
    cat = cpu_categories(model, act)
    akind = model.kind[act]
    cat[akind == Kind.ANNOTATION] = C_PYTHON
    s = model.ts_ns[act]
    e = s + model.dur_ns[act]
    lane = Lane("cpu", tr.name, rank=rank, track=tr.id, iv=Intervals.of(model, act))
    for c in (C_PYTHON, C_OP, C_LAUNCH, C_SYNC, C_ALLOC):
        m = cat == c
        if m.any():
            lane.cats[c] = UnionIndex(s[m], e[m])
    lane.busy_all = UnionIndex(s, e)
    npy = cat != C_PYTHON
    lane.not_python = UnionIndex(s[npy], e[npy])
    lane.has_depth = bool(act.size)
    lane.depth_fn = lambda: _depth_rows(model, tr, rank, act, akind)
    return lane


def _depth_rows(model: TraceModel, tr, rank, act: np.ndarray, akind: np.ndarray) -> list[Lane]:
    """The expandable depth rows of a thread: python frames by their tree depth, then ranges/ops/runtime by time
    nesting; every level (a Hugging Face forward sits 25 to 36 frames deep). The leading python levels that
    hold only launcher frames (runpy, the capture's cli and recorder: one frame each, around everything) also
    get one row that stands for them, shown instead of them until space on it (``Lane.show_harness``)."""
    d = model.depth[act].astype(np.int64)
    rows = []
    is_py = akind == Kind.PYTHON
    harness = np.zeros(act.size, bool)
    if is_py.any():
        nid = model.name_id[act[is_py]]
        ids = [u for u in distinct_ids(nid).tolist() if HARNESS_FRAME_RE.search(model.names[u])]
        if ids:
            harness[is_py] = np.isin(nid, ids)
    n_harness = 0
    if is_py.any():
        for lvl in range(int(d[is_py].max()) + 1):
            at = is_py & (d == lvl)
            if not at.any() or not harness[at].all():
                break
            n_harness = lvl + 1
    for label, m in (("py", is_py), ("op", ~is_py)):
        if not m.any():
            continue
        for lvl in range(int(d[m].max()) + 1):
            mm = m & (d == lvl)
            if not mm.any():
                continue
            sub = act[mm]
            iv = Intervals.of(model, sub)
            rows.append(Lane("depth", f"  {label} {lvl}", rank=rank, track=tr.id, iv=iv,
                             segs=Segments(iv.starts, iv.ends, iv.idx), harness=label == "py" and lvl < n_harness))
    if n_harness >= 2:  # one level is a row either way
        # drawn with the innermost launcher frames (they span what the outer ones do); arrays of its own, as
        # each row is shifted on its own (Lane.shift)
        iv = Intervals.of(model, act[is_py & (d == n_harness - 1)])
        fold = Lane("depth", f"  py 0-{n_harness - 1} launcher", rank=rank, track=tr.id, iv=iv,
                    segs=Segments(iv.starts, iv.ends, iv.idx), harness_fold=n_harness)
        rows.insert(0, fold)
    else:
        for r in rows:
            r.harness = False
    return rows


def build_lanes(model: TraceModel, rank: int | None = None, *, part: int = 0, offset: int = 0) -> list[Lane]:
    """Every lane of one model, in display order: ranges, CPU threads, then per device its streams and copies.

    The gap row of each device is added by the scene once the analysis is ready (``Lane('gaps', ...)``).
    ``offset`` shifts every time (ns) so that ranks with different time bases line up.
    """
    lanes = _build_lanes(model, rank)
    for ln in lanes:
        ln.part = part  # depth rows take it (and the offset) when they are built
        ln.shift(offset)
    return lanes


def _build_lanes(model: TraceModel, rank: int | None) -> list[Lane]:
    if rank is None:
        rank = model.rank
    lanes: list[Lane] = []
    # record_function / ProfilerStep ranges of every CPU thread, innermost at each instant
    ann = np.flatnonzero(model.kind == Kind.ANNOTATION)
    if ann.size:
        s = model.ts_ns[ann]
        e = s + model.dur_ns[ann]
        lanes.append(Lane("ranges", "ranges", rank=rank, segs=flatten_nested(s, e, ann)))
    cpu = sorted(model.cpu_tracks(), key=lambda t: (t.sort_index, str(t.tid)))
    cpu_lanes = [ln for ln in (_cpu_lane(model, t, rank) for t in cpu) if ln is not None]
    # busiest threads first: the main thread is what people look for
    cpu_lanes.sort(key=lambda ln: -(ln.busy_all.cum[-1] if ln.busy_all is not None else 0))
    lanes.extend(cpu_lanes)
    gpu = model.gpu_tracks()
    for dev in model.gpu_devices():
        for tr in sorted((t for t in gpu if t.device == dev), key=lambda t: (t.stream,)):
            sl = model.track_slice(tr.id)
            idx = np.arange(sl.start, sl.stop, dtype=np.int64)
            kern = idx[model.kind[idx] == Kind.KERNEL]
            if not kern.size:
                continue
            iv = Intervals.of(model, kern)
            lanes.append(Lane("stream", f"stream {tr.stream}", rank=rank, device=dev, track=tr.id, iv=iv,
                              union=UnionIndex(iv.starts, iv.ends)))
        dev_tracks = [t.id for t in gpu if t.device == dev]
        cidx = np.flatnonzero(np.isin(model.track, dev_tracks) & np.isin(model.kind, [Kind.MEMCPY, Kind.MEMSET]))
        if cidx.size:
            names = model.name_id[cidx]
            kinds = model.kind[cidx]
            lab = np.array([COPY_KINDS.index(copy_kind(model.names[int(n)], int(k)))
                            for n, k in zip(names.tolist(), kinds.tolist())], dtype=np.int8) if cidx.size < 200_000 else None
            if lab is None:  # many copies: classify distinct (name, kind) pairs once
                pairs, inv = np.unique(np.stack([names.astype(np.int64), kinds.astype(np.int64)], 1), axis=0,
                                       return_inverse=True)
                plab = np.array([COPY_KINDS.index(copy_kind(model.names[int(n)], int(k))) for n, k in pairs], np.int8)
                lab = plab[inv.reshape(-1)]
            for ci, ck in enumerate(COPY_KINDS):
                sub = cidx[lab == ci]
                if sub.size:
                    iv = Intervals.of(model, sub)
                    lanes.append(Lane("copy", ck, rank=rank, device=dev, iv=iv, union=UnionIndex(iv.starts, iv.ends)))
    return lanes


# --------------------------------------------------------------------------- layout
def cell_edges(t0: int, t1: int, width: int) -> np.ndarray:
    """W+1 integer ns edges of W cells spanning [t0, t1) (exact integer arithmetic, no rounding drift)."""
    width = max(int(width), 1)
    t0 = int(t0)
    span = max(int(t1) - t0, width)
    k = np.arange(width + 1, dtype=np.int64)
    # span * k may not fit int64 for huge spans; use Python ints through object only when needed
    if span < (1 << 62) // (width + 1):
        return t0 + (span * k) // width
    return np.array([t0 + span * int(i) // width for i in k], dtype=np.int64)  # pragma: no cover


def time_to_col(t: int, t0: int, t1: int, width: int) -> int:
    span = max(int(t1) - int(t0), 1)
    return int((int(t) - int(t0)) * width // span)


def col_to_time(col: int, t0: int, t1: int, width: int) -> int:
    """Middle of cell ``col``."""
    e = cell_edges(t0, t1, width)
    col = min(max(int(col), 0), width - 1)
    return int(e[col] + (e[col + 1] - e[col]) // 2)


def density_cells(lane: Lane, edges: np.ndarray) -> np.ndarray:
    """Busy level 0..8 per cell; any work at all in a cell gives at least level 1."""
    widths = np.maximum(np.diff(edges), 1)
    busy = lane.union.covered(edges)
    lvl = np.ceil(busy * DENSITY_LEVELS / widths).astype(np.int64)
    lvl = np.minimum(np.maximum(lvl, 0), DENSITY_LEVELS)  # np.clip, without its checks (every stream row)
    started = lane.iv.starts_in(edges) > 0
    lvl = np.where((lvl == 0) & started, 1, lvl)
    return lvl.astype(np.uint8)


def cpu_cells(lane: Lane, edges: np.ndarray) -> np.ndarray:
    """Dominant activity per cell by approximate exclusive time (nesting: python > op > runtime calls)."""
    w = np.maximum(np.diff(edges), 1)
    cov = {c: ui.covered(edges) for c, ui in lane.cats.items()}
    z = np.zeros(w.size, dtype=np.int64)
    allc = lane.busy_all.covered(edges)
    notpy = lane.not_python.covered(edges)
    leaf = cov.get(C_LAUNCH, z) + cov.get(C_SYNC, z) + cov.get(C_ALLOC, z)
    score = np.stack(
        [
            w - allc,  # idle
            np.maximum(cov.get(C_PYTHON, z) - notpy, 0),
            np.maximum(cov.get(C_OP, z) - leaf, 0),
            cov.get(C_LAUNCH, z),
            cov.get(C_SYNC, z),
            cov.get(C_ALLOC, z),
        ]
    )
    out = np.argmax(score, axis=0).astype(np.uint8)
    # a cell with any activity is never shown idle if the activity is most of what was recorded
    act = allc > 0
    busy_arg = np.argmax(score[1:], axis=0).astype(np.uint8) + 1
    out = np.where((out == 0) & act & (allc * 4 >= w), busy_arg, out)
    # short starts narrower than a cell still show as their category
    starts = lane.iv.starts_in(edges) > 0
    out = np.where((out == 0) & starts, busy_arg, out)
    return out


def segment_text(refs: np.ndarray, label_of, *, bar: str = "─", open_: str = "▏", more: str = "") -> \
        tuple[str, np.ndarray]:
    """Text of a row of named pieces: each run of cells showing the same piece is drawn as
    ``▏name────`` clipped to the run; a name cut ends in ``more`` (the explorer's cut mark, tui/cut.py)
    where the run holds it and two letters of the name. Returns the text and a per-cell code (label, bar, mark,
    empty).

    Made run by run as strings and (code, cells) pairs, the codes in one ``np.repeat``: a per-cell list and two
    numpy slice writes per run cost ~0.3 ms a row at 180 cells, on every redraw of a range or gap row."""
    n = refs.size
    if n == 0:
        return "", np.zeros(0, dtype=np.uint8)
    change = [0] + (np.flatnonzero(refs[1:] != refs[:-1]) + 1).tolist()
    ends = change[1:] + [n]
    pieces: list[str] = []
    vals: list[int] = []
    lens: list[int] = []
    for a, b, r in zip(change, ends, refs[change].tolist()):
        run = b - a
        if r < 0:
            pieces.append(" " * run)
            vals.append(0)
            lens.append(run)
        elif run == 1:
            pieces.append(open_)
            vals.append(C_MARK)
            lens.append(1)
        else:
            body = open_ + label_of(r)
            if len(body) <= run:
                pass
            elif more and run >= len(open_) + len(more) + 2:  # two letters before the mark at least
                body = body[:run - len(more)].rstrip() + more  # (the bar fills what a space left)
            else:
                body = body[:run]
            nb = len(body)
            pieces.append(body)
            pieces.append(bar * (run - nb))
            vals += (C_LABEL, C_BAR)
            lens += (nb, run - nb)
    return "".join(pieces), np.repeat(np.asarray(vals, dtype=np.uint8), lens)
