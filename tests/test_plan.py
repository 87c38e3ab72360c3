"""The plan of actions (gapscope/analysis/plan.py) on the sample traces: one order and one number per action in the
plan, the JSON and the Markdown; a prerequisite of under 1% never leads; what the actions buy together is one
replay, not a sum; severity follows the saving; the report's path never imports the explorer."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys

import pytest

from gapscope.analysis import analyze
from gapscope.analysis.plan import plain
from gapscope.report import render_markdown
from gapscope.report.jsonout import build_json
from gapscope.trace import load
from tests.helpers import ROOT, SAMPLE_TRACES

TRACES = ["demo-eager-sync.decode", "hf-attn.prefill_eager", "hf-mixtral.decode_eager", "hf-sampling.decode_host",
          "hf-autocast.prefill_autocast", "hf-penalty.decode_loop", "hf-pageable.step_pageable", "hf-synchook.decode_hook",
          "resnet50.fp32", "demo-eager-copy.decode", "demo-eager-alloc.decode", "demo-graph.decode"]


@functools.lru_cache(maxsize=None)
def _analysis(name: str):
    return analyze(load(str(SAMPLE_TRACES / f"{name}.json.gz")))


def _band(pct: float) -> str:
    # plan.md's bands, written out here rather than read from the code under test
    return "high" if pct >= 10 else "medium" if pct >= 3 else "low" if pct >= 1 else "info"


@pytest.mark.parametrize("name", TRACES)
def test_json_markdown_and_plan_share_one_order_and_one_number(name):
    a = _analysis(name)
    plan = a.plan
    doc = build_json(a)
    ranks = [x["rank"] for x in doc["actions"]]
    assert ranks == list(range(1, len(plan.actions) + 1))
    assert [x["change"] for x in doc["actions"]] == [plain(x.change) for x in plan.actions]
    # findings in plan order: their actions' ranks never go down, the unfixed ones last
    fr = [f["rank"] for f in doc["findings"]]
    ranked = [r for r in fr if r is not None]
    assert ranked == sorted(ranked)
    assert all(r is None for r in fr[len(ranked):])
    for f in doc["findings"]:
        if f["rank"] is not None:
            assert f["id"] in doc["actions"][f["rank"] - 1]["findings"]
    # the Markdown's plan: the same numbers, changes and savings, in the same order (minor ones with --all)
    md = render_markdown(a, 10)
    lines = [ln for ln in md.split("## Plan", 1)[-1].split("\n## ", 1)[0].splitlines() if re.match(r"^\d+\. ", ln)]
    shown = [x for x in doc["actions"] if not x["minor"]]
    assert [int(ln.split(".")[0]) for ln in lines] == [x["rank"] for x in shown]
    for ln, x in zip(lines, shown):
        assert abs(float(re.search(r"−([\d.]+)%", ln).group(1)) - x["saving_pct"]) <= 0.051, (ln, x["saving_pct"])
        assert plain(plan.action(x["rank"]).change).split(" (")[0].split("`")[0] in ln.replace("`", "")
    if any(x["minor"] for x in doc["actions"]):
        assert "gapscope report --all" in md


@pytest.mark.parametrize("name", TRACES)
def test_severity_follows_the_saving(name):
    plan = _analysis(name).plan
    for x in plan.actions:
        assert x.severity == _band(x.saving_pct), (x.rank, x.saving_pct, x.severity)
        assert x.minor == (x.saving_pct < 1.0)
    # no finding is high unless its action saves 10% or more
    for fid, sev in plan.severity_of.items():
        if sev == "high":
            assert plan.action(plan.rank_of.get(fid)) is not None
            assert plan.action(plan.rank_of[fid]).saving_pct >= 10


@pytest.mark.parametrize("name", TRACES)
def test_actions_are_ranked_by_what_they_buy_and_minor_ones_last(name):
    acts = _analysis(name).plan.actions
    major = [x for x in acts if not x.minor]
    assert [x.saving_ns for x in major] == sorted((x.saving_ns for x in major), reverse=True)
    assert acts[:len(major)] == tuple(major)


def test_a_small_prerequisite_never_leads():
    """hf-attn.prefill_eager: the step as a CUDA graph (−25%) needs one sync of HF's find_packed_sequence_indices
    removed first, which saves 0.4% alone: it is written inside the graph action and never leads."""
    plan = _analysis("hf-attn.prefill_eager").plan
    top = plan.actions[0]
    assert top.kind == "cuda-graph" and top.saving_pct > 20
    need = top.needs[0]
    assert "find_packed_sequence_indices" in need.where.frame
    assert need.saving_pct < 1
    own = plan.action(need.action)
    assert own is not None and own.minor and own.rank > len(plan.major)
    assert top.rank in own.unlocks


@pytest.mark.parametrize("name", ["demo-eager-sync.decode", "hf-mixtral.decode_eager", "hf-attn.prefill_eager"])
def test_savings_are_not_counted_twice(name):
    """What the plan buys together is one replay: below the sum of its actions, at least its best one, never more
    than the step; an action inside another is named so (its saving is part of the other's)."""
    a = _analysis(name)
    plan = a.plan
    acts = plan.actions
    assert plan.baseline_ns > plan.saving_ns >= max(x.saving_ns for x in acts)
    if all(x.inside is not None or x.unlocks for x in acts if x.kind != "cuda-graph"):
        # everything else is host work the graph already removes: together is the graph's figure, nothing added
        # (demo-eager-sync: the seven fused-frame and host-work figures add up to 150% of the step)
        assert sum(x.saving_ns for x in acts) > plan.saving_ns == acts[0].saving_ns
    graph = [x for x in acts if x.kind == "cuda-graph"]
    if graph:
        needed = {fid for n in graph[0].needs for fid in n.findings}
        for x in acts:
            if x is not graph[0] and x.kind not in ("kernels", "pinned-copy", "round-trip") and \
                    not needed & set(x.findings):
                assert x.inside is not None, plain(x.change)
            if needed & set(x.findings):  # a prerequisite is needed first, not inside
                assert graph[0].rank in x.unlocks
    # a finding belongs to one action at most
    seen = [fid for x in acts for fid in x.findings]
    assert len(seen) == len(set(seen))


def test_the_gpu_bound_prefill_leads_with_its_kernels():
    """resnet50.fp32 (fp32 convolutions with TF32 off): the plan opens on the fp32 kernels, in the field's words."""
    top = _analysis("resnet50.fp32").plan.actions[0]
    assert top.kind == "kernels"
    text = plain(top.change)
    assert "bf16" in text and "TF32" in text


def test_the_graph_action_names_what_it_needs_not_finding_ids():
    plan = _analysis("demo-eager-sync.decode").plan
    top = plan.actions[0]
    assert top.kind == "cuda-graph"
    assert not re.search(r"\b(sync|python|launch)-\d+\b", top.fix)
    assert "_inject_sync_check" in top.needs[0].where.frame


def test_report_path_imports_nothing_of_the_explorer(tmp_path):
    """``gapscope report`` (Markdown and JSON) runs without importing gapscope.tui or textual."""
    trace = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"
    code = ("import sys\nfrom gapscope.cli import main\n"
            f"rc = main(['report', '--no-cache', {str(trace)!r}, '-o', {str(tmp_path / 'r.md')!r}])\n"
            f"rc2 = main(['report', '--json', '--no-cache', {str(trace)!r}, '-o', {str(tmp_path / 'r.json')!r}])\n"
            "bad = sorted(m for m in sys.modules if m.startswith('gapscope.tui') or m == 'textual' "
            "or m.startswith('textual.'))\nprint(rc, rc2, bad)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0 0 []", out.stdout + out.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["actions"][0]["rank"] == 1


def test_all_lists_the_minor_actions(tmp_path):
    from gapscope.cli import main

    trace = str(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz")
    plan = _analysis("demo-eager-sync.decode").plan
    assert plan.minor
    main(["report", "--no-cache", trace, "-o", str(tmp_path / "a.md")])
    main(["report", "--all", "--no-cache", trace, "-o", str(tmp_path / "b.md")])
    short, full = (tmp_path / "a.md").read_text(), (tmp_path / "b.md").read_text()
    last = plan.minor[-1].rank
    assert re.search(rf"^{last}\. ", full, re.M) and not re.search(rf"^{last}\. ", short, re.M)


@pytest.mark.parametrize("name, kind, words, rank", [
    # the real clients recorded with their fixes (benchmarks/hf_clients2.py, traces/README.md): the action an expert
    # takes, in the field's words, and where the plan puts it
    ("hf-autocast.prefill_autocast", "kernels", "Cast the model to bf16 once", 1),
    ("hf-pageable.step_pageable", "pinned-copy", "Pin the host buffer once", 1),
    ("hf-penalty.decode_loop", "vectorise-frame", "Vectorise benchmarks/hf_clients2.py(68): pick", 2),
    ("hf-synchook.decode_hook", "remove-syncs", "Stop reading GPU values on the host in benchmarks/hf_clients2.py", 2),
    ("hf-sampling.decode_host", "round-trip", "Keep the host round trip in benchmarks/hf_clients.py(162): pick", 2),
    ("hf-attn.prefill_eager", "kernels", "scaled_dot_product_attention", 2),
    ("resnet50.fp32", "kernels", "Run the fp32 matmuls in bf16", 1),
])
def test_real_clients_get_the_experts_action(name, kind, words, rank):
    plan = _analysis(name).plan
    x = plan.action(rank)
    assert x is not None and x.kind == kind and words in plain(x.change), [plain(y.change)[:60] for y in plan.actions]
    assert not x.minor
