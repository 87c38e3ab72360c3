"""Trace strings made safe to draw: control characters and escape sequences shown escaped, never interpreted."""

from __future__ import annotations

import re

_CTRL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _esc(m: re.Match) -> str:
    c = ord(m.group(0))
    return {9: "\\t", 10: "\\n", 13: "\\r", 27: "\\x1b"}.get(c, f"\\x{c:02x}")


#: the most characters of one trace string drawn: a 1 MB name folded into the stack panel would be tens of
#: thousands of lines, each rendered on every gap jump
MAX_DRAWN = 2000


def safe(name) -> str:
    """``name`` with every control character written as an escape (``\\x1b[31m`` stays visible text), cut
    to MAX_DRAWN characters."""
    s = name if isinstance(name, str) else str(name)
    if len(s) > MAX_DRAWN:
        s = f"{s[:MAX_DRAWN]}... (+{len(s) - MAX_DRAWN} characters)"
    return _CTRL.sub(_esc, s) if _CTRL.search(s) else s


def ascii_safe(s: str) -> str:
    """For --ascii: non-ASCII characters become '?' so a non-UTF-8 terminal never sees raw bytes."""
    if s.isascii():
        return s
    s = s.replace("µ", "u").replace("μ", "u").replace("…", "...").replace("—", "-").replace("–", "-")
    s = s.replace("→", "->").replace("×", "x").replace("≥", ">=").replace("≤", "<=").replace("·", ".").replace("−", "-")
    return s.encode("ascii", "replace").decode("ascii")


def shown(s, ascii: bool) -> str:
    """A trace string as the explorer draws it: made safe (``safe``), and for --ascii ASCII-safe too
    (``ascii_safe``). Every widget that draws a name goes through here."""
    s = safe(s)
    return ascii_safe(s) if ascii else s


def short_kernel(name: str) -> str:
    """A kernel's name without the return type, parameters and template arguments, for narrow columns:
    ``void at::native::foo<float, 4>(Params)`` -> ``at::native::foo<>``."""
    n = name.strip().replace("(anonymous namespace)::", "")
    if n.startswith("void "):
        n = n[5:]
    depth = 0
    out = []
    for ch in n:
        if ch == "<":
            if depth == 0:
                out.append("<>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip()
    return s or name
