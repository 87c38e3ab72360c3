"""The progressive first screen of a big trace: the preview's lanes (gapscope/trace/progressive.py) while the trace is
read, a bar under the header with the bytes and events read so far, then the full scene in the preview's place
(``GapscopeApp.show_preview`` / ``replace_preview``; the bar's helpers are here).

The preview is a Scene over a partial model (``TraceModel.partial``): lanes and keys, and a provisional gap list.
``analyze`` refuses its model; ``provisional_analysis`` here is the one way to analyse it, for the explorer only
(never the report, never an export: the export key is off on a preview): a plain ``Analysis`` of the part of the
window the preview knows whole, the span before ``Preview.known_end_ns`` (gapscope/trace/progressive.py), cut at
the last GPU op that ends before it, so that every gap it lists lies inside that span, carried as data
(tui/loadstate.py ``ProvisionalGaps``) in the part's state, status provisional. The header, the gap list's title
and the bar say "provisional". The full model comes from the one load path, as without a preview; the provisional
list comes onto it (``carry_provisional``: its events mapped to the full model's, ``EventMap``) until the full
analysis replaces it, whose gaps are shown first on a large trace (status pending, while its findings are built:
tui/loading.py ``analyze_gaps_first``): the final numbers are a plain load's.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
from rich.text import Text
from textual import events
from textual.widgets import Static

from ..analysis import Analysis
from ..trace.model import Kind, TrackKind
from ..trace.progressive import LoadProgress, Preview, touch
from .loadstate import ProvisionalGaps
from .timefmt import fmt_dur

class MarksUse:
    """The app's part in the reader's pieces (a mix-in of GapscopeApp, which sees every key and mouse event before
    its widgets): each one tells the reader that the screen is in use, and a trace still being read is parsed in
    small pieces for a while, shorter holds of the GIL (gapscope/trace/progressive.py ``touch``)."""

    async def on_event(self, event) -> None:
        if isinstance(event, (events.Key, events.MouseEvent)):
            touch()
        await super().on_event(event)


#: the GPU work that bounds a provisional window (the kinds the gaps are made from)
_WORK = (int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET))


def provisional_window(model, known_end_ns: int):
    """The window ``analyze`` would take on ``model`` (the measured steps, else the whole trace), each device's
    part cut at the end of its last GPU op that ends by ``known_end_ns`` (a gap after it may end past what is
    known), the CPU side at the latest such end; None when no device has such an op."""
    from ..analysis.window import compute_window

    w = compute_window(model, "steps")
    ts, end = model.ts_ns, model.ts_ns + model.dur_ns
    work = np.isin(model.kind, np.array(_WORK, np.uint8))
    dev_of = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in model.tracks] + [-1], np.int64)
    dev = dev_of[model.track]
    device = {}
    for d, (w0, w1) in w.device.items():
        sel = work & (dev == d) & (end <= min(w1, known_end_ns)) & (end > w0)
        if sel.any():
            device[d] = (w0, int(end[sel].max()))
    if not device:
        return None
    last = max(e for _, e in device.values())
    if w.clipped:
        cs, ce = w.cpu_start, np.minimum(w.cpu_end, last)
        keep = cs < ce
        cs, ce = cs[keep], ce[keep]
    else:  # no steps: the whole trace up to the known end, as a clipped window (so the devices' cut holds)
        cs = np.array([min(int(ts.min()), min(s for s, _ in device.values()))], np.int64)
        ce = np.array([last], np.int64)
    return replace(w, mode="steps", device=device, cpu_start=cs, cpu_end=ce)


def provisional_analysis(pv: Preview) -> ProvisionalGaps | None:
    """The preview's provisional numbers (module docstring): a plain ``Analysis`` of its model over the provisional
    window, carried as data (``ProvisionalGaps``) with the note that says so; or None: no bound known, or no GPU
    op inside it."""
    if pv.known_end_ns is None:
        return None
    w = provisional_window(pv.model, pv.known_end_ns)
    if w is None:
        return None
    a = Analysis(pv.model, None, w)
    return ProvisionalGaps(a, pv.model, a.gaps, provisional_note(a.window_ns, pv.decoded, pv.size))


def provisional_note(window_ns: int, decoded: int, size: int) -> str:
    """``provisional: first 27.6 ms of the window, 0.4% read``."""
    pct = decoded * 100 / max(size, 1)
    return f"provisional: first {fmt_dur(int(window_ns))} of the window, {pct:.1f}% read"


# ====================================================================== the provisional list on the full model
def _track_key(t) -> tuple:
    return (t.kind.value, t.pid, t.tid, t.device, t.stream)


class EventMap:
    """The preview's events and tracks in the full model (each of the preview's events is one of the full
    model's: ``test_progressive_load_ends_with_the_full_model``): the same track (kind, pid, tid, device,
    stream), start, duration, kind and name. -1 where there is none (never, for a preview of the same file)."""

    def __init__(self, src, dst) -> None:
        self.src, self.dst = src, dst
        key = {_track_key(t): i for i, t in enumerate(dst.tracks)}
        # (index -1: the table's "none" maps to -1)
        self._track = np.array([key.get(_track_key(t), -1) for t in src.tracks] + [-1], np.int64)
        tr = np.asarray(dst.track)
        self._by_track = bool(tr.size < 2 or (tr[1:] >= tr[:-1]).all())  # the builder's order: (track, ts)
        # each track's events [bounds[t], bounds[t + 1]), found once (a search per event on the 3.3M-row track
        # column, an int32 one searched with an int, copied it each time: 19 s for 653 gaps at 1 GB)
        self._bounds = np.searchsorted(tr, np.arange(len(dst.tracks) + 1, dtype=tr.dtype)) if self._by_track else None

    def tracks(self, ids) -> np.ndarray:
        ids = np.asarray(ids, np.int64)
        return self._track[np.where((ids >= 0) & (ids < len(self.src.tracks)), ids, -1)]

    def events(self, ids) -> np.ndarray:
        ids = np.asarray(ids, np.int64)
        out = np.full(ids.shape, -1, np.int64)
        s, d = self.src, self.dst
        for k, e in enumerate(ids.tolist()):
            if 0 <= e < s.n:
                out[k] = self.event(e)
        return out

    def event(self, e: int) -> int:
        s, d = self.src, self.dst
        if not 0 <= e < s.n:
            return -1
        tr = int(self._track[int(s.track[e])])
        if tr < 0:
            return -1
        ts = int(s.ts_ns[e])
        if self._by_track:
            lo, hi = int(self._bounds[tr]), int(self._bounds[tr + 1])
            col = d.ts_ns[lo:hi]
            at = np.int64(ts)
            cand = range(lo + int(np.searchsorted(col, at, "left")), lo + int(np.searchsorted(col, at, "right")))
        else:  # pragma: no cover - every model the builder makes is in (track, ts) order
            cand = np.flatnonzero((d.track == tr) & (d.ts_ns == ts)).tolist()
        name, dur, kind = s.names[int(s.name_id[e])], int(s.dur_ns[e]), int(s.kind[e])
        for j in cand:
            if int(d.dur_ns[j]) == dur and int(d.kind[j]) == kind and d.names[int(d.name_id[j])] == name:
                return int(j)
        return -1


def _mapped_detail(emap: EventMap, det):
    """A gap's detail of the preview's analysis, its events and thread the full model's (``emap``)."""
    from dataclasses import replace as dc_replace

    def frames(fs):
        return [dc_replace(f, event=emap.event(int(f.event))) if f.event is not None and int(f.event) >= 0 else f
                for f in fs]

    def extra(x):
        if isinstance(x, dict):
            return {k: (emap.event(int(v)) if k == "event" and isinstance(v, (int, np.integer)) else extra(v))
                    for k, v in x.items()}
        return x

    return dc_replace(det, stack=frames(det.stack), launch_stack=frames(det.launch_stack),
                      idle_stack=frames(det.idle_stack), extra=extra(det.extra),
                      thread_track=int(emap.tracks([det.thread_track])[0]))


