"""Reading and analysing the traces off the event loop (a thread worker). The worker never touches a widget:
it posts messages (progress, a scene, an analysis, a failure) that the app handles on its own thread.

Every failure is put into words by one function, `failure`: bad input keeps its own message, anything else is
an internal error on one line (type and message), never a traceback. With GAPSCOPE_DEBUG set, internal errors
are raised instead (`debugging`).
"""

from __future__ import annotations

import os
import threading

from textual.message import Message

from ..errors import GapscopeError
from .cut import cut_words
from .loadstate import AnalysisState
from .scene import Scene

#: the load thread waits at most this long for the first frame before it starts the analysis
FIRST_PAINT_WAIT_S = 1.0
#: the load thread waits at most this long for the screen to draw what it just posted (a provisional list, a big
#: trace's gaps or analysis) before it goes on: its next calls hold the GIL for up to ~0.2 s each, and a key
#: pressed meanwhile waited for both
DRAWN_WAIT_S = 0.5
#: a trace read with a preview reports its progress at most this often
PROGRESS_EVERY_S = 0.1

#: the options of tui.trace.load (one trace) and of tui.trace.multi.load_many (several: also "jobs")
READER_OPTS = ("no_cache", "max_size")
#: traces with fewer events get their projection before their analysis is shown (at most ~0.7 s here)
PROJECT_FIRST_EVENTS = 200_000
LOAD_OPTS = (*READER_OPTS, "jobs")


# ================================================================ failures
def failure(doing: str, exc: BaseException, who: str = "") -> str:
    """The one line shown when ``doing`` ("loading", "analysis", "export" ...) failed, for ``who`` (a path,
    "3 traces"). Bad input (GapscopeError) keeps its own message (a reader's names the file and is the one
    `gapscope report` prints); the system's errors (a full disk) say so; out of memory says what to try;
    anything else is an internal error, its type and message on one line."""
    pre = f"{who}: " if who else ""
    if isinstance(exc, GapscopeError):
        return str(exc) if doing == "loading" else f"{pre}{doing} failed: {exc}"
    if isinstance(exc, OSError):  # the disk, the file system: not a bug, the system's words
        return f"{pre}{doing} failed: {cut_words(' '.join(str(exc).split()), 300)}"
    if isinstance(exc, MemoryError):
        return f"{pre}out of memory while {doing} (try --max-size, or a smaller trace or fewer traces)"
    return f"{pre}{doing} failed (internal error {type(exc).__name__}: {cut_words(' '.join(str(exc).split()), 200)})"


def debugging(exc: BaseException) -> bool:
    """GAPSCOPE_DEBUG is set and ``exc`` may be a bug (not bad input, not memory): raise it rather than say it."""
    return bool(os.environ.get("GAPSCOPE_DEBUG")) and not isinstance(exc, (GapscopeError, MemoryError))


