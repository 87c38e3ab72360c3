"""The explorer renders the plan of actions (gapscope/analysis/plan.py) and ranks nothing itself: the header's first
action, the findings view's rows and Enter on them, on the sample traces; without a plan (it failed) the findings
still show. Expectations come from ``analysis.plan`` (as the JSON and the Markdown print it)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened, run
from gapscope.analysis.plan import plain
from gapscope.tui.tables import kernels_of
from gapscope.tui.textdump import screen_text

SYNC = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"
ATTN = SAMPLE_TRACES / "hf-attn.prefill_eager.json.gz"


@pytest.mark.parametrize("name", ["hf-sampling.decode_host", "hf-attn.prefill_eager", "hf-penalty.decode_loop",
                                  "resnet50.bf16_cl"])
def test_the_header_is_the_plans_first_action_and_what_it_needs_first(name):
    """At 200 columns: "1. −x% un-profiled: <change>" and, when it needs something first, that on the next line
    with its own figure and action (the round trip a CUDA graph cannot capture: hf-sampling.decode_host)."""
    path = SAMPLE_TRACES / f"{name}.json.gz"

    async def go():
        async with opened(path, size=(200, 50)) as (app, pilot):
            await pilot.pause()
            return screen_text(app), app.scene.analysis

    txt, a = run(go())
    plan = a.plan
    lines = txt.splitlines()
    top = plan.top
    how = "un-profiled" if plan.calibrated else "profiled time"
    if top is None:
        assert not any(ln.startswith("1. ") for ln in lines[:7])
        return
    assert lines[2] == f"1. −{top.saving_pct:.1f}% {how}: {plain(top.change)}"
    if top.needs:
        n = top.needs[0]
        also = f", action {n.action}" if n.action is not None else ""
        assert lines[3] == f"   first: {plain(n.change)} (−{n.saving_pct:.1f}% alone{also})"
    else:
        assert not lines[3].startswith("   first")


def test_enter_on_a_kernel_action_shows_its_kernels():
    """hf-attn.prefill_eager: action 2 is fused attention, a kernel change with no gap of its own; Enter on it
    shows the kernels view on the first of its kernels listed, whose info box names the action."""

    async def go():
        async with opened(ATTN, size=(120, 40)) as (app, pilot):
            a = app.scene.analysis
            x = next(x for x in a.plan.actions if x.kind == "kernels" and not x.gap_rows)
            await pilot.press("3")
            await pilot.pause()
            app.query_one("#findings").move_cursor(row=x.rank - 1)
            await pilot.pause()
            info = str(app.query_one("#findinginfo").render())
            await pilot.press("enter")
            await pilot.pause()
            await pilot.pause()
            kt = app.query_one("#kernels")
            return (a, x, info, app.query_one("#views").current, kt.cursor_row, kernels_of(app.scene),
                    str(app.query_one("#kernelinfo").render()))

    a, x, info, view, row, listed, kinfo = run(go())
    assert f"Enter: its {x.kernels} kernels in the kernels view" in info
    assert view == "kernelsview"
    m = a.model
    names = {m.names[n] for f in a.findings if f.id in x.findings for n in np.asarray(m.name_id[f.kernels]).tolist()}
    assert listed[row][2].name in names and not any(k.name in names for _, _, k in listed[:row])
    assert f"action {x.rank}: −{x.saving_pct:.1f}% {plain(x.change)}" in " ".join(kinfo.split())


def test_without_a_plan_the_findings_still_show(monkeypatch):
    """A plan that fails (a bug in the plan's stage) leaves the explorer with its findings, unranked, and no first
    action in the header; the projection's line stays."""
    from gapscope.analysis import plan as plan_mod

    def boom(a, pj):
        raise RuntimeError("no plan")

    monkeypatch.setattr(plan_mod, "build_plan", boom)
    monkeypatch.delenv("GAPSCOPE_DEBUG", raising=False)

    async def go():
        async with opened(SYNC, size=(160, 48)) as (app, pilot):
            await pilot.press("3")
            await pilot.pause()
            ft = app.query_one("#findings")
            cols = [str(c.label) for c in ft.columns.values()]
            rows = [[str(v) for v in ft.get_row_at(r)] for r in range(ft.row_count)]
            return screen_text(app), app.scene.analysis, cols, rows

    txt, a, cols, rows = run(go())
    assert a.plan_if_ready is None and a.projection_if_ready is not None
    assert cols == ["#", "severity", "idle", "finding"] and len(rows) == len(a.findings)
    assert [r[1] for r in rows] == [f.severity for f in a.findings]
    lines = txt.splitlines()
    assert not any(ln.startswith("1. −") for ln in lines[:7])
    assert any(ln.startswith("projection: ") for ln in lines[:7])
