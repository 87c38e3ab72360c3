"""Timings that used to be asserted inside tests, run by hand (wall-clock limits fail at random on a shared
machine, so the tests check behaviour and these print the times):

    python benchmarks/bench_robust.py corpus      # each robustness-corpus case through info / report / report --json
    python benchmarks/bench_robust.py failfast    # a capture rank failing at the barrier while another rank hangs

corpus: tests/test_robust_report.py's CORPUS, every command in a fresh child process (as a user runs it);
prints the seconds per case and command, the slowest first, and flags any over --limit (default 30 s, the old
assert in the test).

failfast: tests/test_capture.py's failed-rank scenario (two gloo ranks on the CPU, rank 1 raises in its warm-up
and stays alive): how long rank 0 takes to fail with --dist-timeout 1.5 (the old test asserted under 5 s).
Needs torch.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def corpus(limit: float) -> int:
    from tests.test_robust_report import COMMANDS, CORPUS

    rows = []
    with tempfile.TemporaryDirectory(prefix="gapscope-bench-corpus-") as tmp:
        env = dict(os.environ, GAPSCOPE_CACHE_DIR=str(Path(tmp) / "cache"), NO_COLOR="1")
        for c in CORPUS:
            if c.name in ("unreadable", "fifo"):  # permissions / blocking reads: behaviour, not time
                continue
            folder = Path(tmp) / c.name
            folder.mkdir()
            p = c.make(folder)
            for cmd, words in COMMANDS.items():
                t = time.perf_counter()
                r = subprocess.run([sys.executable, "-m", "gapscope", *words, *c.extra, str(p)], cwd=REPO, env=env,
                                   capture_output=True, text=True, timeout=600)
                rows.append((time.perf_counter() - t, c.name, cmd, r.returncode))
    over = 0
    for s, name, cmd, rc in sorted(rows, reverse=True):
        flag = "  OVER" if s > limit else ""
        over += s > limit
        print(f"{s:7.2f} s  rc {rc}  {name:28s} {cmd}{flag}")
    print(f"{len(rows)} runs, {over} over {limit:g} s")
    return 1 if over else 0


def failfast(repeats: int) -> int:
    import torch.multiprocessing as mp

    from tests.test_capture import _free_port

    def once() -> float:
        with tempfile.TemporaryDirectory(prefix="gapscope-bench-failfast-") as tmp:
            (Path(tmp) / "rankfail.py").write_text(
                "import os, torch\n"
                "def steps():\n"
                "    def decode():\n"
                "        if os.environ['RANK'] == '1':\n"
                "            raise ValueError('boom on rank 1')\n"
                "        return torch.ones(4) + 1\n"
                "    return {'decode': decode}\n"
            )
            rcs = mp.get_context("spawn").Manager().dict()
            mp.start_processes(_timed_worker, args=(2, _free_port(), tmp, rcs), nprocs=2, join=True,
                               start_method="spawn")
            return rcs[0]

    times = [once() for _ in range(repeats)]
    print("rank 0 failed after " + ", ".join(f"{t:.2f}" for t in times) + " s (--dist-timeout 1.5; was asserted < 5 s)")
    return 0


def _timed_worker(rank: int, world: int, port: int, folder: str, rcs) -> None:
    from gapscope.capture import cli as capture_cli

    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    sys.path.insert(0, folder)
    t0 = time.monotonic()
    capture_cli.main(["run", "rankfail:steps", "--cpu", "--dist-timeout", "1.5", "--warmup", "1", "--repeats", "1",
                      "--active", "1", "--out", os.path.join(folder, "out")])
    if rank == 0:
        rcs[0] = time.monotonic() - t0
    else:
        for _ in range(600):
            if 0 in rcs:
                break
            time.sleep(0.1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("corpus", "failfast"))
    ap.add_argument("--limit", type=float, default=30.0, help="corpus: flag runs slower than this (s)")
    ap.add_argument("--repeats", type=int, default=3, help="failfast: how many times")
    a = ap.parse_args()
    return corpus(a.limit) if a.what == "corpus" else failfast(a.repeats)


if __name__ == "__main__":
    sys.exit(main())
