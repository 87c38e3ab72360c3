"""Analyse the ranks of one job: the ranks matched first (their windows and collective timelines), then each
rank's ``Analysis`` built with the job as an input (``RankJob``): the match (``a.cross_rank``), the late-rank
sentence in its collective gaps' explanations, the match's warnings, the waits on its devices and its own
collectives, and the cross-rank findings among its findings.

**Findings** (ranked by their effect, at the top of the rank's findings):

- ``late-rank-R`` on a rank that arrived last at half or more of its steady-state collectives: how often, the
  waits it caused the others and the frames that made it late (blame.py). Always the rank's first finding:
  whatever else it shows, its lateness is what the other ranks pay for.
- ``collective-wait-R`` on a rank that waited (steady state): collective wait is time inside the collective,
  not GPU idle, so the finding explains no idle time (``idle_ns`` 0); its effect is the wait.
- ``startup-skew-R`` ([info], after the others): the wait in the first collective(s) after the profilers
  started apart (match.py).

Each carries ``evidence["effect_us"]``, the time it is ranked by.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from ...trace.model import Kind, TraceModel
from .. import causes
from ..core import Analysis, analyze, window_stage
from ..thresholds import DEFAULT, Thresholds, severity
from ..types import AnalysisWarning, Finding
from ..units import fmt_ns
from .match import match_timelines
from .records import RankMatch
from .text import late_sentence, startup_sentence, wait_sentence
from .timeline import timeline

#: the ids of the cross-rank findings start with these
FINDING_PREFIXES = ("late-rank-", "collective-wait-", "startup-skew-")
_ADVICE = ("Shorten or move that work, or balance it across ranks; or overlap the collective with compute "
           "(bucketing, async_op=True and wait later).")


def effect_ns(f: Finding) -> int:
    """What a finding is ranked by among several ranks' (the report's ``_effect_us``, the explorer's findings
    view): its idle time, or for a cross-rank finding (time inside collectives, not GPU idle) its
    ``evidence["effect_us"]``: the waits a late rank caused, the wait of a waiting rank."""
    ev = f.evidence if isinstance(f.evidence, dict) else {}
    eff = ev.get("effect_us")
    return max(int(f.idle_ns), int(round(float(eff) * 1e3)) if isinstance(eff, (int, float)) else 0)


def empty_match(n: int) -> RankMatch:
    return RankMatch(rows=[], clock=[], ranks=[], late=[], startup=None, warnings=[], shift_ns=[0] * n)


def match_collectives(models: list[TraceModel], windows: list | None = None,
                      config: Thresholds | None = None) -> RankMatch | None:
    """The ranks matched (``windows``: one ``AnalysisWindow`` per model, calls outside it are left out)."""
    if len(models) < 2:
        return None
    tls = [timeline(m, windows[i] if windows else None, m.rank if m.rank is not None else i,
                    "steps" if windows else "all") for i, m in enumerate(models)]
    return match_timelines(tls, config)


def align_clocks(models: list[TraceModel], window: str = "steps") -> tuple[list[int], list[str]]:
    """Offsets (ns, added to each model's times; the earliest is 0) that line the ranks up in the explorer,
    from the time bases checked against the collectives, and the warnings that check produced."""
    from ..window import compute_window

    if len(models) < 2:
        return [0] * len(models), []
    tls = [timeline(m, compute_window(m, window), m.rank if m.rank is not None else i, window)
           for i, m in enumerate(models)]
    res = match_timelines(tls)
    lo = min(res.shift_ns)
    return [s - lo for s in res.shift_ns], [w for w in res.warnings if "clock" in w or "line up" in w]


def _cross_findings(a: Analysis, res: RankMatch) -> tuple[list[tuple[int, Finding]], list[Finding]]:
    """([(effect ns, finding)] ranked first, [findings] listed last) for one rank."""
    rk = a.rank
    win = sum(d.window_ns for d in a.devices) or max(a.window_ns, 1)
    first: list[tuple[int, Finding]] = []
    last: list[Finding] = []
    st = res.stats(rk)
    le = res.late_rank(rk)
    if le and 2 * le.count >= max(le.of, 1):
        ev = {**le.to_json(), "effect_us": le.waits_caused_ns / 1e3}
        first.append((le.waits_caused_ns, Finding(
            id=f"late-rank-{rk}", severity=severity(le.waits_caused_ns / win), title=late_sentence(le), idle_ns=0,
            evidence=ev, suggestion=f"The other ranks waited {fmt_ns(le.waits_caused_ns)} in total for this rank in "
                                    f"these collectives. {_ADVICE}", cause=causes.COLLECTIVE)))
    if st and st.wait_ns > 0:
        lr = res.late_rank(st.wait_for) if st.wait_for is not None else None
        colls = [{"name": r.name, "wait_us": r.wait_by_rank.get(rk, 0) / 1e3, "count": r.count} for r in res.rows
                 if r.wait_by_rank.get(rk, 0) - r.startup_wait_by_rank.get(rk, 0) > 0]
        first.append((st.wait_ns, Finding(
            id=f"collective-wait-{rk}", severity=severity(st.wait_ns / win),
            title=wait_sentence(st, lr), idle_ns=0,
            evidence={"late_rank": st.wait_for, "wait_us": st.wait_ns / 1e3, "startup_wait_us": st.startup_wait_ns / 1e3,
                      "effect_us": st.wait_ns / 1e3, "collectives": colls},
            suggestion=(f"Rank {st.wait_for} arrives last: {late_sentence(lr)}. " if lr else "") + _ADVICE,
            cause=causes.COLLECTIVE)))
    if st and st.startup_wait_ns > 0 and res.startup is not None:
        last.append(Finding(
            id=f"startup-skew-{rk}", severity="info", title=startup_sentence(res.startup, rk), idle_ns=0,
            evidence={**res.startup.to_json(), "wait_us": st.startup_wait_ns / 1e3, "effect_us": 0.0},
            suggestion="Start the profiler on every rank, then barrier() and synchronize() before the measured steps "
                       "(or leave the first collective out of the window).", cause=causes.COLLECTIVE))
    first.sort(key=lambda e: (-e[0], e[1].id))
    return first, last


class RankJob:
    """The ranks of one job, matched (``RankMatch``): what each rank's analysis takes from the others. Built by
    ``analyze_ranks`` before any rank is analysed and passed to each ``Analysis`` (``job=``)."""

    def __init__(self, match: RankMatch, several: bool):
        self.match = match
        #: the match every rank's analysis shows (None for a job of one rank)
        self.cross_rank = match if several else None
        top = match.late[0] if match.late else None
        #: the rank that arrived last at half or more of its steady-state collectives, or None
        self.late = top if top and 2 * top.count >= max(top.of, 1) else None

    def late_note(self, rank) -> str | None:
        """The sentence on the late rank added to the explanation of another rank's collective gaps."""
        if self.late is None or rank == self.late.rank:
            return None
        return f"Across the ranks, {late_sentence(self.late)}."

    def warnings(self, rank) -> list[AnalysisWarning]:
        """The match's warnings about this rank, and those about the whole job."""
        return [AnalysisWarning("ranks", w) for w in self.match.warnings
                if w.startswith(f"rank {rank}:") or not w.startswith("rank ")]

    def put_device_wait(self, a: Analysis) -> None:
        """The rank's collective wait (start-up included) on the device that runs its collective kernels."""
        _device_wait(a, self.match)

    def put_collective_waits(self, rank, collectives: list[dict]) -> None:
        """Each of the rank's collectives (activity.collective_stats): its wait for the others and the late rank."""
        res = self.match
        by_name = {(r.name, r.process_group): r for r in res.rows}
        by_label: dict = defaultdict(list)
        for r in res.rows:
            by_label[r.name].append(r)
        for c in collectives:
            rs = ([by_name[(c["name"], c.get("process_group"))]] if (c["name"], c.get("process_group")) in by_name
                  else by_label.get(c["name"], []))
            if rs:
                c["wait_ns"] = sum(r.wait_by_rank.get(rank, 0) for r in rs)
                c["late_rank"] = rs[0].late_rank

    def findings(self, a: Analysis, own: list[Finding]) -> list[Finding]:
        """The rank's findings with the cross-rank ones: the late rank's own finding first; then one order by
        effect (a collective wait's effect is the wait, another finding's its idle time); start-up skew last."""
        first, last = _cross_findings(a, self.match)
        rest = sorted(own, key=lambda f: (-f.idle_ns, f.title))
        lead = [f for _, f in first if f.id.startswith("late-rank-")]
        merged = sorted([(e, 0, f) for e, f in first if f not in lead] + [(f.idle_ns, 1, f) for f in rest],
                        key=lambda x: (-x[0], x[1]))
        return lead + [f for _, _, f in merged] + last


def analyze_ranks(models: list[TraceModel], config: Thresholds | None = None, window: str = "steps") -> list[Analysis]:
    """Analyse the ranks of one job, in rank order: their windows and collective timelines matched first
    (``RankJob``), then each rank analysed with the job as an input (``a.cross_rank``: the RankMatch shared by
    every rank; each rank's collective wait on its devices, ``collective_wait_ns`` and ``collective_late_rank``,
    and on its own collectives, ``wait_ns`` and ``late_rank``; the cross-rank findings among its findings)."""
    cfg = config or DEFAULT
    order = sorted(range(len(models)), key=lambda i: (models[i].rank is None, models[i].rank or 0, i))
    models = [models[i] for i in order]
    windows = [window_stage(m, window) for m in models]
    tls = [timeline(m, windows[i], m.rank if m.rank is not None else i, window) for i, m in enumerate(models)]
    res = match_timelines(tls, cfg) if len(models) > 1 else empty_match(len(models))
    job = RankJob(res, len(models) > 1)
    out = [analyze(m, config, windows[i], job=job) for i, m in enumerate(models)]
    for e, a in zip(res.ranks, out):
        e.idle_pct = round(a.idle_pct, 3) if a.devices else None
    return out


def _device_wait(a: Analysis, res: RankMatch) -> None:
    """Put the rank's collective wait (start-up included) on the device that runs its collective kernels."""
    rk = a.rank
    rows = [r for r in res.rows if r.wait_by_rank.get(rk, 0) > 0]
    if not rows or not a.devices:
        return
    late: Counter = Counter()
    for r in rows:
        if r.late_rank is not None and r.late_rank != rk:
            late[r.late_rank] += r.wait_by_rank[rk]
    m = a.model
    k = np.flatnonzero((m.kind == Kind.KERNEL) & a.flags["coll_kernel"][m.name_id])
    k = k[a.window.gpu_in(m, k)]
    tdev = [t.device for t in m.tracks]
    devs = Counter(tdev[int(t)] for t in m.track[k].tolist())
    dev = devs.most_common(1)[0][0] if devs else a.devices[0].device
    for d in a.devices:
        if d.device == dev:
            d.collective_wait_ns = sum(r.wait_by_rank[rk] for r in rows)
            d.collective_late_rank = (late.most_common(1)[0][0] if late else
                                      res.startup.late_rank if res.startup else None)
