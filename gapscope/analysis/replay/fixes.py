"""What fixing a finding means for the replay, per cause: the host intervals its fix removes from the launching
threads (and, for copies, the new item durations and the calls that stop waiting; for a sync finding's whole
check, the GPU items dropped), or the step as one graph replay. The rules per cause: replay.py's module
docstring."""

from __future__ import annotations

import numpy as np

from .. import causes
from ...trace.model import Kind
from ..hosttime import frame_own_intervals
from ..intervals import isin, median, member, name_ids, subtract, union, uniq
from ..names import SYNC_OPS
from .model import _CALLS, Replay, _inside
from ..thresholds import MAX_PARENT_STEPS, BANDWIDTH_MIN_BYTES, COLD_MIN_REF, COLD_NS, DEFAULT, PINNED_GBPS

#: synchronising ops that hand one value of a device tensor to the host (a check's read): the host reads of
#: names.SYNC_OPS but ``tolist``, which hands over a whole tensor
SCALAR_READS = tuple(sorted(SYNC_OPS - {"aten::tolist"}))


def _frame_intervals(m, name: str | None, kinds=(int(Kind.PYTHON),)):
    """(start, end, thread) of the events named ``name`` of the given kinds."""
    if not name:
        return None
    try:
        nid = m.names.index(name)
    except ValueError:
        return None
    idx = np.flatnonzero((m.name_id == nid) & member(m.kind, kinds))
    if idx.size == 0:
        idx = np.flatnonzero(m.name_id == nid)
    if idx.size == 0:
        return None
    return m.ts_ns[idx], m.ts_ns[idx] + m.dur_ns[idx], m.track[idx].astype(np.int64)


def _within(m, idx, fr, window=None):
    """Mask over idx: the event starts inside one of the frame intervals on its own thread (all True without a
    frame: then, when the window is clipped, inside the measured steps)."""
    if fr is None:
        if window is not None and getattr(window, "clipped", False):
            return window.cpu_in(m, idx)
        return np.ones(idx.size, bool)
    fs, fe, ft = fr
    ok = np.zeros(idx.size, bool)
    for t in uniq(ft).tolist():
        us, ue = union(fs[ft == t], fe[ft == t])
        sel = m.track[idx] == t
        ok[sel] = _inside(us, ue, m.ts_ns[idx[sel]])
    return ok


def _own_keep(r: Replay):
    """What a frame's own time keeps, the same for every frame (once per replay): runtime calls and the ops that
    issue them; and the user frames and kernel launchers (the frame itself excepted by the caller). Ops that
    issue no runtime call (CPU tensor work, views) are host work of the frame."""
    got = r.__dict__.get("_own_keep")
    if got is not None:
        return got
    m = r.model
    py = m.kind == int(Kind.PYTHON)
    user = (r.flags["user_frame"] | r.flags["launcher_frame"])[name_ids(m)] & py
    is_call = member(m.kind, _CALLS)
    calls = np.flatnonzero(is_call)
    ops = np.flatnonzero(m.kind == int(Kind.CPU_OP))
    issuing = np.zeros(m.n, bool)
    for t in uniq(m.track[calls]).tolist():
        ct = calls[m.track[calls] == t]
        ot = ops[m.track[ops] == t]
        if ot.size == 0:
            continue
        cs = np.sort(m.ts_ns[ct])
        # an op issues a call when a call starts inside it
        a = np.searchsorted(cs, m.ts_ns[ot], side="left")
        b = np.searchsorted(cs, m.ts_ns[ot] + m.dur_ns[ot], side="left")
        issuing[ot[b > a]] = True
    got = r._own_keep = (is_call | issuing, user)
    return got


def python_own(r: Replay, name: str):
    """The host time of frame ``name`` that a fused GPU call removes: its own time (hosttime.frame_own_intervals)
    with the replay's children, (start, end, thread) arrays, or None when no event has the name."""
    m = r.model
    fr = _frame_intervals(m, name)
    if fr is None:
        return None
    calls_issuing, user_any = _own_keep(r)
    keep_k = calls_issuing | (user_any & (m.name_id != m.names.index(name)))
    return frame_own_intervals(m, fr, keep_k)


