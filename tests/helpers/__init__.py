"""What the tests share: paths, the columnar model of a synthetic trace, and the synthetic traces that more than
one test file builds on. Explorer helpers (they import textual) are in ``tests.helpers.app``, the robustness
corpus in ``tests.helpers.corpus``, the capture's (torch) in ``tests.helpers.capture``. A test file imports
from here, never from another test file."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest

from tests.synth import Synth
from gapscope.analysis import CAUSES
from gapscope.trace.build import ColumnBuilder

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLE_TRACES = ROOT / "traces"
SHARED_TRACES = ROOT.parent / "shared" / "traces"
#: the JSON contract shipped in the package
SCHEMA_PATH = ROOT / "gapscope" / "report" / "findings.schema.json"
US = 1_000  # ns: the synthetic traces are written in µs


def first_event(m, name: str) -> int:
    """The first event of model ``m`` named ``name``."""
    return int(np.flatnonzero(m.name_id == m.names.index(name))[0])


def replayed(model, **kw):
    """``(a, r)``: the analysis of ``model`` (``analyze(model, **kw)``) and the replay of its recording."""
    from gapscope.analysis import analyze
    from gapscope.analysis.replay.model import Replay

    a = analyze(model, **kw)
    return a, Replay(a.model, a.window, a.flags)


def model_of(s: Synth):
    """The columnar model of a synthetic trace, built in memory (no file, no cache)."""
    doc = s.doc()
    b = ColumnBuilder("<synth>")
    b.add(doc["traceEvents"])
    return b.finish({k: v for k, v in doc.items() if k != "traceEvents"})


def all_traces() -> list[Path]:
    """Every sample trace, and every shared one (but the deliberately invalid) when ../shared/traces is present."""
    out = sorted(SAMPLE_TRACES.glob("*.json.gz"))
    if SHARED_TRACES.is_dir():
        out += sorted(p for p in SHARED_TRACES.glob("*/*.json*") if "invalid" not in p.name)
    return out


def shared_trace(rel: str) -> Path:
    """A trace of ../shared/traces (``rel`` below it); the test is skipped where it is not present."""
    p = SHARED_TRACES / rel
    if not p.exists():
        pytest.skip(f"{rel} not present")
    return p


def largest_gap(a):
    """(row, cause, detail) of the analysis's largest gap."""
    i = int(np.argmax(a.gaps.dur_ns))
    return i, CAUSES[int(a.gaps.cause[i])], a.gap_detail(i)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------ small valid traces
def good_trace() -> Synth:
    """The smallest trace with everything a normal one has: an op launching a kernel, a CPU op, a range."""
    t = Synth()
    with t.op("aten::linear", 10.0, 20.0):
        t.launch("cudaLaunchKernel", 12.0, 2.0, kernel="gemm", k_ts=30.0, k_dur=5.0)
    t.cpu_op("aten::relu", 40, 3)
    t.annotation("step", 0, 50)
    return t


def kineto_layout(doc: dict) -> bytes:
    """Kineto's own layout: one event per few lines, `},\\n  {` between events."""
    head = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items() if k != "traceEvents")
    evs = ",\n".join("  " + json.dumps(e) for e in doc["traceEvents"])
    return ("{\n" + head + ',\n  "traceEvents": [\n' + evs + "\n  ],\n  \"traceName\": \"x\"\n}\n").encode()


# ------------------------------------------------------------------------------ one gap (cause scenarios)
def one_gap(next_launch=195.0, next_k=200.0) -> Synth:
    """The cause scenarios' start: kernel ``prev`` ends at t0 = 100 µs; ``next_at`` holds when the next kernel's
    launch call starts and when the kernel starts (200 µs: a 100 µs gap), for the scenario to finish."""
    s = Synth()
    s.launch(ts=0, dur=2, kernel="prev", k_ts=50, k_dur=50)
    s.next_at = (next_launch, next_k)
    return s


def sync_scenario(s: Synth):
    """A user frame that reads a GPU value with ``.item()`` across t0 (its stream sync returns at 102 µs), then
    Python work until the next launch."""
    with s.frame("model.py(42): hook", 60, 45):
        with s.frame("<built-in method item of Tensor object at 0x7f>", 61, 43):
            s.cpu_op("aten::item", 61, 43)
            s.cpu_op("aten::_local_scalar_dense", 62, 41)
            s.runtime("cudaMemcpyAsync", 63, 2)
            s.runtime("cudaStreamSynchronize", 66, 36)  # returns at 102, after t0 = 100
    s.python("model.py(50): sample", 106, 85)


# ------------------------------------------------------------------------------ stepped traces (before/after)
KD = 5.0  # µs, every kernel unless told


def stepped(steps, *, frame="app.py(7): work", profiler_steps=False) -> Synth:
    """Steps of kernels; each entry (kernel, gap before it in µs, what the CPU did in the gap, [dur], [shapes]):
    "launch" = an aten op dispatching through the gap, "python" = a Python frame holding the CPU. Each kernel is
    launched 2 µs before it starts; each step range runs from the end of the previous step's last kernel."""
    s = Synth()
    t = 100.0
    for k, seq in enumerate(steps):
        start = t
        for entry in seq:
            name, gap, how = entry[:3]
            dur = entry[3] if len(entry) > 3 else KD
            shapes = entry[4] if len(entry) > 4 else None
            k_ts = t + gap
            if how == "python":
                s.python(frame, t + 0.5, gap - 3)
            else:
                s.cpu_op("aten::add", t + 0.5, gap - 3)
            if shapes is not None:
                with s.op("aten::mm", k_ts - 2.5, 2, **{"Input Dims": shapes}):
                    s.launch(ts=k_ts - 2, dur=1, kernel=name, k_ts=k_ts, k_dur=dur)
            else:
                s.launch(ts=k_ts - 2, dur=1, kernel=name, k_ts=k_ts, k_dur=dur)
            t = k_ts + dur
        s.annotation(f"ProfilerStep#{k + 7}" if profiler_steps else f"gapscope.step#{k}", start, t - start)
    return s


# A: 2 steps of k1 k2 k3; B: 4 steps of k1 k23 (k2 and k3 fused), with a different Python frame
A_STEP = [("k1", 10, "launch"), ("k2", 20, "python"), ("k3", 10, "launch")]
B_STEP = [("k1", 10, "launch"), ("k23", 30, "python", 8.0)]


def assert_same_model(a, b) -> None:
    """Two loads of one trace gave the same model: every column array equal (dtype too), every side table equal."""
    from gapscope.trace.cache import COLUMNS

    for k in COLUMNS:
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype, k
        assert np.array_equal(x, y), k
    for k in ("names", "args", "tracks", "devices", "metadata", "warnings", "category_counts"):
        assert getattr(a, k) == getattr(b, k), k
    assert list(a.category_counts) == list(b.category_counts)
