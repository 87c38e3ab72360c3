"""A key that folds or unfolds lanes (the lanes' height changes) is one layout of the screen, not two (issue 27
item 3: the containers and scroll bars resized by it asked Textual for a second pass, tui/steady.py); a zoom
that keeps the rows is none; and the screen drawn is the one a fresh layout of the same state draws."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened, run
from gapscope.tui.textdump import screen_text

SYNC = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"


def _count_layouts(screen) -> list:
    layouts: list = []
    orig = screen._refresh_layout
    screen._refresh_layout = lambda *a, **k: layouts.append(1) or orig(*a, **k)
    return layouts


def test_a_fold_change_is_one_layout_and_a_zoom_that_keeps_the_rows_is_none():
    if not SYNC.exists():
        pytest.skip("traces/ samples are not present")

    async def go():
        async with opened(SYNC, size=(80, 24)) as (app, pilot):
            sc = app.scene
            # the largest gap of `attn`'s host work: the copy lanes have nothing near it and are folded
            f = next(f for f in sc.analysis.findings if "demo.py(165): attn" in f.title)
            pos = int(np.flatnonzero(np.isin(sc.gaps.row[sc.gaps.order], np.asarray(f.gap_rows, np.int64)))[0])
            app.screen.gap_keys.goto_gap(pos)
            await pilot.pause()
            await pilot.pause()
            folded = len(sc.display.rows())
            assert any(r.folded for r in sc.display.rows())
            layouts = _count_layouts(app.screen)
            await pilot.press("0")  # the whole trace: every lane has something in view, the rows unfold
            await pilot.pause()
            await pilot.pause()
            unfolded = len(sc.display.rows())
            fold_layouts = len(layouts)
            after_key = screen_text(app)
            app.screen.refresh(layout=True)  # a layout from scratch of the same state draws the same screen
            await pilot.pause()
            await pilot.pause()
            fresh = screen_text(app)
            layouts.clear()
            await pilot.press("w")  # zoom in about the cursor: every lane still has work in view
            await pilot.pause()
            await pilot.pause()
            same_rows = len(sc.display.rows()) == unfolded and not any(r.folded for r in sc.display.rows())
            return folded, unfolded, fold_layouts, after_key, fresh, same_rows, len(layouts)

    folded, unfolded, fold_layouts, after_key, fresh, same_rows, zoom_layouts = run(go())
    assert unfolded > folded
    assert fold_layouts == 1
    assert after_key == fresh
    assert same_rows and zoom_layouts == 0


def test_the_gap_list_keeps_its_drawn_rows_when_only_its_height_changes():
    """Lanes folded above the gap list change its height, not its width: the rows drawn stay (the same strips),
    and a new width draws them again, to that width."""
    from rich.text import Text
    from textual.app import App

    from gapscope.tui.rowlist import RowList

    class One(App):
        CSS = "RowList { height: 10; }"

        def compose(self):
            yield RowList(id="rl")

    async def go():
        app = One()
        async with app.run_test(size=(60, 30)) as pilot:
            rl = app.query_one(RowList)
            rl.add_column("n", key="n", width=4)
            rl.add_column("name", key="name")
            for i in range(40):
                rl.add_row(Text(str(i)), Text(f"row {i}"), key=str(i))
            await pilot.pause()
            before = [rl.render_line(y) for y in range(5)]
            rl.styles.height = 20
            await pilot.pause()
            await pilot.pause()
            assert rl.size.height == 20
            taller = [rl.render_line(y) for y in range(5)]
            rl.styles.width = 40
            await pilot.pause()
            await pilot.pause()
            narrower = [rl.render_line(y) for y in range(5)]
            return before, taller, narrower, rl.size.width

    before, taller, narrower, width = run(go())
    assert all(a is b for a, b in zip(before, taller))
    assert all(s.cell_length == width for s in narrower) and width < before[0].cell_length
