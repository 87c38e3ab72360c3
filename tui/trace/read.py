"""Read a trace file into a TraceModel: bounded, lenient, fast.

How a file is read:

1. ``stat`` first (a FIFO or a directory must not be opened), then the bytes: gzip is sniffed by its
   magic bytes and decompressed in a streaming way under a size limit (``stream.py``: what cannot start a
   trace is refused in its first bytes, runs of whitespace are skipped, a bomb stops early).
2. The top level is located without parsing the whole document: a bare array, or the object's
   ``"traceEvents"`` key. The keys around the array (before and after it, any order) are parsed on
   their own as the metadata.
3. The event array is cut at event boundaries (``}`` ``,`` ``{`` between two events) into pieces of
   ~8 MB, each parsed with one ``orjson.loads`` and handed to the column builder, then freed. A cut
   that falls inside a nested value makes the piece invalid JSON, so it is widened to the next boundary.
4. A piece that is invalid for another reason goes to the lenient lane: event by event, with repairs
   for the known Kineto bugs (unescaped ``"`` in names, bare ``inf``/``nan``, raw control characters,
   invalid UTF-8). A file cut off mid-write keeps every complete event. Every repair is a warning.

The GC is paused while parsing: the parsed dicts are acyclic and short-lived.
"""

from __future__ import annotations

import bisect
import gc
import os
import re
import stat as _stat

from ..errors import GapscopeError
from .build import ColumnBuilder, PieceBuilder, merge_parts
from .model import TraceModel
from .stream import SNIFF, TraceError, gunzip, sniff, trailer
from .stream import human_size as _human
from .stream import not_a_trace as _err
from .stream import skip_ws as _skip_ws

try:
    import orjson as _orjson

    _loads = _orjson.loads
except ImportError:  # pragma: no cover - GPU nodes with only torch
    _orjson = None
    import json as _json_mod

    def _loads(b):
        # json.loads raises UnicodeDecodeError on bad UTF-8: decode leniently first
        return _json_mod.loads(bytes(b).decode("utf-8", "replace"))


import json as _json

JSONDecodeError = _json.JSONDecodeError  # orjson.JSONDecodeError subclasses it

DEFAULT_MAX_SIZE = 8 << 30
CHUNK = 8 << 20  # parsed dicts take ~8x their JSON: 64 MB transient per piece
_READ_BLOCK = 1 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_NONFINITE = re.compile(rb"(?<=[:\[,])(\s*)-?(?:Infinity|inf|NaN|nan|Inf)(?=\s*[,\]}])")
_QUOTE_END = re.compile(rb'"(?=\s*(?:[,}\]]|$))')
_MAX_REPAIRS = 64
_MAX_MERGE = 64 << 20  # a single event larger than this is not an event we can use
# A cut inside a nested value is fixed by taking the next boundary too; a value that never closes
# (damage) would make that quadratic, so both are bounded and the damaged event is skipped instead.
_MAX_WIDEN = 8
_MAX_MERGE_SEGMENTS = 256


def parse_size(value) -> int:
    """``--max-size`` value: int bytes, or a string with an optional K/M/G/T suffix (powers of 1024)."""
    if value is None:
        return DEFAULT_MAX_SIZE
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise GapscopeError(f"--max-size must be positive, not {value}")
        return value
    s = str(value).strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    if s and s[-1] in "KMGT":
        mult = 1 << (10 * ("KMGT".index(s[-1]) + 1))
        s = s[:-1]
    try:
        n = float(s)
    except ValueError:
        raise GapscopeError(f"--max-size: cannot read {value!r} (use e.g. 512M or 8G)") from None
    if not n > 0 or n * mult >= 2**63:
        raise GapscopeError(f"--max-size must be a positive size, not {value!r}")
    return int(n * mult)


