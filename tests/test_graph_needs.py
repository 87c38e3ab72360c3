"""The graph what-if of a step whose host reads GPU values (replay.fixes.host_reads, graph_needs): it names the
reads, and the plan writes the fix that removes them inside the graph action as what it needs first; a step
without reads gets a graph action with nothing first."""

from __future__ import annotations

from pathlib import Path

from gapscope.analysis import analyze
from gapscope.analysis.replay.fixes import host_reads
from gapscope.analysis.replay.model import Replay
from gapscope.trace import load
from gapscope.trace.model import Kind

TRACES = Path(__file__).resolve().parent.parent / "traces"
MIXTRAL = "transformers/models/mixtral/modeling_mixtral.py(69): forward"


def _reads_from_events(a) -> int:
    """Independent count: the cudaStreamSynchronize calls inside the measured steps whose outermost enclosing op
    (parent chain of aten ops) launched a device-to-host copy before them."""
    m = a.model
    steps = [i for i in range(m.n) if m.kind[i] == int(Kind.ANNOTATION) and m.name(i).startswith("gapscope.step#")]
    lo = min(int(m.ts_ns[i]) for i in steps)
    hi = max(int(m.ts_ns[i] + m.dur_ns[i]) for i in steps)
    d2h = [int(m.launch[i]) for i in range(m.n) if m.kind[i] == int(Kind.MEMCPY) and "DtoH" in m.name(i)]
    n = 0
    for i in range(m.n):
        if m.name(i) != "cudaStreamSynchronize" or not lo <= m.ts_ns[i] < hi:
            continue
        top, cur = i, int(m.parent[i])
        while cur >= 0 and m.kind[cur] == int(Kind.CPU_OP):
            top, cur = cur, int(m.parent[cur])
        t0, t1 = int(m.ts_ns[top]), int(m.ts_ns[top] + m.dur_ns[top])
        n += any(m.track[c] == m.track[i] and t0 <= m.ts_ns[c] < m.ts_ns[i] for c in d2h)
    return n


def test_mixtral_eager_graph_fix_comes_after_the_fixes_of_its_syncs():
    a = analyze(load(str(TRACES / "hf-mixtral.decode_eager.json.gz")))
    pj = a.projection
    r = Replay(a.model, a.window, a.flags)
    # 64 where and 32 nonzero (an expert loop sized by nonzero), 192 item, 64 is_nonzero (a Python if on a tensor)
    assert host_reads(a, r) == {MIXTRAL: 352} and _reads_from_events(a) == 352
    assert pj.what["launch-1"] == (
        f"the step as one CUDA graph replay; it needs the 352 syncs of `{MIXTRAL}` removed first: the host reads "
        "their values, which a CUDA graph cannot capture")
    # four fixes of the same reads: any one of them does
    assert pj.after == {"launch-1": [["sync-1", "python-2", "python-17", "pattern-1"]]}
    # the plan: the step as one CUDA graph (−84.9%) leads; inside it, first, the experts loop vectorised (its frame
    # as one fused call, −48.9% alone, carried by the loop's own finding), which is also an action of its own that
    # the graph action needs; the loop never leads at the graph's figure (it did before the plan)
    plan = a.plan
    top = plan.actions[0]
    assert top.kind == "cuda-graph" and round(top.saving_pct, 1) == 84.9 and "launch-1" in top.findings
    need = top.needs[0]
    assert need.findings == ("pattern-1",) and round(need.saving_pct, 1) == 48.9
    loop = plan.action(need.action)
    assert loop.kind == "vectorise-loop" and loop.findings[0] == "pattern-1" and 1 in loop.unlocks
    assert {"sync-1", "python-2"} <= set(loop.findings)
    assert round(pj.saving_pct("launch-1"), 1) == 84.9 and round(pj.best_pct("pattern-1"), 1) == 48.9
    assert {pj.ranked_with(f) for f in ("sync-1", "python-2", "python-17", "pattern-1")} == {"pattern-1"}
    assert round(pj.best_pct("sync-1"), 1) == 6.7 and pj.best_pct("python-17") == 0.0


def test_a_step_without_host_reads_keeps_its_graph_finding_first():
    # demo-eager.decode against demo-graph.decode is a measured pair (74.5%)
    a = analyze(load(str(TRACES / "demo-eager.decode.json.gz")))
    pj = a.projection
    assert host_reads(a, Replay(a.model, a.window, a.flags)) == {}
    assert pj.what["launch-1"] == "the step as one CUDA graph replay" and pj.after == {}
    assert a.plan.actions[0].kind == "cuda-graph" and a.plan.actions[0].findings[0] == "launch-1"
    assert a.plan.actions[0].needs == ()


def test_demo_sync_check_graph_fix_needs_the_item_reads():
    a = analyze(load(str(TRACES / "demo-eager-sync.decode.json.gz")))
    pj = a.projection
    assert host_reads(a, Replay(a.model, a.window, a.flags)) == {"capture/demo.py(51): _inject_sync_check": 32}
    assert _reads_from_events(a) == 32
    assert pj.after == {"launch-1": [["sync-1"]]}
    # the plan: the graph leads, the check's reads written inside it as what it needs first
    top = a.plan.actions[0]
    assert top.kind == "cuda-graph" and [n.findings for n in top.needs] == [("sync-1",)]


def test_a_frame_shared_by_several_findings_ranks_one_of_them():
    """hf-mixtral.decode_eager: four findings lie under `(69): forward` (the experts loop). Its what-if as one fused
    call (−48.9%) is one fix: the loop's own finding carries it; `activations.py(102): forward`, whose own fix saves
    0 ns, is no action and reads [info] (it read [high] when each of the four was ranked by the shared what-if); the
    Markdown names the action each finding belongs to."""
    from gapscope.report.jsonout import build_json
    from gapscope.report.markdown import render_markdown

    a = analyze(load(str(TRACES / "hf-mixtral.decode_eager.json.gz")))
    pj, plan = a.projection, a.plan
    act = next(f for f in a.findings if "activations.py(102): forward" in f.title)
    assert pj.frame_of[act.id] == MIXTRAL and pj.ranked_with(act.id) == "pattern-1"
    assert pj.saving_ns[act.id] == 0 and plan.severity_of[act.id] == "info" and act.id not in plan.rank_of
    # every [high] finding is high by its action's saving, of at least 10% of the step
    highs = [fid for fid, sv in plan.severity_of.items() if sv == "high"]
    assert highs and all(plan.action(plan.rank_of[fid]).saving_pct >= 10 for fid in highs)
    md = render_markdown([a], 50, minor=True)  # --all: every finding in full
    k = plan.rank_of["python-2"]
    line = next(ln for ln in md.splitlines() if "(python-2)" in ln)
    assert line.startswith(f"- **action {k} · ") and plan.rank_of["pattern-1"] == k
    doc = build_json([a])
    e = next(f for f in doc["findings"] if f["id"] == act.id)
    assert e["frame_whatif"]["ranked_with"] == "pattern-1" and e["severity"] == "info" and e["rank"] is None


