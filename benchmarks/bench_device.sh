#!/usr/bin/env bash
# The load / open / key benchmarks on a quiet 2-CPU slice of another machine (our GPU node: 16 cores, idle),
# for numbers this shared 2-core VM cannot give. Run by hand, from the repository root:
#
#   OUT=/some/dir WHEELS=.devwheels bash benchmarks/bench_device.sh [open|keys|both]
#
# WHEELS: a folder of wheels for the viewer's dependencies (textual, orjson, msgspec and theirs; numpy must be
# there already), for a machine that cannot reach an index. Every benchmark process is pinned to CPUs 0 and 1
# (taskset), so it sees two cores, as on the laptop-class machine the targets are set for.
set -euo pipefail
OUT=${OUT:-/tmp/gapscope-device}
WHEELS=${WHEELS:-.devwheels}
WHAT=${1:-both}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --find-links "$WHEELS" --target /tmp/gsdeps textual orjson msgspec
export PYTHONPATH=/tmp/gsdeps${PYTHONPATH:+:$PYTHONPATH}
PY=python3
$PY -c "import sys, numpy, orjson, msgspec, textual; print(sys.version.split()[0], 'numpy', numpy.__version__, 'orjson', orjson.__version__, 'msgspec', msgspec.__version__, 'textual', textual.__version__)" | tee "$OUT/versions.txt"
nproc; lscpu | grep -E "Model name|^CPU\(s\)" | tee "$OUT/cpu.txt"
[ -f /tmp/gapscope-bench/big_1G.json ] || $PY benchmarks/gen_big.py /tmp/gapscope-bench
if [ "$WHAT" != keys ]; then
  taskset -c 0,1 $PY benchmarks/bench_open.py 2>&1 | tee "$OUT/bench_open.txt"
fi
if [ "$WHAT" != open ]; then
  taskset -c 0,1 $PY benchmarks/bench_open.py --keys-only /tmp/gapscope-bench/big_1G.json 2>&1 | tee "$OUT/bench_keys.txt"
fi
