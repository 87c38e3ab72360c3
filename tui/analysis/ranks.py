"""Several ranks of one job: match collectives across ranks, align clocks, find the wait part and the late rank.

**What a collective is on one rank** (``timeline``). Where the rank ran NCCL kernels, each collective
kernel is one call: it starts when the GPU stream reaches it (the rank's arrival) and ends when every
rank has contributed. Where it ran none (gloo: collectives run on the CPU), each outermost collective
CPU op (``c10d::allreduce_``, ``c10d::barrier``, or a ``record_param_comms`` that is not inside one) is a
call: it starts with the op (arrival), and ends with the ``gloo:*`` range that ran it on the backend's
worker thread (the i-th such range belongs to the i-th op; not the op's own end, which can come much later
on a busy host), or with the op itself when there is none.
Each call has a process group (``Process Group Name`` from the kernel's or ``record_param_comms``'s args,
else the trace's only group) and a collective name (``Collective name``, else from the op name).

**Matching.** Within one process group every member issues the same collectives in the same order, so
the i-th call of group g on each rank is the same collective (by group + order, not by name; a send on
one rank and the recv on its peer count as the same kind). When the
names at one position disagree (a window cut differently on one rank), that group is matched by
(group, name, order) instead and a warning says so. Only calls inside each rank's analysis window
(``windows``; by default the measured steps, see window.py) are matched, so the capture's own barrier
before the first step is not counted. Cost: O(ranks x collectives) numpy work plus one args decode per
call.

**Clocks.** The traces' own time bases (``baseTimeNanoseconds``; 0 where absent: old traces write epoch
µs) give each rank's offset. It is checked against the collectives' end times, which line up across
ranks (nobody finishes before the last rank has arrived): the median over matched calls of (end on r -
end on the reference rank), after the base offset, should be about 0. When the evidence is consistent
(median absolute deviation at most a quarter of the median, at least ``CLOCK_MIN_MATCHES`` calls), the
offset used for the waits (and for the explorer's lanes, see ``align_clocks``) is corrected by that
median; beyond ``CLOCK_TOLERANCE_NS`` a warning names the rank and the offset. Beyond the tolerance
with inconsistent evidence, the base offset is kept and a warning says the ends do not line up.

**Wait and late rank.** After alignment, the last rank to start a call is the late one and every other
rank's wait is ``last start - its start`` (clipped to its duration). Each rank's total wait is put on its
device as ``DeviceStats.collective_wait_ns``. For the late rank the analysis looks at its CPU thread
before each launch it was late for (from the previous collective launch on that thread to this one) and
names the longest user Python frame there (``_straggler_work`` (capture/demo.py:112)); without Python
stacks, the longest op.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..trace.model import Kind, TraceModel, TrackKind
from .core import Analysis, analyze
from .names import is_user_frame, name_flags, parse_frame
from .thresholds import Thresholds

#: collective end times of two ranks that differ by less than this are "lined up"
CLOCK_TOLERANCE_NS = 100_000
#: fewest matched calls whose end times can correct a clock offset
CLOCK_MIN_MATCHES = 3
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
    before: list | None = None  # per call: what the issuing thread did before (summaries); None = lazily
    model: TraceModel | None = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list)

    @property
    def dur(self) -> np.ndarray:
        return self.end - self.start

    @property
    def n(self) -> int:
        return int(self.start.size)

    def to_json(self) -> dict:
        """Compact, JSON-able (capture summaries gathered on rank 0)."""
        pgs = sorted(set(self.pg))
        names = sorted(set(self.coll) | set(self.label))
        return {"rank": self.rank, "base_ns": self.base_ns, "side": self.side, "pgs": pgs, "names": names,
                "pg": [pgs.index(p) for p in self.pg], "coll": [names.index(c) for c in self.coll],
                "label": [names.index(c) for c in self.label],
                "start_ns": self.start.tolist(), "end_ns": self.end.tolist(), "exposed_ns": self.exposed.tolist(),
                "before": self.before if self.before is not None else before_launch(self, range(self.n))}

    @classmethod
    def from_json(cls, d: dict) -> Timeline:
        pgs, names = d["pgs"], d["names"]
        n = len(d["start_ns"])
        return cls(rank=int(d["rank"]), base_ns=int(d.get("base_ns") or 0), side=d.get("side", "gpu"),
                   pg=[pgs[i] for i in d["pg"]], coll=[names[i] for i in d["coll"]],
                   label=[names[i] for i in d["label"]], start=np.asarray(d["start_ns"], np.int64),
                   end=np.asarray(d["end_ns"], np.int64), exposed=np.asarray(d["exposed_ns"], np.int64),
                   thread=np.full(n, -1, np.int64), t_issue=np.asarray(d["start_ns"], np.int64),
                   before=list(d.get("before") or [None] * n))


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
        return _gpu_timeline(model, k, flags, rk, dflt)
    return _cpu_timeline(model, window if window is not None else None, flags, rk, dflt,
                         steps_only=mode == "steps")


def _gpu_timeline(model, k, flags, rk, dflt) -> Timeline:
    from .intervals import Coverage

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
    for d in np.unique(dev).tolist():
        c = comp[cdev == d]
        sel = dev == d
        overl[sel] = Coverage(model.ts_ns[c], model.ts_ns[c] + model.dur_ns[c]).covered(ts[sel], end[sel])
    L = model.launch[k]
    thread = np.where(L >= 0, model.track[np.where(L >= 0, L, 0)].astype(np.int64), -1)
    t_issue = np.where(L >= 0, model.ts_ns[np.where(L >= 0, L, 0)], ts)
    return Timeline(rk, base_ns(model), "gpu", pg, coll, labels, ts.copy(), end, end - ts - overl, thread, t_issue,
                    model=model)


def _cpu_timeline(model, window, flags, rk, dflt, steps_only: bool = True) -> Timeline:
    from .intervals import Coverage

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
        from .intervals import union
        from .window import _inside, step_ranges

        st = step_ranges(model)
        if st.size:
            cs, ce = union(model.ts_ns[st], model.ts_ns[st] + model.dur_ns[st])
            ops = ops[_inside(cs, ce, model.ts_ns[ops])]
    empty = np.zeros(0, np.int64)
    if ops.size == 0:
        return Timeline(rk, base_ns(model), "cpu", [], [], [], empty, empty, empty, empty, empty, model=model)
    ops = ops[np.argsort(model.ts_ns[ops], kind="stable")]
    ts = model.ts_ns[ops]
    end = ts + model.dur_ns[ops]
    # the backend's ranges on other threads (gloo:all_reduce on a worker thread): the i-th belongs to the i-th op
    op_threads = set(model.track[ops].tolist())
    rng = np.flatnonzero(backend & (kind == Kind.ANNOTATION))
    rng = rng[~np.isin(model.track[rng], list(op_threads))]
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
    for th in np.unique(thread).tolist():
        o = other[model.track[other] == th]
        sel = thread == th
        exposed[sel] -= Coverage(model.ts_ns[o], model.ts_ns[o] + model.dur_ns[o]).covered(ts[sel], end[sel])
    return Timeline(rk, base_ns(model), "cpu", pg, coll, labels, ts.copy(), end, exposed, thread, ts.copy(),
                    model=model)


def before_launch(tl: Timeline, calls) -> list:
    """For each call index: what the issuing thread did before it, from the previous collective call on that
    thread: ``{"frame", "file", "line", "func", "ns"}`` for the longest user Python frame (else the longest
    top-level op) that ran entirely in that interval, or None."""
    m = tl.model
    out = []
    if m is None:
        return [tl.before[i] if tl.before else None for i in calls]
    flags = name_flags(m.names)
    py_user = np.array([is_user_frame(n) for n in m.names], bool)
    for i in calls:
        th, t1 = int(tl.thread[i]), int(tl.t_issue[i])
        if th < 0:
            out.append(None)
            continue
        prev = np.flatnonzero((tl.thread == th) & (tl.t_issue < t1))
        t0 = int(tl.t_issue[prev].max()) if prev.size else int(m.ts_ns[m.track_slice(th)].min(initial=t1))
        sl = m.track_slice(th)
        tss = m.ts_ns[sl]
        lo, hi = int(np.searchsorted(tss, t0, "left")), int(np.searchsorted(tss, t1, "left"))
        idx = np.arange(sl.start + lo, sl.start + hi)
        idx = idx[(m.ts_ns[idx] + m.dur_ns[idx]) <= t1]
        cand = idx[(m.kind[idx] == Kind.PYTHON) & py_user[m.name_id[idx]] & ~flags["capture_frame"][m.name_id[idx]]]
        if cand.size == 0:
            cand = idx[(m.kind[idx] == Kind.CPU_OP) & ~flags["coll_op"][m.name_id[idx]]]
            if cand.size:
                p = m.parent[cand]
                cand = cand[(p < 0) | (m.kind[np.where(p >= 0, p, 0)] != Kind.CPU_OP)]
        if cand.size == 0:
            out.append(None)
            continue
        j = int(cand[np.argmax(m.dur_ns[cand])])
        nm = m.name(j)
        f, ln, fn = parse_frame(nm)
        out.append({"frame": nm, "file": f, "line": ln, "func": fn, "ns": int(m.dur_ns[j])})
    return out


def frame_text(b: dict) -> str:
    """``_straggler_work`` (capture/demo.py:112)."""
    if b.get("file"):
        return f"`{b['func']}` ({b['file']}:{b['line']})"
    return f"`{b['frame']}`"


# ----------------------------------------------------------------------------------- matching
def _fmt(ns: float) -> str:
    ns = abs(float(ns))
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} µs"


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + _fmt(ns)


def match_timelines(tls: list[Timeline]) -> dict:
    """Match the calls of every rank (``tls[0]`` is the reference clock). Returns ``{"rows", "clock",
    "ranks", "late", "warnings", "shift_ns"}``: ``shift_ns[r]`` is added to rank r's times to put them on
    the reference's clock."""
    R = len(tls)
    ranks = [t.rank for t in tls]
    warnings: list[str] = []
    base_shift = [t.base_ns - tls[0].base_ns if tls[0].base_ns and t.base_ns else 0 for t in tls]
    # ---- groups: (process group) -> per rank, call indices in start order
    groups = []  # (key pg, coll or None, member positions, idx matrix [members, c])
    pgs = sorted({p for t in tls for p in t.pg})
    for pg in pgs:
        per = [np.flatnonzero(np.array([p == pg for p in t.pg], bool)) for t in tls]
        mem = [r for r in range(R) if per[r].size]
        if len(mem) < 2:
            continue
        c = min(per[r].size for r in mem)
        names = np.array([[_order_key(tls[r].coll[i]) for i in per[r][:c].tolist()] for r in mem])
        if (names == names[0]).all():
            groups.append((pg, None, mem, np.stack([per[r][:c] for r in mem])))
            continue
        warnings.append(f"process group {pg}: the ranks' collectives are not in the same order in the window "
                        f"(e.g. {names[0][np.argmax((names != names[0]).any(0))]} on rank {ranks[mem[0]]}); "
                        "matched by collective name instead")
        for cn in sorted(set(names.ravel().tolist())):
            per2 = [per[r][np.array([_order_key(tls[r].coll[i]) == cn for i in per[r].tolist()], bool)]
                    for r in range(R)]
            mem2 = [r for r in mem if per2[r].size]
            if len(mem2) >= 2:
                c2 = min(per2[r].size for r in mem2)
                groups.append((pg, cn, mem2, np.stack([per2[r][:c2] for r in mem2])))
    # ---- clocks: collective end times against the reference (position 0)
    diffs: list[list[np.ndarray]] = [[] for _ in tls]
    for _, _, mem, idx in groups:
        if mem[0] != 0:
            continue
        e0 = tls[0].end[idx[0]]
        for j, r in enumerate(mem[1:], 1):
            diffs[r].append(tls[r].end[idx[j]] + base_shift[r] - e0)
    shift = list(base_shift)
    clock = []
    for r in range(R):
        d = np.concatenate(diffs[r]) if diffs[r] else np.zeros(0, np.int64)
        ent = {"rank": ranks[r], "base_offset_us": base_shift[r] / 1e3, "offset_us": base_shift[r] / 1e3,
               "residual_us": None, "spread_us": None, "matched": int(d.size), "status": "reference" if r == 0 else
               "unchecked"}
        if r and d.size:
            med = float(np.median(d))
            mad = float(np.median(np.abs(d - med)))
            ent["residual_us"], ent["spread_us"] = med / 1e3, mad / 1e3
            consistent = mad <= abs(med) / 4 and d.size >= CLOCK_MIN_MATCHES
            if consistent:  # small residuals too: the waits are differences of a few µs
                shift[r] = base_shift[r] - int(round(med))
                ent["offset_us"] = shift[r] / 1e3
            if abs(med) <= CLOCK_TOLERANCE_NS:
                ent["status"] = "ok"
            elif consistent:
                ent["status"] = "corrected"
                warnings.append(f"rank {ranks[r]}: collective end times are {_signed(med)} off rank {ranks[0]}'s "
                                f"after the trace time bases (median of {d.size}, spread {_fmt(mad)}): its clock "
                                f"offset is corrected to {_signed(-shift[r])} from the collectives")
            else:
                ent["status"] = "inconsistent"
                warnings.append(f"rank {ranks[r]}: collective end times do not line up with rank {ranks[0]}'s "
                                f"({_signed(med)} median, spread {_fmt(mad)} over {d.size}): kept the trace time "
                                "bases; waits may be off by that much")
        clock.append(ent)
    # ---- waits, late ranks
    agg: dict = {}
    late_calls: dict[int, list] = defaultdict(list)  # rank position -> [(call index, waits caused ns)]
    per_rank = {r: {"wait_ns": 0, "late": 0, "matched": 0} for r in range(R)}
    for pg, _, mem, idx in groups:
        starts = np.stack([tls[r].start[idx[j]] + shift[r] for j, r in enumerate(mem)])
        ends = np.stack([tls[r].end[idx[j]] + shift[r] for j, r in enumerate(mem)])
        durs = ends - starts
        last = starts.max(axis=0)
        wait = np.minimum(np.maximum(last[None, :] - starts, 0), durs)
        late = starts.argmax(axis=0)
        spread = last - starts.min(axis=0)
        is_late = spread > 0
        for j, r in enumerate(mem):
            per_rank[r]["wait_ns"] += int(wait[j].sum())
            per_rank[r]["matched"] += int(idx.shape[1])
            lj = np.flatnonzero(is_late & (late == j))
            per_rank[r]["late"] += int(lj.size)
            caused = wait[:, lj].sum(axis=0)
            late_calls[r].extend(zip(idx[j][lj].tolist(), caused.tolist()))
        lab0 = [tls[mem[0]].label[i] for i in idx[0].tolist()]
        for lab in sorted(set(lab0)):
            cols = np.flatnonzero(np.array([x == lab for x in lab0], bool))
            key = (lab, pg)
            row = agg.get(key)
            if row is None:
                row = agg[key] = {"name": lab, "collective": tls[mem[0]].coll[int(idx[0][cols[0]])],
                                  "process_group": pg, "count": 0, "total_ns": 0, "wait_ns": 0,
                                  "late": Counter(), "wait_by": Counter(), "first_wait": {}, "dur_by": Counter(),
                                  "exposed_by": Counter()}
            row["count"] += int(cols.size)
            row["total_ns"] += int(durs[:, cols].sum())
            row["wait_ns"] += int(wait[:, cols].sum())
            row["late"].update(ranks[mem[int(x)]] for x in late[cols][is_late[cols]].tolist())
            for j, r in enumerate(mem):
                row["wait_by"][ranks[r]] += int(wait[j, cols].sum())
                row["dur_by"][ranks[r]] += int(durs[j, cols].sum())
                row["exposed_by"][ranks[r]] += int(tls[r].exposed[idx[j][cols]].sum())
                row["first_wait"].setdefault(ranks[r], int(wait[j, cols[0]]))
    rows = []
    for row in agg.values():
        lc = row["late"]
        rows.append({
            "name": row["name"], "collective": row["collective"], "process_group": row["process_group"],
            "count": row["count"], "total_us": row["total_ns"] / 1e3, "wait_us": row["wait_ns"] / 1e3,
            "late_rank": lc.most_common(1)[0][0] if lc else None,
            "late_counts": {str(k): v for k, v in lc.items()},
            "wait_by_rank_us": {str(ranks[r]): row["wait_by"].get(ranks[r], 0) / 1e3 for r in range(R)},
            "first_wait_by_rank_us": {str(ranks[r]): row["first_wait"].get(ranks[r], 0) / 1e3 for r in range(R)},
            "time_by_rank_us": {str(ranks[r]): row["dur_by"].get(ranks[r], 0) / 1e3 for r in range(R)},
            "exposed_by_rank_us": {str(ranks[r]): row["exposed_by"].get(ranks[r], 0) / 1e3 for r in range(R)},
            "clock_offset_us": {str(ranks[r]): -shift[r] / 1e3 for r in range(R)},
        })
    rows.sort(key=lambda d: -d["total_us"])
    # ---- per rank, and what the late ranks did before the calls they were late for
    rank_rows, late_rows = [], []
    for r in range(R):
        t = tls[r]
        rank_rows.append({"rank": ranks[r], "side": t.side, "collectives": t.n, "matched": per_rank[r]["matched"],
                          "collective_us": float(t.dur.sum()) / 1e3, "exposed_us": float(t.exposed.sum()) / 1e3,
                          "wait_us": per_rank[r]["wait_ns"] / 1e3, "arrived_last": per_rank[r]["late"]})
        calls = late_calls.get(r) or []
        if not calls:
            continue
        bl = before_launch(t, [c for c, _ in calls])
        fr: dict = {}
        for b in bl:
            if b is None:
                continue
            key = b["frame"]
            e = fr.setdefault(key, {**b, "count": 0, "total_ns": 0})
            e["count"] += 1
            e["total_ns"] += b["ns"]
        frames = sorted(fr.values(), key=lambda e: (-e["count"], -e["total_ns"]))
        for e in frames:
            e["avg_us"] = e["total_ns"] / e["count"] / 1e3
            del e["ns"]
        cn = Counter(t.coll[c] for c, _ in calls)
        late_rows.append({"rank": ranks[r], "count": len(calls), "of": per_rank[r]["matched"],
                          "collectives": dict(cn), "waits_caused_us": sum(w for _, w in calls) / 1e3,
                          "before": frames[:5]})
    late_rows.sort(key=lambda e: (-e["count"], -e["waits_caused_us"]))
    for tl in tls:
        warnings.extend(tl.warnings)
    return {"rows": rows, "clock": clock, "ranks": rank_rows, "late": late_rows, "warnings": warnings,
            "shift_ns": shift}


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def late_sentence(late: dict) -> str:
    """'rank 1 arrived last 64 times (of 64); before its allreduce launch it was in `_straggler_work`
    (capture/demo.py:112) (64 times, 1.25 ms on average)'."""
    cs = sorted(late.get("collectives") or {})
    colls = f"{cs[0]} launch" if len(cs) == 1 else "collective launches"
    s = f"rank {late['rank']} arrived last {_times(late['count'])} (of {late['of']})"
    b = (late.get("before") or [None])[0]
    if b:
        s += (f"; before its {colls} it was in {frame_text(b)} ({_times(b['count'])}, "
              f"{_fmt(b['avg_us'] * 1e3)} on average)")
    return s


