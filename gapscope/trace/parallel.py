"""The parallel path: a plain trace file of PARALLEL_MIN bytes or more is parsed by two processes. A forked
worker (``_Job``) parses the second part of the event array straight from the file (``_stream_part``) while
the parent parses the first (``reader._Reader``); the parts are merged in file order (``parts.merge_parts``).
Anything unusual in either part (``reader._Unclean``) drops the worker's part: the parent parses it all."""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import struct

import numpy as np

from ..fsutil import shared_file
from .model import TraceModel
from .parts import PieceBuilder, merge_parts
from . import reader as _reader  # _reader.CHUNK: the piece size, read when used (tests shrink it)
from .reader import _clean_region, _finish, _Reader, _Unclean
from .repair import _BOUNDARY, JSONDecodeError, _last_boundary, _orjson

#: plain (not gzip) trace files at least this big are parsed by two processes (None: never)
PARALLEL_MIN: int | None = 64 << 20
#: where the worker's part starts, as a fraction of the file. The parent also merges and sorts, but the worker
#: reads its part from the file in pieces and sends its columns back: measured at 100 MB, alone and in the
#: explorer (which draws meanwhile), 0.5-0.6 gave the same time within the noise of this machine, and 0.44 or
#: 0.38 left the parent waiting for the worker
SPLIT_AT = 0.5
#: bytes per system call into the pipe, and into the file the worker writes its part into
_PIPE_PIECE = 1 << 20
_FILE_PIECE = 1 << 24
#: each raw array of the worker's part starts on a boundary of this many bytes in that file (a page: each is mapped
#: on its own)
_ALIGN = 1 << 16
#: the length of the worker's pickled header (0: no part, parse serially)
_HEADER = struct.Struct("<Q")


def _parse_split(path: str, data, job: _Job, meter=None) -> TraceModel:
    b = PieceBuilder(path)
    r = _Reader(path, data, b)
    r.job = job
    if meter is not None:
        r.tick = meter.ticker(r, job)
        r.piece = meter.piece_now  # the explorer draws meanwhile: shorter holds of the GIL while it is used
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


def _stream_part(data, split: int, path: str, counters=None):
    """The worker's part of ``data`` (a map of the file, or a gzip trace's decompressed bytes): events from the
    first boundary at or after byte ``split`` up to the last boundary of the file, in pieces like the parent's
    (``reader._clean_region``). Returns (start, end, exported PieceBuilder) or None. ``counters`` (shared with
    the parent): bytes read and events decoded so far, for its progress bar.

    It read the file in pieces before: each piece was copied four times (the read, the join with what was left,
    the slice, the brackets) into fresh memory, ~0.2 s of CPU a 50 MB part more than the parent's part."""
    n = len(data)
    m = _BOUNDARY.search(data, split, min(n, split + 4 * _reader.CHUNK))
    if m is None:
        return None  # no event boundary in 4 pieces' worth (a run of whitespace?): the parent parses it all
    start = m.end() - 1
    lb = _last_boundary(data, start, n)
    if lb is None:
        return None
    end = lb[0]
    b = PieceBuilder(path)
    tick = None
    if counters is not None:
        def tick(pos: int) -> None:
            counters[0], counters[1] = pos - split, b.n_added
    try:
        _clean_region(data, start, end, b, tick)
    except (_Unclean, JSONDecodeError, RecursionError):
        return None
    return start, end, b.export()


