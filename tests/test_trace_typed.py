"""The typed decoding path (msgspec records) gives the same model as the dict path (orjson dicts), and the
args table keeps what people read: interned args for GPU work, CPU ops' own args, never their ids."""

from __future__ import annotations

import gzip
import json
import os
import pickle

import numpy as np
import pytest

from gapscope.trace import build, decode_typed, load, parallel, read, reader
from gapscope.trace.cache import COLUMNS
from gapscope.trace.model import ARGS_DROP, BlobList, Kind

pytestmark = pytest.mark.skipif(decode_typed._DEC_EV is None, reason="msgspec is not installed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = [os.path.join(ROOT, "traces", f) for f in ("demo-eager.decode.json.gz", "demo-compile.decode.json.gz",
                                                      "demo-eager-copy.decode.json.gz")]


def _all_args(m):
    return [m.event_args(i) for i in range(m.n)]


def _same(a, b, *, args_bytes=True):
    for k in COLUMNS:
        if k == "args_id":
            continue
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype, k
        assert np.array_equal(x, y), k
    assert np.array_equal(a.args_id >= 0, b.args_id >= 0)
    for k in ("names", "tracks", "devices", "metadata", "warnings", "category_counts"):
        assert getattr(a, k) == getattr(b, k), k
    assert _all_args(a) == _all_args(b)


def _paths(monkeypatch, path):
    """(typed, dicts) models of one file, one process each time."""
    monkeypatch.setattr(parallel, "PARALLEL_MIN", None)
    calls = {"fast": 0}
    orig = decode_typed.stage_typed

    def spy(*a):
        r = orig(*a)
        calls["fast"] += 1
        return r

    monkeypatch.setattr(decode_typed, "stage_typed", spy)
    monkeypatch.setattr(build, "FAST_DECODE", True)
    typed = read.load_uncached(str(path))
    n_fast = calls["fast"]
    monkeypatch.setattr(build, "FAST_DECODE", False)
    dicts = read.load_uncached(str(path))
    assert calls["fast"] == n_fast  # the second load never took the typed path
    return typed, dicts, n_fast


@pytest.mark.parametrize("sample", SAMPLES, ids=os.path.basename)
def test_typed_equals_dicts_on_samples(monkeypatch, sample):
    typed, dicts, n_fast = _paths(monkeypatch, sample)
    assert n_fast >= 1 and typed.n > 5000
    _same(typed, dicts)


def _ev(**kw):
    e = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0}
    e.update(kw)
    return e


EDGE_EVENTS = [
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "python main"}},
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}},
    {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 1, "args": {"sort_index": 3}},
    _ev(args={"External id": 7, "Record function id": 0, "Input Dims": [[2, 3], [3, 4]], "Ev Idx": 1}),
    _ev(ts=12.5, dur=1.0, args={"External id": 8, "Ev Idx": 2}),  # only ids: no args left
    _ev(ts=13.0, dur=0.5, name="aten::empty"),  # no args at all
    _ev(ts=13.6, dur=0.1, args=None),  # "args": null
    _ev(cat="Operator", ts=14.0, dur=0.2, args={"external id": 9}),  # old spellings
    _ev(cat="cuda_runtime", name="cudaLaunchKernel", ts=10.5, dur=1.0, args={"correlation": 11, "cbid": 211}),
    _ev(cat="kernel", name="gemm", pid=0, tid=7, ts=20.0, dur=3.0,
        args={"External id": 7, "correlation": 11, "device": 0, "stream": 7, "grid": [1, 1, 1], "block": [128, 1, 1]}),
    _ev(cat="kernel", name="gemm", pid=0, tid=7, ts=24.0, dur=3.0,
        args={"External id": 8, "correlation": 12, "device": 0, "stream": 7, "grid": [1, 1, 1], "block": [128, 1, 1]}),
    _ev(cat="gpu_memcpy", name="Memcpy HtoD (Pageable -> Device)", pid=0, tid=7, ts=30.0, dur=2.0,
        args={"correlation": 13, "device": 0, "stream": 7, "bytes": 4096, "memory bandwidth (GB/s)": 2.0}),
    _ev(cat="gpu_memset", name="Memset (Device)", pid=0, tid=7, ts=33.0, dur=1.0,
        args={"correlation": 14, "device": 0, "stream": 7, "Bytes": 512}),
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 15.0, "s": "t",
     "args": {"Total Reserved": 10, "Total Allocated": 5, "Bytes": 256, "Addr": 123, "Device Id": 0}},
    _ev(cat="python_function", name="model.py(10): forward", ts=9.0, dur=20.0,
        args={"Python parent id": None, "Python id": 1, "Ev Idx": 3}),
    _ev(cat="python_function", name="torch/nn(1): linear", ts=9.5, dur=10.0,
        args={"Python parent id": 1, "Python id": 2, "Ev Idx": 4}),
    _ev(ts=40.0, dur=None),  # a complete event without a duration
    _ev(ts=None, dur=1.0),  # no timestamp: skipped and counted
    _ev(ts=41.0, dur=-3.0),  # negative duration
    _ev(ts=42.0, args={"finished": False}),  # still open at the window end
    _ev(cat="something_new", name="mystery", ts=43.0, dur=1.0, args={"k": "v"}),  # kept as other
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 11, "pid": 1, "tid": 1, "ts": 10.5},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 11, "pid": 0, "tid": 7, "ts": 20.0, "bp": "e"},
    _ev(cat="user_annotation", name="gapscope.step#0", ts=8.0, dur=40.0, tid="main"),  # a string tid
    _ev(ts=50, dur=2),  # integer microseconds
    _ev(ts=51.0, dur=1.0, args={"External id": 10, "Input Dims": [[2, 3], [3, 4]], "Ev Idx": 9}),
]


