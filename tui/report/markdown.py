"""``render_markdown(analyses, top=10) -> str``: the report a person reads in a minute.

Trace strings (kernel names, frames, paths) are data: they go into code spans (``code``), which
Markdown does not interpret, with ``|`` escaped inside tables and backticks handled by a longer fence.
"""

from __future__ import annotations

import os
import re

from ..analysis import CAUSES
from ..analysis.ranks import late_sentence
from ..analysis.names import display_frame
from ..analysis.units import fmt_ns as t

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")
_CODE_SPAN = re.compile(r"`([^`]+)`")
#: control characters from trace strings (ANSI escapes, BEL, NUL ...) are written escaped, never sent to a terminal
_CTRL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _ctrl_esc(m: re.Match) -> str:
    c = ord(m.group(0))
    return {9: "\\t", 13: "\\r", 27: "\\x1b"}.get(c, f"\\x{c:02x}")


def esc(s) -> str:
    """Escape Markdown-significant characters in plain text."""
    return _MD_SPECIAL.sub(r"\\\1", str(s)).replace("\n", " ")


def inline(s) -> str:
    """Plain text from the analysis in which `...` marks a name: names become code spans, the rest is escaped."""
    out, pos = [], 0
    s = str(s)
    for m in _CODE_SPAN.finditer(s):
        out.append(esc(s[pos:m.start()]))
        out.append(code(m.group(1), table=False))
        pos = m.end()
    out.append(esc(s[pos:]))
    return "".join(out)


