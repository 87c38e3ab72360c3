"""Several traces against each other in the Markdown report: two as before/after, every number per step
(``before_after``, from gapscope/analysis/compare/__init__.py), up to three side by side (``compare``), more one row each
(``overview``); each followed by every trace's own report.
"""

from __future__ import annotations

import os

from ..analysis import CAUSES
from ..analysis.units import fmt_ns as t
from .markdown_single import _sections
from .markdown_text import _biggest_cause, _label, code, esc, inline

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


def before_after(diagnosis, top: int) -> list[str]:
    """Two traces: A (before) against B (after), every number per step (the diagnosis' comparison,
    gapscope/analysis/compare/__init__.py), biggest change first; then each trace's own report."""
    from ..analysis.diagnosis import diagnose

    d = diagnose(diagnosis)
    analyses = d.analyses
    a, b = analyses
    c = d.comparison
    gm = d.gap_match
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
    sv = c.step  # the verdict first: what the user feels is the step time without the profiler
    L.append(f"- **{esc(sv.headline())}**.")
    if sv.stands_in:
        L.append(f"- ⚠ {esc(sv.stands_in)}.")
    for w in sv.warnings + sv.notes:
        L.append(f"- ⚠ {esc(w)}.")
    L.append(f"- kernel time per step: {us(c.a.kernel_us_per_step)} → {us(c.b.kernel_us_per_step)} "
             f"({_signed(c.b.kernel_us_per_step - c.a.kernel_us_per_step)}"
             f"{_pct(c.a.kernel_us_per_step, c.b.kernel_us_per_step, ', ', '')}).")
    L.append(f"- GPU span per step{' (profiled)' if sv.basis == 'unprofiled' else ''}: "
             f"{us(c.a.gpu_span_us_per_step)} → {us(c.b.gpu_span_us_per_step)} "
             f"({_signed(c.b.gpu_span_us_per_step - c.a.gpu_span_us_per_step)}"
             f"{_pct(c.a.gpu_span_us_per_step, c.b.gpu_span_us_per_step, ', ', '')}); "
             f"GPU idle per step: {us(c.a.idle_us_per_step)} → {us(c.b.idle_us_per_step)} "
             f"({_signed(c.idle_delta_us_per_step)}{_pct(c.a.idle_us_per_step, c.b.idle_us_per_step, ', ', '')}).")
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
    step_row = ("step time, un-profiled (median)" if sv.basis == "unprofiled" else
                "step time, profiled (no un-profiled time)")
    rows = [(step_row, sv.a.us, sv.b.us, True),
            ("kernel time", c.a.kernel_us_per_step, c.b.kernel_us_per_step, True),
            ("GPU span (first kernel to last)", c.a.gpu_span_us_per_step, c.b.gpu_span_us_per_step, True),
            ("GPU idle", c.a.idle_us_per_step, c.b.idle_us_per_step, True),
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
