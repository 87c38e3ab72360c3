"""Match the collective calls of several ranks, align their clocks, split start-up skew from steady-state waits,
find the late ranks and what made them late.

**Matching.** Within one process group every member issues the same collectives in the same order, so
the i-th call of group g on each rank is the same collective (by group + order, not by name; a send on
one rank and the recv on its peer count as the same kind). When the names at one position disagree (a
window cut differently on one rank), that group is matched by (group, name, order) instead and a warning
says so. Cost: O(ranks x collectives) numpy work.

**Clocks.** The traces' own time bases (``baseTimeNanoseconds``; 0 where absent: old traces write epoch
µs) give each rank's offset. It is checked against the collectives' end times, which line up across
ranks (nobody finishes before the last rank has arrived): the median over matched calls of (end on r -
end on the reference rank), after the base offset, should be about 0. When the evidence is consistent
(median absolute deviation at most a quarter of the median, at least ``clock_min_matches`` calls), the
offset used for the waits (and for the explorer's lanes) is corrected by that median; beyond
``clock_tolerance_ns`` a warning names the rank and the offset. Beyond the tolerance with inconsistent
evidence, the base offset is kept and a warning says the ends do not line up.

**Wait and late rank.** After alignment, the last rank to start a call is the late one and every other
rank's wait is ``last start - its start`` (clipped to its duration).

**Start-up skew.** The profilers of several ranks start at different times (tens of ms apart), and a
collective right after the start (a barrier) makes the early ranks wait for the late profiler: a straggler
that does not exist. The matched calls are walked in time order; while a call's arrivals, measured from
each rank's own first event, spread by at most ``startup_skew_share`` of their spread on the common clock
(and that spread is above ``clock_tolerance_ns``), the call is start-up skew: its waits are counted apart
(``startup_wait``) and it names no late rank. The first call that does not qualify ends the start-up, and so
does a call between two ranks that already completed a collective together (they left it together: any
lateness since is their own). Calls of the capture's measured steps (``Timeline.in_steps`` on every rank)
are never start-up skew: the capture starts every profiler and synchronises the ranks before the steps.

**What made the late rank late**: blame.py, over the steady-state calls it arrived last at.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from ..intervals import median
from ..thresholds import DEFAULT, Thresholds
from ..units import fmt_ns
from .blame import compare
from .records import ClockCheck, CollectiveRow, LateRank, RankMatch, RankStats, StartupSkew
from .timeline import Timeline

#: point-to-point calls: a send on one rank is a recv on its peer, at the same place in the group's order
_P2P = frozenset({"send", "recv", "sendrecv", "isend", "irecv"})


def _order_key(coll: str) -> str:
    return "p2p" if coll in _P2P else coll


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + fmt_ns(abs(ns))


def _groups(tls: list[Timeline], warnings: list[str]) -> list[tuple[str, list[int], np.ndarray]]:
    """(process group, member positions, call index matrix [members, calls])."""
    R = len(tls)
    ranks = [t.rank for t in tls]
    groups = []
    for pg in sorted({p for t in tls for p in t.pg}):
        per = [np.flatnonzero(np.array([p == pg for p in t.pg], bool)) for t in tls]
        mem = [r for r in range(R) if per[r].size]
        if len(mem) < 2:
            continue
        c = min(per[r].size for r in mem)
        names = np.array([[_order_key(tls[r].coll[i]) for i in per[r][:c].tolist()] for r in mem])
        if (names == names[0]).all():
            groups.append((pg, mem, np.stack([per[r][:c] for r in mem])))
            continue
        warnings.append(f"process group {pg}: the ranks' collectives are not in the same order in the window "
                        f"(e.g. {names[0][np.argmax((names != names[0]).any(0))]} on rank {ranks[mem[0]]}); "
                        "matched by collective name instead")
        for cn in sorted(set(names.ravel().tolist())):
            per2 = [per[r][np.array([_order_key(tls[r].coll[i]) == cn for i in per[r].tolist()], bool)]
                    for r in range(R)]
            mem2 = [r for r in mem if per2[r].size]
            if len(mem2) >= 2:
                c2 = min(per2[r].size for r in mem2)
                groups.append((pg, mem2, np.stack([per2[r][:c2] for r in mem2])))
    return groups


def _clocks(tls, groups, cfg: Thresholds, warnings: list[str]) -> tuple[list[int], list[ClockCheck]]:
    R = len(tls)
    ranks = [t.rank for t in tls]
    base_shift = [t.base_ns - tls[0].base_ns if tls[0].base_ns and t.base_ns else 0 for t in tls]
    diffs: list[list[np.ndarray]] = [[] for _ in tls]
    for _, mem, idx in groups:
        if mem[0] != 0:
            continue
        e0 = tls[0].end[idx[0]]
        for j, r in enumerate(mem[1:], 1):
            diffs[r].append(tls[r].end[idx[j]] + base_shift[r] - e0)
    shift = list(base_shift)
    clock = []
    for r in range(R):
        d = np.concatenate(diffs[r]) if diffs[r] else np.zeros(0, np.int64)
        ent = ClockCheck(rank=ranks[r], base_offset_ns=base_shift[r], offset_ns=base_shift[r], residual_ns=None,
                         spread_ns=None, matched=int(d.size), status="reference" if r == 0 else "unchecked")
        if r and d.size:
            med = median(d)
            mad = median(np.abs(d - med))
            ent.residual_ns, ent.spread_ns = int(round(med)), int(round(mad))
            consistent = mad <= abs(med) / 4 and d.size >= cfg.clock_min_matches
            if consistent:  # small residuals too: the waits are differences of a few µs
                shift[r] = base_shift[r] - int(round(med))
                ent.offset_ns = shift[r]
            if abs(med) <= cfg.clock_tolerance_ns:
                ent.status = "ok"
            elif consistent:
                ent.status = "corrected"
                warnings.append(f"rank {ranks[r]}: collective end times are {_signed(med)} off rank {ranks[0]}'s "
                                f"after the trace time bases (median of {d.size}, spread {fmt_ns(mad)}): its clock "
                                f"offset is corrected to {_signed(-shift[r])} from the collectives")
            else:
                ent.status = "inconsistent"
                warnings.append(f"rank {ranks[r]}: collective end times do not line up with rank {ranks[0]}'s "
                                f"({_signed(med)} median, spread {fmt_ns(mad)} over {d.size}): kept the trace time "
                                "bases; waits may be off by that much")
        clock.append(ent)
    return shift, clock


def _startup(tls, groups, starts, shift, cfg: Thresholds) -> dict[tuple[int, int], bool]:
    """{(group, column): True} for the leading calls that are profiler start-up skew."""
    if all(t.in_steps for t in tls):
        return {}
    cols = sorted(((int(starts[g].min(axis=0)[c]), g, c) for g in range(len(groups))
                   for c in range(starts[g].shape[1])))
    out = {}
    synced: set[tuple[int, int]] = set()  # pairs of ranks that completed a collective together
    for _, g, c in cols:
        mem = groups[g][1]
        if any((a, b) in synced for a in mem for b in mem if a < b):
            break  # after a collective the two ranks left together: lateness since then is their own
        synced.update((a, b) for a in mem for b in mem if a < b)
        s = starts[g][:, c]
        spread = int(s.max() - s.min())
        rel = np.array([int(s[j]) - (tls[r].first_ns + shift[r]) for j, r in enumerate(mem)], np.int64)
        if spread <= cfg.clock_tolerance_ns or int(rel.max() - rel.min()) > cfg.startup_skew_share * spread:
            break
        out[(g, c)] = True
    return out


def match_timelines(tls: list[Timeline], config: Thresholds | None = None) -> RankMatch:
    """Match the calls of every rank (``tls[0]`` is the reference clock)."""
    cfg = config or DEFAULT
    R = len(tls)
    ranks = [t.rank for t in tls]
    warnings: list[str] = []
    groups = _groups(tls, warnings)
    shift, clock = _clocks(tls, groups, cfg, warnings)
    starts = [np.stack([tls[r].start[idx[j]] + shift[r] for j, r in enumerate(mem)]) for _, mem, idx in groups]
    ends = [np.stack([tls[r].end[idx[j]] + shift[r] for j, r in enumerate(mem)]) for _, mem, idx in groups]
    startup = _startup(tls, groups, starts, shift, cfg)
    # ---- waits, late ranks
    agg: dict = {}
    # rank position -> [(call index, {pos: call index}, waits caused, by how much it was late)]
    late_calls: dict[int, list] = defaultdict(list)
    per = {r: {"wait": 0, "startup": 0, "late": 0, "matched": 0, "for": Counter()} for r in range(R)}
    st_wait: Counter = Counter()
    st_late: Counter = Counter()
    for g, (pg, mem, idx) in enumerate(groups):
        durs = ends[g] - starts[g]
        last = starts[g].max(axis=0)
        wait = np.minimum(np.maximum(last[None, :] - starts[g], 0), durs)
        late = starts[g].argmax(axis=0)
        is_late = (last - starts[g].min(axis=0)) > 0
        su = np.array([(g, c) in startup for c in range(idx.shape[1])], bool)
        for c in np.flatnonzero(su).tolist():
            st_late[ranks[mem[int(late[c])]]] += 1
        for j, r in enumerate(mem):
            per[r]["wait"] += int(wait[j][~su].sum())
            per[r]["startup"] += int(wait[j][su].sum())
            st_wait[ranks[r]] += int(wait[j][su].sum())
            per[r]["matched"] += int((~su).sum())
            lj = np.flatnonzero(is_late & ~su & (late == j))
            per[r]["late"] += int(lj.size)
            for c in lj.tolist():
                partners = {mem[k]: int(idx[k][c]) for k in range(len(mem)) if k != j}
                late_calls[r].append((int(idx[j][c]), partners, int(wait[:, c].sum()), int(wait[:, c].max())))
                for k in range(len(mem)):
                    if k != j and wait[k, c] > 0:
                        per[mem[k]]["for"][ranks[r]] += int(wait[k, c])
        lab0 = [tls[mem[0]].label[i] for i in idx[0].tolist()]
        for lab in sorted(set(lab0)):
            cols = np.flatnonzero(np.array([x == lab for x in lab0], bool))
            row = agg.get((lab, pg))
            if row is None:
                row = agg[(lab, pg)] = CollectiveRow(
                    name=lab, collective=tls[mem[0]].coll[int(idx[0][cols[0]])], process_group=pg, count=0,
                    total_ns=0, wait_ns=0, late_rank=None, late_counts=Counter(), wait_by_rank=dict.fromkeys(ranks, 0),
                    startup_wait_by_rank=dict.fromkeys(ranks, 0), time_by_rank=dict.fromkeys(ranks, 0),
                    exposed_by_rank=dict.fromkeys(ranks, 0),
                    clock_offset_ns={ranks[r]: -shift[r] for r in range(R)})
            row.count += int(cols.size)
            row.total_ns += int(durs[:, cols].sum())
            row.wait_ns += int(wait[:, cols].sum())
            steady = cols[~su[cols] & is_late[cols]]
            row.late_counts.update(ranks[mem[int(x)]] for x in late[steady].tolist())
            for j, r in enumerate(mem):
                row.wait_by_rank[ranks[r]] += int(wait[j, cols].sum())
                row.startup_wait_by_rank[ranks[r]] += int(wait[j, cols[su[cols]]].sum())
                row.time_by_rank[ranks[r]] += int(durs[j, cols].sum())
                row.exposed_by_rank[ranks[r]] += int(tls[r].exposed[idx[j][cols]].sum())
    rows = list(agg.values())
    for row in rows:
        row.late_counts = dict(row.late_counts)
        row.late_rank = Counter(row.late_counts).most_common(1)[0][0] if row.late_counts else None
    rows.sort(key=lambda d: -d.total_ns)
    # ---- per rank, and what made the late ranks late
    stats, late_rows = [], []
    for r in range(R):
        t = tls[r]
        p = per[r]
        stats.append(RankStats(rank=ranks[r], side=t.side, collectives=t.n, matched=p["matched"],
                               collective_ns=int(t.dur.sum()), exposed_ns=int(t.exposed.sum()), wait_ns=p["wait"],
                               startup_wait_ns=p["startup"], arrived_last=p["late"],
                               wait_for=p["for"].most_common(1)[0][0] if p["for"] else None))
        calls = late_calls.get(r) or []
        if not calls:
            continue
        cmp = compare(tls, r, calls, cfg)
        late_rows.append(LateRank(rank=ranks[r], count=len(calls), of=p["matched"],
                                  collectives=dict(Counter(t.coll[c] for c, _, _, _ in calls)),
                                  waits_caused_ns=sum(w for _, _, w, _ in calls),
                                  late_by_ns=sum(x for _, _, _, x in calls), compared=cmp["compared"],
                                  interval_ns=cmp["interval_ns"], others_interval_ns=cmp["others_interval_ns"],
                                  blamed=cmp["blamed"], top_excess=cmp["top_excess"]))
    late_rows.sort(key=lambda e: (-e.waits_caused_ns, -e.count))
    su_skew = None
    if startup:
        firsts = [tls[r].first_ns + shift[r] for r in range(R)]
        su_skew = StartupSkew(calls=len(startup), late_rank=st_late.most_common(1)[0][0] if st_late else None,
                              profiler_skew_ns=int(max(firsts) - min(firsts)), wait_by_rank=dict(st_wait))
    for tl in tls:
        warnings.extend(tl.warnings)
    return RankMatch(rows=rows, clock=clock, ranks=stats, late=late_rows, startup=su_skew, warnings=warnings,
                     shift_ns=shift)
