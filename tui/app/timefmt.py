"""Durations and axis ticks for the explorer. Pure functions on integer nanoseconds."""

from __future__ import annotations

import math


def fmt_dur(ns: int | float, *, ascii: bool = False) -> str:
    """A duration in the unit that keeps 3 significant digits: 850 ns, 12.3 µs, 4.56 ms, 1.23 s."""
    ns = float(ns)
    us = "us" if ascii else "µs"
    a = abs(ns)
    if a < 1_000:
        return f"{ns:.0f} ns"
    for div, unit in ((1e3, us), (1e6, "ms"), (1e9, "s")):
        v = ns / div
        if abs(v) < 1000 or unit == "s":
            if abs(v) >= 100:
                return f"{v:.0f} {unit}"
            if abs(v) >= 10:
                return f"{v:.1f} {unit}"
            return f"{v:.2f} {unit}"
    return f"{ns / 1e9:.2f} s"  # pragma: no cover


def nice_step(span_ns: int, width: int, min_cells: int = 12) -> int:
    """Tick step (1, 2 or 5 times a power of ten, in ns) so that ticks are at least ``min_cells`` apart."""
    if span_ns <= 0 or width <= 0:
        return 1
    want = span_ns * max(min_cells, 1) / max(width, 1)
    p = 10 ** max(0, math.floor(math.log10(max(want, 1))))
    for m in (1, 2, 5, 10):
        if m * p >= want:
            return int(m * p)
    return int(10 * p)  # pragma: no cover


def fmt_tick(ns: int, step: int, *, ascii: bool = False, ref: int | None = None) -> str:
    """A tick label. The unit follows the largest label on the axis (``ref``, else ``ns``) so labels read
    5.10ms 5.15ms rather than 5100µs; the decimals are just enough to tell ticks ``step`` apart."""
    us = "us" if ascii else "µs"
    big = max(abs(int(ref if ref is not None else ns)), abs(int(step)), 1)
    div, unit = 1, "ns"
    for d, u in ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, us)):
        if big >= d:
            div, unit = d, u
            break
    decimals = 0
    while decimals < 9 and (int(step) * 10**decimals) % div:
        decimals += 1
    return f"{ns / div:.{decimals}f}{unit}"
