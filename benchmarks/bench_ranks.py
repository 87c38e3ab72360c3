"""Several ranks, run by hand (not part of the test suite).

    python benchmarks/bench_ranks.py [--ranks 8] [--jobs N] [--src traces/demo-eager-tp-late1.decode]

Writes N rank files into a temporary folder under /tmp: copies of SRC.rank0/rank1.json.gz (rank 1 from rank
1's file: the one straggler; every other rank from rank 0's file) with the rank metadata
(``distributedInfo.rank/world_size``, ``gapscope.rank/world_size``) rewritten. Then, in a fresh subprocess
(so peak RSS is this run's own):

  load     tui.trace.multi.load_many(folder, no_cache=True): parallel worker processes, one per rank up to
           --jobs (default: the CPU count)
  analyse  tui.analysis.ranks.analyze_ranks(models): each rank's analysis plus the cross-rank matching
  match    the matching alone (timelines + match_timelines): the O(ranks x collectives) part
  report   render_markdown + build_json

Prints wall time per phase, the peak RSS of the main process (ru_maxrss self) and of the largest worker
(ru_maxrss children), and the uncompressed JSON size per rank.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {repo!r})
folder, jobs = sys.argv[1], int(sys.argv[2]) or None
from gapscope.trace.multi import load_many
from gapscope.analysis.ranks import analyze_ranks, match_timelines, timeline
from gapscope.report import build_json, render_markdown
out = {{}}
t = time.perf_counter(); models = load_many([folder], no_cache=True, jobs=jobs); out["load_s"] = time.perf_counter() - t
out["rss_after_load_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter(); aa = analyze_ranks(models); out["analyse_s"] = time.perf_counter() - t
t = time.perf_counter(); tls = [timeline(a.model, a.window) for a in aa]; res = match_timelines(tls)
out["match_s"] = time.perf_counter() - t
t = time.perf_counter(); md = render_markdown(aa); doc = build_json(aa); out["report_s"] = time.perf_counter() - t
out["events"] = sum(m.n for m in models)
out["calls"] = sum(tl.n for tl in tls)
out["late"] = [(e.rank, e.count, e.of) for e in res.late[:3]]
out["blamed"] = [b.func for b in (res.late[0].blamed if res.late else [])]
out["late_line"] = [ln for ln in md.splitlines() if "arrived last" in ln and ln.startswith("**rank")][:1]
out["rss_self_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["rss_worker_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps(out))
"""


def make_ranks(src: str, n: int, folder: str) -> int:
    """Rank files 0..n-1 from SRC.rank0/1 (rank 1 is the late one); returns the uncompressed size of one."""
    docs = []
    for r in (0, 1):
        with gzip.open(f"{src}.rank{r}.json.gz", "rb") as f:
            docs.append(f.read())
    size = len(docs[0])
    for r in range(n):
        d = json.loads(docs[1 if r == 1 else 0])
        d.setdefault("distributedInfo", {}).update({"rank": r, "world_size": n})
        if isinstance(d.get("gapscope"), dict):
            d["gapscope"].update({"rank": r, "world_size": n})
        with gzip.open(os.path.join(folder, f"bench.decode.rank{r}.json.gz"), "wb", compresslevel=1) as f:
            f.write(json.dumps(d).encode())
    return size


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=0, help="load_many worker processes (0: the CPU count)")
    ap.add_argument("--src", default=os.path.join(REPO, "traces", "demo-eager-tp-late1.decode"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gapscope-ranks-", dir="/tmp") as folder:
        size = make_ranks(args.src, args.ranks, folder)
        r = subprocess.run([sys.executable, "-c", _CHILD.format(repo=REPO), folder, str(args.jobs)],
                           capture_output=True, text=True)
        if r.returncode:
            sys.stderr.write(r.stderr)
            return 1
        out = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"{args.ranks} ranks of {os.path.basename(args.src)} ({size / 1e6:.1f} MB JSON each, "
          f"{out['events']} events, {out['calls']} collective calls), {os.cpu_count()} CPUs, "
          f"jobs={args.jobs or 'auto'}")
    print(f"  load_many {out['load_s']:.2f} s   analyze_ranks {out['analyse_s']:.2f} s (matching alone "
          f"{out['match_s'] * 1e3:.0f} ms)   report {out['report_s']:.2f} s   total "
          f"{out['load_s'] + out['analyse_s'] + out['report_s']:.2f} s")
    print(f"  peak RSS: main {out['rss_self_mib']:.0f} MiB (after load {out['rss_after_load_mib']:.0f} MiB), "
          f"largest worker {out['rss_worker_mib']:.0f} MiB")
    print(f"  late ranks (rank, arrived last, of): {out['late']}")
    for ln in out["late_line"]:
        print(f"  {ln}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
