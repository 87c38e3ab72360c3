"""The before/after view's own keys (tui/diffview.py): help (? and F1) and legend (g) on the explorer's help
screen with the view's key table, export (e: `gapscope report A B`'s Markdown next to A, never over a file),
Enter on a change (the change in both traces), and one word for "B has it, A has not": "not in A" (b / B visit
those gaps; m stays the explorer's mark). Pilot tests on the committed samples, and the scene's part without an
app."""

from __future__ import annotations

import asyncio
import re
import shutil

import numpy as np
import pytest
from textual.widgets import DataTable

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import diff_ready
from gapscope.tui import keys
from gapscope.tui.diffapp import DiffApp
from gapscope.tui.diffscene import DiffScene
from gapscope.tui.diffview import DIFF_KEYS, DiffScreen
from gapscope.tui.export import break_at_marks, notice_width
from gapscope.tui.screens import HelpScreen
from gapscope.tui.textdump import screen_text

A = SAMPLE_TRACES / "demo-eager.decode.json.gz"
B = SAMPLE_TRACES / "demo-eager-python.decode.json.gz"
SYNC = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"  # A of a pair whose B (demo-eager) lost its syncs


@pytest.fixture
def pair():
    if not (A.exists() and B.exists()):
        pytest.skip("traces/ samples are not present")
    return str(A), str(B)


def _run(pair, steps, size=(100, 30), notifications=False):
    """A DiffApp on ``pair``, the diff screen up, then ``await steps(app, pilot)``; returns what it returns."""

    async def go():
        app = DiffApp(*pair, load_opts={"no_cache": True})
        async with app.run_test(size=size, notifications=notifications) as pilot:
            await diff_ready(pilot)
            assert isinstance(app.screen, DiffScreen)
            return await steps(app, pilot)

    return asyncio.run(go())


# ---------------------------------------------------------------------------------------- the key table
def test_bindings_and_help_are_one_table():
    """The bindings and the help's rows are made from DIFF_KEYS; each entry's shown keys are its bindings' keys
    (the help cannot name a key that does not work, nor miss one that does)."""
    assert DiffScreen.BINDINGS == keys.bindings(DIFF_KEYS)
    assert DiffScreen.KEY_HELP == keys.help_rows(DIFF_KEYS)
    for k in DIFF_KEYS:
        if k.bindings:
            bound = {name for b in k.bindings for name in b.key.split(",")}
            assert keys.shown_keys(k.shown) == bound, k.shown
        else:
            assert k.bound_by, k.shown
    bound = {name for b in DiffScreen.BINDINGS for name in b.key.split(",")}
    assert {"question_mark", "f1", "g", "e", "enter", "b", "B"} <= bound


def test_keys_mean_what_they_mean_in_the_explorer():
    """m / M are the explorer's mark: never bound here; the gaps not in A are on b / B, which the explorer leaves
    free. A key both bind does the same thing (n: next gap, e: export, g: legend, ?: help, Esc: back, q: quit ...),
    but for the few listed, whose explorer actions the diff view has not: x (explorer: expand; here: swap, as the
    explorer's D help says) and [ ] (explorer: previous / next event; here: step)."""
    from gapscope.tui.main import MainScreen

    def actions(bindings):
        out = {}
        for b in bindings:
            for name in b.key.split(","):
                out[name] = b.action.split("(")[0]
        return out

    explorer, diff = actions(MainScreen.BINDINGS), actions(DiffScreen.BINDINGS)
    assert not {"m", "M"} & diff.keys()
    assert not {"b", "B"} & explorer.keys()
    same = {"next_gap": "gap", "prev_gap": "gap", "pan": "pan", "zoom": "zoom", "fit": "fit", "export": "export",
            "legend": "legend", "help": "help", "escape": "leave", "detail": "enter"}
    differ = {k for k in explorer.keys() & diff.keys() if same.get(explorer[k], explorer[k]) != diff[k]}
    assert differ == {"x", "left_square_bracket", "right_square_bracket"}
    assert explorer["q"] == diff["q"] == "app.quit"


# ------------------------------------------------------------------------------------- x, [ ], q and Esc
def _help_row(text: str, shown: str) -> str:
    """The help screen's row of the keys ``shown``: what it says they do."""
    m = re.search(r"│ " + re.escape(shown) + r"\s+(.*?)\s*│", text)
    assert m, shown
    return m.group(1)