def _check_ops(r: Replay, frame: str | None, reads):
    """The whole check of a sync finding: ((s, e, thread) to remove, items to drop, number of ops), or None when the
    frame is not a check (see the sync entry of replay.py's module docstring)."""
    m = r.model
    if not frame or reads.size == 0:
        return None
    names = np.array([m.names[i] for i in m.name_id[reads].tolist()])
    if not isin(names, SCALAR_READS).all() or (m.kind[reads] != int(Kind.CPU_OP)).any():
        return None
    fr = _frame_intervals(m, frame)
    if fr is None:
        return None
    fs, fe, ft = fr
    nid = m.names.index(frame)
    py = np.flatnonzero((m.kind == int(Kind.PYTHON)) & (m.name_id != nid) & r.flags["user_frame"][name_ids(m)])
    L = m.launch[r.items]
    S, E, T = [], [], []
    drop = np.zeros(r.items.size, bool)
    n_ops = 0
    ops = np.flatnonzero(m.kind == int(Kind.CPU_OP))
    for t in uniq(ft).tolist():
        us, ue = union(fs[ft == t], fe[ft == t])
        rd = reads[m.track[reads] == t]
        rs, re_ = m.ts_ns[rd], m.ts_ns[rd] + m.dur_ns[rd]
        lt = L[(L >= 0)]
        lt = lt[m.track[lt] == t]
        for a, b in zip(us.tolist(), ue.tolist()):
            inn = (rs >= a) & (rs < b)
            if not inn.any():
                return None  # a call of the frame without a read: the frame does more than check
            last = int(re_[inn].max())
            if ((m.ts_ns[lt] >= last) & (m.ts_ns[lt] < b)).any():
                return None  # GPU work after the read: it may use what was computed
        # the frame's own time: nested user frames excepted (they may do other work)
        pt = py[m.track[py] == t]
        ps, pe = m.ts_ns[pt], m.ts_ns[pt] + m.dur_ns[pt]
        j = np.clip(np.searchsorted(us, ps, side="right") - 1, 0, None)
        nested = (us.size > 0) & (ps >= us[j]) & (pe <= ue[j]) & ~((ps == us[j]) & (pe == ue[j]))
        s_, e_ = subtract(us, ue, ps[nested], pe[nested])
        S.append(s_), E.append(e_), T.append(np.full(s_.size, t, np.int64))
        own = outermost(m, ops[(m.track[ops] == t) & _inside(s_, e_, m.ts_ns[ops])])
        n_ops += int((~isin(own, rd)).sum())
        sel = (L >= 0) & (m.track[np.where(L >= 0, L, 0)] == t)
        drop[sel] = _inside(s_, e_, m.ts_ns[L[sel]])
    return (np.concatenate(S), np.concatenate(E), np.concatenate(T)), drop, n_ops


def outermost(m, idx):
    """Drop events of idx nested (by time, on the same thread) inside another event of idx."""
    if idx.size == 0:
        return idx
    keep = np.ones(idx.size, bool)
    for t in uniq(m.track[idx]).tolist():
        sel = np.flatnonzero(m.track[idx] == t)
        ii = idx[sel]
        ts, dur = m.ts_ns[ii], m.dur_ns[ii]
        # by start, the longer first: the model's order already (a thread's events by start, the outer first),
        # which the sort keeps as it is (a stable sort of a sorted column): taken as it is when it holds
        o = None if ((ts[1:] > ts[:-1]) | ((ts[1:] == ts[:-1]) & (dur[1:] <= dur[:-1]))).all() else \
            np.lexsort((-dur, ts))
        e = ts + dur if o is None else (ts + dur)[o]
        run = np.maximum.accumulate(e)
        inner = np.r_[False, e[1:] <= run[:-1]]
        keep[sel if o is None else sel[o]] = ~inner
    return idx[keep]


def calls_under(r: Replay, mask_names, frame, kinds=(int(Kind.CPU_OP), int(Kind.RUNTIME), int(Kind.DRIVER))):
    """The outermost events of ``kinds`` whose name is in ``mask_names`` (a per-name-id mask) that start inside a
    call of frame ``frame`` on its thread (without a frame: anywhere, inside the measured steps when the window is
    clipped); empty when no event has the frame's name."""
    m = r.model
    idx = np.flatnonzero(mask_names[name_ids(m)] & member(m.kind, kinds))
    fr = _frame_intervals(m, frame)
    if frame and fr is None:
        return np.zeros(0, np.int64)
    idx = idx[_within(m, idx, fr, r.window)]
    return outermost(m, idx)


