"""The replay's event loop computed by epochs with arrays (replay_model.Replay._chain) against the one-item-at-a-
time loop it replaced, bit for bit: every run ``project`` makes on real traces (calibration, every fix, every frame
what-if), with the array path forced on every chain, and chains built to make its sums round."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import SAMPLE_TRACES, SHARED_TRACES, replayed
from gapscope.analysis import analyze
from gapscope.analysis.replay import project
from gapscope.analysis.replay.model import Replay, chain_loop, chain_vector, chain_holds
from gapscope.trace import load

THIRDPARTY = SHARED_TRACES / "thirdparty"


def loop_chain(r: Replay, fs, fe, skip, lat, qg, dur, dropped) -> np.ndarray:
    """The reference: the replay's loop as it was written first, one anchor and one item at a time."""
    na = r.anchors.size
    lat, qg, start = lat.tolist(), qg.tolist(), r.start.tolist()
    dur = dur.tolist()
    trk, dev, has, ia = r.trk.tolist(), r.dev.tolist(), r.has_launch.tolist(), r.item_anchor.tolist()
    dropped = dropped.tolist() if dropped is not None else None
    end = [0.0] * len(lat)
    stream_end, dev_end, shift = {}, {}, {}
    lprime = [0.0] * na
    NEG = -1e30

    def item(j):
        if dropped is not None and dropped[j]:
            end[j] = NEG
            return
        a = lprime[ia[j]] + lat[j] if has[j] else float(start[j])
        b = stream_end.get(trk[j], NEG) + qg[j]
        st = a if a > b else b
        en = st + dur[j]
        end[j] = en
        stream_end[trk[j]] = en
        if en > dev_end.get(dev[j], NEG):
            dev_end[dev[j]] = en

    for j in r._pre.tolist():
        item(j)
    order, ptr = r._order.tolist(), r._ptr.tolist()
    thr_l, fsl, fel = r.a_thr.tolist(), fs.tolist(), fe.tolist()
    waits, tail, skl = r.waits.tolist(), r.tail.tolist(), skip.tolist()
    for p in range(na):
        th = thr_l[p]
        sp = fsl[p] + shift.get(th, 0.0)
        lprime[p] = sp
        for j in order[ptr[p]:ptr[p + 1]]:
            item(j)
        if waits[p] and not skl[p]:
            g = max((dev_end.get(dv, NEG) for dv in r.thr_devs.get(th, r.devices)), default=NEG)
            shift[th] = (sp if sp > g else g) + tail[p] - fel[p]
    return np.asarray(end, np.float64)


def _checked(monkeypatch, short: int):
    """Every ``_chain`` call also runs the reference; returns the list of (runs, mismatching runs)."""
    seen = [0, 0]
    real = Replay._chain

    def both(self, fs, fe, skip, lat, qg, dur, dropped):
        got = real(self, fs, fe, skip, lat, qg, dur, dropped)
        want = loop_chain(self, fs, fe, skip, lat, qg, dur, dropped)
        seen[0] += 1
        if got.tobytes() != want.tobytes():
            seen[1] += 1
        return got

    monkeypatch.setattr(Replay, "_chain", both)
    monkeypatch.setattr(Replay, "_SHORT_CHAIN", short)
    return seen


_CASES = [SAMPLE_TRACES / "hf-generate.generate.json.gz", SAMPLE_TRACES / "demo-eager-sync.decode.json.gz",
          SAMPLE_TRACES / "demo-eager-alloc.decode.json.gz", SAMPLE_TRACES / "demo-eager-tp.decode.rank0.json.gz",
          THIRDPARTY / "tracelens__b200_eager_trace.json.gz", THIRDPARTY / "hta__nccl_data.json.gz",
          THIRDPARTY / "kineto__tbp_2021-06_resnet50_nw0_worker0.1623143089861.pt.trace.json.gz"]


