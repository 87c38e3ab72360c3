"""The declared results of the analysis pipeline (core.py): the gap table the classifier's columns become
(``GapTable``), one gap's detail (``GapDetail``), a finding (``Finding``). Plain data: no module here imports
the pipeline, so that the stages (findings.py, causes/, ranks/) and the front ends share them without importing
one another."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stacks import Frame
from .text import Text, sentence


class GapTable:
    """One row per compute gap of every device, sorted by duration (largest first): the classifier's columns
    (``gaps.classify``) in that order."""

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

    @property
    def explanation_text(self) -> Text:
        """The explanation as spans (text.py): names apart from the prose."""
        return sentence(self.explanation)


@dataclass(frozen=True)
class GapContext:
    """What a cause's ``gather`` gets about one gap: its row, times (t0 idle start, t1 end, tl the next launch),
    launching thread, launch and next kernel events, device, the launch stack and the CPU breakdown."""
    i: int
    t0: int
    t1: int
    tl: int
    thr: int
    L: int
    nxt: int
    dev: int
    launch_stack: list
    bd: dict


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

    @property
    def title_text(self) -> Text:
        """The title as spans (text.py): names apart from the prose."""
        return sentence(self.title)

    @property
    def suggestion_text(self) -> Text:
        """The advice as spans (text.py)."""
        return sentence(self.suggestion)


@dataclass(frozen=True)
class AnalysisWarning:
    """One warning about a trace's analysis: what it is about (``kind``), the sentence shown (``text``) and the
    figures it states (``figures``), so that a front end that words it otherwise reads the numbers, never the
    sentence. Kinds: ``trace`` (the loader's), ``timing-noisy`` (the un-profiled timing spreads widely: vary,
    p25_us, p75_us, min_us, max_us, ratio_low, ratio_high), ``distortion`` (the profiler slowed the step past the
    limit: ratio, profiled_us, unprofiled_us, limit), ``no-gpu``, ``ranks`` (the cross-rank match's)."""
    kind: str
    text: str
    figures: dict = field(default_factory=dict)


@dataclass
class Pattern:
    """An op pattern that makes kernels slow (patterns.py, patterns_loop.py): what it is, its fix, its kernel time
    and what the fix leaves of it."""
    kind: str  # "eager-attention" | "fp32-matmul" | "unaligned-matmul" | "copies" | "optimizer" | "tiny-kernel-loop"
    title: str
    fix: str  # the advice
    estimate: str  # how the saving is estimated
    kernel_ns: int  # kernel time of the pattern's calls in the window
    after_ns: int  # what the fix leaves of it (estimated)
    calls: int
    ops: list = field(default_factory=list)  # [{op, shapes, dtypes, calls, kernel_us}] largest first
    kernels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # kernel event indices
    kernel_after_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # their durations after
    rows: list = field(default_factory=list)  # the calls (rows of the gathered table) it claims
    host_removed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # CPU ops the fix removes
    evidence: dict = field(default_factory=dict)  # the pattern's own evidence keys (tiny-kernel-loop)
    mask: dict | None = None  # eager-attention: the additive mask's builder frames (mask_builder)
    fixes: list | None = None  # fp32-matmul without TF32: [{fix, after_ns, estimate, recommended}], best first

    @property
    def saving_ns(self) -> int:
        return max(self.kernel_ns - self.after_ns, 0)