def _write(tmp_path, events, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, indent=1))
    return p


def test_typed_equals_dicts_on_edge_cases(tmp_path, monkeypatch):
    typed, dicts, n_fast = _paths(monkeypatch, _write(tmp_path, EDGE_EVENTS))
    assert n_fast >= 1
    _same(typed, dicts)
    m = typed
    assert any("no usable timestamp" in w for w in m.warnings)
    i = m.names.index("mystery")
    assert m.kind[m.name_id == i][0] == Kind.OTHER
    cpu = np.flatnonzero(m.kind == Kind.CPU_OP)
    shown = [m.event_args(int(j)) for j in cpu]
    assert {"Input Dims": [[2, 3], [3, 4]]} in shown
    for a in shown:
        assert not (set(a) & ARGS_DROP)
    k = np.flatnonzero(m.kind == Kind.KERNEL)
    assert m.args_id[k[0]] == m.args_id[k[1]]  # same launch config: one interned entry
    assert m.event_args(int(k[0])) == {"grid": [1, 1, 1], "block": [128, 1, 1]}
    assert sorted(m.nbytes[np.isin(m.kind, [Kind.MEMCPY, Kind.MEMSET, Kind.INSTANT])].tolist()) == [256, 512, 4096]
    assert [t.name for t in m.tracks if t.pid == 1 and t.tid == 1] == ["python main"]


def test_piece_the_typed_path_refuses_goes_through_dicts(tmp_path, monkeypatch):
    """A string id, a float pid, a bool: msgspec refuses the piece; the dict path reads it as before."""
    odd = EDGE_EVENTS + [
        _ev(ts=60.0, args={"External id": "12"}),
        _ev(pid=1.0, ts=61.0),
        _ev(ts=62.0, args={"correlation": True}),
    ]
    p = _write(tmp_path, odd)
    typed, dicts, n_fast = _paths(monkeypatch, p)
    assert n_fast == 0
    _same(typed, dicts)


def test_exact_duplicates_are_found_with_per_event_cpu_args(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_MIN", None)
    evs = [e for e in EDGE_EVENTS if e.get("ph") == "X" and e.get("ts") is not None]
    m = load(str(_write(tmp_path, evs + evs)), no_cache=True)
    once = load(str(_write(tmp_path, evs, "once.json")), no_cache=True)
    assert m.n == once.n
    assert any("exact duplicate" in w for w in m.warnings)
    # two cpu ops alike in everything but their args are not duplicates
    a = _ev(ts=70.0, args={"Input Dims": [[1]]})
    b = _ev(ts=70.0, args={"Input Dims": [[2]]})
    m2 = load(str(_write(tmp_path, [a, b], "two.json")), no_cache=True)
    assert m2.n == 2 and not any("duplicate" in w for w in m2.warnings)


def test_parallel_path_merges_cpu_args(tmp_path, monkeypatch):
    """Raw args entries of both processes land in file order: the two-process model equals the serial one."""
    with gzip.open(SAMPLES[0], "rb") as f:
        doc = json.loads(f.read())
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(doc, indent=1).encode())
    monkeypatch.setattr(reader, "CHUNK", 64 << 10)
    monkeypatch.setattr(parallel, "PARALLEL_MIN", 1)
    monkeypatch.setattr(parallel, "_cpus", lambda: 2)
    par = read.load_uncached(str(p))
    monkeypatch.setattr(parallel, "PARALLEL_MIN", None)
    ser = read.load_uncached(str(p))
    for k in COLUMNS:
        assert np.array_equal(getattr(par, k), getattr(ser, k)), k
    assert par.args == ser.args


