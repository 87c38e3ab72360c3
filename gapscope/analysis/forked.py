"""The analysis on two cores: parts of it computed by a forked child of this process (``Forked``), and a list of
independent tasks shared between this process and a child (``run_tasks``).

A plain ``os.fork``, the pattern of the loader's worker (gapscope/trace/parallel.py): the child sees the model and the
analysis so far copy-on-write, runs the same code the parent would, and sends back only its results, pickled,
each as soon as it is computed (through a shared memfd, their places through a pipe); it exits with ``os._exit``
(never back into the caller's code, its atexit handlers or its buffers), its stdout and stderr sent to /dev/null (it
never prints). Whatever goes wrong on the child's side (an exception, a death, no answer within
``CHILD_WAIT_FACTOR`` times the time the parent took meanwhile, at least ``CHILD_WAIT_MIN_S``) only means that the
parent computes that part itself: the results are the same, the child is always reaped (no zombie): when its last
result is taken, when one is missing, or when its owner ends it (``close``; an analysis does when it goes).

Forking is only safe from a process whose other threads hold no lock the child would touch: the caller decides
(``analyze(..., parallel=True)``; the report command does, the explorer, which analyses in a thread, does not).
``GAPSCOPE_ANALYSIS_PARALLEL=0`` turns it off everywhere; traces of fewer than ``ANALYSIS_PARALLEL_MIN_EVENTS``
events are analysed in one process (the fork costs more than it saves), unless it is ``always`` (a check that the
two paths give the same reports on small traces: benchmarks/check_reports_same.py)."""

from __future__ import annotations

import gc
import mmap
import os
import pickle
import select
import signal
import struct
import sys
import time

from ..fsutil import shared_file
from .thresholds import (ANALYSIS_PARALLEL_MIN_EVENTS, CHILD_WAIT_FACTOR, CHILD_WAIT_MIN_S, FORK_FILE_PIECE,
                         FORK_PIPE_PIECE)

#: a task number in the queue of ``run_tasks`` (unsigned 32 bits)
_TOKEN = struct.Struct("<I")
#: where a ``Forked`` child put one value in the shared file: offset, length (0: it failed on that one)
_PLACE = struct.Struct("<QQ")


def parallel_ok(n_events: int) -> bool:
    """Whether an analysis of ``n_events`` events may fork: big enough, a second core, not turned off."""
    env = os.environ.get("GAPSCOPE_ANALYSIS_PARALLEL", "1")
    if env == "0" or (n_events < ANALYSIS_PARALLEL_MIN_EVENTS and env != "always"):
        return False
    if not hasattr(os, "fork"):  # pragma: no cover - not POSIX
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return (os.cpu_count() or 1) > 1


def _quiet() -> None:
    """The child's stdout and stderr to /dev/null, its descriptors and Python's streams (whatever they were
    replaced with): nothing it does is ever printed, and what the parent had buffered is never written twice."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the child ends with os._exit
    except OSError:  # pragma: no cover
        pass


def _trim() -> None:
    """Give the heap's free pages back to the system before a fork (glibc's ``malloc_trim``): pages the child and
    this process no longer share copy-on-write, nor copy into the child's page tables. After a 100 MB load it costs
    1.3 ms and the fork and the analysis after it 6 ms less (big_100M.json: 206 -> 200 ms, median of 6)."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc
            _TRIM = False
    if _TRIM:
        _TRIM(0)


#: glibc's malloc_trim once found (False: none here)
_TRIM = None


def _write_all(fd: int, data: bytes) -> None:
    with memoryview(data) as mv:
        pos = 0
        while pos < len(mv):
            pos += os.write(fd, mv[pos:pos + FORK_PIPE_PIECE])