def test_x_brackets_q_and_esc_do_what_the_footer_and_the_help_say(pair):
    """``gapscope diff``: ] and [ move both traces to the next / previous step (wrapping), x swaps A and B (B
    becomes A, on a new screen that still quits on leaving), the footer names them ("] step", "x swap") and Esc
    as "quit"; q quits, as in the explorer."""

    async def steps(app, pilot):
        scr, sc = app.screen, app.screen.scene
        footer = screen_text(app).splitlines()[-1]
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        seen = [sc.step]
        for k in ("right_square_bracket", "right_square_bracket", "left_square_bracket", "left_square_bracket",
                  "left_square_bracket"):
            await pilot.press(k)
            await pilot.pause()
            seen.append(sc.step)
        names = [p.path for p in sc.parts]
        await pilot.press("x")
        await diff_ready(pilot)
        swapped = app.screen
        out = (footer, help_text, seen, sc.n_steps, names, [p.path for p in swapped.scene.parts],
               swapped is not scr and swapped.quit_on_leave, screen_text(app).splitlines()[-1])
        await pilot.press("q")
        await pilot.pause()
        return out + (app.return_code,)

    footer, help_text, seen, n, names, swapped, quits, footer2, code = _run(pair, steps, size=(120, 40))
    assert re.search(r"\] step\b", footer) and re.search(r"\bx swap\b", footer) and re.search(r"\besc quit\b", footer)
    assert "back" not in footer and footer2 == footer
    assert _help_row(help_text, "] / [").startswith("next / previous step")
    assert _help_row(help_text, "x").startswith("swap before and after")
    assert _help_row(help_text, "q").startswith("quit") and _help_row(help_text, "Esc").startswith("back to")
    assert n > 2 and seen == [0, 1, 2, 1, 0, n - 1]
    assert swapped == names[::-1] and quits
    assert code == 0


def test_in_the_explorer_esc_goes_back_and_q_quits(pair):
    """The diff opened by D in the explorer: the footer offers Esc as "back" (no "quit"); Esc goes back to the
    explorer; q there quits the app, as q does in the explorer."""
    from gapscope.tui.app import GapscopeApp
    from gapscope.tui.main import MainScreen

    async def go():
        app = GapscopeApp(list(pair), load_opts={"no_cache": True})
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(60):
                await app.workers.wait_for_complete()
                await pilot.pause()
                if len(app.scenes) == 2 and all(s.state.ready for s in app.scenes):
                    break
            got = []
            for leave in ("escape", "q"):
                await pilot.press("D")
                await diff_ready(pilot)
                got.append(screen_text(app).splitlines()[-1])
                await pilot.press(leave)
                await pilot.pause()
                got.append((type(app.screen) is MainScreen, app.return_code))
            return got

    footer, after_esc, footer2, after_q = asyncio.run(go())
    assert re.search(r"\besc back\b", footer) and "quit" not in footer and footer2 == footer
    assert after_esc == (True, None)
    assert after_q[1] == 0  # the app quit


# ------------------------------------------------------------------------------------------ help, legend
def test_question_mark_and_f1_open_the_help_with_the_diff_keys(pair):
    async def steps(app, pilot):
        out = []
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            await pilot.pause()
            scr = app.screen
            out.append((isinstance(scr, HelpScreen), getattr(scr, "key_rows", None),
                        getattr(scr, "legend_only", None), screen_text(app)))
            await pilot.press("escape")
            await pilot.pause()
            out.append(isinstance(app.screen, DiffScreen))
        return out

    got = _run(pair, steps, size=(120, 60))
    for is_help, rows, legend_only, text in got[0::2]:
        assert is_help and legend_only is False
        assert rows == DiffScreen.KEY_HELP  # the diff's own keys, not the explorer's
        assert "Keys of the before/after view" in text
        for shown in ("n / N", "b / B", "] / [", "Enter", "e", "g", "? / F1", "Esc", "q"):
            assert re.search(r"│ " + re.escape(shown) + r"\s", text), shown
        assert "gap of B not in A" in text and "before/after report" in text
        assert "filter the gap list by cause" not in text  # an explorer key
        assert "Legend" in text
    assert got[1::2] == [True, True]  # Esc closes it, back on the diff


def test_g_opens_the_legend_with_the_diff_rows(pair):
    async def steps(app, pilot):
        await pilot.press("g")
        await pilot.pause()
        scr = app.screen
        got = (isinstance(scr, HelpScreen), getattr(scr, "legend_only", None), screen_text(app))
        await pilot.press("g")  # g again closes it, as in the explorer
        await pilot.pause()
        return got + (isinstance(app.screen, DiffScreen),)

    is_help, legend_only, text, back = _run(pair, steps, size=(120, 60))
    assert is_help and legend_only and back
    assert "Legend" in text and "Keys of the before/after view" not in text
    # the diff's rows (the footer under the legend says "not in A" too: the rows' own words)
    assert "not in A  row under B's idle gaps" in text and "matches B row under A's idle gaps" in text
    assert "CPU thread rows" in text  # and the lanes' legend, the explorer's


