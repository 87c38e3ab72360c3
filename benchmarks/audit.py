#!/usr/bin/env python3
"""audit.py: an independent checker of gapscope's JSON report against the raw trace events.

    python3 benchmarks/audit.py TRACE...              # audit these traces
    python3 benchmarks/audit.py --all                 # every trace in traces/ and ../shared/traces/
    python3 benchmarks/audit.py --report-cmd "python3 -m gapscope" --cwd OTHER_CHECKOUT TRACE
    python3 benchmarks/audit.py --ranks RANK0_TRACE RANK1_TRACE...   # the ranks of one job, reported together

For each trace it runs ``<report-cmd> report --json --top 100000 TRACE`` as a subprocess (the report
under test, by default this checkout's ``python3 -m gapscope``), parses the JSON and recomputes every number
and name it can from the raw Kineto events, read here with nothing but the standard library
(``json``/``gzip``). Nothing is imported from ``tui/`` and no code is shared with it: the point is
two independent readings of the same events. Files a strict JSON parser rejects (the known-broken
traces: an unescaped quote, a bare ``inf``) are skipped with a note.

Times: ``ts``/``dur`` are µs floats; they become integer ns as ``round(x * 1000)`` (Kineto writes three
decimals). Every comparison is in ns; a reported µs value rounded to 3 decimals may differ by 1 ns.
Durations quoted in sentences ("69.86 ms") are compared within half their last printed digit.

The window (``traces[].window.mode``): ``steps`` = per device, first .. last GPU op (kernel, memcpy,
memset) whose launch call (same ``correlation``; else its aten op by ``External id``; else the op's own
start against the step ranges) starts inside a CPU ``gapscope.step#k`` range; ``all`` = first .. last GPU
op of the device. GPU work is clipped to that window; CPU tables count calls starting inside a step
range (steps mode). Reported start times are relative to the window start (the earliest device's),
``traces[].origin_us`` when present.

What is checked (one line per mismatch, ``trace: claim: reported X, events say Y``):

* devices: window, kernel busy (union of kernel intervals over streams, clipped), copy busy, idle, idle %;
  streams: busy, idle, gap count, largest gap, kernel count; the window mode; ``origin_us``.
* gaps: the list is every maximal interval of the device window with no kernel on any stream; each
  listed gap's start and duration, the next kernel's name, its launch call (by correlation) and its op
  (by External id, or an aten op around the launch); cause counts add up to the gap count and cause
  totals to the idle time (and to the listed gaps of each cause).
* tables: kernels (count, total, avg, pct, avg >= floor and total >= floor x count, the omitted rows
  smaller than the listed ones), syncs, copies (count, bytes, total, GB/s), allocator (count, total);
  synchronising and allocator calls of the trace missing from their table (HIP twins included); a sync
  nested inside another listed sync (one synchronisation counted twice).
* CUDA graph replays (``replay_map``, my own reading): a replay's GPU items, in start order, are one contiguous run of
  the eager reference run's GPU work (``gapscope.graph_reference``) by name, a graph's ``memcpy32_post`` standing for
  a ``Memcpy DtoD``; a mapped kernel's op is its reference item's (``kernel_call``): the floors and the op patterns
  count it for that op, one call per (replay, op).
* collectives (NCCL/RCCL kernels by name: count, time, the part no compute kernel overlaps) and launches
  (kernels linked to a launch call, distinct calls, their cost, kernels shorter than their launch, the
  median launch-to-start delay, calls by name).
* findings: the title's count and time, gaps, idle, largest gap vs the examples, share of the window,
  each example is a real gap (start, duration, next kernel, op), the per-cause sums of findings vs the
  listed gaps, the short-gap finding, "already queued" examples, the pageable-copy findings.
* explanations (of every listed gap): "GPU idle D", "W before `op` was launched" (launch - gap start),
  "X of W" (X <= W), "held the CPU for X" vs the named frame's own (exclusive) time in that interval on
  the launching thread, "recorded nothing for X" vs the thread's unrecorded time, allocator and sync
  time vs those calls there, a named copy exists.
* the two stacks of every listed gap: ``stack_at_idle`` (the launching thread's events open at the gap start,
  outermost first by my own nesting) and ``launch_stack`` (open at the launch call's start).
* ``host`` objects (when the report has them): each frame's own time in [from, to) on that thread,
  recomputed from its python_function / cpu_op / runtime events (each instant to the one open that started last,
  whatever its kind: a frame that starts inside an op is nested in it); the credited frame has the most own
  time (built-ins included) and its time matches within 1 µs.
* ``devices[].verdict`` (when present): kernels linked to a cudaGraphLaunch / hipGraphLaunch and the
  number of those launches.
* stalls (``examples[].held_by``): the one call, op or range named holds most of [gap start, launch] on the
  launching thread (the next kernel's launch call: most of the gap) and at least 100 µs, with the reported own
  time, by my own sweep (``holder_in``: each piece to the innermost op, runtime call or Python frame, the one
  that started last, else range); and no ``launch`` example is held that way by one call or op.
* a sync finding's fix, "remove the N synchronising calls in `frame`": N is the outermost synchronising calls
  starting inside that frame in the window (``sync_calls``).
* the graph fix's "it needs the N syncs of `frame` ... removed first: the host reads their values": per frame, the
  outermost synchronising calls of the window, each taken up to the ops enclosing it, inside which a device-to-host
  copy was launched on the same thread, by the innermost user frame open at its start (``host_reads``, with my own
  rule of what is user code: ``is_user_frame``); a graph fix with a saving and no such clause has none.
* the plan (``check_plan``): ranks 1..n by saving with the minor actions last, each severity the band of its
  saving as plan.md writes it, each finding in one action with its rank and severity, an action's gaps within its
  findings', its frame a Python frame of the trace, prerequisites that unlock the action needing them, what it all
  buys together at least the best action and less than the step, no finding without an action [high].
* ``frame_whatifs``: each frame's calls in the window, its inclusive host time per step (per thread the union of
  its python_function calls starting in a step range) and the GPU work launched under it (launch call by
  correlation inside one of its calls; the item overlapping its device's window): ``check_frames``.
* the allocator fix's after-effect ("the host work they slowed right after them (X per step, recorded)"):
  each event's own time on the thread (the innermost op, runtime call or Python frame), the events within
  200 µs after an allocator call of the frame against the median of the same name away from the calls
  (``after_effect_ns``).

* ``--pair A B`` (before/after): ``comparison.unprofiled`` of ``report --json A B`` against each trace's own
  metadata (``gapscope`` → ``unprofiled``, ``active``, ``profiled_us``): per-step median, p25, p75 (the
  window's figure divided by ``active``), the change in µs and %, the verdict by its rule (B's p25–p75 wholly
  below A's: faster; wholly above: slower; overlapping: no clear change), the basis (un-profiled only when both
  traces have the times), whether the distortions (profiled / un-profiled median) differ by more than 1.15x;
  and that the Markdown report (``report A B``) opens "What changed" with the same verdict.
* with ``--ranks`` (the traces of one job, reported together): each late rank's calls (it arrived last after
  the clock alignment, start-up calls aside), their count, the waits it caused, and the comparison interval
  of blame: per compared call, from the end of the previous collective on the issuing thread to this launch, the
  late rank's total against the median of the other ranks' (``audit_ranks``); the clock offsets.

Each trace ends with a summary (claims checked, mismatches, not checkable). Exit status 1 when any
mismatch was found, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import ROUND_HALF_EVEN, Decimal

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOL_NS = 1  # a µs value rounded to 3 decimals
MIN_LISTED_NS = 2000  # default threshold below which gaps are counted but not listed (read from the title)

GPU_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
            "gpu_memset": "memset", "Memset": "memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "Driver", "hip_runtime"}
OP_CATS = {"cpu_op", "Operator"}
PY_CATS = {"python_function"}
ANN_CATS = {"user_annotation"}
STEP_RE = re.compile(r"^gapscope\.step#\d+$")
COLL_KERNEL = re.compile(r"^(ncclDevKernel|ncclKernel|rccl|nccl\w*Kernel)")
GRAPH_LAUNCH = re.compile(r"^(cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch)")

# my own lists (written from the CUDA / HIP API docs, not copied from gapscope/analysis/names.py)
SYNC_NAMES = {
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
    "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipCtxSynchronize",
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyPeer", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol",
    "cuMemcpy", "cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cuMemcpyHtoD", "cuMemcpyHtoD_v2",
    "hipMemcpy", "hipMemcpyWithStream", "hipMemcpyDtoH", "hipMemcpyHtoD", "hipMemcpy2D", "hipMemcpyPeer",
    "hipMemcpyFromSymbol", "hipMemcpyToSymbol",
    "aten::item", "aten::_local_scalar_dense", "aten::tolist", "aten::is_nonzero",
}
ALLOC_NAMES = {
    "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaFreeHost", "cudaMallocHost", "cudaMallocManaged",
    "cuMemAlloc", "cuMemAlloc_v2", "cuMemFree", "cuMemFree_v2", "cuMemHostAlloc", "cuMemFreeHost",
    "hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree", "hipMallocManaged", "hipExtMallocWithFlags",
}

_DUR_RE = re.compile(r"(-?\d+(?:\.\d+)?) (s|ms|µs|ns)\b")
_UNIT = {"s": 1e9, "ms": 1e6, "µs": 1e3, "ns": 1.0}


def to_ns(x) -> int:
    """µs -> integer ns. Integers (old epoch-µs traces, ~1.7e15) are converted exactly; floats as
    round(x * 1000), which is exact for Kineto's 3 decimals while x * 1000 < 2**53; numbers too long for
    that are parsed as Decimal by read_trace and converted exactly here."""
    if isinstance(x, int) and not isinstance(x, bool):
        return x * 1000
    if isinstance(x, Decimal):
        return int((x * 1000).to_integral_value(ROUND_HALF_EVEN))
    return int(round(float(x) * 1000))


def _parse_float(s: str):
    # a float with more significant digits than a double holds exactly (epoch µs with decimals) stays exact
    return Decimal(s) if len(s) > 15 and "e" not in s.lower() else float(s)


def us(n) -> str:
    return f"{n / 1e3:.3f} µs"


def parse_dur(num: str, unit: str) -> tuple[float, float]:
    """('69.86', 'ms') -> (value in ns, tolerance in ns: half the last printed digit + 1 ns)."""
    dec = len(num.split(".")[1]) if "." in num else 0
    return float(num) * _UNIT[unit], 0.5 * 10 ** (-dec) * _UNIT[unit] + 1.0


def _int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v and abs(v) < 2 ** 62:
        return int(v)
    if isinstance(v, str):
        m = re.search(r"-?\d+", v)
        return int(m.group()) if m else None
    return None


# ----------------------------------------------------------------------------------------------- trace
class Ev:
    __slots__ = ("cat", "name", "s", "e", "pid", "tid", "args", "kind")

    def __init__(self, cat, name, s, e, pid, tid, args, kind):
        self.cat, self.name, self.s, self.e, self.pid, self.tid, self.args, self.kind = \
            cat, name, s, e, pid, tid, args, kind

    @property
    def dur(self):
        return self.e - self.s


class Trace:
    """The raw events, indexed the few ways the checks need."""

    def __init__(self, doc):
        events = doc if isinstance(doc, list) else (doc.get("traceEvents") or [])
        self.gpu: list[Ev] = []  # kernels, memcpys, memsets; .pid = device, .tid = stream
        self.threads: dict[tuple, list[Ev]] = defaultdict(list)  # (pid, tid) -> CPU X events (sorted)
        self.by_corr: dict[int, Ev] = {}  # correlation -> runtime/driver call
        self.op_by_ext: dict[int, Ev] = {}
        self.steps: list[tuple[int, int]] = []
        self.gpu_steps: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for e in events:
            if not isinstance(e, dict) or e.get("ph") != "X":
                continue
            try:
                s = to_ns(e["ts"])
                d = to_ns(e.get("dur", 0) or 0)
            except (KeyError, TypeError, ValueError, OverflowError):
                continue
            d = max(d, 0)
            cat = e.get("cat") or ""
            name = e.get("name") if isinstance(e.get("name"), str) else str(e.get("name"))
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            kind = GPU_CATS.get(cat)
            if kind is not None:
                dev = _int(args.get("device"))
                if dev is None:
                    dev = _int(e.get("pid"))
                st = _int(args.get("stream"))
                if st is None:
                    st = _int(e.get("tid"))
                if dev is None or dev < 0:
                    continue
                self.gpu.append(Ev(cat, name, s, s + d, dev, st, args, kind))
                continue
            if cat == "gpu_user_annotation" and STEP_RE.match(name):
                dev = _int(args.get("device"))
                dev = _int(e.get("pid")) if dev is None else dev
                if dev is not None:
                    self.gpu_steps[dev].append((s, s + d))
                continue
            if cat in RUNTIME_CATS:
                kind = "runtime"
            elif cat in OP_CATS:
                kind = "op"
            elif cat in PY_CATS:
                kind = "py"
            elif cat in ANN_CATS:
                kind = "ann"
            elif not cat and isinstance(e.get("pid"), str) and e.get("pid") == "CPU functions":
                kind = "op"
            else:
                continue
            ev = Ev(cat, name, s, s + d, e.get("pid"), e.get("tid"), args, kind)
            self.threads[(str(e.get("pid")), str(e.get("tid")))].append(ev)
            if kind == "runtime":
                c = _int(args.get("correlation"))
                if c is not None and c not in self.by_corr:
                    self.by_corr[c] = ev
            elif kind == "op":
                x = _int(args.get("External id"))
                if x is not None and x not in self.op_by_ext:
                    self.op_by_ext[x] = ev
            elif kind == "ann" and STEP_RE.match(name):
                self.steps.append((s, s + d))
        for evs in self.threads.values():
            evs.sort(key=_nest_key)
        self.thread_of = {}
        self.pos_of = {}  # id(event) -> its place in its thread's list (callers before callees)
        for key, evs in self.threads.items():
            for k, v in enumerate(evs):
                self.thread_of[id(v)] = key
                self.pos_of[id(v)] = k
        self.steps = _union(self.steps)
        self._trees = {}
        self._starts = {}
        self._maxdur = {}

    # -------------------------------------------------------------- links
    def launch(self, g: Ev):
        c = _int(g.args.get("correlation"))
        return self.by_corr.get(c) if c is not None else None

    def ops_of(self, g: Ev) -> set:
        """Names of the aten ops that can be said to have launched GPU op g."""
        out = set()
        x = _int(g.args.get("External id"))
        if x is not None and x in self.op_by_ext:
            out.add(self.op_by_ext[x].name)
        L = self.launch(g)
        if L is not None:
            x = _int(L.args.get("External id"))
            if x is not None and x in self.op_by_ext:
                out.add(self.op_by_ext[x].name)
            for v in self.around(self.thread_of[id(L)], L.s, L.e):
                if v.kind == "op":
                    out.add(v.name)
        return out

    def around(self, key, s, e):
        """CPU events of thread ``key`` that contain [s, e]."""
        evs = self.threads.get(key, [])
        st = self._starts.get(key)
        if st is None:
            st = self._starts[key] = [v.s for v in evs]
            self._maxdur[key] = max((v.dur for v in evs), default=0)
        lo = bisect.bisect_left(st, s - self._maxdur[key])
        hi = bisect.bisect_right(st, s)
        return [v for v in evs[lo:hi] if v.s <= s and v.e >= e]

    def overlapping(self, key, a, b, kinds=None):
        evs = self.threads.get(key, [])
        if key not in self._starts:
            self.around(key, 0, 0)
        st = self._starts[key]
        lo = bisect.bisect_left(st, a - self._maxdur[key])
        hi = bisect.bisect_left(st, b)
        return [v for v in evs[lo:hi] if v.e > a and v.s < b and (kinds is None or v.kind in kinds)]

    def has_sync_inside(self, v) -> bool:
        """An aten op with a synchronising call inside it (``aten::to`` -> ``cudaStreamSynchronize``)."""
        key = self.thread_of[id(v)]
        return any(o.name in SYNC_NAMES for o in self.overlapping(key, v.s, v.e) if o.s >= v.s and o.e <= v.e)

    def ann_names(self, key) -> set:
        c = self.__dict__.setdefault("_ann", {})
        if key not in c:
            c[key] = {v.name for v in self.threads.get(key, []) if v.kind == "ann"}
        return c[key]

    def in_steps(self, t) -> bool:
        return _inside(self.steps, t)

    # ----------------------------------------------------------- own time
    def self_times(self, key, a, b) -> dict:
        """Own (exclusive) time of each name in [a, b) on thread ``key``: each instant goes to the innermost
        python_function / cpu_op / runtime event open there, the one that started last (``_nest_key``: same start,
        the shorter; the same interval, the callee), whatever its kind: a Python frame that starts inside an op
        (``TorchDynamo Cache Lookup`` evaluating guards) is nested in it and takes its time. An event that starts
        inside another and outlives it (a ``Pregraph bytecode`` range opened inside ``__enter__``) is the innermost
        from its start on, not a child clipped to the other's end. record_function ranges are transparent."""
        # record_function ranges cross Python frames (a range opens inside __enter__ and closes inside
        # __exit__), so they are no part of the Python call tree: transparent there. Only where the thread
        # recorded no Python frame at all (no stacks) are the ranges the tree's outer nodes.
        evs = self.overlapping(key, a, b, ("py", "op", "runtime"))
        if not any(v.kind == "py" for v in evs):
            evs = self.overlapping(key, a, b, ("ann", "op", "runtime"))
        # every event of the interval is named, with no own time when others covered all of it
        own = Counter({v.name: 0 for v in evs if not (v.kind == "ann" and _STEP.match(v.name))})
        evs = sorted((v for v in evs if v.e > v.s), key=_nest_key)
        cuts = sorted({a, b} | {t for v in evs for t in (v.s, v.e) if a < t < b})
        open_ = []  # by _nest_key: the last one still open is the innermost; ended ones are dropped at the top
        i = 0
        for t, t2 in zip(cuts, cuts[1:]):
            while i < len(evs) and evs[i].s <= t:
                open_.append(evs[i])
                i += 1
            while open_ and open_[-1].e <= t:
                open_.pop()
            if not open_:
                continue
            v = open_[-1]
            if v.kind == "ann" and _STEP.match(v.name):
                continue  # a step range wraps a whole step: never named
            own[v.name] += t2 - t
        return own

    def covered(self, key, a, b, pred) -> int:
        """Length of [a, b) covered by the thread's events matching pred."""
        iv = [(max(v.s, a), min(v.e, b)) for v in self.overlapping(key, a, b) if pred(v)]
        return sum(e - s for s, e in _union(iv))


