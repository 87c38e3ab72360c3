"""Projected vs measured saving per pair (bad variant, fixed twin): issue #14's check of the replay model.

For each pair the bad variant's trace is analysed, the finding whose cause the variant injects (or, for
eager vs graph, the launch-bound finding) gives the projected relative saving (``saving_us`` / replayed
step), and the measured relative saving is 1 - fixed / bad of the un-profiled step times.

Measured times come from ``--measured FILE``, a JSON ``{"variant": {"min_us": .., "median_us": .., "n": ..}}``
(``--stat min|median`` picks which). A variant is looked up by its trace name (``demo-eager-sync.decode``)
or by the short key ``benchmarks/whatif_pairs.py`` writes (``sync.decode``, ``eager.decode``,
``graph.decode``); where that file gives a ``saving_pct`` paired by round against the twin, its median
(p25..p75) is the measured saving, else 1 - fixed / bad of the chosen statistic. Without ``--measured``,
each trace's own metadata is used (``gapscope.unprofiled_us``, the median of its capture's repeats; those
of traces/ were not interleaved and come from different sessions, so read that table as a smoke test).

    python3 benchmarks/whatif.py                      # the pairs in traces/, metadata times
    python3 benchmarks/whatif.py --measured m.json --traces DIR
    python3 benchmarks/whatif.py --measured benchmarks/whatif_isolate.json \
        --traces traces --traces benchmarks/whatif_traces
    python3 benchmarks/whatif.py --measured benchmarks/whatif_steady_after.json \
        --traces benchmarks/whatif_steady    # the traces with the profiler warm-up step: all 15 pairs ok

A sync finding whose frame is a check (replay.py: ``with_ops_ns``) is compared with its clean twin through the
whole check's projection (the read and the ops computing its value: what the clean twin removes), marked
"(whole check)", and with its isolating twin through the read's alone.
Rows whose fixed twin is an isolating variant (``sync-noitem``, ``alloc-keep``: the bad variant less exactly
what the finding's fix removes) are shown when the measured table has that variant; their measured saving is
whatif_pairs.py's ``saving_pct_fix_only``.

``--pairs real`` (or ``all``, the default) adds the real clients of traces/ (``REAL_PAIRS``: benchmarks/hf_clients.py,
one ``capture run`` per pair), measured from their own metadata (1 - fixed / bad of the un-profiled medians, the
same at the p25s and p75s as the spread), projected by the frame's what-if as one fused GPU call (Mixtral's eager
experts), the round trip removed whole (host sampling), or "not covered" where no finding projects the fix.

A pair passes when the projection is within ±35% (relative) or ±5 points of the measured saving, and
no finding projects more than 2x its fix's measured saving.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gapscope.analysis import analyze  # noqa: E402
from gapscope.trace import load  # noqa: E402

#: (bad variant, fixed twin, the cause of the finding whose fix the twin is, the frame it names or None)
PAIRS = [
    ("demo-eager-sync.decode", "demo-eager.decode", "sync", "_inject_sync_check"),
    ("demo-eager-alloc.decode", "demo-eager.decode", "allocator", "_inject_allocator_churn"),
    ("demo-eager-python.decode", "demo-eager.decode", "python", "_host_bookkeeping"),
    ("demo-eager-copy.decode", "demo-eager.decode", "copy", "_inject_pageable_copy"),
    ("demo-eager-sampling.decode", "demo-eager.decode", "python", "_inject_host_sampling"),
    ("demo-eager.decode", "demo-graph.decode", "launch", None),
    ("demo-eager.prefill", "demo-graph.prefill", "launch", None),
    # prefill twins, when their traces exist (benchmarks/whatif_pairs.py times them)
    ("demo-eager-sync.prefill", "demo-eager.prefill", "sync", "_inject_sync_check"),
    ("demo-eager-alloc.prefill", "demo-eager.prefill", "allocator", "_inject_allocator_churn"),
    ("demo-eager-python.prefill", "demo-eager.prefill", "python", "_host_bookkeeping"),
    ("demo-eager-copy.prefill", "demo-eager.prefill", "copy", "_inject_pageable_copy"),
    # isolating twins (capture/demo.py's sync-noitem, alloc-keep): the bad variant less exactly what the finding's
    # fix removes (the .item(); the allocator calls), shown when the measured table has them
    ("demo-eager-sync.decode", "demo-eager-sync-noitem.decode", "sync", "_inject_sync_check"),
    ("demo-eager-sync.prefill", "demo-eager-sync-noitem.prefill", "sync", "_inject_sync_check"),
    ("demo-eager-alloc.decode", "demo-eager-alloc-keep.decode", "allocator", "_inject_allocator_churn"),
    ("demo-eager-alloc.prefill", "demo-eager-alloc-keep.prefill", "allocator", "_inject_allocator_churn"),
]
#: fixed twins that are isolating variants: their rows need the measured table's entry
ISOLATING = ("-sync-noitem.", "-alloc-keep.")
#: real clients (benchmarks/hf_clients.py, one ``capture run`` per pair: both phases timed un-profiled in the same
#: interleaved rounds): (bad, fixed, what the fix is, the frame or finding kind that names it). The projected
#: saving is: ``frame``, the frame's what-if as one fused GPU call (replay/frames.py); ``round-trip``, the round
#: trip finding of that frame; ``pattern``, a finding whose evidence ``pattern`` is that name (none on main yet
#: for eager attention: the row says "not covered"); ``none``, no finding projects that fix (GPU-side changes)
REAL_PAIRS = [
    ("hf-mixtral.decode_eager", "hf-mixtral.decode_batched", "frame", "modeling_mixtral.py(69): forward"),
    ("hf-sampling.decode_host", "hf-sampling.decode_gpu", "round-trip", "hf_clients.py(162): pick"),
    ("hf-attn.prefill_eager", "hf-attn.prefill_sdpa", "pattern", "eager-attention"),
    ("hf-mlp.prefill_i5633", "hf-mlp.prefill_i5632", "pattern", "unaligned-matmul"),
    ("resnet50.fp32", "resnet50.bf16_cl", "pattern", "fp32-matmul"),
]


def _finding(a, cause, frame):
    pj = a.projection
    for f in a.findings:
        if f.cause != cause or pj.saving_ns.get(f.id) is None:
            continue
        if frame and frame not in str((f.evidence or {}).get("frame") or ""):
            continue
        return f
    return None


def _key(name: str) -> str:
    """``demo-eager-sync.decode`` -> ``sync.decode``; ``demo-eager.decode`` -> ``eager.decode``."""
    n = name[5:] if name.startswith("demo-") else name
    return n[6:] if n.startswith("eager-") else n


def _entry(table: dict, name: str):
    v = table.get(name)
    if not isinstance(v, dict):
        v = table.get(_key(name))
    return v if isinstance(v, dict) else None


def _paired(table: dict, bad: str, fixed: str):
    """whatif_pairs.py's round-paired saving of this pair (median, p25, p75), if it has one."""
    for who, vs in ((bad, fixed), (fixed, bad)):
        e = _entry(table, who)
        for field in ("saving_pct", "saving_pct_fix_only"):
            sp = e.get(field) if e else None
            if isinstance(sp, dict) and sp.get("vs") in (vs, _key(vs)) and isinstance(sp.get("median"), (int, float)):
                return float(sp["median"]), sp.get("p25"), sp.get("p75")
    return None


