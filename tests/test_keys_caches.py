"""What a key press keeps instead of building again (issue 27 item 3) draws what a fresh build draws: the gap
list's rows made as segments without rich (rowlist.py), the stack panel's text kept per gap and its wrap
(panels.py ``panel_stack_text``, textview.py ``split_lines`` and the wraps kept by content), and the lanes'
window searches (lanes.py ``search_sorted``): after moves, a resize, a cause filter, the time origin, a theme
and in ASCII, on the committed sample trace."""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console
from rich.text import Span, Text
from textual.strip import Strip

from gapscope.tui import panels, textview
from tests.helpers.app import opened as app_opened
from gapscope.tui.gaplist import GapList
from gapscope.tui.lanes import UnionIndex, search_sorted, segment_text
from gapscope.tui.scene import Scene
from gapscope.tui.scenegaps import listed_counts
from gapscope.tui.rowlist import RowList, cell_widths, plain_cells_line, rich_cells_line
from gapscope.tui.textview import split_lines, wrap_lines

TRACE = Path(__file__).resolve().parent.parent / "traces" / "demo-eager-sync.decode.json.gz"


@contextlib.asynccontextmanager
async def opened(size, ascii=False):
    if not TRACE.exists():
        pytest.skip("traces/ samples are not present")
    async with app_opened(TRACE, size, ascii=ascii) as (app, pilot):
        yield app, pilot


def _segs(strip) -> list:
    return [(sg.text, sg.style, sg.control) for sg in strip]


def _rich_strip(gl: RowList, cells, widths, style, width) -> Strip:
    """A row as RowList drew every row before: one rich Text rendered (a cell cut short ending in the list's mark,
    "..." on an ASCII terminal), cropped or extended, styled."""
    return Strip(rich_cells_line(cells, widths, gl.PAD, gl.app.console, gl.more)).crop_extend(0, width, None) \
        .apply_style(style)


def rows_as_rich_draws_them(gl: GapList) -> int:
    """Every line of the gap list on screen (the header, the rows, the cursor's) is the strip rich made of
    it; returns how many rows were compared."""
    w = gl.size.width
    base = gl.rich_style
    widths = cell_widths(gl.columns, w, gl.PAD)
    header = _rich_strip(gl, [c.label for c in gl.columns], widths,
                         base + gl.get_component_rich_style("rowlist--header"), w)
    assert _segs(gl.render_line(0)) == _segs(header)
    n = 0
    sy = int(gl.scroll_offset.y)
    for y in range(1, gl.size.height):
        r = sy + y - 1
        if r >= gl.row_count:
            break
        style = base
        if r == gl.cursor_row:
            style = style + gl.get_component_rich_style("rowlist--cursor")
        got = gl.render_line(y)
        assert got.cell_length == w
        assert _segs(got) == _segs(_rich_strip(gl, gl.rows[r][1], widths, style, w)), (r, gl.rows[r][0])
        n += 1
    return n


def panel_is_a_fresh_build(app) -> None:
    """The stack panel shows the text stack_text builds now with nothing kept (the frame lines, the finding
    ranking, the wraps), wrapped as wrap_lines wraps it with nothing kept."""
    sc = app.scene
    panel = app.query_one("#stack")
    panels._frame_pieces.cache_clear()
    panels._RANKED.clear()
    fresh = panels.stack_text(sc, app.glyphs)
    assert panel._text.plain == fresh.plain
    assert panel._text.spans == fresh.spans
    kept = dict(textview._HUNG)
    textview._HUNG.clear()
    try:
        want = [textview._line_key(ln) for ln in wrap_lines(fresh, app.console, panel._content_width())]
    finally:
        textview._HUNG.update(kept)
    panel._wrap()
    assert panel._keys == want


