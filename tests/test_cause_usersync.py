"""The ``user-sync`` cause (gapscope/analysis/causes/user_sync.py, usersyncs.py): the user's own code synchronised
with the GPU (``torch.cuda.synchronize()`` and the like: no aten op around the runtime call) and that code took a fair
share of the CPU's part of the gap. Synthetic traces for the rule and its look-alikes (a ``.item()``, which is the
``sync`` cause's; a synchronisation that overlaps no gap; one that takes a sliver of it; one a library makes), then
the recorded client (traces/hf-timer.*: a per-layer timing wrapper that synchronises before and after each decoder
layer, and the same decode without it).

Every synthetic scenario: kernel ``prev`` ends at t0 = 100 µs, kernel ``next`` starts at 200 µs, launched at 195 µs.
The layer wrapper ``app.py(20): forward`` runs from 0 to 199 µs and launches at 0 and 195 µs."""

from __future__ import annotations

import functools

import numpy as np

from gapscope.analysis import CAUSES, analyze
from gapscope.analysis.plan import plain
from gapscope.trace import load
from tests.helpers import SAMPLE_TRACES, model_of, one_gap, sync_scenario

WRAPPER = "app.py(20): forward"


def _cause(s):
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    a = analyze(model_of(s))
    i = int(np.flatnonzero(a.gaps.dur_ns == 100_000)[0])
    return CAUSES[int(a.gaps.cause[i])], a, i


def _synchronize(s, ts, dur, caller="app.py(10): _timer", clock=True):
    """``caller`` calls torch.cuda.synchronize() at ``ts`` for ``dur`` µs (the runtime call inside is 6 µs), then
    reads the clock."""
    with s.frame(caller, ts, dur):
        with s.frame("torch/cuda/__init__.py(1152): synchronize", ts + 1, dur - 4):
            with s.frame("<built-in function _cuda_synchronize>", ts + 2, dur - 6):
                s.runtime("cudaDeviceSynchronize", ts + 3, 6)
        if clock:
            s.python("<built-in function perf_counter>", ts + dur - 2, 1)


def _timer_scenario(s, site=(110, 40), caller="app.py(10): _timer", clock=True):
    """The wrapper: a layer (launching at 0), the timer's exit (its context manager's __exit__ calling ``caller``)
    over ``site`` (start, duration), then the next layer (launching at 195)."""
    with s.frame(WRAPPER, 0, 199):
        s.python("app.py(30): layer", 0, 99)
        with s.frame("contextlib.py(141): __exit__", *site):
            _synchronize(s, site[0] + 1, site[1] - 2, caller, clock)
        s.python("app.py(30): layer", 160, 39)


def test_a_timer_that_synchronises_in_the_gap_is_user_sync():
    s = one_gap()
    _timer_scenario(s)
    c, a, i = _cause(s)
    assert c == "user-sync"
    d = a.gap_detail(i)
    assert d.signature == WRAPPER  # the wrapper a person removes, not the timer's generator line
    assert "cudaDeviceSynchronize" in d.explanation and "a timer" in d.explanation
    # by hand: the site is the context manager's __exit__, 110 to 150 µs, of the 95 µs before the launch
    assert d.extra["user_sync"]["site_ns"] == 40_000
    f = next(f for f in a.findings if f.cause == "user-sync")
    assert f.evidence["frame"] == WRAPPER
    us = f.evidence["user_sync"]
    assert us["calls"] == 1 and us["timer"] and us["caller"] == WRAPPER and us["per_caller_call"] == 1
    assert f.suggestion.startswith("Your timer synchronises with the GPU once per call")
    # its fix removes the site and the wrapper's own time around the layers: the next launch comes earlier
    assert a.projection.saving_ns[f.id] > 0
    x = a.plan.action(a.plan.rank_of[f.id])
    assert x.kind == "user-sync"
    assert plain(x.change).startswith(f"Your timer in {WRAPPER} synchronises once per call")
    assert "drop it or time with CUDA events" in plain(x.change)