def check_file(path: str) -> os.stat_result:
    """stat ``path`` and refuse anything that is not a readable regular file, before opening it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if _stat.S_ISDIR(st.st_mode):
        raise TraceError(f"{path}: is a directory, not a trace file")
    if not _stat.S_ISREG(st.st_mode):
        raise TraceError(f"{path}: not a regular file (a pipe, socket or device cannot be read as a trace)")
    return st


def read_bytes(path: str, limit: int = DEFAULT_MAX_SIZE) -> tuple[bytes | bytearray, list[str], bool]:
    """The uncompressed bytes of ``path``, warnings, and whether it was gzip."""
    warnings: list[str] = []
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with f:
        try:
            head = f.read(2)
            if head != b"\x1f\x8b":
                size = os.fstat(f.fileno()).st_size
                if size > limit:
                    raise TraceError(
                        f"{path}: is {_human(size)}, past the limit of {_human(limit)}; raise it with --max-size"
                    )
                f.seek(0)
                sniff(path, f.read(SNIFF))  # junk is refused before the whole file is read
                f.seek(0)
                return f.read(), warnings, False  # one buffer: head + rest would copy it all
            return gunzip(path, f, head, limit, warnings), warnings, True
        except OSError as exc:
            raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


# ---------------------------------------------------------------------------------------- parsing
def _char_to_byte(text: bytes, pos: int) -> int:
    """JSON error positions count characters; convert one to a byte offset in ``text``."""
    if text.isascii():
        return pos
    try:
        return len(text.decode("utf-8", "replace")[:pos].encode("utf-8", "replace"))
    except Exception:  # pragma: no cover - defensive
        return pos


_CLOSE = re.compile(rb"\s*,?\s*\]")
_TRAILER = re.compile(rb"\s*(?:$|\}|,\s*\")")


def _looks_like_trailer(data, after: int) -> bool:
    """Whether data[after:] can follow the event array: nothing, the object's end, or more keys."""
    return _TRAILER.match(bytes(data[after : after + 256])) is not None


def _last_boundary(data, lo: int, n: int):
    """(end, next) of the last event boundary in data[lo:n], searched in a window from the end."""
    w = 1 << 16
    while True:
        a = max(lo, n - w)
        last = None
        for last in _BOUNDARY.finditer(data, a, n):
            pass
        if last is not None:
            return last.start() + 1, last.end() - 1
        if a == lo:
            return None
        w <<= 2


