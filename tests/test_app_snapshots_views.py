"""A snapshot of each view (issue 38): the lanes (1), the kernels (2), the findings (3) and the before/after view, at
80x24 in colour, under NO_COLOR and with --ascii, and each at 160x45 in colour, on the committed samples of three
kinds of step: a copy-bound vision step fed from pageable memory (hf-pageable.step_pageable: the lanes), a GPU-bound
fp32 ResNet-50 (resnet50.fp32: the kernels), a host-bound prefill with eager attention (hf-attn.prefill_eager: the
findings), and that prefill before and after scaled_dot_product_attention (the before/after view).

They show the analysis' output too: after an intended change to the explorer or to the analysis, look at the report
(snapshot_report.html) and update with
    python -m pytest tests/test_app_snapshots_views.py --snapshot-update
"""

from __future__ import annotations

import pytest

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import diff_ready, settled
from gapscope.tui.app import GapscopeApp
from gapscope.tui.diffapp import DiffApp

pytest.importorskip("pytest_textual_snapshot")

#: view -> (the sample it is shown on, its key)
VIEWS = {
    "lanes": ("hf-pageable.step_pageable", "1"),
    "kernels": ("resnet50.fp32", "2"),
    "findings": ("hf-attn.prefill_eager", "3"),
}
PAIR = ("hf-attn.prefill_eager", "hf-attn.prefill_sdpa")
MODES = ["colour", "no_color", "ascii"]


def _path(name: str) -> str:
    p = SAMPLE_TRACES / f"{name}.json.gz"
    if not p.exists():
        pytest.skip(f"traces/{p.name} is not present")
    return str(p)


def _mode(monkeypatch, mode: str) -> bool:
    """NO_COLOR set (or not) before the app is made (Textual reads it then); True for --ascii."""
    if mode == "no_color":
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    return mode == "ascii"


def _explorer(view: str, ascii: bool):
    trace, key = VIEWS[view]
    app = GapscopeApp([_path(trace)], ascii=ascii, load_opts={"no_cache": True})

    async def steps(pilot):
        await settled(pilot)
        await pilot.press(key)
        await settled(pilot)

    return app, steps


def _diff(ascii: bool):
    return DiffApp(*(_path(n) for n in PAIR), ascii=ascii, load_opts={"no_cache": True}), diff_ready


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("view", [*VIEWS, "diff"])
def test_each_view_at_80x24(snap_compare, monkeypatch, view, mode):
    ascii = _mode(monkeypatch, mode)
    app, steps = _diff(ascii) if view == "diff" else _explorer(view, ascii)
    assert snap_compare(app, terminal_size=(80, 24), run_before=steps)


@pytest.mark.parametrize("view", [*VIEWS, "diff"])
def test_each_view_at_160x45(snap_compare, monkeypatch, view):
    _mode(monkeypatch, "colour")
    app, steps = _diff(False) if view == "diff" else _explorer(view, False)
    assert snap_compare(app, terminal_size=(160, 45), run_before=steps)