def carry_provisional(prov: ProvisionalGaps, model) -> ProvisionalGaps | None:
    """The preview's provisional numbers ``prov`` on the full ``model``, from the moment the full model takes the
    preview's place until the full analysis' gaps are in: the same gaps (times, causes, order), their event and
    thread columns mapped to the full model's (``EventMap``), so that the gap list, its detail and the lanes it
    points at name the full model's events, never the preview's indices. No stack index, no findings, no
    projection nor plan; marked provisional as on the preview. None when a gap's events are not all found in
    ``model`` (a preview of another file: nothing is carried rather than a wrong event)."""
    import copy
    from functools import partial

    src = prov.source.gaps
    emap = EventMap(prov.source.model, model)
    g = copy.copy(src)
    g.next_idx = emap.events(src.next_idx)
    g.launch_idx = emap.events(src.launch_idx)
    g.thread = emap.tracks(src.thread)
    lost = ((src.next_idx >= 0) & (g.next_idx < 0)) | ((src.launch_idx >= 0) & (g.launch_idx < 0)) | \
        ((src.thread >= 0) & (g.thread < 0))
    if lost.any():
        return None
    return ProvisionalGaps(prov.source, model, g, prov.provisional_note, partial(_mapped_detail, emap))


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 10e6 else f"{n / 1e6:.1f} MB"


