"""The report of one trace (``single``): headline per device (verdict, collective waits, projection, profiler
distortion), findings ranked by the projected saving of their fix, idle time by cause, largest gaps with their
stacks, streams, kernels and op floors, launches, syncs, copies, allocator, collectives; and ``_sections``, each
trace's own report under its label after a multi-trace table.
"""

from __future__ import annotations

import re

from ..analysis import CAUSES
from ..analysis.activity import achieved_text
from ..analysis.diagnosis import trace_diagnosis
from ..analysis.names import display_frame
from ..analysis.units import fmt_bytes, fmt_ns as t
from .markdown_plan import plan_section
from .markdown_text import _biggest_cause, _label, code, esc, inline, spans_md

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


def saving_line(a, f) -> str | None:
    """"its own fix → −1.23 ms per step (−9.1%), un-profiled, calibrated: remove the 32 synchronising calls ...": what
    the finding's own fix buys (the replay's figure; the action it belongs to may buy more)."""
    pj = a.projection
    s, pct = pj.saving_ns.get(f.id), pj.saving_pct(f.id)
    if s is None or pct is None:
        return f"fix: {inline(pj.what[f.id])}" if pj.what.get(f.id) else None
    how = "un-profiled, calibrated" if pj.calibrated else "profiled time"
    if s <= 0:  # not "−0 ns per step (−0.0%)"
        return f"its own fix alone buys nothing measurable ({how}): {inline(pj.what.get(f.id, ''))}"
    return f"its own fix → −{t(s)} per step (−{pct:.1f}%), {how}: {inline(pj.what.get(f.id, ''))}"


def frame_line(a, f) -> str | None:
    """"as one fused GPU call, `frame` → −4.1 ms per step (−48.9%)": the what-if of the frame the finding's gaps
    lie under (replay/frames.py), when this finding carries it."""
    pj = a.projection
    w = pj.frame_whatif(f.id)
    if w is None or pj.baseline_ns <= 0 or pj.ranked_with(f.id) != f.id:
        return None
    return (f"its function fused → −{t(w.saving_ns)} per step (−{100.0 * w.saving_ns / pj.baseline_ns:.1f}%) with "
            f"{code(w.frame, False, 90)} as one fused GPU call (its whole host subtree out, its GPU work kept)")


def frames_section(a) -> list[str]:
    """## Functions as one fused GPU call: the frames that matter (replay/frames.py), by projected saving."""
    pj = a.projection
    if not pj.frames or pj.baseline_ns <= 0:
        return []
    how = "un-profiled, calibrated" if pj.calibrated else "profiled time"
    L = ["## Functions as one fused GPU call", "",
         f"Each row replays the step with the function's whole host subtree removed (its own time, its children, "
         f"built-ins, its syncs and the run-ahead lost in them), one op's dispatch per call in its place, and its GPU "
         f"work kept, back to back as graph nodes ({how}; host and GPU per step, host time as recorded).", "",
         "| function | calls | host per step | GPU work per step | projected saving | findings |",
         "|---|---:|---:|---:|---:|---|"]
    for w in pj.frames:
        fs = ", ".join(fid for fid, fr in pj.frame_of.items() if fr == w.frame) or "–"
        L.append(f"| {code(w.frame, limit=80)} | {w.calls} | {t(w.host_ns)} | {t(w.gpu_ns)} | "
                 f"−{t(w.saving_ns)} (−{100.0 * w.saving_ns / pj.baseline_ns:.1f}%) | {esc(fs)} |")
    L.append("")
    return L


def projection_line(a) -> str | None:
    h = a.projection.headline()
    if not h:
        return None
    notes = "".join(f"; {n}" for n in a.projection.notes)
    # the frame as a code span, the sentence's own words need no escaping (escaping the whole sentence showed the
    # frame's backticks as literal characters)
    ft = a.projection.fused_text(lambda frame: code(frame, False, 90))
    fused = f"; {ft}" if ft else ""
    return f"- Projection: {esc(h)}{fused}{esc(notes)}."


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
    dv = trace_diagnosis(a).distortion
    if dv is not None:
        warn = " — CPU-side gaps are inflated by the profiler" if dv.large else ""
        spread = ""
        if dv.ratio_low is not None and dv.ratio_high is not None:
            spread = (f"; {dv.ratio_low:.2f}x–{dv.ratio_high:.2f}x against the p75–p25 of "
                      f"{dv.unprofiled_n or '?'} un-profiled runs")
        if dv.unknown:
            # the profiler only adds time: this un-profiled time was not measured under the recording's conditions
            out.append(f"- Profiler distortion: unknown: the un-profiled median ({dv.unprofiled_us:.0f} µs) is "
                       f"longer than the profiled run ({dv.profiled_us:.0f} µs), which the profiler cannot cause; "
                       f"the un-profiled timing was disturbed (a loaded node){spread}.")
        else:
            out.append(f"- Profiler distortion: the profiled step took {dv.ratio:.2f}x its un-profiled time "
                       f"({dv.profiled_us:.0f} µs vs {dv.unprofiled_us:.0f} µs median{spread}){warn}.")
    return out


