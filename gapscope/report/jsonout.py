"""``build_json(analyses) -> dict`` following findings.schema.json (shipped beside this module) (gapscope.findings/1).

Times are µs floats relative to the start of each trace's analysis window (the measured steps when the
trace has ``gapscope.step#k`` ranges, see gapscope/analysis/window.py); durations are µs. Entries carry
``trace`` (index into ``traces``) when several traces are in one report.

Extra keys beyond the schema's minimum: ``traces[].window`` (what the window covers and what it left
out), ``devices[].collective_wait_us`` / ``collective_late_rank`` (multi-rank: time in collective
kernels before the last rank arrived), a top-level ``streams`` list (per stream of each device:
busy, idle and gaps within the device window) and, for the ranks of one job, a top-level ``ranks`` object:
``per_rank`` (idle %, collective time, exposed communication, wait and start-up wait, times arrived last),
``late`` (late ranks, the waits they caused and the frames that made them late: own time against the other
ranks'), ``startup`` (profiler start-up skew: the first collectives' waits, counted apart), ``clock`` (each
rank's offset, checked against the collectives' end times) and ``warnings`` (ranks.RankMatch.to_json);
``collectives[]`` then also carry ``process_group``, ``late_counts`` and per rank waits, times and offsets.

Every ``traces[]`` entry carries its own ``causes`` (count and idle per cause); the top-level ``causes`` add
up every trace of the report. Two traces that are not the ranks of one job are a before/after pair (the
diagnosis' kind ``pair``, gapscope/analysis/diagnosis.py): the report adds ``comparison`` (``comparison_entry``, from gapscope/analysis/compare/__init__.py), every number per step.
"""

from __future__ import annotations

import numpy as np

from ..analysis import CAUSES
from ..analysis.text import plain, segments

SCHEMA = "gapscope.findings/1"


def achieved_entry(row) -> dict:
    """A kernel or op row's achieved figures (over its floored calls)."""
    r3 = (lambda x: None if x is None else round(x, 3))
    return {"flops": row.flops, "bytes": row.nbytes, "tflops": r3(row.tflops), "gbps": r3(row.gbps),
            "peak_pct": r3(row.peak_pct), "floor_pct": r3(row.floor_pct), "l2_resident_calls": row.l2_resident,
            "dtype": row.dtype}


def _us(ns) -> float:
    return round(float(ns) / 1e3, 3)


def _effect_us(e: dict) -> float:
    """What orders findings across traces: its idle time, or for a cross-rank finding (late rank, collective wait:
    time inside collectives, not idle) the wait in ``evidence.effect_us``."""
    ev = e.get("evidence")
    return max(e["idle_us"], float(ev.get("effect_us") or 0.0) if isinstance(ev, dict) else 0.0)


def _text(change) -> tuple[str, list[dict]]:
    """An action's text (plan.py ``Span``s) as one string and as its segments (code names kept apart)."""
    return plain(change), segments(change)


def _where(w) -> dict | None:
    return None if w is None else {"frame": w.frame, "file": w.file, "line": w.line, "func": w.func}


def action_entries(plan, tix=None) -> list[dict]:
    """``actions``: the plan's actions in plan order (analysis/plan.py), per step; several traces: with ``trace``
    and finding ids as ``tK:id``."""
    fid = (lambda x: x) if tix is None else (lambda x: f"t{tix}:{x}")
    out = []
    for x in plan.actions:
        text, segs = _text(x.change)
        needs = []
        for n in x.needs:
            nt, ns = _text(n.change)
            needs.append({"change": nt, "change_segments": ns, "where": _where(n.where),
                          "saving_us": None if n.saving_ns is None else _us(n.saving_ns),
                          "saving_pct": None if n.saving_pct is None else round(n.saving_pct, 2),
                          "findings": [fid(i) for i in n.findings], "action": n.action})
        e = {"rank": x.rank, "kind": x.kind, "severity": x.severity, "minor": x.minor, "change": text,
             "headline": plain(x.headline),
             "change_segments": segs, "where": _where(x.where), "saving_us": _us(x.saving_ns),
             "saving_pct": round(x.saving_pct, 2), "fix": x.fix, "needs": needs, "inside": x.inside,
             "unlocks": list(x.unlocks), "findings": [fid(i) for i in x.findings], "gaps": len(x.gap_rows),
             "kernels": x.kernels}
        if tix is not None:
            e["trace"] = tix
        out.append(e)
    return out


