"""The typed decoder: msgspec decodes a piece of the events array straight into small records.

The records (``_Ev``, ``_Ids``) hold only the fields the columns need (everything else is skipped without
building a Python object), plus each event's args as the bytes it was written with, when a kind keeps them.
That is ~3x less work than building a dict per event (and per args object) and reading the fields back out.
A piece the records do not fit (a string timestamp, a float pid, a null id) is refused by msgspec
(``decode_events`` returns None) and goes through ``decode_dicts``, unchanged.
"""

from __future__ import annotations

import os as _os
from collections import Counter
from itertools import compress
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from .decode_common import (
    _ARGS_KINDS, _BYTES_KINDS, _EMPTY, _NO_ARGS, _PH_M, _RAW_ARGS_KIND, StagedChunk, Staged, _open_ranges, _take, _timed_only,
    i64, kinds_and_times,
)
from .model import NO_ID, Kind

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
        # as written: the ids are decoded from all the pieces' args at once (``decode_events``), and the kinds
        # that keep their args take them from here (a second decode of the piece for them cost ~10% of a load)
        args: _msgspec.Raw = _msgspec.Raw(b"{}")

    _DEC_EV = _msgspec.json.Decoder(list[_Ev])
    _DEC_IDS = _msgspec.json.Decoder(list[Optional[_Ids]])
    _DEC_ANY = _msgspec.json.Decoder()
    _FAST_ERRORS: tuple = (_msgspec.DecodeError,)
else:  # pragma: no cover
    _DEC_EV = _DEC_IDS = _DEC_ANY = None
    _FAST_ERRORS = ()

#: the typed lane can be turned off (GAPSCOPE_DECODER=dicts), e.g. to compare both paths
FAST_DECODE = _DEC_EV is not None and _os.environ.get("GAPSCOPE_DECODER", "") != "dicts"
_G_PH, _G_CAT, _G_ARGS = attrgetter("ph"), attrgetter("cat"), attrgetter("args")
_G_NAME, _G_PID, _G_TID, _G_TS = attrgetter("name"), attrgetter("pid"), attrgetter("tid"), attrgetter("ts")
#: ``map(_NONE_AS_NO_ID, xs, xs)``: each x, or NO_ID where x is None (dict.get with the value as its default)
_NONE_AS_NO_ID = {None: NO_ID}.get
_G_DUR = attrgetter("dur")
_NO_ARGS_MAX = max(map(len, _NO_ARGS))
_G_CORR, _G_EXT, _G_EXTLC = attrgetter("correlation"), attrgetter("ext"), attrgetter("ext_lc")
_G_PYID, _G_PYPAR, _G_FIN = attrgetter("pyid"), attrgetter("pypar"), attrgetter("finished")



class Decoded(NamedTuple):
    """A piece decoded by ``decode_events``: its records, each one's args as written, and its ids record (None
    for ``"args": null``)."""

    evs: list
    raws: list
    ids: list


def decode_events(text) -> Decoded | None:
    """The piece's events as typed records, or None when they do not fit the records' types."""
    try:
        evs = _DEC_EV.decode(text)
        raws = list(map(_G_ARGS, evs))
        # every args object in one text: one decode call instead of one per event
        return Decoded(evs, raws, _DEC_IDS.decode(b"[" + b",".join(raws) + b"]"))
    except _FAST_ERRORS:
        return None


