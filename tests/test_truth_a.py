"""Issue 23, items 1, 2, 5, 7: one thing holding a gap is a ``stall`` (not "dispatching ops"); the usual launch
latency comes from kernels that started on an idle GPU; severity follows the ranking; one source of device names.

Synthetic traces with the answers worked out by hand in the comments; real traces in traces/ and ../shared/traces."""

from __future__ import annotations

import numpy as np

from tests.helpers import SAMPLE_TRACES, largest_gap, model_of, shared_trace
from tests.synth import Synth
from gapscope.analysis import CAUSES, analyze
from gapscope.analysis.findings import SEVERITIES
from gapscope.analysis.gaps import typical_launch_delay
from gapscope.report import build_json, render_markdown
from gapscope.trace import load
from gapscope.trace.model import Kind


# ------------------------------------------------------------------------------ item 1: stalls
def _slow_driver_call() -> Synth:
    """``prev`` ends at 100 µs. Inside ``aten::topk`` (95..6200), a cudaLaunchKernel runs 6000 µs (102..6102)
    after its own kernel started at 99 µs; the next op is launched at 6150 and starts at 6160. The CPU's part of
    the gap is [100, 6150] = 6050 µs, of which the one call holds [100, 6102] = 6002 µs."""
    s = Synth()
    for k in range(4):
        s.launch(ts=5 + 10 * k, dur=2, kernel=f"k{k}", k_ts=10 + 10 * k, k_dur=4)
    s.launch(ts=50, dur=2, kernel="prev", k_ts=55, k_dur=44)  # 55..99
    with s.op("aten::topk", 95, 6105):
        s.launch(ts=96, dur=6006, kernel="topk_kernel", k_ts=99, k_dur=1)  # 99..100
    with s.op("aten::softmax", 6140, 20):
        s.launch(ts=6150, dur=3, kernel="softmax_kernel", k_ts=6160, k_dur=5)
    return s


def test_one_slow_driver_call_is_a_stall_with_its_duration():
    a = analyze(model_of(_slow_driver_call()))
    i, cause, d = largest_gap(a)
    assert a.gaps.dur_ns[i] == 6_060_000 and cause == "stall"
    h = d.extra["held_by"]
    assert (h["name"], h["kind"], h["ns"], h["of_ns"]) == ("cudaLaunchKernel", "driver", 6_002_000, 6_050_000)
    assert ("One runtime call, `cudaLaunchKernel` in `aten::topk`, held the CPU for 6.00 ms of the 6.05 ms before "
            "`aten::softmax` was launched") in d.explanation
    assert "dispatching ops" not in d.explanation
    f = next(f for f in a.findings if f.cause == "stall")
    assert "lazy module loading" in f.suggestion and "CUDA_MODULE_LOADING" in f.suggestion
    assert "torch.compile(mode=" not in f.suggestion and "capture the step in a CUDA graph" not in f.suggestion
    md = render_markdown([a])
    assert "**stall**" in md and "dispatching ops before launching `aten::softmax`" not in md


def test_many_short_dispatches_stay_launch():
    """Control: the same gap filled by 121 ops of 40 µs (none holds most of it) is ``launch``."""
    s = Synth()
    s.launch(ts=50, dur=2, kernel="prev", k_ts=55, k_dur=45)  # ends at 100
    for k in range(121):  # 40 µs each, 50 µs apart: dispatch (< host_op_ns), none near 100 µs
        s.cpu_op("aten::view", 100 + 50 * k, 40)
    s.launch(ts=6150, dur=3, kernel="next", k_ts=6160, k_dur=5)
    a = analyze(model_of(s))
    i, cause, d = largest_gap(a)
    assert cause == "launch" and d.extra.get("held_by") is None


def _compile_region() -> Synth:
    """A ``Torch-Compiled Region`` range (no Python frames recorded) holds [100, 2100] of [100, 2200]."""
    s = Synth()
    s.launch(ts=50, dur=2, kernel="prev", k_ts=55, k_dur=45)
    s.cpu_op("Torch-Compiled Region: 0/1", 100, 2000)
    s.launch(ts=2200, dur=3, kernel="next", k_ts=2210, k_dur=5)
    return s


