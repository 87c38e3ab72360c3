"""Snapshots of the explorer at 80x24 and 160x48, in colour and in ASCII, on a fixed real trace.

Update after an intended change with: python -m pytest tests/test_app_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from tui.app.app import GapscopeApp

pytest.importorskip("pytest_textual_snapshot")

TRACE = ("h200", "stack_memory_compile_graph.pt.trace.json.gz")


async def _ready(pilot):
    app = pilot.app
    for _ in range(3):
        await app.workers.wait_for_complete()
        await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("ascii", [False, True], ids=["unicode", "ascii"])
def test_open_on_largest_gap(snap_compare, shared_traces, size, ascii):
    app = GapscopeApp([str(shared_traces.joinpath(*TRACE))], ascii=ascii, load_opts={"no_cache": True})
    assert snap_compare(app, terminal_size=size, run_before=_ready)


def test_after_next_gap_and_zoom(snap_compare, shared_traces):
    app = GapscopeApp([str(shared_traces.joinpath(*TRACE))], load_opts={"no_cache": True})

    async def steps(pilot):
        await _ready(pilot)
        await pilot.press("n", "n", "s", "space")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 30), run_before=steps)
