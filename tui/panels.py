"""Text of the header, the stack panel and the detail views, built as rich Text (never markup)."""

from __future__ import annotations

import weakref
from collections import OrderedDict
from functools import lru_cache

import numpy as np
from rich.control import strip_control_codes
from rich.text import Span, Text

from ..trace.model import Kind
from . import glyphs as G
from ..analysis.names import display_frame
from .cut import fit_lines
from .safe import shown
from .plantext import action_pieces, alone, how, need_pieces, pct
from .scene import Scene, device_label
from .textview import TextView, lru_get
from .timefmt import fmt_dur

KIND_LABEL = {
    Kind.KERNEL: "kernel", Kind.MEMCPY: "copy", Kind.MEMSET: "memset", Kind.CPU_OP: "op", Kind.PYTHON: "python",
    Kind.RUNTIME: "runtime", Kind.DRIVER: "driver", Kind.ANNOTATION: "range", Kind.GPU_ANNOTATION: "gpu range",
    Kind.SYNC: "sync", Kind.OVERHEAD: "profiler", Kind.INSTANT: "instant", Kind.OTHER: "other",
}
FRAME_TAG = {"python": "py ", "annotation": "rng", "op": "op ", "runtime": "rt ", "sync": "syn"}
#: frame lines kept (``_frame_pieces``)
FRAME_CACHE = 2048
#: the header's most lines (gapscope.tcss ``#header`` max-height): title, window, the plan's first action and what
#: it needs first, the projection, two warnings
HEADER_LINES = 7


class StackPanel(TextView):
    """The stack of the selected gap (Line API: a gap jump redraws this panel, no screen layout), or the detail of
    a search's match (``match_text``)."""

    def show(self, text: Text, heading: str) -> None:
        """``text`` under ``heading`` ("stack": the gap's; "match": a search's match)."""
        if heading != self.heading:
            self.heading = heading
            self._refresh_heading()
        self.set_text(text)


class T:
    """Small helper: append plain strings (made safe) with a style.

    The pieces are gathered and go into ``text`` in one append when it is read: what a ``Text.append`` per
    piece makes (the same plain text and spans, in order), without its work per piece (a stack panel is ~150
    pieces, built on every gap jump)."""

    def __init__(self, ascii: bool):
        self.ascii = ascii
        self._text = Text(no_wrap=False, overflow="fold")
        self.pieces: list[tuple[str, str | None]] = []  # (text, style) gathered since ``text`` was last read

    @property
    def text(self) -> Text:
        if self.pieces:
            # what Text.append does per piece (the pieces are stripped of control codes already, by ``raw``),
            # done once: a new Text of the joined pieces would strip the whole of it again, and str.translate
            # leaves its fast path at the first non-ASCII character (µs, →, the bars): ~1.5 ms a stack panel
            t = self._text
            n = len(t)
            for s, style in self.pieces:
                if style:
                    t._spans.append(Span(n, n + len(s), style))
                n += len(s)
            t._text.append("".join(s for s, _ in self.pieces))
            t._length = n
            self.pieces = []
        return self._text

    @text.setter
    def text(self, text: Text) -> None:
        self.pieces = []
        self._text = text

    def s(self, s: str) -> str:
        return shown(s, self.ascii)

    def add(self, s, style: str | None = None) -> "T":
        return self.raw(self.s(str(s)), style)

    def raw(self, s: str, style: str | None = None) -> "T":
        """``s`` as it is (made safe already), as ``Text.append`` adds it."""
        s = strip_control_codes(s)
        if s:
            self.pieces.append((s, style))
        return self

    def nl(self) -> "T":
        return self.raw("\n")

    def d(self, ns) -> str:
        return fmt_dur(int(ns), ascii=self.ascii)


def torch_version(model) -> str | None:
    gm = model.gapscope_meta or {}
    for k in ("torch", "torch_version", "torchVersion"):
        v = gm.get(k)
        if isinstance(v, str):
            return v
    v = model.metadata.get("torch_version") or model.metadata.get("pytorch_version")
    return v if isinstance(v, str) else None


