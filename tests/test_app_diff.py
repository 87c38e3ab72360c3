"""The before/after view (tui/diffscene.py, diffview.py): `gapscope diff A B`, the explorer's D key, its
keys, snapshots at 80x24 and 160x48 on two committed samples (eager decode against the same decode with ~100 µs
of Python bookkeeping per layer), and the README's key table against the screen's bindings. Its help, legend,
export, Enter on a change and its one word for "B has it, A has not" are in tests/test_app_diff_keys.py.

Update the snapshots after an intended change with
    python -m pytest tests/test_app_diff.py --snapshot-update
and look at them (snapshot_report.html) before committing.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import diff_ready, settle
from gapscope.tui.diffapp import DiffApp
from gapscope.tui.diffscene import DiffScene
from gapscope.tui.diffview import DiffScreen
from gapscope.tui.textdump import screen_text
from gapscope.cli import main

A = SAMPLE_TRACES / "demo-eager.decode.json.gz"
B = SAMPLE_TRACES / "demo-eager-python.decode.json.gz"


@pytest.fixture
def pair():
    if not (A.exists() and B.exists()):
        pytest.skip("traces/ samples are not present")
    return str(A), str(B)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_diff_snapshot(snap_compare, pair, size):
    pytest.importorskip("pytest_textual_snapshot")
    app = DiffApp(*pair, load_opts={"no_cache": True})

    async def steps(pilot):
        await diff_ready(pilot)
        if size == (160, 48):  # the largest gap of B, lined up with the gap at the same place in A
            await pilot.press("n")
            await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=steps)


def _scene(pair) -> DiffScene:
    from gapscope.analysis import analyze
    from gapscope.trace import load

    ma, mb = (load(p, no_cache=True) for p in pair)
    return DiffScene(pair[0], ma, analyze(ma), pair[1], mb, analyze(mb))


def test_steps_line_up_and_gaps_match(pair):
    sc = _scene(pair)
    ma, mb = sc.parts[0].model, sc.parts[1].model
    for k in range(4):
        sc.set_step(k)
        # the first kernel of B's step k starts with A's (kernels taken from the raw columns)
        ka = [i for i in range(ma.n) if ma.kind[i] == 0]
        kb = [i for i in range(mb.n) if mb.kind[i] == 0]
        st_a, st_b = sc.cmp.steps_a, sc.cmp.steps_b
        fa = min(int(ma.ts_ns[i]) for i in ka if i in set(st_a.step_kernels(k).tolist()))
        fb = min(int(mb.ts_ns[i]) for i in kb if i in set(st_b.step_kernels(k).tolist()))
        assert fa + sc.parts[0].offset == fb + sc.parts[1].offset
    # the largest gap of B: the A gap at the same place ends where it ends once aligned on the kernel after it
    gid = int(sc.b_order[0])
    sc.align_on_gap(gid)
    sc.select_gid(gid)
    m = sc.match_gid
    assert m >= 0 and sc.gaps.part[m] == 0 and sc.aligned_on == "the kernel after the gap"
    assert sc.gaps.end[m] == sc.gaps.end[gid]
    b = sc.parts[1].analysis
    a = sc.parts[0].analysis
    nb = b.model.name(int(b.gaps.next_idx[int(sc.gaps.row[gid])]))
    na = a.model.name(int(a.gaps.next_idx[int(sc.gaps.row[m])]))
    assert na == nb
    # new gaps in B are those match_gaps calls new, and each has its row on the "new in B" lane
    assert sc.new_order.size == int(sc.gm.new.sum()) > 0
    marked = np.concatenate([ln.segs.ref for ln in sc.marks.values()])
    assert sorted(marked.tolist()) == sorted(sc.new_order.tolist())


def test_diff_keys(pair):
    asyncio.run(_test_diff_keys(pair))


async def _test_diff_keys(pair):
    app = DiffApp(*pair, load_opts={"no_cache": True})
    async with app.run_test(size=(100, 30)) as pilot:
        await diff_ready(pilot)
        scr = app.screen
        assert isinstance(scr, DiffScreen) and "step 1/4" in screen_text(app)
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert scr.scene.step == 1 and "step 2/4: gapscope.step#1 | gapscope.step#1" in screen_text(app)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await pilot.pause()
        assert scr.scene.step == 3
        await pilot.press("b")
        await pilot.pause()
        gid = scr.scene.gaps.selected_gap
        assert gid >= 0 and scr.scene.b_new[gid] and "not in A" in screen_text(app)
        await pilot.press("n")
        await pilot.pause()
        assert scr.scene.gaps.selected_gap == int(scr.scene.b_order[0])
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code in (0, None)


def test_explorer_D_opens_the_diff_of_two_tabs(pair):
    asyncio.run(_test_explorer_D_opens_the_diff_of_two_tabs(pair))


async def _test_explorer_D_opens_the_diff_of_two_tabs(pair):
    from gapscope.tui.app import GapscopeApp

    app = GapscopeApp(list(pair), load_opts={"no_cache": True})
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(60):
            await app.workers.wait_for_complete()
            await pilot.pause()
            if len(app.scenes) == 2 and all(s.analysis is not None for s in app.scenes):
                break
        await pilot.press("D")
        for _ in range(20):
            await app.workers.wait_for_complete()
            await pilot.pause()
            if isinstance(app.screen, DiffScreen):
                break
        assert isinstance(app.screen, DiffScreen)
        text = screen_text(app)
        assert "A before: demo-eager.decode.json.gz" in text and "B after: demo-eager-python.decode.json.gz" in text
        # the explorer's keys stay with the explorer's screen: under the diff, t and c changed the hidden tab and
        # its gap list (and e exported a picture of the diff), and its footer listed them; the diff's footer lists
        # its own (its e exports the before/after report: test_app_diff_keys.py)
        await pilot.press("t", "c")
        await pilot.pause()
        assert app.current == 0 and app.scene.gaps.cause_filter is None
        footer = screen_text(app).splitlines()[-1]
        assert "cause" not in footer and "find" not in footer and "quit" not in footer
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DiffScreen)


def test_explorer_D_is_off_with_one_trace(pair):
    asyncio.run(_test_explorer_D_is_off_with_one_trace(pair))


async def _test_explorer_D_is_off_with_one_trace(pair):
    from gapscope.tui.app import GapscopeApp

    app = GapscopeApp([pair[0]], load_opts={"no_cache": True})
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        # the trace loaded and its explorer is up: D is off because there is one trace, not because nothing opened
        assert app.return_code is None and app.scene is not None and app.scene.analysis is not None
        assert len(app.scene.analysis.gaps) > 0
        main_screen = app.screen
        await pilot.press("D")
        await settle(app, pilot)
        assert not isinstance(app.screen, DiffScreen) and app.screen is main_screen and app.return_code is None


def test_cli_diff_errors(tmp_path, capsys, pair, monkeypatch):
    monkeypatch.delenv("GAPSCOPE_FORCE_TUI", raising=False)
    with pytest.raises(SystemExit) as e:
        main(["diff", pair[0]])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("gapscope: error:") and len(err.strip().splitlines()) == 1
    assert main(["diff", pair[0], str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"gapscope: error: {tmp_path / 'nope.json'}: no such file\n"
    assert main(["diff", pair[0], pair[1]]) == 2  # not a terminal under pytest
    assert "needs a terminal" in capsys.readouterr().err


def test_readme_lists_the_diff_keys():
    """Every key of the diff screen is in the README's diff section (the bindings are the source)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    sec = readme[readme.index("## Before and after"):]
    sec = sec[:sec.index("\n## ", 3)]
    from gapscope.tui.keys import SHOWN_NAME

    for b in DiffScreen.BINDINGS:
        for k in b.key.split(","):
            shown = SHOWN_NAME.get(k, k)
            assert re.search(r"`" + re.escape(shown) + r"`", sec), (k, shown)


