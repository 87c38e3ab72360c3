"""CUDA graph replays mapped to the eager run of the same work that the capture records beside them.

A replayed kernel's only link in a trace is the correlation of its ``cudaGraphLaunch``: no op, no shapes, no stack
(CUPTI records no kernels while a graph is captured, and the replay's kernels carry no node id on torch 2.11). So
``gapscope capture`` runs the step's eager reference once inside the profiled session, after the measured window,
inside a ``gapscope.graph_reference`` range (capture/recorder.py): the same kernels in the same order as the graphs
the step replays, each launched by its own op with its shapes and Python stack.

The map, per replay (one graph launch call) in launch order: its GPU work in the order it started (one stream: the
order the graph's nodes were captured) must appear, names and count equal, as one contiguous run of the reference's
GPU work (in launch order). Copies and memsets take part as what they are, not by name: a graph runs a small
device-to-device copy node as a kernel of the driver's (``memcpy32_post``) where the eager run has a ``Memcpy DtoD``,
so a copy is one token ("a copy") on both sides, a memset another. The first such run at or after where the previous
replay's run ended is taken (a step that replays several graphs maps them in order; the next step starts again from
the reference's start); a replay with no such run anywhere is a mismatch and says where it differs: nothing is
guessed. A mapped kernel gets its reference kernel's op (``op_of``), hence the op's shapes, floor and stack (the
reference kernel's launch, ``launch_of``; the kernel itself, ``reference_of``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..trace.model import Kind, TraceModel
from .intervals import isin, uniq

#: the capture's record_function range around the eager reference run (capture/recorder.REFERENCE_RANGE)
REFERENCE_RANGE = "gapscope.graph_reference"

_KERNEL = int(Kind.KERNEL)
_ANNOTATION = int(Kind.ANNOTATION)
_WORK = (int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET))
#: kernels the driver runs for a graph's copy and memset nodes (``memcpy32_post``): a copy or a memset, not a kernel
_NODE_COPY = re.compile(r"^memcpy\d*_\w+$")
_NODE_SET = re.compile(r"^memset\d*_\w+$")
_COPY, _SET = -1, -2  # the tokens of a copy and a memset in the sequences compared


@dataclass(frozen=True)
class ReplayMatch:
    """One graph launch call and how its kernels map onto the reference run."""

    launch: int  # the graph launch call (event index)
    kernels: int  # kernels it launched
    status: str  # "mapped" | "mismatch" | "no-reference"
    ref_start: int = -1  # position of its first kernel in the reference's kernel sequence (mapped only)
    detail: str = ""  # a mismatch: where the replay and the reference differ


@dataclass(frozen=True)
class GraphMap:
    """Every replayed kernel of a trace and the reference kernel it maps to (-1: none)."""

    kernels: np.ndarray  # int64: GPU work (kernels, copies, memsets) launched by a graph launch call, sorted
    ref: np.ndarray  # int64: for each, the reference's GPU work it maps to (event index), or -1
    replays: tuple  # ReplayMatch per graph launch call, in launch order
    reference_kernels: int = 0  # kernels launched inside the reference ranges
    reference_runs: int = 0  # reference ranges in the trace

    @property
    def has_replays(self) -> bool:
        return self.kernels.size > 0

    def reference_of(self, events) -> np.ndarray:
        """Per event: the reference kernel a replayed kernel maps to, else -1."""
        ev = np.asarray(events, np.int64)
        if self.kernels.size == 0 or ev.size == 0:
            return np.full(ev.shape, -1, np.int64)
        pos = np.minimum(np.searchsorted(self.kernels, ev), self.kernels.size - 1)
        return np.where(self.kernels[pos] == ev, self.ref[pos], -1)

    def _through_reference(self, column: np.ndarray, events) -> np.ndarray:
        """``column`` (an event-indexed array of the model) per event, read at the reference kernel for a mapped
        replayed kernel."""
        ev = np.asarray(events, np.int64)
        out = column[ev].astype(np.int64)
        r = self.reference_of(ev)
        hit = r >= 0
        out[hit] = column[r[hit]]
        return out

    def op_of(self, model: TraceModel, events) -> np.ndarray:
        """Per event: its launching op (``model.op``), the reference kernel's op for a mapped replayed kernel."""
        return self._through_reference(model.op, events)

    def launch_of(self, model: TraceModel, events) -> np.ndarray:
        """Per event: the launch call whose thread and time give its stack: the reference kernel's launch for a
        mapped replayed kernel, else the event's own launch (``model.launch``)."""
        return self._through_reference(model.launch, events)

    def mismatches(self) -> list[ReplayMatch]:
        return [r for r in self.replays if r.status == "mismatch"]


EMPTY = GraphMap(np.zeros(0, np.int64), np.zeros(0, np.int64), ())


