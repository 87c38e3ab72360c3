"""The analysis window: which part of a trace the numbers describe.

A trace recorded by gapscope's capture holds, besides the measured steps, the capture's own
scaffolding: a barrier (an NCCL all-reduce on multi-rank runs, which can take seconds when the ranks'
profilers start at different times) and a synchronize before the first step and after the last one.
Each measured step is a CPU ``user_annotation`` range named ``gapscope.step#k``.

``window="steps"`` (the default) restricts every device to the GPU work of those steps:

* a GPU op (kernel, memcpy, memset) belongs to the steps when the CPU call that launched it (the
  runtime/driver call with the same correlation; ``cudaGraphLaunch`` for graph nodes) **starts inside
  a step range**, on any CPU thread. The launch is the robust anchor: GPU time lags the CPU, so a
  kernel of step k often runs after the step's CPU range has ended, while its launch cannot.
* a GPU op without a linked launch falls back to its aten op's start (``model.op``), then to its own
  start against the GPU-side copies of the step ranges on its device (``gpu_user_annotation``), or
  against the CPU step ranges where there are none.
* the device window is the first such op's start .. the last such op's end. Gaps, busy and idle time,
  causes, kernels, copies and collectives count GPU work clipped to that window; syncs, allocator
  calls, launches and CPU-side collectives count CPU calls that start inside a step range.

Only ``gapscope.step#k`` ranges select the window. ``ProfilerStep#N`` ranges are not used: torch's
profiler already records only its active steps, its ranges cover the time between steps too (so they
would exclude almost nothing), and traces from other tools keep the numbers they had.
``window="all"`` keeps the whole trace (first GPU activity .. last GPU activity per device).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..trace.model import Kind, TraceModel, TrackKind
from .intervals import member, name_ids, union, uniq
from .units import fmt_ns as _fmt

STEP_RE = re.compile(r"^gapscope\.step#(\d+)$")
MODES = ("steps", "all")
_WORK = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)




def in_intervals(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """t inside one of the disjoint sorted intervals [s, e)."""
    if s.size == 0:
        return np.zeros(np.shape(t), bool)
    j = np.searchsorted(s, t, side="right") - 1
    jj = np.clip(j, 0, None)
    return (j >= 0) & (t < e[jj])


@dataclass
class AnalysisWindow:
    mode: str  # "steps" (clipped to the measured steps) or "all"
    device: dict[int, tuple[int, int]]  # device -> [start, end) analysed
    full: dict[int, tuple[int, int]]  # device -> first .. last GPU activity in the whole trace
    steps: list[str] = field(default_factory=list)  # step range names, in time order
    cpu_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # step ranges (union)
    cpu_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    trace_span: tuple[int, int] = (0, 0)  # first .. last event of the whole trace (CPU and GPU)
    excluded_work_ns: int = 0  # GPU work (kernels, copies) left outside the device windows

    @property
    def span(self) -> tuple[int, int]:
        """First start .. last end of the analysed device windows."""
        if not self.device:
            return self.trace_span
        return (min(w[0] for w in self.device.values()), max(w[1] for w in self.device.values()))

    @property
    def clipped(self) -> bool:
        return self.mode == "steps"

    @property
    def excluded_ns(self) -> int:
        """Time of the trace (first .. last event, CPU included) outside the analysed span: the capture's
        set-up and tear-down (barrier, synchronize) left out. 0 when the whole trace is analysed."""
        if not self.clipped:
            return 0
        s0, s1 = self.span
        t0, t1 = self.trace_span
        return max(s0 - t0, 0) + max(t1 - s1, 0)

    @property
    def excluded_gpu_ns(self) -> int:
        """GPU timeline outside the device windows, summed over devices."""
        tot = 0
        for d, (f0, f1) in self.full.items():
            w = self.device.get(d)
            tot += (f1 - f0) - ((w[1] - w[0]) if w else 0)
        return max(tot, 0)

    def steps_label(self) -> str:
        ks = sorted(int(STEP_RE.match(s).group(1)) for s in set(self.steps) if STEP_RE.match(s))
        if not ks:
            return ""
        if ks == list(range(ks[0], ks[-1] + 1)):
            return f"gapscope.step#{ks[0]}" + (f"-{ks[-1]}" if len(ks) > 1 else "")
        return "gapscope.step#" + ",".join(str(k) for k in ks)

    def note(self) -> str | None:
        """One line for the report; None when the whole trace is analysed and there are no steps."""
        n = len(set(self.steps))
        if self.clipped:
            what = f"the {n} measured step{'s' if n != 1 else ''} ({self.steps_label()})"
            gpu = f" ({_fmt(self.excluded_work_ns)} of GPU work)" if self.excluded_work_ns else ""
            return (f"window: {what}; {_fmt(self.excluded_ns)} of capture set-up outside "
                    f"{'them' if n != 1 else 'it'} excluded{gpu}")
        if n:
            return f"window: the whole trace, including capture set-up outside the {n} measured steps"
        return None

    def cpu_in(self, model: TraceModel, idx: np.ndarray) -> np.ndarray:
        """Mask over ``idx`` (CPU events): the event starts inside a step range (all True when not clipped)."""
        idx = np.asarray(idx, np.int64)
        if not self.clipped:
            return np.ones(idx.shape, bool)
        return in_intervals(self.cpu_start, self.cpu_end, model.ts_ns[idx])

    def gpu_in(self, model: TraceModel, idx: np.ndarray) -> np.ndarray:
        """Mask over ``idx`` (GPU events): the event overlaps its device's window (all True when not clipped)."""
        idx = np.asarray(idx, np.int64)
        if not self.clipped:
            return np.ones(idx.shape, bool)
        if idx.size == 0:
            return np.zeros(0, bool)
        dev = _track_device(model)[model.track[idx]]
        w0 = np.array([self.device.get(int(d), (0, 0))[0] for d in range(int(dev.max(initial=-1)) + 2)], np.int64)
        w1 = np.array([self.device.get(int(d), (0, 0))[1] for d in range(int(dev.max(initial=-1)) + 2)], np.int64)
        dd = np.where(dev >= 0, dev, w0.size - 1)
        ok = dev >= 0
        s = model.ts_ns[idx]
        e = s + model.dur_ns[idx]
        # zero-length events count when they start inside the window
        return ok & (s < w1[dd]) & ((e > w0[dd]) | ((e == s) & (s >= w0[dd])))