def test_without_a_clock_it_is_code_that_synchronises_not_a_timer():
    s = one_gap()
    _timer_scenario(s, caller="app.py(12): wait_for_gpu", clock=False)
    c, a, i = _cause(s)
    assert c == "user-sync"
    f = next(f for f in a.findings if f.cause == "user-sync")
    assert not f.evidence["user_sync"]["timer"]
    assert plain(a.plan.action(a.plan.rank_of[f.id]).change).startswith(f"Your code in {WRAPPER} synchronises")


def test_an_item_is_the_sync_cause():
    s = one_gap()
    sync_scenario(s)
    assert _cause(s)[0] == "sync"


def test_a_user_sync_the_gpu_ran_dry_in_stays_the_sync_cause():
    """The GPU ran dry while the thread waited in the call (open across t0): the ``sync`` rule, which comes first,
    whoever made the call."""
    s = one_gap()
    with s.frame(WRAPPER, 0, 199):
        s.python("app.py(30): layer", 0, 59)
        with s.frame("contextlib.py(141): __exit__", 60, 50):
            _synchronize(s, 61, 48)  # its cudaDeviceSynchronize runs 64-70 µs ... widened below across t0
        s.python("app.py(30): layer", 160, 39)
    rt = next(e for e in s.events if e.get("name") == "cudaDeviceSynchronize")
    rt["dur"] = 40  # 64-104 µs: open when prev ends at 100
    assert _cause(s)[0] == "sync"


def test_a_sync_that_overlaps_no_gap_is_nothing():
    """The timer synchronised while ``prev`` was queued (10-40 µs), long before the gap: the gap is the Python after
    it."""
    s = one_gap()
    with s.frame(WRAPPER, 0, 199):
        with s.frame("contextlib.py(141): __exit__", 10, 30):
            _synchronize(s, 11, 28)
        s.python("app.py(30): layer", 100, 99)
    c, a, i = _cause(s)
    assert c != "user-sync"
    assert a.cause_totals()["user-sync"]["count"] == 0


def test_a_sliver_of_the_gap_is_not_user_sync():
    s = one_gap()
    _timer_scenario(s, site=(110, 12))
    assert _cause(s)[0] != "user-sync"


def test_a_library_that_synchronises_is_not_the_users_code():
    s = one_gap()
    _timer_scenario(s, caller="transformers/utils/timing.py(10): measure")
    assert _cause(s)[0] != "user-sync"


# ------------------------------------------------------------------------------------------- the recorded client
@functools.lru_cache(maxsize=None)
def _real(name: str):
    return analyze(load(str(SAMPLE_TRACES / f"{name}.json.gz")))


def test_the_timing_wrapper_synchronises_twice_per_layer():
    a = _real("hf-timer.decode_timer")
    fs = [f for f in a.findings if f.cause == "user-sync"]
    assert len(fs) == 1  # the timer's enter and exit: one wrapper, one finding
    f = fs[0]
    us = f.evidence["user_sync"]
    # 8 decoder layers, each wrapped: two torch.cuda.synchronize() per layer, 16 per step (4 steps in the window)
    assert us["calls"] == 64 and us["per_step"] == 16 and us["per_caller_call"] == 2 and us["timer"]
    assert f.evidence["frame"] == us["caller"] and f.evidence["frame"].startswith("benchmarks/hf_clients3.py(")
    x = a.plan.action(a.plan.rank_of[f.id])
    assert x.rank <= 2 and x.kind == "user-sync"
    words = plain(x.change)
    assert "Your timer in benchmarks/hf_clients3.py" in words and "synchronises twice per call (16 times per step)" \
        in words and "drop it or time with CUDA events" in words and "without synchronising" in words
    # the CUDA graph needs the synchronisations gone first
    g = a.plan.action(1)
    assert g.kind == "cuda-graph" and any(f.id in n.findings for n in g.needs)


def test_the_fixed_twin_has_no_user_sync():
    a = _real("hf-timer.decode_notimer")
    assert a.cause_totals()["user-sync"]["count"] == 0
    assert not any(x.kind == "user-sync" for x in a.plan.actions)
