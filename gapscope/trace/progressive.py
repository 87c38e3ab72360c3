"""A big trace shown while it is read: a preview of the beginning of its window, then how far the reading is.

``preview(path)`` decodes a few MB of a plain trace file of PREVIEW_MIN bytes or more into a partial model
(``TraceModel.partial``): the lanes of the window's beginning, for the explorer's first screen. It is never
analysed (``analyze`` refuses it), never cached, and the full model is built afterwards by the one load path
(``read.load``), from every byte, exactly as without a preview.

Which bytes: Kineto writes its events in runs, each sorted by time (kineto-format.md; on our H200 traces: the
``cpu_op`` ranges of each step, then the ``python_function`` frames, then the runtime calls with their kernels,
then the metadata), so the beginning of the window sits at the start of every run, not only at the start of the
file. The array is sampled at PROBES evenly spaced offsets (one event each, a few µs a probe); the time reached
by the first HEAD bytes is the beginning's end, and the bytes around every probe whose event starts before it
are decoded too, up to BUDGET in all. A tiled file (``benchmarks/gen_big.py``) has its beginning in its first
HEAD bytes and decodes those alone.

``read_preview(path)`` gives the same model with what it covers (``Preview``): ``known_end_ns``, the earliest of
the starts seen in the bytes it did not decode (the first event after each decoded range, every probe outside
them) and of the times its main kinds of events reach (the latest CPU op, Python frame, runtime call and kernel
decoded: a tiled file's next copy starts with its CPU ops, and its frames and kernels sit past the bytes read).
The runs being sorted by time, the events of the file that start before it are in the preview: the explorer lists
the gaps that end before it as a provisional gap list (tui/progress.py). It is a bound read from samples, not
a proof (a run that starts and ends between two probes is not seen); the full load's list replaces it.

``Meter`` turns the reader's ticks (``read.load(progress=...)``) into ``LoadProgress``: bytes of the event
array read and events decoded so far, by this process and the worker (its shared counters).
"""

from __future__ import annotations

import time

import math
import os
from typing import NamedTuple

from .build import ColumnBuilder
from .model import Kind, TraceModel
from .repair import _BOUNDARY, JSONDecodeError, _loads
from .stream import skip_ws

#: plain trace files at least this big get a preview (smaller ones load in about a second)
PREVIEW_MIN = 64 << 20
#: the first bytes of the event array always decoded
HEAD = 4 << 20
#: offsets sampled over the event array to find where the runs start
PROBES = 512
#: the most bytes a preview decodes in all
BUDGET = 32 << 20
#: probes are at least this far apart
MIN_STEP = 1 << 20
#: the bytes read at one probe to find one whole event
_PROBE_READ = 64 << 10


class LoadProgress(NamedTuple):
    """How far a load is: ``done`` of ``total`` bytes of the file's text, ``events`` decoded so far, and the
    phase ("reading", then "building": merging, sorting, linking)."""

    done: int
    total: int
    events: int
    phase: str


#: the parent's pieces on the parallel path of a load with a progress report (the explorer's): the parse holds the
#: GIL for one piece's decode at a time, and a key waits for it; 1 MB against 8 MB cut the longest hold ~7x (4.3 ->
#: 0.6 s on this VM at load average 13). Only the clean two-process
#: path takes it: the model does not depend on where the pieces are cut (tests/test_trace_progressive.py)
DRAWN_PIECE = 1 << 20
#: ...but only while the screen is in use: for ACTIVE_S seconds after a load starts and after each key
#: or mouse event (``touch``); otherwise the pieces are CHUNK's. Small pieces cost the parse itself: at 1 GB on 2 cores the
#: parent's CPU was 15.1-15.4 s with 1 MB pieces against 11.4-12.5 s with 8 MB (the worker's 9.1-9.9 s either
#: way), and the explorer's gap list came 4.1 s later (benchmarks/README.md, "Pieces of the explorer's load")
ACTIVE_S = 2.0
_active_until = 0.0


def touch(seconds: float = ACTIVE_S) -> None:
    """The screen is being used (a key, a load starting): the parse takes small pieces for ``seconds`` more."""
    global _active_until
    _active_until = max(_active_until, time.monotonic() + seconds)


