"""Full analysis time next to load time, on the largest trace available. Run by hand:

    python benchmarks/bench_analysis.py [TRACE]

Without TRACE it takes the largest file in /tmp/gapscope-bench (made by benchmarks/gen_big.py; it is
generated at 100M when the folder is empty). Prints events, load time, analysis time (gaps, causes,
findings, then the report tables) and their ratio. Target: analysis <= 0.3x load.

    python benchmarks/bench_analysis.py --compare DIR [DIR...] [--rounds 5] [--trace TRACE]

``--compare``: before / after of the analysis alone, measured the way ``bench_open.py`` mode "analysis" does
(a fresh subprocess per measurement loads the trace from the cache, then times ``analyze(model)`` and the report
tables), for each checkout DIR (e.g. a ``git archive`` of an older commit, and ``.``), alternating the checkouts
for ``--rounds`` rounds so that both see the same machine load; prints wall and CPU (``time.process_time``) of
every run and the best of each. Default traces: /tmp/gapscope-bench/big_100M.json and big_1G.json.

Measured 2026-11-30 on the 2-core dev machine, 1 GB trace tiled from tracelens__b200_eager_trace
(gen_big.py --source ... --sizes 1G; 3.44M events, 106,876 gaps): load 29.6 s, analysis 2.47 s +
tables 0.19 s (ratio 0.09), Markdown + JSON 0.71 s.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gapscope.analysis import analyze  # noqa: E402
from gapscope.trace import load  # noqa: E402

BENCH_DIR = "/tmp/gapscope-bench"


def pick() -> str:
    if len(sys.argv) > 1:
        return sys.argv[1]
    files = [p for p in glob.glob(os.path.join(BENCH_DIR, "*.json*")) if not p.endswith(".tmp")]
    if not files:
        subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gen_big.py"), BENCH_DIR, "--sizes", "100M"],
                       check=True)
        files = glob.glob(os.path.join(BENCH_DIR, "*.json*"))
    return max(files, key=os.path.getsize)


_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
from gapscope.trace import load
from gapscope.analysis import analyze
m = load(sys.argv[2])
gc.collect()
t, c = time.perf_counter(), time.process_time()
a = analyze(m)
a.kernels, a.syncs, a.copies, a.allocator, a.collectives, a.launches
print(json.dumps({"s": time.perf_counter() - t, "cpu": time.process_time() - c, "gaps": len(a.gaps),
                  "findings": len(a.findings)}))
"""


def compare(repos: list[str], traces: list[str], rounds: int) -> None:
    repos = [os.path.abspath(r) for r in repos]
    traces = traces or [p for p in (os.path.join(BENCH_DIR, "big_100M.json"), os.path.join(BENCH_DIR, "big_1G.json"))
                        if os.path.exists(p)]
    for path in traces:
        subprocess.run([sys.executable, "-c", _CHILD, repos[0], path], check=True, capture_output=True)  # the cache
        best: dict[str, list] = {r: [] for r in repos}
        print(f"{path}")
        for k in range(rounds):
            for r in repos:
                out = subprocess.run([sys.executable, "-c", _CHILD, r, path], check=True, capture_output=True,
                                     text=True).stdout
                res = json.loads(out.strip().splitlines()[-1])
                best[r].append(res)
                print(f"  round {k + 1} {r}: wall {res['s']:.3f} s  cpu {res['cpu']:.3f} s  "
                      f"({res['gaps']} gaps, {res['findings']} findings)", flush=True)
        for r in repos:
            print(f"  best of {rounds} {r}: wall {min(x['s'] for x in best[r]):.3f} s  "
                  f"cpu {min(x['cpu'] for x in best[r]):.3f} s")


def main() -> None:
    if "--compare" in sys.argv:
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("--compare", nargs="+", required=True)
        ap.add_argument("--rounds", type=int, default=5)
        ap.add_argument("--trace", action="append", default=[])
        a = ap.parse_args()
        repos = [r for r in a.compare if os.path.isdir(r)]
        compare(repos, a.trace + [r for r in a.compare if not os.path.isdir(r)], a.rounds)
        return
    path = pick()
    t = time.perf_counter()
    try:
        m = load(path, no_cache=True)
    except TypeError:
        m = load(path)
    t_load = time.perf_counter() - t
    from gapscope.analysis.window import compute_window

    t = time.perf_counter()
    w = compute_window(m)
    t_window = time.perf_counter() - t
    t = time.perf_counter()
    a = analyze(m)
    t_core = time.perf_counter() - t
    t = time.perf_counter()
    a.kernels, a.syncs, a.copies, a.allocator, a.collectives, a.launches
    t_tables = time.perf_counter() - t
    t = time.perf_counter()
    from gapscope.report import build_json, render_markdown

    render_markdown([a])
    build_json([a])
    t_report = time.perf_counter() - t
    total = t_core + t_tables
    print(f"trace      {path} ({os.path.getsize(path) / 1e6:.0f} MB, {m.n:,} events, {len(a.gaps):,} gaps, "
          f"{len(a.listed_rows()):,} listed)")
    print(f"load       {t_load:8.3f} s")
    print(f"window     {t_window:8.3f} s  ({w.note() or 'whole trace, no gapscope.step ranges'})")
    print(f"analyze    {t_core:8.3f} s  (window, devices, gaps, causes, findings)")
    print(f"tables     {t_tables:8.3f} s  (kernels, syncs, copies, allocator, collectives, launches)")
    print(f"report     {t_report:8.3f} s  (Markdown + JSON)")
    print(f"ratio      {total / t_load:8.3f}  analysis / load (target <= 0.3)")


if __name__ == "__main__":
    main()
