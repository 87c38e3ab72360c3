"""Several ranks: collectives matched across ranks, wait part and late rank after clock alignment."""

from __future__ import annotations

import json
from pathlib import Path

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


# ------------------------------------------------------------------ clocks checked against collective ends
def shifted_trace(rank: int, late_by: float, *, clock: float = 0.0, base_ns: int = 1790000000000000000,
                  jitter=None, n: int = 6, pg: str = "0"):
    """n all-reduces of group ``pg``; each ends at the same true time on every rank. ``clock`` (µs) is added to
    this rank's timestamps, ``base_ns`` is what the trace says its time base is."""
    s = Synth(meta={"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
                    "baseTimeNanoseconds": base_ns})
    t = 0.0
    for i in range(n):
        s.launch(ts=clock + t, dur=2, kernel="gemm", k_ts=clock + t + 10, k_dur=50)
        start = t + 100 + late_by
        end = t + 300 + (jitter[i] if jitter else 0.0)
        _, k = s.launch(ts=clock + start - 5, dur=3, kernel=AR, k_ts=clock + start, k_dur=end - start)
        k["args"]["Process Group Name"] = pg
        t += 400
    return model_of(s)


def test_time_bases_that_agree_with_the_collectives_are_used_as_they_are():
    base = 1790000000000000000
    # rank 1's trace base is 1 s later and its relative times 1 s smaller: the same true clock
    m0 = shifted_trace(0, 0.0)
    m1 = shifted_trace(1, 40.0, clock=-1_000_000.0, base_ns=base + 1_000_000_000)
    aa = analyze_ranks([m0, m1])
    rm = aa[0].rank_match
    c1 = rm["clock"][1]
    assert c1["status"] == "ok" and c1["base_offset_us"] == pytest.approx(1_000_000.0)
    assert abs(c1["residual_us"]) < 1
    assert rm["warnings"] == []
    assert rm["rows"][0]["wait_by_rank_us"]["0"] == pytest.approx(6 * 40.0)
    assert not any("clock" in w for w in aa[1].warnings)


def test_a_time_base_the_collectives_contradict_is_corrected_and_said():
    # same declared base, but rank 1's clock runs 2 ms ahead: the ends say so
    aa = analyze_ranks([shifted_trace(0, 0.0), shifted_trace(1, 40.0, clock=2000.0)])
    rm = aa[0].rank_match
    assert rm["clock"][1]["status"] == "corrected"
    assert rm["clock"][1]["offset_us"] == pytest.approx(-2000.0)
    w = [w for w in rm["warnings"] if w.startswith("rank 1:")]
    assert len(w) == 1 and "+2.00 ms" in w[0] and "corrected" in w[0]
    assert w[0] in aa[1].warnings
    r = rm["rows"][0]
    assert r["late_rank"] == 1 and r["wait_by_rank_us"]["0"] == pytest.approx(6 * 40.0)
    md = render_markdown(aa)
    assert "rank 1: collective end times are +2.00 ms off" in md
    doc = build_json(aa)
    assert doc["ranks"]["clock"][1]["status"] == "corrected"
    assert any("rank 1" in x for x in doc["ranks"]["warnings"])


def test_collective_ends_that_do_not_line_up_keep_the_base_and_warn():
    jit = [600.0, -600.0, 900.0, -50.0, 700.0, -800.0]
    aa = analyze_ranks([shifted_trace(0, 0.0), shifted_trace(1, 40.0, jitter=jit)])
    c1 = aa[0].rank_match["clock"][1]
    assert c1["status"] == "inconsistent" and c1["offset_us"] == 0.0
    assert any("do not line up" in w and w.startswith("rank 1:") for w in aa[0].rank_match["warnings"])