def test_trace_strings_are_never_markup(tmp_path):
    """Kernel names and frames like ``[bold]`` or ``[/foo]`` are shown as written (never parsed as markup)."""
    from tests.helpers import stepped

    a = stepped([[("[bold]k1", 10, "launch"), ("[/foo]k2", 20, "python")]] * 2).write(tmp_path / "a.json")
    b = stepped([[("[bold]k1", 10, "launch"), ("[0]fused", 30, "python", 8.0)]] * 2,
                frame="app.py(9): [red]other").write(tmp_path / "b.json")

    async def go():
        app = DiffApp(str(a), str(b), load_opts={"no_cache": True})
        async with app.run_test(size=(160, 40)) as pilot:
            await diff_ready(pilot)
            await pilot.press("b")
            await pilot.pause()
            return screen_text(app)

    text = asyncio.run(go())
    assert "kernel [0]fused (not in A)" in text and "kernel [/foo]k2 (gone in B)" in text
    assert "not in A: 2 gaps while host work from app.py(9): [red]other" in text


def test_diff_loads_as_the_explorer_does(pair, tmp_path, monkeypatch):
    """`gapscope diff A B` reads through the explorer's loader (tui/loading.py): a bad B ends it with the
    line the explorer prints for the same file, and a reader's internal error is put the same way too."""
    from gapscope.tui.app import GapscopeApp

    bad = tmp_path / "bad.json"
    bad.write_text("{ this is not json")

    async def error_of(app):
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(60):
                await pilot.pause()
                if app.error is not None:
                    break
        return app.error, app.return_code

    explorer = asyncio.run(error_of(GapscopeApp([str(bad)], load_opts={"no_cache": True})))
    diff = asyncio.run(error_of(DiffApp(pair[0], str(bad), load_opts={"no_cache": True})))
    assert explorer[0] and "bad.json" in explorer[0]
    assert diff == explorer == (explorer[0], 2)

    import gapscope.trace

    def broken(path, **kw):
        raise ValueError("reader bug")

    monkeypatch.setattr(gapscope.trace, "load", broken)
    diff = asyncio.run(error_of(DiffApp(pair[0], pair[1], load_opts={"no_cache": True})))
    assert diff == (f"{pair[0]}: loading failed (internal error ValueError: reader bug)", 2)


def test_the_diff_screen_styles_are_in_the_tcss_file():
    from gapscope.tui.app import GapscopeApp

    assert not DiffScreen.CSS and DiffApp.CSS_PATH == GapscopeApp.CSS_PATH == "gapscope.tcss"
