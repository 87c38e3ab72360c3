"""The Markdown report as an engineer reads it: the plan first, then per action its first finding in full and the
other findings it fixes one line each; a minor action's findings and those whose fix buys nothing measurable one
line each; the advice once; the largest gap's stacks only. ``--all`` (``minor=True``) writes every finding in full.
Nothing is dropped: every finding id is in the compact report too."""

from __future__ import annotations

import functools
import re

import pytest

from gapscope.analysis import analyze
from gapscope.report import render_markdown
from gapscope.trace import load
from tests.helpers import SAMPLE_TRACES

TRACES = ["hf-synchook.decode_hook", "hf-attn.prefill_eager", "demo-eager-sync.decode", "resnet50.fp32",
          "hf-penalty.decode_loop"]


@functools.lru_cache(maxsize=None)
def _analysis(name: str):
    return analyze(load(str(SAMPLE_TRACES / f"{name}.json.gz")))


def _section(md: str, name: str) -> list[str]:
    lines = md.splitlines()
    i = lines.index(f"## {name}")
    j = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
    return lines[i + 1:j]


def _full_entries(lines) -> list[str]:
    """The ids of the findings written in full: "- **action k · [sev] title** (id)"."""
    return [m.group(1) for ln in lines if (m := re.match(r"- \*\*.*\*\* \(([^()]+)\)\s*$", ln))]


@pytest.mark.parametrize("name", TRACES)
def test_one_full_finding_per_action_and_every_finding_named(name):
    a = _analysis(name)
    plan = a.plan
    md = render_markdown([a], top=50)
    sec = _section(md, "Findings")
    full = _full_entries(sec)
    # at most one finding in full per action, and it is the action's first finding
    ranks = [plan.rank_of.get(fid) for fid in full]
    assert len([r for r in ranks if r is not None]) == len({r for r in ranks if r is not None})
    for fid, r in zip(full, ranks):
        if r is not None:
            x = plan.action(r)
            assert not x.minor and x.findings[0] == fid
    # nothing lost: every finding is in the section, in full, one line, or counted ("and N more")
    text = "\n".join(sec)
    named = [f.id for f in a.findings if re.search(rf"[(; ]{re.escape(f.id)}[;)]", text)]
    more = sum(int(n) for n in re.findall(r"- and (\d+) more \(gapscope report --all\)", text))
    assert len(named) + more == len(a.findings)


def test_all_writes_every_finding_in_full_and_the_compact_report_is_shorter():
    a = _analysis("hf-synchook.decode_hook")
    compact = render_markdown([a], top=50)
    full = render_markdown([a], top=50, minor=True)
    assert sorted(_full_entries(_section(full, "Findings"))) == sorted(f.id for f in a.findings)
    # hf-synchook: action 1 (the CUDA graph) fixes 12 findings, written in full only with --all
    x = a.plan.actions[0]
    assert x.kind == "cuda-graph" and len(x.findings) >= 10
    assert len(compact.splitlines()) < 0.75 * len(full.splitlines())
    # the same advice once in the compact report, every time with --all
    adv = [ln for ln in _section(compact, "Findings") if ln.lstrip().startswith("→ ")]
    assert len(adv) == len(set(adv))
    assert sum(ln.lstrip().startswith("→ ") for ln in _section(full, "Findings")) == len(a.findings)


def test_the_other_findings_of_an_action_say_what_they_buy_alone():
    a = _analysis("hf-synchook.decode_hook")
    sec = _section(render_markdown([a], top=50), "Findings")
    i = next(k for k, ln in enumerate(sec) if ln.strip().startswith("Also fixed by this action"))
    n = int(re.search(r"\((\d+) finding", sec[i]).group(1))
    assert n == len(a.plan.actions[0].findings) - 1
    rows = [ln for ln in sec[i + 1:i + 8] if ln.startswith("   - ")]
    assert rows and all(re.search(r"; (alone −\d+\.\d%|its function fused −\d+\.\d%|nothing measurable alone|"
                                  r"not projected alone)\)\s*$", ln) or "more (gapscope report --all)" in ln
                        for ln in rows)


def test_only_the_largest_gap_shows_its_stacks_by_default():
    a = _analysis("hf-synchook.decode_hook")
    compact = "\n".join(_section(render_markdown([a], top=10), "Largest gaps (top 3 of %d)" % len(a.gaps)))
    full = "\n".join(_section(render_markdown([a], top=10, minor=True), "Largest gaps (top 3 of %d)" % len(a.gaps)))
    assert compact.count("Launching thread when the GPU went idle") == 1
    assert full.count("Launching thread when the GPU went idle") == 3


# ---------------------------------------------------------------- the action in a few words (Action.headline)
@pytest.mark.parametrize("path", sorted(SAMPLE_TRACES.glob("*.json.gz")), ids=lambda p: p.name.split(".json")[0])
def test_every_action_has_a_headline_that_fits_80_columns(path):
    """The explorer's header at 80 columns shows "1. −86.0%: <headline>": verb first, where it goes, and for a CUDA
    graph where the syncs it needs gone are; it fits without a cut."""
    a = analyze(load(str(path)))
    for x in a.plan.actions:
        h = "".join(s.text for s in x.headline)
        assert h and h[0].isupper(), (x.kind, h)
        assert len(f"{x.rank}. −{x.saving_pct:.1f}%: {h}") <= 80, h
        if x.where is not None and x.where.line is not None and x.kind not in ("cuda-graph", "gil-thread", "autotune"):
            assert f"{x.where.file.rsplit('/', 1)[-1]}:{x.where.line}" in h, (x.kind, h)
        if x.kind == "cuda-graph" and any(n.where is not None for n in x.needs):
            n = next(n for n in x.needs if n.where is not None)
            assert f"after the syncs at {n.where.loc}" in h, h


def test_a_step_that_already_replays_graphs_is_told_to_graph_the_rest():
    """hf-compile.decode_compile runs under torch.compile(mode="reduce-overhead"): 628 of its 764 GPU items are graph
    nodes already; the graph action is to capture the rest, never "Capture the step as a CUDA graph (torch.compile(
    mode=\"reduce-overhead\") ...)". Inductor's generated code is not the user's to vectorise."""
    from gapscope.analysis.names import is_user_frame

    a = _analysis("hf-compile.decode_compile")
    x = a.plan.actions[0]
    h, c = "".join(s.text for s in x.headline), "".join(s.text for s in x.change)
    assert x.kind == "cuda-graph" and h == "Graph the rest of the step (136 of 764 GPU items outside it)"
    assert c.startswith("Capture the rest of the step in the CUDA graph: 136 of its 764 GPU items")
    assert "reduce-overhead" not in c
    assert not any(y.kind == "vectorise-frame" for y in a.plan.actions)
    assert not is_user_frame("/tmp/torchinductor_root/3h/c3ha6kr7.py(2473): call")
