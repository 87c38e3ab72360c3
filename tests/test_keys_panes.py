"""Each pane declares its own keys next to its actions (``LaneKeys.KEYS``, ``GapKeys.KEYS``, ``SearchKeys.KEYS``)
and the screen its own (``SCREEN_KEYS``); ``MainScreen`` binds them in one place (issue 22, item 5). The help
screen's rows, the bindings and the lanes view's footer are written down here; they were those of the one
screen-level table of tui/keys.py before the panes owned their keys, but for what the footer per view added (the
views' keys and Enter shown in the kernels and findings views, ↑ ↓ / j k scrolling an info box; issue "focus and
selection are hard to see")."""

from __future__ import annotations

import pytest

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened, run
from gapscope.tui.textdump import screen_text

#: the help screen's rows (keys, what they do), in its order
HELP_BEFORE = [
    ('n / N', 'next / previous gap, largest first (jumps there, updates the stack panel)'),
    ('← → / h l / a d', 'pan the time window'),
    ('w s / + - / =', 'zoom in / out about the cursor'),
    ('shift+← → / H L', 'move the cursor one cell'),
    ('[ ]', 'cursor to the previous / next event on the lane'),
    ('↑ ↓ / j k', 'move in the focused pane: lanes, gaps, table rows; scroll the stack panel or an info box '
                  '(PgUp / PgDn: a page)'),
    ('space / x', 'expand / collapse a CPU thread into its stack depth rows (on the launcher row: its outer frames; '
                  'on a folded row: every lane)'),
    ('0 / Home', "fit the analysed window (the span the report's numbers are of)"),
    ('f / z', 'zoom to the selected gap (again, or right after n: tighter, the gap fills the window)'),
    ('c / C', 'filter the gap list by cause (next / previous cause)'),
    ('Enter', 'detail of what is under the cursor (lanes) or of the gap (gap list); a kernel: its first call in the '
              'lanes; a finding: its gaps'),
    ('/', 'find a kernel or op by name; Enter finds, then n / N step through the matches, Esc ends'),
    ('Tab', "next pane: lanes, gap list, stack panel (2, 3: table, info box); the focused one's title is reversed"),
    ('1 2 3', 'views: lanes, kernels, findings'),
    ('t', 'next loaded trace (prefill / decode ...)'),
    ('D', 'before/after: this tab and the next, the earlier one as A (before), step by step (gapscope diff A B; x '
          'there swaps)'),
    ('o', "times from the analysed window's start (as the report) or in the trace's own time"),
    ('v', 'jump between a kernel and its launch call (the other end is marked on the lanes)'),
    ('m', "mark the cursor's time; m again: stats of the range between (busy, idle, causes, kernels, host frames and "
          "ops by own time)"),
    ('M', 'the same for the step, range or event under the cursor'),
    ('Esc', 'end the search, range or filter; back to the lanes'),
    ('e', 'export: findings (Markdown + JSON) and an SVG of the screen'),
    ('g', 'legend'),
    ('? / F1', 'this help'),
    ('q', 'quit'),
]

#: the bindings, in order: (keys, action, description, shown in the footer, key_display, priority)
BINDINGS_BEFORE = [
    ('n', 'next_gap', 'next gap', True, None, False),
    ('N', 'prev_gap', 'prev gap', True, 'N', False),
    ('left,h,a', 'pan(-0.25)', 'pan', False, None, False),
    ('right,l,d', 'pan(0.25)', 'pan', False, None, False),
    ('w,plus,equals_sign', 'zoom(2.0)', 'zoom', True, 'w/s', False),
    ('s,minus', 'zoom(0.5)', 'zoom out', False, None, False),
    ('shift+left,H', 'cursor(-1)', 'cursor', False, None, False),
    ('shift+right,L', 'cursor(1)', 'cursor', False, None, False),
    ('left_square_bracket', 'event(-1)', 'prev event', False, None, False),
    ('right_square_bracket', 'event(1)', 'next event', False, None, False),
    # the panes bind these first; the screen's scroll a pane that binds only the arrows (an info box)
    ('down,j', 'scroll_text(1)', 'scroll down', False, None, False),
    ('up,k', 'scroll_text(-1)', 'scroll up', False, None, False),
    ('space,x', 'expand', 'expand', False, None, False),
    ('0,home', 'fit', 'fit', False, None, False),
    ('f,z', 'focus_gap', 'zoom gap', False, None, False),
    ('c', 'cause(1)', 'cause', True, None, False),
    ('C', 'cause(-1)', 'cause', False, None, False),
    # Enter on a table's row, as the footer of the kernels and findings views says it
    ('enter', "open_row('kernels')", 'in the lanes', True, 'Enter', True),
    ('enter', "open_row('findings')", 'its gaps', True, 'Enter', True),
    ('enter', 'detail', 'detail', False, None, False),
    ('slash', 'search', 'find', True, None, False),
    # the views' keys as the table views' footer shows them, then as they were (hidden)
    ('1', "view('lanes', True)", 'lanes', True, None, False),
    ('2', "view('kernels', True)", 'kernels', True, None, False),
    ('3', "view('findings', True)", 'findings', True, None, False),
    ('1', "view('lanes')", 'lanes', False, None, False),
    ('2', "view('kernels')", 'kernels', False, None, False),
    ('3', "view('findings')", 'findings', False, None, False),
    ('t', 'next_trace', 'trace', False, None, False),
    ('D', 'diff', 'diff', False, 'D', False),
    ('o', 'origin', 'time origin', False, None, False),
    ('v', 'link', 'launch/kernel', False, None, False),
    ('m', 'mark', 'range', False, None, False),
    ('M', 'mark_range', 'range of a step', False, None, False),
    ('escape', 'escape', 'back', False, None, False),
    ('e', 'export', 'export', True, None, False),
    ('g', 'legend', 'legend', False, None, False),
    ('question_mark,f1', 'help', 'help', True, None, False),
    ('q', 'app.quit', 'quit', True, None, False),
]

