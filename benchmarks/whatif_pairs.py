"""Un-profiled step times of the demo's variants, interleaved, for issue #14's what-if check.

    python3 benchmarks/whatif_pairs.py --out benchmarks/whatif_measured.json [--size full] [--rounds 40]
                                       [--budget 90] [--max-rounds 100]

One process holds one ``capture.demo.Demo`` per variant (same seed, so the same weights): the clean
eager model (``eager``), a second clean one (``eager-null``: the same-versus-same pair, i.e. the noise
floor of a saving), one per ``--inject`` cause the demo supports (``sync``, ``alloc``, ``python``,
``copy``, ``sampling``), the CUDA-graph replay (``graph``) and two isolating variants: ``sync-noitem``
(the sync check's ``abs().amax()`` without ``.item()``) and ``alloc-keep`` (the churn's fresh buffer and
fill without ``empty_cache()``), so that a bad variant against its isolating twin measures what the
finding's fix alone saves (``saving_pct_fix_only``). No profiler runs in the process.

Every round times each variant once per phase (prefill: 1 step a sample; decode: 4 steps a sample,
like ``capture demo``'s windows), the variant order reversed every other round. Before each timed
sample one untimed step of the same variant runs, so that what the previous variant left behind (the
``alloc`` variant's ``empty_cache()`` empties the caching allocator of every model in the process) is
not charged to the next one. Each sample is synchronise, host clock, steps, synchronise, host clock.

Output (JSON), keys ``"<variant>.<phase>"``, times per step in microseconds::

    {"<variant>.<phase>": {"min_us", "p25_us", "median_us", "p75_us", "max_us", "n",
                           "steps_per_sample", "samples_us": [per step, in round order],
                           "saving_pct": {"vs": "<variant>.<phase>", "median", "p25", "p75"}},
     "_meta": {...}}

``saving_pct`` is the relative saving of the fix, paired by round: for an injected cause,
``100 * (variant - eager) / variant`` (what removing the cause buys, as a share of the bad step);
for ``graph``, ``100 * (eager - graph) / eager`` (what graph replay buys over eager); its p25..p75 is
over the rounds. ``saving_pct_fix_only`` (``sync``, ``alloc``): ``100 * (variant - isolating) / variant``.
``--frame-times N`` adds, per injected variant and phase, ``frame_us``: N more samples with the injected
function wrapped in a host clock (its wall time per step, waits included, and the step's; ``sampling``
split into ``d2h``, ``softmax``, ``multinomial``, ``h2d``), taken after the rounds. ``sampling`` has no
prefill (it samples after decode steps only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

VARIANTS = ("eager", "eager-null", "sync", "alloc", "python", "copy", "sampling", "graph", "sync-noitem", "alloc-keep")
INJECTED = ("sync", "alloc", "python", "copy", "sampling", "sync-noitem", "alloc-keep")
#: isolating variants: the bad variant less only what its finding's fix removes (the sync, the allocator calls)
FIX_ONLY = {"sync": "sync-noitem", "alloc": "alloc-keep"}
#: the injected function(s) of each variant, timed by --frame-times
FRAMES = {"sync": "_inject_sync_check", "alloc": "_inject_allocator_churn", "python": "_host_bookkeeping",
          "copy": "_inject_pageable_copy", "sampling": "_inject_host_sampling", "sync-noitem": "_inject_sync_ops",
          "alloc-keep": "_inject_fresh_buffer"}
ACTIVE = {"prefill": 1, "decode": 4}


def _q(xs):
    v = sorted(xs)
    if len(v) == 1:
        return v[0], v[0], v[0]

    def q(f):
        pos = f * (len(v) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (pos - lo)

    return q(0.25), q(0.5), q(0.75)


def _frame_times(steps, n, sync):
    """Per injected variant and phase: n samples with the injected function wrapped in a host clock; per step,
    the function's wall time (its waits for the GPU included) and the step's (median, p25, p75, in us)."""
    import torch

    from gapscope.capture import demo as dm

    out = {}
    for (v, ph), st in steps.items():
        name = FRAMES.get(v)
        if name is None:
            continue
        orig = getattr(dm, name)
        acc = {"frame": 0.0}
        parts: dict[str, float] = {}

        def timed(*a, _orig=orig, **k):
            t = time.perf_counter_ns()
            try:
                return _orig(*a, **k)
            finally:
                acc["frame"] += time.perf_counter_ns() - t

        def sampling(logits, out_ids):  # _inject_host_sampling, line by line
            t = [time.perf_counter_ns()]
            last = logits[:, -1, :].float().cpu()
            t.append(time.perf_counter_ns())
            probs = torch.softmax(last / 0.8, dim=-1)
            t.append(time.perf_counter_ns())
            toks = torch.multinomial(probs, 1)
            t.append(time.perf_counter_ns())
            out_ids.copy_(toks.to(out_ids.device))
            t.append(time.perf_counter_ns())
            for i, part in enumerate(("d2h", "softmax", "multinomial", "h2d")):
                parts[part] = parts.get(part, 0.0) + t[i + 1] - t[i]
            acc["frame"] += t[-1] - t[0]

        setattr(dm, name, sampling if v == "sampling" else timed)
        fr, sp, pp = [], [], {}
        try:
            for _ in range(n):
                st()
                sync()
                acc["frame"] = 0.0
                parts.clear()
                a = time.perf_counter_ns()
                for _ in range(ACTIVE[ph]):
                    st()
                sync()
                sp.append((time.perf_counter_ns() - a) / 1000.0 / ACTIVE[ph])
                fr.append(acc["frame"] / 1000.0 / ACTIVE[ph])
                for k2, x in parts.items():
                    pp.setdefault(k2, []).append(x / 1000.0 / ACTIVE[ph])
        finally:
            setattr(dm, name, orig)
        q = (lambda xs: dict(zip(("p25", "median", "p75"), (round(x, 2) for x in _q(xs)))))
        out[(v, ph)] = {"function": name, "n": n, "frame": q(fr), "step": q(sp),
                        **({"parts": {k2: q(x) for k2, x in pp.items()}} if pp else {})}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="full")
    ap.add_argument("--rounds", type=int, default=40, help="at least this many rounds")
    ap.add_argument("--budget", type=float, default=90.0, help="more rounds while the rounds took less than S seconds")
    ap.add_argument("--max-rounds", type=int, default=100)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--frame-times", type=int, default=0, metavar="N",
                    help="after the rounds, N more samples per injected variant with its injected function timed "
                         "(host wall time per step, un-profiled; sampling also split into its parts)")
    args = ap.parse_args(argv)

    import torch

    from gapscope.capture.demo import Demo

    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    variants = [v for v in args.variants.split(",") if v and (cuda or v != "graph")]
    demos, steps = {}, {}
    t_build = time.monotonic()
    for v in variants:
        mode = "graph" if v == "graph" else "eager"
        inject = v if v in INJECTED else None
        d = Demo(args.size, mode, inject, device=dev)
        d.fill_cache()
        demos[v] = d
        for ph in ("prefill", "decode"):
            if ph == "prefill" and v == "sampling":
                continue
            steps[(v, ph)] = d.step_fn(ph)
    print(f"built {len(demos)} models in {time.monotonic() - t_build:.1f} s", flush=True)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for key, st in steps.items():
        for _ in range(args.warmup):
            st()
    sync()
    order = list(steps)
    samples = {k: [] for k in order}
    t0 = time.monotonic()
    rounds = 0
    while True:
        seq = order if rounds % 2 == 0 else order[::-1]
        for key in seq:
            st = steps[key]
            st()  # untimed: refill what the previous variant emptied
            sync()
            a = time.perf_counter_ns()
            for _ in range(ACTIVE[key[1]]):
                st()
            sync()
            samples[key].append((time.perf_counter_ns() - a) / 1000.0 / ACTIVE[key[1]])
        rounds += 1
        if rounds >= args.max_rounds or (rounds >= args.rounds and time.monotonic() - t0 >= args.budget):
            break
    took = time.monotonic() - t0
    frames = _frame_times(steps, args.frame_times, sync) if args.frame_times > 0 else {}

    out: dict = {}
    for (v, ph), xs in samples.items():
        p25, med, p75 = _q(xs)
        out[f"{v}.{ph}"] = {"min_us": min(xs), "p25_us": p25, "median_us": med, "p75_us": p75, "max_us": max(xs),
                            "n": len(xs), "steps_per_sample": ACTIVE[ph], "samples_us": [round(x, 2) for x in xs]}
    for (v, ph), xs in samples.items():
        base = samples.get(("eager", ph))
        if v == "eager" or base is None:
            continue
        if v == "graph":
            rel = [100.0 * (e - g) / e for e, g in zip(base, xs)]
        else:
            rel = [100.0 * (x - e) / x for e, x in zip(base, xs)]
        p25, med, p75 = _q(rel)
        out[f"{v}.{ph}"]["saving_pct"] = {"vs": f"eager.{ph}", "median": med, "p25": p25, "p75": p75}
        iso = samples.get((FIX_ONLY.get(v), ph))
        if iso is not None:  # what the finding's fix alone saves: the bad variant against its isolating twin
            p25, med, p75 = _q([100.0 * (x - i) / x for i, x in zip(iso, xs)])
            out[f"{v}.{ph}"]["saving_pct_fix_only"] = {"vs": f"{FIX_ONLY[v]}.{ph}", "median": med, "p25": p25,
                                                       "p75": p75}
    for key, fr in frames.items():
        out[f"{key[0]}.{key[1]}"]["frame_us"] = fr
    meta = {"rounds": rounds, "seconds": took, "size": args.size, "order": [f"{v}.{p}" for v, p in order],
            "frame_times": args.frame_times, "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "device": torch.cuda.get_device_name() if cuda else "cpu", "host_cpus": os.cpu_count(),
            "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "method": "one process, one Demo per variant; every round times each variant once per phase, order "
                      "reversed every other round; one untimed step before each sample; per-step times in us"}
    out["_meta"] = meta
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"{rounds} rounds in {took:.1f} s; per step, us (median, p25-p75, min, n), saving of the fix paired by round")
    for k, r in out.items():
        if k.startswith("_"):
            continue
        s = r.get("saving_pct")
        sv = f"  saving {s['median']:6.1f}% ({s['p25']:.1f}..{s['p75']:.1f})" if s else ""
        fo = r.get("saving_pct_fix_only")
        sv += f"  fix only {fo['median']:6.1f}% ({fo['p25']:.1f}..{fo['p75']:.1f})" if fo else ""
        fr = r.get("frame_us")
        sv += f"  frame {fr['frame']['median']:.1f} of {fr['step']['median']:.1f} us/step" if fr else ""
        sv += "".join(f" {k2} {x['median']:.1f}" for k2, x in (fr or {}).get("parts", {}).items())
        print(f"{k:20} {r['median_us']:10.1f} ({r['p25_us']:.1f}-{r['p75_us']:.1f}) min {r['min_us']:.1f} n={r['n']}{sv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