def _copy_removal(r: Replay, kind: str | None, pageable_only: bool, frame):
    from ..activity import copy_kind

    m = r.model
    memk = int(Kind.MEMCPY)
    sel = (m.kind[r.items] == memk) & r.has_launch & r.in_window
    cand = r.items[sel]
    ok = []
    for i in cand.tolist():
        nm = m.name(i)
        ck = copy_kind(nm)
        if not ck.startswith(("HtoD", "DtoH")):  # pinned memory and non_blocking are about host copies
            continue
        if kind and ck != kind:
            continue
        if pageable_only and "Pageable" not in nm:
            continue
        ok.append(i)
    if not ok:
        return None
    ok = np.array(ok, np.int64)
    L = m.launch[ok]
    fr = _frame_intervals(m, frame)
    if frame and fr is not None:
        inn = _within(m, L, fr)
        ok, L = ok[inn], L[inn]
    if L.size == 0:
        return None
    # on the GPU, a pinned copy of the same bytes: at the trace's pinned bandwidth for this direction
    pos = np.searchsorted(r.items, ok, sorter=r.item_sort)
    pos = r.item_sort[pos]
    dur = r.dur.copy()
    page = np.array(["Pageable" in m.name(i) for i in ok.tolist()], bool)
    bw = _pinned_gbps(r, kind)
    nb = m.nbytes[ok]
    dur[pos[page]] = np.minimum(dur[pos[page]], np.ceil(nb[page] / bw).astype(np.int64))
    # median launch-call cost of kernel launches
    lk = m.launch[r.items[(m.kind[r.items] == int(Kind.KERNEL)) & r.has_launch]]
    cost = int(median(m.dur_ns[lk])) if lk.size else 0
    S = [m.ts_ns[L] + np.minimum(cost, m.dur_ns[L])]
    E = [m.ts_ns[L] + m.dur_ns[L]]
    T = [m.track[L].astype(np.int64)]
    # sync calls inside the op that issued each copy
    ops = m.op[L]
    ops = uniq(ops[ops >= 0])
    if ops.size:
        syn = np.flatnonzero(r.flags["sync_rt"][name_ids(m)] & member(m.kind, _CALLS))
        for o in ops.tolist():
            os_, oe = int(m.ts_ns[o]), int(m.ts_ns[o] + m.dur_ns[o])
            inn = syn[(m.track[syn] == m.track[o]) & (m.ts_ns[syn] >= os_) & (m.ts_ns[syn] < oe)]
            S.append(m.ts_ns[inn]), E.append(m.ts_ns[inn] + m.dur_ns[inn]), T.append(m.track[inn].astype(np.int64))
    return (np.concatenate(S), np.concatenate(E), np.concatenate(T)), dur, bw, L


def _pinned_gbps(r: Replay, kind: str | None) -> float:
    """Median bandwidth (GB/s = bytes/ns) of the trace's pinned copies of ``kind`` of ``BANDWIDTH_MIN_BYTES`` or
    more, else ``PINNED_GBPS``."""
    from ..activity import copy_kind

    m = r.model
    it = r.items[m.kind[r.items] == int(Kind.MEMCPY)]
    bws = [m.nbytes[i] / m.dur_ns[i] for i in it.tolist()
           if "Pinned" in m.name(i) and m.nbytes[i] >= BANDWIDTH_MIN_BYTES and m.dur_ns[i] > 0
           and (not kind or copy_kind(m.name(i)) == kind)]
    return float(median(bws)) if bws else PINNED_GBPS


def after_effect(a, r: Replay, calls):
    """The host work an allocator call slows down after it returns (``cudaFree`` / ``cudaMalloc`` of large blocks
    unmap and map memory: the host's caches and TLBs start cold), as host intervals to remove and its total.

    Each host event's own time (hosttime.py: the time it ran innermost) that starts within ``COLD_NS`` after one of
    ``calls`` (and before the next) is compared with the median own time of the same name away from every call (at
    least ``COLD_MIN_REF`` instances; names without them do not count); the excess of the events after a call, when
    positive, is that call's after-effect. The fix takes it off the host time after the call in proportion: each
    stretch between the thread's anchors (launches, waits) there loses the same share, so no launch moves ahead
    of another. Returns ((s, e, thread) arrays, excess ns) or None."""
    from ..hosttime import host_time

    m = r.model
    if calls.size == 0 or getattr(a, "stacks", None) is None:
        return None
    S, E, T = [], [], []
    total = 0
    for t in uniq(m.track[calls]).tolist():
        c = calls[m.track[calls] == t]
        c = c[np.argsort(m.ts_ns[c], kind="stable")]
        cs, ce = m.ts_ns[c], m.ts_ns[c] + m.dur_ns[c]
        sl = m.track_slice(int(t))
        if sl.stop <= sl.start:
            continue
        lo = int(m.ts_ns[sl.start])
        hi = int((m.ts_ns[sl] + m.dur_ns[sl]).max())
        ht = host_time(a.stacks, m, int(t), lo, hi)
        ev, ns = ht.events, ht.ns
        if ev.size == 0:
            continue
        ts = m.ts_ns[ev]
        # the latest call that ended at or before each event's start, and whether the event is in its region
        k = np.searchsorted(ce, ts, side="right") - 1
        kk = np.clip(k, 0, None)
        nxt = np.where(kk + 1 < cs.size, cs[np.minimum(kk + 1, cs.size - 1)], np.iinfo(np.int64).max)
        near = (k >= 0) & (ts - ce[kk] < COLD_NS) & (ts < nxt)
        in_call = _inside(*union(cs, ce), ts)
        far = ~near & ~in_call
        nid = m.name_id[ev]
        excess = np.zeros(cs.size, np.float64)
        busy = np.zeros(cs.size, np.float64)
        np.add.at(busy, kk[near], ns[near].astype(np.float64))
        for n in uniq(nid[near]).tolist():
            ref = ns[far & (nid == n)]
            if ref.size < COLD_MIN_REF:
                continue
            sel = near & (nid == n)
            np.add.at(excess, kk[sel], ns[sel] - float(median(ref)))
        excess = np.clip(excess, 0, None)
        excess = np.minimum(excess, busy)
        # each call's region, cut at the thread's anchors; every piece loses the same share
        at = r.a_thr == t
        bounds = uniq(np.concatenate((r.a_ts[at], r.a_end[at])))
        for j in np.flatnonzero(excess > 0).tolist():
            a0 = int(ce[j])
            a1 = int(min(a0 + COLD_NS, cs[j + 1] if j + 1 < cs.size else a0 + COLD_NS))
            span = a1 - a0
            if span <= 0:
                continue
            f = min(float(excess[j]) / span, 1.0)
            cut = np.concatenate(([a0], bounds[(bounds > a0) & (bounds < a1)], [a1]))
            p, q = cut[:-1], cut[1:]
            keep = q > p
            p, q = p[keep], q[keep]
            cut_s = q - np.round((q - p) * f).astype(np.int64)
            S.append(cut_s), E.append(q), T.append(np.full(q.size, t, np.int64))
            total += int((q - cut_s).sum())  # what is removed, so that the figure the fix states is what it takes off
    if not S:
        return None
    return (np.concatenate(S), np.concatenate(E), np.concatenate(T)), total


