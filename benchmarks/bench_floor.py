"""What the load and the analysis cannot go below on this machine, next to the bare parse (issue 27). Run by hand:

    python benchmarks/bench_floor.py [TRACE] [--rounds N]

Every cell is a fresh process, each round runs them all in turn; the best of the rounds is kept. Cells:

- **parse**: read (+ gunzip) the file and one ``orjson.loads`` of it (``bench_report.py``'s floor);
- **decode**: the event array cut into the loader's pieces (``reader.CHUNK``, at event boundaries), then only
  ``decode_typed.decode_events`` of each piece timed: msgspec's typed records and their args ids, no column;
- **columns**: the same pieces through ``ColumnBuilder.add_bytes`` (decode, staging, commit: what the two load
  processes do between them), then ``finish`` timed apart (sort, nesting, links: what the parent does alone);
- **load**: ``load_uncached`` as ``gapscope`` calls it (two processes on a big plain trace);
- **analysis**: on the model from the cache, ``analyze(model, parallel=True)`` as the report calls it, timed to
  its gap table (``on_classified``: the explorer's gap list), to its findings, and to the JSON report
  (projection included).

Derived (best case, each a lower bound of what a load built this way can do): the load if its two processes
shared the columns' work perfectly and nothing else cost anything (columns / 2 + finish); the gap list and the
report on top of that (+ the analysis to its gap table; + the whole analysis). Python's start and the imports
are left out of every cell (the report pays ~0.1 s of them, numpy's ~60 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = "/tmp/gapscope-bench/big_100M.json"

_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[4])
mode, trace, out = sys.argv[1], sys.argv[2], sys.argv[3]
res = {}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":  # a gzip trace: its JSON (the gunzip is part of every figure, as in the loader)
        import gzip
        data = gzip.decompress(data)
    return data


if mode == "parse":
    import orjson
    gc.disable()
    t0 = time.perf_counter()
    data = read(trace)
    orjson.loads(data)
    res["s"] = time.perf_counter() - t0
elif mode in ("decode", "columns"):
    from gapscope.trace import decode_typed
    from gapscope.trace.build import ColumnBuilder
    from gapscope.trace.reader import CHUNK
    from gapscope.trace.repair import _BOUNDARY
    gc.disable()
    data = read(trace)
    if b'"traceEvents"' not in data[:1 << 20]:
        raise SystemExit("the floors need a trace object whose traceEvents key is in its first MiB")
    a = data.index(b"{", data.index(b"[", data.index(b'"traceEvents"')))
    b = data.rindex(b"}", 0, data.rindex(b"]")) + 1
    pieces, pos = [], a
    while pos < b:
        m = _BOUNDARY.search(data, pos + CHUNK, b) if pos + CHUNK < b else None
        end, nxt = (m.start() + 1, m.end() - 1) if m is not None else (b, b)
        pieces.append(b"[" + data[pos:end] + b"]")
        pos = nxt
    del data
    bl = ColumnBuilder(trace)
    t0 = time.perf_counter()
    if mode == "decode":
        n = 0
        for p in pieces:
            d = decode_typed.decode_events(p)
            if d is None:
                raise SystemExit("a piece the typed records do not fit: no typed figure for this trace")
            n += len(d.evs)
            del d
        res["s"] = time.perf_counter() - t0
        res["events"] = n
    else:
        for p in pieces:
            bl.add_bytes(p)
        res["s"] = time.perf_counter() - t0
        del pieces
        t1 = time.perf_counter()
        bl.finish({})
        res["finish_s"] = time.perf_counter() - t1
elif mode == "load":
    from gapscope.trace.read import load_uncached
    t0 = time.perf_counter()
    load_uncached(trace)
    res["s"] = time.perf_counter() - t0
elif mode == "analysis":
    from gapscope.analysis import analyze
    from gapscope.report import to_json_text
    from gapscope.trace import load
    import gapscope.analysis.replay, gapscope.analysis.patterns  # noqa: F401  (imports: not timed)
    model = load(trace)  # the cache (written by the first round's load cell, or before)
    gc.collect()
    t0 = time.perf_counter()
    got = {}
    a = analyze(model, parallel=True, on_classified=lambda _a: got.setdefault("gaps", time.perf_counter()))
    res["gaps_s"] = got["gaps"] - t0
    res["findings_s"] = time.perf_counter() - t0
    to_json_text([a], top=50)
    res["s"] = time.perf_counter() - t0
with open(out, "w") as f:
    json.dump(res, f)
"""

CELLS = ("parse", "decode", "columns", "load", "analysis")


def run_cell(mode: str, trace: str) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        subprocess.run([sys.executable, "-c", _CHILD, mode, trace, out.name, ROOT], check=True, cwd=ROOT)
        return json.load(open(out.name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", nargs="?", default=DEFAULT)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    # the analysis cells read the columnar cache: write it first (not timed)
    subprocess.run([sys.executable, "-m", "gapscope", "info", a.trace], check=True, cwd=ROOT, capture_output=True)
    best: dict[str, dict] = {}
    for r in range(a.rounds):
        for mode in CELLS:
            got = run_cell(mode, a.trace)
            print(f"round {r + 1} {mode:9s} " + "  ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                          for k, v in got.items()), flush=True)
            cur = best.get(mode)
            if cur is None or got["s"] < cur["s"]:
                best[mode] = got
    p = best["parse"]["s"]
    col, fin = best["columns"]["s"], best["columns"]["finish_s"]
    an = best["analysis"]
    load_floor = col / 2 + fin
    rows = [
        ("parse (read + orjson.loads)", p),
        (f"typed decode only ({best['decode']['events']:,} events)", best["decode"]["s"]),
        ("columns: decode + staging + commit, one process", col),
        ("finish (sort, nesting, links), one process", fin),
        ("load as gapscope does it (two processes from 64 MB of JSON)", best["load"]["s"]),
        ("analysis to its gap table (the gap list)", an["gaps_s"]),
        ("analysis to its findings", an["findings_s"]),
        ("analysis + projection + JSON report", an["s"]),
        ("floor: the load, columns split perfectly in two + finish", load_floor),
        ("floor: the gap list (load floor + analysis to the gap table)", load_floor + an["gaps_s"]),
        ("floor: the report (load floor + analysis + JSON)", load_floor + an["s"]),
        ("the load as it is + analysis + JSON", best["load"]["s"] + an["s"]),
    ]
    print(f"\n{os.path.basename(a.trace)}, best of {a.rounds} rounds\n")
    print("| figure | s | / parse |")
    print("|---|---:|---:|")
    for name, s in rows:
        print(f"| {name} | {s:.3f} | {s / p:.2f}x |")


if __name__ == "__main__":
    main()