#: per analysis: (its plan, its findings, the gap rows of its planned findings and the action of each), made once
#: per plan: the stack panel asks on every gap jump which action fixes the gap (``gap_action``)
_RANKED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _planned_rows(a, plan) -> tuple[np.ndarray, np.ndarray]:
    try:
        hit = _RANKED.get(a)
    except TypeError:  # an analysis that takes no weak reference: made every time
        hit = None
    if hit is not None and hit[0] is plan and hit[1] is a.findings:
        return hit[2], hit[3]
    rows, ranks = [], []
    for f in a.findings:
        k = plan.rank_of.get(f.id)
        r = np.asarray(f.gap_rows, np.int64)
        if k is not None and r.size:
            rows.append(r)
            ranks.append(np.full(r.size, k, np.int64))
    made = (np.concatenate(rows) if rows else np.zeros(0, np.int64),
            np.concatenate(ranks) if ranks else np.zeros(0, np.int64))
    try:
        _RANKED[a] = (plan, a.findings, *made)
    except TypeError:
        pass
    return made


def gap_action(state, row: int):
    """The action that fixes gap ``row`` of a part (``state``: its ``AnalysisState``; the first in plan order of
    those whose findings hold it: ``rank_of``), or None (no plan yet, or the gap is no planned finding's)."""
    plan = state.plan
    if plan is None or not plan.actions:
        return None
    rows, ranks = _planned_rows(state.final, plan)
    hit = ranks[rows == int(row)]
    return plan.action(int(hit.min())) if hit.size else None


def gap_action_line(t: "T", state, row: int) -> bool:
    """"action 2: −45.9% Fuse `attn` into one GPU call ..." for the action that fixes gap ``row`` (the plan's
    numbering, ``Plan.rank_of``), once the loader made the plan; False (nothing written) for a gap no action fixes."""
    x = gap_action(state, row)
    if x is None:
        return False
    t.add(f"action {x.rank}: ", "bold").add(pct(x.saving_pct), "bold green").add(" ")
    for s, style in action_pieces(x.change):
        t.add(s, style)
    if x.inside is not None:
        t.add(f" (inside action {x.inside})", "dim")
    t.nl()
    return True


def top_action_lines(plan, two_lines: bool, narrow: bool = False) -> list[list[tuple[str, str | None]]]:
    """The header's first action of the plan (``Plan.top``, the report's action 1), as lines of (text, style)
    pieces: its number and saving first, so that a line cut at 80 columns keeps them, then the change, verb
    first ("1. −77.9% un-profiled: Capture the step as a CUDA graph (...)"). What it needs first (the syncs a CUDA
    graph cannot capture) on a second line when ``two_lines``, else after it, its figure first. [] before the
    plan (``plan`` None), or when no action buys 1% of the step. ``narrow`` (under 100 columns): the action's
    headline instead, a few words verb first with where it goes and what a CUDA graph needs first
    ("1. −86.0%: CUDA-graph the step, after the syncs at hf_clients2.py:129"), one line."""
    x = plan.top if plan is not None else None
    if x is None:
        return []
    if narrow and x.headline:
        return [[(f"{x.rank}. ", "bold"), (pct(x.saving_pct), "bold green"), (": ", None),
                 *action_pieces(x.headline)]]
    first = [(f"{x.rank}. ", "bold"), (pct(x.saving_pct), "bold green"), (f" {how(plan)}: ", None),
             *action_pieces(x.change)]
    if not x.needs:
        return [first]
    n = x.needs[0]
    more = [(f" (+{len(x.needs) - 1} more)", "dim")] if len(x.needs) > 1 else []
    if two_lines:
        return [first, [("   ", None), *need_pieces(n), *more]]
    return [first + [("; first", "bold"), (f" ({alone(n)}): ", None), *action_pieces(n.change), *more]]


