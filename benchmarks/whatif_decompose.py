"""Where a what-if pair's measured saving goes: the injected frame's parts, from the bad trace and from the H200.

    python3 benchmarks/whatif_decompose.py [--measured benchmarks/whatif_isolate.json] [--traces DIR ...]

For each pair that missed issue #14's target (sync, alloc, sampling), per step, in microseconds:

* **trace** (the bad variant's raw events, json/gzip, inside its ``gapscope.step#k`` window): the injected
  frame's recorded (profiled) time, its host events, and the GPU time of the kernels and copies launched from
  it (runtime calls in the frame, matched to GPU work by ``args.correlation``);
* **replay** (gapscope/analysis/replay/__init__.py, calibrated to the trace's un-profiled time): what the finding's fix saves
  (the projection), what removing the frame's whole host time saves, and that with its GPU work dropped too
  (each launched item's duration set to 0);
* **measured** (whatif_pairs.py's table): the saving against the clean twin, against the isolating twin
  (``sync-noitem``: the check's ops without ``.item()``; ``alloc-keep``: the fresh buffer and fill without
  ``empty_cache()``), what the isolating twin itself costs, the injected function's own un-profiled wall
  time (``--frame-times``) and the rest of that step against the clean step (what the injection costs
  outside its frame).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gapscope.analysis import analyze  # noqa: E402
from gapscope.analysis.replay.fixes import _frame_intervals, _within, fix_for  # noqa: E402
from gapscope.analysis.replay.model import Replay  # noqa: E402
from gapscope.trace import load  # noqa: E402

#: (bad trace, cause, frame, measured key, isolating twin's key or None, clean twin's key)
CASES = [
    ("demo-eager-sync.decode", "sync", "_inject_sync_check", "sync.decode", "sync-noitem.decode", "eager.decode"),
    ("demo-eager-sync.prefill", "sync", "_inject_sync_check", "sync.prefill", "sync-noitem.prefill", "eager.prefill"),
    ("demo-eager-alloc.decode", "allocator", "_inject_allocator_churn", "alloc.decode", "alloc-keep.decode",
     "eager.decode"),
    ("demo-eager-alloc.prefill", "allocator", "_inject_allocator_churn", "alloc.prefill", "alloc-keep.prefill",
     "eager.prefill"),
    ("demo-eager-sampling.decode", "python", "_inject_host_sampling", "sampling.decode", None, "eager.decode"),
]


def raw_frame(path: Path, frame: str) -> dict:
    """The injected frame from the raw events: per step, its time, host events and its GPU work."""
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("gapscope.step#")),
                   key=lambda e: e["ts"])
    w0, w1 = steps[0]["ts"], max(e["ts"] + e["dur"] for e in steps)
    n = len(steps)
    frames = sorted(((e["ts"], e["ts"] + e["dur"], e["pid"], e["tid"]) for e in ev
                     if e.get("cat") == "python_function" and e["name"].endswith(frame) and w0 <= e["ts"] <= w1))
    starts = [f[0] for f in frames]

    def inside(e):
        import bisect

        i = bisect.bisect_right(starts, e["ts"]) - 1
        while i >= 0 and frames[i][1] >= e["ts"]:
            s, t, pid, tid = frames[i]
            if e["pid"] == pid and e["tid"] == tid and s <= e["ts"] < t:
                return True
            i -= 1
        return False

    host = {"cpu_op", "python_function", "cuda_runtime", "cuda_driver", "user_annotation"}
    in_ev = [e for e in ev if e.get("cat") in host and inside(e)]
    corr = {(e.get("args") or {}).get("correlation") for e in in_ev if e["cat"] in ("cuda_runtime", "cuda_driver")}
    corr.discard(None)
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and (e.get("args") or {}).get("correlation") in corr]
    return {"frame_us": sum(t - s for s, t, _, _ in frames) / n, "calls": len(frames) / n,
            "events": (len(in_ev) - len(frames)) / n, "gpu_us": sum(e["dur"] for e in gpu) / n,
            "gpu_items": len(gpu) / n, "steps": n}


def replay_parts(path: Path, cause: str, frame: str) -> dict:
    a = analyze(load(str(path), no_cache=True))
    m, p = a.model, a.projection
    f = next(f for f in a.findings if f.cause == cause and frame in str((f.evidence or {}).get("frame") or ""))
    r = Replay(m, a.window, a.flags)
    c, steps, base = p.devices[0].overhead_ns, p.steps, p.baseline_ns
    fname = next(nm for nm in m.names if nm.endswith(frame))
    fr = _frame_intervals(m, fname)
    L = m.launch[r.items]
    from_frame = np.zeros(r.items.size, bool)
    from_frame[L >= 0] = _within(m, L[L >= 0], fr)

    def saving(iv, dur=None):
        end = r.run(r.removal(*iv), c, dur)
        return (base - max(r.span(end).values()) / steps) / 1e3

    _, iv, _, _ = fix_for(a, r, f)
    dur0 = r.dur.copy()
    dur0[from_frame] = 0
    removed = float(sum((e - s).sum() for s, e in ((iv[0], iv[1]),))) / steps / 1e3
    return {"finding": f.id, "base_us": base / 1e3, "c_ns": c, "fix_removes_us": removed,
            "fix_us": saving(iv), "frame_host_us": saving(fr), "frame_all_us": saving(fr, dur0)}


def measured_parts(t: dict, key: str, iso: str | None, clean: str) -> dict:
    b, cl = t[key], t[clean]
    out = {"bad_us": b["median_us"], "clean_us": cl["median_us"],
           "total_pct": b["saving_pct"]["median"], "total_us": b["median_us"] - cl["median_us"]}
    if iso and iso in t:
        out["fix_only_pct"] = b["saving_pct_fix_only"]["median"]
        out["fix_only_us"] = b["median_us"] - t[iso]["median_us"]
        out["iso_us"] = t[iso]["median_us"] - cl["median_us"]
    fr = b.get("frame_us")
    if fr:
        out["frame_unprof_us"] = fr["frame"]["median"]
        out["rest_us"] = fr["step"]["median"] - fr["frame"]["median"] - cl["median_us"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--measured", default=str(ROOT / "benchmarks" / "whatif_isolate.json"))
    ap.add_argument("--traces", action="append", help="trace folders, a later one replacing the same name")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    tdirs = [Path(d) for d in (args.traces or [ROOT / "traces"])]
    table = json.loads(Path(args.measured).read_text())
    rows = []
    for bad, cause, frame, key, iso, clean in CASES:
        path = next((d / f"{bad}.json.gz" for d in reversed(tdirs) if (d / f"{bad}.json.gz").exists()), None)
        if path is None or key not in table:
            continue
        rows.append({"bad": bad, **raw_frame(path, frame), **replay_parts(path, cause, frame),
                     **measured_parts(table, key, iso, clean)})
    f0 = (lambda x: "–" if x is None else f"{x:.0f}")
    print("Trace (profiled, per step) and replay (calibrated), µs:\n")
    print("| bad variant | frame recorded | host events in it | its GPU work (items) | calibrated c (ns/event) | "
          "replayed step | fix removes (recorded) | projected fix | + frame's other host time | + its GPU work |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        pct = (lambda x: f"{x:.0f} ({100 * x / r['base_us']:.1f}%)")
        print(f"| {r['bad']} | {f0(r['frame_us'])} | {f0(r['events'])} | {f0(r['gpu_us'])} ({f0(r['gpu_items'])}) | "
              f"{r['c_ns']:.0f} | {f0(r['base_us'])} | {f0(r['fix_removes_us'])} | {pct(r['fix_us'])} | "
              f"{pct(r['frame_host_us'])} | {pct(r['frame_all_us'])} |")
    print("\nMeasured un-profiled (median per step), µs:\n")
    print("| bad variant | bad / clean step | saving vs clean | vs isolating twin (the fix alone) | "
          "isolating twin's extra cost | injected function's own wall time | rest of its step vs clean |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        fo = (f"{r['fix_only_us']:.0f} ({r['fix_only_pct']:.1f}%)" if "fix_only_us" in r else "–")
        print(f"| {r['bad']} | {f0(r['bad_us'])} / {f0(r['clean_us'])} | {r['total_us']:.0f} ({r['total_pct']:.1f}%) | "
              f"{fo} | {f0(r.get('iso_us'))} | {f0(r.get('frame_unprof_us'))} | {f0(r.get('rest_us'))} |")
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