def stage_typed(b, dec: Decoded) -> StagedChunk:
    """``decode_dicts.stage_dicts`` for typed records (see ``_Ev``; ``dec`` from ``decode_events``): the same
    staged values, from attribute reads. The records' types are checked by msgspec; an int beyond 64 bits or a
    time out of range raises SlowLane."""
    evs, raws, all_ids = dec
    n_all = len(evs)
    if n_all == 0:
        return StagedChunk(Counter(), [], None)
    cats = list(map(_G_CAT, evs))
    counts = Counter(cats)
    phs = list(map(_G_PH, evs))
    phc = set(phs)
    meta = []
    if "M" in phc:
        for i in np.flatnonzero(np.fromiter(map(_PH_M.__contains__, phs), bool, n_all)).tolist():
            e = evs[i]
            a = _DEC_ANY.decode(raws[i])
            meta.append({"ph": "M", "name": e.name, "pid": e.pid, "tid": e.tid,
                         "args": a if isinstance(a, dict) else {}})
    timed, tcats, tphs, mask = _timed_only(evs, cats, phs, phc)
    n = len(timed)
    if n == 0:
        return StagedChunk(counts, meta, None)
    # one pass per field (cheaper than building a tuple per event and transposing)
    names = list(map(_G_NAME, timed))
    pids = list(map(_G_PID, timed))
    tids = list(map(_G_TID, timed))
    kind, ts, ts_ok, dur, no_dur, n_neg = kinds_and_times(b._kind_of_cat, tcats, tphs, phc, list(map(_G_TS, timed)),
                                                          list(map(_G_DUR, timed)))
    ids = all_ids if mask is None else list(compress(all_ids, mask))
    if None in ids:  # "args": null
        ids = [a if a is not None else _NO_IDS for a in ids]
    n_open = _open_ranges(list(map(_G_FIN, ids)), tphs)
    tkeys, nl, tl = b.lookups(kind, names, pids, tids)
    is_py = kind == Kind.PYTHON
    corr = i64(list(map(_G_CORR, ids)))
    ev = list(map(_G_EXT, ids))
    if None in ev:  # "External id": null
        ev = list(map(_NONE_AS_NO_ID, ev, ev))
    ext = i64(ev)
    # old traces spell it "external id"
    lc = i64(list(map(_G_EXTLC, ids)))
    np.copyto(ext, lc, where=(ext == NO_ID) & (lc != NO_ID))
    corr[is_py] = NO_ID
    ext[is_py] = NO_ID
    pyid = np.full(n, NO_ID, dtype=np.int64)
    pypar = np.full(n, NO_ID, dtype=np.int64)
    pyix = np.flatnonzero(is_py)
    if pyix.size:
        sub = _take(ids, pyix, is_py)
        pyid[pyix] = i64(list(map(_G_PYID, sub)))
        pv = list(map(_G_PYPAR, sub))
        if None in pv:  # a root frame: "Python parent id": null
            pv = list(map(_NONE_AS_NO_ID, pv, pv))
        pypar[pyix] = i64(pv)
    nbytes = np.zeros(n, dtype=np.int64)
    bmask = np.isin(kind, _BYTES_KINDS)
    bix = np.flatnonzero(bmask)
    if bix.size:
        sub = _take(ids, bix, bmask)
        nbytes[bix] = i64([a.nb if a.nb is not None else (a.nb2 if a.nb2 is not None else 0) for a in sub])
    amask = np.isin(kind, _ARGS_KINDS)
    aix = np.flatnonzero(amask)
    rmask = kind == _RAW_ARGS_KIND
    rix = np.flatnonzero(rmask)
    args_sub: list = []
    rlist: list = []
    if aix.size or rix.size:
        traws = raws if mask is None else list(compress(raws, mask))
        if aix.size:
            args_sub = list(map(_DEC_ANY.decode, _take(traws, aix, amask)))
            if set(map(type, args_sub)) != {dict}:
                args_sub = [a if type(a) is dict else _EMPTY for a in args_sub]
    rlens = None
    if rix.size:
        # the Raw records themselves: their bytes are copied once, into the builder's buffer, at commit (which
        # comes before the piece's text is overwritten); a bytes object each cost an allocation and a free
        rlist = _take(traws, rix, rmask)
        rlens = np.fromiter(map(len, rlist), np.int64, len(rlist))
        short = np.flatnonzero(rlens <= _NO_ARGS_MAX).tolist()  # what holds nothing is short: look at those
        gone = [i for i in short if bytes(rlist[i]) in _NO_ARGS]
        if gone:
            keep = np.ones(len(rlist), bool)
            keep[gone] = False
            rix, rlens = rix[keep], rlens[keep]
            rlist = list(compress(rlist, keep.tolist()))
    n_no_ts = int(np.count_nonzero(~ts_ok))
    return StagedChunk(counts, meta, Staged(ts, dur, kind, names, nl, tkeys, tl, ids, corr, ext, pyid, pypar, nbytes,
                                            aix, args_sub, rix, rlist, ts_ok, n_no_ts, no_dur, n_neg, n_open, rlens))
