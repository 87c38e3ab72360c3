"""The explorer: lanes over a time axis, the gap list and the stack panel of the selected gap."""

from __future__ import annotations

import gc
import os
import threading

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import ContentSwitcher, DataTable, Footer, Input, Static
from textual.worker import get_current_worker

from ..analysis.names import display_frame
from ..errors import GapscopeError
from ..trace.model import Kind
from . import glyphs as G
from .lanes import col_to_time, time_to_col
from .panels import RowCachedTable, event_text, header_text, stack_text
from .safe import ascii_safe, safe, short_kernel
from .scene import Scene
from .screens import DetailScreen, ErrorScreen, HelpScreen
from .timefmt import fmt_at, fmt_dur
from .textview import TextView
from .timeline import Axis, LanesView

#: gap list rows shown at most (the list is sorted by size; the rest are one `n` away in the lanes)
MAX_LIST = 500

#: terminals narrower than this get the short gap list (no row number, short cause names)
NARROW = 120
#: cause names in the gap list of a narrow terminal
SHORT_CAUSE = {"collective": "coll", "profiler": "prof", "allocator": "alloc", "host-idle": "host"}

#: models of this many events and more have their objects moved out of the collector's reach once loaded
FREEZE_EVENTS = 100_000
#: with a large trace frozen, a full collection comes after this many young ones (Python's default: 10)
GC_FULL_EVERY = 300


#: the load thread waits at most this long for the first frame before it starts the analysis
FIRST_PAINT_WAIT_S = 1.0


