"""The parallel path: a plain trace file of PARALLEL_MIN bytes or more is parsed by two processes. A forked
worker (``_Job``) parses the second part of the event array straight from the file (``_stream_part``) while
the parent parses the first (``reader._Reader``); the parts are merged in file order (``parts.merge_parts``).
Anything unusual in either part (``reader._Unclean``) drops the worker's part: the parent parses it all."""

from __future__ import annotations

import gc
import os

from .model import TraceModel
from .parts import PieceBuilder, merge_parts
from . import reader as _reader  # _reader.CHUNK: the piece size, read when used (tests shrink it)
from .reader import _MAX_MERGE, _READ_BLOCK, _finish, _Reader, _Unclean
from .repair import _BOUNDARY, JSONDecodeError, _last_boundary, _loads, _orjson

#: plain (not gzip) trace files at least this big are parsed by two processes (None: never)
PARALLEL_MIN: int | None = 64 << 20
#: where the worker's part starts, as a fraction of the file. The parent also merges and sorts, but the worker
#: reads its part from the file in pieces and sends its columns back: measured at 100 MB, alone and in the
#: explorer (which draws meanwhile), 0.5-0.6 gave the same time within the noise of this machine, and 0.44 or
#: 0.38 left the parent waiting for the worker
SPLIT_AT = 0.5


def _parse_split(path: str, data, job: _Job, meter=None) -> TraceModel:
    b = PieceBuilder(path)
    r = _Reader(path, data, b)
    r.job = job
    if meter is not None:
        r.tick = meter.ticker(r, job)
        r.piece = min(_reader.CHUNK, meter.piece)  # the explorer draws meanwhile: shorter holds of the GIL
    r.run()
    if meter is not None:
        meter.building()
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


def _stream_part(f, split: int, path: str, counters=None):
    """The worker's part, read from the file in pieces: events from the first boundary at or after byte
    ``split`` up to the last boundary of the file. Returns (start, end, exported PieceBuilder) or None.
    ``counters`` (shared with the parent): bytes read and events decoded so far, for its progress bar."""
    f.seek(split)
    buf = f.read(_reader.CHUNK)
    base = split
    eof = not buf
    m = _BOUNDARY.search(buf)
    while m is None and not eof:
        if len(buf) >= 4 * _reader.CHUNK:
            return None  # no event boundary in 4 pieces' worth (a run of whitespace?): the parent parses it all
        more = f.read(_reader.CHUNK)
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
    searched = _reader.CHUNK
    while True:
        while not eof and len(buf) < _reader.CHUNK + _READ_BLOCK:
            more = f.read(_reader.CHUNK)
            eof = not more
            buf += more
        if not eof:
            # where to cut is free (any boundary will do), so each byte is searched once: a boundary across the
            # edge of what was read only moves the cut to a later one
            m = _BOUNDARY.search(buf, searched)
            if m is None:
                if len(buf) > _MAX_MERGE:
                    return None  # no boundary in 64 MB: an event this big, or damage: the parent parses it all
                searched = max(_reader.CHUNK, len(buf) - 64)
                more = f.read(_reader.CHUNK)
                eof = not more
                buf += more
                continue
            searched = _reader.CHUNK
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
        if counters is not None:
            counters[0], counters[1] = last_end - split, b.n_added
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


def _worker(conn, path: str, split: int, size: int, mtime_ns: int, data=None, counters=None) -> None:
    _die_with_parent()
    gc.disable()
    out = None
    try:
        if data is not None:  # a gzip trace, decompressed by the parent before the fork
            out = _stream_part(_BufReader(data), split, path, counters)
        else:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_size == size and st.st_mtime_ns == mtime_ns:
                    out = _stream_part(f, split, path, counters)
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
        #: bytes read and events decoded by the worker so far (written by it, read for a progress bar)
        self.counters = ctx.RawArray("q", 2)
        # ``data`` (decompressed gzip) reaches the worker by the fork itself, not through the pipe
        self.proc = ctx.Process(target=_worker,
                                args=(send, path, split, st.st_size, st.st_mtime_ns, data, self.counters),
                                daemon=True, name="gapscope-load")
        try:
            self.proc.start()
        finally:
            send.close()

    def result(self, start: int, end: int, tick=None) -> dict:
        """The worker's part (its first and last event must be at ``start`` and ``end``); while it is not in,
        ``tick(start)`` every 0.1 s (a progress bar reads the worker's counters meanwhile)."""
        try:
            if tick is not None:
                while not self.recv.poll(0.1):
                    tick(start)
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
