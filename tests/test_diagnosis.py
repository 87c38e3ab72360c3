"""Diagnosis round 2 (issue 13): causes, blamed frames and advice that hold against the events.

Synthetic traces: kernel ``prev`` ends at t0 = 100 µs; what happens on the launching thread is written out
per test, with the expected numbers worked out by hand in the comments. Real traces: the samples in traces/
and the third-party ones in ../shared/traces/ (skipped when absent)."""

from __future__ import annotations


import numpy as np
import pytest

from tests.helpers import SAMPLE_TRACES, largest_gap, model_of, shared_trace
from tests.synth import Synth
from gapscope.analysis import CAUSES, Thresholds, analyze
from gapscope.report import build_json, render_markdown
from gapscope.trace import load
from gapscope.trace.model import Kind


# ------------------------------------------------------------------------------ item 1: gpu-wait
def _queued_behind_an_event() -> Synth:
    """The next kernel is launched 4 µs into the gap, behind a stream wait, and starts at 600 µs; the launching
    thread then sits 480 µs in a blocking cudaMemcpy (queued behind the same wait)."""
    s = Synth()
    for k in range(4):  # the trace's usual launch-to-start latency: 5 µs
        s.launch(ts=5 + 10 * k, dur=2, kernel=f"k{k}", k_ts=10 + 10 * k, k_dur=4)
    s.launch(ts=45, dur=2, kernel="prev", k_ts=50, k_dur=50)
    with s.frame("server.py(20): run_batch", 95, 510):
        s.runtime("cudaStreamWaitEvent", 101, 2)
        s.launch(ts=104, dur=3, kernel="resolve_tokens", k_ts=600, k_dur=10)
        with s.frame("server.py(31): populate", 110, 490):
            s.runtime("cudaMemcpy", 115, 480)
    return s


def test_queued_kernel_behind_a_stream_wait_is_gpu_wait_not_launch():
    a = analyze(model_of(_queued_behind_an_event()))
    i, cause, d = largest_gap(a)
    assert a.gaps.dur_ns[i] == 500_000 and cause == "gpu-wait"
    ex = d.explanation
    assert "launched 4.0 µs into the gap" in ex and "started 496.0 µs after its launch call" in ex
    assert "`cudaStreamWaitEvent`" in ex and "stream 7" in ex
    # the thread's 480 µs in the blocking copy, from the launch (104 µs) to the kernel's start (600 µs)
    assert "in the 496.0 µs until the kernel started, the launching thread spent 480.0 µs in `cudaMemcpy`" in ex
    assert "blocking copy queued behind the wait" in ex
    f = next(f for f in a.findings if f.cause == "gpu-wait")
    assert "CUDA graphs will not shorten" in f.suggestion and "non_blocking" in f.suggestion
    assert "torch.compile(mode='reduce-overhead')" not in f.suggestion
    host = f.evidence["examples"][0]["host"]
    assert host["credited"] == {"name": "cudaMemcpy", "self_us": 480.0}
    assert (host["from_us"], host["to_us"]) == (94.0, 590.0)  # window origin: k0's start at 10 µs


def test_sglang_493ms_wait_is_named_with_the_copy_behind_it():
    a = analyze(load(shared_trace("thirdparty/tracelens__sglang_Qwen3-8B_decode.json.gz")))
    i, cause, d = largest_gap(a)
    assert cause == "gpu-wait"
    assert "`hipStreamWaitEvent`" in d.explanation and "`hipMemcpyWithStream`" in d.explanation
    assert "blocking copy queued behind the wait" in d.explanation
    md = render_markdown([a])
    assert "Biggest cause: **gpu-wait**" in md
    assert "launch-bound" not in next(f.title for f in a.findings)


def test_a_slow_launch_call_is_a_stall_and_says_so():
    """MI250: hipLaunchKernel itself ran 6.54 ms of a 6.63 ms gap: the host's issuing, not a GPU-side wait, and
    one call, not many dispatches (issue 23: a ``stall``)."""
    a = analyze(load(shared_trace("thirdparty/hta__amd_mi250_minitoy_train_ROCm6_2_kineto.json.gz")))
    i, cause, d = largest_gap(a)
    assert cause == "stall"
    assert d.explanation.startswith("One runtime call, the launch call `hipLaunchKernel` of `aten::add_`, ran on "
                                    "the CPU for 6.54 ms of the gap")