@pytest.mark.parametrize("ascii", [False, True], ids=["unicode", "ascii"])
def test_kept_rows_and_stack_texts_are_fresh_builds_after_every_change(ascii):
    async def go():
        async with opened((100, 30), ascii) as (app, pilot):
            sc = app.scene
            gl = app.query_one("#gaplist", GapList)
            assert sc.gaps.order.size > 60
            seen = set()
            # n / N: new gaps and gaps shown before (their texts kept); c: a cause filter; o: the time origin;
            # Esc: every gap again; the list's cursor keys paging; a resize (narrow: the other columns)
            steps = ["n"] * 4 + ["N"] * 4 + ["n", "c", "n", "n", "c", "o", "n", "N", "o", "escape", "n"]
            for key in steps:
                await pilot.press(key)
                await pilot.pause()
                panel_is_a_fresh_build(app)
                assert rows_as_rich_draws_them(gl) > 5
                seen.add((sc.gaps.selected, sc.gaps.cause_filter, sc.time_mode))
            assert len({c for _, c, _ in seen}) >= 2 and {m for _, _, m in seen} == {"window", "trace"}
            gl.focus()
            for _ in range(gl.size.height + 3):
                await pilot.press("down")
            await pilot.pause()
            assert gl.scroll_offset.y > 0
            panel_is_a_fresh_build(app)
            rows_as_rich_draws_them(gl)
            for size in ((80, 24), (160, 48), (100, 30)):
                await pilot.resize_terminal(*size)
                await pilot.pause()
                await pilot.pause()
                assert gl.narrow == (size[0] < 120)
                panel_is_a_fresh_build(app)
                rows_as_rich_draws_them(gl)
            # a theme: the rows' styles change, and no row drawn with the old ones is kept
            before = _segs(gl.render_line(1))
            app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
            await pilot.pause()
            await pilot.pause()
            rows_as_rich_draws_them(gl)
            assert _segs(gl.render_line(1)) != before
            panel_is_a_fresh_build(app)

    asyncio.run(go())


def test_stack_texts_are_kept_per_gap_and_forgotten_with_the_analysis():
    async def go():
        async with opened((100, 30)) as (app, pilot):
            sc = app.scene
            a = panels.panel_stack_text(sc, app.glyphs)
            assert panels.panel_stack_text(sc, app.glyphs) is a  # the same gap: the text kept
            sc.select(sc.gaps.selected + 1)
            b = panels.panel_stack_text(sc, app.glyphs)
            assert b is not a and b.plain != a.plain
            sc.select(sc.gaps.selected - 1)
            assert panels.panel_stack_text(sc, app.glyphs) is a
            # another analysis object (a new one landing): nothing of the old one is shown
            old = sc.parts[sc.active].analysis
            try:
                sc.parts[sc.active].analysis = None
                c = panels.panel_stack_text(sc, app.glyphs)
                assert c.plain != a.plain and c.plain == panels.stack_text(sc, app.glyphs).plain
            finally:
                sc.parts[sc.active].analysis = old
            d = panels.panel_stack_text(sc, app.glyphs)
            assert d is not a and d.plain == a.plain and d.spans == a.spans

    asyncio.run(go())


def test_stack_lines_split_as_rich_splits_them():
    """split_lines against rich's Text.split(allow_blank=True), on real stack texts and on made-up ones with
    spans across lines, empty lines, wide characters and a trailing newline."""
    async def go():
        async with opened((100, 30)) as (app, pilot):
            sc = app.scene
            texts = []
            for pos in range(min(sc.gaps.order.size, 40)):
                sc.select(pos)
                texts.append(panels.stack_text(sc, app.glyphs))
                texts.append(panels.stack_text(sc, app.glyphs, full=True))
            return texts

    texts = asyncio.run(go())
    rnd = random.Random(5)
    for _ in range(3000):
        t = Text(style=rnd.choice(["", "bold"]), justify=rnd.choice([None, "left"]), overflow=rnd.choice([None, "fold"]))
        for _ in range(rnd.randint(0, 10)):
            t.append(rnd.choice(["abc", "\n", "de\nf", "  x  ", "日本\n", "\n\n", ""]), style=rnd.choice([None, "red", "dim"]))
        if t.plain and rnd.random() < 0.4:
            a = rnd.randint(0, len(t.plain))
            t.stylize("underline", a, rnd.randint(a, len(t.plain)))
        texts.append(t)

    # control codes rich strips as text goes in, put in past its API (as panels.T writes a Text's parts): the
    # lines are made the slow way then, stripped as rich strips them
    for raw in ("a\rb\nc\x07d", "\x08\n\x0b\x0c", "no codes\nµs →\n"):
        t = Text(overflow="fold")
        t._text = [raw]
        t._length = len(raw)
        t._spans = [Span(0, len(raw), "bold")]
        texts.append(t)

    def key(lines):
        return [(x.plain, x.style, x.justify, x.overflow, x.no_wrap, x.end, tuple(x.spans), len(x), x.cell_len)
                for x in lines]

    for t in texts:
        assert key(split_lines(t)) == key(t.split(allow_blank=True)), t.plain[:60]