def dependency_waits(a, r: Replay) -> dict[int, tuple[int, int]]:
    """Per device: (ns, gaps) the GPU waited on a dependency that no change to the host's issuing removes, over
    the window: the ``gpu-wait`` gaps (the next kernel was queued before the gap, or launched early in it and held
    far longer than the usual latency: an event wait on another stream or process, work the trace does not show).
    Of each such gap the part after its launch call plus the trace's usual launch latency (of the kernels that
    started on an idle device, the one the cause's rule uses) and one graph dispatch gap is kept (what the host's
    issuing can explain goes); a kept part below ``wait_min_ns`` is dispatch, not a wait. A CUDA graph replays the same dependencies: on tracelens' sglang decode (MI300X) one 463.3 ms gap waited
    on a ``hipStreamWaitEvent``, and the graph what-if without it projected −97.9% of the step."""
    from ..causes import code
    from ..gaps import typical_launch_delay

    g, m = a.gaps, a.model
    if len(g) == 0:
        return {}
    rows = np.flatnonzero(g.cause == code("gpu-wait"))
    if rows.size == 0:
        return {}
    t0, t1 = g.start_ns[rows], g.end_ns[rows]
    li = g.launch_idx[rows]
    # the launch call's own start (t_launch_ns is clipped to the gap): a kernel launched just before the gap
    # still had its usual latency to go
    tl = np.where(li >= 0, m.ts_ns[np.where(li >= 0, li, 0)], t1)
    ready = np.maximum(t0, tl + typical_launch_delay(m, a.flags)) + r.graph_gap_ns
    kept = np.clip(t1 - ready, 0, None)
    ok = kept >= a.config.wait_min_ns
    out: dict[int, tuple[int, int]] = {}
    dv = g.device[rows]
    for d in uniq(dv[ok]).tolist():
        sel = ok & (dv == d)
        out[int(d)] = (int(kept[sel].sum()), int(sel.sum()))
    return out


def kept_wait_text(a, r: Replay, step_ns: float) -> str:
    """The graph fix's note on the dependency waits it keeps ("; the 463.25 ms per step the GPU waited on ...
    stays"), when they are at least ``graph_wait_note_share`` of the step ``step_ns``; else ""."""
    from .calibrate import _steps
    from ..units import fmt_ns

    kept = dependency_waits(a, r)
    ns, n = sum(k for k, _ in kept.values()), sum(k for _, k in kept.values())
    per = ns / _steps(a)
    if n == 0 or per < a.config.graph_wait_note_share * step_ns:
        return ""
    return (f"; the {fmt_ns(per)} per step the GPU waited on dependencies ({_n(n, 'gpu-wait gap')}: an event "
            "wait, another stream) stays: a graph does not remove it")