_RANK = {"py": 0, "ann": 1, "op": 2, "runtime": 3}


def _nest_key(v):
    """Order in which a thread's events nest: by start, the longer first; the same interval (integer µs) puts
    the caller first: a Python frame around the ops it calls, a range around ops, an op around its runtime
    calls, and within one kind the earlier call (Python ids and External ids are given in call order), not
    the file's order."""
    a = v.args
    seq = _int(a.get("Python id")) if v.kind == "py" else _int(a.get("External id")) if v.kind == "op" else None
    return (v.s, -v.e, _RANK[v.kind], seq if seq is not None else -1)


def _union(iv):
    out = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _inside(iv, t) -> bool:
    j = bisect.bisect_right([s for s, _ in iv], t) - 1
    return j >= 0 and t < iv[j][1]


def read_trace(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw.decode("utf-8", "replace"), parse_float=_parse_float)


# ----------------------------------------------------------------------------------------- the model
class Device:
    def __init__(self, dev, w0, w1, kernels, copies):
        self.dev, self.w0, self.w1 = dev, w0, w1
        self.kernels = kernels  # kernels overlapping the window (any duration), full extents
        self.copies = copies
        ks = [(max(k.s, w0), min(k.e, w1)) for k in kernels if k.e > k.s]
        self.busy_iv = _union(ks)
        self.busy = sum(e - s for s, e in self.busy_iv)
        cs = [(max(c.s, w0), min(c.e, w1)) for c in copies if c.e > c.s]
        self.copy_busy = sum(e - s for s, e in _union(cs))
        self.gaps = []  # (start, end)
        t = w0
        for s, e in self.busy_iv:
            if s > t:
                self.gaps.append((t, s))
            t = max(t, e)
        if w1 > t:
            self.gaps.append((t, w1))
        self.starting = defaultdict(list)  # kernel start -> kernels (dur > 0)
        for k in kernels:
            if k.e > k.s:
                self.starting[max(k.s, w0)].append(k)
        self.streams = {}
        for st in sorted({k.tid for k in kernels if k.e > k.s}, key=lambda x: (x is None, x)):
            iv = _union([(max(k.s, w0), min(k.e, w1)) for k in kernels if k.tid == st and k.e > k.s])
            busy = sum(e - s for s, e in iv)
            gl, t = [], w0
            for s, e in iv:
                if s > t:
                    gl.append(s - t)
                t = max(t, e)
            if w1 > t:
                gl.append(w1 - t)
            self.streams[st] = {"busy": busy, "gaps": len(gl), "largest": max(gl, default=0),
                                "kernels": sum(1 for k in kernels if k.tid == st and k.e > k.s)}

    @property
    def window(self):
        return self.w1 - self.w0


def build_devices(tr: Trace, mode: str):
    """mode 'steps' or 'all' -> ({device: Device}, mode actually used)."""
    by_dev = defaultdict(list)
    for g in tr.gpu:
        by_dev[g.pid].append(g)
    win = {}
    if mode == "steps" and tr.steps:
        for dev, gs in by_dev.items():
            sel = []
            for g in gs:
                L = tr.launch(g)
                if L is not None:
                    anchor = L.s
                else:
                    x = _int(g.args.get("External id"))
                    op = tr.op_by_ext.get(x) if x is not None else None
                    anchor = op.s if op is not None else None
                if anchor is not None:
                    ok = tr.in_steps(anchor)
                else:
                    iv = _union(tr.gpu_steps.get(dev, [])) or tr.steps
                    ok = _inside(iv, g.s)
                if ok:
                    sel.append(g)
            if sel:
                win[dev] = (min(g.s for g in sel), max(g.e for g in sel))
        if not win:
            mode = "all"
    else:
        mode = "all"
    if mode == "all":
        win = {dev: (min(g.s for g in gs), max(g.e for g in gs)) for dev, gs in by_dev.items()}
    out = {}
    for dev, (w0, w1) in sorted(win.items()):
        gs = by_dev[dev]

        def inwin(g):
            return g.s < w1 and (g.e > w0 or (g.e == g.s and g.s >= w0))

        ks = sorted((g for g in gs if g.kind == "kernel" and inwin(g)), key=lambda g: (g.s, -g.e))
        cs = [g for g in gs if g.kind != "kernel" and inwin(g)]
        out[dev] = Device(dev, w0, w1, ks, cs)
    return out, mode


def copy_label(name: str) -> str:
    m = re.match(r"^Memcpy\s+(\w+)\s*(?:\((\w+)\s*->\s*(\w+)\))?", name, re.I)
    if not m:
        return "Memset" if name.lower().startswith("memset") else name
    host = [x for x in (m.group(2), m.group(3)) if x and x.lower() not in ("device", "array")]
    return f"{m.group(1)} {host[-1]}" if host else m.group(1)


# ------------------------------------------------------------------------------------------- checking
class Audit:
    def __init__(self, label):
        self.label = label
        self.checked = 0
        self.mismatches: list[str] = []
        self.unchecked: Counter = Counter()

    def ok(self, cond: bool, claim: str, reported, events) -> bool:
        self.checked += 1
        if not cond:
            self.mismatches.append(f"{self.label}: {claim}: reported {reported}, events say {events}")
        return cond

    def eq_us(self, claim, rep_us, ns, tol=TOL_NS) -> bool:
        if rep_us is None:
            self.unchecked[claim.split(":")[0]] += 1
            return True
        return self.ok(abs(rep_us * 1000 - ns) <= tol + 1e-6, claim, f"{rep_us:.3f} µs", us(ns))

    def na(self, what, n=1):
        self.unchecked[what] += n


def audit_report(path: str, tr: Trace, rep: dict, label: str, whole: bool = False) -> Audit:
    """Check report ``rep`` (the parsed JSON of one trace) against the events of ``tr``. ``whole``: the report
    was asked for --whole-trace (else the measured steps are expected where the trace has them)."""
    A = Audit(label)
    tinfo = (rep.get("traces") or [{}])[0]
    mode_rep = ((tinfo.get("window") or {}).get("mode")) or "all"
    devs, mode = build_devices(tr, "all" if whole else "steps")
    if not A.ok(mode == mode_rep, "window mode", mode_rep, mode):
        devs, mode = build_devices(tr, mode_rep)  # check the rest against the window the report used
    origin = min((d.w0 for d in devs.values()), default=None)
    if "origin_us" in tinfo and origin is not None:
        A.ok(abs(to_ns(Decimal(repr(float(tinfo["origin_us"])))) - origin) <= 1, "traces[0].origin_us",
             tinfo["origin_us"], f"{origin / 1e3:.3f}")
    else:
        A.na("traces[].origin_us (absent)")
    if origin is not None and devs:
        span = max(d.w1 for d in devs.values()) - origin
        A.eq_us("trace window_us", tinfo.get("window_us"), span)

    # ------------------------------------------------------------------ devices and streams
    rep_devs = {d.get("device"): d for d in rep.get("devices", [])}
    A.ok(set(rep_devs) == set(devs), "devices", sorted(rep_devs), sorted(devs))
    for dev, D in devs.items():
        r = rep_devs.get(dev)
        if r is None:
            continue
        p = f"device {dev}"
        A.eq_us(f"{p} window_us", r.get("window_us"), D.window)
        A.eq_us(f"{p} kernel_busy_us", r.get("kernel_busy_us"), D.busy)
        A.eq_us(f"{p} copy_busy_us", r.get("copy_busy_us"), D.copy_busy)
        A.eq_us(f"{p} compute_idle_us", r.get("compute_idle_us"), D.window - D.busy)
        pct = 100.0 * (D.window - D.busy) / D.window if D.window else 0.0
        A.ok(abs(r.get("compute_idle_pct", -1) - pct) <= 0.0011, f"{p} compute_idle_pct",
             r.get("compute_idle_pct"), f"{pct:.3f}")
        verdict_check(A, tr, D, r)
    for s in rep.get("streams", []):
        D = devs.get(s.get("device"))
        st = D.streams.get(s.get("stream")) if D else None
        p = f"device {s.get('device')} stream {s.get('stream')}"
        if not A.ok(st is not None, f"{p} exists", "a stream with kernels", "no kernels on it in the window"):
            continue
        A.eq_us(f"{p} busy_us", s.get("busy_us"), st["busy"])
        A.eq_us(f"{p} idle_us", s.get("idle_us"), D.window - st["busy"])
        A.ok(s.get("gaps") == st["gaps"], f"{p} gaps", s.get("gaps"), st["gaps"])
        A.eq_us(f"{p} largest_gap_us", s.get("largest_gap_us"), st["largest"])
        A.ok(s.get("kernels") == st["kernels"], f"{p} kernels", s.get("kernels"), st["kernels"])

    # ------------------------------------------------------------------ gaps
    mine = {}
    for dev, D in devs.items():
        for g0, g1 in D.gaps:
            mine[(dev, g0 - origin)] = (g0, g1, D)
    n_mine = len(mine)
    rep_gaps = rep.get("gaps", [])
    A.ok(len(rep_gaps) == n_mine, "number of gaps listed (with --top 100000)", len(rep_gaps), n_mine)
    seen = set()
    for i, g in enumerate(rep_gaps):
        key = (g.get("device"), to_ns(g.get("start_us", 0)))
        hit = None
        for dk in (0, -1, 1):
            hit = mine.get((key[0], key[1] + dk))
            if hit:
                key = (key[0], key[1] + dk)
                break
        p = f"gap {i} (device {g.get('device')}, start {g.get('start_us')} µs)"
        if not A.ok(hit is not None, f"{p} start", f"{g.get('start_us')} µs",
                    "no gap starts there (nearest: %s)" % _nearest(mine, key, origin)):
            continue
        seen.add(key)
        g0, g1, D = hit
        A.eq_us(f"{p} dur_us", g.get("dur_us"), g1 - g0)
        check_next(A, tr, p, g0, g1, D, g.get("next_op") or {})
        if "explanation" in g:
            check_explanation(A, tr, p, g0, g1, D, g.get("next_op") or {}, g.get("explanation") or "")
        check_stacks(A, tr, p, g0, g1, D, g)
        check_host(A, tr, p, g.get("host"), origin)
    missing = [k for k in mine if k not in seen]
    if missing:
        big = max(missing, key=lambda k: mine[k][1] - mine[k][0])
        A.ok(False, "gaps missing from the list", f"{len(rep_gaps)} gaps",
             f"{len(missing)} more (largest: device {big[0]} at {big[1] / 1e3:.3f} µs, "
             f"{us(mine[big][1] - mine[big][0])})")
    # causes
    causes = rep.get("causes", {})
    idle = sum(D.window - D.busy for D in devs.values())
    A.ok(sum(c.get("count", 0) for c in causes.values()) == n_mine, "cause counts add up to the gap count",
         sum(c.get("count", 0) for c in causes.values()), n_mine)
    A.eq_us("cause totals add up to idle", round(sum(c.get("total_us", 0) for c in causes.values()), 3), idle,
            tol=len(causes))
    by_cause = defaultdict(lambda: [0, 0])
    for g in rep_gaps:
        key = (g.get("device"), to_ns(g.get("start_us", 0)))
        h = next((mine[(key[0], key[1] + dk)] for dk in (0, -1, 1) if (key[0], key[1] + dk) in mine), None)
        if h:
            by_cause[g.get("cause")][0] += 1
            by_cause[g.get("cause")][1] += h[1] - h[0]
    if len(rep_gaps) == n_mine:
        for c, v in causes.items():
            A.ok(v.get("count") == by_cause[c][0], f"causes.{c}.count vs the gaps listed with that cause",
                 v.get("count"), by_cause[c][0])
            A.eq_us(f"causes.{c}.total_us", v.get("total_us"), by_cause[c][1])

    check_tables(A, tr, rep, devs, mode)
    check_floors(A, tr, rep, devs)
    check_patterns(A, tr, rep, devs)
    check_collectives(A, tr, rep, devs)
    check_launches(A, tr, rep, devs)
    check_findings(A, tr, rep, devs, mine, origin)
    check_graph_fix(A, tr, rep, devs, mine, origin)
    check_graph_reads(A, tr, rep)
    check_frames(A, tr, rep, devs, mode)
    check_plan(A, tr, rep)
    return A


def _step_count(tr) -> int:
    """Steps in the window: distinct ``gapscope.step#k`` ranges, else distinct ``ProfilerStep#N``, else 1."""
    names = {v.name for evs in tr.threads.values() for v in evs if v.kind == "ann"}
    n = sum(1 for x in names if STEP_RE.match(x))
    return n or sum(1 for x in names if x.startswith("ProfilerStep#")) or 1


def frame_subtree(tr, frame, mode):
    """{thread: union of the Python frame's call intervals} over all its calls, and the same for the calls starting
    inside a step range (steps mode; all calls otherwise): the frame's whole subtree of host time."""
    every, inw = {}, {}
    for key, evs in tr.threads.items():
        calls = [(v.s, v.e) for v in evs if v.kind == "py" and v.name == frame]
        if not calls:
            continue
        every[key] = _union(calls)
        w = [c for c in calls if mode != "steps" or not tr.steps or tr.in_steps(c[0])]
        if w:
            inw[key] = _union(w)
    return every, inw


