"""The screen's boxes under their children (``PlainBox``: the screen, the view switcher, the lanes view, the
timeline and bottom boxes) draw one blank row repeated: every row the same strip Textual's own drawing of the box
gives, in colour, in NO_COLOR's monochrome and in ASCII; a box with a border (or padding) is drawn by Textual."""

from __future__ import annotations

import asyncio

import pytest
from textual.geometry import Region
from textual.widget import Widget

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened
from gapscope.tui.steady import PlainBox

SYNC = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"


def _boxes(app) -> list:
    return [w for w in [app.screen, *app.screen.query("*")] if isinstance(w, PlainBox)]


@pytest.mark.parametrize("mode", ["colour", "no_color", "ascii"])
def test_plain_boxes_draw_what_textual_draws(mode, monkeypatch):
    if not SYNC.exists():
        pytest.skip("traces/ samples are not present")
    if mode == "no_color":
        monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        async with opened(SYNC, size=(80, 24), ascii=mode == "ascii") as (app, pilot):
            boxes = _boxes(app)
            assert {b.id for b in boxes} >= {"views", "lanesview", "timeline", "bottom"}
            assert app.screen in boxes
            out = []
            for b in boxes:
                w, h = b.size
                for crop in (Region(0, 0, w, h), Region(3, 1, max(w - 5, 1), max(h - 1, 1))):
                    mine = b.render_lines(crop)
                    b.refresh()  # Textual's drawing from its own styles cache, every row drawn again
                    theirs = Widget.render_lines(b, crop)
                    out.append((b.id, crop, [list(s) for s in mine], [list(s) for s in theirs]))
            # a border: Textual's drawing (its first and last rows differ from the middle ones)
            tl = app.screen.query_one("#timeline")
            tl.styles.border = ("solid", "red")
            await pilot.pause()
            w, h = tl.size
            bordered = tl.render_lines(Region(0, 0, w, h))
            return out, bordered

    out, bordered = asyncio.run(asyncio.wait_for(go(), timeout=120))
    for box, crop, mine, theirs in out:
        assert len(mine) == crop.height and mine == theirs, (box, crop)
    assert [list(s) for s in bordered[:1]] != [list(s) for s in bordered[1:2]]