def host_reads(a, r: Replay) -> dict[str | None, int]:
    """The step's reads of a GPU value the host waited for, per user frame (None: outside any): the outermost
    synchronising calls of the window (ops, runtime calls) inside which a device-to-host copy was launched on the
    same thread: ``.item()``, ``.cpu()``, ``.tolist()``, ``aten::nonzero``'s count, ``if tensor:``
    (``aten::is_nonzero``). The host needs what they read (an expert loop sized by ``nonzero``, a Python ``if`` on a
    tensor), so a CUDA graph cannot capture the step until they are gone; a ``cudaDeviceSynchronize``, a blocking
    host-to-device copy or an allocator's implicit sync copies nothing back and is not one. hf-mixtral.decode_eager:
    352 in its 4 steps, all in ``modeling_mixtral.py(69): forward`` (64 ``where`` and 32 ``nonzero``, 192 ``item``,
    64 ``is_nonzero``); demo-eager.decode: none."""
    from ..activity import copy_kind

    m = r.model
    roots = calls_under(r, r.flags["sync_op"] | r.flags["sync_rt"] | r.flags["blocking_copy"], None)
    if roots.size == 0:
        return {}
    # each from its outermost enclosing op (``aten::nonzero`` launches the copy of its count, then syncs)
    op = int(Kind.CPU_OP)
    cur = m.parent[roots]
    for _ in range(MAX_PARENT_STEPS):
        up = (cur >= 0) & (m.kind[np.where(cur >= 0, cur, 0)] == op)
        if not up.any():
            break
        roots = np.where(up, cur, roots)
        cur = np.where(up, m.parent[np.where(up, cur, 0)], -1)
    roots = uniq(roots)
    cp = r.items[(m.kind[r.items] == int(Kind.MEMCPY)) & r.has_launch]
    d2h = np.array([copy_kind(m.name(i)).startswith("DtoH") for i in cp.tolist()], bool)
    L = m.launch[cp[d2h]]
    if L.size == 0:
        return {}
    read = np.zeros(roots.size, bool)
    for t in uniq(m.track[roots]).tolist():
        sel = np.flatnonzero(m.track[roots] == t)
        lt = np.sort(m.ts_ns[L[m.track[L] == t]])
        rs, re_ = m.ts_ns[roots[sel]], m.ts_ns[roots[sel]] + m.dur_ns[roots[sel]]
        read[sel] = np.searchsorted(lt, re_, side="left") > np.searchsorted(lt, rs, side="left")
    rd = roots[read]
    if rd.size == 0:
        return {}
    uf = a.stacks.user_frame(m.track[rd].astype(np.int64), m.ts_ns[rd])
    out: dict[str | None, int] = {}
    for u in uf.tolist():
        k = m.name(u) if u >= 0 else None
        out[k] = out.get(k, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0] or "")))


def graph_needs(a, reads: dict, frame_of: dict, graph_id: str) -> tuple[str, list[list[str]]]:
    """The graph fix's dependency on the host reads (``host_reads``): ("; it needs the 352 syncs of `frame` removed
    first: the host reads their values, which a CUDA graph cannot capture", per frame the ids of
    the findings whose fix removes its reads: its sync findings and the findings whose fused-call what-if is that
    frame's, in the findings' order; any one of them does)."""
    parts, groups = [], []
    for k, (fr, n) in enumerate(reads.items()):
        ids = [f.id for f in a.findings if f.id != graph_id and fr is not None and (
            (f.cause == causes.SYNC and (f.evidence or {}).get("frame") == fr) or frame_of.get(f.id) == fr)]
        if ids:
            groups.append(ids)
        what = f"the {_n(n, 'sync')}" if k == 0 else f"the {n}"
        where = f" of `{fr}`" if fr is not None else " outside any user frame"
        parts.append(what + where)  # which findings (actions) remove them: the plan says, by its own numbers
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return (f"; it needs {text} removed first: the host reads their values, which a CUDA graph cannot capture",
            groups)


