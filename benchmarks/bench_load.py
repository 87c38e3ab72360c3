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
from gapscope.tui.trace import load  # imports are not part of either measurement
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
