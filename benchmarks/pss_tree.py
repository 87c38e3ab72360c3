"""Peak memory of any command with the processes it forks: the summed PSS of its process tree, sampled every
0.1 s (PSS splits the pages a forked child shares with its parent, so they count once; summed ``ru_maxrss`` counts
them in both). Run by hand; Linux only (/proc/PID/smaps_rollup, /proc/PID/task/*/children).

    python benchmarks/pss_tree.py python3 -m gapscope report --json --no-cache /tmp/gapscope-bench/big_1G.json

Prints the peak in MB, how many processes the tree had at that moment, and the command's exit status (its stdout
is discarded). A 0.1 s sample can miss a shorter peak: read it as a lower bound of the real one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def tree(pid: int) -> list[int]:
    out = [pid]
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                for c in f.read().split():
                    out += tree(int(c))
    except OSError:  # gone meanwhile
        pass
    return out


def pss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
    peak, procs = 0.0, 0
    while p.poll() is None:
        ps = tree(p.pid)
        tot = sum(pss_mb(x) for x in ps)
        if tot > peak:
            peak, procs = tot, len(ps)
        time.sleep(0.1)
    print(f"peak PSS {peak:.0f} MB over {procs} processes, rc {p.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
