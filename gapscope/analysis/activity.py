"""Everything around the gaps: kernels (with floors), launches, syncs, copies, allocator calls,
memory events and collectives. Whole-column numpy; Python loops only over the few listed rows."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..trace.model import Kind, TraceModel, TrackKind
from .floors import peaks_for
from .intervals import Coverage, isin, median, name_ids, percentile, uniq
from .stacks import StackIndex, signature_frame
from .thresholds import CAST_DEPTH, MAX_CHAIN, REUSE_LOOKBACK

#: Kind as plain ints: numpy compares a column with an IntEnum member ~10x slower than with an int
KI = SimpleNamespace(**{k.name: int(k) for k in Kind})


@dataclass
class KernelStat:
    """One kernel name. Floors are per op call, from that call's own shapes (floors.py), summed over the calls
    whose op launched this kernel alone; the calls whose op launched several kernels share one floor, kept on
    the op's row (``OpFloorStat``) and counted here in ``op_floor_calls``. Achieved figures are over the
    floored calls: their FLOPs and the bytes their ops must touch, per second of their kernel time."""

    name: str
    count: int
    total_ns: int
    pct: float  # share of all kernel time
    op: str | None = None  # the most common launching op
    shapes: list | None = None  # its most common input shapes
    floor_ns: float | None = None  # per floored call: floor_total_ns / floored_count
    bound: str | None = None  # "compute" | "memory": the larger part of the floor total
    avg_ns: float = 0.0
    device: int | None = None
    floor_total_ns: float | None = None  # sum of the per-call floors
    floored_count: int = 0  # calls with a floor of their own
    floored_total_ns: int = 0  # kernel time of those calls (never below floor_total_ns)
    op_floor_calls: int = 0  # calls whose floor is on their op's row
    flops: float = 0.0  # FLOPs of the floored calls
    nbytes: float = 0.0  # bytes their ops touch (inputs read, output written)
    peak_pct: float | None = None  # time at the device's peak for each call's bound / their kernel time, %
    l2_resident: int = 0  # floored calls faster than their HBM floor: their data was in the L2
    dtype: str | None = None  # the floored calls' most common element type

    @property
    def tflops(self) -> float | None:
        return self.flops / self.floored_total_ns / 1e3 if self.floored_total_ns and self.flops else None

    @property
    def gbps(self) -> float | None:
        return self.nbytes / self.floored_total_ns if self.floored_total_ns and self.nbytes else None

    @property
    def floor_pct(self) -> float | None:
        """Floor / average over the floored calls, %: 100 means the kernel runs at its floor."""
        if self.floor_total_ns is None or not self.floored_total_ns:
            return None
        return 100.0 * self.floor_total_ns / self.floored_total_ns


@dataclass
class OpFloorStat:
    """Calls of one op that launched several kernels each (a GEMM and its split-K reduction, attention and its
    reduction): one floor per call, against the time of all its kernels."""

    op: str
    kernels: list[str]  # the kernel names of one call, in the order they started
    count: int  # op calls
    total_ns: int  # time of their kernels
    floor_total_ns: float
    bound: str | None
    shapes: list | None = None
    device: int | None = None
    flops: float = 0.0
    nbytes: float = 0.0
    peak_pct: float | None = None
    l2_resident: int = 0
    dtype: str | None = None

    @property
    def floor_ns(self) -> float:
        return self.floor_total_ns / self.count if self.count else 0.0

    @property
    def avg_ns(self) -> float:
        return self.total_ns / self.count if self.count else 0.0

    @property
    def tflops(self) -> float | None:
        return self.flops / self.total_ns / 1e3 if self.total_ns and self.flops else None

    @property
    def gbps(self) -> float | None:
        return self.nbytes / self.total_ns if self.total_ns and self.nbytes else None

    @property
    def floor_pct(self) -> float | None:
        return 100.0 * self.floor_total_ns / self.total_ns if self.total_ns else None


@dataclass
class CallFloors:
    """Per kernel of the window: the op call it belongs to and that call's floor (NaN: none). Calls whose op
    launched several kernels repeat the call's figures on each of its kernels."""

    k: np.ndarray  # kernel indices
    call: np.ndarray  # launching op event, or -1
    single: np.ndarray  # bool: the op call launched this kernel alone (its floor is this kernel's)
    multi: np.ndarray  # bool: the op call launched several kernels, all in the window (its floor is the op's)
    floor: np.ndarray  # float: the call's floor, ns (NaN where the call has none)
    compute: np.ndarray  # bool: the call's floor is its compute term
    flops: np.ndarray  # float: the call's FLOPs
    nbytes: np.ndarray  # float: bytes the call's op touches
    hbm_bytes: np.ndarray  # float: of those, the bytes its floor makes cross HBM
    peak_ns: np.ndarray  # float: the call's time at the device's peak for its bound (no clock headroom)
    resident: np.ndarray  # bool: the call ran faster than its HBM floor (L2-resident)
    shape: np.ndarray  # int: index into ``shapes`` of the call's input dims (-1: none)
    dtype: np.ndarray  # int: index into ``dtypes``
    shapes: list
    dtypes: list
    #: int64: the call instance each kernel belongs to: its op event, except for a graph replay's kernel mapped to
    #: the eager reference run (graphs.py), whose op event (``call``) is the reference's and is shared by every
    #: replay: those get one id per (replay, reference call), above the model's event indices
    inst: np.ndarray | None = None
    #: bool: a graph replay's kernel whose op comes from the reference run (graphs.GraphMap)
    replayed: np.ndarray | None = None
    #: the window's graph replays: how much of their kernel time got an op and a floor (graphs.GraphCoverage), or
    #: None without replays in the window
    graphs: object | None = None

    @property
    def has(self) -> np.ndarray:
        return ~np.isnan(self.floor)


