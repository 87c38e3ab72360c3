"""What the cross-rank analysis returns: declared dataclasses (times in integer ns), each with ``to_json()``
(times in µs, the keys of the report's ``ranks`` object and ``collectives[]`` entries)."""

from __future__ import annotations

from dataclasses import dataclass, field


def _us(ns) -> float:
    return round(float(ns) / 1e3, 3)


@dataclass
class CollectiveRow:
    """One collective name in one process group, over the matched calls of every rank."""

    name: str
    collective: str
    process_group: str
    count: int
    total_ns: int  # summed over the ranks
    wait_ns: int  # summed over the ranks
    late_rank: int | None  # the rank that most often arrived last
    late_counts: dict[int, int]
    wait_by_rank: dict[int, int]
    startup_wait_by_rank: dict[int, int]  # the part of wait_by_rank in start-up calls
    time_by_rank: dict[int, int]
    exposed_by_rank: dict[int, int]
    clock_offset_ns: dict[int, int]

    def to_json(self) -> dict:
        return {"name": self.name, "collective": self.collective, "process_group": self.process_group,
                "count": self.count, "total_us": _us(self.total_ns), "wait_us": _us(self.wait_ns),
                "late_rank": self.late_rank, "late_counts": {str(k): v for k, v in self.late_counts.items()},
                "wait_by_rank_us": {str(k): _us(v) for k, v in self.wait_by_rank.items()},
                "startup_wait_by_rank_us": {str(k): _us(v) for k, v in self.startup_wait_by_rank.items()},
                "time_by_rank_us": {str(k): _us(v) for k, v in self.time_by_rank.items()},
                "exposed_by_rank_us": {str(k): _us(v) for k, v in self.exposed_by_rank.items()},
                "clock_offset_us": {str(k): _us(v) for k, v in self.clock_offset_ns.items()}}


@dataclass
class ClockCheck:
    """A rank's clock offset from the trace time bases, checked against the collectives' end times."""

    rank: int
    base_offset_ns: int
    offset_ns: int  # used: base offset, corrected by the residual when the evidence is consistent
    residual_ns: int | None  # median of (end here - end on the reference) after the base offset
    spread_ns: int | None
    matched: int
    status: str  # reference | ok | corrected | inconsistent | unchecked

    def to_json(self) -> dict:
        return {"rank": self.rank, "base_offset_us": _us(self.base_offset_ns), "offset_us": _us(self.offset_ns),
                "residual_us": None if self.residual_ns is None else _us(self.residual_ns),
                "spread_us": None if self.spread_ns is None else _us(self.spread_ns), "matched": self.matched,
                "status": self.status}


@dataclass
class RankStats:
    """One rank's collectives: time, the part not overlapped, the waits (steady state and start-up apart)."""

    rank: int
    side: str  # gpu | cpu
    collectives: int
    matched: int
    collective_ns: int
    exposed_ns: int
    wait_ns: int  # steady state: after the start-up calls
    startup_wait_ns: int
    arrived_last: int  # steady-state calls
    wait_for: int | None  # the rank it waited for most (steady state)
    idle_pct: float | None = None  # filled by the caller that knows the rank's analysis

    def to_json(self) -> dict:
        return {"rank": self.rank, "side": self.side, "collectives": self.collectives, "matched": self.matched,
                "collective_us": _us(self.collective_ns), "exposed_us": _us(self.exposed_ns),
                "wait_us": _us(self.wait_ns), "startup_wait_us": _us(self.startup_wait_ns),
                "arrived_last": self.arrived_last, "wait_for": self.wait_for, "idle_pct": self.idle_pct}


@dataclass
class Blamed:
    """A frame whose own time on the late rank exceeds the other ranks', in the intervals between collective
    launches before the calls it was late for (summed over those calls)."""

    frame: str  # the key: display name of the event
    file: str | None
    line: int | None
    func: str
    late_ns: int  # the late rank's own time
    others_ns: int  # per call the median over the other ranks, summed
    excess_ns: int  # late_ns - others_ns
    calls: int  # calls in which the frame ran on the late rank

    def to_json(self) -> dict:
        return {"frame": self.frame, "file": self.file, "line": self.line, "func": self.func,
                "late_us": _us(self.late_ns), "others_median_us": _us(self.others_ns),
                "excess_us": _us(self.excess_ns), "calls": self.calls}


@dataclass
class LateRank:
    """A rank that arrived last at steady-state collectives, the waits it caused, and what made it late."""

    rank: int
    count: int  # steady-state calls it arrived last at
    of: int  # its steady-state matched calls
    collectives: dict[str, int]
    waits_caused_ns: int  # summed over the other ranks
    late_by_ns: int  # per call the longest wait of another rank (how late it was), summed
    compared: int  # calls whose interval since the previous launch could be compared with the other ranks'
    interval_ns: int  # the late rank's time from each previous collective's end to its launch, compared calls
    others_interval_ns: int  # the others' (median per call), summed
    blamed: list[Blamed] = field(default_factory=list)  # the frames that differ (empty: none stands out)
    top_excess: list[Blamed] = field(default_factory=list)  # the largest excesses, blamed or not

    @property
    def excess_ns(self) -> int:
        return self.interval_ns - self.others_interval_ns

    def to_json(self) -> dict:
        return {"rank": self.rank, "count": self.count, "of": self.of, "collectives": dict(self.collectives),
                "waits_caused_us": _us(self.waits_caused_ns), "late_by_us": _us(self.late_by_ns), "compared": self.compared,
                "interval_us": _us(self.interval_ns), "others_interval_us": _us(self.others_interval_ns),
                "blamed": [b.to_json() for b in self.blamed], "top_excess": [b.to_json() for b in self.top_excess]}


@dataclass
class StartupSkew:
    """The first collective(s) after the profilers started, whose waits are the profilers' start-up skew."""

    calls: int  # leading matched calls (columns) counted as start-up
    late_rank: int | None  # the rank whose profiler started last
    profiler_skew_ns: int  # spread of the ranks' first events on the common clock
    wait_by_rank: dict[int, int]

    @property
    def wait_ns(self) -> int:
        return sum(self.wait_by_rank.values())

    def to_json(self) -> dict:
        return {"calls": self.calls, "late_rank": self.late_rank, "profiler_skew_us": _us(self.profiler_skew_ns),
                "wait_by_rank_us": {str(k): _us(v) for k, v in self.wait_by_rank.items()}}


@dataclass
class RankMatch:
    """The ranks of one job matched: collectives, clocks, per rank stats, late ranks, start-up skew."""

    rows: list[CollectiveRow]
    clock: list[ClockCheck]
    ranks: list[RankStats]
    late: list[LateRank]  # by waits caused, largest first
    startup: StartupSkew | None
    warnings: list[str]
    shift_ns: list[int]  # added to each rank's times (in timeline order) to put them on the reference clock

    def stats(self, rank) -> RankStats | None:
        return next((e for e in self.ranks if e.rank == rank), None)

    def late_rank(self, rank) -> LateRank | None:
        return next((e for e in self.late if e.rank == rank), None)

    def to_json(self) -> dict:
        return {"per_rank": [e.to_json() for e in self.ranks], "late": [e.to_json() for e in self.late],
                "startup": self.startup.to_json() if self.startup else None,
                "clock": [e.to_json() for e in self.clock], "warnings": list(self.warnings)}