def graph_nodes(r: Replay) -> tuple[int, int, int]:
    """(items of the window launched by a graph launch call, items of the window, graph launch calls that launched
    them): a step whose kernels already are graph nodes gains from "the step as one graph" only the others and
    the host gaps between them and between the replays."""
    m = r.model
    sel = r.in_window & r.has_launch
    L = m.launch[r.items[sel]]
    gl = r.flags["graph_launch"][m.name_id[L]] if L.size else np.zeros(0, bool)
    return int(np.count_nonzero(gl)), int(np.count_nonzero(r.in_window)), int(uniq(L[gl]).size)


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def fix_for(a, r: Replay, f):
    """What fixing finding ``f`` means: ("remove", (s, e, thread), what, None or (item durations, calls that
    no longer wait[, items dropped])), or ("graph", None, what, None), or None."""
    m = r.model
    ev = f.evidence or {}
    cause = f.cause
    frame = ev.get("frame")
    where = f" in `{frame}`" if frame else ""
    if cause == causes.LAUNCH:
        # a step that syncs with the host cannot be captured as it is (the launch advice says so): the projection
        # is of the step once those syncs are on the GPU
        nodes, items, replays = graph_nodes(r)
        if items and nodes >= items and replays <= 1:
            return None  # the step already is one graph replay: there is no graph to add
        what = "the step as one CUDA graph replay"
        if items and nodes >= items:
            what = (f"the step's {replays} graph replays as one (all its {items} GPU items already are graph nodes: "
                    "it removes the host gaps between the replays)")
        elif nodes:
            what += (f" ({nodes} of its {items} GPU items already are graph nodes: it adds the other "
                     f"{items - nodes} and the host gaps between them)")
        # a step whose host reads GPU values (host_reads) says which fixes come first (replay.py, graph_needs)
        if a.syncs and not host_reads(a, r):
            one = sum(int(x["count"]) for x in a.syncs) == 1
            what += (", once " + sync_sites_text(a.syncs) + (" is off the host: a CUDA graph cannot capture it" if one
                                                              else " are off the host: a CUDA graph cannot capture them"))
        return ("graph", None, what, None)
    if cause == causes.PYTHON and frame:
        iv = python_own(r, frame)
        return ("remove", iv, f"remove `{frame}`'s own host time", None) if iv is not None else None
    if cause == causes.SYNC:
        mask = r.flags["sync_op"] | r.flags["sync_rt"] | r.flags["blocking_copy"]
        idx = calls_under(r, mask, frame)
        if frame and getattr(r.window, "clipped", False) and idx.size:
            # in the measured steps, as without a frame: hf-mixtral.decode_eager's frame holds 440 synchronising
            # calls over the trace, 352 in its 4 steps (the warm-up's are no part of the window replayed)
            idx = idx[r.window.cpu_in(m, idx)]
        if not frame:
            # a finding with no frame owns the calls no other sync finding's frame holds: every call of the
            # window was "remove the 856 synchronising calls" beside the 855 of the frame's own finding
            for o in getattr(a, "findings", None) or []:
                of = (o.evidence or {}).get("frame") if o.cause == causes.SYNC else None
                if of and o is not f and idx.size:
                    fr = _frame_intervals(m, of)
                    if fr is not None:
                        idx = idx[~_within(m, idx, fr)]
        if idx.size == 0:
            return None
        return ("remove", (m.ts_ns[idx], m.ts_ns[idx] + m.dur_ns[idx], m.track[idx].astype(np.int64)),
                f"remove the {_n(idx.size, 'synchronising call')}{where}", None)
    if cause == causes.ALLOCATOR:
        mask = r.flags["alloc"] | r.flags["empty_cache"]
        idx = calls_under(r, mask, frame)
        if idx.size == 0:
            return None
        S, E, T = [m.ts_ns[idx]], [m.ts_ns[idx] + m.dur_ns[idx]], [m.track[idx].astype(np.int64)]
        what = f"remove the {_n(idx.size, 'allocator call')}{where} and their implicit syncs"
        # the runtime calls under them (cudaFree, cudaMalloc) are the ones whose after-effect is looked for
        rt = np.flatnonzero(r.flags["alloc"][name_ids(m)] & member(m.kind, _CALLS))
        rt = rt[_within(m, rt, (S[0], E[0], T[0]))]
        after = after_effect(a, r, rt) if rt.size else None
        if after is not None:
            (s2, e2, t2), x = after
            S.append(s2), E.append(e2), T.append(t2)
            from .calibrate import _steps
            from ..units import fmt_ns

            what += f", and the host work they slowed right after them ({fmt_ns(x / _steps(a))} per step, recorded)"
        return ("remove", (np.concatenate(S), np.concatenate(E), np.concatenate(T)), what, None)
    if cause == "pattern" and f.kernels.size:
        # the pattern's kernels run for what the fix leaves of them (patterns.py estimates it)
        pos = np.searchsorted(r.items, f.kernels, sorter=r.item_sort)
        ok = pos < r.items.size
        pos = r.item_sort[np.minimum(pos, r.items.size - 1)]
        ok &= r.items[pos] == f.kernels
        dur = r.dur.copy()
        dur[pos[ok]] = np.minimum(dur[pos[ok]], f.kernel_after_ns[ok])
        h = f.host_removed  # the ops the fix removes take their host dispatch with them
        iv = (m.ts_ns[h], m.ts_ns[h] + m.dur_ns[h], m.track[h].astype(np.int64))
        return ("remove", iv, ev.get("fix_replayed") or "the pattern fixed", (dur, None))
    if cause == causes.STALL:
        # each gap's one holder, its time inside the CPU's part of the gap. A slow launch call of the next
        # kernel is not projected: the replay keeps each un-queued kernel's recorded launch-to-start latency,
        # which holds that call's time, so removing the call's host time would claim a saving of 0
        S, E, T = [], [], []
        for row in np.asarray(f.gap_rows, np.int64).tolist():
            e, _, _ = a.details.holder_of(row)
            if e < 0 or e == int(a.gaps.launch_idx[row]):
                continue
            t0, t1 = int(a.gaps.start_ns[row]), int(a.gaps.t_launch_ns[row])
            s_, e_ = max(int(m.ts_ns[e]), t0), min(int(m.ts_ns[e] + m.dur_ns[e]), t1)
            if e_ > s_:
                S.append(s_), E.append(e_), T.append(int(m.track[e]))
        if not S:
            return None
        return ("remove", (np.array(S, np.int64), np.array(E, np.int64), np.array(T, np.int64)),
                f"the {_n(len(S), 'stall')} in `{ev.get('kind') or frame}` gone (warmed up or fixed): their time "
                f"in the gaps removed", None)
    # the causes whose fix is named by its action kind (causes/gil.py, user_sync.py, autotune.py)
    own = _KIND_FIXES.get(_action_of(cause))
    if own is not None:
        return own(a, r, f)
    if cause == causes.COPY:
        kind = ev.get("kind")
        pageable = bool(ev.get("pageable"))
        if not kind and f.gap_rows.size:
            kind = (a.gap_detail(int(f.gap_rows[0])).extra.get("copy") or {}).get("kind")
        got = _copy_removal(r, kind, pageable, frame)
        if got is None:
            return None
        iv, dur, bw, calls = got
        return ("remove", iv, f"pinned memory and non_blocking=True: the copies stop blocking the host and run at "
                              f"{bw:.0f} GB/s", (dur, calls))
    return None