# ---------------------------------------------------------------------------------------------- export
def test_e_writes_the_report_next_to_A_and_never_over_a_file(pair, tmp_path, capsys):
    from gapscope.cli import main

    a, b = (shutil.copy(p, tmp_path / p.name) for p in (A, B))
    stem = "demo-eager.decode-vs-demo-eager-python.decode.gapscope"
    mine = tmp_path / f"{stem}.md"
    mine.write_text("mine\n")

    async def steps(app, pilot):
        texts = []
        for _ in range(2):
            await pilot.press("e")
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.pause(0.2)
            # the newest notice's lines: the screen's text in its region, its border and padding taken off
            toast = [w for w in app.screen.walk_children() if type(w).__name__ == "Toast"][-1]
            r = toast.region
            rows = screen_text(app).splitlines()[r.y:r.bottom]
            texts.append(([x.ljust(r.right)[r.x:r.right].strip(" ▌") for x in rows], app.screen.shown.msg))
        return texts

    texts = _run((str(a), str(b)), steps, size=(80, 24), notifications=True)
    assert mine.read_text() == "mine\n"  # not overwritten
    first, second = tmp_path / f"{stem}-2.md", tmp_path / f"{stem}-3.md"
    assert first.exists() and second.exists()
    # the file is `gapscope report A B`'s Markdown
    assert main(["report", "--no-cache", str(a), str(b)]) == 0
    assert first.read_text() == capsys.readouterr().out == second.read_text()
    # the notice names the folder and the file, its lines broken between words and never inside one: its lines on
    # the screen are those (not folded again by the notice)
    for (lines, msg), path in zip(texts, (first, second)):
        pieces = [p for line in (f"wrote in {tmp_path}:", path.name)
                  for p in break_at_marks(line, notice_width(80))]
        assert len(pieces) > 2  # (the name is longer than the notice is wide)
        assert [x for x in lines if x] == ["export", *pieces], lines
        assert msg == f"wrote {path.name} in {tmp_path}"  # and the status line says it (under the notice)


def test_break_at_marks_breaks_between_words_only():
    name = "demo-eager-sync.decode-vs-demo-eager.decode.gapscope-2.md"
    lines = break_at_marks(name, 29)
    assert "".join(lines) == name and all(len(x) <= 29 for x in lines)
    assert all(x[-1] in "/-._" for x in lines[:-1])  # each line ends where a word does
    assert len(lines[-1]) >= 8  # no stub of a line ("md")
    assert break_at_marks("wrote in /a/b:", 29) == ["wrote in /a/b:"]


# --------------------------------------------------------------------------------------- Enter on a change
def _table_keys(app) -> list:
    tb = app.screen.query_one("#deltas", DataTable)
    return [r.key.value for r in tb.ordered_rows]


async def _enter_on(app, pilot, key: str) -> None:
    """The list of changes focused, its cursor on the row ``key``, Enter."""
    tb = app.screen.query_one("#deltas", DataTable)
    tb.focus()
    tb.move_cursor(row=tb.get_row_index(key))
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()


def _in_window(sc, t0: int, t1: int) -> bool:
    return sc.view.t0 <= t0 and t1 <= sc.view.t1


def _largest_listed_row(an, part_rows_ok) -> int:
    g = an.gaps
    dur = np.asarray(g.dur_ns[:len(g)])
    rows = np.flatnonzero((dur >= an.config.min_listed_gap_ns) & part_rows_ok)
    return int(rows[np.argmax(dur[rows])])


