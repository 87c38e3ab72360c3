"""Before/after (gapscope/analysis/compare/__init__.py): synthetic pairs whose per-step deltas are written by hand, the
kernel-sequence alignment against a brute-force LCS, and the sample pairs in traces/."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import A_STEP, B_STEP, SAMPLE_TRACES, model_of, stepped
from tests.synth import Synth
from gapscope.analysis import analyze
from gapscope.trace.model import Kind
from gapscope.analysis.compare import compare, match_gaps
from gapscope.analysis.compare.align import align_names, lcs_pairs
from gapscope.analysis.compare.steps import find_steps


def pair(**kw):
    a = analyze(model_of(stepped([A_STEP] * 2, **kw)))
    b = analyze(model_of(stepped([B_STEP] * 4, frame="app.py(9): other", **kw)))
    return a, b


def test_causes_per_step_by_hand():
    a, b = pair()
    c = compare(a, b)
    assert (c.a.steps, c.b.steps) == (2, 4)
    # A: step#0 python 20 + launch 10 (its first kernel opens the window); step#1 launch 10 + python 20 + launch 10
    assert c.a.idle_by_step_us == pytest.approx([30.0, 40.0])
    # B: step#0 python 30; steps 1-3 launch 10 + python 30
    assert c.b.idle_by_step_us == pytest.approx([30.0, 40.0, 40.0, 40.0])
    assert c.a.idle_us_per_step == pytest.approx(35.0) and c.b.idle_us_per_step == pytest.approx(37.5)
    by = {d.cause: d for d in c.causes}
    assert set(by) == {"python", "launch"}
    py, la = by["python"], by["launch"]
    assert (py.a_idle_us_per_step, py.b_idle_us_per_step, py.per_step_delta_us) == pytest.approx((20.0, 30.0, 10.0))
    assert (py.a_count_per_step, py.b_count_per_step) == pytest.approx((1.0, 1.0))
    assert (la.a_idle_us_per_step, la.b_idle_us_per_step, la.per_step_delta_us) == pytest.approx((15.0, 7.5, -7.5))
    assert (la.a_count_per_step, la.b_count_per_step, la.count_delta_per_step) == pytest.approx((1.5, 0.75, -0.75))
    assert [d.cause for d in c.causes] == ["python", "launch"]  # biggest change first
    assert "A has 2 steps, B 4: numbers are per step" in c.notes


def test_kernels_per_step_by_hand():
    a, b = pair()
    c = compare(a, b)
    k = {d.name: d for d in c.kernels}
    assert (k["k1"].status, k["k1"].per_step_delta_us, k["k1"].count_delta_per_step) == ("both", 0.0, 0.0)
    assert (k["k2"].status, k["k2"].a_us_per_step, k["k2"].b_us_per_step) == ("gone", 5.0, 0.0)
    assert (k["k23"].status, k["k23"].b_us_per_step, k["k23"].per_step_delta_us) == ("new", 8.0, 8.0)
    assert k["k23"].b_count_per_step == 1.0 and k["k2"].count_delta_per_step == -1.0
    assert c.kernels[0].name == "k23"  # +8 µs per step is the biggest change


def test_kernels_matched_by_shape_too():
    a = analyze(model_of(stepped([[("mm", 10, "launch", 5.0, [[4, 8], [8, 8]])]] * 2)))
    b = analyze(model_of(stepped([[("mm", 10, "launch", 5.0, [[4, 8], [8, 16]])]] * 2)))
    c = compare(a, b)
    got = sorted((d.name, d.shapes, d.op, d.status) for d in c.kernels)
    assert got == [("mm", "[[4,8],[8,16]]", "aten::mm", "new"), ("mm", "[[4,8],[8,8]]", "aten::mm", "gone")]


def test_findings_new_gone_changed():
    a, b = pair()
    c = compare(a, b)
    st = {(d.cause, d.frame): d for d in c.findings if d.kind == ""}
    assert st[("python", "app.py(7): work")].status == "gone"
    assert st[("python", "app.py(9): other")].status == "new"
    assert st[("python", "app.py(9): other")].b_idle_us_per_step == pytest.approx(30.0)
    la = st[("launch", None)]
    assert la.status == "changed" and la.per_step_delta_us == pytest.approx(-7.5)
    # new and gone first, then changed; within a rank the larger change per step first (+30 µs before -20 µs)
    assert [(d.status, d.frame) for d in c.findings] == [("new", "app.py(9): other"), ("gone", "app.py(7): work"),
                                                          ("changed", None)]


def test_alignment_fused_added_removed():
    a, b = pair()
    al = compare(a, b).alignment
    assert (al.a_kernels, al.b_kernels, al.matched) == (3, 2, 1)
    assert [(h.kind, h.a0, h.a1, h.b0, h.b1) for h in al.hunks] == [("fused", 1, 3, 1, 2)]
    assert al.hunks[0].a_names == ["k2", "k3"] and al.hunks[0].b_names == ["k23"]
    _, hunks, _ = align_names(list("xabcy"), list("xacdy"))
    assert [(h.kind, h.a0, h.a1, h.b0, h.b1) for h in hunks] == [("removed", 2, 3, 2, 2), ("added", 4, 4, 3, 4)]
    _, hunks, _ = align_names(["a", "b"], ["c", "d", "a", "b"])
    assert [(h.kind, h.b0, h.b1) for h in hunks] == [("added", 0, 2)]
    _, hunks, _ = align_names(["a", "b", "c"], ["a", "x", "y", "c"])
    assert [h.kind for h in hunks] == ["replaced"]


def _lcs_len(x, y) -> int:
    L = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
    for i in range(len(x)):
        for j in range(len(y)):
            L[i + 1][j + 1] = L[i][j] + 1 if x[i] == y[j] else max(L[i][j + 1], L[i + 1][j])
    return L[-1][-1]


def test_lcs_pairs_against_brute_force():
    rng = np.random.default_rng(17)
    for _ in range(300):
        n, m = rng.integers(0, 25, 2)
        k = int(rng.integers(1, 5))
        x, y = rng.integers(0, k, n), rng.integers(0, k, m)
        p = lcs_pairs(x, y)
        assert len(p) == _lcs_len(x.tolist(), y.tolist())
        if len(p):
            assert (np.diff(p[:, 0]) > 0).all() and (np.diff(p[:, 1]) > 0).all()
            assert (x[p[:, 0]] == y[p[:, 1]]).all()


def test_new_gaps_in_b():
    a, b = pair()
    c = compare(a, b)
    gm = match_gaps(a, b, c)
    nxt = [b.model.name(int(b.gaps.next_idx[r])) for r in gm.b_rows.tolist()]
    new = sorted(n for n, f in zip(nxt, gm.new.tolist()) if f)
    old = sorted(n for n, f in zip(nxt, gm.new.tolist()) if not f)
    assert new == ["k23"] * 4  # the fused kernel is not aligned with anything in A
    assert old == ["k1"] * 3  # k1's gaps match A's (step 1, 2, 3 against A's step 1)
    for r, ar in zip(gm.b_rows.tolist(), gm.a_rows.tolist()):
        if ar >= 0:
            assert a.model.name(int(a.gaps.next_idx[ar])) == "k1"


def test_profiler_steps_and_window_fallback():
    a = analyze(model_of(stepped([A_STEP] * 2, profiler_steps=True)))
    st = find_steps(a)
    assert st.source == "ProfilerStep" and st.names == ["ProfilerStep#7", "ProfilerStep#8"]
    s = Synth()
    s.launch(ts=0, dur=2, kernel="a", k_ts=10, k_dur=5)
    s.launch(ts=20, dur=2, kernel="b", k_ts=40, k_dur=5)
    w = analyze(model_of(s))
    c = compare(a, w)
    assert c.b.steps == 1 and c.b.source == "window"
    assert any(n.startswith("B: no step ranges") for n in c.notes)
    assert c.b.idle_us_per_step == pytest.approx(25.0)  # 15 .. 40


def _sample(name):
    p = SAMPLE_TRACES / name
    assert p.is_file(), p  # in the repository: missing is a failure
    from gapscope.trace import load

    return analyze(load(str(p), no_cache=True))


def test_sample_eager_vs_eager_python():
    a, b = _sample("demo-eager.decode.json.gz"), _sample("demo-eager-python.decode.json.gz")
    c = compare(a, b)
    assert (c.a.steps, c.b.steps) == (4, 4) and c.notes == []
    # the same model: the same 170 kernels per token, in the same order
    assert c.a.kernels_by_step == [170] * 4 and c.b.kernels_by_step == [170] * 4
    assert c.alignment.matched == 170 and c.alignment.hunks == []
    py = next(d for d in c.causes if d.cause == "python")
    # per step = the report's cause totals over the 4 steps (each trace's gaps all fall in its steps)
    ta, tb = a.cause_totals()["python"]["total_ns"], b.cause_totals()["python"]["total_ns"]
    assert py.per_step_delta_us == pytest.approx((tb - ta) / 4 / 1e3)
    new = [d for d in c.findings if d.status == "new"]
    assert [(d.cause, d.frame) for d in new] == [("python", "capture/demo.py(101): _host_bookkeeping")]
    assert all(d.status == "both" for d in c.kernels)


def test_sample_eager_vs_graph():
    a, b = _sample("demo-eager.decode.json.gz"), _sample("demo-graph.decode.json.gz")
    c = compare(a, b)
    assert {"launch", "python", "gpu-wait"} <= {d.cause for d in c.causes}
    # the graph replay's gaps are the GPU's own dispatch between queued nodes: gpu-wait, not launch
    gw = next(d for d in c.causes if d.cause == "gpu-wait")
    assert gw.b_idle_us_per_step > gw.a_idle_us_per_step
    py = next(d for d in c.causes if d.cause == "python")
    assert py.b_idle_us_per_step == 0 and py.per_step_delta_us < 0
    assert c.b.idle_us_per_step < c.a.idle_us_per_step / 20  # graph replay: the GPU is seldom idle
    al = c.alignment
    assert al.matched == al.a_kernels == 170 and al.b_kernels == 172
    assert {h.kind for h in al.hunks} == {"added"}
    # graph replays record no launching op (no shapes): their kernels are matched by name alone
    assert {d.name for d in c.kernels if d.status != "both"} == {"memcpy32_post"}


def test_sample_prefill_vs_decode_is_per_step():
    a, b = _sample("demo-eager.prefill.json.gz"), _sample("demo-eager.decode.json.gz")
    c = compare(a, b)
    assert (c.a.steps, c.b.steps) == (1, 4)
    la = next(d for d in c.causes if d.cause == "launch")
    ta, tb = a.cause_totals()["launch"]["total_ns"], b.cause_totals()["launch"]["total_ns"]
    assert la.per_step_delta_us == pytest.approx((tb / 4 - ta) / 1e3)
    assert abs(la.per_step_delta_us) < (tb - ta) / 1e3 / 2  # not the 4-step total against 1 step


def test_compare_on_shared_traces_against_a_sample(shared_traces):
    """Third-party traces (ProfilerStep ranges, no steps, no kernels, CPU only) against a sample, both ways: the
    steps come from where they should, and the two-trace JSON report validates."""
    import json

    import jsonschema

    from tests.helpers import SCHEMA_PATH
    from gapscope.report import build_json
    from gapscope.trace import load

    schema = json.loads(SCHEMA_PATH.read_text())
    ref = _sample("demo-graph.decode.json.gz")
    seen = set()
    for p in sorted(shared_traces.glob("*/*")):
        if p.suffix == ".md":
            continue
        a = analyze(load(str(p), no_cache=True))
        c = compare(a, ref)
        m = a.model
        has_pstep = any(n.startswith("ProfilerStep#") for n in m.names)
        assert c.a.source == ("ProfilerStep" if has_pstep else "window"), p.name
        seen.add(c.a.source)
        if a.window.mode == "all":  # every kernel of the trace is in one of its steps
            assert sum(c.a.kernels_by_step) == int((m.kind == Kind.KERNEL).sum()), p.name
        compare(ref, a)
        jsonschema.validate(json.loads(json.dumps(build_json([a, ref]))), schema)
    assert seen == {"ProfilerStep", "window"}


def test_report_says_which_gaps_of_b_are_new():
    from gapscope.report import build_json, render_markdown

    a, b = pair()
    g = build_json([a, b])["comparison"]["gaps"]
    assert (g["b_listed"], g["new_in_b"], g["matched"]) == (7, 4, 3)
    assert [(e["dur_us"], e["cause"], e["next_kernel"]) for e in g["new"]] == [(30.0, "python", "k23")] * 4
    assert [e["step"] for e in g["new"]] == [f"gapscope.step#{k}" for k in range(4)]
    md = render_markdown([a, b])
    assert ("- gaps of B: 7 listed, 4 new (no listed gap of A at the same place in the aligned kernel sequence); "
            "the largest new one: 30.0 µs python before `k23`.") in md
