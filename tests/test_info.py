"""``gapscope info``: text and JSON summaries of what a trace holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synth import Synth
from gapscope.trace.info import ascii_safe

ROOT = Path(__file__).resolve().parent.parent


def _run(*args, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "gapscope", "info", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


@pytest.fixture
def trace(tmp_path):
    t = Synth(meta={"gapscope": {"phase": "decode", "steps": 3, "torch": "2.13.0"},
                    "distributedInfo": {"rank": 1, "world_size": 4, "backend": "nccl"},
                    "cuda_runtime_version": 13000, "with_stack": 1})
    with t.op("aten::mm", 0, 10):
        t.launch("cudaLaunchKernel", 1, 2, kernel="gemm\x1b[31m", k_ts=5, k_dur=4)
    t.kernel("other_stream", 20, 6, corr=77, stream=9)
    t.events.append({"ph": "X", "cat": "mystery", "name": "m", "pid": 1000, "tid": 1000, "ts": 30, "dur": 1})
    return t.write(tmp_path / "t.json")


def test_info_json(trace, tmp_path):
    r = _run("--json", trace, env_extra={"GAPSCOPE_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["events"] == 5
    assert s["events_by_category"] == {"ac2g": 2, "cpu_op": 1, "cuda_runtime": 1, "kernel": 2, "mystery": 1,
                                       "<none>": 1}
    assert s["events_by_kind"] == {"kernel": 2, "cpu_op": 1, "runtime": 1, "other": 1}
    assert s["window_length_ns"] == 31_000
    assert s["devices"] == [{"id": 0, "name": "NVIDIA H200", "sms": 132, "memory_bytes": 150109880320,
                             "compute": "9.0"}]
    assert [(x["device"], x["stream"], x["events"], x["busy_ns"]) for x in s["streams"]] == [(0, 7, 1, 4000),
                                                                                          (0, 9, 1, 6000)]
    assert s["cpu_threads"] == [{"pid": 1000, "tid": 1000, "name": "thread 1000 (python3)", "events": 3}]
    assert s["rank"] == 1 and s["distributed"]["world_size"] == 4
    assert s["gapscope"] == {"phase": "decode", "steps": 3, "torch": "2.13.0"}
    assert s["versions"]["cuda_runtime_version"] == 13000 and s["versions"]["torch"] == "2.13.0"
    assert s["flags"] == ["with_stack"]
    assert any("mystery" in w for w in s["warnings"])
    assert any("1 of 2 GPU operations have no launch" in w for w in s["warnings"])


def test_info_text_is_aligned_ascii(trace, tmp_path):
    r = _run(trace, env_extra={"GAPSCOPE_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.isascii() and "\x1b" not in out
    assert "events    5" in out and "window    31.000 us" in out and "rank      1 of 4" in out
    assert "capture metadata (gapscope)" in out and "phase  decode" in out
    lines = out.splitlines()
    i = lines.index("GPU streams")
    assert lines[i + 1].split() == ["device", "stream", "events", "busy"]
    assert lines[i + 2].split() == ["0", "7", "1", "4.000", "us"]
    # right-aligned numbers share their right edge with the header
    assert len(lines[i + 1].rstrip()) == len(lines[i + 2].rstrip())
    assert "warnings" in out and "mystery (1)" in out


def test_info_several_traces_and_shared(shared_traces, tmp_path):
    a = shared_traces / "h200" / "nccl_two_ranks.rank0.json.gz"
    b = shared_traces / "h200" / "nccl_two_ranks.rank1.json.gz"
    r = _run("--json", b, a, env_extra={"GAPSCOPE_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert [x["rank"] for x in s] == [1, 0]  # in the order given
    assert all(x["devices"][0]["name"] == "NVIDIA H200" for x in s)
    r = _run(shared_traces / "h200", env_extra={"GAPSCOPE_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0 and r.stdout.count("trace     ") == 7


def test_info_bad_max_size(trace):
    r = _run("--max-size", "lots", trace)
    assert r.returncode == 2 and r.stderr.startswith("gapscope: error: --max-size") and r.stderr.count("\n") == 1


def test_ascii_safe():
    assert ascii_safe("a\x1b[31mb") == "a\\x1b[31mb"
    assert ascii_safe("caf\u00e9") == "caf\\xe9"
    assert ascii_safe("x" * 500, 10) == "xxxxxxx..."
