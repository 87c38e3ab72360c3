"""Event boundaries in a trace's bytes, and the lenient lane's repairs of one JSON value for the known Kineto
bugs (unescaped ``"`` in names, bare ``inf``/``nan``, raw control characters, invalid UTF-8, a value cut off or
followed by more text). Every repair is counted in ``_Stats`` and becomes a warning (``reader._Reader.report``)."""

from __future__ import annotations

import re

try:
    import orjson as _orjson

    _loads = _orjson.loads
except ImportError:  # pragma: no cover - GPU nodes with only torch
    _orjson = None
    import json as _json_mod

    def _loads(b):
        # json.loads raises UnicodeDecodeError on bad UTF-8: decode leniently first
        return _json_mod.loads(bytes(b).decode("utf-8", "replace"))


import json as _json

JSONDecodeError = _json.JSONDecodeError  # orjson.JSONDecodeError subclasses it

_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_NONFINITE = re.compile(rb"(?<=[:\[,])(\s*)-?(?:Infinity|inf|NaN|nan|Inf)(?=\s*[,\]}])")
_QUOTE_END = re.compile(rb'"(?=\s*(?:[,}\]]|$))')
_MAX_REPAIRS = 64


def _char_to_byte(text: bytes, pos: int) -> int:
    """JSON error positions count characters; convert one to a byte offset in ``text``."""
    if text.isascii():
        return pos
    try:
        return len(text.decode("utf-8", "replace")[:pos].encode("utf-8", "replace"))
    except Exception:  # pragma: no cover - defensive
        return pos


_CLOSE = re.compile(rb"\s*,?\s*\]")
_TRAILER = re.compile(rb"\s*(?:$|\}|,\s*\")")


def _looks_like_trailer(data, after: int) -> bool:
    """Whether data[after:] can follow the event array: nothing, the object's end, or more keys."""
    return _TRAILER.match(bytes(data[after : after + 256])) is not None


def _last_boundary(data, lo: int, n: int):
    """(end, next) of the last event boundary in data[lo:n], searched in a window from the end."""
    w = 1 << 16
    while True:
        a = max(lo, n - w)
        last = None
        for last in _BOUNDARY.finditer(data, a, n):
            pass
        if last is not None:
            return last.start() + 1, last.end() - 1
        if a == lo:
            return None
        w <<= 2


class _Stats:
    def __init__(self):
        self.quotes = 0
        self.nonfinite = 0
        self.control = 0
        self.utf8 = 0
        self.skipped = 0
        self.deep = 0  # values nested past the parser's depth limit (orjson: 1024 levels)
        self.truncated = False
        self.kept_events = 0

    def absorb(self, other: "_Stats") -> None:
        """Add the repair counts of ``other`` (one event's)."""
        for k in ("quotes", "nonfinite", "control", "utf8", "deep"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


def _repair_one(text: bytes, stats: _Stats, limit: int = _MAX_REPAIRS):
    """Parse one JSON value (an event, a metadata object), repairing known damage.

    Returns ``("ok", value, None)``; ``("trail", value, tail)`` when a complete value is followed by
    more text (``tail``, unchanged from the input's end); ``("eof", None, None)`` when the text ends
    before the value does; ``("bad", None, None)`` when it cannot be repaired."""
    tried_utf8 = tried_nonfinite = False
    for _ in range(limit):
        try:
            return "ok", _loads(text), None
        except RecursionError:
            stats.deep += 1
            return "bad", None, None
        except JSONDecodeError as exc:
            msg = exc.msg or ""
            if "recursion" in msg.lower() or "depth" in msg.lower():
                stats.deep += 1
                return "bad", None, None
            bpos = _char_to_byte(text, exc.pos)
            if msg.startswith(("unexpected content after document", "Extra data")):
                tail = text[bpos:]
                try:
                    return "trail", _loads(text[:bpos]), tail
                except (JSONDecodeError, RecursionError):
                    return "bad", None, None
            if "UTF-8" in msg or "utf-8" in msg.lower() or "surrogate" in msg:
                if tried_utf8:
                    return "bad", None, None
                tried_utf8 = True
                stats.utf8 += 1
                text = text.decode("utf-8", "replace").encode("utf-8")
                continue
            if "recursion" in msg.lower():
                return "bad", None, None
            if (bpos >= len(text.rstrip()) and ("end" in msg or "Expecting" in msg)) or msg.startswith(
                "Unterminated string"  # the json module reports where the string began
            ):
                return "eof", None, None
            if "control character" in msg:
                stats.control += 1
                j = min(bpos, len(text) - 1)
                if text[j] < 0x20:
                    text = text[:j] + b" " + text[j + 1 :]
                    continue
                # stdlib json reports the string's start: blank every raw control character
                text = re.sub(rb"[\x00-\x1f]", b" ", text)
                continue
            if not tried_nonfinite and _NONFINITE.search(text):
                tried_nonfinite = True
                text, k = _NONFINITE.subn(rb"\1null", text)
                stats.nonfinite += k
                continue
            # an unescaped quote closed a string early: the error is just after the early close.
            q0 = text.rfind(b'"', 0, bpos)
            if q0 <= 0:
                return "bad", None, None
            m = _QUOTE_END.search(text, bpos)
            if m is None:
                return "bad", None, None
            q1 = m.start()
            if text.count(b"\n", q0, q1):
                return "bad", None, None  # never reach across lines: that is not one name with a quote
            # q0 is the early close; every quote from it up to the real close q1 belongs to the string
            inner = text[q0:q1].replace(b'\\"', b'"').replace(b'"', b'\\"')
            text = text[:q0] + inner + text[q1:]
            stats.quotes += 1
            continue
    return "bad", None, None