def _count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n:,}"


def bar_text(p: LoadProgress | None, name: str, width: int, ascii: bool = False, phase: str | None = None,
             note: str = "") -> str:
    """The bar's line: what is being done, a bar of ``done``/``total``, bytes and events (and ``note``: the
    provisional gap list's). A pure function of its arguments (tests)."""
    more = f"; gap list {note}" if note else ""
    if phase == "analysing":
        return f"finding gaps in {name} ...{more} (the gap list and findings come when they are in)"
    if phase == "findings":
        return f"building the findings of {name} ... (the gap list is in; the findings and their savings come next)"
    if p is None:
        return f"loading {name} ...{more} (Esc cancels)"
    if p.phase == "building":
        return f"building the model of {name}: sorting and linking {_count(p.events)} events ...{more}"
    done, total, events = p.done, p.total, p.events
    frac = done / total if total > 0 else 0.0
    tail = f" {_mb(done)} of {_mb(total)}, {_count(events)} events{more}  (Esc cancels)"
    head = f"loading {name} "
    cells = max(10, min(40, width - len(head) - len(tail) - 2))
    full = int(round(frac * cells))
    on, off = ("#", "-") if ascii else ("━", "─")
    return head + on * full + off * (cells - full) + tail


class LoadBar(Static):
    """One line under the header while a trace with a preview is read and analysed."""

    DEFAULT_CSS = """
    LoadBar { height: 1; background: $panel; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, name: str, ascii: bool = False) -> None:
        super().__init__(id="loadbar", markup=False)
        self.trace_name = name
        self.ascii = ascii
        self.last: LoadProgress | None = None
        self.phase: str | None = "reading"
        self.note = ""  # the provisional gap list's, once it is in

    def on_mount(self) -> None:
        self.show()

    def set_progress(self, p: LoadProgress) -> None:
        self.last = p
        self.show()

    def analysing(self) -> None:
        self.phase = "analysing"
        self.show()

    def findings(self) -> None:
        self.phase = "findings"
        self.note = ""
        self.show()

    def show(self) -> None:
        width = self.size.width or (self.app.size.width if self.app is not None else 80)
        phase = self.phase if self.phase in ("analysing", "findings") else None
        t = bar_text(self.last, self.trace_name, width, self.ascii, phase, self.note)
        self.update(Text(t, no_wrap=True), layout=False)


# ====================================================================== the app's side (hooks in app.py)
def bar(app) -> LoadBar | None:
    main = getattr(app, "main", None)
    if main is None or not main.is_mounted:
        return None
    q = main.query(LoadBar)
    return q.first() if q else None


def progress(app, p: LoadProgress) -> None:
    b = bar(app)
    if b is not None:
        b.set_progress(p)


def is_preview(app) -> bool:
    return bool(app.scenes) and any(pt.model.partial for pt in app.scenes[0].parts)


def install_provisional(app, scene, state, min_listed: int, merged=None) -> None:
    """The provisional state (``AnalysisState``, status provisional) on the preview's scene: its gap list (the
    person's view and lane stay where they are: no gap is opened), the header and the bar say provisional.
    ``merged``: its gaps merged in the load thread (``Scene.premerge``)."""
    scene.set_analysis(state, min_listed, 0, merged)
    app.main.scene_changed()
    b = bar(app)
    if b is not None:
        b.note = state.provisional_note
        b.show()


def mount_bar(app, scene) -> None:
    """The bar under the header, for the trace whose preview is shown."""
    if bar(app) is None:
        app.main.mount(LoadBar(os.path.basename(scene.path), app.glyphs.ascii), after="#header")


def moved(old) -> bool:
    """Whether the person moved on the preview's scene (pan, zoom, cursor, lane) since it was shown."""
    from .view import View

    v, fresh = old.view, View(old.view.lo, old.view.hi)
    return (v.t0, v.t1, v.cursor) != (fresh.t0, fresh.t1, fresh.cursor) or old.display.cursor != 0


def full_scene_in(app) -> None:
    """The full scene took the preview's place: the bar says the gaps are being found (or goes, without an
    analysis)."""
    b = bar(app)
    if b is not None:
        if app.run_analysis:
            b.note = app.scene.state.provisional_note or ""  # the carried list's
            b.analysing()
        else:
            b.remove()


def gaps_in(app) -> None:
    """The full analysis' gaps are in, its findings being built: the bar says so."""
    b = bar(app)
    if b is not None:
        b.findings()


def analysis_in(app) -> None:
    """The analysis (or its failure) is in: the bar goes."""
    b = bar(app)
    if b is not None:
        b.remove()