def _gil_fix(a, r: Replay, f):
    """A ``gil`` finding's own fix: the blamed thread's Python work off the process (causes/gil.py): its GIL holds
    (gilholds.py) taken off the threads that launched the finding's gaps, less their own runtime calls there."""
    from ..gilholds import fix_intervals, holds
    from .calibrate import _steps
    from ..units import fmt_ns

    m = r.model
    tid = (f.evidence or {}).get("kind")
    h = holds(m, a.stacks)
    holder = next((t for t in h.holders if str(m.tracks[t].tid) == str(tid)), None) if tid is not None else None
    threads = a.gaps.thread[np.asarray(f.gap_rows, np.int64)] if np.asarray(f.gap_rows).size else np.zeros(0, np.int64)
    iv = fix_intervals(a, holder, threads)
    if iv is None:
        return None
    s, e, t = iv
    if getattr(r.window, "clipped", False):
        lo, hi = int(r.window.cpu_start.min()), int(r.window.cpu_end.max())
        s, e = np.maximum(s, lo), np.minimum(e, hi)
        keep = e > s
        s, e, t = s[keep], e[keep], t[keep]
    if s.size == 0:
        return None
    who = f"thread {tid}" if tid is not None else "the other threads"
    return ("remove", (s, e, t), f"{who}'s hold on the GIL gone: its {fmt_ns(int((e - s).sum()) / _steps(a))} per step "
                                 "(recorded) taken off the launching thread", None)


def _user_sync_fix(a, r: Replay, f):
    """A ``user-sync`` finding's own fix: the calls made from the finding's frame in the measured steps gone, with
    their sites (the code around each that launches nothing: a timer's context manager and clock reads) and, for a
    timer, the own host time of the frame that calls it around the timed call (the wrapper goes with the timer).

    That code is dense Python (``torch.cuda.synchronize()`` alone records some sixty frames), which the calibration's
    one per-event overhead prices below nothing; so its un-profiled cost is taken as its recorded time scaled by the
    step's own (un-profiled over profiled), its events left counting, and the calls no longer wait."""
    from ..usersyncs import user_syncs
    from .calibrate import _steps
    from ..units import fmt_ns

    m = r.model
    u = user_syncs(m, a.flags, a.stacks)
    fr = (f.evidence or {}).get("frame")
    sel = np.array([m.name(int(e)) == fr for e in u.frame.tolist()], bool) if fr else np.ones(u.n, bool)
    if getattr(r.window, "clipped", False) and u.n:
        sel &= r.window.cpu_in(m, u.call)
    if not sel.any():
        return None
    u = u.select(sel)
    S, E, T = [u.site_s], [u.site_e], [u.thread]
    wrapped = u.caller[u.timer & (u.caller >= 0)]
    for c in uniq(wrapped).tolist():  # a timing wrapper: its own time around the call it times
        s_, e_ = own_around(r, int(c))
        S.append(s_), E.append(e_), T.append(np.full(s_.size, int(m.track[c]), np.int64))
    s, e, t = union_by_thread(np.concatenate(S), np.concatenate(E), np.concatenate(T))
    rho = unprofiled_ratio(a, r)
    cut = s + np.round((e - s) * rho).astype(np.int64)
    steps = _steps(a)
    where = f" in `{fr}`" if fr else ""
    timer = " and the timer's own code" if wrapped.size else ""
    what = (f"the {_n(u.n, 'synchronising call')}{where} gone with the code around them{timer} "
            f"({fmt_ns(int((e - s).sum()) / steps)} per step recorded"
            + (f", {fmt_ns(int((cut - s).sum()) / steps)} un-profiled at the step's own ratio)" if rho < 1 else ")"))
    z = np.zeros(0, np.int64)
    return ("remove", (z, z, z), what, (None, u.call, None, (s, cut, t)))


def own_around(r: Replay, frame: int) -> tuple[np.ndarray, np.ndarray]:
    """The host time of Python frame ``frame`` (one call) outside its children that launch GPU work: a wrapper's
    own code around the call it wraps. (starts, ends)."""
    m = r.model
    t = int(m.track[frame])
    s0, e0 = int(m.ts_ns[frame]), int(m.ts_ns[frame] + m.dur_ns[frame])
    sl = m.track_slice(t)
    ev = np.arange(sl.start, sl.stop, dtype=np.int64)
    py = ev[(m.kind[ev] == int(Kind.PYTHON)) & (m.ts_ns[ev] >= s0) & (m.ts_ns[ev] + m.dur_ns[ev] <= e0)]
    py = py[py != frame]
    L = m.launch[r.items[r.has_launch]]
    lt = np.sort(m.ts_ns[L[m.track[L] == t]])
    busy = np.searchsorted(lt, m.ts_ns[py] + m.dur_ns[py], side="left") > np.searchsorted(lt, m.ts_ns[py], side="left")
    kids = outermost(m, py[busy])
    return subtract(np.array([s0]), np.array([e0]), m.ts_ns[kids], m.ts_ns[kids] + m.dur_ns[kids])


