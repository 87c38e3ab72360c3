"""Turn trace events into the columnar TraceModel.

``ColumnBuilder.add_bytes(text)`` is called once per piece of the events array (``add(events)`` takes parsed
dicts), so the reader can hand over bounded pieces and free them; ``finish()`` sorts, links and returns the
model.

Decoding is in three lanes, each its own module returning a ``decode_common.StagedChunk``: typed records
(``decode_typed``, msgspec: the fast lane), dicts (``decode_dicts``, for pieces the records do not fit: a string
id, a float pid), and sanitised dicts (``decode_dicts.sanitize``, for chunks with values of unexpected types: a
string timestamp, an unhashable id, non-dict args). A chunk moves to the next lane only when a decoder refuses
it explicitly (``SlowLane``); ``ColumnBuilder.lanes`` counts the chunks per lane, and GAPSCOPE_STRICT_DECODE=1
makes a refusal raise (tests on real traces). Args are kept for the kinds someone reads them for: kernels,
copies, memsets, instants ([memory]), syncs and unknown categories interned without their per-event ids; CPU
ops (shapes, collectives) one entry each, as written.
"""
from __future__ import annotations

from itertools import compress

import numpy as np

from . import decode_typed as _typed
from .decode_common import (  # noqa: F401  (CATEGORY_KIND: the category table, read elsewhere)
    _COLS, _GPU_SIDE_ARR, _GPU_SIDE_INT, _IS_NONE, _KIND_LOOKUP, _KNOWN_NON_EVENT_CATS, _NO_ARGS, _STREAM_RE,
    CATEGORY_KIND, SlowLane, Staged, _as_id, _dumps, _int_or, strict,
)
from .decode_dicts import sanitize, stage_dicts
from .model import ARGS_DROP, CPU_NEST_KINDS, GPU_WORK_KINDS, NO_ID, BlobList, Kind, TraceModel, Track, TrackKind

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None
import json as _json

_dict_loads = _orjson.loads if _orjson is not None else _json.loads
#: the typed lane can be turned off (GAPSCOPE_DECODER=dicts), e.g. to compare both lanes
FAST_DECODE = _typed.FAST_DECODE




