"""hosttime.py's own-time variants on one hand-built thread; every expectation is written out from the drawing
below, not computed by the code under test.

    µs   0    10   20   30         60   70   80   90 92     100
         [gapscope.step#0 ..........................................)   step range
              [F user.py(1): f ...........)                             Python frame
                   [aten::add)                                          op inside F (issues nothing)
                                         [label)                        a record_function range, no frame
                                                   [launch)             cudaLaunchKernel -> kernel at 95
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import US, first_event, model_of
from tests.synth import Synth
from gapscope.analysis import analyze
from gapscope.analysis.hosttime import frame_own_intervals, host_time, nesting_segments, owners_at
from gapscope.trace.model import CPU_NEST_KINDS, Kind


@pytest.fixture(scope="module")
def scene():
    s = Synth()
    s.annotation("gapscope.step#0", 0, 100)
    s.python("user.py(1): f", 10, 50)
    s.cpu_op("aten::add", 20, 10)
    s.annotation("label", 70, 10)
    s.launch("cudaLaunchKernel", 90, 2, kernel="k", k_ts=95, k_dur=3)
    a = analyze(model_of(s), window="all")
    names = {"step": "gapscope.step#0", "F": "user.py(1): f", "op": "aten::add", "label": "label",
             "launch": "cudaLaunchKernel"}
    e = {k: first_event(a.model, v) for k, v in names.items()}
    return a, e, int(a.model.track[e["F"]])


def test_owners_at_credits_by_the_rule(scene):
    a, e, th = scene
    at = np.array([5, 15, 25, 65, 75, 91, 95]) * US
    want = [-1, e["F"], e["op"], -1, e["label"], e["launch"], -1]  # a step range alone is not what ran
    got = owners_at(a.stacks, a.model, np.full(at.size, th), at)
    assert got.event.tolist() == want
    with_steps = owners_at(a.stacks, a.model, np.full(at.size, th), at, step_ranges=True)
    assert with_steps.event.tolist() == [e["step"], e["F"], e["op"], e["step"], e["label"], e["launch"], e["step"]]
    assert got.py.tolist() == [-1, e["F"], e["F"], -1, -1, -1, -1]


def test_host_time_over_the_step(scene):
    a, e, th = scene
    h = host_time(a.stacks, a.model, th, 0, 100 * US)
    assert dict(zip(h.events.tolist(), h.ns.tolist())) == {e["F"]: 40 * US, e["op"]: 10 * US, e["label"]: 10 * US,
                                                          e["launch"]: 2 * US}
    assert h.idle_ns == 38 * US  # [0, 10), [60, 70), [80, 90), [92, 100): only the step range is open there


def test_nesting_segments_credit_whatever_started_last(scene):
    a, e, th = scene
    s, t, own = nesting_segments(a.model, th, 0, 100 * US, (Kind.PYTHON, *CPU_NEST_KINDS))
    got = list(zip((s // US).tolist(), (t // US).tolist(), own.tolist()))
    assert got == [(0, 10, e["step"]), (10, 20, e["F"]), (20, 30, e["op"]), (30, 60, e["F"]), (60, 70, e["step"]),
                   (70, 80, e["label"]), (80, 90, e["step"]), (90, 92, e["launch"]), (92, 100, e["step"])]


def test_nesting_credits_a_frame_an_op_calls_and_a_range_a_frame_opens_unlike_the_rule():
    # µs: an op [0, 40) calls a Python frame P [10, 30); a frame G [50, 90) opens a record_function range R [60, 80)
    s = Synth()
    s.cpu_op("aten::custom", 0, 40)
    s.python("user.py(2): p", 10, 20)
    s.python("user.py(3): g", 50, 40)
    s.annotation("R", 60, 20)
    a = analyze(model_of(s), window="all")
    m = a.model
    e = {n: first_event(m, n) for n in ("aten::custom", "user.py(2): p", "user.py(3): g", "R")}
    th = int(m.track[e["R"]])
    at = np.array([5, 20, 35, 55, 70, 85, 95]) * US
    by_rule = owners_at(a.stacks, m, np.full(at.size, th), at).event
    op, p, g, r = e["aten::custom"], e["user.py(2): p"], e["user.py(3): g"], e["R"]
    assert by_rule.tolist() == [op, op, op, g, g, g, -1]  # the op over the frame it calls, the frame over the range
    s_, t_, own = nesting_segments(m, th, 0, 100 * US, (Kind.PYTHON, *CPU_NEST_KINDS))
    assert list(zip((s_ // US).tolist(), (t_ // US).tolist(), own.tolist())) == [
        (0, 10, op), (10, 30, p), (30, 40, op), (40, 50, -1), (50, 60, g), (60, 80, r), (80, 90, g), (90, 100, -1)]


def test_frame_own_intervals_take_off_only_the_chosen_children(scene):
    a, e, th = scene
    m = a.model
    calls = (m.ts_ns[[e["F"]]], m.ts_ns[[e["F"]]] + m.dur_ns[[e["F"]]], np.array([th]))
    ops = m.kind == int(Kind.CPU_OP)
    s, t, thr = frame_own_intervals(m, calls, ops)
    assert list(zip((s // US).tolist(), (t // US).tolist())) == [(10, 20), (30, 60)] and thr.tolist() == [th, th]
    s, t, _ = frame_own_intervals(m, calls, np.zeros(m.n, bool))  # no children: the whole call
    assert list(zip((s // US).tolist(), (t // US).tolist())) == [(10, 60)]
    s, t, _ = frame_own_intervals(m, calls, m.kind == int(Kind.ANNOTATION))  # the step range encloses F: an ancestor
    assert list(zip((s // US).tolist(), (t // US).tolist())) == [(10, 60)]
