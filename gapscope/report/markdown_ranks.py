"""The ranks of one job in the Markdown report: what the job lost to the late rank and the start-up skew apart
(``ranks_headline``), then per rank idle, collective time, exposed communication and waits, clock checks, what made
a rank late, and the collectives (``ranks_table``).
"""

from __future__ import annotations

from ..analysis.ranks import late_sentence, startup_sentence
from ..analysis.units import fmt_ns as t
from .markdown_single import _wait_text
from .markdown_text import _biggest_cause, code, esc, inline

def ranks_headline(rm) -> list[str]:
    """What the job lost to the late rank, and the start-up skew apart: the first lines of the report."""
    L = []
    for e in rm.late:  # the one that cost the others most among those last at half their calls or more
        if 2 * e.count >= max(e.of, 1):
            L.append("**" + inline(late_sentence(e)) + ".**")
            L.append("")
            break
    if rm.startup is not None:
        L.append(inline(startup_sentence(rm.startup)[0].upper() + startup_sentence(rm.startup)[1:]) + "; counted apart "
                 "from the waits above.")
        L.append("")
    return L


def ranks_table(analyses) -> list[str]:
    """The job at a glance: the late rank and what made it late, then per rank idle %, collective time, exposed
    communication, wait and how often it arrived last; clock warnings; the late ranks; collectives."""
    rm = analyses[0].cross_rank
    if rm is None:
        return []
    per = {e.rank: e for e in rm.ranks}
    L = ranks_headline(rm)
    L += ["## Ranks", "",
          "| rank | device | GPU idle | idle | collective time | exposed comm | collective wait | arrived last | "
          "kernel busy | biggest cause |",
          "|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for a in analyses:
        c, ns = _biggest_cause(a)
        pr = per.get(a.rank)
        ct = t(pr.collective_ns) if pr else "–"
        ex = t(pr.exposed_ns) if pr else "–"
        last = f"{pr.arrived_last} of {pr.matched}" if pr else "–"
        rk = a.rank if a.rank is not None else "–"
        cause = f"{c} {t(ns)}" if c else "–"
        if not a.devices:  # collectives on the CPU (gloo): no GPU to be idle
            wt = t(pr.wait_ns) if pr and pr.wait_ns else "–"
            L.append(f"| {rk} | cpu | – | – | {ct} | {ex} | {wt} | {last} | – | {cause} |")
        for d in a.devices:
            wt = _wait_text(a, d)
            L.append(f"| {rk} | {d.device} | {d.idle_pct:.1f}% | {t(d.idle_ns)} | {ct} | {ex} | "
                     f"{esc(wt) if wt else '–'} | {last} | {t(d.kernel_busy_ns)} | {cause} |")
    L.append("")
    if per:
        L.append("Collective time: the rank's collective calls (NCCL kernels; on the CPU, as with gloo: op start to "
                 "completion); exposed comm: the part not overlapped by compute; collective wait: the part before "
                 "the last rank arrived (time inside the collective, not GPU idle); arrived last: of the calls after "
                 "the start-up skew.")
        L.append("")
    notes = {a.window_note.split(";")[0] for a in analyses if a.window_note}
    if len(notes) == 1 and all(a.window.clipped for a in analyses):
        L.append(f"Each rank's {esc(notes.pop())}; capture set-up outside them excluded (see each rank below).")
        L.append("")
    for w in rm.warnings:
        L.append(f"- ⚠ {esc(w)}")
    if rm.warnings:
        L.append("")
    clock = [e for e in rm.clock if e.status != "reference"]
    if clock:
        L.append("Clocks (trace time bases checked against collective end times): " + "; ".join(
            f"rank {e.rank} {e.status}"
            + (f" (offset {e.offset_ns / 1e3:+.1f} µs, ends {e.residual_ns / 1e3:+.1f} µs off, spread "
               f"{e.spread_ns / 1e3:.1f} µs, {e.matched} calls)" if e.residual_ns is not None else "")
            for e in clock) + ".")
        L.append("")
    if rm.late:
        L.append("### Late ranks")
        L.append("")
        L.append("What made a rank late: per frame, its thread's own time from the end of each previous collective "
                 "to its launch minus the other ranks' (median) in the same intervals.")
        L.append("")
        L.append("| rank | arrived last | others waited | frame | own time | others (median) | excess |")
        L.append("|---:|---:|---:|---|---:|---:|---:|")
        for e in rm.late[:10]:
            fr = e.blamed or e.top_excess[:1]
            if not fr:
                L.append(f"| {e.rank} | {e.count} of {e.of} | {t(e.waits_caused_ns)} | – | – | – | – |")
            for i, b in enumerate(fr):
                head = (f"| {e.rank} | {e.count} of {e.of} | {t(e.waits_caused_ns)} |" if i == 0 else "| | | |")
                name = b.frame if not b.file else f"{b.func} ({b.file}:{b.line})"
                tag = "" if e.blamed else " (not blamed)"
                L.append(f"{head} {code(name, limit=80)}{tag} | {t(b.late_ns)} | {t(b.others_ns)} | "
                         f"+{t(b.excess_ns)} |")
        L.append("")
    if rm.rows:
        L.append("| collective | group | count | time (all ranks) | wait | late rank |")
        L.append("|---|---|---:|---:|---:|---:|")
        for c in rm.rows[:10]:
            L.append(f"| {code(c.name, limit=60)} | {code(c.process_group or '–')} | {c.count} | "
                     f"{t(c.total_ns)} | {t(c.wait_ns)} | {c.late_rank if c.late_rank is not None else '–'} |")
        L.append("")
    return L
