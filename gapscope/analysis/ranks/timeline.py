"""The collective calls of one rank (``timeline``), and what its issuing thread did between them.

**What a collective is on one rank.** Where the rank ran NCCL kernels, each collective
kernel is one call: it starts when the GPU stream reaches it (the rank's arrival) and ends when every
rank has contributed. Where it ran none (gloo: collectives run on the CPU), each outermost collective
CPU op (``c10d::allreduce_``, ``c10d::barrier``, or a ``record_param_comms`` that is not inside one) is a
call: it starts with the op (arrival), and ends with the ``gloo:*`` range that ran it on the backend's
worker thread (the i-th such range belongs to the i-th op; not the op's own end, which can come much later
on a busy host), or with the op itself when there is none.
Each call has a process group (``Process Group Name`` from the kernel's or ``record_param_comms``'s args,
else the trace's only group) and a collective name (``Collective name``, else from the op name).
Only calls inside the rank's analysis window (by default the measured steps, see window.py) are kept, so
the capture's own barrier before the first step is not counted.

**Between collectives** (``Timeline.own``): for each call, the own time per frame (owntime.py) on the issuing
thread from the end of the previous call on that thread (its completion, every rank's common point; not its
launch, which put the wait inside it into the interval) to this one's launch; None for the first call of a
thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ...trace.model import Kind, TraceModel, TrackKind
from ..intervals import isin, uniq
from ..names import name_flags
from .owntime import own_times

_C10D_RE = re.compile(r"^(?:_?c10d(?:_functional)?::)_*(?P<n>[A-Za-z0-9_]+?)_*$")
_KERNEL_COLL_RE = re.compile(r"^(?:ncclDevKernel_|ncclKernel_)([A-Za-z]+?)(?:_|\(|$)")
_BACKEND_RANGE_RE = re.compile(r"^(gloo|nccl|mpi|ucc):")
#: point-to-point calls: a send on one rank is a recv on its peer, at the same place in the group's order
_P2P = frozenset({"send", "recv", "sendrecv", "isend", "irecv"})


def _order_key(coll: str) -> str:
    return "p2p" if coll in _P2P else coll


def same_job(models: list[TraceModel]) -> bool:
    ranks = [m.rank for m in models]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        return False
    ws = {(m.distributed or {}).get("world_size") for m in models} - {None}
    return len(ws) <= 1


def base_ns(model: TraceModel) -> int:
    b = model.metadata.get("baseTimeNanoseconds")
    return int(b) if isinstance(b, (int, float)) and not isinstance(b, bool) else 0


def first_event_ns(model: TraceModel) -> int:
    """The trace's first event (instants and window markers aside): where its profiler started recording."""
    ok = model.kind != Kind.INSTANT
    return int(model.ts_ns[ok].min()) if ok.any() else 0


