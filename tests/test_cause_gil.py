"""The ``gil`` cause (gapscope/analysis/causes/gil.py, gilholds.py): another Python thread of the process held the GIL
while the launching thread waited. Synthetic traces for the rule and its look-alikes (a second thread that only
sleeps, waits on a queue, or sits in a frame the launching thread's own calls cross; a thread of another process;
a launching thread that runs no Python), then the recorded client (traces/hf-gil.*: a metrics thread serialising
JSON while a Llama decodes, and the same decode with the thread parked).

Every synthetic scenario: kernel ``prev`` ends at t0 = 100 µs, kernel ``next`` starts at 200 µs, launched at 195 µs
by the main thread (tid 1000), which sits in a ``linear`` call from 96 to 190 µs whose op ran 5 µs."""

from __future__ import annotations

import functools

import numpy as np

from gapscope.analysis import CAUSES, analyze
from gapscope.analysis.plan import plain
from gapscope.trace import load
from tests.helpers import SAMPLE_TRACES, model_of, one_gap

MAIN, OTHER = 1000, 2000


def _main_thread(s, *, python=True):
    """The launching thread: a forward frame around a stretched ``linear`` call (its op ran 96-101 µs)."""
    if python:
        with s.frame("model.py(30): forward", 0, 199):
            s.python("model.py(31): helper", 90, 5)
            with s.frame("<built-in function linear>", 96, 94):
                s.cpu_op("aten::linear", 96, 5)
    else:
        s.cpu_op("aten::linear", 96, 5)


def _finish(s):
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    a = analyze(model_of(s))
    i = int(np.flatnonzero(a.gaps.dur_ns == 100_000)[0])
    return a, i


def _cause(s):
    a, i = _finish(s)
    return CAUSES[int(a.gaps.cause[i])], a, i


def _metrics_thread(s, tid=OTHER):
    """The other thread: a loop that serialises JSON from 102 to 188 µs (holding the GIL), sleeping around it."""
    with s.frame("worker.py(5): loop", 0, 250, tid=tid):
        s.python("<built-in function sleep>", 1, 100, tid=tid)
        with s.frame("json/__init__.py(231): dumps", 102, 86, tid=tid):
            s.python("json/encoder.py(200): encode", 103, 84, tid=tid)
        s.python("<built-in function sleep>", 189, 60, tid=tid)


def test_a_thread_running_python_through_the_gap_is_gil():
    s = one_gap()
    _main_thread(s)
    _metrics_thread(s)
    c, a, i = _cause(s)
    assert c == "gil"
    d = a.gap_detail(i)
    g = d.extra["gil"]
    # by hand: the other thread ran Python from the end of its first sleep (101 µs) to the start of its second
    # (189 µs: its loop, json.dumps, the loop again), inside [t0 = 100, launch = 195]
    assert g["tid"] == OTHER and g["held_ns"] == 88_000 and g["of_ns"] == 95_000
    assert g["running"][0] == "json/__init__.py(231): dumps"
    assert d.signature == "worker.py(5): loop"  # the holder's own code, not the stdlib below it
    assert "waited for the GIL" in d.explanation and f"thread {OTHER}" in d.explanation
    f = next(f for f in a.findings if f.cause == "gil")
    assert f"thread {OTHER} held the GIL" in f.title and "worker.py(5): loop" in f.title
    t = f.evidence["gil"]["threads"][0]
    assert t["tid"] == OTHER and t["frames"][0]["name"] == "json/__init__.py(231): dumps"
    assert "ran Python for" in f.suggestion and "% of the window" in f.suggestion
    # its fix takes the holds off the launching thread: the next launch comes earlier
    assert a.projection.saving_ns[f.id] > 0
    x = a.plan.action(a.plan.rank_of[f.id])
    assert x.kind == "gil-thread" and f"thread {OTHER}'s Python work" in plain(x.change)


def test_a_thread_that_only_sleeps_holds_nothing():
    s = one_gap()
    _main_thread(s)
    with s.frame("worker.py(5): loop", 0, 250, tid=OTHER):
        s.python("<built-in function sleep>", 1, 248, tid=OTHER)
    assert _cause(s)[0] != "gil"


def test_a_thread_waiting_on_a_queue_holds_nothing():
    s = one_gap()
    _main_thread(s)
    with s.frame("worker.py(5): loop", 0, 250, tid=OTHER):
        with s.frame("queue.py(171): get", 1, 248, tid=OTHER):
            with s.frame("threading.py(327): wait", 2, 246, tid=OTHER):
                s.python("<built-in method acquire of _thread.lock object at 0x7f00>", 3, 244, tid=OTHER)
    assert _cause(s)[0] != "gil"


def test_a_frame_the_launching_threads_calls_cross_holds_nothing():
    """A thread parked since before the window shows one open frame across it (the call it waits in started before
    the profiler): the launching thread's own Python calls inside prove it held the GIL meanwhile."""
    s = one_gap()
    _main_thread(s)
    s.python("model.py(40): step_done", 120, 5)
    s.python("model.py(41): log", 150, 5)
    s.python("worker.py(9): idle", 0, 250, tid=OTHER)
    assert _cause(s)[0] != "gil"


def test_a_thread_of_another_process_holds_nothing_here():
    s = one_gap()
    _main_thread(s)
    n = len(s.events)
    _metrics_thread(s)
    for e in s.events[n:]:
        e["pid"] = 3000
    assert _cause(s)[0] != "gil"


def test_a_launching_thread_that_runs_no_python_waits_for_no_gil():
    """A C++ worker launches (the autograd engine's device thread): it needs no GIL, whatever another thread does."""
    s = one_gap()
    _main_thread(s, python=False)
    _metrics_thread(s)
    # a third thread, in Python, launches too: the other thread's holds are looked at, but not against tid 1000
    s.launch(ts=300, dur=2, kernel="later", k_ts=320, k_dur=5, tid=4000)
    s.python("other.py(1): main", 299, 5, tid=4000)
    assert _cause(s)[0] != "gil"


# ------------------------------------------------------------------------------------------- the recorded client
@functools.lru_cache(maxsize=None)
def _real(name: str):
    return analyze(load(str(SAMPLE_TRACES / f"{name}.json.gz")))


def test_the_metrics_thread_is_blamed_with_its_share_and_its_frames():
    a = _real("hf-gil.decode_thread")
    f = next(f for f in a.findings if f.cause == "gil")
    t = f.evidence["gil"]["threads"][0]
    # the metrics thread (tid 651) serialised JSON for about two thirds of the measured window
    assert t["tid"] == 651 and 60 <= t["window_share_pct"] <= 75
    assert t["frames"][0]["name"].startswith("json/__init__.py(") and t["frames"][0]["name"].endswith("): dumps")
    assert "benchmarks/hf_clients3.py" in f.evidence["frame"] and f.evidence["frame"].endswith("_loop")
    x = a.plan.action(a.plan.rank_of[f.id])
    assert x.rank <= 2 and x.kind == "gil-thread"
    words = plain(x.change)
    assert "Move thread 651's Python work off the process that feeds the GPU" in words
    assert "the launching thread waited for the GIL" in words and "% of the window" in words


def test_the_parked_thread_of_the_fixed_twin_holds_nothing():
    a = _real("hf-gil.decode_nothread")
    assert a.cause_totals()["gil"]["count"] == 0
    assert not any(x.kind == "gil-thread" for x in a.plan.actions)
