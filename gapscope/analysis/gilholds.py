"""When another Python thread of the process held the GIL (``Holds``), from the trace alone.

CPython runs one thread's bytecode at a time. A launching thread that wants the GIL back (after an op released it,
or on the interpreter's forced switch) waits while another thread runs Python: a metrics thread serialising JSON, a
logging or checkpointing thread, a C call that does not release the GIL (the JSON encoder, a regex, a pickle). The
profiler does not record waits for the GIL, but it does record every Python call of every thread (``with_stack``),
and a Python call starts and returns only on a thread holding the GIL.

A thread T *held* the GIL over an interval when, there, T was inside a Python frame (its innermost event: not an aten
op or runtime call, which run with the GIL released), that frame is not one that blocks with the GIL released
(``time.sleep``, a lock's ``acquire``, ``Condition.wait``, ``queue.get``, ``select``: ``RELEASES``), and no other
thread of the process started or returned from a Python call inside the interval (one did: then T was not running
then, whatever its open frame says; a thread parked in ``Event.wait`` since before the window shows one open frame
across the whole window, crossed by thousands of the launching thread's calls). The intervals are the pieces between
T's own event boundaries, each judged on its own, so a thread that runs Python for a while and then hands over loses
only the piece where the hand-over happened.

Only threads of a process in which another thread that runs Python (it recorded Python calls) launched GPU work are
looked at, and only such a launching thread is said to wait: the GIL matters to a launching thread that runs Python
(a C++ worker, such as the autograd engine's device thread, launches without it). The result is a property of the
trace, kept on the model for the next analysis of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..trace.model import Kind, TrackKind
from .intervals import Coverage, isin, member, union, uniq

#: frames that block with the GIL released: built-ins (sleep, lock and condition waits, I/O multiplexing, socket and
#: file reads) and the standard library's blocking calls whose own time is the wait inside them
RELEASES = re.compile(
    r"^<built-in (?:function|method) (?:sleep|acquire|acquire_lock|wait|select|poll|epoll|kqueue|control|recv"
    r"|recv_into|recvfrom|recvfrom_into|accept|connect|read|readinto|readline|write|sendall|send|waitpid|getaddrinfo"
    r"|_wait_for_tstate_lock|run_backward|_cuda_synchronize)\b"
    r"|(?:^|/)threading\.py\(\d+\): (?:wait|wait_for|join|_wait_for_tstate_lock|acquire)$"
    r"|(?:^|/)queue\.py\(\d+\): (?:get|put|join)$"
    r"|(?:^|/)selectors\.py\(\d+\): select$"
    r"|(?:^|/)socket\.py\(\d+\): (?:readinto|accept|recv_into)$"
    r"|(?:^|/)subprocess\.py\(\d+\): (?:wait|_wait|communicate|_communicate)$"
    r"|(?:^|/)concurrent/futures/_base\.py\(\d+\): (?:result|wait|as_completed)$"
    r"|(?:^|/)multiprocessing/(?:connection|queues|pool)\.py\(\d+\): (?:recv|_recv|poll|_poll|get|wait)$"
)

_PY, _OP, _RT, _DRV, _ANN = (int(k) for k in (Kind.PYTHON, Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER, Kind.ANNOTATION))


@dataclass
class Holds:
    """The GIL-holding intervals of every thread that can hold it against a launching thread: per holder thread
    (a CPU track) sorted disjoint [start, end) arrays; ``pid`` of each CPU track."""
    by_thread: dict = field(default_factory=dict)  # track -> (starts, ends)
    pid: dict = field(default_factory=dict)  # track -> pid
    #: the CPU tracks that recorded Python calls: only such a thread waits for the GIL (a C++ worker, such as the
    #: autograd engine's device thread, launches without it)
    py_threads: frozenset = frozenset()
    #: holder -> its holds as a Coverage, made when first asked
    coverage: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def holders(self) -> list[int]:
        return sorted(t for t, (s, _) in self.by_thread.items() if s.size)

    def intervals(self, holder: int, a: int | None = None, b: int | None = None):
        """(starts, ends) of ``holder``'s holds, clipped to [a, b) when given."""
        s, e = self.by_thread.get(int(holder), (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        if a is None:
            return s, e
        keep = (e > a) & (s < b)
        return np.maximum(s[keep], a), np.minimum(e[keep], b)

    def _cov(self, holder: int) -> Coverage:
        c = self.coverage.get(holder)
        if c is None:
            c = self.coverage[holder] = Coverage(*self.by_thread[holder])
        return c

    def per_holder(self, thread, a, b) -> dict[int, np.ndarray]:
        """holder -> ns of [a, b) it held the GIL, for each (thread, a, b): only holders of ``thread``'s process
        other than ``thread`` itself (0 elsewhere)."""
        thread = np.asarray(thread, np.int64)
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        tpid = [self.pid.get(int(t)) for t in thread.tolist()]
        out = {}
        for h in self.holders:
            hp = self.pid.get(h)
            ok = np.array([p == hp and int(t) in self.py_threads for p, t in zip(tpid, thread.tolist())], bool) & \
                (thread >= 0) & (thread != h) if thread.size else np.zeros(0, bool)
            ns = np.zeros(thread.shape, np.int64)
            if ok.any():
                ns[ok] = self._cov(h).covered(a[ok], b[ok])
            out[h] = ns
        return out

    def by_others(self, thread, a, b) -> np.ndarray:
        """ns of [a, b) during which another thread of ``thread``'s process held the GIL (holds of several
        threads never overlap: one runs at a time)."""
        thread = np.asarray(thread, np.int64)
        tot = np.zeros(thread.shape, np.int64)
        for ns in self.per_holder(thread, a, b).values():
            tot += ns
        return tot


def releasing_names(names: list[str]) -> np.ndarray:
    """Per interned name: a frame that blocks with the GIL released (``RELEASES``)."""
    return np.array([bool(RELEASES.search(n)) for n in names], dtype=bool)


def holds(model, stacks) -> Holds:
    """The GIL holds of ``model``'s threads (see the module docstring), kept on the model."""
    got = model.__dict__.get("_gil_holds")
    if got is not None and got[0] is model.ts_ns:
        return got[1]
    h = _holds(model, stacks)
    model.__dict__["_gil_holds"] = (model.ts_ns, h)
    return h


def _holds(m, stacks) -> Holds:
    cpu = {t.id: t.pid for t in m.tracks if t.kind is TrackKind.CPU}
    if not cpu or m.n == 0:
        return Holds({}, cpu)
    py = np.flatnonzero(m.kind == _PY)
    py = py[isin(m.track[py], list(cpu))] if py.size else py
    if py.size == 0:
        return Holds({}, cpu)
    py_threads = uniq(m.track[py]).tolist()
    pyset = frozenset(int(t) for t in py_threads)
    by_pid: dict = {}
    for t in py_threads:
        by_pid.setdefault(cpu[t], []).append(t)
    L = m.launch[m.launch >= 0]
    launchers = set(uniq(m.track[L]).tolist()) if L.size else set()
    # a holder matters only against another Python thread of its process that launched GPU work
    cand = [t for ts in by_pid.values() if len(ts) > 1 for t in ts if any(o != t and o in launchers for o in ts)]
    if not cand:
        return Holds({}, cpu, pyset)
    rel = releasing_names(m.names)
    end = m.ts_ns + m.dur_ns
    # each Python event's process, as a small code (pids may be strings)
    codes = {p: k for k, p in enumerate(dict.fromkeys(cpu.values()))}
    tcode = np.array([codes.get(cpu.get(k), -1) for k in range(len(m.tracks))], np.int64)
    py_code = tcode[m.track[py]]
    out = {}
    for t in cand:
        sl = m.track_slice(t)
        ev = np.arange(sl.start, sl.stop, dtype=np.int64)
        ev = ev[member(m.kind[ev], (_PY, _OP, _RT, _DRV, _ANN))]
        if ev.size == 0:
            continue
        b = uniq(np.concatenate((m.ts_ns[ev], end[ev])))
        if b.size <= 1:
            continue
        lo, hi = b[:-1], b[1:]
        mid = lo + (hi - lo) // 2
        th = np.full(mid.size, t, np.int64)
        p = stacks.innermost("py", th, mid)
        c = stacks.innermost("cpu", th, mid)
        pp, cc = np.maximum(p, 0), np.maximum(c, 0)
        running = (p >= 0) & ~rel[m.name_id[pp]] & ((c < 0) | (m.kind[cc] == _ANN) | (m.ts_ns[pp] > m.ts_ns[cc]))
        if not running.any():
            continue
        # another thread of the process started or returned from a Python call inside the piece: T did not hold it
        others = py[(m.track[py] != t) & (py_code == tcode[t])]
        bd = np.sort(np.concatenate((m.ts_ns[others], end[others])))
        crossed = np.searchsorted(bd, hi, side="left") > np.searchsorted(bd, lo, side="right")
        keep = running & ~crossed
        s, e = union(lo[keep], hi[keep])
        if s.size:
            out[int(t)] = (s, e)
    return Holds(out, cpu, pyset)


@dataclass(frozen=True)
class Holder:
    """One thread's holds inside a window: its track and tid, the ns it held the GIL there, that share of the window
    (%), and the frames it ran while holding it, credited with their time (the call the thread's own code made:
    ``json/__init__.py(231): dumps`` rather than the encoder's insides), largest first."""
    track: int
    tid: object
    held_ns: int
    share_pct: float
    frames: tuple  # ((name, ns), ...)


def own_code(name: str) -> bool:
    """A frame of the user's own code: a user frame (names.is_user_frame) of no library the model runs on
    (names.is_library_frame: ``transformers/...``) and outside the standard library, which Kineto writes with
    relative paths too (``json/__init__.py(231): dumps``, ``dataclasses.py(1248): <genexpr>``)."""
    import sys

    from .names import is_library_frame, is_user_frame, parse_frame

    if not is_user_frame(name) or is_library_frame(name):
        return False
    f = parse_frame(name)[0] or ""
    top = f.split("/", 1)[0]
    return (top[:-3] if top.endswith(".py") else top) not in sys.stdlib_module_names


def holder_stack(a, holder: int, t: int) -> tuple[list, list]:
    """The holder's Python stack at ``t``, cut after its innermost frame of the user's own code (the frame a finding
    names), and the frames below it (what that code was running: ``json.dumps`` and the encoder)."""
    frames = [f for f in a.stacks.stack_at(holder, t) if f.kind == "python"]
    own = [j for j, f in enumerate(frames) if own_code(f.name)]
    if not own:
        return frames, []
    return frames[:own[-1] + 1], frames[own[-1] + 1:]


def holders_in(a, lo: int, hi: int, top: int) -> list[Holder]:
    """The holders of analysis ``a``'s trace against its launching threads over [lo, hi), most held first."""
    m, st = a.model, a.stacks
    h = holds(m, st)
    out = []
    for t in h.holders:
        s, e = h.intervals(t, lo, hi)
        ns = int((e - s).sum())
        if ns <= 0:
            continue
        mid = s + (e - s) // 2
        inner = st.innermost("py", np.full(mid.size, t, np.int64), mid)
        credit: dict[str, int] = {}
        memo: dict[int, str | None] = {}
        for k, p in enumerate(inner.tolist()):
            if p < 0:
                continue
            name = memo.get(p)
            if p not in memo:
                mine, below = holder_stack(a, t, int(mid[k]))
                pick = below[0] if below else (mine[-1] if mine else None)
                name = memo[p] = pick.name if pick is not None else None
            if name:
                credit[name] = credit.get(name, 0) + int(e[k] - s[k])
        fr = tuple(sorted(credit.items(), key=lambda kv: (-kv[1], kv[0]))[:top])
        out.append(Holder(int(t), m.tracks[t].tid, ns, 100.0 * ns / max(hi - lo, 1), fr))
    return sorted(out, key=lambda x: -x.held_ns)


def fix_intervals(a, holder: int | None, threads) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """What taking ``holder``'s Python work off the process gives each launching thread in ``threads`` back: the
    holder's holds (all holders' when None) on that thread, less the thread's own runtime calls there (a launch or a
    synchronising call runs with the GIL released: its time is the thread's own). (start, end, thread) or None."""
    from .intervals import subtract

    m = a.model
    h = holds(m, a.stacks)
    hs = [holder] if holder is not None else h.holders
    S, E, T = [], [], []
    for t in uniq(np.asarray(list(threads), np.int64)).tolist():
        if t < 0:
            continue
        parts = [h.intervals(x) for x in hs if x != t and h.pid.get(x) == h.pid.get(t)]
        if not parts:
            continue
        s, e = union(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        sl = m.track_slice(t)
        ev = np.arange(sl.start, sl.stop, dtype=np.int64)
        rt = ev[member(m.kind[ev], (_RT, _DRV))]
        s, e = subtract(s, e, m.ts_ns[rt], m.ts_ns[rt] + m.dur_ns[rt])
        S.append(s), E.append(e), T.append(np.full(s.size, t, np.int64))
    if not S or not sum(x.size for x in S):
        return None
    return np.concatenate(S), np.concatenate(E), np.concatenate(T)