def test_enter_on_a_cause_a_gap_and_a_finding_shows_the_gap_of_B_with_A_at_the_same_place(pair):
    from gapscope.analysis import CAUSES

    async def steps(app, pilot):
        scr = app.screen
        sc = scr.scene
        c = sc.cmp
        b = sc.parts[1].analysis
        out = {}
        # a cause with gaps in B: its largest gap of B
        ci = next(i for i, d in enumerate(c.causes) if d.b_count)
        await _enter_on(app, pilot, f"cause:{ci}")
        gid = sc.gaps.selected_gap
        want = _largest_listed_row(b, np.asarray(b.gaps.cause[:len(b.gaps)]) == CAUSES.index(c.causes[ci].cause))
        out["cause"] = (int(sc.gaps.part[gid]), int(sc.gaps.row[gid]) == want, sc.match_gid)
        s0, s1 = int(sc.gaps.start[gid]), int(sc.gaps.end[gid])
        m = sc.match_gid
        out["cause_window"] = (_in_window(sc, s0, s1), sc.view.cursor == s0,
                               m < 0 or _in_window(sc, int(sc.gaps.start[m]), int(sc.gaps.end[m])),
                               m < 0 or int(sc.gaps.end[m]) == s1)  # lined up: both end at the same time
        lane = sc.display.cursor_lane()
        out["cause_lane"] = (lane.kind, lane.part)
        out["focus"] = isinstance(scr.focused, DataTable)  # the list keeps the focus: the next change is one key on
        # a gap not in A, from its own row
        gkey = next(k for k in _table_keys(app) if k and k.startswith("gap:"))
        await _enter_on(app, pilot, gkey)
        gid = sc.gaps.selected_gap
        out["gap"] = (int(sc.gaps.part[gid]), int(sc.gaps.row[gid]) == int(gkey[4:]), bool(sc.b_new[gid]),
                      _in_window(sc, int(sc.gaps.start[gid]), int(sc.gaps.end[gid])))
        # a finding B has and A has not: one of its gaps, the largest listed
        fi = next(i for i, f in enumerate(c.findings) if f.status == "new")
        await _enter_on(app, pilot, f"finding:{fi}")
        gid = sc.gaps.selected_gap
        f = sc.finding_of(c.findings[fi], 1)
        rows = np.asarray(f.gap_rows)
        want = _largest_listed_row(b, np.isin(np.arange(len(b.gaps)), rows))
        out["finding"] = (int(sc.gaps.part[gid]), int(sc.gaps.row[gid]) == want)
        out["status"] = screen_text(app)
        return out

    out = _run(pair, steps)
    assert out["cause"][:2] == (1, True)
    assert out["cause_window"] == (True, True, True, True)
    assert out["cause_lane"] == ("gaps", 1)
    assert out["focus"]
    assert out["gap"] == (1, True, True, True)
    assert out["finding"] == (1, True)
    assert "B gap" in out["status"]


def test_enter_on_a_kernel_shows_its_first_run_in_A_and_in_B_lined_up(pair):
    async def steps(app, pilot):
        sc = app.screen.scene
        c = sc.cmp
        ki = next(i for i, k in enumerate(c.kernels) if k.status == "both" and k.per_step_delta_us)
        before = (sc.view.t0, sc.view.t1)
        await _enter_on(app, pilot, f"kernel:{ki}")
        kd = c.kernels[ki]
        runs = []
        for side, st in ((0, c.steps_a), (1, c.steps_b)):
            m = sc.parts[side].model
            first = next(int(e) for e in st.kernels.tolist() if m.name(int(e)) == kd.name)  # by start time
            e = sc.first_run(side, kd.name, kd.shapes)
            runs.append((int(m.ts_ns[e]) + sc.parts[side].offset, int(m.ts_ns[e] + m.dur_ns[e]) + sc.parts[side].offset,
                         m.name(e) == kd.name, int(m.ts_ns[e]) >= int(m.ts_ns[first])))
        lane = sc.display.cursor_lane()
        return runs, before, (sc.view.t0, sc.view.t1), sc.view.cursor, (lane.kind, lane.part), \
            sc.gaps.selected_gap, screen_text(app)

    (ra, rb), before, after, cursor, lane, sel, text = _run(pair, steps)
    assert ra[2] and rb[2] and ra[3] and rb[3]
    assert ra[0] == rb[0] == cursor  # lined up, the cursor on them
    assert after != before and after[0] <= min(ra[0], rb[0]) and max(ra[1], rb[1]) <= after[1]
    assert lane == ("stream", 1) and sel == -1
    assert "first run in A and in B, lined up: kernel" in text