#: the ids Kineto adds to every op's args: two calls with the same shapes differ only in these
_ID_RE = re.compile(rb'"(?:External id|external id|Ev Idx|Record function id|Sequence number|Fwd thread id|'
                    rb'Python id|Python parent id|correlation)"\s*:\s*-?\d+\s*,?\s*')
#: blobs per substitution call in ``args_keys`` (a batch of 4096 CPU ops' args is a few ms of one call)
_SUB_BATCH = 4096


def args_keys(model: TraceModel, events) -> np.ndarray:
    """Per event: a small integer, equal for two events exactly when they have the same name and the same args
    once the ids Kineto adds to every op (``_ID_RE``) are stripped: the calls whose shapes, types and arguments
    repeat (every layer, every step) share one. Events without args share the key of their name alone."""
    ev = np.asarray(events, np.int64)
    if ev.size == 0:
        return np.zeros(0, np.int64)
    # a property of the loaded trace, kept on the model: each event's key once (the floors and the op patterns
    # ask for the same calls), numbered over every event keyed so far
    memo = model.__dict__.get("_args_keys")
    if memo is None:
        memo = model.__dict__["_args_keys"] = (np.full(model.n, -1, np.int64), {})
    known, numbered = memo
    new = uniq(ev[known[ev] < 0])
    if new.size:
        aid = model.args_id[new].astype(np.int64)
        offs, data = model.args.offs, model.args.data
        # a trace whose events carry no args at all has no blob (``offs`` is [0]): every event then has none
        has = (aid >= 0) & (aid < offs.size - 1)
        at = np.where(has, aid, 0)
        a0 = offs[at].tolist() if offs.size > 1 else [0] * new.size
        a1 = offs[at + 1].tolist() if offs.size > 1 else [0] * new.size
        has = has.tolist()
        # one substitution over the blobs joined by a byte no match can cross (the pattern takes quotes, names,
        # white space, digits, colons and commas only), a batch of blobs at a time: one call over all of them held
        # the GIL 0.76 s at 1 GB (the explorer's keys wait for it); a batch is a few ms
        parts = [data[x:y] if ok else b"" for x, y, ok in zip(a0, a1, has)]
        blobs = []
        for i in range(0, len(parts), _SUB_BATCH):
            batch = parts[i:i + _SUB_BATCH]
            out = _ID_RE.sub(b"", b"\x00".join(batch)).split(b"\x00")
            if len(out) != len(batch):  # a blob holding the separator itself: one at a time
                out = [_ID_RE.sub(b"", b) for b in batch]
            blobs += out
        keys = list(zip(model.name_id[new].tolist(), blobs))
        # numbered in order of first appearance: the distinct keys first (a dict keeps that order), then a lookup
        for key in dict.fromkeys(keys):
            if key not in numbered:
                numbered[key] = len(numbered)
        known[new] = np.fromiter(map(numbered.__getitem__, keys), np.int64, new.size)
    # renumbered 0, 1, ... in order of first appearance in ``events``
    g = known[ev]
    u, first, inv = np.unique(g, return_index=True, return_inverse=True)
    rank = np.empty(u.size, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(u.size)
    return rank[inv]



_CAST_OPS = ("aten::to", "aten::_to_copy", "aten::copy_")


def run_dtypes(model: TraceModel, calls: np.ndarray, u_of: np.ndarray, kn_name: np.ndarray, c_of: np.ndarray):
    """The type each op call's kernels ran in where it is narrower than the float inputs the call records:
    (per call 0 or 1 + an index into the list of types, that list), or (None, []) when no call ran so.

    A matmul, convolution or attention call (floors.AUTOCAST_OPS) with float inputs ran in bf16/fp16 when one of
    its kernels' names says so (floors.kernel_dtype: ``*_bf16_*``, ``nvjet_sm90_tst_*``) or when a conversion
    inside it cast a float tensor to that type (floors.cast_dtype: ``torch.autocast`` casting the weights and
    activations before the GEMM; the cast's own kernels are its innermost op's, not the call's). Either way the
    call's floor takes that type's peak and element size: the faster peak, so the floor stays a lower bound.
    ``kn_name``/``c_of``: the name id of each kernel of the calls and its call row."""
    from .floors import AUTOCAST_OPS, cast_dtype, kernel_dtype

    none = (None, [])
    if calls.size == 0:
        return none
    names = model.names
    isop = np.zeros(len(names), bool)
    isop[[i for i, n in enumerate(names) if n in AUTOCAST_OPS]] = True
    cand = isop[model.name_id[calls]]
    if not cand.any():
        return none
    # float inputs, once per distinct args
    fl_u: dict[int, bool] = {}
    for i in np.flatnonzero(cand).tolist():
        u = int(u_of[i])
        if u not in fl_u:
            t = model.event_args(int(calls[i])).get("Input type") or []
            fl_u[u] = "float" in t
    cand &= np.array([fl_u.get(int(u), False) for u in u_of.tolist()], bool)
    if not cand.any():
        return none
    types: list[str] = []
    run = np.zeros(calls.size, np.int64)

    def code(t: str) -> int:
        if t not in types:
            types.append(t)
        return types.index(t) + 1

    # the kernels' names
    by_name = {int(n): kernel_dtype(names[int(n)]) for n in uniq(kn_name).tolist()}
    kc = np.array([code(by_name[n]) if by_name[n] else 0 for n in kn_name.tolist()], np.int64)
    np.maximum.at(run, c_of, kc)
    run[~cand] = 0
    # the casts inside the calls left (autocast's aten::to / aten::_to_copy / aten::copy_ children)
    want = np.sort(calls[cand & (run == 0)])
    ids = [i for i, n in enumerate(names) if n in _CAST_OPS]
    if want.size and ids:
        lut = np.zeros(len(names), bool)
        lut[ids] = True
        ce = np.flatnonzero(lut[model.name_id])
        anc = np.full(ce.size, -1, np.int64)
        cur = model.parent[ce].astype(np.int64)
        for _ in range(CAST_DEPTH):
            ok = cur >= 0
            if not ok.any():
                break
            pos = np.minimum(np.searchsorted(want, cur), want.size - 1)
            hit = ok & (want[pos] == cur) & (anc < 0)
            anc[hit] = cur[hit]
            cur = np.where(ok, model.parent[np.maximum(cur, 0)], -1)
        inside = np.flatnonzero(anc >= 0)
        if inside.size:
            keys = args_keys(model, ce[inside])
            seen: dict[int, str | None] = {}
            row: dict[int, list] = {}  # op event -> its rows (a graph's reference call is one row per replay)
            for i, c in enumerate(calls.tolist()):
                row.setdefault(c, []).append(i)
            for e, a, key in zip(ce[inside].tolist(), anc[inside].tolist(), keys.tolist()):
                if key not in seen:
                    seen[key] = cast_dtype(names[model.name_id[e]], model.event_args(e))
                t = seen[key]
                if t:
                    for i in row[a]:
                        run[i] = max(run[i], code(t))
    if not run.any():
        return none
    return run, types


def call_floors(model: TraceModel, k: np.ndarray, window, flags, graphs=None) -> CallFloors:
    """The floor of each op call that launched kernels of ``k`` (floors.py), with the L2 reuse of the step:
    an input with the shape and type an earlier call of the device wrote, when that output and everything
    costed since fit in the L2 (``REUSE_LOOKBACK`` calls back at most), does not cross HBM. Ops without a cost
    model are not counted as touching anything, so the reuse can only be overstated: the floor stays a lower
    bound. A call faster than that floor is L2-resident and gets the resident floor (floors.memory_ns).
    Costs are parsed once per distinct (op, shapes, types, arguments): shapes repeat every layer and step.
    ``graphs`` (graphs.GraphMap): a graph replay's kernel mapped to the eager reference run is its reference
    kernel's op call, one call per replay (``CallFloors.inst``), as complete as the reference's."""
    from .floors import TENSORLIST, compute_ns, has_cost_model, op_cost_detail, opaque_bytes, peak_for_dtype

    kind = model.kind
    call = model.op[k].astype(np.int64).copy()
    L = model.launch[k]
    if flags is not None:  # a graph replay's kernels were not launched by the op around the replay
        gl = (L >= 0) & flags["graph_launch"][model.name_id[np.maximum(L, 0)]]
        call[gl] = -1
    inst = call.copy()
    replayed = np.zeros(k.size, bool)
    if graphs is not None and graphs.has_replays:
        r = graphs.reference_of(k)
        hit = r >= 0
        call[hit] = model.op[r[hit]]
        replayed = hit & (call >= 0)
        if replayed.any():  # one call per (replay, reference call): every replay reuses the reference's op events
            _, pid = np.unique(np.stack((L[replayed], call[replayed]), 1), axis=0, return_inverse=True)
            inst[replayed] = model.n + pid.reshape(-1)
    work = np.flatnonzero((kind == KI.KERNEL) | (kind == KI.MEMCPY) | (kind == KI.MEMSET))
    wop = model.op[work]
    has = wop >= 0
    work, wop = work[has], wop[has]
    ops, inv = np.unique(wop, return_inverse=True)
    n_kern = np.bincount(inv, weights=(kind[work] == KI.KERNEL), minlength=ops.size).astype(np.int64)
    # a copy may move data the floor counts; a memset (zeroing a workspace) takes no work off the kernels
    n_other = np.bincount(inv, weights=(kind[work] == KI.MEMCPY), minlength=ops.size).astype(np.int64)
    in_win = np.ones(work.size, bool) if window is None else window.gpu_in(model, work)
    n_out = np.bincount(inv, weights=~in_win, minlength=ops.size).astype(np.int64)
    pos = np.searchsorted(ops, np.maximum(call, 0))
    pos = np.minimum(pos, max(ops.size - 1, 0))
    ok = (call >= 0) & (ops.size > 0)
    if ops.size:
        ok &= ops[pos] == call
        clean = ok & (n_other[pos] == 0)
        single = clean & (n_kern[pos] == 1)
        multi = clean & (n_kern[pos] > 1) & (n_out[pos] == 0)
        if replayed.any():  # the reference's kernels are outside the window: a replayed call is whole when all
            # of its reference call's kernels are among its replay's kernels here
            _, uinv, ucnt = np.unique(inst[replayed], return_inverse=True, return_counts=True)
            whole = ucnt[uinv.reshape(-1)] == n_kern[pos[replayed]]
            multi[replayed] = clean[replayed] & (n_kern[pos[replayed]] > 1) & whole
            # a call whose one piece of work was a copy in the reference runs it as a kernel in the graph (a copy
            # node, ``memcpy32_post``): that kernel is the whole call
            single[replayed] = ok[replayed] & (n_kern[pos[replayed]] + n_other[pos[replayed]] == 1)
    else:
        single = multi = np.zeros(k.size, bool)
    nk = k.size
    out = CallFloors(k, call, single, multi, np.full(nk, np.nan), np.zeros(nk, bool), np.zeros(nk), np.zeros(nk),
                     np.zeros(nk), np.zeros(nk), np.zeros(nk, bool), np.full(nk, -1, np.int64),
                     np.zeros(nk, np.int64), [], [], inst, replayed)
    known = np.array([has_cost_model(n) for n in model.names], dtype=bool)
    sel = np.flatnonzero(single | multi)
    sel = sel[known[model.name_id[call[sel]]]]
    gdev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in model.tracks] + [-1], np.int64)
    devs = uniq(gdev[model.track[k[sel]]]) if sel.size else np.zeros(0, np.int64)
    peaks = {int(d): peaks_for(model.device_name(int(d))) for d in devs.tolist() if d >= 0}
    peaks = {d: p for d, p in peaks.items() if p is not None}
    if sel.size == 0 or not peaks:
        return _with_graphs(out, model, graphs, window)
    # one row per call, in the order its first kernel started on each device
    o = np.lexsort((model.ts_ns[k[sel]], inst[sel]))
    sel = sel[o]
    first = np.r_[True, inst[sel][1:] != inst[sel][:-1]]
    c_first = sel[first]  # kernel position of each call's first kernel
    calls = call[c_first]
    c_of = np.cumsum(first) - 1  # kernel (of sel) -> call row
    c_time = np.bincount(c_of, weights=model.dur_ns[k[sel]], minlength=calls.size)
    c_dev = gdev[model.track[k[c_first]]]
    o2 = np.lexsort((model.ts_ns[k[c_first]], c_dev))
    # costs, once per distinct args blob (the ids Kineto adds stripped), op and the type its kernels ran in
    u_of = args_keys(model, calls)  # numbered in order of first appearance
    run, run_types = run_dtypes(model, calls, u_of, model.name_id[k[sel]], c_of)
    if run is not None:  # the same args run in another type (autocast): a cost of its own
        u_of = np.unique(u_of * (len(run_types) + 1) + run, return_inverse=True)[1].reshape(-1)
    firsts = np.unique(u_of, return_index=True)[1].tolist()
    sig_ix: dict = {}
    shape_ix: dict[str, int] = {}
    dtype_ix: dict[str, int] = {}
    U = len(firsts)
    R = 3  # inputs tracked for reuse per call (the rest never count as reused)
    u_ok = np.zeros(U, bool)
    u_flops, u_bytes = np.zeros(U), np.zeros(U)
    u_read = np.full((U, R), -1, np.int64)
    u_rbytes = np.zeros((U, R))
    u_write, u_wbytes = np.full(U, -2, np.int64), np.zeros(U)
    u_shape, u_dtype = np.full(U, -1, np.int64), np.zeros(U, np.int64)
    dts = []
    for u, i in enumerate(firsts):
        c = int(calls[i])
        args = model.event_args(c)
        try:
            rd = run_types[int(run[i]) - 1] if run is not None and run[i] else None
            cost = op_cost_detail(model.names[model.name_id[c]], args, rd)
        except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError, OverflowError):
            cost = None
        if cost is not None and cost.dtype == TENSORLIST:  # elements counted at one byte: its kernel says how many
            eb = opaque_bytes(model.names[model.name_id[k[c_first[i]]]])
            cost = cost._replace(nbytes=cost.nbytes * eb, dtype=f"{eb}-byte") if eb else None
        if cost is None:
            continue
        u_ok[u] = True
        u_flops[u], u_bytes[u] = cost.flops, cost.nbytes
        for j, (sg, nb) in enumerate(cost.reads[:R]):
            u_read[u, j] = sig_ix.setdefault(sg, len(sig_ix))
            u_rbytes[u, j] = nb
        if cost.write is not None:
            u_write[u] = sig_ix.setdefault(cost.write[0], len(sig_ix))
            u_wbytes[u] = cost.write[1]
        dims = args.get("Input Dims")
        key = repr(dims)
        if key not in shape_ix:
            shape_ix[key] = len(out.shapes)
            out.shapes.append(dims)
        u_shape[u] = shape_ix[key]
        if cost.dtype not in dtype_ix:
            dtype_ix[cost.dtype] = len(dts)
            dts.append(cost.dtype)
        u_dtype[u] = dtype_ix[cost.dtype]
    out.dtypes = dts
    ok_c = u_ok[u_of] & isin(c_dev, list(peaks))
    # L2 reuse, per device in start order: an input matching the output of one of the last calls
    r_sig, r_bytes = u_read[u_of], u_rbytes[u_of]
    w_sig, w_bytes = u_write[u_of], u_wbytes[u_of]
    nb = np.where(ok_c, u_bytes[u_of], 0.0)
    dev_l2 = {d: peaks[d][4] * 1e6 if d in peaks else 0.0 for d in uniq(c_dev).tolist()}
    l2 = np.zeros(c_dev.size)
    for d, v in dev_l2.items():
        l2[c_dev == d] = v
    so = o2  # call rows in device, start order
    n_so = so.size
    cum = np.r_[0.0, np.cumsum(nb[so])]
    # the rows' figures in that order: the call j back is then the same arrays shifted by j (slices, no gathers)
    dv, ok_s, l2_s, wb_s = c_dev[so], ok_c[so], l2[so], w_bytes[so]
    rs_s, ws_s = r_sig[so], w_sig[so]
    has_r = rs_s >= 0
    re_s = np.zeros((n_so, R), bool)
    for j in range(1, REUSE_LOOKBACK + 1):
        if j >= n_so:
            break
        between = cum[j:n_so] - cum[1:n_so - j + 1]  # bytes of the calls strictly between
        fits = (dv[j:] == dv[:-j]) & ok_s[:-j] & (between + wb_s[:-j] <= l2_s[j:])
        if not fits.any():
            continue
        cur = re_s[j:]
        hit = fits[:, None] & (rs_s[j:] == ws_s[:-j][:, None]) & has_r[j:] & ~cur
        # one output is one tensor: it can be the input of at most one argument (add_(x, x) reads it once)
        cur |= hit & (np.cumsum(hit, axis=1) == 1)
    reused = np.zeros((calls.size, R), bool)
    reused[so] = re_s
    reuse_b = (reused * r_bytes).sum(axis=1)
    # floors by device: compute, HBM, and the resident one where the call beat its HBM floor
    fl = np.full(calls.size, np.nan)
    comp = np.zeros(calls.size, bool)
    hbm = np.zeros(calls.size)
    pk = np.zeros(calls.size)
    res = np.zeros(calls.size, bool)
    for d, p in peaks.items():
        m = ok_c & (c_dev == d)
        if not m.any():
            continue
        rate = np.array([peak_for_dtype(p, t) for t in dts], dtype=float)[u_dtype[u_of[m]]]
        flops = u_flops[u_of[m]]
        # once per distinct call (op and args): the same figures as per call
        um = uniq(u_of[m])
        t_u = np.zeros(U)
        t_u[um] = [compute_ns(f, dts[t], p) for f, t in zip(u_flops[um].tolist(), u_dtype[um].tolist())]
        t_c = t_u[u_of[m]]
        by = np.maximum(u_bytes[u_of[m]] - reuse_b[m], 0.0)
        t_m = by / p[3]
        f_h = np.maximum(t_c, t_m)
        beat = c_time[m] < f_h
        by_r = np.where(beat, np.maximum(by - 2 * p[4] * 1e6, 0.0), by)
        t_m = by_r / p[3]
        f = np.maximum(t_c, t_m)
        f[f == 0.0] = np.nan
        fl[m] = f
        comp[m] = t_c >= t_m
        hbm[m] = by_r
        res[m] = beat
        pk[m] = np.where(t_c >= t_m, flops / (rate * 1e3), t_m)
    # back to kernels: every kernel of a call carries the call's figures
    ks = sel
    cr = c_of
    out.floor[ks] = fl[cr]
    out.compute[ks] = comp[cr]
    out.flops[ks] = np.where(np.isnan(fl[cr]), 0.0, u_flops[u_of[cr]])
    out.nbytes[ks] = np.where(np.isnan(fl[cr]), 0.0, u_bytes[u_of[cr]])
    out.hbm_bytes[ks] = hbm[cr]
    out.peak_ns[ks] = pk[cr]
    out.resident[ks] = res[cr] & ~np.isnan(fl[cr])
    out.shape[ks] = u_shape[u_of[cr]]
    out.dtype[ks] = u_dtype[u_of[cr]]
    return _with_graphs(out, model, graphs, window)


