"""The replay model (gapscope/analysis/replay/__init__.py): exact what-if answers on hand-built traces, and the replay of
every sample trace reproducing its recorded window."""

from __future__ import annotations

import numpy as np
import pytest

from tests.synth import Synth
from tests.helpers import SAMPLE_TRACES, SHARED_TRACES, US, model_of, replayed
from gapscope.analysis import analyze
from gapscope.analysis.replay import project
from gapscope.analysis.replay.fixes import calls_under, python_own
from gapscope.analysis.replay.model import Replay



def _loop(kernel_us: float, extra_at: int | None = None, n: int = 4, prep: str = "python"):
    """A step of ``n`` iterations: 100 µs of Python (``user.py(10): prep``), a 2 µs launch, the kernel 5 µs
    after the launch call starts or when its stream frees up; iteration ``extra_at`` also runs 1 ms of
    ``user.py(20): bookkeeping`` before its launch. ``prep="op"``: the 100 µs are an aten op's dispatch, the launch inside it."""
    s = Synth()
    t = 10.0
    end = 0.0
    for i in range(n):
        if prep == "op":
            s.cpu_op("aten::mm", t, 102)  # dispatch, then the launch inside it
        else:
            s.python("user.py(10): prep", t, 100)
        t += 100
        if i == extra_at:
            s.python("user.py(20): bookkeeping", t, 1000)
            t += 1000
        k = max(t + 5, end)
        s.launch("cudaLaunchKernel", t, 2, kernel=f"k{i}", k_ts=k, k_dur=kernel_us)
        end = k + kernel_us
        t += 2
    s.annotation("gapscope.step#0", 0, max(t, end) + 1)
    return s, end


def _span(r: Replay, removed=None) -> int:
    return r.span(r.run(removed))[0]


def test_cpu_bound_removing_1ms_of_python_saves_1ms():
    s, end = _loop(10, extra_at=1)
    a, r = replayed(model_of(s))
    assert _span(r) == end * US  # unchanged: the recorded window, to the ns
    iv = python_own(r, "user.py(20): bookkeeping")
    assert _span(r) - _span(r, r.removal(*iv)) == 1000 * US


def test_gpu_bound_removing_python_saves_nothing():
    s, end = _loop(3000, extra_at=1)
    a, r = replayed(model_of(s))
    assert _span(r) == end * US
    iv = python_own(r, "user.py(20): bookkeeping")
    assert int((iv[1] - iv[0]).sum()) == 1000 * US  # the frame's own time is there to remove...
    assert _span(r) - _span(r, r.removal(*iv)) == 0  # ...and the GPU chain does not get shorter


def _pipelined_with_sync(extra_us: float = 0):
    """Host 102 µs per iteration, kernels 300 µs: the GPU runs ahead-queued. After iteration 2 a
    ``cudaStreamSynchronize`` (inside ``user.py(30): check``) drains the queue; it returns 3 µs after the
    kernel ends, and the next kernel comes 100 + 5 µs later: a 108 µs bubble (drain and refill)."""
    s = Synth()
    t, end = 10.0, 0.0
    for i in range(6):
        s.python("user.py(10): prep", t, 100)
        t += 100
        if i == 1 and extra_us:
            s.python("user.py(20): bookkeeping", t, extra_us)
            t += extra_us
        k = max(t + 5, end)
        s.launch("cudaLaunchKernel", t, 2, kernel=f"k{i}", k_ts=k, k_dur=300)
        end = k + 300
        t += 2
        if i == 2:
            ret = end + 3
            s.python("user.py(30): check", t, ret - t)
            s.runtime("cudaStreamSynchronize", t, ret - t)
            t = ret
    s.annotation("gapscope.step#0", 0, end + 1)
    return s


def test_sync_in_a_pipelined_loop_saves_its_drain_and_refill():
    a, r = replayed(model_of(_pipelined_with_sync()))
    # recorded: k0 115..415, k1 ..715, k2 ..1015, sync returns 1018, k3 1123..1423, k4 ..1723, k5 ..2023
    assert _span(r) == 2023 * US
    idx = calls_under(r, a.flags["sync_rt"], "user.py(30): check")
    assert a.model.name(int(idx[0])) == "cudaStreamSynchronize" and idx.size == 1
    rem = r.removal(a.model.ts_ns[idx], a.model.ts_ns[idx] + a.model.dur_ns[idx], a.model.track[idx])
    # without it k3 queues behind k2 (1015..1315) and the chain ends at 1915: the 108 µs bubble is saved
    assert _span(r) - _span(r, rem) == 108 * US


def test_host_work_before_a_sync_in_a_gpu_bound_loop_saves_nothing():
    # 50 µs more Python in iteration 1: the GPU is still the bottleneck up to the sync, which waits for k2
    # (ends 1015) either way; a replay that kept the sync's recorded length would move k3 50 µs earlier
    a, r = replayed(model_of(_pipelined_with_sync(extra_us=50)))
    assert _span(r) == 2023 * US
    iv = python_own(r, "user.py(20): bookkeeping")
    assert int((iv[1] - iv[0]).sum()) == 50 * US
    assert _span(r) - _span(r, r.removal(*iv)) == 0


