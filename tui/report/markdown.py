"""``render_markdown(analyses, top=10) -> str``: the report a person reads in a minute.

Trace strings (kernel names, frames, paths) are data: they go into code spans (``code``), which
Markdown does not interpret, with ``|`` escaped inside tables and backticks handled by a longer fence.
"""

from __future__ import annotations

import os
import re

from ..analysis import CAUSES
from ..analysis.ranks import late_sentence, startup_sentence
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
    """'222.10 ms waiting for rank 1 in AllReduce' (empty when the device did not wait); the start-up skew part
    apart: '19.80 ms waiting for rank 1 in AllReduce, and 38.70 ms in the first collective (profiler start-up
    skew)'."""
    if not getattr(d, "collective_wait_ns", 0):
        return ""
    rm = a.cross_rank
    rows = [r for r in (rm.rows if rm else []) if r.wait_by_rank.get(a.rank, 0) > 0]
    st = rm.stats(a.rank) if rm else None
    steady = st.wait_ns if st else d.collective_wait_ns
    startup = st.startup_wait_ns if st else 0
    names = sorted({_coll_label(r.name) for r in rows if r.wait_by_rank[a.rank] > r.startup_wait_by_rank.get(a.rank, 0)})
    who = f"rank {st.wait_for}" if st and st.wait_for is not None else (
        f"rank {d.collective_late_rank}" if d.collective_late_rank is not None else "the other ranks")
    where = f" in {', '.join(names)}" if names else " in collectives"
    s = f"{t(steady)} waiting for {who}{where}" if steady else ""
    if startup:
        n = rm.startup.calls if rm and rm.startup else 1
        first = "the first collective" if n == 1 else f"the first {n} collectives"
        s += (", and " if s else "") + f"{t(startup)} in {first} (profiler start-up skew)"
    return s


def window_line(a) -> str | None:
    note = a.window_note
    return f"- {esc(note[0].upper() + note[1:])}." if note else None


def by_saving(a) -> list:
    """Findings ranked by the projected saving of their fix; those not projected follow, by idle time."""
    sv = a.projection.saving_ns
    return sorted(a.findings, key=lambda f: (sv.get(f.id) is None, -(sv.get(f.id) or 0)))


def saving_line(a, f) -> str | None:
    """"fix → −1.23 ms per step (−9.1%), un-profiled, calibrated: remove the 32 synchronising calls ..."."""
    pj = a.projection
    s, pct = pj.saving_ns.get(f.id), pj.saving_pct(f.id)
    if s is None or pct is None:
        return f"fix: {inline(pj.what[f.id])}" if pj.what.get(f.id) else None
    how = "un-profiled, calibrated" if pj.calibrated else "profiled time"
    return f"fix → **−{t(s)} per step (−{pct:.1f}%)**, {how}: {inline(pj.what.get(f.id, ''))}"


def projection_line(a) -> str | None:
    h = a.projection.headline()
    if not h:
        return None
    notes = "".join(f"; {n}" for n in a.projection.notes)
    return f"- Projection: {esc(h)}{esc(notes)}."


