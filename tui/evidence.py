"""A finding's evidence as the findings view (3) shows it: the report's units and precision (4.56 ms, 49.0%,
256.0 MiB), names for the keys, a cause's gaps as "sync 855 gaps (49.08 ms)", a rank's time as "rank 0
2.14 ms"; never a raw float or a Python repr. Pure functions (tested without an app)."""

from __future__ import annotations

from ..analysis.names import display_frame
from ..analysis.text import plain, sentence
from ..analysis.units import fmt_bytes, fmt_ns

#: the name a key is shown under (the rest: its words, without the unit suffix)
LABELS = {
    "idle_us": "GPU idle",
    "share_of_window_pct": "share of the window",
    "largest_gap_us": "largest gap",
    "frame": "where",
    "gap_causes": "gaps by cause",
    "issued_ops": "ops issued in these gaps",
    "launch_rate_per_ms": "launch rate",
    "launch_cost_median_us": "median launch cost",
    "kernels_shorter_than_launch": "kernels shorter than their launch call",
    "per_step_us": "per step",
    "gbps": "bandwidth",
    "unprofiled_us": "un-profiled step",
    "profiled_us": "profiled step",
    "unprofiled_n": "un-profiled runs",
    "ratio": "profiled / un-profiled",
    "total_ns": "total",
}
#: shown otherwise: the examples by the first one's explanation (as the report), the gap rows by the gap list
SKIP = {"examples", "gap_rows", "mask", "fixes"}  # mask, fixes: patterns.pattern_extra_lines
MAX_ITEMS = 6  # the items of a list or a mapping shown before "+N more"


def _dur_us(v, ascii: bool) -> str:
    s = fmt_ns(round(float(v) * 1e3))
    return s.replace("µs", "us") if ascii else s


def label(key: str) -> str:
    """``share_of_window_pct`` -> "share of the window"; an unknown key: its words without the unit."""
    if key in LABELS:
        return LABELS[key]
    k = str(key)
    for suf in ("_us", "_ns", "_pct", "_per_ms"):
        if k.endswith(suf):
            k = k[: -len(suf)]
            break
    return k.replace("_", " ")


def _more(items: list[str], n: int) -> str:
    return ", ".join(items) + (f" (+{n - len(items)} more)" if n > len(items) else "")


def value(key: str, v, *, ascii: bool = False) -> str:
    """One evidence value in the report's units, read from its key's suffix."""
    k = str(key)
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        if k == "gap_causes":  # cause -> [count, idle µs]
            items = [f"{c} {int(n)} gap{'s' if int(n) != 1 else ''} ({_dur_us(us, ascii)})"
                     for c, (n, us) in sorted(v.items(), key=lambda kv: -float(kv[1][1]))]
        else:
            rank = "rank" in k
            items = [f"{'rank ' if rank else ''}{kk} {value(k, vv, ascii=ascii)}" for kk, vv in v.items()]
        return _more(items[:MAX_ITEMS], len(items))
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, dict) for x in v):
            return f"{len(v)} entr{'y' if len(v) == 1 else 'ies'}"
        items = [value(k, x, ascii=ascii) for x in v]
        return _more(items[:MAX_ITEMS], len(items))
    if isinstance(v, (int, float)):
        if k.endswith("_us"):
            return _dur_us(v, ascii)
        if k.endswith("_ns"):
            s = fmt_ns(v)
            return s.replace("µs", "us") if ascii else s
        if k.endswith("_pct"):
            return f"{float(v):.1f}%"
        if k.endswith("_per_ms"):
            return f"{float(v):.1f}/ms"
        if k == "bytes":
            return fmt_bytes(v)
        if k == "gbps":
            return f"{float(v):.1f} GB/s"
        if k.startswith("ratio"):
            return f"{float(v):.2f}x"
        if isinstance(v, float):
            return f"{v:g}" if v == int(v) and abs(v) < 1e15 else f"{v:.3g}"
        return str(v)
    if v is None:
        return "–"
    s = str(v)
    return display_frame(s) if k == "frame" else s


def evidence_lines(ev: dict | None, *, ascii: bool = False) -> list[str]:
    """The lines of a finding's evidence: the first example's explanation and the ops issued (what the report
    prints under a finding), then every other field as "name: value"."""
    ev = ev if isinstance(ev, dict) else {}
    out = []
    ex = (ev.get("examples") or [None])[0]
    if isinstance(ex, dict) and ex.get("explanation"):
        out.append(plain(sentence(ex["explanation"])))
    for k, v in ev.items():
        if k in SKIP:
            continue
        out.append(f"{label(k)}: {value(k, v, ascii=ascii)}")
    if ev.get("mask") or ev.get("fixes"):
        # an op pattern's mask builders and fixes: the report's lines, plain
        from ..analysis.patterns import pattern_extra_lines

        out += [ln.rstrip() for ln in pattern_extra_lines(ev, lambda x: x, lambda x: x, "")]
    return out
