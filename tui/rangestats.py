"""The stats of a time range of the lanes (`m` twice, or `M` on a range): busy and idle per stream, the
idle gaps in it by cause, its kernels, and the launching threads' own time in it (Python frames, and ops and
runtime calls). Plain numpy over the scene; drawn as rich Text."""

from __future__ import annotations

import numpy as np
from rich.text import Text

from ..analysis.names import display_frame
from ..trace.model import Kind
from . import glyphs as G
from .panels import T
from .kernelname import kernel_label
from .scene import Scene


def overlap(starts: np.ndarray, ends: np.ndarray, a: int, b: int) -> np.ndarray:
    """ns of each interval [start, end) inside [a, b)."""
    return np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0, None)


def range_stats(sc: Scene, a: int, b: int) -> dict:
    """Per part (trace / rank): streams (lane label, busy ns), gaps by cause (count, idle ns) and kernels
    (``kernel_rows``: op and family, calls overlapping, ns inside), all clipped to [a, b) in aligned time."""
    edges = np.array([a, b], dtype=np.int64)
    out = {"start": a, "end": b, "parts": []}
    for pi, pt in enumerate(sc.parts):
        p = {"part": pi, "rank": pt.model.rank, "streams": [], "causes": {}, "kernels": [], "gaps": 0}
        for ln in pt.lanes:
            if ln.kind in ("stream", "copy") and ln.union is not None:
                p["streams"].append((ln.device, ln.label, int(ln.union.covered(edges)[0])))
        an = pt.analysis
        if an is not None and len(an.gaps):
            n = len(an.gaps)
            ov = overlap(np.asarray(an.gaps.start_ns[:n], np.int64) + pt.offset,
                         np.asarray(an.gaps.end_ns[:n], np.int64) + pt.offset, a, b)
            hit = np.flatnonzero(ov > 0)
            p["gaps"] = int(hit.size)
            from ..analysis import CAUSES

            for c in np.unique(np.asarray(an.gaps.cause)[hit]).tolist():
                sel = hit[np.asarray(an.gaps.cause)[hit] == c]
                p["causes"][CAUSES[int(c)]] = (int(sel.size), int(ov[sel].sum()))
        m = pt.model
        k = np.flatnonzero(m.kind == Kind.KERNEL)
        if k.size:
            s = m.ts_ns[k] + pt.offset
            ov = overlap(s, s + m.dur_ns[k], a, b)
            hit = ov > 0
            if hit.any():
                p["kernels"] = kernel_rows(m, k[hit], ov[hit])
        # (a provisional list carried onto the full model has no stack index: tui/progress.py)
        p["host"] = host_stats(pt, a - pt.offset, b - pt.offset) if pt.state.stacks is not None else []
        out["parts"].append(p)
    return out


