"""The explorer's App: it holds the loaded scenes, runs the load worker (tui/loading.py) and hands what it
posts to the screen (tui/main.py), which draws it and answers the keys."""

from __future__ import annotations

import gc
import threading

import numpy as np
from textual import on
from textual.app import App

from . import glyphs as G
from . import progress as progressive
from .diffscene import diff_pair
from .loading import (LOAD_OPTS, AnalysisFailed, AnalysisReady, GapsReady, Loader, LoadFailed, PreviewLoaded,
                      Progress, ProjectionReady, ProvisionalReady, ReadProgress, SceneLoaded, debugging, failure)
from .loadstate import AnalysisState
from .main import MainScreen
from .scene import Scene
from .timeline import LanesView

#: models of this many events and more have their objects moved out of the collector's reach once loaded
FREEZE_EVENTS = 100_000
#: with a large trace frozen, a full collection comes after this many young ones (Python's default: 10)
GC_FULL_EVERY = 300


class GapscopeApp(progressive.MarksUse, App):
    TITLE = "gapscope"
    ENABLE_COMMAND_PALETTE = False  # every action has a key; the footer stays plain ASCII-friendly
    CSS_PATH = "gapscope.tcss"

    def __init__(self, paths: list[str], *, ascii: bool = False, load_opts: dict | None = None,
                 analyze: bool = True):
        super().__init__()
        self.paths = list(paths)
        self.glyphs = G.ASCII if ascii else G.UNICODE
        self.load_opts = dict(load_opts or {})
        unknown = sorted(set(self.load_opts) - set(LOAD_OPTS))
        if unknown:  # an option nobody reads would be dropped without a word
            raise ValueError(f"unknown load options: {', '.join(unknown)}")
        self.run_analysis = analyze
        self.scenes: list[Scene] = []
        self.current = 0
        self.error: str | None = None
        self.last_export: list[str] = []
        # while loading, the explorer's own screen is up (drawn once, meanwhile) with this message in its header:
        # the first frame of the trace then only fills it in, without a switch of screens
        self.loading: str | None = None
        self.cancelled = False
        self.user_picked = False  # until the person picks a gap, the one a tab opens on stays selected
        self._frozen = False  # gc.freeze() done for a large trace (undone on exit)
        self._gc_threshold = gc.get_threshold()
        # set once the first trace's lanes are on screen: the analysis thread starts after that, so it does not
        # hold the GIL while the first frame is drawn
        self._painted = threading.Event()
        # set once the screen is mounted: the load starts before that (on_load), and a small trace can be read
        # before the widgets it fills exist
        self._mounted = threading.Event()
        self.main: MainScreen | None = None  # the explorer's screen, made when the app starts
        self._footer = False  # the footer was mounted (on the first trace's first frame)

    def get_default_screen(self) -> MainScreen:
        self.main = MainScreen(self.glyphs)
        return self.main

    def on_load(self) -> None:
        # the trace is read while the screen is built (before compose and mount): the first frame of a trace
        # in the cache comes ~50 ms sooner
        self.load_traces()

    def screen_mounted(self) -> None:
        """The main screen's widgets exist: the load worker may post what it has."""
        self._mounted.set()

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

    # ================================================================ what the screen asks
    @property
    def scene(self) -> Scene | None:
        """The tab shown."""
        return self.scenes[self.current] if 0 <= self.current < len(self.scenes) else None

    @property
    def tab(self) -> tuple[int, int]:
        """(the tab shown, tabs loaded)."""
        return self.current, len(self.scenes)

    def next_tab(self) -> bool:
        """`t`: the next tab is shown (False: there is no other)."""
        if len(self.scenes) < 2:
            return False
        self.current = (self.current + 1) % len(self.scenes)
        self.main.show_tab()
        return True

    def diff_pair(self):
        """The two parts `D` compares (tui/diffscene.py ``diff_pair``), or None."""
        return diff_pair(self.scenes, self.current)

    def export_findings(self) -> list[str]:
        """`e`: every loaded analysis (Markdown + JSON) and an SVG of the screen; the paths written."""
        from .export import export_all

        analyses = [p.analysis for s in self.scenes for p in s.parts if p.analysis is not None]
        svg = self.export_screenshot()
        self.last_export = export_all(analyses, self.scene.parts[0].path, svg)
        return self.last_export

    @property
    def lanes(self) -> LanesView:
        return self.main.lanes

    # ================================================================ loading (tui/loading.py)
    def load_traces(self) -> None:
        """Read and analyse the traces in a thread worker (tui/loading.py); its results come as messages."""
        loader = Loader(self, self.paths, self.load_opts, self.run_analysis, self._mounted, self._painted)
        self.run_worker(loader.run, thread=True, exclusive=True, group="load")

    @on(Progress)
    def _progress(self, ev: Progress) -> None:
        if self.scenes or self.error is not None:
            return
        self.loading = ev.text
        if self.main is not None and self.main.is_mounted:  # else the screen's on_mount shows it
            self.main.show_loading(ev.text)

    @on(LoadFailed)
    def _fail(self, ev: LoadFailed) -> None:
        # the explorer ends at once and the command line prints the one line (exit 2), as `gapscope report`
        # does: a screen that showed it and waited for q made a script or a typo cost a key press
        self.error = ev.text
        self.loading = None
        self.exit(return_code=2)

    @on(SceneLoaded)
    def _scene_loaded(self, ev: SceneLoaded) -> None:
        if progressive.is_preview(self):
            return self.replace_preview(ev.scene)
        self._add_scene(ev.scene)

    @on(PreviewLoaded)
    def _preview_loaded(self, ev: PreviewLoaded) -> None:
        self.show_preview(ev.scene)

    def show_preview(self, scene: Scene) -> None:
        """A big trace's preview (tui/progress.py) is the first scene, drawn as a trace's first frame is, with
        the bar under the header; Esc still cancels the load."""
        if self.scenes or self.error is not None:
            return
        loading = self.loading
        self._add_scene(scene)
        self.loading = loading or "loading"
        progressive.mount_bar(self, scene)

    def replace_preview(self, scene: Scene) -> None:
        """The full scene takes the preview's place. Where the person moved on the preview, the view and the lane
        cursor stay; else it opens as any trace does (the whole window, then the top action's gap once analysed).
        The provisional gap list comes with it, on the full model (``Loader.carry``), until the full gaps come."""
        old = self.scenes[0]
        if progressive.moved(old):
            scene.view.t0, scene.view.t1, scene.view.cursor = old.view.t0, old.view.t1, old.view.cursor
            scene.display.cursor = min(old.display.cursor, max(len(scene.display.rows()) - 1, 0))
            self.user_picked = True
        if scene.any_analysis:  # the provisional list carried onto the full model (tui/progress.py)
            scene.visited = True  # as on the preview, no provisional gap is opened: the full list's is
            if self.user_picked and old.any_analysis:  # the person's place in it stays
                scene.apply_filter(old.gaps.cause_filter)
                scene.select(old.gaps.selected)
        self.scenes[0] = scene
        self.loading = None
        self._freeze_heap(scene)
        self.main.show_tab()
        self.lanes.sync_rows()
        self.call_after_refresh(self._first_frame_drawn)
        progressive.full_scene_in(self)

    @on(ProvisionalReady)
    def _provisional_ready(self, ev: ProvisionalReady) -> None:
        """The preview's provisional gap list (tui/progress.py), while the preview is the scene shown."""
        self.call_after_refresh(self._painted.set)  # the load thread goes on once it is drawn (Loader.post_drawn)
        if self.scenes and self.scenes[0] is ev.scene:
            progressive.install_provisional(self, ev.scene, ev.state, ev.min_listed, ev.merged)

    @on(ReadProgress)
    def _read_progress(self, ev: ReadProgress) -> None:
        progressive.progress(self, ev.progress)

    def _add_scene(self, scene: Scene) -> None:
        self.scenes.append(scene)
        self._freeze_heap(scene)
        if len(self.scenes) == 1:
            self.loading = None
            self.current = 0
            self.main.show_tab()
            self.lanes.focus()
            self.call_after_refresh(self._first_frame_drawn)
        else:
            self.main.update(keep_msg=True)  # the header counts the tabs

    def _first_frame_drawn(self) -> None:
        first, self._footer = not self._footer, True
        if first and progressive.is_preview(self):
            # a preview's first frame: the load thread (the provisional analysis, then the parse) goes on once the
            # footer, mounted now, is drawn (its keys' styles took 50-100 ms of the screen's thread while the load
            # thread held the GIL in turn, and a key waited 0.2-0.3 s behind both)
            self.call_after_refresh(lambda: self.call_after_refresh(self._painted.set))
        else:
            self._painted.set()  # the analysis may start
        self.main.mount_footer()
        self.refresh_bindings()  # the keys that need a trace are on now

    @on(AnalysisFailed)
    def _analysis_failed(self, ev: AnalysisFailed) -> None:
        progressive.analysis_in(self)
        sc = ev.scene
        listed = sc.parts[ev.part].state.in_progress  # a provisional list, or gaps whose findings failed
        sc.parts[ev.part].state = AnalysisState.failed_with(ev.text)  # as a plain load that failed: no gaps
        if listed:
            sc.gaps.merge(sc.parts)
            sc.apply_filter(None)
            sc.display.invalidate()
        self._freeze_heap(sc)
        if sc is self.scene:
            self.main.scene_changed()

    @on(ProjectionReady)
    def _projection_ready(self, ev: ProjectionReady) -> None:
        """The findings' projected savings arrived (a large trace): the header and the findings view show them."""
        if ev.scene is self.scene:
            self.main.scene_changed()

    @on(GapsReady)
    def _gaps_ready(self, ev: GapsReady) -> None:
        """A large trace's full gaps, classified, while its findings are built (status pending, tui/loadstate.py):
        the gap list, opened as a plain load opens it; the analysis whole follows."""
        self.call_after_refresh(self._painted.set)  # the load thread goes on once it is drawn (Loader.post_drawn)
        if "warnings" not in vars(ev.analysis):  # posted a moment before the analysis set its warnings
            self.set_timer(0.02, lambda: self._gaps_ready(ev))
            return
        if ev.scene.parts[ev.part].state.status in ("ready", "failed"):
            return  # the analysis whole (or its failure) came first
        progressive.gaps_in(self)
        self._analysis_ready(ev, bar=False)

    @on(AnalysisReady)
    def _analysis_ready(self, ev: AnalysisReady, bar: bool = True) -> None:
        """One part's analysis, or (``items``) every rank's of a multi-rank tab at once (analyze_ranks)."""
        self.call_after_refresh(self._painted.set)  # the load thread goes on once it is drawn (Loader.post_drawn)
        sc = ev.scene
        if bar:
            progressive.analysis_in(self)
        try:
            self._install_analysis(sc, ev)
        except Exception as exc:  # noqa: BLE001 - keep the lanes; say what went wrong in one line
            if debugging(exc):
                raise
            for pi in (range(len(sc.parts)) if ev.items is not None else [ev.part]):
                sc.parts[pi].state = AnalysisState.failed_with(failure("showing the analysis", exc))
            sc.gaps.merge(sc.parts)
            sc.apply_filter(None)
            sc.display.invalidate()
            if sc is self.scene:
                self.main.scene_changed()

    def _install_analysis(self, sc: Scene, ev: AnalysisReady) -> None:
        """``ev``'s state (an AnalysisReady's: ready; a GapsReady's: pending) on ``sc``: its gaps listed, the
        selection kept where the person picked one."""
        before = sc.parts[ev.part].state if ev.items is None else None
        keep = sc.gaps.selected_gap
        keep_span = sc.gaps.span(keep) if keep >= 0 else None
        keep_active = sc.active
        # the full analysis after its gaps (GapsReady): the same gaps, listed and opened already
        same = before is not None and before.status == "pending" and before.analysis is ev.analysis
        # a provisional list before it (tui/progress.py), or gaps whose findings were being built: other rows, the
        # same gaps by their times
        carried = not same and before is not None and before.in_progress
        if same:
            # its gaps are those merged from it when they came (GapsReady): the analysis only (the merge again,
            # the same columns, took ~0.2 s of the screen's thread at 1 GB); where a plain load opens the list
            sc.parts[ev.part].state = ev.state
            self._freeze_heap(sc)
            pos = sc.gaps.selected if self.user_picked else sc.opening_position()
            moved = pos == sc.gaps.selected
            if not moved:
                sc.select(pos)
            if sc is self.scene:
                self.main.scene_changed(open_gap=not moved)
                self._freeze_heap(sc)
            return
        if ev.items is not None:
            sc.set_analyses(ev.items)
        else:
            sc.set_analysis(ev.state, ev.min_listed, ev.part, ev.merged)
        self._freeze_heap(sc)
        moved = False
        if keep >= 0 and self.user_picked:
            # parts are analysed in order and appended, so earlier gap ids are unchanged: a later rank's
            # analysis must not move the selection or the view
            g = sc.gaps
            if carried:
                s0, e0, dev = keep_span
                where = np.flatnonzero((g.start[g.order] == s0) & (g.end[g.order] == e0) & (g.device[g.order] == dev))
            else:
                where = np.flatnonzero(g.order == keep)
            if where.size:
                sc.select(int(where[0]))
                sc.active = keep_active
                moved = True
        if sc is self.scene:
            self.main.scene_changed(open_gap=not moved)
            # again: the gap list's and tables' rows were made after the freeze above, and a full collection
            # walked them every ~30 presses of `n` (13-21 ms at 1 GB)
            self._freeze_heap(sc)

    def action_cancel_load(self) -> None:
        self.cancelled = True
        for w in self.workers:
            w.cancel()
        self.exit(return_code=130)
