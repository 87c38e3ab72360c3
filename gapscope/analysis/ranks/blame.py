"""What made a late rank late: its host timeline since its previous collective ended against the other ranks'.

For every steady-state call a rank arrived last at, take on each rank the issuing thread's own time per frame
(owntime.py) from the end of the previous collective on that thread (all ranks leave it together: the one
starting point they share; from its launch, the others' wait inside it counted as their time) to this launch
(``Timeline.own``, ``Timeline.since``). Per frame,
the late rank's own time minus the median of the other ranks' own time in their same interval is the frame's
excess; summed over the calls. A frame is **blamed** when its excess is at least ``late_blame_share`` of how
late the rank was in the compared calls (per call the longest wait of another rank) and it is not itself a
collective (time inside the collective API is communication and waiting, not work: owntime.COMM); at most ``late_blame_top`` are named,
largest excess first. When none qualifies the late rank's extra time is spread over many frames and none is
blamed (``top_excess`` still lists the largest). Every number is a sum of event durations clipped to the intervals: recomputable from the
raw events.
"""

from __future__ import annotations

from ..names import COLLECTIVE_OP_RE, parse_frame
from ..thresholds import Thresholds
from .owntime import COMM
from .records import Blamed
from .timeline import Timeline


def _median(v: list[int]) -> int:
    """The median (the mean of the two middle values for an even count, as numpy), in integer ns."""
    v = sorted(v)
    h = len(v) // 2
    return v[h] if len(v) % 2 else (v[h - 1] + v[h]) // 2


def _blamed(key: str, late: int, others: int, calls: int) -> Blamed:
    f, ln, fn = parse_frame(key)
    return Blamed(frame=key, file=f, line=ln, func=fn, late_ns=int(late), others_ns=int(others),
                  excess_ns=int(late - others), calls=calls)


def compare(tls: list[Timeline], late_pos: int, calls: list[tuple[int, dict[int, int], int]],
            config: Thresholds) -> dict:
    """``calls``: (call index on the late rank, {other rank position: its call index}, waits caused ns, by how
    much it was late ns).
    Returns ``compared``, ``interval_ns``, ``others_interval_ns``, ``blamed``, ``top_excess``."""
    late_own = tls[late_pos].own()
    late_tot: dict[str, int] = {}
    oth_tot: dict[str, int] = {}
    ran: dict[str, int] = {}
    n = interval = others_interval = caused = 0
    for i, partners, _, w in calls:
        mine = late_own[i]
        theirs = [tls[r].own()[j] for r, j in partners.items()]
        theirs = [d for d in theirs if d is not None]
        if mine is None or not theirs:
            continue
        n += 1
        caused += w
        interval += sum(mine.values())
        others_interval += _median([sum(d.values()) for d in theirs])
        for k in set(mine) | {k for d in theirs for k in d}:
            a = mine.get(k, 0)
            b = _median([d.get(k, 0) for d in theirs])
            late_tot[k] = late_tot.get(k, 0) + a
            oth_tot[k] = oth_tot.get(k, 0) + b
            ran[k] = ran.get(k, 0) + (a > 0)
    # time inside another collective is waiting on the other ranks, not work that made this one late
    ex = sorted(((late_tot[k] - oth_tot[k], k) for k in late_tot
                 if late_tot[k] > oth_tot[k] and k != COMM and not COLLECTIVE_OP_RE.match(k)),
                key=lambda e: (-e[0], e[1]))
    top = [_blamed(k, late_tot[k], oth_tot[k], ran[k]) for _, k in ex[:5]]
    blamed = [b for b in top if b.excess_ns >= config.late_blame_share * caused][:config.late_blame_top]
    return {"compared": n, "interval_ns": interval, "others_interval_ns": others_interval, "late_by_ns": caused,
            "blamed": blamed, "top_excess": top}
