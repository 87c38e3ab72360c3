#!/usr/bin/env bash
# Real clients, round three (benchmarks/hf_clients3.py), recorded as record_clients.sh does: each FUNC returns a
# pathology and its fix as two phases, timed un-profiled in the same interleaved rounds, then recorded one trace per
# phase.
#
#   OUT=/tmp/c bash benchmarks/record_clients3.sh                     # on the GPU node: $OUT/traces.tgz, $OUT/log.txt
#   OUT=/tmp/c HF_CLIENTS_SIZE=tiny CPU=--cpu bash benchmarks/record_clients3.sh   # a check of the script on a CPU
#   ONLY="timer gil" OUT=/tmp/c bash benchmarks/record_clients3.sh    # only some pairs (timer gil autotune wcopy wcast)
set -u
OUT=${OUT:-bench_out}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-480}
CPU=${CPU:-}
ONLY=${ONLY:-timer gil autotune wcopy wcast}
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
want timer && run timer 110 $C benchmarks.hf_clients3:layer_timer --name hf-timer --active 4
want gil && run gil 110 $C benchmarks.hf_clients3:metrics_thread --name hf-gil --active 4
want autotune && run autotune 110 $C benchmarks.hf_clients3:conv_shapes --name conv-autotune
want wcopy && run wcopy 110 $C benchmarks.hf_clients3:weight_copy --name mlp-wcopy
want wcast && run wcast 110 $C benchmarks.hf_clients3:weight_cast --name mlp-wcast
ls -la "$T" >>"$LOG"
(cd "$OUT" && tar czf traces.tgz traces) && rm -rf "$T"   # one file back (the traces are gzip'd already)
echo "done in $SECONDS s" | tee -a "$LOG"
