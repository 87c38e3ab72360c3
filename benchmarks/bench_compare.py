"""Time ``tui.analysis.compare.compare`` (and ``match_gaps``, the explorer's new-gap marks) by hand:

    python benchmarks/bench_compare.py [--rounds 5]

On: the sample pairs in traces/ (eager decode vs eager + Python bookkeeping, vs CUDA graph, prefill vs
decode), the largest third-party trace in ../shared/traces (resnet50, 6 ProfilerStep steps of ~1.5k kernels)
against the CUDA-graph decode sample when present, a synthetic pair whose single step holds 10,000 kernels in A and ~9,900 in B (every 50th pair
of kernels fused, some added), and the alignment alone on 10k x 10k random kernel names (the worst case of the
trace-back). Prints the best of ``--rounds`` for each; the analyses are built before the clock starts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from gapscope.analysis import analyze  # noqa: E402
from gapscope.analysis.compare import compare, match_gaps  # noqa: E402
from gapscope.analysis.compare.align import lcs_pairs  # noqa: E402
from gapscope.trace import load  # noqa: E402

PAIRS = [("demo-eager.decode.json.gz", "demo-eager-python.decode.json.gz"),
         ("demo-eager.decode.json.gz", "demo-graph.decode.json.gz"),
         ("demo-eager.prefill.json.gz", "demo-eager.decode.json.gz")]
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "traces", "thirdparty",
                      "kineto__tbp_2021-06_resnet50_nw0_worker0.1623143089861.pt.trace.json.gz")


def best(fn, rounds: int) -> float:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def synth_pair(n: int = 10_000):
    """One gapscope.step#0 of n kernels (A); B fuses kernels 2k+1, 2k+2 of every 50 into one and adds one."""
    sys.path.insert(0, ROOT)
    from tests.synth import Synth
    from tests.test_analysis import model_of

    rng = np.random.default_rng(0)
    names_a = [f"k{int(x)}" for x in rng.integers(0, 170, n)]
    names_b = []
    for i, nm in enumerate(names_a):
        if i % 50 == 1:
            continue
        names_b.append("fused" if i % 50 == 2 else nm)
        if i % 1000 == 999:
            names_b.append("added")

    def build(names):
        s = Synth()
        t = 10.0
        for nm in names:
            s.launch(ts=t, dur=1, kernel=nm, k_ts=t + 3, k_dur=2)
            t += 6
        s.annotation("gapscope.step#0", 0, t + 10)
        return analyze(model_of(s))

    return build(names_a), build(names_b)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    r = ap.parse_args().rounds
    tr = os.path.join(ROOT, "traces")
    for x, y in PAIRS:
        a, b = analyze(load(os.path.join(tr, x))), analyze(load(os.path.join(tr, y)))
        c = compare(a, b)
        print(f"{x} vs {y}: {len(a.model.ts_ns)} + {len(b.model.ts_ns)} events, "
              f"{c.a.kernels_per_step:.0f} / {c.b.kernels_per_step:.0f} kernels per step: compare "
              f"{best(lambda: compare(a, b), r) * 1e3:.1f} ms, match_gaps {best(lambda: match_gaps(a, b, c), r) * 1e3:.1f} ms")
    if os.path.exists(SHARED):
        a = analyze(load(SHARED))
        b = analyze(load(os.path.join(tr, "demo-graph.decode.json.gz")))
        c = compare(a, b)
        print(f"{os.path.basename(SHARED)} vs demo-graph.decode: {a.model.n} events, {c.a.steps} {c.a.source} steps "
              f"of {c.a.kernels_per_step:.0f} kernels: compare {best(lambda: compare(a, b), r) * 1e3:.1f} ms, "
              f"match_gaps {best(lambda: match_gaps(a, b, c), r) * 1e3:.1f} ms")
    a, b = synth_pair()
    c = compare(a, b)
    print(f"synthetic step of {c.alignment.a_kernels} vs {c.alignment.b_kernels} kernels "
          f"({c.alignment.counts()}): compare {best(lambda: compare(a, b), r) * 1e3:.1f} ms, "
          f"match_gaps {best(lambda: match_gaps(a, b, c), r) * 1e3:.1f} ms")
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 170, 10_000), rng.integers(0, 170, 10_000)
    print(f"lcs_pairs, 10k x 10k random names of 170: {best(lambda: lcs_pairs(x, y), r) * 1e3:.1f} ms "
          f"({len(lcs_pairs(x, y))} matched)")


if __name__ == "__main__":
    main()
