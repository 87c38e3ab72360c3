"""Synchronisations the user's code asks for itself (``UserSyncs``): ``torch.cuda.synchronize()``,
``torch.cuda.Event.synchronize()``, ``Stream.synchronize()``, called from a frame of the user's own code with no aten
op around the synchronising runtime call (a ``.item()`` or ``.cpu()`` is an op: the ``sync`` cause's).

For each such call: the *site* (the outermost Python frame around the call that launches no GPU work: the call with
the code that goes with it, e.g. a timing context manager's ``__enter__`` / ``__exit__`` with its clock reads), the
frame that called the site (a per-layer wrapper), whether the site reads a clock (a timer), and the frame a finding
names: the site's caller when it is the user's own code, else the frame of the user's code that called the
synchronisation API (the first frame above torch's own). Removing the call removes the site: the
usual fix, "drop the timer or time with CUDA events", takes its host code with it.

Without Python stacks no frame says who called the synchronisation: nothing is found then. The result is a property
of the trace, kept on the model for the next analysis of it."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..trace.model import Kind, TrackKind
from .intervals import member, uniq

#: the built-ins that read a clock: a site holding one around its synchronisation is a timer
CLOCKS = re.compile(r"^<built-in (?:function|method) (?:perf_counter|perf_counter_ns|time|time_ns|monotonic"
                    r"|monotonic_ns|process_time|process_time_ns|elapsed_time)\b")

_OP, _RT, _DRV, _PY = int(Kind.CPU_OP), int(Kind.RUNTIME), int(Kind.DRIVER), int(Kind.PYTHON)


@dataclass(frozen=True)
class UserSyncs:
    """One row per synchronising call made from the user's code: the call, its thread, the frame a finding names
    (event: see the module docstring), the site's interval (the code around it that launches nothing), the frame
    that called the site (event, or -1) and whether the site reads a clock."""
    call: np.ndarray
    thread: np.ndarray
    frame: np.ndarray
    site_s: np.ndarray
    site_e: np.ndarray
    caller: np.ndarray
    timer: np.ndarray

    @property
    def n(self) -> int:
        return int(self.call.size)

    def select(self, keep) -> "UserSyncs":
        keep = np.asarray(keep)
        return UserSyncs(*(getattr(self, k)[keep] for k in ("call", "thread", "frame", "site_s", "site_e", "caller",
                                                              "timer")))


def _empty() -> UserSyncs:
    z = np.zeros(0, np.int64)
    return UserSyncs(z, z, z, z, z, z, np.zeros(0, bool))


def _torch_frame(name: str) -> bool:
    """A frame of torch itself or a built-in: the synchronisation API's own layers, above which its caller sits."""
    from .names import builtin_name

    return builtin_name(name) is not None or name.startswith("torch/") or "/torch/" in name.split("(", 1)[0]


def user_syncs(model, flags, stacks) -> UserSyncs:
    """The trace's synchronising calls made from the user's code (see the module docstring), kept on the model."""
    got = model.__dict__.get("_user_syncs")
    if got is not None and got[0] is model.ts_ns:
        return got[1]
    u = _user_syncs(model, flags, stacks)
    model.__dict__["_user_syncs"] = (model.ts_ns, u)
    return u


def _maybe_own(m, stacks, calls: list) -> list:
    """The calls ``calls`` under a Python frame of the user's own code (gilholds.own_code), open at the call's start:
    those whose stack (``stacks.stack_at``) can name a caller. All at once over the frames' parent chains, a cheap
    test the stacks of the others need not pass (most synchronising calls of a trace are the library's)."""
    from .gilholds import own_code
    from .thresholds import MAX_CHAIN

    c = np.asarray(calls, np.int64)
    thr, t = m.track[c].astype(np.int64), m.ts_ns[c]
    cur = stacks.innermost("py", thr, t)
    up = stacks.parents("py")
    own_of: dict[int, bool] = {}
    hit = np.zeros(c.size, bool)
    for _ in range(MAX_CHAIN):
        live = cur >= 0
        if not live.any():
            break
        e = cur[live]
        nid = m.name_id[e]
        for k in uniq(nid).tolist():
            if k not in own_of:
                own_of[k] = own_code(m.names[k])
        own = np.array([own_of[k] for k in nid.tolist()], bool)
        hit[np.flatnonzero(live)[own]] = True
        cur[live] = up[e]
    return [i for i, h in zip(calls, hit.tolist()) if h]


def _user_syncs(m, flags, stacks) -> UserSyncs:
    from .gilholds import own_code
    from .intervals import name_ids

    if m.n == 0:
        return _empty()
    cpu = np.array([t.kind is TrackKind.CPU for t in m.tracks] + [False], bool)
    syn = np.flatnonzero(flags["sync_rt"][name_ids(m)] & member(m.kind, (_RT, _DRV)) & cpu[m.track])
    if syn.size == 0:
        return _empty()
    # no aten op around the call (the cpu family's parents: ops, ranges, runtime calls)
    keep = []
    for i in syn.tolist():
        p = int(m.parent[i])
        while p >= 0 and int(m.kind[p]) != _OP:
            p = int(m.parent[p])
        if p < 0:
            keep.append(i)
    keep = _maybe_own(m, stacks, keep)
    if not keep:
        return _empty()
    L = m.launch[m.launch >= 0]
    launch_ts = {int(t): np.sort(m.ts_ns[L[m.track[L] == t]]) for t in uniq(m.track[L]).tolist()} if L.size else {}
    py = np.flatnonzero(m.kind == _PY)
    clock = np.array([bool(CLOCKS.match(n)) for n in m.names], bool)
    clocks = py[clock[m.name_id[py]]]
    clock_ts = {int(t): np.sort(m.ts_ns[clocks[m.track[clocks] == t]]) for t in uniq(m.track[clocks]).tolist()}
    rows = []
    for i in keep:
        t, ts = int(m.track[i]), int(m.ts_ns[i])
        frames = [f for f in stacks.stack_at(t, ts) if f.kind == "python"]
        # the caller: the first frame above the synchronisation API's own (torch's frames, built-ins)
        k = len(frames) - 1
        while k >= 0 and _torch_frame(frames[k].name):
            k -= 1
        if k < 0 or not own_code(frames[k].name):
            continue
        lt = launch_ts.get(t, np.zeros(0, np.int64))
        site_s, site_e, caller = ts, ts + int(m.dur_ns[i]), -1
        for j in range(len(frames) - 1, -1, -1):
            e = frames[j].event
            s0, e0 = int(m.ts_ns[e]), int(m.ts_ns[e] + m.dur_ns[e])
            if np.searchsorted(lt, e0, side="left") > np.searchsorted(lt, s0, side="left"):
                caller = e
                break
            site_s, site_e = s0, e0
        ct = clock_ts.get(t, np.zeros(0, np.int64))
        timer = bool(np.searchsorted(ct, site_e, side="left") > np.searchsorted(ct, site_s, side="left"))
        # the frame a person changes: the user's code that calls the site (a per-layer wrapper, whose timer's
        # enter and exit are two lines of one generator) when it is theirs, else the code that called the API
        frame = caller if caller >= 0 and own_code(m.names[m.name_id[caller]]) else frames[k].event
        rows.append((i, t, frame, site_s, site_e, caller, timer))
    if not rows:
        return _empty()
    cols = list(zip(*rows))
    return UserSyncs(*(np.array(c, np.int64) for c in cols[:6]), np.array(cols[6], bool))
