"""Generators of hostile traces: shapes that are valid or nearly valid, cheap to make, and used to cost the
loader (or the analysis) far more than their size. Each writes one file and returns its path; the sizes are
parameters, so the tests build small ones and ``benchmarks/bench_hostile.py`` the full-size ones.

Big runs of the same byte are written through a streaming compressor, so a 2 GiB gzip bomb never exists
uncompressed in memory or on disk.
"""

from __future__ import annotations

import zlib
from pathlib import Path

try:
    import orjson as _orjson

    def _dumps(o) -> bytes:
        return _orjson.dumps(o)
except ImportError:  # pragma: no cover
    import json as _json

    def _dumps(o) -> bytes:
        return _json.dumps(o, separators=(",", ":")).encode()


_BLOCK = 16 << 20


class _Writer:
    """Writes pieces to a file, through gzip when asked; ``fill(byte, n)`` streams n copies of one byte."""

    def __init__(self, path, gz: bool):
        self.f = open(path, "wb")
        self.z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS) if gz else None

    def write(self, b: bytes) -> None:
        self.f.write(self.z.compress(b) if self.z is not None else b)

    def fill(self, byte: bytes, n: int) -> None:
        block = byte * min(n, _BLOCK)
        while n > 0:
            k = min(n, len(block))
            self.write(block if k == len(block) else block[:k])
            n -= k

    def close(self) -> None:
        if self.z is not None:
            self.f.write(self.z.flush())
        self.f.close()


def _write(path, pieces, gz: bool | None = None) -> Path:
    path = Path(path)
    w = _Writer(path, path.suffix == ".gz" if gz is None else gz)
    for p in pieces:
        if isinstance(p, tuple):
            w.fill(*p)
        else:
            w.write(p)
    w.close()
    return path


def _op(name="aten::mm", ts=1.0, dur=1.0, tid=1, pid=1, cat="cpu_op", **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _doc(events: list, top: dict | None = None) -> bytes:
    return _dumps({"schemaVersion": 1, **(top or {}), "traceEvents": events, "traceName": "hostile"})


# ------------------------------------------------------------------------------------- bytes, not events
def whitespace_array(path, n_ws: int) -> Path:
    """``{"traceEvents": [`` + n_ws spaces + ``]}`` (gzip when the name ends in .gz)."""
    return _write(path, [b'{"traceEvents": [', (b" ", n_ws), b"]}"])


def trailing_whitespace(path, n_ws: int) -> Path:
    """A valid one-event trace followed by n_ws spaces."""
    return _write(path, [_doc([_op()]), (b" ", n_ws)])


def zeros(path, n: int) -> Path:
    """n zero bytes."""
    return _write(path, [(b"\x00", n)])


def repeated_events(path, n_bytes: int) -> Path:
    """``{"traceEvents": [`` + the same small event, again and again, for ~n_bytes + ``]}``: a valid trace
    whose decompressed size is ~1000x its gzip's."""
    ev = _dumps(_op()) + b","
    k = max(1, n_bytes // len(ev))
    pieces = [b'{"traceEvents": [']
    block = ev * max(1, min(k, _BLOCK // len(ev)))
    per = len(block) // len(ev)
    while k > 0:
        pieces.append(block if k >= per else ev * k)
        k -= per
    pieces.append(_dumps(_op(ts=2.0)) + b"]}")
    return _write(path, pieces)


def whitespace_between_events(path, n_events: int, n_ws: int) -> Path:
    """n_events ops, then n_ws spaces between two events of the array, then n_events more (plain JSON by
    default: big enough, it takes the two-process path)."""
    half = [_dumps(_op(ts=float(i))) for i in range(n_events)]
    rest = [_dumps(_op(ts=float(n_events + 10 + i))) for i in range(n_events)]
    return _write(path, [b'{"schemaVersion": 1, "traceEvents": [', b",\n".join(half), b",", (b" ", n_ws),
                         b",\n".join(rest), b'], "traceName": "hostile"}'])


# --------------------------------------------------------------------------------- many of one thing
def threads(path, n: int) -> Path:
    """n distinct thread ids, one op each (and a thread_name record each)."""
    evs = []
    for i in range(n):
        evs.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 10 + i, "ts": 0, "args": {"name": f"t{i}"}})
        evs.append(_op("aten::add", ts=1.0 + i, dur=0.5, tid=10 + i, **{"External id": i + 1}))
    return _write(path, [_doc(evs)])


def _launch(evs: list, i: int, name: str, ts: float, corr: int, kdur: float = 0.5, tid: int = 1) -> None:
    evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
                "ts": ts, "dur": 0.5, "args": {"correlation": corr, "External id": i + 1}})
    evs.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 1.0, "dur": kdur,
                "args": {"device": 0, "stream": 7, "correlation": corr, "External id": i + 1,
                         "grid": [1, 1, 1], "block": [128, 1, 1]}})


