"""The before/after scene: two analysed traces, A's lanes above B's on one step-aligned time axis (the screen that
draws it and answers its keys is tui/diffview.py).

``DiffScene`` is the explorer's ``Scene`` of two parts; it only chooses the rows and moves B in time so that its
step k starts (first kernel) where A's step k starts, or so that a gap of B ends where the A gap it matches ends.
The numbers come from ``tui.analysis.compare`` (per step). Gaps of B with no listed gap of A at the same place in
the aligned kernel sequence are marked on a row of their own ("new in B"); when a B gap is selected, the A gap
it matches is marked on A's row. ``diff_pair`` is which two of the explorer's tabs `D` compares.

No textual here.
"""

from __future__ import annotations

import os

import numpy as np

from .lanes import Lane, Segments
from .rows import Row
from .scene import Scene, analysis_pending

SIDE = ("A", "B")
ROLE = ("before", "after")


class DiffScene(Scene):
    """Two traces (A = part 0, B = part 1); B's lanes are shifted so the current steps line up."""

    def __init__(self, path_a: str, model_a, analysis_a, path_b: str, model_b, analysis_b):
        from ..analysis.compare import compare, match_gaps

        super().__init__([path_a, path_b], [model_a, model_b])
        self.cmp = compare(analysis_a, analysis_b)
        self.gm = match_gaps(analysis_a, analysis_b, self.cmp)
        self.step = 0  # index over max(A steps, B steps)
        self.aligned_on: str | None = None  # the kernel the axis is aligned on, when not the step's start
        self._pairs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self.marks: dict[int, Lane] = {}
        self.match_gid = -1  # the A gap matching the selected B gap
        self.moves = 0  # counted up each time B is moved in time (the screen draws every lane again)
        self._realign(0)
        self.set_analyses([(0, analysis_a, analysis_a.config.min_listed_gap_ns),
                           (1, analysis_b, analysis_b.config.min_listed_gap_ns)])
        self._index_gaps()
        self.view.lo, self.view.hi = self._extent()
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
            self.merge_gaps()
            self.apply_filter(None)
            self._index_gaps()
            if keep >= 0:
                self.select_gid(keep)
        self.display.invalidate()
        lo, hi = self._extent()
        self.view.lo, self.view.hi = lo, hi
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
        """Move B so that the kernel ending B's gap ``gid`` (or the last matched kernel before it) starts with the
        A kernel it is matched to: a gap at the same place in both traces then ends at the same column."""
        k = self.step_of_gap(gid)
        b = self.parts[1].analysis
        nxt = int(b.gaps.next_idx[int(self.gaps.row[gid])])
        ea, eb = self.matched_kernels(k)
        off = None
        if eb.size:
            mb, ma = self.parts[1].model, self.parts[0].model
            tref = int(mb.ts_ns[nxt]) if nxt >= 0 else int(b.gaps.start_ns[int(self.gaps.row[gid])])
            j = int(np.searchsorted(mb.ts_ns[eb], tref, side="right")) - 1
            if j >= 0:
                off = int(ma.ts_ns[ea[j]]) - int(mb.ts_ns[eb[j]])
                self.aligned_on = ("the kernel after the gap" if int(eb[j]) == nxt else
                                   "the last kernel before the gap that both traces ran")
        if off is None:
            self.aligned_on = None
        self.set_step(k, off)

    # ------------------------------------------------------------------- gaps
    def _index_gaps(self) -> None:
        """Global gap ids of B's listed gaps (largest first), which are new, and the A gap each matches."""
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
            self.marks[dev] = Lane("marks", f"new in {SIDE[1]}", device=int(dev),
                                   segs=Segments(self.gaps.start[ids], self.gaps.end[ids], ids), part=1)
        self.match_gid = -1

    def select_gid(self, gid: int) -> None:
        where = np.flatnonzero(self.gaps.order == gid)
        if where.size:
            self.select(int(where[0]))
        self.match_gid = int(self.a_match[gid]) if 0 <= gid < self.a_match.size and self.gaps.part[gid] == 1 else -1

    def step_of_gap(self, gid: int) -> int:
        row = int(self.gaps.row[gid])
        st = self.cmp.steps_b if self.gaps.part[gid] == 1 else self.cmp.steps_a
        return int(st.gap_step[row])

    # ------------------------------------------------------------------- rows
    def _build_rows(self) -> list[Row]:
        out: list[Row] = []
        for pi, pt in enumerate(self.parts):
            devs = sorted({ln.device for ln in pt.lanes if ln.device >= 0}
                          | {d for (p, d) in self.gaps.lanes if p == pi})
            where = ", ".join(self._device_title(pt.model, d, None) for d in devs)
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


def diff_pair(scenes: list, current: int):
    """(A, B) for D: this tab's trace and the next tab's (both analysed single traces), in tab order, as
    ``gapscope diff A B``: from the last tab, A was the last and B the first, before and after swapped."""
    if len(scenes) < 2:
        return None
    from ..analysis.diagnosis import trace_set_kind

    i, j = sorted((current, (current + 1) % len(scenes)))
    a, b = scenes[i], scenes[j]
    if a.multi or b.multi or a.analysis is None or b.analysis is None or analysis_pending(a.analysis) or \
            analysis_pending(b.analysis):  # (a provisional list, or findings still being built: not yet)
        return None
    # the report's rule (diagnosis.trace_set_kind): two traces each with its own rank are ranks, not a pair
    if trace_set_kind([a.analysis, b.analysis]) != "pair":
        return None
    return a.part, b.part
