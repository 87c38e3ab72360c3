"""Two ranks on gloo (CPU, two spawned processes): capture the tiny demo with one late rank, then the combined
summary rank 0 writes and ``gapscope report`` on the two traces (and on their folder) name the late rank and
what it was doing before its all-reduce launches. gloo collectives run on the CPU: no NCCL kernels, so this is
the CPU-side matching (``c10d::allreduce_`` ops, ``gloo:all_reduce`` ranges)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gapscope.capture import cli as capture_cli  # noqa: E402

from gapscope.analysis.thresholds import DEFAULT  # noqa: E402
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parent.parent
STEM = "demo-eager-tp-late1"
LATE = "`_straggler_work` (capture/demo.py:"


def _rank_worker(rank: int, world: int, port: int, out_dir: str, rcs) -> None:
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    # 20 ms of extra host work before each all-reduce: on a 2-core machine two ranks (each with gloo worker
    # threads and the profiler) share the cores, and arrival times jitter by several ms; 2 ms is not enough
    rcs[rank] = capture_cli.main(["demo", "--ranks", "--cpu", "--size", "tiny", "--phase", "decode", "--active", "2",
                                  "--late-rank", "1", "--late-us", "20000", "--warmup", "1", "--repeats", "1",
                                  "--out", out_dir])


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory):
    import torch.multiprocessing as mp

    out = tmp_path_factory.mktemp("gloo")
    rcs = mp.get_context("spawn").Manager().dict()
    mp.start_processes(_rank_worker, args=(2, free_port(), str(out), rcs), nprocs=2, join=True,
                       start_method="spawn")
    assert dict(rcs) == {0: 0, 1: 0}
    return out


def _report(*args) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "gapscope", "report", *map(str, args)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def test_gloo_traces_hold_cpu_side_collectives_only(gloo_run):
    from gapscope.analysis.ranks import timeline
    from gapscope.trace import load

    for r in (0, 1):
        m = load(str(gloo_run / f"{STEM}.decode.rank{r}.json.gz"), no_cache=True)
        names = set(m.names)
        assert "c10d::allreduce_" in names and "gloo:all_reduce" in names
        assert not any(n.startswith("ncclDevKernel_") for n in names)
        tl = timeline(m)
        # 2 layers x 2 all-reduces x 2 measured steps; the capture's barriers are outside the steps
        assert tl.side == "cpu" and tl.n == 8 and set(tl.coll) == {"allreduce"} and set(tl.pg) == {"0"}


def test_combined_summary_written_by_rank_0_names_the_late_rank(gloo_run):
    doc = json.loads((gloo_run / f"{STEM}.ranks.json").read_text())
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    (ph,) = doc["job"]["phases"]
    assert ph["phase"] == "decode"
    late = ph["late"][0]
    # 8 all_reduce calls; a leading one counts as profiler start-up skew when the two profilers started far
    # enough apart (it does on a loaded machine), and "of" counts the steady-state ones
    startup = (ph.get("startup") or {}).get("calls", 0)
    assert startup <= 1 and late["of"] == 8 - startup
    assert late["rank"] == 1 and 2 * late["count"] > late["of"]
    assert late["blamed"][0]["func"] == "_straggler_work" and late["blamed"][0]["others_median_us"] == 0
    assert doc["job"]["lines"][0].startswith("decode: rank 1 arrived last")
    assert LATE in doc["job"]["lines"][0]
    # same host, same clock: the time bases are right and the collectives' ends agree with them (within the
    # scheduling noise of a small machine, half the 20 ms of straggler work: a wrong time base is off by far more;
    # 5 ms failed once on this 2-core machine at load average ~3 with two ranks and the test run sharing it)
    c1 = ph["clock"][1]
    assert c1["matched"] == 8 and abs(c1["residual_us"]) < 10_000
    # its verdict is the rule's for the residual and spread measured (scheduling noise on a loaded 2-core machine
    # can leave a sub-ms residual that does not line up: "inconsistent", 786 µs once at load average ~10)
    res, spread = c1["residual_us"], c1["spread_us"]
    want = ("ok" if abs(res) * 1000 <= DEFAULT.clock_tolerance_ns else
            "corrected" if spread <= abs(res) / 4 and c1["matched"] >= DEFAULT.clock_min_matches else "inconsistent")
    assert c1["status"] == want, c1
    per = {e["rank"]: e for e in ph["per_rank"]}
    assert per[0]["wait_us"] > per[1]["wait_us"] and per[0]["idle_pct"] is None  # no GPU on gloo


def test_gapscope_report_on_the_two_files_names_the_late_rank(gloo_run):
    files = [gloo_run / f"{STEM}.decode.rank{r}.json.gz" for r in (0, 1)]
    md = _report(*files).stdout
    assert "## Ranks" in md and "### Late ranks" in md
    assert "rank 1 arrived last" in md and LATE in md
    assert "| 1 | " in md.split("### Late ranks")[1].split("\n\n")[2].splitlines()[2]  # first row: rank 1
    doc = json.loads(_report("--json", *files).stdout)
    assert doc["ranks"]["late"][0]["rank"] == 1
    assert doc["collectives"][0]["late_rank"] == 1 and doc["collectives"][0]["name"] == "c10d::allreduce_"
    # the folder form loads both ranks (the combined summary next to them is not a trace)
    assert "rank 1 arrived last" in _report(gloo_run).stdout
