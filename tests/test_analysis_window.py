"""The analysis window: the measured ``gapscope.step#k`` ranges, not the capture's scaffolding around them;
per-stream numbers; a rank's collective wait; the report's window line and --top."""

from __future__ import annotations

import argparse
import json

import pytest

from tests.helpers import SAMPLE_TRACES, model_of
from tests.synth import Synth
from gapscope.analysis import analyze, analyze_ranks
from gapscope.analysis.stacks import Frame, signature_frame
from gapscope.report import build_json, render_markdown

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def stepped(meta=None) -> Synth:
    """A capture-like trace: a barrier all-reduce (1 ms) and a synchronize before the steps, two steps of
    two kernels each, a synchronize and a last all-reduce after them.

    step#0: CPU [1100, 1200), kernels [1110, 1130) and [1150, 1160)
    step#1: CPU [1200, 1300), kernels [1210, 1220) and [1240, 1320) (runs past the step's CPU end)
    """
    s = Synth(meta=meta)
    s.launch(ts=0, dur=3, kernel=AR, k_ts=5, k_dur=1000)  # barrier: profiler start-up skew
    s.runtime("cudaDeviceSynchronize", 10, 1000)
    s.annotation("gapscope.step#0", 1100, 100)
    s.launch(ts=1101, dur=3, kernel="a", k_ts=1110, k_dur=20)
    s.launch(ts=1140, dur=3, kernel="b", k_ts=1150, k_dur=10)
    s.annotation("gapscope.step#1", 1200, 100)
    s.launch(ts=1201, dur=3, kernel="c", k_ts=1210, k_dur=10)
    s.launch(ts=1230, dur=3, kernel="d", k_ts=1240, k_dur=80)
    s.runtime("cudaDeviceSynchronize", 1301, 25)
    s.launch(ts=1330, dur=3, kernel=AR, k_ts=1340, k_dur=30)  # closing barrier
    return s


def test_window_is_the_measured_steps():
    a = analyze(model_of(stepped()))
    d = a.devices[0]
    base = a.model.ts_ns.min()  # the trace's own base: 0 µs in the synth
    assert (d.window_start_ns - base, d.window_end_ns - base) == (1_110_000, 1_320_000)
    assert d.kernel_busy_ns == (20 + 10 + 10 + 80) * 1000
    assert d.idle_ns == d.window_ns - d.kernel_busy_ns == 90_000
    assert len(a.gaps) == 3 and a.gaps.dur_ns.tolist() == [50_000, 20_000, 20_000]
    assert a.collectives == []  # both barriers are outside the steps
    assert [k.name for k in a.kernels] and AR not in [k.name for k in a.kernels]
    assert a.syncs == []  # the synchronize calls are capture scaffolding
    assert a.launches["kernels"] == 4
    w = a.window
    assert w.mode == "steps" and w.steps == ["gapscope.step#0", "gapscope.step#1"]
    assert w.excluded_work_ns == 1_030_000
    assert a.window_note == ("window: the 2 measured steps (gapscope.step#0-1); 1.16 ms of capture set-up outside "
                             "them excluded (1.03 ms of GPU work)")


def test_whole_trace_window_keeps_everything():
    a = analyze(model_of(stepped()), window="all")
    d = a.devices[0]
    assert d.window_end_ns - d.window_start_ns == 1_365_000
    assert [c["name"] for c in a.collectives] == [AR]
    assert a.syncs and a.window.mode == "all"
    assert a.window_note.startswith("window: the whole trace")
    with pytest.raises(ValueError):
        analyze(model_of(stepped()), window="some")


def test_no_step_ranges_means_whole_trace():
    s = Synth()
    s.launch(ts=0, dur=2, kernel="a", k_ts=10, k_dur=5)
    s.launch(ts=20, dur=2, kernel="b", k_ts=40, k_dur=5)
    a = analyze(model_of(s))
    assert a.window.mode == "all" and a.window_note is None
    assert a.devices[0].window_ns == 35_000


def test_profiler_steps_do_not_select_the_window():
    s = Synth()
    s.launch(ts=0, dur=2, kernel="a", k_ts=10, k_dur=5)
    s.annotation("ProfilerStep#3", 30, 20)
    s.launch(ts=31, dur=2, kernel="b", k_ts=40, k_dur=5)
    a = analyze(model_of(s))
    assert a.window.mode == "all" and a.devices[0].window_ns == 35_000