def _measured(name, path: Path, table: dict | None, stat: str):
    if table is not None:
        v = _entry(table, name)
        if not isinstance(v, dict):
            return None, 0
        x = v.get(f"{stat}_us", v.get("median_us"))
        return (float(x) if isinstance(x, (int, float)) else None), int(v.get("n") or 0)
    m = load(str(path), no_cache=True)
    g = m.gapscope_meta or {}
    x = g.get("unprofiled_us")
    smp = g.get("unprofiled_samples_us")
    n = len(smp) if isinstance(smp, list) else int((g.get("options") or {}).get("repeats") or 0)
    return (float(x) if isinstance(x, (int, float)) else None), n


def _unprofiled(path: Path) -> dict | None:
    """A trace's un-profiled quantiles (metadata ``gapscope.unprofiled``), us."""
    u = (load(str(path), no_cache=True).gapscope_meta or {}).get("unprofiled")
    ok = isinstance(u, dict) and all(isinstance(u.get(k), (int, float)) for k in ("p25_us", "median_us", "p75_us"))
    return u if ok else None


def _real_projection(a, how: str, what: str | None):
    """(finding or frame named, projected %) of a real pair's fix, or (None, None) when nothing projects it."""
    pj = a.projection
    base = pj.baseline_ns
    if base <= 0:
        return None, None
    if how == "frame":
        w = next((w for w in pj.frames if what and what in w.frame), None)
        return (w.frame, 100.0 * w.saving_ns / base) if w else (None, None)
    for f in a.plan.ordered_findings(a.findings):  # the report's order
        ev = f.evidence or {}
        if how == "round-trip" and ev.get("pattern") == "round-trip" and what and what in str(ev.get("frame") or ""):
            return f.id, pj.saving_pct(f.id)
        if how == "pattern" and (ev.get("pattern") == what or ev.get("kind") == what) and \
                pj.saving_ns.get(f.id) is not None:
            return f.id, pj.saving_pct(f.id)
    return None, None