def header_text(scene: Scene, index: int, count: int, glyphs: G.Glyphs, width: int | None = None) -> Text:
    t = T(glyphs.ascii)
    t.text = Text(no_wrap=True, overflow="crop" if glyphs.ascii else "ellipsis")
    m = scene.model
    sep = f" {glyphs.sep} "
    # a narrow terminal: no program name, the GPU without its vendor, torch without its build suffix
    narrow = width is not None and width < 100
    if not narrow:
        t.add("gapscope", "bold").add(sep)
    t.add(scene.title(), "bold")
    warns = header_warnings(scene, narrow=narrow)
    if count > 1:
        t.add(f" [{index + 1}/{count}]")
    a = scene.analysis
    devs = m.gpu_devices()
    if devs:
        d = devs[0]
        lab = device_label(m, d)
        if narrow:
            lab = lab.replace(" NVIDIA ", " ").replace(" AMD ", " ")
        t.add(sep).add(lab + (f" +{len(devs) - 1}" if len(devs) > 1 else ""))
    if m.rank is not None:
        t.add(sep).add(f"rank {m.rank}")
    tv = torch_version(m)
    if tv:  # nothing when the trace does not say (no "torch ?")
        t.add(sep).add(f"torch {tv.split('+')[0] if narrow else tv}")
    t.nl()
    sep0 = ""
    if a is not None and a.devices:
        ds = a.devices[0]
        note = scene.state.provisional_note  # a preview's (tui/progress.py): numbers of a part only
        if note:
            t.add(note, "bold black on yellow").add(sep)
        t.add(f"window {t.d(ds.window_ns)}")
        idle = int(ds.idle_ns) * 100 / max(int(ds.window_ns), 1)
        t.add(sep).add("GPU idle ").add(f"{idle:.1f}%", "bold yellow" if idle >= 20 else "bold")
        v = verdict_of(scene)
        if v is not None:
            t.add(sep).add(v.kind, _VERDICT_STYLE.get(v.kind, "bold"))
        top = biggest_cause(scene)
        if top:
            t.add(sep).add("biggest cause: ").add(top, "bold " + G.CAUSE_COLOURS.get(top.split(" ")[0], "red"))
        if v is not None and v.graph_text():
            t.add(sep).add(v.graph_text())
        pj = scene.state.projection  # the loader makes it and the plan (tui/loading.py); a line of its own where wide
        head = not narrow and pj is not None and bool(pj.headline())
        # what to do first, at every width; what it needs first on a line of its own where the header has one left
        plan = scene.state.plan
        lines = top_action_lines(plan, not narrow, narrow)
        if len(lines) == 2 and 2 + 2 + head + len(warns) > HEADER_LINES:
            lines = top_action_lines(plan, False, narrow)
        for line in lines:
            t.nl()
            for s, style in line:
                t.add(s, style)
        if head:
            t.nl()
            t.add("projection: " + pj.headline(), "bold" if pj.calibrated else "")
    else:
        t.add(f"window {t.d(scene.view.hi - scene.view.lo)}")
        if a is not None:
            t.add(sep).add("no GPU work in this trace: nothing to explain", "italic")
        else:
            t.add(sep).add("reading the trace: the beginning so far" if m.partial else
                           "analysing..." if scene.analysis_error is None else "no analysis", "italic")
    if scene.multi:
        line = ranks_line(scene, glyphs, width)
        if line:
            t.nl()
            for seg, style in line:
                t.add(seg, style)
    # the lines left for the warnings (the header's max-height): those that do not fit are counted on the last
    # line kept, never dropped unsaid; the distortion's come first (``header_warnings``) and stay with the figures
    room = max(HEADER_LINES - (t.text.plain.count("\n") + 1), 1)
    if len(warns) > room and room == 1:
        warns = [f"{warns[0]} (+{len(warns) - 1} more warnings)"]
    elif len(warns) > room:
        warns = warns[:room - 1] + [f"+{len(warns) - room + 1} more warnings (gapscope info lists the trace's)"]
    for w in warns:
        t.nl().add(f"{glyphs.warn} {w}", "bold black on yellow")
    return fit_lines(t.text, width, glyphs.ascii)


_VERDICT_STYLE = {"gpu-bound": "bold green", "host-bound": "bold yellow", "mixed": "bold"}


def verdict_of(scene: Scene):
    """The first device's verdict (gpu-bound, host-bound, mixed), or None before the analysis."""
    a = scene.analysis
    vs = scene.state.verdicts if a is not None and a.devices else None
    return vs[0] if vs else None


