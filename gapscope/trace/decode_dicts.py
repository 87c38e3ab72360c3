"""The dict decoder: chunks of events parsed into dicts (orjson), staged into columns.

The lane for pieces the typed records do not fit (``decode_typed``), and, through ``sanitize``, for chunks with
values of unexpected types (a string timestamp, an unhashable id, non-dict args): those are cleaned event by
event and staged again. Fields are read with C-level passes (``map(dict.get, ...)``, ``itemgetter``).
"""

from __future__ import annotations

from collections import Counter
from itertools import compress, repeat

import numpy as np

from .decode_common import (
    _BYTES_KINDS, _COMMON, _EMPTY, _ID_KEYS, _NONE_TYPE, _PH_M, _RAW_ARGS_KIND, _ARGS_KINDS, _IS_NONE, SlowLane,
    Staged, StagedChunk, _as_id, _dget, _encode_each, _int_col, _int_or, _open_ranges, _take, _timed_only,
    kinds_and_times,
)
from .model import NO_ID, Kind

_NONE_TYPE_SET = frozenset({_NONE_TYPE})
_STR_OR_NONE = frozenset({str, _NONE_TYPE})
_ID_TYPES = frozenset({int, str, _NONE_TYPE})  # pid / tid as the columns and track keys take them
_NUM_OR_NONE = frozenset({int, float, _NONE_TYPE})  # ts / dur (bool is not a number here)


def _types_in(values, allowed: frozenset) -> bool:
    return set(map(type, values)) <= allowed


def sanitize(e: dict) -> dict:
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



def stage_dicts(b, evs: list) -> StagedChunk:
    """Everything derived from one chunk of event dicts, computed without touching the builder ``b``'s state
    (it is only read: the kinds, names and tracks it knows). Raises SlowLane for a value of a type the columns
    cannot take as is (checked explicitly, before any is used); ``sanitize`` makes every event acceptable."""
    cats = list(map(_dget, evs, repeat("cat")))
    phs = list(map(_dget, evs, repeat("ph")))
    if not _types_in(cats, _STR_OR_NONE) or not _types_in(phs, _STR_OR_NONE):
        raise SlowLane()
    counts = Counter(cats)
    phc = set(phs)
    meta = list(compress(evs, map(_PH_M.__contains__, phs))) if "M" in phc else []
    timed, tcats, tphs, _mask = _timed_only(evs, cats, phs, phc)
    n = len(timed)
    if n == 0:
        return StagedChunk(counts, meta, None)
    try:
        # one C-level pass for the fields every Kineto event has; transposed into columns
        names, pids, tids, tsl = zip(*map(_COMMON, timed))
    except KeyError:
        names = list(map(_dget, timed, repeat("name")))
        pids = list(map(_dget, timed, repeat("pid")))
        tids = list(map(_dget, timed, repeat("tid")))
        tsl = list(map(_dget, timed, repeat("ts")))
    durl = list(map(_dget, timed, repeat("dur")))
    if not (_types_in(names, _STR_OR_NONE) and _types_in(pids, _ID_TYPES) and _types_in(tids, _ID_TYPES)
            and _types_in(tsl, _NUM_OR_NONE) and _types_in(durl, _NUM_OR_NONE)):
        raise SlowLane()
    kind, ts, ts_ok, dur, no_dur, n_neg = kinds_and_times(b._kind_of_cat, tcats, tphs, phc, tsl, durl)
    # args
    al = list(map(_dget, timed, repeat("args"), repeat(_EMPTY)))
    at = set(map(type, al))
    if not at <= {dict, _NONE_TYPE}:
        raise SlowLane()
    if _NONE_TYPE in at:  # "args": null
        al = [a if a is not None else _EMPTY for a in al]
    n_open = _open_ranges(list(map(_dget, al, repeat("finished"))), tphs)
    tkeys, nl, tl = b.lookups(kind, names, pids, tids)
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
    return StagedChunk(counts, meta, Staged(ts, dur, kind, names, nl, tkeys, tl, al, corr, ext, pyid, pypar, nbytes,
                                            aix, args_sub, rix, raws, ts_ok, n_no_ts, no_dur, n_neg, n_open))