def test_a_compile_region_holding_a_gap_gets_compile_advice():
    a = analyze(model_of(_compile_region()))
    i, cause, d = largest_gap(a)
    assert cause == "stall"
    h = d.extra["held_by"]
    assert (h["kind"], h["ns"], h["of_ns"]) == ("compile", 2_000_000, 2_100_000)
    f = next(f for f in a.findings if f.cause == "stall")
    assert "recompilation or guard evaluation" in f.suggestion
    assert "lazy module loading" not in f.suggestion


def test_demo_compile_region_does_not_hold_the_gap_its_python_callee_ran():
    """Our torch.compile decode (H200): one gap of 635.8 µs, 618.2 µs of it before the next launch, inside
    `Torch-Compiled Region: 0/1`. Every instant of those 618.2 µs is inside a Python frame that started inside the
    region (nested in it, whatever depth the trace model gave the region): Inductor's generated ``call`` ran 470.7 µs
    of its own, the region none (benchmarks/audit.py recomputes it from the raw events). No stall by the region;
    Inductor's wrapper is dispatch (``LAUNCHER_FRAME_RE``), so the gap is launch-bound."""
    from gapscope.analysis.hosttime import host_time

    a = analyze(load(SAMPLE_TRACES / "demo-compile.decode.json.gz"))
    m, g = a.model, a.gaps
    held = [a.gap_detail(int(r)).extra["held_by"] for r in np.flatnonzero(g.cause == CAUSES.index("stall"))]
    assert not [h for h in held if h["kind"] == "compile"]
    i = int(np.flatnonzero(np.round((g.end_ns - g.start_ns) / 100) == 6358)[0])
    assert CAUSES[int(g.cause[i])] == "launch" and int(g.t_launch_ns[i] - g.start_ns[i]) == 618_189
    h = host_time(a.stacks, m, int(g.thread[i]), int(g.start_ns[i]), int(g.t_launch_ns[i]))
    top, ns = h.top(1)[0]
    assert m.name(top).endswith(".py(1028): call") and "torchinductor_" in m.name(top) and ns == 470_722
    region = [e for e in np.flatnonzero(m.kind == int(Kind.CPU_OP)).tolist()
              if m.name(e) == "Torch-Compiled Region: 0/1" and m.ts_ns[e] <= g.start_ns[i] < m.ts_ns[e] + m.dur_ns[e]]
    assert len(region) == 1 and h.of(region[0]) == 0


def test_b200_eager_op_own_time_holds_its_gap():
    """vLLM gpt-oss on a B200: the largest gap (2.64 ms) is one aten::addmm's own CPU time, 2.41 ms of the 2.61 ms
    before the next launch (hosttime's own-time rule; benchmarks/audit.py recomputes it from the raw events)."""
    a = analyze(load(shared_trace("thirdparty/tracelens__b200_eager_trace.json.gz")))
    i, cause, d = largest_gap(a)
    assert cause == "stall"
    h = d.extra["held_by"]
    assert h["name"] == "aten::addmm" and h["kind"] == "op"
    assert h["ns"] > 0.9 * h["of_ns"] and round(h["ns"] / 1e4) == 241
    assert "dispatching ops" not in d.explanation


# ------------------------------------------------------------------------------ item 2: queued wait baseline
def _busy_prefill_then_wait() -> Synth:
    """Prefill: 20 kernels launched 2 µs apart from 10 µs, 5000 µs each back to back from 20 µs (k0 20..5020,
    ..., k19 95020..100020): only k0 started on an idle GPU (latency 10 µs); the others were queued behind busy
    kernels (latencies 5000k - 2k + 10: median ~47.5 ms). Decode: 5 kernels, each launched on an idle GPU with
    5 µs latency (launch 100100 + 100j, start +5, 10 µs long). Then ``prev`` ends at t0 = 101000; a
    cudaStreamWaitEvent, the next kernel launched at 101004 starts at 104000 (GPU idle 3 ms, 2996 µs after its
    launch). Idle-start latencies: 10, 5 x5, 2996 µs -> median 5 µs; wait floor max(20, 4 x 5) = 20 µs."""
    s = Synth()
    for k in range(20):
        s.launch(ts=10 + 2 * k, dur=1, kernel=f"prefill{k}", k_ts=20 + 5000 * k, k_dur=5000)
    for j in range(5):
        s.launch(ts=100100 + 100 * j, dur=2, kernel=f"decode{j}", k_ts=100105 + 100 * j, k_dur=10)
    s.launch(ts=100900, dur=2, kernel="prev", k_ts=100905, k_dur=95)  # 100905..101000
    s.runtime("cudaStreamWaitEvent", 101001, 2)
    s.launch(ts=101004, dur=2, kernel="resolve_tokens", k_ts=104000, k_dur=10)
    return s


