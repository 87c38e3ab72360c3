"""Independent check of the cross-rank claims on a pair of rank traces, from the raw JSON only (no tui import).

    python3 benchmarks/raw_late_rank.py traces/demo-eager-tp-late1.decode.rank0.json.gz \
        traces/demo-eager-tp-late1.decode.rank1.json.gz [FRAME_SUBSTRING]

Prints, per rank: the NCCL kernels launched inside the ``gapscope.step#k`` ranges (launch matched to kernel by
correlation id), each rank's wait per collective (last rank's start minus its start, clipped to its kernel,
on the common clock of ``baseTimeNanoseconds``), and for a frame named on the command line its own time
(duration minus the union of the events strictly inside it on the same thread) in the intervals between
consecutive in-step collective launches of that thread (the first launch has no interval). The numbers in
tests/test_analysis_ranks.py were read from this script's output. Traces without NCCL kernels (gloo): the calls
are the c10d:: ops on the main thread (arrival at their start); it prints the first call's arrival gap and the
first events' gap (start-up skew), and the named frame's durations on rank 1.
"""

import gzip
import json
import sys
from collections import defaultdict


def load(p):
    with (gzip.open(p) if p.endswith(".gz") else open(p, "rb")) as f:
        return json.load(f)


def union_len(iv):
    tot, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return tot + ((cur_e - cur_s) if cur_e is not None else 0.0)


def rank_data(d, frame):
    ev = [e for e in d["traceEvents"] if e.get("ph") == "X"]
    base_us = (d.get("baseTimeNanoseconds") or 0) / 1e3
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("cat") == "user_annotation" and e["name"].startswith("gapscope.step#"))
    launch = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ks = []
    for e in ev:
        if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel"):
            L = launch.get(e["args"].get("correlation"))
            if L and any(a <= L["ts"] < b for a, b in steps):
                ks.append((e["ts"] + base_us, e["dur"], L["ts"], L["tid"]))
    ks.sort()
    out = {"kernels": ks, "own": []}
    if frame:
        tid = ks[0][3]
        th = [e for e in ev if e["tid"] == tid and e["dur"] > 0 and e.get("cat") in
              ("python_function", "cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")]
        fr = [e for e in th if e.get("cat") == "python_function" and frame in e["name"]]
        issues = [k[2] for k in ks]
        for a, b in zip(issues[:-1], issues[1:]):
            own = 0.0
            for f in fr:
                if a <= f["ts"] and f["ts"] + f["dur"] <= b:
                    inner = [(max(e["ts"], f["ts"]), min(e["ts"] + e["dur"], f["ts"] + f["dur"])) for e in th
                             if e is not f and f["ts"] <= e["ts"] < f["ts"] + f["dur"]
                             and (e["ts"], -e["dur"]) > (f["ts"], -f["dur"])]
                    own += f["dur"] - union_len(inner)
            out["own"].append(own)
    return out


def cpu_main(p0, p1, frame):
    """gloo traces (no NCCL kernels): each outermost c10d:: op on the main thread is a call, arriving at its start."""
    out = []
    for p in (p0, p1):
        d = load(p)
        ev = [e for e in d["traceEvents"] if e.get("ph") == "X"]
        base_us = (d.get("baseTimeNanoseconds") or 0) / 1e3
        ops = sorted((e for e in ev if e.get("cat") == "cpu_op" and e["name"].startswith("c10d::")),
                     key=lambda e: e["ts"])
        first = min(e["ts"] for e in ev) + base_us
        fr = [e for e in ev if e.get("cat") == "python_function" and frame and frame in e["name"]]
        out.append((ops, base_us, first, fr))
    (o0, b0, f0, _), (o1, b1, f1, fr1) = out
    print("calls:", len(o0), len(o1), "first:", o0[0]["name"], o1[0]["name"])
    print(f"first events: rank 1's is {f1 - f0:.3f} us after rank 0's")
    arr = [(a["ts"] + b0, b["ts"] + b1) for a, b in zip(o0, o1)]
    print(f"first call: rank 0 arrived {arr[0][1] - arr[0][0]:.3f} us before rank 1")
    late1 = [i for i, (x, y) in enumerate(arr) if y > x]
    print(f"after the first call: rank 1 last at {sum(1 for i in late1 if i > 0)} of {len(arr) - 1}; rank 0 waited "
          f"{sum(y - x for i, (x, y) in enumerate(arr) if i > 0 and y > x):.3f} us (arrival differences)")
    if frame:
        durs = sorted(e["dur"] for e in fr1)
        print(f"rank 1: {len(fr1)} frames {frame!r}, {sum(durs):.3f} us in total, each {durs[0]:.3f}..{durs[-1]:.3f} us")


def main(argv):
    p0, p1 = argv[:2]
    frame = argv[2] if len(argv) > 2 else None
    r = [rank_data(load(p), None) for p in (p0, p1)]
    if not r[0]["kernels"]:
        return cpu_main(p0, p1, frame)
    r = [rank_data(load(p), frame) for p in (p0, p1)]
    k0, k1 = r[0]["kernels"], r[1]["kernels"]
    print("in-step collectives:", len(k0), len(k1))
    w = defaultdict(float)
    waits0 = []
    for a, b in zip(k0, k1):
        last = max(a[0], b[0])
        w0 = min(max(last - a[0], 0), a[1])
        w1 = min(max(last - b[0], 0), b[1])
        w[0] += w0
        w[1] += w1
        waits0.append(w0)
    print(f"rank 0 waited {w[0]:.3f} us, rank 1 waited {w[1]:.3f} us")
    print(f"rank 1 last at {sum(1 for a, b in zip(k0, k1) if b[0] > a[0])}, rank 0 last at "
          f"{sum(1 for a, b in zip(k0, k1) if a[0] > b[0])}")
    print("rank 0 waits, first 3 (us):", [round(x, 3) for x in waits0[:3]])
    if frame:
        for i in (0, 1):
            o = r[i]["own"]
            print(f"rank {i} own time of {frame!r} between launches: {sum(o):.3f} us over {len(o)} intervals, "
                  f"{sum(1 for x in o if x > 0)} with it")


if __name__ == "__main__":
    main(sys.argv[1:])