# ------------------------------------------------------------------------------ item 3: own time
def test_a_frame_is_credited_with_its_own_time_only():
    """[100, 195] before the launch: step() runs 94 µs, inside it time.sleep 50 µs and helper() 10 µs.
    Own times: sleep 50, step 94 - 50 - 10 = 34, helper 10."""
    s = Synth()
    s.launch(ts=0, dur=2, kernel="prev", k_ts=50, k_dur=50)
    with s.frame("app.py(5): step", 100, 94):
        s.python("<built-in function sleep>", 120, 50)
        s.python("app.py(9): helper", 175, 10)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    a = analyze(model_of(s))
    i, cause, d = largest_gap(a)
    assert cause == "python"
    assert d.extra["host"]["frames"] == [(d.extra["host"]["frames"][0][0], 50_000),
                                         (d.extra["host"]["frames"][1][0], 34_000),
                                         (d.extra["host"]["frames"][2][0], 10_000)]
    assert "`built-in sleep` ran 50.0 µs of it itself" in d.explanation
    assert "(then `app.py(5): step` 34.0 µs, `app.py(9): helper` 10.0 µs)" in d.explanation
    ex = build_json([a])["findings"][0]["evidence"]["examples"][0]["host"]
    assert ex["credited"] == {"name": "<built-in function sleep>", "self_us": 50.0}


def test_spread_host_time_lists_the_top_frames():
    s = Synth()
    s.launch(ts=0, dur=2, kernel="prev", k_ts=50, k_dur=50)
    with s.frame("app.py(5): step", 100, 94):
        for k in range(5):
            s.python(f"app.py({20 + k}): part{k}", 101 + 18 * k, 17)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    a = analyze(model_of(s))
    _, cause, d = largest_gap(a)
    assert cause == "python"
    assert "spread over many frames" in d.explanation
    assert "`app.py(20): part0` 17.0 µs" in d.explanation


# ------------------------------------------------------------------------------ item 4: round trip
def _round_trip(s: Synth, t: float):
    """At t: a blocking DtoH copy (the GPU ran dry at t + 5), 40 µs of numpy, the token copied back, launch."""
    with s.frame("sample.py(12): pick_token", t, 58):
        rt = s.runtime("cudaMemcpy", t, 8)
        s.memcpy("DtoH", t + 5, 2, nbytes=256_000, corr=rt["args"]["correlation"], src="Device", dst="Pinned")
        s.python("<built-in method argsort of numpy.ndarray object at 0x7f>", t + 10, 40)
        back = s.runtime("cudaMemcpyAsync", t + 54, 2)
        s.memcpy("HtoD", t + 57, 1, nbytes=8, corr=back["args"]["correlation"], src="Pinned", dst="Device")


def test_host_round_trip_is_one_finding_per_call_site():
    s = Synth()
    for k in range(3):  # three steps: prev kernel ends at 100 + 200k, round trip, next launch at 160 + 200k
        base = 200.0 * k
        s.annotation(f"ProfilerStep#{k}", base, 199)
        s.launch(ts=base, dur=2, kernel="layer", k_ts=base + 50, k_dur=50)
        _round_trip(s, base + 95)
        s.launch(ts=base + 160, dur=2, kernel="embed", k_ts=base + 165, k_dur=5)
    a = analyze(model_of(s))
    rts = [f for f in a.findings if f.evidence.get("pattern") == "round-trip"]
    assert len(rts) == 1
    f = rts[0]
    assert f.evidence["gaps"] == 3 and f.evidence["steps"] == 3 and f.evidence["frame"] == "sample.py(12): pick_token"
    assert f.evidence["per_step_us"] == pytest.approx(65.0)  # gap 100 -> 165 each step
    assert "3 times (1 per step)" in f.title and "65.0 µs per step" in f.title
    assert "pin_memory" not in f.suggestion and "CUDA graphs nor pinned memory can hide" in f.suggestion
    assert not [g for g in a.findings if g is not f and g.evidence.get("frame") == "sample.py(12): pick_token"]


