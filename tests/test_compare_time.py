"""Before/after verdict in un-profiled step time (gapscope/analysis/compare/steptime.py): synthetic pairs whose metadata is
written by hand (per-step figures, spreads, verdicts computed here), and the real-client pairs in traces/ against
the un-profiled times in their own metadata (traces/README.md, last section)."""

from __future__ import annotations

import gzip
import json

import jsonschema
import pytest

from tests.helpers import A_STEP, B_STEP, SAMPLE_TRACES, model_of, stepped
from gapscope.analysis import analyze
from gapscope.analysis.compare import compare


def _timed(steps, meta, **kw):
    s = stepped(steps, **kw)
    if meta is not None:
        s.top["gapscope"] = meta
    return analyze(model_of(s))


def _meta(active, profiled, lo, p25, med, p75, hi, n=8, **extra):
    return {"active": active, "profiled_us": profiled, "unprofiled_us": med,
            "unprofiled": {"min_us": lo, "p25_us": p25, "median_us": med, "p75_us": p75, "max_us": hi, "n": n},
            **extra}


# A: 2 steps, 200 µs un-profiled (100 per step, p25-p75 95-105), profiled 300 µs: 1.5x.
# B: 4 steps, 240 µs un-profiled (60 per step, p25-p75 55-65), profiled 480 µs: 2.0x.
META_A = _meta(2, 300.0, 180.0, 190.0, 200.0, 210.0, 260.0, captured_at="T1", argv=["run"], phase="before")
META_B = _meta(4, 480.0, 200.0, 220.0, 240.0, 260.0, 300.0, captured_at="T1", argv=["run"], phase="after")


def test_profiled_idle_rises_while_the_unprofiled_step_falls():
    a = _timed([A_STEP] * 2, META_A)
    b = _timed([B_STEP] * 4, META_B, frame="app.py(9): other")
    c = compare(a, b)
    # profiled GPU idle per step rises (test_compare: 35 -> 37.5 µs) ...
    assert (c.a.idle_us_per_step, c.b.idle_us_per_step) == pytest.approx((35.0, 37.5))
    # ... while the step without the profiler falls from 100 to 60 µs: -40 µs, -40%; 55-65 lies below 95-105
    sv = c.step
    assert (sv.basis, sv.stands_in, sv.missing) == ("unprofiled", None, None)
    assert (sv.a.us, sv.a.p25_us, sv.a.p75_us, sv.a.min_us, sv.a.max_us) == pytest.approx((100, 95, 105, 90, 130))
    assert (sv.b.us, sv.b.p25_us, sv.b.p75_us, sv.b.min_us, sv.b.max_us) == pytest.approx((60, 55, 65, 50, 75))
    assert (sv.a.active, sv.b.active, sv.a.n) == (2, 4, 8)
    assert sv.delta_us == pytest.approx(-40.0) and sv.delta_pct == pytest.approx(-40.0)
    assert (sv.verdict, sv.overlap, sv.same_run) == ("faster", False, True)
    # distortions 1.5x and 2.0x differ by 1.33x > 1.15x: profiled idle does not compare
    assert sv.distortion_differs and sv.warnings == [
        "the profiler slowed A 1.50x and B 2.00x: their profiled idle and GPU span do not compare (B's are "
        "inflated more); the un-profiled step time does"]
    assert sv.headline() == "step 100.0 µs → 60.0 µs un-profiled (−40.0%; p25–p75 95.0–105.0 µs → 55.0–65.0 µs): faster"
    assert sv.headline(lead=True).startswith("faster: step 100.0 µs → 60.0 µs un-profiled (")