def real_rows(tdirs, fmt, want_json_rows: list):
    """The real-client pairs whose two traces are in the folders: projected against measured (the two traces'
    un-profiled medians; the spread is the saving at their p25s and at their p75s)."""
    def tpath(name):
        for d in reversed(tdirs):
            if (d / f"{name}.json.gz").exists():
                return d / f"{name}.json.gz"
        return None

    for bad, fixed, how, what in REAL_PAIRS:
        pb, pf = tpath(bad), tpath(fixed)
        if pb is None or pf is None:
            continue
        ub, uf = _unprofiled(pb), _unprofiled(pf)
        a = analyze(load(str(pb), no_cache=True))
        who, proj = _real_projection(a, how, what)
        meas = spread = None
        if ub and uf:
            meas = 100.0 * (1 - uf["median_us"] / ub["median_us"])
            spread = (100.0 * (1 - uf["p25_us"] / ub["p25_us"]), 100.0 * (1 - uf["p75_us"] / ub["p75_us"]))
        verdict = _verdict(proj, meas) if proj is not None else "not covered"
        row = {"bad": bad, "fixed": fixed, "finding": who, "figure": how, "projected_pct": proj,
               "measured_pct": meas, "measured_p25_p75_pct": list(spread) if spread else None,
               "bad_ms": ub and ub["median_us"] / 1e3, "fixed_ms": uf and uf["median_us"] / 1e3,
               "n": [int((ub or {}).get("n") or 0), int((uf or {}).get("n") or 0)],
               "calibrated": a.projection.calibrated, "verdict": verdict, "real": True}
        want_json_rows.append(row)
        sp = f" ({spread[0]:.1f}–{spread[1]:.1f})" if spread else ""
        label = {"frame": " (as one fused call)", "round-trip": " (whole round trip)"}.get(how, "")
        print(f"| {bad} | {fixed} | {(who or '–').replace('|', '/')}{label if who else ''} | {fmt(proj)} | "
              f"{fmt(meas)}{sp} | {(row['bad_ms'] or 0):.2f} / {(row['fixed_ms'] or 0):.2f} ({row['n'][0]}, "
              f"{row['n'][1]}) | {'yes' if a.projection.calibrated else 'no'} | {verdict} |")


