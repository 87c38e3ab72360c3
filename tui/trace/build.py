"""Turn parsed trace events (dicts) into the columnar TraceModel.

``ColumnBuilder.add(events)`` may be called once per chunk of events, so the parser can hand over
bounded chunks and free them; ``finish()`` sorts, links and returns the model.
"""

from __future__ import annotations

import re
from array import array

import numpy as np

from .model import CPU_NEST_KINDS, GPU_WORK_KINDS, NO_ID, Kind, TraceModel, Track, TrackKind

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None
import json as _json

# Category spellings, old and new (kineto-format.md). Lower-cased before lookup.
CATEGORY_KIND = {
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "python_function": Kind.PYTHON,
    "python": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "driver": Kind.DRIVER,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "cuda_sync": Kind.SYNC,
    "overhead": Kind.OVERHEAD,
    "cpu_instant_event": Kind.INSTANT,
}
GPU_SIDE_KINDS = frozenset(
    {Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.GPU_ANNOTATION, Kind.SYNC}
)
# flow phases (linking is done by correlation, not by flows); counted, not stored
FLOW_PHASES = frozenset({"s", "f", "t"})
# args keys already held in columns (or per-event noise that would defeat interning)
_ARGS_DROP = frozenset(
    {
        "correlation",
        "External id",
        "external id",
        "Python id",
        "Python parent id",
        "Ev Idx",
        "Addr",
        "device",
        "stream",
        "context",
        "Record function id",
        "Fwd thread id",
        "Sequence number",
        "external ts",
    }
)
_STREAM_RE = re.compile(r"^\s*stream\s+(\d+)", re.I)


def _as_id(v):
    """pid/tid as int where possible (numeric strings too), else the string itself."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v and abs(v) < 2**63:
        return int(v)
    if isinstance(v, str):
        s = v.strip()
        if s.lstrip("-").isdigit():
            try:
                return int(s)
            except ValueError:
                return v
        return v
    return str(v)


def _int_or(v, default=NO_ID):
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v and abs(v) < 2**63:
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return default


def _ns(v) -> int | None:
    """µs (int or float, possibly a numeric string) to int ns; None when not a finite number."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v * 1000
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return None
        return int(round(v * 1000.0))
    if isinstance(v, str):
        try:
            return _ns(float(v)) if not v.strip().lstrip("-").isdigit() else int(v) * 1000
        except ValueError:
            return None
    return None


