"""Group listed gaps into findings: same cause and same stack signature -> one finding, ranked by the idle
time it explains. Host round trips (GPU -> host -> GPU in one gap) are one finding per call site, whatever the
cause of their gaps. Plus a few trace-level findings (short gaps, distortion, pageable copies).

Titles, advice and group keys come from the cause registry (``causes/``)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..trace.model import Kind
from . import causes
from .gaps import CAUSES
from .stacks import signature_frame
from .types import Finding
from .thresholds import PAGEABLE_MIN_SHARE, SHORT_GAPS_MIN_SHARE, severity
from .units import fmt_bytes, fmt_ns as _fmt
from .intervals import isin

#: cause -> default advice / title template (read from the registry; kept for callers that index by name)
SUGGESTIONS = {c.name: c.suggestion for c in causes.all_causes()}
TITLES = {c.name: c.title for c in causes.all_causes()}
#: causes whose findings are split by the frame a person would fix
BY_FRAME = {c.name for c in causes.all_causes() if c.by_frame}

ROUND_TRIP_ADVICE = (
    "Each of these gaps copies a GPU result to the host, works on it there and sends the answer back before "
    "the GPU can go on: a data-dependent round trip that neither CUDA graphs nor pinned memory can hide. Keep the "
    "work on the GPU (e.g. sample with torch.argmax / torch.multinomial on the device and feed the token tensor "
    "straight back), or overlap it a step behind (use step k's result while step k+1 already runs).")


#: most severe first
SEVERITIES = ("high", "medium", "low", "info")


def _host_json(a, thr: int, host: dict | None) -> dict | None:
    """The structured host-time evidence of one example (see hosttime.py): every number recomputable."""
    if not host or thr < 0:
        return None
    m, w0 = a.model, a.window_start_ns
    t = m.tracks[thr]
    frames = [{"name": m.name(e), "self_us": ns / 1e3} for e, ns in host.get("frames", [])]
    out = {"pid": t.pid, "tid": t.tid, "from_us": (host["from_ns"] - w0) / 1e3, "to_us": (host["to_ns"] - w0) / 1e3,
           "frames": frames}
    if frames:
        out["credited"] = frames[0]
    return out


def round_trip_rows(a, rows: np.ndarray) -> dict[int, str | None]:
    """Listed gaps that are a host round trip: on the launching thread, a synchronising call open in the gap
    (a read of a GPU value: ``.cpu()``, ``.item()``, a blocking device-to-host copy), host work, then a
    host-to-device copy issued before the next launch (or no launch before the window's end). Row -> the
    call site (user frame of the synchronising call)."""
    m, g, cpu = a.model, a.gaps, a.cpu
    if rows.size == 0:
        return {}
    slack = a.config.sync_slack_ns
    thr = g.thread[rows]
    t0 = g.start_ns[rows]
    tl = g.t_launch_ns[rows]
    has = (thr >= 0) & (cpu.sync.covered(thr, t0 - slack, np.maximum(tl, t0 + 1)) > 0)
    cand = rows[has]
    if cand.size == 0:
        return {}
    # host-to-device copies and the time and thread of their launch calls
    cp = np.flatnonzero((m.kind == Kind.MEMCPY) & (m.launch >= 0))
    names = np.array(["HtoD" in n or "Host to Device" in n for n in m.names], dtype=bool)
    cp = cp[names[m.name_id[cp]]] if cp.size else cp
    h_thr = m.track[m.launch[cp]].astype(np.int64) if cp.size else np.zeros(0, np.int64)
    h_ts = m.ts_ns[m.launch[cp]] if cp.size else np.zeros(0, np.int64)
    out: dict[int, str | None] = {}
    has_copy_back: dict[int, bool] = {}
    for r in cand.tolist():
        th, a0, b0 = int(g.thread[r]), int(g.start_ns[r]), int(g.t_launch_ns[r])
        idx = a.evidence.thread_events(th, a0 - slack, max(b0, a0 + 1))
        idx = idx[cpu.sync_mask[idx]]
        if idx.size == 0:
            continue
        top = int(idx[np.lexsort((m.ts_ns[idx], m.depth[idx].astype(np.int64)))[0]])
        se = int(m.ts_ns[top] + m.dur_ns[top])
        back = bool(((h_thr == th) & (h_ts >= se) & (h_ts <= b0)).any())
        end_of_window = int(g.next_idx[r]) < 0
        if not back and not end_of_window:
            continue
        st = a.stacks.stack_at(th, int(m.ts_ns[top]) + max(int(m.dur_ns[top]) // 2, 0))
        sig = signature_frame(st)
        out[r] = sig.name if sig else None
        has_copy_back[r] = back
    # a site is a round trip only when at least one of its gaps shows the copy back
    sites = {s for r, s in out.items() if has_copy_back[r]}
    return {r: s for r, s in out.items() if s in sites}


def pattern_findings(a) -> list:
    """One finding per op pattern (patterns.py): kernel time per step, evidence, fix and what the fix saves of
    the kernel time (the replay turns that into step time)."""
    out = []
    k = a.call_floors.k
    total = int(a.model.dur_ns[k].sum()) or 1
    window = sum(d.window_ns for d in a.devices) or 1
    steps = a.step_count or 1
    for p in a.patterns:
        share = 100.0 * p.kernel_ns / total
        per = " per step" if a.step_count else ""
        title = (f"{p.title}: {_fmt(p.kernel_ns // steps)} of kernel time{per} ({share:.0f}% of all kernel "
                 f"time)")
        if p.kind == "tiny-kernel-loop":
            # its saving is its frame's fused what-if (replay.frames.attach), not a kernel-time estimate
            ev = {"pattern": p.kind, **p.evidence, "kernels": p.calls, "kernel_us": p.kernel_ns / 1e3,
                  "per_step_us": p.kernel_ns / 1e3 / steps, "share_of_kernel_pct": share, "steps": steps,
                  "measured_steps": a.step_count, "estimate": p.estimate}
            out.append(Finding(id="", severity=severity(p.kernel_ns / window), title=f"{p.title}: "
                               f"{_fmt(p.kernel_ns // steps)} of kernel time{per} in {p.calls // steps} kernels",
                               idle_ns=0, evidence=ev, suggestion=p.fix, cause="pattern"))
            continue
        ev = {"pattern": p.kind, "calls": p.calls, "kernel_us": p.kernel_ns / 1e3, "per_step_us": p.kernel_ns / 1e3 / steps,
              "share_of_kernel_pct": share, "steps": steps, "measured_steps": a.step_count, "after_us": p.after_ns / 1e3,
              "kernel_saving_us": p.saving_ns / 1e3, "kernel_saving_per_step_us": p.saving_ns / 1e3 / steps,
              "estimate": p.estimate, "ops": p.ops,
              "fix_replayed": f"{p.kind} fixed: its kernels cut from {_fmt(p.kernel_ns // steps)} to "
                              f"{_fmt(p.after_ns // steps)}{per} ({p.estimate})"}
        ev.update(p.evidence)  # the pattern's own keys (copies: weight_casts, weight_transposes, weight_recasts, ...)
        if p.fixes is not None:
            ev["fixes"] = [{"fix": x["fix"], "after_us": x["after_ns"] / 1e3,
                            "kernel_saving_us": max(p.kernel_ns - x["after_ns"], 0) / 1e3,
                            "kernel_saving_per_step_us": max(p.kernel_ns - x["after_ns"], 0) / 1e3 / steps,
                            "estimate": x["estimate"], "recommended": x["recommended"]} for x in p.fixes]
        if p.mask is not None:
            mk = p.mask
            ev["mask"] = {"shape": mk["shape"], "frames": mk["frames"], "host_calls": int(mk["removed"].size),
                          "host_us": mk["host_ns"] / 1e3, "host_per_step_us": mk["host_ns"] / 1e3 / steps,
                          "syncs": mk["syncs"], "gpu_launches": int(mk["kernels"].size),
                          "kernel_us": mk["kernel_ns"] / 1e3}
            ev["fix_replayed"] += f"; the additive mask's builders removed: {mk['what']}"
        out.append(Finding(id="", severity=severity(p.saving_ns / window), title=title, idle_ns=0, evidence=ev,
                           suggestion=p.fix, cause="pattern", kernels=p.kernels, kernel_after_ns=p.kernel_after_ns,
                           host_removed=p.host_removed))
    return out


def build_findings(a) -> list:
    """Stage 5 of the pipeline (core.py): the findings of an analysis whose gaps are classified, largest idle
    first, then the pageable copies, the op patterns and the profiler's distortion."""
    g = a.gaps
    cfg = a.config
    window = sum(d.window_ns for d in a.devices) or 1
    rows = a.listed_rows()
    nd = cfg.max_detailed_gaps
    c = g.cause[rows].astype(np.int64)
    code = c.copy()
    keys: list[tuple] = [(cause,) for cause in CAUSES]
    key_code: dict[tuple, int] = {}
    det = np.zeros(rows.size, bool)
    det[:nd] = True
    reg = causes.all_causes()
    # python, sync and collective frames are taken at once for every row (no frameless remainder that would look
    # like the finding above it: hf-mixtral.decode_eager's 62 small sync gaps past the detail cap read "62 syncs"
    # with no frame beside "416 ... from modeling_mixtral.py(69): forward", the same call site); other causes'
    # frames come from their (capped) details
    fast_codes = [causes.code(causes.PYTHON), causes.code(causes.COLLECTIVE), causes.code(causes.SYNC)]
    by_frame_codes = [i for i, cz in enumerate(reg) if cz.by_frame]
    grouped_codes = [i for i, cz in enumerate(reg) if cz.group is not None]
    sel = (det & isin(c, by_frame_codes)) | isin(c, fast_codes)
    sel &= ~isin(c, grouped_codes)
    by_frame = np.flatnonzero(sel)
    special: dict[int, tuple] = dict(zip(by_frame.tolist(), ((CAUSES[k], sig) for k, sig in
                                                             zip(c[by_frame].tolist(), a.details.signatures(rows[by_frame])))))
    for k in np.flatnonzero(det & isin(c, grouped_codes)).tolist():
        d = a.gap_detail(int(rows[k]))
        cz = reg[int(c[k])]
        special[k] = (d.cause, d.signature if cz.by_frame else None, cz.group(a, d))
    # host round trips: one finding per call site, whatever the cause of each gap
    rt = round_trip_rows(a, rows[det])
    for r, site in rt.items():  # (the listed rows are sorted: a row's position is its insertion point)
        special[int(np.searchsorted(rows, r))] = ("sync", site, "round-trip")
    # the other gaps of a round trip's call site (the launches inside it before the copy to the host) join it
    sites = {site for site in rt.values() if site}
    for k, key in list(special.items()):
        if len(key) == 2 and key[1] in sites:
            special[k] = ("sync", key[1], "round-trip")
    for k in sorted(special):
        key = special[k]
        kc = key_code.get(key)
        if kc is None:
            kc = key_code[key] = len(keys)
            keys.append(key)
        code[k] = kc
    # groups in the order of their first row, rows in order within each
    o = np.argsort(code, kind="stable")
    cs = code[o]
    starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]]) if cs.size else np.zeros(0, np.int64)
    bounds = np.r_[starts, cs.size]
    firsts = o[starts]
    groups: dict[tuple, np.ndarray] = {}
    for j in np.argsort(firsts, kind="stable").tolist():
        groups[keys[int(cs[starts[j]])]] = rows[o[bounds[j]:bounds[j + 1]]]
    a.details.prefetch(np.concatenate([rs[:5] for rs in groups.values()]) if groups else np.zeros(0, np.int64))
    out = []
    window_start = a.window_start_ns
    steps = a.step_count
    graphed = any("GraphLaunch" in k for k in (a.launches.get("calls") or {}))
    for key, rs_a in groups.items():
        cause = key[0]
        cz = causes.get(cause)
        idle = int(g.dur_ns[rs_a].sum())
        sig = key[1] if len(key) > 1 else None
        part = key[2] if len(key) > 2 else None
        where = f" from `{sig}`" if sig else ""
        title = cz.title.format(n=len(rs_a), t=_fmt(idle), where=where, what=part or "memory")
        top = rs_a[:5]
        details = [a.gap_detail(r) for r in top.tolist()]
        ev = {
            "cause": cause,
            "gaps": len(rs_a),
            "idle_us": idle / 1e3,
            "share_of_window_pct": 100.0 * idle / window,
            "largest_gap_us": float(g.dur_ns[rs_a].max()) / 1e3,
            "frame": sig,
            # the causes of this finding's gaps (a round trip spans sync and python gaps): count, idle µs
            "gap_causes": {CAUSES[k]: [int(n), float(t) / 1e3] for k, (n, t) in enumerate(zip(
                np.bincount(g.cause[rs_a], minlength=len(CAUSES)).tolist(),
                np.bincount(g.cause[rs_a], weights=g.dur_ns[rs_a], minlength=len(CAUSES)).tolist())) if n},
            "examples": [],
        }
        if part == "round-trip":
            cause = CAUSES[int(np.bincount(g.cause[rs_a], weights=g.dur_ns[rs_a]).argmax())]
            ev["cause"] = cause
            n_steps = steps or 1
            title = (f"host round trip{where}: GPU → host → GPU {len(rs_a)} times"
                     + (f" ({len(rs_a) / n_steps:g} per step)" if steps else "")
                     + f" cost {_fmt(idle)} of GPU idle" + (f", {_fmt(idle // n_steps)} per step" if steps else ""))
            ev["pattern"] = "round-trip"
            if steps:
                ev["steps"] = steps
                ev["per_step_us"] = idle / 1e3 / steps
        elif cz.group is not None and part:
            ev["kind"] = part
        if len(rs_a) == 1:
            title = title.replace("1 gaps after syncs", "1 gap after a sync").replace("1 gaps", "1 gap").replace(
                "1 times", "1 time")
        for r, d in zip(top.tolist(), details):
            ex = {"row": int(r), "start_us": (int(g.start_ns[r]) - window_start) / 1e3,
                  "dur_us": int(g.dur_ns[r]) / 1e3, "next_kernel": d.next_kernel, "next_op": d.next_op,
                  "cause": d.cause, "explanation": d.explanation}
            host = d.extra.get("host")
            if host is None and d.extra.get("meanwhile"):
                mw = d.extra["meanwhile"]
                host = {"from_ns": int(g.end_ns[r]) - mw["of_ns"], "to_ns": int(g.end_ns[r]),
                        "frames": [(mw["event"], mw["ns"])]}
            hj = _host_json(a, d.thread_track, host)
            if hj:
                ex["host"] = hj
            hb = d.extra.get("held_by")
            if hb and d.thread_track >= 0:
                # the one call, op or range holding the gap (causes/stall.py), on the launching thread
                t = a.model.tracks[d.thread_track]
                to = int(g.end_ns[r]) if hb["launch_call"] else int(g.t_launch_ns[r])
                ex["held_by"] = {"name": hb["name"], "kind": hb["kind"], "self_us": hb["ns"] / 1e3,
                                 "of_us": hb["of_ns"] / 1e3, "launch_call": hb["launch_call"], "pid": t.pid,
                                 "tid": t.tid, "from_us": (int(g.start_ns[r]) - window_start) / 1e3,
                                 "to_us": (to - window_start) / 1e3}
            ev["examples"].append(ex)
        if cause == causes.LAUNCH:
            ls = a.launches
            if ls.get("count"):
                ev["launch_rate_per_ms"] = ls["rate_per_ms"]
                ev["launch_cost_median_us"] = ls["cost_median_ns"] / 1e3
                ev["kernels_shorter_than_launch"] = ls["kernels_shorter_than_launch"]
            # over all the finding's gaps, not only the detailed examples (hf-llama.decode: the 5 largest of 1226
            # gaps named sdpa first; aten::mul leads over all of them)
            ops = a.evidence.ops_in_counts(g.thread[rs_a], g.start_ns[rs_a], g.t_launch_ns[rs_a])
            ev["issued_ops"] = sorted(ops, key=lambda k: -ops[k])[:8]
            ev["data_dependent_host"] = bool(a.syncs)
            ev["graphed"] = graphed
        if cz.evidence is not None and part != "round-trip":
            ev.update(cz.evidence(a, rs_a, ev))
        suggestion = ROUND_TRIP_ADVICE if part == "round-trip" else cz.advice(a, details, ev)
        out.append(Finding(id="", severity=severity(idle / window), title=title, idle_ns=idle, evidence=ev,
                           suggestion=suggestion, gap_rows=rs_a, cause=cause))
    # gaps too short to list still add up
    short = np.flatnonzero(g.dur_ns < cfg.min_listed_gap_ns)
    if short.size:
        idle = int(g.dur_ns[short].sum())
        if idle / window >= SHORT_GAPS_MIN_SHARE:
            out.append(Finding(
                id="", severity=severity(idle / window),
                title=f"{short.size} gaps shorter than {_fmt(cfg.min_listed_gap_ns)} add up to {_fmt(idle)} of GPU idle",
                idle_ns=idle,
                evidence={"gaps": int(short.size), "idle_us": idle / 1e3, "share_of_window_pct": 100.0 * idle / window,
                          "causes": {c: int(n) for c, n in zip(CAUSES, np.bincount(g.cause[short], minlength=len(CAUSES))) if n}},
                suggestion=("Many tiny kernels back to back: fuse them (torch.compile) or capture them in a CUDA graph "
                            "so the per-kernel dispatch gap disappears." if not graphed else
                            "Many tiny kernels back to back, already in a CUDA graph: what is left is the GPU's own "
                            "per-kernel dispatch; fuse kernels (torch.compile, fused ops) to remove it."),
                gap_rows=short, cause=causes.LAUNCH))
    out.sort(key=lambda f: (-f.idle_ns, f.title))
    for cp in a.copies if a.devices else []:
        if cp.get("pageable") and cp["count"] and cp["total_ns"] >= PAGEABLE_MIN_SHARE * window:
            out.append(Finding(
                id="", severity="low",
                title=(f"{cp['count']} {cp['kind']} cop{'y' if cp['count'] == 1 else 'ies'} ({fmt_bytes(cp['bytes'])}, "
                       f"{_fmt(cp['total_ns'])}) use{'s' if cp['count'] == 1 else ''} pageable memory"),
                idle_ns=0, evidence={k: v for k, v in cp.items()},
                suggestion=("Copy from pinned host memory (tensor.pin_memory(), once) with non_blocking=True: pageable "
                            "copies are staged through a pinned buffer by the driver and block the host."),
                gap_rows=np.zeros(0, np.int64), cause=causes.COPY))
    out += pattern_findings(a)
    if a.distortion and a.distortion["ratio"] > cfg.large_distortion:
        out.append(Finding(
            id="", severity="info", title=f"the profiler slowed this step {a.distortion['ratio']:.2f}x",
            idle_ns=0, evidence=dict(a.distortion),
            suggestion=causes.get(causes.PROFILER).suggestion, gap_rows=np.zeros(0, np.int64), cause=causes.PROFILER))
    counts: dict[str, int] = defaultdict(int)
    for f in out:
        base = f.cause or "finding"
        counts[base] += 1
        f.id = f"{base}-{counts[base]}"
    return out
