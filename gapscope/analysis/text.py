"""Text the analysis hands to the front ends: a tuple of ``Span`` (prose, or a name from the trace shown as code).

The Markdown report escapes the prose and writes the names as code spans, the explorer styles the names, the JSON
keeps them apart (``*_segments``); no front end reads markup back out of a sentence.

The plan writes its text as spans directly (``spans("Fuse ", (frame,), " into one call")``). The sentences of the
findings and the gap details (titles, advice, explanations) are written with each name between backticks; they
become spans here, once, when a front end asks a finding or a gap detail for its text (``Finding.title_text``,
``GapDetail.explanation_text``): this module is the one reader of that convention.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A piece of text: prose, or a name from the trace (``code``: a frame, an op, a kernel) shown as code."""
    text: str
    code: bool = False


Text = tuple  # of Span

_NAME = re.compile(r"`([^`]+)`")


def plain(text: Text) -> str:
    """The text as one string (code names as they are)."""
    return "".join(s.text for s in text)


def spans(*parts) -> Text:
    """Spans from strings (prose) and 1-tuples (a code name): ``spans("Fuse ", (frame,), " into one call")``."""
    return tuple(Span(p[0], True) if isinstance(p, tuple) else Span(p) for p in parts if p)


def sentence(s) -> Text:
    """A sentence of the analysis (names between backticks) as spans; a string without names is one prose span."""
    s = "" if s is None else str(s)
    if "`" not in s:
        return (Span(s),) if s else ()
    out, pos = [], 0
    for m in _NAME.finditer(s):
        if m.start() > pos:
            out.append(Span(s[pos:m.start()]))
        out.append(Span(m.group(1), True))
        pos = m.end()
    if pos < len(s):
        out.append(Span(s[pos:]))
    return tuple(out)


def segments(text: Text) -> list[dict]:
    """The spans as the JSON writes them: ``[{"text": ..., "code": bool}]``."""
    return [{"text": x.text, "code": x.code} for x in text]
