#!/usr/bin/env bash
# The what-if pairs' traces recorded ATTEMPTS times each, interleaved (attempt 1 of every variant, then attempt 2,
# ...), with the measured pairs (benchmarks/whatif_pairs.py) before and after: issue #14's check on a node whose
# host speed drifts. A capture times its un-profiled steps in interleaved rounds just before its profiled window;
# on a node that switches between a fast and a slow state within minutes (seen on the H200 node: an alloc decode
# step timed 12.0 ms for 40 rounds, then 7.5 ms), one capture's timing may not describe its own window, and the
# capture says so (timing_noisy, "distortion uncertain"). benchmarks/pick_steady.py then keeps, per trace name, the
# attempt whose timing was steadiest (smallest p75/p25), without looking at any projection.
#
#   OUT=/tmp/s bash benchmarks/record_steady.sh              # full size, needs CUDA
#   OUT=/tmp/s SIZE=tiny ATTEMPTS=1 bash benchmarks/record_steady.sh   # a check of the script on a CPU
set -u
OUT=${OUT:-bench_out}
SIZE=${SIZE:-full}
PY=${PYTHON:-python3}
ATTEMPTS=${ATTEMPTS:-3}
BUDGET=${BUDGET:-560}
LOG="$OUT/log.txt"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
CUDA_OK=$($PY -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
{ date -u; nproc; uptime; } >>"$LOG" 2>&1

# run LABEL SECONDS COMMAND...  (skipped when the budget is spent)
. "$(dirname "$0")/lib.sh"
pairs() {
    run "pairs-$1" 90 $PY benchmarks/whatif_pairs.py --out "$OUT/whatif_measured_$1.json" --size "$SIZE" --rounds 40 \
        --budget 40 --max-rounds 100
}
pairs before
for a in $(seq 1 "$ATTEMPTS"); do
    T="$OUT/a$a"
    mkdir -p "$T"
    D="$PY -m capture demo --size $SIZE --out $T --overwrite"
    run "a$a-eager" 40 $D --phase both
    for c in sync alloc python copy; do run "a$a-$c" 40 $D --phase both --inject "$c"; done
    run "a$a-sampling" 40 $D --phase decode --inject sampling
    [ "$CUDA_OK" = 1 ] && run "a$a-graph" 40 $D --mode graph --phase both
done
pairs after
(cd "$OUT" && tar -cf traces.tar a*/ && rm -rf a*/)
echo "done in $SECONDS s" | tee -a "$LOG"
