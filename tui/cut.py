"""Text cut to a width, with a mark that says so: "…" (on an ASCII terminal "..."); prose at a word boundary.

Every place the explorer shortens a string to fit goes through here, so that a cut never reads as a whole word
("gone: 3 gaps each held by one aten::cudnn_co" read as if the name were complete). No textual here."""

from __future__ import annotations

from rich.text import Text

#: the most of a line a word boundary may give up (prose cut at a space before this fraction of the width: cut
#: mid-word instead, rather than lose most of the line)
WORD_SLACK = 1 / 3


def mark(ascii: bool) -> str:
    """The cut mark: one cell "…", or "..." where the terminal is not UTF-8."""
    return "..." if ascii else "…"


def cut(s: str, n: int, ascii: bool = False) -> str:
    """``s`` in at most ``n`` characters, its last ones the mark when something was cut (a name, a number: cut
    anywhere). Narrower than the mark: the first ``n`` characters."""
    n = max(int(n), 0)
    if len(s) <= n:
        return s
    m = mark(ascii)
    if n <= len(m):
        return s[:n]
    return s[:n - len(m)] + m


def cut_words(s: str, n: int, ascii: bool = False) -> str:
    """Prose in at most ``n`` characters: cut at the last space that keeps most of the line (``WORD_SLACK``), the
    mark after the last word kept."""
    n = max(int(n), 0)
    if len(s) <= n:
        return s
    m = mark(ascii)
    room = n - len(m)
    if room <= 0:
        return s[:n]
    sp = s.rfind(" ", 0, room + 1)
    head = s[:sp] if sp >= room * (1 - WORD_SLACK) else s[:room]
    return head.rstrip(" ,;:") + m


def cut_pad(s: str, n: int, ascii: bool = False) -> str:
    """``cut`` to ``n`` and padded with spaces to ``n``: a fixed-width label."""
    return cut(s, n, ascii).ljust(max(int(n), 0))


def cut_text(t: Text, width: int, ascii: bool = False) -> Text:
    """A rich ``Text`` (its styles kept) in at most ``width`` cells, the mark at its end when cut: for a cell whose
    own overflow would crop without a mark (ASCII terminals: Rich's ellipsis is "…")."""
    width = max(int(width), 0)
    if t.cell_len <= width:
        return t
    m = mark(ascii)
    out = t.copy()
    if width <= len(m):
        out.truncate(width, overflow="crop")
        return out
    out.truncate(width - len(m), overflow="crop")  # (the Text's own overflow may add a mark of its own)
    out.rstrip()
    out.append(m)
    return out


def fit_lines(t: Text, width: int | None, ascii: bool) -> Text:
    """Each line of ``t`` in ``width`` cells, cut with "..." on an ASCII terminal (whose header and status lines
    clip without a mark, gapscope.tcss); elsewhere ``t`` as it is (the CSS ellipsis marks the cut)."""
    if not ascii or not width or all(ln.cell_len <= width for ln in t.split("\n")):
        return t
    out = Text("\n", no_wrap=t.no_wrap, overflow=t.overflow).join(cut_text(ln, width, True) for ln in t.split("\n"))
    return out
