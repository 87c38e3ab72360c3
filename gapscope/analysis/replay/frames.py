"""Two what-ifs that take a whole piece of host work out of the step (issue #25):

* **a frame as one fused GPU call** (``frame_whatif``): the step with the frame's whole subtree of host time
  removed (its own time, its children, the built-ins and ops it calls, its synchronising calls and the run-ahead
  the host lost in them) and one op's dispatch per call put in its place (``dispatch_ns``: the median un-profiled
  cost of an op that launches a kernel), and its GPU work kept, launched as the nodes of one CUDA graph: the
  first at the trace's median launch latency after that dispatch, the others back to back at the graph dispatch
  gap.
  This is "if this function were one fused GPU call" (a batched / grouped implementation, a compiled region), the
  fix a user makes to an eager loop. Own time of one frame and its sync drains are the wrong units for it: the
  experts loop of a MoE layer costs all the host work of its subtree.
* **a host round trip removed whole** (``round_trip_fix``): per round trip of a finding (a synchronising read of
  a GPU value, host work on it, the copy back), the host time from the read's start to the end of the copy back's
  launch call (the read's wait and the run-ahead lost in it, the numpy and built-in calls between), and the two
  copies on the GPU. What stays is what the step does with the answer on the GPU.

Both are replays of replay/model.py's chain, with the calibrated per-event overhead as every other fix.
"""

from __future__ import annotations

import numpy as np

from ...trace.model import Kind
from ..intervals import isin, median, member, name_ids, union, uniq
from .calibrate import steps_of
from .fixes import outermost
from .model import Replay, inside

#: which frames get the what-if and which findings carry it: ``Thresholds.frame_min_share``, ``frame_max_share``,
#: ``frame_top``, ``frame_attach_share`` (thresholds.py)


def frame_calls(m, name: str, window=None):
    """Event indices of the Python frame ``name`` (all of them; ``window``: only those starting in the steps)."""
    try:
        nid = m.names.index(name)
    except ValueError:
        return np.zeros(0, np.int64)
    idx = np.flatnonzero((m.name_id == nid) & (m.kind == int(Kind.PYTHON)))
    if window is not None and getattr(window, "clipped", False) and idx.size:
        idx = idx[window.cpu_in(m, idx)]
    return idx


def subtree_intervals(m, idx):
    """The host time of the calls ``idx``, their whole subtree: per thread the union of the calls' intervals
    (a recursive frame counted once). Returns (start, end, thread) arrays, sorted per thread."""
    S, E, T = [], [], []
    thr = m.track[idx].astype(np.int64)
    for t in uniq(thr).tolist():
        sel = idx[thr == t]
        s, e = union(m.ts_ns[sel], m.ts_ns[sel] + m.dur_ns[sel])
        S.append(s), E.append(e), T.append(np.full(s.size, t, np.int64))
    if not S:
        z = np.zeros(0, np.int64)
        return z, z, z
    return np.concatenate(S), np.concatenate(E), np.concatenate(T)


