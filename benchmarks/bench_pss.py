"""Load time and peak memory of `tui.trace.load(path, no_cache=True)`, the memory as the PSS of this process plus
its loader worker, sampled every 10 ms (PSS splits shared pages between the processes that map them, so the
pages the worker shares with its parent after the fork count once; summed `ru_maxrss` counts them twice).

    python benchmarks/bench_pss.py TRACE [TRACE ...] [--repo CHECKOUT]

Linux only (/proc/PID/smaps_rollup). Each trace in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bench_open import _json_size  # noqa: E402 - this folder is on sys.path when run as a script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from gapscope.trace import load


def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for ln in f:
                if ln.startswith("Pss:"):
                    return int(ln.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children():
    me = os.getpid()
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(") ", 1)[1].split()[1]) == me:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


peak = [pss(os.getpid())]
done = threading.Event()


def watch():
    while not done.is_set():
        peak[0] = max(peak[0], pss(os.getpid()) + sum(pss(k) for k in children()))
        done.wait(0.01)


th = threading.Thread(target=watch, daemon=True)
th.start()
t = time.perf_counter()
m = load(sys.argv[2], no_cache=True)
dt = time.perf_counter() - t
done.set()
th.join()
print(json.dumps({"s": dt, "pss": peak[0], "n": int(m.n)}))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--repo", default=REPO, help="the checkout to load with (default: this one)")
    a = ap.parse_args(argv)
    print("| trace | JSON MB | load s | peak PSS MB (process + worker) | PSS/JSON |")
    print("|---|---:|---:|---:|---:|")
    for p in a.traces:
        r = subprocess.run([sys.executable, "-c", _CHILD, os.path.abspath(a.repo), p], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"bench_pss: error: {p}: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 2
        out = json.loads(r.stdout.strip().splitlines()[-1])
        size = _json_size(p)
        print(f"| {os.path.basename(p)} | {size / 1e6:.0f} | {out['s']:.2f} | {out['pss'] / 1e6:.0f} | "
              f"{out['pss'] / size:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