def test_the_report_and_json_open_with_the_unprofiled_verdict():
    from gapscope.report import build_json, render_markdown, schema_text

    a = _timed([A_STEP] * 2, META_A)
    b = _timed([B_STEP] * 4, META_B, frame="app.py(9): other")
    md = render_markdown([a, b])
    body = md.split("## What changed\n\n", 1)[1].splitlines()
    assert body[0] == r"- **step 100.0 µs → 60.0 µs un-profiled (−40.0%; p25–p75 95.0–105.0 µs → 55.0–65.0 µs): faster**."
    assert body[1].startswith("- ⚠ the profiler slowed A 1.50x and B 2.00x")
    assert body[2].startswith("- kernel time per step: ")
    assert body[3].startswith("- GPU span per step (profiled): ") and "GPU idle per step: 35.0 µs → 37.5 µs (+2.5 µs" \
        in body[3]
    assert "| step time, un-profiled (median) | 100.0 µs | 60.0 µs | −40.0 µs (−40%) |" in md
    doc = json.loads(json.dumps(build_json([a, b])))
    jsonschema.validate(doc, json.loads(schema_text()))
    u = doc["comparison"]["unprofiled"]
    assert (u["basis"], u["verdict"], u["delta_us"], u["delta_pct"], u["overlap"]) == ("unprofiled", "faster", -40.0,
                                                                                        -40.0, False)
    assert (u["a"]["step_us"], u["a"]["p25_us"], u["a"]["p75_us"], u["a"]["active"], u["a"]["distortion"]) == \
        (100.0, 95.0, 105.0, 2, 1.5)
    assert (u["b"]["step_us"], u["b"]["p25_us"], u["b"]["p75_us"], u["b"]["active"], u["b"]["distortion"]) == \
        (60.0, 55.0, 65.0, 4, 2.0)
    assert u["distortion_differs"] is True and u["same_run"] is True and u["headline"] in md


def test_overlapping_spreads_are_no_clear_change():
    # B per step 97.5 (p25-p75 92.5-102.5) against A's 95-105: -2.5%, the ranges overlap
    b_meta = _meta(4, 585.0, 360.0, 370.0, 390.0, 410.0, 420.0)
    c = compare(_timed([A_STEP] * 2, META_A), _timed([B_STEP] * 4, b_meta))
    sv = c.step
    assert sv.delta_us == pytest.approx(-2.5) and sv.delta_pct == pytest.approx(-2.5)
    assert (sv.verdict, sv.overlap, sv.distortion_differs, sv.warnings) == ("no clear change", True, False, [])
    assert sv.headline().endswith("): no clear change (the p25–p75 ranges overlap)")
    assert sv.same_run is None  # no captured_at in B: unknown, no note


def test_a_profiled_step_time_stands_in_without_unprofiled_times():
    # B has no metadata: both sides use the profiled CPU step ranges (A 2 x 55 µs, B 4 x 53 µs; see test_compare's
    # stepped: a step runs from the end of the previous step's last kernel to the end of its own)
    c = compare(_timed([A_STEP] * 2, META_A), _timed([B_STEP] * 4, None))
    sv = c.step
    assert (sv.basis, sv.missing, sv.a.basis, sv.a.source) == ("profiled", "B", "profiled", "steps")
    assert sv.stands_in == ("profiled step time (the CPU step ranges) stands in: B has no un-profiled time "
                            "(gapscope capture records one)")
    assert (sv.a.us, sv.b.us, sv.a.n, sv.b.n) == pytest.approx((55.0, 53.0, 2, 4))
    # only B has 4 steps for a spread: the 3% rule decides; -2/55 = -3.6%
    assert (sv.a.has_spread, sv.b.has_spread, sv.overlap) == (False, True, None)
    assert sv.delta_pct == pytest.approx(-200 / 55) and sv.verdict == "faster"
    assert sv.headline() == "step 55.0 µs → 53.0 µs profiled (−3.6%; no un-profiled time in B): faster"
    assert not sv.distortion_differs  # B's distortion is unknown
    from gapscope.report import render_markdown

    md = render_markdown([c_a := _timed([A_STEP] * 2, META_A), _timed([B_STEP] * 4, None)])
    assert c_a is not None and "- ⚠ profiled step time (the CPU step ranges) stands in: B has no un-profiled" in md
    assert "| step time, profiled (no un-profiled time) | 55.0 µs | 53.0 µs | −2.0 µs (−4%) |" in md


