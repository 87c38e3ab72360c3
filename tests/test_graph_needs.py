"""The graph what-if of a step whose host reads GPU values (replay.fixes.host_reads, graph_needs): it names the
reads and the findings that remove them, and ranks after those (Projection.ranked); a step without reads keeps
its graph finding first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from gapscope.tui.analysis import analyze
from gapscope.tui.analysis.replay.fixes import host_reads
from gapscope.tui.analysis.replay.model import Replay
from gapscope.tui.analysis.replay.result import Projection
from gapscope.tui.trace import load
from gapscope.tui.trace.model import Kind

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
        f"the step as one CUDA graph replay; it needs the 352 syncs of `{MIXTRAL}` (sync-1, python-2, python-17, "
        "pattern-1) removed first: the host reads their values, which a CUDA graph cannot capture")
    # four fixes of the same reads: any one of them does
    assert pj.after == {"launch-1": [["sync-1", "python-2", "python-17", "pattern-1"]]}
    ranked = [f.id for f in pj.ranked(a.findings)]
    # the graph fix keeps its figure (−84.9%) and ranks behind the first of those (sync-1, −48.9%: the experts loop
    # as one fused call); first is the MoE block as one fused call (−56.2%), which removes them too
    assert ranked[:5] == ["python-7", "sync-1", "launch-1", "python-2", "python-17"]
    assert round(pj.saving_pct("launch-1"), 1) == 84.9 and round(pj.best_pct("sync-1"), 1) == 48.9
    assert round(pj.best_pct("python-7"), 1) == 56.2


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
    # two groups: b (alone) and one of c, a: behind b, the later of b and a
    p.after = {"g": [["b"], ["c", "a"]]}
    assert [f.id for f in p.ranked(fs)] == ["a", "b", "g", "c", "d"]
    # one group of alternatives: behind its first-ranked member
    p.after = {"g": [["c", "b"]]}
    assert [f.id for f in p.ranked(fs)] == ["a", "b", "g", "c", "d"]
    # a group none of whose findings is listed (a subset, the findings view), or ranked below it already: no move
    assert [f.id for f in p.ranked([_f("g"), _f("a")])] == ["g", "a"]
    p.after = {"c": [["a"]]}
    assert [f.id for f in p.ranked(fs)] == ["g", "a", "b", "c", "d"]
    # without a saving of its own it stays behind the projected findings
    p.after = {"d": [["a"]]}
    assert [f.id for f in p.ranked(fs)] == ["g", "a", "b", "c", "d"]
