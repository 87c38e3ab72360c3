"""One diagnosis per trace set: ``diagnose(analyses) -> Diagnosis``, what Markdown, JSON and the explorer
render. Each judgement is made here once:

- the trace set's kind (``trace_set_kind``): ``single``; ``ranks`` (several traces each with its own rank: one
  job's ranks, a ranks section); ``pair`` (two traces otherwise: before and after); ``many`` (more);
- per trace, the typed warnings (``AnalysisWarning``, from the analysis) and the profiler-distortion verdict
  (``DistortionVerdict``: its figures and the limit it is judged against, never a sentence to parse back);
- for a pair, the comparison (compare.py) and the match of B's gaps to A's, computed once, on first use.

``analyse(models, window)`` decides how a set of loaded traces is analysed: one job's ranks together
(``ranks.analyze_ranks``), any others one each."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .core import analyze, profiler_distortion
from .thresholds import DEFAULT
from .types import AnalysisWarning

#: the kinds of trace set, in the order a reader meets them
KINDS = ("single", "pair", "ranks", "many")


def trace_set_kind(analyses) -> str:
    """``single`` (one trace), ``ranks`` (several, every one with a rank of its own), ``pair`` (two otherwise),
    ``many`` (three or more otherwise)."""
    n = len(analyses)
    if n <= 1:
        return "single"
    ranks = [a.rank for a in analyses]
    if all(r is not None for r in ranks) and len(set(ranks)) == len(ranks):
        return "ranks"
    return "pair" if n == 2 else "many"


@dataclass(frozen=True)
class DistortionVerdict:
    """How much the profiler slowed the captured step: profiled against un-profiled time (µs), ``ratio``, judged
    against ``limit`` (``Thresholds.large_distortion``); the spread of the un-profiled timing where the capture
    recorded it (``ratio_low``/``ratio_high`` against its p75/p25), and the ``timing-noisy`` warning when it
    spreads widely."""
    ratio: float
    profiled_us: float
    unprofiled_us: float
    limit: float
    ratio_low: float | None = None
    ratio_high: float | None = None
    unprofiled_n: int | None = None
    noisy: AnalysisWarning | None = None

    @property
    def large(self) -> bool:
        """Past the limit: CPU-side gaps are inflated."""
        return self.ratio > self.limit

    @property
    def unknown(self) -> bool:
        """The un-profiled time is longer than the profiled one, which the profiler cannot cause: no distortion
        can be read from it (the un-profiled timing was disturbed)."""
        return self.ratio < 1.0


def distortion_verdict(distortion: dict | None, warnings, limit: float) -> DistortionVerdict | None:
    """The verdict from an analysis' ``distortion`` figures and warnings (core.profiler_distortion)."""
    if not distortion:
        return None
    d = distortion
    lo, hi = d.get("ratio_low"), d.get("ratio_high")
    noisy = next((w for w in warnings if w.kind == "timing-noisy"), None) if d.get("timing_noisy") else None
    return DistortionVerdict(
        ratio=d["ratio"], profiled_us=d["profiled_us"], unprofiled_us=d["unprofiled_us"], limit=limit,
        ratio_low=lo if isinstance(lo, (int, float)) else None, ratio_high=hi if isinstance(hi, (int, float)) else None,
        unprofiled_n=d.get("unprofiled_n"), noisy=noisy)


@dataclass(frozen=True)
class TraceDiagnosis:
    """One trace's part of a diagnosis: its analysis, typed warnings and distortion verdict."""
    analysis: object
    warnings: tuple[AnalysisWarning, ...]
    distortion: DistortionVerdict | None

    @property
    def listed_warnings(self) -> list[AnalysisWarning]:
        """The warnings a report lists under the headline: all but the distortion's (the headline states it)."""
        return [w for w in self.warnings if not (self.distortion is not None and w.kind == "distortion")]


def trace_diagnosis(a) -> TraceDiagnosis:
    alerts = tuple(a.alerts)
    return TraceDiagnosis(a, alerts, distortion_verdict(a.distortion, alerts, a.config.large_distortion))


def model_distortion(model, analysis=None) -> DistortionVerdict | None:
    """The distortion verdict of a loaded trace: its analysis' when there is one, else from the trace's
    metadata by the same rule (core.profiler_distortion) and the default limit (the explorer's header, while the
    analysis runs)."""
    if analysis is not None and hasattr(analysis, "alerts"):
        return trace_diagnosis(analysis).distortion
    d, w = profiler_distortion(model.gapscope_meta, DEFAULT)
    return distortion_verdict(d, w, DEFAULT.large_distortion)


class Diagnosis:
    """A trace set's diagnosis: ``kind`` (``trace_set_kind``), ``analyses``, per trace ``traces``
    (``TraceDiagnosis``) and, for a pair, ``comparison`` and ``gap_match`` (each computed once, on first use)."""

    def __init__(self, analyses):
        self.analyses = list(analyses)
        self.kind = trace_set_kind(self.analyses)
        self.traces = [trace_diagnosis(a) for a in self.analyses]

    @property
    def is_pair(self) -> bool:
        return self.kind == "pair"

    @property
    def cross_rank(self):
        """The ranks' match (ranks.RankMatch) when the traces were analysed as one job, else None."""
        return self.analyses[0].cross_rank if self.analyses else None

    @cached_property
    def comparison(self):
        """A pair's comparison, A (before) against B (after), per step (compare.py); None for another kind."""
        if not self.is_pair:
            return None
        from .compare import compare

        return compare(*self.analyses)

    @cached_property
    def gap_match(self):
        """A pair's B gaps matched to A's (compare.match_gaps); None for another kind."""
        if not self.is_pair:
            return None
        from .compare import match_gaps

        a, b = self.analyses
        return match_gaps(a, b, self.comparison)


def diagnose(analyses) -> Diagnosis:
    """The diagnosis of a trace set (one analysis, or a list of them; a Diagnosis is returned as it is)."""
    if isinstance(analyses, Diagnosis):
        return analyses
    if not isinstance(analyses, (list, tuple)):
        analyses = [analyses]
    return Diagnosis(analyses)


def analyse(models, window: str = "steps", config=None, parallel: bool = False) -> list:
    """The analyses of loaded traces: one job's ranks together (``ranks.analyze_ranks``), any others one each (one
    trace never loads the ranks' modules). ``parallel``: see ``analyze`` (the ranks of a job: one process)."""
    if len(models) > 1:
        from .ranks import analyze_ranks, same_job

        if same_job(models):
            return analyze_ranks(models, config, window=window)
    return [analyze(m, config, window=window, parallel=parallel) for m in models]
