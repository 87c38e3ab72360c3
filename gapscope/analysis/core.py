"""``analyze(model) -> Analysis``: the one entry point, a pipeline of stages over declared types (types.py):

    window    window_stage(model, mode)                       -> AnalysisWindow (window.py)
    gaps      gaps_stage(model, window)                       -> devices (DeviceStats), the gap columns
    classify  classify_stage(model, columns, config, ...)     -> Classified: GapTable, CPU sets, holders
    details   Analysis.gap_detail(row)                        -> GapDetail, on demand, cached
    findings  findings.build_findings(analysis)               -> [Finding] (+ the job's, for the ranks of a job)

plus the profiler distortion and the warnings (``profiler_distortion``, a pure function of the trace's
metadata: run once) and, on demand, the projection (``Analysis.projection``; ``projected`` says whether it ran).
The ranks of one job are an input (``job``: ranks.job.RankJob): its match, the late-rank sentence, its warnings
and its findings go into each rank's analysis as it is built. The causes' ``gather`` and the findings query
the trace through ``Analysis.evidence`` (evidence.py) and ``Analysis.holder``."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..trace.model import Kind, TraceModel

from . import activity, causes
from .details import GapDetails
from .evidence import Evidence
from .forked import Forked, parallel_ok
from .findings import build_findings
from .gaps import CAUSES, DeviceStats, classify, device_stats_and_gaps, stream_gaps
from .graphs import graph_map
from .names import name_flags
from .stacks import StackIndex
from .thresholds import DEFAULT, NOISY_IQR, NOISY_RANGE, Thresholds
from .types import AnalysisWarning, Finding, GapDetail, GapTable
from .window import AnalysisWindow, compute_window
from .intervals import isin

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

#: what the forked child of a ``parallel`` analysis sends, in this order (``Forked.result``'s index): the kernels' side
#: (``_kernel_side``), the projection's start and its frames' what-ifs
_KERNELS, _START, _FRAMES = range(3)

#: the cached tables a forked child computes for a ``parallel`` analysis (``_kernel_side``), in this order
_KERNEL_SIDE = ("call_floors", "patterns", "kernels", "op_floors", "verdicts")



def _from_side(a, name: str):
    """``name``'s value from the forked child of ``_kernel_side`` (waiting for it, the first time), or None:
    it failed, or there is none (then the caller computes it: the same code on the same data)."""
    job = vars(a).get("_side")
    if job is not None and not vars(a).get("_side_taken"):
        vars(a)["_side_taken"] = True
        got = job.result(_KERNELS)
        if isinstance(got, dict):
            for k in _KERNEL_SIDE:
                if k in got:
                    vars(a).setdefault(k, got[k])
    return vars(a).get(name)


def _kernel_side(a) -> dict:
    """What a forked child of a ``parallel`` analysis computes first, while the parent takes the stacks, the gaps'
    causes and their findings: the kernels' side, which needs only the model, the window and the devices."""
    return {k: getattr(a, k) for k in _KERNEL_SIDE}


def _projection_start(a):
    """What the same child computes next, while the parent is still on the findings: the projection's start
    (replay.start_ahead: the replay, calibrated), kept in the child for ``_projection_ahead``."""
    from .replay import start_ahead

    vars(a)["_start"] = start_ahead(a)
    return vars(a)["_start"]


def _projection_ahead(a):
    """Then the rest of the projection that needs no finding (replay.frames_ahead: the frames' what-ifs)."""
    from .replay import frames_ahead

    return frames_ahead(a, vars(a).get("_start"))


def _start_ahead(a):
    """The projection's start the forked child computed after the kernels' side (replay.start_ahead), or None."""
    job = vars(a).get("_side")
    return job.result(_START) if job is not None else None


def _frames_ahead(a):
    """The frames' what-ifs the forked child computed last (replay.frames_ahead), or None; the child is ended and
    reaped then, whatever it answered."""
    job = vars(a).pop("_side", None)
    if job is None:
        return None
    try:
        return job.result(_FRAMES)
    finally:
        job.close()


def window_stage(model: TraceModel, window: str | AnalysisWindow = "steps") -> AnalysisWindow:
    """Stage 1: what the numbers cover (the measured steps, or the whole trace; window.py)."""
    return window if isinstance(window, AnalysisWindow) else compute_window(model, window)


def gaps_stage(model: TraceModel, window: AnalysisWindow) -> tuple[list[DeviceStats], dict]:
    """Stage 2: each device's busy/idle figures and its compute gaps as columns (gaps.py)."""
    return device_stats_and_gaps(model, window.device if window.clipped else None)