def _with_graphs(cf: CallFloors, model: TraceModel, graphs, window) -> CallFloors:
    """``cf`` with what the window's graph replays got from the map (graphs.coverage), where there are any."""
    if graphs is not None and graphs.has_replays:
        from .graphs import coverage

        cf.graphs = coverage(model, graphs, cf, window)
    return cf


def achieved_text(row) -> str:
    """'670 TFLOP/s, 1.2 TB/s' for a kernel or op row (its bound's figure first); '–' without a floor."""
    tf, gb = row.tflops, row.gbps
    parts = []
    if tf is not None:
        parts.append(f"{tf:.3g} TFLOP/s" if tf >= 1 else f"{tf * 1e3:.3g} GFLOP/s")
    if gb is not None:
        parts.append(f"{gb / 1e3:.3g} TB/s" if gb >= 1000 else f"{gb:.3g} GB/s")
    if row.bound == "memory":
        parts.reverse()
    return ", ".join(parts) if parts else "–"


def _top(values) -> object:
    c = Counter(repr(v) for v in values)
    if not c:
        return None
    best = c.most_common(1)[0][0]
    return next(v for v in values if repr(v) == best)


def _most(ix: np.ndarray, table: list):
    """The most common entry of ``table`` among the indices ``ix`` (ties: the lowest index)."""
    ix = ix[ix >= 0]
    if ix.size == 0:
        return None
    return table[int(np.bincount(ix).argmax())]


