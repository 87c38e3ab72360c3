"""What `/` finds: every kernel, copy, op, range, frame and runtime call whose name holds the query (any case),
in time order over the parts of a scene, and which of them the analysed window holds; ``SearchState`` (the
scene's ``search``) holds the query, its matches and the one shown. No textual here."""

from __future__ import annotations

import numpy as np

from ..trace.model import Kind

SEARCH_KINDS = np.array([Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON,
                         Kind.RUNTIME], dtype=np.uint8)
GPU_KINDS = np.array([Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET], dtype=np.uint8)


def find(parts, query: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(events, their parts, aligned start times, inside the window) of the matches of ``query``, by time.

    Inside is the analysis' own rule (``AnalysisWindow.gpu_in`` / ``cpu_in``), the one the kernels view counts
    its calls by: a GPU event overlapping its device's window, a CPU event starting in a step. A search that
    counted the warm-up's events too said 151/205 where the kernels view said 164 calls. Before a part's
    analysis is in, all of its matches count as inside."""
    q = query.lower()
    evs, pas, ts, ins = [], [], [], []
    for pi, pt in enumerate(parts if q else []):
        m = pt.model
        ids = [i for i, nm in enumerate(m.names) if q in nm.lower()]
        if not ids:
            continue
        hit = np.flatnonzero(np.isin(m.name_id, np.asarray(ids, dtype=np.int32)) & np.isin(m.kind, SEARCH_KINDS))
        inside = np.ones(hit.size, bool)
        win = pt.state.window
        if win is not None:
            gpu = np.isin(m.kind[hit], GPU_KINDS)
            inside[gpu] = win.gpu_in(m, hit[gpu])
            inside[~gpu] = win.cpu_in(m, hit[~gpu])
        evs.append(hit)
        pas.append(np.full(hit.size, pi, np.int64))
        ts.append(m.ts_ns[hit] + pt.offset)
        ins.append(inside)
    if not evs:
        z = np.zeros(0, np.int64)
        return z, z, z, np.zeros(0, bool)
    ev, pa, t, inside = (np.concatenate(x) for x in (evs, pas, ts, ins))
    o = np.lexsort((pa, t))
    return ev[o], pa[o], t[o], inside[o]


def nearest(t: np.ndarray, cursor: int) -> int:
    """The position in ``t`` (sorted, not empty) nearest ``cursor``, the earlier one on a tie."""
    i = int(np.searchsorted(t, cursor, side="left"))
    if i >= t.size or (i > 0 and cursor - int(t[i - 1]) <= int(t[i]) - cursor):
        i -= 1
    return max(i, 0)


class SearchState:
    """The search of a scene: the query, its matches by time (``matches``: events, ``parts``: their parts,
    ``inside``: in the analysed window) and the one shown (``pos``, -1 for none)."""

    def __init__(self) -> None:
        self.query = ""
        self.matches = np.zeros(0, dtype=np.int64)
        self.parts = np.zeros(0, dtype=np.int64)
        self.pos = -1
        self.inside = np.zeros(0, dtype=bool)
        #: the stack panel shows the match (its detail) rather than the selected gap's stack: from a search that
        #: found something, or n / N through its matches, until a gap is selected again or the search ends
        self.in_panel = False

    @property
    def stepping(self) -> bool:
        """Something matches: n / N step through the matches rather than the gaps."""
        return bool(self.query and self.matches.size)

    def run(self, parts, query: str, cursor: int) -> int:
        """The matches of ``query`` over ``parts`` (``find``); the one shown is the nearest ``cursor``. Returns
        how many."""
        self.query = query
        self.matches, self.parts, t, self.inside = find(parts, query)
        self.pos = nearest(t, cursor) if self.matches.size else -1
        self.in_panel = bool(self.matches.size)
        return int(self.matches.size)

    def current(self) -> tuple[int, int] | None:
        """(part, event) of the match shown, or None."""
        if 0 <= self.pos < self.matches.size:
            return int(self.parts[self.pos]), int(self.matches[self.pos])
        return None

    def step(self, d: int) -> None:
        """The match ``d`` away (round the ends)."""
        if self.matches.size:
            self.pos = (self.pos + d) % self.matches.size
            self.in_panel = True
