#!/usr/bin/env bash
# Profiler distortion of the demo on ONE GPU, strictly sequential (nothing else runs meanwhile), each
# configuration recorded twice (two independent processes) so that run-to-run spread shows:
#
#   eager            python3 -m capture demo --size full --repeats 10 --phase both
#   eager-nostacks   ... --no-stacks
#   graph            ... --mode graph
#   graph-nostacks   ... --mode graph --no-stacks
#
#   OUT=/tmp/dist bash benchmarks/record_distortion.sh              # full size, one CUDA GPU
#   OUT=/tmp/dist SIZE=tiny bash benchmarks/record_distortion.sh    # check the script on a CPU (graph skipped)
#
# Writes $OUT/log.txt (everything), $OUT/table.txt (un-profiled / profiled / distortion per trace and run,
# CPU time of the gapscope.step#k ranges with and without stacks) and $OUT/traces.tar (run1/, run2/).
# A last check times eager decode in one process before and after a profiler session (the reason why
# capture times every phase before its first window). One failing recording does not stop the others.
set -u
OUT=${OUT:-bench_out}
SIZE=${SIZE:-full}
REPEATS=${REPEATS:-10}
PY=${PYTHON:-python3}
T="$OUT/traces"
LOG="$OUT/log.txt"
mkdir -p "$T"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}  # one GPU

BUDGET=${BUDGET:-390}  # seconds for the whole script; later recordings get what is left
rec() {  # rec LABEL SECONDS COMMAND...   (skipped when the budget is spent)
    local label=$1 limit=$2
    shift 2
    local left=$((BUDGET - SECONDS - 25))  # keep time for the table and the tar
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 15 ]; then
        echo "=== $label: skipped, budget spent" | tee -a "$LOG"
        return
    fi
    local t0=$SECONDS
    echo "=== $label: start $(date -u +%T): $*" >>"$LOG"
    timeout "$limit" "$@" >"$OUT/.$label.log" 2>&1
    local rc=$?
    { cat "$OUT/.$label.log"; echo "=== $label: rc=$rc in $((SECONDS - t0)) s"; } >>"$LOG"
    rm -f "$OUT/.$label.log"
    echo "=== $label: rc=$rc in $((SECONDS - t0)) s"
}
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1 || true
    nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv 2>&1 || true  # should be empty
    nproc; uptime
    $PY -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
    echo "TEARDOWN_CUPTI=${TEARDOWN_CUPTI-unset}"
} >>"$LOG" 2>&1
CUDA_OK=$($PY -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)

CONFIGS="eager eager-nostacks graph graph-nostacks"
for run in 1 2; do
    mkdir -p "$T/run$run"
    for cfg in $CONFIGS; do
        opts=""
        case $cfg in
            eager) opts="" ;;
            eager-nostacks) opts="--no-stacks" ;;
            graph) opts="--mode graph" ;;
            graph-nostacks) opts="--mode graph --no-stacks" ;;
        esac
        if [ "$CUDA_OK" != 1 ] && [ "${cfg#graph}" != "$cfg" ]; then
            echo "=== run$run-$cfg: skipped, --mode graph needs CUDA" | tee -a "$LOG"
            continue
        fi
        # shellcheck disable=SC2086  # opts is a word list
        rec "run$run-$cfg" 120 $PY -m capture demo --size "$SIZE" --repeats "$REPEATS" --phase both $opts --out "$T/run$run"
    done
done

# Does a profiler session slow the un-profiled steps that come after it in the same process?
rec post-profiler 90 $PY - "$SIZE" "$REPEATS" <<'EOF'
import statistics, sys, time
import torch
from gapscope.capture import demo as demo_mod
from gapscope.capture.recorder import measure
size, repeats = sys.argv[1], int(sys.argv[2])
cuda = torch.cuda.is_available()
d = demo_mod.Demo(size, "eager", device="cuda" if cuda else "cpu")
d.fill_cache()
step = d.step_fn("decode")
acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
def ms(t):
    return f"median {t.median_ns / 1e6:.2f} ms (min {min(t.samples_ns) / 1e6:.2f}, max {max(t.samples_ns) / 1e6:.2f})"
before = measure(step, warmup=3, active=4, repeats=repeats, cuda=cuda)
print("eager decode, 4 steps, un-profiled, before any profiler:", ms(before))
with torch.profiler.profile(activities=acts, record_shapes=True, with_stack=True):
    for _ in range(4):
        step()
    if cuda:
        torch.cuda.synchronize()
for k in range(3):
    after = measure(step, warmup=3, active=4, repeats=repeats, cuda=cuda)
    print(f"eager decode, 4 steps, un-profiled, after a profiler session (#{k + 1}):", ms(after),
          f"{after.median_ns / before.median_ns:.2f}x")
    time.sleep(1)
