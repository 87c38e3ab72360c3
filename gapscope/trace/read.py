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

import gc
import os
import stat as _stat

from ..errors import GapscopeError
from .build import ColumnBuilder
from .model import TraceModel
from .parallel import _Job, _map, _parse_split, _start_job, _start_job_on
from .reader import _finish, _Reader, _Unclean
from .stream import SNIFF, TraceError, gunzip, sniff
from .stream import human_size as _human

DEFAULT_MAX_SIZE = 8 << 30
#: models with at least this many events have their cache entry written by a thread
BACKGROUND_CACHE_MIN = 100_000


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


def parse_bytes(path: str, data, job: _Job | None = None, meter=None) -> TraceModel:
    """Build the model from the (uncompressed) bytes of a trace. With ``job`` (a worker parsing the second
    half of the event array, see ``_Job``), the two halves are parsed at once and merged; when either half
    is anything but plain JSON events, the worker's part is dropped and the whole trace is parsed here.
    ``meter`` (progressive.Meter) hears how far the reading is; it never changes what is built."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        if job is not None:
            try:
                model = _parse_split(path, data, job, meter)
            except _Unclean:
                model = None
            finally:
                job.close()
            if model is not None:
                return model
            if meter is not None:
                meter.restart()
        b = ColumnBuilder(path)
        r = _Reader(path, data, b)
        if meter is not None:
            r.tick = meter.ticker(r, None)
        r.run()
        if meter is not None:
            meter.building()
        return _finish(path, r, b)
    finally:
        if gc_was:
            gc.enable()


def load_uncached(path: str, max_size=None, *, progress=None, first=None, idle=None) -> TraceModel:
    """Parse ``path`` (no cache). ``progress(LoadProgress)`` hears how far the reading is (after each piece, and
    every 0.1 s while the worker's part is awaited); ``first()`` runs once the worker (if any) has started and
    before this process parses (the explorer draws a preview then); ``idle()`` runs once if this process has
    parsed its part before the worker's is in (the report imports its analysis then). None changes what is
    built."""
    p = os.fspath(path)
    limit = parse_size(max_size)
    st = check_file(p)
    job = _start_job(p, st, limit)
    if job is not None:
        job.idle = idle
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
    meter = None
    try:
        if progress is not None:
            from .progressive import Meter

            meter = Meter(progress, len(data), job)
        if first is not None:
            first()
        model = parse_bytes(p, data, job, meter)
    except BaseException:
        if job is not None:
            job.close()
        raise
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


def load(path, *, no_cache: bool = False, max_size=None, progress=None, first=None, idle=None) -> TraceModel:
    """Load a trace, from the columnar cache when a valid one exists (unless ``no_cache``). ``progress``,
    ``first`` and ``idle``: see ``load_uncached`` (none is called on a cache hit)."""
    p = os.fspath(path)
    limit = parse_size(max_size)
    st = check_file(p)
    if no_cache:
        return load_uncached(p, limit, progress=progress, first=first, idle=idle)
    from . import cache

    model = cache.get(p, st)
    if model is not None:
        return model
    model = load_uncached(p, limit, progress=progress, first=first, idle=idle)
    # a big entry is written by a thread: the explorer draws its first frame meanwhile
    cache.put(p, st, model, background=model.n >= BACKGROUND_CACHE_MIN)
    return model
