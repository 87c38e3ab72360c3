"""Read a trace file into a TraceModel.

FIRST CUT: strict parse of the whole document. To be replaced by the bounded, lenient reader
(gzip sniffing with a size limit, repair of known Kineto bugs, chunked parsing).
"""

from __future__ import annotations

import gc
import gzip
import os

from ..errors import GapscopeError
from .build import ColumnBuilder
from .model import TraceModel

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None
import json as _json


class TraceError(GapscopeError):
    """A trace that cannot be read; the message names the file and the reason."""


def load(path: str, **_opts) -> TraceModel:
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise TraceError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    gc_was = gc.isenabled()
    gc.disable()
    try:
        try:
            doc = _orjson.loads(raw) if _orjson else _json.loads(raw)
        except ValueError as exc:
            raise TraceError(f"{p}: not a PyTorch profiler trace ({exc})") from None
        del raw
        if isinstance(doc, list):
            events, meta = doc, {}
        elif isinstance(doc, dict):
            events = doc.get("traceEvents") or []
            meta = {k: v for k, v in doc.items() if k != "traceEvents"}
        else:
            raise TraceError(f"{p}: not a PyTorch profiler trace (top level is not an object or array)")
        b = ColumnBuilder(p)
        b.add(events)
        del events, doc
        return b.finish(meta)
    finally:
        if gc_was:
            gc.enable()