def plan_entry(plan, tix=None) -> dict:
    """``plan``: what every action buys together (one replay), against which step."""
    e = {"saving_us": _us(plan.saving_ns), "saving_pct": round(plan.saving_pct, 2), "baseline_us": _us(plan.baseline_ns),
         "calibrated": plan.calibrated, "actions": len(plan.major), "minor": len(plan.minor),
         "unplanned": [i if tix is None else f"t{tix}:{i}" for i in plan.unplanned]}
    if tix is not None:
        e["trace"] = tix
    return e


def _jsonable(v):
    t = type(v)
    # the plain scalars first (most of a report's values): returned as they are
    if t is str or t is int or t is bool or v is None:
        return v
    if t is float:
        return None if v != v else v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, float) and v != v:
        return None
    return v


def trace_entry(a) -> dict:
    m = a.model
    g = m.gapscope_meta or {}
    torch_v = g.get("torch") if isinstance(g.get("torch"), str) else None
    return {
        "path": m.path,
        "events": int(m.n),
        "window_us": _us(a.window_ns),
        "phase": a.phase,
        "rank": a.rank,
        "torch": torch_v,
        "distortion": a.distortion,
        "warnings": list(a.warnings),
        "idle_pct": round(a.idle_pct, 3),
        "window": window_entry(a),
        # the origin of every *_us time of this trace's gaps and findings: the analysed window's start, in the
        # trace's own clock (µs, as the events' ``ts``)
        "origin_us": a.window_start_ns / 1e3,
    }


def window_entry(a) -> dict:
    w = a.window
    return {"mode": w.mode, "steps": sorted(set(w.steps)), "excluded_us": _us(w.excluded_ns),
            "excluded_gpu_work_us": _us(w.excluded_work_ns), "note": w.note()}


def stream_entries(a, ti: int | None = None) -> list[dict]:
    out = []
    for d in a.devices:
        for sid in sorted(d.stream_gaps):
            v = d.stream_gaps[sid]
            e = {"rank": d.rank, "device": d.device, "stream": sid, "busy_us": _us(v["busy_ns"]),
                 "idle_us": _us(v["idle_ns"]), "gaps": v["gaps"], "largest_gap_us": _us(v["largest_gap_ns"]),
                 "kernels": v["kernels"]}
            if ti is not None:
                e["trace"] = ti
            out.append(e)
    return out


def gap_entries(a, top: int, ti: int | None = None) -> list[dict]:
    g = a.gaps
    out = []
    w0 = a.window_start_ns
    a.details.prefetch(np.arange(min(top, len(g))))
    for r in range(min(top, len(g))):
        if g.dur_ns[r] <= 0:
            break
        d = a.gap_detail(r)
        e = {
            "rank": a.rank,
            "device": int(g.device[r]),
            "start_us": _us(int(g.start_ns[r]) - w0),
            "dur_us": _us(g.dur_ns[r]),
            "cause": d.cause,
            "next_op": {"kernel": d.next_kernel, "launch": d.launch, "op": d.next_op},
            "cpu_stack": [f.name for f in d.stack],
            "stack_at_idle": [f.name for f in d.idle_stack],
            "launch_stack": [f.name for f in d.launch_stack],
            "cpu_breakdown": {k: _us(v) for k, v in d.breakdown.items()},
            "explanation": d.explanation,
            "explanation_segments": segments(d.explanation_text),
        }
        if ti is not None:
            e["trace"] = ti
        out.append(e)
    return out


