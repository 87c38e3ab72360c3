"""Every report the CLI writes, for a byte-for-byte before / after of a refactor. Run by hand:

    python benchmarks/check_reports_same.py OUT_DIR [--repo DIR] [--jobs N]

For every trace in traces/ and ../shared/traces/ (and /tmp/gapscope-bench/big_100M.json when it exists) it runs,
in a fresh process with the checkout DIR as the working directory (so `python -m gapscope` imports that tree):

  NAME.md / NAME.json          gapscope report --no-cache [--json] TRACE
  pair-A--B.md / .json         gapscope report --no-cache [--json] A B   (the before/after pairs in traces/)
  ranks-STEM.md / .json        gapscope report --no-cache [--json] RANK0 RANK1 (the rank sets in traces/)

stdout, then stderr and the exit status when either is not the usual, go into the file. A before / after is:

    git archive HEAD | tar -x -C /tmp/before
    python benchmarks/check_reports_same.py /tmp/same-before --repo /tmp/before
    python benchmarks/check_reports_same.py /tmp/same-after
    diff -r /tmp/same-before /tmp/same-after && echo IDENTICAL
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.realpath(os.path.join(os.path.dirname(HERE), "shared", "traces"))
BIG = "/tmp/gapscope-bench/big_100M.json"
PAIRS = [
    ("hf-mixtral.decode_eager", "hf-mixtral.decode_batched"),
    ("hf-attn.prefill_eager", "hf-attn.prefill_sdpa"),
    ("hf-mlp.prefill_i5633", "hf-mlp.prefill_i5632"),
    ("hf-sampling.decode_host", "hf-sampling.decode_gpu"),
    ("resnet50.fp32", "resnet50.bf16_cl"),
    ("demo-eager.decode", "demo-graph.decode"),
    ("demo-eager-sync.decode", "demo-eager.decode"),
]


def jobs_for(repo: str) -> list[tuple[str, list[str]]]:
    traces = os.path.join(repo, "traces")
    files = sorted(glob.glob(os.path.join(traces, "*.json.gz")))
    files += sorted(p for p in glob.glob(os.path.join(SHARED, "*", "*")) if p.endswith((".json", ".json.gz")))
    if os.path.exists(BIG):
        files.append(BIG)
    out = []
    for p in files:
        out.append((os.path.basename(p), [p]))
    for a, b in PAIRS:
        pa, pb = (os.path.join(traces, x + ".json.gz") for x in (a, b))
        if os.path.exists(pa) and os.path.exists(pb):
            out.append((f"pair-{a}--{b}", [pa, pb]))
    for ranks in sorted(glob.glob(os.path.join(traces, "*.ranks.json"))):
        stem = os.path.basename(ranks)[: -len(".ranks.json")]
        rs = sorted(glob.glob(os.path.join(traces, stem + ".decode.rank*.json.gz")))
        if len(rs) >= 2:
            out.append((f"ranks-{stem}", rs))
    return out


def run_one(repo: str, out: str, name: str, paths: list[str], js: bool) -> str:
    cmd = [sys.executable, "-m", "gapscope", "report", "--no-cache"] + (["--json"] if js else []) + paths
    r = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    # Paths differ between checkouts: write them relative to the traces folder they came from.
    text = r.stdout.replace(os.path.join(repo, "traces") + os.sep, "traces/")
    if r.returncode != 0 or r.stderr:
        text += f"\n--- rc {r.returncode}\n" + r.stderr
    with open(os.path.join(out, name + (".json" if js else ".md")), "w", encoding="utf-8") as f:
        f.write(text)
    return f"{name}{' --json' if js else ''}: rc {r.returncode}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--repo", default=HERE, help="checkout whose gapscope runs (default: this one)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    repo = os.path.abspath(args.repo)
    os.makedirs(args.out, exist_ok=True)
    work = [(n, p, js) for n, p in jobs_for(repo) for js in (False, True)]
    with cf.ThreadPoolExecutor(args.jobs) as ex:
        for line in ex.map(lambda w: run_one(repo, args.out, *w), work):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
