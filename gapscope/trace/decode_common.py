"""What both event decoders share: the category table, value checks, the staged-chunk structure.

A chunk of events is *staged* (turned into columns without touching the builder's state) by one of two
decoders, ``decode_typed`` (msgspec records, the fast path) or ``decode_dicts`` (parsed dicts). Both return a
``StagedChunk``; ``build.ColumnBuilder`` commits it. A decoder refuses a chunk it cannot take by raising
``SlowLane`` (and only that, for values of unexpected types or out of range, checked explicitly): the builder
then hands the chunk to the next, more lenient lane and counts it (``ColumnBuilder.lanes``). Any other exception
is a bug and propagates.
"""

from __future__ import annotations

import os as _os
import re
from collections import Counter
from itertools import compress
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from .model import NO_ID, Kind

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None
import json as _json

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


class SlowLane(Exception):
    """A decoder refuses a chunk: a value of an unexpected type or out of range. The builder hands the chunk to
    the next, more lenient lane (typed -> dicts -> sanitised dicts); set GAPSCOPE_STRICT_DECODE=1 to make
    refusals of the typed and dict lanes raise instead (tests do, on real traces)."""


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
            raise SlowLane()
        return a * 1000, np.ones(a.shape, bool)
    if a.dtype == np.float64:
        ok = np.isfinite(a) & (np.abs(a) < _MAX_US)
        a = np.where(ok, a, 0.0)
        # split so large absolute µs keep their sub-µs digits: floor is exact, the fraction is small
        whole = np.floor(a)
        ns = whole.astype(np.int64) * 1000 + np.rint((a - whole) * 1000.0).astype(np.int64)
        return ns, ok
    raise SlowLane()


def i64(values: list) -> np.ndarray:
    """An int64 column of ints (already type-checked); an int beyond 64 bits refuses the chunk."""
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        raise SlowLane() from None


#: ``map(_NONE_AS_NO_ID, xs, xs)``: each x, or NO_ID where x is None (dict.get with the value as its default)
_NONE_AS_NO_ID = {None: NO_ID}.get


def i64_of(get, items: list, nullable: bool = False) -> np.ndarray:
    """``i64`` of ``get`` of each of ``items`` (ints), straight into the array (``np.fromiter``: no list of them);
    ``nullable``: a None is NO_ID."""
    try:
        return np.fromiter(map(get, items), np.int64, len(items))
    except OverflowError:
        raise SlowLane() from None
    except TypeError:  # a None
        if not nullable:
            raise
    v = list(map(get, items))
    return i64(list(map(_NONE_AS_NO_ID, v, v)))


def kind_of_new_cat(kind_of_cat: dict, c) -> int:
    """The kind of a category spelling not met before (lower-cased into CATEGORY_KIND), recorded in ``kind_of_cat``."""
    k = CATEGORY_KIND.get(c.lower()) if isinstance(c, str) else None
    kc = kind_of_cat[c] = int(Kind.OTHER) if k is None else int(k)
    return kc


def kinds_and_times(kind_of_cat: dict, tcats: list, tphs: list, phc: set, tsl, durl: list):
    """(kind, ts, ts_ok, dur, no_dur, n_neg) of the timed events of a chunk, from their cat / ph / ts / dur
    values (the dict lane; the typed lane takes its kinds from category codes, ``decode_typed``)."""
    n = len(tcats)
    kc = kind_of_cat  # every cat spelling met so far -> kind, grown here
    kl = list(map(kc.get, tcats))
    if None in kl:
        for c in set(tcats) - kc.keys():  # each new spelling once, then map again
            kind_of_new_cat(kc, c)
        kl = list(map(kc.get, tcats))
    kind = np.array(kl, dtype=np.uint8)
    inst = None
    if "i" in phc or "I" in phc:
        inst = np.fromiter(map(_PH_I.__contains__, tphs), bool, n)
        kind[inst & (kind == Kind.OTHER)] = Kind.INSTANT
        # an instant of a range category (e.g. a cpu_op 'i') stays of its category, with no duration
    return (kind, *times(n, inst, lambda at: sum(map(_PH_X.__contains__, [tphs[i] for i in at])), tsl, durl))


