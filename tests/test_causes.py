"""One synthetic trace per cause rule of gap-causes.md, and neighbours where two rules hold (the first
rule in the table wins). Every scenario: kernel ``prev`` ends at t0 = 100 µs, kernel ``next`` starts
at t1 = 200 µs, its launch call starts at 195 µs unless stated otherwise."""

from __future__ import annotations

import pytest

from tests.synth import Synth
from tests.helpers import model_of
from tests.helpers import one_gap as base, sync_scenario
from gapscope.analysis import CAUSES, Thresholds, analyze


def finish(s: Synth, *, with_launch=True):
    tl, tk = s.next_at
    if with_launch:
        s.launch(ts=tl, dur=3, kernel="next", k_ts=tk, k_dur=10)
    else:
        s.kernel("next", tk, 10)
    a = analyze(model_of(s))
    big = [i for i in range(len(a.gaps)) if a.gaps.dur_ns[i] == 100_000]
    assert len(big) == 1, a.gaps.dur_ns
    return a, big[0]


def cause_of(s, **kw):
    a, i = finish(s, **kw)
    return CAUSES[int(a.gaps.cause[i])], a, i


def test_copy_on_device():
    s = base()
    s.python("app.py(10): busy", 100, 95)  # would be "python" on its own
    s.memcpy("HtoD", 110, 80, nbytes=64 << 20)  # 80% of the gap
    c, a, i = cause_of(s)
    assert c == "copy"
    d = a.gap_detail(i)
    assert d.extra["copy"]["kind"] == "HtoD Pageable"
    assert "HtoD Pageable" in d.explanation


def test_copy_half_the_gap_is_not_most():
    s = base()
    s.memcpy("HtoD", 100, 50, nbytes=1 << 20)  # exactly half: not "most"
    assert cause_of(s)[0] == "host-idle"


def test_blocking_copy_call_on_launching_thread():
    s = base()
    s.runtime("cudaMemcpy", 99, 91)
    s.memcpy("DtoH", 100.5, 2, nbytes=4, src="Device", dst="Pageable")
    assert cause_of(s)[0] == "copy"


def test_collective_cpu_side_beats_sync():
    s = base()
    s.cpu_op("record_param_comms", 95, 95, **{"Collective name": "allreduce"})
    s.runtime("cudaStreamSynchronize", 96, 5)  # sync at t0 too: collective comes first
    assert cause_of(s)[0] == "collective"


def test_sync_with_stack():
    s = base()
    sync_scenario(s)
    c, a, i = cause_of(s)
    assert c == "sync"
    d = a.gap_detail(i)
    names = [f.name for f in d.stack]
    assert names[0] == "model.py(42): hook"
    assert "aten::item" in names and names[-1] == "cudaStreamSynchronize"
    assert d.stack[0].file == "model.py" and d.stack[0].line == 42
    assert d.stack[-1].kind == "sync"
    assert d.signature == "model.py(42): hook"
    assert "cudaStreamSynchronize" in d.explanation
    assert sum(d.breakdown.values()) == 95_000
    f = a.findings[0]
    assert f.cause == "sync" and "model.py(42): hook" in f.title and i in f.gap_rows.tolist()


def test_sync_beats_profiler_and_python():
    s = base()
    sync_scenario(s)
    s.overhead("Instrumentation", 100, 95)
    assert cause_of(s)[0] == "sync"


def test_sync_that_ended_long_before_t0_is_not_sync():
    s = base()
    s.runtime("cudaStreamSynchronize", 10, 20)
    assert cause_of(s)[0] == "host-idle"


def test_profiler_overhead_on_another_thread_decides_nothing():
    """Kineto writes its overhead events on a pseudo thread (pid -1, tid 0, as in every sample in traces/):
    they overlap the gap but the launching thread was sleeping: host-idle, not profiler (issue 13, item 6)."""
    s = base()
    s.overhead("Buffer flush", 105, 80)
    assert cause_of(s)[0] == "host-idle"


def test_profiler_overhead_on_the_launching_thread():
    s = base()
    e = s.overhead("Buffer flush", 105, 80)
    e["pid"], e["tid"] = s.pid, s.tid
    assert cause_of(s)[0] == "profiler"


def test_record_function_enter_exit_is_profiler_not_python():
    """The capture's step boundary: torch/autograd/profiler.py __exit__ / __enter__ and the record_function
    built-ins below them hold the thread before the next launch: the profiler's own work (issue 13, item 6)."""
    s = base()
    with s.frame("capture/recorder.py(342): record", 100, 94):
        with s.frame("torch/autograd/profiler.py(781): __exit__", 101, 40):
            s.python("<built-in method _record_function_exit of PyCapsule object at 0x7f>", 102, 38)
        with s.frame("torch/autograd/profiler.py(766): __enter__", 142, 40):
            s.python("<built-in method _record_function_enter_new of PyCapsule object at 0x7f>", 143, 38)
    c, a, i = cause_of(s)
    assert c == "profiler"
    assert a.gaps.breakdown["profiler"][i] == 80_000
    assert a.gaps.breakdown["python"][i] == 14_000