def code(s, table: bool = True, limit: int = 120) -> str:
    """A code span holding ``s`` verbatim (shortened), safe inside a table cell."""
    s = " ".join(str(s).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    ticks = 1
    while "`" * ticks in s:
        ticks += 1
    fence = "`" * ticks
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    out = f"{fence}{pad}{s}{pad}{fence}"
    if table:
        out = out.replace("|", "\\|")
    return out




def _bytes(n) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _label(a) -> str:
    parts = [os.path.basename(a.model.path)]
    if a.phase:
        parts.append(a.phase)
    if a.rank is not None:
        parts.append(f"rank {a.rank}")
    return " · ".join(parts)


def _biggest_cause(a):
    ct = a.cause_totals()
    c = max(CAUSES, key=lambda c: ct[c]["total_ns"])
    return (c, ct[c]["total_ns"]) if ct[c]["total_ns"] > 0 else (None, 0)


_COLL_RE = re.compile(r"^(?:ncclDevKernel_|ncclKernel_)([A-Za-z]+?)(?:_|\(|$)")


def _coll_label(name: str) -> str:
    """``ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)`` -> ``AllReduce``."""
    m = _COLL_RE.match(name)
    return m.group(1) if m else name.split("(")[0]


def _wait_text(a, d) -> str:
    """'222.10 ms waiting for rank 1 in AllReduce' (empty when the device did not wait)."""
    if not getattr(d, "collective_wait_ns", 0):
        return ""
    rk = str(a.rank)
    rows = [r for r in (getattr(a, "rank_collectives", None) or []) if r["wait_by_rank_us"].get(rk, 0) > 0]
    names = sorted({_coll_label(r["name"]) for r in rows})
    who = f"rank {d.collective_late_rank}" if d.collective_late_rank is not None else "the other ranks"
    where = f" in {', '.join(names)}" if names else " in collectives"
    return f"{t(d.collective_wait_ns)} waiting for {who}{where}"


def window_line(a) -> str | None:
    note = a.window_note
    return f"- {esc(note[0].upper() + note[1:])}." if note else None


def headline(a) -> list[str]:
    out = []
    if not a.devices:
        out.append("No GPU activity in this trace: there is no GPU idle time to explain.")
        wl = window_line(a)
        if wl:
            out.append(wl)
        return out
    c, ns = _biggest_cause(a)
    for d in a.devices:
        nm = f" ({esc(d.name)})" if d.name else ""
        wt = _wait_text(a, d)
        wt = f"; **{esc(wt)}**" if wt else ""
        out.append(f"- **cuda:{d.device}**{nm}: GPU idle **{d.idle_pct:.1f}%** of a {t(d.window_ns)} window "
                   f"({t(d.idle_ns)} idle, kernels busy {t(d.kernel_busy_ns)}, copies {t(d.copy_busy_ns)}){wt}.")
    wl = window_line(a)
    if wl:
        out.append(wl)
    if c:
        share = 100.0 * ns / a.idle_ns if a.idle_ns else 0.0
        out.append(f"- Biggest cause: **{c}**, {t(ns)} ({share:.0f}% of the idle time).")
    if a.distortion:
        dd = a.distortion
        warn = " — CPU-side gaps are inflated by the profiler" if dd["ratio"] > a.config.large_distortion else ""
        spread = ""
        if isinstance(dd.get("ratio_low"), (int, float)) and isinstance(dd.get("ratio_high"), (int, float)):
            spread = (f"; {dd['ratio_low']:.2f}x–{dd['ratio_high']:.2f}x against the p75–p25 of "
                      f"{dd.get('unprofiled_n') or '?'} un-profiled runs")
        out.append(f"- Profiler distortion: the profiled step took {dd['ratio']:.2f}x its un-profiled time "
                   f"({dd['profiled_us']:.0f} µs vs {dd['unprofiled_us']:.0f} µs median{spread}){warn}.")
    return out


def _stack_lines(frames, limit=7) -> list[str]:
    fr = frames[-limit:]
    lines = []
    if len(frames) > limit:
        lines.append(f"    … {len(frames) - limit} outer frames")
    for f in fr:
        lines.append(f"    {f.kind:<10} {display_frame(f.name)}")
    return lines


def _fence(lines: list[str]) -> list[str]:
    body = "\n".join(lines)
    fence = "```"
    while fence in body:
        fence += "`"
    return [fence + "text", *lines, fence]


def single(a, top: int, title: bool = True) -> list[str]:
    L: list[str] = []
    if title:
        L.append(f"# gapscope report: {esc(_label(a))}")
        L.append("")
    L += headline(a)
    for w in [w for w in a.warnings if not (a.distortion and w.startswith("the profiler slowed"))][:5]:
        L.append(f"- ⚠ {esc(w)}")
    L.append("")
    if a.findings:
        L.append("## Findings")
        L.append("")
        for i, f in enumerate(a.findings[:top], 1):
            L.append(f"{i}. **\\[{f.severity}\\] {inline(f.title)}**  ")
            ev = f.evidence or {}
            ex = (ev.get("examples") or [None])[0]
            if ex:
                L.append(f"   {inline(ex['explanation'])}  ")
            if ev.get("issued_ops"):
                L.append("   Ops issued in these gaps: " + ", ".join(code(o, False, 60) for o in ev["issued_ops"][:5]) + "  ")
            L.append(f"   → {esc(f.suggestion)}")
        if len(a.findings) > top:
            L.append(f"\n({len(a.findings) - top} more findings: use --top)")
        L.append("")
    ct = a.cause_totals()
    if len(a.gaps):
        L.append("## Idle time by cause")
        L.append("")
        L.append("| cause | gaps | idle | share |")
        L.append("|---|---:|---:|---:|")
        for c in sorted(CAUSES, key=lambda c: -ct[c]["total_ns"]):
            if ct[c]["count"]:
                sh = 100.0 * ct[c]["total_ns"] / a.idle_ns if a.idle_ns else 0
                L.append(f"| {c} | {ct[c]['count']} | {t(ct[c]['total_ns'])} | {sh:.1f}% |")
        L.append("")
        n = min(top, len(a.gaps), 3 if top <= 10 else top)
        L.append(f"## Largest gaps (top {n} of {len(a.gaps)})")
        L.append("")
        g = a.gaps
        for r in range(n):
            d = a.gap_detail(r)
            st = (int(g.start_ns[r]) - a.window_start_ns)
            L.append(f"{r + 1}. **{t(d.dur_ns)}** at +{t(st)} on cuda:{d.device} — **{d.cause}** — next "
                     f"{code(d.next_op or d.next_kernel, False, 80)}")
            L.append(f"   {inline(d.explanation)}")
            if d.stack:
                L.append("")
                L += ["   " + x for x in _fence(_stack_lines(d.stack))]
            L.append("")
    L += streams_section(a)
    if a.kernels:
        L.append("## Kernels")
        L.append("")
        L.append("| kernel | calls | total | share | op and input shapes | floor/call | avg/call | bound |")
        L.append("|---|---:|---:|---:|---|---:|---:|---|")
        for k in a.kernels[:top]:
            fl = t(k.floor_ns) if k.floor_ns is not None else "–"
            op = k.op or ""
            if op and k.shapes:
                op += " " + ", ".join(str(x).replace(" ", "") for x in k.shapes if x)
            L.append(f"| {code(k.name, limit=60)} | {k.count} | {t(k.total_ns)} | {k.pct:.1f}% | "
                     f"{code(op, limit=60) if op else '–'} | {fl} | {t(k.avg_ns)} | {k.bound or '–'} |")
        L.append("")
    ls = a.launches
    if ls.get("count"):
        L.append(f"Launches: {ls['count']} calls, {ls['rate_per_ms']:.1f}/ms, median CPU cost "
                 f"{t(ls['cost_median_ns'])}, median launch-to-start {t(ls['delay_median_ns'])}, "
                 f"{ls['kernels_shorter_than_launch']} kernels shorter than their launch call.")
        L.append("")
    if a.syncs:
        L.append("## Syncs")
        L.append("")
        L.append("| call | count | time | where |")
        L.append("|---|---:|---:|---|")
        for s in a.syncs[:top]:
            where = ", ".join(f"{code(x['frame'], limit=60)} ×{x['count']}" for x in s["stacks"][:2]) or "–"
            L.append(f"| {code(s['name'])} | {s['count']} | {t(s['total_ns'])} | {where} |")
        L.append("")
    if a.copies:
        L.append("## Copies")
        L.append("")
        L.append("| kind | count | bytes | time | GB/s |")
        L.append("|---|---:|---:|---:|---:|")
        for c in a.copies[:top]:
            gb = f"{c['gbps']:.1f}" if c["gbps"] else "–"
            flag = " ⚠ pageable" if c["pageable"] else ""
            L.append(f"| {esc(c['kind'])}{flag} | {c['count']} | {_bytes(c['bytes'])} | {t(c['total_ns'])} | {gb} |")
        L.append("")
    calls = a.allocator.get("calls") or {}
    if calls:
        L.append("Allocator: " + ", ".join(f"{code(k, False)} ×{v['count']} ({t(v['total_ns'])})"
                                           for k, v in sorted(calls.items(), key=lambda kv: -kv[1]["total_ns"])[:6]) + ".")
        L.append("")
    mem = a.allocator.get("memory")
    if mem:
        pk = f", peak allocated {_bytes(mem['peak_allocated'])}" if mem.get("peak_allocated") is not None else ""
        pr = f", peak reserved {_bytes(mem['peak_reserved'])}" if mem.get("peak_reserved") is not None else ""
        L.append(f"Memory events: {mem['events']} recorded{pk}{pr}.")
        L.append("")
    if a.collectives:
        L.append("## Collectives")
        L.append("")
        L.append("| collective | count | time | not overlapped | wait | late rank |")
        L.append("|---|---:|---:|---:|---:|---:|")
        for c in a.collectives[:top]:
            ex = t(c["exposed_ns"]) if c.get("exposed_ns") is not None else "–"
            lr = c["late_rank"] if c.get("late_rank") is not None else "–"
            L.append(f"| {code(c['name'], limit=60)} | {c['count']} | {t(c['total_ns'])} | {ex} | "
                     f"{t(c['wait_ns'])} | {lr} |")
        L.append("")
    return L


def streams_section(a) -> list[str]:
    """Per-stream busy/idle/gaps, only for devices with more than one stream running kernels. Shown apart
    from the device numbers: a stream's idle time is not device idle when another stream is busy."""
    devs = [d for d in a.devices if sum(1 for v in d.stream_gaps.values() if v["kernels"]) > 1]
    if not devs:
        return []
    L = ["## Streams", "",
         "Per stream, within the device window (device idle above counts only time when *no* stream runs a kernel).",
         "", "| device | stream | kernels | busy | idle | gaps | largest gap |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for d in devs:
        for sid in sorted(d.stream_gaps):
            v = d.stream_gaps[sid]
            if not v["kernels"]:
                continue
            L.append(f"| cuda:{d.device} | {sid} | {v['kernels']} | {t(v['busy_ns'])} | {t(v['idle_ns'])} | "
                     f"{v['gaps']} | {t(v['largest_gap_ns'])} |")
    L.append("")
    return L


def compare(analyses, top: int) -> list[str]:
    """Side by side: headline numbers and causes, then what changed."""
    L = ["# gapscope report: " + esc(" vs ".join(_label(a) for a in analyses)), ""]
    heads = [esc(_label(a)) for a in analyses]
    L.append("| | " + " | ".join(heads) + " |")
    L.append("|---|" + "---:|" * len(analyses) + "")
    rows = [
        ("window", [t(a.window_ns) for a in analyses]),
        ("GPU idle", [f"{a.idle_pct:.1f}%" for a in analyses]),
        ("idle time", [t(a.idle_ns) for a in analyses]),
        ("kernel busy", [t(sum(d.kernel_busy_ns for d in a.devices)) for a in analyses]),
        ("gaps", [str(len(a.gaps)) for a in analyses]),
        ("kernels launched", [str(sum(d.kernel_count for d in a.devices)) for a in analyses]),
        ("distortion", [f"{a.distortion['ratio']:.2f}x" if a.distortion else "–" for a in analyses]),
    ]
    for name, vals in rows:
        L.append(f"| {name} | " + " | ".join(vals) + " |")
    L.append("")
    L.append("| cause | " + " | ".join(heads) + " |")
    L.append("|---|" + "---:|" * len(analyses) + "")
    cts = [a.cause_totals() for a in analyses]
    for c in CAUSES:
        if any(ct[c]["count"] for ct in cts):
            L.append(f"| {c} | " + " | ".join(f"{t(ct[c]['total_ns'])} ({ct[c]['count']})" for ct in cts) + " |")
    L.append("")
    if len(analyses) == 2:
        a, b = analyses
        L.append("## What changed")
        L.append("")
        d_idle = b.idle_pct - a.idle_pct
        L.append(f"- GPU idle {a.idle_pct:.1f}% → {b.idle_pct:.1f}% ({d_idle:+.1f} points); window "
                 f"{t(a.window_ns)} → {t(b.window_ns)}.")
        ca, cb = cts
        deltas = sorted(CAUSES, key=lambda c: -abs(cb[c]["total_ns"] - ca[c]["total_ns"]))
        for c in deltas[:3]:
            dv = cb[c]["total_ns"] - ca[c]["total_ns"]
            if dv:
                L.append(f"- {c}: {t(ca[c]['total_ns'])} → {t(cb[c]['total_ns'])} ({'+' if dv > 0 else '−'}{t(abs(dv))}).")
        def key(f):
            return (f.cause, (f.evidence or {}).get("frame"), f.title.split(" ")[0] == "launch-bound:")

        fa = {key(f) for f in a.findings}
        fb = {key(f) for f in b.findings}
        for f in [f for f in b.findings if key(f) not in fa and f.idle_ns > 0][:3]:
            L.append(f"- only in the second: {inline(f.title)}")
        for f in [f for f in a.findings if key(f) not in fb and f.idle_ns > 0][:3]:
            L.append(f"- gone in the second: {inline(f.title)}")
        L.append("")
    return L + _sections(analyses, top)


def ranks_table(analyses) -> list[str]:
    """The job at a glance: per rank idle %, collective time, exposed communication, wait and how often it
    arrived last; clock warnings; the late ranks and what their CPU did before those launches; collectives."""
    rm = getattr(analyses[0], "rank_match", None) or {}
    per = {e["rank"]: e for e in rm.get("ranks", [])}
    L = ["## Ranks", "",
         "| rank | device | GPU idle | idle | collective time | exposed comm | collective wait | arrived last | "
         "kernel busy | biggest cause |",
         "|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for a in analyses:
        c, ns = _biggest_cause(a)
        pr = per.get(a.rank) or {}
        ct = t(pr["collective_us"] * 1e3) if pr else "–"
        ex = t(pr["exposed_us"] * 1e3) if pr else "–"
        last = f"{pr['arrived_last']} of {pr['matched']}" if pr else "–"
        rk = a.rank if a.rank is not None else "–"
        cause = f"{c} {t(ns)}" if c else "–"
        if not a.devices:  # collectives on the CPU (gloo): no GPU to be idle
            wt = t(pr["wait_us"] * 1e3) if pr and pr.get("wait_us") else "–"
            L.append(f"| {rk} | cpu | – | – | {ct} | {ex} | {wt} | {last} | – | {cause} |")
        for d in a.devices:
            wt = _wait_text(a, d)
            L.append(f"| {rk} | {d.device} | {d.idle_pct:.1f}% | {t(d.idle_ns)} | {ct} | {ex} | "
                     f"{esc(wt) if wt else '–'} | {last} | {t(d.kernel_busy_ns)} | {cause} |")
    L.append("")
    if per:
        L.append("Collective time: the rank's collective calls (NCCL kernels; on the CPU, as with gloo: op start to "
                 "completion); exposed comm: the part not overlapped by compute; collective wait: the part before "
                 "the last rank arrived.")
        L.append("")
    notes = {a.window_note.split(";")[0] for a in analyses if a.window_note}
    if len(notes) == 1 and all(a.window.clipped for a in analyses):
        L.append(f"Each rank's {esc(notes.pop())}; capture set-up outside them excluded (see each rank below).")
        L.append("")
    for w in rm.get("warnings", []):
        L.append(f"- ⚠ {esc(w)}")
    if rm.get("warnings"):
        L.append("")
    clock = [e for e in rm.get("clock", []) if e.get("status") not in ("reference", None)]
    if clock:
        L.append("Clocks (trace time bases checked against collective end times): " + "; ".join(
            f"rank {e['rank']} {e['status']}"
            + (f" (offset {e['offset_us']:+.1f} µs, ends {e['residual_us']:+.1f} µs off, spread "
               f"{e['spread_us']:.1f} µs, {e['matched']} calls)" if e.get("residual_us") is not None else "")
            for e in clock) + ".")
        L.append("")
    late = rm.get("late") or []
    if late:
        L.append("### Late ranks")
        L.append("")
        L.append("| rank | arrived last | others waited | before its launch it was in | times | avg |")
        L.append("|---:|---:|---:|---|---:|---:|")
        for e in late[:10]:
            b = (e.get("before") or [None])[0]
            where = (f"{b['func']} ({b['file']}:{b['line']})" if b.get("file") else b["frame"]) if b else None
            fr = code(where, limit=80) if where else "–"
            L.append(f"| {e['rank']} | {e['count']} of {e['of']} | {t(e['waits_caused_us'] * 1e3)} | {fr} | "
                     f"{b['count'] if b else '–'} | {t(b['avg_us'] * 1e3) if b else '–'} |")
        L.append("")
        L.append(inline(late_sentence(late[0])) + ".")
        L.append("")
    rc = getattr(analyses[0], "rank_collectives", None)
    if rc:
        L.append("| collective | group | count | time (all ranks) | wait | late rank |")
        L.append("|---|---|---:|---:|---:|---:|")
        for c in rc[:10]:
            L.append(f"| {code(c['name'], limit=60)} | {code(c.get('process_group') or '–')} | {c['count']} | "
                     f"{t(c['total_us'] * 1e3)} | {t(c['wait_us'] * 1e3)} | "
                     f"{c['late_rank'] if c['late_rank'] is not None else '–'} |")
        L.append("")
    return L


def _sections(analyses, top: int) -> list[str]:
    """Each trace's own report under its label, after a comparison, an overview or a ranks table."""
    L: list[str] = []
    for a in analyses:
        L += [f"## {esc(_label(a))}", ""] + single(a, top, title=False)
    return L


#: side by side up to this many traces; more get one row each (a table 18 columns wide reads as noise)
MAX_SIDE_BY_SIDE = 3


def overview(analyses, top: int) -> list[str]:
    """Many unrelated traces (a folder): one row per trace, then each trace's own report."""
    L = ["# gapscope report: " + esc(f"{len(analyses)} traces"), ""]
    L.append("| trace | window | GPU idle | idle | biggest cause | distortion |")
    L.append("|---|---:|---:|---:|---|---:|")
    for a in analyses:
        c, ns = _biggest_cause(a)
        big = f"{c} {t(ns)}" if c else "–"
        dist = f"{a.distortion['ratio']:.2f}x" if a.distortion else "–"
        L.append(f"| {esc(_label(a))} | {t(a.window_ns)} | {a.idle_pct:.1f}% | {t(a.idle_ns)} | {big} | {dist} |")
    L.append("")
    return L + _sections(analyses, top)


def render_markdown(analyses, top: int = 10) -> str:
    if not isinstance(analyses, (list, tuple)):
        analyses = [analyses]
    ranks = [a.rank for a in analyses]
    if len(analyses) > 1 and all(r is not None for r in ranks) and len(set(ranks)) == len(ranks):
        L = ["# gapscope report: " + esc(f"{len(analyses)} ranks"), ""]
        L += ranks_table(analyses) + _sections(analyses, top)
    elif len(analyses) > MAX_SIDE_BY_SIDE:
        L = overview(analyses, top)
    elif len(analyses) > 1:
        L = compare(analyses, top)
    else:
        L = single(analyses[0], top)
    return _CTRL.sub(_ctrl_esc, "\n".join(L).rstrip() + "\n")