def _die_with_parent() -> None:
    """Linux: the worker is killed when the thread that forked it goes (an app that exits mid-load)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - elsewhere the worker ends when it finds the pipe closed
        pass


def _worker(fd: int, store: int, path: str, split: int, size: int, mtime_ns: int, data=None, counters=None) -> None:
    _die_with_parent()
    gc.disable()
    out = None
    try:
        if data is not None:  # a gzip trace, decompressed by the parent before the fork (shared pages)
            out = _stream_part(data, split, path, counters)
        else:
            import mmap

            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_size == size and st.st_mtime_ns == mtime_ns:
                    mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                    try:
                        out = _stream_part(mapped, split, path, counters)
                    finally:
                        try:
                            mapped.close()
                        except BufferError:  # pragma: no cover - freed with the last view
                            pass
    except BaseException:  # noqa: BLE001 - any failure here only means: parse serially
        out = None
    try:
        _send_part(fd, store, out)
    except BaseException:  # noqa: BLE001
        pass
    os.close(fd)


def _flat(arrays: list):
    """One array of ``arrays`` (pieces of one column, all of one dtype), and each piece's length; None when they
    are not of one dtype."""
    if len({a.dtype for a in arrays}) > 1:
        return None
    lens = [int(a.shape[0]) for a in arrays]
    if not arrays:
        return np.zeros(0, np.int64), lens
    return (arrays[0] if len(arrays) == 1 else np.concatenate(arrays)), lens


def _write_all(fd: int, buf) -> None:
    with memoryview(buf) as mv, mv.cast("B") as b:
        pos, n = 0, len(b)
        while pos < n:
            pos += os.write(fd, b[pos : pos + _PIPE_PIECE])


def _places(head_len: int, layout: list) -> list[int]:
    """Where each raw array of the worker's part starts in the shared file: after the header, each on an
    ``_ALIGN``-byte boundary (the parent maps each on its own: a map starts on a page)."""
    out, pos = [], head_len
    for _k, dtype, lens in layout:
        pos = -(-pos // _ALIGN) * _ALIGN
        out.append(pos)
        pos += np.dtype(dtype).itemsize * sum(lens)
    return out


def _send_part(fd: int, store: int, out) -> None:
    """The worker's part, written into the file it shares with the parent (``store``): a small pickled header (ids,
    tables, units, and the layout of what follows), then the columns, the CPU ops' args lengths and their buffer as
    raw bytes (no pickled copy on either side: ``_Job.result`` maps them); then the header's length into the pipe,
    8 bytes (0: no part). The worker never waits for the parent to read: through the pipe, the 23 MB of
    big_100M.json's second half took 10-14 ms of the parent's time, the worker waiting meanwhile."""
    if out is None:
        _write_all(fd, _HEADER.pack(0))
        return
    start, end, part = out
    raw = []
    layout = []
    flats = {k: _flat(v) for k, v in part["cols"].items()}
    if all(f is not None for f in flats.values()):  # else the columns go pickled, in the header
        del part["cols"]
        for k, (a, lens) in flats.items():
            layout.append((k, a.dtype.str, lens))
            raw.append(a)
    rlens = part.pop("rlens")
    layout.append(("rlens", rlens.dtype.str, [int(rlens.shape[0])]))
    raw.append(rlens)
    rbuf = part.pop("rbuf")
    layout.append(("rbuf", "|u1", [len(rbuf)]))
    raw.append(rbuf)
    head = pickle.dumps((start, end, part, layout), protocol=pickle.HIGHEST_PROTOCOL)
    del flats, part
    _pwrite_all(store, head, 0)
    for a, at in zip(raw, _places(len(head), layout)):
        _pwrite_all(store, a, at)
    _write_all(fd, _HEADER.pack(len(head)))


def _pwrite_all(fd: int, buf, at: int) -> None:
    with memoryview(buf) as mv, mv.cast("B") as b:
        pos, n = 0, len(b)
        while pos < n:
            pos += os.pwrite(fd, b[pos : pos + _FILE_PIECE], at + pos)


class _Job:
    """A forked worker that parses the second half of a trace's event array straight from the file (it is
    started before the parent reads the file, so it shares no big buffers with it) and hands back compact
    columns with its own name / args / track tables, through a file both share (a memfd: ``_send_part``); a pipe
    says when they are in.

    A plain ``os.fork`` (Linux, macOS): multiprocessing's Process, Pipe and RawArray cost ~15 ms of imports
    before the parent could start reading (and a file in /dev/shm for the counters)."""

    def __init__(self, path: str, st: os.stat_result, split: int, data=None):
        import mmap

        self.split = split
        self.pid = 0
        #: work for this process while it waits for the worker's part (``result``): set by ``load``'s ``idle``
        self.idle = None
        #: bytes read and events decoded by the worker so far (written by it, read for a progress bar): an
        #: anonymous map, shared with the worker across the fork
        self._shared = mmap.mmap(-1, 16)
        self.counters = np.frombuffer(self._shared, dtype=np.int64)
        #: the file the worker writes its part into (``_send_part``); the pipe says when it is done
        self.store = shared_file()
        self.fd, w = os.pipe()
        try:
            pid = os.fork()
            if pid == 0:  # the worker: ``data`` (decompressed gzip) reaches it by the fork itself
                code = 1
                try:
                    os.close(self.fd)
                    _worker(w, self.store, path, split, st.st_size, st.st_mtime_ns, data, self.counters)
                    code = 0
                finally:
                    os._exit(code)  # never back into the parent's code (nor its atexit handlers, nor its buffers)
            self.pid = pid
        except BaseException:
            os.close(self.fd)
            os.close(self.store)
            self.fd = self.store = -1
            raise
        finally:
            os.close(w)

    def _poll(self):
        p = select.poll()  # not select.select: any descriptor number
        p.register(self.fd, select.POLLIN)
        return p

    def _wait_readable(self, tick, start: int) -> None:
        p = self._poll()
        while not p.poll(100):
            tick(start)

    def result(self, start: int, end: int, tick=None) -> dict:
        """The worker's part (its first and last event must be at ``start`` and ``end``); while it is not in,
        ``tick(start)`` every 0.1 s (a progress bar reads the worker's counters meanwhile). When the part is not in
        yet, ``self.idle()`` (when set: the report's imports of its analysis) runs first, once."""
        fd = self.fd
        idle, self.idle = self.idle, None
        if idle is not None and not self._poll().poll(0):
            idle()
        try:
            if tick is not None:
                self._wait_readable(tick, start)
            head = os.read(fd, _HEADER.size)  # (8 bytes written at once: they come at once)
            if len(head) != _HEADER.size:
                raise _Unclean()
            (size,) = _HEADER.unpack(head)
            if size == 0:
                raise _Unclean()
            import mmap

            got_start, got_end, part, layout = pickle.loads(os.pread(self.store, size, 0))
            if got_start != start or got_end != end:
                raise _Unclean()
            for (k, dtype, lens), at in zip(layout, _places(size, layout)):
                n = sum(lens)  # (an empty array at the file's end was never written: past its length)
                nb = n * np.dtype(dtype).itemsize
                # a private map of each array (writable: a write copies only its page), so that each goes with the
                # last of its views, as the arrays read from the pipe did (one map of all kept the whole part until
                # the model was built: the load's peak 22 MB higher on big_100M.json)
                a = np.frombuffer(mmap.mmap(self.store, nb, access=mmap.ACCESS_COPY, offset=at), dtype=np.dtype(dtype),
                                  count=n) if n else np.zeros(0, dtype)
                if k in ("rlens", "rbuf"):  # the args lengths, and their buffer (as uint8: merge_parts takes views)
                    part[k] = a
                else:
                    offs = np.cumsum([0] + lens).tolist()
                    part.setdefault("cols", {})[k] = [a[i:j] for i, j in zip(offs, offs[1:])]
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            raise _Unclean() from None
        return part

    def close(self) -> None:
        """End the worker (when it still runs) and reap it; close the pipe."""
        pid, self.pid = self.pid, 0
        if pid:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    os.kill(pid, signal.SIGTERM)
                    os.waitpid(pid, 0)
            except OSError:  # pragma: no cover - already reaped
                pass
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.store >= 0:  # (the part's map, when taken, stays while its arrays do)
            os.close(self.store)
            self.store = -1


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
