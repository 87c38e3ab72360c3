"""The columnar cache: a loaded model's arrays and side tables, saved so a trace reopens fast.

One uncompressed ``.npz`` per trace in the user cache folder ($GAPSCOPE_CACHE_DIR, else
$XDG_CACHE_HOME/gapscope, else ~/.cache/gapscope); never next to the trace. The file name comes
from the trace's absolute path; inside, a key (format version, absolute path, size, mtime_ns and a
hash of the trace's first and last 64 KiB) must match the trace as it is now, or the entry is stale
and rebuilt. Side tables are stored as bytes arrays (no pickle), so a cache file cannot run code.
A cache that cannot be read or written never fails a load: it is rebuilt or skipped.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import threading
import zipfile

import numpy as np

from ..errors import GapscopeError
from .model import BlobList, TraceModel, Track, TrackKind

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

#: bump when the model's columns or their meaning change: older entries are then rebuilt
FORMAT_VERSION = 2
_EDGE = 64 << 10
#: the model's array columns an entry stores (tests compare two models column by column with it)
COLUMNS = ("ts_ns", "dur_ns", "kind", "track", "name_id", "corr", "ext_id", "py_id", "py_parent", "depth",
           "parent", "args_id", "nbytes", "launch", "op", "track_offsets")


def cache_dir() -> str:
    d = os.environ.get("GAPSCOPE_CACHE_DIR")
    if d:
        return d
    x = os.environ.get("XDG_CACHE_HOME")
    if x and os.path.isabs(x):
        return os.path.join(x, "gapscope")
    return os.path.join(os.path.expanduser("~"), ".cache", "gapscope")


def _dumps(obj) -> bytes:
    if _orjson is not None:
        return _orjson.dumps(obj, option=_orjson.OPT_NON_STR_KEYS, default=str)
    return json.dumps(obj, default=str).encode()  # pragma: no cover


def _loads(b: bytes):
    return _orjson.loads(b) if _orjson is not None else json.loads(b)


def fingerprint(path: str, st: os.stat_result) -> dict:
    """What must not change for a cache entry to stay valid."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        h.update(f.read(_EDGE))
        if st.st_size > _EDGE:
            f.seek(max(_EDGE, st.st_size - _EDGE))
            h.update(f.read(_EDGE))
    return {
        "version": FORMAT_VERSION,
        "path": os.path.abspath(path),
        "size": int(st.st_size),
        "mtime_ns": int(st.st_mtime_ns),
        "edges": h.hexdigest(),
    }