def _stack_lines(frames, limit=7) -> list[str]:
    fr = frames[-limit:]
    lines = []
    if len(frames) > limit:
        lines.append(f"    … {len(frames) - limit} outer frames")
    for f in fr:
        lines.append(f"    {f.kind:<10} {display_frame(f.name)}")
    return lines


def gap_stacks_lines(d) -> list[str]:
    """A gap's two stacks under their own names (the launching thread when the GPU went idle, and the launch that
    fed it), plus the stack the cause points to where it is neither (a sync call, the frame holding the CPU)."""
    names = [f.name for f in d.idle_stack]
    launch = [f.name for f in d.launch_stack]
    out = []
    for title, frames in (("Launching thread when the GPU went idle:", d.idle_stack),
                          ("Launch stack (what fed the GPU):", d.launch_stack)):
        if frames is d.launch_stack and frames and launch == names:
            out += ["", "   Launch stack (what fed the GPU): the same as when the GPU went idle."]
            continue
        out += ["", f"   {title}" + ("" if frames else " nothing recorded.")]
        if frames:
            out += ["   " + x for x in _fence(_stack_lines(frames))]
    cs = [f.name for f in d.stack]
    if d.stack and cs != names and cs != launch:
        out += ["", f"   Stack the {d.cause} cause points to:"]
        out += ["   " + x for x in _fence(_stack_lines(d.stack))]
    return out


def _fence(lines: list[str]) -> list[str]:
    body = "\n".join(lines)
    fence = "```"
    while fence in body:
        fence += "`"
    return [fence + "text", *lines, fence]


def _pattern_lines(ev: dict) -> list[str]:
    """An op pattern's evidence: what the fix saves of the kernel time, and its largest op groups."""
    from ..analysis.units import fmt_ns

    per = " per step" if ev.get("measured_steps") else ""
    if ev.get("pattern") == "tiny-kernel-loop":
        body = " → ".join(o.replace("aten::", "") for o in ev["repeated_ops"])
        return [f"   {code(ev['frame'], False, 90)}: {ev['frame_calls']} calls ({ev['calls_per_step']:g}{per or ' in all'}), "
                f"{ev['kernels_per_call']:g} kernels per call ({ev['kernels']} in all, "
                f"{fmt_ns(int(ev['per_step_us'] * 1e3))} of kernel time{per}); median kernel "
                f"{fmt_ns(int(ev['kernel_median_us'] * 1e3))} against a median launch call of "
                f"{fmt_ns(int(ev['launch_median_us'] * 1e3))} ({ev['kernels_shorter_than_launch_pct']:.0f}% of the "
                f"kernels shorter than their launch call); {ev['syncs_per_call']:g} syncs per call, "
                f"{ev['syncs_in_loop_per_call']:g} inside the loop ("
                + ", ".join(code(o, False, 40) for o in ev["sync_ops"]) + ")  ",
                f"   Repeated {ev['repeats_per_call']}x per call ({ev['calls_with_repeat']} of {ev['frame_calls']} "
                f"calls): {code(body, False, 200)}  ",
                f"   Saving: {esc(ev['estimate'])}  "]
    out = [f"   Kernel time {fmt_ns(int(ev['per_step_us'] * 1e3))}{per} in {ev['calls']} op calls; the fix "
           f"leaves about {fmt_ns(int(ev['after_us'] * 1e3 / max(ev['steps'], 1)))} "
           f"(−{fmt_ns(int(ev['kernel_saving_per_step_us'] * 1e3))} of kernel time{per}; estimate: "
           f"{esc(ev['estimate'])})  "]
    for o in ev.get("ops", [])[:4]:
        shp = ", ".join(str(x).replace(" ", "") for x in o["shapes"])
        what = f" {code(shp, False, 80)} {'/'.join(o['dtypes'])}" if shp else ""
        out.append(f"   - {code(o['op'], False)}{what}: {o['calls']} calls, {fmt_ns(int(o['kernel_us'] * 1e3))}  ")
    from ..analysis.patterns import pattern_extra_lines

    out += pattern_extra_lines(ev, lambda x: code(x, False, 70), esc, "   ")
    return out