def kernel_stats(model: TraceModel, top: int = 30, window=None, flags=None, floors: CallFloors | None = None
                 ) -> list[KernelStat]:
    k = np.flatnonzero(model.kind == KI.KERNEL)
    if window is not None:
        k = k[window.gpu_in(model, k)]
    if k.size == 0:
        return []
    nid = model.name_id[k]
    dur = model.dur_ns[k]
    tot = np.bincount(nid, weights=dur, minlength=len(model.names))
    cnt = np.bincount(nid, minlength=len(model.names))
    grand = float(dur.sum()) or 1.0
    order = np.argsort(-tot, kind="stable")
    gtr = {t.id: t.device for t in model.tracks if t.kind is TrackKind.GPU}
    cf = floors if floors is not None else call_floors(model, k, window, flags)
    fhas = cf.has
    out = []
    for name_id in order[:top]:
        if cnt[name_id] == 0:
            break
        sel = nid == name_id
        ks = k[sel]
        st = KernelStat(model.names[name_id], int(cnt[name_id]), int(dur[sel].sum()),
                        100.0 * float(tot[name_id]) / grand, avg_ns=float(tot[name_id]) / cnt[name_id])
        st.device = gtr.get(int(model.track[ks[0]]))
        ops = model.op[ks]
        if cf.replayed is not None and cf.replayed[sel].any():  # a graph replay's kernels: the reference's ops
            ops = np.where(cf.replayed[sel], cf.call[sel], ops)
        ops = ops[ops >= 0]
        on = -1
        if ops.size:
            on = Counter(model.name_id[ops].tolist()).most_common(1)[0][0]
            st.op = model.names[on]
        mine = sel & cf.single & fhas
        st.op_floor_calls = int(np.count_nonzero(sel & cf.multi & fhas))
        if mine.any():
            fl = cf.floor[mine]
            st.floor_total_ns = float(fl.sum())
            st.floored_count = int(mine.sum())
            st.floored_total_ns = int(dur[mine].sum())
            st.floor_ns = st.floor_total_ns / st.floored_count
            comp = float(fl[cf.compute[mine]].sum())
            st.bound = "compute" if comp >= st.floor_total_ns - comp else "memory"
            st.shapes = _most(cf.shape[mine], cf.shapes)
            st.dtype = _most(cf.dtype[mine], cf.dtypes)
            st.flops = float(cf.flops[mine].sum())
            st.nbytes = float(cf.nbytes[mine].sum())
            st.peak_pct = 100.0 * float(cf.peak_ns[mine].sum()) / st.floored_total_ns if st.floored_total_ns else None
            st.l2_resident = int(np.count_nonzero(cf.resident[mine]))
        elif on >= 0:
            st.shapes = model.event_args(int(ops[model.name_id[ops] == on][0])).get("Input Dims")
        out.append(st)
    return out


