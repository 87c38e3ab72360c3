#!/usr/bin/env bash
# Record the sample traces under traces/ on a CUDA machine (run by hand; two GPUs for the rank traces).
#
#   OUT=/tmp/samples bash benchmarks/record_samples.sh          # full size, needs CUDA
#   OUT=/tmp/samples SIZE=tiny bash benchmarks/record_samples.sh   # quick check of the script on a CPU
#
# Writes $OUT/log.txt (everything), $OUT/table.txt (distortion per trace) and the traces (each already
# gzip'd) in $OUT/eager.tar, $OUT/other.tar (graph, compile) and $OUT/ranks.tar. One failing recording does not stop the others.
# The two streams share the host's CPUs, so their un-profiled times are noisy: for distortion ratios (with and
# without stacks) use benchmarks/record_distortion.sh, one GPU, strictly sequential.
set -u
OUT=${OUT:-bench_out}
SIZE=${SIZE:-full}
PY=${PYTHON:-python3}
T="$OUT/traces"
LOG="$OUT/log.txt"
mkdir -p "$T"
# never use NVLink multicast (shared machines)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

BUDGET=${BUDGET:-540}  # seconds for the whole script; later recordings get what is left
rec() {  # rec LABEL SECONDS COMMAND...   (skipped when the budget is spent)
    local label=$1 limit=$2
    shift 2
    local left=$((BUDGET - SECONDS))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 20 ]; then
        echo "=== $label: skipped, budget spent" | tee -a "$LOG"
        return
    fi
    local t0=$SECONDS
    echo "=== $label: start: $*" >>"$LOG"
    timeout "$limit" "$@" >"$OUT/$label.log" 2>&1
    local rc=$?
    { cat "$OUT/$label.log"; echo "=== $label: rc=$rc in $((SECONDS - t0)) s"; } >>"$LOG"
    rm -f "$OUT/$label.log"
    echo "=== $label: rc=$rc in $((SECONDS - t0)) s"
}
pack() {  # the traces so far, in three files of < 16 MiB each (re-made after each group, so a late kill still returns them)
    (
        cd "$T" || exit
        ls | grep -E '\.json(\.gz)?$' | grep -v -- '-tp' | grep -v -E '^demo-(graph|compile)' >../.eager.lst
        ls | grep -E '^demo-(graph|compile).*\.json\.gz$' >../.other.lst
        ls | grep -E -- '-tp.*\.json(\.gz)?$' >../.ranks.lst
        for g in eager other ranks; do
            if [ -s "../.$g.lst" ]; then tar -cf "../$g.tar.tmp" -T "../.$g.lst" && mv "../$g.tar.tmp" "../$g.tar"; fi
            rm -f "../.$g.lst"
        done
    )
}
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
    $PY -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
    $PY -c 'import numpy; print("numpy", numpy.__version__)' 2>&1 || true
} >>"$LOG" 2>&1
NGPU=$($PY -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)

D="$PY -m capture demo --size $SIZE --repeats 5 --out $T"
# Two streams of single-GPU recordings, one per GPU when there are two. The stacks / no-stacks pair runs
# in the same stream, one after the other, so their timings compare.
stream_a() {
    rec eager-both 120 $D --phase both
    rec eager-decode-nostacks 120 $D --phase decode --no-stacks
    rec graph-both 120 $D --mode graph --phase both
    rec inject-sync 120 $D --phase decode --inject sync
    rec inject-sampling 120 $D --phase decode --inject sampling
}
stream_b() {
    rec inject-copy 120 $D --phase decode --inject copy
    rec inject-alloc 120 $D --phase decode --inject alloc
    rec inject-python 120 $D --phase decode --inject python
    rec compile-decode 200 $D --mode compile --phase decode
}
if [ "${NGPU:-0}" -ge 2 ]; then
    CUDA_VISIBLE_DEVICES=0 stream_a &
    CUDA_VISIBLE_DEVICES=1 stream_b &
    wait
else
    stream_a
    stream_b
fi
pack
if [ "${NGPU:-0}" -ge 2 ] || [ "$SIZE" = tiny ]; then
    TR="$PY -m torch.distributed.run --nproc-per-node 2 -m capture demo --ranks --size $SIZE --repeats 5 --out $T"
    rec ranks-balanced 150 $TR --phase both
    rec ranks-late1 150 $TR --phase decode --late-rank 1 --late-us 2000
    pack
fi
# GPU tests of the capture package, if the project's test dependencies import here
rec gpu-tests 90 $PY -m pytest -q -m gpu -p no:cacheprovider tests/test_capture.py

# table of distortion ratios, from each trace's own metadata (stdlib only)
$PY - "$T" <<'EOF' 2>&1 | tee "$OUT/table.txt" | tee -a "$LOG"
import gzip, json, os, sys
folder = sys.argv[1]
rows = []
for f in sorted(os.listdir(folder)):
    if not f.endswith(".json.gz"):
        continue
    p = os.path.join(folder, f)
    try:
        doc = json.loads(gzip.decompress(open(p, "rb").read()))
    except Exception as exc:
        print(f"{f}: unreadable ({type(exc).__name__}: {exc})")
        continue
    g = doc.get("gapscope", {})
    ev = doc.get("traceEvents", [])
    steps = [e for e in ev if str(e.get("name", "")).startswith("gapscope.step#") and e.get("cat") == "user_annotation"]
    kernels = sum(1 for e in ev if e.get("cat") == "kernel")
    pyfr = sum(1 for e in ev if e.get("cat") == "python_function")
    cpu_step_us = sum(float(e.get("dur", 0)) for e in steps)
    rows.append((f, os.path.getsize(p), g.get("unprofiled_us"), g.get("profiled_us"), g.get("distortion"),
                 cpu_step_us, len(ev), kernels, pyfr, g.get("device"), g.get("torch")))
print(f"{'trace':52} {'KiB':>6} {'unprof_us':>10} {'prof_us':>10} {'distort':>7} {'step_cpu_us':>11} {'events':>7} {'kernels':>7} {'pyframes':>8}")
for f, size, u, pr, d, cs, n, k, py, dev, tv in rows:
    fmt = lambda x, w, p=1: f"{x:>{w}.{p}f}" if isinstance(x, (int, float)) else f"{'-':>{w}}"
    print(f"{f:52} {size // 1024:>6} {fmt(u, 10)} {fmt(pr, 10)} {fmt(d, 7, 2)} {fmt(cs, 11)} {n:>7} {k:>7} {py:>8}")
if rows:
    print("device:", rows[0][9], " torch:", rows[0][10])
EOF

pack
ls -la "$T" >>"$LOG"
du -sh "$OUT"/*.tar | tee -a "$LOG"
rm -rf "$T"  # the traces come back in the tar files
