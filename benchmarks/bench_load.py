"""Load benchmarks, run by hand (not part of the test suite).

    python benchmarks/bench_load.py [TRACE...]   (default: /tmp/gapscope-bench/big_*.json from gen_big.py)

For each trace, every measurement runs in a fresh subprocess and reports wall time and peak RSS
(ru_maxrss of the child):
  floor  read + gunzip + one bare orjson.loads of the whole document, GC paused
  cold   tui.trace.load(path, no_cache=True); its RSS is the process's plus its worker's (RUSAGE_CHILDREN: a forked
         child's ru_maxrss also counts the pages it shares with the parent, so the sum over-counts)
  warm   tui.trace.load(path) with a cache entry already written (a first load is run before)
Ratios: cold/floor time, and peak RSS / uncompressed JSON size.
Pass --profile to print a cProfile summary of one cold load of the first trace.

    python benchmarks/bench_load.py --cpu [--repo DIR]... [--rounds N] [--one] [TRACE]

The load's CPU in both processes, checkouts interleaved (the order reversed every other round): each run is a
fresh process that imports the tree, then times ``read.load_uncached(TRACE)``: wall, ``process_time`` (this process)
and the reaped worker's ``RUSAGE_CHILDREN`` (user + system), and the peak RSS of both. ``--one``: one process
(GAPSCOPE_LOAD_PARALLEL=0). Best and median per checkout. Default trace: /tmp/gapscope-bench/big_100M.json.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import gc, gzip, json, os, resource, sys, time, zlib
sys.path.insert(0, {repo!r})
mode, path = sys.argv[1], sys.argv[2]
import orjson
import numpy
from gapscope.trace import load  # imports are not part of either measurement
t = time.perf_counter()
if mode == "floor":
    gc.disable()
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    size = len(raw)
    doc = orjson.loads(raw)
    n = len(doc["traceEvents"] if isinstance(doc, dict) else doc)
else:
    m = load(path, no_cache=(mode == "cold"))
    n = m.n
    size = 0
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the loader's worker, if one ran
print(json.dumps({{"mode": mode, "s": dt, "rss": rss, "rss_children": kids, "n": n, "size": size}}))
"""


def _run(mode: str, path: str, env: dict, repeat: int = 3) -> dict:
    """The fastest of ``repeat`` fresh-process runs (the machine is shared: take the least disturbed)."""
    code = _CHILD.format(repo=REPO)
    best = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", code, mode, path], capture_output=True, text=True, env=env,
                             check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        if best is None or r["s"] < best["s"]:
            best = r
    return best


_CPU_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {repo!r})
import gapscope
assert gapscope.__file__.startswith({repo!r}), gapscope.__file__
from gapscope.trace import read
w, c = time.perf_counter(), time.process_time()
m = read.load_uncached(sys.argv[1])
w, c = time.perf_counter() - w, time.process_time() - c
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"wall": w, "main": c, "worker": ch.ru_utime + ch.ru_stime, "rss": rss,
                  "rss_children": ch.ru_maxrss * 1024, "n": m.n}}))
"""


def _cpu(argv: list[str]) -> int:
    import argparse
    import statistics

    ap = argparse.ArgumentParser(prog="bench_load.py --cpu")
    ap.add_argument("trace", nargs="?", default="/tmp/gapscope-bench/big_100M.json")
    ap.add_argument("--repo", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--one", action="store_true", help="one process (GAPSCOPE_LOAD_PARALLEL=0)")
    a = ap.parse_args(argv)
    repos = [os.path.abspath(r) for r in (a.repo or [REPO])]
    env = dict(os.environ)
    if a.one:
        env["GAPSCOPE_LOAD_PARALLEL"] = "0"
    size = _json_size(a.trace)
    runs: dict = {r: [] for r in repos}
    for i in range(a.rounds):
        for r in (repos if i % 2 == 0 else repos[::-1]):
            out = subprocess.run([sys.executable, "-c", _CPU_CHILD.format(repo=r), a.trace], capture_output=True,
                                 text=True, env=env, check=True)
            runs[r].append(json.loads(out.stdout.strip().splitlines()[-1]))
            x = runs[r][-1]
            print(f"round {i + 1} {r}: wall {x['wall']:.3f} s, CPU {x['main'] + x['worker']:.3f} s "
                  f"({x['main']:.3f} + worker {x['worker']:.3f})", file=sys.stderr)
    print(f"| checkout | CPU s best | CPU s median | main CPU s (best) | worker CPU s (best) | wall s best | "
          f"wall s median | peak RSS / JSON (self+worker) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in repos:
        xs = runs[r]
        tot = [x["main"] + x["worker"] for x in xs]
        b = min(xs, key=lambda x: x["main"] + x["worker"])
        rss = max((x["rss"] + x["rss_children"]) / size for x in xs)
        print(f"| {r} | {min(tot):.3f} | {statistics.median(tot):.3f} | {b['main']:.3f} | {b['worker']:.3f} | "
              f"{min(x['wall'] for x in xs):.3f} | {statistics.median(x['wall'] for x in xs):.3f} | {rss:.2f} |")
    return 0


def _json_size(path: str) -> int:
    with open(path, "rb") as f:
        head = f.read(2)
    if head != b"\x1f\x8b":
        return os.path.getsize(path)
    import gzip

    n = 0
    with gzip.open(path, "rb") as f:
        while True:
            b = f.read(1 << 24)
            if not b:
                return n
            n += len(b)


def main(argv: list[str]) -> int:
    if "--cpu" in argv:
        return _cpu([x for x in argv if x != "--cpu"])
    profile = "--profile" in argv
    paths = [a for a in argv if a != "--profile"] or sorted(glob.glob("/tmp/gapscope-bench/big_*.json*"))
    if not paths:
        print("no traces: run benchmarks/gen_big.py first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gapscope-bench-cache-") as cdir:
        env = dict(os.environ, GAPSCOPE_CACHE_DIR=cdir)
        rows = []
        for p in paths:
            size = _json_size(p)
            floor = _run("floor", p, env)
            cold = _run("cold", p, env)
            _run("warm", p, env, repeat=1)  # writes the cache entry
            warm = _run("warm", p, env)
            rows.append((p, size, cold["n"], floor, cold, warm))
        hdr = ("trace", "JSON MB", "events", "floor s", "cold s", "warm s", "cold/floor", "floor RSS/JSON",
               "cold RSS/JSON (self+worker)", "warm RSS MB")
        table = [hdr]
        for p, size, n, fl, co, wa in rows:
            table.append((os.path.basename(p), f"{size / 1e6:.0f}", f"{n:,}", f"{fl['s']:.2f}", f"{co['s']:.2f}",
                          f"{wa['s']:.3f}", f"{co['s'] / fl['s']:.2f}x", f"{fl['rss'] / size:.2f}",
                          f"{(co['rss'] + co['rss_children']) / size:.2f} ({co['rss'] / size:.2f}+"
                          f"{co['rss_children'] / size:.2f})", f"{wa['rss'] / 1e6:.0f}"))
        widths = [max(len(r[i]) for r in table) for i in range(len(hdr))]
        for i, r in enumerate(table):
            print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
            if i == 0:
                print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        if profile:
            prof = os.path.join(cdir, "load.prof")
            code = (f"import sys; sys.path.insert(0, {REPO!r}); import cProfile, pstats; from tui.trace import load\n"
                    f"cProfile.run({f'load({paths[0]!r}, no_cache=True)'!r}, {prof!r})\n"
                    f"pstats.Stats({prof!r}).sort_stats('tottime').print_stats(20)")
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