def union_by_thread(s, e, t):
    """Per thread the union of [s, e): (starts, ends, threads), by thread then start."""
    S, E, T = [], [], []
    for th in uniq(t).tolist():
        us, ue = union(s[t == th], e[t == th])
        S.append(us), E.append(ue), T.append(np.full(us.size, th, np.int64))
    z = np.zeros(0, np.int64)
    return (np.concatenate(S), np.concatenate(E), np.concatenate(T)) if S else (z, z, z)


def unprofiled_ratio(a, r: Replay) -> float:
    """The step's un-profiled time over its recorded span (at most 1): what the capture measured without the
    profiler against what the replay of the recording spans; 1 without an un-profiled time."""
    dist = getattr(a, "distortion", None) or {}
    un = dist.get("unprofiled_us")
    rec = r.span(r.end.astype(np.float64))
    if not un or not rec:
        return 1.0
    return min(1.0, float(un) * 1e3 / max(max(rec.values()), 1))


def _autotune_fix(a, r: Replay, f):
    """An ``autotune`` finding's own fix (shapes fixed, or benchmark off): each tuning call of the measured steps runs
    only its real run: its trial items dropped, its host time before the real run removed (autotuning.py)."""
    from ..autotuning import tuning
    from .calibrate import _steps
    from ..units import fmt_ns

    m = r.model
    t = tuning(m, a.flags, a.config)
    kind = (f.evidence or {}).get("kind")
    sel = np.array([k == kind for k in t.kind], bool) if kind else np.ones(t.n, bool)
    if getattr(r.window, "clipped", False) and t.n:
        sel &= r.window.cpu_in(m, t.event)
    if not sel.any():
        return None
    t = t.select(sel)
    trials = t.trial_items(m)
    pos = np.searchsorted(r.items, trials, sorter=r.item_sort)
    ok = pos < r.items.size
    pos = r.item_sort[np.minimum(pos, max(r.items.size - 1, 0))]
    ok &= r.items[pos] == trials
    drop = np.zeros(r.items.size, bool)
    drop[pos[ok]] = True
    s, e = t.start, np.maximum(t.keep_from, t.start)
    per = fmt_ns(int((e - s).sum()) / _steps(a))
    return ("remove", (s, e, t.thread), f"the {_n(t.n, 'tuning call')} reduced to their real runs: "
                                        f"{_n(int(ok.sum()), 'trial item')} dropped and {per} per step of host time "
                                        "(recorded) before the real runs removed", (None, None, drop))


def _action_of(cause: str | None) -> str | None:
    """The action kind of a cause's own fix (the registry's ``Cause.action``), or None."""
    from .. import causes

    try:
        return causes.get(cause).action if cause else None
    except ValueError:
        return None


#: action kind -> its fix, for the kinds projected by a function of their own
_KIND_FIXES = {"gil-thread": _gil_fix, "user-sync": _user_sync_fix, "autotune": _autotune_fix}


def sync_sites_text(syncs: list[dict], top: int = 2) -> str:
    """"its 3 synchronising calls (`cudaStreamSynchronize` in `model.py(12): check` ×2, ...)": the step's syncs
    (activity.sync_stats) named by call and by the frames they came from, the largest first."""
    n = sum(int(x["count"]) for x in syncs)
    named = []
    for x in sorted(syncs, key=lambda x: -x["total_ns"])[:top]:
        fr = (x.get("stacks") or [{}])[0].get("frame")
        named.append(f"`{x['name']}`" + (f" in `{fr}`" if fr and not fr.startswith("(") else ""))
    more = ", ..." if len(syncs) > top else ""
    return f"its {_n(n, 'synchronising call')} ({', '.join(named)}{more})"


def _graph_owner(a) -> str | None:
    """The launch finding that gets the graph-replay fix: of those whose gaps mostly came before the next
    kernel's launch (the CPU was late, not the GPU's own dispatch of queued work), the one explaining the most
    idle time. Titles are not read: the findings may be worded differently tomorrow."""
    g, m = a.gaps, a.model
    best, best_idle = None, -1
    for f in a.findings:
        if f.cause != causes.LAUNCH:
            continue
        rows = np.asarray(f.gap_rows, np.int64)
        if rows.size:
            li = g.launch_idx[rows]
            queued = (li >= 0) & (m.ts_ns[np.where(li >= 0, li, 0)] < g.start_ns[rows])
            if queued.mean() > DEFAULT.most:
                continue
        if f.idle_ns > best_idle:
            best, best_idle = f.id, f.idle_ns
    return best
