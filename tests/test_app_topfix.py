"""The explorer's first screen names what to do first (issue 25, item 4): the plan's first action (analysis/plan.py,
the report's action 1), its saving first so that a cut line keeps it, then the change, verb first; what it needs first
on a line of its own where the terminal is wide, after it where not. The gap list opens on that action's largest gap,
and a plan led by a kernel change (a GPU-bound trace) opens on the kernels view. Expectations come from
``analysis.plan`` and the JSON report (``build_json``), never from the explorer's own code."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened, run
from gapscope.analysis.plan import plain
from gapscope.report import render_markdown
from gapscope.report.jsonout import build_json
from gapscope.tui.panels import stack_text
from gapscope.tui.textdump import screen_text

SYNC = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"
MIXTRAL = SAMPLE_TRACES / "hf-mixtral.decode_eager.json.gz"
RESNET = SAMPLE_TRACES / "resnet50.fp32.json.gz"


async def _planned(app, pilot):
    for _ in range(50):  # the plan may come after the analysis (a large trace)
        if app.scene.analysis is not None and app.scene.analysis.plan_if_ready is not None:
            break
        await pilot.pause(0.1)
    await pilot.pause()


def _cut(line: str, want: str, width: int) -> bool:
    """``line`` is ``want``, or ``want`` cut to the terminal's width with an ellipsis."""
    return line == want or (line.endswith("…") and want.startswith(line[:-1]) and len(line) == width)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_first_screen_names_the_plans_first_action_and_its_saving(size):
    assert SYNC.is_file(), SYNC  # in the repository: missing is a failure

    async def go():
        async with opened(SYNC, size=size) as (app, pilot):
            await _planned(app, pilot)
            return screen_text(app), app.scene.analysis

    txt, a = run(go())
    plan = a.plan
    top = plan.top
    # the JSON report's action 1: the step as a CUDA graph, which needs the .item() check's syncs removed first
    act = build_json([a])["actions"][0]
    assert act["rank"] == top.rank == 1 and act["kind"] == "cuda-graph" and plan.calibrated
    assert act["change"] == plain(top.change) and round(top.saving_pct, 2) == act["saving_pct"]
    assert act["needs"][0]["action"] == 4 and act["needs"][0]["change"] == plain(top.needs[0].change)
    assert "\n1. **−77.9%** \\[high\\] Capture the step as a CUDA graph" in render_markdown([a])  # the report's
    need = top.needs[0]
    lines = txt.splitlines()
    first = f"1. −{top.saving_pct:.1f}% un-profiled: {plain(top.change)}"  # under the title and the window
    if size[0] >= 100:
        assert lines[2].startswith("1. −77.9% un-profiled: Capture the step as a CUDA graph (")
    assert len(lines[2]) <= size[0]
    head = "\n".join(lines[:7])
    assert "top fix" not in head and "launch-1" not in head and "finding" not in head  # no internal ids
    if size[0] >= 100:  # what it needs first on a line of its own, its figure as the report's
        assert lines[2] == first
        assert _cut(lines[3], f"   first: {plain(need.change)} (−{need.saving_pct:.1f}% alone, action {need.action})",
                    size[0])
        assert lines[3].startswith("   first: remove the host reads of GPU values (32 syncs) in capture/demo.py(51)")
        assert lines[4].startswith("projection: ")
    else:  # one line, uncut: the saving, the action's headline, verb first, and where its syncs are
        assert lines[2] == f"1. −77.9%: {plain(top.headline)}"
        assert lines[2] == "1. −77.9%: CUDA-graph the step, after the syncs at demo.py:51"
        assert not lines[3].startswith(("   first", "projection"))


def _opened_on(path, size=(80, 24)):
    async def go():
        async with opened(path, size=size) as (app, pilot):
            await _planned(app, pilot)
            await pilot.pause()
            sc = app.scene
            kt = app.query("#kernels")
            krow = kt.first().cursor_row if kt else None
            info = str(app.query_one("#kernelinfo").render()) if kt else stack_text(sc, app.glyphs).plain
            return (screen_text(app), sc.analysis, int(sc.gaps.row[sc.gaps.selected_gap]),
                    int(sc.gaps.row[sc.gaps.all_listed[0]]), app.query_one("#views").current, krow, info)

    return run(go())


def test_the_explorer_opens_on_the_top_actions_largest_gap():
    """hf-mixtral.decode_eager: action 1 is the step as one CUDA graph (−84.9%), which needs the experts loop
    vectorised first (action 2). The gap list opens on the largest gap of action 1's findings (227.6 µs: host work
    in a library frame the graph removes), not on the 332.7 µs largest gap of the trace."""
    txt, a, row, largest, view, _, detail = _opened_on(MIXTRAL)
    g = a.gaps
    top = a.plan.top
    assert top.kind == "cuda-graph" and top.needs[0].action == 2
    rows = np.asarray(top.gap_rows, np.int64)
    rows = rows[np.asarray(g.dur_ns)[rows] >= a.config.min_listed_gap_ns]
    assert row == int(rows[np.lexsort((np.asarray(g.start_ns)[rows], -np.asarray(g.dur_ns)[rows]))[0]])
    assert row != largest and g.dur_ns[largest] > g.dur_ns[row]
    assert round(int(g.dur_ns[row]) / 1e3, 1) == 227.6 and round(int(g.dur_ns[largest]) / 1e3, 1) == 332.7
    lines = txt.splitlines()
    assert lines[2] == f"1. −{top.saving_pct:.1f}%: CUDA-graph the step, after the syncs at modeling_mixtral.py:69"
    assert "−84.9%" in lines[2] and "227.6 µs idle" in txt and view == "lanesview"
    # the gap's detail names its action, in the plan's numbers
    assert f"\naction 1: −{top.saving_pct:.1f}% {plain(top.change)}\n" in detail


def test_a_plan_led_by_a_kernel_change_opens_on_its_kernels():
    """resnet50.fp32 is GPU-bound: action 1 runs the fp32 matmuls in bf16, a kernel change with no gap of its own.
    The explorer opens on the kernels view, on the first of its kernels listed; the gap list behind it on the
    largest gap."""
    txt, a, row, largest, view, krow, info = _opened_on(RESNET)
    top = a.plan.top
    assert top.kind == "kernels" and not top.gap_rows and top.kernels > 0 and row == largest
    assert view == "kernelsview"
    m = a.model
    names = {m.names[n] for f in a.findings if f.id in top.findings for n in np.asarray(m.name_id[f.kernels]).tolist()}
    first = next(k for k, ks in enumerate(a.kernels) if ks.name in names)
    assert krow == first
    lines = txt.splitlines()
    assert lines[2] == f"1. −{top.saving_pct:.1f}%: Run the fp32 matmuls in bf16 (or TF32)"
    assert f"\naction 1: −{top.saving_pct:.1f}% {plain(top.change)}\n" in info  # the kernel's info box
