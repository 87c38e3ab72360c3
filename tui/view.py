"""The time window and cursor of the lanes: zoom, pan, fit and focus as plain arithmetic on integer ns."""

from __future__ import annotations

from dataclasses import dataclass

MIN_NS_PER_CELL = 1


@dataclass
class View:
    lo: int  # extent of the trace
    hi: int
    t0: int = 0  # visible window [t0, t1)
    t1: int = 0
    cursor: int = 0  # the cursor's time

    def __post_init__(self):
        if self.hi <= self.lo:
            self.hi = self.lo + 1
        if self.t1 <= self.t0:
            self.fit()

    @property
    def span(self) -> int:
        return self.t1 - self.t0

    def fit(self, lo: int | None = None, hi: int | None = None) -> None:
        """[lo, hi) (the whole trace when not given), with a sliver of margin so edge kernels are not cut."""
        lo = self.lo if lo is None else lo
        hi = max(self.hi if hi is None else hi, lo + 1)
        m = max((hi - lo) // 100, 1)
        self.t0, self.t1 = lo - m, hi + m
        if not (self.t0 <= self.cursor < self.t1):
            self.cursor = lo

    def _limits(self, width: int) -> tuple[int, int]:
        return max(width * MIN_NS_PER_CELL, 2), max((self.hi - self.lo) * 4, width * 2, 2)

    def zoom(self, factor: float, width: int) -> None:
        """Zoom in (factor > 1) or out about the cursor: the cursor keeps its time and its column."""
        c = self.cursor
        if not (self.t0 <= c < self.t1):
            c = self.t0 + self.span // 2
            self.cursor = c
        lo_span, hi_span = self._limits(width)
        new_span = int(round(self.span / factor))
        new_span = min(max(new_span, lo_span), hi_span)
        # new = c - (c - t0) * new_span / span keeps c at the same fraction of the window
        left = (c - self.t0) * new_span // max(self.span, 1)
        self.t0 = c - left
        self.t1 = self.t0 + new_span

    def pan(self, frac: float) -> None:
        """Move the window by ``frac`` of its span; the cursor keeps its time."""
        d = int(round(self.span * frac))
        if d == 0:
            d = 1 if frac > 0 else -1
        span = self.span
        t0 = self.t0 + d
        # never leave the trace entirely: at least a quarter of the window stays on it
        t0 = min(max(t0, self.lo - span * 3 // 4), self.hi - span // 4)
        self.t0, self.t1 = t0, t0 + span

    def focus(self, a: int, b: int, width: int, context: float = 1.0) -> None:
        """Show [a, b) in the middle with ``context`` times its length on each side; cursor at a."""
        lo_span, _ = self._limits(width)
        d = max(b - a, 1)
        span = max(int(d * (1 + 2 * context)), lo_span)
        mid = a + d // 2
        self.t0 = mid - span // 2
        self.t1 = self.t0 + span
        self.cursor = a

    def centre_on(self, t: int) -> None:
        """Keep the zoom, put ``t`` in the middle and the cursor on it."""
        span = self.span
        self.t0 = t - span // 2
        self.t1 = self.t0 + span
        self.cursor = t

    def ensure_visible(self, t: int) -> None:
        if not (self.t0 <= t < self.t1):
            self.centre_on(t)
        self.cursor = t
