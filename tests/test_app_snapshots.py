"""Snapshots of the explorer at 80x24 and 160x48, in colour and in ASCII, on the committed sample trace
traces/demo-eager-sync.decode.json.gz (decode with an ``.item()`` in every layer).

They show the analysis' output too: after an intended change to the explorer or to the cause rules, look at
the report (snapshot_report.html) and update with
    python -m pytest tests/test_app_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import settled
from gapscope.tui.app import GapscopeApp

pytest.importorskip("pytest_textual_snapshot")

TRACE = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"
RANKS = [SAMPLE_TRACES / f"demo-eager-tp-late1.decode.rank{r}.json.gz" for r in (0, 1)]


@pytest.fixture
def sample():
    if not TRACE.exists():
        pytest.skip("traces/ samples are not present")
    return TRACE


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("ascii", [False, True], ids=["unicode", "ascii"])
def test_open_on_top_fix_gap(snap_compare, sample, size, ascii):
    app = GapscopeApp([str(sample)], ascii=ascii, load_opts={"no_cache": True})
    assert snap_compare(app, terminal_size=size, run_before=settled)


def test_after_next_gap_and_zoom(snap_compare, sample):
    app = GapscopeApp([str(sample)], load_opts={"no_cache": True})

    async def steps(pilot):
        await settled(pilot)
        await pilot.press("n", "n", "s", "space")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 30), run_before=steps)


def test_two_ranks_grouped(snap_compare, sample):
    app = GapscopeApp([str(p) for p in RANKS], load_opts={"no_cache": True})
    assert snap_compare(app, terminal_size=(120, 40), run_before=settled)


def test_findings_view_is_the_plan(snap_compare, sample):
    """View 3 at 80x24: the plan's actions in the report's numbers, the findings no action fixes after them, and
    the first action's detail below."""
    app = GapscopeApp([str(sample)], load_opts={"no_cache": True})

    async def steps(pilot):
        await settled(pilot)
        await pilot.press("3")
        await settled(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=steps)
