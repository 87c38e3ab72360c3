"""Several ranks: collectives matched across ranks, wait part and late rank after clock alignment."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.synth import Synth
from tests.helpers import SCHEMA_PATH, model_of
from gapscope.analysis import analyze_ranks, summarise
from gapscope.report import build_json, render_markdown

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
    rows = aa[0].cross_rank.rows
    assert len(rows) == 1
    r = rows[0]
    assert r.name == AR and r.count == 3
    assert r.late_rank == 1 and r.late_counts == {1: 2}
    assert r.clock_offset_ns[1] == 1_000_000_000
    assert r.wait_by_rank[0] == 300_000  # 150 µs in collectives 0 and 2
    assert r.wait_by_rank[1] == 0
    assert r.total_ns == (3 * 200 + 2 * 50 + 200) * 1000
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
    from gapscope.trace import load

    ms = [load(str(shared_traces / "h200" / f"nccl_two_ranks.rank{r}.json.gz"), no_cache=True) for r in (0, 1)]
    aa = analyze_ranks(ms)
    rows = {r.name.split("(")[0]: r for r in aa[0].cross_rank.rows}
    assert {"ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclDevKernel_SendRecv",
            "ncclDevKernel_AllGather_RING_LL"} <= set(rows)
    for r in rows.values():
        assert 0 <= r.wait_ns <= r.total_ns
        assert r.late_rank in (0, 1)
    # both ranks live on one host: the clock offset found from collective ends is small
    assert abs(rows["ncclDevKernel_AllReduce_Sum_f32_RING_LL"].clock_offset_ns[1]) < 1_000_000


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
    rm = aa[0].cross_rank
    c1 = rm.clock[1]
    assert c1.status == "ok" and c1.base_offset_ns == 1_000_000_000
    assert abs(c1.residual_ns) < 1000
    assert rm.warnings == []
    assert rm.rows[0].wait_by_rank[0] == 6 * 40_000
    assert not any("clock" in w for w in aa[1].warnings)


def test_a_time_base_the_collectives_contradict_is_corrected_and_said():
    # same declared base, but rank 1's clock runs 2 ms ahead: the ends say so
    aa = analyze_ranks([shifted_trace(0, 0.0), shifted_trace(1, 40.0, clock=2000.0)])
    rm = aa[0].cross_rank
    assert rm.clock[1].status == "corrected"
    assert rm.clock[1].offset_ns == -2_000_000
    w = [w for w in rm.warnings if w.startswith("rank 1:")]
    assert len(w) == 1 and "+2.00 ms" in w[0] and "corrected" in w[0]
    assert w[0] in aa[1].warnings
    r = rm.rows[0]
    assert r.late_rank == 1 and r.wait_by_rank[0] == 6 * 40_000
    md = render_markdown(aa)
    assert "rank 1: collective end times are +2.00 ms off" in md
    doc = build_json(aa)
    assert doc["ranks"]["clock"][1]["status"] == "corrected"
    assert any("rank 1" in x for x in doc["ranks"]["warnings"])


def test_collective_ends_that_do_not_line_up_keep_the_base_and_warn():
    jit = [600.0, -600.0, 900.0, -50.0, 700.0, -800.0]
    aa = analyze_ranks([shifted_trace(0, 0.0), shifted_trace(1, 40.0, jitter=jit)])
    c1 = aa[0].cross_rank.clock[1]
    assert c1.status == "inconsistent" and c1.offset_ns == 0
    assert any("do not line up" in w and w.startswith("rank 1:") for w in aa[0].cross_rank.warnings)


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
    rows = {r.process_group: r for r in aa[0].cross_rank.rows}
    assert set(rows) == {"0", "1"}
    assert rows["1"].late_rank == 1 and rows["1"].late_counts == {1: 4}
    assert rows["1"].wait_by_rank[0] == 4 * 80_000
    assert rows["0"].wait_ns == 0 and rows["0"].late_rank is None


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
    rm = aa[0].cross_rank
    assert [r.side for r in rm.ranks] == ["cpu", "cpu"]
    (row,) = rm.rows
    assert row.name == "c10d::allreduce_" and row.collective == "allreduce" and row.process_group == "0"
    assert row.late_rank == 1 and row.late_counts == {1: 4}
    assert row.wait_by_rank[0] == 4 * 300_000
    assert rm.clock[1].status == "ok" and rm.clock[1].residual_ns == 0
    assert rm.warnings == []
    late = rm.late[0]
    assert late.rank == 1 and late.count == 4 and late.of == 4 and late.compared == 3  # the first has no interval
    (b,) = late.blamed
    # 295 µs of _straggler_work before each launch on rank 1, none on rank 0, in the 3 compared intervals
    assert (b.func, b.file, b.line, b.calls) == ("_straggler_work", "capture/demo.py", 112, 3)
    assert (b.late_ns, b.others_ns, b.excess_ns) == (885_000, 0, 885_000)
    md = render_markdown(aa)
    assert ("rank 1 arrived last 4 times (of 4), the others waited 1.20 ms for it; from the end of each previous "
            "collective to its launch (3 compared) its thread spent longer than the other ranks' in `_straggler_work` (capture/demo.py:112): "
            "885.0 µs own time vs 0 ns") in md
    assert "| 0 | cpu |" in md and "### Late ranks" in md
    f0 = [f.title for f in aa[0].findings if f.id == "collective-wait-0"]
    assert f0 and "late rank 1" in f0[0] and "`_straggler_work` (capture/demo.py:112)" in f0[0]
    doc = build_json(aa)
    jsonschema.validate(json.loads(json.dumps(doc)), json.loads(SCHEMA_PATH.read_text()))
    assert doc["ranks"]["late"][0]["rank"] == 1 and doc["collectives"][0]["late_rank"] == 1


@pytest.mark.parametrize("world,late", [(4, 2), (8, 5)])
def test_many_ranks(world, late):
    aa = analyze_ranks([gloo_trace(r, 200.0, world=world, late_rank=late) for r in range(world)])
    rm = aa[0].cross_rank
    assert rm.late[0].rank == late and rm.late[0].count == 4
    assert [e.arrived_last for e in rm.ranks] == [4 if r == late else 0 for r in range(world)]
    assert all(e.status in ("reference", "ok") for e in rm.clock)
    assert rm.late[0].blamed[0].func == "_straggler_work" and rm.late[0].blamed[0].others_ns == 0


def test_summaries_combined_on_rank_0_name_the_late_rank(tmp_path):
    from gapscope.analysis.ranks import combine_summaries

    paths = [gloo_synth(r, 300.0).write(tmp_path / f"t.rank{r}.json") for r in (0, 1)]
    sums = [summarise(str(p)) for p in paths]
    json.dumps(sums)
    own = sums[1]["collective_timeline"]["own"]
    assert own[0] is None and own[1]["capture/demo.py(112): _straggler_work"] == 295_000
    comb = combine_summaries(sums)
    assert comb["phases"][0]["late"][0]["rank"] == 1
    assert comb["phases"][0]["late"][0]["blamed"][0]["excess_us"] == 885.0
    assert comb["lines"][0].startswith("rank 1 arrived last 4 times (of 4), the others waited 1.20 ms for it; "
                                       "from the end of each previous collective to its launch (3 compared) its "
                                       "thread spent longer than the other ranks' in `_straggler_work` "
                                       "(capture/demo.py:112)")


def test_explorer_lanes_use_the_corrected_offset():
    from gapscope.tui.scene import Scene

    m0, m1 = shifted_trace(0, 0.0), shifted_trace(1, 40.0, clock=2000.0)
    sc = Scene(["a.rank0.json", "b.rank1.json"], [m0, m1])
    offs = [p.offset for p in sc.parts]
    assert offs[0] - offs[1] == 2_000_000
    assert sc.clock_warnings and sc.clock_warnings[0].startswith("rank 1:")
    titles = [r.title for r in sc.display.rows() if r.lane is None]
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
    rm = aa[0].cross_rank
    assert rm.warnings == []
    assert rm.ranks[1].arrived_last == 3 and rm.late[0].of == 3


def _pair(stem):
    from tests.helpers import SAMPLE_TRACES
    from gapscope.trace import load

    files = [Path(SAMPLE_TRACES) / f"{stem}.rank{r}.json.gz" for r in (0, 1)]
    assert all(f.is_file() for f in files), files  # in the repository: missing is a failure
    return analyze_ranks([load(str(f), no_cache=True) for f in files])


def test_sample_late_rank_is_blamed_on_its_straggler_work_with_hand_checked_numbers():
    """traces/demo-eager-tp-late1 (2 x H200): rank 1 runs `_straggler_work` (2 ms busy loop) before each of its
    64 all-reduces. Expected numbers from benchmarks/raw_late_rank.py on the raw JSON (no tui code): rank 0 waited
    222103.5 µs over the 64 in-step all-reduces, rank 1 arrived last at all 64; `_straggler_work`'s own time
    (duration minus the events inside it) between consecutive launches: 155895.951 µs over 63 intervals on rank
    1, 0 on rank 0."""
    from gapscope.analysis import CAUSES

    aa = _pair("demo-eager-tp-late1.decode")
    rm = aa[0].cross_rank
    assert rm.startup is None and rm.clock[1].status == "ok" and rm.warnings == []
    (le,) = rm.late
    assert (le.rank, le.count, le.of, le.compared) == (1, 64, 64, 63)
    assert le.waits_caused_ns == pytest.approx(222_103_500, abs=1_000)  # the clock correction: < 1 µs
    assert rm.stats(0).wait_ns == pytest.approx(222_103_500, abs=1_000) and rm.stats(1).wait_ns == 0
    (b,) = le.blamed
    assert (b.func, b.file, b.line, b.calls) == ("_straggler_work", "capture/demo.py", 112, 63)
    assert b.late_ns == pytest.approx(155_895_951, abs=10) and b.others_ns == 0
    where = "`_straggler_work` (capture/demo.py:112)"
    # the late rank's finding is its first (ranked by the 222 ms it cost the others), the waiting rank's too
    f1 = aa[1].findings[0]
    assert f1.id == "late-rank-1" and f1.severity == "high" and where in f1.title and "155.90 ms" in f1.title
    f0 = aa[0].findings[0]
    assert f0.id == "collective-wait-0" and "222.10 ms" in f0.title and "late rank 1" in f0.title
    # rank 0 was 1.8% idle: its 222 ms of collective wait is not idle time explained
    assert aa[0].idle_pct < 2 and f0.idle_ns == 0 and "not GPU idle" in f0.title
    assert sum(f.idle_ns for f in aa[0].findings) <= aa[0].idle_ns
    a0 = aa[0]
    coll = CAUSES.index("collective")
    rows = [i for i in range(len(a0.gaps)) if int(a0.gaps.cause[i]) == coll]
    assert rows and "rank 1 arrived last 64 times" in a0.gap_detail(rows[0]).explanation
    assert where in a0.gap_detail(rows[0]).explanation
    md = render_markdown(aa)
    head = md.split("## Ranks")[0]
    assert "rank 1 arrived last 64 times (of 64), the others waited 222.10 ms for it" in head and where in head
    assert "| 1 | 64 of 64 | 222.10 ms | `_straggler_work (capture/demo.py:112)` | 155.90 ms | 0 ns | +155.90 ms |" in md
    doc = build_json(aa)
    jsonschema.validate(json.loads(json.dumps(doc)), json.loads(SCHEMA_PATH.read_text()))
    assert [f["id"] for f in doc["findings"][:2]] == ["t1:late-rank-1", "t0:collective-wait-0"]
    assert doc["ranks"]["late"][0]["blamed"][0]["late_us"] == pytest.approx(155_895.951, abs=0.01)


def test_sample_balanced_ranks_blame_no_frame():
    """traces/demo-eager-tp (no injected straggler): rank 0's host ran behind rank 1's over the whole step (a
    shared host), so rank 0 arrives last, but no frame of it differs from rank 1's: none is blamed."""
    aa = _pair("demo-eager-tp.decode")
    rm = aa[0].cross_rank
    (le,) = rm.late
    assert le.rank == 0 and le.count == 64
    assert le.blamed == [] and le.top_excess  # listed as the largest excesses, not blamed
    assert rm.startup is None
    f = aa[0].findings[0]
    assert f.id == "late-rank-0" and "no frame stands out" in f.title
    md = render_markdown(aa)
    assert "(not blamed)" in md and "its thread spent longer than the other ranks' in" not in md


