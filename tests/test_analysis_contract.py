"""The analysis API the explorer and the report code against: names, types, dtypes."""

from __future__ import annotations

import numpy as np

from tests.test_causes import base, sync_scenario
from tests.test_analysis import model_of
from tui.analysis import CAUSE_EXPLANATIONS, CAUSES, Analysis, Thresholds, analyze


def test_contract():
    assert tuple(CAUSES) == ("copy", "collective", "sync", "gpu-wait", "profiler", "allocator", "python", "launch",
                             "host-idle")
    assert set(CAUSE_EXPLANATIONS) == set(CAUSES)
    s = base()
    sync_scenario(s)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    m = model_of(s)
    a = analyze(m, config=Thresholds())
    assert isinstance(a, Analysis) and a.model is m
    d = a.devices[0]
    for attr in ("rank", "device", "name", "window_start_ns", "window_end_ns", "window_ns", "kernel_busy_ns",
                 "copy_busy_ns", "idle_ns", "idle_pct", "stream_busy_ns"):
        assert hasattr(d, attr), attr
    assert isinstance(d.stream_busy_ns, dict)
    g = a.gaps
    assert len(g) == 1
    assert g.device.dtype == np.int32 and g.cause.dtype == np.uint8
    for col in (g.start_ns, g.end_ns, g.dur_ns, g.next_idx, g.launch_idx):
        assert col.dtype == np.int64 and col.shape == (len(g),)
    assert (g.dur_ns == g.end_ns - g.start_ns).all()
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
    for attr in ("id", "severity", "title", "idle_ns", "evidence", "suggestion", "gap_rows"):
        assert hasattr(f, attr), attr
    assert isinstance(f.gap_rows, np.ndarray)
    k = a.kernels[0]
    for attr in ("name", "count", "total_ns", "pct", "op", "shapes", "floor_ns", "bound"):
        assert hasattr(k, attr), attr
    assert isinstance(a.syncs, list) and isinstance(a.copies, list) and isinstance(a.allocator, dict)
    assert isinstance(a.collectives, list) and isinstance(a.launches, dict) and isinstance(a.warnings, list)
    assert a.distortion is None