class ColumnBuilder:
    """Accumulates events into compact arrays; ``finish`` returns the model."""

    def __init__(self, path: str = "<memory>"):
        self.path = path
        self.ts = array("q")
        self.dur = array("q")
        self.kind = array("B")
        self.track = array("i")
        self.name_id = array("i")
        self.corr = array("q")
        self.ext = array("q")
        self.pyid = array("q")
        self.pypar = array("q")
        self.args_id = array("i")
        self.nbytes = array("q")
        self.names: list[str] = []
        self._name_ix: dict[str, int] = {}
        self.args: list[bytes] = []
        self._args_ix: dict[bytes, int] = {}
        self._track_ix: dict[tuple, int] = {}
        self.tracks: list[Track] = []
        self.thread_names: dict[tuple, str] = {}
        self.process_names: dict = {}
        self.sort_index: dict[tuple, int] = {}
        self.category_counts: dict[str, int] = {}
        self.warnings: list[str] = []
        self._bad = {"no_ts": 0, "neg_dur": 0, "no_dur": 0, "not_object": 0, "open": 0}

    # ------------------------------------------------------------ interning
    def _intern_name(self, name) -> int:
        if not isinstance(name, str):
            name = "" if name is None else str(name)
        i = self._name_ix.get(name)
        if i is None:
            i = len(self.names)
            self.names.append(name)
            self._name_ix[name] = i
        return i

    def _intern_args(self, args: dict) -> int:
        kept = {k: v for k, v in args.items() if k not in _ARGS_DROP}
        if not kept:
            return -1
        try:
            if _orjson is not None:
                raw = _orjson.dumps(kept, option=_orjson.OPT_SORT_KEYS | _orjson.OPT_NON_STR_KEYS)
            else:  # pragma: no cover
                raw = _json.dumps(kept, sort_keys=True, default=str).encode()
        except (TypeError, ValueError):
            raw = _json.dumps(kept, sort_keys=True, default=str).encode()
        i = self._args_ix.get(raw)
        if i is None:
            i = len(self.args)
            self.args.append(raw)
            self._args_ix[raw] = i
        return i

    def _track_for(self, kind: Kind, pid, tid, args: dict) -> int:
        if kind in GPU_SIDE_KINDS and not isinstance(pid, str):
            dev = _int_or(args.get("device"), pid if isinstance(pid, int) else -1)
            st = args.get("stream")
            stream = _int_or(st, NO_ID)
            if stream == NO_ID:
                if isinstance(tid, int):
                    stream = tid
                elif isinstance(tid, str):
                    m = _STREAM_RE.match(tid)
                    stream = int(m.group(1)) if m else NO_ID
            key = ("gpu", dev, stream)
        elif kind is Kind.OVERHEAD or isinstance(pid, str) or isinstance(tid, str):
            key = ("other", pid, tid)
        else:
            key = ("cpu", pid, tid)
        t = self._track_ix.get(key)
        if t is None:
            t = len(self.tracks)
            if key[0] == "gpu":
                tr = Track(t, TrackKind.GPU, pid, tid, f"cuda:{key[1]} stream {key[2]}", device=key[1], stream=key[2])
            elif key[0] == "cpu":
                tr = Track(t, TrackKind.CPU, pid, tid, f"thread {tid}")
            else:
                label = "profiler overhead" if kind is Kind.OVERHEAD else f"{pid} / {tid}"
                tr = Track(t, TrackKind.OTHER, pid, tid, label)
            self.tracks.append(tr)
            self._track_ix[key] = t
        return t

    # ------------------------------------------------------------------ add
    def add(self, events) -> None:
        """Add a chunk of parsed events (an iterable of dicts)."""
        cc = self.category_counts
        for e in events:
            if not isinstance(e, dict):
                self._bad["not_object"] += 1
                continue
            cat = e.get("cat")
            ph = e.get("ph")
            ckey = cat if isinstance(cat, str) else "<none>"
            cc[ckey] = cc.get(ckey, 0) + 1
            if ph == "M":
                self._metadata_event(e)
                continue
            if ph in FLOW_PHASES:
                continue
            ts = _ns(e.get("ts"))
            if ts is None:
                self._bad["no_ts"] += 1
                continue
            args = e.get("args")
            if not isinstance(args, dict):
                args = {}
            kind = CATEGORY_KIND.get(cat.lower()) if isinstance(cat, str) else None
            if ph == "i" or ph == "I":
                kind = Kind.INSTANT if kind is None or kind is Kind.INSTANT else kind
                dur = 0
            else:
                if kind is None:
                    kind = Kind.OTHER
                dur = _ns(e.get("dur"))
                if dur is None:
                    if ph == "X":
                        self._bad["no_dur"] += 1
                    dur = 0
                elif dur < 0:
                    self._bad["neg_dur"] += 1
                    dur = 0
            if args.get("finished") is False and ph == "X":
                self._bad["open"] += 1
            pid = _as_id(e.get("pid"))
            tid = _as_id(e.get("tid"))
            self.ts.append(ts)
            self.dur.append(dur)
            self.kind.append(int(kind))
            self.track.append(self._track_for(kind, pid, tid, args))
            self.name_id.append(self._intern_name(e.get("name")))
            self.corr.append(_int_or(args.get("correlation")))
            ext = args.get("External id")
            if ext is None:
                ext = args.get("external id")
            self.ext.append(_int_or(ext))
            self.pyid.append(_int_or(args.get("Python id")))
            self.pypar.append(_int_or(args.get("Python parent id")))
            b = args.get("bytes")
            if b is None:
                b = args.get("Bytes")
            self.nbytes.append(_int_or(b, 0))
            self.args_id.append(self._intern_args(args) if args else -1)

    def _metadata_event(self, e: dict) -> None:
        name = e.get("name")
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        pid = _as_id(e.get("pid"))
        tid = _as_id(e.get("tid"))
        if name == "thread_name" and isinstance(args.get("name"), str):
            # Several thread_name records can exist for one tid; the most specific (longest) wins.
            prev = self.thread_names.get((pid, tid))
            nm = args["name"].strip()
            if prev is None or len(nm) > len(prev):
                self.thread_names[(pid, tid)] = nm
        elif name == "process_name" and isinstance(args.get("name"), str):
            self.process_names[pid] = args["name"].strip()
        elif name in ("thread_sort_index", "process_sort_index"):
            self.sort_index[(pid, tid if name == "thread_sort_index" else None)] = _int_or(
                args.get("sort_index"), 0
            )

    # --------------------------------------------------------------- finish
    def finish(self, metadata: dict | None = None) -> TraceModel:
        metadata = dict(metadata or {})
        ts = np.frombuffer(self.ts, dtype=np.int64).copy() if len(self.ts) else np.zeros(0, np.int64)
        dur = np.frombuffer(self.dur, dtype=np.int64).copy() if len(self.dur) else np.zeros(0, np.int64)
        track = np.asarray(self.track, dtype=np.int32)
        order = np.lexsort((-dur, ts, track)) if ts.size else np.zeros(0, np.int64)

        def col(a, dt):
            arr = np.asarray(a, dtype=dt) if len(a) else np.zeros(0, dt)
            return arr[order]

        ts = ts[order]
        dur = dur[order]
        track = track[order]
        kind = col(self.kind, np.uint8)
        name_id = col(self.name_id, np.int32)
        corr = col(self.corr, np.int64)
        ext = col(self.ext, np.int64)
        pyid = col(self.pyid, np.int64)
        pypar = col(self.pypar, np.int64)
        args_id = col(self.args_id, np.int32)
        nbytes = col(self.nbytes, np.int64)
        del order
        # free the staging arrays as soon as the columns exist
        for a in ("ts", "dur", "kind", "track", "name_id", "corr", "ext", "pyid", "pypar", "args_id", "nbytes"):
            setattr(self, a, None)

        ntr = len(self.tracks)
        offsets = np.zeros(ntr + 1, dtype=np.int64)
        if ntr:
            offsets[1:] = np.cumsum(np.bincount(track, minlength=ntr))

        depth, parent = _nesting(ts, dur, kind, pyid, pypar, offsets)
        launch, op = _links(ts, kind, corr, ext, parent)

        self._name_tracks()
        warnings = self._warnings(kind, launch)
        devices = metadata.get("deviceProperties")
        model = TraceModel(
            path=self.path,
            ts_ns=ts,
            dur_ns=dur,
            kind=kind,
            track=track,
            name_id=name_id,
            corr=corr,
            ext_id=ext,
            py_id=pyid,
            py_parent=pypar,
            depth=depth,
            parent=parent,
            args_id=args_id,
            nbytes=nbytes,
            launch=launch,
            op=op,
            track_offsets=offsets,
            names=self.names,
            args=self.args,
            tracks=self.tracks,
            devices=list(devices) if isinstance(devices, list) else [],
            metadata={k: v for k, v in metadata.items() if k != "traceEvents"},
            warnings=warnings,
            category_counts=self.category_counts,
        )
        return model

    def _name_tracks(self) -> None:
        for tr in self.tracks:
            if tr.kind is TrackKind.CPU:
                nm = self.thread_names.get((tr.pid, tr.tid))
                if nm:
                    tr.name = nm
                else:
                    pn = self.process_names.get(tr.pid)
                    tr.name = f"thread {tr.tid}" + (f" ({pn})" if pn else "")
                tr.sort_index = self.sort_index.get((tr.pid, tr.tid), 0)
            elif tr.kind is TrackKind.GPU:
                tr.sort_index = self.sort_index.get((tr.pid, tr.tid), 0)

    def _warnings(self, kind: np.ndarray, launch: np.ndarray) -> list[str]:
        w = list(self.warnings)
        b = self._bad
        if b["not_object"]:
            w.append(f"{b['not_object']} entries of traceEvents were not objects and were skipped")
        if b["no_ts"]:
            w.append(f"{b['no_ts']} events had no usable timestamp and were skipped")
        if b["no_dur"]:
            w.append(f"{b['no_dur']} complete events had no duration; treated as 0")
        if b["neg_dur"]:
            w.append(f"{b['neg_dur']} events had a negative duration; clamped to 0")
        if b["open"]:
            w.append(f"{b['open']} CPU ranges were still open at the window end (stretched to it)")
        gpu = np.isin(kind, np.array([int(k) for k in GPU_WORK_KINDS], dtype=np.uint8))
        missing = int(np.count_nonzero(gpu & (launch < 0)))
        if missing and int(np.count_nonzero(gpu)):
            w.append(f"{missing} of {int(np.count_nonzero(gpu))} GPU operations have no launch call in the trace")
        return w