def test_shared_nccl_pair_start_up_skew_is_counted_apart(shared_traces):
    """h200/nccl_two_ranks: the first all-reduce comes right after the profilers started; rank 0 waits 447 ms in
    it for rank 1, whose first event is 447 ms after rank 0's: start-up skew, not a straggler."""
    from gapscope.trace import load

    ms = [load(str(shared_traces / "h200" / f"nccl_two_ranks.rank{r}.json.gz"), no_cache=True) for r in (0, 1)]
    aa = analyze_ranks(ms)
    rm = aa[0].cross_rank
    su = rm.startup
    assert su is not None and su.calls == 1 and su.late_rank == 1
    assert su.profiler_skew_ns == pytest.approx(447.3e6, rel=0.01)
    st0 = rm.stats(0)
    assert st0.startup_wait_ns == pytest.approx(447.46e6, rel=0.001) and st0.wait_ns < 1e6
    # 5 matched calls, the skewed one names no late rank: rank 1 is last at 2 of the other 4
    assert sum(r.late_counts.get(1, 0) for r in rm.rows) == 2 and rm.late_rank(1).of == 4
    f = [f for f in aa[0].findings if f.id == "startup-skew-0"]
    assert f and f[0].severity == "info" and f is not None and aa[0].findings[-1].id == "startup-skew-0"
    assert "profiler start-up skew, not a straggler" in f[0].title
    md = render_markdown(aa)
    assert "447.46 ms in the first collective (profiler start-up skew)" in md
    for le in rm.late:  # time blocked in other collectives is not blamed
        assert not any(b.frame.startswith(("nccl:", "c10d::", "record_param_comms")) for b in le.blamed)