#: under an action's first finding, at most this many of the other findings it fixes (one line each; --all: all)
ALSO_MAX = 6


def also_lines(a, plan, fs, head: bool = True) -> list[str]:
    """The other findings an action fixes, one line each: severity, title, id and what fixing it alone buys (its own
    fix, or its function fused where that is what the finding carries)."""
    pj = a.projection
    out = [f"   Also fixed by this action ({len(fs)} finding{'s' if len(fs) != 1 else ''}):  "] if head else []
    for f in fs[:ALSO_MAX]:
        w = pj.frame_whatif(f.id)
        pct = pj.saving_pct(f.id)
        if w is not None and pj.baseline_ns > 0 and pj.ranked_with(f.id) == f.id:
            alone = f"its function fused −{100.0 * w.saving_ns / pj.baseline_ns:.1f}%"
        elif pct is not None and (pj.saving_ns.get(f.id) or 0) > 0:
            alone = f"alone −{pct:.1f}%"
        else:
            alone = "nothing measurable alone" if pct is not None else "not projected alone"
        k = plan.rank_of.get(f.id)
        act = f"action {k}, " if k is not None and not head else ""
        out.append(f"   - \\[{plan.severity_of.get(f.id, f.severity)}\\] {spans_md(f.title_text)} ({act}{esc(f.id)}; "
                   f"{alone})  ")
    if len(fs) > ALSO_MAX:
        out.append(f"   - and {len(fs) - ALSO_MAX} more (gapscope report --all)  ")
    return out