def check_frames(A, tr, rep, devs, mode):
    """``frame_whatifs``: each frame's calls in the window, its inclusive host time per step (the union of its
    calls per thread) and the GPU work launched under it (launch call by correlation inside one of its calls on
    the same thread; the item overlapping its device's window), recomputed from the raw events."""
    fws = rep.get("frame_whatifs")
    if fws is None:
        A.na("frame_whatifs (absent)")
        return
    steps = _step_count(tr)
    for i, w in enumerate(fws):
        fr = w.get("frame")
        p = f"frame_whatifs[{i}] ({_short(str(fr))})"
        every, inw = frame_subtree(tr, fr, mode)
        n = sum(1 for key, evs in tr.threads.items() for v in evs if v.kind == "py" and v.name == fr
                and (mode != "steps" or not tr.steps or tr.in_steps(v.s)))
        A.ok(w.get("calls") == n, f"{p} calls", w.get("calls"), n)
        host = sum(e - s for iv in inw.values() for s, e in iv)
        A.eq_us(f"{p} host_us", w.get("host_us"), host // steps)
        gpu, items = 0, 0
        for g in tr.gpu:
            D = devs.get(g.pid)
            if D is None or not (g.e > D.w0 and g.s < D.w1 or g.s == g.e and D.w0 <= g.s <= D.w1):
                continue
            L = tr.launch(g)
            iv = every.get(tr.thread_of.get(id(L))) if L is not None else None
            if iv and _inside(iv, L.s):
                gpu += g.e - g.s
                items += 1
        A.ok(w.get("gpu_items") == items, f"{p} gpu_items", w.get("gpu_items"), items)
        A.eq_us(f"{p} gpu_us", w.get("gpu_us"), gpu // steps)
        sv, pct = w.get("saving_us"), w.get("saving_pct")
        A.ok(isinstance(sv, (int, float)) and sv >= 0 and (pct is None or pct >= 0), f"{p} saving", sv, ">= 0")


def _nearest(mine, key, origin):
    c = [k for k in mine if k[0] == key[0]]
    if not c:
        return "none on this device"
    k = min(c, key=lambda k: abs(k[1] - key[1]))
    g0, g1, _ = mine[k]
    return f"{k[1] / 1e3:.3f} µs lasting {us(g1 - g0)}"


def check_next(A, tr, p, g0, g1, D, nx):
    cands = D.starting.get(g1, []) if g1 < D.w1 else []
    kn = nx.get("kernel")
    if not cands:
        A.ok(kn in ("(end of window)", None), f"{p} next kernel", kn, "none (the gap ends the window)")
        return
    names = sorted({k.name for k in cands})
    if not A.ok(kn in names, f"{p} next kernel", _short(kn), " | ".join(_short(n) for n in names)):
        return
    ks = [k for k in cands if k.name == kn]
    launches = {L.name for L in (tr.launch(k) for k in ks) if L is not None}
    if "launch" in nx:
        want = launches or {None}
        A.ok(nx.get("launch") in want, f"{p} launch call (by correlation)", nx.get("launch"), sorted(want, key=str))
    if "op" in nx:
        ops = set().union(*(tr.ops_of(k) for k in ks))
        if nx.get("op") is not None:
            A.ok(nx.get("op") in ops, f"{p} next op", nx.get("op"), sorted(ops) or "no aten op linked")


def _short(name, n=60):
    name = str(name)
    return name if len(name) <= n else name[: n - 1] + "…"


def _next_launch(tr, g1, D, nx):
    """The launch call of the kernel that ends the gap (the one the report names when several start)."""
    cands = D.starting.get(g1, []) if g1 < D.w1 else []
    ks = [k for k in cands if k.name == nx.get("kernel")] or cands
    Ls = [L for L in (tr.launch(k) for k in ks) if L is not None]
    return min(Ls, key=lambda L: L.s) if Ls else None


# ------------------------------------------------------------------------------------------ stacks
def stack_at(tr, key, t) -> list:
    """Names of the CPU events of thread ``key`` open at t (s <= t < e: Python frames, ranges, aten ops, runtime
    calls), outermost first by my own nesting order (``_nest_key``)."""
    if key not in tr._starts:
        tr.around(key, 0, 0)
    evs = tr.threads.get(key, [])
    st = tr._starts[key]
    lo = bisect.bisect_left(st, t - tr._maxdur[key])
    hi = bisect.bisect_right(st, t)
    return [v.name for v in evs[lo:hi] if v.s <= t < v.e]


def check_stacks(A, tr, p, g0, g1, D, g):
    """``stack_at_idle``: the launching thread's stack at the gap start (the moment the GPU went idle);
    ``launch_stack``: its stack at the launch call's start. The thread is the launch call's (by correlation)."""
    if "stack_at_idle" not in g and "launch_stack" not in g:
        A.na("gap stacks (absent)")
        return
    L = _next_launch(tr, g1, D, g.get("next_op") or {})
    if L is None:
        A.na("gap stacks (no launch call)")
        return
    key = tr.thread_of[id(L)]
    for field, t in (("stack_at_idle", g0), ("launch_stack", L.s)):
        if field not in g:
            A.na(f"gap {field} (absent)")
            continue
        want = stack_at(tr, key, t)
        got = list(g.get(field) or [])
        A.ok(got == want, f"{p} {field}", " > ".join(_short(x, 40) for x in got[-4:]) or "[]",
             " > ".join(_short(x, 40) for x in want[-4:]) or "[]")


# ------------------------------------------------------------------------------------ explanations
def _durs(text):
    return [(m, *parse_dur(m.group(1), m.group(2))) for m in _DUR_RE.finditer(text)]


def check_explanation(A, tr, p, g0, g1, D, nx, text):
    if not text:
        A.na("explanation (empty)")
        return
    L = _next_launch(tr, g1, D, nx)
    key = tr.thread_of.get(id(L)) if L is not None else None
    tl = L.s if L is not None else None
    gap = g1 - g0

    def near(claim, m, val, tol, truth):
        A.ok(abs(val - truth) <= tol, f"{p} explanation {claim}", f"{m.group(0)!s}", us(truth))

    # "GPU idle D" / "GPU compute idle D"
    for m in re.finditer(r"GPU (?:compute )?idle (-?\d+(?:\.\d+)?) (s|ms|µs|ns)\b", text):
        v, tol = parse_dur(m.group(1), m.group(2))
        near("'GPU idle'", m, v, tol, gap)
    # "... X of the W before `op` (was launched)" and "launched `op` W after the GPU ran dry"
    m = re.search(r"(-?\d+(?:\.\d+)?) (s|ms|µs|ns) of (?:the )?(-?\d+(?:\.\d+)?) (s|ms|µs|ns)\b", text)
    if m:
        x, xt = parse_dur(m.group(1), m.group(2))
        w, wt = parse_dur(m.group(3), m.group(4))
        A.ok(x <= w + xt + wt, f"{p} explanation 'X of W'", m.group(0), "X must not exceed W")
        if tl is not None:
            A.ok(abs(w - (tl - g0)) <= wt, f"{p} explanation W (launch - gap start)",
                 m.group(0)[m.start(3) - m.start():], us(tl - g0))
        else:
            A.na("explanation W (no launch)")
    m2 = re.search(r"launched `[^`]*` (-?\d+(?:\.\d+)?) (s|ms|µs|ns) after the GPU ran dry", text)
    if m2 and tl is not None:
        w, wt = parse_dur(m2.group(1), m2.group(2))
        A.ok(abs(w - (tl - g0)) <= wt, f"{p} explanation 'launched W after the GPU ran dry'", m2.group(0)[-40:],
             us(tl - g0))
    m3 = re.search(r"was launched (-?\d+(?:\.\d+)?) (s|ms|µs|ns) into the gap but started (-?\d+(?:\.\d+)?) "
                   r"(s|ms|µs|ns) after its launch", text)
    if m3 and tl is not None:
        w, wt = parse_dur(m3.group(1), m3.group(2))
        r, rt = parse_dur(m3.group(3), m3.group(4))
        A.ok(abs(w - (tl - g0)) <= wt, f"{p} explanation 'launched W into the gap'", m3.group(0), us(tl - g0))
        A.ok(abs(r - (g1 - tl)) <= rt, f"{p} explanation 'started R after its launch'", m3.group(0), us(g1 - tl))
    if "already queued when the GPU went idle" in text and L is not None:
        A.ok(L.s <= g0, f"{p} explanation 'already queued'", "launched before the gap",
             f"launched {us(L.s - g0)} after the gap started")
    if key is None or tl is None or tl <= g0:
        if re.search(r"held the CPU|recorded nothing|Allocator calls took|in synchronising calls", text):
            A.na("explanation host time (no launch inside the gap)")
        return
    # "Python `F` held the CPU for X" / "Python `b` (a built-in called from `S`) held the CPU for X"
    m = re.search(r"Python `([^`]+)`(?: \(a built-in(?: called from `[^`]*`)?\))? held the CPU for "
                  r"(-?\d+(?:\.\d+)?) (s|ms|µs|ns)\b", text)
    if m:
        x, xt = parse_dur(m.group(2), m.group(3))
        own = tr.self_times(key, g0, tl)
        fr = m.group(1)
        if fr in own:
            mine = own[fr]
        else:
            pre = (f"<built-in method {fr} ", f"<built-in function {fr}>", f"<built-in method {fr}>",
                   f"<built-in function {fr} ")
            hits = [n for n in own if n.startswith(pre) or (fr == "(unnamed C++ binding)" and
                                                             n.startswith("<built-in method  of"))]
            mine = sum(own[n] for n in hits) if hits else None
        if mine is None and fr in tr.ann_names(key):
            # a record_function range named as the holder: its time there not covered by a frame/op/call
            inside = tr.covered(key, g0, tl, lambda v: v.kind == "ann" and v.name == fr)
            iv = [(max(v.s, g0), min(v.e, tl)) for v in tr.overlapping(key, g0, tl) if v.kind == "ann" and v.name == fr]
            mine = inside - sum(tr.covered(key, s_, e_, lambda v: v.kind in ("py", "op", "runtime"))
                                for s_, e_ in _union(iv))
        if mine is None:
            A.ok(False, f"{p} explanation frame `{_short(fr)}`", "held the CPU",
                 "no such frame on the launching thread in [gap start, launch)")
        else:
            top = own.most_common(1)[0] if own else ("", 0)
            A.ok(x <= mine + xt + 1000, f"{p} explanation 'held the CPU for X' by `{_short(fr, 50)}`",
                 m.group(0)[m.start(2) - m.start():], f"its own time there is {us(mine)} (most: "
                 f"`{_short(top[0], 50)}` {us(top[1])})")
    # "`F` ran X of it itself (then `A` a, `B` b)" / "the most own time: `A` a, `B` b": own time of each frame
    _DN = r"(-?\d+(?:\.\d+)?) (s|ms|µs|ns)\b"
    quoted = []
    m = re.search(r"`([^`]+)` ran " + _DN + r" of it itself(?: \(then (.*?)\);)?", text)
    if m:
        quoted.append((m.group(1), m.group(2), m.group(3)))
        quoted += re.findall(r"`([^`]+)` " + _DN, m.group(4) or "")
    m = re.search(r"the most own time: (.*?); GPU", text)
    if m:
        quoted += re.findall(r"`([^`]+)` " + _DN, m.group(1))
    if quoted:
        own = tr.self_times(key, g0, tl)
        for fr, num, unit in quoted:
            x, xt = parse_dur(num, unit)
            cands = _own_by_display(own, fr)
            A.ok(any(abs(x * 1 - c) <= xt + 1 for c in cands), f"{p} explanation own time of `{_short(fr, 50)}`",
                 f"{num} {unit}", ", ".join(us(c) for c in cands) if cands else "no such frame there")
    m = re.search(r"recorded nothing for (-?\d+(?:\.\d+)?) (s|ms|µs|ns)\b", text)
    if m:
        x, xt = parse_dur(m.group(1), m.group(2))
        free = (tl - g0) - tr.covered(key, g0, tl, lambda v: v.kind in ("py", "op", "runtime"))
        A.ok(x <= free + xt, f"{p} explanation 'recorded nothing for X'", m.group(0), f"{us(free)} unrecorded")
    m = re.search(r"Allocator calls took (-?\d+(?:\.\d+)?) (s|ms|µs|ns)\b", text)
    if m:
        x, xt = parse_dur(m.group(1), m.group(2))
        a = tr.covered(key, g0, tl, lambda v: v.name in ALLOC_NAMES or "empty_cache" in v.name)
        A.ok(x <= a + xt, f"{p} explanation 'Allocator calls took X'", m.group(0), f"{us(a)} of allocator calls")
    m = re.search(r"\((-?\d+(?:\.\d+)?) (s|ms|µs|ns) of it in synchronising calls\)", text)
    if m:
        x, xt = parse_dur(m.group(1), m.group(2))
        a = tr.covered(key, g0, tl, lambda v: v.name in SYNC_NAMES or (v.kind == "op" and tr.has_sync_inside(v)))
        A.ok(x <= a + xt, f"{p} explanation 'X in synchronising calls'", m.group(0), f"{us(a)} of synchronising calls")
    m = re.search(r"while (.+?) copy of (\d+(?:\.\d+)?) (bytes|B|KiB|MiB|GiB) ran for (-?\d+(?:\.\d+)?) (s|ms|µs|ns)\b",
                  text)
    if m:
        # a byte count as written: exact ("8000 bytes", "512 B"), or to one decimal of its unit (powers of 1024)
        scale = {"bytes": 1, "B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}[m.group(3)]
        b, bt = float(m.group(2)) * scale, (0.05 * scale if scale > 1 else 0)
        t, tt = parse_dur(m.group(4), m.group(5))
        ok = any(abs(_int(c.args.get("bytes")) - b) <= bt and abs(c.dur - t) <= tt for c in D.copies)
        A.ok(ok, f"{p} explanation copy", m.group(0)[6:], "no copy of that size and duration on the device")


def _own_by_display(own: Counter, fr: str) -> list:
    """The own times a frame quoted in a sentence can stand for: its exact name, or a built-in quoted by its
    short name (``built-in sleep`` for ``<built-in function sleep>``, ``built-in to`` for ``<built-in method to
    of Tensor object at 0x...>``), each such frame alone and all of them together."""
    if fr in own:
        return [own[fr]]
    b = fr[len("built-in "):] if fr.startswith("built-in ") else fr
    pre = (f"<built-in method {b} ", f"<built-in function {b}>", f"<built-in method {b}>", f"<built-in function {b} ")
    if b == "(unnamed C++ binding)":  # a pybind11 binding without a __name__: "<built-in method  of ...>"
        pre = ("<built-in method  of ", "<built-in function  of ")
    hits = [own[n] for n in own if n.startswith(pre)]
    return hits + ([sum(hits)] if len(hits) > 1 else [])


# ------------------------------------------------------------------------------------ host objects
def check_host(A, tr, p, host, origin):
    if not host:
        A.na("host frames (no `host` object)")
        return
    key = (str(host.get("pid")), str(host.get("tid")))
    if key not in tr.threads:
        A.ok(False, f"{p} host thread", f"pid {host.get('pid')} tid {host.get('tid')}", "no such CPU thread")
        return
    a = origin + to_ns(host.get("from_us", 0))
    b = origin + to_ns(host.get("to_us", 0))
    own = tr.self_times(key, a, b)
    frames = host.get("frames") or []
    for f in frames:
        n = f.get("name")
        A.eq_us(f"{p} host frame `{_short(n, 50)}` self_us", f.get("self_us"), own.get(n, 0), tol=1000)
    cr = host.get("credited")
    if not cr:
        A.na("host credited frame (absent)")
        return
    # the frames a finding may name: Python frames, not the profiler's record_function enter/exit (a bucket of
    # its own) nor gapscope's capture loop (the harness, not the workload)
    py = Counter({n: t for n, t in own.items()
                  if (_is_py_name(tr, key, n) or n in tr.ann_names(key)) and not _NOT_WORKLOAD.search(n)})
    if not py:
        A.na("host credited frame (no Python frame or range in the interval)")
        return
    best = py.most_common(1)[0]
    A.eq_us(f"{p} host credited `{_short(cr.get('name'), 50)}` self_us", cr.get("self_us"), own.get(cr.get("name"), 0),
            tol=1000)
    A.ok(own.get(cr.get("name"), 0) >= best[1] - 1000, f"{p} host credited frame has the most own time",
         f"`{_short(cr.get('name'), 50)}`", f"`{_short(best[0], 50)}` ({us(best[1])})")


_STEP = re.compile(r"^(ProfilerStep#|gapscope\.step#|gapscope\.profiler_warmup$)")
_NOT_WORKLOAD = re.compile(r"_record_function_(enter|exit)|(^|/)torch/(autograd|profiler)/profiler\.py\("
                           r"|(^|/)capture/(recorder|cli|__main__|__init__)\.py\(")


def _is_py_name(tr, key, name):
    cache = tr.__dict__.setdefault("_pynames", {})
    s = cache.get(key)
    if s is None:
        s = cache[key] = {v.name for v in tr.threads[key] if v.kind == "py"}
    return name in s


# ---------------------------------------------------------------------------------------- verdicts
def verdict_check(A, tr, D, r):
    v = r.get("verdict")
    if v is None:
        A.na("devices[].verdict (absent)")
        return
    kern = [k for k in D.kernels if (lambda L: L is not None and GRAPH_LAUNCH.match(L.name))(tr.launch(k))]
    n_k = len(kern)
    n_l = len({id(tr.launch(k)) for k in kern})
    claims = []  # (what, reported)
    if isinstance(v, dict):
        for key, val in v.items():
            lk = key.lower()
            if isinstance(val, dict) and "graph" in lk:
                for k2, v2 in val.items():
                    claims.append((f"{lk}.{k2.lower()}", v2))
            elif isinstance(val, (int, float)) and "graph" in lk:
                claims.append((lk, val))
        texts = [str(x) for x in v.values() if isinstance(x, str)]
    else:
        texts = [str(v)]
    for what, val in claims:
        if "kernel" in what:
            A.ok(val == n_k, f"device {D.dev} verdict {what}", val, n_k)
        elif "launch" in what or "replay" in what:
            A.ok(val == n_l, f"device {D.dev} verdict {what}", val, n_l)
    for t in texts:
        m = re.search(r"(\d+)(?: of \d+)? kernels? (?:came )?from (\d+) (?:\w+ )?graph (?:replays|launches)", t)
        if m:
            A.ok((int(m.group(1)), int(m.group(2))) == (n_k, n_l), f"device {D.dev} verdict text",
                 m.group(0), f"{n_k} kernels from {n_l} graph launches")
    if not claims and not any(re.search(r"graph", t) for t in texts):
        if n_l:
            A.ok(False, f"device {D.dev} verdict graph replays", "not mentioned",
                 f"{n_k} kernels from {n_l} graph launches")
        else:
            A.na("verdict graph counts (no graph launches)")


# ------------------------------------------------------------------------- floors, achieved, patterns
ELEM = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2}
SHORT = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32", "double": "fp64", "long int": "int64",
         "int": "int32", "bool": "bool"}
MM = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"}
#: convolutions: positions of stride, padding, dilation, groups in Concrete Inputs (forward, not transposed)
CONV = {"aten::cudnn_convolution": (3, 2, 4, 5), "aten::conv2d": (3, 4, 5, 6), "aten::convolution": (3, 4, 5, 8),
        "aten::_convolution": (3, 4, 5, 8)}
#: the H200's datasheet: dense bf16 / tf32 TFLOP/s, GB/s, L2 MB; compute floors allow 15% clock headroom
H200 = (989.0, 494.5, 4800.0, 50.0)
HEADROOM = 1.15


def launching_op(tr, g):
    """The innermost aten op around GPU op g's launch call (on the launching thread)."""
    L = tr.launch(g)
    if L is None:
        return None
    ops = [v for v in tr.around(tr.thread_of[id(L)], L.s, L.e) if v.kind == "op"]
    return ops[-1] if ops else None


#: the capture's range around the eager reference run of the graphs a step replays
REFERENCE_RANGE = "gapscope.graph_reference"
#: the driver's kernels for a graph's copy and memset nodes (a copy node runs as ``memcpy32_post`` where the eager
#: run has a ``Memcpy DtoD``)
_NODE_COPY_RE = re.compile(r"^memcpy\d*_\w+$")
_NODE_SET_RE = re.compile(r"^memset\d*_\w+$")


def _work_token(g) -> str:
    """What a GPU item is, for matching a replay to the eager reference run: a kernel by its name; a copy (a
    memcpy, or a graph's copy-node kernel) and a memset by what they are."""
    if g.kind == "memcpy" or (g.kind == "kernel" and _NODE_COPY_RE.match(g.name)):
        return "<copy>"
    if g.kind == "memset" or (g.kind == "kernel" and _NODE_SET_RE.match(g.name)):
        return "<memset>"
    return g.name


def replay_map(tr) -> dict:
    """id(replayed GPU item) -> (its graph launch call, the reference run's GPU item it stands for), by my own
    reading: the reference's GPU work is what the launch calls inside the ``gapscope.graph_reference`` ranges put
    on the GPU, in launch order (each call's items in start order); a replay (a graph launch call outside them) maps
    when its items, in start order, are token for token (``_work_token``) one contiguous run of it (the first such
    run); a replay with no such run maps nothing. Cached on the trace."""
    got = tr.__dict__.get("_replay_map")
    if got is not None:
        return got
    out = {}
    tr._replay_map = out
    refs = [(key, v.s, v.e) for key, evs in tr.threads.items() for v in evs
            if v.kind == "ann" and v.name == REFERENCE_RANGE]
    if not refs:
        return out
    items = defaultdict(list)  # correlation -> GPU items
    for g in tr.gpu:
        c = _int(g.args.get("correlation"))
        if c is not None:
            items[c].append(g)
    calls = [v for v in tr.by_corr.values() if items.get(_int(v.args.get("correlation")))]
    in_ref = [v for v in calls if any(tr.thread_of[id(v)] == key and s <= v.s < e for key, s, e in refs)]
    ref_work = [g for v in sorted(in_ref, key=lambda v: (v.s, v.e))
                for g in sorted(items[_int(v.args.get("correlation"))], key=lambda g: (g.s, g.e))]
    ref_tok = [_work_token(g) for g in ref_work]
    seen = {id(v) for v in in_ref}
    for L in sorted((v for v in calls if GRAPH_LAUNCH.match(v.name) and id(v) not in seen), key=lambda v: v.s):
        block = sorted(items[_int(L.args.get("correlation"))], key=lambda g: (g.s, g.e))
        tok = [_work_token(g) for g in block]
        n = len(tok)
        at = next((j for j in range(len(ref_tok) - n + 1) if ref_tok[j:j + n] == tok), None)
        if at is not None:
            for g, r in zip(block, ref_work[at:at + n]):
                out[id(g)] = (L, r)
    return out


def kernel_call(tr, k):
    """(op, call key) of GPU item ``k``: the innermost aten op around its launch call, one call per op event; for a
    replayed item that maps to the reference run (``replay_map``), the reference item's op, one call per (replay,
    op); (None, None) when none."""
    hit = replay_map(tr).get(id(k))
    if hit is not None:
        L, r = hit
        op = launching_op(tr, r)
        return (op, (id(L), id(op))) if op is not None else (None, None)
    op = launching_op(tr, k)
    return (op, id(op)) if op is not None else (None, None)


def _tensors_of(op):
    d = op.args.get("Input Dims") or []
    t = op.args.get("Input type") or []
    return [(x, t[i] if i < len(t) else "") for i, x in enumerate(d)
            if isinstance(x, list) and x and all(isinstance(v, int) for v in x)]


def _prod(xs):
    n = 1
    for v in xs:
        n *= v
    return n


def mm_conv_cost(op):
    """(flops, bytes, dtype) of a matmul or forward convolution call, computed here; None for other ops."""
    ts = _tensors_of(op)
    if op.name in MM:
        ms = [x for x in ts if len(x[0]) >= 2]
        if op.name in ("aten::addmm", "aten::baddbmm") and len(ms) >= 3:
            ms = ms[1:3]
        if len(ms) < 2:
            return None
        (a, ta), (b, tb) = ms[0], ms[1]
        ea, eb = ELEM.get(ta, 0), ELEM.get(tb, 0)
        if not ea:
            return None
        if op.name == "aten::linear":
            m, k, n, batch = _prod(a[:-1]), a[-1], b[0], 1
        else:
            batch = max(_prod(a[:-2]), _prod(b[:-2]))
            m, k, n = a[-2], a[-1], b[-1]
        return 2.0 * batch * m * k * n, float(_prod(a) * ea + _prod(b) * eb + batch * m * n * min(ea, eb or ea)), ta
    if op.name in CONV:
        if len(ts) < 2:
            return None
        (x, tx), (w, tw) = ts[0], ts[1]
        c = op.args.get("Concrete Inputs") or []
        pos = CONV[op.name]
        try:
            st, pa, di, gr = (json.loads(c[j]) if c[j].startswith("[") else [int(c[j])] for j in pos)
        except (IndexError, ValueError, AttributeError):
            return None
        if op.name in ("aten::convolution", "aten::_convolution") and c[6] != "False":
            return None
        nd = len(x) - 2
        st, pa, di = ([v[0]] * nd if len(v) == 1 else v for v in (st, pa, di))
        out = [x[0], w[0]] + [(x[2 + i] + 2 * pa[i] - di[i] * (w[2 + i] - 1) - 1) // st[i] + 1 for i in range(nd)]
        e = ELEM.get(tx, 0)
        return 2.0 * _prod(out) * w[1] * _prod(w[2:]), float((_prod(x) + _prod(out)) * e + _prod(w) * ELEM.get(tw, 0)), tx
    return None


#: memory-bound ops whose bytes the audit recomputes: x (and per-channel params) read, an output like x written
NORM_LIKE = {"aten::cudnn_batch_norm", "aten::native_batch_norm", "aten::_native_batch_norm_legit_no_training",
             "aten::native_layer_norm", "aten::clamp_min", "aten::clamp"}
#: in-place: x read once (gapscope's convention for in-place ops: the output is the input, counted once)
INPLACE_LIKE = {"aten::clamp_min_", "aten::relu_", "aten::clamp_"}
POOL = {"aten::max_pool2d_with_indices": True, "aten::max_pool2d": False, "aten::avg_pool2d": False}
ADAPTIVE = {"aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d"}


def mem_cost(op):
    """(0, bytes, dtype) of a batch norm, clamp/relu, 2-d pooling or index_select call, computed here from the
    call's raw shapes; None for other ops."""
    d = op.args.get("Input Dims") or []
    t = op.args.get("Input type") or []
    c = op.args.get("Concrete Inputs") or []
    if not d or not isinstance(d[0], list) or not d[0] or not t:
        return None
    x, tx = d[0], t[0]
    e = ELEM.get(tx, 0)
    if not e:
        return None
    nx = _prod(x)
    if op.name in NORM_LIKE:
        extra = sum(_prod(v) * ELEM.get(t[i], 0) for i, v in enumerate(d[1:], 1)
                    if isinstance(v, list) and v and all(isinstance(z, int) for z in v) and i < len(t))
        last = [v for v in d[1:] if isinstance(v, list) and v and all(isinstance(z, int) for z in v)]
        out = 0 if last and _prod(last[-1]) == nx else nx * e
        return 0.0, float(nx * e + extra + out), tx
    if op.name in INPLACE_LIKE:
        return 0.0, float(nx * e), tx
    if op.name in POOL or op.name in ADAPTIVE:
        if len(x) != 4:
            return None
        try:
            if op.name in ADAPTIVE:
                oh, ow = (json.loads(c[1]) * 2)[:2] if c[1].startswith("[") else [int(c[1])] * 2
            else:
                k, st, pa = (json.loads(c[j]) for j in (1, 2, 3))
                di = json.loads(c[4]) if op.name != "aten::avg_pool2d" else [1]
                st = st or k
                k, st, pa, di = (v * 2 if len(v) == 1 else v for v in (k, st, pa, di))
                oh, ow = ((x[2 + i] + 2 * pa[i] - di[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(2))
        except (IndexError, ValueError, AttributeError, TypeError):
            return None
        out = x[0] * x[1] * oh * ow
        return 0.0, float(nx * e + out * e + (8 * out if POOL.get(op.name) else 0)), tx
    if op.name == "aten::index_select" and len(d) >= 3 and len(c) >= 2 and t[2] == "long int":
        dim = int(c[1]) % len(x)
        rows = _prod(d[2])
        return 0.0, float(2 * (nx // x[dim]) * rows * e + rows * 8), tx
    return None


def check_floors(A, tr, rep, devs):
    """Kernel rows of matmuls and convolutions whose every call has its own floor: FLOPs and bytes recomputed
    from each call's shapes; the floor between the resident floor (bytes beyond twice the L2) and the HBM
    floor (every byte) summed over the calls (H200 only); achieved TFLOP/s and GB/s from those; peak_pct at
    most 115% (clock headroom) unless a call was L2-resident. Every row and op row: avg >= 0.9 x floor."""
    ks = [k for D in devs.values() for k in D.kernels]
    by = defaultdict(list)
    for k in ks:
        by[k.name].append(k)
    dev_name = {d.get("device"): d.get("name") for d in rep.get("devices", [])}
    for r in rep.get("kernels", []):
        p = f"kernels `{_short(r.get('name'), 50)}`"
        f, n = r.get("floor_us"), r.get("floored_calls") or 0
        if f is not None and n:  # the floored calls' average against their floor per call (the floor is per
            # floored call: a row whose small calls have no floor, their inputs all in the L2, must not read as
            # beating it)
            tot = r.get("floored_total_us") if n != r.get("count") else r["total_us"]
            avg = tot / n
            A.ok(avg + 0.0005 >= 0.9 * f, f"{p} avg >= 0.9 x floor", f"floor {f} µs",
                 f"avg {avg:.3f} µs over {n} floored of {r.get('count')} calls")
        if f is None or n != r.get("count") or n == 0:
            continue
        mine = by.get(r.get("name"), [])
        costs = []
        for k in mine:
            op = kernel_call(tr, k)[0]  # a graph replay's kernel: its reference run's op
            c = (mm_conv_cost(op) or mem_cost(op)) if op is not None else None
            if c is None:
                break
            costs.append((k, c))
        if len(costs) != len(mine) or not costs:
            A.na("floor recompute (not a matmul / convolution / norm / pooling row)")
            continue
        fl = sum(c[0] for _, c in costs)
        by_ = sum(c[1] for _, c in costs)
        A.ok(abs(fl - r.get("flops", 0)) <= 1e-6 * max(fl, 1), f"{p} flops", r.get("flops"), fl)
        A.ok(abs(by_ - r.get("bytes", 0)) <= 1e-6 * max(by_, 1), f"{p} bytes", r.get("bytes"), by_)
        tot_ns = sum(k.dur for k in mine)
        if tot_ns > 0 and r.get("tflops") is not None:
            A.ok(abs(r["tflops"] - fl / tot_ns / 1e3) <= 0.0006 + 1e-6 * r["tflops"], f"{p} tflops", r["tflops"],
                 f"{fl / tot_ns / 1e3:.3f}")
        if tot_ns > 0 and r.get("gbps") is not None:
            A.ok(abs(r["gbps"] - by_ / tot_ns) <= 0.0006 + 1e-6 * r["gbps"], f"{p} gbps", r["gbps"], f"{by_ / tot_ns:.3f}")
        if r.get("peak_pct") is not None and not r.get("l2_resident_calls"):
            A.ok(r["peak_pct"] <= 100 * HEADROOM + 0.01, f"{p} peak_pct <= 115%", r["peak_pct"], "a lower bound's share")
        dname = dev_name.get(mine[0].pid) or ""
        if "H200" in dname and "GH200" not in dname:
            def comp(c):
                rate = H200[0] if c[2] in ("c10::BFloat16", "c10::Half") else H200[1] if c[2] == "float" else None
                return c[0] / (rate * HEADROOM * 1e3) if rate else None
            cs = [comp(c) for _, c in costs]
            if any(x is None for x in cs):
                A.na("floor bounds (element type)")
                continue
            hi = sum(max(x, c[1] / H200[2]) for x, (_, c) in zip(cs, costs))
            lo = sum(max(x, max(c[1] - 2 * H200[3] * 1e6, 0) / H200[2]) for x, (_, c) in zip(cs, costs))
            got = r["floor_total_us"] * 1e3
            A.ok(lo - n <= got <= hi + n, f"{p} floor_total between the resident and the HBM floor",
                 f"{got:.0f} ns", f"[{lo:.0f}, {hi:.0f}] ns")
    for o in rep.get("op_floors", []):
        n = o.get("count") or 0
        if n:
            A.ok(o["total_us"] + 0.0005 * n >= 0.9 * o["floor_us"] * n, f"op_floors `{o.get('op')}` avg >= 0.9 x floor",
                 f"floor {o['floor_us']} µs", f"avg {o['total_us'] / n:.3f} µs")


def check_patterns(A, tr, rep, devs):
    """Each op-pattern finding's evidence rows: the calls of that op with those shapes and dtypes that launched
    kernels in the window, and their kernel time, recounted from the raw events; each pattern's own claim (a
    softmax over the score shape, an odd dimension, fp32, a large copy)."""
    fs = [f for f in rep.get("findings", []) if f.get("cause") == "pattern"]
    if not fs:  # nothing claimed, nothing to check
        return
    groups = defaultdict(lambda: [set(), 0])
    for D in devs.values():
        for k in D.kernels:
            op, call = kernel_call(tr, k)  # a graph replay's kernel: its reference run's op
            if op is None:
                continue
            ts = _tensors_of(op)
            key = (op.name, json.dumps([d for d, _ in ts]), json.dumps([SHORT.get(t, t) for _, t in ts]))
            g = groups[key]
            g[0].add(call)
            g[1] += k.dur
    # the optimizer pattern's rows are per op name, over the calls launched inside Optimizer.step ranges
    opt = defaultdict(lambda: [set(), 0])
    steps = {key: [(v.s, v.e) for v in evs if v.name.startswith("Optimizer.step#")] for key, evs in tr.threads.items()}
    if any(steps.values()):
        for D in devs.values():
            for k in D.kernels:
                L = tr.launch(k)
                if L is None or not any(s0 <= L.s < s1 for s0, s1 in steps.get(tr.thread_of[id(L)], [])):
                    continue
                op = launching_op(tr, k)
                if op is not None:
                    opt[op.name][0].add(id(op))
                    opt[op.name][1] += k.dur
    for f in fs:
        ev = f.get("evidence") or {}
        pid = f"finding {f.get('id')} ({ev.get('pattern')})"
        if ev.get("pattern") == "tiny-kernel-loop":
            check_loop(A, tr, rep, devs, f, pid)
            continue
        ops = ev.get("ops") or []
        for o in ops:
            key = (o["op"], json.dumps(o["shapes"]), json.dumps(o["dtypes"]))
            n, ns = len(groups[key][0]), groups[key][1]
            if ev.get("pattern") == "optimizer":
                n, ns = len(opt[o["op"]][0]), opt[o["op"]][1]
            A.ok(o["calls"] == n, f"{pid} `{o['op']}` {o['shapes']} calls", o["calls"], n)
            A.ok(abs(o["kernel_us"] * 1e3 - ns) <= 1 + n, f"{pid} `{o['op']}` {o['shapes']} kernel time",
                 f"{o['kernel_us']} µs", us(ns))
            kind = ev.get("pattern")
            if kind == "unaligned-matmul":
                dims = [v for d in o["shapes"] for v in d[-2:]]
                A.ok(any(v % 8 for v in dims) and set(o["dtypes"]) <= {"bf16", "fp16"}, f"{pid} odd fp16/bf16 dims",
                     o["shapes"], "a dimension not a multiple of 8")
            elif kind == "fp32-matmul":
                A.ok(o["dtypes"][:1] == ["fp32"], f"{pid} fp32", o["dtypes"], "float32 inputs")
            elif kind == "copies":
                nb = _prod(o["shapes"][0]) * {"fp32": 4, "bf16": 2, "fp16": 2, "fp64": 8}.get(o["dtypes"][0], 0)
                A.ok(nb >= 4 << 20, f"{pid} large copy", f"{nb} bytes", ">= 4 MiB")
        if ops and len(ops) < 8:
            tot = sum(o["kernel_us"] for o in ops)
            A.ok(abs(tot - ev.get("kernel_us", 0)) <= 0.001 * len(ops) + 0.001, f"{pid} kernel_us = its ops' sum",
                 ev.get("kernel_us"), f"{tot:.3f}")
        if ev.get("pattern") == "eager-attention":
            m = re.search(r"\[(\d+), (\d+), (\d+)\] score matrix", f.get("title", ""))
            ok = False
            if m:
                b, L, S = (int(x) for x in m.groups())
                for (name, shp, _), g in groups.items():
                    if "softmax" in name and g[0]:
                        d = json.loads(shp)
                        if d and len(d[0]) >= 3 and d[0][-2:] == [L, S] and _prod(d[0][:-2]) == b:
                            ok = True
            A.ok(ok, f"{pid} a softmax over the score matrix", f.get("title", "")[:60], "a softmax call of that shape")
            mk = ev.get("mask")
            if mk:
                # the mask's shape is an operand of an add / masked_fill over the scores, broadcast over the heads
                M = mk.get("shape") or []
                seen = any(name in ("aten::add", "aten::add_", "aten::masked_fill", "aten::masked_fill_",
                                    "aten::where", "aten::sub") and M in json.loads(shp) and g[0]
                           for (name, shp, _), g in groups.items())
                A.ok(seen, f"{pid} mask shape {M} added to the scores", M, "an add of that operand launched kernels")
                # each builder frame: one raw frame of that name of that host time (calls == 1), the syncs inside
                for fr in mk.get("frames") or []:
                    if fr.get("calls") != 1 or len(mk.get("frames")) != 1:
                        continue
                    cands = [(key, v) for key, evs in tr.threads.items() for v in evs if v.name == fr["name"]]
                    hit = [(key, v) for key, v in cands if abs(v.dur - mk["host_us"] * 1e3) <= 1]
                    A.ok(bool(hit), f"{pid} mask builder `{fr['name'][:40]}` host time", f"{mk['host_us']} µs",
                         [round(v.dur / 1e3, 3) for _, v in cands][:4])
                    if hit:
                        key, v = hit[0]
                        ns = sum(1 for o in tr.overlapping(key, v.s, v.e) if o.s >= v.s and o.e <= v.e
                                 and o.name in SYNC_NAMES)
                        A.ok(ns == mk.get("syncs"), f"{pid} mask builder syncs", mk.get("syncs"), ns)
        fx = ev.get("fixes")
        if fx:
            # each fix's saving is the pattern's kernel time less what it leaves; the recommended one leaves least
            for x in fx:
                A.ok(abs(x["kernel_saving_us"] - max(ev.get("kernel_us", 0) - x["after_us"], 0)) <= 0.002,
                     f"{pid} fix {x['fix']} saving = kernel_us - after_us", x["kernel_saving_us"],
                     f"{ev.get('kernel_us', 0) - x['after_us']:.3f}")
            rec = [x for x in fx if x.get("recommended")]
            A.ok(len(rec) == 1 and rec[0]["after_us"] == min(x["after_us"] for x in fx) and
                 abs(rec[0]["after_us"] - ev.get("after_us", 0)) <= 0.002, f"{pid} recommended fix is the one replayed",
                 [x["fix"] for x in rec], "the fix leaving least, its after_us the finding's")


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return 0 if n == 0 else xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _runtime_syncs(tr, key, s, e):
    return [v for v in tr.overlapping(key, s, e, kinds={"runtime"}) if v.s >= s and v.s < e and v.name in SYNC_NAMES]


def check_loop(A, tr, rep, devs, f, pid):
    """A Python loop of tiny kernels: the frame's calls in the steps (not inside another of its calls), the
    kernels launched inside each (launch call on the same thread) in the devices' windows, their median
    duration against the median launch call, the synchronising runtime calls inside each call (ops' syncs when
    the trace has no runtime sync), and the repeated op sequence, back to back in the outermost ops around each
    call's kernels; its fix's figure is the frame's fused what-if (frame_whatif of the same frame)."""
    ev = f.get("evidence") or {}
    fr = ev.get("frame")
    calls = []
    for key, evs in tr.threads.items():
        mine = sorted((v for v in evs if v.kind == "py" and v.name == fr and (not tr.steps or tr.in_steps(v.s))),
                      key=lambda v: (v.s, -v.e))
        end = -1
        for v in mine:
            if v.s >= end:
                calls.append((key, v))
                end = v.e
    A.ok(ev.get("frame_calls") == len(calls), f"{pid} frame calls", ev.get("frame_calls"), len(calls))
    by_call = defaultdict(list)
    spans = defaultdict(list)
    for key, v in calls:
        spans[key].append((v.s, v.e, id(v)))
    for key in spans:
        spans[key].sort()
    for D in devs.values():
        for k in D.kernels:
            L = tr.launch(k)
            if L is None:
                continue
            sp = spans.get(tr.thread_of.get(id(L)))
            if not sp:
                continue
            j = bisect.bisect_right(sp, (L.s, float("inf"), 0)) - 1
            if j >= 0 and sp[j][0] <= L.s < sp[j][1]:
                by_call[sp[j][2]].append((k, L))
    ks = [x for v in by_call.values() for x in v]
    A.ok(ev.get("kernels") == len(ks), f"{pid} kernels", ev.get("kernels"), len(ks))
    A.eq_us(f"{pid} kernel_us", ev.get("kernel_us"), sum(k.dur for k, _ in ks))
    per = [len(v) for v in by_call.values()]
    A.ok(ev.get("kernels_per_call") == _median(per), f"{pid} kernels per call (median)", ev.get("kernels_per_call"),
         _median(per))
    km, lm = _median([k.dur for k, _ in ks]), _median([L.dur for _, L in ks])
    A.eq_us(f"{pid} median kernel", ev.get("kernel_median_us"), km)
    A.eq_us(f"{pid} median launch call", ev.get("launch_median_us"), lm)
    A.ok(km < lm and (ev.get("kernels_per_call") or 0) >= 16, f"{pid} many kernels shorter than their launch",
         f"{ev.get('kernels_per_call')} per call, {km} ns", f"launch {lm} ns")
    shorter = 100.0 * sum(1 for k, L in ks if k.dur < L.dur) / max(len(ks), 1)
    A.ok(abs(shorter - (ev.get("kernels_shorter_than_launch_pct") or 0)) < 0.01, f"{pid} kernels shorter than launch",
         ev.get("kernels_shorter_than_launch_pct"), f"{shorter:.3f}")
    nsync = [len(_runtime_syncs(tr, key, v.s, v.e)) for key, v in calls]
    if not any(nsync):  # no runtime events: the outermost synchronising ops
        nsync = [sum(1 for o in tr.overlapping(key, v.s, v.e, kinds={"op"}) if o.s >= v.s and o.s < v.e
                     and o.name in SYNC_NAMES and not [p for p in tr.around(key, o.s, o.e) if p.kind == "op" and p is not o])
                 for key, v in calls]
    A.ok(ev.get("syncs_per_call") == _median(nsync) and _median(nsync) >= max(ev.get("repeats_per_call") or 0, 1),
         f"{pid} syncs per call (median, at least one per iteration)", ev.get("syncs_per_call"), _median(nsync))
    block = ev.get("repeated_ops") or []
    r = ev.get("repeats_per_call") or 0
    want = block * r
    n_rep, in_loop = 0, []
    for key, v in calls:
        seq, objs, last = [], [], None
        for k, L in sorted(by_call.get(id(v), []), key=lambda x: x[1].s):
            ops = [o for o in tr.around(key, L.s, L.e) if o.kind == "op"]
            o = ops[0] if ops else L  # the outermost op around the launch; "?" for a launch outside any op
            if o is not last and not (o is L and last is not None and last.kind == "runtime"):
                seq.append(o.name if ops else "?")
                objs.append(o)
                last = o
        at = [i for i in range(len(seq) - len(want) + 1) if want and seq[i:i + len(want)] == want]
        if at:
            n_rep += 1
            s0, e0 = objs[at[0]].s, objs[at[0] + len(want) - 1].e  # the repeated run: the loop
            in_loop.append(sum(1 for x in tr.overlapping(key, s0, e0, kinds={"runtime"})
                               if s0 <= x.s < e0 and x.name in SYNC_NAMES))
    A.ok(len(block) >= 3 and r >= 2 and n_rep >= (ev.get("calls_with_repeat") or 0), f"{pid} repeated op sequence",
         f"{len(block)} ops x{r} in {ev.get('calls_with_repeat')} calls", f"found in {n_rep} calls")
    if any(nsync_rt for nsync_rt in in_loop) or ev.get("syncs_in_loop_per_call"):
        A.ok(ev.get("syncs_in_loop_per_call") == _median(in_loop) and _median(in_loop) >= r,
             f"{pid} syncs inside the repeated run (median, at least one per iteration)",
             ev.get("syncs_in_loop_per_call"), _median(in_loop))
    fw = f.get("frame_whatif")
    if fw is not None:
        A.ok(fw.get("frame") == fr, f"{pid} saving is its frame's fused what-if", fw.get("frame"), fr)


# ------------------------------------------------------------------------------------------ tables
def check_tables(A, tr, rep, devs, mode):
    steps = mode == "steps"
    # kernels
    ks = [k for D in devs.values() for k in D.kernels]
    by = defaultdict(list)
    for k in ks:
        by[k.name].append(k)
    grand = sum(k.dur for k in ks) or 1
    rows = rep.get("kernels", [])
    for r in rows:
        n = r.get("name")
        mine = by.get(n, [])
        p = f"kernels `{_short(n, 50)}`"
        A.ok(r.get("count") == len(mine), f"{p} count", r.get("count"), len(mine))
        tot = sum(k.dur for k in mine)
        A.eq_us(f"{p} total_us", r.get("total_us"), tot)
        if mine and r.get("avg_us") is not None:
            A.eq_us(f"{p} avg_us", r.get("avg_us"), tot / len(mine), tol=1)
        pct = 100.0 * tot / grand
        A.ok(abs(r.get("pct", 0) - pct) <= 0.0011, f"{p} pct", r.get("pct"), f"{pct:.3f}")
        f = r.get("floor_us")
        if f is not None and mine:
            # the floor is per floored call: those calls took at least their floors
            nf = r.get("floored_calls") or len(mine)
            took = r.get("floored_total_us", tot / 1e3)
            A.ok(took + 0.0005 * nf >= f * nf, f"{p} floor (a lower bound: the floored calls took >= their floors)",
                 f"floor {f} µs x {nf} calls", f"{took:.3f} µs")
            if nf == len(mine):
                A.eq_us(f"{p} floored_total_us", took, tot)
    listed = {r.get("name") for r in rows}
    if rows and len(listed) < len(by):
        low = min(r.get("total_us", 0) for r in rows)
        big = max((n for n in by if n not in listed), key=lambda n: sum(k.dur for k in by[n]))
        bt = sum(k.dur for k in by[big])
        A.ok(bt <= low * 1000 + 1, "kernels table keeps the largest rows", f"smallest listed {low} µs",
             f"`{_short(big, 50)}` omitted with {us(bt)}")
    elif not rows and by:
        A.ok(False, "kernels table", "empty", f"{len(by)} kernel names")

    # CPU calls in the window
    def calls(pred):
        out = defaultdict(list)
        for key, evs in tr.threads.items():
            for v in evs:
                if v.kind != "py" and pred(v) and (not steps or tr.in_steps(v.s)):
                    out[v.name].append(v)
        return out

    sync_rows = {r.get("name"): r for r in rep.get("syncs", [])}

    def is_sync(v) -> bool:
        """A synchronisation: a blocking call or sync op by name, or an aten op with one inside it
        (``aten::to`` -> ... -> ``cudaStreamSynchronize``)."""
        return v.name in SYNC_NAMES or (v.name.startswith("aten::") and tr.has_sync_inside(v))

    named = calls(lambda v: (v.name in sync_rows or v.name in SYNC_NAMES) and is_sync(v))

    def enclosing(v):
        """The synchronisations around v on its thread, outermost first."""
        key = tr.thread_of[id(v)]
        pos = tr.pos_of
        return sorted((o for o in tr.around(key, v.s, v.e) if o is not v and o.kind != "py"
                       and (o.name in sync_rows or o.name in SYNC_NAMES) and is_sync(o)
                       and pos[id(o)] < pos[id(v)]),  # the same interval: the caller encloses its callee
                      key=lambda o: pos[id(o)])

    for n, r in sync_rows.items():
        # a row counts the synchronisations it names that no other synchronisation encloses
        mine = [v for v in named.get(n, []) if not enclosing(v)]
        A.ok(r.get("count") == len(mine), f"syncs `{n}` count", r.get("count"), len(mine))
        A.eq_us(f"syncs `{n}` total_us", r.get("total_us"), sum(v.dur for v in mine))

    for n, vs in named.items():
        if n not in sync_rows and n in SYNC_NAMES:
            outer = [v for v in vs if not enclosing(v)]  # nested ones belong to the call around them
            if outer:
                A.ok(False, f"syncs table row `{n}`", "absent",
                     f"{len(outer)} blocking calls, {us(sum(v.dur for v in outer))}")
    # nested: a row whose every call runs inside another listed synchronisation counts one synchronisation twice
    for n, vs in named.items():
        if n not in sync_rows or not vs:
            continue
        inner = Counter()
        for v in vs:
            outer = [o for o in enclosing(v) if o.name in sync_rows]
            if outer:
                inner[outer[0].name] += 1
        if sum(inner.values()) == len(vs) and sync_rows[n].get("count"):
            on, c = inner.most_common(1)[0]
            A.ok(False, f"syncs `{n}` counted apart from `{on}`", f"{sync_rows[n].get('count')} calls in their own row",
                 f"{c} of them run inside a `{on}` call (one synchronisation, counted twice)")
    A.checked += 1

    # copies
    cps = defaultdict(list)
    for D in devs.values():
        for c in D.copies:
            cps[copy_label(c.name)].append(c)
    crow = {r.get("kind"): r for r in rep.get("copies", [])}
    for kind, r in crow.items():
        mine = cps.get(kind, [])
        p = f"copies `{kind}`"
        A.ok(r.get("count") == len(mine), f"{p} count", r.get("count"), len(mine))
        b = sum(_int(c.args.get("bytes")) or 0 for c in mine)
        A.ok(r.get("bytes") == b, f"{p} bytes", r.get("bytes"), b)
        t = sum(c.dur for c in mine)
        A.eq_us(f"{p} total_us", r.get("total_us"), t)
        if r.get("gbps") is not None and t:
            A.ok(abs(r["gbps"] - b / t) <= 0.0011, f"{p} gbps", r["gbps"], f"{b / t:.3f}")
    for kind, vs in cps.items():
        if kind not in crow:
            A.ok(False, f"copies row `{kind}`", "absent", f"{len(vs)} copies")

    # allocator
    arow = rep.get("allocator", {}) or {}
    named = calls(lambda v: v.name in arow or v.name in ALLOC_NAMES)
    pyec = defaultdict(list)
    for key, evs in tr.threads.items():
        for v in evs:
            if v.kind == "py" and v.name in arow and (not steps or tr.in_steps(v.s)):
                pyec[v.name].append(v)
    for n, r in arow.items():
        mine = named.get(n, []) + pyec.get(n, [])
        A.ok(r.get("count") == len(mine), f"allocator `{n}` count", r.get("count"), len(mine))
        A.eq_us(f"allocator `{n}` total_us", r.get("total_us"), sum(v.dur for v in mine))
    for n, vs in named.items():
        if n not in arow and n in ALLOC_NAMES:
            A.ok(False, f"allocator table row `{n}`", "absent", f"{len(vs)} calls, {us(sum(v.dur for v in vs))}")


def check_collectives(A, tr, rep, devs):
    """Collective kernels by name: count, time, and the part no compute kernel of the device overlaps."""
    rows = [r for r in rep.get("collectives", []) if isinstance(r, dict) and "name" in r]
    mine = defaultdict(list)
    comp = {}
    for dev, D in devs.items():
        comp[dev] = _union([(k.s, k.e) for k in D.kernels if not COLL_KERNEL.match(k.name)])
        for k in D.kernels:
            if COLL_KERNEL.match(k.name):
                mine[k.name].append((dev, k))
    for r in rows:
        n = r.get("name")
        p = f"collectives `{_short(n, 50)}`"
        if r.get("cpu_side") or (n not in mine and not COLL_KERNEL.match(str(n))):
            A.na("collectives (CPU-side rows)")
            continue
        ks = mine.get(n, [])
        A.ok(r.get("count") == len(ks), f"{p} count", r.get("count"), len(ks))
        A.eq_us(f"{p} total_us", r.get("total_us"), sum(k.dur for _, k in ks))
        if r.get("exposed_us") is not None:
            exp = sum(k.dur - _overlap(comp[d], k.s, k.e) for d, k in ks)
            A.eq_us(f"{p} exposed_us", r.get("exposed_us"), exp)
    listed = {r.get("name") for r in rows}
    for n, ks in mine.items():
        if n not in listed:
            A.ok(False, f"collectives row `{_short(n, 50)}`", "absent", f"{len(ks)} collective kernels")


def _overlap(iv, s, e) -> int:
    return sum(max(0, min(e, b) - max(s, a)) for a, b in iv if a < e and b > s)


def check_launches(A, tr, rep, devs):
    """Kernels with a launch call, the distinct launch calls, their CPU cost, the kernels shorter than theirs."""
    ent = [x for x in rep.get("launches", []) or [] if isinstance(x, dict)]
    if not ent:
        A.na("launches (absent)")
        return
    r = ent[0]
    pairs = [(k, tr.launch(k)) for D in devs.values() for k in D.kernels]
    pairs = [(k, L) for k, L in pairs if L is not None]
    uniq = {id(L): L for _, L in pairs}
    A.ok(r.get("kernels") == len(pairs), "launches.kernels (kernels linked to a launch call)", r.get("kernels"),
         len(pairs))
    A.ok(r.get("count") == len(uniq), "launches.count (distinct launch calls)", r.get("count"), len(uniq))
    if "cost_total_ns" in r:
        tot = sum(L.dur for L in uniq.values())
        A.ok(abs(r["cost_total_ns"] - tot) <= 1, "launches.cost_total_ns", r["cost_total_ns"], tot)
    if "kernels_shorter_than_launch" in r:
        n = sum(1 for k, L in pairs if k.dur < L.dur)
        A.ok(r["kernels_shorter_than_launch"] == n, "launches.kernels_shorter_than_launch",
             r["kernels_shorter_than_launch"], n)
    if "delay_median_ns" in r and pairs:
        d = sorted(k.s - L.s for k, L in pairs)
        med = (d[(len(d) - 1) // 2] + d[len(d) // 2]) / 2
        A.ok(abs(r["delay_median_ns"] - med) <= 1, "launches.delay_median_ns", r["delay_median_ns"], med)
    calls = Counter(L.name for L in uniq.values())
    for name, c in (r.get("calls") or {}).items():
        A.ok(calls.get(name) == c, f"launches.calls `{name}`", c, calls.get(name, 0))


# ---------------------------------------------------------------------------------------- findings
_TITLE_N = re.compile(r"^(?:launch-bound: )?(\d+) (?:gaps?|syncs?)\b")
_TITLE_T = re.compile(r"(?:cost|add up to|:) (-?\d+(?:\.\d+)?) (s|ms|µs|ns) of GPU idle")


def check_findings(A, tr, rep, devs, mine, origin):
    window = sum(D.window for D in devs.values()) or 1
    gaps_by_rel = defaultdict(list)  # start relative to the origin -> my gaps (any device)
    for (dev, rel), h in mine.items():
        gaps_by_rel[rel].append(h)
    rep_gaps = rep.get("gaps", [])
    per_cause = defaultdict(lambda: [0, 0.0])
    listed = defaultdict(lambda: [0, 0])  # cause -> listed gaps (>= threshold) by the report's causes
    for g in rep_gaps:
        d = to_ns(g.get("dur_us", 0))
        if d >= MIN_LISTED_NS:
            listed[g.get("cause")][0] += 1
            listed[g.get("cause")][1] += d
    saw_short = False
    for f in rep.get("findings", []):
        ev = f.get("evidence") or {}
        fid = f.get("id")
        p = f"finding {fid}"
        title = f.get("title", "")
        if isinstance(ev, dict) and "idle_us" in ev:
            A.ok(abs(f.get("idle_us", 0) - ev["idle_us"]) <= 0.0015, f"{p} idle_us vs evidence", f.get("idle_us"),
                 ev["idle_us"])
            share = 100.0 * ev["idle_us"] * 1000 / window
            A.ok(abs(ev.get("share_of_window_pct", 0) - share) <= 0.01, f"{p} share_of_window_pct",
                 ev.get("share_of_window_pct"), f"{share:.3f}")
        m = _TITLE_N.match(title)
        if m and "gaps" in ev:
            A.ok(int(m.group(1)) == ev["gaps"], f"{p} title count", m.group(0), f"evidence.gaps {ev['gaps']}")
        m = _TITLE_T.search(title)
        if m and "idle_us" in ev:
            v, tol = parse_dur(m.group(1), m.group(2))
            A.ok(abs(v - ev["idle_us"] * 1000) <= tol, f"{p} title time", m.group(0), us(ev["idle_us"] * 1000))
        exs = ev.get("examples") if isinstance(ev, dict) else None
        if exs is not None:
            cause = ev.get("cause")
            gc = ev.get("gap_causes")
            if isinstance(gc, dict):
                # a finding can hold gaps of several causes (a host round trip): it says how many of each
                A.ok(sum(v[0] for v in gc.values()) == ev.get("gaps"), f"{p} gap_causes add up to its gaps",
                     sum(v[0] for v in gc.values()), ev.get("gaps"))
                for c, (n, t) in gc.items():
                    per_cause[c][0] += n
                    per_cause[c][1] += t
            else:
                per_cause[cause][0] += ev.get("gaps", 0)
                per_cause[cause][1] += ev.get("idle_us", 0)
            durs = []
            for j, ex in enumerate(exs):
                rel = to_ns(ex.get("start_us", 0))
                dur = to_ns(ex.get("dur_us", 0))
                hit = next((h for dk in (0, -1, 1) for h in gaps_by_rel.get(rel + dk, [])
                            if abs(h[1] - h[0] - dur) <= 1), None)
                q = f"{p} example {j} (start {ex.get('start_us')} µs)"
                if not A.ok(hit is not None, f"{q} is a gap", f"{ex.get('dur_us')} µs at {ex.get('start_us')} µs",
                            "no such gap"):
                    continue
                g0, g1, D = hit
                durs.append(g1 - g0)
                check_next(A, tr, q, g0, g1, D, {"kernel": ex.get("next_kernel"), "op": ex.get("next_op")})
                if "queued" in title:
                    L = _next_launch(tr, g1, D, {"kernel": ex.get("next_kernel")})
                    if L is not None:
                        A.ok(L.s < g0, f"{q} 'already queued'", "launched before the gap",
                             f"launched {us(L.s - g0)} after the gap started")
                check_host(A, tr, q, ex.get("host"), origin)
                if ex.get("held_by") is not None or cause == "stall":
                    check_held(A, tr, q, ex.get("held_by"), g0, g1, D, ex, origin)
                elif ex.get("cause") == "launch":
                    check_not_held(A, tr, q, g0, g1, D, ex)
            if durs:
                lg = ev.get("largest_gap_us")
                A.eq_us(f"{p} largest_gap_us (its largest example)", lg, max(durs))
                A.ok(ev.get("gaps", 0) >= len(exs), f"{p} gaps >= examples", ev.get("gaps"), len(exs))
                A.ok(ev.get("idle_us", 0) * 1000 + 1 + len(durs) >= sum(durs), f"{p} idle >= its examples' idle",
                     ev.get("idle_us"), f"examples alone {us(sum(durs))}")
                A.ok(ev.get("idle_us", 0) * 1000 <= (lg or 0) * 1000 * ev.get("gaps", 0) + 1,
                     f"{p} idle <= gaps x largest", ev.get("idle_us"), f"{ev.get('gaps')} x {lg}")
                if ev.get("gaps") == len(durs):
                    A.eq_us(f"{p} idle_us (all its gaps are the examples)", ev.get("idle_us"), sum(durs),
                            tol=len(durs))
        elif isinstance(ev, dict) and "causes" in ev and "gaps" in ev:
            saw_short = True
            m = re.search(r"shorter than (-?\d+(?:\.\d+)?) (s|ms|µs|ns)", title)
            thr = parse_dur(m.group(1), m.group(2))[0] if m else MIN_LISTED_NS
            short = [h[1] - h[0] for h in mine.values() if h[1] - h[0] < thr]
            A.ok(ev["gaps"] == len(short), f"{p} short gaps count", ev["gaps"], len(short))
            A.eq_us(f"{p} short gaps idle_us", ev.get("idle_us"), sum(short), tol=1)
            A.ok(sum(ev["causes"].values()) == ev["gaps"], f"{p} causes add up", sum(ev["causes"].values()), ev["gaps"])
        elif isinstance(ev, dict) and "kind" in ev and "bytes" in ev:
            cs = [c for D in devs.values() for c in D.copies if copy_label(c.name) == ev["kind"]]
            A.ok(ev.get("count") == len(cs), f"{p} copies count", ev.get("count"), len(cs))
            b = sum(_int(c.args.get("bytes")) or 0 for c in cs)
            A.ok(ev.get("bytes") == b, f"{p} copies bytes", ev.get("bytes"), b)
            A.ok("pageable" in ev["kind"].lower(), f"{p} pageable", ev["kind"], "not a pageable copy")
    # the gap findings of a cause partition its listed gaps
    if len(rep_gaps) == len(mine):
        for c in set(per_cause) | set(listed):
            n, t = per_cause[c]
            A.ok(n == listed[c][0], f"findings of cause {c}: gaps", n, f"{listed[c][0]} listed gaps >= 2 µs")
            A.ok(abs(t * 1000 - listed[c][1]) <= 1 + n, f"findings of cause {c}: idle", f"{t:.3f} µs",
                 us(listed[c][1]))
    if not saw_short:
        A.na("short-gap finding (absent)")
    check_sync_fix_counts(A, tr, rep)
    for f in rep.get("findings", []):
        fix = f.get("fix") or ""
        m = _AFTER_RE.search(fix) if f.get("cause") == "allocator" else None
        if m is None:
            continue
        frame = (f.get("evidence") or {}).get("frame")
        val, half = parse_dur(m.group(1), m.group(2))
        got = after_effect_ns(tr, frame)
        if got is None:
            A.ok(False, f"finding {f.get('id')} after-effect", fix[m.start():m.end()], "no allocator call in the frame")
            continue
        steps = len({v.name for evs in tr.threads.values() for v in evs if v.kind == "ann" and STEP_RE.match(v.name)}) or 1
        A.ok(abs(val - got / steps) <= half + 500, f"finding {f.get('id')} after-effect per step",
             f"{m.group(1)} {m.group(2)}", f"{got / steps / 1000:.1f} µs")


# ------------------------------------------------------------------ the one call or op holding a gap
STALL_MIN_NS = 100_000  # gapscope's stall_min_ns (thresholds.py), a documented number


def holder_in(tr, key, a, b):
    """(event, ns) credited the most of [a, b) on thread ``key``, by my own sweep: each elementary piece goes to
    the innermost aten op, runtime call or Python frame open there (the one that started last, ``_nest_key``: a
    frame that starts inside an op is nested in it), else (no Python frame on the thread) the innermost range that
    is not a step range; (None, 0) when nothing ran."""
    evs = [v for v in tr.threads[key] if v.s < b and v.e > a and v.kind in ("op", "runtime", "py", "ann")]
    has_py = any(v.kind == "py" for v in tr.threads[key])
    cuts = sorted({a, b} | {t for v in evs for t in (v.s, v.e) if a < t < b})
    credit = {}
    for t, t2 in zip(cuts, cuts[1:]):
        open_ = [v for v in evs if v.s <= t < v.e]
        work = [v for v in open_ if v.kind in ("op", "runtime", "py")]
        ann = [v for v in open_ if v.kind == "ann" and not _STEP.match(v.name)]
        # innermost = latest start, then shortest, then the callee
        pick = lambda vs: max(vs, key=_nest_key) if vs else None  # noqa: E731
        who = pick(work) or (pick(ann) if not has_py else None)
        if who is not None:
            k = id(who)
            credit[k] = (who, credit.get(k, (who, 0))[1] + t2 - t)
    if not credit:
        return None, 0
    return max(credit.values(), key=lambda c: c[1])


def check_held(A, tr, p, hb, g0, g1, D, ex, origin):
    """A stall's example: the one call or op named holds most of [gap start, launch] (the launch call: most of
    the gap) on the launching thread, with the time the report gives."""
    L = _next_launch(tr, g1, D, {"kernel": ex.get("next_kernel")})
    if not A.ok(hb is not None and L is not None, f"{p} held_by", "present" if hb else "absent",
                "a launch call" if L else "no launch call"):
        return
    key = (str(L.pid), str(L.tid))
    A.ok((str(hb.get("pid")), str(hb.get("tid"))) == key, f"{p} held_by thread", f"{hb.get('pid')}/{hb.get('tid')}",
         f"{L.pid}/{L.tid}")
    if hb.get("launch_call"):
        ns, name, of = min(L.e, g1) - max(L.s, g0), L.name, g1 - g0
    else:
        b = max(min(L.s, g1), g0)
        v, ns = holder_in(tr, key, g0, b)
        name, of = (v.name if v is not None else None), b - g0
        A.eq_us(f"{p} held_by to_us (the launch)", hb.get("to_us"), b - origin)
    A.eq_us(f"{p} held_by from_us (the gap start)", hb.get("from_us"), g0 - origin)
    A.ok(hb.get("name") == name, f"{p} held_by name", _short(hb.get("name"), 50), _short(name, 50))
    A.eq_us(f"{p} held_by self_us", hb.get("self_us"), ns, tol=1)
    A.eq_us(f"{p} held_by of_us", hb.get("of_us"), of, tol=1)
    A.ok(2 * ns > of and ns >= STALL_MIN_NS, f"{p} held_by holds most of it", f"{us(ns)} of {us(of)}",
         "at least half and 100 µs")


def check_not_held(A, tr, p, g0, g1, D, ex):
    """A launch example ("many short dispatches"): no one call or op holds most of [gap start, launch] (when the
    launch came in the second half of the gap or later: else the gap is launch latency)."""
    L = _next_launch(tr, g1, D, {"kernel": ex.get("next_kernel")})
    if L is None:
        return
    b = max(min(L.s, g1), g0)
    if 2 * (b - g0) < g1 - g0 or 2 * (min(L.e, g1) - max(L.s, g0)) > g1 - g0:
        return
    v, ns = holder_in(tr, (str(L.pid), str(L.tid)), g0, b)
    held = v is not None and 2 * ns > b - g0 and ns >= STALL_MIN_NS and v.kind != "py"
    A.ok(not held, f"{p} launch gap held by no one call", "launch (many dispatches)",
         f"`{_short(v.name, 50)}` {us(ns)} of {us(b - g0)}" if held else "")


# ------------------------------------------------------------------ the launch finding's graph fix
#: "(544 of its 558 GPU items already are graph nodes: ..." / "the step's 3 graph replays as one (all its 6 GPU items"
_GRAPH_NODES_RE = re.compile(r"\((\d+) of its (\d+) GPU items already are graph nodes|"
                             r"the step's (\d+) graph replays as one \(all its (\d+) GPU items")
#: "; the 463.25 ms per step the GPU waited on dependencies (1 gpu-wait gap: ..."
_GRAPH_KEEP_RE = re.compile(r"the (-?\d+(?:\.\d+)?) (s|ms|µs|ns) per step the GPU waited on dependencies "
                            r"\((\d+) gpu-wait gaps?")
GRAPH_GAP_DEFAULT_NS = 417  # thresholds.DEFAULT_GRAPH_GAP_NS: the demo-graph trace's median node gap
WAIT_MIN_NS = 20_000  # thresholds.wait_min_ns


def _idle_launch_latency(tr) -> int:
    """Median launch-to-start latency of the kernels (not graph nodes) that started on an idle device: nothing of
    their device ran at any instant between their launch call and their start; 10 µs without any."""
    lat = []
    by_dev = defaultdict(list)
    for g in tr.gpu:
        by_dev[g.pid].append(g)
    for evs in by_dev.values():
        evs.sort(key=lambda g: (g.s, g.e))
        run = None
        for g in evs:
            L = tr.launch(g) if g.kind == "kernel" else None
            if L is not None and not GRAPH_LAUNCH.match(L.name) and g.s >= L.s and (run is None or run <= L.s):
                lat.append(g.s - L.s)
            run = g.e if run is None else max(run, g.e)
    return int(statistics.median(lat)) if lat else 10_000


def _graph_gap(tr) -> int:
    """Median gap between consecutive items of one stream launched by the same graph launch call."""
    gaps = []
    by_st = defaultdict(list)
    for g in tr.gpu:
        by_st[(g.pid, g.tid)].append(g)
    for evs in by_st.values():
        evs.sort(key=lambda g: g.s)
        for a, b in zip(evs, evs[1:]):
            La, Lb = tr.launch(a), tr.launch(b)
            if La is not None and La is Lb and b.s - a.e >= 0:
                gaps.append(b.s - a.e)
    return int(statistics.median(gaps)) if gaps else GRAPH_GAP_DEFAULT_NS


def _kept_waits(tr, rep, mine) -> dict:
    """Per device: (ns, gaps) of dependency wait the graph fix keeps: per gap the report calls gpu-wait, the part
    after its next kernel's launch call plus the idle-device launch latency and one graph gap, when >= 20 µs."""
    lat, gg = _idle_launch_latency(tr), _graph_gap(tr)
    out = defaultdict(lambda: [0, 0])
    for g in rep.get("gaps", []):
        if g.get("cause") != "gpu-wait":
            continue
        key = (g.get("device"), to_ns(g.get("start_us", 0)))
        h = next((mine[(key[0], key[1] + dk)] for dk in (0, -1, 1) if (key[0], key[1] + dk) in mine), None)
        if h is None:
            continue
        g0, g1, D = h
        nxt = sorted(D.starting.get(g1, []), key=lambda k: k.s)
        L = tr.launch(nxt[0]) if nxt else None
        if L is None:
            continue
        k = g1 - (max(g0, L.s + lat) + gg)
        if k >= WAIT_MIN_NS:
            out[D.dev][0] += k
            out[D.dev][1] += 1
    return out


#: the projection headline's "GPU floor 9.77 ms and 463.25 ms of waits on dependencies (gpu-wait)"
_HEAD_WAIT_RE = re.compile(r"and (-?\d+(?:\.\d+)?) (s|ms|µs|ns) of waits on dependencies")


def check_graph_fix(A, tr, rep, devs, mine, origin):
    """The launch finding's graph fix: the graph nodes it counts (the GPU items launched by a graph launch call,
    of the device's items starting in the window), and the dependency waits it keeps (``_kept_waits``), per step;
    the projection headline's waits (the slowest device's: the largest, per step)."""
    fs = [f for f in rep.get("findings", []) if f.get("cause") == "launch" and "graph" in (f.get("fix") or "")]
    heads = {(d.get("projection") or {}).get("headline") for d in rep.get("devices", [])} - {None}
    hw = [m for m in (_HEAD_WAIT_RE.search(h) for h in heads) if m]
    if not fs and not hw:
        return  # nothing claimed (most traces: not an uncheckable claim)
    steps = _step_count(tr) or 1
    kw = _kept_waits(tr, rep, mine)
    kept, n = sum(v[0] for v in kw.values()), sum(v[1] for v in kw.values())
    step = max((((d.get("projection") or {}).get("baseline_us") or 0) for d in rep.get("devices", [])),
               default=0) * 1e3
    for m in hw:
        v, tol = parse_dur(m.group(1), m.group(2))
        big = max((x[0] for x in kw.values()), default=0) / steps
        A.ok(abs(big - v) <= tol, "projection headline: waits on dependencies per step", f"{m.group(1)} {m.group(2)}",
             us(big))
    for f in fs:
        fix = f.get("fix") or ""
        m = _GRAPH_NODES_RE.search(fix)
        if m:
            n_nodes, n_items = (int(m.group(1)), int(m.group(2))) if m.group(1) else (int(m.group(4)),
                                                                                      int(m.group(4)))
            items = [g for D in devs.values() for g in tr.gpu if g.pid == D.dev and D.w0 <= g.s < D.w1]
            nodes = [g for g in items if (lambda L: L is not None and GRAPH_LAUNCH.match(L.name))(tr.launch(g))]
            A.ok((n_nodes, n_items) == (len(nodes), len(items)), f"finding {f.get('id')} graph nodes",
                 f"{n_nodes} of {n_items}", f"{len(nodes)} of {len(items)}")
        m = _GRAPH_KEEP_RE.search(fix)
        if m is None:
            # unsaid below 1% of the step (thresholds.graph_wait_note_share): the step is the report's baseline
            A.ok(n == 0 or kept / steps < 0.01 * step, f"finding {f.get('id')} graph fix keeps no wait worth saying",
                 "none said", f"{n} gpu-wait gaps, {us(kept / steps)} per step of {us(step)}")
            continue
        A.ok(int(m.group(3)) == n, f"finding {f.get('id')} graph fix: gpu-wait gaps kept", m.group(3), n)
        v, tol = parse_dur(m.group(1), m.group(2))
        A.ok(abs(kept / steps - v) <= tol, f"finding {f.get('id')} graph fix: wait kept per step",
             f"{m.group(1)} {m.group(2)}", us(kept / steps))


# ------------------------------------------------------------------ the plan of actions
def _band(pct: float) -> str:
    """plan.md's bands, as written there: high from 10% of the step, medium from 3, low from 1; below: info."""
    return "high" if pct >= 10 else "medium" if pct >= 3 else "low" if pct >= 1 else "info"


def check_plan(A, tr, rep):
    """The plan (``actions``, ``plan``, ``findings[].rank``) against itself, the findings and the events: ranks 1..n,
    the actions that are not minor by saving then the minor ones (under 1%); each severity the band of its saving;
    every finding of an action carries its rank, the first its severity and the others none above it, and no finding is in two actions; the gaps an action
    counts are the union of its findings' gaps; what everything buys together is at least the best action alone and
    less than the step; each frame an action names (``where``) is a Python frame the trace recorded; a prerequisite
    that is an action of its own says it unlocks the action that needs it."""
    acts = rep.get("actions")
    if not acts:
        A.na("plan (no actions)")
        return
    fs = {f.get("id"): f for f in rep.get("findings", [])}
    A.ok([a.get("rank") for a in acts] == list(range(1, len(acts) + 1)), "plan ranks 1..n",
         [a.get("rank") for a in acts], list(range(1, len(acts) + 1)))
    major = [a for a in acts if a.get("saving_pct", 0) >= 1.0]
    A.ok(acts[:len(major)] == major, "plan: minor actions (under 1%) last", "", "")
    sv = [a.get("saving_us") for a in major]
    A.ok(sv == sorted(sv, reverse=True), "plan: actions by what each buys", sv, sorted(sv, reverse=True))
    seen = set()
    names = {e.name for evs in tr.threads.values() for e in evs}
    for a in acts:
        k = a.get("rank")
        A.ok(a.get("severity") == _band(a.get("saving_pct", 0)), f"action {k} severity",
             a.get("severity"), _band(a.get("saving_pct", 0)))
        A.ok(bool(a.get("minor")) == (a.get("saving_pct", 0) < 1.0), f"action {k} minor", a.get("minor"),
             a.get("saving_pct", 0) < 1.0)
        rows = set()
        for fid in a.get("findings", []):
            f = fs.get(fid)
            if not A.ok(f is not None, f"action {k} finding {fid} listed", fid, "absent"):
                continue
            # the finding carrying the action's figure reads its severity; the others are never above it
            order = ("high", "medium", "low", "info")
            lead = fid == a["findings"][0]
            sev_ok = f.get("severity") == a.get("severity") if lead else \
                order.index(f.get("severity")) >= order.index(a.get("severity"))
            A.ok(f.get("rank") == k and sev_ok, f"finding {fid} rank and severity", (f.get("rank"), f.get("severity")),
                 (k, a.get("severity")))
            A.ok(fid not in seen, f"finding {fid} in one action", "once", "twice")
            seen.add(fid)
            rows |= {(g.get("start_us"), g.get("dur_us")) for g in (f.get("evidence") or {}).get("examples", [])}
        n = sum((fs.get(fid) or {}).get("evidence", {}).get("gaps", 0) or 0 for fid in a.get("findings", []))
        if n:
            A.ok(a.get("gaps") <= n, f"action {k} gaps within its findings' gaps", a.get("gaps"), n)
        w = a.get("where") or {}
        if w.get("frame"):
            A.ok(w["frame"] in names, f"action {k} frame recorded in the trace", w["frame"], "no such event")
        for nd in a.get("needs", []):
            if nd.get("action") is not None:
                own = acts[nd["action"] - 1] if 0 < nd["action"] <= len(acts) else {}
                A.ok(k in (own.get("unlocks") or []), f"action {k} prerequisite {nd['action']} unlocks it",
                     own.get("unlocks"), k)
    pl = rep.get("plan") or {}
    if isinstance(pl, dict) and pl:
        best = max(a.get("saving_us", 0) for a in acts)
        A.ok(best - 0.001 <= pl.get("saving_us", 0) < pl.get("baseline_us", 0), "plan: together >= best, < step",
             pl.get("saving_us"), f"[{best}, {pl.get('baseline_us')})")
    for f in rep.get("findings", []):
        if f.get("rank") is None:
            A.ok(f.get("severity") != "high", f"finding {f.get('id')} without an action is not high",
                 f.get("severity"), "not high")


# ------------------------------------------------------------------ the graph fix's host reads
#: "; it needs the 352 syncs of `frame`, the 8 of `other` and the 1 outside any user frame removed
#: first: the host reads their values"
_NEEDS_RE = re.compile(r"; it needs (.+) removed first: the host reads their values")
_NEEDS_PART_RE = re.compile(r"the (\d+)(?: syncs?)? (?:of `([^`]+)`|outside any user frame)")


#: a Python frame ``file(line): function`` of the workload's own code: not of an installed package (site-packages,
#: dist-packages, torch and its compilers, triton), of Python's standard library (lib/python3.x, frozen modules,
#: runpy, threading, contextlib), a built-in (``<built-in ...>``, ``<string>``) or gapscope's capture harness
_PY_FRAME_FILE = re.compile(r"^(.+?)\(\d+\): ")
_NOT_USER_FILE = re.compile(r"site-packages/|dist-packages/|(^|/)torch/|(^|/)_dynamo/|(^|/)_inductor/|(^|/)triton/"
                            r"|/lib/python3|^<|(^|/)(runpy|threading|contextlib)\.py$"
                            r"|(^|/)capture/(recorder|cli|__main__|__init__)\.py$")


def is_user_frame(v) -> bool:
    m = _PY_FRAME_FILE.match(v.name) if v.kind == "py" else None
    return bool(m) and not _NOT_USER_FILE.search(m.group(1))


def host_reads(tr, in_steps) -> Counter:
    """The reads of a GPU value the host waited for, per user frame (``is_user_frame``; None: outside any): per
    thread, the outermost synchronising calls (ops and runtime calls of SYNC_NAMES; inside the step ranges when
    ``in_steps``), each taken up to the op it is in and the ops that op is in, as long as an op encloses it (not
    through a range or a Python frame); each distinct one counts when a device-to-host copy was launched on the
    thread inside it (its launch call, by correlation, starts there), under the innermost user frame open at its
    start."""
    d2h = defaultdict(list)  # thread -> starts of the launch calls of device-to-host copies
    for g in tr.gpu:
        if g.kind == "memcpy" and copy_label(g.name).startswith("DtoH"):
            L = tr.launch(g)
            if L is not None:
                d2h[tr.thread_of[id(L)]].append(L.s)
    out = Counter()
    for key, evs in tr.threads.items():
        ls = sorted(d2h.get(key, ()))
        if not ls:
            continue
        calls = sorted((v for v in evs if v.kind in ("op", "runtime") and v.name in SYNC_NAMES
                        and (not in_steps or tr.in_steps(v.s))), key=lambda v: (v.s, -v.e))
        outer, last_end = set(), None
        for v in calls:
            if last_end is not None and v.e <= last_end:
                continue  # inside the previous one: one synchronisation
            last_end = v.e if last_end is None else max(last_end, v.e)
            outer.add(id(v))
        roots, open_ = {}, []  # open_: the events other than Python frames open so far, outermost first
        for v in evs:
            if v.kind == "py":
                continue
            while open_ and open_[-1].e <= v.s:
                open_.pop()
            if id(v) in outer:
                up = v
                for u in reversed(open_):  # innermost first: up through the ops that enclose it
                    if u.e < v.e:
                        continue  # ended inside it: not around it
                    if u.kind != "op":
                        break
                    up = u
                roots[id(up)] = up
            open_.append(v)
        # those inside which a copy back was launched read a value
        reads = {k for k, r in roots.items() if (i := bisect.bisect_left(ls, r.s)) < len(ls) and ls[i] < r.e}
        frames_open = []  # the Python frames opened so far, outermost first (those that ended dropped lazily)
        for v in evs:
            if v.kind == "py":
                while frames_open and frames_open[-1].e <= v.s:
                    frames_open.pop()
                frames_open.append(v)
            elif id(v) in reads:
                inner = [u for u in frames_open if u.s <= v.s < u.e and is_user_frame(u)]
                out[inner[-1].name if inner else None] += 1
    return out


def check_graph_reads(A, tr, rep):
    """The graph fix's "it needs the N syncs of `frame` ... removed first: the host reads their values": N per frame
    (and outside any user frame) against ``host_reads`` of the window; a graph fix with a saving and without the
    clause has no read."""
    mode = (((rep.get("traces") or [{}])[0].get("window") or {}).get("mode")) or "all"
    in_steps = mode == "steps" and bool(tr.steps)
    for f in rep.get("findings", []):
        fix = f.get("fix") or ""
        if f.get("cause") != "launch" or "CUDA graph" not in fix:
            continue
        m = _NEEDS_RE.search(fix)
        if m is None:
            if f.get("saving_us") is not None:
                got = sum(host_reads(tr, in_steps).values())
                A.ok(got == 0, f"finding {f.get('id')} graph fix: host reads", "none said", got)
            continue
        said = {p.group(2): int(p.group(1)) for p in _NEEDS_PART_RE.finditer(m.group(1))}
        got = dict(host_reads(tr, in_steps))
        A.ok(said == got, f"finding {f.get('id')} graph fix: host reads per frame", said, got)


# ------------------------------------------------------------------ the sync fix's count of calls
#: "remove the 352 synchronising calls in `frame`" (the frame is absent for a finding without one)
_SYNC_FIX_RE = re.compile(r"^remove the (\d+) synchronising calls?(?: in `(.+?)`)?(?:;|$)")


def sync_calls(tr, frame, in_steps, exclude=()):
    """The outermost synchronising calls (ops and runtime calls of SYNC_NAMES) starting inside a Python frame
    named ``frame`` on their thread (else inside any event of that name; no frame: anywhere), inside the step
    ranges when ``in_steps``, and not inside a frame named in ``exclude`` (the other sync findings' frames)."""
    n = 0
    for key, evs in tr.threads.items():
        def spans(name):
            fr = [(v.s, v.e) for v in evs if v.kind == "py" and v.name == name] or \
                [(v.s, v.e) for v in evs if v.name == name]
            return _union(fr)
        fr = spans(frame) if frame else None
        ex = [spans(x) for x in exclude]
        last_end = None
        for v in sorted((v for v in evs if v.kind in ("op", "runtime") and v.name in SYNC_NAMES),
                        key=lambda v: (v.s, -v.e)):
            if last_end is not None and v.e <= last_end:
                continue  # inside the previous one: one synchronisation
            last_end = v.e if last_end is None else max(last_end, v.e)
            if in_steps and not tr.in_steps(v.s):
                continue
            if fr is not None and not _inside(fr, v.s):
                continue
            if any(_inside(x, v.s) for x in ex):
                continue
            n += 1
    return n


def check_sync_fix_counts(A, tr, rep):
    """A sync finding's fix counts the synchronising calls it removes: those of its frame in the window (a finding
    without a frame: the window's calls that no other sync finding's frame holds)."""
    mode = (((rep.get("traces") or [{}])[0].get("window") or {}).get("mode")) or "all"
    fs = [f for f in rep.get("findings", []) if f.get("cause") == "sync" and _SYNC_FIX_RE.match(f.get("fix") or "")]
    frames = [(f.get("evidence") or {}).get("frame") for f in fs]
    for f in fs:
        m = _SYNC_FIX_RE.match(f["fix"])
        frame = (f.get("evidence") or {}).get("frame")
        if (m.group(2) or None) != frame:
            A.ok(False, f"finding {f.get('id')} fix frame", m.group(2), frame)
            continue
        other = [x for x in frames if x and x != frame] if not frame else []
        got = sync_calls(tr, frame, mode == "steps" and bool(tr.steps), other)
        A.ok(int(m.group(1)) == got, f"finding {f.get('id')} fix: synchronising calls", m.group(1), got)


# ------------------------------------------------------------------ the allocator fix's after-effect
#: "... and the host work they slowed right after them (564.0 µs per step, recorded)"
_AFTER_RE = re.compile(r"slowed right after them \((-?\d+(?:\.\d+)?) (s|ms|µs|ns) per step, recorded\)")
AFTER_NS = 200_000  # the window after each call
AFTER_MIN_REF = 3  # instances of a name away from every call needed for its usual own time


def _credits(tr, key) -> list:
    """[(event, ns)]: each instant of the thread goes to one event: the innermost aten op, runtime call or Python
    frame (of the innermost of each family, the one that started last, ``_nest_key``: a frame that starts inside an
    op is nested in it); where the thread recorded no Python frame, the innermost range that is not a step range.
    Events credited nothing are left out."""
    evs = tr.threads[key]
    has_py = any(v.kind == "py" for v in evs)
    bounds = sorted({t for v in evs for t in (v.s, v.e)})
    stacks = {"cpu": [], "py": [], "ann": []}
    fam = {"op": "cpu", "runtime": "cpu", "py": "py", "ann": "ann"}
    credit = {}
    i = 0
    for t, t2 in zip(bounds, bounds[1:]):
        while i < len(evs) and evs[i].s <= t:
            v = evs[i]
            st = stacks[fam[v.kind]]
            while st and st[-1].e <= v.s:
                st.pop()
            st.append(v)
            i += 1
        for st in stacks.values():
            while st and st[-1].e <= t:
                st.pop()
        tops = [st[-1] for st in (stacks["cpu"], stacks["py"]) if st]
        who = max(tops, key=_nest_key) if tops else None
        if who is None and not has_py:
            anns = [v for v in stacks["ann"] if not _STEP.match(v.name)]
            who = anns[-1] if anns else None
        if who is not None:
            k = id(who)
            credit[k] = (who, credit.get(k, (who, 0))[1] + t2 - t)
    return [c for c in credit.values() if c[1] > 0]


def after_effect_ns(tr, frame):
    """What the allocator fix of ``frame`` takes off as the after-effect, in ns over the trace: per thread, the
    allocator runtime calls starting inside a Python frame named ``frame`` (else any event of that name); the own time of every event starting
    within AFTER_NS of a call's end (and before the next call) against the median own time of its name away from
    every call (AFTER_MIN_REF instances at least); per call the excess, at least 0, at most those events' own time
    and at most the stretch after the call (AFTER_NS or up to the next call)."""
    total, found = 0, False
    for key, evs in tr.threads.items():
        # the frame a finding names is a Python frame, else (no Python frame of that name) a range or an op
        fr = [(v.s, v.e) for v in evs if v.kind == "py" and v.name == frame] or \
            [(v.s, v.e) for v in evs if v.name == frame]
        if not fr:
            continue
        fr = _union(fr)
        calls = sorted((v for v in evs if v.kind == "runtime" and v.name in ALLOC_NAMES and _inside(fr, v.s)),
                       key=lambda v: v.s)
        if not calls:
            continue
        found = True
        ends = [c.e for c in calls]
        civ = _union([(c.s, c.e) for c in calls])
        near = defaultdict(list)  # call -> [(name, own)]
        far = defaultdict(list)  # name -> [own]
        for v, ns in _credits(tr, key):
            j = bisect.bisect_right(ends, v.s) - 1
            nxt = calls[j + 1].s if 0 <= j < len(calls) - 1 else float("inf")
            if j >= 0 and v.s - ends[j] < AFTER_NS and v.s < nxt:
                near[j].append((v.name, ns))
            elif not _inside(civ, v.s):
                far[v.name].append(ns)
        med = {}
        for n, xs in far.items():
            if len(xs) >= AFTER_MIN_REF:
                xs = sorted(xs)
                h = len(xs) // 2
                med[n] = xs[h] if len(xs) % 2 else (xs[h - 1] + xs[h]) / 2
        for j, rows in near.items():
            ex = sum(ns - med[n] for n, ns in rows if n in med)
            busy = sum(ns for _, ns in rows)
            span = min(AFTER_NS, (calls[j + 1].s if j + 1 < len(calls) else float("inf")) - ends[j])
            total += max(0, min(ex, busy, span))
    return total if found else None


# ------------------------------------------------------------------------------------ ranks of one job
#: my own lists: the c10d API ops that are one collective call on the CPU side, the backend ranges that run them
COLL_OP_RE = re.compile(r"^(record_param_comms$|c10d::|c10d_functional::|_c10d_functional::|nccl:|gloo:)")
BACKEND_RE = re.compile(r"^(gloo|nccl|mpi|ucc):")
KERNEL_COLL_RE = re.compile(r"^(?:ncclDevKernel_|ncclKernel_)([A-Za-z]+?)(?:_|\(|$)")
C10D_RE = re.compile(r"^(?:_?c10d(?:_functional)?::)_*(?P<n>[A-Za-z0-9_]+?)_*$")
P2P = {"send", "recv", "sendrecv", "isend", "irecv"}
CLOCK_MIN_MATCHES = 3  # calls needed before the collectives' end times correct a time base


class RankCalls:
    """One rank's collective calls in the analysed window, in start order: (pg, coll, start, end, issue, thread)."""

    def __init__(self, tr, doc, mode, whole):
        di = doc.get("distributedInfo") if isinstance(doc, dict) else None
        di = di if isinstance(di, dict) else {}
        self.rank = _int(di.get("rank"))
        b = doc.get("baseTimeNanoseconds") if isinstance(doc, dict) else None
        self.base = int(b) if isinstance(b, (int, float)) and not isinstance(b, bool) else 0
        cfg = di.get("pg_config")
        dflt = str(cfg[0]["pg_name"]) if isinstance(cfg, list) and len(cfg) == 1 and isinstance(cfg[0], dict) \
            and cfg[0].get("pg_name") is not None else "?"
        self.calls = []
        devs, _ = build_devices(tr, mode)
        ks = []
        for g in tr.gpu:
            D = devs.get(g.pid)
            if g.kind == "kernel" and COLL_KERNEL.match(g.name) and D is not None and g.s < D.w1 and (
                    g.e > D.w0 or (g.e == g.s and g.s >= D.w0)):
                ks.append(g)
        if ks:
            self.side = "gpu"
            for g in sorted(ks, key=lambda g: g.s):
                a = dict(g.args)
                x = _int(a.get("External id"))
                if "Process Group Name" not in a and x is not None and x in tr.op_by_ext:
                    a = {**tr.op_by_ext[x].args, **a}
                L = tr.launch(g)
                self.calls.append((_pg(a, dflt), _coll(g.name, a), g.s, g.e, L.s if L else g.s,
                                   tr.thread_of[id(L)] if L else None))
        else:
            self.side = "cpu"
            ops = []
            for key, evs in tr.threads.items():
                open_coll = []  # collective ops still open: an op inside one is part of that call
                for v in evs:
                    if v.kind != "op":
                        continue
                    while open_coll and open_coll[-1].e <= v.s:
                        open_coll.pop()
                    if COLL_OP_RE.match(v.name):
                        if not open_coll and (whole or not tr.steps or tr.in_steps(v.s)):
                            ops.append((v, key))
                        open_coll.append(v)
            ops.sort(key=lambda o: o[0].s)
            threads = {k for _, k in ops}
            rng = sorted((v for k, evs in tr.threads.items() if k not in threads for v in evs
                          if v.kind == "ann" and BACKEND_RE.match(v.name)), key=lambda v: v.s)
            rng = [v for v in rng if ops and v.s >= ops[0][0].s]
            for i, (v, key) in enumerate(ops):
                end = max(rng[i].e, v.s) if i < len(rng) else v.e
                inner = [o for o in tr.around(key, v.s, v.s) if o.kind == "op" and o.name == "record_param_comms"
                         and o.s >= v.s and o.e <= v.e]
                a = inner[0].args if inner else v.args
                self.calls.append((_pg(a, dflt), _coll(v.name, a), v.s, end, v.s, key))
        self.first = min((v.s for evs in tr.threads.values() for v in evs), default=0)
        self.first = min([self.first] + [g.s for g in tr.gpu]) if tr.gpu else self.first

    def interval(self, i):
        """[end of the previous call on its thread, this launch): its length, or None (the thread's first)."""
        pg, coll, s, e, iss, th = self.calls[i]
        if th is None:
            return None
        prev = [j for j, c in enumerate(self.calls) if c[5] == th and c[4] < iss]
        if not prev:
            return None
        p = max(prev, key=lambda j: self.calls[j][4])
        return iss - min(max(self.calls[p][4], self.calls[p][3]), iss)


def _pg(a, dflt):
    p = a.get("Process Group Name")
    if p is None:
        p = a.get("Process Group Description")
    return str(p) if p is not None else dflt


def _coll(label, a):
    c = a.get("Collective name")
    if isinstance(c, str) and c:
        return c.lower()
    m = KERNEL_COLL_RE.match(label) or None
    if m:
        return m.group(1).lower()
    m = C10D_RE.match(label)
    return m.group("n").replace("_base", "").lower() if m else label.lower()


def _median_int(v):
    v = sorted(v)
    h = len(v) // 2
    return v[h] if len(v) % 2 else (v[h - 1] + v[h]) // 2


def audit_ranks(docs_trs, rep, label) -> Audit:
    """The late-rank claims of a ranks report (``ranks.late[]``): which calls each rank arrived last at, the waits
    it caused, and the comparison interval: per call, from the end of the previous call on the issuing thread to
    this launch, the late rank's summed against the median of the other ranks' (``compared``, ``interval_us``,
    ``others_interval_us``). The ranks' calls are matched by process group and order; the clock offset of each
    rank is its time base's, corrected by the median of its collectives' end times against the lowest rank's
    where those agree (checked against ``ranks.clock``). Taken from the report, not recomputed: how many leading
    calls are start-up skew (``ranks.startup.calls``)."""
    A = Audit(label)
    rk = rep.get("ranks")
    if not isinstance(rk, dict):
        A.na("ranks (no ranks section)")
        return A
    modes = [((t.get("window") or {}).get("mode")) or "all" for t in rep.get("traces", [])]
    by_path = {}
    for t, md in zip(rep.get("traces", []), modes):
        by_path[t.get("rank")] = md
    R = sorted((RankCalls(tr, doc, by_path.get(_int((doc.get("distributedInfo") or {}).get("rank")), "steps"),
                          False) for doc, tr in docs_trs), key=lambda x: (x.rank is None, x.rank or 0))
    # groups: process group -> members and their calls in order
    groups = []
    for pg in sorted({c[0] for x in R for c in x.calls}):
        per = [[i for i, c in enumerate(x.calls) if c[0] == pg] for x in R]
        mem = [r for r in range(len(R)) if per[r]]
        if len(mem) < 2:
            continue
        n = min(len(per[r]) for r in mem)
        key = [[("p2p" if R[r].calls[i][1] in P2P else R[r].calls[i][1]) for i in per[r][:n]] for r in mem]
        if any(k != key[0] for k in key):
            A.na(f"ranks: group {pg} matched by name (not re-derived)")
            return A
        groups.append((mem, [per[r][:n] for r in mem]))
    # clocks
    shift = [(x.base - R[0].base) if (R[0].base and x.base) else 0 for x in R]
    rep_clock = {c.get("rank"): c for c in rk.get("clock") or []}
    for r in range(1, len(R)):
        d = []
        for mem, idx in groups:
            if mem[0] != 0 or r not in mem:
                continue
            j = mem.index(r)
            d += [R[r].calls[a][3] + shift[r] - R[0].calls[b][3] for a, b in zip(idx[j], idx[0])]
        if d:
            d.sort()
            h = len(d) // 2
            med = d[h] if len(d) % 2 else (d[h - 1] + d[h]) / 2
            dev = sorted(abs(x - med) for x in d)
            mad = dev[h] if len(dev) % 2 else (dev[h - 1] + dev[h]) / 2
            if mad <= abs(med) / 4 and len(d) >= CLOCK_MIN_MATCHES:
                shift[r] -= int(round(med))
        c = rep_clock.get(R[r].rank)
        if c is not None:
            A.eq_us(f"ranks.clock rank {R[r].rank} offset_us", c.get("offset_us"), shift[r])
    # columns in time order; the first ``startup.calls`` are start-up skew (the report's count)
    cols = sorted((min(R[r].calls[idx[k][c]][2] + shift[r] for k, r in enumerate(mem)), g, c)
                  for g, (mem, idx) in enumerate(groups) for c in range(len(idx[0])))
    n_su = int((rk.get("startup") or {}).get("calls") or 0)
    startup = {(g, c) for _, g, c in cols[:n_su]}
    late = defaultdict(list)  # rank position -> [(call, {partner position: call}, waits caused)]
    matched = Counter()
    for g, (mem, idx) in enumerate(groups):
        for c in range(len(idx[0])):
            if (g, c) in startup:
                continue
            st = [R[r].calls[idx[k][c]][2] + shift[r] for k, r in enumerate(mem)]
            en = [R[r].calls[idx[k][c]][3] + shift[r] for k, r in enumerate(mem)]
            for r in mem:
                matched[r] += 1
            last = max(st)
            if last - min(st) <= 0:
                continue
            k = st.index(last)
            waits = sum(min(max(last - s_, 0), e_ - s_) for s_, e_ in zip(st, en))
            late[mem[k]].append((idx[k][c], {r: idx[j][c] for j, r in enumerate(mem) if j != k}, waits))
    pos = {x.rank: i for i, x in enumerate(R)}
    for e in rk.get("late") or []:
        r = pos.get(e.get("rank"))
        p = f"ranks.late rank {e.get('rank')}"
        if not A.ok(r is not None and late.get(r), f"{p} exists", "a late rank", "it arrived last at no call"):
            continue
        calls = late[r]
        A.ok(e.get("count") == len(calls), f"{p} count", e.get("count"), len(calls))
        A.ok(e.get("of") == matched[r], f"{p} of", e.get("of"), matched[r])
        A.eq_us(f"{p} waits_caused_us", e.get("waits_caused_us"), sum(w for _, _, w in calls), tol=len(calls))
        n = mine_t = theirs_t = 0
        for i, partners, _ in calls:
            mine = R[r].interval(i)
            theirs = [R[q].interval(j) for q, j in partners.items()]
            theirs = [x for x in theirs if x is not None]
            if mine is None or not theirs:
                continue
            n += 1
            mine_t += mine
            theirs_t += _median_int(theirs)
        A.ok(e.get("compared") == n, f"{p} compared", e.get("compared"), n)
        A.eq_us(f"{p} interval_us (previous collective's end to the launch)", e.get("interval_us"), mine_t,
                tol=max(n, 1))
        A.eq_us(f"{p} others_interval_us (median of the others', same calls)", e.get("others_interval_us"),
                theirs_t, tol=max(n, 1))
    return A


def print_summary(A, label, out):
    """Each mismatch, then the trace's summary line (claims checked, mismatches, not checkable and why)."""
    for line in A.mismatches:
        print(line, file=out)
    nc = sum(A.unchecked.values())
    detail = ", ".join(f"{k} x{v}" for k, v in sorted(A.unchecked.items()))
    print(f"{label}: summary: {A.checked} claims checked, {len(A.mismatches)} mismatches, {nc} not checkable"
          + (f" ({detail})" if detail else ""), file=out)
    return A


def audit_ranks_paths(paths, cmd, cwd, whole=False, out=sys.stdout):
    label = " + ".join(os.path.basename(p) for p in paths)
    docs_trs = []
    for pth in paths:
        doc = read_trace(pth)
        docs_trs.append((doc, Trace(doc)))
    argv = shlex.split(cmd) + ["report", "--json", "--top", "100000"] + (["--whole-trace"] if whole else []) + [
        os.path.abspath(p) for p in paths]
    pr = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if pr.returncode != 0:
        A = Audit(label)
        A.ok(False, "report", f"no JSON ({pr.stderr.strip()[-160:]})", "readable traces")
    else:
        A = audit_ranks(docs_trs, json.loads(pr.stdout), label)
    return print_summary(A, label, out)


# -------------------------------------------------------------------------------------------- driver
def run_report(cmd, cwd, path, whole):
    argv = shlex.split(cmd) + ["report", "--json", "--top", "100000"] + (["--whole-trace"] if whole else []) + [path]
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"report failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout)


def all_traces():
    out = []
    for d in (os.path.join(REPO, "traces"), os.path.join(REPO, "..", "shared", "traces")):
        if not os.path.isdir(d):
            continue
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith((".json", ".json.gz")) and not f.endswith(".ranks.json"):
                    out.append(os.path.join(root, f))
    seen, uniq = set(), []
    for p in out:
        r = os.path.realpath(p)
        if r not in seen:
            seen.add(r)
            uniq.append(p)
    return uniq


def audit_path(path, cmd, cwd, whole=False, out=sys.stdout):
    label = os.path.relpath(path, REPO) if not os.path.relpath(path, REPO).startswith("../..") else path
    try:
        doc = read_trace(path)
    except (ValueError, OSError, EOFError) as e:
        print(f"{label}: skipped: not strict JSON ({type(e).__name__}: {str(e)[:80]})", file=out)
        return None
    if isinstance(doc, dict) and "traceEvents" not in doc:
        print(f"{label}: skipped: not a Kineto trace (no traceEvents)", file=out)
        return None
    tr = Trace(doc)
    try:
        rep = run_report(cmd, cwd, os.path.abspath(path), whole)
    except (RuntimeError, ValueError) as e:  # the trace reads, the report does not: that is a finding too
        A = Audit(label)
        A.ok(False, "report", f"no JSON ({str(e)[:160]})", "a readable trace")
        print(A.mismatches[0], file=out)
        print(f"{label}: summary: 1 claims checked, 1 mismatches, 0 not checkable", file=out)
        return A
    A = audit_report(path, tr, rep, label, whole)
    return print_summary(A, label, out)


def _run_text(cmd, cwd, argv):
    p = subprocess.run(shlex.split(cmd) + argv, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"report failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    return p.stdout


def audit_pair(pa, pb, cmd, cwd, out=sys.stdout):
    """``comparison.unprofiled`` of the pair's report against the two traces' metadata (see the module text)."""
    label = f"{os.path.basename(pa)} -> {os.path.basename(pb)}"
    A = Audit(label)
    metas = []
    for p in (pa, pb):
        doc = read_trace(p)
        metas.append(doc.get("gapscope") if isinstance(doc, dict) and isinstance(doc.get("gapscope"), dict) else {})
    ap, bp = os.path.abspath(pa), os.path.abspath(pb)
    rep = json.loads(_run_text(cmd, cwd, ["report", "--json", ap, bp]))
    md = _run_text(cmd, cwd, ["report", ap, bp])
    u = (rep.get("comparison") or {}).get("unprofiled")
    if not A.ok(isinstance(u, dict), "comparison.unprofiled", type(u).__name__, "an object"):
        print(A.mismatches[0], file=out)
        return A

    def per_step(m):
        q = m.get("unprofiled") if isinstance(m.get("unprofiled"), dict) else None
        k = m.get("active")
        if q is None or not isinstance(k, int) or k < 1 or not all(
                isinstance(q.get(x), (int, float)) for x in ("median_us", "p25_us", "p75_us")):
            return None
        return {x: q[x] / k for x in ("median_us", "p25_us", "p75_us")}

    sa, sb = per_step(metas[0]), per_step(metas[1])
    both = sa is not None and sb is not None
    A.ok(u["basis"] == ("unprofiled" if both else "profiled"), "unprofiled.basis", u["basis"],
         "unprofiled" if both else "profiled (a trace has no un-profiled times)")
    if both:
        close = lambda x, y: x is not None and abs(x - y) <= 0.002  # noqa: E731 - 3 decimals of µs
        for side, s in (("a", sa), ("b", sb)):
            for key, want in (("step_us", s["median_us"]), ("p25_us", s["p25_us"]), ("p75_us", s["p75_us"])):
                A.ok(close(u[side][key], want), f"unprofiled.{side}.{key}", u[side][key], f"{want:.3f}")
        d = sb["median_us"] - sa["median_us"]
        A.ok(close(u["delta_us"], d), "unprofiled.delta_us", u["delta_us"], f"{d:.3f}")
        pct = 100.0 * d / sa["median_us"]
        A.ok(u["delta_pct"] is not None and abs(u["delta_pct"] - pct) <= 0.002, "unprofiled.delta_pct",
             u["delta_pct"], f"{pct:.3f}")
        if sb["p75_us"] < sa["p25_us"]:
            want = "faster"
        elif sb["p25_us"] > sa["p75_us"]:
            want = "slower"
        else:
            want = "no clear change"
        A.ok(u["verdict"] == want, "unprofiled.verdict", u["verdict"], want)
        ra, rb = (m.get("profiled_us") / m["unprofiled"]["median_us"]
                  if isinstance(m.get("profiled_us"), (int, float)) else None for m in metas)
        if ra and rb:
            A.ok(u["distortion_differs"] == (max(ra, rb) / min(ra, rb) > 1.15), "unprofiled.distortion_differs",
                 u["distortion_differs"], f"{ra:.2f}x vs {rb:.2f}x")
        else:
            A.na("unprofiled.distortion_differs")
    else:
        A.na("unprofiled (profiled stand-in)")
    body = md.split("## What changed\n\n", 1)[-1].splitlines()
    first = body[0] if body else ""
    A.ok(first.endswith(f": {u['verdict']}**.") or f": {u['verdict']} (" in first, "Markdown's first change",
         first[:120], f"the verdict '{u['verdict']}'")
    for line in A.mismatches:
        print(line, file=out)
    nc = sum(A.unchecked.values())
    print(f"{label}: summary: {A.checked} claims checked, {len(A.mismatches)} mismatches, {nc} not checkable",
          file=out)
    return A


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*")
    ap.add_argument("--all", action="store_true", help="every trace in traces/ and ../shared/traces/")
    ap.add_argument("--report-cmd", default=f"{shlex.quote(sys.executable)} -m gapscope",
                    help="command that runs gapscope (default: this Python, -m gapscope)")
    ap.add_argument("--cwd", default=REPO, help="directory to run the report command in (default: this checkout)")
    ap.add_argument("--whole-trace", action="store_true", help="audit the report's --whole-trace window")
    ap.add_argument("--pair", nargs=2, action="append", default=[], metavar=("A", "B"),
                    help="audit the before/after verdict of `report A B` (comparison.unprofiled); repeatable")
    ap.add_argument("--ranks", action="store_true",
                    help="the traces are the ranks of one job: audit the report of them together (late ranks)")
    a = ap.parse_args(argv)
    if a.ranks:
        if len(a.traces) < 2:
            ap.print_usage(sys.stderr)
            return 2
        A = audit_ranks_paths(a.traces, a.report_cmd, a.cwd, a.whole_trace)
        return 1 if A.mismatches else 0
    paths = list(a.traces) + (all_traces() if a.all else [])
    if not paths and not a.pair:
        ap.print_usage(sys.stderr)
        return 2
    bad = 0
    for pa, pb in a.pair:
        P = audit_pair(pa, pb, a.report_cmd, a.cwd)
        if P.mismatches:
            bad += 1
        sys.stdout.flush()
    for pth in paths:
        A = audit_path(pth, a.report_cmd, a.cwd, a.whole_trace)
        if A is not None and A.mismatches:
            bad += 1
        sys.stdout.flush()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
