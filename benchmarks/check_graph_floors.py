"""An independent check of the GEMV floors of a CUDA graph decode (issue #39): from the raw trace events, the model's
weight shapes and the device's HBM bandwidth, with none of gapscope's code.

    python3 benchmarks/check_graph_floors.py traces/hf-graphs.decode_graph.json.gz [--report]

1. The model's weight shapes from its config: the demo's from the trace's own metadata (``gapscope.workload.config``),
   the Hugging Face Llama's from ``benchmarks/hf_clients.LLAMA_DECODE`` (a plain dict); the HBM bandwidth from the
   device's name in ``deviceProperties`` (the vendor's figure, the table below).
2. The eager reference run (the ``gapscope.graph_reference`` range): its GPU work in launch order, and each
   ``aten::mm`` with its input dims and the kernels it launched (the kernels' ``External id`` is the op's). Its
   matmul weights must be the config's, layer by layer, in order.
3. The replays inside the measured steps (``gapscope.step#k``): each ``cudaGraphLaunch``'s kernels in start order,
   matched to the reference's GPU work position by position (kernel names must agree; a graph runs a small copy
   node as a ``memcpy*`` kernel where the eager run has a ``Memcpy`` event).
4. Per weight shape [K, N] (x [M, K] @ W [K, N] -> y [M, N], bf16): the GEMV floor, every byte of x, W and y once
   through HBM at the bandwidth, against the replayed calls' time (all the kernels of one call: a split-K GEMM and
   its reduction). With ``--report``, gapscope's own floors for the same kernels (``gapscope report --json``, run
   as a command): per kernel name (or op row of several kernels), their floor total against the sum of the
   independent floors of the calls behind it; gapscope may leave out x where an earlier kernel just wrote it (the
   L2), never more.

Exits 1 when a call's time is below its floor, the weights disagree with the config, or gapscope's floor is above the
independent one or below it by more than the activations.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: HBM bandwidth, bytes per second, by a substring of the device's name (NVIDIA's and AMD's data sheets)
HBM = [("GH200", 4.0e12), ("H200", 4.8e12), ("H100", 3.35e12), ("B200", 8.0e12), ("A100", 2.039e12),
       ("MI300X", 5.3e12)]
BF16 = 2


def _load(path: str) -> dict:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def weights_from_config(doc: dict) -> tuple[list[tuple[int, int]], str]:
    """The matmul weights [K, N] of one forward in the order the model runs them, and where the config came from."""
    g = doc.get("gapscope") or {}
    w = g.get("workload") or {}
    if w.get("demo"):
        c = w["config"]
        d, ff, vocab = c["d_model"], c["d_ff"], c["vocab"]
        layer = [(d, 3 * d), (d, d), (d, 2 * ff), (ff, d)]  # qkv, o, gate+up, down
        return layer * c["n_layers"] + [(d, vocab)], "the demo's config in the trace's metadata"
    if str(w.get("target", "")).startswith("benchmarks.hf_graphs"):
        sys.path.insert(0, HERE)
        from benchmarks.hf_clients import LLAMA_DECODE

        c = LLAMA_DECODE["full"]
        d, ff, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
        hd = d // c["num_attention_heads"]
        kv = c["num_key_value_heads"] * hd
        layer = [(d, d), (d, kv), (d, kv), (d, d), (d, ff), (d, ff), (ff, d)]  # q, k, v, o, gate, up, down
        return layer * c["num_hidden_layers"] + [(d, vocab)], "benchmarks/hf_clients.LLAMA_DECODE['full']"
    raise SystemExit(f"no known model config in this trace's metadata ({w})")


def bandwidth(doc: dict) -> tuple[float, str]:
    names = [str(p.get("name")) for p in doc.get("deviceProperties") or [] if p.get("name")]
    for key, bw in HBM:
        if names and key in names[0]:
            return bw, names[0]
    raise SystemExit(f"no HBM bandwidth known for {names}")


def _within(e: dict, r: dict) -> bool:
    return e.get("tid") == r.get("tid") and r["ts"] <= e["ts"] <= r["ts"] + r["dur"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--report", action="store_true", help="also compare with `gapscope report --json TRACE`")
    args = ap.parse_args(argv)
    doc = _load(args.trace)
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    weights, source = weights_from_config(doc)
    bw, device = bandwidth(doc)
    ref_rng = [e for e in ev if e.get("name") == "gapscope.graph_reference"]
    steps = [e for e in ev if str(e.get("name", "")).startswith("gapscope.step#") and e.get("cat") == "user_annotation"]
    if not ref_rng or not steps:
        raise SystemExit("the trace has no gapscope.graph_reference range or no measured steps")
    launches = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    by_corr = collections.defaultdict(list)
    for e in gpu:
        by_corr[e["args"].get("correlation")].append(e)

    # 2. the reference: its GPU work in launch order, its matmuls and their kernels
    ref_launch = sorted((e for e in launches if any(_within(e, r) for r in ref_rng)), key=lambda e: e["ts"])
    ref_work = [k for L in ref_launch for k in sorted(by_corr.get(L["args"]["correlation"], []), key=lambda k: k["ts"])]
    shapes = {tuple(w) for w in weights}  # other matmuls (the rotary embedding's [32, 1] @ [1, 1]) are not GEMVs
    mms = sorted((e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"
                  and any(_within(e, r) for r in ref_rng) and tuple(e["args"]["Input Dims"][1]) in shapes),
                 key=lambda e: e["ts"])
    got = [tuple(m["args"]["Input Dims"][1]) for m in mms]
    if got != [tuple(w) for w in weights]:
        print(f"FAIL: the reference's matmul weights differ from the config ({source}):\n  trace  {got}\n"
              f"  config {weights}")
        return 1
    ext_of_work = {id(k): k["args"].get("External id") for k in ref_work}
    mm_of_ext = {m["args"]["External id"]: i for i, m in enumerate(mms)}

    def token(k):
        if k.get("cat") != "kernel":
            return "copy" if k["cat"] == "gpu_memcpy" else "memset"
        n = k["name"]
        return "copy" if n.startswith("memcpy") and "_" in n else "memset" if n.startswith("memset") and "_" in n else n

    ref_tokens = [token(k) for k in ref_work]
    # 3. the replays of the measured steps, matched position by position
    graph_launches = [L for L in launches if L["name"] in ("cudaGraphLaunch", "cuGraphLaunch")
                      and any(_within(L, s) for s in steps)]
    calls = collections.defaultdict(list)  # mm index -> [time of its kernels in one replay]
    names_of = collections.defaultdict(set)  # mm index -> its kernels' names
    for L in graph_launches:
        ks = sorted(by_corr.get(L["args"]["correlation"], []), key=lambda k: k["ts"])
        block = [token(k) for k in ks]
        # the graph's work is one contiguous run of the reference's (whose eager ops around it are not in the graph)
        at = next((j for j in range(len(ref_tokens) - len(block) + 1) if ref_tokens[j:j + len(block)] == block), -1)
        if at < 0:
            print(f"FAIL: a replay's {len(ks)} kernels are not a run of the reference's {len(ref_tokens)} work items")
            return 1
        per = collections.defaultdict(float)
        for k, r in zip(ks, ref_work[at:]):
            i = mm_of_ext.get(ext_of_work[id(r)])
            if i is not None:
                per[i] += k["dur"] * 1e3  # ns
                names_of[i].add(k["name"])
        for i, t in per.items():
            calls[i].append(t)
    # 4. the floors
    rows = collections.OrderedDict()
    bad = 0
    for i, m in enumerate(mms):
        (M, K), (_, N) = m["args"]["Input Dims"][:2]
        floor = (M * K + K * N + M * N) * BF16 / bw * 1e9
        ts = calls.get(i, [])
        r = rows.setdefault((M, K, N), {"floor": floor, "times": [], "weights": K * N * BF16, "names": set()})
        r["times"] += ts
        r["names"] |= names_of[i]
        if ts and min(ts) < floor:
            bad += 1
    steps_n = len(steps)
    print(f"{os.path.basename(args.trace)}: {device}, HBM {bw / 1e12:.2f} TB/s; weights from {source}; "
          f"{len(graph_launches)} replays in {steps_n} measured steps matched to the reference's "
          f"{len(ref_tokens)} work items")
    print(f"{'x [M,K] @ W [K,N]':>24} {'calls':>6} {'W MiB':>7} {'floor µs':>9} {'avg µs':>8} {'min µs':>8} "
          f"{'floor/avg':>9}  kernels")
    tot_floor = tot_time = 0.0
    for (M, K, N), r in rows.items():
        t = r["times"]
        avg = sum(t) / len(t) if t else float("nan")
        tot_floor += r["floor"] * len(t)
        tot_time += sum(t)
        print(f"{f'[{M},{K}] @ [{K},{N}]':>24} {len(t):6d} {r['weights'] / 2**20:7.2f} {r['floor'] / 1e3:9.3f} "
              f"{avg / 1e3:8.3f} {min(t) / 1e3 if t else float('nan'):8.3f} {r['floor'] / avg:9.0%}  "
              f"{' + '.join(sorted(n[:40] for n in r['names']))}")
    wmib = sum(K * N * BF16 for K, N in weights) / 2**20
    print(f"per step: GEMV floor {tot_floor / steps_n / 1e3:.1f} µs (weights {wmib:.1f} MiB), their kernels "
          f"{tot_time / steps_n / 1e3:.1f} µs: {tot_floor / tot_time:.0%} of HBM bandwidth")
    print(f"calls below their floor: {bad}")
    ok = bad == 0
    if args.report:
        ok &= compare_report(args.trace, mms, calls, names_of, bw)
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


def compare_report(trace: str, mms: list, calls: dict, names_of: dict, bw: float) -> bool:
    """gapscope's floor totals for the matmul kernels (its JSON report) against the sum of the independent floors."""
    out = subprocess.run([sys.executable, "-m", "gapscope", "report", "--json", "--no-cache", "--top", "200", trace],
                         cwd=HERE, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"gapscope report failed: {out.stderr.strip()[:300]}")
        return False
    rep = json.loads(out.stdout)
    # the independent floors grouped the way gapscope's rows are: one kernel name, or the kernel names of one op call
    single: dict[str, list] = collections.defaultdict(list)
    multi: dict[tuple, list] = collections.defaultdict(list)
    for i, m in enumerate(mms):
        (M, K), (_, N) = m["args"]["Input Dims"][:2]
        fl = (M * K + K * N + M * N) * BF16 / bw * 1e9
        act = M * K * BF16 / bw * 1e9  # x: what an L2 reuse may take off
        ns = sorted(names_of[i])
        for _ in calls.get(i, []):
            (single[ns[0]] if len(ns) == 1 else multi[tuple(ns)]).append((fl, act))
    ok = True
    print("gapscope's floors (its JSON report) against the independent ones:")
    for k in rep.get("kernels", []):
        if k["name"] in single and k.get("floor_total_us") is not None:
            ok &= _line(k["name"], k["floored_calls"], k["floor_total_us"], single.pop(k["name"]))
    for o in rep.get("op_floors", []):
        key = tuple(sorted(o["kernels"]))
        if o["op"] == "aten::mm" and key in multi:
            ok &= _line(" + ".join(x[:28] for x in o["kernels"]), o["count"], o["floor_total_us"], multi.pop(key))
    for name, v in list(single.items()) + list(multi.items()):
        print(f"  {str(name)[:60]}: {len(v)} calls with no floor in gapscope's report")
        ok = False
    return ok


def _line(name: str, n_g: int, g_us: float, mine: list) -> bool:
    ind = sum(f for f, _ in mine) / 1e3
    slack = sum(a for _, a in mine) / 1e3
    good = n_g == len(mine) and g_us <= ind * (1 + 1e-6) + 1e-3 and g_us >= ind - slack - 1e-3
    print(f"  {name[:60]:60} calls {n_g:4d}/{len(mine):4d}  gapscope {g_us:9.3f} µs  independent {ind:9.3f} µs  "
          f"(x may be in the L2: up to {slack:.3f} µs less)  {'ok' if good else 'DIFFERS'}")
    return good


if __name__ == "__main__":
    sys.exit(main())