@dataclass(frozen=True)
class Classified:
    """What stage 3 (``classify_stage``) gives: the gap table, the classifier's CPU sets and, per row, the one
    call, op or range holding the gap (``gaps.one_holder``: event, own ns, of which ns)."""
    gaps: GapTable
    cpu: object
    held: tuple


def classify_stage(model: TraceModel, cols: dict, config: Thresholds, flags: dict, stacks: StackIndex) -> Classified:
    """Stage 3: every gap's cause (the registry's rules, gaps.classify), as a table sorted by duration."""
    res, cpu, _ = classify(model, cols, config, flags, stacks=stacks)
    g = GapTable(cols["device"], cols["start"], cols["end"], res["cause"], cols["next"], res["launch"],
                 res["thread"], res["t_launch"], res["breakdown"])
    return Classified(g, cpu, tuple(np.asarray(x)[g.order] for x in res["held"]))


def profiler_distortion(meta: dict | None, config: Thresholds) -> tuple[dict | None, list[AnalysisWarning]]:
    """The profiler's distortion from our capture's metadata (profiled against un-profiled step time, and the
    un-profiled timing's spread), and its warnings: the timing noisy (``timing-noisy``), the distortion large
    (``distortion``, past ``config.large_distortion``). (None, []) without the figures."""
    g = meta
    if not g:
        return None, []
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
        return None, []
    d = {"profiled_us": prof, "unprofiled_us": unprof, "ratio": ratio}
    spread, warnings = _timing_spread(g, prof)
    d.update(spread)
    if ratio > config.large_distortion:
        warnings.append(AnalysisWarning(
            "distortion",
            f"the profiler slowed the captured step {ratio:.2f}x ({prof:.0f} µs vs {unprof:.0f} µs without it): "
            "CPU-side gaps are inflated",
            {"ratio": ratio, "profiled_us": prof, "unprofiled_us": unprof, "limit": config.large_distortion}))
    return d, warnings


def _timing_spread(g: dict, prof: float) -> tuple[dict, list[AnalysisWarning]]:
    """The un-profiled timing's spread from our capture's ``unprofiled`` metadata (absent in older traces):
    min/p25/p75/max and n, the distortion against p75 and p25 (``ratio_low``, ``ratio_high``), and, when
    the spread passes p75/p25 > 1.15 or max/min > 1.5, the warning "times on this node vary Nx; distortion uncertain"."""
    u = g.get("unprofiled")
    if not isinstance(u, dict):
        return {}, []

    def num(k):
        v = u.get(k)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None

    lo, p25, p75, hi, n = num("min_us"), num("p25_us"), num("p75_us"), num("max_us"), u.get("n")
    if None in (lo, p25, p75, hi) or not (0 < lo <= p25 <= p75 <= hi):
        return {}, []
    # judged here from the numbers (capture's own rule, capture.recorder.NOISY_IQR / NOISY_RANGE), not from
    # the trace's flag, so that traces recorded under an earlier rule read the same
    noisy = p75 / p25 > NOISY_IQR or hi / lo > NOISY_RANGE
    out: dict = {"unprofiled_min_us": lo, "unprofiled_p25_us": p25, "unprofiled_p75_us": p75,
                 "unprofiled_max_us": hi, "unprofiled_n": int(n) if isinstance(n, int) else None,
                 "ratio_low": prof / p75, "ratio_high": prof / p25, "timing_noisy": bool(noisy)}
    warnings = []
    if out["timing_noisy"]:
        warnings.append(AnalysisWarning(
            "timing-noisy",
            f"times on this node vary {hi / lo:.1f}x; distortion uncertain: un-profiled {p25:.0f}–{p75:.0f} µs "
            f"(p25–p75, min {lo:.0f}, max {hi:.0f}, n={out['unprofiled_n']}) gives "
            f"{out['ratio_low']:.2f}x–{out['ratio_high']:.2f}x",
            {"vary": hi / lo, "p25_us": p25, "p75_us": p75, "min_us": lo, "max_us": hi,
             "ratio_low": out["ratio_low"], "ratio_high": out["ratio_high"]}))
    return out, warnings


