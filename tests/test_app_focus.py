"""Focus and selection to see, in colour, under NO_COLOR and on an ASCII terminal (issue: "focus and selection are
hard to see"): Tab changed nothing visible, the selected gap row was a grey 236 on 234 under NO_COLOR and the copy
and stall labels grey 237 on 234; j / k did not scroll an info box; the footer offered the gap keys in the kernels
and findings views, where n moved the hidden gap list's cursor. The footer per view is in test_keys_panes.py."""

from __future__ import annotations

import pytest
from rich.color import Color
from textual.geometry import Region

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened, run

SYNC = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"
COPY = SAMPLE_TRACES / "demo-eager-copy.decode.json.gz"
MODES = ["colour", "no_color", "ascii"]


@pytest.fixture(autouse=True)
def _samples():
    if not SYNC.exists() or not COPY.exists():
        pytest.skip("traces/ samples are not present")


def _mode(monkeypatch, mode: str) -> dict:
    if mode == "no_color":
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    return {"ascii": mode == "ascii"}


def _lines(w, rows=None):
    """What ``w`` draws (its rows ``rows``, else all), as the terminal gets it: styles after the app's filters (the
    NO_COLOR monochrome one)."""
    width, height = w.outer_size
    top, bottom = (0, height) if rows is None else rows
    return w.render_lines(Region(0, top, width, bottom - top))


def _text(strip) -> str:
    return "".join(s.text for s in strip)


def _reversed(strip, needle: str) -> bool:
    """Every segment of ``strip`` that holds a word of ``needle`` is drawn in reverse video."""
    words = needle.split()
    segs = [s for s in strip if any(w in s.text for w in words)]
    assert segs and all(w in _text(strip) for w in words), (needle, _text(strip))
    return all(s.style is not None and bool(s.style.reverse) for s in segs)


def _lum(c: Color | None, default: tuple) -> float:
    r, g, b = c.get_truecolor() if c is not None else default
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def _contrast(style) -> float:
    """How far apart the text and its background are (0..1 of luminance), reverse video taken into account."""
    fg, bg = _lum(style.color, (255, 255, 255)), _lum(style.bgcolor, (0, 0, 0))
    return abs(fg - bg)


# ----------------------------------------------------------------------------- the focused pane shows it
@pytest.mark.parametrize("mode", MODES)
def test_the_focused_pane_shows_it(monkeypatch, mode):
    """Tab from the lanes to the gap list to the stack panel: each in turn shows that it has the focus (the lanes a
    bar on their right, the gap list and the stack panel their title row reversed), the other two do not."""
    kw = _mode(monkeypatch, mode)

    async def go():
        out = {}
        async with opened(SYNC, size=(80, 24), **kw) as (app, pilot):
            scr = app.screen
            lanes, gl, stack = (scr.query_one(s) for s in ("#lanes", "#gaplist", "#stack"))
            assert app.focused is lanes
            for focus in ("lanes", "gaplist", "stack"):
                if focus != "lanes":
                    await pilot.press("tab")
                    await pilot.pause()
                assert app.focused.id == focus
                out[focus] = (
                    {_text(s)[-1] for s in _lines(lanes)},  # the lanes' right edge
                    _reversed(_lines(gl, (0, 1))[0], "idle cause at next op"),
                    _reversed(_lines(stack, (0, 1))[0], "stack"),
                    _text(_lines(stack, (0, 1))[0]),
                )
        return out

    got = run(go())
    bar = {"|"} if mode == "ascii" else {"▐"}
    assert got["lanes"][0] == bar and got["gaplist"][0] == {" "} and got["stack"][0] == {" "}
    assert [got[f][1] for f in ("lanes", "gaplist", "stack")] == [False, True, False]
    assert [got[f][2] for f in ("lanes", "gaplist", "stack")] == [False, False, True]
    assert got["stack"][3].lstrip("▏|").startswith(" stack")  # the stack panel's title, beside the list's header


@pytest.mark.parametrize("mode", MODES)
def test_the_tables_and_their_info_boxes_show_the_focus(monkeypatch, mode):
    kw = _mode(monkeypatch, mode)

    async def go():
        out = []
        async with opened(SYNC, size=(80, 24), **kw) as (app, pilot):
            for view, table in (("2", "#kernels"), ("3", "#findings")):
                await pilot.press(view)
                await pilot.pause()
                tb = app.screen.query_one(table)
                box = tb.parent.query_one(".infobox")
                seen = []
                for _ in range(2):
                    seen.append((app.focused is tb,
                                 all(s.style.reverse for s in _lines(tb, (0, 1))[0] if s.text.strip()),
                                 _reversed(_lines(box, (0, 1))[0], "detail")))
                    await pilot.press("tab")
                    await pilot.pause()
                out.append(seen)
        return out

    for seen in run(go()):
        # the table first: its header reversed; Tab: the info box, its title reversed
        assert seen == [(True, True, False), (False, False, True)]


