"""Load several traces (one per rank, or traces to compare), in parallel processes when there are several.

``load_many`` expands folders and glob patterns into their ``*.json`` / ``*.json.gz`` files, sorted by
the rank number in the name when there is one, and sets ``Track.rank`` from each model's rank.
"""

from __future__ import annotations

import glob
import os
import re
import zlib

from .model import TraceModel
from .read import TraceError, check_file, load, parse_size

_RANK_RE = re.compile(r"rank[-_.]?(\d+)", re.I)
_TRACE_SUFFIXES = (".json", ".json.gz")


def _rank_key(path: str):
    m = _RANK_RE.search(os.path.basename(path))
    if m:
        return (0, int(m.group(1)), path)
    return (1, 0, path)


def _looks_like_trace(path: str) -> bool:
    """Cheap sniff for folder and glob expansion: a bare array, or a "traceEvents" key near the start.
    Other JSON files that sit next to traces (capture summaries) are left out; a file named on the
    command line is never filtered."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
        if head[:2] == b"\x1f\x8b":
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            head = d.decompress(head, 1 << 20)
    except (OSError, zlib.error):
        return True  # let the loader say what is wrong with it
    s = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if s[:1] == b"[" or b'"traceEvents"' in head:
        return True
    return len(head) >= (1 << 20)  # a big header: undecided, keep it


def expand(paths) -> list[str]:
    """Files named, files in named folders, and files matching glob patterns; in rank order."""
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            found = [os.path.join(p, f) for f in os.listdir(p)
                     if f.endswith(_TRACE_SUFFIXES) and os.path.isfile(os.path.join(p, f))]
            found = [f for f in found if _looks_like_trace(f)]
            if not found:
                raise TraceError(f"{p}: a folder with no *.json or *.json.gz traces in it")
            out.extend(sorted(found, key=_rank_key))
        elif not os.path.exists(p) and any(c in p for c in "*?["):
            found = [f for f in glob.glob(p) if os.path.isfile(f)]
            found = [f for f in found if f.endswith(_TRACE_SUFFIXES)] or found
            found = [f for f in found if _looks_like_trace(f)]
            if not found:
                raise TraceError(f"{p}: no file matches this pattern")
            out.extend(sorted(found, key=_rank_key))
        else:
            out.append(p)
    return out


def _set_ranks(model: TraceModel) -> TraceModel:
    r = model.rank
    if r is not None:
        for t in model.tracks:
            t.rank = r
    return model


def _load_one(path: str, no_cache: bool, max_size, pooled: bool = False, idle=None) -> TraceModel:
    if pooled:  # the files already run in parallel processes: no second worker per file
        from . import parallel

        parallel.PARALLEL_MIN = None
    return _set_ranks(load(path, no_cache=no_cache, max_size=max_size, idle=idle))


def load_many(paths, *, no_cache: bool = False, max_size=None, jobs: int | None = None,
              idle=None) -> list[TraceModel]:
    """The models of ``paths`` (``expand``ed), in rank order. ``idle``: see ``read.load_uncached`` (called for one
    trace only: several are loaded in parallel processes)."""
    files = expand(paths)
    limit = parse_size(max_size)
    for f in files:  # fail fast, before starting workers, on missing files and the like
        check_file(f)
    if len(files) <= 1 or jobs == 1:
        return [_load_one(f, no_cache, limit, idle=idle if len(files) == 1 else None) for f in files]
    workers = min(len(files), jobs or os.cpu_count() or 1)
    from concurrent.futures import ProcessPoolExecutor  # only here: ~10 ms of imports that one trace never needs

    with ProcessPoolExecutor(max_workers=workers) as ex:
        futures = [ex.submit(_load_one, f, no_cache, limit, True) for f in files]
        return [fut.result() for fut in futures]