def biggest_cause(scene: Scene) -> str | None:
    a = scene.analysis
    if a is None or not len(a.gaps):
        return None
    from ..analysis import CAUSES

    n = len(a.gaps)
    tot = np.bincount(np.asarray(a.gaps.cause[:n], dtype=np.int64), weights=np.asarray(a.gaps.dur_ns[:n]),
                      minlength=len(CAUSES))
    if tot.sum() <= 0:
        return None
    i = int(np.argmax(tot))
    return f"{CAUSES[i]} ({tot[i] / tot.sum() * 100:.0f}% of idle)"


def _rank_segment(e: dict, compact: bool, d) -> list[tuple[str, str | None]]:
    """One rank of the header's ranks line: [(text, style)]."""
    r = e["rank"]
    if not e["analysed"]:
        return [(f"r{r} ..." if compact else f"rank {r}: analysing...", "italic")]
    idle = "no GPU" if e["idle_pct"] is None else f"{e['idle_pct']:.1f}% idle"
    out: list[tuple[str, str | None]] = [(f"r{r} " if compact else f"rank {r}: ", "bold"), (idle, None)]
    if e["wait_ns"] > 0 and e["wait_for"] is not None:
        w = (f"{d(e['wait_ns'])} wait r{e['wait_for']}" if compact
             else f"{d(e['wait_ns'])} waiting for rank {e['wait_for']}")
        if e["skew"]:
            w += " (skew)" if compact else " (start-up skew)"
        out += [(", ", None), (w, "yellow" if e["skew"] else "bold yellow")]
    if e["late"] is not None:
        n, of, fn = e["late"]
        if compact:
            out += [(", ", None), (f"late {n}/{of}", "bold red")]
        else:
            out += [(", ", None), (f"late: arrived last {n}/{of}" + (f", after `{fn}`" if fn else ""), "bold red")]
    return out


def ranks_line(scene: Scene, glyphs: G.Glyphs, width: int | None = None) -> list[tuple[str, str | None]]:
    """A multi-rank tab's one-line summary per rank: idle %, collective wait and for whom, the late rank, fitted
    to ``width``: full words, else short ones, else the ranks that wait or are late first and ``+N more``."""
    try:
        ents = scene.rank_summary()
    except Exception:  # noqa: BLE001 - the header must draw whatever the analysis holds
        return []
    if not ents or not any(e["analysed"] for e in ents):
        return []
    ascii = glyphs.ascii

    def d(ns):
        return fmt_dur(int(ns), ascii=ascii)

    sep = (f" {glyphs.sep} ", "dim")
    room = max(int(width) - 1, 20) if width else None

    def build(chosen, compact, more=0):
        out: list = []
        for e in chosen:
            if out:
                out.append(sep)
            out += _rank_segment(e, compact, d)
        if more:
            out.append((f"  +{more} more rank{'s' if more > 1 else ''}", "dim"))
        return out

    def size(line):
        return sum(len(s) for s, _ in line)

    for compact in (False, True):
        line = build(ents, compact)
        if room is None or size(line) <= room:
            return line
    # the ranks that matter first, and listed first: the late ones (named late, or the rank the others wait
    # for: 8 DLRM ranks hid rank 5, whom five ranks waited for, behind "+3 more" as it waits for nobody), then
    # the longest waits
    waited = [sum(1 for e in ents if e["wait_ns"] > 0 and e["wait_for"] == x["rank"]) for x in ents]
    pri = sorted(range(len(ents)), key=lambda i: (ents[i]["late"] is None and not waited[i], -waited[i],
                                                  -ents[i]["wait_ns"], i))
    keep: list[int] = []
    for i in pri:
        trial = keep + [i]
        if size(build([ents[j] for j in trial], True, len(ents) - len(trial))) > room:
            break
        keep = trial
    return build([ents[j] for j in keep], True, len(ents) - len(keep))


