"""What every section of the Markdown report writes with: trace strings escaped (``esc``), names in code spans
(``code``, ``inline``) that Markdown does not interpret, control characters written escaped, and the short labels
(a trace's label, its biggest cause, a byte count).
"""

from __future__ import annotations

import os
import re

from ..analysis import CAUSES
from ..analysis.text import sentence

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")
#: control characters from trace strings (ANSI escapes, BEL, NUL ...) are written escaped, never sent to a terminal
_CTRL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _ctrl_esc(m: re.Match) -> str:
    c = ord(m.group(0))
    return {9: "\\t", 13: "\\r", 27: "\\x1b"}.get(c, f"\\x{c:02x}")


def esc(s) -> str:
    """Escape Markdown-significant characters in plain text."""
    return _MD_SPECIAL.sub(r"\\\1", str(s)).replace("\n", " ")


def spans_md(text, limit: int = 120) -> str:
    """Text of the analysis (``analysis/text.py`` spans): names as code spans, the prose escaped."""
    return "".join(code(x.text, False, limit) if x.code else esc(x.text) for x in text)


def inline(s) -> str:
    """A sentence of the analysis (its names marked, ``analysis/text.sentence``) in Markdown."""
    return spans_md(sentence(s))


def code(s, table: bool = True, limit: int = 120) -> str:
    """A code span holding ``s`` verbatim (shortened), safe inside a table cell."""
    s = " ".join(str(s).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    ticks = 1
    while "`" * ticks in s:
        ticks += 1
    fence = "`" * ticks
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    out = f"{fence}{pad}{s}{pad}{fence}"
    if table:
        out = out.replace("|", "\\|")
    return out


def _label(a) -> str:
    parts = [os.path.basename(a.model.path)]
    if a.phase:
        parts.append(a.phase)
    if a.rank is not None:
        parts.append(f"rank {a.rank}")
    return " · ".join(parts)


def _biggest_cause(a):
    ct = a.cause_totals()
    c = max(CAUSES, key=lambda c: ct[c]["total_ns"])
    return (c, ct[c]["total_ns"]) if ct[c]["total_ns"] > 0 else (None, 0)