def test_sync_finding_projects_its_bubble():
    a = analyze(model_of(_pipelined_with_sync()))
    p = project(a)
    assert not p.calibrated and p.steps == 1
    sync = [f for f in a.findings if f.cause == "sync"]
    assert sync, [f.title for f in a.findings]
    assert p.saving_ns[sync[0].id] == 108 * US
    assert p.devices[0].residual_pct == 0.0


def test_an_unprofiled_time_longer_than_the_recording_is_not_a_calibration():
    """hf-llama.decode: the capture's un-profiled median (213.5 ms for the 4 steps, 15 of 24 runs on a loaded
    node) is 4.3x the profiled recording (49.7 ms). No per-event overhead makes the replay longer, so nothing was
    calibrated: the projection stays in profiled time and says why, not "un-profiled, calibrated"."""
    from gapscope.report.markdown import render_markdown

    s = _pipelined_with_sync()
    s.top["gapscope"] = {"profiled_us": 2023.0, "unprofiled_us": 4 * 2023.0,
                         "unprofiled_samples_us": [1900.0, 8092.0, 8500.0]}
    a = analyze(model_of(s))
    p = a.projection
    assert not p.calibrated
    assert p.devices[0].baseline_ns == 2023 * US
    assert any("longer than the profiled step" in n for n in p.notes), p.notes
    md = render_markdown([a])
    assert "un-profiled, calibrated" not in md and "step 2.02 ms profiled" in md
    # within a few per cent (timing noise on a GPU-bound step) it is the un-profiled time, calibrated with c = 0
    s.top["gapscope"] = {"profiled_us": 2023.0, "unprofiled_us": 2050.0}
    assert analyze(model_of(s)).projection.calibrated


