"""The bytes of a trace file before any JSON is parsed: streaming gzip that refuses early, and JSON whitespace.

A trace is a file someone sends you, and a small gzip can hold gigabytes. Decompression runs in ~1 MiB pieces:

- the first bytes that are not whitespace must be able to start a trace (``[``, or ``{`` then a key or ``}``):
  two gigabytes of zeros are refused after the first piece, not after all of them;
- a piece that is JSON whitespace only is dropped, one space kept in its place: a run of gigabytes costs no
  memory. Between tokens that changes nothing, so it is not a warning; inside a string (no trace has a run of a
  MiB of blanks in a name) the run would shrink;
- once ``RATIO_FLOOR`` bytes have decompressed, a stream that decompresses to more than ``MAX_RATIO`` times
  the compressed bytes it took is refused (or, when what was kept already ends like a whole document and the
  stream is in a run of whitespace, the rest is left unread with a warning): the work stays bounded by the
  compressed size, not by ``--max-size``.
"""

from __future__ import annotations

import os
import re
import zlib

from ..errors import GapscopeError

_READ_BLOCK = 1 << 20
_WS = b" \t\r\n"
_WS_RUN = re.compile(rb"[ \t\r\n]*")
#: what a plain (not gzip) file must show of a trace in its first bytes
SNIFF = 1 << 16
#: decompressed gzip comes in pieces of this size; a piece of whitespace only is dropped, not kept
PIECE = 1 << 20
#: a gzip stream that decompresses to more than this many times its compressed size is refused: the real traces
#: we have (traces/, ../shared/traces/: 37 files from torch 1.8 to 2.9) range from 1.2x to 30.3x; a run of one
#: byte or one event repeated gives ~290x-1000x. Checked once RATIO_FLOOR bytes have decompressed.
MAX_RATIO = 200
RATIO_FLOOR = 64 << 20


class TraceError(GapscopeError):
    """A trace that cannot be read; the message names the file and the reason."""


def human_size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def not_a_trace(path: str, reason: str, at: int) -> TraceError:
    return TraceError(f"{path}: not a PyTorch profiler trace ({reason} at byte {at})")


# ------------------------------------------------------------------------------------------ whitespace
def ws_only(b) -> bool:
    """Whether ``b`` (not empty) is JSON whitespace and nothing else (C-level passes only)."""
    return b.isspace() and b.find(b"\x0b") < 0 and b.find(b"\x0c") < 0


def skip_ws(data, i: int) -> int:
    """The first index at or after ``i`` that is not JSON whitespace (len(data) when none): C-level passes, a
    long run in windows of PIECE (``data`` may be a map of a file: no copy of it all)."""
    n = len(data)
    if i >= n or data[i] not in _WS:
        return i
    m = _WS_RUN.match(data, i, i + 4096)
    if m.end() < i + 4096 or m.end() >= n:
        return m.end()
    i = m.end()
    while i < n:
        w = bytes(data[i : i + PIECE])
        if not ws_only(w):
            return i + _WS_RUN.match(w).end()
        i += len(w)
    return n


def content_end(data, lo: int, hi: int) -> int:
    """Index just past the last byte of data[lo:hi] that is not JSON whitespace (lo when there is none)."""
    e = hi
    while e > lo:
        a = max(lo, e - PIECE)
        w = bytes(data[a:e])
        if not ws_only(w):
            return a + len(w.rstrip(_WS))
        e = a
    return lo


def trailer(data, a: int) -> bytes:
    """data[a:] without the whitespace around it (a run inside is read in windows, the ends are not copied)."""
    i = skip_ws(data, a)
    return bytes(data[i : content_end(data, i, len(data))])


