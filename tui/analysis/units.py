"""How a duration reads in a sentence: the one formatter the analysis and the report share."""

from __future__ import annotations


def fmt_ns(ns) -> str:
    """Integer or float nanoseconds as '1.23 s', '4.56 ms', '7.8 µs' or '900 ns' (sign kept)."""
    ns = float(ns)
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"
