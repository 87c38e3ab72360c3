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


def fmt_bytes(n) -> str:
    """A byte count as the report writes it: 512 B, 1.5 KiB, 256.0 MiB (powers of 1024)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