def _nesting(ts, dur, kind, pyid, pypar, offsets):
    """Depth and parent per event: CPU-family events nest by time on their track; Python frames by
    their Python id tree (time nesting when ids are absent). GPU events are depth 0, no parent."""
    n = ts.shape[0]
    depth = np.zeros(n, dtype=np.int16)
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return depth, parent
    cpu_fam = np.isin(kind, np.array([int(k) for k in CPU_NEST_KINDS], dtype=np.uint8))
    is_py = kind == Kind.PYTHON
    track_of = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))
    for fam in (cpu_fam, is_py & (pyid < 0)):
        idx = np.flatnonzero(fam)
        if idx.size:
            _time_nesting(idx, ts, dur, track_of, depth, parent)
    py = np.flatnonzero(is_py & (pyid >= 0))
    if py.size:
        _tree_nesting(py, pyid, pypar, depth, parent)
    return depth, parent


def _time_nesting(idx, ts, dur, track_of, depth, parent):
    """Vectorised nesting of intervals per track. ``idx`` is sorted by (track, ts, -dur)."""
    s = ts[idx]
    e = s + dur[idx]
    tr = track_of[idx]
    # Make times track-local by offsetting each track into its own band, so one sort handles all.
    span = int(max(int(e.max()) - int(s.min()), 0)) + 2
    base = int(s.min())
    ntr = int(tr.max()) + 1
    if span * ntr > 2**62:  # absurd time ranges (damaged files): do each track on its own
        for t in np.unique(tr):
            sub = tr == t
            if np.count_nonzero(sub) < idx.size:
                _time_nesting(idx[sub], ts, dur, track_of, depth, parent)
        return
    s_b = (s - base) + tr.astype(np.int64) * span
    e_b = (e - base) + tr.astype(np.int64) * span
    m = idx.size
    pos = np.arange(m, dtype=np.int64)
    e_sorted = np.sort(e_b)
    ends_le = np.searchsorted(e_sorted, s_b, side="right")
    # zero-length events at exactly s_i that come at or after i (they sort last in their ts group)
    zero = (e_b == s_b).astype(np.int64)
    zc = np.concatenate(([0], np.cumsum(zero)))
    group_end = np.searchsorted(s_b, s_b, side="right")
    later_zero = zc[group_end] - zc[pos]
    d = pos - (ends_le - later_zero)
    d = np.clip(d, 0, np.iinfo(np.int16).max)
    depth[idx] = d.astype(np.int16)
    # parent: the last earlier event one level up (on the same track)
    par = np.full(m, -1, dtype=np.int64)
    maxd = int(d.max()) if m else 0
    for lvl in range(1, maxd + 1):
        here = np.flatnonzero(d == lvl)
        up = np.flatnonzero(d == lvl - 1)
        if not here.size or not up.size:
            continue
        k = np.searchsorted(up, here, side="left") - 1
        ok = k >= 0
        cand = up[np.where(ok, k, 0)]
        ok &= tr[cand] == tr[here]
        ok &= e_b[cand] > s_b[here]
        par[here[ok]] = cand[ok]
    parent[idx] = np.where(par >= 0, idx[np.where(par >= 0, par, 0)], -1)


