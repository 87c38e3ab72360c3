"""Vectorised interval arithmetic on integer nanoseconds.

``union(starts, ends)`` merges intervals, ``subtract`` takes one set from another; ``Coverage`` answers "how much of [a, b) is covered" for
arrays of queries with two searchsorted calls. Grouped variants keep several tracks in one set by
shifting each group into its own band of the time axis (group * span), so one sorted array answers
queries for every thread at once. ``member(column, values)``: ``np.isin`` against a few values, cheaply;
``uniq``, ``median`` and ``percentile``: ``np.unique``, ``np.median`` and ``np.percentile`` of columns
without importing ``numpy.ma``; ``name_ids``: the name column as an index.
"""

from __future__ import annotations

import numpy as np


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted union of [start, end) intervals (empty ones dropped). Touching ones merge."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    if not keep.all():
        s, e = s[keep], e[keep]
    if s.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if not (s[1:] >= s[:-1]).all():  # callers often pass sorted starts (model order): no sort, no copy then
        o = np.argsort(s, kind="stable")
        s, e = s[o], e[o]
    run = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run[:-1]
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:] - 1, [s.size - 1]))
    return s[first], run[last]


def uniq(a) -> np.ndarray:
    """``np.unique(a)`` of a 1-d array: its distinct values, sorted. Integers (and bools) by one sort and a
    comparison of neighbours, the values ``np.unique`` gives; other types through ``np.unique`` itself. The plain
    ``np.unique`` checks for a masked array first, and that check imports ``numpy.ma`` (~40 ms, once per process,
    on a report's path) for nothing."""
    a = np.asarray(a)
    if a.dtype.kind not in "iub":
        return np.unique(a)
    s = np.sort(a.ravel())
    if s.size > 1:
        keep = np.empty(s.size, bool)
        keep[0] = True
        np.not_equal(s[1:], s[:-1], out=keep[1:])
        s = s[keep]
    return s


def percentile(a, q) -> float:
    """``float(np.percentile(a, q))`` (numpy's default, linear method) of a non-empty 1-d integer array, by the
    same float operations on the two order statistics around the virtual index ``(n - 1) * q / 100``; other
    arrays through ``np.percentile`` itself. ``np.percentile`` takes its order statistics through a plain
    ``np.unique``, which imports ``numpy.ma`` (see ``uniq``)."""
    a = np.asarray(a)
    if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
        return float(np.percentile(a, q))
    n = a.size
    v = (n - 1) * np.true_divide(q, 100)
    if not 0 <= v < n - 1:  # q of 100 (the largest) or out of range: numpy's own answer and error
        return float(np.percentile(a, q)) if v < 0 or v != v else float(a.max())
    i = int(np.floor(v))
    s = np.partition(a, (i, i + 1))
    lo, hi = s[i], s[i + 1]
    t = float(v - i)
    d = np.float64(hi - lo)
    # numpy's _lerp: from the lower value below one half, from the upper one from one half on
    return float(np.float64(hi) - d * (1 - t)) if t >= 0.5 else float(np.float64(lo) + d * t)


def median(a) -> float:
    """``float(np.median(a))`` of a non-empty 1-d integer or float64 array without NaN: ``np.median``'s own steps
    (its partition, the mean of the middle one or two) less its check for NaN; other arrays through
    ``np.median`` itself. ``np.median`` of floats checks for a masked array, which imports ``numpy.ma``
    (see ``uniq``)."""
    a = np.asarray(a)
    if a.ndim != 1 or a.size == 0 or not (a.dtype.kind in "iu" or a.dtype == np.float64) or \
            (a.dtype.kind == "f" and np.isnan(a).any()):
        return float(np.median(a))
    h = a.size // 2
    # numpy's own order statistics (which of two equal values, 0.0 and -0.0, lands in the middle depends on them)
    kth = [h - 1, h] if a.size % 2 == 0 else [h]
    if a.dtype.kind == "f":
        kth.append(-1)
    s = np.partition(a, kth)
    # and its mean of them (which makes -0.0 alone 0.0)
    return float(np.mean(s[h:h + 1] if a.size % 2 else s[h - 1:h + 1]))


def name_ids(model) -> np.ndarray:
    """The model's ``name_id`` column as ``intp``, numpy's index type, made once per loaded trace (kept on the
    model, as ``activity.args_keys`` keeps its keys): a per-name flag taken for every event (``flags[x][name_id]``,
    some thirty of them in a report) otherwise casts the int32 column to intp first, each time."""
    got = model.__dict__.get("_name_ids_intp")
    if got is None or got[0] is not model.name_id:  # (made again for a column replaced)
        got = model.__dict__["_name_ids_intp"] = (model.name_id, model.name_id.astype(np.intp))
    return got[1]


def subtract(a_s, a_e, b_s, b_e) -> tuple[np.ndarray, np.ndarray]:
    """Union of [a) minus union of [b), both given as arrays (any order); returns sorted disjoint arrays."""
    a_s, a_e = union(np.asarray(a_s, np.int64), np.asarray(a_e, np.int64))
    if a_s.size == 0:
        return a_s, a_e
    b_s, b_e = union(np.asarray(b_s, np.int64), np.asarray(b_e, np.int64))
    if b_s.size == 0:
        return a_s, a_e
    # boundaries of both; a piece is kept when its start is inside a and not inside b. Four sorted runs: a stable
    # sort (a merge of runs) is much cheaper than np.unique's quicksort of them
    pts = np.concatenate((a_s, a_e, b_s, b_e))
    pts.sort(kind="stable")
    pts = pts[np.r_[True, pts[1:] != pts[:-1]]]
    lo, hi = pts[:-1], pts[1:]

    def inside(s, e, t):
        j = np.searchsorted(s, t, side="right") - 1
        return (j >= 0) & (t < e[np.clip(j, 0, None)])

    keep = inside(a_s, a_e, lo) & ~inside(b_s, b_e, lo)
    return union(lo[keep], hi[keep])