class _Stats:
    def __init__(self):
        self.quotes = 0
        self.nonfinite = 0
        self.control = 0
        self.utf8 = 0
        self.skipped = 0
        self.deep = 0  # values nested past the parser's depth limit (orjson: 1024 levels)
        self.truncated = False
        self.kept_events = 0

    def absorb(self, other: "_Stats") -> None:
        """Add the repair counts of ``other`` (one event's)."""
        for k in ("quotes", "nonfinite", "control", "utf8", "deep"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


def _repair_one(text: bytes, stats: _Stats, limit: int = _MAX_REPAIRS):
    """Parse one JSON value (an event, a metadata object), repairing known damage.

    Returns ``("ok", value, None)``; ``("trail", value, tail)`` when a complete value is followed by
    more text (``tail``, unchanged from the input's end); ``("eof", None, None)`` when the text ends
    before the value does; ``("bad", None, None)`` when it cannot be repaired."""
    tried_utf8 = tried_nonfinite = False
    for _ in range(limit):
        try:
            return "ok", _loads(text), None
        except RecursionError:
            stats.deep += 1
            return "bad", None, None
        except JSONDecodeError as exc:
            msg = exc.msg or ""
            if "recursion" in msg.lower() or "depth" in msg.lower():
                stats.deep += 1
                return "bad", None, None
            bpos = _char_to_byte(text, exc.pos)
            if msg.startswith(("unexpected content after document", "Extra data")):
                tail = text[bpos:]
                try:
                    return "trail", _loads(text[:bpos]), tail
                except (JSONDecodeError, RecursionError):
                    return "bad", None, None
            if "UTF-8" in msg or "utf-8" in msg.lower() or "surrogate" in msg:
                if tried_utf8:
                    return "bad", None, None
                tried_utf8 = True
                stats.utf8 += 1
                text = text.decode("utf-8", "replace").encode("utf-8")
                continue
            if "recursion" in msg.lower():
                return "bad", None, None
            if (bpos >= len(text.rstrip()) and ("end" in msg or "Expecting" in msg)) or msg.startswith(
                "Unterminated string"  # the json module reports where the string began
            ):
                return "eof", None, None
            if "control character" in msg:
                stats.control += 1
                j = min(bpos, len(text) - 1)
                if text[j] < 0x20:
                    text = text[:j] + b" " + text[j + 1 :]
                    continue
                # stdlib json reports the string's start: blank every raw control character
                text = re.sub(rb"[\x00-\x1f]", b" ", text)
                continue
            if not tried_nonfinite and _NONFINITE.search(text):
                tried_nonfinite = True
                text, k = _NONFINITE.subn(rb"\1null", text)
                stats.nonfinite += k
                continue
            # an unescaped quote closed a string early: the error is just after the early close.
            q0 = text.rfind(b'"', 0, bpos)
            if q0 <= 0:
                return "bad", None, None
            m = _QUOTE_END.search(text, bpos)
            if m is None:
                return "bad", None, None
            q1 = m.start()
            if text.count(b"\n", q0, q1):
                return "bad", None, None  # never reach across lines: that is not one name with a quote
            # q0 is the early close; every quote from it up to the real close q1 belongs to the string
            inner = text[q0:q1].replace(b'\\"', b'"').replace(b'"', b'\\"')
            text = text[:q0] + inner + text[q1:]
            stats.quotes += 1
            continue
    return "bad", None, None


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
        _clean_region(data, pos, a_end, self.b)
        self.split_units = len(self.b.units)
        self._events_serial(tail)
        self.worker_part = job.result(b_start, b_end)

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
                text = b"[" + data[pos:end] + b"]"
                added = False
                try:
                    self.b.add_bytes(text, _loads)
                    added = True
                    exc = None
                except RecursionError:
                    exc = None
                except JSONDecodeError as e:
                    exc = e
                if added:
                    del text
                    pos = nxt
                    if end == n:  # the array never closed: the file ended exactly after an event
                        self.stats.truncated = True
                        return
                    break
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


def parse_bytes(path: str, data, job: _Job | None = None) -> TraceModel:
    """Build the model from the (uncompressed) bytes of a trace. With ``job`` (a worker parsing the second
    half of the event array, see ``_Job``), the two halves are parsed at once and merged; when either half
    is anything but plain JSON events, the worker's part is dropped and the whole trace is parsed here."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        if job is not None:
            try:
                model = _parse_split(path, data, job)
            except _Unclean:
                model = None
            finally:
                job.close()
            if model is not None:
                return model
        b = ColumnBuilder(path)
        r = _Reader(path, data, b)
        r.run()
        return _finish(path, r, b)
    finally:
        if gc_was:
            gc.enable()


def _parse_split(path: str, data, job: _Job) -> TraceModel:
    b = PieceBuilder(path)
    r = _Reader(path, data, b)
    r.job = job
    r.run()
    if r.worker_part is None:
        raise _Unclean()
    own = b.export()
    k = r.split_units
    part = r.worker_part
    g = merge_parts(path, [(own, 0, k), (part, 0, len(part["units"])), (own, k, len(own["units"]))])
    del own, part
    r.worker_part = None
    r.b = g
    return _finish(path, r, g)


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


# ------------------------------------------------------------------------------ parallel path
#: plain (not gzip) trace files at least this big are parsed by two processes (None: never)
PARALLEL_MIN: int | None = 64 << 20
#: models with at least this many events have their cache entry written by a thread
BACKGROUND_CACHE_MIN = 100_000
#: where the worker's part starts, as a fraction of the file. The parent also merges and sorts, but the worker
#: reads its part from the file in pieces and sends its columns back: measured at 100 MB, alone and in the
#: explorer (which draws meanwhile), 0.5-0.6 gave the same time within the noise of this machine, and 0.44 or
#: 0.38 left the parent waiting for the worker
SPLIT_AT = 0.5


class _Unclean(Exception):
    """The parallel path met something it does not handle (damage, an odd layout): parse serially."""


def _clean_region(data, a: int, b: int, builder: ColumnBuilder) -> None:
    """Events in data[a:b] (``a`` at an event's ``{``, ``b`` just after an event's ``}``) in ~CHUNK pieces,
    as plain JSON only."""
    pos = a
    while pos < b:
        end, nxt = b, b
        if pos + CHUNK < b:
            m = _BOUNDARY.search(data, pos + CHUNK, b)
            if m is not None:
                end, nxt = m.start() + 1, m.end() - 1
        widened = 0
        while True:
            try:
                builder.add_bytes(b"[" + data[pos:end] + b"]", _loads)
                break
            except (JSONDecodeError, RecursionError):
                if end >= b or widened >= _MAX_WIDEN:
                    raise _Unclean() from None
                widened += 1  # the cut fell inside a nested value: take the next boundary
                m = _BOUNDARY.search(data, end + 1, b)
                end, nxt = (m.start() + 1, m.end() - 1) if m is not None else (b, b)
        pos = nxt


def _stream_part(f, split: int, path: str):
    """The worker's part, read from the file in pieces: events from the first boundary at or after byte
    ``split`` up to the last boundary of the file. Returns (start, end, exported PieceBuilder) or None."""
    f.seek(split)
    buf = f.read(CHUNK)
    base = split
    eof = not buf
    m = _BOUNDARY.search(buf)
    while m is None and not eof:
        if len(buf) >= 4 * CHUNK:
            return None  # no event boundary in 4 pieces' worth (a run of whitespace?): the parent parses it all
        more = f.read(CHUNK)
        eof = not more
        buf += more
        m = _BOUNDARY.search(buf)
    if m is None:
        return None
    start = base + m.end() - 1
    buf = buf[m.end() - 1 :]
    base = start
    b = PieceBuilder(path)
    last_end = None
    searched = CHUNK
    while True:
        while not eof and len(buf) < CHUNK + _READ_BLOCK:
            more = f.read(CHUNK)
            eof = not more
            buf += more
        if not eof:
            # where to cut is free (any boundary will do), so each byte is searched once: a boundary across the
            # edge of what was read only moves the cut to a later one
            m = _BOUNDARY.search(buf, searched)
            if m is None:
                if len(buf) > _MAX_MERGE:
                    return None  # no boundary in 64 MB: an event this big, or damage: the parent parses it all
                searched = max(CHUNK, len(buf) - 64)
                more = f.read(CHUNK)
                eof = not more
                buf += more
                continue
            searched = CHUNK
            end, nxt = m.start() + 1, m.end() - 1
        else:
            lb = _last_boundary(buf, 0, len(buf))
            if lb is None:  # one event left: the previous piece ended at the file's last boundary
                return None if last_end is None else (start, last_end, b.export())
            end, nxt = lb
        try:
            b.add_bytes(b"[" + buf[:end] + b"]", _loads)
        except (JSONDecodeError, RecursionError):
            return None
        last_end = base + end
        if eof:
            return start, last_end, b.export()
        buf = buf[nxt:]
        base += nxt


def _die_with_parent() -> None:
    """Linux: the worker is killed when the thread that forked it goes (an app that exits mid-load)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - elsewhere the worker ends when it finds the pipe closed
        pass