def _track_device(model: TraceModel) -> np.ndarray:
    return np.array([t.device if t.kind is TrackKind.GPU else -1 for t in model.tracks] + [-1], dtype=np.int64)


def step_ranges(model: TraceModel, kind: Kind = Kind.ANNOTATION):
    """Indices of the ``gapscope.step#k`` ranges of the given kind, in time order."""
    is_step = np.array([bool(STEP_RE.match(n)) for n in model.names], dtype=bool)
    if not is_step.any():
        return np.zeros(0, np.int64)
    idx = np.flatnonzero((model.kind == kind) & is_step[name_ids(model)])
    return idx[np.argsort(model.ts_ns[idx], kind="stable")]


def compute_window(model: TraceModel, mode: str = "steps") -> AnalysisWindow:
    if mode not in MODES:
        raise ValueError(f"window must be one of {MODES}, not {mode!r}")
    tdev = _track_device(model)
    work = np.flatnonzero(member(model.kind, _WORK) & (tdev[model.track] >= 0)) \
        if model.n else np.zeros(0, np.int64)
    dev = tdev[model.track[work]]
    ts = model.ts_ns[work]
    end = ts + model.dur_ns[work]

    def extent(sel) -> dict[int, tuple[int, int]]:
        out = {}
        for d in uniq(dev[sel]).tolist():
            m = sel & (dev == d)
            out[int(d)] = (int(ts[m].min()), int(end[m].max()))
        return out

    full = extent(np.ones(work.size, bool))
    steps = step_ranges(model)
    names = [model.name(i) for i in steps.tolist()]
    span = model.window_ns()
    if mode == "all" or steps.size == 0:
        return AnalysisWindow("all", dict(full), full, names, trace_span=span)
    cs, ce = union(model.ts_ns[steps], model.ts_ns[steps] + model.dur_ns[steps])
    L = model.launch[work]
    op = model.op[work]
    anchor = np.where(L >= 0, model.ts_ns[np.where(L >= 0, L, 0)],
                      np.where(op >= 0, model.ts_ns[np.where(op >= 0, op, 0)], -1))
    in_step = (anchor >= 0) & in_intervals(cs, ce, anchor)
    loose = anchor < 0
    if loose.any():  # no launch, no op: the GPU op's own start against the GPU-side step ranges
        gsteps = step_ranges(model, Kind.GPU_ANNOTATION)
        gdev = tdev[model.track[gsteps]]
        for d in uniq(dev[loose]).tolist():
            sel = loose & (dev == d)
            g = gsteps[gdev == d]
            s, e = (union(model.ts_ns[g], model.ts_ns[g] + model.dur_ns[g]) if g.size else (cs, ce))
            in_step[sel] = in_intervals(s, e, ts[sel])
    device = extent(in_step)
    if not device:  # step ranges but no GPU work linked to them: keep the whole trace
        return AnalysisWindow("all", dict(full), full, names, trace_span=span)
    w = AnalysisWindow("steps", device, full, names, cs, ce, trace_span=span)
    out = ~w.gpu_in(model, work)
    w.excluded_work_ns = int(model.dur_ns[work[out]].sum())
    return w
