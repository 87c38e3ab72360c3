"""``hosttime.frame_own_intervals`` (each event's call interval from its index range, the subtraction of children
that lie inside the calls by ``minus_inside``) gives what its first version gave (kept here as the reference: a
search for each event's interval and ``intervals.subtract``), on the sample traces' frames with the replay's
children (replay/fixes.python_own's kinds) and on synthetic calls and children that nest, touch, repeat and are empty."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.analysis import analyze
from gapscope.analysis.hosttime import minus_inside, frame_own_intervals
from gapscope.analysis.intervals import member, subtract, union, uniq
from gapscope.trace import load
from gapscope.trace.model import Kind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "traces", "*.json.gz")))


def reference(m, calls, children):
    fs, fe, ft = calls
    S, E, T = [], [], []
    for t in np.unique(ft).tolist():
        a_s, a_e = fs[ft == t], fe[ft == t]
        sl = m.track_slice(int(t))
        us, ue = union(a_s, a_e)
        if us.size:
            tts = m.ts_ns[sl]
            lo = np.searchsorted(tts, us, side="left")
            hi = np.searchsorted(tts, ue, side="right")
            n = hi - lo
            ev = sl.start + np.repeat(lo - np.concatenate(([0], np.cumsum(n)[:-1])), n) + np.arange(int(n.sum()))
        else:
            ev = np.arange(sl.start, sl.stop)
        ev = ev[children[ev]]
        es, ee = m.ts_ns[ev], m.ts_ns[ev] + m.dur_ns[ev]
        j = np.clip(np.searchsorted(us, es, side="right") - 1, 0, None)
        inside = (us.size > 0) & (es >= us[j]) & (ee <= ue[j]) & ~((es == us[j]) & (ee == ue[j]))
        ev = ev[inside]
        s, e = subtract(a_s, a_e, m.ts_ns[ev], m.ts_ns[ev] + m.dur_ns[ev])
        S.append(s), E.append(e), T.append(np.full(s.size, t, np.int64))
    return np.concatenate(S), np.concatenate(E), np.concatenate(T)


def _same(x, y):
    assert len(x) == len(y)
    for u, v in zip(x, y):
        assert u.dtype == v.dtype and np.array_equal(u, v)


@pytest.mark.parametrize("path", SAMPLES, ids=os.path.basename)
def test_sample_frames(path):
    m = load(path)
    a = analyze(m)
    py = np.flatnonzero(m.kind == int(Kind.PYTHON))
    # the children the replay's fix keeps (runtime calls, user frames and launchers), every event, the others
    calls = member(m.kind, (int(Kind.RUNTIME), int(Kind.DRIVER)))
    user = (a.flags["user_frame"][m.name_id] | a.flags["launcher_frame"][m.name_id]) & (m.kind == int(Kind.PYTHON))
    checked = 0
    for nid in uniq(m.name_id[py]).tolist()[:40]:
        idx = py[m.name_id[py] == nid]
        fr = m.ts_ns[idx], m.ts_ns[idx] + m.dur_ns[idx], m.track[idx].astype(np.int64)
        children = calls | (user & (m.name_id != nid))
        for ch in (children, np.ones(m.n, bool), ~children):
            _same(frame_own_intervals(m, fr, ch), reference(m, fr, ch))
        checked += 1
    assert checked or not py.size


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 80), st.integers(0, 15)), max_size=30))
def testminus_inside_is_subtract(calls, kids):
    a_s = np.array([s for s, _ in calls], np.int64)
    a_e = a_s + np.array([d for _, d in calls], np.int64)
    us, ue = union(a_s, a_e)
    b_s = np.array([s for s, _ in kids], np.int64)
    b_e = b_s + np.array([d for _, d in kids], np.int64)
    if us.size:  # only the children inside one of the calls, as frame_own_intervals passes them
        j = np.clip(np.searchsorted(us, b_s, side="right") - 1, 0, None)
        ok = (b_s >= us[j]) & (b_e <= ue[j])
        b_s, b_e = b_s[ok], b_e[ok]
        _same(minus_inside(us, ue, b_s, b_e), subtract(a_s, a_e, b_s, b_e))