def test_usual_latency_comes_from_kernels_started_on_an_idle_gpu():
    a = analyze(model_of(_busy_prefill_then_wait()))
    assert typical_launch_delay(a.model, a.flags) == 5_000
    i, cause, d = largest_gap(a)
    assert a.gaps.dur_ns[i] == 3_000_000 and cause == "gpu-wait"
    assert "the usual launch-to-start latency" not in d.explanation
    assert "started 3.00 ms after its launch call" in d.explanation and "`cudaStreamWaitEvent`" in d.explanation
    f = next(f for f in a.findings if f.cause == "gpu-wait")
    assert "CUDA graphs will not shorten" in f.suggestion
    assert not any(f.cause == "launch" and f.idle_ns >= 3_000_000 for f in a.findings)


def test_real_launch_baselines_exclude_queued_kernels():
    """sglang decode on an MI300X: the six kernels that started on an idle GPU have latencies 9.3-13.1 µs and
    the 463 ms wait; their median is 11.5 µs (the median over every launched kernel, queued ones included, was
    the old baseline). hf-generate on an H200: kernels queued behind busy kernels are left out."""
    a = analyze(load(shared_trace("thirdparty/tracelens__sglang_Qwen3-8B_decode.json.gz")))
    assert typical_launch_delay(a.model, a.flags) == 11_522
    b = analyze(load(SAMPLE_TRACES / "hf-generate.generate.json.gz"))
    m = b.model
    from gapscope.analysis.gaps import idle_start_kernels

    k = idle_start_kernels(m, b.flags)
    assert k.size > 0
    # brute force on the columns: nothing of the device (one GPU here) ran at any instant from launch to start
    ts, end = m.ts_ns, m.ts_ns + m.dur_ns
    from gapscope.trace.model import Kind

    work = np.flatnonzero((m.kind == Kind.KERNEL) | (m.kind == Kind.MEMCPY) | (m.kind == Kind.MEMSET))
    for j in k[:: max(k.size // 50, 1)].tolist():
        L = int(m.launch[j])
        busy = (ts[work] < ts[j]) & (end[work] > ts[L])
        assert not busy.any(), j


def test_dlrm_trace_waits_are_not_usual_latency():
    """HTA's sampled DLRM trace (rank 0): over every launched kernel the median launch-to-start latency is
    10.8 ms (kernels queued behind busy ones); over those that started on an idle GPU it is 7 µs. The 8 gaps
    whose kernel was launched inside the gap and started 28 µs .. 43 ms after its launch were "the usual
    launch-to-start latency" (launch) against the old baseline; they are gpu-wait. The largest: 5.01 ms, the
    kernel started 4.66 ms after its launch while the thread sat in All2All_Pooled_WaitBackward."""
    a = analyze(load(shared_trace("thirdparty/hta__trace_filter_sampled_rank-0.json.gz")))
    m, g = a.model, a.gaps
    assert typical_launch_delay(m, a.flags) == 7_000
    L = g.launch_idx
    has = L >= 0
    lts = m.ts_ns[np.where(has, L, 0)]
    wait = g.end_ns - lts
    # launched inside the gap, in its first half, then waited between the new floor and the old one
    rows = np.flatnonzero(has & (lts >= g.start_ns) & (2 * (lts - g.start_ns) < g.dur_ns)
                          & (wait > 4 * 7_000) & (wait <= 4 * 10_815_000))
    assert rows.size == 8
    assert {CAUSES[int(c)] for c in g.cause[rows]} == {"gpu-wait"}
    d = a.gap_detail(int(rows[0]))
    assert d.dur_ns == 5_009_000 and "started 4.66 ms after its launch call" in d.explanation
    assert "the usual launch-to-start latency" not in d.explanation
    assert "`All2All_Pooled_WaitBackward`" in d.explanation


# ------------------------------------------------------------------------------ item 5: severity vs rank
def _band(pct: float) -> str:
    # shared/design/plan.md's bands, written out here
    return "high" if pct >= 10 else "medium" if pct >= 3 else "low" if pct >= 1 else "info"


def _check_monotone(a):
    """The plan's actions: severity the band of what each buys, never above an action ranked before it; each finding
    an action fixes reads its action's severity. Returns the findings in plan order."""
    plan = a.plan
    lv = [SEVERITIES.index(x.severity) for x in plan.actions]
    assert lv == sorted(lv), [(x.severity, x.rank) for x in plan.actions]
    for x in plan.actions:
        assert x.severity == _band(x.saving_pct)
        assert plan.severity_of[x.findings[0]] == x.severity
        assert all(SEVERITIES.index(plan.severity_of[fid]) >= SEVERITIES.index(x.severity) for fid in x.findings)
    return plan.ordered_findings(a.findings)


def test_severity_never_rises_down_the_ranking_synthetic():
    """The slow driver call's finding: its fix removes the call's 6.00 ms in the gap; projected at 6.00 ms per
    step (97% of the step): [high] by its saving. Every action ranked below another is no more severe."""
    a = analyze(model_of(_slow_driver_call()))
    _check_monotone(a)
    f = next(f for f in a.findings if f.cause == "stall")
    assert a.projection.saving_ns[f.id] == 6_002_000
    plan = a.plan
    # the step as one CUDA graph (98.9%) would take the call out with the rest of the host work: action 1, the
    # stall action 2 inside it
    assert plan.severity_of[f.id] == "high" and plan.rank_of[f.id] == 2 and plan.action(2).inside == 1
    doc = build_json([a])
    # the JSON's severities are the plan's
    assert all(plan.severity_of[f["id"]] == f["severity"] for f in doc["findings"])


def test_readme_sample_severities_follow_the_ranking():
    """The README's trace (``gapscope traces/demo-eager-sync.decode.json.gz``): the step as one CUDA graph (77.9%)
    leads, with the .item() check it needs removed first written inside it (5.0% alone): that check never leads
    (it read first, at the graph's figure, before the plan); attn fused whole (45.9%) is action 2, inside action 1."""
    a = analyze(load(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"))
    _check_monotone(a)
    plan = a.plan
    top = plan.actions[0]
    assert top.kind == "cuda-graph" and round(top.saving_pct, 1) == 77.9 and top.severity == "high"
    need = top.needs[0]
    assert "_inject_sync_check" in need.where.frame and round(need.saving_pct, 1) == 5.0
    assert plan.action(need.action).rank > 1 and 1 in plan.action(need.action).unlocks
    attn = plan.actions[1]
    assert "demo.py(165): attn" in attn.where.frame and attn.inside == 1 and attn.severity == "high"


def test_severity_follows_the_ranking_on_real_traces():
    for p in (SAMPLE_TRACES / "hf-mixtral.decode_eager.json.gz", SAMPLE_TRACES / "demo-eager.decode.json.gz",
              shared_trace("thirdparty/tracelens__b200_eager_trace.json.gz")):
        a = analyze(load(p))
        _check_monotone(a)
        md = render_markdown([a])
        # the Markdown's plan lists the actions in that order with those severities
        got = [ln.split("\\[", 1)[1].split("\\]", 1)[0] for ln in md.splitlines()
               if ln[:1].isdigit() and "** \\[" in ln]
        assert got == [x.severity for x in a.plan.major]


# ------------------------------------------------------------------------------ item 7: device names
def test_device_named_from_the_one_properties_entry_when_ids_differ():
    """deviceProperties lists id 0 "AMD Instinct MI300X"; the kernels run on device 9."""
    s = Synth(device_name="AMD Instinct MI300X")
    s.launch(ts=5, dur=2, kernel="k", k_ts=10, k_dur=4, device=9)
    s.launch(ts=20, dur=2, kernel="k2", k_ts=30, k_dur=4, device=9)
    a = analyze(model_of(s))
    assert a.model.device_name(9) == "AMD Instinct MI300X"
    assert [d.name for d in a.devices] == ["AMD Instinct MI300X"]
    assert "**cuda:9** (AMD Instinct MI300X)" in render_markdown([a])
    assert build_json([a])["devices"][0]["name"] == "AMD Instinct MI300X"
    from gapscope.tui.scene import device_label

    assert device_label(a.model, 9) == "cuda:9 AMD Instinct MI300X"


def test_two_different_gpus_are_not_guessed():
    s = Synth()
    s.top["deviceProperties"].append({"id": 1, "name": "NVIDIA A100"})
    s.launch(ts=5, dur=2, kernel="k", k_ts=10, k_dur=4, device=9)
    a = analyze(model_of(s))
    assert a.model.device_name(9) is None and a.model.device_name(1) == "NVIDIA A100"


def test_mi300x_trace_names_its_device_everywhere():
    a = analyze(load(shared_trace("thirdparty/tracelens__sglang_Qwen3-8B_decode.json.gz")))
    assert [(d.device, d.name) for d in a.devices] == [(9, "AMD Instinct MI300X")]
    assert "**cuda:9** (AMD Instinct MI300X)" in render_markdown([a])
    assert [d["name"] for d in build_json([a])["devices"]] == ["AMD Instinct MI300X"]


def test_cause_order_has_stall_before_python_and_launch():
    assert CAUSES.index("allocator") < CAUSES.index("stall") < CAUSES.index("python") < CAUSES.index("launch")


# ------------------------------------------------------------------------------ the audit's own reading
def _audit():
    import importlib.util

    from tests.helpers import ROOT

    spec = importlib.util.spec_from_file_location("gapscope_audit_ta", ROOT / "benchmarks" / "audit.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_audit_recomputes_the_holder_of_a_stall(tmp_path):
    """benchmarks/audit.py's own sweep finds the same holder (name, own time, interval) for the slow driver call,
    and catches a changed figure, a changed name, and a stall relabelled as launch."""
    import copy
    import json
    import subprocess
    import sys

    from tests.helpers import ROOT

    audit = _audit()
    path = _slow_driver_call().write(tmp_path / "stall.json")
    out = subprocess.run([sys.executable, "-m", "gapscope", "report", "--json", "--top", "100000", str(path)],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    rep = json.loads(out.stdout)
    tr = audit.Trace(audit.read_trace(str(path)))
    key = ("1000", "1000")
    v, ns = audit.holder_in(tr, key, 100_000, 6_150_000)
    assert (v.name, ns) == ("cudaLaunchKernel", 6_002_000)

    def held(r):
        A = audit.audit_report(str(path), tr, r, "t")
        return A, [m for m in A.mismatches if "held" in m]

    A, bad = held(rep)
    assert bad == [] and A.mismatches == []
    f = next(f for f in rep["findings"] if f["cause"] == "stall")
    hb = f["evidence"]["examples"][0]["held_by"]
    assert (hb["name"], hb["self_us"], hb["of_us"], hb["launch_call"]) == ("cudaLaunchKernel", 6002.0, 6050.0, False)
    r2 = copy.deepcopy(rep)
    next(f for f in r2["findings"] if f["cause"] == "stall")["evidence"]["examples"][0]["held_by"]["self_us"] = 5002.0
    assert any("held_by self_us" in m for m in held(r2)[1])
    r3 = copy.deepcopy(rep)
    next(f for f in r3["findings"] if f["cause"] == "stall")["evidence"]["examples"][0]["held_by"]["name"] = "aten::topk"
    assert any("held_by name" in m for m in held(r3)[1])
    r4 = copy.deepcopy(rep)
    ex = next(f for f in r4["findings"] if f["cause"] == "stall")["evidence"]["examples"][0]
    ex["cause"] = "launch"
    del ex["held_by"]
    next(f for f in r4["findings"] if f["cause"] == "stall")["evidence"]["cause"] = "launch"
    assert any("launch gap held by no one call" in m for m in held(r4)[1])