class ColumnBuilder:
    """Accumulates events into compact arrays chunk by chunk; ``finish`` returns the model."""

    def __init__(self, path: str = "<memory>"):
        self.path = path
        self._cols: dict[str, list[np.ndarray]] = {k: [] for k in _COLS}
        self.names: list[str] = []
        self._name_ix: dict = {}
        self.args: list[bytes] = []
        self._args_ix: dict[bytes, int] = {}
        # CPU ops' args as written, one entry each (ids -2 - k until finish): one growing buffer plus lengths,
        # so millions of entries are never millions of objects, and finish() needs no second copy
        self._rbuf = bytearray()
        self._rlens: list[np.ndarray] = []
        self.n_rargs = 0
        self._track_ix: dict[tuple, int] = {}
        self._raw_track: dict[tuple, int] = {}
        self.tracks: list[Track] = []
        self.thread_names: dict[tuple, str] = {}
        self.process_names: dict = {}
        self.sort_index: dict[tuple, int] = {}
        self.category_counts: dict[str, int] = {}
        self.warnings: list[str] = []
        self._bad = {"no_ts": 0, "neg_dur": 0, "no_dur": 0, "not_object": 0, "open": 0, "args_enc": 0}
        self.n_added = 0
        self._kind_of_cat: dict = dict(_KIND_LOOKUP)  # every cat spelling met so far -> kind
        #: chunks per decoding lane: typed records, refused by them, dicts, sanitised dicts
        self.lanes = {"typed": 0, "typed_refused": 0, "dicts": 0, "sanitised": 0}

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

    def _intern_args_list(self, arg_dicts: list) -> np.ndarray:
        """Interned ids of ``arg_dicts``, each encoded without its id keys."""
        drop = ARGS_DROP
        raws = []
        for a in arg_dicts:
            if not a:
                raws.append(None)
                continue
            try:
                raws.append(_dumps({k: v for k, v in a.items() if k not in drop}))
            except (TypeError, ValueError, RecursionError, OverflowError):
                self._bad["args_enc"] += 1
                raws.append(None)
        ix = self._args_ix
        ids = list(map(ix.get, raws))
        if None in ids:
            store = self.args
            for j, v in enumerate(ids):
                if v is None:
                    raw = raws[j]
                    if raw is None or raw == b"{}":
                        ids[j] = -1
                        continue
                    i = ix.get(raw)
                    if i is None:
                        raw = memoryview(raw).tobytes()  # orjson's bytes hold a 4 KiB buffer: kept, a copy its size
                        i = len(store)
                        store.append(raw)
                        ix[raw] = i
                    ids[j] = i
        return np.array(ids, dtype=np.int32)

    def _track_for(self, kind: int, pid, tid, args: dict) -> int:
        if kind in _GPU_SIDE_INT and not isinstance(pid, str):
            dev = _int_or(args.get("device"), pid if isinstance(pid, int) else -1)
            stream = _int_or(args.get("stream"), NO_ID)
            if stream == NO_ID:
                if isinstance(tid, int):
                    stream = tid
                elif isinstance(tid, str):
                    m = _STREAM_RE.match(tid)
                    stream = int(m.group(1)) if m else NO_ID
            key = ("gpu", dev, stream)
        elif kind == Kind.OVERHEAD or isinstance(pid, str) or isinstance(tid, str):
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
                label = "profiler overhead" if kind == Kind.OVERHEAD else (f"{pid} / {tid}".strip(" /") or "markers")
                tr = Track(t, TrackKind.OTHER, pid, tid, label)
            self.tracks.append(tr)
            self._track_ix[key] = t
        return t

    # ------------------------------------------------------------------ add
    def add(self, events) -> None:
        """Add a chunk of parsed events (a list of dicts). The chunk may be freed afterwards."""
        evs = events if isinstance(events, list) else list(events)
        if not evs:
            return
        if set(map(type, evs)) != {dict}:
            kept = [e for e in evs if type(e) is dict]
            self._bad["not_object"] += len(evs) - len(kept)
            evs = kept
            if not evs:
                return
        try:
            chunk = stage_dicts(self, evs)
        except SlowLane:
            if strict():
                raise
            self.lanes["sanitised"] += 1
            chunk = stage_dicts(self, [sanitize(e) for e in evs])
        self._commit(*chunk)

    def add_bytes(self, text, loads=None) -> None:
        """Add the events of one piece of JSON text holding an array of event objects: typed records when
        they fit (``decode_typed``), else dicts parsed by ``loads`` (default ``orjson.loads``), so a text that
        is not JSON raises what ``loads`` raises (the reader's recovery relies on its message)."""
        if FAST_DECODE:
            evs = _typed.decode_events(text)
            if evs is not None:
                try:
                    chunk = _typed.stage_typed(self, evs, text)
                except SlowLane:
                    if strict():
                        raise
                    chunk = None
                del evs
                if chunk is not None:
                    self.lanes["typed"] += 1
                    self._commit(*chunk)
                    return
            self.lanes["typed_refused"] += 1
        self.lanes["dicts"] += 1
        ColumnBuilder.add(self, (loads or _dict_loads)(text))

    def lookups(self, kind: np.ndarray, names, pids, tids):
        """Track keys, and the name and track ids known so far (None where new: interned at commit). Lookups
        only: they raise TypeError here, inside the fast path, for unhashable values."""
        gside = np.isin(kind, _GPU_SIDE_ARR)
        tkeys = list(zip(gside.tolist(), pids, tids))
        return tkeys, list(map(self._name_ix.get, names)), list(map(self._raw_track.get, tkeys))


    def _commit(self, counts, meta, staged: Staged | None) -> None:
        cc = self.category_counts
        for c, k in counts.items():
            key = c if isinstance(c, str) else "<none>"
            cc[key] = cc.get(key, 0) + k
        for e in meta:
            self._metadata_event(e)
        if staged is None:
            return
        ts, kind, names, nl, tkeys, tl, al = staged.ts, staged.kind, staged.names, staged.name_ix, \
            staged.track_keys, staged.track_ix, staged.ids
        aix, rix, raws = staged.args_rows, staged.raw_rows, staged.raws
        self._bad["open"] += staged.n_open
        n = ts.shape[0]
        # names: each new one interned once, in order of first appearance, then one lookup pass
        if None in nl:
            for nm in dict.fromkeys(compress(names, map(_IS_NONE, nl))):
                self._intern_name(nm)
            nl = list(map(self._name_ix.get, names))
            if None in nl:  # a name that is not a str (interned by its text)
                nl = [self._intern_name(names[i]) if v is None else v for i, v in enumerate(nl)]
        name_id = np.array(nl, dtype=np.int32)
        # tracks: the same, each new key placed once
        rt = self._raw_track
        if None in tl:
            first = {}
            for i in np.flatnonzero(np.fromiter(map(_IS_NONE, tl), bool, len(tl))).tolist():
                first.setdefault(tkeys[i], i)
            for key, i in first.items():
                if key not in rt:
                    a = al[i]
                    if not isinstance(a, dict):  # typed path: the ids record
                        a = {"device": a.device, "stream": a.stream}
                    rt[key] = self._track_for(int(kind[i]), _as_id(key[1]), _as_id(key[2]), a)
            tl = list(map(rt.get, tkeys))
        track = np.array(tl, dtype=np.int32)
        args_id = np.full(n, -1, dtype=np.int32)
        if aix.size:
            args_id[aix] = self._intern_args_list(staged.args)
        if rix.size:
            # one entry each, numbered -2, -3, ... until finish() appends them after the interned table
            keep = [r is not None and r not in _NO_ARGS for r in raws]
            if not all(keep):
                rix = rix[np.array(keep, dtype=bool)]
                raws = list(compress(raws, keep))
            base = self.n_rargs
            self._rbuf += b"".join(raws)
            self._rlens.append(np.fromiter(map(len, raws), np.int64, len(raws)))
            self.n_rargs += len(raws)
            args_id[rix] = -2 - (base + np.arange(len(raws), dtype=np.int64))
        self._bad["no_ts"] += staged.n_no_ts
        self._bad["no_dur"] += staged.no_dur
        self._bad["neg_dur"] += staged.n_neg
        cols = (ts, staged.dur, kind, track, name_id, staged.corr, staged.ext, staged.pyid, staged.pypar, args_id,
                staged.nbytes)
        if staged.n_no_ts:
            cols = tuple(c[staged.ts_ok] for c in cols)
        for k, c in zip(_COLS, cols):
            self._cols[k].append(c)
        self.n_added += int(cols[0].shape[0])

    def _metadata_event(self, e: dict) -> None:
        name = e.get("name")
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        try:
            pid = _as_id(e.get("pid"))
            tid = _as_id(e.get("tid"))
            hash((pid, tid))
        except TypeError:
            return
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
    def _column(self, key: str, dtype) -> np.ndarray:
        parts = self._cols[key]
        self._cols[key] = []
        if not parts:
            return np.zeros(0, dtype)
        if len(parts) == 1:
            return parts[0].astype(dtype, copy=False)
        return np.concatenate(parts).astype(dtype, copy=False)

    def finish(self, metadata: dict | None = None) -> TraceModel:
        metadata = dict(metadata or {})
        ts = self._column("ts", np.int64)
        dur = self._column("dur", np.int64)
        track = self._column("track", np.int32)
        if ts.size:
            # by track, then time, then longest first
            order = np.lexsort((-dur, ts, track))
        else:
            order = np.zeros(0, np.int64)
        ts = ts[order]
        dur = dur[order]
        track = track[order]
        kind = self._column("kind", np.uint8)[order]
        name_id = self._column("name_id", np.int32)[order]
        corr = self._column("corr", np.int64)[order]
        ext = self._column("ext", np.int64)[order]
        pyid = self._column("pyid", np.int64)[order]
        pypar = self._column("pypar", np.int64)[order]
        args_id = self._column("args_id", np.int32)[order]
        nbytes = self._column("nbytes", np.int64)[order]
        del order
        # the args table: the CPU ops' own entries (ids -2 - k until now), then the interned ones, in one buffer
        n_raw = self.n_rargs
        raw = args_id <= -2
        interned = args_id >= 0
        args_id[raw] = -2 - args_id[raw]
        args_id[interned] += n_raw
        lens = self._rlens + [np.fromiter(map(len, self.args), np.int64, len(self.args))]
        buf = self._rbuf
        buf += b"".join(self.args)
        offs = np.zeros(n_raw + len(self.args) + 1, dtype=np.int64)
        np.cumsum(np.concatenate(lens), out=offs[1:])
        args = BlobList(buf, offs)
        self._rbuf, self._rlens, self.n_rargs = bytearray(), [], 0
        # Exact duplicates (a trace concatenated with itself, an event written twice) would double every
        # count and total: keep the first copy and say so.
        if ts.size > 1:
            dup = _exact_duplicates(track, ts, dur, (name_id, kind, corr, ext, pyid, args_id), args_col=5,
                                    args=args)
            n_dup = int(dup.size)
            if n_dup:
                keep = np.ones(ts.size, dtype=bool)
                keep[dup] = False
                ts, dur, track, kind, name_id = ts[keep], dur[keep], track[keep], kind[keep], name_id[keep]
                corr, ext, pyid, pypar = corr[keep], ext[keep], pyid[keep], pypar[keep]
                args_id, nbytes = args_id[keep], nbytes[keep]
                self.warnings.append(f"{n_dup} exact duplicate events were dropped (the same event written twice)")

        ntr = len(self.tracks)
        offsets = np.zeros(ntr + 1, dtype=np.int64)
        if ntr:
            offsets[1:] = np.cumsum(np.bincount(track, minlength=ntr))

        depth, parent = _nesting(ts, dur, kind, pyid, pypar, offsets)
        launch, op = _links(ts, kind, corr, ext, parent)

        self._name_tracks()
        self._track_of_rows, self._ts_rows, self._dur_rows = track, ts, dur
        warnings = self._warnings(kind, launch)
        del self._track_of_rows, self._ts_rows, self._dur_rows
        devices = metadata.get("deviceProperties")
        self._name_ix = {}
        self._args_ix = {}
        return TraceModel(
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
            args=args,
            tracks=self.tracks,
            devices=list(devices) if isinstance(devices, list) else [],
            metadata={k: v for k, v in metadata.items() if k != "traceEvents"},
            warnings=warnings,
            category_counts=self.category_counts,
        )

    def _name_tracks(self) -> None:
        for tr in self.tracks:
            if tr.kind is TrackKind.CPU:
                nm = self.thread_names.get((tr.pid, tr.tid))
                pn = self.process_names.get(tr.pid)
                if nm:
                    tr.name = nm
                else:
                    tr.name = f"thread {tr.tid}" + (f" ({pn})" if pn else "")
                tr.sort_index = self.sort_index.get((tr.pid, tr.tid), 0)
            elif tr.kind is TrackKind.GPU:
                tr.sort_index = self.sort_index.get((tr.pid, tr.tid), 0)
            else:
                nm = self.thread_names.get((tr.pid, tr.tid))
                if nm and tr.name != "profiler overhead":
                    tr.name = nm

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
        if b["args_enc"]:
            w.append(f"{b['args_enc']} events had args that could not be kept (too deeply nested); dropped")
        other = self.category_counts
        unknown = {}
        for c, k in other.items():
            if c in ("<none>",) or c.lower() in CATEGORY_KIND or c.lower() in _KNOWN_NON_EVENT_CATS:
                continue
            unknown[c] = k
        n_other = sum(unknown.values())
        if n_other:
            desc = ", ".join(f"{c} ({k})" for c, k in sorted(unknown.items(), key=lambda x: -x[1])[:5])
            w.append(f"{n_other} events of unknown categories kept as 'other'" + (f": {desc}" if desc else ""))
        kern = np.flatnonzero(kind == Kind.KERNEL)
        if kern.size > 1:
            # Events are sorted by (track, ts). Kernels of one stream run one after another, except for the
            # short tail overlap of programmatic dependent launch (Hopper: a few µs, under a fifth of the
            # shorter kernel on our H200 traces). An overlap of more than half the shorter kernel means the
            # timestamps are wrong or the trace was edited; busy time counts the union either way.
            a, b = kern[:-1], kern[1:]
            same = self._track_of_rows[b] == self._track_of_rows[a]
            ov = self._ts_rows[a] + self._dur_rows[a] - self._ts_rows[b]
            shorter = np.minimum(self._dur_rows[a], self._dur_rows[b])
            n_ov = int(np.count_nonzero(same & (ov >= 1000) & (2 * ov > shorter)))
            if n_ov:
                w.append(f"{n_ov} kernels overlap the previous kernel on their stream by more than half their "
                         "length (kernels of one stream run in order: timestamps off?); busy time counts the "
                         "overlap once")
        gpu = np.isin(kind, np.array([int(k) for k in GPU_WORK_KINDS], dtype=np.uint8))
        n_gpu = int(np.count_nonzero(gpu))
        missing = int(np.count_nonzero(gpu & (launch < 0)))
        if missing and n_gpu:
            w.append(f"{missing} of {n_gpu} GPU operations have no launch call in the trace")
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
    # parent: the last earlier event one level up (on the same track). All levels at once: with the events
    # ordered by (level, position), the one just before (level - 1, position) in that order is it, when it is
    # of level - 1 (one pass per level was quadratic in the depth: 32k levels of a same-timestamp flood)
    lvl_key = d * (m + 1) + pos
    by_lvl = np.argsort(lvl_key, kind="stable")
    sorted_key = lvl_key[by_lvl]
    here = np.flatnonzero(d > 0)
    k = np.searchsorted(sorted_key, (d[here] - 1) * (m + 1) + here, side="left") - 1
    ok = k >= 0
    cand = by_lvl[np.where(ok, k, 0)]
    ok &= d[cand] == d[here] - 1
    ok &= tr[cand] == tr[here]
    ok &= e_b[cand] > s_b[here]
    par = np.full(m, -1, dtype=np.int64)
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


