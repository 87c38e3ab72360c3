"""Make large trace files for the load benchmarks by tiling a real trace.

    python benchmarks/gen_big.py [OUT_DIR] [--source TRACE] [--sizes 100M,1G]

Each copy of the source's events is shifted in time past the previous copy and gets fresh
correlation, External id, Python id / parent id and flow ids, so links and trees stay as real as the
source's. Metadata (``M``) events are written once. Output goes to OUT_DIR (default
/tmp/gapscope-bench), never into the repository. Files are plain ``.json`` in Kineto's layout.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# one of our own H200 sample traces (stacks, shapes, eager decode); the shared corpus as a fallback
DEFAULT_SOURCE = os.path.join(_REPO, "traces", "demo-eager.decode.json.gz")
if not os.path.exists(DEFAULT_SOURCE):
    DEFAULT_SOURCE = os.path.join(_REPO, "..", "shared", "traces", "h200", "nccl_two_ranks.rank0.json.gz")
ID_KEYS = ("correlation", "External id", "Python id", "Python parent id", "Record function id")


def _size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1], 1)
    return int(float(s.rstrip("KMG")) * mult)


def _read(path: str) -> dict:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def generate(source: str, out_path: str, target_bytes: int) -> tuple[int, int]:
    doc = _read(source)
    events = doc["traceEvents"]
    meta_events = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    t0 = min(float(e["ts"]) for e in timed if "ts" in e)
    t1 = max(float(e["ts"]) + float(e.get("dur", 0) or 0) for e in timed if "ts" in e)
    span = (t1 - t0) + 1000.0  # copies 1 ms apart
    max_id = 1
    for e in timed:
        a = e.get("args") or {}
        for k in ID_KEYS:
            v = a.get(k)
            if isinstance(v, int):
                max_id = max(max_id, v)
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    id_step = max_id + 1
    header = {k: v for k, v in doc.items() if k != "traceEvents"}
    n_events = 0
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        f.write("{\n")
        for k, v in header.items():
            f.write(f"  {json.dumps(k)}: {json.dumps(v)},\n")
        f.write('  "traceEvents": [\n')
        first = True
        for e in meta_events:
            f.write(("" if first else ",\n") + "  " + json.dumps(e))
            first = False
            n_events += 1
        copy = 0
        while f.tell() < target_bytes:
            shift = copy * span
            off = copy * id_step
            for e in timed:
                e2 = dict(e)
                if "ts" in e2 and isinstance(e2["ts"], (int, float)):
                    e2["ts"] = round(float(e2["ts"]) + shift, 3) if isinstance(e2["ts"], float) else int(e2["ts"] + shift)
                if isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + off
                a = e2.get("args")
                if isinstance(a, dict):
                    a2 = dict(a)
                    for k in ID_KEYS:
                        v = a2.get(k)
                        if isinstance(v, int) and v >= 0:
                            a2[k] = v + off
                    e2["args"] = a2
                f.write(("" if first else ",\n") + "  " + json.dumps(e2))
                first = False
                n_events += 1
            copy += 1
        f.write('\n  ],\n  "traceName": "gapscope-bench"\n}\n')
    os.replace(tmp, out_path)
    return os.path.getsize(out_path), n_events


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="/tmp/gapscope-bench")
    ap.add_argument("--source", default=DEFAULT_SOURCE)
    ap.add_argument("--sizes", default="100M,1G")
    args = ap.parse_args(argv)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.abspath(args.out)
    if out == repo or out.startswith(repo + os.sep):
        print("gen_big: write benchmark traces outside the repository", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    for s in args.sizes.split(","):
        path = os.path.join(out, f"big_{s.strip()}.json")
        size, n = generate(args.source, path, _size(s))
        print(f"{path}: {size / 2**20:.0f} MiB, {n} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
