#!/usr/bin/env bash
# One GPU, one batch: measured what-if pairs, the demo's sample traces, and a Hugging Face Llama.
#
#   OUT=/tmp/w bash benchmarks/record_whatif.sh               # from a folder holding capture/ and benchmarks/
#   OUT=/tmp/w SIZE=tiny bash benchmarks/record_whatif.sh     # a check on a CPU (graph and compile skipped)
#
# 1. benchmarks/whatif_pairs.py: un-profiled step times of every demo variant, interleaved rounds, in one
#    process -> $OUT/whatif_measured.json (the form is in that script's docstring and benchmarks/README.md);
# 2. benchmarks/hf_llama.py through `capture run`: generate / prefill / decode of a transformers Llama with
#    random weights -> hf-llama.{generate,prefill,decode}.json.gz (WHEELS=DIR: installed from there first
#    when `import transformers` fails);
# 3. `capture demo --size full` for each sample trace name in traces/ (one GPU; the two-rank ones are not
#    recorded here) -> demo-*.json.gz;
# 4. torch.compile decode last, if the budget allows.
# Traces land in $OUT/traces/ and come back as $OUT/traces.tar; everything printed is in $OUT/log.txt.
set -u
OUT=${OUT:-bench_out}
SIZE=${SIZE:-full}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-560}  # seconds for the whole script; later steps get what is left
T="$OUT/traces"
LOG="$OUT/log.txt"
mkdir -p "$T"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}

# run LABEL SECONDS COMMAND...: benchmarks/lib.sh, with a wider margin, the start line and the
# command's highlights printed as well (skipped when the budget is spent)
. "$(dirname "$0")/lib.sh"
RUN_MARGIN=15 RUN_MIN=20
RUN_SHOW='^(wrote|  un-profiled|[a-z-]+\.(decode|prefill) |[0-9]+ rounds|built|gapscope: error)'
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1 || true
    nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv 2>&1 || true
    nproc; uptime
    $PY -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
} >>"$LOG" 2>&1
CUDA_OK=$($PY -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)

# 1. measured pairs
ROUNDS=${ROUNDS:-40}
PAIRS_BUDGET=${PAIRS_BUDGET:-45}
FRAME_TIMES=${FRAME_TIMES:-0}  # N > 0: also the injected functions' own wall times (whatif_pairs.py --frame-times N)
FT=()
[ "$FRAME_TIMES" -gt 0 ] && FT=(--frame-times "$FRAME_TIMES")
run pairs 130 $PY benchmarks/whatif_pairs.py --out "$OUT/whatif_measured.json" --size "$SIZE" --rounds "$ROUNDS" \
    --budget "$PAIRS_BUDGET" --max-rounds 100 "${FT[@]}"

# 2. Hugging Face Llama (random weights, no download)
if ! $PY -c 'import transformers' >/dev/null 2>&1 && [ -n "${WHEELS:-}" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS"/*.whl >>"$LOG" 2>&1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
$PY -c 'import transformers, sys; print("transformers", transformers.__version__)' >>"$LOG" 2>&1
HF_SIZE=full
[ "$SIZE" = tiny ] && HF_SIZE=tiny
if $PY -c 'import transformers' >/dev/null 2>&1; then
    HF_LLAMA_SIZE=$HF_SIZE run hf-llama 110 $PY -m capture run benchmarks.hf_llama:steps --name hf-llama --out "$T" --overwrite
else
    echo "=== hf-llama: skipped, no transformers (WHEELS=DIR installs it)" | tee -a "$LOG"
fi

# 3. the demo's one-GPU sample traces, under the names traces/ has
demo() {  # demo LABEL SECONDS OPTIONS...
    local label=$1 limit=$2
    shift 2
    run "$label" "$limit" $PY -m capture demo --size "$SIZE" --out "$T" --overwrite "$@"
}
# the what-if pairs' traces first, the other samples after them
demo eager 50 --phase both
for c in sync alloc python copy; do
    demo "eager-$c" 50 --phase both --inject "$c"
done
demo eager-sampling 50 --phase decode --inject sampling
[ "$CUDA_OK" = 1 ] && demo graph 45 --mode graph --phase both
demo eager-nostacks 45 --phase both --no-stacks
# 4. torch.compile last (its warm-up compiles); COMPILE=0 skips it
[ "$CUDA_OK" = 1 ] && [ "${COMPILE:-1}" = 1 ] && demo compile 150 --mode compile --phase decode --dist-timeout 600
# 5. the pairs once more at the end (PAIRS_AGAIN=1): how far the node drifted while the traces were recorded
[ "${PAIRS_AGAIN:-0}" = 1 ] && run pairs-again 130 $PY benchmarks/whatif_pairs.py --out "$OUT/whatif_measured_run2.json" \
    --size "$SIZE" --rounds "$ROUNDS" --budget "$PAIRS_BUDGET" --max-rounds 100 "${FT[@]}"

# one line per trace from its own metadata (stdlib only)
$PY - "$T" <<'EOF' 2>&1 | tee -a "$LOG"
import gzip, json, os, sys
root = sys.argv[1]
for f in sorted(os.listdir(root)):
    if not f.endswith(".json.gz"):
        continue
    try:
        g = json.loads(gzip.decompress(open(os.path.join(root, f), "rb").read())).get("gapscope", {})
    except Exception as exc:
        print(f"{f}: unreadable ({type(exc).__name__}: {exc})")
        continue
    u = g.get("unprofiled") or {}
    ms = lambda x: f"{x / 1000:.2f}" if isinstance(x, (int, float)) else "-"
    print(f"{f:42} un-prof median {ms(u.get('median_us'))} (p25 {ms(u.get('p25_us'))}, p75 {ms(u.get('p75_us'))}, "
          f"min {ms(u.get('min_us'))}, max {ms(u.get('max_us'))}, n {u.get('n')}) prof {ms(g.get('profiled_us'))} ms "
          f"distortion {g.get('distortion') or 0:.2f}x noisy={g.get('timing_noisy')} "
          f"{os.path.getsize(os.path.join(root, f)) // 1024} KiB")
EOF
(cd "$T" && tar -cf ../traces.tar ./*.json.gz)
rm -rf "$T"
echo "done in $SECONDS s" | tee -a "$LOG"