def headline(a) -> list[str]:
    out = []
    if not a.devices:
        out.append("No GPU activity in this trace: there is no GPU idle time to explain.")
        wl = window_line(a)
        if wl:
            out.append(wl)
        return out
    c, ns = _biggest_cause(a)
    verdicts = {(v.rank, v.device): v for v in getattr(a, "verdicts", [])}
    for d in a.devices:
        nm = f" ({esc(d.name)})" if d.name else ""
        wt = _wait_text(a, d)
        wt = f"; **{esc(wt)}**" if wt else ""
        out.append(f"- **cuda:{d.device}**{nm}: GPU idle **{d.idle_pct:.1f}%** of a {t(d.window_ns)} window "
                   f"({t(d.idle_ns)} idle, kernels busy {t(d.kernel_busy_ns)}, copies {t(d.copy_busy_ns)}){wt}.")
        v = verdicts.get((d.rank, d.device))
        if v is not None:
            out.append(f"  - Verdict: **{v.kind}**: {esc(v.reason)}" + (f"; {esc(v.graph_text())}" if v.graph_text() else "")
                       + ".")
    wl = window_line(a)
    if wl:
        out.append(wl)
    if c:
        share = 100.0 * ns / a.idle_ns if a.idle_ns else 0.0
        out.append(f"- Biggest cause: **{c}**, {t(ns)} ({share:.0f}% of the idle time).")
    pl = projection_line(a)
    if pl:
        out.append(pl)
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
        for i, f in enumerate(by_saving(a)[:top], 1):
            L.append(f"{i}. **\\[{f.severity}\\] {inline(f.title)}**  ")
            sv = saving_line(a, f)
            if sv:
                L.append(f"   {sv}  ")
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
            if k.floor_ns is None and k.op_floor_calls:
                fl = "on its op ↓"
            elif k.floor_ns is not None and k.floored_count < k.count:
                fl += f" ({k.floored_count} of {k.count} calls)"
            L.append(f"| {code(k.name, limit=60)} | {k.count} | {t(k.total_ns)} | {k.pct:.1f}% | "
                     f"{code(op, limit=60) if op else '–'} | {fl} | {t(k.avg_ns)} | {k.bound or '–'} |")
        L.append("")
        L.append("Floors are lower bounds per op call from its own shapes (peak compute, and HBM bandwidth for the "
                 "bytes beyond what the L2 can hold), averaged over the calls that have one.")
        L.append("")
        ofl = getattr(a, "op_floors", [])
        if ofl:
            L.append("Ops that launch several kernels per call own one floor per call:")
            L.append("")
            L.append("| op | kernels per call | calls | floor/call | avg/call | bound |")
            L.append("|---|---|---:|---:|---:|---|")
            for o in ofl[:top]:
                ks = " + ".join(code(x, False, 40) for x in o.kernels[:4]) + (" + …" if len(o.kernels) > 4 else "")
                L.append(f"| {code(o.op)} | {ks} | {o.count} | {t(o.floor_ns)} | {t(o.avg_ns)} | {o.bound or '–'} |")
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
            inner = " → ".join(code(x, False, 40) for x in (s.get("chain") or [])[1:])
            call = code(s["name"]) + (f" → {inner}" if inner else "")
            L.append(f"| {call} | {s['count']} | {t(s['total_ns'])} | {where} |")
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
    """Three traces side by side: headline numbers and causes (two traces: ``before_after``)."""
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
    return L + _sections(analyses, top)


def _signed(us: float) -> str:
    """A change in µs as signed text: +1.20 ms, −35.0 µs, 0."""
    ns = int(round(us * 1e3))
    if ns == 0:
        return "0"
    return ("+" if ns > 0 else "−") + t(abs(ns))


def _pct(a: float, b: float, sep: str = " (", end: str = ")") -> str:
    return (sep + f"{100.0 * (b - a) / a:+.0f}%".replace("-", "−") + end) if a > 0 else ""


def _num(x: float, signed: bool = False) -> str:
    s = (f"{x:+.0f}" if signed else f"{x:.0f}") if float(x).is_integer() else (f"{x:+.2f}" if signed else f"{x:.2f}")
    return "0" if signed and x == 0 else s.replace("-", "−")


def _span(x0: int, x1: int) -> str:
    """Positions [x0, x1) of a step's kernel sequence: #5, or #5–9."""
    return f"#{x0}" if x1 - x0 == 1 else f"#{x0}–{x1 - 1}"


def _steps_text(s) -> str:
    if s.source == "window":
        return "no step ranges: the window is one step"
    first, last = s.names[0], s.names[-1]
    rng = first if s.steps == 1 else f"{first} .. {last}"
    return f"{s.steps} step{'s' if s.steps != 1 else ''} ({rng})"