class _Progress(Message):
    """A loading message from the load thread (posted, not waited for: the load must not wait on the screen)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class GapList(RowCachedTable):
    """The gap list. When the cursor leaves the visible rows it pages (the cursor lands a quarter of the way in
    from the edge it crossed) instead of creeping one row at a time: stepping through the gaps with `n` scrolled
    the list, and redrew all its rows and its scroll bar, on two presses in three; now on one in ~25."""

    BINDINGS = [Binding("enter", "app.detail", "detail", show=False),
                Binding("j", "cursor_down", "next gap", show=False),
                Binding("k", "cursor_up", "previous gap", show=False)]
    #: rows of the next page drawn ahead after each cursor move
    AHEAD = 2
    _last_row = 0  # the cursor's row at the last move (which way it goes)

    def _scroll_cursor_into_view(self, animate: bool = False) -> None:
        if self.cursor_type != "row" or self.fixed_rows:
            super()._scroll_cursor_into_view(animate)
            return
        _, y, _, h = self._get_row_region(self.cursor_row)
        top = self.header_height if self.show_header else 0
        height = self.scrollable_content_region.height
        lead = (height - top) // 4
        if h <= 0 or height - top < 2 * h + lead:
            super()._scroll_cursor_into_view(animate)
            return
        sy = round(self.scroll_y)
        if y < sy + top:  # above the rows shown: moving up, keep the room above the cursor
            self.scroll_to(y=max(0, y - (height - h - lead)), animate=False, force=True, immediate=True)
        elif y + h > sy + height:  # below: moving down
            self.scroll_to(y=y - top - lead, animate=False, force=True, immediate=True)
        # a page turn draws ~27 rows not drawn before (~1 ms each): draw the next page's rows a few at a time,
        # after the frame of each cursor move, so the turn finds them in the row cache
        down = self.cursor_row >= self._last_row
        self._last_row = self.cursor_row
        self.call_after_refresh(self._draw_ahead, down)

    def _draw_ahead(self, down: bool) -> None:
        if self.cursor_type != "row" or self.fixed_rows or not self.row_count:
            return
        self._begin_frame()
        try:
            f = self._frame
            if f is None:
                return
            base, sx, sy, width, top, offsets, cur, hover, state = f
            loc = self._row_locations
            # rows (indexes into the row lines) just past the edge the cursor moves to
            shown = self.scrollable_content_region.height - top
            ids = range(sy + shown, sy + 2 * shown) if down else range(sy - 1, sy - 1 - shown, -1)
            done = 0
            for i in ids:
                if done >= self.AHEAD:
                    break
                if not 0 <= i < len(offsets):
                    break
                row_key, line_no = offsets[i]
                row = loc.get(row_key) if row_key in loc else -1
                key = (row_key, line_no, row, sx, width, base, row == cur, row == hover, state)
                if key in self._row_strips:
                    continue
                # as render_line draws it when shown: virtual y = row line + the header's lines
                self._render_row_line(key, i + top, sx, sx + width, base)
                done += 1
        finally:
            self._frame = None


class StackPanel(TextView):
    """The stack of the selected gap (Line API: a gap jump redraws this panel, no screen layout)."""


class SearchInput(Input):
    """The / box: Enter steps to the next match, Shift+Enter to the previous one."""

    BINDINGS = [Binding("shift+enter", "app.prev_match", "previous match", show=False)]


class GapscopeApp(App):
    TITLE = "gapscope"
    ENABLE_COMMAND_PALETTE = False  # every action has a key; the footer stays plain ASCII-friendly
    CSS = """
    Screen { layout: vertical; }
    #header { height: auto; max-height: 5; background: $panel; text-wrap: nowrap; text-overflow: ellipsis; }
    #views { height: 1fr; }
    #lanesview { height: 1fr; }
    #timeline { height: auto; min-height: 3; }
    #lanes { height: auto; }
    #bottom { height: 1fr; min-height: 4; }
    #gaplist { width: 11fr; scrollbar-size-horizontal: 0; scrollbar-size-vertical: 1; }
    #stack { scrollbar-size-vertical: 1; }
    #stack { width: 9fr; border-left: vkey $primary; }
    .-ascii #stack { border-left: ascii $primary; }
    #status { height: 1; background: $panel; text-wrap: nowrap; text-overflow: ellipsis; }
    #keybar { height: 1; }
    #kernels, #findings { height: 1fr; scrollbar-size-vertical: 1; }
    .infobox { height: 40%; border-top: hkey $primary; }
    .-ascii .infobox { border-top: ascii $primary; }
    Screen.-ascii DataTable, Screen.-ascii VerticalScroll, Screen.-ascii LanesView { scrollbar-size: 0 0; }
    Screen.-ascii { scrollbar-size: 0 0; }
    Screen.-ascii #gaplist, Screen.-ascii #stack, Screen.-ascii #kernels, Screen.-ascii #findings,
    Screen.-ascii #lanes { scrollbar-size: 0 0; }
    Screen.-ascii #header, Screen.-ascii #status { text-overflow: clip; }
    #search { dock: bottom; display: none; }
    #search.-on { display: block; }
    """

    BINDINGS = [
        Binding("n", "next_gap", "next gap"),
        Binding("N", "prev_gap", "prev gap", key_display="N"),
        Binding("left,h,a", "pan(-0.25)", "pan", show=False),
        Binding("right,l,d", "pan(0.25)", "pan", show=False),
        Binding("w,plus,equals_sign", "zoom(2.0)", "zoom", key_display="w/s"),
        Binding("s,minus", "zoom(0.5)", "zoom out", show=False),
        Binding("shift+left,H", "cursor(-1)", "cursor", show=False),
        Binding("shift+right,L", "cursor(1)", "cursor", show=False),
        Binding("left_square_bracket", "event(-1)", "prev event", show=False),
        Binding("right_square_bracket", "event(1)", "next event", show=False),
        Binding("0,home", "fit", "fit", show=False),
        Binding("f,z", "focus_gap", "zoom gap", show=False),
        Binding("c", "cause(1)", "cause"),
        Binding("C", "cause(-1)", "cause", show=False),
        Binding("slash", "search", "find"),
        Binding("enter", "detail", "detail", show=False),
        Binding("space,x", "expand", "expand", show=False),
        Binding("1", "view('lanes')", "lanes", show=False),
        Binding("2", "view('kernels')", "kernels", show=False),
        Binding("3", "view('findings')", "findings", show=False),
        Binding("t", "next_trace", "trace", show=False),
        Binding("D", "diff", "diff", key_display="D", show=False),
        Binding("o", "origin", "time origin", show=False),
        Binding("v", "link", "launch/kernel", show=False),
        Binding("m", "mark", "range", show=False),
        Binding("M", "mark_range", "range of a step", show=False),
        Binding("e", "export", "export"),
        Binding("g", "legend", "legend", show=False),
        Binding("question_mark,f1", "help", "help"),
        Binding("escape", "escape", "back", show=False),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, paths: list[str], *, ascii: bool = False, load_opts: dict | None = None,
                 analyze: bool = True):
        super().__init__()
        self.paths = list(paths)
        self.glyphs = G.ASCII if ascii else G.UNICODE
        self.load_opts = dict(load_opts or {})
        self.run_analysis = analyze
        self.scenes: list[Scene] = []
        self.current = 0
        self.error: str | None = None
        self.last_export: list[str] = []
        # while loading, the explorer's own screen is up (drawn once, meanwhile) with this message in its header:
        # the first frame of the trace then only fills it in, without a switch of screens
        self._loading: str | None = None
        self._status_msg = ""
        self.cancelled = False
        self._ov = "crop" if ascii else "ellipsis"  # no "…" on terminals that are not UTF-8
        self._user_picked = False  # until the person picks a gap, the largest one stays selected
        self._frozen = False  # gc.freeze() done for a large trace (undone on exit)
        self._tables_mounted = False  # the kernels and findings views (mounted when first shown)
        self._gc_threshold = gc.get_threshold()
        self._header_lines = 2
        self._narrow: bool | None = None  # the gap list's columns are those of a terminal under NARROW columns
        self._tables_width = 0  # the terminal width the kernels table was filled for
        # set once the first trace's lanes are on screen: the analysis thread starts after that, so it does not
        # hold the GIL while the first frame is drawn
        self._painted = threading.Event()
        # set once the screen is mounted: the load starts before that (on_load), and a small trace can be read
        # before the widgets it fills exist
        self._mounted = threading.Event()

    # ================================================================ layout
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with ContentSwitcher(initial="lanesview", id="views"):
            with Vertical(id="lanesview"):
                with Vertical(id="timeline"):
                    lv = LanesView(self.glyphs, id="lanes")
                    yield Axis(self.glyphs, lv, id="axis")
                    yield lv
                with Horizontal(id="bottom"):
                    yield GapList(id="gaplist", cursor_type="row", zebra_stripes=False, cell_padding=1)
                    yield StackPanel(id="stack")
            # the kernels and findings views (2, 3) and the search box (/) are mounted when first asked for:
            # their widgets and styles made the screen's construction ~25 ms longer on the way to the first frame
        yield Static(id="status")
        # the key bar is mounted once the first frame of the trace is drawn: Textual's Footer styles a widget per
        # key, which made the screen's construction ~0.1 s longer while the trace was being read
        yield Static(id="keybar")

    def on_mount(self) -> None:
        if self.glyphs.ascii:
            self.screen.add_class("-ascii")
        gl = self.query_one("#gaplist", DataTable)
        self._gap_columns(gl, self.size.width < NARROW)
        if not self.scenes and self.error is None:
            self._progress(self._loading or f"loading {os.path.basename(self.paths[0])} ... (Esc cancels)")
        self.lanes.focus()
        self._mounted.set()

    def on_load(self) -> None:
        # the trace is read while the screen is built (before compose and mount): the first frame of a trace
        # in the cache comes ~50 ms sooner
        self.load_traces()

    def _call_ui(self, fn, *args) -> None:
        """From the load thread: run ``fn`` on the app's thread once the screen is mounted."""
        self._mounted.wait()
        self.call_from_thread(fn, *args)

    def on_unmount(self) -> None:
        self._mounted.set()  # a load thread still waiting for the screen goes on (and finds the app gone)
        if self._frozen:
            self._frozen = False
            gc.unfreeze()
            gc.set_threshold(*self._gc_threshold)

    def _freeze_heap(self, sc: Scene) -> None:
        """Once a large trace's model, lanes or analysis is in place, move every object alive now to the
        collector's permanent generation (`gc.freeze`): they live as long as the app, and a full collection
        that walks them all took 45-105 ms at 100 MB (more at 1 GB) in the middle of a key press, every few
        presses of `n`. Small traces keep the default; the app's exit unfreezes.

        The screen's own caches (strips, rows) still fill the oldest generation again, ~50k objects, and its
        full collection took 8-21 ms inside one `n` press in thirty at 1 GB: full collections are made ~30x
        rarer too (the garbage of a screen update has no cycles and is freed without them); exit restores
        the thresholds."""
        if max((int(pt.model.n) for pt in sc.parts), default=0) < FREEZE_EVENTS:
            return
        gc.freeze()
        if not self._frozen:
            self._gc_threshold = gc.get_threshold()
            t0, t1, _ = self._gc_threshold
            gc.set_threshold(t0, t1, GC_FULL_EVERY)
        self._frozen = True

    # ================================================================ helpers
    def _text(self, s: str) -> str:
        s = safe(s)
        return ascii_safe(s) if self.glyphs.ascii else s

    @property
    def scene(self) -> Scene | None:
        return self.scenes[self.current] if 0 <= self.current < len(self.scenes) else None

    @property
    def lanes(self) -> LanesView:
        return self.query_one("#lanes", LanesView)

    def d(self, ns) -> str:
        return fmt_dur(int(ns), ascii=self.glyphs.ascii)

    # ================================================================ loading
    @work(thread=True, exclusive=True, group="load")
    def load_traces(self) -> None:
        worker = get_current_worker()
        models = self._load_parallel(worker) if len(self.paths) > 1 else self._load_one_by_one(worker)
        if models is None or worker.is_cancelled:
            return
        try:
            scenes = group_scenes(models)
        except Exception as exc:  # noqa: BLE001
            if os.environ.get("GAPSCOPE_DEBUG"):
                raise
            self._call_ui(self._fail, f"internal error while building lanes ({type(exc).__name__}: {exc})")
            return
        for sc in scenes:
            self._call_ui(self._add_scene, sc)
        if self.run_analysis:
            self._painted.wait(FIRST_PAINT_WAIT_S)
            for sc in scenes:
                if worker.is_cancelled:
                    return
                if sc.multi:
                    self._analyse_ranks(sc, worker)
                else:
                    self._analyse(sc, 0)

    def _load_error(self, p: str, exc: BaseException) -> str:
        if isinstance(exc, GapscopeError):
            return str(exc)
        if isinstance(exc, MemoryError):
            return f"{p}: out of memory (try --max-size or a smaller trace)"
        return (f"{p}: internal error while loading ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:200]})")

    def _load_one_by_one(self, worker) -> list | None:
        """[(path, model)] read one after another in this thread (one trace), or None (failed or cancelled)."""
        from ..trace import load

        models: list = []
        for i, p in enumerate(self.paths):
            if worker.is_cancelled:
                return None
            try:
                size = os.path.getsize(p)
            except OSError:
                size = 0
            self.post_message(_Progress(f"loading {os.path.basename(p)} ({size / 1e6:.1f} MB)"
                                        f" [{i + 1}/{len(self.paths)}] ... Esc cancels"))
            try:
                model = _load(load, p, self.load_opts)
            except (GapscopeError, MemoryError) as exc:
                self._call_ui(self._fail, self._load_error(p, exc))
                return None
            except Exception as exc:  # noqa: BLE001 - a reader bug: still one line, never a traceback
                if os.environ.get("GAPSCOPE_DEBUG"):
                    raise
                self._call_ui(self._fail, self._load_error(p, exc))
                return None
            if worker.is_cancelled:
                return None
            models.append((p, model))
        return models

    def _load_parallel(self, worker) -> list | None:
        """[(path, model)] for several traces (the ranks of one job, or tabs), read in parallel processes by
        tui.trace.multi.load_many; or None (failed or cancelled). Escape still leaves at once: the command
        exits without waiting for the readers."""
        try:
            from ..trace.multi import load_many
        except ImportError:  # pragma: no cover - the multi-trace loader is optional
            return self._load_one_by_one(worker)
        total = 0
        for p in self.paths:
            try:
                total += os.path.getsize(p)
            except OSError:
                pass
        self.post_message(_Progress(f"loading {len(self.paths)} traces in parallel ({total / 1e6:.1f} MB,"
                                    f" {os.path.basename(self.paths[0])} ...) ... Esc cancels"))
        opts = {k: v for k, v in self.load_opts.items() if k in ("no_cache", "max_size", "jobs")}
        try:
            loaded = load_many(list(self.paths), **opts)
        except GapscopeError as exc:
            self._call_ui(self._fail, str(exc))
            return None
        except MemoryError:
            self._call_ui(self._fail, f"out of memory while loading {len(self.paths)} traces "
                          "(try --max-size or fewer traces)")
            return None
        except Exception as exc:  # noqa: BLE001 - a reader or pool failure: still one line
            if os.environ.get("GAPSCOPE_DEBUG"):
                raise
            self._call_ui(self._fail, f"{len(self.paths)} traces: internal error while loading "
                          f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})")
            return None
        if worker.is_cancelled:
            return None
        if len(loaded) != len(self.paths):  # load_many expands folders and patterns; the app's paths are files
            self._call_ui(self._fail, f"internal error while loading: {len(self.paths)} traces named, "
                          f"{len(loaded)} read")
            return None
        return list(zip(self.paths, loaded))

    def _analyse_ranks(self, sc: Scene, worker) -> None:
        """The ranks of one job: tui.analysis.ranks.analyze_ranks (collectives matched across ranks, waits, the
        late rank), installed together. When that fails, each rank is analysed on its own and the header
        says why."""
        models = [pt.model for pt in sc.parts]
        try:
            from ..analysis.ranks import analyze_ranks
            from ..analysis.thresholds import DEFAULT

            out = analyze_ranks(models)
            part_of = {id(pt.model): i for i, pt in enumerate(sc.parts)}
            items = []
            for a in out:
                cfg = getattr(a, "config", None) or DEFAULT
                items.append((part_of[id(a.model)], a, int(getattr(cfg, "min_listed_gap_ns", 2000))))
            if sorted(i for i, _, _ in items) != list(range(len(sc.parts))):
                raise ValueError("analyses do not match the ranks")
        except Exception as exc:  # noqa: BLE001 - fall back to one analysis per rank
            if os.environ.get("GAPSCOPE_DEBUG"):
                raise
            msg = exc if isinstance(exc, GapscopeError) else f"internal error {type(exc).__name__}: {exc}"
            sc.rank_error = " ".join(f"ranks analysed one by one: cross-rank analysis failed ({msg})".split())[:300]
            for pi in range(len(sc.parts)):
                if worker.is_cancelled:
                    return
                self._analyse(sc, pi)
            return
        if worker.is_cancelled:
            return
        self._call_ui(self._analyses_ready, sc, items)

    def _analyse(self, sc: Scene, pi: int = 0) -> None:
        model = sc.parts[pi].model
        try:
            from ..analysis import analyze
            from ..analysis.thresholds import DEFAULT
        except Exception as exc:  # noqa: BLE001 - the lanes stay usable without the analysis
            self._call_ui(self._analysis_failed, sc, pi,
                          f"analysis unavailable ({type(exc).__name__}: {exc})")
            return
        try:
            a = analyze(model)
        except GapscopeError as exc:
            self._call_ui(self._analysis_failed, sc, pi, f"analysis failed: {exc}")
            return
        except Exception as exc:  # noqa: BLE001
            if os.environ.get("GAPSCOPE_DEBUG"):
                raise
            self._call_ui(self._analysis_failed, sc, pi,
                          f"analysis failed (internal error {type(exc).__name__}: {exc})")
            return
        cfg = getattr(a, "config", None) or DEFAULT
        self._call_ui(self._analysis_ready, sc, a, int(getattr(cfg, "min_listed_gap_ns", 2000)), pi)

    @on(_Progress)
    def _progress_posted(self, ev: _Progress) -> None:
        self._progress(ev.text)

    def _progress(self, msg: str) -> None:
        if self.scenes or self.error is not None:
            return
        self._loading = msg
        try:
            hd = self.query_one("#header", Static)
        except NoMatches:  # not composed yet: on_mount shows it
            return
        hd.update(Text(self._text(msg), style="bold"))

    def _fail(self, msg: str) -> None:
        self.error = msg
        self._loading = None
        self.push_screen(ErrorScreen(self._text(msg)))

    def _add_scene(self, scene: Scene) -> None:
        self.scenes.append(scene)
        self._freeze_heap(scene)
        if len(self.scenes) == 1:
            self._loading = None
            self.show_scene(0)
            self.lanes.focus()
            self.call_after_refresh(self._first_frame_drawn)
        else:
            self.refresh_header()

    def _first_frame_drawn(self) -> None:
        self._painted.set()  # the analysis may start
        self._mount_footer()
        self.refresh_bindings()  # the keys that need a trace are on now

    def _mount_footer(self) -> None:
        try:
            slot = self.query_one("#keybar", Static)
        except NoMatches:
            return
        self.mount(Footer(), before=slot)
        slot.remove()

    def _analysis_failed(self, sc: Scene, pi: int, msg: str) -> None:
        sc.parts[pi].analysis_error = msg
        self._freeze_heap(sc)
        if sc is self.scene:
            self.refresh_all()

    def _analysis_ready(self, sc: Scene, a, min_listed: int, pi: int = 0) -> None:
        try:
            self._install_analysis(sc, a, min_listed, pi)
        except Exception as exc:  # noqa: BLE001 - keep the lanes; say what went wrong in one line
            if os.environ.get("GAPSCOPE_DEBUG"):
                raise
            sc.parts[pi].analysis = None
            sc._merge_gaps()
            sc.apply_filter(None)
            sc.invalidate_rows()
            sc.parts[pi].analysis_error = f"analysis could not be shown (internal error {type(exc).__name__}: {exc})"
            if sc is self.scene:
                self.lanes.sync_rows()
                self.refresh_all()

    def _analyses_ready(self, sc: Scene, items: list) -> None:
        """Every rank's analysis of a multi-rank tab at once (analyze_ranks)."""
        try:
            self._install_analysis(sc, None, 0, 0, items=items)
        except Exception as exc:  # noqa: BLE001 - keep the lanes; say what went wrong in one line
            if os.environ.get("GAPSCOPE_DEBUG"):
                raise
            for pt in sc.parts:
                pt.analysis = None
                pt.analysis_error = f"analysis could not be shown (internal error {type(exc).__name__}: {exc})"
            sc._merge_gaps()
            sc.apply_filter(None)
            sc.invalidate_rows()
            if sc is self.scene:
                self.lanes.sync_rows()
                self.fill_tables()
                self.refresh_all()

    def _install_analysis(self, sc: Scene, a, min_listed: int, pi: int, items: list | None = None) -> None:
        keep = sc.selected_gap
        keep_active = sc.active
        if items is not None:
            sc.set_analyses(items)
        else:
            sc.set_analysis(a, min_listed, pi)
        self._freeze_heap(sc)
        moved = False
        if keep >= 0 and self._user_picked:
            # parts are analysed in order and appended, so earlier gap ids are unchanged: a later rank's
            # analysis must not move the selection or the view
            where = np.flatnonzero(sc.order == keep)
            if where.size:
                sc.select(int(where[0]))
                sc.active = keep_active
                moved = True
        if sc is self.scene:
            self.lanes.sync_rows()
            self.fill_gap_list()
            self.fill_tables()
            if sc.selected >= 0 and not moved:
                sc.visited = True
                self.goto_gap(sc.selected)
            self.refresh_all()
            # again: the gap list's and tables' rows were made after the freeze above, and a full collection
            # walked them every ~30 presses of `n` (13-21 ms at 1 GB)
            self._freeze_heap(sc)

    def action_cancel_load(self) -> None:
        self.cancelled = True
        for w in self.workers:
            w.cancel()
        self.exit(return_code=130)

    # ================================================================ drawing
    def show_scene(self, i: int) -> None:
        self.current = i
        sc = self.scene
        self.lanes.set_scene(sc)
        self.query_one("#axis", Axis).scene = sc
        self.fill_gap_list()
        self.fill_tables()
        if not sc.visited and sc.order.size and sc.selected >= 0:
            sc.visited = True  # a tab opens on its largest gap, as the first one does
            self.goto_gap(sc.selected)
        self.refresh_all()

    def refresh_header(self) -> None:
        sc = self.scene
        if sc is None:
            return
        hd = self.query_one("#header", Static)
        width = hd.size.width or self.size.width
        text = header_text(sc, self.current, len(self.scenes), self.glyphs, width=width)
        hd.update(text)
        self._fit_lanes(min(len(text.plain.split("\n")), 5))

    def _fit_lanes(self, header_lines: int | None = None) -> None:
        """The lanes' height cap, as rows: what the screen has left after the header, the axis, the status and
        key lines, shared with the gap list (half each on a short terminal, 60% to the lanes on a tall one).
        The lanes' own height is the cap (not a percentage of a parent that clips them), so scrolling a lane
        into view scrolls it into what is shown."""
        if header_lines is None:
            header_lines = self._header_lines
        self._header_lines = header_lines
        h = self.size.height
        avail = max(h - header_lines - 2 - 2, 0)
        cap = max(int(avail * (0.5 if h < 36 else 0.6)), 1)
        lv = self.lanes
        if lv.styles.max_height is None or int(lv.styles.max_height.value) != cap:
            lv.styles.max_height = cap
            self.call_after_refresh(lv.ensure_cursor_visible)

    def refresh_all(self) -> None:
        self.refresh_header()
        self.refresh_view()
        self.refresh_stack()
        self.refresh_bindings()

    def refresh_view(self) -> None:
        self._status_msg = ""  # messages last until the next move
        sc = self.scene
        if sc is not None and len(sc.rows()) != self.lanes.virtual_size.height:
            # lanes folded or unfolded by the move (nothing in view)
            self.lanes.sync_rows()
            self.lanes.ensure_cursor_visible()
        self.lanes.refresh()
        self.query_one("#axis", Axis).refresh()
        self.refresh_status()

    def refresh_stack(self) -> None:
        sc = self.scene
        if sc is None:
            return
        self.query_one("#stack", StackPanel).set_text(stack_text(sc, self.glyphs))

    def refresh_status(self, msg: str | None = None) -> None:
        sc = self.scene
        if msg is not None:
            self._status_msg = msg
        if sc is None:
            return
        v = sc.view
        parts = []
        if self._status_msg:
            parts.append(self._status_msg)
        if sc.search_query:
            if sc.matches.size:
                parts.append(f"find '{sc.search_query}': {sc.match_pos + 1}/{sc.matches.size} (n/N, Esc ends)")
            else:
                parts.append(f"find '{sc.search_query}': no match")
        if sc.cause_filter is not None:
            parts.append(f"filter: {self._cause_name(sc.cause_filter)}")
        if sc.finding_filter is not None:
            parts.append(f"gaps of {sc.finding_filter}: {sc.order.size} (n/N walk them, Esc: all gaps)")
        rows = sc.rows()
        ev = self.event_under_cursor() if rows and 0 <= sc.lane_cursor < len(rows) else -1
        if ev >= 0:
            m = sc.model
            gpu = int(m.kind[ev]) in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
            nm = short_kernel(m.name(ev)) if gpu else display_frame(m.name(ev))
            parts.append(f"{nm} {self.d(m.dur_ns[ev])}")
        if sc.set_link(sc.active, ev):
            self.lanes.refresh()  # the mark of the other end moved
        if sc.link is not None:
            other = sc.parts[sc.link[0]].model
            what = "launched by" if int(other.kind[sc.link[1]]) in (Kind.RUNTIME, Kind.DRIVER) else "launches"
            parts.append(f"{what} {short_kernel(other.name(sc.link[1]))} (v jumps)")
        parts.append(f"cursor {self.d(v.cursor - sc.origin)}" + (" (trace time)" if sc.time_mode == "trace" else ""))
        # fixed height: no layout pass, only this line is redrawn
        self.query_one("#status", Static).update(Text(self._text("  " + " | ".join(parts)), no_wrap=True,
                                                      overflow=self._ov), layout=False)

    def _cause_name(self, i: int) -> str:
        try:
            from ..analysis import CAUSES

            return CAUSES[i]
        except Exception:  # noqa: BLE001
            return str(i)

    def _gap_columns(self, gl: DataTable, narrow: bool) -> None:
        """The gap list's columns. A narrow terminal drops the row number (the stack panel says "gap 3/723")
        and shortens the cause names, so the next op keeps some room."""
        self._narrow = narrow
        if not narrow:
            gl.add_column(Text("#"), key="n", width=3)
        gl.add_column(Text("idle", justify="right"), key="dur", width=8)
        gl.add_column(Text("cause"), key="cause", width=6 if narrow else 10)
        gl.add_column(Text("at", justify="right"), key="at", width=9)
        gl.add_column(Text("next op"), key="next")

    def fill_gap_list(self) -> None:
        gl = self.query_one("#gaplist", DataTable)
        narrow = self.size.width < NARROW
        if narrow != self._narrow:
            gl.clear(columns=True)
            self._gap_columns(gl, narrow)
        else:
            gl.clear()
        sc = self.scene
        if sc is None or not sc.any_analysis:
            return
        origin = sc.origin
        first = [] if narrow else [Text("")]  # the "#" cell when there is a "#" column
        for pos, gid in enumerate(sc.order[:MAX_LIST].tolist()):
            pt = sc.parts[int(sc.g_part[gid])]
            row = int(sc.g_row[gid])
            nxt = int(pt.analysis.gaps.next_idx[row])
            cause = self._cause_name(int(sc.g_cause[gid]))
            # the aten op that launched the next kernel says more than the kernel's name
            op = int(pt.model.op[nxt]) if nxt >= 0 else -1
            name = pt.model.name(op) if op >= 0 else (short_kernel(pt.model.name(nxt)) if nxt >= 0 else "?")
            name = name[6:] if name.startswith("aten::") else name  # the column is narrow: mm, not aten::mm
            if sc.multi:
                r = pt.model.rank
                name = f"r{r if r is not None else int(sc.g_part[gid])} {name}"
            gl.add_row(
                *([] if narrow else [Text(str(pos + 1))]),
                Text(self.d(sc.g_dur[gid]), justify="right"),
                Text(SHORT_CAUSE.get(cause, cause) if narrow else cause, style=G.CAUSE_COLOURS.get(cause, "")),
                Text(fmt_at(int(sc.g_start[gid]) - origin, ascii=self.glyphs.ascii), justify="right"),
                Text(self._text(name), no_wrap=True, overflow=self._ov),
                key=str(pos),
            )
        if sc.order.size > MAX_LIST:
            gl.add_row(*first, Text("...", justify="right"), Text(f"{sc.order.size - MAX_LIST} more", style="dim"),
                       Text(""), Text("n walks all of them", style="dim"), key="more")
        listed, total, lim = sc.listed_counts()
        if total > listed and sc.cause_filter is None:
            # the report counts every gap; the list holds those the report lists (Analysis.listed_rows)
            gl.add_row(*first, Text(f"+{total - listed}", justify="right", style="dim"),
                       Text("gaps", style="dim"), Text(f"< {self.d(lim)}", justify="right", style="dim"),
                       Text("not listed (in every total)", style="dim"), key="short")
        if 0 <= sc.selected < min(sc.order.size, MAX_LIST):
            gl.move_cursor(row=sc.selected, animate=False)

    async def _mount_tables(self) -> None:
        """The kernels and findings views, mounted (hidden) the first time one of them is shown."""
        if self._tables_mounted:
            return
        self._tables_mounted = True
        views = []
        for name in ("kernels", "findings"):
            v = Vertical(DataTable(id=name, cursor_type="row"),
                         VerticalScroll(Static(id=name[:-1] + "info"), classes="infobox"), id=name + "view")
            v.display = False
            views.append(v)
        await self.query_one("#views", ContentSwitcher).mount_all(views)

    def fill_tables(self) -> None:
        if not self._tables_mounted:
            return  # filled when first shown (action_view)
        sc = self.scene
        kt = self.query_one("#kernels", DataTable)
        ft = self.query_one("#findings", DataTable)
        kt.clear(columns=True)
        ft.clear(columns=True)
        self._tables_width = self.size.width
        if sc is None or sc.analysis is None:
            kt.add_column(Text("kernels appear once the analysis is done"))
            ft.add_column(Text("findings appear once the analysis is done"))
            return
        # the columns that fit the width (the info box below the table shows every field of the kernel); the
        # kernel's name gets what is left. A multi-rank tab lists every rank's kernels with a rank column.
        width = self.size.width
        cols = [("calls", 6), ("total", 9), ("%", 5), ("floor", 9), ("bound", 7)]
        if self._tables_multi(sc):
            cols.insert(0, ("rank", 4))
        if width >= 110:
            cols.append(("op", 16))
        if width >= 150:
            cols.append(("shapes", 24))
        name_w = max(width - 1 - sum(w + 2 for _, w in cols) - 2, 12)
        kt.add_column(Text("kernel"), key="kernel", width=name_w)
        for c, w in cols:
            kt.add_column(Text(c, justify="left" if c in ("bound", "op", "shapes") else "right"), key=c, width=w)
        for pi, i, k in self._kernels(sc):
            cells = {"rank": Text(str(self._rank_of(sc, pi)), justify="right"),
                     "calls": Text(str(k.count), justify="right"),
                     "total": Text(self.d(k.total_ns), justify="right"),
                     "%": Text(f"{float(k.pct):.1f}", justify="right"),
                     "floor": Text(self.d(k.floor_ns) if getattr(k, "floor_ns", None) else "-", justify="right"),
                     "bound": Text(str(k.bound or "-")),
                     "op": Text(self._text(str(k.op or "-")), no_wrap=True, overflow=self._ov),
                     "shapes": Text(self._text(str(k.shapes or "-")), no_wrap=True, overflow=self._ov)}
            kt.add_row(Text(self._text(short_kernel(k.name)), no_wrap=True, overflow=self._ov),
                       *(cells[c] for c, _ in cols), key=f"{pi}:{i}")
        cols = ("#", "rank", "severity", "idle", "finding") if sc.multi else ("#", "severity", "idle", "finding")
        for c in cols:
            ft.add_column(Text(c), key=c)
        for n, (pi, i, f) in enumerate(self._findings(sc)):
            cells = [Text(str(n + 1)), Text(str(f.severity)), Text(self.d(f.idle_ns)),
                     Text(self._text(f.title), no_wrap=True, overflow=self._ov)]
            if sc.multi:
                cells.insert(1, Text(str(self._rank_of(sc, pi))))
            ft.add_row(*cells, key=f"{pi}:{i}")
        self._show_kernel_info(0)
        self._show_finding_info(0)

    @staticmethod
    def _tables_multi(sc: Scene) -> bool:
        return sc.multi and sum(pt.analysis is not None for pt in sc.parts) > 1

    def _kernels(self, sc: Scene | None) -> list:
        """(part, index, kernel) of the kernels view: the active trace's; in a multi-rank tab every rank's,
        largest total first (a rank column says whose), 200 at most."""
        if sc is None:
            return []
        parts = range(len(sc.parts)) if self._tables_multi(sc) else [sc.active]
        out = [(pi, i, k) for pi in parts for i, k in enumerate(getattr(sc.parts[pi].analysis, "kernels", None)
                                                                  or [])]
        if self._tables_multi(sc):
            out.sort(key=lambda e: (-int(e[2].total_ns), e[0], e[1]))
        return out[:200]

    @staticmethod
    def _rank_of(sc: Scene, pi: int):
        r = sc.parts[pi].model.rank
        return r if r is not None else pi

    def _findings(self, sc: Scene | None) -> list:
        """(part, index, finding) listed in the findings view: the active trace's; in a multi-rank tab every
        rank's (the waiting rank's finding names the late one), largest idle first."""
        if sc is None:
            return []
        parts = range(len(sc.parts)) if sc.multi else [sc.active]
        out = [(pi, i, f) for pi in parts for i, f in enumerate(getattr(sc.parts[pi].analysis, "findings", None)
                                                                   or [])]
        if sc.multi:
            out.sort(key=lambda e: (-int(e[2].idle_ns), e[0], e[1]))
        return out

    @staticmethod
    def _finding_key(key) -> tuple[int, int] | None:
        a, _, b = str(key).partition(":")
        return (int(a), int(b)) if a.isdigit() and b.isdigit() else None

    def _show_kernel_info(self, i: int | tuple[int, int]) -> None:
        sc = self.scene
        k = None
        if isinstance(i, tuple):
            pt = sc.parts[i[0]] if sc is not None and i[0] < len(sc.parts) else None
            ks = (getattr(pt.analysis, "kernels", None) or []) if pt is not None else []
            k = ks[i[1]] if 0 <= i[1] < len(ks) else None
        else:
            ks = self._kernels(sc)
            k = ks[i][2] if 0 <= i < len(ks) else None
        t = Text()
        if k is not None:
            if sc.multi:
                t.append(f"rank {self._rank_of(sc, i[0] if isinstance(i, tuple) else ks[i][0])}: ", style="bold")
            t.append(self._text(k.name) + "\n", style="bold bright_cyan")
            t.append(self._text(f"{k.count} calls, {self.d(k.total_ns)} total ({float(k.pct):.1f}% of kernel time)"))
            if getattr(k, "floor_ns", None):
                t.append(self._text(f"; floor {self.d(k.floor_ns)} ({k.bound or '?'}-bound)"))
            t.append("\n")
            if k.op:
                t.append(self._text(f"from {k.op}") + (self._text(f"  shapes {k.shapes}") if k.shapes else "") + "\n")
            t.append("Enter: find it in the lanes", style="dim")
        self.query_one("#kernelinfo", Static).update(t)

    def _show_finding_info(self, i: int | tuple[int, int]) -> None:
        sc = self.scene
        t = Text()
        f = None
        if isinstance(i, tuple):
            pt = sc.parts[i[0]] if sc is not None and i[0] < len(sc.parts) else None
            fs = (getattr(pt.analysis, "findings", None) or []) if pt is not None else []
            f = fs[i[1]] if 0 <= i[1] < len(fs) else None
        else:
            fs = self._findings(sc)
            f = fs[i][2] if 0 <= i < len(fs) else None
        if f is not None:
            t.append(self._text(f.title) + "\n", style="bold")
            t.append(self._text(f"{f.severity}, {self.d(f.idle_ns)} of GPU idle explained, "
                                f"{np.asarray(getattr(f, 'gap_rows', ())).size} gaps") + "\n")
            pa = pt.analysis if isinstance(i, tuple) and pt is not None else getattr(sc, "analysis", None)
            # the projected saving (analysis/replay.py); computed here only for traces small enough to replay at once
            if pa is not None and ("projection" in vars(pa) or pa.model.n < 200_000):
                pj = pa.projection
                s = pj.saving_ns.get(f.id)
                if s is not None:
                    how = "un-profiled, calibrated" if pj.calibrated else "profiled time"
                    t.append(self._text(f"fix → −{self.d(s)} per step (−{pj.saving_pct(f.id):.1f}%), {how}: "
                                        f"{pj.what.get(f.id, '')}") + "\n", style="bold")
            if f.suggestion:
                t.append("suggestion: ", style="bold green")
                t.append(self._text(str(f.suggestion)) + "\n")
            for k, v in list((f.evidence or {}).items())[:12]:
                t.append(self._text(f"  {k}: {v}")[:300] + "\n", style="dim")
            t.append("Enter: its gaps in the gap list (n walks them, Esc: all gaps)", style="dim")
        self.query_one("#findinginfo", Static).update(t)

    @on(DataTable.RowHighlighted, "#kernels")
    def _kernel_highlighted(self, ev: DataTable.RowHighlighted) -> None:
        k = self._finding_key(ev.row_key.value) if ev.row_key is not None else None
        if k is not None:
            self._show_kernel_info(k)

    @on(DataTable.RowHighlighted, "#findings")
    def _finding_highlighted(self, ev: DataTable.RowHighlighted) -> None:
        k = self._finding_key(ev.row_key.value) if ev.row_key is not None else None
        if k is not None:
            self._show_finding_info(k)

    @on(DataTable.RowSelected, "#kernels")
    def _kernel_selected(self, ev: DataTable.RowSelected) -> None:
        sc = self.scene
        key = self._finding_key(ev.row_key.value) if ev.row_key is not None else None
        if sc is None or key is None or sc.parts[key[0]].analysis is None:
            return
        k = sc.parts[key[0]].analysis.kernels[key[1]]
        self._switch_view("lanes")
        if sc.search(k.name):
            self._show_match(sc.current_match())
        self.refresh_bindings()

    # ================================================================ cursor & events
    def event_under_cursor(self) -> int:
        sc = self.scene
        if sc is None:
            return -1
        ln = sc.cursor_lane()
        if ln is None or ln.kind == "gaps":
            return -1
        sc.active = ln.part
        v = sc.view
        cw = self.lanes.cells_width()
        col = time_to_col(v.cursor, v.t0, v.t1, cw)
        from .lanes import cell_edges

        e = cell_edges(v.t0, v.t1, cw)
        col = min(max(col, 0), cw - 1)
        a, b = int(e[col]), int(e[col + 1])
        if ln.iv is not None:
            return ln.iv.at(a, b, innermost=ln.kind == "cpu", mid=min(max(v.cursor, a), b - 1))
        if ln.segs is not None:
            r = ln.segs.cells(np.array([a, b], dtype=np.int64))[0]
            return int(ln.segs.ref[r]) if r >= 0 else -1
        return -1

    def gap_under_cursor(self) -> int:
        sc = self.scene
        ln = sc.cursor_lane() if sc else None
        if ln is None or ln.kind != "gaps":
            return -1
        v = sc.view
        cw = self.lanes.cells_width()
        from .lanes import cell_edges

        e = cell_edges(v.t0, v.t1, cw)
        col = min(max(time_to_col(v.cursor, v.t0, v.t1, cw), 0), cw - 1)
        r = ln.segs.cells(e[col:col + 2])[0]
        return int(ln.segs.ref[r]) if r >= 0 else -1

    # ================================================================ gap navigation
    def goto_gap(self, pos: int, *, list_cursor: bool = True) -> None:
        sc = self.scene
        if sc is None or not sc.any_analysis or not sc.order.size:
            return
        gid = sc.select(pos)
        pos = sc.selected
        a, b, dev = sc.gap_span(gid)
        part = int(sc.g_part[gid])
        sc.view.focus(a, b, self.lanes.cells_width())
        # put the lane cursor on the device's gap row so Enter explains it
        for i, r in enumerate(sc.rows()):
            if r.lane is not None and r.lane.kind == "gaps" and r.lane.device == dev and r.lane.part == part:
                sc.lane_cursor = i
        self.lanes.ensure_cursor_visible()
        if list_cursor and pos < MAX_LIST:
            gl = self.query_one("#gaplist", DataTable)
            if gl.row_count > pos:
                gl.move_cursor(row=pos, animate=False)
        self.refresh_stack()
        self.refresh_view()

    def action_next_gap(self) -> None:
        self._user_picked = True
        sc = self.scene
        if sc is not None and sc.search_query and sc.matches.size:
            return self._step_match(1)
        if sc is not None and sc.order.size:
            self.goto_gap(min(sc.selected + 1, sc.order.size - 1) if sc.selected >= 0 else 0)

    def action_prev_gap(self) -> None:
        self._user_picked = True
        sc = self.scene
        if sc is not None and sc.search_query and sc.matches.size:
            return self._step_match(-1)
        if sc is not None and sc.order.size:
            self.goto_gap(max(sc.selected - 1, 0))

    def action_focus_gap(self) -> None:
        sc = self.scene
        if sc is not None and sc.selected_gap >= 0:
            self.goto_gap(sc.selected)

    @on(DataTable.RowHighlighted, "#gaplist")
    def _gap_highlighted(self, ev: DataTable.RowHighlighted) -> None:
        sc = self.scene
        key = ev.row_key.value if ev.row_key is not None else None
        if sc is None or key is None or not str(key).isdigit():
            return
        pos = int(key)
        if pos != sc.selected:
            self._user_picked = True
            self.goto_gap(pos, list_cursor=False)

    @on(DataTable.RowSelected, "#findings")
    def _finding_selected(self, ev: DataTable.RowSelected) -> None:
        sc = self.scene
        k = self._finding_key(ev.row_key.value) if ev.row_key is not None else None
        if sc is None or k is None or not 0 <= k[0] < len(sc.parts) or sc.parts[k[0]].analysis is None:
            return
        f = sc.parts[k[0]].analysis.findings[k[1]]
        rows = np.asarray(getattr(f, "gap_rows", []), dtype=np.int64)
        n = self._findings(sc).index((k[0], k[1], f)) + 1 if (k[0], k[1], f) in self._findings(sc) else k[1] + 1
        if rows.size and sc.apply_finding(k[0], rows, f"finding {n}"):
            # the gap list holds this finding's gaps, largest first: n / N walk them, Esc shows all gaps again
            self._switch_view("lanes")
            self.fill_gap_list()
            self.goto_gap(0)
            self.lanes.focus()
            self.refresh_bindings()
        else:
            self.refresh_status("this finding lists no gap")

    # ================================================================ view actions
    def action_pan(self, frac: float) -> None:
        sc = self.scene
        if sc is None:
            return
        sc.view.pan(float(frac))
        self.refresh_view()

    def action_zoom(self, factor: float) -> None:
        sc = self.scene
        if sc is None:
            return
        sc.view.zoom(float(factor), self.lanes.cells_width())
        self.refresh_view()

    def action_fit(self) -> None:
        sc = self.scene
        if sc is None:
            return
        sc.view.fit()
        self.refresh_view()

    def action_cursor(self, d: int) -> None:
        sc = self.scene
        if sc is None:
            return
        v = sc.view
        cw = self.lanes.cells_width()
        col = time_to_col(v.cursor, v.t0, v.t1, cw) if v.t0 <= v.cursor < v.t1 else (0 if d > 0 else cw - 1) - d
        col += int(d)
        if col < 0:
            v.pan(-0.25)
            col = time_to_col(v.cursor, v.t0, v.t1, cw) - 1
        elif col >= cw:
            v.pan(0.25)
            col = time_to_col(v.cursor, v.t0, v.t1, cw) + 1
        v.cursor = col_to_time(min(max(col, 0), cw - 1), v.t0, v.t1, cw)
        self.refresh_view()

    def action_event(self, d: int) -> None:
        sc = self.scene
        if sc is None:
            return
        ln = sc.cursor_lane()
        if ln is None or (ln.iv is None and ln.segs is None):
            self.refresh_status("[ ]: no events on this row")
            return
        v = sc.view
        if ln.iv is not None:
            s = ln.iv.starts
            i = int(np.searchsorted(s, v.cursor, side="right")) if int(d) > 0 else \
                int(np.searchsorted(s, v.cursor, side="left")) - 1
            t = int(s[i]) if 0 <= i < s.size else None
        else:
            s = ln.segs.starts
            i = int(np.searchsorted(s, v.cursor, side="right")) if int(d) > 0 else \
                int(np.searchsorted(s, v.cursor, side="left")) - 1
            t = int(s[i]) if 0 <= i < s.size else None
        if t is None:
            self.refresh_status("no more events on this lane")
            return
        v.ensure_visible(t)
        self.refresh_status("")
        self.refresh_view()

    def move_lane(self, d: int) -> None:
        sc = self.scene
        if sc is None:
            return
        n = len(sc.rows())
        if not n:
            return
        old = sc.lane_cursor
        sc.lane_cursor = max(0, min(sc.lane_cursor + d, n - 1))
        top = self.lanes.scroll_offset.y
        self.lanes.ensure_cursor_visible()
        if self.lanes.scroll_offset.y == top:
            # only the two rows whose label changed are redrawn (small updates over slow links)
            self.lanes.refresh_line(old)
            self.lanes.refresh_line(sc.lane_cursor)
            self._status_msg = ""
            self.refresh_status()
        else:
            self.refresh_view()

    def action_lane(self, d: int) -> None:
        self.move_lane(int(d))

    def action_expand(self) -> None:
        sc = self.scene
        if sc is None:
            return
        rows = sc.rows()
        row = rows[sc.lane_cursor] if 0 <= sc.lane_cursor < len(rows) else None
        if row is not None and row.lane is None:
            # a folded row shows its lanes (every lane, until space on a group header folds them again)
            if row.folded or not sc.fold_empty:
                sc.fold_empty = not sc.fold_empty
                sc.invalidate_rows()
                self.lanes.sync_rows()
                self.lanes.ensure_cursor_visible()
                self.refresh_view()
                self.refresh_status("every lane shown (space on a group header folds the empty ones again)"
                                    if not sc.fold_empty else "lanes with nothing in view folded")
            else:
                self.refresh_status("space: nothing to expand on a group header")
            return
        if sc.toggle_expand():
            self.lanes.sync_rows()
            self.lanes.ensure_cursor_visible()
            self.refresh_view()
        else:
            self.refresh_status("space: only a CPU thread with a recorded stack expands")

    def action_cause(self, d: int) -> None:
        sc = self.scene
        if sc is None or not sc.any_analysis:
            return
        from ..analysis import CAUSES

        present = sorted(set(sc.g_cause[sc.all_listed].tolist()))
        cycle = [None] + present
        i = cycle.index(sc.cause_filter) if sc.cause_filter in cycle else 0
        sc.apply_filter(cycle[(i + int(d)) % len(cycle)])
        self.fill_gap_list()
        if sc.selected >= 0:
            self.goto_gap(0)
        name = "all causes" if sc.cause_filter is None else CAUSES[sc.cause_filter]
        self.refresh_status(f"gaps: {name} ({sc.order.size})")
        self.refresh_stack()
        self.lanes.refresh()
        self.query_one("#axis", Axis).refresh()

    async def action_view(self, name: str) -> None:
        if name != "lanes":
            await self._mount_tables()
            self.fill_tables()  # the tables follow the active rank
        self._switch_view(name)

    def _switch_view(self, name: str) -> None:
        self.query_one("#views", ContentSwitcher).current = "lanesview" if name == "lanes" else name + "view"
        if name == "lanes":
            self.lanes.focus()
        else:
            self.query_one(f"#{name}", DataTable).focus()
        self.refresh_bindings()

    def action_diff(self) -> None:
        """Before/after (tui/app/diffview.py): this tab (A) against the next one (B)."""
        pair = self._diff_pair()
        if pair is None:
            self.refresh_status("D compares two analysed single-trace tabs: open two traces")
            return
        self.refresh_status("comparing the two traces step by step ...")
        self._build_diff(*pair)

    @work(thread=True, exclusive=True, group="diff")
    def _build_diff(self, a, b) -> None:
        """The diff's own lanes and comparison are built off the event loop (seconds on a large trace)."""
        from .diffview import DiffScene, DiffScreen

        try:
            sc = DiffScene(a.path, a.model, a.analysis, b.path, b.model, b.analysis)
        except Exception as exc:  # noqa: BLE001 - one line in the status bar, the explorer stays
            if os.environ.get("GAPSCOPE_DEBUG"):
                raise
            self.call_from_thread(self.refresh_status, f"before/after failed ({type(exc).__name__}: {exc})")
            return
        self.call_from_thread(self.push_screen, DiffScreen(sc, self.glyphs))

    def _diff_pair(self):
        if len(self.scenes) < 2:
            return None
        a, b = self.scene, self.scenes[(self.current + 1) % len(self.scenes)]
        if a is None or a.multi or b.multi or a.analysis is None or b.analysis is None:
            return None
        return a.part, b.part

    def action_next_trace(self) -> None:
        if len(self.scenes) > 1:
            self.show_scene((self.current + 1) % len(self.scenes))
        else:
            self.refresh_status("t: one trace loaded, no other tab")

    def action_mark(self) -> None:
        """`m`: mark the cursor's time; the second `m` selects the range between the two and shows its stats."""
        sc = self.scene
        if sc is None:
            return
        t = sc.view.cursor
        if sc.mark is None or sc.mark == t:
            sc.mark, sc.span_sel = t, None
            self.refresh_view()
            self.refresh_status(f"range starts at +{self.d(t - sc.origin)}: move the cursor, m again ends it")
            return
        a, b = sorted((sc.mark, t))
        sc.mark = None
        self._show_range(a, b)

    def action_mark_range(self) -> None:
        """`M`: the range (step, record_function) or event under the cursor as the selected range."""
        sc = self.scene
        if sc is None:
            return
        ln = sc.cursor_lane()
        ev = self.event_under_cursor()
        if ln is not None and ln.kind == "ranges" and ln.segs is not None:
            r = ln.segs.cells(np.array([sc.view.cursor, sc.view.cursor + 1], dtype=np.int64))[0]
            if r >= 0:
                self._show_range(int(ln.segs.starts[r]), int(ln.segs.ends[r]))
                return
        if ev >= 0:
            m = sc.model
            s = int(m.ts_ns[ev]) + sc.offset
            self._show_range(s, s + max(int(m.dur_ns[ev]), 1))
            return
        self.refresh_status("M: put the cursor on a step, a range or an event (or use m twice)")

    def _show_range(self, a: int, b: int) -> None:
        from .rangestats import range_text

        sc = self.scene
        sc.span_sel = (a, max(b, a + 1))
        self.refresh_view()
        self.push_screen(DetailScreen(range_text(sc, a, max(b, a + 1), self.glyphs), self.glyphs.ascii))

    def action_link(self) -> None:
        """Jump between a kernel and its launch (the other end marked on the lanes)."""
        sc = self.scene
        if sc is None:
            return
        if sc.link is None:
            self.refresh_status("v: put the cursor on a kernel, a copy or a launch call first")
            return
        part, ev, row, t = sc.link
        sc.view.ensure_visible(t)
        r = sc.row_of_event(ev, part)
        if r >= 0:
            sc.lane_cursor = r
            self.lanes.ensure_cursor_visible()
        self.refresh_view()

    def action_origin(self) -> None:
        """Times from the analysed window's start (the report's) or in the trace's own time."""
        sc = self.scene
        if sc is None:
            return
        sc.time_mode = "trace" if sc.time_mode == "window" else "window"
        self.fill_gap_list()
        self.refresh_all()
        self.refresh_status("times: " + ("the trace's own timestamps" if sc.time_mode == "trace"
                                         else "from the analysed window's start, as the report"))

    # ================================================================ search
    async def action_search(self) -> None:
        inp = self._search_box()
        if inp is None:
            inp = SearchInput(placeholder="find a kernel or op by name (Enter: find, then n / N: next / previous "
                                          "match, Esc: done)", id="search")
            await self.mount(inp, before=self.query_one("#status"))
        inp.add_class("-on")
        sc = self.scene
        if sc is not None and sc.search_query and not inp.value:
            inp.value = sc.search_query
        inp.focus()

    def _search_box(self) -> Input | None:
        """The search box, once mounted (the first /)."""
        try:
            return self.query_one("#search", Input)
        except NoMatches:
            return None

    @on(Input.Submitted, "#search")
    def _search_submit(self, ev: Input.Submitted) -> None:
        sc = self.scene
        if sc is None:
            return
        if ev.value != sc.search_query:
            n = sc.search(ev.value)
            if n:
                self._show_match(sc.current_match())
            else:
                self.refresh_status()
        else:
            self._step_match(1)
        if sc.matches.size:
            # the box closes and the keys go back to the lanes: n / N step through the matches (the status
            # line says so), Esc ends the search; / opens the box again on the query
            ev.input.remove_class("-on")
            self.lanes.focus()
            self.refresh_bindings()

    def _step_match(self, d: int) -> None:
        sc = self.scene
        ev = sc.step_match(d)
        if ev >= 0:
            self._show_match(ev)

    def _show_match(self, ev: int) -> None:
        sc = self.scene
        m = sc.model
        t = int(m.ts_ns[ev]) + sc.offset
        dur = int(m.dur_ns[ev])
        v = sc.view
        cw = self.lanes.cells_width()
        if dur > v.span // 3 or dur * cw < v.span // 4:
            v.focus(t, t + max(dur, 1), cw, context=2.0)
        else:
            v.centre_on(t)
        v.cursor = t
        r = sc.row_of_event(ev)
        if r >= 0:
            sc.lane_cursor = r
            self.lanes.ensure_cursor_visible()
        self.refresh_view()

    def action_prev_match(self) -> None:
        sc = self.scene
        if sc is not None and sc.matches.size:
            self._step_match(-1)

    # ================================================================ detail, help, export
    def action_detail(self) -> None:
        sc = self.scene
        if sc is None:
            return
        if self.focused is self.query_one("#gaplist", DataTable) or self.focused is self.query_one("#stack"):
            if sc.selected_gap >= 0:
                self.push_screen(DetailScreen(stack_text(sc, self.glyphs, full=True), self.glyphs.ascii))
            return
        gid = self.gap_under_cursor()
        if gid >= 0:
            where = np.flatnonzero(sc.order == gid)
            if where.size:
                self.goto_gap(int(where[0]))
            self.push_screen(DetailScreen(stack_text(sc, self.glyphs, full=True), self.glyphs.ascii))
            return
        ev = self.event_under_cursor()
        if ev < 0:
            self.refresh_status("nothing under the cursor")
            return
        self.push_screen(DetailScreen(event_text(sc, ev, self.glyphs), self.glyphs.ascii))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.glyphs))

    def action_legend(self) -> None:
        self.push_screen(HelpScreen(self.glyphs, legend_only=True))

    def action_export(self) -> None:
        from .export import export_all

        sc = self.scene
        if sc is None:
            return
        analyses = [p.analysis for s in self.scenes for p in s.parts if p.analysis is not None]
        try:
            svg = self.export_screenshot()
            paths = export_all(analyses, sc.parts[0].path, svg)
        except GapscopeError as exc:
            self.refresh_status(f"export failed: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - the report writer may not be there yet
            self.refresh_status(f"export failed: {type(exc).__name__}: {exc}")
            return
        self.last_export = paths
        self.refresh_status("wrote " + ", ".join(paths))
        # one line each: the text is made safe line by line (safe() shows a newline inside a name as "\n")
        self.notify("\n".join(self._text(s) for s in ["wrote", *paths]), title="export", timeout=8)

    def action_escape(self) -> None:
        if self._loading is not None:
            return self.action_cancel_load()
        sc = self.scene
        inp = self._search_box()
        if (inp is not None and inp.has_class("-on")) or (sc is not None and sc.search_query):
            if inp is not None:
                inp.remove_class("-on")
                inp.value = ""
            if sc is not None:
                sc.search("")
            self.lanes.focus()
            self.refresh_status("")
            return
        sw = self.query_one("#views", ContentSwitcher)
        if sw.current != "lanesview":
            self._switch_view("lanes")
        elif sc is not None and (sc.mark is not None or sc.span_sel is not None):
            sc.mark = sc.span_sel = None  # the range selection ends
            self.refresh_view()
            self.refresh_status("range cleared")
        elif sc is not None and (sc.finding_filter is not None or sc.cause_filter is not None):
            keep = sc.selected_gap  # every gap again, the selected one still selected
            sc.apply_filter(None)
            self.fill_gap_list()
            where = np.flatnonzero(sc.order == keep)
            self.goto_gap(int(where[0]) if where.size else 0)
            self.refresh_status("all gaps")

    # ================================================================ enabling keys
    def check_action(self, action: str, parameters: tuple) -> bool | None:
        sc = self.scene
        if action in ("next_gap", "prev_gap", "focus_gap", "cause"):
            if sc is None:
                return None
            if action in ("next_gap", "prev_gap") and sc.search_query and sc.matches.size:
                return True
            if not sc.any_analysis or not sc.order.size:
                return None
            if action == "cause" and not sc.all_listed.size:
                return None
            return True
        if action == "next_trace":
            return True if self.scenes else None
        if action in ("origin", "link", "mark", "mark_range"):
            return True if sc is not None else None
        if action == "diff":
            return True if self._diff_pair() is not None else None
        if action in ("pan", "zoom", "fit", "cursor", "event", "expand", "search", "detail", "export"):
            if sc is None:
                return None
            sw = self.query_one("#views", ContentSwitcher)
            if action in ("pan", "zoom", "cursor", "event", "expand") and sw.current != "lanesview":
                return None
            return True
        return True

    def on_resize(self, event) -> None:
        self._fit_lanes()
        if self.scene is not None:
            self.lanes.sync_rows()
            if self.scene.multi:
                self.refresh_header()  # the ranks line is fitted to the width
            if (self.size.width < NARROW) != self._narrow:
                self.fill_gap_list()  # the cause column's width and names follow the width
            if self._tables_mounted and self.size.width != self._tables_width:
                self.fill_tables()  # the kernels' columns follow the width


def group_scenes(models: list) -> list[Scene]:
    """One tab per trace, except that the ranks of one job (distinct rank numbers, two or more) share a tab
    with their lanes grouped by rank."""
    ranks = [m.rank for _, m in models]
    if len(models) > 1 and all(r is not None for r in ranks) and len(set(ranks)) == len(ranks):
        order = sorted(range(len(models)), key=lambda i: ranks[i])
        return [Scene([models[i][0] for i in order], [models[i][1] for i in order])]
    return [Scene(p, m) for p, m in models]


def _load(load, path: str, opts: dict):
    """Call the trace reader with the options it accepts (the reader grows options over time)."""
    try:
        return load(path, **opts)
    except TypeError as exc:
        if "unexpected keyword" in str(exc):
            return load(path)
        raise