class Coverage:
    """A union of intervals with O(log n) coverage queries, vectorised over query arrays."""

    def __init__(self, starts, ends):
        self.s, self.e = union(starts, ends)
        lens = self.e - self.s
        self.cum = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)

    @property
    def total(self) -> int:
        return int(self.cum[-1])

    def _upto(self, t: np.ndarray) -> np.ndarray:
        """Covered length in (-inf, t)."""
        t = np.asarray(t, dtype=np.int64)
        if self.s.size == 0:
            return np.zeros(t.shape, np.int64)
        j = np.searchsorted(self.s, t, side="right") - 1
        jj = np.clip(j, 0, None)
        part = np.clip(t - self.s[jj], 0, (self.e - self.s)[jj])
        return np.where(j >= 0, self.cum[jj] + part, 0)

    def covered(self, a, b) -> np.ndarray:
        """Covered length of [a, b) (0 where b <= a)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.maximum(np.asarray(b, dtype=np.int64), a)
        return self._upto(b) - self._upto(a)

    def last_end_at_or_before(self, t) -> np.ndarray:
        """End of the last interval starting at or before t (or INT64 min when none)."""
        t = np.asarray(t, dtype=np.int64)
        if self.s.size == 0:
            return np.full(t.shape, np.iinfo(np.int64).min, np.int64)
        j = np.searchsorted(self.s, t, side="right") - 1
        return np.where(j >= 0, self.e[np.clip(j, 0, None)], np.iinfo(np.int64).min)


class GroupedCoverage:
    """One Coverage per group (thread), queried together: group g's times live in band g."""

    def __init__(self, groups, starts, ends, base: int, span: int):
        self.base = int(base)
        self.span = int(span)
        g = np.asarray(groups, dtype=np.int64)
        s = np.asarray(starts, dtype=np.int64)
        e = np.asarray(ends, dtype=np.int64)
        # clip into the band so intervals of one group never reach into the next
        s = np.clip(s - self.base, 0, self.span - 1)
        e = np.clip(e - self.base, 0, self.span - 1)
        self.cov = Coverage(g * self.span + s, g * self.span + e)

    @classmethod
    def of_keys(cls, ks, ke, base: int, span: int) -> "GroupedCoverage":
        """The set whose intervals, already in bands, are [ks, ke) (``band_keys`` of their groups, starts and
        ends): several sets over subsets of one set of events share the keys (gaps.CpuSets)."""
        self = cls.__new__(cls)
        self.base, self.span = int(base), int(span)
        self.cov = Coverage(ks, ke)
        return self

    @staticmethod
    def band_keys(groups, times, base: int, span: int) -> np.ndarray:
        """The band positions ``GroupedCoverage`` gives times of groups (group * span + the time since base,
        clipped into the band)."""
        g = np.asarray(groups, dtype=np.int64)
        return g * int(span) + np.clip(np.asarray(times, dtype=np.int64) - int(base), 0, int(span) - 1)

    def _q(self, g, t):
        g = np.asarray(g, dtype=np.int64)
        t = np.clip(np.asarray(t, dtype=np.int64) - self.base, 0, self.span - 1)
        return g * self.span + t

    def covered(self, g, a, b) -> np.ndarray:
        g = np.asarray(g, dtype=np.int64)
        ok = g >= 0
        gg = np.where(ok, g, 0)
        return np.where(ok, self.cov.covered(self._q(gg, a), self._q(gg, b)), 0)

    def touches(self, g, a, b) -> np.ndarray:
        """True where some interval of group g overlaps [a, b] (closed: touching counts)."""
        g = np.asarray(g, dtype=np.int64)
        ok = g >= 0
        gg = np.where(ok, g, 0)
        qa = self._q(gg, a)
        qb = self._q(gg, b)
        end = self.cov.last_end_at_or_before(qb)
        return ok & (end >= qa)


def isin(values, choices) -> np.ndarray:
    """``np.isin(values, choices)`` (ints or strings), by one sort of the choices and a search. ``np.isin`` sorts
    where it cannot table the values (strings; event indices spread over the trace), and that path calls the plain
    ``np.unique``, whose first call imports ``numpy.ma`` (~15-40 ms once per process, on a report's path)."""
    v = np.asarray(values)
    c = np.sort(np.asarray(choices).ravel())
    if c.size == 0 or v.size == 0:
        return np.zeros(v.shape, bool)
    i = np.minimum(np.searchsorted(c, v), c.size - 1)
    return c[i] == v


def member(values, choices) -> np.ndarray:
    """``np.isin(values, choices)`` for a column against a few values (event kinds, threads): one comparison per
    value. On a whole column that is 10-100x faster than ``np.isin``, which tables or sorts the values first."""
    v = np.asarray(values)
    out = np.zeros(v.shape, bool)
    for x in np.asarray(choices).ravel().tolist():
        out |= v == x
    return out
