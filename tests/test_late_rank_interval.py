"""Issue 23 item 6: the late rank's comparison interval starts once each rank's previous collective *ended* (the
point every rank leaves together), not at its launch: from the launch, the ranks that waited inside it (for a
profiler that started late, for the late rank) counted that wait as their own time. And the late-rank finding is
ranked by the waits it caused, in the explorer's findings view as in the report."""

from __future__ import annotations

import asyncio

from tests.helpers import SAMPLE_TRACES, model_of
from tests.synth import Synth
from gapscope.analysis import analyze_ranks

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
START_UP = 5000.0  # rank 1's profiler started this much later: its first all-reduce comes that late


def late_profiler_rank(rank: int, n: int = 4) -> Synth:
    """Two ranks on one clock (µs), NCCL, one thread each, no step ranges. Call k: at B_k the step frame
    starts, ``app.py(20): work`` runs [B_k + 10, B_k + 110); rank 1 then runs ``app.py(40): straggle``
    [B_k + 110, B_k + 410). The all-reduce is launched 5 µs before it starts: at B_k + 120 on rank 0, B_k + 420 on
    rank 1 (call 0: rank 1 also START_UP later, its profiler's late start); it ends at rank 1's start + 50 on
    both ranks, and each host waits for it in cudaStreamSynchronize until 2 µs after. B_{k+1} = that end + 10.
    Rank 0 waits 300 µs per steady call; in call 0 it waits 5300 µs."""
    s = Synth(meta={"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}})
    s.annotation("profiler start", START_UP - 1 if rank == 1 else 0, 1)
    b = 0.0
    for k in range(n):
        late_start = b + 420 + (START_UP if k == 0 else 0.0)  # rank 1's arrival
        end = late_start + 50
        mine = late_start if rank == 1 else b + 120
        b0 = START_UP if rank == 1 and k == 0 else b  # rank 1's first step begins when its profiler does
        with s.frame("app.py(10): step", b0, end + 5 - b0):
            s.python("app.py(20): work", b0 + 10, 100)
            if rank == 1:
                s.python("app.py(40): straggle", b0 + 110, 300)
            _, kk = s.launch(ts=mine - 5, dur=3, kernel=AR, k_ts=mine, k_dur=end - mine)
            kk["args"]["Process Group Name"] = "0"
            s.runtime("cudaStreamSynchronize", mine - 1, end + 2 - (mine - 1))
        b = end + 10
    return s


def test_the_comparison_starts_after_the_previous_collective_ended():
    aa = analyze_ranks([model_of(late_profiler_rank(0)), model_of(late_profiler_rank(1))], window="all")
    rm = aa[0].cross_rank
    le = rm.late_rank(1)
    assert le is not None and le.rank == 1
    # calls 1..3 are compared (call 0 has no previous call); each starts when the previous all-reduce ended
    # (E = rank 1's start + 50) and ends at the launch: rank 1 E + 10 + 415 = 425 µs, rank 0 E + 10 + 115 = 125 µs.
    # From the previous launch instead, rank 0's first interval held its 5300 µs wait in call 0: 5480 + 480 + 480
    # against rank 1's 480 x 3 ("its thread took 1.44 ms against the others' 6.44 ms")
    assert le.compared == 3
    assert (le.interval_ns, le.others_interval_ns) == (3 * 425_000, 3 * 125_000)
    (b,) = le.blamed
    assert (b.frame, b.late_ns, b.others_ns, b.excess_ns, b.calls) == ("app.py(40): straggle", 900_000, 0, 900_000, 3)
    # the wait sat in cudaStreamSynchronize on rank 0: nothing of it is in rank 0's intervals any more
    assert all(x.frame != "cudaStreamSynchronize" for x in le.top_excess)


def test_late_rank_finding_leads_the_explorer_findings_view_by_the_waits_it_caused():
    """traces/demo-eager-tp-late1: rank 1's finding explains 0 ns of idle but the others waited 222.10 ms for it:
    first in the findings view (the largest idle finding, rank 1's python-1, is 170.59 ms)."""
    from gapscope.tui.app import GapscopeApp
    from gapscope.tui.tables import findings_of

    paths = [str(SAMPLE_TRACES / f"demo-eager-tp-late1.decode.rank{r}.json.gz") for r in (0, 1)]

    async def go():
        app = GapscopeApp(paths, load_opts={"no_cache": True})
        async with app.run_test(size=(160, 48)) as pilot:
            for _ in range(3):
                await app.workers.wait_for_complete()
                await pilot.pause()
            await pilot.press("3")
            await pilot.pause()
            return [f.id for _, _, f in findings_of(app.scene)]

    ids = asyncio.run(go())
    assert ids[0] == "late-rank-1" and ids[1] == "collective-wait-0"


def test_audit_recomputes_the_comparison_interval_from_the_raw_events(tmp_path):
    """benchmarks/audit.py --ranks: the report of the two synthetic ranks agrees with the raw events; a report
    whose intervals start at the previous launch (the rule before issue 23) is caught."""
    import copy
    import importlib.util
    import json
    import subprocess
    import sys

    from tests.helpers import ROOT

    spec = importlib.util.spec_from_file_location("gapscope_audit_ranks", ROOT / "benchmarks" / "audit.py")
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    paths = [late_profiler_rank(r).write(tmp_path / f"job.rank{r}.json") for r in (0, 1)]
    rep = json.loads(subprocess.run([sys.executable, "-m", "gapscope", "report", "--json", "--whole-trace",
                                     *map(str, paths)], cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    docs = [(json.loads(p.read_text()), None) for p in paths]
    docs = [(d, audit.Trace(d)) for d, _ in docs]
    A = audit.audit_ranks(docs, rep, "job")
    assert A.mismatches == [] and A.checked >= 7
    late = next(e for e in rep["ranks"]["late"] if e["rank"] == 1)
    assert (late["compared"], late["interval_us"], late["others_interval_us"]) == (3, 1275.0, 375.0)
    bad = copy.deepcopy(rep)
    e = next(e for e in bad["ranks"]["late"] if e["rank"] == 1)
    e["interval_us"], e["others_interval_us"] = 1440.0, 6440.0  # from the previous launch
    lines = audit.audit_ranks(docs, bad, "job").mismatches
    assert any("interval_us" in ln and "events say 1275.000 µs" in ln for ln in lines)
    assert any("others_interval_us" in ln and "events say 375.000 µs" in ln for ln in lines)
