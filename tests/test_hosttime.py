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


def test_both_credit_a_frame_an_op_calls_and_only_nesting_a_range_a_frame_opens():
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
    # the frame the op calls runs inside it (nested, whatever depth the model gave it); the frame over the range
    assert by_rule.tolist() == [op, p, op, g, g, g, -1]
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


def _compiled_call() -> Synth:
    """A torch.compile call's shape (hf-compile's decode), µs:

        [gapscope.step#0 ..............................................................)     0 .. 200
          [F eval_frame.py(1): compile_wrapper .................................)          5 .. 190
             [TorchDynamo Cache Lookup ......)                                           10 .. 60   cpu_op, no cpu child
                  [G guards.py(2): fn)  [S <string>(2): guard)                           20 .. 30, 40 .. 50
                    [b)                                                                  22 .. 24   built-in in G
                               [E utils.py(3): enter)                                    65 .. 72
                                  [n __enter__)                                          68 .. 71
                                    [Pregraph bytecode ...........)                      70 .. 130  cpu_op, opened in n
                                          [v set_eval_frame)                             80 .. 85
                                                   [X utils.py(4): exit ..)             120 .. 136
                                                       [x __exit__)                     125 .. 132  closes the range
                                                                        [launch)        190 .. 192

    The Python frames inside the lookup started and ended inside it: nested in it, though the model parents the
    lookup to the step range and the frames to F. Each instant goes to the event that started last among those
    open: the lookup owns 50 - 10 - 10 = 30 µs; the range owns [70, 80) and [85, 120) = 45 µs (it started after n
    and E, which end inside it; X and x started inside it and outlive it: theirs from their start)."""
    s = Synth()
    s.launch(ts=1, dur=1, kernel="prev", k_ts=3, k_dur=5)
    s.annotation("gapscope.step#0", 0, 200)
    with s.frame("eval_frame.py(1): compile_wrapper", 5, 185):
        s.cpu_op("TorchDynamo Cache Lookup", 10, 50)
        with s.frame("guards.py(2): fn", 20, 10):
            s.python("<built-in function b>", 22, 2)
        s.python("<string>(2): guard", 40, 10)
        with s.frame("utils.py(3): enter", 65, 7):
            s.python("<built-in method __enter__ of RecordFunctionFast object>", 68, 3)
        s.cpu_op("Pregraph bytecode", 70, 60)
        s.python("<built-in function set_eval_frame>", 80, 5)
        with s.frame("utils.py(4): exit", 120, 16):
            s.python("<built-in method __exit__ of RecordFunctionFast object>", 125, 7)
        s.launch("cudaLaunchKernel", 190, 2, kernel="k", k_ts=195, k_dur=3)
    return s


def test_a_frame_that_starts_inside_an_op_owns_its_time_whatever_depth_the_model_gave_it():
    a = analyze(model_of(_compiled_call()), window="all")
    m = a.model
    names = {"F": "eval_frame.py(1): compile_wrapper", "look": "TorchDynamo Cache Lookup", "G": "guards.py(2): fn",
             "b": "<built-in function b>", "S": "<string>(2): guard", "E": "utils.py(3): enter",
             "n": "<built-in method __enter__ of RecordFunctionFast object>", "pre": "Pregraph bytecode",
             "v": "<built-in function set_eval_frame>", "X": "utils.py(4): exit",
             "x": "<built-in method __exit__ of RecordFunctionFast object>", "launch": "cudaLaunchKernel"}
    e = {k: first_event(m, v) for k, v in names.items()}
    th = int(m.track[e["look"]])
    step = first_event(m, "gapscope.step#0")
    # the model's nesting: the lookup's cpu parent is the step range, the frames' Python parent is F
    assert int(m.parent[e["look"]]) == step and int(m.parent[e["G"]]) == e["F"]
    at = np.array([15, 21, 23, 45, 66, 69, 70, 71, 75, 82, 121, 126, 131, 133, 140]) * US
    want = ["look", "G", "b", "S", "E", "n", "pre", "pre", "pre", "v", "X", "x", "x", "X", "F"]
    assert owners_at(a.stacks, m, np.full(at.size, th), at).event.tolist() == [e[k] for k in want]
    h = host_time(a.stacks, m, th, 8 * US, 190 * US)
    got = {k: h.of(e[k]) // US for k in names}
    assert got == {"F": (10 - 8) + (65 - 60) + (190 - 136), "look": 30, "G": 8, "b": 2, "S": 10, "E": 3, "n": 2,
                   "pre": 45, "v": 5, "X": 9, "x": 7, "launch": 0}
    assert h.idle_ns == 0 and int(h.ns.sum()) == 182 * US
    # the python cause's host frames credit the same
    gi = int(np.flatnonzero(a.gaps.start_ns == 8 * US)[0])
    d = a.gap_detail(gi)
    assert d.cause == "python"
    frames = {m.name(ev): ns // US for ev, ns in d.extra["host"]["frames"]}
    assert frames == {names["F"]: 61, names["pre"]: 45, names["look"]: 30, names["S"]: 10, names["X"]: 9}
    assert "`Pregraph bytecode` 45.0 µs" in d.explanation and "`TorchDynamo Cache Lookup` 30.0 µs" in d.explanation