# ----------------------------------------------------------------------------- the selection without colour
@pytest.mark.parametrize("mode", ["no_color", "no_color_ascii"])
def test_the_selected_row_is_reversed_without_colour(monkeypatch, mode):
    """Under NO_COLOR the selected gap's row is reversed, with the focus on the gap list or elsewhere (it was a grey
    background a shade from the others'), and so is the kernels table's cursor row."""
    monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        async with opened(SYNC, size=(80, 24), ascii=mode.endswith("ascii")) as (app, pilot):
            gl = app.screen.query_one("#gaplist")
            sel = app.scene.gaps.selected

            def row(r):
                return _lines(gl)[1 + r - int(gl.scroll_offset.y)]

            blurred, other = row(sel), row(sel + 1)
            await pilot.press("tab")  # the gap list focused
            await pilot.pause()
            focused = row(sel)
            await pilot.press("2")
            await pilot.pause()
            kt = app.screen.query_one("#kernels")
            krow = _lines(kt, (1 + kt.cursor_row, 2 + kt.cursor_row))[0]
            return blurred, focused, other, krow, app.focused is kt

    blurred, focused, other, krow, on_table = run(go())
    assert on_table
    for strip in (blurred, focused, krow):
        assert all(s.style.reverse for s in strip if s.text.strip()), _text(strip)
    assert not any(s.style.reverse for s in other if s.text.strip())


@pytest.mark.parametrize("mode", ["no_color", "no_color_ascii"])
def test_cause_labels_read_without_colour(monkeypatch, mode):
    """Every cause's name in the gap list and the stack panel stands apart from its background under NO_COLOR (copy
    and gpu-wait were a dark grey on a dark grey: their colours, magenta and blue, made grey)."""
    monkeypatch.setenv("NO_COLOR", "1")
    kw = {"ascii": mode.endswith("ascii")}
    from gapscope.tui.gaplist import SHORT_CAUSE

    async def go():
        seen = {}
        async with opened(COPY, size=(80, 24), **kw) as (app, pilot):
            gl, stack = app.screen.query_one("#gaplist"), app.screen.query_one("#stack")
            sc = app.scene
            for _ in range(8):  # c: the next cause; each filter shows its gaps (the first selected)
                await pilot.press("c")
                await pilot.pause()
                name = sc.gaps.cause_filter
                if name is None:
                    continue
                from gapscope.analysis import CAUSES

                cause = CAUSES[name]
                short = SHORT_CAUSE.get(cause, cause)
                cells = [s for strip in _lines(gl)[1:] for s in strip if s.text.strip() == short]
                label = [s for strip in _lines(stack) for s in strip if s.text.strip() == cause]
                seen[cause] = (min(_contrast(s.style) for s in cells), min(_contrast(s.style) for s in label))
        return seen

    seen = run(go())
    assert {"copy", "gpu-wait", "launch"} <= set(seen)
    for cause, (cell, label) in seen.items():
        assert cell > 0.35 and label > 0.35, (cause, cell, label)


# ----------------------------------------------------------------------------- keys that act where they are shown
def test_gap_keys_do_nothing_in_the_findings_and_kernels_views():
    """n (and the other gap and lanes keys) in the kernels or findings view: the gap selection, the gap list's
    cursor and the time window stay as they were (n moved the hidden list's cursor), and the footer does not offer
    them there."""

    async def go():
        async with opened(SYNC, size=(80, 24)) as (app, pilot):
            sc = app.scene
            gl = app.screen.query_one("#gaplist")
            before = (sc.gaps.selected, sc.gaps.selected_gap, gl.cursor_row, sc.gaps.cause_filter,
                      (sc.view.t0, sc.view.t1, sc.view.cursor), sc.mark)
            seen = []
            for view in ("3", "2"):
                await pilot.press(view)
                await pilot.pause()
                shown = {b.binding.key for b in app.screen.active_bindings.values() if b.binding.show}
                await pilot.press("n", "n", "N", "c", "f", "w", "left", "m", "slash")
                await pilot.pause()
                seen.append((shown, app.screen.view_name()))
            await pilot.press("1")
            await pilot.pause()
            after = (sc.gaps.selected, sc.gaps.selected_gap, gl.cursor_row, sc.gaps.cause_filter,
                     (sc.view.t0, sc.view.t1, sc.view.cursor), sc.mark)
            search = app.screen.search_keys.search_box()
            return before, after, seen, search is None or not search.has_class("-on")

    before, after, seen, no_box = run(go())
    assert after == before and no_box
    for shown, view in seen:
        assert view in ("findings", "kernels")
        assert not shown & {"n", "N", "c", "w,plus,equals_sign", "slash"}, shown


