"""The ``launch``, ``profiler`` and ``host-idle`` causes on real traces (traces/ recorded by our capture on an
H200, and ../shared/traces), checked against what the raw events say (tests/rawtrace.py reads them with
json/gzip, recomputes each gap from the raw kernels and finds the next kernel's launch call by correlation):

* launch: the next kernel's launch call started after the gap began and, in between, the launching thread was
  busy in cpu ops / runtime calls (more than it was idle);
* profiler: the launching thread was inside the profiler's record_function enter/exit or step bookkeeping for
  most of the time before the launch;
* host-idle: the launching thread recorded nothing for most of the time before the launch.

Each check runs both ways where the rule is simple enough to state from raw events: the gaps gapscope gives a
cause have the property, and the gaps that have the property get the cause."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.helpers import SAMPLE_TRACES
from tests.rawtrace import BUSY_CATS, RawTrace, covered, is_profiler_name, is_step_range, ns, union

MOST = 0.5  # "most of": a share strictly above one half (design/gap-causes.md)


@functools.lru_cache(maxsize=4)  # each trace analysed and read once per module
def _pairs(path: Path):
    """(cause, RawGap, analysis row) for each analysed gap that is an interior gap of the raw kernels."""
    from gapscope.analysis import CAUSES, analyze
    from gapscope.trace import load

    a = analyze(load(str(path), no_cache=True))
    g = a.gaps
    raw = RawTrace(path)
    by_key = {}
    for d in sorted({int(x) for x in g.device}):
        for x in raw.gaps(d):
            by_key[(d, x.start, x.end)] = x
    out = []
    for r in range(len(g)):
        x = by_key.get((int(g.device[r]), int(g.start_ns[r]), int(g.end_ns[r])))
        if x is not None:
            out.append((CAUSES[int(g.cause[r])], x, r))
    # only the first and the last gap of a window may be clipped by it
    assert len(out) >= len(g) - 2 * len(a.devices), (len(out), len(g))
    return a, raw, out


def _split(raw: RawTrace, x):
    """How the launching thread spent [gap start, launch]: (w, busy in ops/runtime outside any profiler work, in
    profiler work, recording nothing). Step ranges wrap the whole step and are not activity."""
    th = x.thread
    a, b = x.start, x.t_launch
    busy = raw.thread_union(th, "busy", lambda e: e.get("cat") in BUSY_CATS and not is_profiler_name(e.get("name", "")))
    prof = raw.thread_union(th, "profiler", lambda e: is_profiler_name(e.get("name", "")))
    p = covered(prof, a, b)
    busy_only = covered(union(busy + prof), a, b) - p
    idle = (b - a) - covered(raw.thread_union(th, "any", lambda e: not is_step_range(e)), a, b)
    return b - a, busy_only, p, idle


@pytest.fixture
def eager_decode():
    return _pairs(SAMPLE_TRACES / "demo-eager.decode.json.gz")


# --------------------------------------------------------------------------------------------- launch
def test_launch_gaps_of_eager_decode_are_cpu_dispatch(eager_decode):
    a, raw, pairs = eager_decode
    launch = [x for c, x, _ in pairs if c == "launch"]
    assert len(launch) >= 0.7 * len(pairs), (len(launch), len(pairs))  # eager decode is launch-bound
    strong_ns = 0
    for x in launch:
        assert x.launch is not None and x.launch["name"] in ("cudaLaunchKernel", "cuLaunchKernel",
                                                               "cuLaunchKernelEx", "cudaLaunchKernelExC")
        launch_end = ns(x.launch["ts"]) + ns(x.launch["dur"])
        assert launch_end > x.start, (x.start, x.launch)  # launched (or still launching) once the gap began
        w, busy, prof, idle = _split(raw, x)
        assert busy >= idle, (x.start, w, busy, idle)
        if ns(x.launch["ts"]) > x.start and busy > MOST * w:
            strong_ns += x.dur
    # nearly all of it: launch call after the gap start, the thread busy dispatching through most of the wait
    assert strong_ns > 0.8 * sum(x.dur for x in launch), (strong_ns, sum(x.dur for x in launch))


def test_cpu_dispatch_gaps_of_eager_decode_are_called_launch(eager_decode):
    """The converse: a gap whose next kernel was launched after at least half of it, without sync, copy or
    allocator calls on the launching thread, is ``launch`` when dispatching (ops and launch calls; long
    launch-less ops and all profiler work taken away) took more of the thread's time before the launch than
    recording nothing and more than Python work, and the profiler's own work did not take most of it."""
    a, raw, pairs = eager_decode
    n = most = 0
    for c, x, r in pairs:
        if x.launch is None or x.t_launch - x.start < 0.5 * x.dur:
            continue
        w, busy, prof, idle = _split(raw, x)
        # no sync, copy or allocator call, not even one that ended just before the gap (a sync's 1 µs slack)
        runtime = raw.runtime_names_in(x.thread, x.start - 1_000, x.t_launch)
        if not all(nm.startswith(("cudaLaunchKernel", "cuLaunchKernel")) for nm in runtime):
            continue
        if raw.copies_in(x.device, x.start, x.end):
            continue
        # a long op that launched nothing is host computation, not dispatch (design/gap-causes.md: 50 µs)
        dispatch = busy - covered(raw.host_ops(x.thread, 50_000), x.start, x.t_launch)
        python = w - idle - dispatch - prof  # Python frames, annotations, host computation
        if prof <= MOST * w and dispatch > idle and dispatch > python:
            n += 1
            most += dispatch > MOST * w
            assert c == "launch", (c, x.start, w, dispatch, prof, idle)
    assert n >= 400 and n - most >= 10, (n, most)  # some of them by the largest share only, not by "most"