# ------------------------------------------------------------------ parallel load: pieces and merge
class PieceBuilder(ColumnBuilder):
    """A ColumnBuilder for one part of a trace parsed apart from the rest (another process, or the parent's
    own part). Every ``add`` is logged as a unit: its columns (with ids local to this builder), the names,
    args and tracks it introduced, its category counts and its metadata events (kept raw, applied at merge
    time in file order). ``merge_parts`` replays units of several builders in file order into one builder,
    giving the same model as one builder fed every event in that order."""

    def __init__(self, path: str = "<memory>"):
        super().__init__(path)
        self.units: list[tuple] = []
        self._u_counts: dict = {}
        self._u_meta: list = []

    def add(self, events) -> None:
        c0 = len(self._cols["ts"])
        self._u_counts, self._u_meta = {}, []
        super().add(events)
        self._unit(c0)

    def add_bytes(self, text, loads=None) -> None:
        c0 = len(self._cols["ts"])
        self._u_counts, self._u_meta = {}, []
        super().add_bytes(text, loads)
        self._unit(c0)

    def _unit(self, c0: int) -> None:
        self.units.append((c0, len(self._cols["ts"]), len(self.names), len(self.args), len(self.tracks),
                           self._u_counts, self._u_meta, self.n_rargs, len(self._rbuf)))

    def _commit(self, counts, meta, staged) -> None:
        self._u_counts = dict(counts)
        self._u_meta = list(meta)
        super()._commit({}, (), staged)

    def export(self) -> dict:
        """What the merge needs, picklable (sent back from a worker process)."""
        keys = [None] * len(self.tracks)
        for k, t in self._track_ix.items():
            keys[t] = k
        return {"cols": self._cols, "units": self.units, "names": self.names, "args": self.args,
                "rbuf": self._rbuf, "rlens": np.concatenate(self._rlens) if self._rlens else np.zeros(0, np.int64),
                "tracks": self.tracks, "track_keys": keys, "bad": self._bad, "lanes": self.lanes,
                "n_added": self.n_added}


