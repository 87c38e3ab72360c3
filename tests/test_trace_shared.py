"""Every real trace in ../shared/traces loads, and its counts match an independent count made with json."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import numpy as np
import pytest

from gapscope.trace import Kind, TraceError, load
from gapscope.trace.model import GPU_WORK_KINDS

FLOW = {"s", "f", "t"}


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))


def _independent(path):
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


#: the kind of each ``cat``, written out from ../shared/design/kineto-format.md (its categories table and the
#: old spellings of torch <= 1.10: Kernel, Runtime, Memcpy, Memset, Operator), not read from the loader
HAND_KIND = {
    "kernel": Kind.KERNEL, "gpu_memcpy": Kind.MEMCPY, "memcpy": Kind.MEMCPY, "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET, "cpu_op": Kind.CPU_OP, "operator": Kind.CPU_OP, "python_function": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME, "runtime": Kind.RUNTIME, "cuda_driver": Kind.DRIVER,
    "user_annotation": Kind.ANNOTATION, "gpu_user_annotation": Kind.GPU_ANNOTATION, "cuda_sync": Kind.SYNC,
    "overhead": Kind.OVERHEAD, "cpu_instant_event": Kind.INSTANT,
}


def _expected_kind(e) -> Kind:
    cat = e.get("cat")
    k = HAND_KIND.get(cat.lower()) if isinstance(cat, str) else None
    if e.get("ph") in ("i", "I") and k is None:
        return Kind.INSTANT
    return Kind.OTHER if k is None else k


def test_every_shared_trace(shared_traces, tmp_path, monkeypatch):
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path))
    files = _files(shared_traces)
    assert len(files) >= 25
    assert _check_against_json(files) == 1


def test_our_sample_traces():
    """The GPU sample traces recorded by our own capture (traces/ in the repository)."""
    from tests.helpers import SAMPLE_TRACES

    files = [p for p in _files(SAMPLE_TRACES) if "traceEvents" in _head(p)]
    assert len(files) >= 25, files  # the recordings listed in traces/README.md
    models = {}
    assert _check_against_json(files, models) == 0
    for p in files:
        m = models[p]  # loaded once, by the json comparison
        assert m.warnings == [], (p.name, m.warnings)
        # NAME.PHASE.json.gz: the phase the capture recorded is the one in the file name
        assert m.gapscope_meta and m.gapscope_meta.get("phase") == p.name.split(".")[1], p.name
        k = np.flatnonzero(m.kind == Kind.KERNEL)
        assert k.size and np.count_nonzero(m.launch[k] >= 0) == k.size, p.name


def _head(p) -> str:
    raw = p.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw[:1 << 16].decode("utf-8", "replace")


def _check_against_json(files, models: dict | None = None) -> int:
    strict_failures = 0
    for path in files:
        try:
            events = _independent(path)
        except json.JSONDecodeError:
            strict_failures += 1
            # invalid JSON (the unescaped-quote file): must load with a warning naming the repair
            m = load(path, no_cache=True)
            assert any("unescaped" in w for w in m.warnings), path.name
            assert m.n > 0
            continue
        m = load(path, no_cache=True)
        if models is not None:
            models[path] = m
        cats = Counter(e.get("cat") if isinstance(e.get("cat"), str) else "<none>" for e in events)
        assert m.category_counts == dict(cats), path.name
        timed = [e for e in events if e.get("ph") not in FLOW and e.get("ph") != "M" and "ts" in e]
        assert m.n == len(timed), path.name
        want = Counter(_expected_kind(e) for e in timed)
        got = Counter(Kind(int(k)) for k in m.kind)
        assert got == want, path.name
        # columns agree with the json events: total ns per kind (rint of µs * 1000)
        for kind in (Kind.KERNEL, Kind.CPU_OP, Kind.RUNTIME):
            exp = sum(int(round(float(e.get("dur", 0)) * 1000)) for e in timed if _expected_kind(e) is kind
                      and e.get("ph") == "X" and float(e.get("dur", 0)) >= 0)
            assert int(m.dur_ns[m.kind == kind].sum()) == exp, (path.name, kind)
        # model invariants
        assert np.all(m.dur_ns >= 0)
        assert m.track_offsets[-1] == m.n
        for t in m.tracks:
            sl = m.track_slice(t.id)
            assert np.all(m.track[sl] == t.id)
            assert np.all(np.diff(m.ts_ns[sl]) >= 0)
        gpu = np.isin(m.kind, [int(k) for k in GPU_WORK_KINDS])
        linked = m.launch[gpu]
        assert np.all(m.corr[linked[linked >= 0]] == m.corr[gpu][linked >= 0])
    return strict_failures


def test_unescaped_quote_file_names(shared_traces):
    m = load(shared_traces / "h200" / "invalid_unescaped_quote.json", no_cache=True)
    assert m.names.count('has"quote') == 1
    assert sum(1 for i in range(m.n) if m.name(i) == 'has"quote') == 2  # cpu annotation and its GPU copy
    assert m.devices and m.devices[0]["name"] == "NVIDIA H200"


def test_two_ranks_links_and_metadata(shared_traces):
    m = load(shared_traces / "h200" / "nccl_two_ranks.rank0.json.gz", no_cache=True)
    assert m.rank == 0 and m.distributed["world_size"] == 2
    k = np.flatnonzero(m.kind == Kind.KERNEL)
    assert k.size and np.all(m.launch[k] >= 0)
    rt = m.launch[k]
    assert np.all(np.isin(m.kind[rt], [Kind.RUNTIME, Kind.DRIVER]))
    assert np.all(m.ts_ns[rt] <= m.ts_ns[k])


def test_graph_launch_in_real_trace(shared_traces):
    m = load(shared_traces / "h200" / "stack_memory_compile_graph.pt.trace.json.gz", no_cache=True)
    gl = [i for i in range(m.n) if m.name(i) == "cudaGraphLaunch"]
    # from the raw events: each cudaGraphLaunch fans out to every kernel sharing its correlation
    events = _independent(shared_traces / "h200" / "stack_memory_compile_graph.pt.trace.json.gz")
    launches = {e["args"]["correlation"]: e for e in events if e.get("name") == "cudaGraphLaunch"}
    fan_out = Counter(e["args"]["correlation"] for e in events
                      if e.get("cat") == "kernel" and e["args"].get("correlation") in launches)
    assert len(gl) == len(launches) and max(fan_out.values()) > 1
    got = sorted((int(m.ts_ns[i]), m.kernels_of_launch(i).size) for i in gl)
    assert got == sorted((int(round(launches[c]["ts"] * 1000)), fan_out[c]) for c in launches)
    assert np.count_nonzero(m.kind == Kind.PYTHON) > 0
    py = np.flatnonzero((m.kind == Kind.PYTHON) & (m.parent >= 0))
    assert py.size and np.all(m.kind[m.parent[py]] == Kind.PYTHON)
    assert np.all(m.depth[py] == m.depth[m.parent[py]] + 1)


def test_old_bare_array_trace(shared_traces):
    m = load(shared_traces / "thirdparty" / "kineto__tbp_2020-12_resnet50_nw0_worker0.pt.trace.json.gz",
             no_cache=True)
    assert m.metadata == {}
    assert np.count_nonzero(m.kind == Kind.KERNEL) > 1000
    k = np.flatnonzero(m.kind == Kind.KERNEL)
    assert np.count_nonzero(m.op[k] >= 0) > 0.5 * k.size  # old traces: op by time containment


def test_not_a_trace_is_one_line(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("hello")
    with pytest.raises(TraceError) as ei:
        load(p, no_cache=True)
    assert "\n" not in str(ei.value) and "not a PyTorch profiler trace" in str(ei.value)


def _stack_reference(m, fam):
    """depth/parent of CPU-family events by a plain stack walk per track (the slow, obvious way)."""
    depth, parent = {}, {}
    for t in m.tracks:
        sl = m.track_slice(t.id)
        stack = []
        for i in range(sl.start, sl.stop):
            if int(m.kind[i]) not in fam:
                continue
            s = int(m.ts_ns[i])
            while stack and int(m.ts_ns[stack[-1]] + m.dur_ns[stack[-1]]) <= s:
                stack.pop()
            depth[i] = len(stack)
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
    return depth, parent


def test_nesting_and_links_match_a_reference(shared_traces):
    from gapscope.trace.model import CPU_NEST_KINDS

    fam = {int(k) for k in CPU_NEST_KINDS}
    checked = 0
    for path in _files(shared_traces):
        if path.name == "invalid_unescaped_quote.json":
            continue
        m = load(path, no_cache=True)
        depth, parent = _stack_reference(m, fam)
        ix = np.array(sorted(depth), dtype=np.int64)
        if ix.size:
            assert np.array_equal(m.depth[ix], [depth[i] for i in ix.tolist()]), path.name
            assert np.array_equal(m.parent[ix], [parent[i] for i in ix.tolist()]), path.name
            checked += ix.size
        # op of a runtime call: the innermost cpu_op among its ancestors
        for i in np.flatnonzero(np.isin(m.kind, [Kind.RUNTIME, Kind.DRIVER]))[:300].tolist():
            want, p = -1, parent.get(i, -1)
            while p >= 0:
                if m.kind[p] == Kind.CPU_OP:
                    want = p
                    break
                p = parent.get(p, -1)
            assert m.op[i] == want, path.name
        # python frames: parent by Python parent id, depth = chain length
        py = np.flatnonzero((m.kind == Kind.PYTHON) & (m.py_id >= 0))
        by_id = {int(m.py_id[i]): i for i in py.tolist()}
        for i in py[:500].tolist():
            assert m.parent[i] == by_id.get(int(m.py_parent[i]), -1), path.name
            d, p = 0, int(m.parent[i])
            while p >= 0:
                d, p = d + 1, int(m.parent[p])
            assert m.depth[i] == d, path.name
    assert checked > 100_000
