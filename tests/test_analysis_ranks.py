"""Several ranks: collectives matched across ranks, wait part and late rank after clock alignment."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.synth import Synth
from tests.test_analysis import model_of
from tests.test_report import SCHEMA_PATH
from tui.analysis import analyze_ranks, summarise
from tui.report import build_json, render_markdown

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def rank_trace(rank: int, late_by: float, clock: float):
    """Three all-reduces; each ends at the same true time on both ranks (start + 200 µs on rank 0)."""
    s = Synth(meta={"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}})
    t = 0.0
    for i in range(3):
        s.launch(ts=clock + t, dur=2, kernel="gemm", k_ts=clock + t + 10, k_dur=50)
        start = t + 100 + (late_by if i != 1 else 0)  # rank is late in collectives 0 and 2
        end = t + 300
        rt, k = s.launch(ts=clock + start - 5, dur=3, kernel=AR, k_ts=clock + start, k_dur=end - start)
        t += 400
    return model_of(s)


def test_late_rank_and_wait_with_clock_offset():
    m0 = rank_trace(0, 0.0, clock=0.0)
    m1 = rank_trace(1, 150.0, clock=1_000_000.0)  # rank 1's clock is 1 s ahead
    aa = analyze_ranks([m1, m0])
    assert [a.rank for a in aa] == [0, 1]
    rows = aa[0].rank_collectives
    assert len(rows) == 1
    r = rows[0]
    assert r["name"] == AR and r["count"] == 3
    assert r["late_rank"] == 1 and r["late_counts"] == {"1": 2}
    assert r["clock_offset_us"]["1"] == pytest.approx(1_000_000.0)
    assert r["wait_by_rank_us"]["0"] == pytest.approx(300.0)  # 150 µs in collectives 0 and 2
    assert r["wait_by_rank_us"]["1"] == pytest.approx(0.0)
    assert r["total_us"] == pytest.approx(3 * 200 + 2 * 50 + 200)
    c0 = aa[0].collectives[0]
    assert c0["wait_ns"] == 300_000 and c0["late_rank"] == 1


def test_ranks_report_json_and_markdown():
    aa = analyze_ranks([rank_trace(0, 0.0, 0.0), rank_trace(1, 150.0, 5.0)])
    doc = build_json(aa)
    if SCHEMA_PATH.is_file():
        jsonschema.validate(json.loads(json.dumps(doc)), json.loads(SCHEMA_PATH.read_text()))
    assert doc["collectives"][0]["late_rank"] == 1
    assert doc["collectives"][0]["wait_us"] == pytest.approx(300.0)
    md = render_markdown(aa)
    assert "## Ranks" in md and "| 1 | 0 |" in md


def test_shared_nccl_two_ranks(shared_traces):
    from tui.trace import load

    ms = [load(str(shared_traces / "h200" / f"nccl_two_ranks.rank{r}.json.gz"), no_cache=True) for r in (0, 1)]
    aa = analyze_ranks(ms)
    rows = {r["name"].split("(")[0]: r for r in aa[0].rank_collectives}
    assert {"ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclDevKernel_SendRecv",
            "ncclDevKernel_AllGather_RING_LL"} <= set(rows)
    for r in rows.values():
        assert 0 <= r["wait_us"] <= r["total_us"]
        assert r["late_rank"] in (0, 1)
    # both ranks live on one host: the clock offset found from collective ends is small
    assert abs(rows["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]["clock_offset_us"]["1"]) < 1000


def test_summarise(tmp_path):
    s = Synth()
    s.launch(ts=0, dur=1, kernel="a", k_ts=10, k_dur=5)
    s.launch(ts=1, dur=1, kernel="b", k_ts=30, k_dur=5)
    p = s.write(tmp_path / "x.json")
    d = summarise(str(p))
    json.dumps(d)
    assert d["devices"][0]["idle_pct"] == pytest.approx(100 * 15 / 25)
    assert d["findings"] and d["rank"] is None