def test_unlinked_gpu_work_uses_the_gpu_side_step_ranges():
    s = stepped()
    s.kernel("loose", 1330, 5)  # no launch, no op: after the last step on the GPU
    s.kernel("inner", 1230, 5)  # inside step#1's GPU-side range
    s.events.append({"ph": "X", "cat": "gpu_user_annotation", "name": "gapscope.step#1", "pid": 0, "tid": 7,
                     "ts": 1210, "dur": 110, "args": {}})
    a = analyze(model_of(s))
    d = a.devices[0]
    assert d.window_end_ns - a.model.ts_ns.min() == 1_320_000
    assert d.kernel_busy_ns == (20 + 10 + 10 + 80 + 5) * 1000


def test_signature_skips_capture_scaffolding_frames():
    rec = Frame("python", "capture/recorder.py(342): record", 1, "capture/recorder.py", 342)
    cli = Frame("python", "capture/cli.py(229): _demo", 2, "capture/cli.py", 229)
    step = Frame("annotation", "gapscope.step#0", 3)
    user = Frame("python", "model.py(12): forward", 4, "model.py", 12)
    torch_f = Frame("python", "torch/nn/modules/module.py(1750): _call_impl", 5)
    demo = Frame("python", "capture/demo.py(183): forward", 6)
    assert signature_frame([cli, rec, step, user, torch_f]) is user
    assert signature_frame([cli, rec, step, demo]) is demo  # the demo is the workload, not scaffolding
    assert signature_frame([cli, rec, step]) is None
    op = Frame("op", "aten::index_select", 7)
    assert signature_frame([cli, rec, step, op]) is op


def test_python_gap_between_steps_is_not_blamed_on_the_recorder():
    s = Synth()
    with s.frame("capture/recorder.py(342): record", 0, 400):
        s.annotation("gapscope.step#0", 1, 150)
        with s.frame("model.py(10): step", 2, 140):
            s.launch(ts=3, dur=2, kernel="a", k_ts=10, k_dur=20)
        s.annotation("gapscope.step#1", 200, 150)
        with s.frame("model.py(10): step", 201, 140):
            s.launch(ts=290, dur=2, kernel="b", k_ts=300, k_dur=20)
    a = analyze(model_of(s))
    assert len(a.gaps) == 1
    d = a.gap_detail(0)
    assert "recorder" not in (d.signature or "") and "recorder" not in d.explanation
    assert all("recorder" not in f.title for f in a.findings)


def two_streams() -> Synth:
    s = Synth()
    s.annotation("gapscope.step#0", 0, 200)
    s.launch(ts=1, dur=2, kernel="a", k_ts=10, k_dur=40, stream=7)
    s.launch(ts=4, dur=2, kernel="b", k_ts=30, k_dur=40, stream=13)  # 30..70 on the side stream
    s.launch(ts=7, dur=2, kernel="c", k_ts=100, k_dur=10, stream=7)
    return s


def test_per_stream_gaps_within_the_device_window():
    a = analyze(model_of(two_streams()))
    d = a.devices[0]
    assert d.window_ns == 100_000 and d.idle_ns == 30_000  # [70, 100) only: stream 13 covers [50, 70)
    s7, s13 = d.stream_gaps[7], d.stream_gaps[13]
    assert (s7["busy_ns"], s7["idle_ns"], s7["gaps"], s7["largest_gap_ns"]) == (50_000, 50_000, 1, 50_000)
    assert (s13["busy_ns"], s13["idle_ns"], s13["gaps"], s13["largest_gap_ns"]) == (40_000, 60_000, 2, 40_000)
    doc = build_json([a])
    rows = {r["stream"]: r for r in doc["streams"]}
    assert rows[13] == {"rank": None, "device": 0, "stream": 13, "busy_us": 40.0, "idle_us": 60.0, "gaps": 2,
                        "largest_gap_us": 40.0, "kernels": 1}
    md = render_markdown([a])
    assert "## Streams" in md and "| cuda:0 | 13 | 1 | 40.0 µs | 60.0 µs | 2 | 40.0 µs |" in md
    one = analyze(model_of(stepped()))
    assert "## Streams" not in render_markdown([one])
    assert len(build_json([one])["streams"]) == 1


