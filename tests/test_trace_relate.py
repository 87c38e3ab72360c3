"""The finish's sort and the Python frames' depth (gapscope/trace/relate.py) against their plain definitions."""

from __future__ import annotations

import numpy as np
import pytest

from gapscope.trace import relate


@pytest.mark.parametrize("spread", [50, 10**6, 2**61])
def test_sort_order_is_lexsort_of_track_time_and_longest_first(spread):
    rng = np.random.default_rng(spread)
    n = 20_000
    track = rng.integers(0, 7, n).astype(np.int32)
    ts = rng.integers(0, spread, n).astype(np.int64)  # a spread of 50: many ties on (track, ts)
    dur = rng.integers(0, 4, n).astype(np.int64)  # and on the duration too: ties keep their order
    want = np.lexsort((-dur, ts, track))
    got = relate.sort_order(track, ts, dur)
    assert np.array_equal(got, want)
    assert relate.sort_order(track[:0], ts[:0], dur[:0]).size == 0


def _depth_one_step_a_round(par_local, cap):
    d = np.zeros(par_local.size, dtype=np.int64)
    cur = par_local.copy()
    for _ in range(cap):
        live = cur >= 0
        if not live.any():
            break
        d[live] += 1
        cur[live] = par_local[cur[live]]
    return d


def test_python_depth_by_pointer_jumping_counts_ancestors_and_stops_on_cycles():
    # a chain 6,000 deep (past the cap), a tree, roots, a cycle of three and a frame hanging from it
    chain = list(range(-1, 5999))
    n0 = len(chain)
    tree = [-1, n0, n0, n0 + 1, n0 + 3]
    cyc = [len(chain) + len(tree) + 1, len(chain) + len(tree) + 2, len(chain) + len(tree), len(chain) + len(tree)]
    par_local = np.array(chain + tree + cyc, dtype=np.int64)
    n = par_local.size
    py = np.arange(n)
    pyid = np.arange(n, dtype=np.int64) + 100
    pypar = np.where(par_local >= 0, par_local + 100, -1)
    depth = np.zeros(n, dtype=np.int16)
    parent = np.full(n, -1, dtype=np.int64)
    relate._tree_nesting(py, pyid, pypar, depth, parent)
    assert np.array_equal(parent, par_local)
    want = _depth_one_step_a_round(par_local, relate._MAX_TREE_DEPTH)
    assert np.array_equal(depth, want.astype(np.int16))
    assert depth[n0 + 4] == 3 and depth[5999] == relate._MAX_TREE_DEPTH and depth[-1] == relate._MAX_TREE_DEPTH


def test_nesting_in_threads_gives_the_serial_model(monkeypatch):
    # the nesting's parts (the CPU ranges in two, the Python frames' id tree) run in threads from
    # NESTING_THREAD_MIN events: the same depth and parent as in one thread, on a real trace
    import os

    from gapscope.trace.read import load
    from tests.helpers import assert_same_model

    sample = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces",
                          "hf-llama.decode.json.gz")
    monkeypatch.setattr(relate, "NESTING_THREAD_MIN", 10**12)
    serial = load(sample, no_cache=True)
    monkeypatch.setattr(relate, "NESTING_THREAD_MIN", 2)
    cuts = []
    real_cut = relate.quiet_cut
    monkeypatch.setattr(relate, "quiet_cut", lambda *a: cuts.append(real_cut(*a)) or cuts[-1])
    import threading

    seen = []
    real_start = threading.Thread.start

    def start(self):
        seen.append(self.name)
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    threaded = load(sample, no_cache=True)
    assert seen.count("gapscope-nesting") == 2  # the second part of the CPU ranges, and the Python tree
    assert cuts and cuts[0] is not None
    assert_same_model(serial, threaded)
    assert int((serial.depth > 0).sum()) > 1000


@pytest.mark.parametrize("seed", range(6))
def test_time_nesting_of_the_two_parts_at_a_quiet_cut_is_that_of_the_whole(seed):
    # nested and overlapping ranges, zero-length ones, ties of start and of (start, duration), several tracks:
    # the two parts at quiet_cut give every depth and parent of one pass
    rng = np.random.default_rng(seed)
    rows = []
    for trk in range(3):
        t = 0
        for _ in range(int(rng.integers(50, 400))):
            t += int(rng.integers(0, 30))
            for _ in range(int(rng.integers(1, 5))):  # a burst: several ranges open at once, some empty
                rows.append((trk, t + int(rng.integers(0, 3)), int(rng.choice([0, 0, 1, 5, 40, 200]))))
    a = np.array(rows, dtype=np.int64)
    track, ts, dur = a[:, 0], a[:, 1], a[:, 2]
    idx = np.lexsort((-dur, ts, track))
    n = idx.size
    track_of = track
    k = relate.quiet_cut(idx, ts, dur, track_of)
    assert k is not None and 0 < k < n
    s, e, tr = ts[idx], ts[idx] + dur[idx], track[idx]
    # the cut's claim itself: on each track nothing before k ends after anything from k on starts
    for t in np.unique(tr).tolist():
        a_, b_ = (tr[:k] == t), (tr[k:] == t)
        if a_.any() and b_.any():
            assert e[:k][a_].max() <= s[k:][b_].min()
    d1, p1 = np.zeros(n, np.int16), np.full(n, -1, np.int64)
    relate.time_nesting(idx, ts, dur, track_of, d1, p1)
    d2, p2 = np.zeros(n, np.int16), np.full(n, -1, np.int64)
    relate.time_nesting(idx[:k], ts, dur, track_of, d2, p2)
    relate.time_nesting(idx[k:], ts, dur, track_of, d2, p2)
    assert np.array_equal(d1, d2) and np.array_equal(p1, p2)
    assert (d1 > 1).sum() > 10


def test_quiet_cut_is_none_when_one_range_spans_the_middle():
    ts = np.array([0] + list(range(1, 101)), dtype=np.int64)
    dur = np.array([1000] + [1] * 100, dtype=np.int64)  # the first range holds all the others
    idx = np.arange(ts.size)
    assert relate.quiet_cut(idx, ts, dur, np.zeros(ts.size, np.int64)) is None
