"""The two-process load path gives the same model as the one-process path (small thresholds keep it fast)."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from gapscope.trace import parallel, read, reader
from tests.helpers import assert_same_model

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces",
                      "demo-eager.decode.json.gz")

pytestmark = pytest.mark.skipif(parallel._orjson is None or not hasattr(os, "fork"), reason="needs orjson and fork")


def _load_both(path, monkeypatch, *, expect_split=True):
    merged = []
    orig = parallel.merge_parts

    def spy(*a, **k):
        merged.append(1)
        return orig(*a, **k)

    monkeypatch.setattr(parallel, "merge_parts", spy)
    monkeypatch.setattr(reader, "CHUNK", 64 << 10)  # many pieces on each side
    monkeypatch.setattr(parallel, "PARALLEL_MIN", 1)
    monkeypatch.setattr(parallel, "_cpus", lambda: 2)
    par = read.load_uncached(str(path))
    assert bool(merged) == expect_split
    monkeypatch.setattr(parallel, "PARALLEL_MIN", None)
    ser = read.load_uncached(str(path))
    return par, ser


@pytest.fixture(scope="module")
def doc():
    with gzip.open(SAMPLE, "rb") as f:
        return json.loads(f.read())


def test_parallel_equals_serial_on_sample(tmp_path, monkeypatch, doc):
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(doc, indent=1).encode())
    par, ser = _load_both(p, monkeypatch)
    assert par.n > 10_000 and len(par.tracks) > 3
    assert_same_model(par, ser)


def test_parallel_equals_serial_with_trailer_and_new_names_late(tmp_path, monkeypatch, doc):
    # keys after the event array, names and threads first seen only in the worker's half, a truncated file
    evs = list(doc["traceEvents"])
    late = [dict(e, name=f"late_{i}", tid=9000 + i % 3) for i, e in enumerate(evs[-200:]) if e.get("ph") == "X"]
    meta = [{"ph": "M", "name": "thread_name", "pid": e["pid"], "tid": e["tid"], "args": {"name": f"worker {i}"}}
            for i, e in enumerate(late[:3])]
    d = {"traceEvents": evs + meta + late, "traceName": "x", "deviceProperties": [{"id": 0, "name": "gpu"}]}
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(d).encode())
    par, ser = _load_both(p, monkeypatch)
    assert_same_model(par, ser)
    assert any(n.startswith("late_") for n in par.names)
    cut = tmp_path / "cut.json"
    raw = p.read_bytes()
    cut.write_bytes(raw[: len(raw) - 300])
    par, ser = _load_both(cut, monkeypatch)
    assert_same_model(par, ser)
    assert any("cut off" in w for w in par.warnings)


def test_parallel_falls_back_on_damage(tmp_path, monkeypatch, doc):
    evs = list(doc["traceEvents"])
    raw = json.dumps({"traceEvents": evs}).encode()
    # an unescaped quote in a name in the second half: only the lenient one-process reader repairs it
    i = raw.index(b'"name": "', len(raw) * 3 // 4)
    raw = raw[: i + 9] + b'a"b' + raw[i + 9 :]
    p = tmp_path / "bad.json"
    p.write_bytes(raw)
    par, ser = _load_both(p, monkeypatch, expect_split=False)
    assert_same_model(par, ser)
    assert any("unescaped" in w for w in par.warnings)


def test_bare_array_and_gzip_split_equal_serial(tmp_path, monkeypatch, doc):
    p = tmp_path / "bare.json"
    p.write_bytes(json.dumps(doc["traceEvents"]).encode())
    par, ser = _load_both(p, monkeypatch)
    assert_same_model(par, ser)
    g = tmp_path / "t.json.gz"
    g.write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
    par, ser = _load_both(g, monkeypatch)  # gzip: split once decompressed
    assert_same_model(par, ser)


def test_background_cache_write_then_warm_equals_cold(tmp_path, monkeypatch, doc):
    import threading

    from gapscope.trace import cache, load

    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(read, "BACKGROUND_CACHE_MIN", 1)
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(doc).encode())
    cold = load(str(p))
    for t in threading.enumerate():
        if t.name == "gapscope-cache-write":
            t.join(30)
    assert os.path.isfile(cache.entry_path(str(p)))
    assert not [f for f in os.listdir(tmp_path / "cache") if f.endswith(".tmp")]
    monkeypatch.setattr(read, "load_uncached", None)  # a warm load must not parse
    assert_same_model(cold, load(str(p)))


def test_gzip_trace_is_split_after_decompression_and_equals_serial(tmp_path, monkeypatch, doc):
    # the worker gets the decompressed bytes by the fork (shared pages), and parses the second half of them
    par, ser = _load_both(SAMPLE, monkeypatch)
    assert par.n > 10_000
    assert_same_model(par, ser)
    # a gzip stream cut off mid-way: the same warning and the same events either way
    raw = gzip.compress(json.dumps(doc).encode())
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    par, ser = _load_both(cut, monkeypatch)
    assert_same_model(par, ser)
    assert any("ends early" in w for w in par.warnings)


def test_gzip_trace_stays_in_one_process_when_parallel_is_off(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPSCOPE_LOAD_PARALLEL", "0")
    par, ser = _load_both(SAMPLE, monkeypatch, expect_split=False)
    assert_same_model(par, ser)


def test_worker_widens_a_cut_inside_a_value_like_the_parent(tmp_path, monkeypatch, doc):
    # "}, {" inside strings all over the worker's part (not at the split: a split there is refused): many of its
    # cuts fall inside an event, and it takes the next boundary instead (it used to give its whole part up at the
    # first one: the parent parsed it all)
    evs = doc["traceEvents"]
    k = len(evs) * 3 // 5
    evs = evs[:k] + [dict(e, args=dict(e.get("args") or {}, note='x}, {"y": 1}, {z')) if e.get("ph") == "X" else e
                     for e in evs[k:]]
    p = tmp_path / "cuts.json"
    p.write_bytes(json.dumps({"traceEvents": evs}).encode())
    par, ser = _load_both(p, monkeypatch)
    assert_same_model(par, ser)
    assert par.n > 10_000


@pytest.mark.parametrize("pickled_columns", [False, True], ids=["raw", "pickled"])
def test_worker_part_comes_through_a_shared_file(tmp_path, monkeypatch, doc, pickled_columns):
    """The worker's columns, args lengths and args buffer come as raw bytes after a small pickled header, in a file
    the worker shares with the parent (the pipe only says when they are in): the parent's arrays are views of its map
    of that file, no copy; a column whose pieces are not of one dtype goes pickled in the header instead. Either way
    the model is the serial one."""
    import mmap

    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(doc, indent=1).encode())
    layouts, parts = [], []
    orig_places, orig_merge = parallel._places, parallel.merge_parts
    monkeypatch.setattr(parallel, "_places", lambda n, layout: layouts.append(layout) or orig_places(n, layout))
    if pickled_columns:
        monkeypatch.setattr(parallel, "_flat", lambda arrays: None)
    par, ser = _load_both(p, monkeypatch)
    monkeypatch.setattr(parallel, "merge_parts", lambda path, ps: parts.append(ps[1][0]) or orig_merge(path, ps))
    par2, _ = _load_both(p, monkeypatch)
    assert_same_model(par, ser)
    assert_same_model(par2, ser)
    # the 11 columns (or not: in the header), the args lengths and buffer
    assert [k for k, _, _ in layouts[0]][-2:] == ["rlens", "rbuf"]
    assert len(layouts[0]) == (2 if pickled_columns else 13)
    if not pickled_columns:
        ts = parts[0]["cols"]["ts"]
        under = ts[0].base.base  # a piece of an array over the map (numpy keeps a memoryview of it)
        assert ts[0].size and isinstance(getattr(under, "obj", under), mmap.mmap)


def test_idle_runs_once_while_the_worker_is_awaited_and_changes_nothing(tmp_path, monkeypatch, doc):
    # the report imports its analysis while the loader waits for the worker's part (``load``'s idle)
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(doc).encode())
    orig = parallel._worker

    def slow_worker(*a, **k):
        import time

        time.sleep(0.5)  # the parent is surely done with its half first
        return orig(*a, **k)

    monkeypatch.setattr(parallel, "_worker", slow_worker)
    monkeypatch.setattr(parallel, "PARALLEL_MIN", 1)
    monkeypatch.setattr(parallel, "_cpus", lambda: 2)
    calls = []
    par = read.load(str(p), no_cache=True, idle=lambda: calls.append(1))
    assert calls == [1]
    monkeypatch.setattr(parallel, "PARALLEL_MIN", None)
    ser = read.load(str(p), no_cache=True, idle=lambda: calls.append(2))
    assert calls == [1]  # one process: nothing is awaited, idle is never called
    assert_same_model(par, ser)
