"""Invariants under random input. Random *valid* traces (built with tests/synth.py) get random damage, at the
level of events (fields dropped or mistyped, negative durations, string ids, duplicates, shuffling) and of
bytes (cuts, flipped bytes, stray quotes, bare inf/NaN, gzip cut short). Then:

* the loader loads, or raises TraceError with one line; nothing else;
* for a loaded trace, per device: kernel busy + idle = window; gaps are disjoint, inside the window, with
  exactly one cause each; the cause totals add up to the total idle time; per-gap detail works;
* the report renders as Markdown and its JSON validates against findings.schema.json.

CI keeps the example counts modest; ``benchmarks/fuzz.py`` runs the same properties for longer."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.synth import Synth, damage_bytes
from tests.helpers import SCHEMA_PATH
from gapscope.analysis import CAUSES, analyze
from gapscope.errors import GapscopeError
from gapscope.trace import TraceError, load


_t = st.integers(0, 5_000)  # ns-ish grid, written as µs with 3 decimals
_d = st.integers(0, 800)
_name = st.one_of(st.sampled_from(["aten::mm", "aten::add", "gemm", "[bold]x", "nccl:all_reduce",
                                   "ncclKernel_AllReduce", "gapscope.step#0", "gapscope.step#1", "ProfilerStep#3",
                                   "cudaStreamSynchronize", "cudaMalloc", "cudaMemcpyAsync", "cudaGraphLaunch"]),
                  st.text(max_size=8))
_step = st.one_of(
    st.tuples(st.just("launch"), _t, _d, _name, st.sampled_from([7, 13]), st.sampled_from([0, 0, 1]), st.integers(0, 3000)),
    st.tuples(st.just("kernel"), _t, _d, _name, st.sampled_from([7, 13, 21]), st.sampled_from([0, 1])),
    st.tuples(st.just("op"), _t, _d, _name, st.sampled_from([None, 2000])),
    st.tuples(st.just("frame"), _t, _d, _name),
    st.tuples(st.just("runtime"), _t, _d, st.sampled_from(["cudaStreamSynchronize", "cudaDeviceSynchronize",
                                                           "cudaMalloc", "cudaFree", "cudaLaunchKernel", "cudaMemcpy"])),
    st.tuples(st.just("memcpy"), _t, _d, st.sampled_from(["HtoD", "DtoH", "DtoD"]), st.sampled_from([7, 13])),
    st.tuples(st.just("annotation"), _t, st.integers(0, 8000), _name),
    st.tuples(st.just("step"), _t, st.integers(0, 8000), st.integers(0, 3)),
    st.tuples(st.just("memory"), _t, st.integers(-10**6, 10**6)),
    st.tuples(st.just("overhead"), _t, _d),
)

#: event-level damage: (what, which event (fraction), a value)
_ev_damage = st.tuples(
    st.sampled_from(["drop_key", "neg_dur", "zero_dur", "str_id", "dup", "shuffle", "null", "float_ts", "big_ts",
                     "bad_type", "drop_event"]),
    st.floats(0, 1), st.sampled_from(["ts", "dur", "ph", "cat", "name", "pid", "tid", "args"]))
#: byte-level damage: (what, where (fraction))
_byte_damage = st.tuples(st.sampled_from(["cut", "flip", "quote", "inf", "nan", "bracket", "brace", "comma"]),
                         st.floats(0, 1))


def build(steps) -> Synth:
    s = Synth()
    for st_ in steps:
        kind, ts = st_[0], st_[1] / 1000
        if kind == "launch":
            _, _, dur, name, stream, dev, lag = st_
            s.launch(ts=ts, dur=max(dur, 1) / 1000, kernel=name, k_ts=ts + lag / 1000, k_dur=dur / 1000,
                     stream=stream, device=dev)
        elif kind == "kernel":
            _, _, dur, name, stream, dev = st_
            s.kernel(name, ts, dur / 1000, stream=stream, device=dev)
        elif kind == "op":
            _, _, dur, name, tid = st_
            s.cpu_op(name, ts, dur / 1000, tid=tid)
        elif kind == "frame":
            s.python(f"model.py({st_[1] % 50}): {st_[3]}", ts, st_[2] / 1000)
        elif kind == "runtime":
            s.runtime(st_[3], ts, st_[2] / 1000)
        elif kind == "memcpy":
            s.memcpy(st_[3], ts, st_[2] / 1000, nbytes=4096, stream=st_[4])
        elif kind == "annotation":
            s.annotation(st_[3], ts, st_[2] / 1000)
        elif kind == "step":
            s.annotation(f"gapscope.step#{st_[3]}", ts, st_[2] / 1000)
        elif kind == "memory":
            s.memory(ts, st_[2])
        elif kind == "overhead":
            s.overhead("Activity Buffer Request", ts, st_[2] / 1000)
    return s


def damage_events(events: list, damage, seed: int) -> list:
    rnd = random.Random(seed)
    evs = [dict(e) for e in events]
    for what, where, key in damage:
        if not evs:
            break
        i = min(int(where * len(evs)), len(evs) - 1)
        e = evs[i]
        if what == "drop_key":
            e.pop(key, None)
        elif what == "neg_dur":
            e["dur"] = -abs(e.get("dur", 1) or 1)
        elif what == "zero_dur":
            e["dur"] = 0
        elif what == "str_id":
            e[key if key in ("pid", "tid") else "pid"] = str(e.get(key, 0))
            if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
                e["args"] = {**e["args"], "correlation": str(e["args"]["correlation"])}
        elif what == "dup":
            evs.insert(i, dict(e))
        elif what == "shuffle":
            rnd.shuffle(evs)
        elif what == "null":
            e[key] = None
        elif what == "float_ts":
            ts = e.get("ts")
            e["ts"] = (float(ts) if isinstance(ts, (int, float)) else 0.0) + 0.0004
        elif what == "big_ts":
            # a clock glitch far from the rest (17 minutes), an epoch-µs stamp among relative ones, or negative
            e["ts"] = 1e9 if where < 0.25 else 1e15 if where < 0.5 else -1e6
        elif what == "bad_type":
            e[key] = [1, {"x": 2}] if where < 0.5 else {"nested": True}
        elif what == "drop_event":
            del evs[i]
    return evs


traces = st.fixed_dictionaries({
    "steps": st.lists(_step, max_size=30),
    "ev_damage": st.lists(_ev_damage, max_size=3),
    "byte_damage": st.lists(_byte_damage, max_size=2),
    "top_array": st.booleans(),
    "gz": st.sampled_from([False, False, True]),
    "gz_cut": st.floats(0.3, 1.0),
    "seed": st.integers(0, 2**16),
})


def write_case(folder: Path, case: dict) -> Path:
    s = build(case["steps"])
    evs = damage_events(s.doc()["traceEvents"], case["ev_damage"], case["seed"])
    doc = evs if case["top_array"] else {**s.top, "traceEvents": evs}
    data = damage_bytes(json.dumps(doc).encode(), case["byte_damage"])
    if case["gz"]:
        data = gzip.compress(data)
        if case["gz_cut"] < 1.0:
            data = data[: max(1, int(len(data) * case["gz_cut"]))]
    p = folder / ("fuzz.json.gz" if case["gz"] else "fuzz.json")
    p.write_bytes(data)
    return p


def check_analysis(a) -> None:
    g = a.gaps
    n = len(g)
    assert g.cause.shape == (n,) and ((g.cause < len(CAUSES)).all() if n else True)
    assert (g.dur_ns == g.end_ns - g.start_ns).all() and (g.dur_ns > 0).all()
    total_idle = 0
    for d in a.devices:
        assert d.window_ns >= 0
        assert 0 <= d.kernel_busy_ns <= d.window_ns
        assert d.kernel_busy_ns + d.idle_ns == d.window_ns, (d.kernel_busy_ns, d.idle_ns, d.window_ns)
        sel = g.device == d.device
        s, e = np.sort(g.start_ns[sel]), np.sort(g.end_ns[sel])
        assert (e[:-1] <= s[1:]).all(), "gaps overlap"
        if s.size:
            assert s[0] >= d.window_start_ns and e[-1] <= d.window_end_ns, "gap outside the window"
        assert int(g.dur_ns[sel].sum()) == d.idle_ns
        total_idle += d.idle_ns
        assert 0.0 <= d.idle_pct <= 100.0
    assert total_idle == a.idle_ns == int(g.dur_ns.sum())
    tot = a.cause_totals()
    assert sum(v["total_ns"] for v in tot.values()) == a.idle_ns
    assert sum(v["count"] for v in tot.values()) == n
    for i in range(min(n, 3)):
        det = a.gap_detail(i)
        assert det.cause in CAUSES and det.explanation
    a.kernels, a.syncs, a.copies, a.allocator, a.collectives, a.launches  # noqa: B018 - they compute lazily


def check_case(folder: Path, case: dict, schema: dict) -> str:
    """Load, analyse, report; returns "error" or "ok". Raises AssertionError on a broken invariant."""
    from gapscope.report import build_json, render_markdown

    p = write_case(folder, case)
    try:
        m = load(p, no_cache=True)
    except TraceError as exc:
        assert "\n" not in str(exc) and str(exc)
        return "error"
    assert (m.dur_ns >= 0).all()
    analyses = []
    for window in ("steps", "all"):
        try:
            a = analyze(m, window=window)
        except GapscopeError as exc:  # a clean refusal is allowed, a crash is not
            assert "\n" not in str(exc)
            continue
        check_analysis(a)
        analyses.append(a)
    for a in analyses:
        md = render_markdown([a], top=5)
        assert isinstance(md, str) and "\x1b" not in md
        doc = json.loads(json.dumps(build_json([a], top=20)))
        jsonschema.validate(doc, schema)  # the schema ships in the package: always checked
    return "ok"


@pytest.fixture(scope="module")
def schema():
    return json.loads(SCHEMA_PATH.read_text())


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=traces)
def test_random_damaged_traces_keep_the_invariants(tmp_path, schema, case):
    check_case(tmp_path, case, schema)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(_step, min_size=1, max_size=40))
def test_random_valid_traces_load_and_keep_the_invariants(tmp_path, schema, steps):
    case = {"steps": steps, "ev_damage": [], "byte_damage": [], "top_array": False, "gz": False, "gz_cut": 1.0,
            "seed": 0}
    assert check_case(tmp_path, case, schema) == "ok"  # an undamaged trace always loads


def test_cause_totals_are_exact_for_a_far_away_event():
    """Found by benchmarks/fuzz.py: one event stamped 1e15 µs away from the rest (a clock glitch, or an absolute
    epoch timestamp among relative ones) makes a gap of ~1e18 ns, and the cause totals miss it by one."""
    from tests.helpers import model_of

    s = Synth()
    s.kernel("a", 0, 0.001)
    s.kernel("b", 1e15, 0.001)
    s.kernel("c", 1e15 + 0.003, 0.001)
    a = analyze(model_of(s), window="all")
    assert sum(v["total_ns"] for v in a.cause_totals().values()) == a.idle_ns


#: the shapes of issue #16 (tests/hostile.py) at small sizes: what they load to keeps the invariants too
_HOSTILE = {
    "threads": lambda H, p: H.threads(p, 300),
    "names": lambda H, p: H.names(p, 300),
    "colliding_correlations": lambda H, p: H.colliding_correlations(p, 300),
    "same_timestamp": lambda H, p: H.same_timestamp(p, 300),
    "one_ns_gaps": lambda H, p: H.one_ns_gaps(p, 300),
    "deep_python": lambda H, p: H.deep_python(p, 2000, 20),
    "big_name": lambda H, p: H.big_name(p, 1 << 20),
    "unescaped_quotes": lambda H, p: H.unescaped_quotes(p, 300),
    "damaged_nested": lambda H, p: H.damaged_nested(p, 40, 200, 30),
    "whitespace_between_events": lambda H, p: H.whitespace_between_events(p.with_suffix(".json.gz"), 100, 4 << 20),
    "trailing_whitespace": lambda H, p: H.trailing_whitespace(p.with_suffix(".json.gz"), 4 << 20),
}


@pytest.mark.parametrize("shape", sorted(_HOSTILE))
def test_hostile_shapes_keep_the_invariants(tmp_path, schema, shape):
    from tests import hostile as H
    from gapscope.report import build_json, render_markdown

    p = _HOSTILE[shape](H, tmp_path / "h.json")
    m = load(p, no_cache=True)
    assert m.n > 0 and (m.dur_ns >= 0).all()
    for window in ("steps", "all"):
        a = analyze(m, window=window)
        check_analysis(a)
        md = render_markdown([a], top=5)
        assert isinstance(md, str) and "\x1b" not in md
        import jsonschema

        jsonschema.validate(json.loads(json.dumps(build_json([a], top=20))), schema)
