"""Autotuners benchmarking inside the step (``Tuning``), recognised from the trace.

* **cuDNN** (``torch.backends.cudnn.benchmark = True``): the first call of a convolution with a new input shape
  tries the algorithms one after the other, each as its own trial kernels timed between events, with
  ``cudaDeviceSynchronize`` / ``cudaEventSynchronize`` between them, workspace allocations and memsets, then runs
  the fastest. In the trace: one convolution op call (its name holds ``conv``, ``cudnn`` or ``miopen``) that
  synchronises with the GPU at least ``autotune_min_syncs`` times inside itself and launches at least
  ``autotune_min_items`` GPU items. The real run is what it launches after its last synchronisation; the trials are
  everything before. One algorithm's pipeline (a layout transform, the convolution, the transform back; an FFT or a
  Winograd convolution's few kernels) never waits for the GPU inside the op.
* **Triton** (a kernel's ``@triton.autotune`` configs, Inductor's ``max-autotune``): a Python frame of the
  benchmarking (``Autotuner._bench``, ``triton.testing.do_bench``, Inductor's ``benchmark_all_configs`` /
  ``autotune_to_one_config``, its ``select_algorithm`` benchmarks) that launches at least ``autotune_min_items``
  GPU items: every item inside it is a trial; the real launch follows it.

cuBLASLt's heuristics pick an algorithm on the host without running trials: nothing in a trace tells them apart
from an ordinary call, so they are not looked for. The result is a property of the trace (and the two
thresholds), kept on the model for the next analysis of it."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..trace.model import Kind, TrackKind
from .intervals import member, name_ids, uniq

#: op names that autotune with trial runs (cuDNN's and MIOpen's convolutions)
TUNED_OP = re.compile(r"conv|cudnn|miopen", re.I)
#: Python frames that benchmark configurations of a Triton kernel or an Inductor choice
TUNE_FRAME = re.compile(
    r"(?:^|/)triton/runtime/autotuner\.py\(\d+\): (?:_bench|prune_configs|benchmark)"
    r"|(?:^|/)triton/testing\.py\(\d+\): do_bench"
    r"|(?:^|/)_inductor/runtime/triton_heuristics\.py\(\d+\): (?:benchmark_all_configs|autotune_to_one_config|bench)$"
    r"|(?:^|/)_inductor/select_algorithm\.py\(\d+\): (?:benchmark_choices|benchmark_example_value|do_autotuning)"
    r"|(?:^|/)_inductor/runtime/benchmarking\.py\(\d+\): benchmark_gpu"
)

_OP, _RT, _DRV, _PY = int(Kind.CPU_OP), int(Kind.RUNTIME), int(Kind.DRIVER), int(Kind.PYTHON)
_WORK = (int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET))


@dataclass(frozen=True)
class Tuning:
    """One row per autotuning call: the op call or frame (event), its thread, [start, end), the time from which its
    work is the real run (``keep_from``: the first launch after its last synchronisation; its end for a Triton
    benchmark), what tuned ("cuDNN", "Triton"), the trial items it launched before ``keep_from`` and its
    synchronising calls."""
    event: np.ndarray
    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    keep_from: np.ndarray
    kind: tuple
    trials: np.ndarray
    syncs: np.ndarray

    @property
    def n(self) -> int:
        return int(self.event.size)

    def select(self, keep) -> "Tuning":
        keep = np.asarray(keep)
        kinds = tuple(k for k, x in zip(self.kind, keep.tolist()) if x) if keep.dtype == bool else \
            tuple(self.kind[i] for i in keep.tolist())
        return Tuning(self.event[keep], self.thread[keep], self.start[keep], self.end[keep], self.keep_from[keep],
                      kinds, self.trials[keep], self.syncs[keep])

    def trial_items(self, m) -> np.ndarray:
        """The GPU items launched inside the calls before their real run (the trials)."""
        items = np.flatnonzero(member(m.kind, _WORK) & (m.launch >= 0))
        if items.size == 0 or self.n == 0:
            return np.zeros(0, np.int64)
        from .intervals import union

        L = m.launch[items]
        lt, lthr = m.ts_ns[L], m.track[L].astype(np.int64)
        out = np.zeros(items.size, bool)
        for t in uniq(self.thread).tolist():
            s, e = union(self.start[self.thread == t], self.keep_from[self.thread == t])
            sel = np.flatnonzero(lthr == t)
            j = np.searchsorted(s, lt[sel], side="right") - 1
            out[sel] = (j >= 0) & (lt[sel] < e[np.maximum(j, 0)]) if s.size else False
        return items[out]


def _empty() -> Tuning:
    z = np.zeros(0, np.int64)
    return Tuning(z, z, z, z, z, (), z, z)


def tuning(model, flags, cfg) -> Tuning:
    """The trace's autotuning calls (see the module docstring), kept on the model per pair of thresholds."""
    key = (cfg.autotune_min_syncs, cfg.autotune_min_items)
    got = model.__dict__.get("_autotuning")
    if got is not None and got[0] is model.ts_ns and got[1] == key:
        return got[2]
    t = _tuning(model, flags, cfg)
    model.__dict__["_autotuning"] = (model.ts_ns, key, t)
    return t


