#!/usr/bin/env bash
# Real clients recorded as a user would, with `capture run` (benchmarks/hf_clients.py): each FUNC returns a variant
# and its fix as two phases, timed un-profiled in the same interleaved rounds, then recorded one trace per phase.
#
#   OUT=/tmp/c bash benchmarks/record_clients.sh                 # on the GPU node (CUDA, transformers, torchvision)
#   OUT=/tmp/c HF_CLIENTS_SIZE=tiny CPU=--cpu bash benchmarks/record_clients.sh   # a check of the script on a CPU
set -u
OUT=${OUT:-bench_out}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-560}
CPU=${CPU:-}
LOG="$OUT/log.txt"
T="$OUT/t"
mkdir -p "$T"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
{ date -u; nproc; uptime; nvidia-smi --query-gpu=name,driver_version --format=csv 2>/dev/null; } >>"$LOG" 2>&1

# run LABEL SECONDS COMMAND...  (skipped when the budget is spent)
. "$(dirname "$0")/lib.sh"
C="$PY -m capture run --out $T --overwrite --repeats 20 --budget 20 --max-rounds 60 $CPU"
run mixtral 150 $C benchmarks.hf_clients:mixtral --name hf-mixtral --active 4
run attention 90 $C benchmarks.hf_clients:attention --name hf-attn
run mlp 90 $C benchmarks.hf_clients:mlp_width --name hf-mlp
run sampling 90 $C benchmarks.hf_clients:sampling --name hf-sampling --active 4
run generate 90 $C benchmarks.hf_clients:generate --name hf-generate
run resnet 90 $C benchmarks.hf_clients:resnet --name resnet50
ls -la "$T" >>"$LOG"
(cd "$T" && tar -cf "$OUT/clients-hf.tar" hf-*.json.gz 2>/dev/null; tar -cf "$OUT/clients-resnet.tar" resnet50*.json.gz 2>/dev/null)
rm -rf "$T"
echo "done in $SECONDS s" | tee -a "$LOG"
