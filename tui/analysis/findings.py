"""Group listed gaps into findings: same cause and same stack signature -> one finding, ranked by the
idle time it explains. Plus a few trace-level findings (short gaps, distortion, pageable copies)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .gaps import CAUSES
from .units import fmt_ns as _fmt

SUGGESTIONS = {
    "copy": "Use pinned host memory (tensor.pin_memory()) with .to(device, non_blocking=True), move the copy off "
            "the critical path (prefetch on a side stream), or keep the data on the GPU.",
    "collective": "Overlap the collective with compute (bucketing, async_op=True and wait later) and check for "
                  "a straggler rank (load every rank's trace to see which one arrives last).",
    "sync": "Remove the host synchronisation: avoid .item()/.cpu()/.tolist()/printing GPU values in the loop, "
            "keep the decision on the GPU (torch.where, sampling on device), or read the value one step later.",
    "profiler": "This idle time is the profiler's own overhead; profile a narrower window (schedule with "
                "warmup/active) or without with_stack to see the model's real behaviour.",
    "allocator": "Avoid torch.cuda.empty_cache() and per-step allocations of new sizes: preallocate buffers, "
                 "reuse tensors (out=), or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
    "python": "Move this Python work out of the step (precompute, cache, or vectorise it on the GPU), or hide it "
              "behind GPU work with CUDA graphs / torch.compile.",
    "launch": "The GPU finishes kernels faster than the CPU launches them: capture the step in a CUDA graph "
              "(torch.cuda.graphs, torch.compile(mode='reduce-overhead')), fuse small ops (torch.compile), or "
              "batch more work per kernel.",
    "host-idle": "The launching thread was not working: check for blocking I/O, sleeps, data loading on the "
                 "main thread, GIL contention with other threads, or code the profiler did not trace.",
}

TITLES = {
    "copy": "{n} gaps behind {what} copies{where} cost {t} of GPU idle",
    "collective": "{n} gaps behind collectives{where} cost {t} of GPU idle",
    "sync": "{n} syncs{where} cost {t} of GPU idle",
    "profiler": "{n} gaps inside profiler overhead: {t} of GPU idle",
    "allocator": "{n} gaps after allocator calls{where} cost {t} of GPU idle",
    "python": "{n} gaps while host work{where} held the CPU cost {t} of GPU idle",
    "launch": "launch-bound: {n} gaps while the CPU dispatched ops cost {t} of GPU idle",
    "host-idle": "{n} gaps while the launching thread was idle cost {t} of GPU idle",
}
#: causes whose findings are split by the frame a person would fix
BY_FRAME = {"sync", "python", "allocator", "collective"}




def _severity(share: float) -> str:
    if share >= 0.10:
        return "high"
    if share >= 0.03:
        return "medium"
    if share >= 0.005:
        return "low"
    return "info"


def build_findings(a) -> list:
    from .core import Finding

    g = a.gaps
    cfg = a.config
    window = sum(d.window_ns for d in a.devices) or 1
    rows = a.listed_rows()
    nd = cfg.max_detailed_gaps
    li = g.launch_idx
    queued = (li >= 0) & (a.model.ts_ns[np.where(li >= 0, li, 0)] < g.start_ns)
    # a group key per listed row: (cause,), or ("launch", None, "queued"), or for the detailed rows (the first
    # max_detailed_gaps) of a BY_FRAME cause (cause, frame), of a copy (cause, frame, copy kind). Plain keys are
    # codes 0..len(CAUSES)-1, the queued one len(CAUSES), the detailed ones the codes after it
    c = g.cause[rows].astype(np.int64)
    code = np.where((c == CAUSES.index("launch")) & queued[rows], len(CAUSES), c)
    keys: list[tuple] = [(cause,) for cause in CAUSES] + [("launch", None, "queued")]
    key_code: dict[tuple, int] = {}
    det = np.zeros(rows.size, bool)
    det[:nd] = True
    # the frame of every detailed gap of a BY_FRAME cause, taken at once (it is all the grouping needs of them)
    by_frame = np.flatnonzero(det & np.isin(c, [CAUSES.index(x) for x in sorted(BY_FRAME)]))
    copies = np.flatnonzero(det & (c == CAUSES.index("copy")))
    special = dict(zip(by_frame.tolist(), ((CAUSES[k], sig) for k, sig in
                                           zip(c[by_frame].tolist(), a.gap_signatures(rows[by_frame])))))
    for k in copies.tolist():
        d = a.gap_detail(int(rows[k]))
        cp = d.extra.get("copy") or {}
        special[k] = ("copy", d.signature, cp.get("kind"))
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
    out = []
    window_start = a.window_start_ns
    for key, rs_a in groups.items():
        cause = key[0]
        idle = int(g.dur_ns[rs_a].sum())
        sig = key[1] if len(key) > 1 else None
        what = key[2] if len(key) > 2 and key[2] else "memory"
        where = f" from `{sig}`" if sig else ""
        title = TITLES[cause].format(n=len(rs_a), t=_fmt(idle), where=where, what=what)
        suggestion = SUGGESTIONS[cause]
        if key == ("launch", None, "queued"):
            title = (f"{len(rs_a)} gaps where the next kernel was already queued (GPU-side latency) cost "
                     f"{_fmt(idle)} of GPU idle")
            suggestion = ("The CPU was ahead here: the GPU waited on its own dispatch between dependent kernels, a "
                          "CUDA graph's node scheduling, or a cross-stream event. Fuse small kernels (torch.compile) "
                          "and check stream dependencies (cudaStreamWaitEvent).")
        if len(rs_a) == 1:
            title = title.replace("1 gaps", "1 gap").replace("1 syncs", "1 sync")
        top = rs_a[:5]
        ev = {
            "cause": cause,
            "gaps": len(rs_a),
            "idle_us": idle / 1e3,
            "share_of_window_pct": 100.0 * idle / window,
            "largest_gap_us": float(g.dur_ns[rs_a].max()) / 1e3,
            "frame": sig,
            "examples": [],
        }
        for r in top.tolist():
            d = a.gap_detail(r)
            ex = {"row": int(r), "start_us": (int(g.start_ns[r]) - window_start) / 1e3,
                  "dur_us": int(g.dur_ns[r]) / 1e3, "next_kernel": d.next_kernel, "next_op": d.next_op,
                  "explanation": d.explanation}
            ev["examples"].append(ex)
        if cause == "launch":
            ls = a.launches
            if ls.get("count"):
                ev["launch_rate_per_ms"] = ls["rate_per_ms"]
                ev["launch_cost_median_us"] = ls["cost_median_ns"] / 1e3
                ev["kernels_shorter_than_launch"] = ls["kernels_shorter_than_launch"]
            ops = defaultdict(int)
            for r in top.tolist():
                for o in a.gap_detail(r).extra.get("issued_ops", []):
                    ops[o] += 1
            ev["issued_ops"] = sorted(ops, key=lambda k: -ops[k])[:8]
        out.append(Finding(id="", severity=_severity(idle / window), title=title, idle_ns=idle, evidence=ev,
                           suggestion=suggestion, gap_rows=rs_a, cause=cause))
    # gaps too short to list still add up
    short = np.flatnonzero(g.dur_ns < cfg.min_listed_gap_ns)
    graphed = any("GraphLaunch" in k for k in (a.launches.get("calls") or {}))
    if short.size:
        idle = int(g.dur_ns[short].sum())
        if idle / window >= 0.01:
            out.append(Finding(
                id="", severity=_severity(idle / window),
                title=f"{short.size} gaps shorter than {_fmt(cfg.min_listed_gap_ns)} add up to {_fmt(idle)} of GPU idle",
                idle_ns=idle,
                evidence={"gaps": int(short.size), "idle_us": idle / 1e3, "share_of_window_pct": 100.0 * idle / window,
                          "causes": {c: int(n) for c, n in zip(CAUSES, np.bincount(g.cause[short], minlength=len(CAUSES))) if n}},
                suggestion=("Many tiny kernels back to back: fuse them (torch.compile) or capture them in a CUDA graph "
                            "so the per-kernel dispatch gap disappears." if not graphed else
                            "Many tiny kernels back to back, already in a CUDA graph: what is left is the GPU's own "
                            "per-kernel dispatch; fuse kernels (torch.compile, fused ops) to remove it."),
                gap_rows=short, cause="launch"))
    out.sort(key=lambda f: (-f.idle_ns, f.title))
    for c in a.copies if a.devices else []:
        if c.get("pageable") and c["count"]:
            out.append(Finding(
                id="", severity="low", title=f"{c['count']} {c['kind']} copies ({c['bytes']} bytes) use pageable memory",
                idle_ns=0, evidence={k: v for k, v in c.items()},
                suggestion=SUGGESTIONS["copy"], gap_rows=np.zeros(0, np.int64), cause="copy"))
    if a.distortion and a.distortion["ratio"] > cfg.large_distortion:
        out.append(Finding(
            id="", severity="info", title=f"the profiler slowed this step {a.distortion['ratio']:.2f}x",
            idle_ns=0, evidence=dict(a.distortion),
            suggestion=SUGGESTIONS["profiler"], gap_rows=np.zeros(0, np.int64), cause="profiler"))
    counts: dict[str, int] = defaultdict(int)
    for f in out:
        base = f.cause or "finding"
        counts[base] += 1
        f.id = f"{base}-{counts[base]}"
    return out