def test_allocator_beats_python():
    s = base()
    with s.frame("train.py(7): step", 100, 94):
        with s.frame("torch/cuda/memory.py(192): empty_cache", 101, 30):
            s.runtime("cudaFree", 101, 29)  # 30% of [t0, launch]
        s.python("train.py(9): log_stats", 135, 55)  # 58%: python also holds, allocator is first
    c, a, i = cause_of(s)
    assert c == "allocator"
    d = a.gap_detail(i)
    assert any(f.name == "cudaFree" for f in d.stack)
    assert d.signature == "train.py(7): step"


def test_python():
    s = base()
    with s.frame("serve.py(88): postprocess", 100, 92):
        s.python("<built-in function sorted>", 101, 80)
    c, a, i = cause_of(s)
    assert c == "python"
    d = a.gap_detail(i)
    assert d.breakdown["python"] == 92_000
    assert d.signature == "serve.py(88): postprocess"
    assert "serve.py(88): postprocess" in [f.name for f in d.stack]


def test_launch_bound():
    s = base()
    t = 100.0
    while t < 190:
        s.cpu_op("aten::view", t, 4)
        t += 5
    c, a, i = cause_of(s)
    assert c == "launch"
    assert "aten::view" in a.gap_detail(i).extra["issued_ops"]


def test_launch_latency_when_launched_early():
    s = base(next_launch=101.0)
    s.python("app.py(1): sleepy", 105, 90)
    assert cause_of(s)[0] == "launch"


def test_host_idle_beats_partial_python():
    s = base()
    s.python("app.py(3): small", 100, 35)  # 37% python, 63% nothing
    c, a, i = cause_of(s)
    assert c == "host-idle"
    assert "app.py(3): small" in (a.gap_detail(i).extra.get("last_activity") or "")


def test_no_launch_link_and_no_threads_is_host_idle():
    s = Synth()
    s.kernel("prev", 50, 50)
    s.kernel("next", 200, 10)
    a = analyze(model_of(s))
    assert CAUSES[int(a.gaps.cause[0])] == "host-idle"
    assert a.gap_detail(0).stack == []


def test_thresholds_are_configurable():
    s = base()
    s.python("app.py(3): small", 100, 35)
    s.next_at = (195.0, 200.0)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    m = model_of(s)
    assert CAUSES[int(analyze(m).gaps.cause[0])] == "host-idle"
    assert CAUSES[int(analyze(m, Thresholds(most=0.3)).gaps.cause[0])] == "python"


@pytest.mark.parametrize("cause", CAUSES)
def test_every_cause_has_an_explanation_and_suggestion(cause):
    from gapscope.analysis import CAUSE_EXPLANATIONS
    from gapscope.analysis.findings import SUGGESTIONS

    assert CAUSE_EXPLANATIONS[cause] and SUGGESTIONS[cause]


def test_cuda_graph_nodes_already_queued_are_not_sync():
    """One cudaGraphLaunch queues every kernel; the CPU then waits in cudaDeviceSynchronize. Gaps between
    the graph's kernels are GPU-side (gpu-wait: the CPU had issued them all), even though the CPU sits in a sync
    at every t0."""
    s = Synth()
    rt = s.runtime("cudaGraphLaunch", 0, 5)
    c = rt["args"]["correlation"]
    for k, t in enumerate((50, 110, 170)):
        s.kernel(f"node{k}", t, 50, corr=c)
    s.runtime("cudaDeviceSynchronize", 6, 220)
    a = analyze(model_of(s))
    assert len(a.gaps) == 2 and set(a.gaps.dur_ns.tolist()) == {10_000}
    assert {CAUSES[int(x)] for x in a.gaps.cause} == {"gpu-wait"}
    ex = a.gap_detail(0).explanation
    assert "already queued" in ex and "graph replay" in ex
    f = next(f for f in a.findings if f.cause == "gpu-wait")
    assert f.evidence["kind"] == "graph" and "CUDA graphs will not shorten" in f.suggestion


def test_cpu_copy_holding_a_stream_sync_is_sync():
    """``.cpu()`` is aten::to -> ... -> cudaStreamSynchronize: the whole op is the synchronising call."""
    s = base()
    with s.frame("gen.py(12): step", 100, 94):
        s.cpu_op("aten::to", 105, 45)
        s.cpu_op("aten::_to_copy", 106, 43)
        s.runtime("cudaMemcpyAsync", 107, 3)
        s.runtime("cudaStreamSynchronize", 111, 2)
    c, a, i = cause_of(s)
    assert c == "sync"
    assert a.gap_detail(i).breakdown["sync"] == 45_000


def test_long_cpu_only_op_is_host_work_not_dispatch():
    s = base()
    s.cpu_op("aten::softmax", 100, 80)  # CPU softmax: launches nothing
    c, a, i = cause_of(s)
    assert c == "python"
    assert a.gap_detail(i).breakdown["python"] == 80_000


def test_inductor_launcher_python_is_dispatch():
    s = base()
    with s.frame("/tmp/torchinductor_u/ab/cab12.py(1028): call", 100, 94):
        for t in range(101, 190, 10):
            s.runtime("cuLaunchKernel", t, 2)
    assert cause_of(s)[0] == "launch"
