"""The vectorised per-gap passes of the findings give what the per-gap code gives: ``signature_events`` ==
``signature_frame(stack_at(...))``, ``details.holder_points`` == the per-gap Python-holder rule (kept here as the
reference), ``details.signatures`` == ``gap_detail(r).signature``; on the sample traces and on small synthetic
ones built for the edges (no Python stacks, no thread, empty launch window, zero-length frames, ties)."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.synth import Synth
from tests.helpers import model_of
from gapscope.analysis import analyze
from gapscope.analysis.stacks import signature_frame
from gapscope.trace import load
from gapscope.trace.model import Kind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "traces", "*.json.gz")))
SOME = [p for p in SAMPLES if os.path.basename(p).split(".")[0] in (
    "demo-eager-python", "demo-eager-nostacks", "demo-eager-sync", "demo-compile", "demo-graph")]


def reference_holder(a, thr: int, t0: int, tl: int):
    """The per-gap rule as it was written before the findings took it for all gaps at once: (stack, name)."""
    if thr < 0 or tl <= t0:
        return a.stacks.stack_at(thr, t0), None
    pts = np.linspace(t0, tl - 1, 33).astype(np.int64)
    th = np.full(pts.shape, thr, np.int64)
    cpu_in = a.stacks.innermost("cpu", th, pts)
    py_in = a.stacks.innermost("py", th, pts)
    m = a.model
    free = (cpu_in < 0) | (m.kind[np.maximum(cpu_in, 0)] == int(Kind.ANNOTATION))
    # a range inside an op, where Python frames were recorded: the op runs there, the CPU is not free
    inner = free & (cpu_in >= 0) & (py_in >= 0)
    op = np.where(free, -1, cpu_in)
    op[inner] = a.stacks.through_annotations(cpu_in[inner], pts[inner])
    # unless the frame is nested in the op: it started after the op (the same start: it ends sooner)
    for k in np.flatnonzero((op >= 0) & (py_in >= 0)).tolist():
        (os_, oe), (ps, pe) = ((int(m.ts_ns[e]), int(m.ts_ns[e] + m.dur_ns[e])) for e in (op[k], py_in[k]))
        if ps > os_ or (ps == os_ and pe < oe):
            op[k] = -1
    free = op < 0
    cand = py_in[free & (py_in >= 0)]
    if cand.size:
        scaffold = a.flags["capture_frame"][m.name_id[cand]]
        if scaffold.all():
            return a.stacks.stack_at(thr, t0), None
        cand = cand[~scaffold]
    if cand.size == 0:
        ann = cpu_in[free & (cpu_in >= 0)]
        if ann.size:
            ev = int(np.bincount(np.searchsorted(np.unique(ann), ann)).argmax())
            ev = int(np.unique(ann)[ev])
            at = int(pts[np.flatnonzero(cpu_in == ev)[0]])
            return a.stacks.stack_at(thr, at), m.name(ev)
        return a.stacks.stack_at(thr, t0), None
    best = np.bincount(np.searchsorted(np.unique(cand), cand)).argmax()
    ev = int(np.unique(cand)[best])
    at = int(pts[np.flatnonzero(py_in == ev)[0]])
    return a.stacks.stack_at(thr, at), m.name(ev)


def check_holders(a, thr, t0, tl):
    thr, t0, tl = (np.asarray(x, np.int64) for x in (thr, t0, tl))
    at, ev = a.details.holder_points(thr, t0, tl)
    assert at.shape == ev.shape == t0.shape
    for k in range(t0.size):
        stack, name = reference_holder(a, int(thr[k]), int(t0[k]), int(tl[k]))
        assert a.stacks.stack_at(int(thr[k]), int(at[k])) == stack
        assert (a.model.name(int(ev[k])) if ev[k] >= 0 else None) == name


def check_signatures(a, thr, t):
    thr, t = np.asarray(thr, np.int64), np.asarray(t, np.int64)
    got = a.stacks.signature_events(thr, t)
    assert got.shape == t.shape
    for k in range(t.size):
        s = signature_frame(a.stacks.stack_at(int(thr[k]), int(t[k])))
        assert int(got[k]) == (s.event if s is not None else -1), (k, int(thr[k]), int(t[k]))


def cpu_threads(m):
    return [t.id for t in m.tracks if t.kind.name == "CPU"]


@pytest.mark.parametrize("path", SOME, ids=os.path.basename)
def test_sample_traces(path):
    m = load(path, no_cache=True)
    a = analyze(m)
    g = a.gaps
    check_holders(a, g.thread, g.start_ns, g.t_launch_ns)
    rng = np.random.default_rng(7)
    lo, hi = m.window_ns()
    thr = np.r_[rng.choice(cpu_threads(m) + [-1], 400), g.thread, g.thread]
    t = np.r_[rng.integers(lo - 1000, hi + 1000, 400), g.start_ns, g.t_launch_ns]
    check_signatures(a, thr, t)
    rows = np.arange(len(g))
    assert analyze(m).details.signatures(rows) == [a.gap_detail(r).signature for r in rows.tolist()]


def test_empty_inputs():
    m = load(SOME[0], no_cache=True)
    a = analyze(m)
    z = np.zeros(0, np.int64)
    assert a.stacks.signature_events(z, z).shape == (0,)
    at, ev = a.details.holder_points(z, z, z)
    assert at.shape == ev.shape == (0,)
    assert a.details.signatures(z) == []


def _synth(frames, anns, ops, gaps):
    """One thread: nested Python frames, annotations, ops (each (ts, dur) µs), then kernels with the gaps
    between them launched at the given times."""
    s = Synth()
    for depth, items in enumerate(frames):
        for k, (ts, dur) in enumerate(items):
            name = ("capture/recorder.py(10): step" if depth == 0 and k % 3 == 2 else
                    f"model/m{depth}.py({k + 1}): f{k}" if k % 2 == 0 else f"/site-packages/lib.py({k}): g")
            s.python(name, ts, dur)
    for k, (ts, dur) in enumerate(anns):
        s.annotation("gapscope.step#0" if k == 0 else f"region{k}", ts, dur)
    for k, (ts, dur) in enumerate(ops):
        s.cpu_op("aten::item" if k % 3 == 0 else "aten::add", ts, dur)
    t = 0.0
    for k, (lt, gap) in enumerate(gaps):
        t += gap
        s.launch(ts=lt, dur=0.5, kernel=f"k{k}", k_ts=max(t, lt + 0.6), k_dur=1.0)
        t = max(t, lt + 0.6) + 1.0
    return model_of(s)


span = st.tuples(st.integers(0, 300).map(float), st.sampled_from([0.0, 1.0, 5.0, 20.0, 80.0, 300.0]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(st.lists(span, max_size=4), max_size=3), anns=st.lists(span, max_size=3),
       ops=st.lists(span, max_size=4), gaps=st.lists(st.tuples(st.integers(0, 300).map(float),
                                                              st.integers(0, 40).map(float)), min_size=1, max_size=6),
       pts=st.lists(st.tuples(st.integers(-1, 2), st.integers(-10_000, 700_000)), max_size=30))
def test_synthetic_edges(frames, anns, ops, gaps, pts):
    m = _synth(frames, anns, ops, gaps)
    a = analyze(m, window="all")
    g = a.gaps
    base = int(m.ts_ns.min())
    thr = np.array([p[0] for p in pts], np.int64)
    t = np.array([base + p[1] for p in pts], np.int64)
    check_signatures(a, np.r_[thr, g.thread], np.r_[t, g.start_ns])
    # gap windows of every shape: the real ones, no thread, empty or reversed launch windows, window edges
    lo, hi = m.window_ns()
    check_holders(a, np.r_[g.thread, -1, 0, 0, 0, thr], np.r_[g.start_ns, lo, lo, hi, hi - 5, t],
                  np.r_[g.t_launch_ns, hi, lo, hi, hi, t + 40_000])
    rows = np.arange(len(g))
    assert analyze(m, window="all").details.signatures(rows) == [a.gap_detail(r).signature for r in rows.tolist()]