def match_collectives(models: list[TraceModel], windows: list | None = None) -> list[dict]:
    """One row per collective name and process group: count (matched calls), total (all ranks), wait, late
    rank. ``windows``: one ``AnalysisWindow`` per model (calls outside it are left out), or None."""
    if len(models) < 2:
        return []
    tls = [timeline(m, windows[i] if windows else None, m.rank if m.rank is not None else i,
                    "steps" if windows else "all") for i, m in enumerate(models)]
    return match_timelines(tls)["rows"]


def align_clocks(models: list[TraceModel], window: str = "steps") -> tuple[list[int], list[str]]:
    """Offsets (ns, added to each model's times; the earliest is 0) that line the ranks up in the explorer,
    from the time bases checked against the collectives, and the warnings that check produced."""
    from .window import compute_window

    if len(models) < 2:
        return [0] * len(models), []
    tls = [timeline(m, compute_window(m, window), m.rank if m.rank is not None else i, window)
           for i, m in enumerate(models)]
    res = match_timelines(tls)
    sh = res["shift_ns"]
    lo = min(sh)
    return [s - lo for s in sh], [w for w in res["warnings"] if "clock" in w or "line up" in w]


# ----------------------------------------------------------------------------------- analysis
def analyze_ranks(models: list[TraceModel], config: Thresholds | None = None, window: str = "steps") -> list[Analysis]:
    """Analyse each rank, then attach the cross-rank collectives table (``rank_collectives``) and the rank
    summary (``rank_match``: clocks, per rank collective time / exposed / wait, late ranks) to every
    Analysis, fill wait/late_rank into each rank's own collectives and the rank's total collective wait
    into its devices (``collective_wait_ns``, ``collective_late_rank``)."""
    order = sorted(range(len(models)), key=lambda i: (models[i].rank is None, models[i].rank or 0, i))
    models = [models[i] for i in order]
    out = [analyze(m, config, window) for m in models]
    tls = [timeline(m, out[i].window, m.rank if m.rank is not None else i, window) for i, m in enumerate(models)]
    res = match_timelines(tls) if len(models) > 1 else {"rows": [], "clock": [], "ranks": [], "late": [],
                                                          "warnings": [], "shift_ns": [0] * len(models)}
    table = res["rows"]
    from .core import Finding
    from .findings import SUGGESTIONS, _fmt as _ffmt, _severity

    late_by_rank = {e["rank"]: e for e in res["late"]}
    top = res["late"][0] if res["late"] else None
    for a in out:
        if top and top["rank"] != a.rank and top.get("before"):
            # collective gaps of the other ranks name the late rank and what it did before its launches; the
            # gaps explained so far (findings' examples) are explained again with it
            from .findings import build_findings

            a.late_rank_note = f"Across the ranks, {late_sentence(top)}."
            a._details.clear()
            a.findings = build_findings(a)
    for i, a in enumerate(out):
        rk = str(a.rank)
        for w in res["warnings"]:
            if w.startswith(f"rank {rk}:") or not w.startswith("rank "):
                a.warnings.append(w)
        waits = [(r["wait_by_rank_us"].get(rk, 0.0), r) for r in table]
        waits = [(w, r) for w, r in waits if w > 0 and r["late_rank"] is not None and str(r["late_rank"]) != rk]
        if waits:
            wns = int(round(sum(w for w, _ in waits) * 1e3))
            first = sum(r["first_wait_by_rank_us"].get(rk, 0.0) for _, r in waits) * 1e3
            skew = first >= 0.9 * wns and first >= 1e7
            late = Counter(r["late_rank"] for _, r in waits).most_common(1)[0][0]
            n = sum(r["count"] for _, r in waits)
            win = sum(d.window_ns for d in a.devices) or max(a.window_ns, 1)
            le = late_by_rank.get(late)
            b = (le or {}).get("before") or []
            where = (f"; before its launches rank {late} was in {frame_text(b[0])}" if b and not skew else "")
            a.findings.append(Finding(
                id=f"collective-wait-{rk}", severity="info" if skew else _severity(wns / win),
                title=f"rank {rk} waited {_ffmt(wns)} in {n} collectives for late rank {late}"
                + (" (almost all in the first one: profiler start-up skew between ranks, not a straggler)"
                   if skew else "") + where,
                idle_ns=0 if skew else wns,  # start-up skew is not idle time the job has: listed, ranked last
                evidence={"late_rank": late, "wait_us": wns / 1e3, "startup_skew": skew,
                          "late": le, "collectives": [{"name": r["name"], "wait_us": w, "count": r["count"]}
                                                      for w, r in waits]},
                suggestion=f"Rank {late} arrives last: " + (late_sentence(le) + ". Shorten or move that work, or "
                                                             "balance it across ranks. " if le else
                                                             "look at its CPU work before each collective. ")
                + SUGGESTIONS["collective"],
                cause="collective"))
        le = late_by_rank.get(a.rank)
        if le and le.get("before") and 2 * le["count"] >= max(le["of"], 1):
            caused = int(le["waits_caused_us"] * 1e3)
            a.findings.append(Finding(
                id=f"late-rank-{rk}", severity="info" if not caused else _severity(caused / max(a.window_ns, 1)),
                title=late_sentence(le), idle_ns=0, evidence={"late": le},
                suggestion=f"The other ranks waited {_ffmt(caused)} in total for this rank in these collectives: "
                           "shorten or move this work, or balance it across ranks.", cause="collective"))
        a.findings.sort(key=lambda f: (-f.idle_ns, f.title))
    for a in out:
        _device_wait(a, table)
    by_name = {(r["name"], r["process_group"]): r for r in table}
    by_label: dict = defaultdict(list)
    for r in table:
        by_label[r["name"]].append(r)
    for a in out:
        a.rank_collectives = table
        a.rank_match = res
        rk = str(a.rank)
        for c in a.collectives:
            rs = ([by_name[(c["name"], c.get("process_group"))]] if (c["name"], c.get("process_group")) in by_name
                  else by_label.get(c["name"], []))
            if rs:
                c["wait_ns"] = int(round(sum(r["wait_by_rank_us"].get(rk, 0.0) for r in rs) * 1e3))
                c["late_rank"] = rs[0]["late_rank"]
    return out