# ------------------------------------------------------------------------------------ one rank
@dataclass
class Timeline:
    """The collective calls of one rank, in start order (times in the trace's own ns)."""

    rank: int
    base_ns: int
    side: str  # "gpu" (NCCL kernels) or "cpu" (collective ops: gloo)
    pg: list[str]
    coll: list[str]  # normalised collective name ("allreduce")
    label: list[str]  # what the trace calls it (kernel or op name)
    start: np.ndarray
    end: np.ndarray
    exposed: np.ndarray  # part of the call not overlapped by compute (GPU kernels; CPU: other ops)
    thread: np.ndarray  # track of the CPU call that issued it (-1 unknown)
    t_issue: np.ndarray  # start of that CPU call
    first_ns: int = 0  # the trace's first event (the profiler's start, as the trace shows it)
    #: the calls are those of the capture's measured steps (``gapscope.step#k``), which begin after the capture
    #: started every profiler and synchronised the ranks: no start-up skew among them
    in_steps: bool = False
    model: TraceModel | None = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list)
    #: per call: {frame: own ns} on the issuing thread since its previous launch (None: first call, or unknown);
    #: computed from the model on first use, or read from a summary
    _own: list | None = field(default=None, repr=False)

    @property
    def dur(self) -> np.ndarray:
        return self.end - self.start

    @property
    def n(self) -> int:
        return int(self.start.size)

    def previous(self, i: int) -> int | None:
        """The call launched last before call i on the same thread, or None."""
        th, t1 = int(self.thread[i]), int(self.t_issue[i])
        prev = np.flatnonzero((self.thread == th) & (self.t_issue < t1))
        return int(prev[np.argmax(self.t_issue[prev])]) if prev.size else None

    def since(self, p: int, i: int) -> int:
        """Where the interval before call i starts, p being the previous call on its thread: once p has ended
        (and was launched), on either side. Every rank leaves a collective together, so its end is the one
        point the ranks' intervals can start from alike; from p's launch, the ranks that waited in p (for a
        late rank, or for a profiler that started late) counted that wait as their own time (8-rank DLRM: the
        others' 7.78 ms against the late rank's 3.32 ms). gloo: the thread waits in p until then; NCCL: a
        thread that runs ahead of its GPU has nothing between (the interval is empty, its lateness is the GPU's)."""
        t = max(int(self.t_issue[p]), int(self.end[p]))
        return min(t, int(self.t_issue[i]))

    def own(self) -> list:
        """Per call, {frame: own time ns} on the issuing thread in [since(previous), this launch)."""
        if self._own is None:
            out: list = [None] * self.n
            if self.model is not None:
                for th in sorted(set(self.thread.tolist()) - {-1}):
                    calls = [i for i in range(self.n) if int(self.thread[i]) == th]
                    iv = [(p, i) for i in calls if (p := self.previous(i)) is not None]
                    res = own_times(self.model, th, [(self.since(p, i), int(self.t_issue[i])) for p, i in iv])
                    for (_, i), d in zip(iv, res):
                        out[i] = d
            self._own = out
        return self._own

    def to_json(self) -> dict:
        """Compact, JSON-able (capture summaries gathered on rank 0)."""
        pgs = sorted(set(self.pg))
        names = sorted(set(self.coll) | set(self.label))
        return {"rank": self.rank, "base_ns": self.base_ns, "side": self.side, "pgs": pgs, "names": names,
                "pg": [pgs.index(p) for p in self.pg], "coll": [names.index(c) for c in self.coll],
                "label": [names.index(c) for c in self.label],
                "start_ns": self.start.tolist(), "end_ns": self.end.tolist(), "exposed_ns": self.exposed.tolist(),
                "first_ns": self.first_ns, "in_steps": self.in_steps, "issue_ns": self.t_issue.tolist(),
                "own": self.own()}

    @classmethod
    def from_json(cls, d: dict) -> Timeline:
        pgs, names = d["pgs"], d["names"]
        n = len(d["start_ns"])
        return cls(rank=int(d["rank"]), base_ns=int(d.get("base_ns") or 0), side=d.get("side", "gpu"),
                   pg=[pgs[i] for i in d["pg"]], coll=[names[i] for i in d["coll"]],
                   label=[names[i] for i in d["label"]], start=np.asarray(d["start_ns"], np.int64),
                   end=np.asarray(d["end_ns"], np.int64), exposed=np.asarray(d["exposed_ns"], np.int64),
                   thread=np.zeros(n, np.int64), t_issue=np.asarray(d.get("issue_ns") or d["start_ns"], np.int64),
                   first_ns=int(d.get("first_ns") or 0), in_steps=bool(d.get("in_steps")),
                   _own=list(d.get("own") or [None] * n))


def _coll_name(label: str, args: dict) -> str:
    c = args.get("Collective name")
    if isinstance(c, str) and c:
        return c.lower()
    m = _KERNEL_COLL_RE.match(label)
    if m:
        return m.group(1).lower()
    m = _C10D_RE.match(label)
    if m:
        return m.group("n").replace("_base", "").lower()
    return label.lower()


def _default_pg(model: TraceModel) -> str:
    cfg = (model.distributed or {}).get("pg_config")
    if isinstance(cfg, list) and len(cfg) == 1 and isinstance(cfg[0], dict) and cfg[0].get("pg_name") is not None:
        return str(cfg[0]["pg_name"])
    return "?"


def _pg_of(args: dict, default: str) -> str:
    p = args.get("Process Group Name")
    if p is None:
        p = args.get("Process Group Description")
    return str(p) if p is not None else default


def timeline(model: TraceModel, window=None, rank: int | None = None, mode: str = "steps") -> Timeline:
    """The collective calls of one rank inside ``window`` (an AnalysisWindow, or None for all). A trace
    without GPU work has an unclipped window; with ``mode="steps"`` its CPU calls are still restricted to
    the ``gapscope.step#k`` ranges when it has them (the capture's barriers stay out)."""
    flags = name_flags(model.names)
    kind, nid = model.kind, model.name_id
    rk = model.rank if rank is None else rank
    rk = int(rk) if rk is not None else 0
    dflt = _default_pg(model)
    k = np.flatnonzero((kind == Kind.KERNEL) & flags["coll_kernel"][nid])
    if window is not None:
        k = k[window.gpu_in(model, k)]
    if k.size:
        k = k[np.argsort(model.ts_ns[k], kind="stable")]
        tl = _gpu_timeline(model, k, flags, rk, dflt)
    else:
        tl = _cpu_timeline(model, window if window is not None else None, flags, rk, dflt,
                           steps_only=mode == "steps")
    from ..window import step_ranges

    tl.in_steps = bool(window.clipped) if window is not None else (mode == "steps" and step_ranges(model).size > 0)
    return tl


