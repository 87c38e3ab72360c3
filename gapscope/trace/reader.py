"""Chunking: the bytes of one trace split into its metadata and ~CHUNK pieces of its event array, each piece
parsed and handed to a ColumnBuilder (the lenient lane, ``repair.py``, for pieces that are not plain JSON),
and the parallel path's own part (``_clean_region``; the worker's part is ``parallel.py``)."""

from __future__ import annotations

import bisect
import mmap
from typing import TYPE_CHECKING

from .build import ColumnBuilder
from .model import TraceModel
from .repair import (_BOUNDARY, _CLOSE, _NONFINITE, JSONDecodeError, _char_to_byte, _last_boundary, _loads,
                     _looks_like_trailer, _repair_one, _Stats)
from .stream import not_a_trace as _err
from .stream import trailer
from .stream import skip_ws as _skip_ws

CHUNK = 8 << 20  # parsed dicts take ~8x their JSON: 64 MB transient per piece
_PAGE = mmap.PAGESIZE
_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
_MAX_MERGE = 64 << 20  # a single event larger than this is not an event we can use
# A cut inside a nested value is fixed by taking the next boundary too; a value that never closes
# (damage) would make that quadratic, so both are bounded and the damaged event is skipped instead.
_MAX_WIDEN = 8
_MAX_MERGE_SEGMENTS = 256

if TYPE_CHECKING:  # the parallel path's worker (parallel.py imports this module)
    from .parallel import _Job


class _Unclean(Exception):
    """The parallel path met something it does not handle (damage, an odd layout): parse serially."""