def comparison_entry(cmp, top: int = 50, gm=None, b=None) -> dict:
    """The ``comparison`` section: A = traces[0] (before), B = traces[1] (after); per step, B - A. With B's
    analysis and ``match_gaps``' answer, also ``gaps``: B's listed gaps that are new."""
    def summary(s):
        return {"steps": s.steps, "source": s.source, "names": list(s.names),
                "idle_us_per_step": round(s.idle_us_per_step, 3), "gaps_per_step": round(s.gaps_per_step, 3),
                "kernels_per_step": round(s.kernels_per_step, 3),
                "kernel_us_per_step": round(s.kernel_us_per_step, 3),
                "gpu_span_us_per_step": round(s.gpu_span_us_per_step, 3),
                "idle_by_step_us": [round(x, 3) for x in s.idle_by_step_us],
                "kernels_by_step": list(s.kernels_by_step)}

    causes = []
    for d in cmp.causes:
        causes.append({"cause": d.cause,
                       "a": {"idle_us": _us(d.a_idle_ns), "count": d.a_count,
                             "idle_us_per_step": round(d.a_idle_us_per_step, 3),
                             "count_per_step": round(d.a_count_per_step, 3),
                             "by_step_us": [round(x, 3) for x in d.a_by_step_us]},
                       "b": {"idle_us": _us(d.b_idle_ns), "count": d.b_count,
                             "idle_us_per_step": round(d.b_idle_us_per_step, 3),
                             "count_per_step": round(d.b_count_per_step, 3),
                             "by_step_us": [round(x, 3) for x in d.b_by_step_us]},
                       "per_step_delta_us": round(d.per_step_delta_us, 3),
                       "count_delta_per_step": round(d.count_delta_per_step, 3)})
    kernels = []
    for d in cmp.kernels[:top]:
        kernels.append({"name": d.name, "shapes": d.shapes, "op": d.op, "status": d.status,
                        "a": {"count": d.a_count, "total_us": _us(d.a_ns), "us_per_step": round(d.a_us_per_step, 3),
                              "count_per_step": round(d.a_count_per_step, 3)},
                        "b": {"count": d.b_count, "total_us": _us(d.b_ns), "us_per_step": round(d.b_us_per_step, 3),
                              "count_per_step": round(d.b_count_per_step, 3)},
                        "per_step_delta_us": round(d.per_step_delta_us, 3),
                        "count_delta_per_step": round(d.count_delta_per_step, 3)})
    findings = [{"status": d.status, "cause": d.cause, "frame": d.frame, "kind": d.kind or None,
                 "title_a": d.title_a, "title_b": d.title_b,
                 "a_idle_us_per_step": round(d.a_idle_us_per_step, 3),
                 "b_idle_us_per_step": round(d.b_idle_us_per_step, 3),
                 "per_step_delta_us": round(d.per_step_delta_us, 3), "a_gaps": d.a_gaps, "b_gaps": d.b_gaps}
                for d in cmp.findings]
    al = None
    if cmp.alignment is not None:
        x = cmp.alignment
        al = {"step_a": cmp.steps_a.names[x.step_a], "step_b": cmp.steps_b.names[x.step_b],
              "a_kernels": x.a_kernels, "b_kernels": x.b_kernels, "matched": x.matched, "counts": x.counts(),
              "note": x.note,
              "hunks": [{"kind": h.kind, "a": [h.a0, h.a1], "b": [h.b0, h.b1], "a_kernels": h.a_names[:20],
                         "b_kernels": h.b_names[:20]} for h in x.hunks[:top]]}
    out = {"a": 0, "b": 1, "per": "step", "notes": list(cmp.notes), "unprofiled": unprofiled_entry(cmp.step),
           "steps": {"a": summary(cmp.a),
                                                                           "b": summary(cmp.b)},
           "idle_delta_us_per_step": round(cmp.idle_delta_us_per_step, 3), "causes": causes,
           "kernels": kernels, "findings": findings, "alignment": al}
    if gm is not None and b is not None:
        out["gaps"] = new_gaps_entry(b, cmp, gm, top)
    return out