def names(path, n: int) -> Path:
    """n distinct CPU op names, each launching a kernel with its own distinct name."""
    evs = []
    for i in range(n):
        t = 4.0 * i
        evs.append(_op(f"aten::op_{i}", ts=t, dur=2.0, **{"External id": i + 1}))
        _launch(evs, i, f"kernel_{i}_" + "x" * 20, t + 0.5, corr=i + 1)
    return _write(path, [_doc(evs)])


def colliding_correlations(path, n: int) -> Path:
    """n launches and n kernels that all carry the same correlation id (and the same External id)."""
    evs = []
    for i in range(n):
        _launch(evs, 0, "gemm", 3.0 * i, corr=7)
    return _write(path, [_doc(evs)])


def same_timestamp(path, n: int, step: float = 0.0) -> Path:
    """n ops on one thread and n kernels on one stream, every one at the same timestamp (distinct args, so
    none is an exact duplicate of another). ``step`` > 1 spaces them apart instead: the same events, the same
    bytes but for the timestamps, as a reference for what the flood should cost."""
    evs = []
    for i in range(n):
        t = 100.0 + i * step
        evs.append(_op("aten::mm", ts=t, dur=1.0, **{"External id": i + 1, "seq": i}))
        evs.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t, "dur": 1.0,
                    "args": {"device": 0, "stream": 7, "correlation": i + 1, "seq": i}})
    return _write(path, [_doc(evs)])


def one_ns_gaps(path, n: int) -> Path:
    """n kernels on one stream, each 1 µs long, with 1 ns between one and the next (each launched)."""
    evs = []
    for i in range(n):
        t = round(i * 1.001, 3)
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                    "ts": round(t - 0.5, 3), "dur": 0.1, "args": {"correlation": i + 1}})
        evs.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t, "dur": 1.0,
                    "args": {"device": 0, "stream": 7, "correlation": i + 1}})
    return _write(path, [_doc(evs)])


def deep_python(path, depth: int, launches: int = 1) -> Path:
    """Python frames nested ``depth`` deep (by their Python id tree and by time); ``launches`` ops launched from
    the innermost one, each a kernel with GPU idle time before it."""
    evs = []
    width = 10.0 * launches + 10.0
    for i in range(depth):
        evs.append({"ph": "X", "cat": "python_function", "name": f"user.py({i % 97 + 1}): f{i % 97}", "pid": 1,
                    "tid": 1, "ts": float(i), "dur": 2.0 * (depth - i) + width,
                    "args": {"Python id": i + 1, "Python parent id": i if i else None}})
    for k in range(launches):
        t = depth + 10.0 * k + 1.0
        evs.append(_op("aten::mm", ts=t, dur=4.0, **{"External id": k + 1}))
        _launch(evs, k, "gemm", t + 1.0, corr=k + 1, kdur=3.0)
    return _write(path, [_doc(evs)])


def big_name(path, n_bytes: int) -> Path:
    """A kernel (and its launch) whose name is n_bytes long, among a few ordinary events."""
    evs = [_op("aten::mm", ts=0.0, dur=10.0, **{"External id": 1})]
    _launch(evs, 0, "k" * n_bytes, 1.0, corr=1)
    _launch(evs, 1, "gemm", 20.0, corr=2)
    return _write(path, [_doc(evs)])


# ------------------------------------------------------------------------------------------- damage
def unescaped_quotes(path, n: int) -> Path:
    """n ops whose names hold an unescaped '"' (Kineto's bug), Kineto's layout (one event per line): every
    piece goes through the lenient, event-by-event lane."""
    lines = [_dumps(_op('aten::a"b', ts=float(i), dur=0.5)).replace(b'a\\"b', b'a"b') for i in range(n)]
    return _write(path, [b'{"schemaVersion": 1, "traceEvents": [\n', b",\n".join(lines), b"\n]}"])


def damaged_nested(path, n_items: int, item_bytes: int, n_events: int = 100) -> Path:
    """Events around one whose args hold a list of ``n_items`` objects of ~item_bytes each (every ``}, {``
    between them looks like a boundary between events), in a piece with a bare ``inf`` elsewhere and a value
    that never closes inside that list: the lenient lane has to find where that event ends."""
    before = [_dumps(_op(ts=float(i), dur=0.5)).replace(b'"dur":0.5', b'"dur":inf') for i in range(n_events)]
    item = b'{"s": "' + b"y" * max(0, item_bytes - 10) + b'"}'
    big = (b'{"ph": "X", "cat": "cpu_op", "name": "big", "pid": 1, "tid": 1, "ts": 1000000, "dur": 1, "args": '
           b'{"list": [[') + b", ".join([item] * n_items) + b"]}}"
    after = [_dumps(_op(ts=2e6 + i, dur=0.5)) for i in range(n_events)]
    return _write(path, [b'{"traceEvents": [\n', b",\n".join(before + [big] + after), b"\n]}"])