def inside_on_thread(iv, thr: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Mask over points (thread ``thr``, time ``ts``): inside one of the intervals ``iv`` (start, end, thread; sorted
    and disjoint per thread, as ``subtree_intervals`` gives them) of the point's own thread."""
    s, e, t = iv
    out = np.zeros(np.shape(ts), bool)
    for th in uniq(t).tolist():
        sel = thr == th
        if sel.any():
            out[sel] = inside(s[t == th], e[t == th], ts[sel])
    return out


def items_under(r: Replay, iv) -> np.ndarray:
    """Mask over ``r.items``: GPU work whose launch call starts inside the intervals ``iv`` on its own thread."""
    m = r.model
    L = m.launch[r.items]
    has = L >= 0
    Lc = np.where(has, L, 0)
    lt = np.where(has, m.track[Lc].astype(np.int64), -1)  # no launch call: on no thread
    return inside_on_thread(iv, lt, m.ts_ns[Lc])


def dispatch_ns(r: Replay, c: float = 0.0) -> int:
    """The host cost of one fused call, un-profiled: the median over the outermost aten ops around kernel launches
    (what calling one op from Python costs: dispatch, its inner ops, the launch call) of the op's recorded duration
    less ``c`` per host event recorded in it; 0 when no launch is inside an op. A fused function is still one op
    to call and launch."""
    memo = r.__dict__.setdefault("_dispatch_memo", {})
    if float(c) not in memo:  # the same for every frame of a projection
        memo[float(c)] = _dispatch_ns(r, c)
    return memo[float(c)]


def _dispatch_ns(r: Replay, c: float) -> int:
    m = r.model
    k = r.items[r.has_launch & (m.kind[r.items] == int(Kind.KERNEL))]
    if k.size == 0:
        return 0
    L = m.launch[k]
    ops = np.flatnonzero((m.kind == int(Kind.CPU_OP)) & member(m.track, uniq(m.track[L])))
    top = outermost(m, ops)
    cost = []
    for t in uniq(m.track[L]).tolist():
        o = top[m.track[top] == t]
        o = o[np.argsort(m.ts_ns[o], kind="stable")]
        lt = m.ts_ns[L[m.track[L] == t]]
        j = np.searchsorted(m.ts_ns[o], lt, side="right") - 1
        ok = (j >= 0) & (lt < (m.ts_ns[o] + m.dur_ns[o])[np.clip(j, 0, None)])
        got = uniq(o[j[ok]])
        ev = r.host_ev.get(int(t), np.zeros(0, np.int64))
        n = np.searchsorted(ev, m.ts_ns[got] + m.dur_ns[got], side="left") - np.searchsorted(ev, m.ts_ns[got])
        cost.append(np.maximum(m.dur_ns[got] - c * n, 0))
    cost = np.concatenate(cost) if cost else np.zeros(0)
    return int(median(cost)) if cost.size else 0


def candidates(a, r: Replay, rec_step_ns: float, extra=()) -> list[tuple[str, int]]:
    """(frame, inclusive host ns in the window) of the user frames on launching threads whose inclusive host time
    per step is within [frame_min_share, frame_max_share] of the recorded step, largest first (at most frame_top;
    the frames in ``extra``, those the findings name, come first when they qualify)."""
    cfg = a.config
    m = r.model
    steps = max(steps_of(a), 1)
    thr = uniq(r.a_thr)
    py = np.flatnonzero((m.kind == int(Kind.PYTHON)) & r.flags["user_frame"][name_ids(m)]
                        & member(m.track, thr))
    if r.window is not None and getattr(r.window, "clipped", False) and py.size:
        py = py[r.window.cpu_in(m, py)]
    out = []
    # the calls of each name, in event order: one stable sort by name, not one scan of all calls per name
    o = np.argsort(m.name_id[py], kind="stable")
    py_o, nid_o = py[o], m.name_id[py[o]]
    cut = np.flatnonzero(np.r_[True, nid_o[1:] != nid_o[:-1], True]) if py.size else np.zeros(1, np.int64)
    for k0, k1 in zip(cut[:-1].tolist(), cut[1:].tolist()):
        nid = int(nid_o[k0])
        idx = py_o[k0:k1]
        s, e, _ = subtree_intervals(m, idx)
        incl = int((e - s).sum())
        share = incl / steps / rec_step_ns if rec_step_ns > 0 else 0.0
        if cfg.frame_min_share <= share <= cfg.frame_max_share:
            out.append((m.names[nid], incl))
    out.sort(key=lambda x: (x[0] not in extra, -x[1], x[0]))
    return out[:cfg.frame_top]


def frame_whatif(a, r: Replay, name: str, c: float, base_step: float):
    """The what-if of one frame as one fused GPU call: a ``FrameWhatIf`` (per step figures) or None."""
    from .result import FrameWhatIf

    m = r.model
    steps = max(steps_of(a), 1)
    got = frame_parts(a, r, name, c)
    if got is None:
        return None
    iv, fz, ins = got
    end = r.run(r.removal(*iv), c, fuse=fz, insert=ins)
    proj = max(r.span(end).values()) / steps
    inw = frame_calls(m, name, r.window)
    s_w, e_w, _ = subtree_intervals(m, inw)
    under = fz & r.in_window
    return FrameWhatIf(frame=name, calls=int(inw.size), host_ns=int((e_w - s_w).sum()) // steps,
                       gpu_ns=int(r.dur[under].sum()) // steps, gpu_items=int(under.sum()),
                       saving_ns=int(round(max(base_step - proj, 0.0))), steps=steps)


def frame_parts(a, r: Replay, name: str, c: float):
    """What a frame as one fused GPU call changes in the replay: (its subtree's host intervals, the mask of the GPU
    items launched under them, run as graph nodes, and per thread the one op dispatch put in per call that launches
    GPU work), or None when the frame has no call."""
    m = r.model
    allc = frame_calls(m, name)
    if allc.size == 0:
        return None
    iv = subtree_intervals(m, allc)
    fz = items_under(r, iv)
    # one op's dispatch per call that launches GPU work (a call that launches nothing becomes nothing)
    d = dispatch_ns(r, c)
    lts = m.ts_ns[m.launch[r.items[fz]]]
    lth = m.track[m.launch[r.items[fz]]].astype(np.int64)
    ins = {}
    for t in uniq(iv[2]).tolist():
        s0, e0 = iv[0][iv[2] == t], iv[1][iv[2] == t]
        lt = np.sort(lts[lth == t])
        busy = np.searchsorted(lt, e0, side="left") > np.searchsorted(lt, s0, side="left")
        ins[int(t)] = (s0[busy], np.full(int(busy.sum()), d))
    return iv, fz, ins


def frame_task(a, r: Replay, name: str, c: float, base_step: float):
    """One frame's what-if (``frame_whatif``) as an independent task (``project`` shares them between two processes,
    or takes them from a child that computed them ahead: replay.frames_ahead): its ``FrameWhatIf``, or None."""
    try:
        return frame_whatif(a, r, name, c, base_step)
    except (ValueError, IndexError, KeyError):
        return None


def fused_frames(results: list) -> list:
    """The frames' what-ifs (``frame_task``'s results) that save something, by projected saving."""
    # a frame whose fusing buys nothing (a GPU-bound step) is not a fix
    out = [w for w in results if w is not None and w.saving_ns > 0]
    out.sort(key=lambda w: (-w.saving_ns, w.frame))
    return out


#: the causes whose gaps are host work a frame's fused what-if removes (launch findings keep the graph replay of
#: the whole step; gpu-wait, collective, profiler gaps are not the host's)
ATTACH_CAUSES = ("python", "sync", "allocator", "copy")


def attach(a, frames: list) -> dict[str, str]:
    """Finding id -> the frame whose fused what-if is its figure: the finding's own frame when it is listed, else
    of the listed frames the innermost (least inclusive host time) under which at least frame_attach_share of the
    finding's idle time lies (each gap placed at the middle of [its start, its next launch call] on its launching
    thread). Only host-side findings (``ATTACH_CAUSES``), and the op pattern of a loop of tiny kernels, whose
    frame's what-if is its saving (patterns_loop.py)."""
    if not frames:
        return {}
    m, g = a.model, a.gaps
    ivs = {w.frame: subtree_intervals(m, frame_calls(m, w.frame)) for w in frames}
    order = sorted(frames, key=lambda w: (w.host_ns, w.frame))
    out = {}
    for f in a.findings:
        fr = (f.evidence or {}).get("frame")
        if f.cause == "pattern" and fr in ivs:  # a loop of tiny kernels: its frame's what-if is its saving
            out[f.id] = fr
            continue
        if f.cause not in ATTACH_CAUSES:
            continue
        if fr in ivs:
            out[f.id] = fr
            continue
        rows = np.asarray(f.gap_rows, np.int64)
        if rows.size == 0:
            continue
        th = g.thread[rows].astype(np.int64)
        mid = (g.start_ns[rows] + np.maximum(g.t_launch_ns[rows], g.start_ns[rows])) // 2
        w8 = g.dur_ns[rows].astype(np.float64)
        tot = float(w8.sum()) or 1.0
        for w in order:
            ok = inside_on_thread(ivs[w.frame], th, mid)
            if float(w8[ok].sum()) / tot >= a.config.frame_attach_share:
                out[f.id] = w.frame
                break
    return out


def frame_owners(findings: list, frame_of: dict[str, str], saving_ns: dict) -> dict[str, str]:
    """Frame -> the one finding its fused what-if ranks, when several findings are attached to it: the loop of
    tiny kernels of that frame (its saving is the what-if), else a finding about that frame itself (its host time,
    its syncs), else the finding whose own fix saves the most; ties by idle time, then by order. One fix is one
    saving: the others rank by their own fix (hf-mixtral.decode_eager: `(69): forward` as one fused call is the
    experts loop's finding; `activations.py(102): forward`'s, whose own fix saves 0 ns, no longer reads [high])."""
    by_frame: dict[str, list] = {}
    for k, f in enumerate(findings):
        fr = frame_of.get(f.id)
        if fr is not None:
            by_frame.setdefault(fr, []).append((k, f))
    out = {}
    for fr, fs in by_frame.items():
        def key(kf, fr=fr):
            k, f = kf
            own = (f.evidence or {}).get("frame") == fr
            tier = 0 if (f.cause == "pattern" and own) else 1 if own else 2
            return (tier, -(saving_ns.get(f.id) or 0), -f.idle_ns, k)

        out[fr] = min(fs, key=key)[1].id
    return out


def round_trips(a, r: Replay, f):
    """The round trips of a round-trip finding: per gap, on its launching thread, the synchronising read open in
    the gap (outermost, from the start of the aten op around it) and the first host-to-device copy launched after
    it, before the next launch. Returns
    ((start, end, thread) host intervals from each read's start to its copy back's launch call end, mask over
    ``r.items`` of the two copies (the device-to-host copies launched inside the reads, the copies back), number
    of round trips) or None."""
    m, g, cpu = a.model, a.gaps, a.cpu
    rows = np.asarray(f.gap_rows, np.int64)
    if rows.size == 0:
        return None
    slack = a.config.sync_slack_ns
    cp = np.flatnonzero((m.kind == int(Kind.MEMCPY)) & (m.launch >= 0))
    h2d = np.array(["HtoD" in n or "Host to Device" in n for n in m.names], bool)
    cp = cp[h2d[m.name_id[cp]]] if cp.size else cp
    hl = m.launch[cp]
    h_thr = m.track[hl].astype(np.int64)
    h_ts = m.ts_ns[hl]
    S, E, T = [], [], []
    back_calls = []
    for rr in rows.tolist():
        th, a0, b0 = int(g.thread[rr]), int(g.start_ns[rr]), int(g.t_launch_ns[rr])
        if th < 0:
            continue
        sl = m.track_slice(th)
        idx = np.arange(sl.start, sl.stop)
        idx = idx[cpu.sync_mask[idx]]
        # the synchronising calls on the thread open in [gap start - slack, next launch) (findings.round_trip_rows)
        idx = idx[(m.ts_ns[idx] < max(b0, a0 + 1)) & (m.ts_ns[idx] + m.dur_ns[idx] > a0 - slack)]
        if idx.size == 0:
            continue
        top = int(idx[np.lexsort((m.ts_ns[idx], m.depth[idx].astype(np.int64)))[0]])
        ss, se = int(m.ts_ns[top]), int(m.ts_ns[top] + m.dur_ns[top])
        # the read is the op that issued the sync (``.cpu()``: aten::to, its copy to the host launched before the
        # cudaStreamSynchronize inside it): from the start of the outermost aten op around it
        ops = np.arange(sl.start, sl.stop)
        ops = ops[(m.kind[ops] == int(Kind.CPU_OP)) & (m.ts_ns[ops] <= ss) & (m.ts_ns[ops] + m.dur_ns[ops] >= se)]
        if ops.size:
            ss = int(m.ts_ns[ops].min())
        k = np.flatnonzero((h_thr == th) & (h_ts >= se) & (h_ts <= b0))
        if k.size == 0:
            continue
        j = k[np.argmin(h_ts[k])]
        S.append(ss), E.append(int(h_ts[j] + m.dur_ns[hl[j]])), T.append(th)
        back_calls.append(int(hl[j]))
    if not S:
        return None
    iv = (np.array(S, np.int64), np.array(E, np.int64), np.array(T, np.int64))
    L = m.launch[r.items]
    is_copy = (m.kind[r.items] == int(Kind.MEMCPY))
    # the copies: every copy launched inside a round trip's host interval (the read's copy to the host, the copy
    # back); kernels launched there (a slice, a cast before the read) stay
    # (the finding's gaps come largest first: the intervals sorted and merged per thread for the lookup)
    S2, E2, T2 = [], [], []
    for t in uniq(iv[2]).tolist():
        us, ue = union(iv[0][iv[2] == t], iv[1][iv[2] == t])
        S2.append(us), E2.append(ue), T2.append(np.full(us.size, t, np.int64))
    drop = is_copy & items_under(r, (np.concatenate(S2), np.concatenate(E2), np.concatenate(T2)))
    drop |= isin(L, np.array(back_calls, np.int64))
    return iv, drop, len(S)


def round_trip_fix(a, r: Replay, f):
    """("remove", intervals, what, None, drop) for a round-trip finding, or None."""
    got = round_trips(a, r, f)
    if got is None:
        return None
    iv, drop, n = got
    fr = (f.evidence or {}).get("frame")
    where = f" in `{fr}`" if fr else ""
    what = (f"keep the round trip{where} on the GPU: its {n} reads of a GPU value, the host work on each result "
            f"and the copies back removed")
    return iv, drop, what
