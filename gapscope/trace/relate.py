"""How the events of a finished model relate: nesting (depth and parent per event: CPU-family events by time on
their track, Python frames by their id tree), links (each GPU op's launch call and op, by correlation and
External id), and exact duplicates (rows repeated in every column). Used by ``build.ColumnBuilder.finish``."""

from __future__ import annotations

import numpy as np

from .decode_common import _dumps
from .model import CPU_NEST_KINDS, GPU_WORK_KINDS, Kind

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None
import json as _json

_dict_loads = _orjson.loads if _orjson is not None else _json.loads


#: events (CPU ranges and Python frames with ids) from which ``_nesting`` runs its parts in threads, and CPU ranges
#: per part from which their time nesting is cut in two (``quiet_cut``)
NESTING_THREAD_MIN = 20_000
#: Python frames deeper than this (or in a cycle of parent ids) get this depth
_MAX_TREE_DEPTH = 4096


def sort_order(track, ts, dur) -> np.ndarray:
    """The events' order: by track, then time, then longest first; ties keep their order (``np.lexsort((-dur, ts,
    track))``). One stable sort of track and time in one key, then the few runs of equal (track, ts) by duration:
    ~3x faster than the three sorts of lexsort at 100 MB."""
    if ts.size == 0:
        return np.zeros(0, np.int64)
    base = int(ts.min())
    span = int(ts.max()) - base + 1
    if (int(track.max()) + 1) * span >= 2**62 or int(track.min()) < 0:  # absurd times: three sorts
        return np.lexsort((-dur, ts, track))
    key = track.astype(np.int64) * span + (ts - base)
    order = np.argsort(key, kind="stable")
    k = key[order]
    tie = k[1:] == k[:-1]
    del key, k
    if tie.any():
        in_tie = np.zeros(order.size, dtype=bool)
        in_tie[1:] |= tie
        in_tie[:-1] |= tie
        at = np.flatnonzero(in_tie)
        # a run's number: the runs begun up to each of its rows, counted over those rows only (a row begins a run
        # where its key is not its predecessor's), not over every event (a pass over all of them, the GIL held)
        begins = np.ones(at.size, dtype=bool)
        begins[1:] = ~tie[at[1:] - 1]
        group = np.cumsum(begins)
        sub = order[at]
        order[at] = sub[np.lexsort((-dur[sub], group))]
    return order


def _nesting(ts, dur, kind, pyid, pypar, offsets):
    """Depth and parent per event: CPU-family events nest by time on their track; Python frames by
    their Python id tree (time nesting when ids are absent). GPU events are depth 0, no parent."""
    n = ts.shape[0]
    depth = np.zeros(n, dtype=np.int16)
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return depth, parent
    cpu_fam = np.isin(kind, np.array([int(k) for k in CPU_NEST_KINDS], dtype=np.uint8))
    is_py = kind == Kind.PYTHON
    track_of = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))
    py = np.flatnonzero(is_py & (pyid >= 0))
    cpu = np.flatnonzero(cpu_fam)
    jobs = []
    if cpu.size:
        # two parts of the CPU events where one ends before the other starts on every track (``quiet_cut``): the
        # same depths and parents as one pass over them, which counts no event of the first part as open in
        # the second, nor finds a parent there
        k = quiet_cut(cpu, ts, dur, track_of) if cpu.size >= 2 * NESTING_THREAD_MIN else None
        parts = [cpu] if k is None else [cpu[:k], cpu[k:]]
        jobs += [lambda c=c: time_nesting(c, ts, dur, track_of, depth, parent) for c in parts]
    if py.size:
        jobs.append(lambda: _tree_nesting(py, pyid, pypar, depth, parent))
    # the parts write disjoint events: each in its own thread when big enough (numpy's sorts, searches and
    # arithmetic let go of the GIL: a second core's work where there is one)
    if cpu.size + py.size >= NESTING_THREAD_MIN:
        _in_threads(jobs)
    else:
        for j in jobs:
            j()
    # Python frames without ids (old traces) nest by time
    no_ids = np.flatnonzero(is_py & (pyid < 0))
    if no_ids.size:
        time_nesting(no_ids, ts, dur, track_of, depth, parent)
    return depth, parent