def _tree_nesting(py, pyid, pypar, depth, parent):
    ids = pyid[py]
    order = np.argsort(ids, kind="stable")
    sids = ids[order]
    want = pypar[py]
    k = np.searchsorted(sids, want)
    k = np.clip(k, 0, max(sids.size - 1, 0))
    found = (want >= 0) & (sids[k] == want) if sids.size else np.zeros(py.size, bool)
    par_local = np.where(found, order[k], -1)
    parent[py] = np.where(par_local >= 0, py[np.where(par_local >= 0, par_local, 0)], -1)
    # depth by pointer chasing, bounded (cycles in damaged files must not hang)
    d = np.zeros(py.size, dtype=np.int64)
    cur = par_local.copy()
    for _ in range(4096):
        live = cur >= 0
        if not live.any():
            break
        d[live] += 1
        cur[live] = par_local[cur[live]]
    depth[py] = np.clip(d, 0, np.iinfo(np.int16).max).astype(np.int16)


def _links(ts, kind, corr, ext, parent):
    """launch: GPU op -> runtime/driver call with the same correlation.
    op: GPU op and runtime call -> innermost enclosing aten op (by time on the launching thread),
    falling back to the cpu_op with the same External id."""
    n = ts.shape[0]
    launch = np.full(n, -1, dtype=np.int64)
    op = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return launch, op
    is_rt = ((kind == Kind.RUNTIME) | (kind == Kind.DRIVER)) & (corr >= 0)
    gpu = np.isin(kind, np.array([int(k) for k in GPU_WORK_KINDS], dtype=np.uint8))
    rt = np.flatnonzero(is_rt)
    if rt.size:
        # prefer runtime over driver for the same correlation: sort by (corr, kind)
        o = np.lexsort((kind[rt], corr[rt]))
        rts = rt[o]
        c = corr[rts]
        g = np.flatnonzero(gpu & (corr >= 0))
        k = np.searchsorted(c, corr[g], side="left")
        kk = np.clip(k, 0, c.size - 1)
        ok = (k < c.size) & (c[kk] == corr[g])
        launch[g[ok]] = rts[kk[ok]]
    # innermost cpu_op ancestor for each runtime/driver call (walk up the parent chain)
    rt_all = np.flatnonzero((kind == Kind.RUNTIME) | (kind == Kind.DRIVER))
    if rt_all.size:
        cur = parent[rt_all].copy()
        res = np.full(rt_all.size, -1, dtype=np.int64)
        for _ in range(512):
            live = (cur >= 0) & (res < 0)
            if not live.any():
                break
            hit = live & (kind[np.where(cur >= 0, cur, 0)] == Kind.CPU_OP)
            res[hit] = cur[hit]
            step = live & ~hit
            cur[step] = parent[cur[step]]
            cur[~step] = -1
        op[rt_all] = res
    g_all = np.flatnonzero(gpu)
    if g_all.size:
        ln = launch[g_all]
        op[g_all] = np.where(ln >= 0, op[np.where(ln >= 0, ln, 0)], -1)
        # fallback: External id -> cpu_op
        miss = g_all[(op[g_all] < 0) & (ext[g_all] >= 0)]
        cpu = np.flatnonzero((kind == Kind.CPU_OP) & (ext >= 0))
        if miss.size and cpu.size:
            o = np.argsort(ext[cpu], kind="stable")
            ce = ext[cpu][o]
            k = np.searchsorted(ce, ext[miss])
            kk = np.clip(k, 0, ce.size - 1)
            ok = (k < ce.size) & (ce[kk] == ext[miss])
            op[miss[ok]] = cpu[o][kk[ok]]
    return launch, op
