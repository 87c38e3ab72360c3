"""What a cold report costs next to the bare parse of the same trace (issue 27). Run by hand:

    python benchmarks/bench_report.py [TRACE...] [--repo DIR ...] [--rounds N] [--no-md] [--cells parse,info,...]

For each TRACE (default: /tmp/gapscope-bench/big_100M.json, made by benchmarks/gen_big.py) and each checkout DIR
(default: this one; give ``--repo OLD_CHECKOUT --repo .`` for a before / after), every cell runs in a fresh
process, the checkouts alternating inside each round so that they see the same machine load:

- **parse**: read (+ gunzip) the file and one ``orjson.loads`` of it, nothing else (the floor any loader has)
- **info**: ``gapscope info --no-cache TRACE`` (the load alone)
- **report --json**: ``gapscope report --json --no-cache TRACE`` (load, analysis, projection, JSON)
- **report**: ``gapscope report --no-cache TRACE`` (the same, Markdown; ``--no-md`` leaves it out)
- **analysis**: in one process, the model from the columnar cache (untimed), then ``analyze`` (with
  ``parallel=True``, as the report command asks, where the checkout has it) and the JSON report (the projection
  included): what the report adds to the load, wall and CPU (``process_time``: less sensitive to a loaded
  machine)

CPU is the cell's own (``process_time``) and, apart, its children's (``RUSAGE_CHILDREN``: the loader's forked
worker, the analysis' forked children; for the analysis cell only those of the timed part), which
``process_time`` does not count.

Each cell's clock starts on the first line of the child (the interpreter's own start is the same for all and not
counted) and stops when the command returns, output sent to /dev/null; its peak RSS is the child's ``ru_maxrss``
plus that of the loader's forked worker where there is one (``RUSAGE_CHILDREN``; the worker's count includes the
pages it shares with its parent, so the sum over-counts). Prints every run, then per cell the best and the median
of the rounds, and the ratios to the parse of the same round set (best to best, median to median).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = "/tmp/gapscope-bench/big_100M.json"

_CHILD = r"""
import time
t0 = time.perf_counter()
import gc, json, os, resource, sys
mode, trace, out = sys.argv[1], sys.argv[2], sys.argv[3]
rc = 0
if mode == "parse":
    import orjson
    gc.disable()
    if trace.endswith(".gz"):
        import gzip
        with gzip.open(trace, "rb") as f:
            data = f.read()
    else:
        with open(trace, "rb") as f:
            data = f.read()
    doc = orjson.loads(data)
    n = len(doc.get("traceEvents") or []) if isinstance(doc, dict) else len(doc)
    nbytes = len(data)
elif mode == "analysis":
    sys.path.insert(0, os.getcwd())
    from gapscope.analysis import analyze
    from gapscope.report import to_json_text
    from gapscope.trace import load
    import gapscope.analysis.replay, gapscope.analysis.patterns  # noqa: F401  (imports: not timed)
    import inspect
    model = load(trace)  # from the columnar cache (the first cell of the run wrote it)
    # as the report command asks for it: on two cores where the checkout has that (forked children)
    kw = {"parallel": True} if "parallel" in inspect.signature(analyze).parameters else {}
    gc.collect()
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    kid0 = ch.ru_utime + ch.ru_stime
    t0, c0 = time.perf_counter(), time.process_time()
    to_json_text([analyze(model, **kw)], top=50)
    cpu = time.process_time() - c0
    n = nbytes = None
else:
    import runpy
    sys.path.insert(0, os.getcwd())
    sys.argv = ["gapscope"] + {"info": ["info", "--no-cache"], "json": ["report", "--json", "--no-cache"],
                               "md": ["report", "--no-cache"]}[mode] + [trace]
    try:
        runpy.run_module("gapscope", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    n = nbytes = None
s = time.perf_counter() - t0
cpu = cpu if mode == "analysis" else time.process_time()
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
kids = ch.ru_utime + ch.ru_stime - (kid0 if mode == "analysis" else 0.0)
kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(out, "w") as f:
    json.dump({"s": s, "cpu": cpu, "kids_cpu": kids, "rss_kb": kb, "rc": rc, "events": n, "json_bytes": nbytes}, f)
"""

CELLS = [("parse", "parse"), ("info", "info"), ("json", "report --json"), ("md", "report"),
         ("analysis", "analysis")]


def run_cell(repo: str, mode: str, trace: str) -> dict:
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        subprocess.run([sys.executable, "-c", _CHILD, mode, trace, out], cwd=repo, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            res = json.load(f)
    finally:
        os.unlink(out)
    if res["rc"]:
        raise SystemExit(f"{mode} on {trace} in {repo}: exit status {res['rc']}")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="*", default=[DEFAULT])
    ap.add_argument("--repo", action="append", default=[], help="a checkout to run (repeatable; default: this one)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-md", action="store_true", help="leave the Markdown report out")
    ap.add_argument("--cells", default="parse,info,json,md,analysis",
                    help="which cells, comma-separated (default: all; parse is always run: the ratios need it)")
    a = ap.parse_args()
    repos = [os.path.abspath(r) for r in (a.repo or [ROOT])]
    want = set(a.cells.split(",")) | {"parse"}
    cells = [c for c in CELLS if c[0] in want and not (a.no_md and c[0] == "md")]
    for trace in a.traces:
        size = os.path.getsize(trace)  # the JSON's size once parsed (a .gz file: uncompressed)
        for r in repos:  # the first run of a checkout compiles its modules and writes the cache: not timed
            subprocess.run([sys.executable, "-m", "gapscope", "info", trace], cwd=r, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        got: dict = {}
        events = None
        print(f"{trace}", flush=True)
        for k in range(a.rounds):
            for mode, label in cells:
                for r in repos if mode != "parse" else repos[:1]:
                    res = run_cell(r, mode, trace)
                    events = res["events"] or events
                    size = res["json_bytes"] or size
                    got.setdefault((mode, r), []).append(res)
                    print(f"  round {k + 1} {label:14s} {os.path.basename(r) or r:12s} {res['s']:7.3f} s  "
                          f"cpu {res['cpu']:7.3f} s  children {res.get('kids_cpu', 0.0):6.3f} s  "
                          f"{res['rss_kb'] / 1024:7.0f} MB", flush=True)
        base = got[("parse", repos[0])]
        pb = min(x["s"] for x in base)
        pm = statistics.median(x["s"] for x in base)
        print(f"\n{trace}: {size / 1e6:.0f} MB of JSON, {events:,} events, best / median of {a.rounds}")
        print("| cell | checkout | best s | median s | best / parse | median / parse | best CPU s | its children's "
              "CPU s | peak RSS / JSON |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for mode, label in cells:
            for r in repos if mode != "parse" else repos[:1]:
                xs = got[(mode, r)]
                b, md = min(x["s"] for x in xs), statistics.median(x["s"] for x in xs)
                rss = min(x["rss_kb"] for x in xs) * 1024 / size
                who = "–" if mode == "parse" else r
                cpu = min(x["cpu"] for x in xs)
                kids = min(x.get("kids_cpu", 0.0) for x in xs)
                print(f"| {label} | {who} | {b:.3f} | {md:.3f} | {b / pb:.2f}x | {md / pm:.2f}x | {cpu:.3f} | "
                      f"{kids:.3f} | {rss:.2f} |")
        print(flush=True)


if __name__ == "__main__":
    main()