class Meter:
    """The reader's ticks as LoadProgress reports: this process's offset plus the worker's counters."""

    piece = DRAWN_PIECE

    def __init__(self, report, total: int, job=None) -> None:
        self.report, self.total, self.job = report, total, job
        self.reader = None
        self.split = total
        touch()  # the first frames (the preview, the provisional list) are drawn while the parse starts

    def piece_now(self) -> int:
        """The size of the next piece this process parses: ``piece`` while the screen is in use, else CHUNK's
        (never more than CHUNK's: tests shrink it). Where the pieces are cut does not change the model."""
        from . import reader

        if time.monotonic() < _active_until:
            return min(reader.CHUNK, self.piece)
        return reader.CHUNK

    def ticker(self, reader, job):
        self.reader = reader
        self.job = job
        self.split = job.split if job is not None else self.total
        return self.tick

    def restart(self) -> None:
        """The worker's part was dropped: this process reads it all again."""
        self.job = None
        self.split = self.total

    def counts(self, pos: int) -> tuple[int, int]:
        done = min(pos, self.split)
        events = self.reader.b.n_added if self.reader is not None else 0
        if self.job is not None:
            c = self.job.counters
            done += int(c[0])
            events += int(c[1])
        return min(done, self.total), events

    def tick(self, pos: int) -> None:
        done, events = self.counts(pos)
        self.report(LoadProgress(done, self.total, events, "reading"))

    def building(self) -> None:
        events = self.reader.b.n_added if self.reader is not None else 0
        if self.job is not None:
            events += int(self.job.counters[1])
        self.report(LoadProgress(self.total, self.total, events, "building"))


# ------------------------------------------------------------------------------------------ the preview
def _array_start(data) -> tuple[int, bytes] | None:
    """(offset of the first event of the array, the top-level keys before it) of a plain trace; None when the
    file does not start like one (the full load says why)."""
    head = bytes(data[: 1 << 20])
    i = 3 if head[:3] == b"\xef\xbb\xbf" else 0
    i = skip_ws(head, i)
    if i >= len(head):
        return None
    if head[i] == ord("["):
        return i + 1, b""
    if head[i] != ord("{"):
        return None
    k = head.find(b'"traceEvents"', i)
    while k >= 0:
        j = skip_ws(head, k + len(b'"traceEvents"'))
        if j < len(head) and head[j] == ord(":"):
            j = skip_ws(head, j + 1)
            if j < len(head) and head[j] == ord("["):
                return j + 1, head[i + 1 : k]
            return None
        k = head.find(b'"traceEvents"', k + 1)
    return None  # the keys before the array are longer than 1 MB, or the array is not at the top


def _metadata(text: bytes) -> dict:
    text = text.strip().rstrip(b",").strip()
    if not text:
        return {}
    try:
        d = _loads(b"{" + text + b"}")
    except (JSONDecodeError, RecursionError, ValueError):
        return {}
    return {k: v for k, v in d.items() if k != "traceEvents"} if isinstance(d, dict) else {}


def _probe(data, x: int, end: int) -> float | None:
    """The ``ts`` of the first whole timed event after offset ``x`` (within _PROBE_READ bytes), or None."""
    w = bytes(data[x : min(x + _PROBE_READ, end)])
    m = _BOUNDARY.search(w)
    for _ in range(64):
        nxt = _BOUNDARY.search(w, m.end()) if m is not None else None
        if nxt is None:
            return None
        try:
            e = _loads(w[m.end() - 1 : nxt.start() + 1])
        except (JSONDecodeError, RecursionError, ValueError):
            e = None  # a boundary inside a nested value: the next one
        ts = e.get("ts") if isinstance(e, dict) else None
        if isinstance(ts, (int, float)) and not isinstance(ts, bool) and e.get("ph") != "M":
            return float(ts)
        m = nxt
    return None


def _whole(data, a: int, b: int, lo: int, hi: int) -> tuple[int, int] | None:
    """data[a:b] trimmed to whole events: from the first event boundary at or after ``a`` (``lo``: the array's
    first event) to the last one before ``b`` (``hi``: the array's end)."""
    if a > lo:
        m = _BOUNDARY.search(data, a, min(b + _PROBE_READ, hi))
        if m is None:
            return None
        a = m.end() - 1
    if b < hi:
        m = None
        for m in _BOUNDARY.finditer(data, max(a, b - _PROBE_READ), b):
            pass
        if m is None:
            return None
        b = m.start() + 1
    return (a, b) if b > a else None


def regions(data, lo: int, hi: int) -> list[tuple[int, int]]:
    """The byte ranges of the event array data[lo:hi] a preview decodes (file order, not overlapping): the first
    HEAD bytes, and the bytes around each probe whose event starts before the time the head reaches."""
    return _plan(data, lo, hi)[0]


