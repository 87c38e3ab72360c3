"""The explorer's first screen names what to do first (issue 25, item 4): the report's top fix and its projected
saving, on a header line of its own at every width (at 80 columns the projection line is hidden), the saving first
so that a cut line keeps it."""

from __future__ import annotations

import re

import pytest

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened, run
from gapscope.tui.app.textdump import screen_text
from gapscope.tui.app.timefmt import fmt_dur
from gapscope.tui.report import build_json

SYNC = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"


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
    # the report's finding with the largest projected saving, from its JSON
    doc = build_json([a])
    top = max((f for f in doc["findings"] if f["saving_us"] is not None), key=lambda f: f["saving_us"])
    lines = txt.splitlines()
    m = re.match(r"top fix → −(.+?) per step \(−([\d.]+)%\), un-profiled: (.*)$", lines[2])  # under title, window
    assert m, lines[:4]
    assert m.group(1) == fmt_dur(int(round(top["saving_us"] * 1e3)))
    assert abs(float(m.group(2)) - top["saving_pct"]) <= 0.051  # the JSON keeps 2 decimals, the header 1
    assert len(lines[2]) <= size[0]
    if size[0] >= 100:
        assert m.group(3) == top["fix"]
        assert lines[3].startswith("projection: ")