def testplain_cells_line_makes_the_segments_rich_makes():
    """plain_cells_line against rich_cells_line on cells of every kind it takes (styles or none, right or
    left, each overflow, cut or padded, wide characters) and None on a cell with spans (rich draws those)."""
    console = Console()
    rnd = random.Random(2)
    words = ["mm", "aten::addmm", "日本語テキスト", "x", "", "gemm_kernel_very_long_name", "a b", "…"]
    for _ in range(4000):
        cells = [Text(rnd.choice(words) * rnd.randint(0, 3), style=rnd.choice(["", "bold", "red", "bold yellow"]),
                      justify=rnd.choice(["right", "left", None]), overflow=rnd.choice([None, "crop", "ellipsis", "fold"]))
                 for _ in range(rnd.randint(1, 5))]
        widths = [rnd.randint(1, 20) for _ in cells]
        for pad in (0, 1):
            assert plain_cells_line(cells, widths, pad, console) == rich_cells_line(cells, widths, pad, console)
    spanned = Text("ab")
    spanned.stylize("bold", 0, 1)
    assert plain_cells_line([Text("x"), spanned], [3, 3], 1, console) is None


def test_search_sorted_is_searchsorted_for_ascending_values():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        a = np.sort(rng.integers(0, 1000, rng.integers(0, 60)))
        v = np.sort(rng.integers(-50, 1100, rng.integers(0, 40)))
        if v.size and rng.random() < 0.2:
            v[:] = v[0]
        for side in ("left", "right"):
            assert (search_sorted(a, v, side) == np.searchsorted(a, v, side=side)).all()
    # two values the wrong way round (a range given backwards) are searched as they are
    a = np.arange(0, 100, 3)
    v = np.array([50, 10])
    assert (search_sorted(a, v) == np.searchsorted(a, v)).all()
    # the covered time of cells, from the window's part of the pieces, is the sum over every piece
    s = rng.integers(0, 10_000, 500)
    u = UnionIndex(s, s + rng.integers(0, 50, 500))
    edges = np.linspace(2_000, 6_000, 41).astype(np.int64)
    want = [sum(max(0, min(e, b) - max(st, a)) for st, e in zip(u.starts.tolist(), u.ends.tolist()))
            for a, b in zip(edges[:-1].tolist(), edges[1:].tolist())]
    assert u.covered(edges).tolist() == want


def test_gathered_text_is_the_text_appended_piece_by_piece():
    """panels.T gathers its pieces and appends them at once: the same plain text, spans, style and length as a
    Text.append per piece (pieces made safe, styles or none, control characters, non-ASCII, reads between)."""
    rnd = random.Random(4)
    for _ in range(3000):
        t = panels.T(rnd.random() < 0.5)
        ref = Text(no_wrap=False, overflow="fold")
        if rnd.random() < 0.3:
            t.text = Text(no_wrap=True, overflow="crop")
            ref = Text(no_wrap=True, overflow="crop")
        for _ in range(rnd.randint(0, 20)):
            if rnd.random() < 0.2:
                t.nl()
                ref.append("\n")
            else:
                v = rnd.choice(["abc", "µs 3.2", "→ x", "", "██", "a\x1bb", "tab\there", 12, "\x07bell"])
                st = rnd.choice([None, "", "bold", "red on yellow"])
                t.add(v, st)
                ref.append(t.s(str(v)), style=st)
            if rnd.random() < 0.1:
                assert t.text.plain == ref.plain  # a read in the middle
        a = t.text
        assert (a.plain, a.spans, a.style, a.no_wrap, a.overflow, len(a)) == \
            (ref.plain, ref.spans, ref.style, ref.no_wrap, ref.overflow, len(ref))


def _segment_text_per_cell(refs, label_of, bar, open_):
    """segment_text as it was written first: a list of cells and two numpy slice writes per run."""
    from gapscope.tui.lanes import C_BAR, C_LABEL, C_MARK

    n = refs.size
    chars = [" "] * n
    codes = np.zeros(n, dtype=np.uint8)
    if n == 0:
        return "", codes
    change = [0] + (np.flatnonzero(refs[1:] != refs[:-1]) + 1).tolist()
    for a, b in zip(change, change[1:] + [n]):
        r = int(refs[a])
        if r < 0:
            continue
        if b - a == 1:
            chars[a] = open_
            codes[a] = C_MARK
            continue
        body = (open_ + label_of(r))[:b - a]
        chars[a:a + len(body)] = body
        codes[a:a + len(body)] = C_LABEL
        chars[a + len(body):b] = [bar] * (b - a - len(body))
        codes[a + len(body):b] = C_BAR
    return "".join(chars), codes