EOF

# Table: from each trace's own metadata, plus the CPU time of the step ranges (stdlib only)
$PY - "$T" <<'EOF' 2>&1 | tee "$OUT/table.txt" | tee -a "$LOG"
import gzip, json, os, statistics, sys
root = sys.argv[1]
rows = {}
for run in sorted(os.listdir(root)):
    d = os.path.join(root, run)
    if not os.path.isdir(d):
        continue
    for f in sorted(os.listdir(d)):
        if not f.endswith(".json.gz"):
            continue
        try:
            doc = json.loads(gzip.decompress(open(os.path.join(d, f), "rb").read()))
        except Exception as exc:
            print(f"{run}/{f}: unreadable ({type(exc).__name__}: {exc})")
            continue
        g = doc.get("gapscope", {})
        ev = doc.get("traceEvents", [])
        steps = [e for e in ev if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("gapscope.step#")]
        cfg, phase = f[: -len(".json.gz")].rsplit(".", 1)
        cfg = cfg.replace("demo-", "", 1)
        s = g.get("unprofiled_samples_us") or []
        rows[(cfg, phase, run)] = dict(
            u=g.get("unprofiled_us"), lo=min(s) if s else None, hi=max(s) if s else None, p=g.get("profiled_us"),
            d=g.get("distortion"), cpu=sum(float(e.get("dur", 0)) for e in steps), n=len(steps), events=len(ev),
            py=sum(1 for e in ev if e.get("cat") == "python_function"), after=g.get("timed_after_profiler"),
            dev=g.get("device"), torch=g.get("torch"), kib=os.path.getsize(os.path.join(d, f)) // 1024)
if not rows:
    print("no traces")
    sys.exit(1)
ms = lambda x, w=8: f"{x / 1000:>{w}.2f}" if isinstance(x, (int, float)) else f"{'-':>{w}}"
print("times in ms; un-prof = median of the un-profiled samples (min..max shown); prof = the profiled window;")
print("step CPU = sum of the gapscope.step#k ranges on the CPU; prefill = 1 step, decode = 4 steps")
print(f"{'config':16} {'phase':8} {'run':5} {'un-prof':>8} {'min':>7} {'max':>7} {'prof':>8} {'distort':>7} {'stepCPU':>8} {'events':>7} {'pyfr':>6} {'KiB':>6} after_prof")
order = ["eager", "eager-nostacks", "graph", "graph-nostacks"]
keys = sorted(rows, key=lambda k: (order.index(k[0]) if k[0] in order else 9, k[0], k[1] != "prefill", k[2]))
for k in keys:
    r = rows[k]
    dd = f"{r['d']:>6.2f}x" if isinstance(r["d"], (int, float)) else f"{'-':>7}"
    print(f"{k[0]:16} {k[1]:8} {k[2]:5} {ms(r['u'])} {ms(r['lo'], 7)} {ms(r['hi'], 7)} {ms(r['p'])} {dd} {ms(r['cpu'])} {r['events']:>7} {r['py']:>6} {r['kib']:>6} {r['after']}")
print()
print("with_stack inflation of the CPU time of the steps (stacks / no stacks, same run number):")
for mode in ("eager", "graph"):
    for phase in ("prefill", "decode"):
        parts = []
        for run in sorted({k[2] for k in rows}):
            a, b = rows.get((mode, phase, run)), rows.get((mode + "-nostacks", phase, run))
            if a and b and b["cpu"] > 0:
                parts.append(f"{run}: {a['cpu'] / 1000:.2f} / {b['cpu'] / 1000:.2f} ms = {a['cpu'] / b['cpu']:.2f}x"
                             f" (window {a['p'] / b['p']:.2f}x)")
        if parts:
            print(f"  {mode:6} {phase:8} " + "; ".join(parts))
print()
print("distortion per configuration (run1, run2):")
for cfg in order:
    for phase in ("prefill", "decode"):
        ds = [rows[(cfg, phase, run)]["d"] for run in sorted({k[2] for k in rows}) if (cfg, phase, run) in rows]
        if ds:
            print(f"  {cfg:16} {phase:8} " + ", ".join(f"{x:.2f}x" for x in ds))
r0 = rows[keys[0]]
print("device:", r0["dev"], " torch:", r0["torch"])
EOF
grep -E "^eager decode" "$LOG" | tee -a "$OUT/table.txt"

(cd "$T" && tar -cf ../traces.tar run1 run2 2>/dev/null || tar -cf ../traces.tar run1)
ls -laR "$T" >>"$LOG"
du -sh "$OUT/traces.tar" | tee -a "$LOG"
rm -rf "$T"  # the traces come back in traces.tar
echo "done in $SECONDS s" | tee -a "$LOG"
