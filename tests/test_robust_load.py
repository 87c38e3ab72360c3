"""Robustness corpus for the loader, generated in code: every damaged or odd input either loads with a
warning that says what was odd, or raises TraceError with one line; through the CLI, exit 0 or exit 2
with exactly one ``gapscope: error:`` line on stderr, never a traceback or a hang."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.synth import Synth, damage_bytes
from tests.helpers import good_trace, kineto_layout
from gapscope.trace import Kind, TraceError, load

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def _good_bytes() -> bytes:
    return good_trace().dumps()


def _cli(path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("GAPSCOPE_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "gapscope", "info", str(path)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=60)


def _check_cli(path, expect_ok: bool | None = None):
    r = _cli(path)
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 0:
        assert r.stderr == ""
    else:
        assert r.returncode == 2, (r.returncode, r.stderr)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("gapscope: error: "), r.stderr
    if expect_ok is not None:
        assert (r.returncode == 0) is expect_ok, r.stderr
    return r


# --------------------------------------------------------------------------- cases that must fail cleanly
@pytest.mark.parametrize(
    "name,data,reason",
    [
        ("empty.json", b"", "empty file at byte 0"),
        ("spaces.json", b"   \n ", "only whitespace at byte 5"),
        ("text.json", b"hello world", "not JSON"),
        ("noevents.json", b'{"schemaVersion": 1, "deviceProperties": []}', "without a traceEvents array"),
        ("number.json", b"42", "not JSON"),
        ("badgz.json.gz", b"\x1f\x8b\x08\x00garbage-not-deflate", "corrupt gzip"),
    ],
)
def test_unrecoverable_inputs(tmp_path, name, data, reason):
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(TraceError) as ei:
        load(p, no_cache=True)
    msg = str(ei.value)
    assert msg.startswith(f"{p}: ") and reason in msg and "\n" not in msg
    r = _check_cli(p, expect_ok=False)
    assert reason in r.stderr


def test_directory_missing_unreadable_fifo(tmp_path):
    d = tmp_path / "folder"
    d.mkdir()
    with pytest.raises(TraceError, match="is a directory"):
        load(d, no_cache=True)
    with pytest.raises(TraceError, match="no such file"):
        load(tmp_path / "nope.json", no_cache=True)
    _check_cli(tmp_path / "nope.json", expect_ok=False)
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        load(fifo, no_cache=True)  # must not hang in open()
    _check_cli(fifo, expect_ok=False)
    locked = tmp_path / "locked.json"
    locked.write_bytes(_good_bytes())
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as root: chmod 000 does not stop reads")
        with pytest.raises(TraceError, match="cannot read"):
            load(locked, no_cache=True)
        _check_cli(locked, expect_ok=False)
    finally:
        locked.chmod(0o644)


def test_gzip_bomb_stops_at_limit(tmp_path):
    p = tmp_path / "bomb.json.gz"
    comp = gzip.compress(b'{"traceEvents": [' + b" " * (64 << 20) + b"]}", compresslevel=9)
    p.write_bytes(comp)
    assert len(comp) < 200_000
    with pytest.raises(TraceError, match=r"decompresses past the limit of 1.0 MiB.*--max-size"):
        load(p, no_cache=True, max_size="1M")
    r = subprocess.run([sys.executable, "-m", "gapscope", "info", "--max-size", "1M", str(p)], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "decompresses past the limit" in r.stderr


# ------------------------------------------------------------------------- cases that must load, warned
def test_truncated_gzip_keeps_what_decompressed(tmp_path):
    raw = kineto_layout(good_trace().doc())
    comp = gzip.compress(raw)
    p = tmp_path / "cut.json.gz"
    p.write_bytes(comp[: len(comp) * 2 // 3])
    m = load(p, no_cache=True)
    assert any("gzip stream ends early" in w for w in m.warnings)
    assert m.n >= 1
    _check_cli(p, expect_ok=True)


def test_json_cut_mid_event_keeps_complete_events(tmp_path):
    raw = kineto_layout(good_trace().doc())
    cut = raw.index(b'"aten::relu"')  # inside the relu event
    p = tmp_path / "cut.json"
    p.write_bytes(raw[:cut])
    m = load(p, no_cache=True)
    names = {m.name(i) for i in range(m.n)}
    assert {"aten::linear", "cudaLaunchKernel", "gemm"} <= names and "aten::relu" not in names
    assert any("ends inside the event list" in w for w in m.warnings)
    _check_cli(p, expect_ok=True)


def test_unescaped_quote_and_nonfinite(tmp_path):
    raw = kineto_layout(good_trace().doc())
    raw = raw.replace(b'"step"', b'"st"ep"').replace(b'"dur": 3', b'"dur": inf', 1)
    raw = raw.replace(b'"ts": 40', b'"ts": NaN')
    p = tmp_path / "broken.json"
    p.write_bytes(raw)
    m = load(p, no_cache=True)
    assert 'st"ep' in m.names
    assert any("unescaped" in w for w in m.warnings)
    assert any("inf/nan" in w for w in m.warnings)
    assert "aten::relu" not in {m.name(i) for i in range(m.n)}  # ts was NaN: skipped, and said so
    assert any("no usable timestamp" in w for w in m.warnings)


def test_odd_names_survive(tmp_path):
    t = good_trace()
    odd = ["[bold]red[/bold]", "\x1b[31mansi\x1b[0m", "ctl\x01\x07", "x" * (1 << 20), "[/foo]", "[0]"]
    for i, n in enumerate(odd):
        t.cpu_op(n, 100 + i, 1)
    p = t.write(tmp_path / "odd.json")
    m = load(p, no_cache=True)
    for n in odd:
        assert n in m.names
    r = _check_cli(p, expect_ok=True)
    assert "\x1b" not in r.stdout and "\x01" not in r.stdout


def test_invalid_utf8_and_raw_control_chars(tmp_path):
    raw = kineto_layout(good_trace().doc())
    raw = raw.replace(b'"aten::relu"', b'"aten::re\xff\xfelu"').replace(b'"step"', b'"st\nep"')
    p = tmp_path / "bytes.json"
    p.write_bytes(raw)
    m = load(p, no_cache=True)
    assert any(n.startswith("aten::re") and n.endswith("lu") for n in m.names)
    assert "st ep" in m.names
    assert any("UTF-8" in w for w in m.warnings) and any("control characters" in w for w in m.warnings)
    _check_cli(p, expect_ok=True)


def test_deeply_nested_args(tmp_path):
    raw = kineto_layout(good_trace().doc())
    deep = b"[" * 100_000 + b"]" * 100_000
    i = raw.index(b'"aten::relu"')
    j = raw.index(b'"args": {', i) + len(b'"args": {')
    raw = raw[:j] + b'"deep": ' + deep + b", " + raw[j:]
    p = tmp_path / "deep.json"
    p.write_bytes(raw)
    m = load(p, no_cache=True)
    # the parser refuses nesting past 1024 levels: that one event is skipped, the rest load, and it is said
    relu = [i for i in range(m.n) if m.name(i) == "aten::relu"]
    assert relu == []
    assert m.n > 0 and any("nested too deeply" in w for w in m.warnings), m.warnings
    _check_cli(p, expect_ok=True)
    # a nesting that never closes is damage: the other events survive
    q = tmp_path / "deep_open.json"
    q.write_bytes(raw.replace(b"]" * 100_000, b""))
    m = load(q, no_cache=True)
    assert "aten::linear" in m.names
    _check_cli(q, expect_ok=True)


def test_top_level_array_and_empty_array(tmp_path):
    p = tmp_path / "arr.json"
    p.write_bytes(json.dumps(good_trace().doc()["traceEvents"]).encode())
    assert load(p, no_cache=True).n == 5
    e = tmp_path / "empty_arr.json"
    e.write_bytes(b"[]")
    m = load(e, no_cache=True)
    assert m.n == 0 and any("no timed events" in w for w in m.warnings)
    _check_cli(e, expect_ok=True)


def test_missing_launch_and_missing_gpu_op(tmp_path):
    t = Synth()
    t.kernel("lonely", 5, 1, corr=999)
    t.runtime("cudaLaunchKernel", 1, 1)
    p = t.write(tmp_path / "links.json")
    m = load(p, no_cache=True)
    k = [i for i in range(m.n) if m.name(i) == "lonely"][0]
    assert m.launch[k] == -1 and Kind(m.kind[k]) is Kind.KERNEL
    r = _check_cli(p, expect_ok=True)
    assert "no launch call" in r.stdout


# ------------------------------------------------------------------------------------ property tests
_names = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "X", "i", "M", "s", "f", "B"]),
        "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "python_function", "Kernel", "weird", None]),
        "name": _names,
        "pid": st.one_of(st.integers(-2, 3), st.sampled_from(["1", "stream 7", "x"])),
        "tid": st.one_of(st.integers(0, 3), st.sampled_from(["7", "stream 7", ""])),
        "ts": st.one_of(st.integers(0, 10**15), st.floats(0, 1e13, allow_nan=False), st.none()),
        "dur": st.one_of(st.integers(-5, 10**6), st.floats(-1, 1e6, allow_nan=False)),
        "args": st.one_of(st.none(), st.fixed_dictionaries({
            "correlation": st.integers(-1, 5),
            "External id": st.integers(-1, 5),
            "Python id": st.integers(0, 5),
            "Python parent id": st.one_of(st.none(), st.integers(0, 5)),
        })),
    }
)


_FIVE_OPS = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5}
             for i in range(5)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(events=_FIVE_OPS, top_array=False, damage=[(0.4, "flip")])  # one event beyond repair: skipped, and said so
@given(events=st.lists(_event, max_size=25), top_array=st.booleans(), damage=st.lists(
    st.tuples(st.floats(0, 1), st.sampled_from(["cut", "flip", "quote", "insert"])), max_size=3))
def test_random_traces_and_damage_load_or_trace_error(tmp_path, events, top_array, damage):
    doc = events if top_array else {"schemaVersion": 1, "traceEvents": events}
    # "insert" puts a bare inf at the spot
    data = damage_bytes(json.dumps(doc).encode(), [("inf" if how == "insert" else how, where) for where, how in damage])
    p = tmp_path / "h.json"
    p.write_bytes(data)
    try:
        m = load(p, no_cache=True)
    except TraceError as exc:
        assert "\n" not in str(exc)
        return
    assert m.n <= len(events), (m.n, len(events))  # damage never invents events
    assert m.ts_ns.shape == m.dur_ns.shape == m.kind.shape == (m.n,)
    assert (m.dur_ns >= 0).all()
    n_timed = sum(1 for e in events if e["ph"] not in ("M", "s", "f") and e["ts"] is not None)
    # an event written twice is dropped once and said so: every timed event is kept or accounted for
    dropped = sum(int(w.split()[0]) for w in m.warnings if "exact duplicate events were dropped" in w)
    if not damage:
        assert m.n + dropped == n_timed
    elif m.n + dropped < n_timed:
        assert m.warnings, "events were lost to the damage without a warning"


_EV = b'{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}'


@pytest.mark.parametrize(
    "data,n,warning",
    [
        (b'{"traceEvents": [', 0, "ends inside the event list"),
        (b'{"x": "traceEvents", "traceEvents": [' + _EV + b"]}", 1, None),
        (b"[" + _EV + b"] junk", 1, "4 bytes after the event array were ignored"),
        (b'{"traceEvents": [' + _EV + b"]", 1, "top-level object is not closed"),
        (b'\xef\xbb\xbf{"traceEvents": []}', 0, "no timed events"),
        (b'{"traceEvents": [1, "x", null, {"ph":"X"}]}', 0, "3 entries of traceEvents were not objects"),
        (b'{"traceEvents": [' + _EV + b",]}", 1, None),
        (b'{"traceEvents": [' + _EV + b", " + _EV.replace(b'"a"', b'"b"') + b' ], "traceName": "t"}', 2, None),
    ],
)
def test_odd_top_levels(tmp_path, data, n, warning):
    p = tmp_path / "odd.json"
    p.write_bytes(data)
    m = load(p, no_cache=True)
    assert m.n == n
    if warning:
        assert any(warning in w for w in m.warnings), m.warnings
    else:
        assert m.warnings == []
    _check_cli(p, expect_ok=True)


def test_value_that_never_closes_costs_one_event(tmp_path, monkeypatch):
    """An unclosed '[' inside one event's args: that event is skipped, every other one is kept (and
    the widening of pieces that this provokes is bounded, or it would be quadratic)."""
    from gapscope.trace import reader

    t = Synth()
    for i in range(3000):
        t.cpu_op("aten::mm", i * 10, 5, **{"Input Dims": [[i, 4]]})
    raw = t.dumps()
    good = b'"Input Dims": [[1500, 4]]'
    k = raw.index(good)
    p = tmp_path / "unclosed.json"
    p.write_bytes(raw[:k] + b'"Input Dims": [[1500, 4], ' + raw[k + len(good):])
    monkeypatch.setattr(reader, "CHUNK", 4096)
    m = load(p, no_cache=True)
    assert m.n == 2999
    assert sorted(int(m.ts_ns[i]) // 10_000 for i in range(m.n)) == [i for i in range(3000) if i != 1500]
    assert m.warnings == ["1 damaged events could not be repaired and were skipped"]


def test_bare_nan_everywhere_is_repaired_per_piece(tmp_path, monkeypatch):
    from gapscope.trace import reader

    t = Synth()
    for i in range(500):
        t.cpu_op("aten::mm", i * 10, 5, val=float("nan"))
    p = tmp_path / "nan.json"
    p.write_bytes(t.dumps().replace(b"NaN", b"nan"))
    monkeypatch.setattr(reader, "CHUNK", 2048)
    m = load(p, no_cache=True)
    assert m.n == 500
    assert m.warnings == ["replaced 500 bare inf/nan numbers by null"]
    assert m.event_args(0)["val"] is None
