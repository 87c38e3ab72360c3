"""The loader on synthetic traces: every format variant, with the model's contents asserted exactly."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tests.synth import Synth
from gapscope.trace import Kind, TraceError, TrackKind, load
from gapscope.trace.model import NO_ID


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def _write(path, doc, *, gz=False, raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _find(m, name):
    ix = [i for i in range(m.n) if m.name(i) == name]
    assert len(ix) == 1, (name, ix)
    return ix[0]


def _basic() -> Synth:
    t = Synth()
    with t.op("aten::linear", 10.0, 20.0):
        t.cpu_op("aten::mm", 11.5, 10.0)
        t.launch("cudaLaunchKernel", 12.0, 2.0, kernel="gemm", k_ts=30.25, k_dur=5.125)
    t.memcpy("HtoD", 40.0, 1.0, nbytes=4096)
    return t


def test_new_layout_exact(tmp_path):
    m = load(_basic().write(tmp_path / "t.json"), no_cache=True)
    lin, mm, rt, k, cp = (_find(m, n) for n in ("aten::linear", "aten::mm", "cudaLaunchKernel", "gemm",
                                                 "Memcpy HtoD (Pageable -> Device)"))
    assert m.ts_ns[lin] == 10_000 and m.dur_ns[lin] == 20_000
    assert m.ts_ns[mm] == 11_500 and m.dur_ns[mm] == 10_000
    assert m.ts_ns[k] == 30_250 and m.dur_ns[k] == 5_125
    assert [Kind(m.kind[i]) for i in (lin, mm, rt, k, cp)] == [Kind.CPU_OP, Kind.CPU_OP, Kind.RUNTIME,
                                                              Kind.KERNEL, Kind.MEMCPY]
    # nesting on the CPU thread: linear > mm, linear > launch (the launch starts after mm ends? no: inside)
    assert m.depth[lin] == 0 and m.parent[lin] == -1
    assert m.depth[mm] == 1 and m.parent[mm] == lin
    assert m.depth[rt] == 2 and m.parent[rt] == mm
    # links
    assert m.launch[k] == rt
    assert m.op[rt] == mm and m.op[k] == mm
    assert list(m.kernels_of_launch(rt)) == [k]
    assert m.nbytes[cp] == 4096
    assert m.corr[k] == m.corr[rt] == 1000
    # tracks
    gk = m.tracks[int(m.track[k])]
    assert gk.kind is TrackKind.GPU and gk.device == 0 and gk.stream == 7
    ct = m.tracks[int(m.track[lin])]
    assert ct.kind is TrackKind.CPU and ct.name == "thread 1000 (python3)"
    # sorted per track by (ts, -dur)
    for t in m.tracks:
        sl = m.track_slice(t.id)
        assert np.all(np.diff(m.ts_ns[sl]) >= 0)
    assert m.category_counts == {"<none>": 1, "cpu_op": 2, "cuda_runtime": 1, "kernel": 1, "ac2g": 2,
                                 "gpu_memcpy": 1}
    assert m.devices[0]["numSms"] == 132
    assert m.metadata["baseTimeNanoseconds"] == 1790000000000000000
    assert m.event_args(k)["grid"] == [1, 1, 1]
    assert "correlation" not in m.event_args(k)
    # the synthetic memcpy has no launch call
    assert m.warnings == ["1 of 2 GPU operations have no launch call in the trace"]


def test_gzip_is_sniffed_not_named(tmp_path):
    doc = _basic().doc()
    a = load(_write(tmp_path / "plain.json.gz", doc), no_cache=True)  # not gzip despite the name
    b = load(_write(tmp_path / "packed.json", doc, gz=True), no_cache=True)  # gzip without the name
    assert a.n == b.n == 5
    assert np.array_equal(a.ts_ns, b.ts_ns)


def test_old_spellings_string_tids_integer_us(tmp_path):
    ev = [
        {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 17, "tid": "17", "ts": 1600000000000100,
         "dur": 50, "args": {"External id": 5}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 17, "tid": "17", "ts": 1600000000000110,
         "dur": 5, "args": {"correlation": 77, "external id": 5}},
        {"ph": "X", "cat": "Kernel", "name": "add_kernel", "pid": 0, "tid": "stream 7", "ts": 1600000000000200,
         "dur": 3, "args": {"correlation": 77, "external id": 5, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy DtoH", "pid": 0, "tid": "stream 7", "ts": 1600000000000300,
         "dur": 2, "args": {"correlation": 78, "bytes": 8, "device": 0}},
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 9", "ts": 1600000000000400,
         "dur": 1, "args": {"correlation": 79}},
    ]
    m = load(_write(tmp_path / "old.json", {"traceEvents": ev}), no_cache=True)
    add, rt, k, cp, ms = (_find(m, n) for n in ("aten::add", "cudaLaunchKernel", "add_kernel", "Memcpy DtoH",
                                                "Memset (Device)"))
    assert m.ts_ns[add] == 1600000000000100 * 1000  # integer µs stay exact in ns
    assert m.dur_ns[add] == 50_000
    assert Kind(m.kind[add]) is Kind.CPU_OP and Kind(m.kind[rt]) is Kind.RUNTIME
    assert Kind(m.kind[k]) is Kind.KERNEL and Kind(m.kind[cp]) is Kind.MEMCPY and Kind(m.kind[ms]) is Kind.MEMSET
    # numeric-string tid "17" is the same thread as an int 17 would be; "stream 7" is stream 7
    cpu = m.tracks[int(m.track[add])]
    assert cpu.kind is TrackKind.CPU and cpu.tid == 17
    assert m.track[add] == m.track[rt]
    g = m.tracks[int(m.track[k])]
    assert g.kind is TrackKind.GPU and (g.device, g.stream) == (0, 7)
    assert m.track[k] == m.track[cp]
    gm = m.tracks[int(m.track[ms])]
    assert (gm.device, gm.stream) == (0, 9)
    assert m.launch[k] == rt and m.op[k] == add  # old traces: via correlation and time containment
    assert m.ext_id[k] == 5  # lower-case "external id"
    assert m.nbytes[cp] == 8
    assert m.parent[rt] == add


def test_relative_three_decimal_us(tmp_path):
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5138619586647.391, "dur": 1.001,
           "args": {"device": 0, "stream": 7, "correlation": 1}}]
    m = load(_write(tmp_path / "r.json", {"baseTimeNanoseconds": 1, "traceEvents": ev}), no_cache=True)
    assert m.ts_ns[0] == 5138619586647391
    assert m.dur_ns[0] == 1001


def test_bare_array_top_level(tmp_path):
    ev = [{"ph": "X", "name": "aten::relu", "pid": "CPU functions", "tid": "0", "ts": 1, "dur": 2}]
    m = load(_write(tmp_path / "a.json", ev), no_cache=True)
    assert m.n == 1 and m.name(0) == "aten::relu"
    assert Kind(m.kind[0]) is Kind.OTHER
    assert m.tracks[0].kind is TrackKind.OTHER
    assert m.category_counts == {"<none>": 1}


@pytest.mark.parametrize("order", ["first", "last", "middle"])
def test_key_order(tmp_path, order):
    doc = _basic().doc()
    events = doc.pop("traceEvents")
    keys = list(doc.items())
    if order == "first":
        d = {"traceEvents": events, **dict(keys)}
    elif order == "last":
        d = {**dict(keys), "traceEvents": events}
    else:
        d = {**dict(keys[:2]), "traceEvents": events, **dict(keys[2:])}
    m = load(_write(tmp_path / f"{order}.json", d), no_cache=True)
    assert m.n == 5
    assert m.devices[0]["name"] == "NVIDIA H200"
    assert m.metadata["traceName"] == "synth"
    assert set(m.metadata) == set(doc)


def test_top_level_warning_arrays(tmp_path):
    doc = _basic().doc()
    doc["WARNING"] = ["CUPTI could not do something", "second"]
    m = load(_write(tmp_path / "w.json", doc), no_cache=True)
    assert m.metadata["WARNING"] == ["CUPTI could not do something", "second"]
    assert any("2 warnings" in w and "CUPTI could not" in w for w in m.warnings)


def test_unknown_categories_kept_as_other(tmp_path):
    t = _basic()
    for i in range(3):
        t.events.append({"ph": "X", "cat": "mystery_cat", "name": f"m{i}", "pid": 1000, "tid": 1000,
                         "ts": 50 + i, "dur": 0.5})
    m = load(t.write(tmp_path / "u.json"), no_cache=True)
    ix = [_find(m, f"m{i}") for i in range(3)]
    assert all(Kind(m.kind[i]) is Kind.OTHER for i in ix)
    assert m.category_counts["mystery_cat"] == 3
    assert any("3 events of unknown categories" in w and "mystery_cat (3)" in w for w in m.warnings)


def test_python_tree(tmp_path):
    t = Synth()
    with t.frame("train.py(10): main", 0, 100):
        with t.frame("nn.Module: Linear_0", 5, 50):
            t.python("<built-in method matmul>", 10, 5)
        t.python("train.py(20): log", 60, 10)
    m = load(t.write(tmp_path / "p.json"), no_cache=True)
    main, lin, mat, log = (_find(m, n) for n in ("train.py(10): main", "nn.Module: Linear_0",
                                                  "<built-in method matmul>", "train.py(20): log"))
    assert [int(m.depth[i]) for i in (main, lin, mat, log)] == [0, 1, 2, 1]
    assert m.parent[main] == -1 and m.parent[lin] == main and m.parent[mat] == lin and m.parent[log] == main
    assert m.py_id[main] == 1 and m.py_parent[lin] == 1 and m.py_parent[main] == NO_ID
    assert Kind(m.kind[main]) is Kind.PYTHON


def test_graph_launch_fans_out(tmp_path):
    t = Synth()
    with t.op("aten::graph_replay", 0, 50):
        rt = t.runtime("cudaGraphLaunch", 5, 10)
    c = rt["args"]["correlation"]
    for j in range(6):
        t.kernel(f"graph_k{j}", 20 + j * 2, 1.5, corr=c, stream=7 + (j % 2))
    m = load(t.write(tmp_path / "g.json"), no_cache=True)
    r = _find(m, "cudaGraphLaunch")
    ks = sorted(m.kernels_of_launch(r).tolist())
    assert sorted(m.name(i) for i in ks) == [f"graph_k{j}" for j in range(6)]
    assert all(m.op[i] == _find(m, "aten::graph_replay") for i in ks)
    assert len({int(m.track[i]) for i in ks}) == 2


def test_missing_links_warn(tmp_path):
    t = Synth()
    t.kernel("orphan", 10, 1, corr=555)  # its launch is not in the trace
    t.runtime("cudaLaunchKernel", 1, 1)  # its kernel is not in the trace
    m = load(t.write(tmp_path / "ml.json"), no_cache=True)
    k = _find(m, "orphan")
    assert m.launch[k] == -1 and m.op[k] == -1
    assert any("1 of 1 GPU operations have no launch" in w for w in m.warnings)


def test_ext_id_fallback_links_gpu_op_to_cpu_op(tmp_path):
    t = Synth()
    op = t.cpu_op("aten::copy_", 0, 5)
    t.kernel("copy_kernel", 20, 1, corr=4242, **{"External id": op["args"]["External id"]})
    m = load(t.write(tmp_path / "x.json"), no_cache=True)
    assert m.op[_find(m, "copy_kernel")] == _find(m, "aten::copy_")


def test_instants_overhead_and_memory(tmp_path):
    t = _basic()
    t.memory(15, 1 << 20, total=1 << 21)
    t.overhead("Activity Buffer Request", 1, 2)
    t.events.append({"ph": "i", "s": "t", "name": "Record Window End", "pid": "", "tid": "", "ts": 99})
    m = load(t.write(tmp_path / "i.json"), no_cache=True)
    mem = _find(m, "[memory]")
    assert Kind(m.kind[mem]) is Kind.INSTANT and m.dur_ns[mem] == 0 and m.nbytes[mem] == 1 << 20
    assert m.event_args(mem)["Total Allocated"] == 1 << 21
    ov = _find(m, "Activity Buffer Request")
    assert Kind(m.kind[ov]) is Kind.OVERHEAD and m.tracks[int(m.track[ov])].name == "profiler overhead"
    we = _find(m, "Record Window End")
    assert Kind(m.kind[we]) is Kind.INSTANT and m.tracks[int(m.track[we])].kind is TrackKind.OTHER


def test_zero_and_negative_durations(tmp_path):
    t = Synth()
    t.cpu_op("zero", 1, 0)
    t.cpu_op("neg", 2, -5)
    m = load(t.write(tmp_path / "d.json"), no_cache=True)
    assert m.dur_ns[_find(m, "zero")] == 0 and m.dur_ns[_find(m, "neg")] == 0
    assert any("1 events had a negative duration" in w for w in m.warnings)


def test_missing_fields(tmp_path):
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "no_ts", "pid": 1, "tid": 1, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "no_dur", "pid": 1, "tid": 1, "ts": 5},
        {"cat": "cpu_op", "name": "no_ph", "pid": 1, "tid": 1, "ts": 6, "dur": 1},
        {"ph": "X", "name": "no_cat", "pid": 1, "tid": 1, "ts": 7, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "ts": 8, "dur": 1},
        "not an object",
        {"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 9, "dur": 1},
    ]
    m = load(_write(tmp_path / "mf.json", {"traceEvents": ev}), no_cache=True)
    names = sorted(m.names[i] for i in m.name_id)
    assert names == ["", "no_cat", "no_dur", "no_ph", "ok"]
    assert any("1 events had no usable timestamp" in w for w in m.warnings)
    assert any("1 complete events had no duration" in w for w in m.warnings)
    assert any("1 entries of traceEvents were not objects" in w for w in m.warnings)


def test_mixed_string_and_int_ids(tmp_path):
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": "7", "tid": 8, "ts": 1, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 7, "tid": "8", "ts": 2, "dur": 1},
        {"ph": "X", "cat": "cuda_runtime", "name": "c", "pid": 7, "tid": 8, "ts": 3, "dur": 1,
         "args": {"correlation": "12"}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 9, "dur": 1,
         "args": {"correlation": 12, "device": "0", "stream": "7"}},
    ]
    m = load(_write(tmp_path / "ids.json", {"traceEvents": ev}), no_cache=True)
    a, b, c, k = (_find(m, x) for x in "abck")
    assert m.track[a] == m.track[b] == m.track[c]
    assert m.corr[c] == 12 and m.launch[k] == c


def test_duplicated_and_unsorted_events(tmp_path):
    e1 = {"ph": "X", "cat": "cpu_op", "name": "late", "pid": 1, "tid": 1, "ts": 50, "dur": 1}
    e2 = {"ph": "X", "cat": "cpu_op", "name": "early", "pid": 1, "tid": 1, "ts": 10, "dur": 100}
    m = load(_write(tmp_path / "dup.json", {"traceEvents": [e1, e2, e1]}), no_cache=True)
    # sorted, and the exact duplicate dropped with a warning (it would double counts and totals)
    assert [m.name(i) for i in range(m.n)] == ["early", "late"]
    assert m.ts_ns.tolist() == [10_000, 50_000]
    assert m.depth.tolist() == [0, 1] and m.parent.tolist() == [-1, 0]
    assert any("1 exact duplicate events were dropped" in w for w in m.warnings), m.warnings


def test_cpu_only_and_single_event(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "only", "pid": 1, "tid": 1, "ts": 3, "dur": 2}]
    m = load(_write(tmp_path / "one.json", {"traceEvents": ev}), no_cache=True)
    assert m.n == 1 and m.gpu_tracks() == [] and m.window_ns() == (3000, 5000)
    assert m.launch.tolist() == [-1] and m.op.tolist() == [-1]


def test_open_ranges_warned(tmp_path):
    t = Synth()
    t.cpu_op("open_op", 1, 5, finished=False)
    m = load(t.write(tmp_path / "o.json"), no_cache=True)
    assert any("1 CPU ranges were still open" in w for w in m.warnings)


def test_chunked_parse_equals_single_piece(tmp_path, monkeypatch):
    """Pieces cut at event boundaries (including one inside nested args) give the same model."""
    from gapscope.trace import reader

    t = Synth()
    for i in range(300):
        with t.op("aten::cat", i * 10, 5, **{"Input Dims": [[{"x": [1, 2]}, {"y": "}, {"}], [i]]}):
            t.launch("cudaLaunchKernel", i * 10 + 1, 1, kernel=f"k{i % 7}", k_ts=i * 10 + 3, k_dur=0.5)
    path = t.write(tmp_path / "c.json")
    whole = load(path, no_cache=True)
    monkeypatch.setattr(reader, "CHUNK", 997)
    pieces = load(path, no_cache=True)
    assert whole.n == pieces.n == 900
    for col in ("ts_ns", "dur_ns", "kind", "track", "corr", "ext_id", "depth", "parent", "launch", "op"):
        assert np.array_equal(getattr(whole, col), getattr(pieces, col)), col
    assert [whole.name(i) for i in range(whole.n)] == [pieces.name(i) for i in range(pieces.n)]
    assert pieces.warnings == whole.warnings == []


def test_traceevents_not_an_array(tmp_path):
    with pytest.raises(TraceError, match=r"traceEvents is not an array at byte \d+"):
        load(_write(tmp_path / "bad.json", {"traceEvents": {"a": 1}}), no_cache=True)


def test_max_size(tmp_path):
    p = _basic().write(tmp_path / "t.json")
    with pytest.raises(TraceError, match="past the limit.*--max-size"):
        load(p, no_cache=True, max_size="100")
    assert load(p, no_cache=True, max_size="1M").n == 5


def test_stdlib_json_fallback(tmp_path, monkeypatch):
    """GPU nodes may lack orjson: the reader then uses the json module and gives the same model."""
    from gapscope.trace import reader, repair

    p = _basic().write(tmp_path / "t.json")
    ref = load(p, no_cache=True)

    def std_loads(b):
        return json.loads(bytes(b))

    for mod in (repair, reader):  # every module that parses JSON text (the worker's part: reader._clean_region)
        monkeypatch.setattr(mod, "_loads", std_loads)
    m = load(p, no_cache=True)
    assert np.array_equal(m.ts_ns, ref.ts_ns) and np.array_equal(m.launch, ref.launch)
    q = tmp_path / "q.json"
    q.write_bytes((tmp_path / "t.json").read_bytes().replace(b'"aten::mm"', b'"aten::"mm"'))
    m2 = load(q, no_cache=True)
    assert 'aten::"mm' in m2.names


def test_stdlib_fallback_chunked_and_cut(tmp_path, monkeypatch):
    from gapscope.trace import reader, repair

    t = Synth()
    for i in range(100):
        with t.op("aten::cat", i * 10, 5, **{"Input Dims": [[{"x": "}, {"}], [i]]}):
            t.launch("cudaLaunchKernel", i * 10 + 1, 1, kernel=f"k{i % 7}", k_ts=i * 10 + 3, k_dur=0.5)
    path = t.write(tmp_path / "c.json")
    ref = load(path, no_cache=True)
    for mod in (repair, reader):
        monkeypatch.setattr(mod, "_loads", lambda b: json.loads(bytes(b).decode("utf-8", "replace")))
    monkeypatch.setattr(reader, "CHUNK", 1009)
    m = load(path, no_cache=True)
    assert np.array_equal(m.ts_ns, ref.ts_ns) and np.array_equal(m.op, ref.op) and m.warnings == ref.warnings
    raw = path.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[: raw.index(b'"k3"', len(raw) // 2)])
    mc = load(cut, no_cache=True)
    assert 0 < mc.n < m.n and any("ends inside the event list" in w for w in mc.warnings)


def test_duplicates_found_among_events_of_the_same_time(tmp_path):
    # copies of "a" and "b" interleaved, all at one time and duration on one thread: both copies go
    def e(n):
        return {"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 10, "dur": 5}

    m = load(_write(tmp_path / "tie.json", {"traceEvents": [e("a"), e("b"), e("a"), e("b"), e("c")]}), no_cache=True)
    assert sorted(m.name(i) for i in range(m.n)) == ["a", "b", "c"]
    assert any("2 exact duplicate events were dropped" in w for w in m.warnings), m.warnings
