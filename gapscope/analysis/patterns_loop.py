"""The op pattern ``tiny-kernel-loop``: a Python loop over elements or experts that launches many tiny kernels.

Read from the trace alone: a user Python frame whose calls each launch at least ``loop_min_kernels`` kernels
(median), most shorter than the launch calls that issued them (median kernel duration below the median launch
call: the GPU finishes each kernel before the host can issue the next), with data-dependent synchronising calls
inside the loop (``nonzero``, ``item``, a stream synchronize: at least one per iteration, between the repeated
run's first op and its last, median per call), and an op sequence of at most ``loop_max_block`` ops that
repeats back to back within a call (the loop body: per hit expert ``where``, ``index``, two ``linear``, ...,
``index_add_``). The sequence is that of the outermost aten ops that launched the call's kernels, each op call
once; the repeat found is the one covering the most of the call (``loop_min_block`` ops or more, at least
``loop_min_repeats`` times), over the calls the most common one.

The frame is called at least ``loop_min_calls`` times (a script's top-level loop over its steps, called once,
is the step loop). Of nested frames that all qualify (the experts loop, the MoE block around it, the decoder layer, the model) the
innermost is the pattern: it holds the loop; the frames above it hold it and more.

The fix is a batched implementation (for MoE, a grouped GEMM / ``batched_mm``; otherwise the loop vectorised):
one call launching a few larger kernels, no syncs. No kernel-time estimate is made here: its projected saving is
the frame's what-if as one fused GPU call (replay/frames.py ``frame_whatif``), attached to the finding.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..trace.model import Kind
from .intervals import median, member, name_ids, uniq
from .types import Pattern
from .replay.model import inside


def tandem_repeat(seq: tuple, min_block: int, min_repeats: int, max_block: int | None = None) -> tuple | None:
    """The block of ``seq`` (``min_block`` to ``max_block`` items) that repeats back to back covering the most of
    it: (block, repeats, start), or None. Ties: the shorter block (its own repeats are the loop's iterations),
    then the earlier one."""
    n = len(seq)
    best = None  # (covered, -len(block), -start)
    top = n // min_repeats if max_block is None else min(max_block, n // min_repeats)
    for p in range(min_block, top + 1):
        i = 0
        while i + p * min_repeats <= n:
            r = 1
            while i + (r + 1) * p <= n and seq[i + r * p:i + (r + 1) * p] == seq[i:i + p]:
                r += 1
            if r >= min_repeats:
                key = (r * p, -p, -i)
                if best is None or key > best[0]:
                    best = (key, seq[i:i + p], r, i)
                i += r * p
            else:
                i += 1
    return None if best is None else (best[1], best[2], best[3])


def _outermost(m, ops: np.ndarray) -> np.ndarray:
    """Each op's outermost enclosing aten op (the one Python called)."""
    cur = ops.copy()
    for _ in range(64):
        par = m.parent[cur]
        up = par >= 0
        up[up] &= m.kind[par[up]] == int(Kind.CPU_OP)
        if not up.any():
            break
        cur = np.where(up, par, cur)
    return cur


def _outer_calls(m, idx: np.ndarray) -> np.ndarray:
    """The calls of ``idx`` not inside another of them on their thread (a recursive frame once)."""
    keep = np.ones(idx.size, bool)
    thr = m.track[idx]
    for t in uniq(thr).tolist():
        sel = np.flatnonzero(thr == t)
        o = sel[np.argsort(m.ts_ns[idx[sel]], kind="stable")]
        e = m.ts_ns[idx[o]] + m.dur_ns[idx[o]]
        prev_end = np.maximum.accumulate(np.r_[np.int64(-1), e[:-1]])
        keep[o] = m.ts_ns[idx[o]] >= prev_end
    return idx[keep]


def loop_stats(a, name: str) -> dict | None:
    """The figures of frame ``name`` as a loop of tiny kernels (calls in the window): None when it launches no
    kernel. Keys: calls, kernels, kernels_per_call, kernel_median_ns, launch_median_ns, shorter_pct (kernels
    shorter than their launch call), syncs_per_call, sync_ops, block, repeats, kernel_ns, kernels_idx,
    intervals (s, e, thread)."""
    m = a.model
    try:
        nid = m.names.index(name)
    except ValueError:
        return None
    return _loop_stats(a, np.flatnonzero((m.name_id == nid) & (m.kind == int(Kind.PYTHON))))


def in_calls(s: np.ndarray, e: np.ndarray, ts_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For disjoint calls [s, e) in time order and times sorted: (position in ``ts_sorted``, call) of each time
    inside a call. The same as taking, for each time, the last call starting at or before it and keeping it when
    the time is before that call's end (calls that do not overlap), in O(calls + hits) instead of O(times)."""
    lo = np.searchsorted(ts_sorted, s, side="left")
    hi = np.searchsorted(ts_sorted, e, side="left")
    cnt = np.maximum(hi - lo, 0)
    tot = int(cnt.sum())
    call = np.repeat(np.arange(s.size), cnt)
    if tot == 0:
        return np.zeros(0, np.int64), call
    first = np.cumsum(cnt) - cnt  # each call's first hit in the output
    pos = np.arange(tot) - np.repeat(first - lo, cnt)
    return pos, call


def _by_time(memo: dict, key, times) -> tuple[np.ndarray, np.ndarray]:
    """(stable time order, sorted times) of the times ``times()`` gives, made once per ``key`` (a thread's
    launches or syncs: the same for every frame looked at)."""
    got = memo.get(key)
    if got is None:
        ts = times()
        o = np.argsort(ts, kind="stable")
        got = memo[key] = (o, ts[o])
    return got


def _loop_stats(a, idx: np.ndarray) -> dict | None:
    """``loop_stats`` of one frame's Python events ``idx`` (every call of it, in event order).

    Every pass here is over the frame's own calls and what they hold: the launches and syncs of each thread are
    sorted once for all the frames (``_by_time``) and each call finds its own by two binary searches. The first
    version scanned every launch and every sync of the thread per frame: with ~1,300 distinct frames in a
    3M-event trace that was most of a two-minute analysis."""
    m, cf = a.model, a.call_floors
    if a.window is not None and getattr(a.window, "clipped", False) and idx.size:
        idx = idx[a.window.cpu_in(m, idx)]
    if idx.size == 0:
        return None
    idx = _outer_calls(m, idx)  # disjoint on each thread from here on
    # what every frame asks for the same (the launched kernels, their outermost ops, the syncs of the threads)
    memo_a = a.__dict__.setdefault("_loop_stats_memo", {})
    if "k" not in memo_a:
        k0 = cf.k[m.launch[cf.k] >= 0]
        op0 = m.op[k0]
        memo_a["k"] = (k0, np.where(op0 >= 0, _outermost(m, np.maximum(op0, 0)), -1))
        memo_a["L"] = m.launch[k0]
        memo_a["L_track"] = m.track[memo_a["L"]]
    (k, outer_k), L = memo_a["k"], memo_a["L"]
    hit_k, hit_call = [], []
    for t in uniq(m.track[idx]).tolist():
        c = idx[m.track[idx] == t]
        c = c[np.argsort(m.ts_ns[c], kind="stable")]
        sel = memo_a.get(("L", t))
        if sel is None:
            sel = memo_a[("L", t)] = np.flatnonzero(memo_a["L_track"] == t)
        o, lt = _by_time(memo_a, ("Lts", t), lambda: m.ts_ns[L[sel]])
        pos, ci = in_calls(m.ts_ns[c], m.ts_ns[c] + m.dur_ns[c], lt)
        hit_k.append(sel[o[pos]])
        hit_call.append(c[ci])
    if not hit_k or sum(x.size for x in hit_k) == 0:
        return None
    hk, hc = np.concatenate(hit_k), np.concatenate(hit_call)
    o = np.argsort(hk, kind="stable")  # the kernels in their own order, as a mask over them keeps them
    hk, call_of = hk[o], hc[o]
    k, L, outer = k[hk], L[hk], outer_k[hk]
    o = np.lexsort((m.ts_ns[L], call_of))
    k, L, call_of, outer = k[o], L[o], call_of[o], outer[o]
    _, per = np.unique(call_of, return_counts=True)
    starts = np.r_[0, np.cumsum(per)[:-1]]
    # syncs: the synchronising runtime calls (a stream synchronize, a blocking copy) inside each call on its
    # thread, each named by the outermost op around it (nonzero, item); a trace without runtime events: the
    # outermost synchronising ops
    fl = a.flags
    thr_set = uniq(m.track[idx])
    got = memo_a.get(("sync", tuple(thr_set.tolist())))
    if got is None:
        if "sync_all" not in memo_a:  # of every thread, once: frames on other sets of threads take their part
            rt = np.flatnonzero((m.kind == int(Kind.RUNTIME)) & (fl["sync_rt"] | fl["blocking_copy"])[name_ids(m)])
            op = np.flatnonzero((m.kind == int(Kind.CPU_OP)) & fl["sync_op"][name_ids(m)])
            par = m.parent[op]
            memo_a["sync_all"] = (rt, op[(par < 0) | (m.kind[np.maximum(par, 0)] != int(Kind.CPU_OP))])
        rt, op = memo_a["sync_all"]
        sy = rt[member(m.track[rt], thr_set)]
        if sy.size == 0:
            sy = op[member(m.track[op], thr_set)]
        sync_ts = {int(t): np.sort(m.ts_ns[sy[m.track[sy] == t]]) for t in thr_set.tolist()}
        got = memo_a[("sync", tuple(thr_set.tolist()))] = (sy, sync_ts)
    sy, sync_ts = got
    n_sync = np.zeros(idx.size, np.int64)
    names_sync: Counter = Counter()
    for t in thr_set.tolist():
        ci = np.flatnonzero(m.track[idx] == t)
        ci = ci[np.argsort(m.ts_ns[idx[ci]], kind="stable")]
        s, e = m.ts_ns[idx[ci]], m.ts_ns[idx[ci]] + m.dur_ns[idx[ci]]
        key = ("sy", tuple(thr_set.tolist()), int(t))
        st = memo_a.get(key)
        if st is None:
            st = memo_a[key] = sy[m.track[sy] == t]
        o, sts = _by_time(memo_a, ("syts",) + key[1:], lambda: m.ts_ns[st])
        pos, call = in_calls(s, e, sts)
        p = o[pos]
        keep = np.argsort(p, kind="stable")  # the syncs in their own order, as a mask over them keeps them
        p, call = p[keep], call[keep]
        np.add.at(n_sync, ci[call], 1)
        names_sync.update(m.names[m.name_id[x]] for x in _outermost(m, st[p]).tolist())
    # the op sequence of each call: its kernels' outermost ops, each op call once, in launch order
    blocks: Counter = Counter()
    reps: list[tuple] = []
    memo = memo_a.setdefault("repeat", {})  # op sequence -> its repeat: nested frames' calls share sequences
    cfg = a.config
    # each call's op sequence by name ids (-1: no op), its names only for a sequence not seen before
    nid_outer = np.where(outer >= 0, m.name_id[np.maximum(outer, 0)], -1)
    # (a kernel's op is kept where it differs from the one before it in the same call)
    keep = np.ones(outer.size, bool)
    keep[1:] = outer[1:] != outer[:-1]
    keep[starts] = True
    kpos = np.flatnonzero(keep)
    u_all = outer[kpos]
    ids_all = nid_outer[kpos].tolist()
    k_lo = (np.cumsum(keep)[starts] - 1).tolist()
    k_hi = k_lo[1:] + [kpos.size]
    rep_first = np.full(starts.size, -1, np.int64)  # per call: the repeated run's first and last op (-1: none)
    rep_last = np.full(starts.size, -1, np.int64)
    for j, (lo, hi) in enumerate(zip(k_lo, k_hi)):
        ids = tuple(ids_all[lo:hi])
        r = memo.get(ids)
        if r is None:
            seq = tuple(m.names[x] if x >= 0 else "?" for x in ids)
            r = memo[ids] = tandem_repeat(seq, cfg.loop_min_block, cfg.loop_min_repeats,
                                          cfg.loop_max_block) or ((), 0, 0)
        if r[1]:
            rep_first[j] = lo + r[2]
            rep_last[j] = lo + r[2] + r[1] * len(r[0]) - 1
        blocks[r[0]] += 1
        reps.append(r)
    # the syncs inside each repeated run (its first op's start to its last op's end): the loop's own
    n_in = np.zeros(starts.size, np.int64)
    has_rep = rep_first >= 0
    c_thr = m.track[L[starts]]
    for t in uniq(c_thr[has_rep]).tolist():
        j = np.flatnonzero(has_rep & (c_thr == t))
        first, last = u_all[rep_first[j]], u_all[rep_last[j]]
        ts = sync_ts.get(int(t), np.zeros(0, np.int64))
        n_in[j] = np.searchsorted(ts, m.ts_ns[last] + m.dur_ns[last]) - np.searchsorted(ts, m.ts_ns[first])
    reps = [(b, r, x) for (b, r, _), x in zip(reps, n_in.tolist())]
    block, _ = blocks.most_common(1)[0]
    kd, ld = m.dur_ns[k], m.dur_ns[L]
    thr = m.track[idx].astype(np.int64)
    return {"calls": int(idx.size), "kernels": int(k.size), "kernels_per_call": float(median(per)),
            "kernel_median_ns": float(median(kd)), "launch_median_ns": float(median(ld)),
            "shorter_pct": 100.0 * float((kd < ld).mean()),
            "syncs_per_call": float(median(n_sync)),
            "sync_ops": [n for n, _ in names_sync.most_common(4)], "block": list(block),
            "repeats": int(median([r for b, r, _ in reps if b == block])) if block else 0,
            "loop_syncs": float(median([x for b, _, x in reps if b == block])) if block else 0.0,
            "block_calls": int(blocks[block]) if block else 0, "kernel_ns": int(kd.sum()), "kernels_idx": k,
            "intervals": (m.ts_ns[idx], m.ts_ns[idx] + m.dur_ns[idx], thr)}


def _qualifies(st: dict | None, cfg) -> bool:
    return (st is not None and st["calls"] >= cfg.loop_min_calls and st["kernels_per_call"] >= cfg.loop_min_kernels
            and st["kernel_median_ns"] < st["launch_median_ns"] and len(st["block"]) >= cfg.loop_min_block
            and 2 * st["block_calls"] > st["calls"]
            # a sync per iteration at least, inside the repeated run (each expert's where/nonzero, an item per
            # element): a loop over layers with one sync elsewhere in the step (a mask, the sampling, the
            # stopping check of a decoding loop) is the launch finding's, not this
            and st["loop_syncs"] >= max(st["repeats"], 1))


def loop_patterns(a) -> list[Pattern]:
    """The loops of tiny kernels of the window (at most one per nest of frames: the innermost)."""
    m, cf, cfg = a.model, a.call_floors, a.config
    k = cf.k[m.launch[cf.k] >= 0]
    if k.size == 0:
        return []
    thr = uniq(m.track[m.launch[k]])
    py = np.flatnonzero((m.kind == int(Kind.PYTHON)) & a.flags["user_frame"][name_ids(m)] & member(m.track, thr))
    if py.size == 0:
        return []
    if a.window is not None and getattr(a.window, "clipped", False):
        py = py[a.window.cpu_in(m, py)]
    # a cheap bound first: a frame needs loop_min_kernels kernels per call on average to be looked at
    names, cnt = np.unique(m.name_id[py], return_counts=True)
    cand = [int(n) for n, c in zip(names.tolist(), cnt.tolist()) if c * cfg.loop_min_kernels <= k.size]
    # every Python call of each candidate name, in event order: one stable sort by name, not a scan per name
    allpy = np.flatnonzero(m.kind == int(Kind.PYTHON))
    allpy = allpy[np.argsort(m.name_id[allpy], kind="stable")]
    nid_sorted = m.name_id[allpy]
    found = []
    for n in cand:
        lo, hi = np.searchsorted(nid_sorted, [n, n + 1]).tolist()
        st = _loop_stats(a, allpy[lo:hi])
        if _qualifies(st, cfg):
            s, e, _ = st["intervals"]
            found.append((int((e - s).sum()), m.names[n], st))
    found.sort(key=lambda x: (x[0], x[1]))
    accepted: list = []
    for host, name, st in found:
        s, e, t = st["intervals"]
        o = np.argsort(s)
        holds = False
        for _, _, st2 in accepted:  # does a call of this frame hold an accepted (inner) frame's call?
            s2, _, t2 = st2["intervals"]
            for tt in uniq(t2).tolist():
                mine = o[t[o] == tt]
                if mine.size and inside(s[mine], e[mine], s2[t2 == tt]).any():
                    holds = True
        if not holds:
            accepted.append((host, name, st))
    out = []
    steps = a.step_count or 1
    for _, name, st in accepted:
        from .names import display_frame
        from .units import fmt_ns

        body = " → ".join(x.replace("aten::", "") for x in st["block"])
        title = (f"Python loop of tiny kernels: `{display_frame(name)}` launches {st['kernels_per_call']:g} kernels "
                 f"per call (median {fmt_ns(int(st['kernel_median_ns']))}, under the "
                 f"{fmt_ns(int(st['launch_median_ns']))} launch call), {st['syncs_per_call']:g} syncs per call; "
                 f"`{body}` repeats {st['repeats']}x per call")
        fix = ("Replace the Python loop with one batched call: for MoE experts a grouped GEMM (Hugging Face: "
               "experts_implementation=\"batched_mm\"; torch._grouped_mm, or a fused MoE kernel), otherwise "
               "vectorise over the elements (gather them all at once, torch.bmm, one scatter-add instead of an "
               "index_add_ per element). The data-dependent syncs (nonzero, item) that size each iteration go "
               "with the loop.")
        est = ("not a kernel-time estimate: the projected saving is the frame's what-if as one fused GPU call "
               "(its whole host subtree out, its GPU work kept)")
        ev = {"frame": name, "frame_calls": st["calls"], "calls_per_step": st["calls"] / steps,
              "kernels_per_call": st["kernels_per_call"], "kernel_median_us": st["kernel_median_ns"] / 1e3,
              "launch_median_us": st["launch_median_ns"] / 1e3, "kernels_shorter_than_launch_pct": st["shorter_pct"],
              "syncs_per_call": st["syncs_per_call"], "syncs_in_loop_per_call": st["loop_syncs"],
              "sync_ops": st["sync_ops"], "repeated_ops": st["block"],
              "repeats_per_call": st["repeats"], "calls_with_repeat": st["block_calls"]}
        # its kernels are listed (the kernels view names the pattern on their rows) but not cut: no kernel-time
        # saving is claimed, and its finding carries none to the replay (findings.pattern_findings)
        kx = st["kernels_idx"]
        p = Pattern("tiny-kernel-loop", title, fix, est, st["kernel_ns"], st["kernel_ns"], st["kernels"], kernels=kx,
                    kernel_after_ns=m.dur_ns[kx].astype(np.int64), evidence=ev)
        out.append(p)
    return out
