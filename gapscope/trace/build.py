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

import re
from functools import partial
from itertools import compress

import numpy as np

from . import decode_typed as _typed
from .decode_common import (  # noqa: F401  (CATEGORY_KIND: the category table, read elsewhere)
    _COLS, _GPU_SIDE_ARR, _GPU_SIDE_INT, _IS_NONE, _KIND_LOOKUP, _KNOWN_NON_EVENT_CATS, _NO_ARGS, _STREAM_RE,
    _EMPTY, CATEGORY_KIND, SlowLane, Staged, _as_id, _dumps, _int_or, kind_of_new_cat, strict,
)
from .decode_dicts import sanitize, stage_dicts
from .relate import _exact_duplicates, _links, _nesting, sort_order
from .model import ARGS_DROP, GPU_WORK_KINDS, NO_ID, BlobList, Kind, TraceModel, Track, TrackKind

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None
import json as _json

_dict_loads = _orjson.loads if _orjson is not None else _json.loads
#: the typed lane can be turned off (GAPSCOPE_DECODER=dicts), e.g. to compare both lanes
FAST_DECODE = _typed.FAST_DECODE
#: CPU ops' args not kept: nothing in them, or not encodable (None)
_NOT_KEPT = _NO_ARGS | {None}
#: a member of the ids that change from one launch to the next (all in ARGS_DROP) with its integer value, as
#: Kineto writes it (see ``_intern_args_raw``)
_ID_MEMBERS = re.compile(rb'"(?:correlation|External id|external id)"[ \t\n\r]*:[ \t\n\r]*-?[0-9]+(?=[ \t\n\r]*[,}])')
assert {"correlation", "External id", "external id"} <= ARGS_DROP
_cut_ids = partial(_ID_MEMBERS.sub, b"")
_ARGS_KEY_MAX = 1 << 16




