"""A trace parsed in parts (another process, or the parent's own part) and merged back in file order:
``PieceBuilder`` logs every ``add`` as a unit; ``merge_parts`` replays units of several builders into one
``ColumnBuilder``, giving the same model as one builder fed every event in that order."""

from __future__ import annotations

import numpy as np

from .build import ColumnBuilder
from .decode_common import _COLS


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
