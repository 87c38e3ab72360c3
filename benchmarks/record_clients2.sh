#!/usr/bin/env bash
# More real clients (benchmarks/hf_clients2.py), recorded as record_clients.sh does: each FUNC returns a pathology and
# its fix as two phases, timed un-profiled in the same interleaved rounds, then recorded one trace per phase.
#
#   OUT=/tmp/c bash benchmarks/record_clients2.sh                     # on the GPU node: $OUT/traces.tgz, $OUT/log.txt
#   OUT=/tmp/c HF_CLIENTS_SIZE=tiny CPU=--cpu bash benchmarks/record_clients2.sh   # a check of the script on a CPU
#   ONLY="penalty sync" OUT=/tmp/c bash benchmarks/record_clients2.sh # only some pairs (autocast penalty pageable sync)
set -u
OUT=${OUT:-bench_out}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-540}
CPU=${CPU:-}
ONLY=${ONLY:-autocast penalty pageable sync}
LOG="$OUT/log.txt"
T="$OUT/traces"
mkdir -p "$T"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
export RUN_SHOW=${RUN_SHOW:-'^wrote|error|Error|un-profiled times'}
{ date -u; nproc; uptime; nvidia-smi --query-gpu=name,driver_version --format=csv 2>/dev/null;
  $PY -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'; } >>"$LOG" 2>&1

# run LABEL SECONDS COMMAND...  (skipped when the budget is spent)
. "$(dirname "$0")/lib.sh"
C="$PY -m capture run --out $T --overwrite --repeats 20 --budget 20 --max-rounds 60 $CPU"
want() { case " $ONLY " in *" $1 "*) return 0;; esac; return 1; }
want autocast && run autocast 120 $C benchmarks.hf_clients2:autocast_weights --name hf-autocast
want penalty && run penalty 120 $C benchmarks.hf_clients2:penalty_loop --name hf-penalty --active 4
want pageable && run pageable 120 $C benchmarks.hf_clients2:pageable_input --name hf-pageable
want sync && run sync 120 $C benchmarks.hf_clients2:sync_hook --name hf-synchook --active 4
ls -la "$T" >>"$LOG"
(cd "$OUT" && tar czf traces.tgz traces) && rm -rf "$T"   # one file back (the traces are gzip'd already)
echo "done in $SECONDS s" | tee -a "$LOG"
