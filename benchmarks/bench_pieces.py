"""The explorer's load without its screen (run by hand): ``tui.trace.load`` with a progress call-back, as the
explorer calls it, so that the parent parses in the explorer's pieces (gapscope/trace/progressive.py: small while the
screen is in use, the reader's own size otherwise). Wall, this process's CPU and the worker's.

    python benchmarks/bench_pieces.py CHECKOUT TRACE
"""

import sys, time, resource
sys.path.insert(0, sys.argv[1])
from gapscope.trace import load
t0 = time.perf_counter(); c0 = time.process_time()
m = load(sys.argv[2], no_cache=True, progress=lambda p: None)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(sys.argv[1], "wall", round(time.perf_counter() - t0, 2), "parent cpu", round(time.process_time() - c0, 2), "worker cpu", round(ru.ru_utime + ru.ru_stime, 2))
