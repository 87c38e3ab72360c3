#!/usr/bin/env bash
# CUDA graph replays recorded with their eager reference run (issue #39): the demo in graph mode, a Hugging Face
# Llama decode over a StaticCache eager and replayed from a hand-captured torch.cuda.graph, the same decode under
# torch.compile(mode="reduce-overhead"); each graph recording once more without the reference (--no-graph-reference)
# for what the reference costs; then the capture trap of benchmarks/hf_graphs.py, each variant in its own process.
#
#   OUT=/tmp/g bash benchmarks/record_graphs.sh        # on the GPU node: $OUT/traces.tgz, $OUT/log.txt
#   ONLY="demo hf" OUT=/tmp/g bash benchmarks/record_graphs.sh    # only some (demo hf compile trap)
set -u
OUT=${OUT:-bench_out}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-540}
ONLY=${ONLY:-demo hf compile trap}
LOG="$OUT/log.txt"
T="$OUT/traces"
mkdir -p "$T"
export PYTHONUNBUFFERED=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
export RUN_SHOW=${RUN_SHOW:-'^wrote|error|Error|un-profiled times|replays without|Assertion|check|capture failed'}
{ date -u; nproc; uptime; nvidia-smi --query-gpu=name,driver_version --format=csv 2>/dev/null;
  $PY -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'; } >>"$LOG" 2>&1

. "$(dirname "$0")/lib.sh"
O="--out $T --overwrite --repeats 10 --budget 4 --max-rounds 40"
want() { case " $ONLY " in *" $1 "*) return 0;; esac; return 1; }
want demo && run demo 90 $PY -m capture demo --mode graph --phase both --name demo-graph-ref $O
want demo && run demo-noref 60 $PY -m capture demo --mode graph --phase decode --name demo-graph-noref \
    --no-graph-reference $O
want hf && run hf 120 $PY -m capture run benchmarks.hf_graphs:decode --name hf-graphs --active 4 $O
want hf && run hf-noref 100 $PY -m capture run benchmarks.hf_graphs:decode --name hf-graphs-noref --active 4 \
    --no-graph-reference $O
want compile && run compile 240 $PY -m capture run benchmarks.hf_graphs:compiled --name hf-compile --active 4 $O
for v in check rebind pinned pageable; do
    want trap && run trap-$v 60 $PY -m benchmarks.hf_graphs trap $v
done
ls -la "$T" >>"$LOG"
(cd "$OUT" && tar czf traces.tgz traces) && rm -rf "$T"   # one file back (the traces are gzip'd already)
echo "done in $SECONDS s" | tee -a "$LOG"