def _tokens(model: TraceModel, ev: np.ndarray) -> np.ndarray:
    """What the map compares per GPU work item: a kernel's name id; ``_COPY`` for a copy (a ``Memcpy`` event or a
    graph copy node's driver kernel), ``_SET`` for a memset."""
    tok = model.name_id[ev].astype(np.int64)
    kind = model.kind[ev]
    lut = np.arange(len(model.names), dtype=np.int64)
    for n in uniq(tok[kind == _KERNEL]).tolist():
        nm = model.names[n]
        if nm.startswith("mem"):
            lut[n] = _COPY if _NODE_COPY.match(nm) else _SET if _NODE_SET.match(nm) else n
    out = lut[tok]
    out[kind == int(Kind.MEMCPY)] = _COPY
    out[kind == int(Kind.MEMSET)] = _SET
    return out


def _token_name(model: TraceModel, t: int) -> str:
    return "a copy" if t == _COPY else "a memset" if t == _SET else model.names[int(t)]


def _reference_kernels(model: TraceModel, k: np.ndarray, graph: np.ndarray) -> tuple[np.ndarray, int]:
    """The GPU work launched inside the reference ranges (not by a graph launch), in launch order; the ranges."""
    try:
        nid = model.names.index(REFERENCE_RANGE)
    except ValueError:
        return np.zeros(0, np.int64), 0
    rng = np.flatnonzero((model.name_id == nid) & (model.kind == _ANNOTATION))
    if rng.size == 0:
        return np.zeros(0, np.int64), 0
    own = k[~graph]
    L = model.launch[own]
    inside = np.zeros(own.size, bool)
    for r in rng.tolist():
        t0, t1, tr = int(model.ts_ns[r]), int(model.ts_ns[r] + model.dur_ns[r]), int(model.track[r])
        inside |= (model.track[L] == tr) & (model.ts_ns[L] >= t0) & (model.ts_ns[L] <= t1)
    ref = own[inside]
    o = np.lexsort((model.ts_ns[ref], model.ts_ns[model.launch[ref]]))
    return ref[o], int(rng.size)


def _find(seq: np.ndarray, block: np.ndarray, start: int) -> int:
    """The first position >= ``start`` where ``block`` occurs in ``seq`` as a contiguous run, else -1."""
    m = block.size
    if m == 0 or m > seq.size:
        return -1
    cand = np.flatnonzero(seq[start:seq.size - m + 1] == block[0]) + start
    cand = cand[seq[cand + m - 1] == block[-1]]  # the last kernel too, before comparing whole runs
    for c in cand.tolist():
        if np.array_equal(seq[c:c + m], block):
            return c
    return -1


def _differ(model: TraceModel, seq: np.ndarray, block: np.ndarray, start: int) -> str:
    """Where a replay's kernels and the reference's differ, read from ``start`` (or where its first kernel is)."""
    n, m = seq.size, block.size
    hits = np.flatnonzero(seq[start:] == block[0]) + start if start < n else np.zeros(0, np.int64)
    if hits.size == 0:
        hits = np.flatnonzero(seq == block[0])
    if hits.size == 0:
        return (f"its first kernel `{_token_name(model, int(block[0]))}` is not among the reference's {n} "
                f"(the replay has {m})")
    at = int(hits[0])
    have = seq[at:at + m]
    same = int(np.argmin(have == block[:have.size])) if not np.array_equal(have, block[:have.size]) else have.size
    if same >= have.size:  # the reference ends first
        return (f"the replay has {m} kernels, the reference only {n - at} from the matching start (kernel {at}); "
                f"the first {same} agree")
    return (f"the replay has {m} kernels; from the reference's kernel {at} the first {same} agree, then the replay "
            f"has `{_token_name(model, int(block[same]))}` where the reference has "
            f"`{_token_name(model, int(have[same]))}`")


def graph_map(model: TraceModel, flags: dict) -> GraphMap:
    """Map every replayed kernel of ``model`` to the reference run's kernels (see the module's docstring)."""
    if not flags["graph_launch"].any():  # no graph launch call in the trace: nothing to map
        return EMPTY
    k = np.flatnonzero(isin(model.kind, _WORK) & (model.launch >= 0))
    if k.size == 0:
        return EMPTY
    L = model.launch[k]
    graph = flags["graph_launch"][model.name_id[L]]
    if not graph.any():
        return EMPTY
    rk = k[graph]
    ref_k, runs = _reference_kernels(model, k, graph)
    if ref_k.size == 0:  # nothing to map to: every replay says so
        RL = model.launch[rk]
        la, first, cnt = np.unique(RL, return_index=True, return_counts=True)
        o = np.argsort(model.ts_ns[la], kind="stable")
        return GraphMap(rk, np.full(rk.size, -1, np.int64),
                        tuple(ReplayMatch(int(la[i]), int(cnt[i]), "no-reference") for i in o.tolist()), 0, runs)
    ref_names = _tokens(model, ref_k)
    out_ref = np.full(rk.size, -1, np.int64)
    # replays in launch order, each one's kernels in the order they started (then by stream)
    RL = model.launch[rk]
    o = np.lexsort((model.track[rk], model.ts_ns[rk], model.ts_ns[RL], RL))
    rk_o, RL_o = rk[o], RL[o]
    starts = np.flatnonzero(np.r_[True, RL_o[1:] != RL_o[:-1]])
    ends = np.r_[starts[1:], RL_o.size]
    order = np.argsort(model.ts_ns[RL_o[starts]], kind="stable")
    pos_of = np.searchsorted(rk, rk_o)  # rk is sorted (flatnonzero)
    tokens_o = _tokens(model, rk_o)
    replays = []
    cursor = 0
    for i in order.tolist():
        a, b = int(starts[i]), int(ends[i])
        launch = int(RL_o[a])
        block = tokens_o[a:b]
        at = _find(ref_names, block, cursor)
        if at < 0 and cursor > 0:  # a new step: start over from the reference's start
            at = _find(ref_names, block, 0)
        if at < 0:
            replays.append(ReplayMatch(launch, b - a, "mismatch", -1, _differ(model, ref_names, block, cursor)))
            continue
        out_ref[pos_of[a:b]] = ref_k[at:at + (b - a)]
        cursor = at + (b - a)
        replays.append(ReplayMatch(launch, b - a, "mapped", at))
    return GraphMap(rk, out_ref, tuple(replays), int(ref_k.size), runs)


