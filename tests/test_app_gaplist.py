"""The gap list (a Line-API list that owns its rows: tui/rowlist.py) shows its rows and pages through them;
the stack panel (TextView: only changed lines repainted, strips kept by content) draws exactly what a full
repaint draws; so does the axis (cached by window) when the lanes' width changes under it."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text
from textual.widgets import DataTable

from gapscope.tui import glyphs as G
from tests.helpers.app import opened as app_opened
from gapscope.tui.gaplist import GapList
from gapscope.tui.panels import stack_text
from gapscope.tui.screens import DetailScreen
from gapscope.tui.textdump import screen_text
from gapscope.tui.textview import wrap_lines

TRACE = Path(__file__).resolve().parent.parent / "traces" / "demo-eager-sync.decode.json.gz"


@contextlib.asynccontextmanager
async def opened(size, ascii=False):
    async with app_opened(TRACE, size, ascii=ascii) as (app, pilot):
        yield app, pilot


def draws_its_rows(gl: GapList) -> None:
    """Every visible line of the gap list shows what it holds: the header its column labels, each row line the
    plain text of that row's cells in column order (cut cells: their start), and only the cursor's line in the
    cursor's style."""
    w = gl.size.width
    header = "".join(seg.text for seg in gl.render_line(0))
    assert " ".join(c.label.plain for c in gl.columns) == " ".join(header.split()), header
    sy = int(gl.scroll_offset.y)
    styles = {}
    for y in range(1, gl.size.height):
        r = sy + y - 1
        segs = list(gl.render_line(y))
        line = "".join(seg.text for seg in segs)
        assert len(line) == w, (y, line)
        if r >= gl.row_count:
            assert line.strip() == "", (y, line)
            continue
        pos = 0
        for cell in gl.rows[r][1]:
            want = cell.plain[:4]
            if want:
                k = line.find(want, pos)
                assert k >= 0, (r, want, line)
                pos = k + len(want)
        styles[r] = {seg.style.bgcolor for seg in segs if seg.text.strip() and seg.style is not None}
    if gl.cursor_row in styles:
        others = set().union(*(v for r, v in styles.items() if r != gl.cursor_row))
        assert not (styles[gl.cursor_row] & others), (styles[gl.cursor_row], others)


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("size,ascii", [((100, 30), False), ((80, 24), False), ((80, 24), True)])
def test_gap_list_cursor_keys_scroll_and_select(size, ascii):
    async def go():
        async with opened(size, ascii) as (app, pilot):
            sc = app.scene
            gl = app.query_one("#gaplist", GapList)
            assert sc.gaps.order.size > 60
            # it opens on the top action's gap (Scene.opening_position), the list's cursor on it
            p0 = sc.gaps.selected
            assert p0 == sc.opening_position() and gl.cursor_row == p0 and p0 + 2 * gl.size.height < sc.gaps.order.size
            # n / N from the lanes move the list's cursor with the selection
            for key, want in (("n", p0 + 1), ("n", p0 + 2), ("N", p0 + 1)):
                await pilot.press(key)
                await pilot.pause()
                assert sc.gaps.selected == want and gl.cursor_row == want
            draws_its_rows(gl)
            # in the list: Down past the last visible row scrolls; the lanes follow every row
            await pilot.press("tab")
            await pilot.pause()
            assert app.focused is gl
            rows = gl.size.height
            for i in range(rows + 5):
                await pilot.press("down")
                await pilot.pause()
                assert sc.gaps.selected == gl.cursor_row == p0 + 2 + i
                s, e, _ = sc.gaps.span(sc.gaps.selected_gap)
                assert sc.view.t0 < s < e < sc.view.t1
            assert gl.scroll_offset.y > 0
            draws_its_rows(gl)
            for _ in range(3):
                await pilot.press("up")
                await pilot.pause()
            assert sc.gaps.selected == gl.cursor_row == p0 + rows + 3
            draws_its_rows(gl)
            # the focus changes the cursor's style: still one line in it
            await pilot.press("tab")
            await pilot.pause()
            assert app.focused is not gl
            draws_its_rows(gl)
            # Enter in the list: the selected gap's full detail
            gl.focus()
            await pilot.pause()
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, DetailScreen)
            txt = screen_text(app)
            assert f"gap {sc.gaps.selected + 1}/{sc.gaps.order.size}" in txt
            if ascii:
                assert all(ord(ch) < 128 for ch in txt)

    run(go())