def op_floor_stats(model: TraceModel, window=None, flags=None, floors: CallFloors | None = None
                   ) -> list[OpFloorStat]:
    """The op calls that launched several kernels, grouped by (op, kernel names), with one floor per call."""
    k = np.flatnonzero(model.kind == KI.KERNEL)
    if window is not None:
        k = k[window.gpu_in(model, k)]
    if k.size == 0:
        return []
    cf = floors if floors is not None else call_floors(model, k, window, flags)
    sel = cf.multi & cf.has
    if not sel.any():
        return []
    pos = np.flatnonzero(sel)
    ks, calls = k[sel], (cf.inst if cf.inst is not None else cf.call)[sel]  # one call instance per group
    o = np.lexsort((model.ts_ns[ks], calls))
    ks, calls, pos = ks[o], calls[o], pos[o]
    starts = np.flatnonzero(np.r_[True, calls[1:] != calls[:-1]])
    ends = np.r_[starts[1:], calls.size]
    gtr = {t.id: t.device for t in model.tracks if t.kind is TrackKind.GPU}
    groups: dict[tuple, list] = {}
    for a, b in zip(starts.tolist(), ends.tolist()):
        c = int(cf.call[pos[a]])
        key = (int(model.name_id[c]), tuple(model.name_id[ks[a:b]].tolist()))
        groups.setdefault(key, []).append((int(pos[a]), int(model.dur_ns[ks[a:b]].sum()), int(ks[a])))
    out = []
    for (on, kn), rows in groups.items():
        p = np.array([r[0] for r in rows], np.int64)
        t = sum(d for _, d, _ in rows)
        fl = cf.floor[p]
        ft = float(fl.sum())
        comp = float(fl[cf.compute[p]].sum())
        out.append(OpFloorStat(model.names[on], [model.names[x] for x in kn], len(rows), t,
                               ft, "compute" if comp >= ft - comp else "memory", _most(cf.shape[p], cf.shapes),
                               gtr.get(int(model.track[rows[0][2]])), float(cf.flops[p].sum()),
                               float(cf.nbytes[p].sum()), 100.0 * float(cf.peak_ns[p].sum()) / t if t else None,
                               int(np.count_nonzero(cf.resident[p])), _most(cf.dtype[p], cf.dtypes)))
    out.sort(key=lambda r: -r.total_ns)
    return out


