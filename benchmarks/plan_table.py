"""The plan against measured fixes: for each real-client pair in traces/ (a variant and its fix timed un-profiled in
the same interleaved rounds of one ``capture run``), the plan's action for that fix, its rank and projected saving,
against the saving measured (median and min of the un-profiled samples, from the traces' metadata). Run by hand:

    python3 benchmarks/plan_table.py
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# variant, fix, the action kind an expert names for the fix, a word its change or place must hold
PAIRS = [
    ("hf-autocast.prefill_autocast", "hf-autocast.prefill_bf16", "kernels", "bf16"),
    ("hf-penalty.decode_loop", "hf-penalty.decode_vec", "vectorise-frame", "pick"),
    ("hf-pageable.step_pageable", "hf-pageable.step_pinned", "pinned-copy", "pin_memory"),
    ("hf-synchook.decode_hook", "hf-synchook.decode_nohook", "remove-syncs", "hook"),
    ("hf-mixtral.decode_eager", "hf-mixtral.decode_batched", "vectorise-loop", "modeling_mixtral"),
    ("hf-attn.prefill_eager", "hf-attn.prefill_sdpa", "kernels", "attention"),
    ("hf-mlp.prefill_i5633", "hf-mlp.prefill_i5632", "kernels", "multiple of 8"),
    ("hf-sampling.decode_host", "hf-sampling.decode_gpu", "round-trip", "round trip"),
    ("resnet50.fp32", "resnet50.bf16_cl", "kernels", "bf16"),
    ("hf-timer.decode_timer", "hf-timer.decode_notimer", "user-sync", "timer"),
    ("hf-gil.decode_thread", "hf-gil.decode_nothread", "gil-thread", "GIL"),
    ("conv-autotune.step_sizes", "conv-autotune.step_padded", "autotune", "autotuning"),
    ("mlp-wcopy.fwd_transpose", "mlp-wcopy.fwd_stored", "kernels", "transposed"),
    ("mlp-wcast.fwd_cast", "mlp-wcast.fwd_bf16", "kernels", "cast to bf16 on every call"),
]


def meta(name: str) -> dict:
    with gzip.open(os.path.join(HERE, "traces", name + ".json.gz")) as f:
        return json.load(f)["gapscope"]


def step_us(g: dict) -> tuple[float, float]:
    """(median, min) of the un-profiled samples, per step."""
    s = sorted(g["unprofiled_samples_us"])
    n = g.get("active") or g.get("active_steps") or 1
    return s[len(s) // 2] / n, s[0] / n


def main() -> int:
    print("| variant | expert's action (the plan's words) | rank | projected | measured (median / min) | same run |")
    print("|---|---|---:|---:|---:|---|")
    for var, fix, kind, word in PAIRS:
        out = subprocess.run([sys.executable, "-m", "gapscope", "report", "--json", "--no-cache",
                              os.path.join(HERE, "traces", var + ".json.gz")], cwd=HERE, capture_output=True,
                             text=True, check=True)
        doc = json.loads(out.stdout)
        act = next((x for x in doc["actions"] if x["kind"] == kind and
                    (word in x["change"] or word in ((x.get("where") or {}).get("frame") or ""))), None)
        gv, gf = meta(var), meta(fix)
        (mv, nv), (mf, nf) = step_us(gv), step_us(gf)
        inter = set((gv.get("unprofiled") or {}).get("interleaved") or []) >= {gv.get("phase"), gf.get("phase")}
        if act is None:
            print(f"| {var} | (no {kind} action) | – | – | {100 * (1 - mf / mv):.1f}% / {100 * (1 - nf / nv):.1f}% | {inter} |")
            continue
        print(f"| {var} | {act['change'][:90]} | {act['rank']} | −{act['saving_pct']:.1f}% | "
              f"−{100 * (1 - mf / mv):.1f}% / −{100 * (1 - nf / nv):.1f}% | {inter} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