class _BufReader:
    """A read-only file over the decompressed bytes a worker inherited from its parent (fork: the pages are
    shared, not copied); each piece is copied as it is read, as a file read would."""

    def __init__(self, data) -> None:
        self.mv = memoryview(data)
        self.pos = 0

    def seek(self, pos: int) -> None:
        self.pos = pos

    def read(self, n: int) -> bytes:
        b = bytes(self.mv[self.pos:self.pos + n])
        self.pos += len(b)
        return b


def _worker(conn, path: str, split: int, size: int, mtime_ns: int, data=None) -> None:
    _die_with_parent()
    gc.disable()
    out = None
    try:
        if data is not None:  # a gzip trace, decompressed by the parent before the fork
            out = _stream_part(_BufReader(data), split, path)
        else:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_size == size and st.st_mtime_ns == mtime_ns:
                    out = _stream_part(f, split, path)
    except BaseException:  # noqa: BLE001 - any failure here only means: parse serially
        out = None
    try:
        # the CPU ops' args buffer goes as raw bytes after the pickled rest (no pickled copy of it on either side)
        rbuf = out[2].pop("rbuf") if out is not None else None
        conn.send(out)
        if out is not None:
            conn.send_bytes(rbuf)
    except BaseException:  # noqa: BLE001
        pass
    conn.close()