def test_blob_list():
    items = [b"{}", b'{"a":1}', b"", b'{"b":[1,2]}']
    bl = BlobList.of(items)
    assert len(bl) == 4 and list(bl) == items and bl == items and bl[1] == b'{"a":1}' and bl[-1] == items[-1]
    assert bl[1:3] == items[1:3]
    with pytest.raises(IndexError):
        bl[4]
    assert pickle.loads(pickle.dumps(bl)) == bl
    assert BlobList.of([]) == [] and len(BlobList()) == 0


def test_cache_keeps_the_args_table(tmp_path):
    p = tmp_path / "t.json.gz"
    with open(SAMPLES[0], "rb") as f:
        p.write_bytes(f.read())
    first = load(str(p))
    again = load(str(p))  # from the cache
    assert isinstance(again.args, BlobList) and again.args == first.args
    cpu = np.flatnonzero(first.kind == Kind.CPU_OP)[:200]
    assert [again.event_args(int(i)) for i in cpu] == [first.event_args(int(i)) for i in cpu]


def _kernel_text(ts: float, args: str, cat: str = "kernel") -> str:
    return ('{"ph": "X", "cat": "%s", "name": "gemm", "pid": 0, "tid": 7, "ts": %s, "dur": 1.0, "args": %s}'
            % (cat, ts, args))


#: kernels' args as written: (text, the kernel whose entry it shares, or None: an entry of its own, or -1: none)
KERNEL_ARGS = [
    ('{"External id": 1, "correlation": 11, "device": 0, "stream": 7, "grid": [1, 1, 1]}', None),
    ('{"External id": 2, "correlation": 12, "device": 0, "stream": 7, "grid": [1, 1, 1]}', 0),  # ids only differ
    ('{"External id": 3, "correlation": 13, "device": 0, "stream": 7, "grid": [2, 1, 1]}', None),
    ('{"correlation":14,"External id":4,"device":0,"stream":7,"grid":[1,1,1]}', 0),  # other spacing and order
    ('{"x\\"correlation": 1, "grid": [1]}', None),  # an escaped quote: a key of its own, kept
    ('{"x\\"correlation": 2, "grid": [1]}', None),
    ('{"correlation": 15, "n": {"correlation": 1}}', None),  # a nested object's "correlation" is kept
    ('{"correlation": 16, "n": {"correlation": 2}}', None),
    ('{"s": "a\\"correlation\\": 3", "correlation": 17}', None),  # inside a string
    ('{"s": "a\\"correlation\\": 4", "correlation": 18}', None),
    ('{"correlation": 19, "External id": 5}', -1),  # nothing but ids
    ('{}', -1),
    ('{"External id": 6, "correlation": 20, "device": 0, "stream": 7, "grid": [1, 1, 1]}', 0),
]


def test_kernel_args_interned_by_their_text_without_ids(tmp_path, monkeypatch):
    """The typed lane finds a kernel's interned args by its text without the id members (``_intern_args_raw``):
    the same ids and entries as decoding each one (the dict lane), in cases where cutting the text would be wrong
    (an escaped quote, a nested object, a string), and with fewer decodes than kernels. Also: a complete event
    without "dur" is counted as such, and the categories keep the order of their first appearance, pieces apart."""
    evs = [_kernel_text(10.0 + i, a) for i, (a, _) in enumerate(KERNEL_ARGS)]
    evs.insert(3, '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5.0}')  # no "dur"
    evs.insert(5, _kernel_text(30.0, '{"correlation": 21}', cat="newcat"))
    evs.insert(1, '{"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 1, "ts": 6.0, "s": "t"}')
    p = tmp_path / "k.json"
    p.write_text('{"traceEvents": [\n' + ",\n".join(evs) + "\n]}")
    monkeypatch.setattr(reader, "CHUNK", 400)  # several pieces: the lookups carry over from one to the next
    decodes = []
    orig = decode_typed.decode_args
    monkeypatch.setattr(decode_typed, "decode_args", lambda r: decodes.append(1) or orig(r))
    typed, dicts, n_fast = _paths(monkeypatch, p)
    assert n_fast >= 3
    _same(typed, dicts)
    assert np.array_equal(typed.args_id, dicts.args_id) and list(typed.args) == list(dicts.args)
    assert list(typed.category_counts.items()) == list(dicts.category_counts.items())
    assert list(typed.category_counts) == ["kernel", "cpu_instant_event", "cpu_op", "newcat"]
    assert any("1 complete events had no duration" in w for w in typed.warnings)
    k = np.flatnonzero((typed.kind == Kind.KERNEL) & (typed.ts_ns < 30_000))
    ids = typed.args_id[k].tolist()
    assert len(ids) == len(KERNEL_ARGS)
    for i, (_, same) in enumerate(KERNEL_ARGS):
        if same is None:
            assert ids[i] >= 0 and ids[i] not in ids[:i], i
        elif same == -1:
            assert ids[i] == -1, i
        else:
            assert ids[i] == ids[same], i
    assert typed.event_args(int(k[4])) == {'x"correlation': 1, "grid": [1]}
    assert typed.event_args(int(k[6])) == {"n": {"correlation": 1}}
    assert len(decodes) < len(KERNEL_ARGS)  # the kernels whose text was seen were not decoded