# ------------------------------------------------------------- the late rank's own time against the others'
def sleeper(rank: int, late_rank: int = 1, *, n: int = 4, sleep_us: float = 2000.0, profiler_at: float = 0.0,
            barrier: bool = False, prep_us: float = 0.0, steps: bool = False) -> Synth:
    """One step per 1000 µs + sleep: the step function, then on the late rank `time.sleep` (a built-in) inside
    it, then a short `typing.py inner` frame right before the all-reduce launch (the last Python frame before
    it). Each all-reduce ends at the same true time on both ranks. ``profiler_at``: this rank's first event
    (its profiler started then); ``barrier``: a barrier right after it, before the steps; ``prep_us``: a
    `app.py(30): prep` frame of that length at the start of each step; ``steps``: each step in a
    ``gapscope.step#k`` range, as the capture writes them."""
    s = Synth(meta={"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}})
    s.annotation("profiler start", profiler_at, 1)
    step = 1000.0 + sleep_us
    t0 = 50_100.0  # right after the barrier
    if barrier:  # both ranks call it 10 µs after their own profiler start; it ends when the later one arrived
        _, k = s.launch(ts=profiler_at + 5, dur=3, kernel=AR, k_ts=profiler_at + 10, k_dur=50_000 - profiler_at)
        k["args"]["Process Group Name"] = "0"
    for i in range(n):
        t = t0 + i * step
        late = rank == late_rank
        if steps:
            s.annotation(f"gapscope.step#{i}", t, step - 40)
        with s.frame("app.py(10): step", t, step - 50):
            s.launch(ts=t + 1, dur=2, kernel="gemm", k_ts=t + 10, k_dur=50)
            if prep_us:
                s.python("app.py(30): prep", t + 4, prep_us)
            if late:
                s.python("<built-in function sleep>", t + prep_us + 20, sleep_us)
            a = t + prep_us + 20 + (sleep_us if late else 0.0)
            s.python("typing.py(300): inner", a + 5, 12)
            _, k = s.launch(ts=a + 20, dur=3, kernel=AR, k_ts=a + 30, k_dur=t + step - 100 - (a + 30))
            k["args"]["Process Group Name"] = "0"
    return s


def test_the_late_rank_is_blamed_on_its_sleep_not_on_the_last_frame_before_the_launch():
    # both ranks run `prep` each step, rank 1's 50 µs longer: more than rank 0's, yet 50 of the 2050 µs it was
    # late per step, below the 20% share: listed, not blamed
    aa = analyze_ranks([model_of(sleeper(0, prep_us=100)), model_of(sleeper(1, prep_us=150))])
    rm = aa[0].cross_rank
    (le,) = rm.late
    assert (le.rank, le.count, le.compared) == (1, 4, 3)
    # rank 0's arrivals are 2050 µs earlier each time: 4 x 2050 µs waited
    assert le.waits_caused_ns == 8_200_000 and rm.stats(0).wait_ns == 8_200_000
    (b,) = le.blamed
    assert b.frame == "built-in sleep" and b.calls == 3
    assert (b.late_ns, b.others_ns, b.excess_ns) == (6_000_000, 0, 6_000_000)
    prep = [x for x in le.top_excess if x.frame == "app.py(30): prep"]
    assert prep and (prep[0].late_ns, prep[0].others_ns) == (450_000, 300_000)
    assert all(x.frame != "typing.py(300): inner" for x in le.blamed)
    assert "`built-in sleep`: 6.00 ms own time vs 0 ns on the other ranks (median), +6.00 ms" in aa[1].findings[0].title
    assert aa[1].findings[0].id == "late-rank-1"


def test_same_work_on_both_ranks_blames_nothing():
    """Both ranks sleep: rank 1 arrives last by a few µs of scheduling, nothing differs."""
    s0, s1 = sleeper(0, late_rank=0, sleep_us=500), sleeper(1, late_rank=1, sleep_us=500)
    # both ranks sleep (each is its own "late_rank"); shift rank 1's arrivals by 3 µs
    for e in s1.events:
        if e.get("cat") == "kernel" and e["name"] == AR:
            e["ts"] += 3
            e["dur"] -= 3
    aa = analyze_ranks([model_of(s0), model_of(s1)])
    (le,) = aa[0].cross_rank.late
    assert le.rank == 1 and le.blamed == []


def test_start_up_skew_is_counted_apart_from_steady_state_waits():
    """The profilers start 40 ms apart; both ranks call a barrier right after: rank 0 waits ~40 ms in it. Then
    4 steps in which rank 1 sleeps 2 ms: 8 ms waited, the steady state."""
    s0 = sleeper(0, profiler_at=0.0, barrier=True)
    s1 = sleeper(1, profiler_at=40_000.0, barrier=True)
    aa = analyze_ranks([model_of(s0), model_of(s1)], window="all")
    rm = aa[0].cross_rank
    su = rm.startup
    assert su is not None and su.calls == 1 and su.late_rank == 1 and su.profiler_skew_ns == 40_000_000
    assert su.wait_by_rank == {0: 40_000_000, 1: 0}
    st = rm.stats(0)
    assert st.startup_wait_ns == 40_000_000 and st.wait_ns == 8_000_000
    assert rm.rows[0].late_counts == {1: 4} and rm.late[0].count == 4 and rm.late[0].of == 4  # 5 calls, 1 skewed
    ids = [f.id for f in aa[0].findings]
    assert ids[0] == "collective-wait-0" and ids[-1] == "startup-skew-0"
    assert "8.00 ms" in aa[0].findings[0].title
    md = render_markdown(aa)
    assert "8.00 ms waiting for rank 1 in AllReduce, and 40.00 ms in the first collective (profiler start-up skew)" in md
    assert "profilers started 40.00 ms apart" in md.split("## Ranks")[0]
    doc = build_json(aa)
    assert doc["ranks"]["startup"]["wait_by_rank_us"]["0"] == 40_000.0
    assert {e["rank"]: e["wait_us"] for e in doc["ranks"]["per_rank"]} == {0: 8000.0, 1: 0.0}


def test_a_late_barrier_without_matching_profiler_skew_is_a_straggler():
    """Same barrier, profilers started together: rank 1 reaches the barrier 40 ms late on its own: not skew."""
    s0 = sleeper(0, profiler_at=0.0, barrier=True)
    s1 = sleeper(1, profiler_at=0.0, barrier=True)
    for e in s1.events:
        if e.get("cat") == "kernel" and e["name"] == AR and e["ts"] < 1000:
            e["ts"] += 40_000
            e["dur"] -= 40_000
    aa = analyze_ranks([model_of(s0), model_of(s1)], window="all")
    rm = aa[0].cross_rank
    assert rm.startup is None and rm.stats(0).startup_wait_ns == 0
    assert rm.stats(0).wait_ns == 48_000_000 and rm.late[0].count == 5


@pytest.mark.parametrize("steps", [False, True])
def test_skew_equal_to_the_steady_lateness_is_only_the_first_call(steps):
    """The profilers start 2 ms apart and rank 1 is 2 ms late at every step: each call's arrivals, measured from
    the ranks' own first events, coincide. Only the barrier can be start-up skew (after it the ranks left
    together); inside the capture's measured steps (after its own barrier) none is."""
    s0 = sleeper(0, profiler_at=0.0, barrier=True, steps=steps)
    s1 = sleeper(1, profiler_at=2_000.0, barrier=True, steps=steps)
    aa = analyze_ranks([model_of(s0), model_of(s1)], window="steps" if steps else "all")
    rm = aa[0].cross_rank
    le = rm.late[0]
    assert le.rank == 1 and le.count == 4 and le.of == 4 and rm.stats(0).wait_ns == 8_000_000
    if steps:
        assert rm.startup is None
    else:
        assert rm.startup is not None and rm.startup.calls == 1 and rm.stats(0).startup_wait_ns == 2_000_000


def test_recorded_sleep_is_blamed_and_the_start_up_barrier_counted_apart():
    """tests/data/sleep2ms-gloo (real gloo capture, benchmarks/record_sleep_ranks.py): rank 1 sleeps 2 ms at the
    start of each of 5 steps; its profiler started 1.15 s after rank 0's and a barrier followed. Expected numbers
    from benchmarks/raw_late_rank.py on the raw JSON (no tui code): the first events are 1150121.5 µs apart, rank
    0 reached the barrier 1150095.75 µs before rank 1; after it rank 1 arrived last at 11 of 20 all-reduces and
    rank 0 waited 8593.0 µs (arrival differences; the end times do not line up on this busy host, so the time
    bases are used as they are); the 5 sleeps last 10408.290 µs, 8323.173 µs without the one in the step where
    rank 0 arrived 1332 µs after rank 1 anyway (it is not a call rank 1 was late for)."""
    from gapscope.trace import load

    data = Path(__file__).resolve().parent / "data"
    aa = analyze_ranks([load(str(data / f"sleep2ms-gloo.rank{r}.json.gz"), no_cache=True) for r in (0, 1)])
    rm = aa[0].cross_rank
    assert rm.clock[1].status == "inconsistent" and rm.clock[1].offset_ns == 0
    su = rm.startup
    assert su is not None and su.calls == 1 and su.late_rank == 1
    assert su.profiler_skew_ns == pytest.approx(1_150_121_500, abs=1_000)
    assert su.wait_by_rank[0] == pytest.approx(1_150_095_750, abs=1_000)
    le = rm.late_rank(1)
    assert (le.count, le.of) == (11, 20) and le.waits_caused_ns == pytest.approx(8_593_000, abs=1_000)
    (b,) = le.blamed
    assert b.frame == "built-in sleep" and b.calls == 4 and b.others_ns == 0
    assert b.late_ns == pytest.approx(8_323_173, abs=10)
    # rank 0, last at 9 of 20 by host noise, waited in gloo's work.wait() of the previous call: no frame blamed
    assert rm.late_rank(0).blamed == []
    md = render_markdown(aa)
    head = md.split("## Ranks")[0]
    assert "**rank 1 arrived last 11 times (of 20), the others waited 8.59 ms for it" in head
    assert "`built-in sleep`: 8.32 ms own time vs 0 ns" in head and "typing" not in head
    assert "profilers started 1.15 s apart (rank 1's profiler started last): profiler start-up skew" in head
    assert aa[0].findings[0].id == "collective-wait-0" and aa[1].findings[0].id == "late-rank-1"