def unprofiled_entry(sv) -> dict:
    """``comparison.unprofiled``: the before/after verdict in un-profiled step time (compare/steptime.py), per step;
    ``basis`` says whether a profiled step time stands in."""
    r = lambda x: None if x is None else round(float(x), 3)  # noqa: E731

    def side(s):
        return {"basis": s.basis, "source": s.source, "step_us": r(s.us), "p25_us": r(s.p25_us),
                "p75_us": r(s.p75_us), "min_us": r(s.min_us), "max_us": r(s.max_us), "n": s.n, "active": s.active,
                "distortion": r(s.distortion)}

    return {"basis": sv.basis, "stands_in": sv.stands_in, "missing": sv.missing, "a": side(sv.a), "b": side(sv.b),
            "delta_us": r(sv.delta_us), "delta_pct": r(sv.delta_pct), "verdict": sv.verdict, "overlap": sv.overlap,
            "distortion_differs": sv.distortion_differs, "same_run": sv.same_run, "warnings": list(sv.warnings), "notes": list(sv.notes),
            "headline": sv.headline()}


def new_gaps_entry(b, cmp, gm, top: int = 10) -> dict:
    """B's listed gaps against A's (``match_gaps``): how many are new, and the largest new ones."""
    from ..analysis import CAUSES

    g = b.gaps
    rows = gm.b_rows[gm.new]
    rows = rows[np.argsort(-g.dur_ns[rows], kind="stable")][:top]
    w0 = b.window_start_ns
    new = []
    for r in rows.tolist():
        nxt = int(g.next_idx[r])
        new.append({"start_us": _us(int(g.start_ns[r]) - w0), "dur_us": _us(g.dur_ns[r]),
                    "cause": CAUSES[int(g.cause[r])], "step": cmp.steps_b.names[int(cmp.steps_b.gap_step[r])],
                    "next_kernel": b.model.name(nxt) if nxt >= 0 else None})
    return {"b_listed": int(gm.b_rows.size), "new_in_b": int(gm.new.sum()), "matched": int((gm.a_rows >= 0).sum()),
            "new": new}
def projection_entry(a, device: int) -> dict | None:
    """``devices[].projection``: the replay of this device's chain (gapscope/analysis/replay/__init__.py), per step."""
    from ..analysis.replay import NO_HOST

    pj = a.projection
    for d in pj.devices:
        if d.device == device:
            return {"baseline_us": _us(d.per_step(d.baseline_ns)), "floor_us": _us(d.per_step(d.floor_ns)),
                    "graph_us": _us(d.per_step(d.graph_ns)), "calibrated": d.calibrated,
                    "residual_pct": round(d.residual_pct, 3), "steps": d.steps,
                    "recorded_us": _us(d.per_step(d.recorded_ns)),
                    "overhead_per_event_us": None if d.overhead_ns >= NO_HOST else round(d.overhead_ns / 1e3, 4), "headline": pj.headline(),
                    "notes": list(pj.notes)}
    return None


def saving_entry(a, f, tix=None) -> dict:
    """``findings[].saving_us`` (per step; null: not projected), ``saving_pct``, the fix replayed, for a sync
    finding whose frame is a check ``saving_whole_check_us`` (its ops removed too; else null), and ``unlocks``: the
    finding that needs this fix first (``Projection.unlocks``; else null)."""
    pj = a.projection
    s = pj.saving_ns.get(f.id)
    pct = pj.saving_pct(f.id)
    w = getattr(pj, "with_ops_ns", {}).get(f.id)
    # the finding whose fix needs this one first: the lead finding of the action it is a prerequisite of
    plan = a.plan
    dep = None
    for x in plan.actions:
        if any(f.id in n.findings for n in x.needs):
            dep = x.findings[0]
            break
    if dep is not None and tix is not None:
        dep = f"t{tix}:{dep}"
    return {"saving_us": None if s is None else _us(s), "saving_pct": None if pct is None else round(pct, 2),
            "fix": pj.what.get(f.id), "saving_whole_check_us": None if w is None else _us(w), "unlocks": dep}


def frame_whatif_entries(a, tix=None) -> list[dict]:
    """``frame_whatifs``: the frames that matter, each as one fused GPU call (replay/frames.py), per step, by
    projected saving, with the findings their figure is attached to."""
    pj = a.projection
    base = pj.baseline_ns
    out = []
    for w in pj.frames:
        e = {"frame": w.frame, "calls": w.calls, "host_us": _us(w.host_ns), "gpu_us": _us(w.gpu_ns),
             "gpu_items": w.gpu_items, "saving_us": _us(w.saving_ns),
             "saving_pct": round(100.0 * w.saving_ns / base, 2) if base > 0 else None,
             "findings": [fid for fid, fr in pj.frame_of.items() if fr == w.frame]}
        if tix is not None:
            e["trace"] = tix
            e["findings"] = [f"t{tix}:{x}" for x in e["findings"]]
        out.append(e)
    return out