# ================================================================ messages (worker -> app)
class Progress(Message):
    """What is being read (posted, not waited for: the load must not wait on the screen)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class ReadProgress(Message):
    """How far the reading of a trace with a preview is (tui.trace.progressive.LoadProgress)."""

    def __init__(self, progress) -> None:
        super().__init__()
        self.progress = progress


class PreviewLoaded(Message):
    """The lanes of the beginning of a big trace, from a partial model, while the rest is read
    (tui/progress.py)."""

    def __init__(self, scene: Scene) -> None:
        super().__init__()
        self.scene = scene


class ProvisionalReady(Message):
    """The preview's provisional numbers (tui/progress.py ``provisional_analysis``), for its scene: ``state``, an
    ``AnalysisState`` of status provisional."""

    def __init__(self, scene: Scene, state: AnalysisState, min_listed: int, merged=None) -> None:
        super().__init__()
        self.scene, self.state, self.min_listed = scene, state, min_listed
        self.merged = merged  # its gaps merged into the scene's list (``Scene.premerge``), in the load thread


class GapsReady(Message):
    """A large trace's full analysis with its gaps classified, its findings still being built (``state``: status
    pending, ``AnalysisState.gaps_of``); ``AnalysisReady`` follows with the analysis whole."""

    def __init__(self, scene: Scene, analysis, min_listed: int, part: int = 0, merged=None) -> None:
        super().__init__()
        self.scene, self.analysis, self.min_listed, self.part, self.items = scene, analysis, min_listed, part, None
        self.state = AnalysisState.gaps_of(analysis)
        self.merged = merged  # its gaps merged with the scene's (``Scene.premerge``), made in the load thread


class LoadFailed(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class SceneLoaded(Message):
    def __init__(self, scene: Scene) -> None:
        super().__init__()
        self.scene = scene


class AnalysisReady(Message):
    """One part's analysis; or, with ``items`` [(part, analysis, min listed gap)], every rank's at once."""

    def __init__(self, scene: Scene, analysis=None, min_listed: int = 0, part: int = 0,
                 items: list | None = None) -> None:
        super().__init__()
        self.scene, self.analysis, self.min_listed, self.part, self.items = scene, analysis, min_listed, part, items
        self.state = AnalysisState.ready_of(analysis) if analysis is not None else None
        self.merged = None


class ProjectionReady(Message):
    """The projected savings of one part's findings and its plan of actions, made after its analysis was shown."""

    def __init__(self, scene: Scene, part: int) -> None:
        super().__init__()
        self.scene, self.part = scene, part


class AnalysisFailed(Message):
    def __init__(self, scene: Scene, part: int, text: str) -> None:
        super().__init__()
        self.scene, self.part, self.text = scene, part, text


# ================================================================ the worker
def group_scenes(models: list) -> list[Scene]:
    """One tab per trace, except that the ranks of one job (distinct rank numbers, two or more) share a tab
    with their lanes grouped by rank."""
    ranks = [m.rank for _, m in models]
    if len(models) > 1 and all(r is not None for r in ranks) and len(set(ranks)) == len(ranks):
        order = sorted(range(len(models)), key=lambda i: ranks[i])
        return [Scene([models[i][0] for i in order], [models[i][1] for i in order])]
    return [Scene(p, m) for p, m in models]


def read_trace(load, path: str, opts: dict, **hooks):
    """Call the trace reader with the app's options (and ``hooks``: the progress and preview callbacks of
    ``tui.trace.load``). No retry without them: a reader that does not take an option (or a TypeError from
    inside the reader) is an error, never a load that silently ignored --max-size or --no-cache."""
    return load(path, **{k: v for k, v in opts.items() if k in READER_OPTS}, **hooks)


def _min_listed(a) -> int:
    """The shortest gap listed, by the configuration of ``a`` (an analysis, or a preview's ``ProvisionalGaps``)."""
    return int(a.config.min_listed_gap_ns)


def analyze_gaps_first(model, classified):
    """``analyze(model)``, with ``classified(analysis)`` called in between, once the gaps are classified and
    before the findings are built (``analyze``'s ``on_classified``; the explorer lists the gaps meanwhile: status
    pending, tui/loadstate.py). The analysis returned is a plain ``analyze``'s
    (test_gaps_first_is_a_plain_analysis)."""
    from ..analysis import analyze

    return analyze(model, on_classified=classified)