def test_enter_in_the_lanes_visits_the_gap_under_the_cursor(pair):
    """In the lanes, Enter on a gap (an idle gaps row, or the row of gaps not in A) visits it as n does; elsewhere
    it says where Enter works."""

    async def steps(app, pilot):
        sc = app.screen.scene
        gid = int(sc.new_order[1])  # the second largest gap not in A, on its "not in A" row
        await pilot.press("b", "b")
        await pilot.pause()
        sc.select_gid(-1)  # nothing selected: Enter finds it under the cursor
        sc.gaps.selected = -1
        rows = sc.display.rows()
        sc.display.cursor = next(i for i, r in enumerate(rows) if r.lane is not None and r.lane.kind == "marks")
        sc.view.cursor = int(sc.gaps.start[gid]) + int(sc.gaps.dur[gid]) // 2
        app.screen.update()
        await pilot.press("enter")
        await pilot.pause()
        got = sc.gaps.selected_gap
        sc.display.cursor = 0  # the header row of A: no gap there
        app.screen.update()
        await pilot.press("enter")
        await pilot.pause()
        return gid, got, app.screen.shown.msg

    gid, got, msg = _run(pair, steps)
    assert got == gid
    assert msg.startswith("Enter: on a gap in the lanes, or on a change in the list")


def test_gone_changes_show_the_gap_of_A():
    """A cause or a finding B no longer has (demo-eager-sync -> demo-eager: the syncs are gone): A's largest
    gap of it, lined up with B at the same place (DiffScene.goto_change, no app)."""
    if not (SYNC.exists() and A.exists()):
        pytest.skip("traces/ samples are not present")
    from gapscope.analysis import analyze
    from gapscope.trace import load

    ma, mb = load(str(SYNC), no_cache=True), load(str(A), no_cache=True)
    sc = DiffScene(str(SYNC), ma, analyze(ma), str(A), mb, analyze(mb))
    c = sc.cmp
    ci = next(i for i, d in enumerate(c.causes) if d.cause == "sync")
    assert c.causes[ci].b_count == 0 and c.causes[ci].a_count > 0
    assert sc.goto_change(f"cause:{ci}", 60) == ""
    gid = sc.gaps.selected_gap
    assert sc.gaps.part[gid] == 0 and sc.gaps.cause[gid] == sc.gaps.cause[sc.largest_gap(0, cause="sync")]
    assert sc.view.t0 <= sc.gaps.start[gid] < sc.gaps.end[gid] <= sc.view.t1
    assert sc.aligned_on is not None  # B moved to line up with the gap's place
    fi = next(i for i, f in enumerate(c.findings) if f.status == "gone" and f.cause == "sync")
    sc.goto_change(f"finding:{fi}", 60)
    gid = sc.gaps.selected_gap
    assert sc.gaps.part[gid] == 0 and int(sc.gaps.row[gid]) in set(sc.finding_of(c.findings[fi], 0).gap_rows.tolist())


# ----------------------------------------------------------------------------------- one meaning of "new"
def test_not_in_A_is_the_one_word_for_what_B_has_and_A_has_not(pair):
    async def steps(app, pilot):
        sc = app.screen.scene
        start = screen_text(app)
        tb = app.screen.query_one("#deltas", DataTable)
        rows = [" ".join(str(c) for c in tb.get_row_at(i)) for i in range(tb.row_count)]
        await pilot.press("b")
        await pilot.pause()
        return sc.b_order.size, sc.new_order.size, start, rows, screen_text(app), \
            sc.gaps.selected_gap == int(sc.new_order[0])

    nb, nn, start, rows, after_b, on_first = _run(pair, steps)
    assert 0 < nn < nb
    assert f"{nb} listed gaps in B, {nn} of them not in A" in start  # both numbers, said apart
    footer = start.splitlines()[-1]
    assert "b not in A" in footer and "new" not in footer and " m " not in footer
    assert re.search(r"^not in A\b", start, re.M)  # the lanes' row of them
    # nowhere "new": the list of changes says "not in A" (and "gone in B")
    assert not [r for r in rows if re.search(r"\bnew\b", r)]
    assert not re.search(r"\bnew\b", after_b)  # nor on the lanes (the row of gaps not in A says their length)
    assert any("gap not in A:" in r for r in rows) and any("not in A:" in r for r in rows)
    assert on_first and re.search(r"B gap .* not in A", after_b)


def test_ascii_help_legend_and_enter_are_plain_ascii(pair):
    """--ascii: the help, the legend and a change shown (Enter) draw nothing a non-UTF-8 terminal cannot show."""

    async def go():
        app = DiffApp(*pair, ascii=True, load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24)) as pilot:
            await diff_ready(pilot)
            bad = {}
            for k in ("question_mark", "escape", "g", "escape", "tab", "j", "j", "j", "j", "enter"):
                await pilot.press(k)
                await pilot.pause()
                bad[k] = sorted({ch for ch in screen_text(app) if not ch.isascii()})
            return bad

    assert all(not v for v in asyncio.run(go()).values())