def test_sample_host_sampling_is_one_round_trip_finding():
    a = analyze(load(SAMPLE_TRACES / "demo-eager-sampling.decode.json.gz"))
    rts = [f for f in a.findings if f.evidence.get("pattern") == "round-trip"]
    assert len(rts) == 1 and rts[0].evidence["frame"].endswith("_inject_host_sampling")
    # one round trip per step (the 2026-12-01 recording has no other gap at the call site)
    assert rts[0].evidence["steps"] == 4 and rts[0].evidence["gaps"] == 4
    # ranked by projected saving: only "the step as one graph replay" (launch) saves more in this recording
    assert a.findings[0].cause == "launch" and a.findings[1] is rts[0]
    others = [f for f in a.findings if f is not rts[0]]
    assert not any((f.evidence.get("frame") or "").endswith("_inject_host_sampling") for f in others)
    assert not any("pageable memory" in f.title for f in a.findings)  # 4 tiny token copies: no pinning advice


# ------------------------------------------------------------------------------ item 6: profiler
def test_profiler_gaps_on_samples_are_the_launching_threads_own_profiler_time():
    for name in ("demo-eager-sync.decode.json.gz", "demo-eager.decode.json.gz"):
        a = analyze(load(SAMPLE_TRACES / name))
        rows = np.flatnonzero(a.gaps.cause == CAUSES.index("profiler"))
        assert rows.size, name
        w = a.gaps.t_launch_ns[rows] - a.gaps.start_ns[rows]
        assert (a.gaps.breakdown["profiler"][rows] * 2 > w).all()


# ------------------------------------------------------------------------------ item 7: advice
@pytest.mark.parametrize("direction,src,dst,nbytes,pin", [
    ("HtoD", "Pageable", "Device", 64 << 20, True),
    ("HtoD", "Pinned", "Device", 64 << 20, False),
    ("DtoD", "Device", "Device", 64 << 20, False),
    ("HtoD", "Pageable", "Device", 512, False),
])
def test_copy_advice_fits_the_copy(direction, src, dst, nbytes, pin):
    s = Synth()
    s.launch(ts=0, dur=2, kernel="prev", k_ts=50, k_dur=50)
    rt = s.runtime("cudaMemcpyAsync", 99, 2)
    s.memcpy(direction, 105, 80, nbytes=nbytes, corr=rt["args"]["correlation"], src=src, dst=dst)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    a = analyze(model_of(s))
    _, cause, _ = largest_gap(a)
    assert cause == "copy"
    f = next(f for f in a.findings if f.cause == "copy" and f.idle_ns)
    assert ("pin_memory" in f.suggestion) == pin, f.suggestion


def test_a_copy_issued_before_the_window_reads_as_a_window_edge():
    s = Synth(meta={"gapscope": {"phase": "decode"}})
    rt = s.runtime("cudaMemcpyAsync", 5, 2)
    s.memcpy("HtoD", 100, 80, nbytes=64 << 20, corr=rt["args"]["correlation"])
    s.annotation("gapscope.step#0", 90, 200)
    s.launch(ts=91, dur=2, kernel="first", k_ts=95, k_dur=5)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    a = analyze(model_of(s))
    _, cause, d = largest_gap(a)
    assert cause == "copy" and d.extra.get("window_edge")
    assert "edge effect of the window" in d.explanation
    f = next(f for f in a.findings if f.cause == "copy" and f.idle_ns)
    assert "--whole-trace" in f.suggestion and "pin_memory" not in f.suggestion


