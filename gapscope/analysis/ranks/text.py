"""Sentences about several ranks (Markdown inline code in backticks), with the one duration formatter."""

from __future__ import annotations

from ..units import fmt_ns
from .records import Blamed, LateRank, RankStats, StartupSkew


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def frame_text(b: Blamed) -> str:
    """```_straggler_work` (capture/demo.py:112)``, ```built-in sleep```."""
    if b.file:
        return f"`{b.func}` ({b.file}:{b.line})"
    return f"`{b.frame}`"


def blamed_text(b: Blamed) -> str:
    """'`sleep` ...: 8.00 ms own time on the late rank vs 0 ns on the others (median), +8.00 ms'."""
    return (f"{frame_text(b)}: {fmt_ns(b.late_ns)} own time vs {fmt_ns(b.others_ns)} on the other ranks "
            f"(median), +{fmt_ns(b.excess_ns)}")


def blame_clause(le: LateRank) -> str:
    """What made the rank late, from its host timeline since each previous collective ended (every rank's common
    point) up to its launch, against the others' in the same intervals."""
    if not le.compared:
        return ""
    if le.blamed:
        return (f"; from the end of each previous collective to its launch ({le.compared} compared) its thread "
                f"spent longer than the other ranks' in " + "; ".join(blamed_text(b) for b in le.blamed))
    top = ", ".join(f"{frame_text(b)} +{fmt_ns(b.excess_ns)}" for b in le.top_excess[:3])
    return (f"; no frame stands out: from the end of each previous collective to its launch ({le.compared} "
            f"compared) its thread took "
            f"{fmt_ns(le.interval_ns)} against the others' {fmt_ns(le.others_interval_ns)} (median)"
            + (f"; the largest excesses, each too small or too even to blame: {top}" if top else ""))


def late_sentence(le: LateRank) -> str:
    """'rank 1 arrived last 64 times (of 64), the others waited 222.10 ms for it; from the end of each previous
    collective to its launch (63 compared) its thread spent longer than the other ranks' in `_straggler_work`
    (...): ...'."""
    return (f"rank {le.rank} arrived last {_times(le.count)} (of {le.of}), the others waited "
            f"{fmt_ns(le.waits_caused_ns)} for it" + blame_clause(le))


def startup_sentence(su: StartupSkew, rank=None) -> str:
    """'rank 0 waited 38.70 ms in the first collective after the profilers started 40.00 ms apart: ...'."""
    w = su.wait_by_rank.get(rank, 0) if rank is not None else su.wait_ns
    who = f"rank {rank}" if rank is not None else "the ranks"
    first = "the first collective" if su.calls == 1 else f"the first {su.calls} collectives"
    late = f" (rank {su.late_rank}'s profiler started last)" if su.late_rank is not None else ""
    return (f"{who} waited {fmt_ns(w)} in {first} right after the profilers started {fmt_ns(su.profiler_skew_ns)} "
            f"apart{late}: profiler start-up skew, not a straggler")


def wait_sentence(st: RankStats, late: LateRank | None) -> str:
    """'rank 0 waited 222.10 ms inside its collectives for late rank 1 (not GPU idle: ...); rank 1 spent
    +155.90 ms in `_straggler_work` (capture/demo.py:112) before its launches'."""
    who = f"late rank {st.wait_for}" if st.wait_for is not None else "the other ranks"
    s = f"rank {st.rank} waited {fmt_ns(st.wait_ns)} inside its collectives for {who} (collective wait, not GPU idle)"
    if late is not None and late.blamed:
        s += (f"; rank {late.rank} spent " + ", ".join(f"+{fmt_ns(b.excess_ns)} in {frame_text(b)}" for b in late.blamed)
              + " before its launches, against the others")
    elif late is not None and late.compared:
        s += f"; no single frame of rank {late.rank} stands out"
    return s
