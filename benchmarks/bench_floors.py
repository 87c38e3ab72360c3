"""The per-call floor computation before / after, run by hand:

    python3 benchmarks/bench_floors.py OLD_CHECKOUT NEW_CHECKOUT TRACE [--rounds 5]

For each checkout (e.g. a ``git archive`` of an older commit, and ``.``), a fresh subprocess loads TRACE
(from the cache), runs ``analyze`` and then times, best of ``--rounds``: the call floors alone
(``activity.call_floors``, or ``activity._call_floors`` in checkouts that had only the private one) and the
kernels + op-floors tables built from scratch (both call it; an old checkout computed the floors once per table).
The checkouts alternate so that both see the same machine load.

Measured 2026-12-01 on the 2-core dev machine (shared with other jobs), /tmp/gpu-bench/big_100M.json (gen_big.py,
100 MiB, 372,145 events, tiled tracelens__b200_eager_trace): see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from gapscope.trace import load
from gapscope.analysis import analyze, activity
m = load(sys.argv[2])
a = analyze(m)
k = np.flatnonzero(m.kind == int(activity.KI.KERNEL))
k = k[a.window.gpu_in(m, k)]
fn = getattr(activity, "call_floors", None) or activity._call_floors
best_f = best_t = 1e9
for _ in range(int(sys.argv[3])):
    t = time.perf_counter(); fn(m, k, a.window, a.flags); best_f = min(best_f, time.perf_counter() - t)
    t = time.perf_counter()
    activity.kernel_stats(m, window=a.window, flags=a.flags)
    activity.op_floor_stats(m, window=a.window, flags=a.flags)
    best_t = min(best_t, time.perf_counter() - t)
print(json.dumps({"floors": best_f, "tables": best_t, "kernels": int(k.size)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("trace")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    for r in range(2):
        for repo in (a.old, a.new):
            out = subprocess.run([sys.executable, "-c", _CHILD, repo, a.trace, str(a.rounds)], check=True,
                                 capture_output=True, text=True).stdout
            res = json.loads(out.strip().splitlines()[-1])
            print(f"round {r + 1} {repo}: call floors {res['floors']:.3f} s, kernels + op_floors tables "
                  f"{res['tables']:.3f} s ({res['kernels']} kernels)", flush=True)


if __name__ == "__main__":
    main()