def header_warnings(scene: Scene, narrow: bool = False) -> list[str]:
    """The header's warnings, the one that qualifies the idle figure above them first (the profiler's distortion:
    the header keeps it while it shows the figure, ``header_text``), then the ranks', the loader's, the stacks'."""
    out = distortion_warnings(scene, narrow)
    # ranks of one job: what the clock check said, and a cross-rank analysis that failed
    cw = list(getattr(scene, "clock_warnings", None) or [])
    if cw:
        out.append(cw[0] + (f" (+{len(cw) - 1} more clock warnings)" if len(cw) > 1 else ""))
    if getattr(scene, "rank_error", None):
        out.append(scene.rank_error)
    m = scene.model
    # what the loader found odd (cut off, repaired, skipped): the first, and how many more `gapscope info` lists
    loaded = [w for part in (getattr(scene, "parts", None) or [scene]) for w in (part.model.warnings or [])]
    if loaded:
        more = f" (+{len(loaded) - 1} more: gapscope info)" if len(loaded) > 1 else ""
        out.append(f"trace: {loaded[0]}{more}")
    if not np.any(m.kind == Kind.PYTHON):
        out.append("no Python stacks in this trace (record with with_stack=True to see file:line)")
    return out


def distortion_warnings(scene: Scene, narrow: bool = False) -> list[str]:
    """How much the profiler slowed the capture, and how sure that figure is ("profiler distortion", the one
    word for it on every screen and in the README)."""
    out: list[str] = []
    m = scene.model
    a = scene.analysis
    # the diagnosis' verdict (gapscope/analysis/diagnosis.py): the analysis', or the metadata's by the same rule while
    # the analysis runs; the figures, not the warning's sentence
    from ..analysis.diagnosis import model_distortion

    dv = model_distortion(m, a)
    if dv is not None:
        noisy = dv.noisy  # the capture's un-profiled times spread widely
        vary = f"vary {noisy.figures['vary']:.1f}x" if noisy is not None else ""
        if dv.unknown:
            # the profiler only adds time: an un-profiled time longer than the profiled one was not measured under
            # the recording's conditions (a loaded node); no distortion can be read from it (the report says so)
            out.append(f"un-profiled slower than profiled: distortion unknown" + (f" (times {vary})" if noisy else ""))
        elif narrow and noisy is not None:  # one line at 80 columns
            out.append(f"profiler distortion {dv.ratio:.2f}x uncertain: un-profiled times {vary}")
        else:
            if dv.large:
                out.append(f"profiler distortion {dv.ratio:.2f}x: CPU-side causes look bigger" if narrow else
                           f"profiler distortion {dv.ratio:.2f}x (profiled / un-profiled time): "
                           "CPU-side causes look bigger than they are")
            if noisy is not None:
                out.append(noisy.text)
    return out


def frame_line(t: T, f, indent: int) -> None:
    t.pieces.extend(_frame_pieces(getattr(f, "kind", ""), f.name, getattr(f, "file", None),
                                  getattr(f, "line", None), indent, t.ascii))


@lru_cache(maxsize=FRAME_CACHE)
def _frame_pieces(kind: str, name: str, file, line, indent: int, ascii: bool) -> tuple:
    """One frame's line as (text made safe, style) pieces, kept by what it shows: the stacks of two gaps share
    most of their frames."""
    t = T(ascii)
    tag = FRAME_TAG.get(kind, kind[:3].ljust(3))
    t.add("  " + tag + " ", "dim").add(" " * min(indent, 4))
    style = {"sync": "bold red", "runtime": "yellow", "op": "dodger_blue1", "annotation": "bright_white",
             "python": "green"}.get(kind)
    if file and line is not None and name.startswith(f"{file}({line}): "):
        # Kineto names Python frames "file(line): function": show the function, then where it is
        t.add(name[len(file) + len(str(line)) + 4:], style).add(f"  {file}:{line}", "dim")
    else:
        t.add(display_frame(name), style)  # as the report: a built-in without its "of <object at 0x...>"
        if file:
            t.add(f"  {file}" + (f":{line}" if line is not None else ""), "dim")
    t.nl()
    return tuple(t.pieces)


def frames_block(t: T, frames, full: bool, keep: int = 10, outer: int = 0) -> None:
    """Frames (given outermost first) drawn innermost first: the frames a person fixes come first, the runpy
    and CLI frames last. In the panel only the innermost ``keep``; ``outer`` more frames, shared with a stack
    shown above, are folded into one line."""
    frames = list(frames)[::-1]
    hidden = 0 if full else max(len(frames) - keep, 0)
    for i, f in enumerate(frames[:len(frames) - hidden]):
        frame_line(t, f, 0)
    if hidden:
        t.add(f"  ... {hidden} outer frames (Enter shows all)", "dim").nl()
    if outer:
        t.add(f"  ... the {outer} outer frames of the stack above", "dim").nl()