def test_matching_is_by_process_group_and_order_not_name():
    """Two groups run the same kernel name, interleaved; rank 1 is late only in group "1"."""
    def two_groups(rank, late_in_1):
        s = Synth(meta={"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}})
        t = 0.0
        for i in range(4):
            for pg in ("0", "1") if i % 2 == 0 else ("1", "0"):  # the order of groups differs per step...
                late = late_in_1 if pg == "1" else 0.0
                _, k = s.launch(ts=t, dur=3, kernel=AR, k_ts=t + 10 + late, k_dur=200 - late)
                k["args"]["Process Group Name"] = pg
                t += 300
        return model_of(s)

    aa = analyze_ranks([two_groups(0, 0.0), two_groups(1, 80.0)])
    rows = {r["process_group"]: r for r in aa[0].rank_collectives}
    assert set(rows) == {"0", "1"}
    assert rows["1"]["late_rank"] == 1 and rows["1"]["late_counts"] == {"1": 4}
    assert rows["1"]["wait_by_rank_us"]["0"] == pytest.approx(4 * 80.0)
    assert rows["0"]["wait_us"] == pytest.approx(0.0) and rows["0"]["late_rank"] is None


# ------------------------------------------------------------------------ CPU-side collectives (gloo)
def gloo_trace(rank: int, late_us: float, n: int = 4, world: int = 2, late_rank: int = 1, op_tail: float = 0.0):
    return model_of(gloo_synth(rank, late_us, n, world, late_rank, op_tail))


def gloo_synth(rank: int, late_us: float, n: int = 4, world: int = 2, late_rank: int = 1,
               op_tail: float = 0.0) -> Synth:
    """gloo style: no GPU, ``c10d::allreduce_`` on the main thread, ``gloo:all_reduce`` on a worker thread,
    the late rank runs ``_straggler_work`` before each call; each call completes at the same true time.
    ``op_tail``: the late rank's op stays open this long after its gloo range ended (seen on a busy host)."""
    s = Synth(meta={"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world,
                                        "pg_config": [{"pg_name": "0", "pg_desc": "default_pg"}]},
                    "deviceProperties": []})
    s.annotation("gapscope.step#0", 0, n * 1000 + 100)
    t = 50.0
    for i in range(n):
        with s.frame("capture/demo.py(165): attn", t, 700):
            arrive = t + 100 + (late_us if rank == late_rank else 0.0)
            if rank == late_rank:
                s.python("capture/demo.py(112): _straggler_work", t + 100, late_us - 5)
            else:
                s.python("capture/demo.py(150): _local", t + 20, 60)
            tail = op_tail if rank == late_rank else 0.0
            s.cpu_op("c10d::allreduce_", arrive, 20 if not tail else t + 650 - arrive + tail)
            s.annotation("gloo:all_reduce", arrive + 5, t + 650 - arrive - 5, tid=2000)
            s.python("<built-in method wait of Work>", arrive + 25, t + 655 - arrive - 25)
        t += 1000
    return s


def test_cpu_side_collectives_name_the_late_rank_and_its_stack():
    # the late rank's op outlives its gloo range by 300 µs: the range's end is the completion, clocks line up
    aa = analyze_ranks([gloo_trace(0, 0.0), gloo_trace(1, 300.0, op_tail=300.0)])
    rm = aa[0].rank_match
    assert [r["side"] for r in rm["ranks"]] == ["cpu", "cpu"]
    (row,) = aa[0].rank_collectives
    assert row["name"] == "c10d::allreduce_" and row["collective"] == "allreduce" and row["process_group"] == "0"
    assert row["late_rank"] == 1 and row["late_counts"] == {"1": 4}
    assert row["wait_by_rank_us"]["0"] == pytest.approx(4 * 300.0)
    assert rm["clock"][1]["status"] == "ok" and rm["clock"][1]["residual_us"] == pytest.approx(0.0)
    assert rm["warnings"] == []
    late = rm["late"][0]
    assert late["rank"] == 1 and late["count"] == 4 and late["of"] == 4
    b = late["before"][0]
    assert b["func"] == "_straggler_work" and b["file"] == "capture/demo.py" and b["line"] == 112 and b["count"] == 4
    md = render_markdown(aa)
    assert ("rank 1 arrived last 4 times (of 4); before its allreduce launch it was in `_straggler_work` "
            "(capture/demo.py:112)") in md
    assert "| 0 | cpu |" in md and "### Late ranks" in md
    f0 = [f.title for f in aa[0].findings if f.id == "collective-wait-0"]
    assert f0 and "late rank 1" in f0[0] and "`_straggler_work` (capture/demo.py:112)" in f0[0]
    doc = build_json(aa)
    jsonschema.validate(json.loads(json.dumps(doc)), json.loads(SCHEMA_PATH.read_text()))
    assert doc["ranks"]["late"][0]["rank"] == 1 and doc["collectives"][0]["late_rank"] == 1


@pytest.mark.parametrize("world,late", [(4, 2), (8, 5)])
def test_many_ranks(world, late):
    aa = analyze_ranks([gloo_trace(r, 200.0, world=world, late_rank=late) for r in range(world)])
    rm = aa[0].rank_match
    assert rm["late"][0]["rank"] == late and rm["late"][0]["count"] == 4
    assert [e["arrived_last"] for e in rm["ranks"]] == [4 if r == late else 0 for r in range(world)]
    assert all(e["status"] in ("reference", "ok") for e in rm["clock"])


def test_summaries_combined_on_rank_0_name_the_late_rank(tmp_path):
    from tui.analysis.ranks import combine_summaries

    paths = [gloo_synth(r, 300.0).write(tmp_path / f"t.rank{r}.json") for r in (0, 1)]
    sums = [summarise(str(p)) for p in paths]
    json.dumps(sums)
    assert sums[1]["collective_timeline"]["before"][0]["func"] == "_straggler_work"
    comb = combine_summaries(sums)
    assert comb["phases"][0]["late"][0]["rank"] == 1
    assert comb["lines"][0].startswith("rank 1 arrived last 4 times (of 4); before its allreduce launch it was in "
                                       "`_straggler_work` (capture/demo.py:112)")


def test_explorer_lanes_use_the_corrected_offset():
    from tui.app.scene import Scene

    m0, m1 = shifted_trace(0, 0.0), shifted_trace(1, 40.0, clock=2000.0)
    sc = Scene(["a.rank0.json", "b.rank1.json"], [m0, m1])
    offs = [p.offset for p in sc.parts]
    assert offs[0] - offs[1] == 2_000_000
    assert sc.clock_warnings and sc.clock_warnings[0].startswith("rank 1:")
    titles = [r.title for r in sc.rows() if r.lane is None]
    assert any(t.startswith("rank 1 · host · clock corrected") for t in titles)


def test_a_send_and_its_recv_are_the_same_place_in_the_group_order():
    def p2p(rank):
        s = Synth(meta={"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}})
        t = 0.0
        for coll, kern in (("allreduce", AR), ("send" if rank == 0 else "recv", "ncclDevKernel_SendRecv(x)"),
                           ("allreduce", AR)):
            late = 30.0 if rank == 1 else 0.0
            _, k = s.launch(ts=t, dur=3, kernel=kern, k_ts=t + 10 + late, k_dur=100 - late)
            k["args"].update({"Process Group Name": "0", "Collective name": coll})
            t += 200
        return model_of(s)

    aa = analyze_ranks([p2p(0), p2p(1)])
    rm = aa[0].rank_match
    assert rm["warnings"] == []
    assert rm["ranks"][1]["arrived_last"] == 3 and rm["late"][0]["of"] == 3


def test_sample_late_rank_gaps_findings_and_report_name_its_work():
    """traces/demo-eager-tp-late1 (2 x H200): rank 1 runs `_straggler_work` before each of its 64 all-reduces."""
    from tests.conftest import SAMPLE_TRACES
    from tui.analysis import CAUSES
    from tui.trace import load

    files = [Path(SAMPLE_TRACES) / f"demo-eager-tp-late1.decode.rank{r}.json.gz" for r in (0, 1)]
    if not all(f.is_file() for f in files):
        pytest.skip("sample traces not present")
    aa = analyze_ranks([load(str(f), no_cache=True) for f in files])
    rm = aa[0].rank_match
    assert rm["late"][0]["rank"] == 1 and rm["late"][0]["count"] == 64 and rm["late"][0]["of"] == 64
    assert rm["late"][0]["before"][0]["func"] == "_straggler_work"
    assert rm["clock"][1]["status"] == "ok" and rm["warnings"] == []
    where = "`_straggler_work` (capture/demo.py:112)"
    assert any("late rank 1" in f.title and where in f.title for f in aa[0].findings)
    assert any(f.id == "late-rank-1" and where in f.title for f in aa[1].findings)
    a0 = aa[0]
    coll = CAUSES.index("collective")
    rows = [i for i in range(len(a0.gaps)) if int(a0.gaps.cause[i]) == coll]
    assert rows and "rank 1 arrived last 64 times" in a0.gap_detail(rows[0]).explanation
    assert where in a0.gap_detail(rows[0]).explanation
    per = {e["rank"]: e for e in rm["ranks"]}
    assert per[0]["wait_us"] > 200_000 and per[1]["arrived_last"] == 64
    md = render_markdown(aa)
    assert "| 1 | 64 of 64 |" in md and where in md