def times(n: int, inst, x_among, tsl, durl: list, absent_nan: bool = False):
    """(ts, ts_ok, dur, no_dur, n_neg) of ``n`` timed events from their ts / dur values: ``inst`` marks the instants
    (None: none), ``x_among(rows)`` counts the complete ("X") events among ``rows``. ``absent_nan``: a NaN duration
    is one the event did not have (the typed lane's default; JSON cannot write a NaN)."""
    # a None makes the array one of objects: only then is the list searched for one
    tsa = np.array(tsl)
    if tsa.dtype == object and None in tsl:
        no_ts = np.fromiter(map(_IS_NONE, tsl), bool, n)
        ts, ts_ok = _us_to_ns([0 if v is None else v for v in tsl])
        ts_ok &= ~no_ts
    else:
        ts, ts_ok = _us_to_ns(tsa)
    del tsa
    no_dur = 0
    dura = np.array(durl)
    miss = None
    if dura.dtype == object and None in durl:
        # complete events without a duration (instants have none by design; events without a
        # timestamp are skipped and counted as such)
        miss = np.fromiter(map(_IS_NONE, durl), bool, n)
        dura = np.array(durl, dtype=np.float64)  # None -> nan -> not ok -> 0
        if absent_nan:
            miss |= np.isnan(dura)
    elif absent_nan and dura.dtype == np.float64:
        miss = np.isnan(dura)
    if miss is not None:
        miss &= ts_ok
        if inst is not None:
            miss &= ~inst
        at = np.flatnonzero(miss).tolist()  # few: the phase is looked at for these only
        no_dur = int(x_among(at)) if at else 0
    dur, dur_ok = _us_to_ns(dura)
    del dura
    dur[~dur_ok] = 0
    if inst is not None:
        dur[inst] = 0
    neg = dur < 0
    n_neg = int(np.count_nonzero(neg))
    if n_neg:
        dur[neg] = 0
    return ts, ts_ok, dur, no_dur, n_neg


def strict() -> bool:
    """GAPSCOPE_STRICT_DECODE=1: a refused chunk raises instead of taking a slower lane (tests on real traces)."""
    return _os.environ.get("GAPSCOPE_STRICT_DECODE", "") == "1"


class Staged(NamedTuple):
    """One chunk's timed events as columns, plus what committing them needs (ids known so far, new keys)."""

    ts: np.ndarray  # int64 ns
    dur: np.ndarray  # int64 ns
    kind: np.ndarray  # uint8 Kind
    names: list | None  # each event's name (None: every one known, ``name_ix`` an array)
    name_ix: list | np.ndarray  # interned id of each name: a list with None where new, else an array
    track_keys: list | None  # (gpu side, pid, tid) per event (None: every one known, ``track_ix`` an array)
    track_ix: list | np.ndarray  # track id of each key: a list with None where new, else an array
    ids: list  # per event: its args dict (dict lane) or its typed ids record (typed lane)
    corr: np.ndarray
    ext: np.ndarray
    pyid: np.ndarray
    pypar: np.ndarray
    nbytes: np.ndarray
    args_rows: np.ndarray  # rows whose args are interned (kernels, copies, ...)
    args: list  # their args dicts
    raw_rows: np.ndarray  # rows whose args are kept as written (CPU ops)
    raws: list  # their args as bytes (None: could not be encoded), or as the typed lane's Raw records
    ts_ok: np.ndarray  # bool: the timestamp is usable
    n_no_ts: int
    no_dur: int
    n_neg: int
    n_open: int
    #: the typed lane's: each raw's length, its raws already without the empty ones (None: ``raws`` are bytes or
    #: None, filtered at commit)
    raw_lens: np.ndarray | None = None
    #: ``args`` are the typed lane's records of the args as written (``msgspec.Raw``), not dicts
    args_raw: bool = False


class StagedChunk(NamedTuple):
    counts: Counter  # events per category, as written
    meta: list  # metadata events (thread and process names, sort indices), as dicts
    cols: Staged | None  # None when the chunk has no timed events