def common_outer(a, b) -> int:
    """How many outermost frames stacks ``a`` and ``b`` share (same event, or same kind and name)."""
    n = 0
    for x, y in zip(a, b):
        if (getattr(x, "event", None), x.name) != (getattr(y, "event", None), y.name) and \
                (x.kind, x.name) != (y.kind, y.name):
            break
        n += 1
    return n


#: stack panel texts kept per scene (``panel_stack_text``)
STACK_CACHE = 64
_STACKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _stack_inputs(scene: Scene, glyphs: G.Glyphs) -> tuple[tuple, tuple]:
    """(what every stack text of ``scene`` is made from: the analyses, the projection, the plan, the model; what one
    is made from besides: the gap, its place in the list, the filter, the time origin and mode, the active part,
    the glyphs). Objects are compared by identity (``_same``), the rest by value."""
    a = scene.analysis
    pj = scene.state.projection
    parts = tuple((pt.state, pt.min_listed_ns) for pt in scene.parts)
    g = scene.gaps
    return ((a, pj, scene.state.plan, scene.model, parts),
            (g.selected_row, g.selected_gap, g.selected, g.order.size, g.cause_filter is None, scene.origin,
             scene.multi, scene.active, scene.time_mode, glyphs.ascii, scene.analysis_error))


def _same(x, y) -> bool:
    if isinstance(x, tuple) and isinstance(y, tuple):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return x is y or (isinstance(x, (int, float, str)) and x == y)


def panel_stack_text(scene: Scene, glyphs: G.Glyphs) -> Text:
    """``stack_text(scene, glyphs)`` for the stack panel, kept per gap: going back to a gap (N, the list's
    cursor) shows its text again without building it. Everything it is made from is in the key
    (``_stack_inputs``); a new analysis or projection forgets the scene's texts. The Text is the panel's
    to show: it is not changed by anyone (the panel only reads it)."""
    objs, key = _stack_inputs(scene, glyphs)
    try:
        hit = _STACKS.get(scene)
    except TypeError:
        return stack_text(scene, glyphs)
    if hit is None or not _same(hit[0], objs):
        hit = (objs, OrderedDict())
        _STACKS[scene] = hit
    return lru_get(hit[1], key, lambda: stack_text(scene, glyphs), STACK_CACHE)