class _Remap:
    """Local -> global ids of one part, grown as its units introduce names, args and tracks."""

    def __init__(self):
        self.names: list[int] = []
        self.args: list[int] = []
        self.tracks: list[int] = []
        self.rargs = 0  # the part's raw args entries taken so far
        self.rbytes = 0  # and their bytes
        self._arr: dict[str, np.ndarray] = {}

    def arr(self, key: str) -> np.ndarray:
        lst = getattr(self, key)
        a = self._arr.get(key)
        if a is None or a.shape[0] != len(lst):
            a = np.array(lst, dtype=np.int32) if lst else np.zeros(0, np.int32)
            self._arr[key] = a
        return a


def _canonical(raw: bytes) -> bytes:
    """The same args written with other spacing (the typed path keeps them as written) compare equal."""
    try:
        return _dumps(_dict_loads(raw))
    except (TypeError, ValueError, RecursionError, OverflowError):
        return raw


def _exact_duplicates(track, ts, dur, others, args_col: int | None = None, args=None) -> np.ndarray:
    """Rows (of arrays sorted by track, ts, -dur) that repeat an earlier row in every column.

    Only rows sharing (track, ts, dur) with a neighbour can repeat one; those few are sorted by the other
    columns so copies sit side by side, which keeps the full sort of every event to three keys. ``others[args_col]``
    holds args ids: entries are compared by their bytes (CPU ops' args are not interned, so two copies of one
    event have different ids)."""
    tie = (track[1:] == track[:-1]) & (ts[1:] == ts[:-1]) & (dur[1:] == dur[:-1])
    if not tie.any():
        return np.zeros(0, dtype=np.int64)
    group = np.cumsum(np.concatenate(([True], ~tie)))
    in_tie = np.zeros(ts.size, dtype=bool)
    in_tie[1:] |= tie
    in_tie[:-1] |= tie
    rows = np.flatnonzero(in_tie)
    if args_col is not None:
        # a copy is equal in every other column too: only rows with such a twin need their args compared
        # (decoding the args of every row of a same-timestamp flood was most of its load)
        plain = [c[rows] for j, c in enumerate(others) if j != args_col] + [group[rows]]
        o = np.lexsort(plain)
        twin = np.ones(rows.size - 1, dtype=bool)
        for c in plain:
            c = c[o]
            twin &= c[1:] == c[:-1]
        if not twin.any():
            return np.zeros(0, dtype=np.int64)
        keep = np.zeros(rows.size, dtype=bool)
        keep[1:] |= twin
        keep[:-1] |= twin
        rows = np.sort(rows[o][keep])
    keys = [c[rows] for c in others] + [group[rows]]
    if args_col is not None and args is not None:
        seen: dict = {}
        ids = keys[args_col].tolist()
        canon = [-1 if a < 0 else seen.setdefault(_canonical(args[a]), len(seen)) for a in ids]
        keys[args_col] = np.array(canon, dtype=np.int64)
        others = tuple(others[:args_col]) + (None,) + tuple(others[args_col + 1 :])
    o = np.lexsort(keys)  # the last key (the group) sorts first
    r = rows[o]
    same = group[r[1:]] == group[r[:-1]]
    for j, c in enumerate(others):
        if c is None:
            k = keys[j][o]
            same &= k[1:] == k[:-1]
        else:
            same &= c[r[1:]] == c[r[:-1]]
    return r[1:][same]