def launch_stats(model: TraceModel, window=None) -> dict:
    """Launch-to-start delay, CPU cost per launch, kernels shorter than their launch, launch rate."""
    k = np.flatnonzero((model.kind == KI.KERNEL) & (model.launch >= 0))
    if window is not None:
        k = k[window.gpu_in(model, k)]
    if k.size == 0:
        return {"count": 0}
    L = model.launch[k]
    delay = model.ts_ns[k] - model.ts_ns[L]
    uniq_l = uniq(L)
    cost = model.dur_ns[uniq_l]
    t0 = int(model.ts_ns[uniq_l].min())
    t1 = int((model.ts_ns[uniq_l] + model.dur_ns[uniq_l]).max())
    span_ms = max((t1 - t0) / 1e6, 1e-9)
    shorter = int(np.count_nonzero(model.dur_ns[k] < model.dur_ns[L]))
    names = Counter(model.name_id[uniq_l].tolist())
    return {
        "count": int(uniq_l.size),
        "kernels": int(k.size),
        "delay_median_ns": float(median(delay)),
        "delay_p90_ns": percentile(delay, 90),
        "cost_median_ns": float(median(cost)),
        "cost_total_ns": int(cost.sum()),
        "kernels_shorter_than_launch": shorter,
        "rate_per_ms": uniq_l.size / span_ms,
        "calls": {model.names[n]: c for n, c in names.most_common(8)},
    }


