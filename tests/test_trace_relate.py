"""The finish's sort and the Python frames' depth (tui/trace/relate.py) against their plain definitions."""

from __future__ import annotations

import numpy as np
import pytest

from gapscope.tui.trace import relate


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


def test_python_tree_in_a_thread_gives_the_serial_model(monkeypatch):
    # the Python frames' id tree is built in a thread beside the time nesting (TREE_THREAD_MIN frames or more):
    # the same depth and parent as one thread, on a real trace and on one whose frames have no ids
    import os

    from gapscope.tui.trace.read import load
    from tests.helpers import assert_same_model

    sample = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces",
                          "hf-llama.decode.json.gz")
    monkeypatch.setattr(relate, "TREE_THREAD_MIN", 10**12)
    serial = load(sample, no_cache=True)
    monkeypatch.setattr(relate, "TREE_THREAD_MIN", 1)
    import threading

    seen = []
    real_start = threading.Thread.start

    def start(self):
        seen.append(self.name)
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    threaded = load(sample, no_cache=True)
    assert "gapscope-nesting" in seen
    assert_same_model(serial, threaded)
    assert int((serial.depth > 0).sum()) > 1000