def _device_wait(a: Analysis, table: list[dict]) -> None:
    """Put the rank's collective wait on the device that runs its collective kernels."""
    rk = str(a.rank)
    rows = [r for r in table if r["wait_by_rank_us"].get(rk, 0.0) > 0]
    if not rows or not a.devices:
        return
    wns = int(round(sum(r["wait_by_rank_us"][rk] for r in rows) * 1e3))
    late = Counter()
    for r in rows:
        if r["late_rank"] is not None and str(r["late_rank"]) != rk:
            late[r["late_rank"]] += r["wait_by_rank_us"][rk]
    m = a.model
    flags = a.flags
    k = np.flatnonzero((m.kind == Kind.KERNEL) & flags["coll_kernel"][m.name_id])
    k = k[a.window.gpu_in(m, k)]
    tdev = [t.device for t in m.tracks]
    devs = Counter(tdev[int(t)] for t in m.track[k].tolist())
    dev = devs.most_common(1)[0][0] if devs else a.devices[0].device
    for d in a.devices:
        if d.device == dev:
            d.collective_wait_ns = wns
            d.collective_late_rank = late.most_common(1)[0][0] if late else None


# ---------------------------------------------------------------------------------- summaries
def summarise(path, config: Thresholds | None = None, window: str = "steps") -> dict:
    """A small JSON-able summary of one trace (what a rank prints after its capture). ``collective_timeline``
    holds its collective calls (times, groups, what the CPU did before each) so that rank 0 can match the
    ranks without their traces (``combine_summaries``)."""
    from ..trace import load

    a = analyze(load(path), config, window)
    ct = a.cause_totals()
    tl = timeline(a.model, a.window, a.rank if a.rank is not None else 0, window)
    return {
        "path": str(path),
        "rank": a.rank,
        "phase": a.phase,
        "window_us": a.window_ns / 1e3,
        "idle_pct": round(a.idle_pct, 2),
        "devices": [{"device": d.device, "name": d.name, "idle_pct": round(d.idle_pct, 2),
                     "window_us": d.window_ns / 1e3} for d in a.devices],
        "causes_us": {c: v["total_ns"] / 1e3 for c, v in ct.items() if v["count"]},
        "findings": [{"id": f.id, "severity": f.severity, "title": f.title, "idle_us": f.idle_ns / 1e3}
                     for f in a.findings[:3]],
        "collectives": [{"name": c["name"], "count": c["count"], "total_us": c["total_ns"] / 1e3}
                        for c in a.collectives[:5]],
        "collective_timeline": tl.to_json(),
        "distortion": a.distortion,
        "warnings": a.warnings[:5],
    }