def test_segment_text_is_the_per_cell_build():
    """A row of named pieces made run by run (strings and one np.repeat) is the text and codes the per-cell
    build made: runs of every length, empty cells, one-cell pieces, names longer than their run, wide names."""
    rng = np.random.default_rng(7)
    names = ["alpha", "b", "", "日本語の名前", "a_very_long_frame_name_indeed", "x y"]
    for _ in range(3000):
        # cells one by one, or runs of up to 11 cells, cut anywhere
        refs = rng.integers(-1, 6, rng.integers(0, 30)) if rng.random() < 0.3 else \
            np.repeat(rng.integers(-1, 6, 40), rng.integers(1, 12, 40))[:rng.integers(0, 200)]
        refs = refs.astype(np.int64)
        bar, open_ = ("-", "|") if rng.random() < 0.5 else ("─", "▏")
        a = segment_text(refs, lambda r: names[r], bar=bar, open_=open_)
        b = _segment_text_per_cell(refs, lambda r: names[r], bar, open_)
        assert a[0] == b[0] and a[1].dtype == b[1].dtype and a[1].tolist() == b[1].tolist(), refs.tolist()


class _Gaps:
    def __init__(self, dur):
        self.dur_ns = np.asarray(dur, np.int64)

    def __len__(self):
        return int(self.dur_ns.size)


def test_listed_counts_kept_are_a_fresh_count_after_every_change():
    """Scene.listed_counts, kept per scene, against a count made now after each kind of change: a part's
    analysis replaced (a new object, even with the same gaps), its gap table replaced, gaps added in place, the
    threshold changed, an analysis gone or a part added; and on a real trace after the explorer's own keys."""
    a1 = SimpleNamespace(gaps=_Gaps([100, 2500, 9000, 1999]))
    sc = SimpleNamespace(parts=[SimpleNamespace(analysis=a1, min_listed_ns=2000)])

    def same():
        got = Scene.listed_counts(sc)
        assert got == listed_counts(sc.parts)
        return got

    assert same() == (2, 4, 2000)
    assert same() == (2, 4, 2000)  # (kept)
    sc.parts[0].min_listed_ns = 100
    assert same() == (4, 4, 100)
    sc.parts[0].analysis = SimpleNamespace(gaps=a1.gaps)  # a new analysis, the same gaps
    sc.parts[0].analysis.gaps.dur_ns[0] = 50  # (a new analysis counts again)
    assert same() == (3, 4, 100)
    sc.parts[0].analysis.gaps = _Gaps([5000])
    assert same() == (1, 1, 100)
    sc.parts[0].analysis.gaps.dur_ns = np.array([5000, 6000, 7000])  # grown in place
    assert same() == (3, 3, 100)
    sc.parts.append(SimpleNamespace(analysis=None, min_listed_ns=3000))
    assert same() == (3, 3, 100)
    sc.parts[1].analysis = SimpleNamespace(gaps=_Gaps([2999, 3000]))
    assert same() == (4, 5, 3000)
    sc.parts[0].analysis = None
    assert same() == (1, 2, 3000)

    async def go():
        async with opened((100, 30)) as (app, pilot):
            scene = app.scene
            assert scene.listed_counts() == listed_counts(scene.parts)
            for key in ["n", "n", "c", "n", "escape", "N", "o"]:
                await pilot.press(key)
                await pilot.pause()
                assert scene.listed_counts() == listed_counts(scene.parts)
            pt = scene.parts[0]
            scene.set_analysis(pt.analysis, pt.min_listed_ns * 4)  # the threshold, through the scene's own call
            assert scene.listed_counts() == listed_counts(scene.parts)
            assert scene.listed_counts()[2] == pt.min_listed_ns

    asyncio.run(go())


def test_screen_widgets_kept_are_the_ones_a_query_finds():
    """The screen keeps its own widgets after the first look-up: each is the one a query finds, also after the
    kernels and findings views are mounted, a resize and the key bar's swap."""
    from textual.widgets import ContentSwitcher, Static

    from gapscope.tui.panels import StackPanel
    from gapscope.tui.timeline import Axis, LanesView

    wanted = [("#lanes", LanesView), ("#axis", Axis), ("#stack", StackPanel), ("#status", Static),
              (GapList, None), ("#views", ContentSwitcher)]

    def check(screen):
        for sel, cls in wanted:
            want = screen.query_one(sel, cls) if cls is not None else screen.query_one(sel)
            assert screen.widget(sel, cls) is want

    async def go():
        async with opened((100, 30)) as (app, pilot):
            screen = app.screen
            check(screen)
            for key in ["n", "2", "3", "1", "n"]:
                await pilot.press(key)
                await pilot.pause()
                check(screen)
            await pilot.resize_terminal(80, 24)
            await pilot.pause()
            check(screen)

    asyncio.run(go())