def before_after(analyses, top: int) -> list[str]:
    """Two traces: A (before) against B (after), every number per step (tui/analysis/compare.py), biggest
    change first; then each trace's own report."""
    from ..analysis.compare import compare as compare_steps, match_gaps

    a, b = analyses
    c = compare_steps(a, b)
    gm = match_gaps(a, b, c)
    us = lambda x: t(int(round(x * 1e3)))  # noqa: E731 - µs float -> text
    L = ["# gapscope report: " + esc(" vs ".join(_label(x) for x in analyses)), ""]
    L.append(f"- **A** (before): {code(os.path.basename(a.model.path), False)}, {esc(_steps_text(c.a))}.")
    L.append(f"- **B** (after): {code(os.path.basename(b.model.path), False)}, {esc(_steps_text(c.b))}.")
    L.append("- Every number is **per step**: a trace's total divided by its number of steps; changes are B − A.")
    for n in c.notes:
        L.append(f"- ⚠ {esc(n)}")
    L.append("")
    L.append("## What changed")
    L.append("")
    L.append(f"- GPU idle per step: {us(c.a.idle_us_per_step)} → {us(c.b.idle_us_per_step)} "
             f"(**{_signed(c.idle_delta_us_per_step)}**{_pct(c.a.idle_us_per_step, c.b.idle_us_per_step, ', ', '')}).")
    for d in c.causes[:3]:
        if d.per_step_delta_us:
            L.append(f"- {d.cause}: {us(d.a_idle_us_per_step)} → {us(d.b_idle_us_per_step)} per step "
                     f"(**{_signed(d.per_step_delta_us)}**).")
    for d in [f for f in c.findings if f.status in ("new", "gone")][:4]:
        title = d.title_b if d.status == "new" else d.title_a
        L.append(f"- {'new in B' if d.status == 'new' else 'gone in B'}: {inline(title)} "
                 f"({_signed(d.per_step_delta_us)} per step).")
    if gm.b_rows.size:
        rows = gm.b_rows[gm.new]
        top_new = int(rows[b.gaps.dur_ns[rows].argmax()]) if rows.size else -1
        big_new = ""
        if top_new >= 0:
            nxt = int(b.gaps.next_idx[top_new])
            nk = f" before {code(b.model.name(nxt), False, 60)}" if nxt >= 0 else ""
            big_new = (f"; the largest new one: {t(int(b.gaps.dur_ns[top_new]))} "
                       f"{CAUSES[int(b.gaps.cause[top_new])]}{nk}")
        L.append(f"- gaps of B: {gm.b_rows.size} listed, {int(gm.new.sum())} new (no listed gap of A at the same "
                 f"place in the aligned kernel sequence){big_new}.")
    big = [k for k in c.kernels if k.per_step_delta_us][:2]
    for k in big:
        L.append(f"- kernel {code(k.name, False, 60)}: {us(k.a_us_per_step)} → {us(k.b_us_per_step)} per step "
                 f"({_signed(k.per_step_delta_us)}{', ' + k.status + ' in B' if k.status == 'new' else ''}"
                 f"{', gone in B' if k.status == 'gone' else ''}).")
    L.append("")
    L.append("| per step | A | B | change |")
    L.append("|---|---:|---:|---:|")
    rows = [("GPU idle", c.a.idle_us_per_step, c.b.idle_us_per_step, True),
            ("GPU span (first kernel to last)", c.a.gpu_span_us_per_step, c.b.gpu_span_us_per_step, True),
            ("kernel time", c.a.kernel_us_per_step, c.b.kernel_us_per_step, True),
            ("kernels", c.a.kernels_per_step, c.b.kernels_per_step, False),
            ("gaps", c.a.gaps_per_step, c.b.gaps_per_step, False)]
    for name, x, y, is_time in rows:
        if is_time:
            L.append(f"| {name} | {us(x)} | {us(y)} | {_signed(y - x)}{_pct(x, y)} |")
        else:
            L.append(f"| {name} | {_num(x)} | {_num(y)} | {_num(y - x, signed=True)} |")
    dist = [f"{x.distortion['ratio']:.2f}x" if x.distortion else "–" for x in analyses]
    L.append(f"| profiler distortion (whole capture) | {dist[0]} | {dist[1]} | |")
    L.append("")
    if c.causes:
        L.append("## Idle time by cause, per step")
        L.append("")
        L.append("| cause | A idle | A gaps | B idle | B gaps | change |")
        L.append("|---|---:|---:|---:|---:|---:|")
        for d in c.causes:
            L.append(f"| {d.cause} | {us(d.a_idle_us_per_step)} | {_num(d.a_count_per_step)} | "
                     f"{us(d.b_idle_us_per_step)} | {_num(d.b_count_per_step)} | **{_signed(d.per_step_delta_us)}** |")
        L.append("")
    moved = [f for f in c.findings if f.status != "same"]
    if moved:
        L.append("## Findings, matched by cause and frame")
        L.append("")
        for d in moved[:top]:
            if d.status == "changed":
                what = f"{inline(d.title_b)} (A: {us(d.a_idle_us_per_step)} per step)"
            else:
                what = inline(d.title_b if d.status == "new" else d.title_a)
            L.append(f"- **{d.status}**: {what}; B {us(d.b_idle_us_per_step)} per step "
                     f"(**{_signed(d.per_step_delta_us)}**).")
        L.append("")
    ks = [k for k in c.kernels if k.per_step_delta_us or k.count_delta_per_step][:top]
    if ks:
        L.append("## Kernels, per step (matched by name and input shapes)")
        L.append("")
        L.append("| kernel | op and input shapes | A calls | A time | B calls | B time | change |")
        L.append("|---|---|---:|---:|---:|---:|---:|")
        for k in ks:
            op = (k.op or "") + (" " + k.shapes.replace(" ", "") if k.shapes else "")
            st = f" ({k.status} in B)" if k.status == "new" else " (gone in B)" if k.status == "gone" else ""
            L.append(f"| {code(k.name, limit=60)}{st} | {code(op, limit=60) if op.strip() else '–'} | "
                     f"{_num(k.a_count_per_step)} | {us(k.a_us_per_step)} | {_num(k.b_count_per_step)} | "
                     f"{us(k.b_us_per_step)} | {_signed(k.per_step_delta_us)} |")
        L.append("")
    al = c.alignment
    if al is not None:
        sa, sb = c.steps_a.names[al.step_a], c.steps_b.names[al.step_b]
        L.append(f"## Kernel sequence of one step ({esc(sa)} in A against {esc(sb)} in B)")
        L.append("")
        if al.note:
            L.append(esc(al.note) + ".")
        else:
            cnt = al.counts()
            parts = [f"{cnt[k]} {k}" for k in ("added", "removed", "fused", "replaced") if cnt[k]]
            L.append(f"A ran {al.a_kernels} kernels, B {al.b_kernels}; {al.matched} match in order"
                     + (f"; {', '.join(parts)}." if parts else ": the same sequence."))
            L.append("")
            for h in al.hunks[:top]:
                an = ", ".join(code(x, False, 50) for x in h.a_names[:3]) + (" …" if len(h.a_names) > 3 else "")
                bn = ", ".join(code(x, False, 50) for x in h.b_names[:3]) + (" …" if len(h.b_names) > 3 else "")
                if h.kind == "added":
                    L.append(f"- added at B #{h.b0}: {bn}")
                elif h.kind == "removed":
                    L.append(f"- removed at A #{h.a0}: {an}")
                else:
                    L.append(f"- {h.kind}: A {_span(h.a0, h.a1)} ({an}) → B {_span(h.b0, h.b1)} ({bn})")
            if len(al.hunks) > top:
                L.append(f"- … {len(al.hunks) - top} more (use --top)")
        L.append("")
    if c.a.steps > 1 or c.b.steps > 1:
        L.append("## GPU idle by step")
        L.append("")
        L.append("| step | A | B |")
        L.append("|---:|---:|---:|")
        for k in range(max(c.a.steps, c.b.steps)):
            x = us(c.a.idle_by_step_us[k]) if k < c.a.steps else "–"
            y = us(c.b.idle_by_step_us[k]) if k < c.b.steps else "–"
            L.append(f"| {k} | {x} | {y} |")
        L.append("")
    return L + _sections(analyses, top)


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
        L.append("What made a rank late: per frame, its thread's own time between collective launches minus the "
                 "other ranks' (median) in the same intervals.")
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
    elif len(analyses) == 2:
        L = before_after(analyses, top)
    elif len(analyses) > 1:
        L = compare(analyses, top)
    else:
        L = single(analyses[0], top)
    return _CTRL.sub(_ctrl_esc, "\n".join(L).rstrip() + "\n")