def test_enter_on_a_table_row_and_escape_from_a_table_view():
    """Enter in the kernels view finds the kernel in the lanes (the footer's Enter, bound over the table's own);
    Esc in a table view goes back to the lanes, also while a search is on (it ended the search on the hidden
    lanes and stayed in the table)."""

    async def go():
        async with opened(SYNC, size=(100, 30)) as (app, pilot):
            scr = app.screen
            await pilot.press("2")
            await pilot.pause()
            kt = scr.query_one("#kernels")
            await pilot.press("enter")
            await pilot.pause()
            found = (scr.view_name(), app.focused is scr.lanes, bool(app.scene.search.query))
            await pilot.press("2")
            await pilot.pause()
            await pilot.press("escape")
            await pilot.pause()
            back = (scr.view_name(), app.focused is scr.lanes, bool(app.scene.search.query))
            return found, back, kt.row_count

    found, back, rows = run(go())
    assert rows and found == ("lanes", True, True)
    assert back == ("lanes", True, True)  # back to the lanes; the search still on (Esc there ends it)


# ----------------------------------------------------------------------------- j / k scroll a text pane
@pytest.mark.parametrize("mode", ["colour", "ascii"])
def test_j_and_page_down_scroll_the_text_pane_with_the_focus(monkeypatch, mode):
    kw = _mode(monkeypatch, mode)

    async def go():
        out = {}
        async with opened(SYNC, size=(80, 24), **kw) as (app, pilot):
            stack = app.screen.query_one("#stack")
            stack.focus()
            await pilot.pause()
            ys = [stack.scroll_y]
            for key in ("j", "j", "k", "pagedown"):
                await pilot.press(key)
                await pilot.pause()
                ys.append(stack.scroll_y)
            out["stack"] = (ys, stack.scrollable_content_region.height)
            await pilot.press("3")
            await pilot.pause()
            box = app.screen.query_one("#findingsview .infobox")
            await pilot.press("tab")
            await pilot.pause()
            assert app.focused is box
            ys = [box.scroll_y]
            for key in ("j", "j", "k", "pagedown"):
                await pilot.press(key)
                await pilot.pause()
                ys.append(box.scroll_y)
            out["box"] = (ys, box.scrollable_content_region.height)
        return out

    got = run(go())
    ys, h = got["stack"]
    # one line a press; a page: the lines shown under the panel's title
    assert ys[:4] == [0, 1, 2, 1] and ys[4] == 1 + h - 1, ys
    ys, h = got["box"]
    assert ys[:4] == [0, 1, 2, 1] and ys[4] > 1, ys


# ----------------------------------------------------------------------------- scroll bars without colour
def _bar_cells(w) -> tuple[list, list]:
    """(the thumb's cells, the track's cells) of ``w``'s vertical scroll bar as the terminal gets them (after the
    app's filters): each a background luminance, a thumb cell's drawn in reverse video (its colour the background)."""
    bar = w.vertical_scrollbar
    width, height = bar.outer_size
    thumb, track = [], []
    for strip in bar.render_lines(Region(0, 0, width, height)):
        for s in strip:
            st = s.style
            if st.reverse:  # the thumb: Textual draws it as its colour, reversed
                thumb.append(_lum(st.color, (255, 255, 255)))
            elif s.text.strip():  # the thumb's ends: a partial block in the thumb's colour
                thumb.append(_lum(st.color, (255, 255, 255)))
            else:
                track.append(_lum(st.bgcolor, (0, 0, 0)))
    return thumb, track


def test_scroll_bar_thumbs_stand_apart_from_their_track_without_colour(monkeypatch):
    """Under NO_COLOR the gap list's, the stack panel's and the kernels table's scroll bars show their thumb apart
    from the track (Textual's greys made it #282828 on #000000, a thumb nobody sees)."""
    monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        out = {}
        async with opened(SYNC, size=(80, 24)) as (app, pilot):
            assert app.no_color
            for sel in ("#gaplist", "#stack"):
                w = app.screen.query_one(sel)
                assert w.show_vertical_scrollbar, sel
                out[sel] = _bar_cells(w)
            await pilot.press("2")
            await pilot.pause()
            kt = app.screen.query_one("#kernels")
            if kt.show_vertical_scrollbar:
                out["#kernels"] = _bar_cells(kt)
        return out

    got = run(go())
    assert {"#gaplist", "#stack"} <= got.keys()
    for sel, (thumb, track) in got.items():
        assert thumb and track, sel
        assert min(abs(a - b) for a in thumb for b in track) > 0.35, (sel, thumb, track)


def test_the_gap_rows_styles_are_made_once_per_process_and_follow_no_color(monkeypatch):
    """The lanes' gap rows take their cause colours from one table per process (every lanes widget and app the
    same objects), made again only where what it is made of differs: NO_COLOR (the causes in the terminal's own
    colour) or the cause registry."""
    from gapscope.tui import timeline

    monkeypatch.delenv("NO_COLOR", raising=False)
    names = timeline.registry_cause_names()
    assert names and timeline.registry_cause_names() is names
    colour = timeline.gap_styles(names)
    assert timeline.gap_styles(tuple(names)) is colour
    monkeypatch.setenv("NO_COLOR", "1")
    plain = timeline.gap_styles(names)
    assert plain is not colour and timeline.gap_styles(names) is plain
    n = len(names)
    assert all(st.color is not None and st.color.is_default for st in plain[1:1 + n])
    assert any(not st.color.is_default for st in colour[1:1 + n])