def test_neither_trace_timed_and_a_trace_without_step_ranges():
    # neither has metadata; B has no step ranges: its window (first kernel start to last kernel end: 4 x 53 µs less
    # the first step's 10 µs before its first kernel = 202 µs) is its one step
    a = _timed([A_STEP] * 2, None)
    s = stepped([B_STEP] * 4)
    s.events = [e for e in s.events if not str(e.get("name", "")).startswith("gapscope.step#")]
    b = analyze(model_of(s))
    sv = compare(a, b).step
    assert (sv.missing, sv.a.source, sv.b.source, sv.b.n) == ("both", "steps", "window", 1)
    assert sv.b.us == pytest.approx(202.0)
    assert sv.stands_in == ("profiled step time (A: the CPU step ranges, B: the analysis window) stands in: "
                            "neither trace has an un-profiled time (gapscope capture records one)")
    assert (sv.verdict, sv.delta_us) == ("slower", pytest.approx(147.0))
    assert "no un-profiled time in either trace" in sv.headline()


def test_a_change_under_three_percent_without_spreads_is_no_clear_change():
    meta = {"active": 2, "profiled_us": 300.0, "unprofiled_us": 200.0}  # no spread: older captures
    b_meta = {"active": 4, "profiled_us": 600.0, "unprofiled_us": 396.0}  # 99 per step: -1%
    sv = compare(_timed([A_STEP] * 2, meta), _timed([B_STEP] * 4, b_meta)).step
    assert (sv.basis, sv.a.us, sv.b.us, sv.overlap) == ("unprofiled", 100.0, 99.0, None)
    assert sv.verdict == "no clear change" and sv.headline() == "step 100.0 µs → 99.0 µs un-profiled (−1.0%): no clear change"


# ----------------------------------------------------------------------------------------------- real pairs
def _meta_of(name):
    p = SAMPLE_TRACES / f"{name}.json.gz"
    assert p.is_file(), p  # in the repository: missing is a failure
    with gzip.open(p) as f:
        return json.load(f)["gapscope"]


def _analysis(name):
    from gapscope.trace import load

    return analyze(load(str(SAMPLE_TRACES / f"{name}.json.gz")))


PAIRS = [("hf-attn.prefill_eager", "hf-attn.prefill_sdpa"), ("resnet50.fp32", "resnet50.bf16_cl"),
         ("hf-mixtral.decode_eager", "hf-mixtral.decode_batched"), ("hf-sampling.decode_host", "hf-sampling.decode_gpu"),
         ("demo-eager-sync.decode", "demo-eager.decode")]


@pytest.mark.parametrize("pair", PAIRS, ids=[p[0] for p in PAIRS])
def test_real_pairs_say_faster_the_way_the_unprofiled_times_do(pair):
    from gapscope.report import build_json, render_markdown

    a, b = (_analysis(n) for n in pair)
    ma, mb = (_meta_of(n) for n in pair)
    # the expectation from the raw metadata: median / active, and B's p25-p75 wholly below A's
    per = lambda m, k: m["unprofiled"][k] / m["active"]  # noqa: E731
    assert per(mb, "p75_us") < per(ma, "p25_us")
    want = 100.0 * (per(mb, "median_us") - per(ma, "median_us")) / per(ma, "median_us")
    sv = compare(a, b).step
    assert (sv.basis, sv.verdict) == ("unprofiled", "faster")
    assert sv.delta_pct == pytest.approx(want, abs=1e-6)
    assert (sv.a.us, sv.b.us) == pytest.approx((per(ma, "median_us"), per(mb, "median_us")))
    assert sv.same_run is _one_run_by_the_files(*pair)
    md = render_markdown([a, b]).split("## What changed\n\n", 1)[1]
    assert md.startswith(f"- **step ") and md.splitlines()[0].endswith(": faster**.")
    u = build_json([a, b])["comparison"]["unprofiled"]
    assert u["verdict"] == "faster" and u["delta_pct"] == pytest.approx(want, abs=1e-3)


def test_resnet_bf16_is_faster_although_its_profiled_idle_grew_19x():
    a, b = _analysis("resnet50.fp32"), _analysis("resnet50.bf16_cl")
    c = compare(a, b)
    assert c.b.idle_us_per_step > 10 * c.a.idle_us_per_step  # what the report opened with before
    sv = c.step
    # traces/README.md: 11.78 -> 4.219 ms, 64.2% saved; distortion 1.02x against 2.05x
    assert round(sv.a.us / 1e3, 2) == 11.78 and round(sv.b.us / 1e3, 3) == 4.219 and round(sv.delta_pct, 1) == -64.2
    assert sv.distortion_differs and sv.warnings[0].startswith("the profiler slowed A 1.02x and B 2.05x")
    assert sv.same_run is True and sv.notes == []