def test_launch_gaps_on_shared_traces(shared_traces):
    """Traces recorded by others (torch 1.8 .. 2.x): every ``launch`` gap has its launch call, placed in or
    running into the gap, and a launching thread busier than idle before it."""
    for rel, least in (("thirdparty/hpdl__resnet50_trace.json", 40), ("thirdparty/tracelens__b200_eager_trace.json.gz", 300)):
        a, raw, pairs = _pairs(shared_traces / rel)
        launch = [x for c, x, _ in pairs if c == "launch" and x.launch is not None]
        assert len(launch) >= least, (rel, len(launch))
        for x in launch:
            assert ns(x.launch["ts"]) + ns(x.launch["dur"]) > x.start, (rel, x.start)
            w, busy, prof, idle = _split(raw, x)
            assert busy >= idle, (rel, x.start, w, busy, idle)


# --------------------------------------------------------------------------------------------- profiler
@pytest.mark.parametrize("name,count", [("demo-eager.decode.json.gz", 6), ("demo-eager-alloc.decode.json.gz", 18)])
def test_profiler_gaps_are_the_gaps_inside_record_function_bookkeeping(name, count):
    """Both ways: a gap is ``profiler`` exactly when, before the next launch, the launching thread spent most of
    the time in record_function enter/exit or step bookkeeping (and no sync or copy claimed it first)."""
    a, raw, pairs = _pairs(SAMPLE_TRACES / name)
    got, expect = set(), set()
    for c, x, r in pairs:
        if c == "profiler":
            got.add(x.start)
        if x.launch is None or c in ("sync", "copy", "collective", "gpu-wait"):
            continue
        w, busy, prof, idle = _split(raw, x)
        if w > 0 and prof > MOST * w:
            expect.add(x.start)
    assert got == expect
    assert len(expect) == count  # the raw events' count for this recording (so neither side can shrink to nothing)


# --------------------------------------------------------------------------------------------- host-idle
HOST_IDLE = [
    # (trace, where, host-idle gaps gapscope finds (pinned), of which the raw events show the launching thread
    # recorded nothing for most of the time before the launch)
    ("demo-eager-nostacks.decode.json.gz", "sample", 3, 3),
    ("h200/cuda_sync_events.json", "shared", 1, 1),
    ("h200/stack_memory_compile_graph.pt.trace.json.gz", "shared", 2, 1),
    ("thirdparty/hta__with_gpu_user_annotation_step_based_trace_2543932.json.gz", "shared", 15, 14),
]


@pytest.mark.parametrize("name,where,count,most_idle", HOST_IDLE)
def test_host_idle_gaps_are_the_gaps_where_the_launching_thread_recorded_nothing(request, name, where, count,
                                                                                 most_idle):
    """Both ways. A gap whose launching thread recorded nothing (step ranges aside) for most of the time before
    the next launch is ``host-idle`` unless a copy, sync, collective or queued kernel explains it first; and
    every ``host-idle`` gap is one where recording nothing was the thread's largest share of that time (the
    rest split into dispatch -- ops and runtime calls, long launch-less ops aside -- and everything else)."""
    base = SAMPLE_TRACES if where == "sample" else request.getfixturevalue("shared_traces")
    a, raw, pairs = _pairs(base / name)
    got, expect = set(), set()
    for c, x, r in pairs:
        w = x.t_launch - x.start
        if c == "host-idle":
            assert x.launch is not None and w > 0, x.start
            got.add(x.start)
            w, busy, prof, idle = _split(raw, x)
            dispatch = busy - covered(raw.host_ops(x.thread, 50_000), x.start, x.t_launch)
            assert idle >= dispatch and idle >= w - idle - dispatch, (x.start, w, idle, dispatch)
        if x.launch is None or c in ("copy", "collective", "sync", "gpu-wait"):
            continue
        w, busy, prof, idle = _split(raw, x)
        if w > 0 and idle > MOST * w:
            expect.add(x.start)
    assert expect <= got, sorted(expect - got)
    assert (len(got), len(expect)) == (count, most_idle)
