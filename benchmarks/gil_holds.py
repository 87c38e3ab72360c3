"""Who holds the GIL while a big trace loads (run by hand; prints, asserts nothing).

    python benchmarks/gil_holds.py /tmp/gapscope-bench/big_1G.json [--over-ms 150]

Loads the trace as the explorer does (``read.load_uncached`` with a progress report: the two-process path in
pieces of ``progressive.DRAWN_PIECE``, no cache) while a thread wakes every 5 ms. A wake that comes late by more
than ``--over-ms`` means another thread held the GIL that long: the load thread's stack at that moment (the call it
just came back from) and the load's phase are printed, longest first. A key pressed in the explorer waits for the
same holds (one per hand-over of the GIL between the screen's thread and the load's).

    python benchmarks/gil_holds.py /tmp/gapscope-bench/big_1G.json --analysis

The same watch over what the explorer's load thread does once the model is in (the model read from the cache
first, unwatched): the analysis with its gaps first (``loading.analyze_gaps_first``: phase "classify" until the
gaps are handed over, then "findings"), the header's verdicts, then the projection (phase "projection").
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gapscope.trace import read  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--over-ms", type=float, default=150.0)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--analysis", action="store_true", help="watch the explorer's analysis of the (cached) model")
    a = ap.parse_args()
    me = threading.get_ident()
    holds, phase, stop = [], ["start"], threading.Event()

    def watch():
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.005)
            now = time.perf_counter()
            late, last = now - last, now
            if late * 1000 > a.over_ms:
                fr = sys._current_frames().get(me)
                st = traceback.extract_stack(fr)[-6:] if fr is not None else []
                holds.append((late, phase[0], [f"{os.path.basename(s.filename)}:{s.lineno} {s.name}" for s in st]))

    th = threading.Thread(target=watch, daemon=True)

    def progress(p):
        phase[0] = p.phase

    if a.analysis:
        from gapscope.tui.loading import analyze_gaps_first
        from gapscope.trace import load

        m = load(a.trace)
        phase[0] = "classify"
        th.start()
        t = time.perf_counter()
        marks = []

        def classified(_):
            marks.append(("gaps", time.perf_counter() - t))
            phase[0] = "findings"

        an = analyze_gaps_first(m, classified)
        an.verdicts  # noqa: B018
        marks.append(("findings", time.perf_counter() - t))
        phase[0] = "projection"
        an.projection  # noqa: B018
        marks.append(("projection", time.perf_counter() - t))
        stop.set()
        print(f"analysis of {m.n:,} events: " + ", ".join(f"{k} at {v:.2f} s" for k, v in marks)
              + f"; load average {os.getloadavg()[0]:.1f}; {len(holds)} holds over {a.over_ms:.0f} ms")
        for ph in ("classify", "findings", "projection"):
            hs = [h for h in holds if h[1] == ph]
            print(f"  {ph}: {len(hs)} holds, {sum(h[0] for h in hs):.2f} s in all, longest "
                  f"{max((h[0] for h in hs), default=0) * 1000:.0f} ms")
        for late, ph, st in sorted(holds, key=lambda h: -h[0])[:a.top]:
            print(f"{late * 1000:7.0f} ms  {ph:10} " + " <- ".join(reversed(st)))
        return 0
    th.start()
    t = time.perf_counter()
    m = read.load_uncached(a.trace, progress=progress, first=lambda: None)
    stop.set()
    print(f"load {time.perf_counter() - t:.2f} s, {m.n:,} events; load average {os.getloadavg()[0]:.1f}; "
          f"{len(holds)} holds over {a.over_ms:.0f} ms")
    for late, ph, st in sorted(holds, key=lambda h: -h[0])[:a.top]:
        print(f"{late * 1000:7.0f} ms  {ph:9} " + " <- ".join(reversed(st)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