def test_stack_panel_repaints_every_changed_line():
    """Each gap jump repaints only the lines that changed; the screen is the one a full repaint gives."""

    async def go():
        async with opened((100, 30)) as (app, pilot):
            panel = app.query_one("#stack")
            for key in ("n",) * 6 + ("N",) * 3 + ("tab", "tab", "pagedown", "n"):
                await pilot.press(key)
                await pilot.pause()
                got = screen_text(app)
                panel.refresh()
                await pilot.pause()
                assert screen_text(app) == got, key
                # and it is the selected gap's: its number, and the analysis' explanation of it
                sc = app.scene
                plain = " ".join(panel.plain.split())
                assert plain.startswith(f"gap {sc.gaps.selected + 1}/{sc.gaps.order.size} "), plain[:80]
                assert " ".join(sc.analysis.gap_detail(sc.gaps.selected_row).explanation.replace("`", "").split())[:60] in plain

    run(go())


def _chars(lines, console) -> list[tuple[str, object]]:
    """(character, style) of every non-space character of ``lines``, in order."""
    return [(ch, ln.get_style_at_offset(console, k)) for ln in lines for k, ch in enumerate(ln.plain) if ch != " "]


def _check_wrap(t: Text, console, width: int) -> list[Text]:
    """wrap_lines against its rule, line by line: every line fits; a line that fits is kept as it is; a longer
    one loses only the spaces at its breaks, each character keeps its style, and the continuation lines of an
    indented line are indented two deeper (a third of the width at most)."""
    from rich.cells import cell_len

    got = wrap_lines(t, console, width)
    want = []
    for line in t.split(allow_blank=True):
        one = wrap_lines(line, console, width) if line.plain else [line]
        assert all(cell_len(ln.plain) <= max(width, 2) for ln in one), (width, [ln.plain for ln in one])
        assert _chars(one, console) == _chars([line], console)
        if line.cell_len <= width:
            assert [(ln.plain, ln.spans) for ln in one] == [(line.plain, line.spans)]
        lead = len(line.plain) - len(line.plain.lstrip(" "))
        if lead:
            assert all(len(ln.plain) - len(ln.plain.lstrip(" ")) >= min(lead + 2, width // 3) for ln in one[1:])
        want += one
    assert [(ln.plain, ln.spans) for ln in got] == [(ln.plain, ln.spans) for ln in want]
    return got


def test_wrap_lines_keeps_every_character_and_style():
    """Issue 26, friction 1: the stack panel at 80x24 (34 cells) broke frames and paths anywhere, the rest of a
    frame at the left edge (``utils.py:2`` / ``394``); now a path breaks between folders, under the frame."""
    console = Console(width=80, file=None, force_terminal=True, color_system=None)
    t = Text(no_wrap=False, overflow="fold")
    t.append("gap 1/723 ", style="bold").append("347 µs", style="bold yellow").append(" idle\n")
    t.append("a fairly long explanation that will have to be wrapped over several lines of the panel\n")
    t.append("\n")
    t.append("  py  " + "x" * 130 + "  capture/demo.py:282", style="green").append("\n")
    t.append("wide 漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字 end   \n")
    t.append("  py  generate  ").append("transformers/generation/utils.py:2394", style="dim").append("\n")
    t.append("trailing spaces      ")
    for width in (7, 20, 33, 34, 80, 200):
        _check_wrap(t, console, width)
    got = [ln.plain for ln in wrap_lines(t, console, 34)]
    assert "  py  generate  transformers/" in got and "    generation/utils.py:2394" in got
    assert wrap_lines(Text(), console, 10) == []


def test_wrap_lines_on_every_gap_of_a_trace():
    async def go():
        async with opened((100, 30)) as (app, pilot):
            sc = app.scene
            console = app.console
            for pos in range(0, sc.gaps.order.size, 7):
                sc.select(pos)
                t = stack_text(sc, G.UNICODE)
                for width in (30, 45):
                    _check_wrap(t, console, width)

    run(go())


def test_text_view_repaints_only_changed_lines_and_shows_the_new_text():
    from textual.app import App

    from gapscope.tui.textview import TextView

    class One(App):
        def compose(self):
            yield TextView(id="tv")

    def text(tag: str, n: int = 12) -> Text:
        t = Text()
        for i in range(n):
            t.append(f"line {i} {tag if i % 3 == 0 else 'same'}", style="bold" if i % 2 else None)
            t.append("\n")
        return t

    async def go():
        app = One()
        async with app.run_test(size=(40, 8)) as pilot:
            tv = app.query_one(TextView)
            tv.set_text(text("a"))
            await pilot.pause()
            painted = []
            orig = tv.render_line
            tv.render_line = lambda y: painted.append(y) or orig(y)
            for tag in ("b", "c", "b"):
                painted.clear()
                tv.set_text(text(tag))
                await pilot.pause()
                shown = screen_text(app).splitlines()
                assert shown == [f"line {i} {tag if i % 3 == 0 else 'same'}" for i in range(len(shown))]
                assert sorted(set(painted)) == [y for y in range(len(shown)) if y % 3 == 0]
            # scrolled: the next text starts at the top, all of it repainted
            tv.scroll_to(y=3, animate=False)
            await pilot.pause()
            tv.set_text(text("d", 10))
            await pilot.pause()
            assert screen_text(app).splitlines()[0] == "line 0 d"

    run(go())


def test_text_view_length_changes_update_its_scrollbar_without_a_screen_layout():
    from textual.app import App

    from gapscope.tui.textview import TextView

    class One(App):
        def compose(self):
            yield TextView(id="tv")

    def text(n: int) -> Text:
        return Text("\n".join(f"line {i} " + "w" * (i % 50) for i in range(n)))

    async def go():
        app = One()
        async with app.run_test(size=(40, 10)) as pilot:
            tv = app.query_one(TextView)
            layouts = []
            orig = app.screen._refresh_layout
            app.screen._refresh_layout = lambda *a, **k: layouts.append(1) or orig(*a, **k)
            for n, bar in ((5, False), (30, True), (45, True), (12, True), (3, False)):
                layouts.clear()
                tv.set_text(text(n))
                await pilot.pause()
                await pilot.pause()
                assert tv.show_vertical_scrollbar is bar and not tv.show_horizontal_scrollbar
                assert tv.virtual_size.height == len(tv._lines)
                if n in (45, 12):  # same scrollbar as before: no layout of the screen
                    assert not layouts
                tv.scroll_end(animate=False)
                await pilot.pause()
                assert tv.scroll_offset.y == max(len(tv._lines) - tv.scrollable_content_region.height, 0)
                shown = screen_text(app).splitlines()
                assert shown[min(len(tv._lines), 10) - 1].startswith(tv._lines[-1].plain.rstrip()[:30])

    run(go())


def test_gap_list_pages_instead_of_creeping():
    """Stepping with n: the list scrolls once per page (the cursor lands a quarter of the way down), not on
    every step past the edge; back up, the same way upwards."""

    async def go():
        async with opened((100, 30)) as (app, pilot):
            sc = app.scene
            gl = app.query_one("#gaplist", GapList)
            shown = gl.size.height - 1  # under the header
            lead = shown // 4
            assert shown >= 6 and sc.gaps.order.size > 3 * shown
            # from the largest gap (the explorer opens on the top action's gap, wherever it is in the list)
            app.screen.gap_keys.goto_gap(0)
            await pilot.pause()
            assert gl.cursor_row == 0 and round(gl.scroll_y) == 0
            scrolls = []
            for _ in range(2 * shown + 2):
                before = round(gl.scroll_y)
                await pilot.press("n")
                await pilot.pause()
                if round(gl.scroll_y) != before:
                    scrolls.append(round(gl.scroll_y))
                    assert gl.cursor_row - round(gl.scroll_y) == lead  # a quarter of the way down
                assert round(gl.scroll_y) <= gl.cursor_row < round(gl.scroll_y) + shown
            assert len(scrolls) == 2, scrolls  # two page turns in two pages of steps, not one per step
            draws_its_rows(gl)
            ups = []
            for _ in range(shown):
                before = round(gl.scroll_y)
                await pilot.press("N")
                await pilot.pause()
                if round(gl.scroll_y) != before:
                    ups.append(round(gl.scroll_y))
                    assert round(gl.scroll_y) + shown - 1 - gl.cursor_row == lead  # a quarter from the bottom
                assert round(gl.scroll_y) <= gl.cursor_row < round(gl.scroll_y) + shown
            assert len(ups) == 1, ups
            draws_its_rows(gl)

    run(go())


def test_tables_and_search_box_are_mounted_when_first_asked_for():
    async def go():
        async with opened((100, 30)) as (app, pilot):
            assert not app.query("#kernels") and not app.query("#findings") and not app.query("#search")
            await pilot.press("2")
            await pilot.pause()
            kt = app.query_one("#kernels", DataTable)
            assert app.focused is kt and kt.row_count > 0
            assert "kernel" in screen_text(app)
            await pilot.press("3")
            await pilot.pause()
            ft = app.query_one("#findings", DataTable)
            assert app.focused is ft and ft.row_count > 0
            await pilot.press("1")
            await pilot.pause()
            assert app.focused is app.lanes
            await pilot.press("slash")
            await pilot.pause()
            box = app.query_one("#search")
            assert app.focused is box and box.has_class("-on")
            await pilot.press("escape")
            await pilot.pause()
            assert not box.has_class("-on") and app.focused is app.lanes
            # mounted once: a second visit reuses them
            await pilot.press("2")
            await pilot.pause()
            assert len(app.query("#kernels")) == 1 and app.query_one("#kernels", DataTable) is kt

    run(go())


def test_large_trace_freezes_the_heap_and_makes_full_collections_rare(monkeypatch):
    import gc

    import gapscope.tui.app as A

    monkeypatch.setattr(A, "FREEZE_EVENTS", 1)  # the sample counts as large
    before = gc.get_threshold()
    assert before[2] != A.GC_FULL_EVERY

    async def go():
        async with opened((100, 30)) as (app, pilot):
            assert app._frozen and gc.get_freeze_count() > 0
            assert gc.get_threshold() == (before[0], before[1], A.GC_FULL_EVERY)
            await pilot.press("n")
            await pilot.pause()

    run(go())
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_gap_list_page_keys_home_end_keep_the_cursor_shown():
    async def go():
        async with opened((100, 30)) as (app, pilot):
            sc = app.scene
            gl = app.query_one("#gaplist", GapList)
            gl.focus()
            await pilot.pause()
            shown = gl.size.height - 1
            for key in ("pagedown", "pagedown", "down", "end", "up", "pageup", "home", "pagedown", "up"):
                await pilot.press(key)
                await pilot.pause()
                y = round(gl.scroll_y)
                assert y <= gl.cursor_row < y + shown, key
                assert sc.gaps.selected == gl.cursor_row, key
                draws_its_rows(gl)
            assert gl.cursor_row > 0

    run(go())


def test_axis_follows_the_lanes_scroll_bar():
    """Rows that make the lanes' scroll bar appear (or go) narrow the lanes by a column: the axis is redrawn to
    the new width, not left as drawn before (snapshots caught it under load, 1 run in 12)."""

    async def go():
        async with opened((100, 30)) as (app, pilot):
            lv = app.lanes
            sc = app.scene
            axis = app.query_one("#axis")
            sc.display.cursor = next(i for i, r in enumerate(sc.display.rows()) if r.lane is not None and r.lane.kind == "cpu")
            seen = set()
            for _ in range(4):
                # rows come or go without the app's own redraw of the view (as when an analysis lands): only the
                # layout that follows changes the lanes' scroll bar
                assert sc.display.toggle_expand(sc.lanes)
                lv.sync_rows()
                await pilot.pause()
                await pilot.pause()
                seen.add(lv.show_vertical_scrollbar)
                got = screen_text(app)
                axis._cache.clear()
                axis.refresh()
                await pilot.pause()
                assert screen_text(app) == got
            assert seen == {True, False}  # the bar came and went

    run(go())


def test_gap_list_is_filled_again_only_when_its_rows_change():
    """The gap list keeps its rows when what they are made of is the same (the screen asks again on the analysis
    whole after its gaps and on its projection: 500 rows took 0.1-0.3 s of the screen's thread at 1 GB), and makes
    them again, as a fresh fill does, on a filter, a time origin, a new analysis or a narrower terminal."""
    from gapscope.analysis import analyze

    def cells(gl):
        return [(k, [c.plain for c in row]) for k, row in gl.rows]

    async def go():
        async with opened((160, 40)) as (app, pilot):
            gl = app.main.query_one(GapList)
            sc = app.scene
            rows0 = gl.rows
            assert len(rows0) > 3
            app.main.painter.fill_gap_list()  # the same gaps: kept
            assert gl.rows is rows0
            app.main.scene_changed()
            await pilot.pause()
            assert gl.rows is rows0
            fresh = GapList()
            fresh.fill(sc, app.glyphs, 160)
            assert cells(fresh) == cells(gl)
            kept = cells(gl)
            sc.time_mode = "trace"  # the "at" column counts from another origin
            app.main.painter.fill_gap_list()
            assert gl.rows is not rows0 and cells(gl) != kept
            sc.time_mode = "window"
            app.main.painter.fill_gap_list()
            assert cells(gl) == kept
            cause = int(sc.gaps.cause[sc.gaps.order[-1]])
            sc.apply_filter(cause)
            rows1 = gl.rows
            app.main.painter.fill_gap_list()
            assert gl.rows is not rows1 and len(gl.rows) < len(kept)
            sc.apply_filter(None)
            a = analyze(sc.model)  # a new analysis (same numbers, another object): filled again
            sc.set_analysis(a, sc.part.min_listed_ns)
            rows2 = gl.rows
            app.main.painter.fill_gap_list()
            assert gl.rows is not rows2 and cells(gl) == kept
            rows3 = gl.rows
            gl.fill(sc, app.glyphs, 100)  # narrow: other columns
            assert gl.rows is not rows3 and len(gl.rows[0][1]) == len(kept[0][1]) - 1

    asyncio.run(go())
