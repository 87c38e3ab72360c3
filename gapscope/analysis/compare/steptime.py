"""Before/after verdict in un-profiled time: ``step_verdict(a, b, steps_a, steps_b) -> StepVerdict``. No UI here.

The profiler inflates host-side time, and by different amounts in two captures (an eager model is slowed 2x, a
CUDA-graph replay of the same model barely), so profiled idle and GPU span can rise while the step gets
faster (Llama prefill, eager → sdpa attention: idle per step up, the step 13% faster). The capture
(capture/recorder.py) times ``active`` steps without the profiler many times and writes their min, p25,
median, p75, max and n into the trace's metadata (``gapscope`` → ``unprofiled``); that is the figure a user
feels, so a comparison opens with it:

* **Per step**: each sample covers the capture's ``active`` steps (``gapscope.active``; else the steps the
  comparison found), so every figure is divided by that number.
* **Verdict** from the spread: "faster" when B's p25–p75 range lies wholly below A's, "slower" when wholly
  above, "no clear change" when they overlap. Without a spread on both sides (a single time, a stand-in with
  fewer than ``MIN_SPREAD_STEPS`` steps), a change of less than ``no_change_share`` (thresholds.py) of A's time
  is "no clear change".
* **Stand-in**: when either trace has no un-profiled time, both sides use the profiled step time (the mean of
  the CPU step ranges, their p25–p75 with at least ``MIN_SPREAD_STEPS`` steps; the analysis window for a trace
  without step ranges), and ``stands_in`` says so: mixing an un-profiled and a profiled time would compare the
  profiler's overhead, not the change.
* **Distortion**: when the two captures' distortions (profiled / un-profiled) differ by more than
  ``distortion_differs`` (thresholds.py), a warning says that profiled idle and span are not comparable.
* **Same run**: both phases of one ``gapscope capture run`` were timed in the same interleaved rounds; timings of
  different runs also carry the machine's drift between them (a note). The metadata holds no run id: one run is
  told from another by the interleaved lists, the command and the recording process (``_same_run``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...trace.model import TrackKind
from ..units import fmt_ns
from ..thresholds import MIN_SPREAD_STEPS


FASTER, SLOWER, UNCLEAR = "faster", "slower", "no clear change"


@dataclass
class StepTime:
    """One trace's step time, per step, in µs: the capture's un-profiled timing or a profiled stand-in."""

    basis: str  # "unprofiled" | "profiled"
    source: str  # "capture" (un-profiled samples), "steps" (profiled CPU step ranges), "window" (no step ranges)
    us: float  # un-profiled: the median sample; profiled: the mean step
    p25_us: float | None = None
    p75_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    n: int | None = None  # un-profiled samples, or profiled steps
    active: int = 1  # steps per un-profiled sample (the capture's window)
    distortion: float | None = None  # profiled / un-profiled, whole window

    @property
    def has_spread(self) -> bool:
        return self.p25_us is not None and self.p75_us is not None


@dataclass
class StepVerdict:
    a: StepTime
    b: StepTime
    basis: str  # "unprofiled" (both sides) or "profiled" (the stand-in)
    stands_in: str | None  # what stands in for the un-profiled times, and why; None when both have them
    delta_us: float  # b - a, per step
    delta_pct: float | None  # 100 * (b - a) / a; None when a is 0
    verdict: str  # "faster" | "slower" | "no clear change"
    overlap: bool | None  # the p25–p75 ranges overlap; None without a spread on both sides
    distortion_differs: bool
    same_run: bool | None  # both timed in one capture run (interleaved rounds); None when unknown
    missing: str | None = None  # the stand-in's reason: "A", "B" or "both" have no un-profiled time
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def headline(self, lead: bool = False) -> str:
        """``step 6.17 ms → 5.34 ms un-profiled (−13.4%; p25–p75 6.08–6.25 ms → 5.27–5.48 ms): faster``; with
        ``lead`` the verdict comes first (``faster: step 6.17 ms → ...``), for a narrow header that may be cut."""
        a, b = self.a, self.b
        what = "un-profiled" if self.basis == "unprofiled" else "profiled"
        bits = [_pct(self.delta_pct) if self.delta_pct is not None else _signed_us(self.delta_us)]
        if a.has_spread and b.has_spread:
            bits.append(f"p25–p75 {_range(a)} → {_range(b)}")
        if self.missing:
            bits.append("no un-profiled time in " + {"both": "either trace"}.get(self.missing, self.missing))
        why = " (the p25–p75 ranges overlap)" if self.verdict == UNCLEAR and self.overlap else ""
        body = f"step {_us(a.us)} → {_us(b.us)} {what} ({'; '.join(bits)})"
        return f"{self.verdict}{why}: {body}" if lead else f"{body}: {self.verdict}{why}"


def _us(x: float) -> str:
    return fmt_ns(int(round(x * 1e3)))


def _signed_us(x: float) -> str:
    return ("+" if x > 0 else "−" if x < 0 else "") + _us(abs(x))


def _pct(p: float) -> str:
    return f"{p:+.1f}%".replace("-", "−")


def _range(s: StepTime) -> str:
    lo, hi = fmt_ns(int(round(s.p25_us * 1e3))), fmt_ns(int(round(s.p75_us * 1e3)))
    lo_num, lo_unit = lo.rsplit(" ", 1)
    return f"{lo_num}–{hi}" if hi.endswith(" " + lo_unit) else f"{lo}–{hi}"


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v > 0 else None


def _active(meta: dict, steps) -> int:
    n = meta.get("active")
    return int(n) if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else max(int(steps.n), 1)


def unprofiled_time(analysis, steps) -> StepTime | None:
    """The capture's un-profiled time per step (the median of its samples, with the spread of the
    ``unprofiled`` block, else of ``unprofiled_samples_us``), or None when the trace has none."""
    meta = analysis.model.gapscope_meta or {}
    d = analysis.distortion
    med = _num(d.get("unprofiled_us")) if d else _num(meta.get("unprofiled_us"))
    if med is None:
        return None
    k = _active(meta, steps)
    lo = p25 = p75 = hi = None
    n = None
    if d and d.get("unprofiled_p25_us") is not None:  # validated by the analysis (core.py): min <= p25 <= p75 <= max
        lo, p25, p75, hi = (float(d[f"unprofiled_{q}_us"]) for q in ("min", "p25", "p75", "max"))
        n = d.get("unprofiled_n")
    else:
        smp = meta.get("unprofiled_samples_us")
        if isinstance(smp, list):
            v = np.array([x for x in smp if _num(x) is not None], float)
            if v.size:
                lo, p25, p75, hi = (float(x) for x in np.percentile(v, [0, 25, 75, 100]))
                n = int(v.size)
    per = lambda x: None if x is None else x / k  # noqa: E731
    ratio = float(d["ratio"]) if d and _num(d.get("ratio")) is not None else None
    return StepTime("unprofiled", "capture", med / k, per(p25), per(p75), per(lo), per(hi), n, k, ratio)


def profiled_time(analysis, steps) -> StepTime:
    """The profiled step time: the mean of the CPU step ranges (with p25–p75 from ``MIN_SPREAD_STEPS`` steps on),
    or the analysis window as one step when the trace has no step ranges."""
    d = analysis.distortion
    ratio = float(d["ratio"]) if d and _num(d.get("ratio")) is not None else None
    dur = (np.asarray(steps.end_ns, np.int64) - np.asarray(steps.start_ns, np.int64)).astype(float) / 1e3
    src = "window" if steps.source == "window" else "steps"
    s = StepTime("profiled", src, float(dur.mean()) if dur.size else 0.0, n=int(dur.size), active=int(dur.size),
                 distortion=ratio)
    if dur.size >= MIN_SPREAD_STEPS:
        s.min_us, s.p25_us, s.p75_us, s.max_us = (float(x) for x in np.percentile(dur, [0, 25, 75, 100]))
    return s


def _interleaved(m: dict) -> list | None:
    u = m.get("unprofiled")
    v = u.get("interleaved") if isinstance(u, dict) else None
    return [str(x) for x in v] if isinstance(v, list) else None


def _samples(m: dict) -> tuple[int | None, float | None]:
    """(how many un-profiled samples, their total in ns) of a capture's metadata; the total is a lower bound
    (n x min) when only the statistics are there, None when the metadata has neither."""
    smp = m.get("unprofiled_samples_us")
    if isinstance(smp, list) and smp:
        v = [float(x) for x in smp if _num(x) is not None]
        return len(smp), (sum(v) * 1e3 if v else None)
    u = m.get("unprofiled")
    n = u.get("n") if isinstance(u, dict) else None
    if not (isinstance(n, int) and not isinstance(n, bool) and n > 0):
        return None, None
    lo = _num(u.get("min_us"))
    return n, (n * lo * 1e3 if lo is not None else None)


def _cpu_pids(model) -> set:
    return {t.pid for t in model.tracks if t.kind == TrackKind.CPU and isinstance(t.pid, int)
            and not isinstance(t.pid, bool)}


def _window(model) -> tuple[int, int] | None:
    """The trace's (first start, last end) on the wall clock (Kineto's ``baseTimeNanoseconds`` + ts), or on its raw
    ts where it names no base; None for an empty trace."""
    if model.n == 0:
        return None
    base = model.metadata.get("baseTimeNanoseconds")
    base = int(base) if isinstance(base, int) and not isinstance(base, bool) else 0
    lo, hi = model.window_ns()
    return base + lo, base + hi


def _same_run(model_a, model_b) -> bool | None:
    """Were A and B timed un-profiled in the same interleaved rounds of one ``gapscope capture run``? None when
    either trace has no capture metadata (no ``captured_at``) or the two are different ranks.

    The capture's metadata names no run: a run times every phase in interleaved rounds (``unprofiled.interleaved``
    lists them, the same list in every phase's trace), then records the phases one after another, in one process.
    So A and B are one run when each names the other's phase in that list, with the same name, command line
    (``argv``), workload, rank and number of rounds (every phase gets one sample a round), and besides:

    * **one process**: their CPU threads belong to the same process id (two runs are two processes);
    * **no second timing between them**: the later window starts after the earlier one ends, sooner than the
      un-profiled samples of both phases add up to. Another run of the same command (a process id can come back,
      in a fresh container) would have timed both phases again in between. A run whose recordings between the two
      windows outlast all its timed samples (tiny steps, few rounds, a slow export) therefore reads as two runs:
      a note too many, never one too few.

    Captures written before the interleaved rounds (no ``interleaved`` in either trace) keep their old test: the same
    ``captured_at`` (to the second) and ``argv``."""
    ma, mb = model_a.gapscope_meta or {}, model_b.gapscope_meta or {}
    ca, cb = ma.get("captured_at"), mb.get("captured_at")
    if not (isinstance(ca, str) and isinstance(cb, str)):
        return None
    if ma.get("rank") != mb.get("rank"):
        return None  # two ranks: not a before/after of one rank's phases
    ia, ib = _interleaved(ma), _interleaved(mb)
    if ia is None and ib is None:
        return ca == cb and ma.get("argv") == mb.get("argv")
    pa, pb = ma.get("phase"), mb.get("phase")
    if ia is None or ib is None or ia != ib or pa == pb or pa not in ib or pb not in ia:
        return False
    if any(ma.get(k) != mb.get(k) for k in ("name", "argv", "workload")):
        return False
    (na, ta), (nb, tb) = _samples(ma), _samples(mb)
    if na != nb:
        return False
    pids_a, pids_b = _cpu_pids(model_a), _cpu_pids(model_b)
    if pids_a and pids_b and pids_a != pids_b:
        return False
    wa, wb = _window(model_a), _window(model_b)
    timed = (ta or 0.0) + (tb or 0.0)
    if wa is not None and wb is not None and timed > 0:
        first, then = sorted((wa, wb))
        gap = then[0] - first[1]
        if gap < 0 or gap >= timed:
            return False
    return True


def step_verdict(a, b, steps_a, steps_b) -> StepVerdict:
    """Is B (after) faster than A (before)? Decided on the un-profiled step time when both traces have one, else on
    the profiled step time (``stands_in`` says which and why)."""
    cfg = a.config
    ua, ub = unprofiled_time(a, steps_a), unprofiled_time(b, steps_b)
    stands_in = missing = None
    if ua is not None and ub is not None:
        sa, sb, basis = ua, ub, "unprofiled"
    else:
        sa, sb, basis = profiled_time(a, steps_a), profiled_time(b, steps_b), "profiled"
        missing = "both" if ua is None and ub is None else "A" if ua is None else "B"
        who = "neither trace has an" if missing == "both" else f"{missing} has no"
        name = {"steps": "the CPU step ranges", "window": "the analysis window"}
        src = name[sa.source] if sa.source == sb.source else f"A: {name[sa.source]}, B: {name[sb.source]}"
        stands_in = (f"profiled step time ({src}) stands in: {who} un-profiled time "
                     "(gapscope capture records one)")
    delta = sb.us - sa.us
    pct = 100.0 * delta / sa.us if sa.us > 0 else None
    overlap = None
    if sa.has_spread and sb.has_spread:
        overlap = not (sb.p75_us < sa.p25_us or sb.p25_us > sa.p75_us)
        verdict = UNCLEAR if overlap else FASTER if delta < 0 else SLOWER
    elif pct is None:
        verdict = UNCLEAR if delta == 0 else SLOWER
    else:
        verdict = UNCLEAR if abs(pct) < 100.0 * cfg.no_change_share else FASTER if delta < 0 else SLOWER
    da, db = (ua.distortion if ua else None), (ub.distortion if ub else None)
    differs = bool(da and db and max(da, db) / min(da, db) > cfg.distortion_differs)
    warnings, notes = [], []
    if differs:
        more = "B's" if db > da else "A's"
        warnings.append(f"the profiler slowed A {da:.2f}x and B {db:.2f}x: their profiled idle and GPU span do "
                        f"not compare ({more} are inflated more); the un-profiled step time does")
    ma, mb = a.model.gapscope_meta or {}, b.model.gapscope_meta or {}
    same = _same_run(a.model, b.model)
    if basis == "unprofiled" and same is False:
        notes.append("A and B were timed un-profiled in different capture runs (captured_at "
                     f"{ma.get('captured_at')} and {mb.get('captured_at')}): the machine's drift between runs is in "
                     "the change too")
    return StepVerdict(sa, sb, basis, stands_in, delta, pct, verdict, overlap, differs, same, missing, warnings, notes)