def combine_summaries(summaries: list[dict]) -> dict:
    """Rank 0's view of the job from the ranks' summaries (``summarise``): per phase, the matched collectives,
    clocks, per rank idle % / collective time / exposed / wait and the late ranks, plus ``lines`` (text)."""
    by_phase: dict = defaultdict(list)
    for s in summaries:
        if isinstance(s, dict) and isinstance(s.get("collective_timeline"), dict) and s.get("rank") is not None:
            by_phase[s.get("phase")].append(s)
    out = {"phases": [], "lines": []}
    for phase, ss in by_phase.items():
        ss = sorted(ss, key=lambda s: s["rank"])
        if len(ss) < 2:
            continue
        res = match_timelines([Timeline.from_json(s["collective_timeline"]) for s in ss])
        idle = {s["rank"]: s.get("idle_pct") if s.get("devices") else None for s in ss}  # None: no GPU (gloo)
        for e in res["ranks"]:
            e["idle_pct"] = idle.get(e["rank"])
        res.pop("shift_ns", None)
        out["phases"].append({"phase": phase, **res})
        p = f"{phase}: " if phase else ""
        for le in res["late"][:1]:
            out["lines"].append(p + late_sentence(le))
        if not res["late"]:
            out["lines"].append(p + "no rank arrived last at the matched collectives")
        out["lines"].extend(p + w for w in res["warnings"])
    return out
