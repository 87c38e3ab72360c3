"""The before/after scene: two analysed traces, A's lanes above B's on one step-aligned time axis (the screen that
draws it and answers its keys is tui/diffview.py).

``DiffScene`` holds the explorer's ``Scene`` of the two parts (``lanes_scene``: the lanes, the time window, the rows
and the gap selection, which the lanes draw); it chooses the rows and moves B in time so that its step k starts
(first kernel) where A's step k starts, or so that a gap of B ends where the A gap it matches ends.
The numbers come from ``tui.analysis.compare`` (per step). Gaps of B with no listed gap of A at the same place in
the aligned kernel sequence are marked on a row of their own ("not in A": the view's one word for what B has and A
has not); when a B gap is selected, the A gap it matches is marked on A's row. ``goto_change`` shows a row of the
list of changes in both traces (Enter there); ``export_report`` writes ``gapscope report A B``'s Markdown next to
the traces (e). ``diff_pair`` is which two of the explorer's tabs `D` compares.

No textual here.
"""

from __future__ import annotations

import os

import numpy as np

from ..analysis.compare import op_shapes_text
from .lanes import Lane, Segments
from .rows import Row
from .scene import Scene, device_title, lanes_extent

SIDE = ("A", "B")
ROLE = ("before", "after")


class DiffScene:
    """Two traces (A = part 0, B = part 1); B's lanes are shifted so the current steps line up. ``parts``,
    ``lanes``, ``view``, ``display`` and ``gaps`` are those of ``lanes_scene``, the two parts' explorer scene (its
    rows: ``_build_rows``)."""

    def __init__(self, path_a: str, model_a, analysis_a, path_b: str, model_b, analysis_b):
        from ..analysis.compare import compare, match_gaps

        ls = self.lanes_scene = Scene([path_a, path_b], [model_a, model_b], rows=self._build_rows)
        self.parts, self.lanes, self.view, self.display, self.gaps = ls.parts, ls.lanes, ls.view, ls.display, ls.gaps
        self.cmp = compare(analysis_a, analysis_b)
        self.gm = match_gaps(analysis_a, analysis_b, self.cmp)
        self.step = 0  # index over max(A steps, B steps)
        self.aligned_on: str | None = None  # the kernel the axis is aligned on, when not the step's start
        self._pairs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self.marks: dict[int, Lane] = {}
        self.match_gid = -1  # the A gap matching the selected B gap
        self.moves = 0  # counted up each time B is moved in time (the screen draws every lane again)
        self._realign(0)
        ls.set_analyses([(0, analysis_a, analysis_a.config.min_listed_gap_ns),
                         (1, analysis_b, analysis_b.config.min_listed_gap_ns)])
        self._index_gaps()
        self.view.lo, self.view.hi = lanes_extent(self.lanes, self.parts[0].model)
        self.gaps.selected = -1  # nothing selected until n / m
        self.fit_step()

    # ------------------------------------------------------------------ steps
    @property
    def n_steps(self) -> int:
        return max(self.cmp.a.steps, self.cmp.b.steps)

    def steps_of(self, k: int) -> tuple[int, int]:
        return min(k, self.cmp.a.steps - 1), min(k, self.cmp.b.steps - 1)

    def _step_start(self, side: int, k: int) -> int:
        st = self.cmp.steps_a if side == 0 else self.cmp.steps_b
        g = int(st.gpu_start_ns[k])
        return g if st.gpu_end_ns[k] > 0 else int(st.start_ns[k])

    def _step_end(self, side: int, k: int) -> int:
        st = self.cmp.steps_a if side == 0 else self.cmp.steps_b
        return int(st.gpu_end_ns[k]) if st.gpu_end_ns[k] > 0 else int(st.end_ns[k])

    def _realign(self, k: int, offset_b: int | None = None) -> None:
        """A stays on its own clock; B moves so that its step's first kernel starts with A's (or by ``offset_b``)."""
        ka, kb = self.steps_of(k)
        want = [0, self._step_start(0, ka) - self._step_start(1, kb) if offset_b is None else int(offset_b)]
        for pt, off in zip(self.parts, want):
            d = off - pt.offset
            if d:
                for ln in pt.lanes:
                    ln.shift(d)
                pt.offset = off
        self.step = k

    def set_step(self, k: int, offset_b: int | None = None) -> None:
        k = max(0, min(int(k), self.n_steps - 1))
        keep = self.gaps.selected_gap
        self.aligned_on = None if offset_b is None else self.aligned_on
        self._realign(k, offset_b)
        self.moves += 1
        if any(pt.analysis is not None for pt in self.parts):
            self.gaps.merge(self.parts)
            self.lanes_scene.apply_filter(None)
            self._index_gaps()
            if keep >= 0:
                self.select_gid(keep)
        self.display.invalidate()
        self.view.lo, self.view.hi = lanes_extent(self.lanes, self.parts[0].model)
        self.fit_step()

    def step_span(self) -> tuple[int, int]:
        """Both traces' current steps on the shared axis."""
        ka, kb = self.steps_of(self.step)
        ob = self.parts[1].offset
        a0, a1 = self._step_start(0, ka), self._step_end(0, ka)
        b0, b1 = self._step_start(1, kb) + ob, self._step_end(1, kb) + ob
        return min(a0, b0), max(a1, b1, min(a0, b0) + 1)

    def fit_step(self) -> None:
        a, b = self.step_span()
        m = max((b - a) // 50, 1)
        self.view.t0, self.view.t1 = a - m, b + m
        if not (self.view.t0 <= self.view.cursor < self.view.t1):
            self.view.cursor = a

    def step_label(self) -> str:
        ka, kb = self.steps_of(self.step)
        on = f", aligned on {self.aligned_on}" if self.aligned_on else ", aligned on the step's first kernel"
        return (f"step {self.step + 1}/{self.n_steps}: {self.cmp.steps_a.names[ka]} | "
                f"{self.cmp.steps_b.names[kb]}{on}")

    def matched_kernels(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Kernel events of A and of B matched by the alignment of step k (cached)."""
        key = self.steps_of(k)
        got = self._pairs.get(key)
        if got is None:
            from ..analysis.compare.align import align

            al = align(self.parts[0].analysis, self.parts[1].analysis, self.cmp.steps_a, self.cmp.steps_b, *key)
            ka, kb = self.cmp.steps_a.step_kernels(key[0]), self.cmp.steps_b.step_kernels(key[1])
            got = self._pairs[key] = (ka[al.pairs[:, 0]], kb[al.pairs[:, 1]])
        return got

    def align_on_gap(self, gid: int) -> None:
        """Move B so that the kernel ending gap ``gid`` (of B, or of A; or the last matched kernel before it)
        starts with the kernel of the other trace it is matched to: a gap at the same place in both traces then
        ends at the same column."""
        k = self.step_of_gap(gid)
        side = int(self.gaps.part[gid])
        an = self.parts[side].analysis
        nxt = int(an.gaps.next_idx[int(self.gaps.row[gid])])
        ea, eb = self.matched_kernels(k)
        off = None
        if eb.size:
            mb, ma = self.parts[1].model, self.parts[0].model
            mine, mm = (eb, mb) if side == 1 else (ea, ma)
            tref = int(mm.ts_ns[nxt]) if nxt >= 0 else int(an.gaps.start_ns[int(self.gaps.row[gid])])
            j = int(np.searchsorted(mm.ts_ns[mine], tref, side="right")) - 1
            if j >= 0:
                off = int(ma.ts_ns[ea[j]]) - int(mb.ts_ns[eb[j]])
                self.aligned_on = ("the kernel after the gap" if int(mine[j]) == nxt else
                                   "the last kernel before the gap that both traces ran")
        if off is None:
            self.aligned_on = None
        self.set_step(k, off)

    def goto_gap(self, gid: int, cw: int) -> None:
        """Gap ``gid`` (of B or of A) selected and lined up with the other trace (``align_on_gap``); the window on
        its span and, for a gap of B, the span of the A gap it matches; the lane cursor on its gap row."""
        self.align_on_gap(gid)
        self.select_gid(gid)
        a, b, dev = self.gaps.span(gid)
        if self.match_gid >= 0:
            ma, mb, _ = self.gaps.span(self.match_gid)
            a, b = min(a, ma), max(b, mb)
        self.view.focus(a, b, cw, context=3.0)
        self.view.cursor = int(self.gaps.start[gid])
        ln = self.gaps.lanes.get((int(self.gaps.part[gid]), dev))
        for i, r in enumerate(self.display.rows()):
            if ln is not None and r.lane is ln:
                self.display.cursor = i

    # ------------------------------------------------------------------- gaps
    def _index_gaps(self) -> None:
        """Global gap ids of B's listed gaps (largest first), which are not in A, and the A gap each matches."""
        gm = self.gm
        b_ids = np.flatnonzero(self.gaps.part == 1)
        a_ids = np.flatnonzero(self.gaps.part == 0)
        b_of_row = dict(zip(self.gaps.row[b_ids].tolist(), b_ids.tolist()))
        a_of_row = dict(zip(self.gaps.row[a_ids].tolist(), a_ids.tolist()))
        self.b_new = np.zeros(self.gaps.part.size, bool)
        self.a_match = np.full(self.gaps.part.size, -1, np.int64)
        for r, ar, new in zip(gm.b_rows.tolist(), gm.a_rows.tolist(), gm.new.tolist()):
            gid = b_of_row.get(r)
            if gid is None:
                continue
            self.b_new[gid] = new
            self.a_match[gid] = a_of_row.get(ar, -1) if ar >= 0 else -1
        self.b_order = b_ids[np.lexsort((self.gaps.start[b_ids], -self.gaps.dur[b_ids]))]
        self.new_order = self.b_order[self.b_new[self.b_order]]
        self.marks.clear()
        for dev in sorted(set(self.gaps.device[b_ids].tolist())):
            ids = b_ids[(self.gaps.device[b_ids] == dev) & self.b_new[b_ids]]
            ids = ids[np.argsort(self.gaps.start[ids], kind="stable")]
            self.marks[dev] = Lane("marks", f"not in {SIDE[0]}", device=int(dev),
                                   segs=Segments(self.gaps.start[ids], self.gaps.end[ids], ids), part=1)
        self.match_gid = -1

    def select_gid(self, gid: int) -> None:
        where = np.flatnonzero(self.gaps.order == gid)
        if where.size:
            self.lanes_scene.select(int(where[0]))
        self.match_gid = int(self.a_match[gid]) if 0 <= gid < self.a_match.size and self.gaps.part[gid] == 1 else -1

    def b_matches(self, gid: int) -> np.ndarray:
        """The gaps of B whose matching A gap is ``gid`` (a gap of A)."""
        return np.flatnonzero(self.a_match == gid) if gid >= 0 else np.zeros(0, np.int64)

    def gid_of(self, part: int, row: int) -> int:
        """The global id of the listed gap at ``row`` of part ``part``'s gap table, or -1 (not listed)."""
        hit = np.flatnonzero((self.gaps.part == part) & (self.gaps.row == row))
        return int(hit[0]) if hit.size else -1

    def largest_gap(self, part: int, *, cause: str | None = None, rows=None) -> int:
        """The largest listed gap of part ``part`` (of ``cause``, or among the gap-table ``rows``), or -1."""
        from ..analysis import CAUSES

        ok = self.gaps.part == part
        if cause is not None:
            try:
                ok &= self.gaps.cause == CAUSES.index(cause)
            except ValueError:
                return -1
        if rows is not None:
            ok &= np.isin(self.gaps.row, np.asarray(rows, np.int64))
        ids = np.flatnonzero(ok)
        if not ids.size:
            return -1
        return int(ids[np.lexsort((self.gaps.start[ids], -self.gaps.dur[ids]))[0]])

    def step_of_gap(self, gid: int) -> int:
        row = int(self.gaps.row[gid])
        st = self.cmp.steps_b if self.gaps.part[gid] == 1 else self.cmp.steps_a
        return int(st.gap_step[row])

    # ------------------------------------------------------------- changes (Enter in the list of changes)
    def first_run(self, side: int, name: str, shapes: str | None = None) -> int:
        """The first kernel event of trace ``side`` (0 = A, 1 = B; among the kernels its steps count, by start)
        named ``name``, launched by an op with input ``shapes`` when given and any kernel of that name has them;
        -1 when it has none."""
        st = self.cmp.steps_a if side == 0 else self.cmp.steps_b
        m = self.parts[side].model
        nids = [i for i, n in enumerate(m.names) if n == name]
        k = st.kernels
        cand = k[np.isin(m.name_id[k], nids)] if nids and k.size else np.zeros(0, np.int64)
        if not cand.size:
            return -1
        if shapes is not None:
            seen: set[int] = set()
            for e in cand.tolist():
                op = int(m.op[e])
                if op < 0 or op in seen:
                    continue
                seen.add(op)
                if op_shapes_text(m, op) == shapes:
                    return int(e)
        return int(cand[0])

    def goto_kernel(self, name: str, shapes: str | None, cw: int) -> tuple[int, int]:
        """A kernel of the comparison shown in both traces: its first run in A and in B (``first_run``), B moved
        so that the two start together (only one trace runs it: that trace's step lined up as usual), the window
        on both runs, the time cursor on their start and the lane cursor on B's stream (A's when B has none).
        Returns the two events (-1 for the trace that does not run it)."""
        ea, eb = self.first_run(0, name, shapes), self.first_run(1, name, shapes)
        if ea < 0 and eb < 0:
            return ea, eb
        ma, mb = self.parts[0].model, self.parts[1].model
        st, e, side = (self.cmp.steps_b, eb, 1) if eb >= 0 else (self.cmp.steps_a, ea, 0)
        k = int(st.kernel_step[int(np.flatnonzero(st.kernels == e)[0])])
        off = None
        if ea >= 0 and eb >= 0:
            off = int(ma.ts_ns[ea]) - int(mb.ts_ns[eb])
            self.aligned_on = "the kernel's first run"
        self.set_step(k, off)
        self.gaps.selected = -1  # the status line says what is shown (the screen's message), not an old gap
        self.match_gid = -1
        spans = [(int(m.ts_ns[x]) + pt.offset, int(m.ts_ns[x] + m.dur_ns[x]) + pt.offset)
                 for x, m, pt in ((ea, ma, self.parts[0]), (eb, mb, self.parts[1])) if x >= 0]
        a, b = min(s for s, _ in spans), max(t for _, t in spans)
        self.view.focus(a, b, cw, context=5.0)
        pt = self.parts[side]
        row = self.display.row_of_event(e, side, pt.model, pt.offset)
        if row >= 0:
            self.display.cursor = row
        return ea, eb

    def finding_of(self, fd, side: int):
        """The finding of trace ``side`` that a ``FindingDelta`` of the comparison stands for (matched as the
        comparison matches them: cause, frame, kind, and its title), or None."""
        from ..analysis.compare import finding_kind

        an = self.parts[side].analysis
        title = fd.title_a if side == 0 else fd.title_b
        for f in an.findings:
            if (f.cause, (f.evidence or {}).get("frame"), finding_kind(f)) == (fd.cause, fd.frame, fd.kind) and \
                    f.title == title:
                return f
        return None

    def gap_at_cursor(self, cw: int) -> int:
        """The gap under the time cursor on the cursor's lane (an idle gaps row, B's "not in A" row, or A's
        "matches B" row: the A gap matching the selected one), or -1."""
        from .navigate import gap_under_cursor

        ln = self.display.cursor_lane()
        if ln is None:
            return -1
        if ln.kind == "match":
            return self.match_gid
        return gap_under_cursor(self, cw, ("gaps", "marks"))

    def goto_change(self, key: str, cw: int) -> str:
        """Enter on a row of the list of changes (its ``key``, tui/diffview.py ``change_rows``): the change shown
        in both traces. A cause, a finding: its largest listed gap in B (in A when B has none), lined up with
        the gap of the other trace at the same place; a gap not in A: that gap; a kernel: its first run in
        each (``goto_kernel``); a step's totals or the kernel sequence: the step. Returns the status line's
        message ("" when the selected gap says it)."""
        from .kernelname import kernel_label

        c = self.cmp
        what, _, arg = key.partition(":")
        gid = -1
        if what == "cause":
            d = c.causes[int(arg)]
            gid = self.largest_gap(1, cause=d.cause)
            if gid < 0:
                gid = self.largest_gap(0, cause=d.cause)
            if gid < 0:
                return f"no listed gap of cause {d.cause} in A or B"
        elif what == "finding":
            fd = c.findings[int(arg)]
            for side in ((1, 0) if fd.status != "gone" else (0,)):
                f = self.finding_of(fd, side)
                if f is not None:
                    gid = self.largest_gap(side, rows=f.gap_rows)
                    if gid >= 0:
                        break
            if gid < 0:
                return "this finding lists no gap"
        elif what == "gap":
            gid = self.gid_of(1, int(arg))
            if gid < 0:
                return "that gap of B is not listed"
        elif what == "kernel":
            kd = c.kernels[int(arg)]
            ea, eb = self.goto_kernel(kd.name, kd.shapes, cw)
            n = kernel_label(kd.name, kd.op)  # (last: a long name is cut at the status line's end, with the mark)
            if ea < 0 and eb < 0:
                return f"no run in the steps of A or B: kernel {n}"
            if ea < 0:
                return f"first run in B (A does not run it): kernel {n}"
            if eb < 0:
                return f"first run in A (B does not run it): kernel {n}"
            return f"first run in A and in B, lined up: kernel {n}"
        elif what == "step":
            k = c.alignment.step_a if arg == "align" and c.alignment is not None else self.step
            self.set_step(k)
            return f"step {self.step + 1}: both traces from its first kernel"
        else:
            return ""
        self.goto_gap(gid, cw)
        return ""

    # ------------------------------------------------------------------- rows
    def _build_rows(self) -> list[Row]:
        out: list[Row] = []
        for pi, pt in enumerate(self.parts):
            devs = sorted({ln.device for ln in pt.lanes if ln.device >= 0}
                          | {d for (p, d) in self.gaps.lanes if p == pi})
            where = ", ".join(device_title(pt.model, d, None) for d in devs)
            out.append(Row(None, f"{SIDE[pi]} {ROLE[pi]}: {os.path.basename(pt.path)}" + (f" | {where}" if where else "")))
            out.extend(Row(ln) for ln in pt.lanes if ln.kind in ("ranges", "cpu"))
            for dev in devs:
                out.extend(Row(ln) for ln in pt.lanes if ln.device == dev and ln.kind == "stream")
                if (pi, dev) in self.gaps.lanes:
                    out.append(Row(self.gaps.lanes[(pi, dev)]))
                if pi == 0 and (0, dev) in self.gaps.lanes:
                    out.append(Row(Lane("match", f"matches {SIDE[1]}", device=dev, part=0)))
                if pi == 1 and dev in self.marks:
                    out.append(Row(self.marks[dev]))
        return out



def export_report(sc: DiffScene) -> str:
    """`e` in the diff view: ``gapscope report A B``'s Markdown (``render_markdown`` of the pair's diagnosis) written
    next to A, as the explorer's export (tui/export.py: the folder, a stem no file has yet, never overwriting);
    the path written."""
    from ..analysis.diagnosis import diagnose
    from ..fsutil import atomic_write_text
    from ..report import render_markdown
    from .export import export_folder, free_stem, trace_stem

    a, b = sc.parts
    md = render_markdown(diagnose([a.analysis, b.analysis]))
    folder = export_folder(a.path)
    stem = trace_stem(a.path)[:-len(".gapscope")] + "-vs-" + trace_stem(b.path)
    return atomic_write_text(os.path.join(folder, free_stem(folder, stem) + ".md"), md)


def diff_pair(scenes: list, current: int):
    """(A, B) for D: this tab's trace and the next tab's (both analysed single traces), in tab order, as
    ``gapscope diff A B``: from the last tab, A was the last and B the first, before and after swapped."""
    if len(scenes) < 2:
        return None
    from ..analysis.diagnosis import trace_set_kind

    i, j = sorted((current, (current + 1) % len(scenes)))
    a, b = scenes[i], scenes[j]
    if a.multi or b.multi or a.state.final is None or b.state.final is None:
        return None  # (no analysis, a provisional list, or findings still being built: not yet)
    # the report's rule (diagnosis.trace_set_kind): two traces each with its own rank are ranks, not a pair
    if trace_set_kind([a.analysis, b.analysis]) != "pair":
        return None
    return a.part, b.part
