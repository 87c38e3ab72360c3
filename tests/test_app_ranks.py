"""The explorer on the ranks of one job (Pilot): loaded in parallel, analysed across ranks (collective waits, the
late rank), on the committed two-rank samples traces/demo-eager-tp-late1 (rank 1 runs `_straggler_work` before
each all-reduce) and traces/demo-eager-tp."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import SAMPLE_TRACES
from gapscope.tui.app import GapscopeApp
from gapscope.tui.textdump import screen_text

LATE1 = [SAMPLE_TRACES / f"demo-eager-tp-late1.decode.rank{r}.json.gz" for r in (0, 1)]
BALANCED = [SAMPLE_TRACES / f"demo-eager-tp.decode.rank{r}.json.gz" for r in (0, 1)]


def _need(paths):
    if not all(p.is_file() for p in paths):
        pytest.skip("traces/ samples are not present")


async def _settle(app, pilot):
    for _ in range(3):
        await app.workers.wait_for_complete()
        await pilot.pause()


def _header(app) -> str:
    return str(app.query_one("#header").render())


def _stack(app) -> str:
    from gapscope.tui.panels import stack_text

    return stack_text(app.scene, app.glyphs).plain


def test_late_rank_pair_names_rank_1_in_header_findings_and_collective_gaps():
    _need(LATE1)

    async def go():
        app = GapscopeApp([str(p) for p in reversed(LATE1)], load_opts={"no_cache": True})
        async with app.run_test(size=(160, 48)) as pilot:
            await _settle(app, pilot)
            sc = app.scene
            # one tab, both ranks' lanes, every rank analysed across ranks
            assert len(app.scenes) == 1 and len(sc.parts) == 2
            assert [pt.model.rank for pt in sc.parts] == [0, 1]
            assert all(pt.analysis is not None and pt.analysis.cross_rank for pt in sc.parts)
            titles = [r.title for r in sc.display.rows() if r.lane is None]
            for r in (0, 1):
                assert any(t.startswith(f"rank {r} · host") for t in titles)
                assert any(t.startswith(f"rank {r} · cuda") for t in titles)
            txt = screen_text(app)
            assert "rank 0 · cuda" in txt and "rank 1 · cuda" in txt
            # the header: rank 0 waits for rank 1, rank 1 is the late one and what it did
            head = _header(app)
            assert "rank 0: 1.8% idle" in head and "waiting for rank 1" in head
            assert "rank 1: 98.9% idle" in head and "late: arrived last 64/64" in head
            assert "`_straggler_work`" in head
            assert "\n".join(txt.splitlines()[:5]).count("waiting for rank 1") == 1
            # the findings view lists the waiting finding (it is rank 0's; every rank's findings are listed)
            await pilot.press("3")
            await pilot.pause()
            txt = screen_text(app)
            assert "rank 0 waited" in txt and "for late rank 1" in txt
            await pilot.press("escape")
            await pilot.pause()
            # n walks to a collective gap on rank 0 whose stack panel names the late rank's work
            from gapscope.analysis import CAUSES

            await pilot.press("c")
            await pilot.pause()
            while sc.gaps.cause_filter is not None and CAUSES[sc.gaps.cause_filter] != "collective":
                await pilot.press("c")
                await pilot.pause()
            assert sc.gaps.cause_filter is not None and sc.gaps.order.size
            found = None
            for _ in range(min(int(sc.gaps.order.size), 40)):
                if sc.active == 0 and "_straggler_work" in _stack(app):
                    found = _stack(app)
                    break
                await pilot.press("n")
                await pilot.pause()
            assert found is not None, "no collective gap on rank 0 names the late rank"
            assert "cause: collective" in found and "rank 1 arrived last 64 times" in found
            assert "_straggler_work" in screen_text(app)  # drawn in the stack panel, not only in its text

    asyncio.run(go())


def test_ranks_line_fits_narrow_ascii_terminals():
    _need(LATE1)

    async def go():
        app = GapscopeApp([str(p) for p in LATE1], ascii=True, load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            lines = screen_text(app).splitlines()
            head = "\n".join(lines[:5])
            assert head.isascii()
            line = next(ln for ln in lines[:5] if ln.startswith("r0 "))
            assert "wait r1" in line and "r1 98.9% idle, late 64/64" in line
            assert len(line.rstrip()) <= 80

    asyncio.run(go())


def test_ranks_line_fits_many_ranks_and_keeps_the_late_one():
    from gapscope.tui import glyphs as G
    from gapscope.tui.panels import ranks_line

    class FakeScene:
        multi = True

        def rank_summary(self):
            out = [{"rank": r, "idle_pct": 50.0 + r, "analysed": True, "wait_ns": 10_000_000 * (r != 5),
                    "wait_for": 5 if r != 5 else None, "skew": False, "late": None} for r in range(8)]
            out[5]["late"] = (64, 64, "_straggler_work")
            return out

    for width in (200, 120, 60):
        text = "".join(s for s, _ in ranks_line(FakeScene(), G.ASCII, width))
        assert text.isascii() and len(text) <= width, (width, text)
        assert "r5" in text or "rank 5" in text
        assert "late" in text
    assert "more ranks" in "".join(s for s, _ in ranks_line(FakeScene(), G.ASCII, 60))


def test_balanced_pair_names_no_late_rank_1_and_no_clock_warning():
    _need(BALANCED)

    async def go():
        app = GapscopeApp([str(p) for p in BALANCED], load_opts={"no_cache": True})
        async with app.run_test(size=(160, 48)) as pilot:
            await _settle(app, pilot)
            sc = app.scene
            assert len(sc.parts) == 2 and all(pt.analysis is not None for pt in sc.parts)
            assert sc.clock_warnings == []
            head = _header(app)
            assert "rank 0:" in head and "rank 1:" in head
            assert "waiting for rank 1" not in head and "_straggler_work" not in head
            assert "clock" not in head
            # what the cross-rank analysis says of this pair (rank 0's host runs behind rank 1's, so rank 1's
            # all-reduces start first and wait): shown as it is, not hidden
            late = {e.rank for e in sc.parts[0].analysis.cross_rank.late if 2 * e.count >= e.of}
            assert ("late: arrived last" in head) == bool(late)
            assert 1 not in late

    asyncio.run(go())


def test_escape_cancels_a_slow_parallel_load(monkeypatch):
    import threading

    import gapscope.trace.multi

    _need(LATE1)
    release, started = threading.Event(), threading.Event()
    real = gapscope.trace.multi.load_many

    def slow_many(paths, **kw):
        started.set()
        release.wait(20)
        return real(paths, **kw)

    monkeypatch.setattr(gapscope.trace.multi, "load_many", slow_many)

    async def go():
        app = GapscopeApp([str(p) for p in LATE1], load_opts={"no_cache": True})
        async with app.run_test(size=(100, 24)) as pilot:
            for _ in range(50):
                if started.is_set():
                    break
                await pilot.pause(0.05)
            assert "loading 2 traces in parallel" in screen_text(app)
            await pilot.press("escape")
            await pilot.pause()
            release.set()
        return app

    app = asyncio.run(go())
    assert app.cancelled and app.return_code == 130
    assert not app.scenes


def test_header_shows_the_clock_warning_of_a_shifted_rank(monkeypatch):
    """Rank 1's time base written 5 ms off: the collectives' end times correct it, and the header says so."""
    import gapscope.trace.multi

    _need(LATE1)
    real = gapscope.trace.multi.load_many

    def shifted(paths, **kw):
        ms = real(paths, **kw)
        for m in ms:
            if m.rank == 1:
                m.metadata["baseTimeNanoseconds"] = int(m.metadata.get("baseTimeNanoseconds") or 0) + 5_000_000
        return ms

    monkeypatch.setattr(gapscope.trace.multi, "load_many", shifted)

    async def go():
        app = GapscopeApp([str(p) for p in LATE1], ascii=True, load_opts={"no_cache": True})
        async with app.run_test(size=(160, 48)) as pilot:
            await _settle(app, pilot)
            sc = app.scene
            assert sc.clock_warnings and sc.clock_warnings[0].startswith("rank 1:")
            head = "\n".join(screen_text(app).splitlines()[:5])
            assert head.isascii()
            assert "! rank 1: collective end times are +5.00 ms off" in head
            assert "waiting for rank 1" in head and "late: arrived last 64/64" in head

    asyncio.run(go())
