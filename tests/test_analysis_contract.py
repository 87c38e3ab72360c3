"""The analysis API the explorer and the report code against: names, types, dtypes."""

from __future__ import annotations

import numpy as np

from tests.helpers import model_of, one_gap, sync_scenario
from gapscope.analysis import CAUSE_EXPLANATIONS, CAUSES, Analysis, Thresholds, analyze


def test_contract():
    assert tuple(CAUSES) == ("autotune", "copy", "collective", "sync", "user-sync", "gpu-wait", "profiler", "gil",
                             "allocator", "stall", "python", "launch", "host-idle")
    assert set(CAUSE_EXPLANATIONS) == set(CAUSES)
    s = one_gap()
    sync_scenario(s)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    m = model_of(s)
    a = analyze(m, config=Thresholds())
    assert isinstance(a, Analysis) and a.model is m
    # by hand from the trace: kernel "prev" 50..100 µs and "next" 200..210 µs on device 0, stream 7 (an
    # H200, no rank); "next" launched at 195 µs; no copies
    d = a.devices[0]
    assert (d.rank, d.device, d.name) == (None, 0, "NVIDIA H200")
    assert (d.window_start_ns, d.window_end_ns, d.window_ns) == (50_000, 210_000, 160_000)
    assert (d.kernel_busy_ns, d.copy_busy_ns, d.idle_ns) == (60_000, 0, 100_000)
    assert d.idle_pct == 100.0 * 100 / 160
    assert d.stream_busy_ns == {7: 60_000}
    g = a.gaps
    assert len(g) == 1
    assert g.device.dtype == np.int32 and g.cause.dtype == np.uint8
    for col in (g.start_ns, g.end_ns, g.dur_ns, g.next_idx, g.launch_idx):
        assert col.dtype == np.int64 and col.shape == (len(g),)
    assert (g.dur_ns == g.end_ns - g.start_ns).all()
    assert (int(g.start_ns[0]), int(g.end_ns[0])) == (100_000, 200_000)
    assert m.name(int(g.next_idx[0])) == "next" and int(m.ts_ns[int(g.next_idx[0])]) == 200_000
    assert m.name(int(g.launch_idx[0])) == "cudaLaunchKernel" and int(m.ts_ns[int(g.launch_idx[0])]) == 195_000
    det = a.gap_detail(0)
    assert det.cause in CAUSES and isinstance(det.explanation, str) and det.explanation
    assert set(det.breakdown) == {"python", "op", "runtime", "profiler", "sync", "allocator", "idle"}
    assert det.next_kernel == "next" and det.launch == "cudaLaunchKernel"
    assert det.thread_track == int(m.track[int(g.launch_idx[0])])
    for fr in det.stack + det.launch_stack:
        assert fr.kind in ("python", "annotation", "op", "runtime", "sync")
        assert isinstance(fr.name, str) and isinstance(fr.event, int)
    assert a.gap_detail(0) is det  # cached
    f = a.findings[0]
    assert len(a.findings) == 1 and f.cause == "sync" and f.idle_ns == 100_000
    assert isinstance(f.id, str) and f.id and f.severity in ("high", "medium", "low")
    assert isinstance(f.title, str) and "model.py(42): hook" in f.title
    assert f.evidence["gaps"] == 1 and f.evidence["idle_us"] == 100.0 and f.evidence["frame"] == "model.py(42): hook"
    assert isinstance(f.suggestion, str) and f.suggestion
    assert isinstance(f.gap_rows, np.ndarray) and f.gap_rows.tolist() == [0]
    # kernels by total time: prev 50 µs, next 10 µs; pct of the 60 µs of kernel time; no op, no shapes, no floor
    assert [(k.name, k.count, k.total_ns) for k in a.kernels] == [("prev", 1, 50_000), ("next", 1, 10_000)]
    assert [k.pct for k in a.kernels] == [100.0 * 50 / 60, 100.0 * 10 / 60]
    k = a.kernels[0]
    assert (k.op, k.shapes, k.floor_ns, k.bound) == (None, None, None, None)
    assert isinstance(a.syncs, list) and isinstance(a.copies, list) and isinstance(a.allocator, dict)
    assert isinstance(a.collectives, list) and isinstance(a.launches, dict) and isinstance(a.warnings, list)
    assert a.distortion is None
