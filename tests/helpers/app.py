"""Explorer helpers the app tests share: a synthetic trace to open, the app opened and settled under Textual's
Pilot, the diff screen waited for."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from tests.synth import Synth
from gapscope.tui.app import GapscopeApp
from gapscope.tui.diffview import DiffScreen
from gapscope.tui.textdump import screen_text


def three_gaps(tmp_path: Path, names=("k0", "k1", "k2", "ampere_sgemm_128x64"), fns=("b_fn", "a_fn", "c_fn"),
               range_name="decode_step", op_name="aten::mm") -> Path:
    """Kernels separated by gaps of 300, 500 and 100 µs; each gap is spent in its own Python frame."""
    s = Synth()
    s.annotation(range_name, 0, 1000)
    s.launch(ts=0, dur=2, kernel=names[0], k_ts=5, k_dur=10)
    t_end = 15
    for i, (gap, fn) in enumerate(zip((300, 500, 100), fns)):
        start = t_end
        with s.frame(f"model.py({10 + i}): {fn}", start - 1, gap + 2):
            s.cpu_op(op_name, start + 1, 5)
            s.launch(ts=start + gap - 4, dur=2, kernel=names[i + 1], k_ts=start + gap, k_dur=10)
        t_end = start + gap + 10
    return s.write(tmp_path / "three_gaps.json")


@contextlib.asynccontextmanager
async def opened(path, size=(120, 40), **kw):
    """The explorer on ``path`` (no cache), its workers done: yields (app, pilot)."""
    app = GapscopeApp([str(path)], load_opts={"no_cache": True}, **kw)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        yield app, pilot


async def settle(app, pilot):
    """Wait for the app's workers (three rounds: a finished worker may start another) and let the screen draw."""
    from textual.worker import WorkerCancelled

    for _ in range(3):
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            # a load that failed ends the explorer at once (exit 2, issue 26): the exit cancels the workers still
            # registered, and which of them had finished first is a race
            if app.return_code is None:
                raise
        await pilot.pause()


def run(coro):
    return asyncio.run(coro)


def view_text(path, key: str, size=(160, 48)):
    """The explorer on ``path``, settled, then ``key`` (a view: "2" the kernels, "3" the findings): (the screen's
    text, the scene)."""

    async def go():
        async with opened(path, size=size) as (app, pilot):
            await pilot.press(key)
            await pilot.pause()
            return screen_text(app), app.scene

    return run(go())


def finding_info(path, pick, size=(160, 50)) -> str:
    """The text of view 3's info box (``#findinginfo``) on the finding at row ``pick(scene)`` of the findings
    table, the explorer opened on ``path`` and settled."""
    from textual.widgets import Static

    from gapscope.tui.tables import FindingsView

    async def go():
        async with opened(path, size=size) as (app, pilot):
            await pilot.press("3")
            await pilot.pause()
            app.query_one(FindingsView).show_info(pick(app.scene))
            await pilot.pause()
            w = app.query_one("#findinginfo", Static)
            return str(getattr(w, "renderable", None) or getattr(w, "content", ""))

    return run(go())


async def settled(pilot, tries: int = 40, screen=None):
    """Wait until the screen stops changing: workers done and two consecutive frames alike (on a loaded machine an
    analysis can land after the first frame, and the view settles a frame later); ``screen``: and the app's screen is
    one of that class."""
    app = pilot.app
    last = None
    for _ in range(tries):
        await app.workers.wait_for_complete()
        await pilot.pause()
        now = screen_text(app)
        if (screen is None or isinstance(app.screen, screen)) and now == last and not app.workers:
            break
        last = now


async def diff_ready(pilot):
    """Wait until the diff screen is up and its text has stopped changing (no worker left)."""
    await settled(pilot, 60, DiffScreen)
