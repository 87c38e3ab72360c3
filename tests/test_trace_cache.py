"""The columnar cache: a warm load equals the cold one; stale and corrupt entries are rebuilt."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.synth import Synth
from gapscope.trace import cache, load
from gapscope.trace.cache import entry_path

COLS = ("ts_ns", "dur_ns", "kind", "track", "name_id", "corr", "ext_id", "py_id", "py_parent", "depth", "parent",
        "args_id", "nbytes", "launch", "op", "track_offsets")


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(d))
    return d


def _trace(tmp_path, n=20, name="t.json"):
    t = Synth(meta={"gapscope": {"phase": "decode", "rank": 0}})
    for i in range(n):
        with t.op("aten::mm", i * 10, 8, **{"Input Dims": [[i, 4], [4, 4]]}):
            t.launch("cudaLaunchKernel", i * 10 + 1, 1, kernel=f"k{i % 3}", k_ts=i * 10 + 4, k_dur=2)
    t.memory(5, 128, total=1024)
    return t.write(tmp_path / name)


def assert_same(a, b):
    for c in COLS:
        x, y = getattr(a, c), getattr(b, c)
        assert x.dtype == y.dtype and np.array_equal(x, y), c
    assert a.names == b.names and a.args == b.args
    assert [vars(t) for t in a.tracks] == [vars(t) for t in b.tracks]
    assert a.devices == b.devices and a.metadata == b.metadata
    assert a.warnings == b.warnings and a.category_counts == b.category_counts


def test_warm_load_equals_cold(tmp_path, cdir):
    p = _trace(tmp_path)
    cold = load(p)
    entry = entry_path(str(p))
    assert os.path.isfile(entry) and os.path.dirname(entry) == str(cdir)
    assert not any(f.name.endswith(".npz") for f in tmp_path.iterdir())  # never next to the trace
    warm = load(p)
    assert_same(cold, warm)
    assert warm.gapscope_meta == {"phase": "decode", "rank": 0}
    assert warm.event_args(int(np.flatnonzero(warm.kind == 3)[0]))["Input Dims"][1] == [4, 4]


def test_warm_load_really_comes_from_the_cache(tmp_path, cdir, monkeypatch):
    p = _trace(tmp_path)
    load(p)
    import gapscope.trace.read as rd

    def boom(*a, **k):
        raise AssertionError("parsed again")

    monkeypatch.setattr(rd, "load_uncached", boom)
    assert load(p).n > 0


def test_no_cache_neither_reads_nor_writes(tmp_path, cdir):
    p = _trace(tmp_path)
    load(p, no_cache=True)
    assert not cdir.exists() or not any(cdir.iterdir())


def test_stale_entry_is_rebuilt(tmp_path, cdir):
    p = _trace(tmp_path, n=20)
    a = load(p)
    # same size and content at the edges would be missed only with an equal mtime: change both
    _trace(tmp_path, n=25)
    os.utime(p, ns=(os.stat(p).st_atime_ns, os.stat(p).st_mtime_ns + 10**9))
    b = load(p)
    assert b.n > a.n
    assert_same(b, load(p, no_cache=True))


def test_touched_file_invalidates(tmp_path, cdir):
    p = _trace(tmp_path)
    load(p)
    st = os.stat(p)
    key_before = cache.fingerprint(str(p), st)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 5))
    key_after = cache.fingerprint(str(p), os.stat(p))
    assert key_before != key_after
    assert cache.get(str(p), os.stat(p)) is None  # stale: not used (and removed)
    assert not os.path.exists(entry_path(str(p)))


@pytest.mark.parametrize("damage", ["garbage", "truncate", "empty"])
def test_corrupt_entry_is_rebuilt(tmp_path, cdir, damage):
    p = _trace(tmp_path)
    cold = load(p)
    entry = entry_path(str(p))
    raw = open(entry, "rb").read()
    with open(entry, "wb") as f:
        f.write({"garbage": b"not a zip file at all" * 10, "truncate": raw[: len(raw) // 2], "empty": b""}[damage])
    again = load(p)
    assert_same(cold, again)
    assert os.path.getsize(entry) == len(raw)  # rewritten


def test_version_mismatch_is_rebuilt(tmp_path, cdir, monkeypatch):
    p = _trace(tmp_path)
    load(p)
    monkeypatch.setattr(cache, "FORMAT_VERSION", cache.FORMAT_VERSION + 1)
    assert cache.get(str(p), os.stat(p)) is None
    assert load(p).n > 0
    assert cache.get(str(p), os.stat(p)) is not None


def test_unwritable_cache_folder_does_not_fail_the_load(tmp_path, monkeypatch):
    blocker = tmp_path / "file_not_folder"
    blocker.write_text("x")
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(blocker / "sub"))
    p = _trace(tmp_path)
    assert load(p).n > 0


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("GAPSCOPE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == str(tmp_path / "xdg" / "gapscope")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == str(tmp_path / "home" / ".cache" / "gapscope")


def test_shared_trace_roundtrip(shared_traces, cdir):
    p = shared_traces / "h200" / "stack_memory_compile_graph.pt.trace.json.gz"
    cold = load(p)
    assert_same(cold, load(p))
