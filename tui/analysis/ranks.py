"""Several ranks of one job: match collectives across ranks, find the wait part and the late rank.

The i-th NCCL kernel of a given name on each rank is the same collective. Clocks of different ranks
(and hosts) are not aligned, but a collective completes on every rank at about the same moment
(nobody can finish before the last rank has arrived), so the offset of rank r is the median over
matched collectives of (end on r - end on the first rank). After that shift, the last rank to start
is the late one and every other rank's wait is ``last start - its start`` (clipped to its duration).

Only collectives inside each rank's analysis window are matched (``windows``; by default the measured
steps, see window.py), so the capture's own barrier before the first step is not counted. Each
rank's total wait is also put on its device as ``DeviceStats.collective_wait_ns``: a rank whose GPU
sits in NCCL kernels waiting for a late peer shows little idle time, and this is the number that says so.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from ..trace.model import Kind, TraceModel
from .core import Analysis, analyze
from .names import name_flags
from .thresholds import Thresholds


def same_job(models: list[TraceModel]) -> bool:
    ranks = [m.rank for m in models]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        return False
    ws = {(m.distributed or {}).get("world_size") for m in models} - {None}
    return len(ws) <= 1


def _coll_kernels(model: TraceModel, window=None) -> dict[str, np.ndarray]:
    flags = name_flags(model.names)
    k = np.flatnonzero((model.kind == Kind.KERNEL) & flags["coll_kernel"][model.name_id])
    if window is not None:
        k = k[window.gpu_in(model, k)]
    out: dict[str, list] = defaultdict(list)
    k = k[np.argsort(model.ts_ns[k], kind="stable")]
    for i in k.tolist():
        out[model.names[int(model.name_id[i])]].append(i)
    return {n: np.array(v, np.int64) for n, v in out.items()}


def match_collectives(models: list[TraceModel], windows: list | None = None) -> list[dict]:
    """One row per collective name: count (matched calls), total (all ranks), wait, late rank.
    ``windows``: one ``AnalysisWindow`` per model (collectives outside it are left out), or None."""
    if len(models) < 2:
        return []
    per = [_coll_kernels(m, windows[i] if windows else None) for i, m in enumerate(models)]
    ranks = [m.rank if m.rank is not None else i for i, m in enumerate(models)]
    names = set(per[0])
    for p in per[1:]:
        names &= set(p)
    if not names:
        return []
    # clock offsets from collective end times, against the first model
    diffs: list[list[int]] = [[] for _ in models]
    for n in names:
        c = min(p[n].size for p in per)
        e0 = models[0].ts_ns[per[0][n][:c]] + models[0].dur_ns[per[0][n][:c]]
        for r in range(1, len(models)):
            m = models[r]
            er = m.ts_ns[per[r][n][:c]] + m.dur_ns[per[r][n][:c]]
            diffs[r].extend((er - e0).tolist())
    off = [0] + [int(np.median(d)) if d else 0 for d in diffs[1:]]
    rows = []
    for n in sorted(names):
        c = min(p[n].size for p in per)
        starts = np.stack([models[r].ts_ns[per[r][n][:c]] - off[r] for r in range(len(models))])
        durs = np.stack([models[r].dur_ns[per[r][n][:c]] for r in range(len(models))])
        last = starts.max(axis=0)
        wait = np.minimum(np.maximum(last[None, :] - starts, 0), durs)
        late = starts.argmax(axis=0)
        spread = last - starts.min(axis=0)
        lc = Counter(late[spread > 0].tolist())
        late_rank = ranks[lc.most_common(1)[0][0]] if lc else None
        rows.append({
            "name": n, "count": int(c), "total_us": float(durs.sum()) / 1e3, "wait_us": float(wait.sum()) / 1e3,
            "late_rank": late_rank,
            "late_counts": {str(ranks[k]): v for k, v in lc.items()},
            "wait_by_rank_us": {str(ranks[r]): float(wait[r].sum()) / 1e3 for r in range(len(models))},
            "first_wait_by_rank_us": {str(ranks[r]): float(wait[r, 0]) / 1e3 for r in range(len(models))},
            "clock_offset_us": {str(ranks[r]): off[r] / 1e3 for r in range(len(models))},
        })
    rows.sort(key=lambda d: -d["total_us"])
    return rows


def analyze_ranks(models: list[TraceModel], config: Thresholds | None = None, window: str = "steps") -> list[Analysis]:
    """Analyse each rank, then attach the cross-rank collectives table (``rank_collectives``) to every
    Analysis, fill wait/late_rank into each rank's own collectives and the rank's total collective wait
    into its devices (``collective_wait_ns``, ``collective_late_rank``)."""
    order = sorted(range(len(models)), key=lambda i: (models[i].rank is None, models[i].rank or 0, i))
    models = [models[i] for i in order]
    out = [analyze(m, config, window) for m in models]
    table = match_collectives(models, [a.window for a in out])
    by_name = {r["name"]: r for r in table}
    from .core import Finding
    from .findings import SUGGESTIONS, _fmt, _severity

    for a in out:
        rk = str(a.rank)
        waits = [(r["wait_by_rank_us"].get(rk, 0.0), r) for r in table]
        waits = [(w, r) for w, r in waits if w > 0 and r["late_rank"] is not None and str(r["late_rank"]) != rk]
        if waits:
            wns = int(round(sum(w for w, _ in waits) * 1e3))
            first = sum(r["first_wait_by_rank_us"].get(rk, 0.0) for _, r in waits) * 1e3
            skew = first >= 0.9 * wns and first >= 1e7
            late = Counter(r["late_rank"] for _, r in waits).most_common(1)[0][0]
            n = sum(r["count"] for _, r in waits)
            window = sum(d.window_ns for d in a.devices) or 1
            a.findings.append(Finding(
                id=f"collective-wait-{rk}", severity="info" if skew else _severity(wns / window),
                title=f"rank {rk} waited {_fmt(wns)} in {n} collectives for late rank {late}"
                + (" (almost all in the first one: profiler start-up skew between ranks, not a straggler)"
                   if skew else ""),
                idle_ns=0 if skew else wns,  # start-up skew is not idle time the job has: listed, ranked last
                evidence={"late_rank": late, "wait_us": wns / 1e3, "startup_skew": skew,
                          "collectives": [{"name": r["name"], "wait_us": w, "count": r["count"]} for w, r in waits]},
                suggestion=f"Rank {late} arrives last: look at its CPU work before each collective (load its trace; "
                           + "the gaps before its collectives show what it was doing). " + SUGGESTIONS["collective"],
                cause="collective"))
            a.findings.sort(key=lambda f: (-f.idle_ns, f.title))
    for a in out:
        _device_wait(a, table)
    for a in out:
        a.rank_collectives = table
        rk = str(a.rank)
        for c in a.collectives:
            r = by_name.get(c["name"])
            if r:
                c["wait_ns"] = int(round(r["wait_by_rank_us"].get(rk, 0.0) * 1e3))
                c["late_rank"] = r["late_rank"]
    return out


def _device_wait(a: Analysis, table: list[dict]) -> None:
    """Put the rank's collective wait on the device that runs its collective kernels."""
    rk = str(a.rank)
    rows = [r for r in table if r["wait_by_rank_us"].get(rk, 0.0) > 0]
    if not rows or not a.devices:
        return
    wns = int(round(sum(r["wait_by_rank_us"][rk] for r in rows) * 1e3))
    late = Counter()
    for r in rows:
        if r["late_rank"] is not None and str(r["late_rank"]) != rk:
            late[r["late_rank"]] += r["wait_by_rank_us"][rk]
    m = a.model
    flags = a.flags
    k = np.flatnonzero((m.kind == Kind.KERNEL) & flags["coll_kernel"][m.name_id])
    k = k[a.window.gpu_in(m, k)]
    tdev = [t.device for t in m.tracks]
    devs = Counter(tdev[int(t)] for t in m.track[k].tolist())
    dev = devs.most_common(1)[0][0] if devs else a.devices[0].device
    for d in a.devices:
        if d.device == dev:
            d.collective_wait_ns = wns
            d.collective_late_rank = late.most_common(1)[0][0] if late else None


def summarise(path, config: Thresholds | None = None, window: str = "steps") -> dict:
    """A small JSON-able summary of one trace (what a rank prints after its capture)."""
    from ..trace import load

    a = analyze(load(path), config, window)
    ct = a.cause_totals()
    return {
        "path": str(path),
        "rank": a.rank,
        "phase": a.phase,
        "window_us": a.window_ns / 1e3,
        "idle_pct": round(a.idle_pct, 2),
        "devices": [{"device": d.device, "name": d.name, "idle_pct": round(d.idle_pct, 2),
                     "window_us": d.window_ns / 1e3} for d in a.devices],
        "causes_us": {c: v["total_ns"] / 1e3 for c, v in ct.items() if v["count"]},
        "findings": [{"id": f.id, "severity": f.severity, "title": f.title, "idle_us": f.idle_ns / 1e3}
                     for f in a.findings[:3]],
        "collectives": [{"name": c["name"], "count": c["count"], "total_us": c["total_ns"] / 1e3}
                        for c in a.collectives[:5]],
        "distortion": a.distortion,
        "warnings": a.warnings[:5],
    }
