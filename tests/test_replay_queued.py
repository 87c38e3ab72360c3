"""Which GPU items the replay treats as queued behind their stream (replay.model.queued_behind): an item whose
launch reached the GPU while its stream was still busy follows its predecessor when the predecessor gets faster;
one whose launch arrived after the stream freed up keeps its launch latency."""

from __future__ import annotations

import numpy as np

from tests.synth import Synth
from tests.helpers import SAMPLE_TRACES, US, model_of, replayed
from gapscope.analysis.replay.model import DEFAULT_LAUNCH_NS, queued_behind
from gapscope.trace import load


def test_queued_behind_by_hand():
    # one stream, items in order; the usual latency is the median over those launched onto an idle stream
    # (behind <= 0): items 0 (first), 3, 4 -> latencies 5, 7, 6 µs -> 6 µs
    first = np.array([True, False, False, False, False, False, False])
    has = np.array([True, True, True, True, True, True, False])
    qgap = np.array([0, 1, 3, 7, 2, 3, 9]) * US  # start - previous end
    behind = np.array([-10, 4, 500, 0, -4, 5, 50]) * US  # previous end - launch call start
    qgap[0], behind[0] = 10**12, 5 * US - 10**12  # the stream's first item: lat 5 µs
    got = queued_behind(first, qgap, behind, has)
    # 1: within QUEUED_NS of the previous end; 2: launched 500 µs (> 6) before it; 4: 2 µs = QUEUED_NS;
    # 5: launched 5 µs (< 6) before it and started 3 µs after: its latency (8 µs) is its launch's;
    # 6: no launch call (it follows its stream)
    assert got.tolist() == [False, True, True, False, True, False, False]


def test_without_idle_launches_the_default_latency_decides():
    first = np.array([True, False, False])
    has = np.array([False, True, True])
    qgap = np.array([0, 3, 3]) * US
    behind = np.array([0, DEFAULT_LAUNCH_NS // US + 1, DEFAULT_LAUNCH_NS // US - 1]) * US
    assert queued_behind(first, qgap, behind, has).tolist() == [False, True, False]


def _busy_stream():
    """k0 (launched at 10, 5 µs latency) runs 15..1015; k1 is launched at 20 (995 µs before k0 ends) and starts
    2.5 µs after k0's end, 1017.5..1117.5; k2 is launched at 1115 (2.5 µs before k1 ends) and starts 8 µs after its
    launch call, 5.5 µs after k1's end: 1123..1173. One step 0..1200."""
    s = Synth()
    s.launch("cudaLaunchKernel", 10, 2, kernel="k0", k_ts=15, k_dur=1000)
    s.launch("cudaLaunchKernel", 20, 2, kernel="k1", k_ts=1017.5, k_dur=100)
    s.python("user.py(5): wait", 22, 1093)
    s.launch("cudaLaunchKernel", 1115, 2, kernel="k2", k_ts=1123, k_dur=50)
    s.annotation("gapscope.step#0", 0, 1200)
    return s


def test_an_item_queued_behind_a_busy_stream_follows_its_predecessor():
    a, r = replayed(model_of(_busy_stream()))
    m = a.model
    names = [m.name(int(i)) for i in r.items]
    assert names == ["k0", "k1", "k2"]
    # the median latency of the items not queued: k0's 5 µs and k2's 8 µs (k1's 997.5 µs is its queue's)
    assert r.launch_lat_ns == 6.5 * US
    end = r.run()
    assert (end - r.start[0]).tolist() == [1000 * US, 1102.5 * US, 1158 * US]  # the recording, exactly
    # k0 made 10x faster (15..115): k1 starts 2.5 µs after it (117.5..217.5), k2 keeps its launch at 1115 + 8
    dur = r.dur.copy()
    dur[0] = 100 * US
    end = r.run(dur=dur)
    assert (end - r.start[0]).tolist() == [100 * US, 202.5 * US, 1158 * US]


def test_resnet50_fp32_queue():
    """resnet50.fp32 (GPU-bound, TF32 off): the 132 items launched more than the usual launch latency before their
    stream's previous end, counted from the raw events here, are the ones the replay queues beyond QUEUED_NS; the
    replay of the unchanged trace still ends where the recording does."""
    a, r = replayed(load(str(SAMPLE_TRACES / "resnet50.fp32.json.gz")))
    m = a.model
    it = r.items
    s, e = m.ts_ns[it], m.ts_ns[it] + m.dur_ns[it]
    lts = m.ts_ns[m.launch[it]]
    assert (m.launch[it] >= 0).all()
    busy, usual = [], []
    for t in np.unique(m.track[it]).tolist():
        k = np.flatnonzero(m.track[it] == t)
        prev_end = None
        for j in k.tolist():
            if prev_end is None or lts[j] >= prev_end:
                if prev_end is None or s[j] - prev_end > 2 * US:
                    usual.append(int(s[j] - lts[j]))
            elif s[j] - prev_end > 2 * US:
                busy.append((j, int(prev_end - lts[j]), int(s[j] - prev_end)))
            prev_end = e[j] if prev_end is None else max(prev_end, e[j])
    lat = float(np.median(usual))
    late = [(j, b, q) for j, b, q in busy if b > lat]
    assert len(usual) == 9 and len(late) == 132
    assert sum(bool(r.in_window[j]) for j, _, _ in late) == 69  # in the measured steps
    assert min(b for _, b, _ in late) > 400 * US
    # all but 4 started less than 4 µs after their predecessor; those 4 (2 in the steps: an FFT convolution's
    # second stream) started within 1 µs of the end of an item on the other stream (its flip_filter: an event
    # wait), 485-493 µs after their own stream's previous end: as queued items they keep that as a GPU-side gap
    slow = [j for j, _, q in late if q >= 4 * US]
    assert len(slow) == 4 and sum(bool(r.in_window[j]) for j in slow) == 2
    for j in slow:
        other = (m.track[it] != m.track[it[j]]) & (np.abs(e - s[j]) < 1 * US)
        assert m.name(int(it[j])).startswith("void fft2d_r2c") and other.sum() == 1
        assert m.name(int(it[other][0])).startswith("void flip_filter")
    got = r.lat == np.minimum(s - lts, r.launch_lat_ns)
    # these items keep the usual latency (capped), not their recorded 0.6-3.9 ms
    assert all(got[j] and r.lat[j] < 100 * US for j, _, _ in late)
    end = r.run()
    assert int(end.max()) == int(e.max())