@dataclass(frozen=True)
class GraphCoverage:
    """What the analysis window's replayed kernels got from the map: their time with an op and with a floor."""

    replays: int  # graph launch calls whose kernels are in the window
    kernels: int  # replayed kernels in the window
    kernel_ns: int  # their time
    mapped: int  # of them, mapped to a reference kernel
    mapped_ns: int
    floored_ns: int  # time of the mapped ones whose op call has a floor (its own or on its op's row)
    mismatched: int  # replays (in the window) the map could not place
    reference_runs: int
    details: tuple = ()  # the mismatches' details (at most a few)

    @property
    def mapped_pct(self) -> float:
        return 100.0 * self.mapped_ns / self.kernel_ns if self.kernel_ns else 0.0

    @property
    def floored_pct(self) -> float:
        return 100.0 * self.floored_ns / self.kernel_ns if self.kernel_ns else 0.0

    def text(self) -> str:
        """One sentence for the kernels table."""
        r = "replay" if self.replays == 1 else "replays"
        head = f"Graph replays: {self.kernels} kernels from {self.replays} {r}"
        if not self.reference_runs:
            return (head + "; no eager reference run in the trace, so their ops, shapes and floors are unknown "
                    "(gapscope capture records one when the step carries `gapscope_reference`).")
        out = (head + f"; {self.mapped} mapped by order and name to the kernels of the eager reference run "
               f"({self.mapped_pct:.0f}% of their time; {self.floored_pct:.0f}% has a floor)")
        if self.mismatched:
            out += (f"; {self.mismatched} replay{'s' if self.mismatched != 1 else ''} not mapped: "
                    + "; ".join(self.details))
        return out + "."

    def entry(self) -> dict:
        """The JSON report's ``graphs`` entry."""
        return {"replays": self.replays, "kernels": self.kernels, "kernel_us": round(self.kernel_ns / 1e3, 3),
                "mapped": self.mapped, "mapped_us": round(self.mapped_ns / 1e3, 3),
                "mapped_pct": round(self.mapped_pct, 2), "floored_us": round(self.floored_ns / 1e3, 3),
                "floored_pct": round(self.floored_pct, 2), "mismatched_replays": self.mismatched,
                "reference_runs": self.reference_runs, "mismatches": list(self.details)}


def coverage(model: TraceModel, gm: GraphMap, cf, window=None) -> GraphCoverage | None:
    """The window's replayed kernels: how many and how much of their time got an op and a floor (``cf``: the
    analysis' call floors, activity.call_floors); None without replays in the window."""
    if not gm.has_replays:
        return None
    k, ref = gm.kernels, gm.ref
    ker = model.kind[k] == _KERNEL  # the kernels table's rows (a graph's copies are on the copies table)
    k, ref = k[ker], ref[ker]
    inw = np.ones(k.size, bool) if window is None else window.gpu_in(model, k)
    k, ref = k[inw], ref[inw]
    if k.size == 0:
        return None
    dur = model.dur_ns[k].astype(np.int64)
    mapped = ref >= 0
    pos = np.minimum(np.searchsorted(cf.k, k), max(cf.k.size - 1, 0))
    inf = (cf.k.size > 0) & (cf.k[pos] == k) if cf.k.size else np.zeros(k.size, bool)
    has = np.zeros(k.size, bool)
    has[inf] = cf.has[pos[inf]] & (cf.single[pos[inf]] | cf.multi[pos[inf]])
    launches = set(model.launch[k].tolist())
    bad = [r for r in gm.replays if r.status == "mismatch" and r.launch in launches]
    return GraphCoverage(len(launches), int(k.size), int(dur.sum()), int(mapped.sum()), int(dur[mapped].sum()),
                         int(dur[mapped & has].sum()), len(bad), gm.reference_runs,
                         tuple(f"{r.kernels} kernels: {r.detail}" for r in bad[:3]))