#: the lanes view's footer at 200 columns (the old table's), whatever has the focus
FOOTER_BEFORE = " n next gap  N prev gap  w/s zoom  c cause  / find  e export  ? help  q quit"


def test_the_help_rows_and_the_bindings_are_the_old_tables():
    from gapscope.tui.main import MainScreen

    assert MainScreen.KEY_HELP == HELP_BEFORE
    assert [(b.key, b.action, b.description, b.show, b.key_display, b.priority)
            for b in MainScreen.BINDINGS] == BINDINGS_BEFORE


def test_each_pane_owns_its_keys_and_the_screen_binds_them_all():
    """Every action a key names is a method of the class that declares the key (a pane's key next to its action;
    the screen's own keys' of ``ScreenKeys``); no key is declared twice; the screen's table is the panes' and its
    own, nothing else."""
    from gapscope.tui.main import PANES, MainScreen
    from gapscope.tui.screenkeys import SCREEN_KEYS, ScreenKeys

    owners = [(p, p.KEYS) for p in PANES] + [(ScreenKeys, SCREEN_KEYS)]
    for cls, table in owners:
        for k in table:
            for b in k.bindings:
                name = b.action.split("(")[0]
                if not name.startswith("app."):
                    assert f"action_{name}" in vars(cls), (cls.__name__, b.action)
    declared = [k for _, t in owners for k in t]
    assert sorted(k.at for k in declared) == [k.at for k in MainScreen.KEYS]
    assert len({k.shown for k in declared}) == len(declared)
    assert {k.shown for k in MainScreen.KEYS} == {k.shown for k in declared}
    assert "n / N" in {k.shown for k in PANES[1].KEYS} and "/" in {k.shown for k in PANES[2].KEYS}


def test_a_pane_key_without_a_place_in_the_help_is_refused():
    from textual.binding import Binding

    from gapscope.tui import keys

    with pytest.raises(ValueError):
        keys.in_help_order([keys.Key("x", "a key", (Binding("x", "x", "x"),))])
    with pytest.raises(ValueError):
        keys.in_help_order([keys.Key("x", "a key", at=5)], [keys.Key("y", "another", at=5)])


def test_the_footer_and_the_help_screen_are_the_old_ones_whatever_has_the_focus():
    """The keys stay bound on the screen: the footer lists the same keys with the lanes, the gap list or the stack
    panel focused, and the help screen shows the old rows in the old order."""

    async def go():
        out = {}
        async with opened(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz", size=(200, 80)) as (app, pilot):
            for focus in ("lanes", "gaplist", "stack"):
                app.screen.query_one("#" + focus).focus()
                await pilot.pause()
                out[focus] = screen_text(app).rstrip("\n").split("\n")[-1]
            await pilot.press("question_mark")
            await pilot.pause()
            out["help"] = screen_text(app)
        return out

    got = run(go())
    for focus in ("lanes", "gaplist", "stack"):
        assert got[focus].rstrip() == FOOTER_BEFORE, focus
    text = got["help"]
    at = [text.index(f"│ {shown}  ") for shown, _ in HELP_BEFORE]  # a row: the box's edge, the keys, their help
    assert at == sorted(at)  # in the old order
    for shown, what in HELP_BEFORE:
        assert what[:60] in text, shown


#: the footer of the kernels and findings views at 200 columns (the table focused; on its info box: without Enter):
#: what Enter does there and the other views, never the gap or lanes keys
FOOTER_VIEWS = {
    "2": " Enter in the lanes  1 lanes  3 findings  e export  ? help  q quit",
    "3": " Enter its gaps  1 lanes  2 kernels  e export  ? help  q quit",
}


def test_each_view_has_its_footer():
    """The footer lists the keys that act in the view shown: the lanes view's as before, the kernels and findings
    views' their own; back in the lanes, the lanes' again. The screen's active bindings agree (what the footer is
    made of)."""

    async def go():
        out = []
        async with opened(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz", size=(200, 50)) as (app, pilot):
            for key in ("2", "tab", "3", "tab", "1"):
                await pilot.press(key)
                await pilot.pause()
                shown = sorted(b.binding.key for b in app.screen.active_bindings.values() if b.binding.show)
                out.append((key, app.screen.view_name(), screen_text(app).rstrip("\n").split("\n")[-1].rstrip(),
                            shown))
        return out

    (k2, v2, f2, b2), (_, _, f2box, _), (k3, v3, f3, b3), (_, _, f3box, _), (k1, v1, f1, b1) = run(go())
    assert (v2, v3, v1) == ("kernels", "findings", "lanes")
    assert f2 == FOOTER_VIEWS["2"] and f3 == FOOTER_VIEWS["3"] and f1 == FOOTER_BEFORE
    assert f2box == FOOTER_VIEWS["2"].replace(" Enter in the lanes ", "")
    assert f3box == FOOTER_VIEWS["3"].replace(" Enter its gaps ", "")
    for shown in (b2, b3):
        assert not {"n", "N", "c", "slash", "w,plus,equals_sign"} & set(shown), shown
    assert {"n", "N", "c", "slash"} <= set(b1)
