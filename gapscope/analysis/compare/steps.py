"""The steps of one analysed trace, for a before/after comparison (``find_steps -> Steps``): gapscope's
``gapscope.step#k`` ranges (see window.py), else torch's ``ProfilerStep#N`` ranges, else the analysis window as one
step (and ``note`` says so). A kernel belongs to the step in which the CPU call that launched it started (its aten
op, then its own start, when there is no launch; before the first step: the first step; between two steps: the
earlier one); a gap to the step of the kernel that ends it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace.model import Kind, TraceModel
from ..window import step_ranges

PROFILER_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass
class Steps:
    """The steps of one trace. ``start_ns``/``end_ns`` are the CPU ranges (for ``window``: the analysis window);
    ``gpu_start_ns``/``gpu_end_ns`` the first kernel start .. last kernel end of each step (0, 0 when empty)."""

    source: str  # "gapscope" | "ProfilerStep" | "window"
    names: list[str]
    start_ns: np.ndarray
    end_ns: np.ndarray
    gpu_start_ns: np.ndarray
    gpu_end_ns: np.ndarray
    kernels: np.ndarray  # event indices of the kernels counted (in the analysis window), by start time
    kernel_step: np.ndarray  # step of each of ``kernels``
    gap_step: np.ndarray  # step of each row of the analysis' gap table
    note: str | None = None

    @property
    def n(self) -> int:
        return len(self.names)

    def step_kernels(self, k: int) -> np.ndarray:
        """Kernels of step ``k`` in start order."""
        return self.kernels[self.kernel_step == k]


def _dedupe(model: TraceModel, idx: np.ndarray) -> np.ndarray:
    """One range per (start, name): a range recorded on several threads counts once."""
    if idx.size == 0:
        return idx
    key = np.stack([model.ts_ns[idx], model.name_id[idx].astype(np.int64)], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    keep = idx[np.sort(first)]
    return keep[np.argsort(model.ts_ns[keep], kind="stable")]


def find_steps(a) -> Steps:
    """The steps of analysis ``a``: gapscope.step#k, else ProfilerStep#N, else the window as one step."""
    m = a.model
    source, note = "gapscope", None
    idx = _dedupe(m, step_ranges(m))
    if idx.size == 0:
        source = "ProfilerStep"
        is_p = np.array([bool(PROFILER_STEP_RE.match(n)) for n in m.names], dtype=bool)
        idx = np.zeros(0, np.int64)
        if is_p.any():
            # a user_annotation since torch 1.9; a cpu_op in older traces
            cpu = (m.kind == Kind.ANNOTATION) | (m.kind == Kind.CPU_OP)
            idx = _dedupe(m, np.flatnonzero(cpu & is_p[m.name_id]))
    if idx.size:
        names = [m.name(i) for i in idx.tolist()]
        s = m.ts_ns[idx].astype(np.int64)
        e = s + m.dur_ns[idx].astype(np.int64)
    else:
        source = "window"
        w0, w1 = a.window.span
        names, s, e = ["window"], np.array([w0], np.int64), np.array([w1], np.int64)
        note = "no step ranges (gapscope.step#k or ProfilerStep#N): the whole window counts as one step"
    k = np.flatnonzero(m.kind == Kind.KERNEL)
    k = k[a.window.gpu_in(m, k)] if k.size else k
    k = k[np.lexsort((m.track[k], m.ts_ns[k]))]
    L, op = m.launch[k], m.op[k]
    anchor = np.where(L >= 0, m.ts_ns[np.maximum(L, 0)], np.where(op >= 0, m.ts_ns[np.maximum(op, 0)], m.ts_ns[k]))
    kstep = np.clip(np.searchsorted(s, anchor, side="right") - 1, 0, len(names) - 1).astype(np.int64)
    n = len(names)
    gs = np.zeros(n, np.int64)
    ge = np.zeros(n, np.int64)
    if k.size:
        ks, ke = m.ts_ns[k], m.ts_ns[k] + m.dur_ns[k]
        has = np.bincount(kstep, minlength=n) > 0
        big = np.iinfo(np.int64).max
        gs = np.full(n, big, np.int64)
        np.minimum.at(gs, kstep, ks)
        np.maximum.at(ge, kstep, ke)
        gs[~has] = 0
    # gaps: the step of the kernel that ends them; at the end of the window, the step their start falls in
    g = a.gaps
    pos = {int(e): i for i, e in enumerate(k.tolist())} if len(g) else {}
    nxt = g.next_idx
    gstep = np.array([kstep[pos[int(x)]] if int(x) in pos else -1 for x in nxt.tolist()], np.int64) \
        if len(g) else np.zeros(0, np.int64)
    loose = gstep < 0
    if loose.any():
        ref = np.where(ge > 0, gs, s)
        gstep[loose] = np.clip(np.searchsorted(ref, g.start_ns[loose], side="right") - 1, 0, n - 1)
    return Steps(source, names, s, e, gs, ge, k, kstep, gstep, note)