class Analysis:
    """One trace's analysis: the pipeline's stages run in order at construction (see the module's docstring),
    each from the declared results of the one before; per-gap detail and the projection on demand."""

    def __init__(self, model: TraceModel, config: Thresholds | None = None, window: str | AnalysisWindow = "steps",
                 job=None, on_classified=None, parallel: bool = False):
        self.model = model
        #: whether parts of this analysis run in a forked child (forked.py): asked by the caller, and the trace
        #: big enough for it to pay (``forked.parallel_ok``); one rank of a job is analysed in one process (the job
        #: puts its waits on the devices after the fork would have been made)
        self.parallel = bool(parallel) and job is None and parallel_ok(int(model.ts_ns.size))
        self.config = config or DEFAULT
        #: the ranks of one job this trace is one of (ranks.job.RankJob), or None: its match, late-rank
        #: sentence, warnings and findings are inputs of this analysis
        self.job = job
        self.flags = name_flags(model.names)
        #: what the numbers cover: the measured steps (``gapscope.step#k``) or the whole trace; see window.py
        self.window: AnalysisWindow = window_stage(model, window)
        #: every CUDA graph replay's kernels mapped to the eager reference run the capture records beside them
        #: (graphs.py; empty without graph launches): ``op_of`` / ``launch_of`` give a replayed kernel's op and the
        #: launch whose stack is its code location; what the window's replayed kernels got is
        #: ``call_floors.graphs`` (graphs.GraphCoverage)
        self.graph_map = graph_map(model, self.flags)
        self.devices: list[DeviceStats]
        self.devices, cols = gaps_stage(model, self.window)
        self.distortion, dw = profiler_distortion(model.gapscope_meta, self.config)
        if self.parallel:
            # a child meanwhile: the kernels' side (``_kernel_side``), taken when first asked, then the projection's
            # start and its frames' what-ifs (``_projection_start``, ``_projection_ahead``), taken by the projection;
            # ended with this analysis
            try:
                self._side = Forked(lambda: _kernel_side(self), lambda: _projection_start(self),
                                    lambda: _projection_ahead(self))
                weakref.finalize(self, self._side.close)
            except OSError:
                pass
        try:
            self.stacks = StackIndex(model, self.flags)
            c = classify_stage(model, cols, self.config, self.flags, self.stacks)
            self.gaps, self.cpu = c.gaps, c.cpu
            #: the queries the causes' ``gather`` and the findings make (evidence.py)
            self.evidence = Evidence(model, self.stacks, self.flags, self.cpu, self.config)
            #: the gaps' details, made on demand and kept (details.py)
            self.details = GapDetails(self, c.held)
            alerts = [AnalysisWarning("trace", w) for w in model.warnings] + dw
            if not self.devices:
                alerts.append(AnalysisWarning("no-gpu",
                                              "no GPU activity in this trace: nothing to analyse for idle time"))
            #: several ranks of one job: the cross-rank match, shared by every rank
            self.cross_rank = None  # ranks.RankMatch | None
            #: several ranks: a sentence on the late rank, added to the explanation of collective gaps
            self.late_rank_note: str | None = None
            if job is not None:
                self.cross_rank = job.cross_rank
                self.late_rank_note = job.late_note(self.rank)
                alerts += job.warnings(self.rank)
                job.put_device_wait(self)
            #: the warnings, typed (kind, text, figures): the loader's, the profiler's distortion, the ranks'
            self.alerts: tuple[AnalysisWarning, ...] = tuple(alerts)
            self.warnings: list[str] = [w.text for w in alerts]
            if on_classified is not None:  # the gaps, causes and warnings are in; the findings come next
                on_classified(self)
            findings = build_findings(self)
            self.findings: list[Finding] = job.findings(self, findings) if job is not None else findings
        except BaseException:  # a forked child not yet asked for its tables is ended and reaped
            side = vars(self).pop("_side", None)
            if side is not None:
                side.close()
            raise

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
        hit = isin(m.name_id, np.array(ids, np.int32)) & (m.kind == _ANNOTATION)
        names = {int(x) for x in m.name_id[hit].tolist()}
        return len(names) or None

    @property
    def window_start_ns(self) -> int:
        if not self.devices:  # the trace's extent only then: a pass over every event, asked for per gap entry
            return self.model.window_ns()[0]
        return min(d.window_start_ns for d in self.devices)

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
        return min(100.0, 100.0 * self.idle_ns / w) if w else 0.0  # rounding past 100 at ~1e18 ns (gaps.py)

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

    @property
    def projected(self) -> bool:
        """Whether the projection has been computed (or tried: a failed one is None) yet."""
        return "projection" in vars(self)

    @property
    def projection_if_ready(self):
        """The projection once computed, else None (without computing it)."""
        return vars(self).get("projection")

    def drop_projection(self) -> None:
        """Mark the projection as failed (None), so that it is not tried again."""
        vars(self)["projection"] = None

    @cached_property
    def projection(self):
        """What fixing each finding saves per step, from a replay of the trace (replay.py; on demand). Reading it
        changes nothing else: the severities and the order are the plan's (``plan``)."""
        from .replay import project

        if "_side" not in vars(self):
            return project(self)
        return project(self, start=_start_ahead(self), ahead=lambda: _frames_ahead(self))

    @property
    def plan_if_ready(self):
        """The plan once made, else None (without making it)."""
        return vars(self).get("plan")

    @cached_property
    def plan(self):
        """The plan of actions (plan.py), the last stage: the findings merged into actions, ranked by what they buy,
        with their final severities and what they buy together. An empty plan when the projection failed."""
        from .plan import build_plan

        return build_plan(self, self.projection)

    @cached_property
    def call_floors(self):
        """Each kernel's op call and its floor (activity.call_floors), once for every table that reads them."""
        got = _from_side(self, "call_floors")
        if got is not None:
            return got
        k = np.flatnonzero(self.model.kind == int(Kind.KERNEL))
        k = k[self.window.gpu_in(self.model, k)] if self.window is not None else k
        return activity.call_floors(self.model, k, self.window, self.flags, self.graph_map)

    @cached_property
    def patterns(self) -> list:
        """Op patterns that make kernels slow (eager attention, fp32 matmuls, ...; patterns.py)."""
        got = _from_side(self, "patterns")
        if got is not None:
            return got
        from .patterns import find_patterns

        return find_patterns(self)

    @cached_property
    def kernels(self) -> list:
        got = _from_side(self, "kernels")
        if got is not None:
            return got
        return activity.kernel_stats(self.model, window=self.window, flags=self.flags, floors=self.call_floors)

    @cached_property
    def op_floors(self) -> list:
        """Ops whose calls launched several kernels: one floor per call, against all its kernels."""
        got = _from_side(self, "op_floors")
        if got is not None:
            return got
        return activity.op_floor_stats(self.model, window=self.window, flags=self.flags, floors=self.call_floors)

    @cached_property
    def verdicts(self) -> list:
        """Per device: gpu-bound, host-bound or mixed, with the launch-queue evidence (verdict.py)."""
        got = _from_side(self, "verdicts")
        if got is not None:
            return got
        from .verdict import device_verdicts

        from .verdict import gpu_bound_reason, gpu_limit

        out = device_verdicts(self.model, self.devices, self.flags, self.window)
        for v in out:  # a GPU-bound device points at its kernels and patterns, and says what bounds them
            if v.kind == "gpu-bound":
                v.limit = gpu_limit(self.model, self.call_floors, v.device, self.step_count, self.kernels)
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
        out = activity.collective_stats(self.model, self.flags, window=self.window)
        if self.job is not None:  # each collective's wait for the other ranks, and the rank that came last
            self.job.put_collective_waits(self.rank, out)
        return out

    # --------------------------------------------------------------- detail
    def gap_detail(self, i: int) -> GapDetail:
        """Gap ``i``'s detail (stacks, explanation, cause evidence; ``details.GapDetails``), made once."""
        return self.details.detail(i)