def kernel_rows(m, evs: np.ndarray, ns: np.ndarray) -> list[tuple[str, int, int]]:
    """(label, calls, ns) of kernels ``evs`` (``ns`` of each inside the range), largest first: one row per label,
    the op that launched them and their family (tui/kernelname.py ``kernel_label``), so that no two rows read the
    same (four ``at::native::vectorized_elementwise_kernel<>`` rows told nothing apart): kernels of one op and one
    family are one row."""
    op = np.asarray(m.op)[evs]
    op_name = np.where(op >= 0, np.asarray(m.name_id)[np.maximum(op, 0)], -1)
    pairs, inv = np.unique(np.stack([np.asarray(m.name_id)[evs], op_name]), axis=1, return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    labels = [kernel_label(m.names[int(a)], m.names[int(b)] if b >= 0 else None) for a, b in pairs.T.tolist()]
    names = sorted(set(labels))
    row_of = np.array([names.index(lab) for lab in labels], np.int64)[inv]
    tot = np.bincount(row_of, weights=ns, minlength=len(names)).astype(np.int64)
    cnt = np.bincount(row_of, minlength=len(names))
    order = np.argsort(-tot, kind="stable")
    return [(names[i], int(cnt[i]), int(tot[i])) for i in order.tolist()]


#: at most this many launching threads in the range's stats (a trace with several launch threads is rare)
HOST_THREADS = 2


def host_stats(pt, a: int, b: int, k: int = 6) -> list[dict]:
    """The launching threads' own time in [a, b) (trace time of part ``pt``), each nanosecond credited to the
    one event running innermost (tui.analysis.hosttime, the rule of the python cause): per thread with
    launches (most launches first), ``frames`` (Python frames by own time: (name, ns)), ``ops`` (ops,
    runtime and driver calls by own time), ``busy`` and ``idle`` ns. Threads with no credited time in the
    range are left out."""
    from ..analysis.hosttime import host_time

    m, an = pt.model, pt.analysis
    launch = np.asarray(m.launch)
    gpu = np.flatnonzero(np.isin(m.kind, [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET]))
    calls = launch[gpu]
    calls = calls[calls >= 0]
    if not calls.size:
        return []
    tracks, n = np.unique(m.track[calls], return_counts=True)
    py = m.kind == Kind.PYTHON
    ops = np.isin(m.kind, [Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER, Kind.SYNC])
    out = []
    for tr in tracks[np.argsort(-n, kind="stable")][:HOST_THREADS].tolist():
        ht = host_time(an.stacks, m, int(tr), a, b)
        busy = int(ht.ns.sum())
        if not busy:
            continue
        out.append({"thread": next((x.name for x in m.tracks if x.id == int(tr)), f"thread {tr}"), "busy": busy, "idle": int(ht.idle_ns),
                    "frames": [(m.name(e), ns) for e, ns in ht.by_name(m, mask=py, k=k)],
                    "ops": [(m.name(e), ns) for e, ns in ht.by_name(m, mask=ops, k=k)]})
    return out


def range_text(sc: Scene, a: int, b: int, glyphs: G.Glyphs, top: int = 12) -> Text:
    st = range_stats(sc, a, b)
    t = T(glyphs.ascii)
    span = max(b - a, 1)
    t.add("range ", "bold").add(f"+{t.d(a - sc.origin)} to +{t.d(b - sc.origin)}", "bold yellow")
    t.add(f"  ({t.d(span)})").nl()
    for p in st["parts"]:
        if sc.multi:
            t.nl().add(f"rank {p['rank'] if p['rank'] is not None else p['part']}", "bold underline").nl()
        if p["streams"]:
            t.add("GPU streams: busy / idle in the range", "bold").nl()
            for dev, label, busy in p["streams"]:
                t.add(f"  cuda:{dev} {label:<12}").add(f"{t.d(busy):>10} busy ").add(
                    f"{t.d(span - busy):>10} idle  ").add(f"{busy * 100 / span:5.1f}% busy").nl()
        if p["causes"]:
            t.add(f"GPU idle gaps in the range: {p['gaps']}, by cause (idle inside the range)", "bold").nl()
            for cause, (n, ns) in sorted(p["causes"].items(), key=lambda kv: -kv[1][1]):
                t.add(f"  {cause:<11}", G.CAUSE_COLOURS.get(cause)).add(f"{n:>6} gap{'s' if n != 1 else ' '} {t.d(ns):>10}").nl()
        elif p["streams"]:
            t.add("no GPU idle gap in the range", "italic").nl()
        if p["kernels"]:
            t.add(f"kernels in the range (time inside it), by op and family, {len(p['kernels'])} rows:", "bold").nl()
            for name, n, ns in p["kernels"][:top]:
                t.add(f"  {t.d(ns):>10} {n:>5}x  ").add(name, "bright_cyan").nl()
            if len(p["kernels"]) > top:
                t.add(f"  ... {len(p['kernels']) - top} more", "dim").nl()
        for h in p["host"]:
            t.add(f"{h['thread']}: own time in the range, {t.d(h['busy'])} busy, {t.d(h['idle'])} not "
                  "recorded", "bold").nl()
            for what, rows in (("python frames", h["frames"]), ("ops and runtime calls", h["ops"])):
                if rows:
                    t.add(f"  {what}:", "bold").nl()
                    for name, ns in rows:
                        t.add(f"  {t.d(ns):>10}  ").add(display_frame(name)).nl()
    t.nl().add("Esc closes; Esc again clears the range", "dim")
    return t.text