# ------------------------------------------------------------------------------------------ sniffing
def sniff(path: str, head) -> bool:
    """Refuse what cannot be a trace from its first bytes: after an optional BOM and whitespace, a trace is a
    JSON array or an object whose first key is a string. True once the head shows a possible trace, False while
    it is whitespace only (undecided); raises TraceError otherwise."""
    i = 3 if head[:3] == b"\xef\xbb\xbf" else 0
    i = skip_ws(head, i)
    if i >= len(head):
        return False
    c = head[i]
    if c == 0x5B:  # [
        return True
    if c != 0x7B:  # {
        raise not_a_trace(path, f"not JSON: starts with {bytes(head[i:i + 1])!r}", i)
    j = skip_ws(head, i + 1)
    if j >= len(head):
        return False
    if head[j] not in b'"}':
        raise not_a_trace(path, f"not JSON: an object that starts with {bytes(head[j:j + 1])!r}", j)
    return True


# ------------------------------------------------------------------------------------------ gzip
class Gunzip:
    """One gzip file (all its members) decompressed into ``out``; see the module's docstring. ``consumed`` is
    how many compressed bytes were taken, ``total`` how many decompressed (dropped whitespace included)."""

    def __init__(self, path: str, f, head: bytes, limit: int, warnings: list[str]):
        self.path = path
        self.f = f
        self.head = head
        self.limit = limit
        self.warnings = warnings
        self.out = bytearray()
        self.total = 0
        self.consumed = 0
        self.sniffed = False

    def run(self) -> bytearray:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = self.head
        read = 0
        while True:
            block = pending or self.f.read(_READ_BLOCK)
            pending = b""
            if not block:
                break
            read += len(block)
            buf = block
            while buf:
                try:
                    piece = d.decompress(buf, PIECE)
                except zlib.error as exc:
                    if not self.out:
                        raise TraceError(
                            f"{self.path}: not a PyTorch profiler trace (corrupt gzip data: {exc} at byte 0)"
                        ) from None
                    self.warnings.append(
                        f"corrupt gzip data after {human_size(len(self.out))} (kept what decompressed; the rest is lost)"
                    )
                    return self.out
                buf = d.unconsumed_tail
                self.consumed = read - len(buf)
                if self._take(piece):
                    return self.out
                if d.eof:
                    rest = d.unused_data
                    if rest.strip(b"\x00"):  # another member (zero padding after the last one is not)
                        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                        buf = rest
                    else:
                        buf = b""
        if not d.eof:
            # the member being decompressed never reached its end: the file was cut off
            self.warnings.append(
                f"the gzip stream ends early (file cut off?): kept the {human_size(len(self.out))} that decompressed"
            )
        return self.out

    def _take(self, piece: bytes) -> bool:
        """Keep or skip one decompressed piece; True when the rest of the stream is to be left unread."""
        if not piece:
            return False
        self.total += len(piece)
        if self.total > self.limit:
            raise TraceError(
                f"{self.path}: decompresses past the limit of {human_size(self.limit)} (a gzip bomb, or a very large"
                " trace); raise it with --max-size"
            )
        out = self.out
        blank = ws_only(piece)
        if blank:
            if out and out[-1] not in _WS:
                out += b" "  # what the run separated stays separated
        else:
            out += piece
            if not self.sniffed:
                self.sniffed = sniff(self.path, out)
        if self.total >= RATIO_FLOOR and self.total > MAX_RATIO * max(1, self.consumed):
            ratio = f"{human_size(self.total)} from {human_size(self.consumed)}"
            e = content_end(out, 0, len(out))
            if blank and e and out[e - 1] in b"}]":
                # a whole document, then a run of whitespace: what follows is not read (it may be gigabytes)
                left = max(0, os.fstat(self.f.fileno()).st_size - self.consumed)
                self.warnings.append(
                    f"stopped reading after {ratio} compressed: the document was followed by whitespace that "
                    f"decompresses to over {MAX_RATIO}x its size ({human_size(left)} of the file left unread)"
                )
                return True
            raise TraceError(
                f"{self.path}: not a PyTorch profiler trace (it decompresses to over {MAX_RATIO}x its compressed "
                f"size: {ratio} so far; real traces stay under 35x)"
            )
        return False


def gunzip(path: str, f, head: bytes, limit: int, warnings: list[str]) -> bytearray:
    """The decompressed bytes of the gzip file ``f`` (``head``: its first bytes, already read)."""
    return Gunzip(path, f, head, limit, warnings).run()
