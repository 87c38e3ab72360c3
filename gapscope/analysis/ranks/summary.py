"""Summaries: what each rank prints after its capture (``summarise``), and rank 0's view of the job from them
(``combine_summaries``), without the traces themselves."""

from __future__ import annotations

from collections import defaultdict

from ..core import analyze
from ..thresholds import Thresholds
from .match import match_timelines
from .text import late_sentence, startup_sentence
from .timeline import Timeline, timeline


def summarise(path, config: Thresholds | None = None, window: str = "steps") -> dict:
    """A small JSON-able summary of one trace (what a rank prints after its capture). ``collective_timeline``
    holds its collective calls (times, groups, and per call the issuing thread's own time per frame since its
    previous launch) so that rank 0 can match the ranks without their traces (``combine_summaries``)."""
    from ...trace import load

    a = analyze(load(path), config, window)
    ct = a.cause_totals()
    tl = timeline(a.model, a.window, a.rank if a.rank is not None else 0, window)
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
        "collective_timeline": tl.to_json(),
        "distortion": a.distortion,
        "warnings": a.warnings[:5],
    }


def combine_summaries(summaries: list[dict], config: Thresholds | None = None) -> dict:
    """Rank 0's view of the job from the ranks' summaries (``summarise``): per phase, the matched collectives
    (``rows``), clocks, per rank idle % / collective time / exposed / wait, the late ranks and start-up skew
    (RankMatch.to_json), plus ``lines`` (text)."""
    by_phase: dict = defaultdict(list)
    for s in summaries:
        if isinstance(s, dict) and isinstance(s.get("collective_timeline"), dict) and s.get("rank") is not None:
            by_phase[s.get("phase")].append(s)
    out: dict = {"phases": [], "lines": []}
    for phase, ss in by_phase.items():
        ss = sorted(ss, key=lambda s: s["rank"])
        if len(ss) < 2:
            continue
        res = match_timelines([Timeline.from_json(s["collective_timeline"]) for s in ss], config)
        idle = {s["rank"]: s.get("idle_pct") if s.get("devices") else None for s in ss}  # None: no GPU (gloo)
        for e in res.ranks:
            e.idle_pct = idle.get(e.rank)
        out["phases"].append({"phase": phase, "rows": [r.to_json() for r in res.rows], **res.to_json()})
        p = f"{phase}: " if phase else ""
        for le in res.late[:1]:
            out["lines"].append(p + late_sentence(le))
        if res.startup is not None:
            out["lines"].append(p + startup_sentence(res.startup))
        if not res.late:
            out["lines"].append(p + "no rank arrived last at the matched collectives")
        out["lines"].extend(p + w for w in res.warnings)
    return out
