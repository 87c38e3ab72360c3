"""A longer fuzzing session than CI runs: the properties of tests/test_fuzz_invariants.py (random valid traces,
random event- and byte-level damage; load or TraceError; analysis invariants; report JSON against the schema)
for a given wall-clock time, in rounds of hypothesis examples with fresh seeds.

    python benchmarks/fuzz.py --minutes 10 [--examples 2000] [--seed 1]

Every failure is shrunk by hypothesis and printed (the minimal case and the traceback); the session goes on
with the next round. Exit status 1 when anything failed."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from tests.test_fuzz_invariants import SCHEMA_PATH, check_case, traces  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--examples", type=int, default=2000, help="examples per round")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    schema = json.loads(SCHEMA_PATH.read_text())  # shipped in the package: a missing schema is an error
    deadline = time.monotonic() + args.minutes * 60
    counts = {"ok": 0, "error": 0}
    failures: list[str] = []
    rnd = args.seed
    t0 = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="gapscope-fuzz-"))

    while time.monotonic() < deadline:
        @seed(rnd)
        @settings(max_examples=args.examples, deadline=None, database=None, print_blob=True,
                  phases=[Phase.generate, Phase.shrink],
                  suppress_health_check=list(HealthCheck))
        @given(case=traces)
        def prop(case):
            if time.monotonic() > deadline:
                return
            counts[check_case(folder, case, schema)] += 1

        try:
            prop()
        except Exception:  # noqa: BLE001 - record, then go on with a new seed
            failures.append(traceback.format_exc())
            print(f"--- failure in round with seed {rnd}:\n{failures[-1]}", flush=True)
        rnd += 1
        el = time.monotonic() - t0
        print(f"{el:7.0f}s  rounds {rnd - args.seed}  examples {sum(counts.values())}  loaded {counts['ok']}  "
              f"refused {counts['error']}  failures {len(failures)}", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    print(f"done: {sum(counts.values())} examples in {time.monotonic() - t0:.0f}s, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