class ColumnBuilder:
    """Accumulates events into compact arrays chunk by chunk; ``finish`` returns the model."""

    def __init__(self, path: str = "<memory>"):
        self.path = path
        self._cols: dict[str, list[np.ndarray]] = {k: [] for k in _COLS}
        self.names: list[str] = []
        self._name_ix: dict = {}
        self.args: list[bytes] = []
        self._args_ix: dict[bytes, int] = {}
        #: the typed lane's args texts without their id members -> their interned id (``_intern_args_raw``)
        self._args_key: dict[bytes, int] = {}
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
        #: the typed lane's category codes: spelling -> code, code -> spelling, code -> kind (``new_cat``)
        self._cat_code: dict = {}
        self._cat_names: list = []
        self._kind_of_code = np.zeros(0, dtype=np.uint8)
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

    def _canon(self, a):
        """The bytes ``a`` (an args dict) is interned as: encoded without its id keys; None for nothing kept."""
        if not a:
            return None
        try:
            return _dumps({k: v for k, v in a.items() if k not in ARGS_DROP})
        except (TypeError, ValueError, RecursionError, OverflowError):
            self._bad["args_enc"] += 1
            return None

    def _intern_canon(self, raw) -> int:
        """The interned id of ``raw`` (``_canon``'s bytes); -1 for None or nothing."""
        if raw is None or raw == b"{}":
            return -1
        ix = self._args_ix
        i = ix.get(raw)
        if i is None:
            raw = memoryview(raw).tobytes()  # orjson's bytes hold a 4 KiB buffer: kept, a copy its size
            i = len(self.args)
            self.args.append(raw)
            ix[raw] = i
        return i

    def _intern_args_list(self, arg_dicts: list) -> np.ndarray:
        """Interned ids of ``arg_dicts``, each encoded without its id keys."""
        raws = list(map(self._canon, arg_dicts))
        ids = list(map(self._args_ix.get, raws))
        if None in ids:
            for j, v in enumerate(ids):
                if v is None:
                    ids[j] = self._intern_canon(raws[j])
        return np.array(ids, dtype=np.int32)

    def _intern_args_raw(self, raws: list) -> np.ndarray:
        """``_intern_args_list`` of the typed lane's args as written (``msgspec.Raw``), with the same ids.

        Kernels' args differ from one launch to the next only in their ids (correlation, External id), which the
        interned entry drops: ``_ID_MEMBERS`` cuts those members out of the text, and a text seen before
        (``_args_key``) gives its entry without decoding, filtering and encoding the args again (~7 µs a kernel,
        against ~2 µs for the cut). The cut is exact where it is used, on the text of one JSON object (valid: msgspec
        decoded it) with no backslash and no other ``{``: every quote there delimits a string, so a match starts a
        key (a closing quote cannot be followed by letters), a top-level one, and ends with its whole integer value
        (the look-ahead). What is left is that text without some of its id members, every other string and token as
        written: two args with the same text left have the same other members in the same order, so the same entry.
        Other args are decoded as before.
        """
        # one substitution over all of them, NUL-separated (a NUL is nowhere in a text msgspec decoded: JSON has
        # none outside strings, and msgspec refuses one inside), where a call per text cost ~3 µs
        keys = _cut_ids(b"\0".join(raws)).split(b"\0")
        kix = self._args_key
        ids = list(map(kix.get, keys))
        if None in ids:
            if len(kix) > _ARGS_KEY_MAX:  # bounded: args unique in more than their ids (copies' bandwidth)
                kix.clear()
            dec = _typed.decode_args
            for j in np.flatnonzero(np.fromiter(map(_IS_NONE, ids), bool, len(ids))).tolist():
                k = keys[j]
                cut = k[:1] == b"{" and k.count(b"{") == 1 and b"\\" not in k
                if cut:
                    v = kix.get(k)
                    if v is not None:
                        ids[j] = v
                        continue
                a = dec(raws[j])
                n_bad = self._bad["args_enc"]
                v = ids[j] = self._intern_canon(self._canon(a if type(a) is dict else _EMPTY))
                if cut and self._bad["args_enc"] == n_bad:  # a failure is counted for every event: not kept
                    kix[k] = v
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

    def new_cat(self, c) -> None:
        """Give category spelling ``c`` the next code (the typed lane's)."""
        k = self._kind_of_cat.get(c)
        if k is None:
            k = kind_of_new_cat(self._kind_of_cat, c)
        self._cat_code[c] = len(self._cat_names)
        self._cat_names.append(c)
        self._kind_of_code = np.append(self._kind_of_code, np.uint8(k))

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
                    chunk = _typed.stage_typed(self, evs)
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
        gside = np.isin(kind, _GPU_SIDE_ARR).tolist()
        n = len(names)
        # straight into arrays when every one is known (a new one is None: a TypeError), else as lists with their
        # Nones (the track keys then built again, for commit to place the new ones)
        try:
            tl = np.fromiter(map(self._raw_track.get, zip(gside, pids, tids)), np.int32, n)
            tkeys = None
        except TypeError:
            tl = list(map(self._raw_track.get, zip(gside, pids, tids)))
            tkeys = list(zip(gside, pids, tids))
        try:
            nl = np.fromiter(map(self._name_ix.get, names), np.int32, n)
        except TypeError:
            nl = list(map(self._name_ix.get, names))
        return tkeys, nl, tl


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
        if type(nl) is list:  # new names (``lookups``): else an array of their ids
            for nm in dict.fromkeys(compress(names, map(_IS_NONE, nl))):
                self._intern_name(nm)
            nl = list(map(self._name_ix.get, names))
            if None in nl:  # a name that is not a str (interned by its text)
                nl = [self._intern_name(names[i]) if v is None else v for i, v in enumerate(nl)]
        name_id = np.array(nl, dtype=np.int32)
        # tracks: the same, each new key placed once
        rt = self._raw_track
        if type(tl) is list:  # new track keys (``lookups``): else an array of their ids
            new = np.flatnonzero(np.fromiter(map(_IS_NONE, tl), bool, len(tl))).tolist()
            new_keys = list(map(tkeys.__getitem__, new))
            first = dict(zip(reversed(new_keys), reversed(new)))  # each key's first row
            for key in dict.fromkeys(new_keys):  # in order of first appearance
                i = first[key]
                if key not in rt:
                    a = al[i]
                    if not isinstance(a, dict):  # typed path: the ids record
                        a = {"device": a.device, "stream": a.stream}
                    rt[key] = self._track_for(int(kind[i]), _as_id(key[1]), _as_id(key[2]), a)
            tl = list(map(rt.get, tkeys))
        track = np.array(tl, dtype=np.int32)
        args_id = np.full(n, -1, dtype=np.int32)
        if aix.size:
            args_id[aix] = (self._intern_args_raw if staged.args_raw else self._intern_args_list)(staged.args)
        if rix.size:
            # one entry each, numbered -2, -3, ... until finish() appends them after the interned table
            lens = staged.raw_lens
            if lens is None:  # the dict lane's bytes (None: not encodable)
                gone = list(map(_NOT_KEPT.__contains__, raws))  # one C-level pass: almost always all False
                if True in gone:
                    keep = [not g for g in gone]
                    rix = rix[np.array(keep, dtype=bool)]
                    raws = list(compress(raws, keep))
                lens = np.fromiter(map(len, raws), np.int64, len(raws))
            base = self.n_rargs
            self._rbuf += b"".join(raws)
            self._rlens.append(lens)
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
        order = sort_order(track, ts, dur)  # by track, then time, then longest first
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
        self._args_key = {}
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