def _gpu_timeline(model, k, flags, rk, dflt) -> Timeline:
    from ..intervals import Coverage

    kind, nid = model.kind, model.name_id
    gdev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in model.tracks] + [-1], np.int64)
    labels = [model.names[int(i)] for i in nid[k].tolist()]
    pg, coll = [], []
    for j, i in enumerate(k.tolist()):
        a = model.event_args(i)
        if "Process Group Name" not in a and int(model.op[i]) >= 0:
            a = {**model.event_args(int(model.op[i])), **a}
        pg.append(_pg_of(a, dflt))
        coll.append(_coll_name(labels[j], a))
    ts, end = model.ts_ns[k], model.ts_ns[k] + model.dur_ns[k]
    comp = np.flatnonzero((kind == Kind.KERNEL) & ~flags["coll_kernel"][nid])
    dev, cdev = gdev[model.track[k]], gdev[model.track[comp]]
    overl = np.zeros(k.size, np.int64)
    for d in uniq(dev).tolist():
        c = comp[cdev == d]
        sel = dev == d
        overl[sel] = Coverage(model.ts_ns[c], model.ts_ns[c] + model.dur_ns[c]).covered(ts[sel], end[sel])
    L = model.launch[k]
    thread = np.where(L >= 0, model.track[np.where(L >= 0, L, 0)].astype(np.int64), -1)
    t_issue = np.where(L >= 0, model.ts_ns[np.where(L >= 0, L, 0)], ts)
    return Timeline(rk, base_ns(model), "gpu", pg, coll, labels, ts.copy(), end, end - ts - overl, thread, t_issue,
                    first_ns=first_event_ns(model), model=model)


def _cpu_timeline(model, window, flags, rk, dflt, steps_only: bool = True) -> Timeline:
    from ..intervals import Coverage

    kind, nid = model.kind, model.name_id
    cpu_track = np.array([t.kind is TrackKind.CPU for t in model.tracks] + [False], bool)
    coll_op = flags["coll_op"][nid] & cpu_track[model.track]
    backend = np.array([bool(_BACKEND_RANGE_RE.match(n)) for n in model.names], bool)[nid]
    ops = np.flatnonzero(coll_op & (kind == Kind.CPU_OP))
    if ops.size:  # outermost collective ops only (record_param_comms sits inside c10d::allreduce_)
        p = model.parent[ops]
        pp = np.where(p >= 0, p, 0)
        ops = ops[(p < 0) | ~(coll_op[pp] & (kind[pp] == Kind.CPU_OP))]
    if window is not None and window.clipped and ops.size:
        ops = ops[window.cpu_in(model, ops)]
    elif steps_only and ops.size:
        from ..intervals import union
        from ..window import in_intervals, step_ranges

        st = step_ranges(model)
        if st.size:
            cs, ce = union(model.ts_ns[st], model.ts_ns[st] + model.dur_ns[st])
            ops = ops[in_intervals(cs, ce, model.ts_ns[ops])]
    empty = np.zeros(0, np.int64)
    if ops.size == 0:
        return Timeline(rk, base_ns(model), "cpu", [], [], [], empty, empty, empty, empty, empty,
                        first_ns=first_event_ns(model), model=model)
    ops = ops[np.argsort(model.ts_ns[ops], kind="stable")]
    ts = model.ts_ns[ops]
    end = ts + model.dur_ns[ops]
    # the backend's ranges on other threads (gloo:all_reduce on a worker thread): the i-th belongs to the i-th op
    op_threads = set(model.track[ops].tolist())
    rng = np.flatnonzero(backend & (kind == Kind.ANNOTATION))
    rng = rng[~isin(model.track[rng], list(op_threads))]
    if rng.size:
        rng = rng[np.argsort(model.ts_ns[rng], kind="stable")]
        rng = rng[model.ts_ns[rng] >= ts[0]]  # ranges from before the window's first op belong to earlier ops
        c = min(rng.size, ops.size)
        # the range's end is the completion: the op itself can stay open well after it (measured on gloo: the
        # late rank's c10d::allreduce_ ran ~10 ms past its gloo:all_reduce, which ended with the other rank's)
        end[:c] = np.maximum(model.ts_ns[rng[:c]] + model.dur_ns[rng[:c]], ts[:c])
    labels = [model.names[int(i)] for i in nid[ops].tolist()]
    pg, coll = [], []
    # a record_param_comms inside the op carries the group and the collective's name
    rpc = np.flatnonzero((kind == Kind.CPU_OP) & np.array([n == "record_param_comms" for n in model.names],
                                                         bool)[nid])
    rpc_parent = {int(model.parent[i]): int(i) for i in rpc.tolist()}
    for j, i in enumerate(ops.tolist()):
        a = model.event_args(rpc_parent[i]) if i in rpc_parent else model.event_args(i)
        pg.append(_pg_of(a, dflt))
        coll.append(_coll_name(labels[j], a))
    thread = model.track[ops].astype(np.int64)
    # exposed: the call's time in which its thread ran no other (non-collective) op
    other = np.flatnonzero((kind == Kind.CPU_OP) & ~coll_op & cpu_track[model.track])
    exposed = end - ts
    for th in uniq(thread).tolist():
        o = other[model.track[other] == th]
        sel = thread == th
        exposed[sel] -= Coverage(model.ts_ns[o], model.ts_ns[o] + model.dur_ns[o]).covered(ts[sel], end[sel])
    return Timeline(rk, base_ns(model), "cpu", pg, coll, labels, ts.copy(), end, exposed, thread, ts.copy(),
                    first_ns=first_event_ns(model), model=model)