def analyze(model: TraceModel, config: Thresholds | None = None, window: str | AnalysisWindow = "steps",
            job=None, on_classified=None, parallel: bool = False) -> Analysis:
    """Analyse one trace. ``window="steps"`` (default) restricts every number to the GPU work of the
    measured ``gapscope.step#k`` ranges when the trace has them; ``window="all"`` keeps the whole trace (or a
    window already computed). ``job``: the ranks of one job this trace is one of (ranks.job.RankJob).
    ``on_classified(analysis)``, when given, is called once the gaps are classified (devices, gaps, causes,
    stacks, warnings in) and before the findings are built: the explorer lists a large trace's gaps meanwhile.
    It changes nothing in the analysis returned. ``parallel=True`` lets parts of the analysis (and of its projection)
    run in a forked child (forked.py) when the trace is big enough and there is a second core: the same results.
    Only for a caller whose other threads hold no lock the analysis takes (the report command; not the explorer,
    which analyses in a thread); ``GAPSCOPE_ANALYSIS_PARALLEL=0`` turns it off."""
    if model.partial:  # a preview of a trace still being read (gapscope/trace/progressive.py): no numbers from it
        raise ValueError("a partial model (the preview of a trace being read) is never analysed")
    return Analysis(model, config, window, job, on_classified, parallel)
