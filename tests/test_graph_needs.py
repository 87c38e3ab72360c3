"""The graph what-if of a step whose host reads GPU values (replay.fixes.host_reads, graph_needs): it names the
reads and the findings that remove them, and ranks after those (Projection.ranked); a step without reads keeps
its graph finding first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from gapscope.analysis import analyze
from gapscope.analysis.replay.fixes import host_reads
from gapscope.analysis.replay.model import Replay
from gapscope.analysis.replay.result import Projection
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
    assert pj.ranked(a.findings)[0].id == "launch-1"


def test_demo_sync_check_graph_fix_needs_the_item_reads():
    a = analyze(load(str(TRACES / "demo-eager-sync.decode.json.gz")))
    pj = a.projection
    assert host_reads(a, Replay(a.model, a.window, a.flags)) == {"capture/demo.py(51): _inject_sync_check": 32}
    assert _reads_from_events(a) == 32
    assert pj.after == {"launch-1": [["sync-1"]]}
    ranked = [f.id for f in pj.ranked(a.findings)]
    assert ranked.index("launch-1") == ranked.index("sync-1") + 1


def _f(fid):
    return SimpleNamespace(id=fid)


def test_ranked_moves_a_finding_behind_what_it_needs():
    p = Projection()
    p.saving_ns = {"g": 900, "a": 500, "b": 400, "c": 300, "d": None}
    fs = [_f(x) for x in ("d", "c", "b", "a", "g")]
    assert [f.id for f in p.ranked(fs)] == ["g", "a", "b", "c", "d"]
    # two groups: b (alone) and one of c, a (a: the larger figure of its own). Both rank with what they unlock (g's
    # 900, ties in the findings' order) and g comes right behind the later of them
    p.after = {"g": [["b"], ["c", "a"]]}
    assert p.unlocks(fs) == {"b": "g", "a": "g"}
    assert [f.id for f in p.ranked(fs)] == ["b", "a", "g", "c", "d"]
    # one group of alternatives: its member with the larger figure (b) ranks with g, g right behind it
    p.after = {"g": [["c", "b"]]}
    assert [f.id for f in p.ranked(fs)] == ["b", "g", "a", "c", "d"]
    # a group none of whose findings is listed (a subset, the findings view), or ranked below it already: no move
    assert [f.id for f in p.ranked([_f("g"), _f("a")])] == ["g", "a"]
    p.after = {"c": [["a"]]}
    assert [f.id for f in p.ranked(fs)] == ["g", "a", "b", "c", "d"]
    # without a saving of its own it stays behind the projected findings
    p.after = {"d": [["a"]]}
    assert [f.id for f in p.ranked(fs)] == ["g", "a", "b", "c", "d"]


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
    md = render_markdown([a], 50)
    k = plan.rank_of["python-2"]
    line = next(ln for ln in md.splitlines() if "(python-2)" in ln)
    assert line.startswith(f"- **action {k} · ") and plan.rank_of["pattern-1"] == k
    doc = build_json([a])
    e = next(f for f in doc["findings"] if f["id"] == act.id)
    assert e["frame_whatif"]["ranked_with"] == "pattern-1" and e["severity"] == "info" and e["rank"] is None


