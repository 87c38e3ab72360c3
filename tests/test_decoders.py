"""The two event decoders (gapscope/trace/decode_typed.py, decode_dicts.py) and the lanes between them: a chunk
goes to a slower lane only when a decoder refuses it explicitly (SlowLane, for values of unexpected types or
out of range); any other exception is a bug and reaches the caller instead of becoming a silent slowdown."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tests.helpers import SAMPLE_TRACES
from gapscope.trace import build, decode_dicts, decode_typed, parallel, read
from gapscope.trace.build import ColumnBuilder
from gapscope.trace.decode_common import SlowLane
from gapscope.trace.model import NO_ID

pytestmark = pytest.mark.skipif(decode_typed._DEC_EV is None, reason="msgspec is not installed")


def _kernel(**kw):
    e = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 2,
         "args": {"correlation": 5, "device": 0, "stream": 7}}
    e.update(kw)
    return e


def test_a_bug_in_the_typed_stager_is_not_hidden_by_the_dict_lane(monkeypatch):
    def broken(*a):
        raise KeyError("a bug")

    monkeypatch.setattr(decode_typed, "stage_typed", broken)
    with pytest.raises(KeyError, match="a bug"):
        ColumnBuilder().add_bytes(json.dumps([_kernel()]).encode())


def test_a_bug_in_the_dict_stager_is_not_hidden_by_sanitising(monkeypatch):
    def broken(b, evs):
        raise AttributeError("a bug")

    monkeypatch.setattr(build, "stage_dicts", broken)
    with pytest.raises(AttributeError, match="a bug"):
        ColumnBuilder().add([_kernel()])


def test_values_of_unexpected_types_take_the_sanitised_lane_and_strict_mode_refuses_them(monkeypatch):
    evs = [_kernel(ts=True), _kernel(pid=[1], ts=20), _kernel(ts="30", name=5), _kernel(ts=40.5)]
    b = ColumnBuilder()
    b.add([dict(e) for e in evs])
    assert b.lanes == {"typed": 0, "typed_refused": 0, "dicts": 0, "sanitised": 1}
    m = b.finish()
    # a bool is not a time (dropped, counted); "30" is read as 30 µs; a list pid becomes its text
    assert sorted(m.ts_ns.tolist()) == [20_000, 30_000, 40_500]
    assert "5" in m.names and any(str(t.pid) == "[1]" for t in m.tracks)
    monkeypatch.setenv("GAPSCOPE_STRICT_DECODE", "1")
    with pytest.raises(SlowLane):
        ColumnBuilder().add([dict(e) for e in evs])


def test_clean_events_never_leave_their_lane():
    b = ColumnBuilder()
    b.add([_kernel(ts=10), _kernel(ts=20, pid="host", tid="stream 7")])
    b.add_bytes(json.dumps([_kernel(ts=30)]).encode())
    assert b.lanes == {"typed": 1, "typed_refused": 0, "dicts": 0, "sanitised": 0}


def test_an_id_beyond_64_bits_is_refused_by_the_typed_lane_and_read_as_no_id():
    b = ColumnBuilder()
    b.add_bytes(json.dumps([_kernel(args={"correlation": 2**70, "stream": 7})]).encode())
    assert b.lanes["typed_refused"] == 1 and b.lanes["dicts"] == 1 and b.lanes["sanitised"] == 0
    assert b.finish().corr.tolist() == [NO_ID]


def test_both_stagers_give_the_same_named_columns():
    evs = [_kernel(ts=10), _kernel(ts=15, cat="cuda_runtime", name="cudaLaunchKernel", tid=1),
           {"ph": "X", "cat": "python_function", "name": "f.py(1): g", "pid": 0, "tid": 1, "ts": 9, "dur": 9,
            "args": {"Python id": 3, "Python parent id": None}}]
    text = json.dumps(evs).encode()
    t = decode_typed.stage_typed(ColumnBuilder(), decode_typed.decode_events(text)).cols
    d = decode_dicts.stage_dicts(ColumnBuilder(), json.loads(text)).cols
    for f in ("ts", "dur", "kind", "corr", "ext", "pyid", "pypar", "nbytes", "ts_ok", "args_rows", "raw_rows"):
        assert np.array_equal(getattr(t, f), getattr(d, f)), f
    assert t.names == list(d.names) and t.pyid.tolist() == [NO_ID, NO_ID, 3] and t.pypar.tolist()[2] == NO_ID


# real traces: strict mode turns any refusal by the typed or the dict stager into an error
SAMPLES = ["demo-eager-sync.decode.json.gz", "demo-eager-tp.decode.rank1.json.gz", "hf-llama.decode.json.gz"]


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_traces_load_without_a_refusal(monkeypatch, name):
    monkeypatch.setenv("GAPSCOPE_STRICT_DECODE", "1")
    monkeypatch.setattr(parallel, "PARALLEL_MIN", None)
    m = read.load_uncached(str(SAMPLE_TRACES / name))
    with gzip.open(SAMPLE_TRACES / name) as f:
        raw = json.load(f)["traceEvents"]
    timed = [e for e in raw if e.get("ph") in ("X", "i", "I")]
    assert m.n == len(timed)  # every timed event, none dropped by a lane


def test_shared_traces_load_without_a_refusal(monkeypatch, shared_traces):
    """Traces written by other people (torch 1.x to 2.11, NVIDIA and AMD): none needs the sanitised lane."""
    monkeypatch.setenv("GAPSCOPE_STRICT_DECODE", "1")
    files = sorted(p for p in shared_traces.rglob("*.json*") if p.stat().st_size < 40_000_000)
    assert len(files) >= 20
    bad = []
    for p in files:
        try:
            read.load_uncached(str(p))
        except SlowLane:
            bad.append(p.name)
        except read.TraceError:
            pass  # not a trace, or broken beyond repair: the robustness tests cover those
    assert bad == []