def test_phases_of_other_lengths_are_read_as_the_dict_lane_reads_them(tmp_path, monkeypatch):
    """The typed lane reads one-letter phases through a byte table; a longer or an empty phase (here "XX" and "", as
    many letters as events in all) must not be taken for letters: only the "X" counts as a complete event."""
    evs = [_ev(ph="XX", ts=1.0, dur=None), _ev(ph="", ts=2.0, dur=None), _ev(ph="X", ts=3.0, dur=None)]
    for e in evs:
        del e["dur"]
    typed, dicts, n_fast = _paths(monkeypatch, _write(tmp_path, evs))
    assert n_fast == 1
    _same(typed, dicts)
    assert any(w.startswith("1 complete events had no duration") for w in typed.warnings)


def test_pieces_whose_names_and_tracks_are_all_known(tmp_path, monkeypatch):
    """A piece whose names and tracks were all met before takes its ids straight into arrays, one with a new name,
    track or category takes the lists (``decode_typed._lookups``, ``ColumnBuilder._commit``); null ids (an
    "External id" or a root frame's "Python parent id") go through both. The same model as the dict lane, piece
    after piece, and an id past 64 bits still sends its piece to the dict lane."""
    evs = []
    for r in range(6):  # each round repeats the names and tracks of the first; rounds 3 and 5 bring new ones
        t0 = 100.0 * r
        evs += [
            _ev(ts=t0 + 1, args={"External id": None, "Ev Idx": r}),
            _ev(cat="python_function", name="model.py(10): forward", ts=t0 + 2, dur=20.0,
                args={"Python parent id": None, "Python id": 10 * r + 1}),
            _ev(cat="python_function", name="torch/nn(1): linear", ts=t0 + 3, dur=10.0,
                args={"Python parent id": 10 * r + 1, "Python id": 10 * r + 2}),
            _ev(cat="kernel", name="gemm", pid=0, tid=7, ts=t0 + 4, dur=3.0,
                args={"External id": r, "correlation": r, "device": 0, "stream": 7, "grid": [1, 1, 1]}),
            _ev(cat="cuda_runtime", name="cudaLaunchKernel", ts=t0 + 5, dur=1.0, args={"correlation": r}),
        ]
        if r == 3:
            evs.append(_ev(name=f"aten::new{r}", tid=2, ts=t0 + 6, args={"External id": 99}))
        if r == 5:
            evs.append(_ev(cat="Something_new", name="mystery", ts=t0 + 7, dur=1.0))
    p = _write(tmp_path, evs)
    monkeypatch.setattr(reader, "CHUNK", 600)  # a round or so a piece
    kinds = []
    orig = decode_typed.stage_typed

    def spy(b, dec):
        chunk = orig(b, dec)
        if chunk.cols is not None:
            kinds.append((type(chunk.cols.name_ix), type(chunk.cols.track_ix)))
        return chunk

    monkeypatch.setattr(decode_typed, "stage_typed", spy)
    typed, dicts, n_fast = _paths(monkeypatch, p)
    assert n_fast >= 4
    assert (np.ndarray, np.ndarray) in kinds and (list, list) in kinds  # both branches taken
    _same(typed, dicts)
    assert np.array_equal(typed.args_id, dicts.args_id)  # the CPU ops' entries: as written, re-encoded
    roots = typed.kind == Kind.PYTHON
    assert (typed.py_parent[roots] == -1).sum() == 6 and (typed.ext_id[typed.kind == Kind.CPU_OP] == -1).sum() == 6
    huge = _write(tmp_path, evs + [_ev(ts=900.0, args={"correlation": 2**64})], "huge.json")
    typed, dicts, _ = _paths(monkeypatch, huge)
    _same(typed, dicts)
