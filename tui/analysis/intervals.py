"""Vectorised interval arithmetic on integer nanoseconds.

``union(starts, ends)`` merges intervals, ``subtract`` takes one set from another; ``Coverage`` answers "how much of [a, b) is covered" for
arrays of queries with two searchsorted calls. Grouped variants keep several tracks in one set by
shifting each group into its own band of the time axis (group * span), so one sorted array answers
queries for every thread at once. ``member(column, values)``: ``np.isin`` against a few values, cheaply.
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


def member(values, choices) -> np.ndarray:
    """``np.isin(values, choices)`` for a column against a few values (event kinds, threads): one comparison per
    value. On a whole column that is 10-100x faster than ``np.isin``, which tables or sorts the values first."""
    v = np.asarray(values)
    out = np.zeros(v.shape, bool)
    for x in np.asarray(choices).ravel().tolist():
        out |= v == x
    return out
