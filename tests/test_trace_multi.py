"""load_many: folders and globs in rank order, parallel loads equal sequential ones, ranks on tracks."""

from __future__ import annotations

import numpy as np
import pytest

from tests.synth import Synth
from gapscope.trace import TraceError
from gapscope.trace.multi import expand, load_many


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def _rank_trace(folder, rank: int, name: str):
    t = Synth(meta={"distributedInfo": {"rank": rank, "world_size": 12}})
    t.launch("cudaLaunchKernel", rank, 1, kernel=f"k_rank{rank}")
    return t.write(folder / name)


def test_expand_folder_sorts_by_rank_number(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for r in (10, 2, 0, 1):
        _rank_trace(d, r, f"trace_rank{r}.json" if r != 10 else f"trace_rank{r}.json.gz")
    (d / "notes.txt").write_text("x")
    files = expand([d])
    assert [f.rsplit("/", 1)[1] for f in files] == ["trace_rank0.json", "trace_rank1.json", "trace_rank2.json",
                                                    "trace_rank10.json.gz"]
    assert expand([str(d / "trace_rank1*.json*")]) == [str(d / "trace_rank1.json"), str(d / "trace_rank10.json.gz")]


def test_folder_skips_json_that_is_not_a_trace(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    _rank_trace(d, 0, "demo.rank0.json.gz")
    (d / "demo.ranks.json").write_text('{"world_size": 2, "ranks": []}')
    assert [f.rsplit("/", 1)[1] for f in expand([d])] == ["demo.rank0.json.gz"]
    # named explicitly, it is loaded and refused with a reason
    with pytest.raises(TraceError, match="without a traceEvents array"):
        load_many([d / "demo.ranks.json"], no_cache=True)


def test_expand_errors(tmp_path):
    with pytest.raises(TraceError, match="no \\*.json"):
        expand([tmp_path])
    with pytest.raises(TraceError, match="no file matches"):
        expand([str(tmp_path / "*.json")])


def test_parallel_equals_sequential_and_ranks_set(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for r in range(3):
        _rank_trace(d, r, f"rank-{r}.json")
    par = load_many([d], no_cache=True)
    seq = load_many([d], no_cache=True, jobs=1)
    assert [m.rank for m in par] == [0, 1, 2]
    for a, b in zip(par, seq):
        assert np.array_equal(a.ts_ns, b.ts_ns) and a.names == b.names
        assert all(t.rank == a.rank for t in a.tracks)
    assert par[2].names.count("k_rank2") == 1


def test_one_bad_file_fails_with_its_name(tmp_path):
    good = _rank_trace(tmp_path, 0, "rank0.json")
    bad = tmp_path / "rank1.json"
    bad.write_text("nope")
    with pytest.raises(TraceError, match="rank1.json: not a PyTorch profiler trace"):
        load_many([good, bad], no_cache=True)
    with pytest.raises(TraceError, match="no such file"):
        load_many([good, tmp_path / "missing.json"])


def test_shared_two_ranks(shared_traces, tmp_path):
    d = tmp_path / "two"
    d.mkdir()
    for r in (1, 0):
        src = shared_traces / "h200" / f"nccl_two_ranks.rank{r}.json.gz"
        (d / src.name).symlink_to(src)
    ms = load_many([d])
    assert [m.rank for m in ms] == [0, 1]
    assert {t.rank for t in ms[1].tracks} == {1}