def entry_path(path: str) -> str:
    name = hashlib.blake2b(os.path.abspath(path).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return os.path.join(cache_dir(), f"{name}.npz")


def _blob(items: list) -> tuple[np.ndarray, np.ndarray]:
    """A list of bytes as one uint8 array plus int64 offsets."""
    offs = np.zeros(len(items) + 1, dtype=np.int64)
    if items:
        offs[1:] = np.cumsum(np.fromiter((len(b) for b in items), dtype=np.int64, count=len(items)))
    return np.frombuffer(b"".join(items), dtype=np.uint8), offs


def _unblob(data: np.ndarray, offs: np.ndarray) -> list[bytes]:
    raw = data.tobytes()
    o = offs.tolist()
    return [raw[o[i] : o[i + 1]] for i in range(len(o) - 1)]


def _track_dict(t: Track) -> dict:
    return {"id": t.id, "kind": t.kind.value, "pid": t.pid, "tid": t.tid, "name": t.name, "device": t.device,
            "stream": t.stream, "rank": t.rank, "sort_index": t.sort_index}


def _track_from(d: dict) -> Track:
    return Track(d["id"], TrackKind(d["kind"]), d["pid"], d["tid"], d["name"], device=d["device"],
                 stream=d["stream"], rank=d["rank"], sort_index=d["sort_index"])


def _entry_arrays(model: TraceModel, key: dict) -> dict:
    arrays = {k: getattr(model, k) for k in COLUMNS}
    names = [s.encode("utf-8", "surrogatepass") for s in model.names]
    arrays["names_data"], arrays["names_offs"] = _blob(names)
    if isinstance(model.args, BlobList):
        arrays["args_data"], arrays["args_offs"] = np.frombuffer(model.args.data, dtype=np.uint8), model.args.offs
    else:
        arrays["args_data"], arrays["args_offs"] = _blob(list(model.args))
    side = {
        "key": key,
        "tracks": [_track_dict(t) for t in model.tracks],
        "devices": model.devices,
        "metadata": model.metadata,
        "warnings": model.warnings,
        "category_counts": model.category_counts,
    }
    arrays["side"] = np.frombuffer(_dumps(side), dtype=np.uint8)
    return arrays


def encode(model: TraceModel, key: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **_entry_arrays(model, key))
    return buf.getvalue()


def decode(raw_file: str, key: dict, path: str) -> TraceModel | None:
    """The model stored in ``raw_file`` when its key matches ``key``; None when stale."""
    with np.load(raw_file, allow_pickle=False) as z:
        side = _loads(z["side"].tobytes())
        if side.get("key") != key:
            return None
        cols = {k: z[k] for k in COLUMNS}
        names = [b.decode("utf-8", "surrogatepass") for b in _unblob(z["names_data"], z["names_offs"])]
        args = BlobList(z["args_data"].tobytes(), z["args_offs"])
    ao = args.offs
    if ao.ndim != 1 or ao.shape[0] < 1 or ao[0] != 0 or ao[-1] != len(args.data) or (ao.shape[0] > 1 and
                                                                                      (np.diff(ao) < 0).any()):
        raise ValueError("args offsets do not match their data")
    n = cols["ts_ns"].shape[0]
    if any(cols[k].shape[0] != n for k in COLUMNS if k != "track_offsets"):
        raise ValueError("columns of different lengths")
    tracks = [_track_from(d) for d in side["tracks"]]
    if cols["track_offsets"].shape[0] != len(tracks) + 1:
        raise ValueError("track table does not match the offsets")
    return TraceModel(
        path=path,
        names=names,
        args=args,
        tracks=tracks,
        devices=side["devices"],
        metadata=side["metadata"],
        warnings=side["warnings"],
        category_counts=side["category_counts"],
        **cols,
    )


def get(path: str, st: os.stat_result) -> TraceModel | None:
    """The cached model of ``path``, or None (no entry, stale, corrupt, or unreadable)."""
    entry = entry_path(path)
    if not os.path.isfile(entry):
        return None
    try:
        key = fingerprint(path, st)
        model = decode(entry, key, path)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, GapscopeError):
        model = None
    except Exception:  # anything else from a damaged file: never fail a load because of the cache
        model = None
    if model is None:
        try:
            os.unlink(entry)
        except OSError:
            pass
    return model


def _prepare(path: str, st: os.stat_result, model: TraceModel):
    """(entry path, arrays to save), or None when the entry must not be written (folder next to the trace)."""
    key = fingerprint(path, st)
    folder = cache_dir()
    if os.path.abspath(folder) == os.path.dirname(os.path.abspath(path)):
        return None  # never next to the trace
    os.makedirs(folder, exist_ok=True)
    _sweep(folder)
    return entry_path(path), _entry_arrays(model, key)


def _sweep(folder: str, age_s: float = 3600.0) -> None:
    """Remove temporary files left by writes that never finished (a process killed mid-write)."""
    import time

    try:
        now = time.time()
        for e in os.scandir(folder):
            if e.name.startswith(".gapscope-") and e.name.endswith(".tmp") and now - e.stat().st_mtime > age_s:
                os.unlink(e.path)
    except OSError:
        pass


def _write(dest: str, arrays: dict) -> None:
    """Save straight into a temporary file next to ``dest``, then rename: no in-memory copy of the entry, and
    no fsync (a cache entry torn by a crash fails its checks and is rebuilt)."""
    fd, tmp = tempfile.mkstemp(prefix=".gapscope-", suffix=".tmp", dir=os.path.dirname(dest))
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def put(path: str, st: os.stat_result, model: TraceModel, *, background: bool = False) -> bool:
    """Save ``model`` for ``path``; False (and no error) when the cache folder cannot be written. With
    ``background``, the side tables are taken now and the arrays are written by a thread (the model's arrays
    are never modified after load), so a big trace's first frame does not wait for the write."""
    try:
        prep = _prepare(path, st, model)
        if prep is None:
            return False
        if background:
            t = threading.Thread(target=_write_quietly, args=prep, name="gapscope-cache-write")
            t.start()
            return True
        _write(*prep)
        return True
    except (OSError, GapscopeError, ValueError, TypeError):
        return False


def _write_quietly(dest: str, arrays: dict) -> None:
    try:
        _write(dest, arrays)
    except Exception:  # noqa: BLE001 - a cache that cannot be written is skipped
        pass