def test_pairs_of_different_runs_say_so():
    c = compare(_analysis("demo-eager-sync.decode"), _analysis("demo-eager.decode"))
    assert c.step.same_run is False
    assert any(n.startswith("A and B were timed un-profiled in different capture runs") for n in c.step.notes)


def test_the_diff_header_shows_the_same_verdict():
    import asyncio

    from gapscope.tui.diffapp import DiffApp
    from tests.helpers.app import diff_ready
    from gapscope.tui.textdump import screen_text

    pair = [str(SAMPLE_TRACES / f"{n}.json.gz") for n in ("hf-attn.prefill_eager", "hf-attn.prefill_sdpa")]
    ma, mb = (_meta_of(n) for n in ("hf-attn.prefill_eager", "hf-attn.prefill_sdpa"))
    pct = 100.0 * (mb["unprofiled"]["median_us"] - ma["unprofiled"]["median_us"]) / ma["unprofiled"]["median_us"]

    async def go():
        app = DiffApp(*pair, load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24)) as pilot:
            await diff_ready(pilot)
            return screen_text(app), app.screen.scene.cmp

    txt, c = asyncio.run(go())
    line = txt.splitlines()[1]
    # verdict first, so that 80 columns keep it; the rest is the report's headline, cut to the width
    assert line.startswith("faster: step 6.17 ms → 5.34 ms un-profiled (" + f"{pct:+.1f}%; ".replace("-", "−")), line
    head = c.step.headline(lead=True)
    assert line.rstrip("…") == head[:len(line.rstrip("…"))] and len(line) <= 80
    assert c.step.headline().endswith(": faster")


# ----------------------------------------------------------------------------------------------- same capture run
# (A, B, one `gapscope capture run`?): the before/after pairs of traces/ and the three pairs of hf-llama's one run,
# whose generate window (a second before the others) gave it another captured_at. demo-eager and demo-graph time
# the same phases under different command lines: two runs.
SAME_RUN_PAIRS = [("hf-attn.prefill_eager", "hf-attn.prefill_sdpa", True),
                  ("hf-mlp.prefill_i5633", "hf-mlp.prefill_i5632", True),
                  ("hf-sampling.decode_host", "hf-sampling.decode_gpu", True),
                  ("hf-mixtral.decode_eager", "hf-mixtral.decode_batched", True),
                  ("resnet50.fp32", "resnet50.bf16_cl", True),
                  ("hf-llama.generate", "hf-llama.prefill", True), ("hf-llama.generate", "hf-llama.decode", True),
                  ("hf-llama.prefill", "hf-llama.decode", True),
                  ("demo-eager.decode", "demo-graph.decode", False),
                  ("demo-eager-sync.decode", "demo-eager.decode", False)]


def _raw_run(name):
    """What the trace file itself says about its run, read here without gapscope: the capture's metadata, the
    process ids of its CPU events and its window on the wall clock (baseTimeNanoseconds + ts), in ns."""
    with gzip.open(SAMPLE_TRACES / f"{name}.json.gz") as f:
        d = json.load(f)
    xs = [e for e in d["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    pids = {e["pid"] for e in xs if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime")}
    base = d.get("baseTimeNanoseconds", 0)
    window = (base + min(e["ts"] for e in xs) * 1e3, base + max(e["ts"] + e.get("dur", 0) for e in xs) * 1e3)
    return d["gapscope"], pids, window


def _one_run_by_the_files(a, b) -> bool:
    (ma, pa, wa), (mb, pb, wb) = _raw_run(a), _raw_run(b)
    la, lb = ma["unprofiled"]["interleaved"], mb["unprofiled"]["interleaved"]
    first, then = sorted((wa, wb))
    timed_ns = 1e3 * (sum(ma["unprofiled_samples_us"]) + sum(mb["unprofiled_samples_us"]))
    return (la == lb and ma["phase"] in lb and mb["phase"] in la and ma["phase"] != mb["phase"]
            and all(ma[k] == mb[k] for k in ("name", "argv", "workload"))
            and len(ma["unprofiled_samples_us"]) == len(mb["unprofiled_samples_us"])
            and pa == pb and 0 <= then[0] - first[1] < timed_ns)