def _intern_into(items, index: dict, table: list, remap: list) -> None:
    """Intern ``items`` (a worker's new names or args) into the global ``table``; append each one's global id
    to ``remap`` (the worker's local id -> global id)."""
    for s in items:
        i = index.get(s)
        if i is None:
            i = index[s] = len(table)
            table.append(s)
        remap.append(i)


def merge_parts(path: str, runs: list[tuple[dict, int, int]]) -> ColumnBuilder:
    """One builder from ``runs`` of (exported part, first unit, end unit), in file order."""
    from dataclasses import replace

    g = ColumnBuilder(path)
    maps: dict[int, _Remap] = {}
    cc = g.category_counts
    name_ix, args_ix, track_ix = g._name_ix, g._args_ix, g._track_ix
    for part, u0, u1 in runs:
        rm = maps.get(id(part))
        if rm is None:
            rm = maps[id(part)] = _Remap()
            for k, v in part["bad"].items():
                g._bad[k] += v
            for k, v in part.get("lanes", {}).items():
                g.lanes[k] += v
            g.n_added += part["n_added"]
        cols = part["cols"]
        for c0, c1, nn, na, nt, counts, meta, nr, nb in part["units"][u0:u1]:
            _intern_into(part["names"][len(rm.names) : nn], name_ix, g.names, rm.names)
            _intern_into(part["args"][len(rm.args) : na], args_ix, g.args, rm.args)
            # raw entries: appended in unit order; local -2 - k becomes global -2 - (k + shift)
            shift = g.n_rargs - rm.rargs
            if nr > rm.rargs:
                g._rbuf += memoryview(part["rbuf"])[rm.rbytes : nb]
                g._rlens.append(part["rlens"][rm.rargs : nr])
                g.n_rargs += nr - rm.rargs
            rm.rargs, rm.rbytes = nr, nb
            lt = len(rm.tracks)
            for key, tr in zip(part["track_keys"][lt:nt], part["tracks"][lt:nt]):
                i = track_ix.get(key)
                if i is None:
                    i = track_ix[key] = len(g.tracks)
                    g.tracks.append(replace(tr, id=i))
                rm.tracks.append(i)
            for c, k in counts.items():
                key = c if isinstance(c, str) else "<none>"
                cc[key] = cc.get(key, 0) + k
            for e in meta:
                g._metadata_event(e)
            for j in range(c0, c1):
                for k in _COLS:
                    col = cols[k][j]
                    if k == "name_id":
                        col = rm.arr("names")[col]
                    elif k == "track":
                        col = rm.arr("tracks")[col]
                    elif k == "args_id":
                        a = rm.arr("args")
                        col = np.where(col >= 0, a[np.maximum(col, 0)] if a.size else -1,
                                       np.where(col <= -2, col - shift, -1)).astype(np.int32)
                    g._cols[k].append(col)
    return g