def _verdict(proj, meas) -> str:
    if proj is None or meas is None:
        return "n/a"
    ok = abs(proj - meas) <= 5 or (meas > 0 and abs(proj - meas) <= 0.35 * meas)
    over = meas > 0 and proj > 2 * meas
    return "ok" if ok and not over else ("over 2x" if over else "miss")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", action="append", help="a folder of traces (default traces/); given again, a trace "
                    "in a later folder replaces the same name in an earlier one")
    ap.add_argument("--measured", help="JSON of measured un-profiled step times per variant")
    ap.add_argument("--stat", choices=("min", "median"), default="median")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON too")
    ap.add_argument("--pairs", choices=("all", "demo", "real"), default="all",
                    help="the demo's injected pairs, the real clients' (their own metadata times), or both")
    args = ap.parse_args(argv)
    table = None
    if args.measured:
        try:
            table = json.loads(Path(args.measured).read_text())
        except (OSError, ValueError) as e:
            print(f"whatif: error: {args.measured}: {e}", file=sys.stderr)
            return 2
    tdirs = [Path(t) for t in (args.traces or [Path(__file__).resolve().parent.parent / "traces"])]

    def tpath(name: str) -> Path:
        for d in reversed(tdirs):
            if (d / f"{name}.json.gz").exists():
                return d / f"{name}.json.gz"
        return tdirs[0] / f"{name}.json.gz"

    rows = []
    seen: dict = {}
    fmt = (lambda x: "–" if x is None else f"{x:.1f}%")
    print("| bad variant | fixed twin | finding | projected saving | measured saving | bad / fixed (ms, n) | "
          "calibrated | verdict |")
    print("|---|---|---|---:|---:|---:|---|---|")
    for bad, fixed, cause, frame in (PAIRS if args.pairs != "real" else []):
        pb, pf = tpath(bad), tpath(fixed)
        if not pb.exists() or (table is None and not pf.exists()):  # the twin's trace is needed only for its time
            continue
        if any(k in fixed for k in ISOLATING) and (table is None or _entry(table, fixed) is None):
            continue
        a = seen.get(pb)
        if a is None:
            a = seen[pb] = analyze(load(str(pb), no_cache=True))
        f = _finding(a, cause, frame)
        mb, nb = _measured(bad, pb, table, args.stat)
        mf, nf = _measured(fixed, pf, table, args.stat)
        proj = a.projection.saving_pct(f.id) if f else None
        # a sync finding's whole check (its ops too) is what the clean twin removes; the isolating twin keeps them
        wo = a.projection.with_ops_ns.get(f.id) if f and not any(k in fixed for k in ISOLATING) else None
        if wo is not None and a.projection.baseline_ns > 0:
            proj = 100.0 * wo / a.projection.baseline_ns
        meas = 100.0 * (1 - mf / mb) if mb and mf else None
        paired = _paired(table, bad, fixed) if table is not None else None
        spread = ""
        if paired is not None:
            meas = paired[0]
            if isinstance(paired[1], (int, float)) and isinstance(paired[2], (int, float)):
                spread = f" ({paired[1]:.1f}–{paired[2]:.1f})"
        verdict = _verdict(proj, meas)
        row = {"bad": bad, "fixed": fixed, "finding": f.id if f else None, "projected_pct": proj,
               "figure": "whole check" if wo is not None else "fix",
               "measured_pct": meas, "bad_ms": mb and mb / 1e3, "fixed_ms": mf and mf / 1e3, "n": [nb, nf],
               "calibrated": a.projection.calibrated, "verdict": verdict}
        rows.append(row)
        print(f"| {bad} | {fixed} | {row['finding'] or '–'}{' (whole check)' if wo is not None else ''} | "
              f"{fmt(proj)} | {fmt(meas)}{spread} | "
              f"{(mb or 0) / 1e3:.2f} / {(mf or 0) / 1e3:.2f} ({nb}, {nf}) | "
              f"{'yes' if a.projection.calibrated else 'no'} | {verdict} |")
    if args.pairs != "demo":
        real_rows(tdirs, fmt, rows)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