class Forked:
    """``fns`` computed in order by one forked child; ``result(i)`` is the value of ``fns[i]``, or ``None`` when the
    child failed on it, died or did not answer in time (then the caller computes it). Each ``fn`` must return
    something picklable and not None.

    Each value is sent as soon as it is computed, so that the parent can take the first while the child computes the
    next: the child writes the pickled value into a file shared with the parent (``fsutil.shared_file``: a memfd) and
    only its place (offset, length) into the pipe, a 16-byte record that never fills it, so the child never waits
    for the parent to read."""

    def __init__(self, *fns):
        self.t0 = time.perf_counter()
        self.pid = 0
        self.n = len(fns)
        self._got: list = []  # (offset, length) of each value read so far; length 0: the child failed on it
        self.store = shared_file()
        self.fd, w = os.pipe()
        _trim()
        try:
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.close(self.fd)
                    _quiet()
                    gc.disable()
                    pos = 0
                    for fn in fns:
                        try:
                            out = pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL)
                        except BaseException:  # noqa: BLE001 - any failure only means: the parent computes it
                            out = b""
                        _pwrite_all(self.store, out, pos)
                        _write_all(w, _PLACE.pack(pos, len(out)))
                        pos += -(-len(out) // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
                    code = 0
                finally:
                    os._exit(code)
            self.pid = pid
        except BaseException:
            os.close(self.fd)
            os.close(self.store)
            self.fd = self.store = -1
            raise
        finally:
            os.close(w)

    def _read(self, i: int):
        """Value ``i`` as the child wrote it (a map of the shared file; empty: it failed on it), or None when it did
        not answer in time or died first."""
        waited = time.perf_counter() - self.t0
        deadline = time.perf_counter() + max(CHILD_WAIT_MIN_S, CHILD_WAIT_FACTOR * waited)
        p = select.poll()
        p.register(self.fd, select.POLLIN | select.POLLHUP)
        buf = b""
        while len(self._got) <= i:
            left = deadline - time.perf_counter()
            if left <= 0 or not p.poll(int(left * 1e3) + 1):
                return None
            b = os.read(self.fd, _PLACE.size - len(buf))
            if not b:
                return None
            buf += b
            if len(buf) == _PLACE.size:
                self._got.append(_PLACE.unpack(buf))
                buf = b""
        pos, n = self._got[i]
        # mapped, not read: a read into fresh memory cost 6 ms for the 7.4 MB of the projection's start (its page
        # faults and copies), the map 1 ms less than that in all (big_100M.json)
        return mmap.mmap(self.store, n, prot=mmap.PROT_READ, offset=pos) if n else b""

    def result(self, i: int = 0):
        """The child's value of ``fns[i]``, or None (it failed on it, died, or did not answer in time). The child is
        ended and reaped once the last value is taken, or when one is missing (``close``)."""
        if self.fd < 0 or not 0 <= i < self.n:
            return None
        ok, data = False, None
        try:
            data = self._read(i)
            got = pickle.loads(data) if data else None
            ok = data is not None
            return got
        except Exception:  # noqa: BLE001 - a broken answer: the parent computes it
            return None
        finally:
            if isinstance(data, mmap.mmap):
                try:
                    data.close()  # (what was unpickled from it is a copy)
                except BufferError:  # pragma: no cover - a value still reads the map: it closes when that goes
                    pass
            if not ok or i == self.n - 1:
                self.close()

    def close(self) -> None:
        """End the child (when it still runs) and reap it; close the pipe and the shared file."""
        pid, self.pid = self.pid, 0
        if pid:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            except OSError:  # pragma: no cover - already reaped
                pass
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.store >= 0:
            os.close(self.store)
            self.store = -1


def _pwrite_all(fd: int, data: bytes, pos: int) -> None:
    with memoryview(data) as mv:
        done = 0
        while done < len(mv):
            done += os.pwrite(fd, mv[done:done + FORK_FILE_PIECE], pos + done)


def run_tasks(tasks: list, parallel: bool) -> list:
    """``[t() for t in tasks]``. With ``parallel`` (and two tasks or more), a forked child and this process take
    the tasks in turn from one queue (a pipe of task numbers, each read by one of them), so that neither waits
    while the other has more to do; the child sends back the results of its tasks, and this process computes any
    that the child did not (it failed on one, died, or did not answer in time). Each task runs the same code on
    the same data wherever it runs: the results are the same as in one process."""
    n = len(tasks)
    # the queue is written whole before the fork: no more than a pipe surely holds (PIPE_BUF, its least capacity)
    if not parallel or n <= 1 or n * _TOKEN.size > select.PIPE_BUF:
        return [t() for t in tasks]
    qr, qw = os.pipe()
    try:
        _write_all(qw, b"".join(_TOKEN.pack(i) for i in range(n)))
    finally:
        os.close(qw)  # the queue is full: an empty read is its end

    def take():
        b = os.read(qr, _TOKEN.size)
        return _TOKEN.unpack(b)[0] if len(b) == _TOKEN.size else None

    def child():
        got = {}
        while (i := take()) is not None:
            try:
                got[i] = tasks[i]()
            except BaseException:  # noqa: BLE001 - the parent computes it (and meets the same error there)
                pass
        return got

    out: list = [None] * n
    done = [False] * n
    try:
        job = Forked(child)
    except OSError:  # no fork here: all in this process
        job = None
    try:
        while (i := take()) is not None:
            out[i] = tasks[i]()
            done[i] = True
    finally:
        os.close(qr)
        got = job.result() if job is not None else None
    for i, v in (got or {}).items():
        if not done[i]:
            out[i], done[i] = v, True
    for i in range(n):
        if not done[i]:
            out[i] = tasks[i]()
    return out
