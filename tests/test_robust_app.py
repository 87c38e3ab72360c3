"""The robustness corpus through the explorer (Textual's Pilot): every case ends on the error screen (one line,
``gapscope: error: ...``) or on a loaded screen that says what was odd; keys work on it; never a traceback,
never a hang (each case runs under a time limit)."""

from __future__ import annotations

import asyncio
import builtins
import os

import pytest

from tests.helpers.app import settle
from tests.helpers.corpus import CORPUS, Case
from gapscope.tui.app import GapscopeApp
from gapscope.tui.textdump import screen_text

#: every case, including those `gapscope TRACE` refuses before the app starts (missing, folder, unreadable, with
#: the same one-line error): opened here directly, so the app's own handling is what is tested
APP_CASES = list(CORPUS)


def _opts(case: Case) -> dict:
    opts = {"no_cache": True}
    if "--max-size" in case.extra:
        from gapscope.trace.read import parse_size

        opts["max_size"] = parse_size(case.extra[case.extra.index("--max-size") + 1])
    return opts


async def _drive(path, opts, size=(80, 24)):
    app = GapscopeApp([str(path)], load_opts=opts)
    screens = []
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        screens.append(screen_text(app))
        if app.error is None:
            # gap keys, zoom, detail of what is under the cursor and back (help, views and resizing: see
            # test_robust_terminal.py)
            for keys in (("n", "N", "w", "enter"), ("escape",)):
                await pilot.press(*keys)
                await pilot.pause()
                screens.append(screen_text(app))
        await pilot.press("q")
        await pilot.pause()
    return app, screens


@pytest.mark.parametrize("case", APP_CASES, ids=[c.name for c in APP_CASES])
def test_corpus_in_the_explorer(tmp_path, monkeypatch, case):
    p = case.make(tmp_path)
    if case.name == "unreadable":  # root reads anything: give the open what a normal user would get
        real_open = builtins.open

        def fake_open(f, *a, **k):
            if isinstance(f, (str, os.PathLike)) and os.fspath(f) == str(p):
                raise PermissionError(13, "Permission denied", str(p))
            return real_open(f, *a, **k)

        monkeypatch.setattr(builtins, "open", fake_open)
    app, screens = asyncio.run(asyncio.wait_for(_drive(p, _opts(case)), timeout=60))
    text = "\n".join(screens)
    assert "Traceback" not in text
    assert "\x1b" not in text
    if case.outcome == "error":
        assert app.error, f"{case.name}: expected the error screen; screen was:\n{screens[0]}"
        assert "\n" not in app.error and case.needle in app.error
        assert app.return_code == 2  # the explorer ends at once; the command line prints the line (issue 26)
        return
    assert app.error is None, f"{case.name}: {app.error}"
    assert app.scenes, case.name
    first = screens[0]
    # at 80 columns the header opens with the file's name (the program name is dropped there)
    assert first.lstrip().startswith(p.name[:30]), first
    if case.outcome == "warn":
        if "info" in case.warn_in:  # what the loader found odd is on the screen
            assert case.needle in first, f"{case.name}: {case.needle!r} not on the screen:\n{first}"
        else:
            assert "no GPU work" in first, first