class Loader:
    """The body of the app's load worker: read the traces, build their scenes, analyse them; every result is
    posted to ``target`` (the app) once ``mounted`` is set (a small trace can be read before the widgets it
    fills exist). The analysis waits for ``painted`` (the first frame), so it does not hold the GIL meanwhile."""

    def __init__(self, target, paths: list[str], opts: dict, analyse: bool, mounted: threading.Event,
                 painted: threading.Event) -> None:
        self.target, self.paths, self.opts, self.analyse = target, list(paths), dict(opts), analyse
        self.mounted, self.painted = mounted, painted
        self.worker = None
        self.previewed = False  # a preview's lanes were posted (the full scene then takes their place)
        self.provisional_of = None  # the preview's provisional numbers, once posted (carried onto the full model)
        self._last_progress = 0.0

    def post(self, msg: Message) -> None:
        self.mounted.wait()
        self.target.post_message(msg)

    def post_drawn(self, msg: Message) -> None:
        """``post``, then wait (at most DRAWN_WAIT_S) until the screen has handled ``msg`` and drawn the frame
        after it (the app sets ``painted`` then): the parse or the analysis that follows does not hold the GIL
        while the screen's thread installs it."""
        self.painted.clear()
        self.post(msg)
        self.painted.wait(DRAWN_WAIT_S)

    @property
    def cancelled(self) -> bool:
        return self.worker is not None and self.worker.is_cancelled

    def run(self) -> None:
        from textual.worker import get_current_worker

        self.worker = get_current_worker()
        models = self.read_parallel() if len(self.paths) > 1 else self.read_one_by_one()
        if models is None or self.cancelled:
            return
        try:
            scenes = group_scenes(models)
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            if debugging(exc):
                raise
            self.post(LoadFailed(failure("building lanes", exc)))
            return
        if self.previewed:
            self.painted.clear()  # the analysis waits for the full scene's first frame, not the preview's
            if len(scenes) == 1 and self.analyse:
                self.carry(scenes[0])
        for sc in scenes:
            self.post(SceneLoaded(sc))
        if not self.analyse:
            return
        self.painted.wait(FIRST_PAINT_WAIT_S)
        for sc in scenes:
            if self.cancelled:
                return
            if sc.multi:
                self.analyse_ranks(sc)
            else:
                self.analyse_part(sc, 0)

    def read_one_by_one(self) -> list | None:
        """[(path, model)] read one after another in this thread (one trace), or None (failed or cancelled)."""
        from ..trace import load

        models: list = []
        for i, p in enumerate(self.paths):
            if self.cancelled:
                return None
            try:
                size = os.path.getsize(p)
            except OSError:
                size = 0
            self.target.post_message(Progress(f"loading {os.path.basename(p)} ({size / 1e6:.1f} MB)"
                                              f" [{i + 1}/{len(self.paths)}] ... Esc cancels"))
            hooks = {}
            if len(self.paths) == 1:  # one big trace: its beginning is drawn while it is read
                hooks = {"progress": self.progress, "first": lambda: self.show_preview(p)}
            try:
                model = read_trace(load, p, self.opts, **hooks)
            except Exception as exc:  # noqa: BLE001 - a reader bug too: still one line, never a traceback
                if debugging(exc):
                    raise
                self.post(LoadFailed(failure("loading", exc, p)))
                return None
            if self.cancelled:
                return None
            models.append((p, model))
        return models

    def show_preview(self, path: str) -> None:
        """Called by the reader once its worker is started and before this process parses: the lanes of the
        beginning of a big trace (tui.trace.progressive.read_preview), then a wait for their first frame (this
        thread's parse would hold the GIL while the screen is drawn), then (with the analysis on) the gap list of
        the part of the window the preview knows whole, marked provisional (tui/progress.py). No preview for
        a small trace; a preview that fails is no preview (the full load says what is wrong with the trace), a
        provisional analysis that fails is none."""
        if self.cancelled:
            return
        try:
            from ..trace.progressive import read_preview

            pv = read_preview(path)
            if pv is None:
                return
            sc = Scene(path, pv.model)
        except Exception as exc:  # noqa: BLE001
            if debugging(exc):
                raise
            return
        self.previewed = True
        self.post(PreviewLoaded(sc))
        self.painted.wait(FIRST_PAINT_WAIT_S)
        if self.analyse and not self.cancelled:
            self.provisional(sc, pv)

    def provisional(self, sc: Scene, pv) -> None:
        try:
            from .progress import provisional_analysis

            prov = provisional_analysis(pv)
            if prov is None:
                return
            min_listed = _min_listed(prov)
            state = AnalysisState.provisional_of(prov)
        except Exception as exc:  # noqa: BLE001 - no provisional list; the full one comes as without it
            if debugging(exc):
                raise
            return
        merged = self.ready_for_screen(sc, state, min_listed)
        self.provisional_of = (prov, min_listed)
        self.post_drawn(ProvisionalReady(sc, state, min_listed, merged))

    def ready_for_screen(self, sc: Scene, state: AnalysisState, min_listed: int, part: int = 0):
        """What the screen's thread would make first when ``state`` lands on ``sc``, made here instead (it held the
        screen 0.1-0.3 s at 1 GB, keys waiting): its gaps merged into the scene's list (returned, for
        ``Scene.set_analysis``; None when that fails), the detail of the gap the list opens on (the largest: no
        projection yet), the header's verdicts (a provisional state's; a pending one has none yet), and the stack
        panel's scroll bar's module (imported on its first long text). A failure here is the screen's to meet,
        as without it."""
        try:
            import textual.scrollbar  # noqa: F401

            merged = sc.premerge(part, state, min_listed)
            order = merged.gaps.largest_first
            if order.size:
                state.source.gap_detail(int(merged.gaps.row[order[0]]))
            state.verdicts  # noqa: B018
            return merged
        except Exception as exc:  # noqa: BLE001
            if debugging(exc):
                raise
            return None

    def carry(self, sc: Scene) -> None:
        """The preview's provisional gap list onto the full scene (tui/progress.py ``carry_provisional``),
        listed until the full analysis' gaps replace it; none when it fails."""
        if self.provisional_of is None:
            return
        try:
            from .progress import carry_provisional

            prov, min_listed = self.provisional_of
            c = carry_provisional(prov, sc.parts[0].model)
            if c is not None:
                sc.set_analysis(AnalysisState.provisional_of(c), min_listed, 0)
                if sc.gaps.selected_row >= 0:
                    c.gap_detail(sc.gaps.selected_row)  # the stack panel's, mapped here (not on the screen's thread)
        except Exception as exc:  # noqa: BLE001 - the full list comes as without it
            if debugging(exc):
                raise

    def progress(self, p) -> None:
        """A reader's progress report: posted at most every PROGRESS_EVERY_S, and at each change of phase."""
        import time

        now = time.monotonic()
        if not self.previewed or (now - self._last_progress < PROGRESS_EVERY_S and p.phase == "reading"):
            return
        self._last_progress = now
        self.target.post_message(ReadProgress(p))

    def read_parallel(self) -> list | None:
        """[(path, model)] for several traces (the ranks of one job, or tabs), read in parallel processes by
        tui.trace.multi.load_many; or None (failed or cancelled). Escape still leaves at once: the command
        exits without waiting for the readers."""
        try:
            from ..trace.multi import load_many
        except ImportError:  # pragma: no cover - the multi-trace loader is optional
            return self.read_one_by_one()
        total = 0
        for p in self.paths:
            try:
                total += os.path.getsize(p)
            except OSError:
                pass
        n = len(self.paths)
        self.target.post_message(Progress(f"loading {n} traces in parallel ({total / 1e6:.1f} MB,"
                                          f" {os.path.basename(self.paths[0])} ...) ... Esc cancels"))
        try:
            loaded = load_many(list(self.paths), **self.opts)
        except Exception as exc:  # noqa: BLE001 - a reader or pool failure: still one line
            if debugging(exc):
                raise
            self.post(LoadFailed(failure("loading", exc, f"{n} traces")))
            return None
        if self.cancelled:
            return None
        if len(loaded) != n:  # load_many expands folders and patterns; the app's paths are files
            self.post(LoadFailed(f"internal error while loading: {n} traces named, {len(loaded)} read"))
            return None
        return list(zip(self.paths, loaded))

    def analyse_ranks(self, sc: Scene) -> None:
        """The ranks of one job: tui.analysis.ranks.analyze_ranks (collectives matched across ranks, waits, the
        late rank), installed together. When that fails, each rank is analysed on its own and the header
        says why."""
        models = [pt.model for pt in sc.parts]
        try:
            from ..analysis.ranks import analyze_ranks

            out = analyze_ranks(models)
            part_of = {id(pt.model): i for i, pt in enumerate(sc.parts)}
            items = [(part_of[id(a.model)], a, _min_listed(a)) for a in out]
            if sorted(i for i, _, _ in items) != list(range(len(sc.parts))):
                raise ValueError("analyses do not match the ranks")
        except Exception as exc:  # noqa: BLE001 - fall back to one analysis per rank
            if debugging(exc):
                raise
            sc.rank_error = cut_words(f"ranks analysed one by one: {failure('cross-rank analysis', exc)}", 300)
            for pi in range(len(sc.parts)):
                if self.cancelled:
                    return
                self.analyse_part(sc, pi)
            return
        if not self.cancelled:
            self.post(AnalysisReady(sc, items=items))

    def analyse_part(self, sc: Scene, pi: int = 0) -> None:
        """One trace's analysis (tui.analysis.analyze); the lanes stay usable when it fails."""
        model = sc.parts[pi].model
        # the projected savings and the plan (analysis/replay/__init__.py, analysis/plan.py: 43 ms to 4 s): before
        # the analysis is shown for a trace small enough, so the header and the plan come up whole; after it
        # (ProjectionReady) else, and there the gaps are listed as soon as they are classified, before the findings
        # (1 GB: ~2.5 of ~8 s)
        small = model.n < PROJECT_FIRST_EVENTS
        try:
            from ..analysis import analyze

            if small or sc.multi:
                a = analyze(model)
            else:
                a = analyze_gaps_first(model, lambda c: self.gaps_ready(sc, pi, c))
            min_listed = _min_listed(a)
        except Exception as exc:  # noqa: BLE001
            if debugging(exc):
                raise
            self.post(AnalysisFailed(sc, pi, failure("analysis", exc)))
            return
        if small:
            self.project(a)
        else:
            try:
                a.verdicts  # noqa: B018 - the header's (~0.1 s at 1 GB), here rather than on the screen's thread
            except Exception as exc:  # noqa: BLE001 - the header asks again and says what it can
                if debugging(exc):
                    raise
        if small:
            self.post(AnalysisReady(sc, a, min_listed, pi))
        else:
            self.post_drawn(AnalysisReady(sc, a, min_listed, pi))
        if not small and not self.cancelled:
            self.project(a)
            self.post(ProjectionReady(sc, pi))

    def gaps_ready(self, sc: Scene, pi: int, a) -> None:
        """The gaps of a large trace's analysis ``a``, classified (``analyze_gaps_first``), its findings still to
        be built: posted (status pending) with their merge into the scene's gap list made here, not on the screen's
        thread (180k gaps at 1 GB: ``ready_for_screen``)."""
        min_listed = _min_listed(a)
        msg = GapsReady(sc, a, min_listed, pi)
        msg.merged = self.ready_for_screen(sc, msg.state, min_listed, part=pi)
        self.post_drawn(msg)

    def project(self, a) -> None:
        """The projection and the plan of actions made from it (analysis/plan.py), both cached properties, made here
        off the UI thread: the header and the findings view show the plan once made (``plan_if_ready``). When
        either fails the explorer shows the findings without a plan."""
        try:
            a.projection  # noqa: B018
            a.plan  # noqa: B018
        except Exception as exc:  # noqa: BLE001 - the findings stay; only the plan and its savings are missing
            if debugging(exc):
                raise
            if a.projection_if_ready is None:  # the projection failed (a plan that failed is simply not made)
                a.drop_projection()