@pytest.mark.parametrize("a,b,one_run", SAME_RUN_PAIRS, ids=[f"{a}-{b}" for a, b, _ in SAME_RUN_PAIRS])
def test_phases_of_one_capture_run_are_same_run(a, b, one_run):
    # the files agree with the table: each names the other's phase in its interleaved list, same command and
    # process, and the two windows lie closer together than a second run's timing of both phases would take
    assert _one_run_by_the_files(a, b) is one_run
    if one_run:
        (ma, pa, _), (mb, _, _) = _raw_run(a), _raw_run(b)
        assert len(pa) == 1 and ma["captured_at"][:15] == mb["captured_at"][:15]  # one process, the same minute
    for x, y in ((a, b), (b, a)):
        sv = compare(_analysis(x), _analysis(y)).step
        assert sv.basis == "unprofiled" and sv.same_run is one_run
        noted = any(n.startswith("A and B were timed un-profiled in different capture runs") for n in sv.notes)
        assert noted is (not one_run)


def _run_meta(phase, **kw):
    """The metadata of one phase of a two-phase run (prefill, decode): 8 rounds, each sample 100 µs."""
    m = _meta(2, 300.0, 100.0, 100.0, 100.0, 100.0, 100.0, captured_at="2026-12-01T00:00:00Z", argv=["run", "x:y"],
              name="w", phase=phase, workload={"target": "x:y"}, unprofiled_samples_us=[100.0] * 8)
    m["unprofiled"]["interleaved"] = ["prefill", "decode"]
    for k, v in kw.items():
        if k == "interleaved":
            m["unprofiled"]["interleaved"] = v
        else:
            m[k] = v
    return m


def _phase_trace(meta, *, base_ns=0, pid=None):
    s = stepped([A_STEP] * 2)
    s.top["gapscope"] = meta
    s.top["baseTimeNanoseconds"] = base_ns
    if pid is not None:
        for e in s.events:
            if e.get("pid") == s.pid:
                e["pid"] = pid
    return analyze(model_of(s))


def test_same_run_needs_the_interleaved_lists_the_command_the_process_and_close_windows():
    # the synthetic windows span ~100-210 µs; both phases' samples add up to 1.6 ms
    def same(mb=None, base_b=1_000_000, pid_b=None, ma=None):
        a = _phase_trace(ma or _run_meta("prefill"))
        b = _phase_trace(mb or _run_meta("decode"), base_ns=base_b, pid=pid_b)
        return compare(a, b).step.same_run

    assert same() is True  # B's window ~0.9 ms after A's: no room for another run's 1.6 ms of timing
    assert same(base_b=2_000_000) is False  # 1.9 ms apart: another run (a process id can come back) fits between
    assert same(base_b=0) is False  # the windows overlap: not one process recording one phase after the other
    assert same(pid_b=4242) is False  # another process
    assert same(mb=_run_meta("decode", argv=["run", "x:y", "--active", "4"])) is False  # another command line
    assert same(mb=_run_meta("decode", name="v")) is False
    assert same(mb=_run_meta("decode", unprofiled_samples_us=[100.0] * 7)) is False  # not the same rounds
    assert same(mb=_run_meta("decode", interleaved=["decode", "generate"])) is False  # other rounds
    assert same(mb=_run_meta("decode", interleaved=[])) is False  # a run of one phase
    assert same(mb=_run_meta("prefill")) is False  # one phase twice: two runs
    assert same(mb=_run_meta("decode", rank=1), ma=_run_meta("prefill", rank=0)) is None  # two ranks: not asked
    assert same(mb={k: v for k, v in _run_meta("decode").items() if k != "captured_at"}) is None  # no capture's
    # captures older than the interleaved rounds: the same captured_at and argv, as they always were read
    old = lambda ph, at: {k: v for k, v in _run_meta(ph, captured_at=at).items() if k != "unprofiled"}  # noqa: E731
    assert same(ma=old("prefill", "T1"), mb=old("decode", "T1"), base_b=10**12) is True
    assert same(ma=old("prefill", "T1"), mb=old("decode", "T2")) is False