def stack_text(scene: Scene, glyphs: G.Glyphs, *, full: bool = False) -> Text:
    t = T(glyphs.ascii)
    a = scene.analysis
    if a is None:
        if scene.analysis_error:
            return t.add(scene.analysis_error, "italic").text
        return t.add("analysing the trace...", "italic").text
    row = scene.gaps.selected_row
    if row < 0:
        if not len(a.gaps):
            if not a.devices:
                return t.add("no GPU activity in this trace: nothing to explain (the lanes show the CPU side)",
                             "italic").text
            return t.add("no idle gaps: the GPU ran kernels through the whole window", "italic").text
        return t.add("no gap selected (the filter hides every gap)", "italic").text
    try:
        det = a.gap_detail(row)
    except Exception as exc:  # detail is computed on demand; a failure must not take the screen down
        return t.add(f"no detail for this gap ({type(exc).__name__}: {exc})", "italic").text
    g = a.gaps
    s, e, dev = scene.gaps.span(scene.gaps.selected_gap)
    t.add(f"gap {scene.gaps.selected + 1}/{scene.gaps.order.size} ", "bold")
    listed, total, lim = scene.listed_counts()
    if total > listed and scene.gaps.cause_filter is None:
        # the report counts every gap; the list only those the report lists (at least min_listed_gap_ns)
        t.add(f"({total - listed} under {t.d(lim)} not listed, {total} in all) ", "dim")
    where = f"cuda:{dev}"
    if scene.multi:
        r = scene.model.rank
        where = f"rank {r if r is not None else scene.active} {where}"
    t.add(t.d(g.dur_ns[row]), "bold yellow").add(f" idle on {where} at {_at(t, s - scene.origin, scene)}  ")
    t.add("cause: ").add(det.cause, "bold " + G.CAUSE_COLOURS.get(det.cause, "red")).nl()
    for s, style in action_pieces(det.explanation_text):
        t.add(s, style)
    t.nl()
    gap_action_line(t, scene.state, row)
    # two stacks, two names: the launching thread when the GPU went idle (t0) and the launch that fed it; the
    # stack the cause points to (a sync call, the frame holding the CPU) only where it is neither
    idle = det.idle_stack
    if idle:
        t.add("launching thread when the GPU went idle (innermost first):", "bold").nl()
        frames_block(t, idle, full)
    else:
        t.add("launching thread when the GPU went idle: nothing recorded", "bold").nl()
    names = [f.name for f in det.stack]
    if det.stack and names != [f.name for f in idle] and names != [f.name for f in det.launch_stack]:
        same = common_outer(idle, det.stack)
        t.add(f"stack the {det.cause} cause points to (innermost first):", "bold").nl()
        frames_block(t, det.stack[same:], full, outer=same)
    if det.breakdown:
        tid = det.thread_track
        who = scene.model.tracks[tid].name if 0 <= tid < len(scene.model.tracks) else "launching thread"
        t.add(f"{who} during the gap:", "bold").nl()
        total = max(sum(int(v) for v in det.breakdown.values()), 1)
        for k, v in sorted(det.breakdown.items(), key=lambda kv: -int(kv[1])):
            if int(v) <= 0:
                continue
            bar_n = max(1, int(round(int(v) * 20 / total)))
            t.add(f"  {k:<10}", "dim").add(f"{t.d(v):>9} ").add(("#" if glyphs.ascii else "█") * bar_n, "cyan")
            t.add(f" {int(v) * 100 / total:.0f}%").nl()
    t.add("ended by: ", "bold").add(det.next_kernel, "bright_cyan")
    if det.next_op:
        t.add(" from ").add(det.next_op, "dodger_blue1")
    if det.launch:
        t.add(" via ").add(det.launch, "yellow")
    t.nl()
    if det.launch_stack:
        # a diff against the stack when the GPU went idle: the frames they share are one line
        same = common_outer(idle, det.launch_stack)
        if same == len(det.launch_stack) and same == len(idle):
            t.add("launch stack (what fed the GPU): the same as when it went idle", "bold").nl()
        else:
            t.add("launch stack (what fed the GPU; innermost first, below the frames it shares with the stack "
                  "above):", "bold").nl()
            frames_block(t, det.launch_stack[same:], full, outer=same)
    return t.text


def _at(t: T, ns: int, scene: Scene) -> str:
    """A time as the report writes it: +x from the window start, or the trace's own time."""
    return t.d(ns) + " (trace time)" if scene.time_mode == "trace" else "+" + t.d(ns)


def _args_line(t: T, args: dict, keys) -> None:
    for k in keys:
        if k in args:
            t.add(f"  {k}: ", "dim").add(str(args[k])).nl()