class _Job:
    """A forked worker that parses the second half of a trace's event array straight from the file (it is
    started before the parent reads the file, so it shares no big buffers with it) and sends back compact
    columns with its own name / args / track tables."""

    def __init__(self, path: str, st: os.stat_result, split: int, data=None):
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self.split = split
        self.recv, send = ctx.Pipe(duplex=False)
        # ``data`` (decompressed gzip) reaches the worker by the fork itself, not through the pipe
        self.proc = ctx.Process(target=_worker, args=(send, path, split, st.st_size, st.st_mtime_ns, data),
                                daemon=True, name="gapscope-load")
        try:
            self.proc.start()
        finally:
            send.close()

    def result(self, start: int, end: int) -> dict:
        try:
            msg = self.recv.recv()
        except (EOFError, OSError):
            raise _Unclean() from None
        if msg is None:
            raise _Unclean()
        try:
            msg[2]["rbuf"] = self.recv.recv_bytes()
        except (EOFError, OSError):
            raise _Unclean() from None
        if msg[0] != start or msg[1] != end:
            raise _Unclean()
        return msg[2]

    def close(self) -> None:
        try:
            if self.proc.is_alive():
                self.proc.terminate()
            self.proc.join(timeout=10)
        except Exception:  # noqa: BLE001 - pragma: no cover
            pass
        self.recv.close()


def _map(path: str, st: os.stat_result):
    """A read-only map of ``path`` when it still has the size seen by ``stat``, else None (read it)."""
    import mmap

    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size != st.st_size:
                return None
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, ImportError):
        return None


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _parallel_ok(size: int, limit: int) -> bool:
    if PARALLEL_MIN is None or _orjson is None or size < PARALLEL_MIN or size > limit:
        return False
    return os.environ.get("GAPSCOPE_LOAD_PARALLEL", "1") != "0" and _cpus() >= 2


def _start_job(path: str, st: os.stat_result, limit: int) -> _Job | None:
    """A worker for the second part of ``path`` when it is big, plain JSON, and there is a second core (the
    calling process parses the first ``SPLIT_AT`` of the file)."""
    if not _parallel_ok(st.st_size, limit):
        return None
    try:
        with open(path, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                return None
        return _Job(path, st, int(st.st_size * SPLIT_AT))
    except (OSError, ValueError, AssertionError, ImportError):  # no fork here, a daemonic process, ...
        return None


def _start_job_on(path: str, st: os.stat_result, data, limit: int) -> _Job | None:
    """A worker for the second part of a gzip trace's decompressed bytes, forked once they are in memory (it
    shares them with this process). Measured on big_100M.json gzipped: 1.64-1.78 s in one process."""
    if not _parallel_ok(len(data), limit):
        return None
    try:
        return _Job(path, st, int(len(data) * SPLIT_AT), data)
    except (OSError, ValueError, AssertionError, ImportError):
        return None


def load_uncached(path: str, max_size=None) -> TraceModel:
    p = os.fspath(path)
    limit = parse_size(max_size)
    st = check_file(p)
    job = _start_job(p, st, limit)
    mapped = None
    try:
        if job is not None:
            # the parent touches only its half (and the array's end): map the file instead of reading it all
            mapped = _map(p, st)
        if mapped is not None:
            data, warnings = mapped, []
        else:
            data, warnings, gz = read_bytes(p, limit)
            if gz and job is None:
                job = _start_job_on(p, st, data, limit)
    except BaseException:
        if job is not None:
            job.close()
        raise
    try:
        model = parse_bytes(p, data, job)
    finally:
        del data
        if mapped is not None:
            try:
                mapped.close()
            except BufferError:  # pragma: no cover - a slice still exported; freed with the last reference
                pass
    if warnings:
        model.warnings[:0] = warnings
    return model


def load(path, *, no_cache: bool = False, max_size=None) -> TraceModel:
    """Load a trace, from the columnar cache when a valid one exists (unless ``no_cache``)."""
    p = os.fspath(path)
    limit = parse_size(max_size)
    st = check_file(p)
    if no_cache:
        return load_uncached(p, limit)
    from . import cache

    model = cache.get(p, st)
    if model is not None:
        return model
    model = load_uncached(p, limit)
    # a big entry is written by a thread: the explorer draws its first frame meanwhile
    cache.put(p, st, model, background=model.n >= BACKGROUND_CACHE_MIN)
    return model