def single(a, top: int, title: bool = True, minor: bool = False) -> list[str]:
    full = minor  # --all: every action, every finding in full, every listed gap's stacks
    L: list[str] = []
    if title:
        L.append(f"# gapscope report: {esc(_label(a))}")
        L.append("")
    L += plan_section(a, minor)
    L += headline(a)
    for w in trace_diagnosis(a).listed_warnings[:5]:
        L.append(f"- ⚠ {esc(w.text)}")
    L.append("")
    if a.findings:
        L.append("## Findings")
        L.append("")
        plan = a.plan
        # compact (the default): an action's first finding in full, the others it fixes one line each under it;
        # the same advice once; --all (``full``): every finding in full
        entries: list = []
        by_action: dict = {}
        # compact: findings of a minor action, and those whose fix alone buys nothing measurable, one line each
        quiet: list = []
        pj = a.projection
        for f in plan.ordered_findings(a.findings):
            k = plan.rank_of.get(f.id)
            if not full and k is not None and k in by_action:
                by_action[k].append(f)
                continue
            x = plan.action(k)
            if not full and ((x is not None and x.minor) or (k is None and pj.saving_ns.get(f.id) is not None
                                                                and pj.saving_ns[f.id] <= 0)):
                quiet.append(f)
                continue
            entries.append((f, k))
            if k is not None:
                by_action[k] = []
        advice: set = set()
        for f, k in entries[:top]:
            act = f"action {k}" if k is not None else "no action"
            L.append(f"- **{act} · \\[{plan.severity_of.get(f.id, f.severity)}\\] {spans_md(f.title_text)}** ({esc(f.id)})  ")
            sv = saving_line(a, f)
            if sv:
                L.append(f"   {sv}  ")
            fl = frame_line(a, f)
            if fl:
                L.append(f"   {fl}  ")
            ev = f.evidence or {}
            ex = (ev.get("examples") or [None])[0]
            if ex:
                L.append(f"   {inline(ex['explanation'])}  ")
            if ev.get("issued_ops"):
                L.append("   Ops issued in these gaps: " + ", ".join(code(o, False, 60) for o in ev["issued_ops"][:5]) + "  ")
            if f.cause == "pattern":
                L += _pattern_lines(ev)
            if full or f.suggestion not in advice:
                L.append(f"   → {spans_md(f.suggestion_text)}")
                advice.add(f.suggestion)
            if k is not None and by_action.get(k):
                L += also_lines(a, plan, by_action[k])
        if len(entries) > top:
            L.append(f"\n({len(entries) - top} more findings: use --top)")
        if quiet:
            L.append("- **Smaller findings** (a minor action's, or no fix of their own buys anything measurable; each in "
                     "full with --all):  ")
            L += also_lines(a, plan, quiet, head=False)
        L.append("")
    L += frames_section(a)
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
            L.append(f"   {spans_md(d.explanation_text)}")
            if full or r == 0:  # compact: the largest gap's stacks (the explorer shows every gap's)
                L += gap_stacks_lines(d)
            L.append("")
    L += streams_section(a)
    if a.kernels:
        L.append("## Kernels")
        L.append("")
        L.append("| kernel | calls | total | share | op and input shapes | floor/call | avg/call | bound | achieved | "
                 "of peak |")
        L.append("|---|---:|---:|---:|---|---:|---:|---|---:|---:|")
        for k in a.kernels[:top]:
            fl = t(k.floor_ns) if k.floor_ns is not None else "–"
            op = k.op or ""
            if op and k.shapes:
                op += " " + ", ".join(str(x).replace(" ", "") for x in k.shapes if x)
            if k.floor_ns is None and k.op_floor_calls:
                fl = "on its op ↓"
            elif k.floor_ns is not None and k.floored_count < k.count:
                fl += f" ({k.floored_count} of {k.count} calls)"
            bd = k.bound or "–"
            if k.l2_resident:
                bd += f", L2-resident ({k.l2_resident} of {k.floored_count})" if k.l2_resident < k.floored_count \
                    else ", L2-resident"
            L.append(f"| {code(k.name, limit=60)} | {k.count} | {t(k.total_ns)} | {k.pct:.1f}% | "
                     f"{code(op, limit=60) if op else '–'} | {fl} | {t(k.avg_ns)} | {bd} | {achieved_text(k)} | "
                     f"{'–' if k.peak_pct is None else f'{k.peak_pct:.0f}%'} |")
        L.append("")
        L.append("Floors are lower bounds per op call from its own shapes: peak compute, and HBM bandwidth for every "
                 "byte but an input an earlier kernel of the step just wrote that can still be in the L2; a call "
                 "faster than that is L2-resident and counts only the bytes beyond twice the L2. Achieved: the "
                 "floored calls' FLOPs and the bytes their ops touch per second of kernel time; of peak: their time "
                 "at the device's peak for each call's bound over their kernel time.")
        L.append("")
        gc = getattr(getattr(a, "call_floors", None), "graphs", None)
        if gc is not None:  # CUDA graph replays: what the map to the eager reference run gave them (graphs.py)
            L.append(inline(gc.text()))
            L.append("")
        ofl = getattr(a, "op_floors", [])
        if ofl:
            L.append("Ops that launch several kernels per call own one floor per call:")
            L.append("")
            L.append("| op | kernels per call | calls | floor/call | avg/call | bound | achieved | of peak |")
            L.append("|---|---|---:|---:|---:|---|---:|---:|")
            for o in ofl[:top]:
                ks = " + ".join(code(x, False, 40) for x in o.kernels[:4]) + (" + …" if len(o.kernels) > 4 else "")
                L.append(f"| {code(o.op)} | {ks} | {o.count} | {t(o.floor_ns)} | {t(o.avg_ns)} | {o.bound or '–'} | "
                         f"{achieved_text(o)} | {'–' if o.peak_pct is None else f'{o.peak_pct:.0f}%'} |")
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
            L.append(f"| {esc(c['kind'])}{flag} | {c['count']} | {fmt_bytes(c['bytes'])} | {t(c['total_ns'])} | {gb} |")
        L.append("")
    calls = a.allocator.get("calls") or {}
    if calls:
        L.append("Allocator: " + ", ".join(f"{code(k, False)} ×{v['count']} ({t(v['total_ns'])})"
                                           for k, v in sorted(calls.items(), key=lambda kv: -kv[1]["total_ns"])[:6]) + ".")
        L.append("")
    mem = a.allocator.get("memory")
    if mem:
        pk = f", peak allocated {fmt_bytes(mem['peak_allocated'])}" if mem.get("peak_allocated") is not None else ""
        pr = f", peak reserved {fmt_bytes(mem['peak_reserved'])}" if mem.get("peak_reserved") is not None else ""
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


def _sections(analyses, top: int) -> list[str]:
    """Each trace's own report under its label, after a comparison, an overview or a ranks table."""
    L: list[str] = []
    for a in analyses:
        L += [f"## {esc(_label(a))}", ""] + single(a, top, title=False)
    return L