# ------------------------------------------------------------------------------ item 11: look-alikes
def test_no_frameless_python_finding_beside_a_framed_one():
    """Only the first max_detailed_gaps rows used to get a frame; the rest formed a frameless finding whose
    example came from a frame already listed above it."""
    a = analyze(load(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"), config=Thresholds(max_detailed_gaps=5))
    py = [f for f in a.findings if f.cause == "python" and f.evidence.get("examples")]
    frames = [f.evidence["frame"] for f in py if f.evidence["frame"]]
    assert len(frames) >= 5 and len(frames) == len(set(frames))
    for f in py:
        if not f.evidence["frame"]:  # a finding without a frame: none of its gaps has one either
            assert all(a.gap_detail(int(r)).signature is None for r in f.gap_rows)


# ------------------------------------------------------------------------------ own time: who ran at t
def _own(s: Synth, a_us: float, b_us: float) -> dict[str, int]:
    """host_time of [a_us, b_us) on the Synth's thread, as {name: ns} (events of one name added up)."""
    from gapscope.analysis.hosttime import host_time

    m = model_of(s)
    an = analyze(m)
    i = next(j for j in range(m.n) if m.kind[j] == int(Kind.PYTHON) or m.kind[j] == int(Kind.CPU_OP))
    raw = next(e for e in s.events if e.get("ph") == "X" and e["name"] == m.name(i))
    base = int(m.ts_ns[i]) - round(raw["ts"] * 1000)
    ht = host_time(an.stacks, m, int(m.track[i]), base + round(a_us * 1000), base + round(b_us * 1000))
    out: dict[str, int] = {}
    for e, ns in zip(ht.events.tolist(), ht.ns.tolist()):
        out[m.name(e)] = out.get(m.name(e), 0) + ns
    return out


def test_a_range_inside_an_op_is_the_ops_time_not_the_python_frames():
    """ProcessGroupNCCL opens `nccl:all_reduce` (a record_function range) inside `record_param_comms`, an op
    inside the `allreduce` built-in: the range is a label, the op is what runs there (demo-eager-tp: the built-in
    was credited 175.1 µs where it ran 121.6 µs itself)."""
    s = Synth()
    with s.frame("app.py(5): all_reduce", 100, 200):
        with s.frame("<built-in method allreduce of PyCapsule object at 0x7f>", 110, 180):
            with s.op("record_param_comms", 200, 90):
                s.runtime("cudaStreamIsCapturing", 205, 2)
                s.annotation("nccl:all_reduce", 210, 70)
                s.runtime("cudaLaunchKernel", 270, 5)
    own = _own(s, 100, 270)
    assert own == {"<built-in method allreduce of PyCapsule object at 0x7f>": 90_000,  # [110, 200)
                   "record_param_comms": 68_000,  # [200, 270) less its runtime call
                   "app.py(5): all_reduce": 10_000, "cudaStreamIsCapturing": 2_000}


def test_a_frame_open_at_t_is_running_though_its_callees_name_another_parent():
    """demo-eager-tp.prefill rank 1: torch wrote `Python parent id` = forward for the calls mlp made after
    its first module call (silu, chunk, the all_reduce), while mlp's own frame stays open around them. The frame
    running between two of those calls is mlp (open, and a child of forward), not forward."""
    s = Synth()
    with s.frame("demo.py(183): forward", 0, 100):
        mlp = s.python("demo.py(179): mlp", 10, 80)
        s.python("torch/nn/functional.py(2375): silu", 20, 30)  # parent id: forward (the recorder's mistake)
    assert mlp["args"]["Python parent id"] == 1
    own = _own(s, 40, 60)
    assert own == {"torch/nn/functional.py(2375): silu": 10_000, "demo.py(179): mlp": 10_000}
    # the stack inside silu has mlp between forward and silu (demo-eager-tp.decode rank 1: the id chain from an
    # all_reduce skipped Decoder.forward, Block_0, its _call_impl, Block.forward and attn)
    m = model_of(s)
    an = analyze(m)
    i = next(j for j in range(m.n) if m.name(j) == "torch/nn/functional.py(2375): silu")
    names = [f.name for f in an.stacks.stack_at(int(m.track[i]), int(m.ts_ns[i]) + 5_000)]
    assert names == ["demo.py(183): forward", "demo.py(179): mlp", "torch/nn/functional.py(2375): silu"]


def test_a_zero_length_call_at_the_same_microsecond_hides_no_frame():
    """sidnb13 (integer µs): `all` [1925, 1938) calls generators; at 1937 one runs [1937, 1938) and a sibling
    called first at 1937 lasts 0 µs. The µs [1937, 1938) is the generator's, not `all`'s: all's own time is 3 µs."""
    s = Synth()
    with s.frame("<built-in function all>", 1925, 13):
        s.python("activation.py(1182): <genexpr>", 1925, 6)
        s.python("activation.py(1182): <genexpr>", 1931, 1)
        s.python("activation.py(1182): <genexpr>", 1932, 1)
        with s.frame("activation.py(1182): <genexpr>", 1933, 0):
            s.python("activation.py(886): _check_arg_device", 1933, 0)
        s.python("activation.py(1182): <genexpr>", 1933, 1)
        with s.frame("activation.py(1182): <genexpr>", 1937, 0):
            s.python("activation.py(886): _check_arg_device", 1937, 0)
        s.python("activation.py(1182): <genexpr>", 1937, 1)
    own = _own(s, 1925, 1938)
    assert own == {"<built-in function all>": 3_000, "activation.py(1182): <genexpr>": 10_000}


def test_ops_issued_in_a_launch_findings_gaps_are_counted_over_all_its_gaps():
    """hf-llama.decode: "Ops issued in these gaps" named sdpa, transpose, reshape, linear: the ops of the 5
    largest of its 1226 gaps, where aten::mul (issued in 294 of them), linear and add lead over all of them.
    Here 3 long gaps issue `aten::sdpa`, 7 shorter ones `aten::mul`: the 5 largest hold all 3 sdpa."""
    s = Synth()
    t = 10.0
    for i in range(10):
        name, dur = ("aten::sdpa", 60) if i in (2, 5, 8) else ("aten::mul", 30)
        with s.op(name, t, dur):
            s.launch("cudaLaunchKernel", t + dur - 3, 2, kernel=f"k{i}", k_ts=t + dur - 0.5, k_dur=1)
        t += dur + 2
    s.annotation("gapscope.step#0", 0, t + 10)
    a = analyze(model_of(s))
    f = next(f for f in a.findings if f.cause == "launch" and f.evidence.get("gaps", 0) >= 9)
    assert f.evidence["issued_ops"][:2] == ["aten::mul", "aten::sdpa"], f.evidence["issued_ops"]


@pytest.mark.parametrize("path", ["demo-eager.decode.json.gz", "demo-eager-tp.prefill.rank1.json.gz",
                                  "shared:thirdparty/sidnb13__dc3b0e7228dd_851.1752215573993169006.pt.trace.json"])
def test_innermost_python_frame_is_the_last_opened_of_those_open(path):
    """``innermost("py")`` against brute force at 3,000 points of the busiest thread: of the frames open at t
    (ts <= t < end), the one opened last (same start: the shorter, then the later call). Where the parent ids
    agree with time (demo-eager) the model's parents are walked as they are; where torch wrote wrong ones
    (tp.prefill rank 1) or µs ties hide a frame (sidnb13), the time parents."""
    from tests.helpers import SAMPLE_TRACES

    p = shared_trace(path.split(":", 1)[1]) if path.startswith("shared:") else SAMPLE_TRACES / path
    if not p.exists():
        pytest.skip(f"{path} not present")
    a = analyze(load(str(p), no_cache=True))
    m = a.model
    py = np.flatnonzero(m.kind == int(Kind.PYTHON))
    thr = int(np.bincount(m.track[py]).argmax())
    f = py[m.track[py] == thr]
    ts, end, pid = m.ts_ns[f], m.ts_ns[f] + m.dur_ns[f], m.py_id[f]
    rng = np.random.default_rng(0)
    t = np.sort(rng.integers(int(ts.min()), int(end.max()), 3000))
    t = np.concatenate([t, ts[:500]])  # frame starts: the tied µs
    got = a.stacks.innermost("py", np.full(t.shape, thr), t)
    for k in range(t.size):
        inn = np.flatnonzero((ts <= t[k]) & (t[k] < end))
        want = -1
        if inn.size:
            want = int(f[inn[np.lexsort((pid[inn], -end[inn], ts[inn]))[-1]]])
        assert got[k] == want, (k, int(t[k]), m.name(int(got[k])) if got[k] >= 0 else None, m.name(want))