def frame_entry(a, f, tix=None) -> dict | None:
    """``findings[].frame_whatif``: the fused what-if of the frame this finding's gaps lie under, or null."""
    pj = a.projection
    w = pj.frame_whatif(f.id)
    if w is None:
        return None
    base = pj.baseline_ns
    return {"frame": w.frame, "saving_us": _us(w.saving_ns),
            "saving_pct": round(100.0 * w.saving_ns / base, 2) if base > 0 else None,
            "ranked_with": pj.ranked_with(f.id) if tix is None else f"t{tix}:{pj.ranked_with(f.id)}"}


def build_json(analyses, top: int = 50) -> dict:
    """The JSON report of a trace set: its analyses, or their diagnosis (analysis/diagnosis.py)."""
    from ..analysis.diagnosis import diagnose

    diagnosis = diagnose(analyses)
    analyses = diagnosis.analyses
    multi = len(analyses) > 1
    doc = {"schema": SCHEMA, "traces": [], "devices": [], "gaps": [], "causes": {c: {"count": 0, "total_us": 0.0}
                                                                                  for c in CAUSES},
           "kernels": [], "syncs": [], "copies": [], "allocator": {}, "collectives": [], "findings": [],
           "streams": []}
    causes_ns = {c: 0 for c in CAUSES}
    for ti, a in enumerate(analyses):
        tix = ti if multi else None
        doc["traces"].append(trace_entry(a))
        verdicts = {(v.rank, v.device): v for v in getattr(a, "verdicts", [])}
        doc["traces"][-1]["causes"] = {c: {"count": v["count"], "total_us": _us(v["total_ns"])}
                                       for c, v in a.cause_totals().items()}
        for d in a.devices:
            e = {"rank": d.rank, "device": d.device, "name": d.name, "window_us": _us(d.window_ns),
                 "kernel_busy_us": _us(d.kernel_busy_ns), "copy_busy_us": _us(d.copy_busy_ns),
                 "compute_idle_us": _us(d.idle_ns), "compute_idle_pct": round(d.idle_pct, 3),
                 "stream_busy_us": {str(s): _us(v) for s, v in d.stream_busy_ns.items()},
                 "collective_wait_us": _us(d.collective_wait_ns), "collective_late_rank": d.collective_late_rank}
            v = verdicts.get((d.rank, d.device))
            if v is not None:
                e["verdict"] = {"kind": v.kind, "summary": v.summary(), "evidence": v.evidence()}
            pj = projection_entry(a, d.device)
            if pj is not None:
                e["projection"] = pj
            if multi:
                e["trace"] = ti
            doc["devices"].append(e)
        doc["streams"].extend(stream_entries(a, tix))
        doc["gaps"].extend(gap_entries(a, top, tix))
        for c, v in a.cause_totals().items():
            doc["causes"][c]["count"] += v["count"]
            causes_ns[c] += v["total_ns"]
        for k in a.kernels[:top]:
            e = {"name": k.name, "count": k.count, "total_us": _us(k.total_ns), "pct": round(k.pct, 3),
                 "avg_us": _us(k.avg_ns), "op": k.op, "shapes": k.shapes,
                 "floor_us": None if k.floor_ns is None else _us(k.floor_ns), "bound": k.bound,
                 "floor_total_us": None if k.floor_total_ns is None else _us(k.floor_total_ns),
                 "floored_calls": k.floored_count, "floored_total_us": _us(k.floored_total_ns),
                 "op_floor_calls": k.op_floor_calls, **achieved_entry(k)}
            if multi:
                e["trace"] = ti
            doc["kernels"].append(e)
        for o in getattr(a, "op_floors", [])[:top]:
            e = {"op": o.op, "kernels": o.kernels, "count": o.count, "total_us": _us(o.total_ns),
                 "avg_us": _us(o.avg_ns), "floor_us": _us(o.floor_ns), "floor_total_us": _us(o.floor_total_ns),
                 "bound": o.bound, "shapes": o.shapes, **achieved_entry(o)}
            if multi:
                e["trace"] = ti
            doc.setdefault("op_floors", []).append(e)
        gc = getattr(getattr(a, "call_floors", None), "graphs", None)
        if gc is not None:  # CUDA graph replays mapped to the eager reference run (analysis/graphs.py)
            e = gc.entry()
            if multi:
                e["trace"] = ti
            doc.setdefault("graphs", []).append(e)
        for s in a.syncs:
            e = {"name": s["name"], "count": s["count"], "total_us": _us(s["total_ns"]), "stacks": s["stacks"],
                 "chain": s.get("chain") or [s["name"]], "wait_us": _us(s.get("wait_ns", 0))}
            if multi:
                e["trace"] = ti
            doc["syncs"].append(e)
        for c in a.copies:
            e = {"kind": c["kind"], "count": c["count"], "bytes": c["bytes"], "total_us": _us(c["total_ns"]),
                 "gbps": None if c["gbps"] is None else round(c["gbps"], 3), "pageable": c["pageable"]}
            if multi:
                e["trace"] = ti
            doc["copies"].append(e)
        for name, v in a.allocator["calls"].items():
            cur = doc["allocator"].setdefault(name, {"count": 0, "total_us": 0.0})
            cur["count"] += v["count"]
            cur["total_us"] = round(cur["total_us"] + _us(v["total_ns"]), 3)
        if a.allocator.get("memory"):
            doc.setdefault("memory", []).append({"trace": ti, **a.allocator["memory"]})
        for c in a.collectives:
            e = {"name": c["name"], "count": c["count"], "total_us": _us(c["total_ns"]), "wait_us": _us(c["wait_ns"]),
                 "late_rank": c["late_rank"], "process_group": c.get("process_group"),
                 "exposed_us": None if c.get("exposed_ns") is None else _us(c["exposed_ns"])}
            if multi:
                e["trace"] = ti
            doc["collectives"].append(e)
        plan = a.plan
        doc.setdefault("actions", []).extend(action_entries(plan, tix))
        pe = plan_entry(plan, tix)
        if multi:
            doc.setdefault("plan", []).append(pe)
        else:
            doc["plan"] = pe
        for f in plan.ordered_findings(a.findings):
            e = {"id": f"t{ti}:{f.id}" if multi else f.id, "rank": plan.rank_of.get(f.id),
                 "severity": plan.severity_of.get(f.id, f.severity), "title": f.title,
                 "title_segments": segments(f.title_text), "idle_us": _us(f.idle_ns),
                 "evidence": _jsonable(f.evidence), "suggestion": f.suggestion,
                 "suggestion_segments": segments(f.suggestion_text),
                 "cause": f.cause, **saving_entry(a, f, ti if multi else None), "frame_whatif": frame_entry(a, f, ti if multi else None)}
            if multi:
                e["trace"] = ti
            doc["findings"].append(e)
        if a.launches.get("count"):
            doc.setdefault("launches", []).append({"trace": ti, **_jsonable(a.launches)})
        doc.setdefault("frame_whatifs", []).extend(frame_whatif_entries(a, tix))
    for c in CAUSES:
        doc["causes"][c]["total_us"] = _us(causes_ns[c])
    if multi:
        doc["gaps"].sort(key=lambda e: -e["dur_us"])
        doc["gaps"] = doc["gaps"][:top]
        # several traces have one plan each (``actions``, ``rank`` per trace): across them, findings by effect; on a
        # tie (the late rank's finding and the wait it caused) the late rank first
        doc["findings"].sort(key=lambda e: (-_effect_us(e), "late-rank-" not in e["id"]))
    if diagnosis.is_pair:
        doc["comparison"] = comparison_entry(diagnosis.comparison, top=top, gm=diagnosis.gap_match, b=analyses[1])
    rm = analyses[0].cross_rank
    if rm is not None:
        doc["collectives"] = [r.to_json() for r in rm.rows]
        doc["ranks"] = rm.to_json()
    return _jsonable(doc)
