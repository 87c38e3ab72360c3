"""``collective``: a collective (NCCL/RCCL kernel, or a ``record_param_comms``/c10d op or wait on the launching
thread) covered most of the gap."""

from __future__ import annotations

from ..units import fmt_ns
from . import COLLECTIVE, Cause


def rule(c):
    most = c.cfg.most * c.g
    return (c.coll_dev_share > most) | (c.coll_thr_share > most)


def explain(a, d, tl):
    sig = f" in `{d.signature}`" if d.signature else ""
    note = a.late_rank_note  # several ranks: the job's sentence on the late rank (ranks.job.RankJob)
    return f"GPU compute idle {fmt_ns(d.dur_ns)} during a collective{sig}." + (f" {note}" if note else "")


CAUSE = Cause(
    name=COLLECTIVE, order=20, letter="N", colour="cyan",
    summary="a collective (NCCL) operation covered most of the gap",
    title="{n} gaps behind collectives{where} cost {t} of GPU idle",
    suggestion="Overlap the collective with compute (bucketing, async_op=True and wait later) and check for a "
               "straggler rank (load every rank's trace to see which one arrives last).",
    rule=rule, explain=explain, by_frame=True,
)