def rank_trace(rank: int, late_by: float):
    """Two steps with an all-reduce each; the rank is ``late_by`` µs late into both; a 1 s barrier first."""
    s = Synth(meta={"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}})
    s.launch(ts=0, dur=2, kernel=AR, k_ts=5, k_dur=1_000_000 if rank else 10)  # the barrier
    for i in range(2):
        t = 2_000_000 + 1000 * i
        s.annotation(f"gapscope.step#{i}", t, 900)
        s.launch(ts=t + 1, dur=2, kernel="gemm", k_ts=t + 10, k_dur=50)
        start = t + 100 + late_by
        s.launch(ts=start - 5, dur=3, kernel=AR, k_ts=start, k_dur=t + 400 - start)
    return model_of(s)


def test_collective_wait_per_rank_and_in_the_report():
    aa = analyze_ranks([rank_trace(0, 0.0), rank_trace(1, 200.0)])
    d0, d1 = aa[0].devices[0], aa[1].devices[0]
    assert d0.collective_wait_ns == 400_000 and d0.collective_late_rank == 1
    assert d1.collective_wait_ns == 0
    rows = aa[0].cross_rank.rows
    assert len(rows) == 1 and rows[0].count == 2  # the barrier is not matched
    assert rows[0].total_ns == (2 * 300 + 2 * 100) * 1000
    md = render_markdown(aa)
    assert "| collective wait |" in md
    assert "400.0 µs waiting for rank 1 in AllReduce" in md
    doc = build_json(aa)
    assert [d["collective_wait_us"] for d in doc["devices"]] == [400.0, 0.0]
    full = analyze_ranks([rank_trace(0, 0.0), rank_trace(1, 200.0)], window="all")
    assert full[1].devices[0].window_ns > 1_000_000_000


def test_report_top(tmp_path, capsys):
    from gapscope.cli import main
    from gapscope.commands.report import report_top

    def ns(**kw):
        return argparse.Namespace(**{"json": False, "top": None, **kw})

    assert report_top(ns()) == 10 and report_top(ns(json=True)) == 50
    assert report_top(ns(json=True, top=3)) == 3 and report_top(ns(top=25)) == 25
    s = Synth()
    s.annotation("gapscope.step#0", 0, 5000)
    for i in range(70):
        s.launch(ts=i * 50, dur=2, kernel=f"k{i}", k_ts=i * 50 + 10, k_dur=5)
    p = s.write(tmp_path / "many.json")
    assert main(["report", "--json", "--top", "3", str(p)]) == 0
    assert len(json.loads(capsys.readouterr().out)["gaps"]) == 3
    assert main(["report", "--json", str(p)]) == 0
    assert len(json.loads(capsys.readouterr().out)["gaps"]) == 50


def _sample(name):
    p = SAMPLE_TRACES / name
    assert p.is_file(), p  # in the repository: missing is a failure
    from gapscope.trace import load

    return load(str(p), no_cache=True)


def test_sample_late_rank_barrier_is_excluded():
    m0 = _sample("demo-eager-tp-late1.decode.rank0.json.gz")
    m1 = _sample("demo-eager-tp-late1.decode.rank1.json.gz")
    a0, a1 = analyze_ranks([m0, m1])
    assert a1.window.excluded_work_ns > 2e9  # the 2.4 s start-up barrier
    assert all(c["total_ns"] < 1e9 for c in a1.collectives)
    assert a1.window_ns < 0.3e9 and a1.idle_pct > 90
    assert a0.devices[0].collective_wait_ns > 0.5 * a0.window_ns
    assert a0.devices[0].collective_late_rank == 1


def test_sample_sync_trace_names_no_recorder_frame():
    a = analyze(_sample("demo-eager-sync.decode.json.gz"))
    assert a.window.mode == "steps" and len(set(a.window.steps)) == 4
    for r in a.listed_rows().tolist():
        d = a.gap_detail(r)
        assert "capture/recorder.py" not in (d.signature or "") + d.explanation, (r, d.explanation)
    assert all("recorder.py" not in f.title for f in a.findings)