def _outermost(parent: np.ndarray, member: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """For each event of ``idx`` (all members): its outermost enclosing member, itself when none encloses it.
    One vectorised step per nesting level."""
    root = idx.copy()
    cur = parent[idx]
    live = np.arange(idx.size)
    for _ in range(MAX_CHAIN):
        keep = cur >= 0
        live, cur = live[keep], cur[keep]
        if live.size == 0:
            break
        hit = member[cur]
        root[live[hit]] = cur[hit]
        cur = parent[cur]
    return root


def sync_stats(model: TraceModel, flags, stacks: StackIndex, max_stack_samples: int = 200, window=None) -> list[dict]:
    """One row per synchronisation, named by its outermost synchronising call: ``aten::is_nonzero`` ->
    ``aten::item`` -> ``aten::_local_scalar_dense`` -> ``cudaStreamSynchronize`` is one ``aten::is_nonzero``
    with that ``chain``. Synchronising calls are the sync/blocking-copy runtime calls, the sync ops by name
    (``aten::item``, ...) and the aten ops holding a sync runtime call (``.cpu()`` is ``aten::to`` -> ... ->
    ``cudaStreamSynchronize``). count and total_ns are those of the outermost calls; ``wait_ns`` is the time
    inside the runtime calls that block (the wait itself)."""
    nid = name_ids(model)
    cpu_track = np.array([t.kind is TrackKind.CPU for t in model.tracks] + [False], dtype=bool)
    on_cpu = cpu_track[model.track] if model.n else np.zeros(0, bool)
    rt = on_cpu & ((model.kind == KI.RUNTIME) | (model.kind == KI.DRIVER))
    op = on_cpu & (model.kind == KI.CPU_OP)
    sync_rt = rt & (flags["sync_rt"][nid] | flags["blocking_copy"][nid])
    member = sync_rt | (op & flags["sync_op"][nid])
    rt_idx = np.flatnonzero(sync_rt)
    if rt_idx.size:  # aten ops above a sync runtime call synchronise too
        is_aten = np.array([n.startswith("aten::") for n in model.names], dtype=bool)[nid]
        cur = model.parent[rt_idx]
        for _ in range(MAX_CHAIN):
            cur = uniq(cur[cur >= 0])
            if cur.size == 0:
                break
            member[cur[op[cur] & is_aten[cur]]] = True
            cur = model.parent[cur]
    idx = np.flatnonzero(member)
    if idx.size == 0:
        return []
    root = _outermost(model.parent, member, idx)
    keep = np.ones(idx.size, bool) if window is None else window.cpu_in(model, root)
    idx, root = idx[keep], root[keep]
    if idx.size == 0:
        return []
    roots = uniq(root)
    # each root's chain: the distinct member names of its subtree in pre-order (events sort by ts, -dur)
    o = np.lexsort((-model.dur_ns[idx], model.ts_ns[idx], root))
    chains: dict[int, list[str]] = {}
    for r, e in zip(root[o].tolist(), idx[o].tolist()):
        c = chains.setdefault(r, [])
        nm = model.names[nid[e]]
        if nm not in c:
            c.append(nm)
    wait = np.bincount(np.searchsorted(roots, root[sync_rt[idx]]), weights=model.dur_ns[idx[sync_rt[idx]]],
                       minlength=roots.size)
    rn = nid[roots]
    tot = np.bincount(rn, weights=model.dur_ns[roots], minlength=len(model.names))
    cnt = np.bincount(rn, minlength=len(model.names))
    wt = np.bincount(rn, weights=wait, minlength=len(model.names))
    out = []
    present = np.flatnonzero(cnt)
    for n in present[np.argsort(-tot[present], kind="stable")]:
        ev = roots[rn == n]
        sample = ev[:max_stack_samples]
        uf = stacks.user_frame(model.track[sample].astype(np.int64), model.ts_ns[sample])
        c = Counter()
        for e, u in zip(sample.tolist(), uf.tolist()):
            if u >= 0:
                c[model.name(u)] += 1
            else:
                fr = signature_frame(stacks.stack_at(int(model.track[e]), int(model.ts_ns[e])))
                c[fr.name if fr is not None and fr.event != e else "(no stack)"] += 1
        ch = Counter(tuple(chains[e]) for e in ev.tolist()).most_common(1)[0][0]
        out.append({"name": model.names[n], "count": int(cnt[n]), "total_ns": int(tot[n]), "wait_ns": int(wt[n]),
                    "chain": list(ch), "stacks": [{"frame": f, "count": k} for f, k in c.most_common(3)]})
    return out


_COPY_RE = re.compile(r"^Memcpy\s+(\w+)\s*(?:\((\w+)\s*->\s*(\w+)\))?", re.I)


def copy_kind(name: str) -> str:
    m = _COPY_RE.match(name)
    if not m:
        return "Memset" if name.lower().startswith("memset") else name
    d, src, dst = m.group(1), m.group(2), m.group(3)
    host = None
    for side in (src, dst):
        if side and side.lower() not in ("device", "array"):
            host = side
    return f"{d} {host}" if host else d


def copy_stats(model: TraceModel, window=None) -> list[dict]:
    idx = np.flatnonzero((model.kind == KI.MEMCPY) | (model.kind == KI.MEMSET))
    if window is not None:
        idx = idx[window.gpu_in(model, idx)]
    if idx.size == 0:
        return []
    kinds = {}
    for n in uniq(model.name_id[idx]).tolist():
        kinds[n] = copy_kind(model.names[n])
    labels = sorted(set(kinds.values()))
    lab_ix = {l: i for i, l in enumerate(labels)}
    m = np.zeros(len(model.names), np.int64)
    for n, l in kinds.items():
        m[n] = lab_ix[l]
    li = m[model.name_id[idx]]
    cnt = np.bincount(li, minlength=len(labels))
    byt = np.bincount(li, weights=model.nbytes[idx], minlength=len(labels))
    tim = np.bincount(li, weights=model.dur_ns[idx], minlength=len(labels))
    out = []
    for i in np.argsort(-tim, kind="stable"):
        t = int(tim[i])
        out.append({"kind": labels[i], "count": int(cnt[i]), "bytes": int(byt[i]), "total_ns": t,
                    "gbps": (float(byt[i]) / t) if t > 0 and byt[i] > 0 else None,
                    "pageable": "pageable" in labels[i].lower()})
    return out


def allocator_stats(model: TraceModel, flags, window=None) -> dict:
    nid = name_ids(model)
    rt = (model.kind == KI.RUNTIME) | (model.kind == KI.DRIVER) | (model.kind == KI.CPU_OP)
    mask = (rt & flags["alloc"][nid]) | ((model.kind == KI.PYTHON) & flags["empty_cache"][nid])
    idx = np.flatnonzero(mask)
    if window is not None:
        idx = idx[window.cpu_in(model, idx)]
    calls = {}
    if idx.size:
        tot = np.bincount(nid[idx], weights=model.dur_ns[idx], minlength=len(model.names))
        cnt = np.bincount(nid[idx], minlength=len(model.names))
        for n in np.flatnonzero(cnt):
            calls[model.names[n]] = {"count": int(cnt[n]), "total_ns": int(tot[n])}
    mem = np.flatnonzero((model.kind == KI.INSTANT) & (nid == _name_index(model, "[memory]")))
    if window is not None:
        mem = mem[window.cpu_in(model, mem)]
    memory = None
    if mem.size:
        peak_alloc = peak_res = None
        aids = uniq(model.args_id[mem])
        aids = aids[aids >= 0][:100_000]
        import orjson

        for a in aids.tolist():
            try:
                d = orjson.loads(model.args[a])
            except ValueError:
                continue
            ta, tr = d.get("Total Allocated"), d.get("Total Reserved")
            if isinstance(ta, (int, float)):
                peak_alloc = ta if peak_alloc is None else max(peak_alloc, ta)
            if isinstance(tr, (int, float)):
                peak_res = tr if peak_res is None else max(peak_res, tr)
        memory = {"events": int(mem.size), "allocated_bytes": int(model.nbytes[mem][model.nbytes[mem] > 0].sum()),
                  "peak_allocated": peak_alloc, "peak_reserved": peak_res}
    return {"calls": calls, "memory": memory}


def _name_index(model: TraceModel, name: str) -> int:
    try:
        return model.names.index(name)
    except ValueError:
        return -2


def collective_stats(model: TraceModel, flags, window=None) -> list[dict]:
    """NCCL kernels by name: count, time, the part not overlapped by compute kernels, process group."""
    kind = model.kind
    nid = name_ids(model)
    gdev = np.array([t.device if t.kind is TrackKind.GPU else -1 for t in model.tracks] + [-1], dtype=np.int64)
    isk = kind == KI.KERNEL
    coll = np.flatnonzero(isk & flags["coll_kernel"][nid])
    if window is not None:
        coll = coll[window.gpu_in(model, coll)]
    out = []
    if coll.size == 0:
        ops = np.flatnonzero((kind == KI.CPU_OP) & flags["coll_op"][nid])
        if window is not None:
            ops = ops[window.cpu_in(model, ops)]
        if ops.size == 0:
            return []
        tot = np.bincount(nid[ops], weights=model.dur_ns[ops], minlength=len(model.names))
        cnt = np.bincount(nid[ops], minlength=len(model.names))
        for n in np.flatnonzero(cnt):
            out.append({"name": model.names[n], "count": int(cnt[n]), "total_ns": int(tot[n]), "exposed_ns": None,
                        "wait_ns": 0, "late_rank": None, "process_group": None, "cpu_side": True})
        return sorted(out, key=lambda d: -d["total_ns"])
    dev = gdev[model.track[coll]]
    comp = np.flatnonzero(isk & ~flags["coll_kernel"][nid])
    if window is not None:
        comp = comp[window.gpu_in(model, comp)]
    comp_dev = gdev[model.track[comp]]
    cov = {int(d): Coverage(model.ts_ns[comp[comp_dev == d]], model.ts_ns[comp[comp_dev == d]]
                            + model.dur_ns[comp[comp_dev == d]]) for d in uniq(dev)}
    ts, dur = model.ts_ns[coll], model.dur_ns[coll]
    overl = np.zeros(coll.size, np.int64)
    for d, c in cov.items():
        sel = dev == d
        overl[sel] = c.covered(ts[sel], ts[sel] + dur[sel])
    for n in uniq(nid[coll]).tolist():
        sel = nid[coll] == n
        pg = None
        ops = model.op[coll[sel]]
        ops = ops[ops >= 0]
        if ops.size:
            a = model.event_args(int(ops[0]))
            pg = a.get("Process Group Name") or a.get("Process Group Description")
        out.append({"name": model.names[n], "count": int(sel.sum()), "total_ns": int(dur[sel].sum()),
                    "exposed_ns": int((dur[sel] - overl[sel]).sum()), "wait_ns": 0, "late_rank": None,
                    "process_group": pg, "cpu_side": False})
    return sorted(out, key=lambda d: -d["total_ns"])
