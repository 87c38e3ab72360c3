"""Key press to updated screen on a large synthetic trace (run by hand; prints numbers, asserts nothing).

    python benchmarks/bench_keys.py [--events 3000000] [--size 200x50] [--lanes 8]

Builds a trace of python frame -> aten op -> cudaLaunchKernel -> kernel chains (4 events each) straight into
the column builder, opens the explorer headless at the given size, waits for the analysis, then times
each key press until the screen has been redrawn.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from gapscope.trace.build import ColumnBuilder  # noqa: E402


def synth_model(n_events: int, seed: int = 0, lanes: int = 1):
    rng = np.random.default_rng(seed)
    chains = n_events // 4
    b = ColumnBuilder("<bench>")
    t = 0.0
    corr = 1
    chunk = []
    for i in range(chains):
        gap = float(rng.exponential(3.0)) if i % 50 else float(rng.exponential(300.0))
        tid = 1 + i % lanes
        stream = 7 + i % lanes
        t0 = t + gap
        chunk.append({"ph": "X", "cat": "python_function", "name": f"model.py({i % 97}): layer{i % 13}",
                      "pid": 1, "tid": tid, "ts": t0, "dur": 6.0, "args": {"Python id": i + 1}})
        chunk.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm" if i % 3 else "aten::add", "pid": 1,
                      "tid": tid, "ts": t0 + 0.5, "dur": 5.0, "args": {"External id": i + 1}})
        chunk.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
                      "ts": t0 + 1.0, "dur": 3.0, "args": {"correlation": corr, "External id": i + 1}})
        chunk.append({"ph": "X", "cat": "kernel", "name": "gemm_kernel" if i % 3 else "add_kernel", "pid": 0,
                      "tid": stream, "ts": t0 + 5.0, "dur": 2.0 + (i % 5),
                      "args": {"correlation": corr, "device": 0, "stream": stream}})
        corr += 1
        t = t0 + 7.0 + (i % 5)
        if len(chunk) >= 400_000:
            b.add(chunk)
            chunk = []
    b.add(chunk)
    return b.finish({"deviceProperties": [{"id": 0, "name": "bench GPU"}]})


async def bench(model, size, presses, profile=None):
    from gapscope.tui.app import GapscopeApp
    from gapscope.tui.scene import Scene

    app = GapscopeApp(["<bench>"], load_opts={})
    t = time.perf_counter()
    scene = Scene("<bench>", model)
    print(f"lanes built in {time.perf_counter() - t:.2f} s")

    # skip the file reader: hand the model over as the load worker would
    from gapscope.tui.loading import Loader, SceneLoaded

    def fake_load(self_):
        loader = Loader(self_, [], {}, True, self_._mounted, self_._painted)

        def run():
            loader.post(SceneLoaded(scene))
            t1 = time.perf_counter()
            loader.analyse_part(scene)
            print(f"analysis in {time.perf_counter() - t1:.2f} s")

        self_.run_worker(run, thread=True, exclusive=True, group="load")

    GapscopeApp.load_traces = fake_load
    async with app.run_test(size=size) as pilot:
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        times = {}
        wall = []
        profs = {}
        for key in presses:
            r0 = app.lanes.renders
            pr = None
            if profile is not None and key in profile:
                import cProfile
                pr = profs.setdefault(key, cProfile.Profile())
                pr.enable()
            t0 = time.perf_counter()
            c0 = time.process_time()
            await pilot.press(key)
            await pilot.pause()
            dt = time.process_time() - c0
            if pr is not None:
                pr.disable()
            wall.append((time.perf_counter() - t0) * 1000)
            times.setdefault(key, []).append((dt * 1000, app.lanes.renders - r0))
        allt = sorted(x for v in times.values() for x, _ in v)
        for k, v in times.items():
            ms = [x for x, _ in v]
            print(f"  {k:>6}: median {np.median(ms):6.1f} ms  max {max(ms):6.1f} ms  rows drawn/press "
                  f"{np.mean([r for _, r in v]):.0f}")
        print("CPU time from key event to the redrawn screen (excludes the test pilot's idle waits):")
        print(f"all keys: n={len(allt)} p50 {np.percentile(allt, 50):.1f} ms  p95 {np.percentile(allt, 95):.1f} ms"
              f"  max {allt[-1]:.1f} ms")
        print(f"wall clock incl. pilot waits (~100 ms even for an unbound key): p50 {np.percentile(wall, 50):.1f} ms"
              f"  p95 {np.percentile(wall, 95):.1f} ms")
        import pstats
        for key, pr in profs.items():  # --profile: where the presses of these keys went (under cProfile: slower)
            print(f"\n--- cProfile of the presses of {key!r} ({len(times[key])}), by own time, then cumulative:")
            st = pstats.Stats(pr)
            st.sort_stats("tottime").print_stats(25)
            st.sort_stats("cumulative").print_stats(45)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=3_000_000)
    ap.add_argument("--size", default="200x50")
    ap.add_argument("--lanes", type=int, default=8, help="CPU threads and CUDA streams the chains rotate over")
    ap.add_argument("--profile", default=None, help="keys whose presses are profiled (cProfile), e.g. nws")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    t = time.perf_counter()
    model = synth_model(a.events, lanes=a.lanes)
    print(f"model: {model.n} events built in {time.perf_counter() - t:.1f} s")
    presses = ["n"] * 10 + ["N"] * 5 + ["w"] * 8 + ["s"] * 8 + ["d"] * 6 + ["a"] * 6 + ["j", "k"] * 4 + \
              ["L"] * 6 + ["0", "f"] * 3
    asyncio.run(bench(model, (w, h), presses, a.profile))


if __name__ == "__main__":
    main()
