"""Alignment of one step's GPU kernel sequence in A against B (``align``, ``align_names``): a longest common
subsequence over kernel names (``lcs_pairs``), bit-parallel on Python integers (Hyyrö 2004): O(n·m/64) word
operations and one bit vector per row kept for the trace-back, after the common prefix and suffix are cut off. A
step of 10k kernels against 10k takes about a tenth of a second; pairs larger than ``MAX_ALIGN_CELLS`` are not
aligned (the comparison says so). The differences are hunks between matched kernels (``hunks_of``): ``added`` (only
B kernels), ``removed`` (only A kernels), ``fused`` (several A kernels replaced by one B kernel in the same place)
and ``replaced`` (anything else).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace.model import TraceModel
from .steps import Steps
from ..intervals import isin, uniq
from ..thresholds import MAX_ALIGN_CELLS


@dataclass
class Hunk:
    """One difference between two kernel sequences: A's kernels [a0, a1) became B's [b0, b1)."""

    kind: str  # "added" | "removed" | "fused" | "replaced"
    a0: int
    a1: int
    b0: int
    b1: int
    a_names: list[str]
    b_names: list[str]


@dataclass
class Alignment:
    step_a: int
    step_b: int
    a_kernels: int
    b_kernels: int
    matched: int
    hunks: list[Hunk]
    pairs: np.ndarray  # (matched, 2): positions in A's and B's step sequence that match
    note: str | None = None

    def counts(self) -> dict[str, int]:
        """Kernels in each kind of hunk: added/replaced count B kernels, removed/fused A kernels."""
        out = {"added": 0, "removed": 0, "fused": 0, "replaced": 0}
        for h in self.hunks:
            out[h.kind] += (h.b1 - h.b0) if h.kind in ("added", "replaced") else (h.a1 - h.a0)
        return out


def _prefix(x: np.ndarray, y: np.ndarray) -> int:
    n = min(x.size, y.size)
    if n == 0:
        return 0
    ne = np.flatnonzero(x[:n] != y[:n])
    return int(ne[0]) if ne.size else n


def lcs_pairs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Positions (i, j) of a longest common subsequence of the integer sequences ``x`` and ``y``, in order.

    The common prefix and suffix are matched first; the middle runs Hyyrö's bit-parallel LCS (a row of the
    DP table is one Python integer, m bits: bit j set = no increase at column j+1) keeping each row, then
    walks back: a match is taken diagonally (always optimal: L[i][j] = L[i-1][j-1] + 1 when x_i = y_j),
    else left while bit j-1 of the row says L[i][j-1] = L[i][j], else up."""
    x = np.asarray(x, np.int64)
    y = np.asarray(y, np.int64)
    p = _prefix(x, y)
    s = _prefix(x[p:][::-1], y[p:][::-1])
    xm, ym = x[p:x.size - s], y[p:y.size - s]
    pre = np.arange(p, dtype=np.int64)
    suf_a = np.arange(x.size - s, x.size, dtype=np.int64)
    suf_b = np.arange(y.size - s, y.size, dtype=np.int64)
    mid: list[tuple[int, int]] = []
    n, m = xm.size, ym.size
    if n and m:
        ux = uniq(xm)
        common = ux[isin(ux, ym)]  # np.intersect1d's values (not it: its np.unique imports numpy.ma)
        if common.size:
            masks: dict[int, int] = {}
            for c in common.tolist():
                bits = np.zeros(m, np.uint8)
                bits[ym == c] = 1
                masks[c] = int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")
            full = (1 << m) - 1
            v = full
            rows = [v]
            for c in xm.tolist():
                mk = masks.get(c)
                if mk is not None:
                    u = v & mk
                    v = ((v + u) | (v - u)) & full
                rows.append(v)
            i, j = n, m
            xl, yl = xm.tolist(), ym.tolist()
            while i > 0 and j > 0:
                if xl[i - 1] == yl[j - 1]:
                    mid.append((i - 1, j - 1))
                    i -= 1
                    j -= 1
                elif (rows[i] >> (j - 1)) & 1:
                    j -= 1
                else:
                    i -= 1
            mid.reverse()
    pm = np.array(mid, np.int64).reshape(-1, 2) + p
    return np.concatenate([np.stack([pre, pre], axis=1), pm, np.stack([suf_a, suf_b], axis=1)]).astype(np.int64)


def hunks_of(pairs: np.ndarray, n: int, m: int, a_names: list[str], b_names: list[str]) -> list[Hunk]:
    """The differences between two sequences of lengths n and m, given their matched positions."""
    out = []
    prev_a = prev_b = -1
    for ia, ib in [*pairs.tolist(), (n, m)]:
        a0, a1, b0, b1 = prev_a + 1, ia, prev_b + 1, ib
        if a1 > a0 or b1 > b0:
            if a1 == a0:
                kind = "added"
            elif b1 == b0:
                kind = "removed"
            elif b1 - b0 == 1 and a1 - a0 >= 2:
                kind = "fused"
            else:
                kind = "replaced"
            out.append(Hunk(kind, a0, a1, b0, b1, a_names[a0:a1], b_names[b0:b1]))
        prev_a, prev_b = ia, ib
    return out


def _symbols(names_a: list[str], names_b: list[str]):
    """The two sequences of names as integers of one shared vocabulary."""
    vocab: dict[str, int] = {}
    xa = np.array([vocab.setdefault(s, len(vocab)) for s in names_a], np.int64)
    xb = np.array([vocab.setdefault(s, len(vocab)) for s in names_b], np.int64)
    return xa, xb


def align_names(names_a: list[str], names_b: list[str]) -> tuple[np.ndarray, list[Hunk], str | None]:
    n, m = len(names_a), len(names_b)
    xa, xb = _symbols(names_a, names_b)
    p = _prefix(xa, xb)
    s = _prefix(xa[p:][::-1], xb[p:][::-1])
    if (n - p - s) * (m - p - s) > MAX_ALIGN_CELLS:
        return (np.zeros((0, 2), np.int64), [],
                f"kernel sequences too long to align ({n} x {m} kernels after a common prefix of {p})")
    pairs = lcs_pairs(xa, xb)
    return pairs, hunks_of(pairs, n, m, names_a, names_b), None


def _seq_names(model: TraceModel, idx: np.ndarray) -> list[str]:
    names = model.names
    return [names[i] for i in model.name_id[idx].tolist()]


def align(a, b, steps_a: Steps, steps_b: Steps, step_a: int = 0, step_b: int | None = None) -> Alignment:
    """The GPU kernel sequence of A's step ``step_a`` against B's ``step_b`` (default: the same index, or B's
    last step when B has fewer)."""
    if step_b is None:
        step_b = min(step_a, steps_b.n - 1)
    ka, kb = steps_a.step_kernels(step_a), steps_b.step_kernels(step_b)
    na, nb = _seq_names(a.model, ka), _seq_names(b.model, kb)
    pairs, hunks, note = align_names(na, nb)
    return Alignment(step_a, step_b, len(na), len(nb), int(pairs.shape[0]), hunks, pairs, note)
