"""Turn trace events into the columnar TraceModel.

``ColumnBuilder.add_bytes(text)`` is called once per piece of the events array (``add(events)`` takes parsed
dicts), so the reader can hand over bounded pieces and free them; ``finish()`` sorts, links and returns the
model.

Speed: a piece is decoded by msgspec into typed records holding only the fields the columns need (see
``_Ev``), and turned into columns by C-level passes (``map(attrgetter)``, ``compress``, ``np.array``). A piece
the typed records do not fit (a string id, a float pid) goes through the dict path: orjson dicts, read with
``map(dict.get, ...)`` / ``itemgetter``, and a chunk with anything unusual even there (a string timestamp, an
unhashable id, non-dict args) is sanitised event by event and retried. Args are kept for the kinds someone reads
them for: kernels, copies, memsets, instants ([memory]), syncs and unknown categories interned without their
per-event ids; CPU ops (shapes, collectives) one entry each, as written.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import compress, repeat
from operator import attrgetter, itemgetter

import numpy as np

from .model import ARGS_DROP, CPU_NEST_KINDS, GPU_WORK_KINDS, NO_ID, BlobList, Kind, TraceModel, Track, TrackKind

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None
import json as _json
import os as _os

_dumps = _orjson.dumps if _orjson is not None else (lambda o: _json.dumps(o).encode())

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


def _sanitize(e: dict) -> dict:
    """A clean copy of one event for the fast path: ids as int or str, times as numbers or None,
    args a dict whose id fields are ints. Used only for chunks the fast path could not take as is."""
    out = {}
    cat = e.get("cat")
    out["cat"] = cat if isinstance(cat, str) else None
    ph = e.get("ph")
    out["ph"] = ph if isinstance(ph, str) else None
    name = e.get("name")
    out["name"] = name if isinstance(name, str) else ("" if name is None else str(name))
    out["pid"] = _as_id(e.get("pid"))
    out["tid"] = _as_id(e.get("tid"))
    for k in ("ts", "dur"):
        v = e.get(k)
        if isinstance(v, bool):
            v = None
        elif isinstance(v, str):
            try:
                v = int(v) if v.strip().lstrip("-").isdigit() else float(v)
            except ValueError:
                v = None
        elif isinstance(v, float) and not (v == v and abs(v) != float("inf")):
            v = None
        elif not isinstance(v, (int, float)):
            v = None
        if isinstance(v, int) and abs(v) >= 2**62 // 1000:
            v = None
        if isinstance(v, float) and abs(v) >= 2**62 / 1000:
            v = None
        out[k] = v
    a = e.get("args")
    if isinstance(a, dict):
        a = dict(a)
        for k in _ID_KEYS:
            if k in a:
                v = _int_or(a[k])
                if v == NO_ID or abs(v) >= 2**63:
                    del a[k]
                else:
                    a[k] = v
        for k in ("bytes", "Bytes"):
            if k in a:
                v = _int_or(a[k], 0)
                a[k] = v if abs(v) < 2**63 else 0
        out["args"] = a
    else:
        out["args"] = {}
    return out


_ID_KEYS = ("correlation", "External id", "external id", "Python id", "Python parent id", "device", "stream")
_EMPTY: dict = {}
_NO_ARGS = frozenset({b"{}", b"null", b"{ }"})  # args that hold nothing, as written
_NONE_TYPE = type(None)
# every spelling the fast path may meet directly; anything else is lower-cased in the slow lane
_KIND_LOOKUP = {}
for _k, _v in CATEGORY_KIND.items():
    for _s in {_k, _k.upper(), _k.title(), _k.capitalize()}:
        _KIND_LOOKUP[_s] = int(_v)
_KIND_LOOKUP["Kernel"] = int(Kind.KERNEL)
#: kinds whose args are kept, interned (deduplicated without their ids: the kernel table groups kernels by
#: launch configuration, the allocator by [memory] args). CPU ops keep their args too, but as written, one
#: entry each: they are a third of a trace's events and are only ever read one at a time, and encoding them
#: again to deduplicate them was the biggest single cost of a load. The other kinds' args are ids already
#: held in columns, plus per-call noise (cbid, Ev Idx).
_ARGS_KINDS = np.array(
    [int(k) for k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.INSTANT, Kind.SYNC, Kind.OTHER)],
    dtype=np.uint8,
)
_RAW_ARGS_KIND = int(Kind.CPU_OP)
_BYTES_KINDS = np.array([int(Kind.MEMCPY), int(Kind.MEMSET), int(Kind.INSTANT)], dtype=np.uint8)
_GPU_SIDE_ARR = np.array([int(k) for k in GPU_SIDE_KINDS], dtype=np.uint8)
_GPU_SIDE_INT = frozenset(int(k) for k in GPU_SIDE_KINDS)
_MAX_US = 2**62 // 1000

# ----------------------------------------------------------------------------- typed decoding
# msgspec decodes a piece of the events array straight into small typed records holding only the fields the
# columns need (everything else is skipped without building a Python object), plus each event's args as the
# bytes it was written with. That is ~3x less work than building a dict per event (and per args object) and
# reading the fields back out. Any event that does not fit these types (a string timestamp, a float pid, a
# null id, a huge integer) makes msgspec refuse the piece, which then goes through the dict path below,
# unchanged.
try:
    import msgspec as _msgspec
except ImportError:  # pragma: no cover - a dependency; the dict path alone still loads every trace
    _msgspec = None

if _msgspec is not None:
    from typing import Optional, Union

    class _Ids(_msgspec.Struct, frozen=True, gc=False):
        """The args fields held in columns (or needed to place an event on its track)."""

        correlation: int = NO_ID
        ext: Optional[int] = _msgspec.field(default=NO_ID, name="External id")
        ext_lc: int = _msgspec.field(default=NO_ID, name="external id")
        pyid: int = _msgspec.field(default=NO_ID, name="Python id")
        pypar: Optional[int] = _msgspec.field(default=NO_ID, name="Python parent id")
        device: Optional[int] = None
        stream: Optional[int] = None
        nb: Optional[int] = _msgspec.field(default=None, name="bytes")
        nb2: Optional[int] = _msgspec.field(default=None, name="Bytes")
        finished: Optional[bool] = None

    _NO_IDS = _Ids()

    class _Ev(_msgspec.Struct, gc=False):
        ph: Optional[str] = None
        cat: Optional[str] = None
        name: Optional[str] = None
        pid: Union[int, str, None] = None
        tid: Union[int, str, None] = None
        ts: Union[int, float, None] = None
        dur: Union[int, float, None] = None
        args: Optional[_Ids] = _NO_IDS

    class _EvArgs(_msgspec.Struct, gc=False):
        args: _msgspec.Raw = _msgspec.Raw(b"{}")

    _DEC_EV = _msgspec.json.Decoder(list[_Ev])
    _DEC_ARGS = _msgspec.json.Decoder(list[_EvArgs])
    _DEC_ANY = _msgspec.json.Decoder()
    _FAST_ERRORS: tuple = (_msgspec.DecodeError,)
else:  # pragma: no cover
    _DEC_EV = _DEC_ARGS = _DEC_ANY = None
    _FAST_ERRORS = ()

#: the typed path can be turned off (GAPSCOPE_DECODER=dicts), e.g. to compare both paths
FAST_DECODE = _DEC_EV is not None and _os.environ.get("GAPSCOPE_DECODER", "") != "dicts"
_G_PH, _G_CAT, _G_ARGS = attrgetter("ph"), attrgetter("cat"), attrgetter("args")
_G_NAME, _G_PID, _G_TID, _G_TS = attrgetter("name"), attrgetter("pid"), attrgetter("tid"), attrgetter("ts")
#: ``map(_NONE_AS_NO_ID, xs, xs)``: each x, or NO_ID where x is None (dict.get with the value as its default)
_NONE_AS_NO_ID = {None: NO_ID}.get
_G_DUR = attrgetter("dur")
_G_CORR, _G_EXT, _G_EXTLC = attrgetter("correlation"), attrgetter("ext"), attrgetter("ext_lc")
_G_PYID, _G_PYPAR, _G_FIN = attrgetter("pyid"), attrgetter("pypar"), attrgetter("finished")


_dict_loads = _orjson.loads if _orjson is not None else _json.loads


def _encode_each(dicts: list) -> list:
    """Each dict encoded as JSON bytes (None for one that cannot be encoded)."""
    try:
        return list(map(_dumps, dicts))
    except (TypeError, ValueError, RecursionError, OverflowError):
        out = []
        for a in dicts:
            try:
                out.append(_dumps(a))
            except (TypeError, ValueError, RecursionError, OverflowError):
                out.append(None)
        return out


class _SlowLane(Exception):
    """The fast path met something unusual in a chunk; the chunk is sanitised and retried."""


def _timed_only(evs: list, cats: list, phs: list, phc: set):
    """(events, cats, phs, mask) of a chunk without its metadata and flow events (mask None: nothing left out)."""
    if phc <= _TIMED_FAST:
        return evs, cats, phs, None
    mask = (~np.fromiter(map(_NOT_TIMED.__contains__, phs), bool, len(phs))).tolist()
    return list(compress(evs, mask)), list(compress(cats, mask)), list(compress(phs, mask)), mask


def _open_ranges(fin: list, tphs: list) -> int:
    """Ranges still open at the window end: "finished": false on an X event (some [memory] instants carry it
    too; they are not ranges and are not counted)."""
    if False not in fin:
        return 0
    return sum(1 for v, ph in zip(fin, tphs) if v is False and ph == "X")


def _take(lst: list, idx: np.ndarray, mask: np.ndarray) -> list:
    """lst[idx] for a list, where ``idx`` is ``flatnonzero(mask)``."""
    if idx.size == 0:
        return []
    if idx.size == len(lst):
        return lst
    return list(compress(lst, mask.tolist()))


def _int_col(values: list, default: int = NO_ID) -> np.ndarray:
    """int64 column from a list of (mostly) ints; anything else goes through _int_or."""
    try:
        a = np.array(values, dtype=np.int64)
        return a
    except (TypeError, ValueError, OverflowError):
        out = []
        for v in values:
            x = _int_or(v, default)
            out.append(x if -(2**63) <= x < 2**63 else default)
        return np.array(out, dtype=np.int64)


def _us_to_ns(values: list) -> tuple[np.ndarray, np.ndarray]:
    """µs numbers to int64 ns without going through float for integers. Returns (ns, ok mask)."""
    a = values if isinstance(values, np.ndarray) else np.array(values)
    if a.dtype == np.int64:
        if a.size and (a.max() >= _MAX_US or a.min() <= -_MAX_US):
            raise _SlowLane()
        return a * 1000, np.ones(a.shape, bool)
    if a.dtype == np.float64:
        ok = np.isfinite(a) & (np.abs(a) < _MAX_US)
        a = np.where(ok, a, 0.0)
        # split so large absolute µs keep their sub-µs digits: floor is exact, the fraction is small
        whole = np.floor(a)
        ns = whole.astype(np.int64) * 1000 + np.rint((a - whole) * 1000.0).astype(np.int64)
        return ns, ok
    raise _SlowLane()


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
            staged = self._stage(evs)
        except (_SlowLane, TypeError, ValueError, AttributeError, OverflowError, KeyError):
            staged = self._stage([_sanitize(e) for e in evs])
        self._commit(*staged)

    def _kinds_and_times(self, tcats: list, tphs: list, phc: set, tsl, durl: list):
        """(kind, ts, ts_ok, dur, no_dur, n_neg) of the timed events of a chunk, from their cat / ph / ts / dur
        values (both decoding paths)."""
        n = len(tcats)
        kc = self._kind_of_cat
        kl = list(map(kc.get, tcats))
        if None in kl:
            for c in set(tcats) - kc.keys():  # each new spelling once, then map again
                k = CATEGORY_KIND.get(c.lower()) if isinstance(c, str) else None
                kc[c] = int(Kind.OTHER) if k is None else int(k)
            kl = list(map(kc.get, tcats))
        kind = np.array(kl, dtype=np.uint8)
        inst = None
        if "i" in phc or "I" in phc:
            inst = np.fromiter(map(_PH_I.__contains__, tphs), bool, n)
            kind[inst & (kind == Kind.OTHER)] = Kind.INSTANT
            # an instant of a range category (e.g. a cpu_op 'i') stays of its category, with no duration
        if None in tsl:
            no_ts = np.fromiter(map(_IS_NONE, tsl), bool, n)
            ts, ts_ok = _us_to_ns([0 if v is None else v for v in tsl])
            ts_ok &= ~no_ts
        else:
            ts, ts_ok = _us_to_ns(tsl)
        no_dur = 0
        if None in durl:
            # complete events without a duration (instants have none by design; events without a
            # timestamp are skipped and counted as such)
            miss = np.fromiter(map(_IS_NONE, durl), bool, n)
            miss &= np.fromiter(map(_PH_X.__contains__, tphs), bool, n) & ts_ok
            if inst is not None:
                miss &= ~inst
            no_dur = int(np.count_nonzero(miss))
            durl = np.array(durl, dtype=np.float64)  # None -> nan -> not ok -> 0
        dur, dur_ok = _us_to_ns(durl)
        dur[~dur_ok] = 0
        if inst is not None:
            dur[inst] = 0
        neg = dur < 0
        n_neg = int(np.count_nonzero(neg))
        if n_neg:
            dur[neg] = 0
        return kind, ts, ts_ok, dur, no_dur, n_neg

    def _lookups(self, kind: np.ndarray, names, pids, tids):
        """Track keys, and the name and track ids known so far (None where new: interned at commit). Lookups
        only: they raise TypeError here, inside the fast path, for unhashable values."""
        gside = np.isin(kind, _GPU_SIDE_ARR)
        tkeys = list(zip(gside.tolist(), pids, tids))
        return tkeys, list(map(self._name_ix.get, names)), list(map(self._raw_track.get, tkeys))

    def _stage(self, evs: list):
        """Everything derived from one chunk, computed without touching the builder's state."""
        cats = list(map(_dget, evs, repeat("cat")))
        counts = Counter(cats)
        phs = list(map(_dget, evs, repeat("ph")))
        phc = set(phs)
        meta = list(compress(evs, map(_PH_M.__contains__, phs))) if "M" in phc else []
        timed, tcats, tphs, _mask = _timed_only(evs, cats, phs, phc)
        n = len(timed)
        if n == 0:
            return counts, meta, None
        try:
            # one C-level pass for the fields every Kineto event has; transposed into columns
            names, pids, tids, tsl = zip(*map(_COMMON, timed))
        except KeyError:
            names = list(map(_dget, timed, repeat("name")))
            pids = list(map(_dget, timed, repeat("pid")))
            tids = list(map(_dget, timed, repeat("tid")))
            tsl = list(map(_dget, timed, repeat("ts")))
        kind, ts, ts_ok, dur, no_dur, n_neg = self._kinds_and_times(tcats, tphs, phc, tsl,
                                                                    list(map(_dget, timed, repeat("dur"))))
        # args
        al = list(map(_dget, timed, repeat("args"), repeat(_EMPTY)))
        at = set(map(type, al))
        if not at <= {dict, _NONE_TYPE}:
            raise _SlowLane()
        if _NONE_TYPE in at:  # "args": null
            al = [a if a is not None else _EMPTY for a in al]
        n_open = _open_ranges(list(map(_dget, al, repeat("finished"))), tphs)
        tkeys, nl, tl = self._lookups(kind, names, pids, tids)
        # ids from args, only for the kinds that carry them
        corr = np.full(n, NO_ID, dtype=np.int64)
        ext = np.full(n, NO_ID, dtype=np.int64)
        pyid = np.full(n, NO_ID, dtype=np.int64)
        pypar = np.full(n, NO_ID, dtype=np.int64)
        nbytes = np.zeros(n, dtype=np.int64)
        is_py = kind == Kind.PYTHON
        nonpy = np.flatnonzero(~is_py)
        if nonpy.size:
            sub = _take(al, nonpy, ~is_py)
            corr[nonpy] = _int_col(list(map(_dget, sub, repeat("correlation"), repeat(NO_ID))))
            ev = list(map(_dget, sub, repeat("External id"), repeat(None)))
            if None in ev:  # old traces spell it in lower case; most events have none at all
                for i in np.flatnonzero(np.fromiter(map(_IS_NONE, ev), bool, len(ev))).tolist():
                    ev[i] = sub[i].get("external id", NO_ID)
            ext[nonpy] = _int_col(ev)
        pyix = np.flatnonzero(is_py)
        if pyix.size:
            sub = _take(al, pyix, is_py)
            pyid[pyix] = _int_col(list(map(_dget, sub, repeat("Python id"), repeat(NO_ID))))
            pv = list(map(_dget, sub, repeat("Python parent id"), repeat(NO_ID)))
            if None in pv:
                pv = [NO_ID if v is None else v for v in pv]
            pypar[pyix] = _int_col(pv)
        bmask = np.isin(kind, _BYTES_KINDS)
        bix = np.flatnonzero(bmask)
        if bix.size:
            sub = _take(al, bix, bmask)
            nbytes[bix] = _int_col([a.get("bytes", a.get("Bytes", 0)) for a in sub], 0)
        amask = np.isin(kind, _ARGS_KINDS)
        aix = np.flatnonzero(amask)
        args_sub = _take(al, aix, amask)
        rmask = kind == _RAW_ARGS_KIND
        rix = np.flatnonzero(rmask)
        raws = _encode_each(_take(al, rix, rmask)) if rix.size else []
        n_no_ts = int(np.count_nonzero(~ts_ok))
        return counts, meta, (ts, dur, kind, names, nl, tkeys, tl, al, corr, ext, pyid, pypar, nbytes, aix, args_sub,
                              rix, raws, ts_ok, n_no_ts, no_dur, n_neg, n_open)

    # ------------------------------------------------------------ typed path
    def add_bytes(self, text, loads=None) -> None:
        """Add the events of one piece of JSON text holding an array of event objects. When the typed path
        cannot take it, ``loads`` (default ``orjson.loads``) parses it into dicts for ``add``, so a text that is
        not JSON raises what ``loads`` raises (the reader's recovery relies on its message)."""
        if FAST_DECODE:
            staged = None
            try:
                evs = _DEC_EV.decode(text)
            except _FAST_ERRORS:
                evs = None
            if evs is not None:
                try:
                    staged = self._stage_fast(evs, text)
                except (_SlowLane, TypeError, ValueError, AttributeError, OverflowError, KeyError, *_FAST_ERRORS):
                    staged = None
                del evs
            if staged is not None:
                self._commit(*staged)
                return
        ColumnBuilder.add(self, (loads or _dict_loads)(text))

    def _stage_fast(self, evs: list, text):
        """``_stage`` for typed records (see ``_Ev``): the same staged values, from attribute reads."""
        n_all = len(evs)
        if n_all == 0:
            return Counter(), [], None
        cats = list(map(_G_CAT, evs))
        counts = Counter(cats)
        phs = list(map(_G_PH, evs))
        phc = set(phs)
        raws = None
        meta = []
        if "M" in phc:
            raws = list(map(_G_ARGS, _DEC_ARGS.decode(text)))
            for i in np.flatnonzero(np.fromiter(map(_PH_M.__contains__, phs), bool, n_all)).tolist():
                e = evs[i]
                a = _DEC_ANY.decode(raws[i])
                meta.append({"ph": "M", "name": e.name, "pid": e.pid, "tid": e.tid,
                             "args": a if isinstance(a, dict) else {}})
        timed, tcats, tphs, mask = _timed_only(evs, cats, phs, phc)
        n = len(timed)
        if n == 0:
            return counts, meta, None
        # one pass per field (cheaper than building a tuple per event and transposing)
        names = list(map(_G_NAME, timed))
        pids = list(map(_G_PID, timed))
        tids = list(map(_G_TID, timed))
        kind, ts, ts_ok, dur, no_dur, n_neg = self._kinds_and_times(tcats, tphs, phc, list(map(_G_TS, timed)),
                                                                    list(map(_G_DUR, timed)))
        ids = list(map(_G_ARGS, timed))
        if None in ids:  # "args": null
            ids = [a if a is not None else _NO_IDS for a in ids]
        n_open = _open_ranges(list(map(_G_FIN, ids)), tphs)
        tkeys, nl, tl = self._lookups(kind, names, pids, tids)
        is_py = kind == Kind.PYTHON
        corr = np.array(list(map(_G_CORR, ids)), dtype=np.int64)
        ev = list(map(_G_EXT, ids))
        if None in ev:  # "External id": null
            ev = list(map(_NONE_AS_NO_ID, ev, ev))
        ext = np.array(ev, dtype=np.int64)
        # old traces spell it "external id"
        lc = np.array(list(map(_G_EXTLC, ids)), dtype=np.int64)
        np.copyto(ext, lc, where=(ext == NO_ID) & (lc != NO_ID))
        corr[is_py] = NO_ID
        ext[is_py] = NO_ID
        pyid = np.full(n, NO_ID, dtype=np.int64)
        pypar = np.full(n, NO_ID, dtype=np.int64)
        pyix = np.flatnonzero(is_py)
        if pyix.size:
            sub = _take(ids, pyix, is_py)
            pyid[pyix] = np.array(list(map(_G_PYID, sub)), dtype=np.int64)
            pv = list(map(_G_PYPAR, sub))
            if None in pv:  # a root frame: "Python parent id": null
                pv = list(map(_NONE_AS_NO_ID, pv, pv))
            pypar[pyix] = np.array(pv, dtype=np.int64)
        nbytes = np.zeros(n, dtype=np.int64)
        bmask = np.isin(kind, _BYTES_KINDS)
        bix = np.flatnonzero(bmask)
        if bix.size:
            sub = _take(ids, bix, bmask)
            nbytes[bix] = np.array([a.nb if a.nb is not None else (a.nb2 if a.nb2 is not None else 0) for a in sub],
                                   dtype=np.int64)
        amask = np.isin(kind, _ARGS_KINDS)
        aix = np.flatnonzero(amask)
        rmask = kind == _RAW_ARGS_KIND
        rix = np.flatnonzero(rmask)
        args_sub: list = []
        rlist: list = []
        if aix.size or rix.size:
            if raws is None:
                raws = list(map(_G_ARGS, _DEC_ARGS.decode(text)))
            traws = raws if mask is None else list(compress(raws, mask))
            if aix.size:
                args_sub = list(map(_DEC_ANY.decode, _take(traws, aix, amask)))
                if set(map(type, args_sub)) != {dict}:
                    args_sub = [a if type(a) is dict else _EMPTY for a in args_sub]
            if rix.size:
                rlist = list(map(bytes, _take(traws, rix, rmask)))
        n_no_ts = int(np.count_nonzero(~ts_ok))
        return counts, meta, (ts, dur, kind, names, nl, tkeys, tl, ids, corr, ext, pyid, pypar, nbytes, aix,
                              args_sub, rix, rlist, ts_ok, n_no_ts, no_dur, n_neg, n_open)

    def _commit(self, counts, meta, staged) -> None:
        cc = self.category_counts
        for c, k in counts.items():
            key = c if isinstance(c, str) else "<none>"
            cc[key] = cc.get(key, 0) + k
        for e in meta:
            self._metadata_event(e)
        if staged is None:
            return
        (ts, dur, kind, names, nl, tkeys, tl, al, corr, ext, pyid, pypar, nbytes, aix, args_sub,
         rix, raws, ts_ok, n_no_ts, no_dur, n_neg, n_open) = staged
        self._bad["open"] += n_open
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
            args_id[aix] = self._intern_args_list(args_sub)
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
        self._bad["no_ts"] += n_no_ts
        self._bad["no_dur"] += no_dur
        self._bad["neg_dur"] += n_neg
        cols = (ts, dur, kind, track, name_id, corr, ext, pyid, pypar, args_id, nbytes)
        if n_no_ts:
            cols = tuple(c[ts_ok] for c in cols)
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


_dget = dict.get
_COMMON = itemgetter("name", "pid", "tid", "ts")
_COLS = ("ts", "dur", "kind", "track", "name_id", "corr", "ext", "pyid", "pypar", "args_id", "nbytes")
_TIMED_FAST = frozenset({"X", "i", "I"})
_NOT_TIMED = FLOW_PHASES | {"M"}
_PH_M = frozenset({"M"})
_IS_NONE = frozenset({None}).__contains__
_PH_I = frozenset({"i", "I"})
_PH_X = frozenset({"X"})
#: categories of flow and metadata records (not stored as events, so not 'unknown')
_KNOWN_NON_EVENT_CATS = frozenset({"ac2g", "async", "async_gpu", "async_cpu_to_gpu", "fwdbwd", "trace", "spans"})


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
                "tracks": self.tracks, "track_keys": keys, "bad": self._bad,
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