def test_markdown_says_the_fix_and_ranks_findings_by_saving():
    import re

    from gapscope.report.markdown import render_markdown
    from gapscope.trace import load

    md = render_markdown([analyze(model_of(_pipelined_with_sync()))])
    assert "its own fix → −108.0 µs per step (−5.3%), profiled time: remove the 1 synchronising call in" in md
    assert "- Projection: step 2.02 ms profiled; GPU floor 1.80 ms" in md  # 2023 µs; six 300 µs kernels
    md = render_markdown([analyze(load(str(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"), no_cache=True))], 10,
                         minor=True)
    plan = md[md.index("## Plan"):md.index("## Findings")]
    # the plan's actions by what each buys alone (the step as one CUDA graph, 2.87 ms, first), each number once
    items = re.findall(r"^(\d+)\. \*\*−([0-9.]+)%\*\*", plan, re.M)
    assert [int(k) for k, _ in items] == list(range(1, len(items) + 1)) and len(items) >= 6
    pcts = [float(p) for _, p in items]
    assert pcts == sorted(pcts, reverse=True) and pcts[0] == 77.9
    first = plan.split("\n2. ", 1)[0]
    assert "Capture the step as a CUDA graph" in first
    # the .item() check it needs removed first is written inside it, with its own figure, never first on its own
    assert re.search(r"first: remove the host reads of GPU values \(32 syncs\) in "
                     r"`capture/demo.py\(51\): _inject_sync_check` \(−5.0% alone, action \d+\)", first)
    assert "un-profiled" in plan.split("\n", 1)[0]


def test_launch_finding_is_the_graph_replay():
    s, end = _loop(10, n=6, prep="op")
    a = analyze(model_of(s))
    p = project(a)
    launch = [f for f in a.findings if f.cause == "launch" and p.saving_ns.get(f.id) is not None]
    assert launch
    # six 10 µs kernels, each after the default graph dispatch gap (no graph in this trace)
    graph = 6 * 10 * US + 6 * p.graph_gap_ns
    assert not p.graph_gap_observed and p.graph_gap_ns == 417
    assert p.saving_ns[launch[0].id] == end * US - graph


def test_graph_replay_fix_of_a_step_that_syncs_says_the_syncs_go_first():
    """hf-llama.generate: "−55.59 ms per step: the step as one CUDA graph replay" beside the advice that the step's
    host syncs (18 aten::is_nonzero, ...) keep a CUDA graph from capturing it. The projection assumes them moved onto
    the GPU first, and says so."""
    s, end = _loop(10, n=6, prep="op")
    s.runtime("cudaStreamSynchronize", 3, 2)  # inside the step range, before the loop
    a = analyze(model_of(s))
    assert a.syncs
    p = project(a)
    f = next(f for f in a.findings if f.cause == "launch" and p.saving_ns.get(f.id) is not None)
    assert p.what[f.id] == ("the step as one CUDA graph replay, once its 1 synchronising call (`cudaStreamSynchronize`) "
                            "is off the host: a CUDA graph cannot capture it")
    s, end = _loop(10, n=6, prep="op")
    a = analyze(model_of(s))
    p = project(a)
    f = next(f for f in a.findings if f.cause == "launch" and p.saving_ns.get(f.id) is not None)
    assert p.what[f.id] == "the step as one CUDA graph replay"


def _pageable_copy_step():
    """100 µs of Python, a 100 MB pageable host-to-device copy whose ``cudaMemcpyAsync`` blocks until the copy
    ends (10 ms on the GPU, the call returns 3 µs later), then one 10 µs kernel."""
    s = Synth()
    s.python("user.py(10): prep", 10, 100)
    with s.frame("user.py(40): upload", 110, 10008):
        rt = s.runtime("cudaMemcpyAsync", 110, 10008)
        s.memcpy("HtoD", 115, 10000, nbytes=100_000_000, corr=rt["args"]["correlation"])
    s.launch("cudaLaunchKernel", 10118, 2, kernel="k", k_ts=10123, k_dur=10)
    s.annotation("gapscope.step#0", 0, 10134)
    return s


def test_pageable_copy_fix_unblocks_the_host_and_copies_at_pinned_speed():
    a = analyze(model_of(_pageable_copy_step()))
    p = project(a)
    assert p.devices[0].recorded_ns == 10133 * US
    f = next(f for f in a.findings if f.cause == "copy")
    # pinned at the default 25 GB/s: 100 MB in 4000 µs (was 10000); the call no longer waits, so the kernel
    # queues right behind the copy: 115 + 4000 .. 4125 instead of 10123 .. 10133
    assert p.saving_ns[f.id] == (10133 - 4125) * US


def test_device_to_device_copy_is_not_projected_as_a_pinned_copy():
    s = Synth()
    s.python("user.py(10): prep", 10, 100)
    with s.frame("user.py(40): shuffle", 110, 10008):
        rt = s.runtime("cudaMemcpyAsync", 110, 10008)
        s.memcpy("DtoD", 115, 10000, nbytes=100_000_000, corr=rt["args"]["correlation"], src="Device")
    s.launch("cudaLaunchKernel", 10118, 2, kernel="k", k_ts=10123, k_dur=10)
    s.annotation("gapscope.step#0", 0, 10134)
    a = analyze(model_of(s))
    p = project(a)
    copies = [f for f in a.findings if f.cause == "copy"]
    assert copies and all(p.saving_ns[f.id] is None for f in copies)


def _samples():
    return sorted(SAMPLE_TRACES.glob("*.json.gz"))


@pytest.mark.parametrize("path", _samples(), ids=lambda p: p.name)
def test_replay_reproduces_every_sample_within_2pct(path):
    from gapscope.trace import load

    a = analyze(load(str(path), no_cache=True))
    p = project(a)
    assert p.devices
    for d in p.devices:
        assert d.residual_pct <= 2.0, (path.name, d)
        assert d.floor_ns <= d.recorded_ns


def test_calibrated_sample_says_so_and_ranks_the_injected_frame():
    from gapscope.trace import load

    a = analyze(load(str(SAMPLE_TRACES / "demo-eager-python.decode.json.gz"), no_cache=True))
    p = a.projection
    assert p.calibrated and p.steps == 4
    # calibrated to the capture's un-profiled time for the 4 steps (its metadata's median)
    target = a.model.gapscope_meta["unprofiled_us"] * 1e3
    assert abs(p.devices[0].baseline_ns - target) <= 0.005 * target
    f = next(f for f in a.findings if f.evidence.get("frame") == "capture/demo.py(101): _host_bookkeeping")
    own = python_own(Replay(a.model, a.window, a.flags), "capture/demo.py(101): _host_bookkeeping")
    removed_per_step = int((own[1] - own[0]).sum()) / 4
    # host-bound: the saving is most of the frame's own time, never more
    assert 0.5 * removed_per_step < p.saving_ns[f.id] <= removed_per_step
    assert "step" in p.headline() and "un-profiled" in p.headline()


def test_report_json_carries_savings():
    from gapscope.report.jsonout import build_json
    from gapscope.trace import load

    a = analyze(load(str(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"), no_cache=True))
    doc = build_json([a])
    pj = doc["devices"][0]["projection"]
    assert pj["calibrated"] is True and pj["steps"] == 4 and pj["floor_us"] < pj["baseline_us"]
    sync = next(f for f in doc["findings"] if f["cause"] == "sync")
    assert sync["saving_us"] > 0 and sync["fix"].startswith("remove the 32 synchronising calls")
    # the check's abs/amax and their kernels too: more than the reads alone
    assert sync["saving_whole_check_us"] > sync["saving_us"] and "with the 64 ops computing" in sync["fix"]
    assert all(f["saving_whole_check_us"] is None for f in doc["findings"] if f["cause"] != "sync")
    assert all("saving_us" in f for f in doc["findings"])
    assert np.isclose(pj["baseline_us"], a.model.gapscope_meta["unprofiled_us"] / 4, rtol=0.01)


def test_explorer_finding_info_shows_the_saving(tmp_path):
    from tests.helpers.app import finding_info

    p = _pipelined_with_sync().write(tmp_path / "sync.json")
    # view 3 is the plan: the row of the action that fixes the sync finding
    txt = finding_info(p, lambda sc: next(x.rank - 1 for x in sc.analysis.plan.actions
                                          if any(f.startswith("sync-") for f in x.findings)), size=(140, 40))
    assert "−108.0 µs per step" in txt and "profiled time" in txt, txt


def test_two_rank_sample_says_how_collectives_are_treated():
    from gapscope.trace import load

    a = analyze(load(str(SAMPLE_TRACES / "demo-eager-tp.decode.rank0.json.gz"), no_cache=True))
    p = a.projection
    assert any("replayed alone" in n and "collective" in n for n in p.notes)
    assert all(p.saving_ns[f.id] is None for f in a.findings if f.cause == "collective")


def _shared():
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p for p in SHARED_TRACES.glob("*/*") if p.name.endswith((".json", ".json.gz")))


@pytest.mark.skipif(not _shared(), reason="shared traces absent")
def test_shared_traces_replay_within_2pct_and_project_without_error():
    from gapscope.errors import GapscopeError
    from gapscope.trace import load

    seen = 0
    for path in _shared():
        try:
            a = analyze(load(str(path), no_cache=True))
        except GapscopeError:
            continue
        p = project(a)
        for d in p.devices:
            seen += 1
            assert d.residual_pct <= 2.0, (path.name, d)
        assert all(v is None or v >= 0 for v in p.saving_ns.values()), path.name
        for f in a.findings:  # every finding is either projected or says why not
            assert f.id in p.saving_ns or not p.devices, (path.name, f.id)
    assert seen >= 10


def _pipelined_with_check(after_read: bool = False):
    """``_pipelined_with_sync`` with the sync inside a check, ``user.py(40): check``: ``aten::amax`` (20 µs, launching
    a 50 µs kernel) and then ``aten::item`` waiting for it (the cudaStreamSynchronize inside returns 3 µs after the
    kernel ends). ``after_read``: the check also launches a 30 µs kernel (``aten::clamp``) after the read."""
    s = Synth()
    t, end = 10.0, 0.0
    for i in range(6):
        s.python("user.py(10): prep", t, 100)
        t += 100
        k = max(t + 5, end)
        s.launch("cudaLaunchKernel", t, 2, kernel=f"k{i}", k_ts=k, k_dur=300)
        end = k + 300
        t += 2
        if i == 2:
            t0 = t
            ka = max(t + 10, end)  # amax's kernel queues behind k2
            end = ka + 50
            ret = end + 3
            tail = 20 if after_read else 0
            with s.frame("user.py(40): check", t0, ret + tail - t0):
                s.cpu_op("aten::amax", t0, 20)
                s.launch("cudaLaunchKernel", t0 + 5, 2, kernel="amax", k_ts=ka, k_dur=50)
                s.cpu_op("aten::item", t0 + 20, ret - t0 - 20)
                s.runtime("cudaStreamSynchronize", t0 + 25, ret - t0 - 25)
                if after_read:
                    s.cpu_op("aten::clamp", ret, 20)
                    kc = ret + 5
                    s.launch("cudaLaunchKernel", ret + 2, 2, kernel="clamp", k_ts=kc, k_dur=30)
                    end = kc + 30
            t = ret + tail
    s.annotation("gapscope.step#0", 0, end + 1)
    return s, end


def test_dropped_items_take_no_time_and_hold_up_nothing():
    s, end = _pipelined_with_check()
    a, r = replayed(model_of(s))
    assert _span(r) == end * US == 2073 * US
    amax = np.array([a.model.name(int(i)) == "amax" for i in r.items])
    # the GPU-bound chain loses the 50 µs kernel; the sync still waits for what is left (k2), so its bubble stays
    assert _span(r) - r.span(r.run(drop=amax))[0] == 50 * US


def test_sync_in_a_check_projects_the_read_and_the_whole_check():
    s, end = _pipelined_with_check()
    a = analyze(model_of(s))
    p = project(a)
    f = next(f for f in a.findings if f.cause == "sync")
    assert (f.evidence or {}).get("frame") == "user.py(40): check"
    # the read alone: k3 queues behind amax's kernel (ends 1065) instead of 1068 + 100 + 5: the 108 µs bubble
    assert p.saving_ns[f.id] == 108 * US
    # the whole check (its amax and the kernel it launched, too): k3 queues behind k2 (1015): 108 + 50 µs
    assert p.with_ops_ns[f.id] == 158 * US
    assert p.what[f.id] == ("remove the 1 synchronising call in `user.py(40): check`; with the 1 op computing the "
                            "values read, if nothing else uses them: −158.0 µs per step")


def test_no_whole_check_when_work_follows_the_read_or_the_sync_reads_nothing():
    s, _ = _pipelined_with_check(after_read=True)
    a = analyze(model_of(s))
    p = project(a)
    f = next(f for f in a.findings if f.cause == "sync")
    assert p.saving_ns[f.id] > 0 and f.id not in p.with_ops_ns and "with the" not in p.what[f.id]
    # a bare cudaStreamSynchronize in the frame (no scalar read): the sync alone
    a = analyze(model_of(_pipelined_with_sync()))
    p = project(a)
    f = next(f for f in a.findings if f.cause == "sync")
    assert f.id not in p.with_ops_ns and p.what[f.id].startswith("remove the 1 synchronising call")


# ------------------------------------------------------------------ the allocator's after-effect (issue #14)
def _alloc_rounds(slow_us: float = 10.0, rounds: int = 6):
    """``rounds`` rounds of: a ``cudaMalloc`` (50 µs), then 8 iterations 40 µs apart, each an ``aten::add`` of 20 µs
    holding a 2 µs launch of a 1 µs kernel. The first 3 iterations after the call take ``slow_us`` longer (the cold
    host); iterations 0-4 start within 200 µs of the call's end, 5-7 after. Host-bound: every host µs is step time."""
    s = Synth()
    t = 10.0
    for _ in range(rounds):
        s.runtime("cudaMalloc", t, 50)
        t += 50
        for i in range(8):
            d = 20 + (slow_us if i < 3 else 0)
            s.cpu_op("aten::add", t + 40 * i, d)
            s.launch("cudaLaunchKernel", t + 40 * i + 1, 2, kernel="add", k_ts=t + 40 * i + 8, k_dur=1)
        t += 8 * 40
    s.annotation("gapscope.step#0", 0, t + 20)
    return s


def test_after_effect_is_the_excess_over_the_same_names_away_from_the_calls():
    from gapscope.analysis.replay.fixes import COLD_NS, after_effect

    a, r = replayed(model_of(_alloc_rounds()))
    m = a.model
    calls = np.flatnonzero(np.array([n == "cudaMalloc" for n in m.names])[m.name_id])
    assert calls.size == 6
    (s_, e_, t_), total = after_effect(a, r, calls)
    # aten::add's own time is 18 µs away from the calls and 28 µs in the 3 slow iterations after each: 6 x 3 x 10 µs;
    # the launch calls (2 µs everywhere) add nothing, the 2 normal iterations inside the 200 µs add nothing
    assert total == 180 * US
    assert int((e_ - s_).sum()) == total
    ce = np.sort(m.ts_ns[calls] + m.dur_ns[calls])
    k = np.searchsorted(ce, s_, side="right") - 1
    assert (k >= 0).all() and (e_ - ce[k] <= COLD_NS).all()  # only after a call, within COLD_NS
    # removed with the calls, the host-bound step gets shorter by both: 6 x 50 µs + 180 µs
    base = _span(r)
    both = r.removal(np.r_[m.ts_ns[calls], s_], np.r_[m.ts_ns[calls] + m.dur_ns[calls], e_],
                     np.r_[m.track[calls].astype(np.int64), t_])
    assert base - _span(r, both) == (300 + 180) * US


def test_no_after_effect_when_the_host_is_as_fast_after_the_calls():
    from gapscope.analysis.replay.fixes import after_effect

    a, r = replayed(model_of(_alloc_rounds(slow_us=0)))
    m = a.model
    calls = np.flatnonzero(np.array([n == "cudaMalloc" for n in m.names])[m.name_id])
    assert after_effect(a, r, calls) is None


def _copy(s: Synth, direction: str, ts: float, dur: float, c_ts: float, c_dur: float, src: str, dst: str):
    """A cudaMemcpyAsync call at ``ts`` and the copy it launched at ``c_ts``, linked by correlation and flow."""
    rt = s.runtime("cudaMemcpyAsync", ts, dur)
    c = rt["args"]["correlation"]
    s.memcpy(direction, c_ts, c_dur, nbytes=1024, corr=c, src=src, dst=dst)
    s.events.append({"ph": "s", "id": c, "pid": s.pid, "tid": s.tid, "ts": ts, "cat": "ac2g", "name": "ac2g"})
    s.events.append({"ph": "f", "id": c, "pid": 0, "tid": 7, "ts": c_ts, "cat": "ac2g", "name": "ac2g", "bp": "e"})


def _experts_step():
    """One step (µs): ``prep`` [10, 110] launches k0 (115..165); then ``user.py(40): experts`` [112, 262] holds a
    cudaStreamSynchronize [115, 168] (k0's end + 3), a built-in [168, 208], ``aten::mm`` [208, 212] launching k1
    (214..234), ``user.py(50): helper`` [212, 256], ``aten::mm`` [256, 260] launching k2 (262..282); ``prep`` again
    [262, 362] launches k3 (367..417). Every launch latency 5 µs, nothing queued."""
    s = Synth()
    s.python("user.py(10): prep", 10, 100)
    s.launch("cudaLaunchKernel", 110, 2, kernel="k0", k_ts=115, k_dur=50)
    with s.frame("user.py(40): experts", 112, 150):
        s.runtime("cudaStreamSynchronize", 115, 53)
        s.python("<built-in method tolist of Tensor object at 0x7f>", 168, 40)
        s.cpu_op("aten::mm", 208, 4)
        s.launch("cudaLaunchKernel", 209, 2, kernel="k1", k_ts=214, k_dur=20)
        s.python("user.py(50): helper", 212, 44)
        s.cpu_op("aten::mm", 256, 4)
        s.launch("cudaLaunchKernel", 257, 2, kernel="k2", k_ts=262, k_dur=20)
    s.python("user.py(10): prep", 262, 100)
    s.launch("cudaLaunchKernel", 362, 2, kernel="k3", k_ts=367, k_dur=50)
    s.annotation("gapscope.step#0", 0, 418)
    return s


def test_a_frame_as_one_fused_gpu_call_removes_its_whole_subtree():
    """Issue #25 item 1: the frame's whole host subtree (the sync and the run-ahead it lost, the built-in, the nested
    frame, the ops) goes, one op's dispatch (the median outermost launching op: 4 µs) takes its place, and its two
    kernels run back to back as graph nodes. Replayed: k0 115..165 as recorded; the frame's launches collapse to 112
    + 4 = 116, so k1 waits for the stream: 165 + 0.417 (the default graph gap) .. 185.417, k2 185.834..205.834; the
    second prep runs 116..216 and k3 starts 216 + 5 = 221 .. 271. The step: 417 -> 271 µs, 146 µs saved."""
    from gapscope.analysis.replay.frames import dispatch_ns, frame_whatif

    a, r = replayed(model_of(_experts_step()))
    p = project(a)
    assert _span(r) == 417 * US and not p.calibrated
    assert dispatch_ns(r) == 4 * US and p.graph_gap_ns == 417
    w = frame_whatif(a, r, "user.py(40): experts", 0.0, 417 * US)
    assert (w.calls, w.host_ns, w.gpu_ns, w.gpu_items, w.saving_ns) == (1, 150 * US, 40 * US, 2, 146 * US)
    # the frames that matter (5-80% of the step), by saving: prep (200 µs; it launches nothing, so no dispatch takes
    # its place: 185 µs saved, k3 then queues 15 µs behind k2), the experts, the nested helper (44 µs, launches
    # nothing either: all of it)
    assert [(x.frame, x.saving_ns) for x in p.frames] == [("user.py(10): prep", 185 * US),
                                                          ("user.py(40): experts", 146 * US),
                                                          ("user.py(50): helper", 44 * US)]
    assert p.frames[1] == w
    # the sync finding of the frame carries the figure, and ranks by it
    sync = [f for f in a.findings if f.cause == "sync"][0]
    assert p.frame_of[sync.id] == "user.py(40): experts"
    assert p.best_ns(sync.id) == 146 * US > p.saving_ns[sync.id]
    assert p.fused_text() == "as one fused GPU call, `user.py(10): prep` would save 185.0 µs per step (44.4%)"


def _round_trip_step():
    """One step (µs): prep [10, 110] launches k0 (115..215); ``user.py(60): pick`` [112, 382]: ``aten::to``
    [112, 222] (the read: its cudaMemcpyAsync [113, 116] launches the copy to the host, queued after k0: 215..218,
    and a cudaStreamSynchronize [116, 221]), numpy on the result (a built-in [222, 322], a numpy frame
    [322, 372]), ``aten::to`` [372, 380] whose cudaMemcpyAsync [373, 376] sends the answer back (378..380); prep
    [382, 482] launches k1 (489..589)."""
    s = Synth()
    s.python("user.py(10): prep", 10, 100)
    s.launch("cudaLaunchKernel", 110, 2, kernel="k0", k_ts=115, k_dur=100)
    with s.frame("user.py(60): pick", 112, 270):
        s.cpu_op("aten::to", 112, 110)
        _copy(s, "DtoH", 113, 3, 215, 3, "Device", "Pageable")
        s.runtime("cudaStreamSynchronize", 116, 105)
        s.python("<built-in method argsort of numpy.ndarray object at 0x7f>", 222, 100)
        s.python("numpy/_core/fromnumeric.py(2700): cumsum", 322, 50)
        s.cpu_op("aten::to", 372, 8)
        _copy(s, "HtoD", 373, 3, 378, 2, "Pageable", "Device")
    s.python("user.py(10): prep", 382, 100)
    s.launch("cudaLaunchKernel", 482, 2, kernel="k1", k_ts=489, k_dur=100)
    s.annotation("gapscope.step#0", 0, 590)
    return s


def test_a_host_round_trip_is_removed_whole():
    """Issue #25 item 2: the round trip goes whole: host time from the read's op (112) to the end of the copy back's
    launch call (376): the wait, the numpy work, both calls; and the two copies. Replayed: k0 115..215; the host
    resumes at 112: the rest of the frame (376..382, after the copy back's call) runs 112..118, the second prep
    118..218, k1 at 218 + 7 (its own latency) = 225 .. 325. The step: 589 -> 325 µs."""
    from gapscope.analysis.replay.frames import round_trips

    a = analyze(model_of(_round_trip_step()))
    p = project(a)
    rt = [f for f in a.findings if (f.evidence or {}).get("pattern") == "round-trip"]
    assert len(rt) == 1 and rt[0].evidence["frame"] == "user.py(60): pick"
    r = Replay(a.model, a.window, a.flags)
    assert _span(r) == 589 * US
    (s_, e_, _), drop, n = round_trips(a, r, rt[0])
    assert n == 1 and (s_.tolist(), e_.tolist()) == ([112 * US], [376 * US])
    assert sorted(a.model.name(int(i)).split(" (")[0] for i in r.items[drop]) == ["Memcpy DtoH", "Memcpy HtoD"]
    assert p.saving_ns[rt[0].id] == (589 - 325) * US
    assert "keep the round trip in `user.py(60): pick` on the GPU" in p.what[rt[0].id]
    # the frame as one fused call also goes beyond: the rest of the frame too, the copies kept (back to back after
    # k0: 215.417..218.417, 218.834..220.834), k1 after them: 220.834..320.834
    assert p.frame_of[rt[0].id] == "user.py(60): pick" and p.best_ns(rt[0].id) == 589 * US - 320_834


def test_frame_whatifs_in_json_markdown_and_the_explorer(tmp_path):
    """The functions table and a finding's fused figure say the same in the JSON (schema-valid), the Markdown and the
    explorer's finding detail."""
    import json

    import jsonschema

    from gapscope.report.jsonout import build_json
    from gapscope.report.markdown import render_markdown
    from tests.helpers import SCHEMA_PATH
    from tests.helpers.app import finding_info

    a = analyze(model_of(_experts_step()))
    doc = build_json([a])
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(doc, schema)
    rows = {w["frame"]: w for w in doc["frame_whatifs"]}
    ex = rows["user.py(40): experts"]
    assert (ex["calls"], ex["host_us"], ex["gpu_us"], ex["gpu_items"], ex["saving_us"]) == (1, 150.0, 40.0, 2, 146.0)
    assert ex["saving_pct"] == 35.01 and ex["findings"] == ["sync-1"]
    sync = next(f for f in doc["findings"] if f["id"] == "sync-1")
    assert sync["frame_whatif"] == {"frame": "user.py(40): experts", "saving_us": 146.0, "saving_pct": 35.01,
                                    "ranked_with": "sync-1"}
    assert all(f["frame_whatif"] is None for f in doc["findings"] if f["id"] not in sum(
        (w["findings"] for w in doc["frame_whatifs"]), []))
    md = render_markdown([a])
    assert "host out of the way (profiled time: host-side savings may be overstated); as one fused GPU call, " \
        "`user.py(10): prep` would save 185.0 µs per step (44.4%)." in md
    assert "| `user.py(40): experts` | 1 | 150.0 µs | 40.0 µs | −146.0 µs (−35.0%) | sync-1 |" in md
    assert "its function fused → −146.0 µs per step (−35.0%) with `user.py(40): experts` as one fused" in md
    p = _experts_step().write(tmp_path / "experts.json")
    # the explorer's view 3 is the plan: the sync finding's action is its frame fused whole, at the same figure
    txt = finding_info(p, lambda sc: next(x.rank - 1 for x in sc.analysis.plan.actions if "sync-1" in x.findings))
    assert "Fuse user.py(40): experts into one GPU call" in txt and "−35.0% alone, −146.0 µs per step" in txt, txt
    assert "sync-1: 1 gap after a sync from user.py(40): experts" in txt, txt


def test_the_plans_top_action_is_the_figure_the_finding_ranks_by():
    """The round trip's finding is fixed by its frame fused whole (268.2 µs: the whole of `pick`, its copies kept)
    over its own fix (264.0 µs): the plan's first action carries that figure and names the frame, which the
    explorer's header shows as the report does."""
    a = analyze(model_of(_round_trip_step()))
    top = a.plan.actions[0]
    assert round(top.saving_ns / 1e3, 1) == 268.2 and round(top.saving_pct, 1) == 45.5 and not a.plan.calibrated
    assert top.where is not None and top.where.frame == "user.py(60): pick"


def _loop_with_event_wait(wait_us: float, n: int = 6, at: int = 3):
    """``_loop(10, n=n, prep="op")`` where iteration ``at`` first makes its stream wait on an event
    (``cudaStreamWaitEvent``, recorded by something the trace does not show) and its kernel starts ``wait_us`` after
    the usual 5 µs launch latency: a gpu-wait gap no host change shortens."""
    s = Synth()
    t, end = 10.0, 0.0
    for i in range(n):
        s.cpu_op("aten::mm", t, 102)
        t += 100
        if i == at:
            s.runtime("cudaStreamWaitEvent", t - 10, 3)
        k = max(t + 5 + (wait_us if i == at else 0), end)
        s.launch("cudaLaunchKernel", t, 2, kernel=f"k{i}", k_ts=k, k_dur=10)
        end = k + 10
        t += 2
    s.annotation("gapscope.step#0", 0, max(t, end) + 1)
    return s, end


def test_graph_replay_keeps_an_external_event_wait():
    """tracelens' sglang decode (MI300X): the step's idle is one 463 ms gap where a kernel sat queued behind a
    ``hipStreamWaitEvent`` on an event the trace does not show recorded, and the launch finding's graph fix projected
    −97.9% of the step. A CUDA graph replays the same wait. Here six 10 µs kernels, the fourth 2 ms behind an event
    wait: as one graph the step is the kernels back to back, one graph gap before each, and the 2 ms wait (less the
    one graph gap it already covers), 60 µs + 5 x 417 ns + 2 ms; the fix text says what stays."""
    W = 2000
    s, end = _loop_with_event_wait(W)
    a = analyze(model_of(s))
    from gapscope.analysis.causes import code

    waits = a.gaps.cause == code("gpu-wait")
    assert int(waits.sum()) == 1 and int(a.gaps.dur_ns[waits][0]) == (87 + 5 + W) * US
    p = project(a)
    f = next(f for f in a.findings if f.cause == "launch" and p.saving_ns.get(f.id) is not None)
    gg = p.graph_gap_ns
    assert gg == 417 and p.baseline_ns == end * US
    assert p.saving_ns[f.id] == end * US - (6 * 10 * US + 5 * gg + W * US)
    assert p.what[f.id] == ("the step as one CUDA graph replay; the 2.00 ms per step the GPU waited on dependencies "
                            "(1 gpu-wait gap: an event wait, another stream) stays: a graph does not remove it")
    # a wait under graph_wait_note_share of the step is kept but not said (hf-sampling.decode_host: 6.6 µs of 11 ms)
    from gapscope.analysis.thresholds import Thresholds

    p = project(analyze(model_of(s), config=Thresholds(graph_wait_note_share=0.9)))
    assert p.saving_ns[f.id] == end * US - (6 * 10 * US + 5 * gg + W * US)
    assert p.what[f.id] == "the step as one CUDA graph replay"
    # the step without the wait: nothing kept, the old figure
    s, end = _loop_with_event_wait(0)
    a = analyze(model_of(s))
    p = project(a)
    f = next(f for f in a.findings if f.cause == "launch" and p.saving_ns.get(f.id) is not None)
    assert p.saving_ns[f.id] == end * US - (6 * 10 * US + 6 * p.graph_gap_ns)
    assert p.what[f.id] == "the step as one CUDA graph replay"


def test_graph_replay_fix_says_what_it_adds_to_a_step_of_graph_replays():
    """tracelens' sglang decode: 544 of its 558 GPU items came from one ``hipGraphLaunch``, and the launch finding's
    fix read "the step as one CUDA graph replay" as if nothing were a graph yet. Here three graph replays of two 10
    µs kernels each (1 µs apart inside a replay), 100 µs of op dispatch before each launch: as one graph the six
    kernels run back to back at the observed 1 µs graph gap, and the fix says it joins the three replays."""
    s = Synth()
    t, end = 10.0, 0.0
    for i in range(3):
        s.cpu_op("aten::mm", t, 102)
        t += 100
        rt, k = s.launch("cudaGraphLaunch", t, 2, kernel=f"g{i}a", k_ts=max(t + 5, end), k_dur=10)
        c = rt["args"]["correlation"]
        s.kernel(f"g{i}b", k["ts"] + 11, 10, corr=c)
        end = k["ts"] + 21
        t += 2
    s.annotation("gapscope.step#0", 0, max(t, end) + 1)
    a = analyze(model_of(s))
    p = project(a)
    f = next(f for f in a.findings if f.cause == "launch" and p.saving_ns.get(f.id) is not None)
    assert p.graph_gap_observed and p.graph_gap_ns == 1 * US
    assert p.saving_ns[f.id] == end * US - (6 * 10 * US + 6 * US)
    assert p.what[f.id] == ("the step's 3 graph replays as one (all its 6 GPU items already are graph nodes: it "
                            "removes the host gaps between the replays)")


def test_sglang_decode_graph_fix_keeps_the_event_wait(shared_traces):
    """tracelens' sglang decode (AMD MI300X, 544 of 555 kernels from one graph replay): the step's 473.75 ms are
    463.30 ms of gpu-wait (one gap where a kernel sat queued behind a ``hipStreamWaitEvent``), 686 µs of other idle
    and 9.77 ms of GPU work. The launch finding's graph fix projected −463.98 ms (−97.9%); kept, the wait leaves
    −731.4 µs: the idle outside gpu-wait plus the host's part of the waiting gap (no finding projects 2x more)."""
    from gapscope.analysis.causes import code
    from gapscope.trace import load

    path = shared_traces / "thirdparty" / "tracelens__sglang_Qwen3-8B_decode.json.gz"
    a = analyze(load(str(path)))
    p = project(a)
    g = a.gaps
    wait = g.cause == code("gpu-wait")
    big = int(np.flatnonzero(wait)[np.argmax(g.dur_ns[wait])])
    assert 463_000_000 < g.dur_ns[big] < 464_000_000
    # what a graph can remove: the idle outside gpu-wait, and the waiting gap's part before its launch (38.3 µs)
    removable = int(g.dur_ns[~wait].sum()) + int(g.t_launch_ns[big] - g.start_ns[big])
    for f in a.findings:
        s = p.saving_ns.get(f.id)
        if s is not None:
            assert s <= 2 * max(f.idle_ns, removable), (f.id, s)
    f = next(f for f in a.findings if f.cause == "launch" and p.saving_ns.get(f.id) is not None)
    assert p.saving_ns[f.id] <= 1.1 * removable and 600_000 < p.saving_ns[f.id] < 800_000
    assert "(544 of its 558 GPU items already are graph nodes: it adds the other 14 and the host gaps between them)" \
        in p.what[f.id]
    assert "; the 463.25 ms per step the GPU waited on dependencies (1 gpu-wait gap: an event wait, another stream) " \
        "stays: a graph does not remove it" in p.what[f.id]
    # the headline read "host-bound, up to 48.5x faster with the host out of the way"
    assert p.waits_ns == 463_245_573 and p.headline() == (
        "step 473.75 ms profiled; GPU floor 9.77 ms and 463.25 ms of waits on dependencies (gpu-wait): the GPU's "
        "waits on dependencies, not the host, hold this step (profiled time: host-side savings may be overstated)")


def test_the_projection_line_shows_the_fused_frame_as_a_code_span():
    """The Markdown projection line names the fused frame in a code span, not as escaped backticks (``\\```)."""
    from gapscope.report import render_markdown
    from gapscope.trace import load
    from tests.helpers import SAMPLE_TRACES

    a = analyze(load(SAMPLE_TRACES / "demo-eager.decode.json.gz"))
    line = next(ln for ln in render_markdown([a], 10).splitlines() if ln.startswith("- Projection:"))
    w = a.projection.top_frame()
    assert w is not None and f"as one fused GPU call, `{w.frame}` would save" in line and "\\`" not in line