def _plan(data, lo: int, hi: int) -> tuple[list[tuple[int, int]], list[tuple[int, float | None]]]:
    """``regions``, and the probes: (offset, ts of the first whole timed event after it, or None)."""
    n = hi - lo
    step = max(n // PROBES, MIN_STEP, 1)
    xs = list(range(lo, hi, step))
    ts = [_probe(data, x, hi) for x in xs]
    head_end = min(lo + HEAD, hi)
    # the time the head reaches: its probes and its last events (a run sorted by time ends there latest)
    inside = [t for x, t in zip(xs, ts) if x < head_end and t is not None]
    last = _probe(data, max(lo, head_end - _PROBE_READ), head_end + _PROBE_READ)
    if last is not None:
        inside.append(last)
    want = [(lo, head_end)]
    if inside:
        cut = max(inside)
        for i, (x, t) in enumerate(zip(xs, ts)):
            if x < head_end or t is None or t > cut:
                continue
            want.append((max(lo, xs[i - 1] if i else lo), min(hi, x + step)))
    out: list[tuple[int, int]] = []
    budget = BUDGET
    for a, b in sorted(want):
        if out and a <= out[-1][1]:
            a = out[-1][1]
            if b <= a:
                continue
        b = min(b, a + budget)
        if b <= a:
            break
        budget -= b - a
        if out and a == out[-1][1]:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out, list(zip(xs, ts))


def _known_end(data, decoded: list[tuple[int, int]], probes: list, lo: int, hi: int) -> int | None:
    """The earliest start (ns, rounded down) seen in the bytes not decoded: the first event after each decoded
    range and every probe not inside one (a probe reads up to _PROBE_READ bytes past its offset). The array read
    to its end: no bound (2**62). None when nothing outside was readable."""
    seen = [t for x, t in probes
            if t is not None and not any(a <= x and x + _PROBE_READ <= b for a, b in decoded)]
    for a, b in decoded:
        if b < hi:
            t = _probe(data, b - 1, hi)
            if t is not None:
                seen.append(t)
    if seen:
        return int(math.floor(min(seen) * 1000.0)) - 1
    return 2**62 if decoded == [(lo, hi)] else None


#: the kinds whose latest decoded start bounds what a preview knows (``_reach``)
_REACH_KINDS = (Kind.CPU_OP, Kind.PYTHON, Kind.RUNTIME, Kind.KERNEL)


def _reach(model: TraceModel) -> int | None:
    """The earliest of the latest starts of the preview's CPU ops, Python frames, runtime calls and kernels (those
    of them it has): past it, one of those runs is not read yet."""
    out = None
    for k in _REACH_KINDS:
        ts = model.ts_ns[model.kind == int(k)]
        if ts.size:
            t = int(ts.max())
            out = t if out is None else min(out, t)
    return out


class Preview(NamedTuple):
    """A preview (``read_preview``): the partial model; ``known_end_ns``, before which every event of the file is
    in it (module docstring; None: no bound known); the bytes it decoded of the file's ``size``."""

    model: TraceModel
    known_end_ns: int | None
    decoded: int
    size: int


def preview(path: str, min_size: int | None = None) -> TraceModel | None:
    """A partial model of the beginning of ``path``'s window (see the module's docstring), or None: a file
    smaller than ``min_size`` (default PREVIEW_MIN), gzip, not laid out like a trace, or nothing decoded."""
    pv = read_preview(path, min_size)
    return pv.model if pv is not None else None


def read_preview(path: str, min_size: int | None = None) -> Preview | None:
    """``preview``'s model with what it covers (``Preview``), or None as ``preview``."""
    import mmap

    min_size = PREVIEW_MIN if min_size is None else min_size
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < max(min_size, 1) or f.read(2) == b"\x1f\x8b":
                return None
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        start = _array_start(data)
        if start is None:
            return None
        lo, head = start
        lo = skip_ws(data, lo)
        hi = data.rfind(b"]")
        if hi <= lo:
            return None
        b = ColumnBuilder(path)
        plan, probes = _plan(data, lo, hi)
        decoded = []
        for a, z in plan:
            w = _whole(data, a, z, lo, hi)
            if w is None:
                continue
            try:
                b.add_bytes(b"[" + data[w[0] : w[1]] + b"]", _loads)
            except (JSONDecodeError, RecursionError, ValueError):
                continue  # damage: the full load repairs it or says so; the preview shows the rest
            decoded.append(w)
        if b.n_added == 0:
            return None
        known = _known_end(data, decoded, probes, lo, hi)
        model = b.finish(_metadata(head))
    finally:
        data.close()
    reach = _reach(model)
    if known is not None and reach is not None:
        known = min(known, reach)
    model.partial = True
    model.warnings = []  # about a part of the trace (GPU ops whose launch is elsewhere): the full load's count
    return Preview(model, known, sum(z - a for a, z in decoded), size)