@pytest.mark.parametrize("path", _CASES, ids=lambda p: p.name)
@pytest.mark.parametrize("short", [1, 48])
def test_every_run_of_a_projection_is_the_loops_bit_for_bit(path, short, monkeypatch):
    if not path.exists():
        pytest.skip(f"{path} is not present")
    seen = _checked(monkeypatch, short)
    a = analyze(load(str(path)))
    project(a)
    assert seen[0] >= 2  # the recorded replay at least, and the base
    assert seen[1] == 0, f"{seen[1]} of {seen[0]} runs differ from the loop"


def test_a_chain_whose_sums_round_falls_back_to_the_loop():
    # at 2**54 ns a float holds multiples of 4: the loop rounds after each addition (2**54 + 1 -> 2**54, then
    # + 2 -> 2**54, ties to even), the sum formula rounds once (2**54 + 3 -> 2**54 + 4); the check refuses it
    e0 = float(2 ** 54)
    a = np.zeros(3)
    q = np.ones(3, np.int64)
    d = np.full(3, 2, np.int64)
    want = chain_loop(a, q, d, e0)
    assert want.tolist() == [e0, e0, e0]
    assert chain_vector(a, q, d, e0) is None
    # within one binade the formula is exact: the array path answers, and it is the loop's
    rng = np.random.default_rng(7)
    n = 200
    a2 = 1e9 + np.cumsum(rng.integers(0, 500, n)).astype(np.float64) + 0.375
    q2 = rng.integers(0, 3, n).astype(np.int64)
    d2 = rng.integers(100, 200, n).astype(np.int64)
    got2 = chain_vector(a2, q2, d2, 1e9)
    assert got2 is not None and got2.tobytes() == chain_loop(a2, q2, d2, 1e9).tobytes()


def test_the_check_accepts_the_loops_result_and_nothing_one_ulp_off():
    rng = np.random.default_rng(3)
    n = 100
    a = 5e8 + np.cumsum(rng.integers(0, 300, n)).astype(np.float64) + 0.1
    q = rng.integers(0, 3, n).astype(np.int64)
    d = rng.integers(50, 250, n).astype(np.int64)
    want = chain_loop(a, q, d, 5e8)
    assert chain_holds(a, q, d, 5e8, want)
    for k in (0, n // 2, n - 1):
        off = want.copy()
        off[k] = np.nextafter(off[k], np.inf)
        assert not chain_holds(a, q, d, 5e8, off)


def test_host_events_counted_around_removed_intervals_are_those_of_the_filtered_list():
    # the per-event overhead counts the recorded host events before each anchor, those inside removed
    # intervals left out: against the list with those events filtered out, as first written
    from gapscope.analysis.replay.model import Removed, inside as _inside

    a, r = replayed(load(str(SAMPLE_TRACES / "hf-generate.generate.json.gz")))
    rng = np.random.default_rng(11)
    thr = int(np.unique(r.a_thr)[0])
    sel = r.a_thr == thr
    ts, te = r.a_ts[sel], r.a_end[sel]
    ev = r.host_ev[thr]
    lo, hi = int(ev.min()), int(ev.max())
    for n in (1, 5, 300):
        s = np.sort(rng.integers(lo - 1000, hi + 1000, n))
        R = Removed(s, s + rng.integers(1, 200_000, n))
        # interval ends exactly on events and anchors too
        s2, e3 = ev[::97], ts[::89]
        R = Removed(np.r_[R.s, s2, e3 - 5_000], np.r_[R.e, s2 + 3_000, e3])
        kept = ev[~_inside(R.s, R.e, ev)]
        n_o = np.searchsorted(kept, r.origin)
        want = (np.clip(np.searchsorted(kept, ts) - n_o, 0, None), np.clip(np.searchsorted(kept, te) - n_o, 0, None))
        got = r._events_before(thr, ts, te, R)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    n_o = np.searchsorted(ev, r.origin)
    got = r._events_before(thr, ts, te, None)
    assert np.array_equal(got[0], np.clip(np.searchsorted(ev, ts) - n_o, 0, None))
