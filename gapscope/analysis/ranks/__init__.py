"""Several ranks of one job: match collectives across ranks, align clocks, split start-up skew from the
steady-state waits, find the late rank and the frames that made it late.

    timeline.py   the collective calls of one rank, and its issuing thread's own time per frame between them
    owntime.py    own time per frame (innermost event) on one thread inside intervals
    match.py      matching, clocks, waits, start-up skew -> RankMatch
    blame.py      the late rank's frames against the other ranks' in the same intervals
    records.py    the declared dataclasses returned (RankMatch and its parts), with to_json()
    text.py       sentences
    job.py        analyze_ranks: every rank analysed, the match and the cross-rank findings put on each
    summary.py    summaries written after a capture and combined on rank 0

Thresholds: ``Thresholds.clock_*``, ``startup_skew_share``, ``late_blame_*`` (thresholds.py).
"""

from __future__ import annotations

from .job import FINDING_PREFIXES, align_clocks, analyze_ranks, effect_ns, match_collectives
from .match import match_timelines
from .records import Blamed, ClockCheck, CollectiveRow, LateRank, RankMatch, RankStats, StartupSkew
from .summary import combine_summaries, summarise
from .text import blame_clause, late_sentence, startup_sentence
from .timeline import Timeline, base_ns, same_job, timeline

__all__ = ["FINDING_PREFIXES", "Blamed", "ClockCheck", "CollectiveRow", "LateRank", "RankMatch", "RankStats",
           "StartupSkew", "Timeline", "align_clocks", "analyze_ranks", "base_ns", "blame_clause",
           "combine_summaries", "effect_ns", "late_sentence", "match_collectives", "match_timelines", "same_job",
           "startup_sentence", "summarise", "timeline"]
