"""Durations and axis ticks for the explorer. Pure functions on integer nanoseconds."""

from __future__ import annotations

import math


def fmt_dur(ns: int | float, *, ascii: bool = False) -> str:
    """A duration or a time as the report writes it (tui.analysis.units.fmt_ns): 850 ns, 12.3 µs, 4.56 ms,
    1.23 s; ``us`` for µs on terminals that are not UTF-8."""
    from ..analysis.units import fmt_ns

    s = fmt_ns(ns)
    return s.replace("µs", "us") if ascii else s


def fmt_at(ns: int | float, *, ascii: bool = False) -> str:
    """A time in a list of times: as ``fmt_dur``, but times of a second and more keep 0.1 ms (2.6153 s, not
    2.62 s: the gaps of one step must not all read alike)."""
    if abs(float(ns)) >= 1e9:
        return f"{float(ns) / 1e9:.4f} s"
    return fmt_dur(ns, ascii=ascii)


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