def _release(data, a: int, b: int) -> None:
    """Drop the pages of data[a:b] from this process (a map of the file: they were parsed and are not read again;
    the page cache keeps them). A map holds every page it touched: at 1 GB that was ~0.5 GB of the peak RSS."""
    madvise = getattr(data, "madvise", None)
    if madvise is None or _MADV_DONTNEED is None:
        return
    a = -(-a // _PAGE) * _PAGE
    b = b // _PAGE * _PAGE
    if b > a:
        try:
            madvise(_MADV_DONTNEED, a, b - a)
        except (OSError, ValueError):  # pragma: no cover - only an RSS saving
            pass


class _PieceBuf:
    """The text of one piece, ``[`` + data[a:b] + ``]``, written into one buffer reused piece after piece.

    Building it as ``b"[" + data[a:b] + b"]"`` took two fresh 8 MB objects a piece (a slice, then the
    concatenation): the copies, the allocations and their page faults cost ~0.19 s of CPU per 100 MB, against
    0.012 s to copy into memory that is already there. The decoders take the buffer's view as it is (msgspec and
    orjson read any bytes-like object); nothing they return points into it (names are new strings, the args kept
    are copied to bytes while staging), so the next piece may overwrite it."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def fill(self, data, a: int, b: int) -> memoryview:
        n = b - a + 2
        if len(self.buf) < n:
            try:
                self.buf.extend(bytes(n + (n >> 3) - len(self.buf)))  # some room for a widened piece
            except BufferError:  # pragma: no cover - a view of the last piece is still held: take a new one
                self.buf = bytearray(n + (n >> 3))
        mv = memoryview(self.buf)
        mv[0] = 0x5B  # [
        with memoryview(data) as src:
            mv[1 : n - 1] = src[a:b]
        mv[n - 1] = 0x5D  # ]
        return mv[:n]


def _clean_region(data, a: int, b: int, builder: ColumnBuilder, tick=None, piece: int | None = None,
                  buf: _PieceBuf | None = None) -> None:
    """Events in data[a:b] (``a`` at an event's ``{``, ``b`` just after an event's ``}``) in ~CHUNK pieces (or
    ``piece``: a size, or a call giving the size of each next piece), as plain JSON only. ``tick(offset reached)`` after each piece; the pages of a map are released
    behind it."""
    size_of = piece if callable(piece) else (lambda: CHUNK if piece is None else piece)
    buf = _PieceBuf() if buf is None else buf
    pos = a
    while pos < b:
        end, nxt = b, b
        size = size_of()
        if pos + size < b:
            m = _BOUNDARY.search(data, pos + size, b)
            if m is not None:
                end, nxt = m.start() + 1, m.end() - 1
        widened = 0
        while True:
            try:
                builder.add_bytes(buf.fill(data, pos, end), _loads)
                break
            except (JSONDecodeError, RecursionError):
                if end >= b or widened >= _MAX_WIDEN:
                    raise _Unclean() from None
                widened += 1  # the cut fell inside a nested value: take the next boundary
                m = _BOUNDARY.search(data, end + 1, b)
                end, nxt = (m.start() + 1, m.end() - 1) if m is not None else (b, b)
        _release(data, pos, nxt)
        pos = nxt
        if tick is not None:
            tick(pos)


class _Reader:
    """Splits the bytes of one trace into metadata and event pieces, feeding a ColumnBuilder."""

    def __init__(self, path: str, data, builder: ColumnBuilder):
        self.path = path
        self.data = data
        self.b = builder
        self.stats = _Stats()
        self.warnings: list[str] = []
        self.metadata: dict = {}
        self.array_end: int | None = None  # index of the ']' closing the event array
        self.job: _Job | None = None  # the parallel path's worker, when there is one
        self.split_units = 0
        self.worker_part: dict | None = None
        #: called with the offset this process has read up to, after each piece (gapscope/trace/progressive.py)
        self.tick = None
        #: the size of this process's pieces on the parallel path (None: CHUNK; or a call giving each next one's)
        self.piece = None
        self._buf = _PieceBuf()

    # -------------------------------------------------------------- top level
    def run(self) -> None:
        data = self.data
        n = len(data)
        i = 0
        if data[:3] == b"\xef\xbb\xbf":
            i = 3
        i = _skip_ws(data, i)
        if i >= n:
            raise _err(self.path, "empty file" if n == 0 else "only whitespace", i)
        c = data[i]
        if c == ord("["):
            self._events(i + 1)
            if self.array_end is not None:
                tail = trailer(data, self.array_end + 1)
                if tail:
                    self.warnings.append(f"{len(tail)} bytes after the event array were ignored")
            return
        if c != ord("{"):
            raise _err(self.path, f"not JSON: starts with {bytes(data[i:i + 1])!r}", i)
        k = data.find(b'"traceEvents"', i)
        while k >= 0:
            j = _skip_ws(data, k + len(b'"traceEvents"'))
            if j < n and data[j] == ord(":"):
                break
            k = data.find(b'"traceEvents"', k + 1)
        if k < 0:
            self._no_events(i)
        j = _skip_ws(data, j + 1)
        if j >= n:
            raise _err(self.path, "file ends after the traceEvents key", j)
        if data[j] != ord("["):
            raise _err(self.path, "traceEvents is not an array", j)
        header = bytes(data[i + 1 : k]).strip()
        self._metadata_part(header, where="before")
        self._events(j + 1)
        if self.array_end is not None:
            tail = trailer(data, self.array_end + 1)
            if tail.startswith(b","):
                tail = tail[1:]
            if tail.endswith(b"}"):
                tail = tail[:-1]
            else:
                self.warnings.append("the top-level object is not closed (file cut off?)")
            self._metadata_part(tail, where="after")

    def _no_events(self, at: int):
        data = self.data
        if len(data) < (64 << 20):
            try:
                doc = _loads(bytes(data))
            except (JSONDecodeError, RecursionError) as exc:
                pos = _char_to_byte(bytes(data), exc.pos) if isinstance(exc, JSONDecodeError) else at
                raise _err(self.path, f"invalid JSON ({getattr(exc, 'msg', 'too deeply nested')})", pos) from None
            if isinstance(doc, dict):
                raise _err(self.path, "a JSON object without a traceEvents array", at)
        raise _err(self.path, "no traceEvents array", at)

    def _metadata_part(self, text: bytes, where: str) -> None:
        text = text.strip().rstrip(b",").strip()
        if not text:
            return
        status, val, _ = _repair_one(b"{" + text + b"}", self.stats)
        if status == "ok" and isinstance(val, dict):
            for key, v in val.items():
                if key != "traceEvents":
                    self.metadata[key] = v
        else:
            self.warnings.append(f"the top-level keys {where} traceEvents could not be read and were ignored")

    # ---------------------------------------------------------------- events
    def _events(self, start: int) -> None:
        if self.job is not None:
            self._events_split(start)
        else:
            self._events_serial(start)

    def _events_split(self, start: int) -> None:
        """The parallel path: events before the job's split offset here, the job's part in the worker, the
        last event (and whatever closes the array) here again. Anything unusual raises _Unclean."""
        data = self.data
        n = len(data)
        job = self.job
        pos = _skip_ws(data, start)
        m = _BOUNDARY.search(data, job.split)
        lb = _last_boundary(data, job.split, n) if m is not None else None
        if pos >= job.split or pos >= n or data[pos] != ord("{") or lb is None or m.start() + 1 >= lb[0]:
            raise _Unclean()
        if m.end() - job.split > 4 * CHUNK:
            raise _Unclean()  # the worker finds no boundary that near the split either (_stream_part) and gives up
        a_end, b_start = m.start() + 1, m.end() - 1
        b_end, tail = lb
        _clean_region(data, pos, a_end, self.b, self.tick, self.piece, self._buf)
        self.split_units = len(self.b.units)
        self._events_serial(tail)
        self.worker_part = job.result(b_start, b_end, self.tick)

    def _events_serial(self, start: int) -> None:
        data = self.data
        n = len(data)
        pos = start
        while True:
            pos = _skip_ws(data, pos)
            if pos >= n:
                self.stats.truncated = True
                return
            if data[pos] == ord("]"):
                self.array_end = pos
                return
            if data[pos] == ord(","):  # a stray comma (e.g. after a skipped event)
                pos += 1
                continue
            target = pos + CHUNK
            end, nxt = n, n
            if target < n:
                m = _BOUNDARY.search(data, target)
                if m is not None:
                    end, nxt = m.start() + 1, m.end() - 1
            if end == n:
                # the last piece: cut off the final event (with the array's close and the trailer after
                # it) so the big part parses in one go and only a small tail needs the slower handling
                m = _last_boundary(data, pos, n)
                if m is not None:
                    end, nxt = m
            widened = 0
            while True:
                added = False
                try:
                    self.b.add_bytes(self._buf.fill(data, pos, end), _loads)
                    added = True
                    exc = None
                except RecursionError:
                    exc = None
                except JSONDecodeError as e:
                    exc = e
                if added:
                    pos = nxt
                    if self.tick is not None:
                        self.tick(pos)
                    if end == n:  # the array never closed: the file ended exactly after an event
                        self.stats.truncated = True
                        return
                    break
                text = b"[" + data[pos:end] + b"]"  # the recovery below works on bytes
                if exc is not None and exc.msg.startswith(("unexpected content after document", "Extra data")):
                    # the array closed inside this piece: parse up to the close, then stop; unless what
                    # follows the close is no top-level trailer (a stray ']' in a damaged event)
                    cut = _char_to_byte(text, exc.pos)
                    close = text.rfind(b"]", 0, cut)
                    evs = None
                    if _looks_like_trailer(data, pos + close):
                        try:
                            evs = _loads(text[: close + 1])
                        except (JSONDecodeError, RecursionError):
                            evs = None
                    if evs is not None:
                        del text
                        self.b.add(evs)
                        del evs
                        self.array_end = pos + close - 1
                        return
                if exc is not None and end < n and widened < _MAX_WIDEN and (
                    _char_to_byte(text, exc.pos) >= len(text) - 2 or exc.msg.startswith("Unterminated string")
                ):
                    widened += 1
                    # the cut fell inside a nested value: widen to the next boundary
                    m = _BOUNDARY.search(data, end + 1)
                    if m is not None:
                        end, nxt = m.start() + 1, m.end() - 1
                    else:
                        end, nxt = n, n
                    continue
                if exc is not None and not exc.msg.startswith(("unexpected content", "Extra data")):
                    # old builds wrote bare inf/nan all over: repair the whole piece in one pass first
                    text, k = _NONFINITE.subn(rb"\1null", text)
                    if k:
                        try:
                            evs = _loads(text)
                        except (JSONDecodeError, RecursionError):
                            evs = None
                        if evs is not None:
                            self.stats.nonfinite += k
                            del text
                            self.b.add(evs)
                            del evs
                            pos = nxt
                            if end == n:
                                self.stats.truncated = True
                                return
                            break
                del text
                closed = self._lenient(pos, end)
                if closed or end == n:
                    return
                pos = nxt
                break

    def _lenient(self, a: int, b: int) -> bool:
        """Parse events in data[a:b] one by one with repairs. Returns True when the array closed."""
        data = self.data
        n = len(data)
        starts = [a]
        for m in _BOUNDARY.finditer(data, a, b):
            starts.append(m.end() - 1)
        starts.append(b)
        events: list = []
        i = 0
        last = len(starts) - 1
        while i < last:
            s = starts[i]
            j, seg, status, val, tail = self._merge(starts, i, last)
            if status == "ok" and isinstance(val, dict):
                events.append(val)
            elif status == "trail" and isinstance(val, dict) and _CLOSE.match(tail):
                events.append(val)
                # the array closes here (after an optional trailing comma); ``tail`` is the input's own
                # end, so its offset is exact
                end_of_seg = s + len(bytes(data[s : starts[j]]).rstrip())
                self.array_end = end_of_seg - len(tail) + _CLOSE.match(tail).end() - 1
                break
            elif status == "eof" and starts[j] >= n:
                self.stats.truncated = True
            elif seg:
                self.stats.skipped += 1
            i = j
        if events:
            self.b.add(events)
        return self.array_end is not None

    def _merge(self, starts: list, i: int, last: int):
        """The event that starts at ``starts[i]``: the segments up to the first ``starts[j]`` at which the text no
        longer ends inside a value (a boundary inside a nested value cut it), within _MAX_MERGE_SEGMENTS segments
        and _MAX_MERGE bytes. Returns (j, text, status, value, tail) of ``_repair_one``.

        Taking one more segment at a time re-parsed the growing text each time (up to 256 times a piece: quadratic
        in the merge); the first such j is found by doubling the number of segments and then halving the interval,
        so each byte is parsed O(log 256) times. Repairs are counted for the text kept only."""
        data = self.data
        s = starts[i]

        def text(j: int) -> bytes:
            seg = bytes(data[s : starts[j]]).strip()
            return seg.removesuffix(b",").rstrip() if j < last else seg  # the boundary's own comma

        # the common case, one segment, counts its repairs straight away
        st = self.stats
        counts = (st.quotes, st.nonfinite, st.control, st.utf8, st.deep)
        seg = text(i + 1)
        status, val, tail = _repair_one(seg, st)
        if status != "eof":
            return i + 1, seg, status, val, tail
        cap = min(last, i + _MAX_MERGE_SEGMENTS, bisect.bisect_left(starts, s + _MAX_MERGE, i + 1, last + 1))
        if cap <= i + 1:
            return i + 1, seg, status, val, tail
        st.quotes, st.nonfinite, st.control, st.utf8, st.deep = counts  # counted again for the text kept
        tried: dict = {}

        def probe(j: int):
            r = tried.get(j)
            if r is None:
                seg = text(j)
                st = _Stats()
                r = tried[j] = (seg, *_repair_one(seg, st), st)
            return r

        lo, hi, step = i + 1, None, 1
        while hi is None and lo < cap:
            step *= 2
            j = min(cap, i + step)
            if probe(j)[1] == "eof":
                lo = j
            else:
                hi = j
        if hi is None:
            j = cap
        else:
            while hi - lo > 1:  # the first j in (lo, hi] whose text does not end inside a value
                mid = (lo + hi) // 2
                if probe(mid)[1] == "eof":
                    lo = mid
                else:
                    hi = mid
            j = hi
        seg, status, val, tail, st = probe(j)
        self.stats.absorb(st)
        return j, seg, status, val, tail

    # --------------------------------------------------------------- results
    def report(self) -> list[str]:
        w = list(self.warnings)
        st = self.stats
        if st.quotes:
            w.append(f"repaired {st.quotes} unescaped '\"' inside strings (a known Kineto bug)")
        if st.nonfinite:
            w.append(f"replaced {st.nonfinite} bare inf/nan numbers by null")
        if st.control:
            w.append(f"replaced {st.control} raw control characters inside strings")
        if st.utf8:
            w.append(f"replaced invalid UTF-8 bytes in {st.utf8} events")
        deep = min(st.deep, st.skipped)
        if deep:
            w.append(f"{deep} events were nested too deeply (over 1024 levels) and were skipped")
        if st.skipped - deep:
            w.append(f"{st.skipped - deep} damaged events could not be repaired and were skipped")
        if st.truncated:
            w.append(
                f"the file ends inside the event list (cut off while being written?): kept {self.b.n_added} "
                "complete events"
            )
        return w


def _finish(path: str, r: _Reader, b: ColumnBuilder) -> TraceModel:
    b.warnings.extend(r.report())
    meta = r.metadata
    if b.n_added == 0 and r.stats.skipped and not b.category_counts:
        raise _err(path, "no event could be read" + (": nested too deeply" if r.stats.deep else ""), 0)
    w = meta.get("WARNING")
    if isinstance(w, list) and w:
        first = " ".join(str(w[0]).split())[:120]
        b.warnings.append(f"the profiler wrote {len(w)} warnings into the trace, first: {first}")
    model = b.finish(meta)
    if model.n == 0:
        model.warnings.append("the trace holds no timed events")
    return model