def event_text(scene: Scene, ev: int, glyphs: G.Glyphs) -> Text:
    m = scene.model
    t = T(glyphs.ascii)
    k = int(m.kind[ev])
    kl = KIND_LABEL.get(k, "event")
    dur = int(m.dur_ns[ev])
    tr = m.tracks[int(m.track[ev])]
    t.add(f"{kl}: ", "bold").add(display_frame(m.name(ev)), "bold bright_cyan").nl()
    start = _at(t, int(m.ts_ns[ev]) + scene.offset - scene.origin, scene)
    t.add(f"  start {start}  duration {t.d(dur)}  on {tr.name}").nl()
    args = m.event_args(ev)
    if k == Kind.KERNEL:
        _args_line(t, args, ("grid", "block", "registers per thread", "shared memory", "blocks per SM",
                             "warps per SM", "est. achieved occupancy %"))
    if k in (Kind.MEMCPY, Kind.MEMSET):
        nb = int(m.nbytes[ev])
        t.add(f"  bytes {nb:,}")
        if dur > 0 and nb:
            t.add(f"  {nb / dur:.2f} GB/s")
        t.nl()
        nm = m.name(ev)
        if "(" in nm and "->" in nm:
            t.add("  memory: " + nm[nm.index("(") + 1:].rstrip(")")).nl()
    if k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET):
        li = int(m.launch[ev])
        oi = int(m.op[ev])
        if li >= 0:
            t.add("  launched by ").add(m.name(li), "yellow").add(f" on {m.tracks[int(m.track[li])].name}").nl()
        gm = scene.state.graph_map
        ref = int(gm.reference_of([ev])[0]) if gm is not None else -1
        if ref >= 0:  # a graph replay's kernel: its op and stack are those of the eager reference run's kernel
            oi, li = int(gm.op_of(m, [ev])[0]), int(gm.launch_of(m, [ev])[0])
            t.add("  a CUDA graph replay's node; op and stack from the eager reference run", "dim").nl()
        if oi >= 0:
            t.add("  from op ").add(m.name(oi), "dodger_blue1").nl()
            oa = m.event_args(oi)
            _args_line(t, oa, ("Input Dims", "Input type", "Concrete Inputs"))
        a = scene.analysis
        if a is not None and k == Kind.KERNEL:
            for ks in scene.state.kernels:
                if ks.name == m.name(ev):
                    if ks.floor_ns:
                        t.add(f"  floor {t.d(ks.floor_ns)}" + (f" ({ks.bound}-bound)" if ks.bound else "")).nl()
                    t.add(f"  {ks.count} calls, {t.d(ks.total_ns)} total").nl()
                    break
        stack_ev = li
    else:
        stack_ev = ev
        _args_line(t, args, ("Input Dims", "Input type", "Concrete Inputs", "stream"))
    frames = _full_stack(scene, stack_ev) if stack_ev >= 0 else None
    if frames:
        t.add("stack (innermost first):", "bold").nl()
        frames_block(t, frames, True)
    elif stack_ev >= 0:
        anc = m.ancestors(stack_ev)[::-1] + [stack_ev]
        if len(anc) > 1 or stack_ev != ev:
            t.add("stack (innermost first):", "bold").nl()
            for e in anc[-40:][::-1]:  # the model's own parent chain (no analysis stack index)
                kk = KIND_LABEL.get(int(m.kind[e]), "?")
                t.add(f"  {kk:<9} ", "dim").add(display_frame(m.name(e))).nl()  # (the longest: "gpu range")
    return t.text


def match_text(scene: Scene, glyphs: G.Glyphs) -> Text:
    """The stack panel on a search's match: which match of the query it is, then its detail (``event_text``: the
    kernel's full name, its launch, op, shapes and stack). The match's part is the active one (``current_match``)."""
    f = scene.search
    hit = f.current()
    t = T(glyphs.ascii)
    if hit is None:
        return t.text
    t.add(f"match {f.pos + 1}/{f.matches.size} of '{f.query}'", "bold")
    if not f.inside[f.pos]:
        t.add(" (outside the analysed window)", "dim")
    t.nl()
    out = t.text
    out.append_text(event_text(scene, hit[1], glyphs))
    return out


def _full_stack(scene: Scene, ev: int):
    """Python frames, ranges, ops and runtime calls enclosing event ``ev`` on its thread (outermost first),
    from the analysis' stack index; None when the analysis has none."""
    a = scene.analysis
    st = scene.state.stacks
    if st is None or not hasattr(st, "stack_at"):
        return None
    m = scene.model
    s0, e0 = int(m.ts_ns[ev]), int(m.ts_ns[ev] + m.dur_ns[ev])
    try:
        frames = st.stack_at(int(m.track[ev]), s0)
    except Exception:  # noqa: BLE001 - fall back to the model's own parent chain
        return None
    out = []
    for f in frames:
        i = getattr(f, "event", -1)
        if i is None or i < 0 or i == ev:
            continue
        if int(m.ts_ns[i]) <= s0 and int(m.ts_ns[i] + m.dur_ns[i]) >= e0:
            out.append(f)
    if out:
        out.append(type(frames[0])(kind=_FRAME_KIND.get(int(m.kind[ev]), "op"), name=m.name(ev), event=ev)
                   if frames else None)
    return [f for f in out if f is not None] or None


_FRAME_KIND = {Kind.PYTHON: "python", Kind.ANNOTATION: "annotation", Kind.CPU_OP: "op", Kind.RUNTIME: "runtime",
               Kind.DRIVER: "runtime"}
