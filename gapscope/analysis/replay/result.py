"""What a replay projects, as the report and the explorer read it: ``DeviceProjection`` (per device: recorded,
replayed, calibrated and floor spans) and ``Projection`` (per finding, the saving of its fix; the headline)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import DEFAULT_GRAPH_GAP_NS


@dataclass
class DeviceProjection:
    device: int
    steps: int
    recorded_ns: int  # recorded span of the window (origin .. last GPU end), all steps
    replayed_ns: int  # replay of the unchanged trace
    baseline_ns: int  # replay with the calibrated overhead taken off (= replayed_ns when not calibrated)
    floor_ns: int  # GPU busy (union of GPU work) in the window: the GPU-side lower bound
    graph_ns: int  # the window's GPU items back to back at the graph dispatch gap
    residual_pct: float
    calibrated: bool
    overhead_ns: float  # calibrated profiler overhead per recorded host event (0 when not calibrated)

    def per_step(self, ns) -> float:
        return ns / max(self.steps, 1)


@dataclass
class FrameWhatIf:
    """One frame as one fused GPU call (replay/frames.py), per step: its inclusive host time in the window, the GPU
    work launched under it, and the projected saving."""

    frame: str
    calls: int  # calls of the frame in the window (all steps)
    host_ns: int  # inclusive host time per step (recorded: the subtree, syncs included)
    gpu_ns: int  # GPU work launched under it per step (its kernels, copies, memsets)
    gpu_items: int  # number of those items (all steps)
    saving_ns: int  # per step
    steps: int = 1


@dataclass
class Projection:
    """Per device projections and, per finding id, the saving per step (ns) of its fix (None: not projected)."""

    devices: list[DeviceProjection] = field(default_factory=list)
    saving_ns: dict[str, int | None] = field(default_factory=dict)  # per step
    what: dict[str, str] = field(default_factory=dict)  # finding id -> the fix that was replayed
    #: per step, a sync finding's whole check removed (its ops and their GPU work too), where the frame is a check
    with_ops_ns: dict[str, int] = field(default_factory=dict)
    calibrated: bool = False
    steps: int = 1
    unprofiled_range_ns: tuple[int, int] | None = None  # per step, from the capture's samples
    graph_gap_ns: int = DEFAULT_GRAPH_GAP_NS
    graph_gap_observed: bool = False
    notes: list[str] = field(default_factory=list)
    #: the frames that matter, each as one fused GPU call (replay/frames.py), by projected saving
    frames: list[FrameWhatIf] = field(default_factory=list)
    #: finding id -> the frame whose fused what-if is attached to it (its gaps lie under the frame)
    frame_of: dict[str, str] = field(default_factory=dict)
    #: frame -> the one finding its what-if ranks when several share it (replay/frames.py ``frame_owners``); the
    #: others rank by their own fix. A frame missing here ranks every finding attached to it
    frame_owner: dict[str, str] = field(default_factory=dict)
    #: per step, the slowest device's waits on dependencies no host change removes (replay/fixes.py,
    #: ``dependency_waits``), when at least ``graph_wait_note_share`` of the step; else 0
    waits_ns: int = 0
    #: finding id -> the fixes it needs first, as groups of alternatives (the graph fix of a step whose host reads
    #: GPU values: per frame, the findings whose fix removes its reads; replay.fixes.graph_needs); the plan
    #: (analysis/plan.py) writes the first of each group inside the graph action
    after: dict[str, list[list[str]]] = field(default_factory=dict)
    #: the finding whose fix is the step as one CUDA graph replay (None: no such fix projected)
    graph_owner: str | None = None
    #: finding id -> what its fix changes in the replay (together.py ``FixParts``), for the plan's joint figure
    parts: dict = field(default_factory=dict, repr=False, compare=False)
    #: the replay kept for what several fixes buy together (together.py ``Together``; None: nothing replayed)
    together: object = field(default=None, repr=False, compare=False)

    def frame_whatif(self, fid: str) -> FrameWhatIf | None:
        """The fused what-if of the frame attached to finding ``fid``, if any."""
        fr = self.frame_of.get(fid)
        return next((w for w in self.frames if w.frame == fr), None) if fr else None

    def ranked_with(self, fid: str) -> str | None:
        """The finding that carries the fused what-if attached to ``fid`` (``fid`` itself, or the one it shares the
        frame with), or None when no what-if is attached."""
        fr = self.frame_of.get(fid)
        if fr is None:
            return None
        return self.frame_owner.get(fr, fid)

    def best_ns(self, fid: str) -> int | None:
        """What ranks a finding: the larger of its own fix's saving and its frame's fused what-if, when the what-if
        is its to carry (``ranked_with``: one finding per frame; hf-mixtral.decode_eager had four [high] findings
        all ranked by `(69): forward` as one fused call, two of them with an own fix of 0 ns)."""
        s = self.saving_ns.get(fid)
        w = self.frame_whatif(fid)
        if w is None or self.ranked_with(fid) != fid:
            return s
        return w.saving_ns if s is None else max(s, w.saving_ns)

    @property
    def baseline_ns(self) -> int:
        """The step time (slowest device), per step."""
        return max((d.baseline_ns // max(d.steps, 1) for d in self.devices), default=0)

    @property
    def floor_ns(self) -> int:
        return max((d.floor_ns // max(d.steps, 1) for d in self.devices), default=0)

    def best_pct(self, fid: str) -> float | None:
        """``best_ns`` (what ranks the finding) as a share of the step, in %."""
        s = self.best_ns(fid)
        b = self.baseline_ns
        return None if s is None or b <= 0 else 100.0 * s / b

    def saving_pct(self, fid: str) -> float | None:
        s = self.saving_ns.get(fid)
        b = self.baseline_ns
        return None if s is None or b <= 0 else 100.0 * s / b

    def headline(self) -> str | None:
        """"step 14.8 ms un-profiled (7.7–15.1); GPU floor 1.7 ms: host-bound, up to 8.7x faster with the
        host out of the way"."""
        if not self.devices:
            return None
        from ..units import fmt_ns

        b, fl, w = self.baseline_ns, self.floor_ns, self.waits_ns
        what = "un-profiled" if self.calibrated else "profiled"
        rng = ""
        if self.calibrated and self.unprofiled_range_ns:
            lo, hi = self.unprofiled_range_ns
            rng = f" ({lo / 1e6:.1f}–{hi / 1e6:.1f} ms)" if b >= 1e6 else f" ({lo / 1e3:.0f}–{hi / 1e3:.0f} µs)"
        s = f"step {fmt_ns(b)} {what}{rng}; GPU floor {fmt_ns(fl)}"
        if w > 0:
            # the host out of the way still leaves them: tracelens' sglang decode read "up to 48.5x faster" for a
            # step that is 98% one event wait
            s += f" and {fmt_ns(w)} of waits on dependencies (gpu-wait)"
        if fl > 0 and b > 1.25 * (fl + w):
            s += f": host-bound, up to {b / (fl + w):.1f}x faster with the host out of the way"
        elif fl > 0 and w > fl:
            s += ": the GPU's waits on dependencies, not the host, hold this step"
        elif fl > 0:
            s += ": GPU-bound, the host is not what limits this step"
        if not self.calibrated:
            s += " (profiled time: host-side savings may be overstated)"
        return s

    def top_frame(self) -> FrameWhatIf | None:
        """The largest frame what-if that saves anything (replay/frames.py), None without one."""
        w = self.frames[0] if self.frames else None
        return w if w is not None and w.saving_ns > 0 and self.baseline_ns > 0 else None

    def fused_text(self, frame_text=None) -> str | None:
        """"as one fused GPU call, `frame` would save 6.93 ms per step (56.2%)": the largest of the frame what-ifs,
        which the report's projection line adds to the headline (the explorer's header line keeps the headline
        alone: it has one line). ``frame_text`` renders the frame's name (Markdown: a code span)."""
        from ..units import fmt_ns

        w = self.top_frame()
        if w is None:
            return None
        name = frame_text(w.frame) if frame_text else f"`{w.frame}`"
        return (f"as one fused GPU call, {name} would save {fmt_ns(w.saving_ns)} per step "
                f"({100.0 * w.saving_ns / self.baseline_ns:.1f}%)")