def _in_threads(jobs: list) -> None:
    """Run ``jobs`` (callables) at once: the first in this thread, each other in a thread of its own; the first
    exception any raised is raised here, once all have ended."""
    import threading

    failed: list = []

    def run(job) -> None:
        try:
            job()
        except BaseException as e:  # noqa: BLE001 - raised again by the caller's thread, below
            failed.append(e)

    threads = [threading.Thread(target=run, args=(j,), name="gapscope-nesting", daemon=True) for j in jobs[1:]]
    for t in threads:
        t.start()
    try:
        if jobs:
            run(jobs[0])
    finally:
        for t in threads:
            t.join()
    if failed:
        raise failed[0]


def quiet_cut(idx, ts, dur, track_of) -> int | None:
    """A position ``k`` near the middle of ``idx`` (events sorted by (track, ts, -dur), as ``time_nesting`` takes
    them) such that on every track each event before ``k`` ends at or before each event from ``k`` on starts, or
    None (no such point in the middle half). ``time_nesting`` of ``idx[:k]`` and of ``idx[k:]`` is then that of
    ``idx``: an event's depth counts the earlier events still open at its start, and its parent is one of them."""
    m = idx.size
    if m < 4:
        return None
    s = ts[idx]
    e = s + dur[idx]
    tr = track_of[idx].astype(np.int64)
    base = int(s.min())
    span = int(max(int(e.max()) - base, 0)) + 2
    if span * (int(tr.max()) + 1) > 2**62:
        return None
    band = tr * span - base
    # the latest end so far: tracks in their own bands, so a new track's events are past every earlier one's
    reach = np.maximum.accumulate(e + band)
    ok = np.flatnonzero(reach[:-1] <= (s + band)[1:]) + 1
    if ok.size == 0:
        return None
    k = int(ok[np.argmin(np.abs(ok - m // 2))])
    return k if m // 4 <= k <= m - m // 4 else None


def time_nesting(idx, ts, dur, track_of, depth, parent):
    """Vectorised nesting of intervals per track. ``idx`` is sorted by (track, ts, -dur)."""
    s = ts[idx]
    e = s + dur[idx]
    tr = track_of[idx]
    # Make times track-local by offsetting each track into its own band, so one sort handles all.
    span = int(max(int(e.max()) - int(s.min()), 0)) + 2
    base = int(s.min())
    ntr = int(tr.max()) + 1
    if span * ntr > 2**62:  # absurd time ranges (damaged files): do each track on its own
        for t in np.flatnonzero(np.bincount(tr)):  # (not np.unique: its first call imports numpy.ma, ~15-40 ms)
            sub = tr == t
            if np.count_nonzero(sub) < idx.size:
                time_nesting(idx[sub], ts, dur, track_of, depth, parent)
        return
    s_b = (s - base) + tr.astype(np.int64) * span
    e_b = (e - base) + tr.astype(np.int64) * span
    m = idx.size
    pos = np.arange(m, dtype=np.int64)
    e_sorted = np.sort(e_b)
    ends_le = np.searchsorted(e_sorted, s_b, side="right")
    # zero-length events at exactly s_i that come at or after i (they sort last in their ts group)
    zero = (e_b == s_b).astype(np.int64)
    zc = np.concatenate(([0], np.cumsum(zero)))
    group_end = np.searchsorted(s_b, s_b, side="right")
    later_zero = zc[group_end] - zc[pos]
    d = pos - (ends_le - later_zero)
    d = np.clip(d, 0, np.iinfo(np.int16).max)
    depth[idx] = d.astype(np.int16)
    # parent: the last earlier event one level up (on the same track). All levels at once: with the events
    # ordered by (level, position), the one just before (level - 1, position) in that order is it, when it is
    # of level - 1 (one pass per level was quadratic in the depth: 32k levels of a same-timestamp flood)
    lvl_key = d * (m + 1) + pos
    by_lvl = np.argsort(d.astype(np.int16), kind="stable")  # lvl_key's order (d is clipped to int16): a radix sort
    sorted_key = lvl_key[by_lvl]
    here = np.flatnonzero(d > 0)
    k = np.searchsorted(sorted_key, (d[here] - 1) * (m + 1) + here, side="left") - 1
    ok = k >= 0
    cand = by_lvl[np.where(ok, k, 0)]
    ok &= d[cand] == d[here] - 1
    ok &= tr[cand] == tr[here]
    ok &= e_b[cand] > s_b[here]
    par = np.full(m, -1, dtype=np.int64)
    par[here[ok]] = cand[ok]
    parent[idx] = np.where(par >= 0, idx[np.where(par >= 0, par, 0)], -1)


def _tree_nesting(py, pyid, pypar, depth, parent):
    ids = pyid[py]
    order = np.argsort(ids, kind="stable")
    sids = ids[order]
    want = pypar[py]
    k = np.searchsorted(sids, want)
    k = np.clip(k, 0, max(sids.size - 1, 0))
    found = (want >= 0) & (sids[k] == want) if sids.size else np.zeros(py.size, bool)
    par_local = np.where(found, order[k], -1)
    parent[py] = np.where(par_local >= 0, py[np.where(par_local >= 0, par_local, 0)], -1)
    # depth: the number of ancestors, at most _MAX_TREE_DEPTH (cycles in damaged files must not hang), by pointer
    # jumping: each frame's known ancestor ``anc`` is d steps up; one round doubles the steps of every frame still
    # below a root, where a step a round went over every frame (big_100M.json, 186,813 frames, 25 deep: 34 -> 30 ms)
    d = (par_local >= 0).astype(np.int64)
    anc = par_local.copy()
    live = np.flatnonzero(anc >= 0)
    for _ in range(_MAX_TREE_DEPTH.bit_length()):
        if not live.size:
            break
        a = anc[live]
        up, nxt = d[a], anc[a]
        d[live] += up
        anc[live] = nxt
        live = live[nxt >= 0]
    depth[py] = np.minimum(d, _MAX_TREE_DEPTH).astype(np.int16)


def _links(ts, kind, corr, ext, parent):
    """launch: GPU op -> runtime/driver call with the same correlation.
    op: GPU op and runtime call -> innermost enclosing aten op (by time on the launching thread),
    falling back to the cpu_op with the same External id."""
    n = ts.shape[0]
    launch = np.full(n, -1, dtype=np.int64)
    op = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return launch, op
    is_rt = ((kind == Kind.RUNTIME) | (kind == Kind.DRIVER)) & (corr >= 0)
    gpu = np.isin(kind, np.array([int(k) for k in GPU_WORK_KINDS], dtype=np.uint8))
    rt = np.flatnonzero(is_rt)
    if rt.size:
        # prefer runtime over driver for the same correlation: sort by (corr, kind)
        o = np.lexsort((kind[rt], corr[rt]))
        rts = rt[o]
        c = corr[rts]
        g = np.flatnonzero(gpu & (corr >= 0))
        k = np.searchsorted(c, corr[g], side="left")
        kk = np.clip(k, 0, c.size - 1)
        ok = (k < c.size) & (c[kk] == corr[g])
        launch[g[ok]] = rts[kk[ok]]
    # innermost cpu_op ancestor for each runtime/driver call (walk up the parent chain)
    rt_all = np.flatnonzero((kind == Kind.RUNTIME) | (kind == Kind.DRIVER))
    if rt_all.size:
        cur = parent[rt_all].copy()
        res = np.full(rt_all.size, -1, dtype=np.int64)
        for _ in range(512):
            live = (cur >= 0) & (res < 0)
            if not live.any():
                break
            hit = live & (kind[np.where(cur >= 0, cur, 0)] == Kind.CPU_OP)
            res[hit] = cur[hit]
            step = live & ~hit
            cur[step] = parent[cur[step]]
            cur[~step] = -1
        op[rt_all] = res
    g_all = np.flatnonzero(gpu)
    if g_all.size:
        ln = launch[g_all]
        op[g_all] = np.where(ln >= 0, op[np.where(ln >= 0, ln, 0)], -1)
        # fallback: External id -> cpu_op
        miss = g_all[(op[g_all] < 0) & (ext[g_all] >= 0)]
        cpu = np.flatnonzero((kind == Kind.CPU_OP) & (ext >= 0))
        if miss.size and cpu.size:
            o = np.argsort(ext[cpu], kind="stable")
            ce = ext[cpu][o]
            k = np.searchsorted(ce, ext[miss])
            kk = np.clip(k, 0, ce.size - 1)
            ok = (k < ce.size) & (ce[kk] == ext[miss])
            op[miss[ok]] = cpu[o][kk[ok]]
    return launch, op


def _canonical(raw: bytes) -> bytes:
    """The same args written with other spacing (the typed path keeps them as written) compare equal."""
    try:
        return _dumps(_dict_loads(raw))
    except (TypeError, ValueError, RecursionError, OverflowError):
        return raw


def _exact_duplicates(track, ts, dur, others, args_col: int | None = None, args=None) -> np.ndarray:
    """Rows (of arrays sorted by track, ts, -dur) that repeat an earlier row in every column.

    Only rows sharing (track, ts, dur) with a neighbour can repeat one; those few are sorted by the other
    columns so copies sit side by side, which keeps the full sort of every event to three keys. ``others[args_col]``
    holds args ids: entries are compared by their bytes (CPU ops' args are not interned, so two copies of one
    event have different ids)."""
    tie = (track[1:] == track[:-1]) & (ts[1:] == ts[:-1]) & (dur[1:] == dur[:-1])
    if not tie.any():
        return np.zeros(0, dtype=np.int64)
    group = np.cumsum(np.concatenate(([True], ~tie)))
    in_tie = np.zeros(ts.size, dtype=bool)
    in_tie[1:] |= tie
    in_tie[:-1] |= tie
    rows = np.flatnonzero(in_tie)
    if args_col is not None:
        # a copy is equal in every other column too: only rows with such a twin need their args compared
        # (decoding the args of every row of a same-timestamp flood was most of its load)
        plain = [c[rows] for j, c in enumerate(others) if j != args_col] + [group[rows]]
        o = np.lexsort(plain)
        twin = np.ones(rows.size - 1, dtype=bool)
        for c in plain:
            c = c[o]
            twin &= c[1:] == c[:-1]
        if not twin.any():
            return np.zeros(0, dtype=np.int64)
        keep = np.zeros(rows.size, dtype=bool)
        keep[1:] |= twin
        keep[:-1] |= twin
        rows = np.sort(rows[o][keep])
    keys = [c[rows] for c in others] + [group[rows]]
    if args_col is not None and args is not None:
        seen: dict = {}
        ids = keys[args_col].tolist()
        canon = [-1 if a < 0 else seen.setdefault(_canonical(args[a]), len(seen)) for a in ids]
        keys[args_col] = np.array(canon, dtype=np.int64)
        others = tuple(others[:args_col]) + (None,) + tuple(others[args_col + 1 :])
    o = np.lexsort(keys)  # the last key (the group) sorts first
    r = rows[o]
    same = group[r[1:]] == group[r[:-1]]
    for j, c in enumerate(others):
        if c is None:
            k = keys[j][o]
            same &= k[1:] == k[:-1]
        else:
            same &= c[r[1:]] == c[r[:-1]]
    return r[1:][same]