def _launches(m) -> dict:
    """thread -> sorted start times of its calls that launched GPU work."""
    L = uniq(m.launch[m.launch >= 0])
    return {int(t): np.sort(m.ts_ns[L[m.track[L] == t]]) for t in uniq(m.track[L]).tolist()} if L.size else {}


def _tuning(m, flags, cfg) -> Tuning:
    if m.n == 0:
        return _empty()
    nid = name_ids(m)
    cpu = np.array([t.kind is TrackKind.CPU for t in m.tracks] + [False], bool)
    lts = _launches(m)
    rows = []
    # cuDNN: the synchronising calls inside each convolution op call
    syn = np.flatnonzero(flags["sync_rt"][nid] & member(m.kind, (_RT, _DRV)) & cpu[m.track])
    per_op: dict[int, list[int]] = {}
    for i in syn.tolist():
        p = int(m.parent[i])
        while p >= 0 and int(m.kind[p]) != _OP:
            p = int(m.parent[p])
        if p >= 0 and TUNED_OP.search(m.names[m.name_id[p]]):
            per_op.setdefault(p, []).append(i)
    for op, ss in per_op.items():
        if len(ss) < cfg.autotune_min_syncs:
            continue
        t = int(m.track[op])
        s, e = int(m.ts_ns[op]), int(m.ts_ns[op] + m.dur_ns[op])
        lt = lts.get(t, np.zeros(0, np.int64))
        last = max(int(m.ts_ns[i] + m.dur_ns[i]) for i in ss)
        after = lt[(lt >= last) & (lt < e)]
        keep = int(after[0]) if after.size else e
        trials = int(np.searchsorted(lt, keep, side="left") - np.searchsorted(lt, s, side="left"))
        if trials + int(after.size) < cfg.autotune_min_items:
            continue
        rows.append((op, t, s, e, keep, "cuDNN" if not re.search("miopen", m.names[m.name_id[op]], re.I) else "MIOpen",
                     trials, len(ss)))
    # Triton / Inductor: the outermost benchmarking frames
    py = np.flatnonzero((m.kind == _PY) & cpu[m.track])
    if py.size:
        tune = np.array([bool(TUNE_FRAME.search(n)) for n in m.names], bool)
        fr = py[tune[m.name_id[py]]]
        for t in uniq(m.track[fr]).tolist():
            f = fr[m.track[fr] == t]
            f = f[np.lexsort((-m.dur_ns[f], m.ts_ns[f]))]
            reach = -1
            lt = lts.get(int(t), np.zeros(0, np.int64))
            for i in f.tolist():
                s, e = int(m.ts_ns[i]), int(m.ts_ns[i] + m.dur_ns[i])
                if s < reach:
                    continue  # inside an outer benchmarking frame
                reach = e
                trials = int(np.searchsorted(lt, e, side="left") - np.searchsorted(lt, s, side="left"))
                if trials < cfg.autotune_min_items:
                    continue
                st = syn[(m.track[syn] == t) & (m.ts_ns[syn] >= s) & (m.ts_ns[syn] < e)]
                rows.append((i, int(t), s, e, e, "Triton", trials, int(st.size)))
    if not rows:
        return _empty()
    rows.sort(key=lambda r: (r[2], r[1]))
    c = list(zip(*rows))
    a = [np.array(x, np.int64) for x in c[:5]]
    return Tuning(a[0], a[1], a[2], a[3], a[4], tuple(c[5]), np.array(c[6], np.int64), np.array(c[7], np.int64))
