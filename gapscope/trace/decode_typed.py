"""The typed decoder: msgspec decodes a piece of the events array straight into small records.

The records (``_Ev``, ``_Ids``) hold only the fields the columns need (everything else is skipped without
building a Python object), plus each event's args as the bytes it was written with, when a kind keeps them.
That is ~3x less work than building a dict per event (and per args object) and reading the fields back out.
A piece the records do not fit (a string timestamp, a float pid, a null id) is refused by msgspec
(``decode_events`` returns None) and goes through ``decode_dicts``, unchanged.
"""

from __future__ import annotations

import os as _os
from itertools import compress, repeat
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from .decode_common import (
    _ARGS_KINDS, _BYTES_KINDS, _GPU_SIDE_ARR, _IS_NONE, _NO_ARGS, _RAW_ARGS_KIND, StagedChunk, Staged, _take, i64, i64_of, times,
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
        #: NaN where the event has no "dur" (JSON cannot write a NaN): the array of a piece with instants is one of
        #: floats, as the None it had made it (``decode_common.times``), without searching it for the None
        dur: Union[int, float, None] = float("nan")
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
_G_DUR = attrgetter("dur")
_NO_ARGS_MAX = max(map(len, _NO_ARGS))
_G_CORR, _G_EXT, _G_EXTLC = attrgetter("correlation"), attrgetter("ext"), attrgetter("ext_lc")
_G_PYID, _G_PYPAR, _G_FIN = attrgetter("pyid"), attrgetter("pypar"), attrgetter("finished")
#: phases by code: complete, instant, flow, metadata, anything else (a timed event of an unknown phase)
_PH_X, _PH_INSTANT, _PH_FLOW, _PH_META, _PH_OTHER = range(5)
_PH_CODE = {"X": _PH_X, "i": _PH_INSTANT, "I": _PH_INSTANT, "s": _PH_FLOW, "f": _PH_FLOW, "t": _PH_FLOW, "M": _PH_META}
_PH_LUT = np.full(256, _PH_OTHER, dtype=np.uint8)
for _p, _c in _PH_CODE.items():
    _PH_LUT[ord(_p)] = _c



def decode_args(raw):
    """One event's args, as written (a ``msgspec.Raw`` of a decoded piece), as Python values."""
    return _DEC_ANY.decode(raw)


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


def _lookups(b, kind, timed: list):
    """(names, name ids, track keys, track ids) of the records ``timed``, as ``ColumnBuilder.lookups`` gives them;
    where every name and track is known, the ids straight into arrays from the records (``names`` and the keys
    None: commit reads them only for the new ones), without a list of each field."""
    n = len(timed)
    try:
        nl = np.fromiter(map(b._name_ix.get, map(_G_NAME, timed)), np.int32, n)
        names = None
    except TypeError:  # a new name (None)
        names = list(map(_G_NAME, timed))
        nl = list(map(b._name_ix.get, names))
    gside = np.isin(kind, _GPU_SIDE_ARR).tolist()
    try:
        tl = np.fromiter(map(b._raw_track.get, zip(gside, map(_G_PID, timed), map(_G_TID, timed))), np.int32, n)
        tkeys = None
    except TypeError:  # a new track key
        tkeys = list(zip(gside, map(_G_PID, timed), map(_G_TID, timed)))
        tl = list(map(b._raw_track.get, tkeys))
    return names, nl, tkeys, tl


def stage_typed(b, dec: Decoded) -> StagedChunk:
    """``decode_dicts.stage_dicts`` for typed records (see ``_Ev``; ``dec`` from ``decode_events``): the same
    staged values, from attribute reads. The records' types are checked by msgspec; an int beyond 64 bits or a
    time out of range raises SlowLane."""
    evs, raws, all_ids = dec
    n_all = len(evs)
    if n_all == 0:
        return StagedChunk({}, [], None)
    # categories by code (``b._cat_code``, grown in order of first appearance): one lookup pass gives both the
    # counts (a bincount) and the kinds (a take), where a Counter and a lookup of each timed event's kind were two
    code = b._cat_code
    try:  # one pass straight into the array (a spelling not met before makes its code None: a TypeError)
        ca = np.fromiter(map(code.get, map(_G_CAT, evs)), np.intp, n_all)
    except TypeError:
        cats = list(map(_G_CAT, evs))
        for c in dict.fromkeys(compress(cats, map(_IS_NONE, map(code.get, cats)))):
            b.new_cat(c)
        ca = np.fromiter(map(code.get, cats), np.intp, n_all)
        del cats
    cnt = np.bincount(ca, minlength=len(code)).tolist()
    names_of = b._cat_names
    # in code order: the spellings new to the trace come in order of first appearance, as a Counter has them
    counts = {names_of[c]: k for c, k in enumerate(cnt) if k}
    # phases by code too (_PH_CODE): which events are timed, instants, complete
    phs = list(map(_G_PH, evs))
    try:  # one letter each (always, in Kineto's traces): their codes through a table of the 256 bytes
        j = "".join(phs).encode("latin-1")
        if len(j) != n_all or "" in phs:  # n letters, none empty: one each
            raise ValueError
        pa = _PH_LUT[np.frombuffer(j, dtype=np.uint8)]
    except (TypeError, ValueError):  # a None, a longer phase
        pa = np.array(list(map(_PH_CODE.get, phs, repeat(_PH_OTHER))), dtype=np.uint8)
    del phs
    meta = []
    if _PH_META in pa:
        for i in np.flatnonzero(pa == _PH_META).tolist():
            e = evs[i]
            a = _DEC_ANY.decode(raws[i])
            meta.append({"ph": "M", "name": e.name, "pid": e.pid, "tid": e.tid,
                         "args": a if isinstance(a, dict) else {}})
    tmask = pa < _PH_FLOW  # X, i / I and unknown phases
    if _PH_OTHER in pa:
        tmask |= pa == _PH_OTHER
    if tmask.all():
        timed, mask = evs, None
    else:
        mask = tmask.tolist()
        timed = list(compress(evs, mask))
        ca, pa = ca[tmask], pa[tmask]
    n = len(timed)
    if n == 0:
        return StagedChunk(counts, meta, None)
    kind = b._kind_of_code[ca]
    inst = None
    if _PH_INSTANT in pa:
        inst = pa == _PH_INSTANT
        kind[inst & (kind == Kind.OTHER)] = Kind.INSTANT
        # an instant of a range category (e.g. a cpu_op 'i') stays of its category, with no duration
    is_x = pa == _PH_X
    # one pass per field (cheaper than building a tuple per event and transposing)
    ts, ts_ok, dur, no_dur, n_neg = times(n, inst, lambda at: np.count_nonzero(is_x[at]), list(map(_G_TS, timed)),
                                          list(map(_G_DUR, timed)), absent_nan=True)
    ids = all_ids if mask is None else list(compress(all_ids, mask))
    if None in ids:  # "args": null
        ids = [a if a is not None else _NO_IDS for a in ids]
    n_open = 0
    if False in map(_G_FIN, ids):  # "finished": false on an X event (some [memory] instants carry it too: not ranges)
        n_open = sum(1 for v, x in zip(map(_G_FIN, ids), is_x.tolist()) if v is False and x)
    names, nl, tkeys, tl = _lookups(b, kind, timed)
    is_py = kind == Kind.PYTHON
    corr = i64_of(_G_CORR, ids)
    ext = i64_of(_G_EXT, ids, nullable=True)  # "External id": null is NO_ID
    # old traces spell it "external id"
    lc = i64_of(_G_EXTLC, ids)
    np.copyto(ext, lc, where=(ext == NO_ID) & (lc != NO_ID))
    corr[is_py] = NO_ID
    ext[is_py] = NO_ID
    pyid = np.full(n, NO_ID, dtype=np.int64)
    pypar = np.full(n, NO_ID, dtype=np.int64)
    pyix = np.flatnonzero(is_py)
    if pyix.size:
        sub = _take(ids, pyix, is_py)
        pyid[pyix] = i64_of(_G_PYID, sub)
        pypar[pyix] = i64_of(_G_PYPAR, sub, nullable=True)  # a root frame's parent id: null
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
        if aix.size:  # decoded at commit, only where a text like it was not seen (``_intern_args_raw``)
            args_sub = _take(traws, aix, amask)
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
                                            aix, args_sub, rix, rlist, ts_ok, n_no_ts, no_dur, n_neg, n_open, rlens,
                                            args_raw=True))
