"""The explorer's first screen names what to do first (issue 25, item 4): the report's top fix and its projected
saving, on a header line of its own at every width (at 80 columns the projection line is hidden), the saving first
so that a cut line keeps it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened, run
from gapscope.tui.textdump import screen_text
from gapscope.report import render_markdown

SYNC = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"
MIXTRAL = SAMPLE_TRACES / "hf-mixtral.decode_eager.json.gz"


def _report_top(a) -> tuple[str, str, str]:
    """The Markdown report's finding 1: (saving, %, what) of the larger of its fix and its function as one fused
    GPU call, or, when another finding needs it first, of the two together ("with finding 2 after it")."""
    md = render_markdown([a])
    block = md[md.index("\n1. **"):].split("\n2. **")[0]
    m = re.search(r"fix → \*\*−.+? per step \(−[\d.]+%\)\*\*, un-profiled, calibrated: (.*?); with finding 2 after it, "
                  r"which needs it first: \*\*−(.+?) per step \(−([\d.]+)%\)\*\*  $", block, re.M)
    if m:
        two = md[md.index("\n2. **"):].split("\n3. **")[0]
        then = re.search(r"fix → \*\*−.+?\*\*, un-profiled, calibrated: (.*?);", two).group(1)
        return m.group(2), m.group(3), f"{m.group(1).split(';')[0]}, then {then}".replace("`", "")
    got = [(float(p), t, w.rstrip(". ")) for t, p, w in re.findall(
        r"fix → \*\*−(.+?) per step \(−([\d.]+)%\)\*\*, un-profiled, calibrated: (.*?)  $", block, re.M)]
    got += [(float(p), t, f"{w} as one fused GPU call") for t, p, w in re.findall(
        r"replace the function → \*\*−(.+?) per step \(−([\d.]+)%\)\*\* with `(.+?)` as one fused", block)]
    pct, t, what = max(got)
    return t, f"{pct:.1f}", what


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_first_screen_names_the_top_fix_and_its_saving(size):
    assert SYNC.is_file(), SYNC  # in the repository: missing is a failure

    async def go():
        async with opened(SYNC, size=size) as (app, pilot):
            for _ in range(50):  # the projection may come after the analysis
                if app.scene.analysis.projected:
                    break
                await pilot.pause(0.1)
            await pilot.pause()
            return screen_text(app), app.scene.analysis

    txt, a = run(go())
    # the report's finding 1 (ranked by projected saving): the .item() check's syncs removed, which the step as one
    # CUDA graph needs first; the two rank together, at the graph's figure, and the header says both
    saving, pct, what = _report_top(a)
    assert what == ("remove the 32 synchronising calls in capture/demo.py(51): _inject_sync_check, then the step as "
                    "one CUDA graph replay") and (saving, pct) == ("2.87 ms", "77.9")
    lines = txt.splitlines()
    m = re.match(r"top fix → −(.+?) per step \(−([\d.]+)%\), un-profiled: (.*)$", lines[2])  # under title, window
    assert m, lines[:4]
    assert (m.group(1), m.group(2)) == (saving, pct)
    assert len(lines[2]) <= size[0]
    if size[0] >= 100:
        shown = m.group(3).replace("`", "")
        # the saving first; a line longer than the terminal ends in an ellipsis
        assert shown == what or (shown.endswith("…") and what.startswith(shown[:-1]) and len(shown) > 80)
        assert lines[3].startswith("projection: ")


def _opened_on(path, size=(80, 24)):
    async def go():
        async with opened(path, size=size) as (app, pilot):
            await pilot.pause()
            sc = app.scene
            return screen_text(app), sc.analysis, int(sc.gaps.row[sc.gaps.selected_gap]), int(sc.gaps.row[sc.gaps.all_listed[0]])

    return run(go())


def test_the_explorer_opens_on_the_top_fix_gap():
    """hf-mixtral.decode_eager: the top fix is the experts loop `modeling_mixtral.py(69): forward` as one fused GPU
    call, then the step as one CUDA graph (which needs the loop's host reads gone first): −84.9% together. The loop's
    finding is a pattern without gaps of its own, so the explorer opens on the largest gap of the fix it unlocks (the
    launch-bound gaps, 215.3 µs), not on the 332.7 µs largest gap of the trace (host work before an index_select)."""
    txt, a, row, largest = _opened_on(MIXTRAL)
    g = a.gaps
    pj = a.projection
    f = pj.ranked(a.findings)[0]
    assert f.id == "pattern-1" and (f.evidence or {})["frame"] == "transformers/models/mixtral/modeling_mixtral.py(69): forward"
    assert np.asarray(f.gap_rows).size == 0 and pj.unlocks(a.findings) == {"pattern-1": "launch-1"}
    dep = next(x for x in a.findings if x.id == "launch-1")
    # that finding's largest gap, from its rows
    rows = np.asarray(dep.gap_rows, np.int64)
    assert row == int(rows[np.lexsort((g.start_ns[rows], -g.dur_ns[rows]))[0]])
    assert row != largest and g.dur_ns[largest] > g.dur_ns[row]
    assert round(int(g.dur_ns[row]) / 1e3, 1) == 215.3 and round(int(g.dur_ns[largest]) / 1e3, 1) == 332.7
    lines = txt.splitlines()
    assert lines[2].startswith("top fix → −10.46 ms per step (−84.9%), un-profiled: ")
    assert "launch" in txt and "215.3 µs idle" in txt


def test_without_a_fix_with_gaps_the_explorer_opens_on_the_largest_gap():
    # resnet50.fp32: the top fix is the fp32-matmul pattern, a finding with no gaps
    _, a, row, largest = _opened_on(SAMPLE_TRACES / "resnet50.fp32.json.gz")
    assert a.projection.ranked(a.findings)[0].cause == "pattern" and row == largest
