"""``analyze(model) -> Analysis``: the one entry point. Whole-trace work is vectorised at construction;
per-gap detail (stacks, explanation) is computed on demand by ``gap_detail(i)`` and cached."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import SimpleNamespace

import numpy as np

from ..trace.model import Kind, TraceModel

from . import activity, causes
from .gaps import CAUSES, DeviceStats, classify, device_stats_and_gaps, stream_gaps
from .names import name_flags
from .stacks import Frame, StackIndex, signature_frame
from .thresholds import DEFAULT, NOISY_IQR, NOISY_RANGE, Thresholds
from .window import AnalysisWindow, compute_window
from .units import fmt_ns as _us

_ANNOTATION = int(Kind.ANNOTATION)

class _Explanations(dict):
    """cause -> one sentence (each cause's ``summary`` in the registry), always current."""

    def _all(self):
        return {c.name: c.summary for c in causes.all_causes()}

    def __getitem__(self, k):
        return self._all()[k]

    def __iter__(self):
        return iter(self._all())

    def __len__(self):
        return len(self._all())

    def __contains__(self, k):
        return k in self._all()

    def items(self):
        return self._all().items()

    def keys(self):
        return self._all().keys()

    def values(self):
        return self._all().values()

    def get(self, k, default=None):
        return self._all().get(k, default)


CAUSE_EXPLANATIONS = _Explanations()


class GapTable:
    """One row per compute gap of every device, sorted by duration (largest first)."""

    def __init__(self, device, start, end, cause, next_idx, launch_idx, thread, t_launch, breakdown):
        o = np.lexsort((start, device, -(end - start))) if start.size else np.zeros(0, np.int64)
        #: the rows' positions in the classifier's columns (for the columns it returns beside these)
        self.order = o
        self.device = device[o].astype(np.int32)
        self.start_ns = start[o].astype(np.int64)
        self.end_ns = end[o].astype(np.int64)
        self.dur_ns = self.end_ns - self.start_ns
        self.cause = cause[o].astype(np.uint8)
        self.next_idx = next_idx[o].astype(np.int64)
        self.launch_idx = launch_idx[o].astype(np.int64)
        self.thread = thread[o].astype(np.int64)
        self.t_launch_ns = t_launch[o].astype(np.int64)
        self.breakdown = {k: v[o].astype(np.int64) for k, v in breakdown.items()}

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


@dataclass
class GapDetail:
    row: int
    cause: str
    explanation: str
    #: the stack the cause points to (its evidence, and the frame findings group by): the launch stack of a
    #: launch gap, the synchronising call of a sync gap, the frame holding the CPU of a python gap, ...
    stack: list[Frame]
    breakdown: dict[str, int]
    next_kernel: str
    launch: str | None
    next_op: str | None
    launch_stack: list[Frame]
    thread_track: int
    start_ns: int = 0
    dur_ns: int = 0
    device: int = 0
    signature: str | None = None  # the frame a person would fix (for grouping into findings)
    extra: dict = field(default_factory=dict)
    #: the launching thread's stack at t0, the moment the GPU went idle (what the CPU was doing as the queue ran
    #: dry); ``launch_stack`` is the other fixed point: what finally fed the GPU
    idle_stack: list[Frame] = field(default_factory=list)


@dataclass
class Finding:
    id: str
    severity: str  # high | medium | low | info
    title: str
    idle_ns: int
    evidence: dict
    suggestion: str
    gap_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cause: str | None = None
    #: an op pattern (cause "pattern"): its kernels and their durations once fixed (what the replay runs)
    kernels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    kernel_after_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    host_removed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # CPU ops the fix removes


class Analysis:
    def __init__(self, model: TraceModel, config: Thresholds | None = None, window: str = "steps"):
        self.model = model
        self.config = config or DEFAULT
        self.warnings: list[str] = list(model.warnings)
        self.flags = name_flags(model.names)
        #: what the numbers cover: the measured steps (``gapscope.step#k``) or the whole trace; see window.py
        self.window: AnalysisWindow = compute_window(model, window)
        self.devices: list[DeviceStats]
        self.devices, cols = device_stats_and_gaps(model, self.window.device if self.window.clipped else None)
        self.stacks = StackIndex(model, self.flags)
        res, self.cpu, _ = classify(model, cols, self.config, self.flags, stacks=self.stacks)
        self.gaps = GapTable(cols["device"], cols["start"], cols["end"], res["cause"], cols["next"], res["launch"],
                             res["thread"], res["t_launch"], res["breakdown"])
        self._held = tuple(np.asarray(x)[self.gaps.order] for x in res["held"])
        self._details: dict[int, GapDetail] = {}
        #: gap row -> (time, event) of ``_holder_points``, for the Python-held gaps whose frame was taken
        self._holders: dict[int, tuple[int, int]] = {}
        self._max_dur: dict[int, int] = {}
        self.distortion = self._distortion()
        #: several ranks of one job (set by ranks.analyze_ranks): the cross-rank match, shared by every rank
        self.cross_rank = None  # ranks.RankMatch | None
        #: several ranks: a sentence on the late rank, added to the explanation of collective gaps
        self.late_rank_note: str | None = None
        if not self.devices:
            self.warnings.append("no GPU activity in this trace: nothing to analyse for idle time")
        from .findings import build_findings

        self.findings: list[Finding] = build_findings(self)

    # ------------------------------------------------------------ summaries
    @property
    def rank(self) -> int | None:
        return self.model.rank

    @property
    def phase(self) -> str | None:
        g = self.model.gapscope_meta or {}
        p = g.get("phase")
        return p if isinstance(p, str) else None

    @cached_property
    def step_count(self) -> int | None:
        """Measured steps in the window: the capture's ``gapscope.step#k`` ranges, else torch's
        ``ProfilerStep#N`` ranges; None when the trace marks no steps."""
        if self.window.steps:
            return len(set(self.window.steps))
        m = self.model
        ids = [i for i, n in enumerate(m.names) if n.startswith("ProfilerStep#")]
        if not ids:
            return None
        hit = np.isin(m.name_id, np.array(ids, np.int32)) & (m.kind == _ANNOTATION)
        names = {int(x) for x in m.name_id[hit].tolist()}
        return len(names) or None

    @property
    def window_start_ns(self) -> int:
        return min((d.window_start_ns for d in self.devices), default=self.model.window_ns()[0])

    @property
    def window_note(self) -> str | None:
        """One line saying what the window covers ("window: the 4 measured steps ...")."""
        return self.window.note()

    @property
    def window_ns(self) -> int:
        if not self.devices:
            w = self.model.window_ns()
            return w[1] - w[0]
        return max(d.window_end_ns for d in self.devices) - self.window_start_ns

    @property
    def idle_ns(self) -> int:
        return sum(d.idle_ns for d in self.devices)

    @property
    def idle_pct(self) -> float:
        w = sum(d.window_ns for d in self.devices)
        return 100.0 * self.idle_ns / w if w else 0.0

    def cause_totals(self) -> dict[str, dict]:
        g = self.gaps
        cnt = np.bincount(g.cause, minlength=len(CAUSES))
        # integer sums: a float64 bincount is inexact once a total passes 2**53 ns (a clock glitch can do it)
        tot = np.zeros(len(CAUSES), dtype=np.int64)
        np.add.at(tot, g.cause.astype(np.intp), g.dur_ns)
        return {c: {"count": int(cnt[i]), "total_ns": int(tot[i])} for i, c in enumerate(CAUSES)}

    def listed_rows(self) -> np.ndarray:
        return np.flatnonzero(self.gaps.dur_ns >= self.config.min_listed_gap_ns)

    def stream_gaps(self, track_id: int):
        """Gaps of one stream (start_ns, end_ns, next kernel index), in time order, within the analysis window."""
        t = self.model.tracks[track_id]
        w = self.window.device.get(t.device) if self.window.clipped else None
        return stream_gaps(self.model, track_id, w)

    @cached_property
    def projection(self):
        """What fixing each finding saves per step, from a replay of the trace (replay.py; on demand)."""
        from .findings import rank_severity
        from .replay import project

        p = project(self)
        rank_severity(self.findings, p)
        return p

    @cached_property
    def call_floors(self):
        """Each kernel's op call and its floor (activity.call_floors), once for every table that reads them."""
        k = np.flatnonzero(self.model.kind == int(Kind.KERNEL))
        k = k[self.window.gpu_in(self.model, k)] if self.window is not None else k
        return activity.call_floors(self.model, k, self.window, self.flags)

    @cached_property
    def patterns(self) -> list:
        """Op patterns that make kernels slow (eager attention, fp32 matmuls, ...; patterns.py)."""
        from .patterns import find_patterns

        return find_patterns(self)

    @cached_property
    def kernels(self) -> list:
        return activity.kernel_stats(self.model, window=self.window, flags=self.flags, floors=self.call_floors)

    @cached_property
    def op_floors(self) -> list:
        """Ops whose calls launched several kernels: one floor per call, against all its kernels."""
        return activity.op_floor_stats(self.model, window=self.window, flags=self.flags, floors=self.call_floors)

    @cached_property
    def verdicts(self) -> list:
        """Per device: gpu-bound, host-bound or mixed, with the launch-queue evidence (verdict.py)."""
        from .verdict import device_verdicts

        from .verdict import gpu_bound_reason

        out = device_verdicts(self.model, self.devices, self.flags, self.window)
        for v in out:  # a GPU-bound device points at its kernels and patterns
            if v.kind == "gpu-bound":
                v.reason = gpu_bound_reason(v, self.kernels, self.patterns)
        return out

    @cached_property
    def launches(self) -> dict:
        return activity.launch_stats(self.model, window=self.window)

    @cached_property
    def syncs(self) -> list[dict]:
        return activity.sync_stats(self.model, self.flags, self.stacks, window=self.window)

    @cached_property
    def copies(self) -> list[dict]:
        return activity.copy_stats(self.model, window=self.window)

    @cached_property
    def allocator(self) -> dict:
        return activity.allocator_stats(self.model, self.flags, window=self.window)

    @cached_property
    def collectives(self) -> list[dict]:
        return activity.collective_stats(self.model, self.flags, window=self.window)

    def _distortion(self) -> dict | None:
        g = self.model.gapscope_meta
        if not g:
            return None
        src = g.get("distortion") if isinstance(g.get("distortion"), dict) else g

        def num(*keys):
            for k in keys:
                v = src.get(k)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    return float(v)
            return None

        prof = num("profiled_us", "profiled")
        unprof = num("unprofiled_us", "unprofiled")
        ratio = num("ratio", "distortion")
        if ratio is None and isinstance(g.get("distortion"), (int, float)):
            ratio = float(g["distortion"])
        if ratio is None and prof and unprof:
            ratio = prof / unprof
        if prof is None or unprof is None or ratio is None:
            return None
        d = {"profiled_us": prof, "unprofiled_us": unprof, "ratio": ratio}
        d.update(self._timing_spread(g, prof))
        if ratio > self.config.large_distortion:
            self.warnings.append(
                f"the profiler slowed the captured step {ratio:.2f}x ({prof:.0f} µs vs {unprof:.0f} µs without it): "
                "CPU-side gaps are inflated"
            )
        return d

    def _timing_spread(self, g: dict, prof: float) -> dict:
        """The un-profiled timing's spread from our capture's ``unprofiled`` metadata (absent in older traces):
        min/p25/p75/max and n, the distortion against p75 and p25 (``ratio_low``, ``ratio_high``), and, when
        the spread passes p75/p25 > 1.15 or max/min > 1.5, the warning "times on this node vary Nx; distortion uncertain"."""
        u = g.get("unprofiled")
        if not isinstance(u, dict):
            return {}

        def num(k):
            v = u.get(k)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None

        lo, p25, p75, hi, n = num("min_us"), num("p25_us"), num("p75_us"), num("max_us"), u.get("n")
        if None in (lo, p25, p75, hi) or not (0 < lo <= p25 <= p75 <= hi):
            return {}
        # judged here from the numbers (capture's own rule, capture.recorder.NOISY_IQR / NOISY_RANGE), not from
        # the trace's flag, so that traces recorded under an earlier rule read the same
        noisy = p75 / p25 > NOISY_IQR or hi / lo > NOISY_RANGE
        out: dict = {"unprofiled_min_us": lo, "unprofiled_p25_us": p25, "unprofiled_p75_us": p75,
                     "unprofiled_max_us": hi, "unprofiled_n": int(n) if isinstance(n, int) else None,
                     "ratio_low": prof / p75, "ratio_high": prof / p25, "timing_noisy": bool(noisy)}
        if out["timing_noisy"]:
            self.warnings.append(
                f"times on this node vary {hi / lo:.1f}x; distortion uncertain: un-profiled {p25:.0f}–{p75:.0f} µs "
                f"(p25–p75, min {lo:.0f}, max {hi:.0f}, n={out['unprofiled_n']}) gives "
                f"{out['ratio_low']:.2f}x–{out['ratio_high']:.2f}x"
            )
        return out

    # --------------------------------------------------------------- detail
    def gap_detail(self, i: int) -> GapDetail:
        i = int(i)
        d = self._details.get(i)
        if d is None:
            d = self._gap_detail(i)
            self._details[i] = d
        return d

    def _gap_detail(self, i: int) -> GapDetail:
        m, g, st = self.model, self.gaps, self.stacks
        cause = CAUSES[int(g.cause[i])]
        t0, t1 = int(g.start_ns[i]), int(g.end_ns[i])
        nxt, L, thr, tl = int(g.next_idx[i]), int(g.launch_idx[i]), int(g.thread[i]), int(g.t_launch_ns[i])
        bd = {k: int(v[i]) for k, v in g.breakdown.items()}
        nk = m.name(nxt) if nxt >= 0 else "(end of window)"
        launch = m.name(L) if L >= 0 else None
        op_i = int(m.op[nxt]) if nxt >= 0 else -1
        next_op = m.name(op_i) if op_i >= 0 else None
        launch_stack = st.stack_at(thr, int(m.ts_ns[L])) if L >= 0 and thr >= 0 else []
        dur = t1 - t0
        c = causes.get(cause)
        x = SimpleNamespace(i=i, t0=t0, t1=t1, tl=tl, thr=thr, L=L, nxt=nxt, dev=int(g.device[i]),
                            launch_stack=launch_stack, bd=bd)
        if c.gather is not None:
            stack, extra = c.gather(self, x)
        else:
            stack, extra = st.stack_at(thr, t0), {}
        sig = signature_frame(stack)
        idle_stack = st.stack_at(thr, t0) if thr >= 0 else []
        det = GapDetail(i, cause, "", stack, bd, nk, launch, next_op, launch_stack, thr, t0, dur, int(g.device[i]),
                        sig.name if sig else None, extra, idle_stack)
        det.explanation = self._explain(det, tl)
        return det

    def gap_signatures(self, rows) -> list[str | None]:
        """``gap_detail(r).signature`` for each row, without building the details: the stacks of the
        Python-held, sync and collective gaps are taken all at once (``_holder_points``, ``_sync_anchor``,
        ``signature_events``); other causes, and rows already detailed, go through ``gap_detail``."""
        m, g = self.model, self.gaps
        rows = np.asarray(rows, np.int64)
        out: list[str | None] = [None] * rows.size
        cause = g.cause[rows]
        py_c, coll_c, sync_c = CAUSES.index("python"), CAUSES.index("collective"), CAUSES.index("sync")
        fast = np.array([c in (py_c, coll_c, sync_c) and r not in self._details
                         for r, c in zip(rows.tolist(), cause.tolist())], dtype=bool)
        for k in np.flatnonzero(~fast).tolist():
            out[k] = self.gap_detail(int(rows[k])).signature
        k = np.flatnonzero(fast)
        if k.size:
            r = rows[k]
            thr, t = g.thread[r], g.start_ns[r].copy()
            py = cause[k] == py_c
            if py.any():
                at, ev = self._holder_points(thr[py], g.start_ns[r[py]], g.t_launch_ns[r[py]])
                t[py] = at
                self._holders.update(zip(r[py].tolist(), zip(at.tolist(), ev.tolist())))
            # a sync gap's stack is taken inside its synchronising call (causes/sync.py's gather)
            for j in np.flatnonzero(cause[k] == sync_c).tolist():
                rr = int(r[j])
                t[j] = self._sync_anchor(int(g.thread[rr]), int(g.start_ns[rr]), int(g.t_launch_ns[rr]))
            sig = self.stacks.signature_events(thr, t)
            for j, e in zip(k.tolist(), sig.tolist()):
                out[j] = m.name(e) if e >= 0 else None
        return out

    def gap_holder(self, i: int) -> tuple[int, int, int]:
        """(event, ns, of which ns) of the one call, op or range holding gap ``i`` (``gaps.one_holder``;
        event -1: none)."""
        ev, ns, of = self._held
        return int(ev[i]), int(ns[i]), int(of[i])

    def _sync_anchor(self, thr: int, t0: int, tl: int) -> int:
        """A time inside the synchronising call that makes the gap: the one open at t0 (or ending just
        before it), else the longest one in [t0, t_launch]; the point is inside its innermost sync child."""
        m = self.model
        idx = self._thread_events(thr, t0 - self.config.sync_slack_ns, max(tl, t0 + 1))
        idx = idx[self.cpu.sync_mask[idx]]
        if idx.size == 0:
            return t0
        end = m.ts_ns[idx] + m.dur_ns[idx]
        at0 = idx[m.ts_ns[idx] <= t0]
        if at0.size:
            top = int(at0[np.argmax(m.dur_ns[at0])])
        else:
            top = int(idx[np.argmax(m.dur_ns[idx])])
        s, e = int(m.ts_ns[top]), int(m.ts_ns[top] + m.dur_ns[top])
        inner = idx[(m.ts_ns[idx] >= s) & (end <= e)]
        best = int(inner[np.argmax(m.depth[inner])]) if inner.size else top
        return int(m.ts_ns[best]) + int(m.dur_ns[best]) // 2

    def _holder(self, row: int, thr: int, t0: int, tl: int) -> tuple[int, int]:
        """``_holder_points`` of one gap (kept from the findings' pass when it took it)."""
        h = self._holders.get(row)
        if h is None:
            at, ev = self._holder_points(np.array([thr], np.int64), np.array([t0], np.int64),
                                         np.array([tl], np.int64))
            h = self._holders[row] = (int(at[0]), int(ev[0]))
        return h

    def _holder_points(self, thr: np.ndarray, t0: np.ndarray, tl: np.ndarray):
        """For each gap (thread, t0, t_launch): the Python frame holding the CPU in [t0, tl], the most common
        innermost Python frame among 33 sample points where no op or runtime call runs (ties: the lowest
        event index), and the first sample point inside it. Without such frames, the most common annotation
        holding the CPU there; the capture's own step loop is not a frame to name. Returns (time to take the
        stack at, event or -1 when no frame is named: then the time is t0). Vectorised over all gaps."""
        from .hosttime import holder_points

        return holder_points(self.stacks, self.model, self.flags, thr, t0, tl)

    def _thread_events(self, thr: int, t0: int, t1: int) -> np.ndarray:
        """Events of thread ``thr`` overlapping [t0, t1): those starting inside (a searchsorted range)
        plus those open at t0 (the stack chains), without scanning the thread's earlier history."""
        m = self.model
        if thr < 0:
            return np.zeros(0, np.int64)
        sl = m.track_slice(thr)
        ts = m.ts_ns[sl]
        lo = int(np.searchsorted(ts, t0, side="left"))
        hi = int(np.searchsorted(ts, t1, side="left"))
        inside = np.arange(sl.start + lo, sl.start + max(hi, lo), dtype=np.int64)
        st = self.stacks
        open_at = (st._chain(st._innermost_one("cpu", thr, t0), t0)
                   + st._chain(st._innermost_one("py", thr, t0), t0, "py"))
        open_at = [i for i in open_at if int(m.track[i]) == thr and m.ts_ns[i] < t0]
        if open_at:
            inside = np.union1d(inside, np.array(open_at, dtype=np.int64))
        e = m.ts_ns[inside] + m.dur_ns[inside]
        return inside[(e > t0) | (m.ts_ns[inside] >= t0)]

    def _ops_in(self, thr: int, t0: int, tl: int, limit: int = 12) -> list[str]:
        if thr < 0 or tl <= t0:
            return []
        m = self.model
        idx = self._thread_events(thr, t0, tl)
        idx = idx[(m.kind[idx] == Kind.CPU_OP) & (m.ts_ns[idx] >= t0)]
        if idx.size:  # outermost ops only
            p = m.parent[idx]
            idx = idx[(p < 0) | (m.kind[np.where(p >= 0, p, 0)] != Kind.CPU_OP) | (m.ts_ns[np.where(p >= 0, p, 0)] < t0)]
        return [m.name(j) for j in idx[:limit].tolist()]

    def _ops_in_counts(self, thr: np.ndarray, t0: np.ndarray, tl: np.ndarray, limit: int = 12) -> dict[str, int]:
        """``_ops_in`` of many (thread, t0, t_launch), names counted over all of them (one count per op issued),
        vectorised per thread: the first ``limit`` outermost ops starting in [t0, tl) of each."""
        m = self.model
        thr, t0, tl = (np.asarray(x, np.int64) for x in (thr, t0, tl))
        ok = (thr >= 0) & (tl > t0)
        counts = np.zeros(len(m.names), np.int64)
        for th in np.unique(thr[ok]).tolist():
            sl = m.track_slice(th)
            ops = np.flatnonzero(m.kind[sl] == Kind.CPU_OP) + sl.start  # by start on the track
            if ops.size == 0:
                continue
            ts = m.ts_ns[ops]
            p = m.parent[ops]
            # an op is outermost in [t0, tl) unless its parent is an op that started at or after t0
            pts = np.where((p >= 0) & (m.kind[np.maximum(p, 0)] == Kind.CPU_OP), m.ts_ns[np.maximum(p, 0)],
                           np.iinfo(np.int64).min)
            sel = ok & (thr == th)
            a0, al = t0[sel], tl[sel]
            lo = np.searchsorted(ts, a0, side="left")
            hi = np.searchsorted(ts, al, side="left")
            n = np.maximum(hi - lo, 0)
            if not n.any():
                continue
            gid = np.repeat(np.arange(n.size), n)
            flat = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
            keep = pts[flat] < a0[gid]
            gid, flat = gid[keep], flat[keep]
            # rank of each kept op within its gap: only the first ``limit``
            first = np.searchsorted(gid, gid, side="left")
            take = (np.arange(gid.size) - first) < limit
            counts += np.bincount(m.name_id[ops[flat[take]]], minlength=counts.size)
        nz = np.flatnonzero(counts)
        return {m.names[i]: int(counts[i]) for i in nz.tolist()}

    def _alloc_stack(self, thr: int, t0: int, tl: int) -> list[Frame]:
        if thr < 0:
            return []
        m = self.model
        idx = self._thread_events(thr, t0, max(tl, t0 + 1))
        a = idx[self.flags["alloc"][m.name_id[idx]] | self.flags["empty_cache"][m.name_id[idx]]]
        if a.size == 0:
            return []
        j = int(a[np.argmax(m.dur_ns[a])])
        return self.stacks.stack_at(thr, int(m.ts_ns[j]) + max(int(m.dur_ns[j]) // 2, 0))

    def _copy_stack(self, dev: int, t0: int, t1: int):
        m = self.model
        best, best_ov = -1, 0
        for t in m.gpu_tracks():
            if t.device != dev:
                continue
            sl = m.track_slice(t.id)
            if sl.stop <= sl.start:
                continue
            md = self._max_dur.get(t.id)
            if md is None:
                md = self._max_dur[t.id] = int(m.dur_ns[sl].max())
            lo = int(np.searchsorted(m.ts_ns[sl], t0 - md, side="left"))
            hi = int(np.searchsorted(m.ts_ns[sl], t1, side="left"))
            idx = np.arange(sl.start + lo, sl.start + max(hi, lo))
            idx = idx[((m.kind[idx] == Kind.MEMCPY) | (m.kind[idx] == Kind.MEMSET))]
            if idx.size == 0:
                continue
            ov = np.minimum(m.ts_ns[idx] + m.dur_ns[idx], t1) - np.maximum(m.ts_ns[idx], t0)
            j = int(np.argmax(ov))
            if ov[j] > best_ov:
                best, best_ov = int(idx[j]), int(ov[j])
        if best < 0:
            return [], None
        info = {"name": m.name(best), "bytes": int(m.nbytes[best]), "dur_ns": int(m.dur_ns[best]),
                "kind": activity.copy_kind(m.name(best))}
        if m.dur_ns[best] > 0 and m.nbytes[best] > 0:
            info["gbps"] = float(m.nbytes[best]) / float(m.dur_ns[best])
        L = int(m.launch[best])
        if L < 0:
            return [], info
        info["launch"] = m.name(L)
        info["issued_ns"] = int(m.ts_ns[L])
        return self.stacks.stack_at(int(m.track[L]), int(m.ts_ns[L])), info

    def _last_before(self, thr: int, t: int) -> str | None:
        if thr < 0:
            return None
        m = self.model
        sl = m.track_slice(thr)
        k = int(np.searchsorted(m.ts_ns[sl], t, side="left")) - 1
        while k >= 0:
            j = sl.start + k
            if m.kind[j] != Kind.INSTANT and m.ts_ns[j] + m.dur_ns[j] <= t:
                return f"`{m.name(j)}` (ended {_us(t - int(m.ts_ns[j] + m.dur_ns[j]))} before the launch)"
            k -= 1
        return None

    def _explain(self, d: GapDetail, tl: int) -> str:
        c = causes.get(d.cause)
        if c.explain is not None:
            return c.explain(self, d, tl)
        return f"{c.summary}; GPU idle {_us(d.dur_ns)}."


def analyze(model: TraceModel, config: Thresholds | None = None, window: str = "steps") -> Analysis:
    """Analyse one trace. ``window="steps"`` (default) restricts every number to the GPU work of the
    measured ``gapscope.step#k`` ranges when the trace has them; ``window="all"`` keeps the whole trace."""
    return Analysis(model, config, window)
