"""The export key: findings report (Markdown + JSON) and an SVG of the screen, never overwriting anything."""

from __future__ import annotations

import glob
import os
import re

from ..errors import GapscopeError
from ..fsutil import atomic_write_text


def trace_stem(path: str) -> str:
    b = os.path.basename(path)
    for suf in (".gz", ".json", ".pt.trace"):
        if b.endswith(suf):
            b = b[: -len(suf)]
    return (b or "trace") + ".gapscope"


def export_folder(path: str) -> str:
    """Next to the trace when that folder is writable, else the current directory."""
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
        return d
    cwd = os.getcwd()
    if os.access(cwd, os.W_OK | os.X_OK):
        return cwd
    raise GapscopeError(f"cannot export: neither {d} nor {cwd} is writable")


def free_stem(folder: str, stem: str) -> str:
    """``stem``, or ``stem-2``, ``stem-3``... so that no file named stem.* exists yet."""
    cand = stem
    k = 1
    while glob.glob(os.path.join(glob.escape(folder), glob.escape(cand) + ".*")):
        k += 1
        cand = f"{stem}-{k}"
    return cand


def export_all(analyses: list, trace_path: str, svg: str | None) -> list[str]:
    folder = export_folder(trace_path)
    stem = free_stem(folder, trace_stem(trace_path))
    written: list[str] = []
    try:
        if analyses:
            from ..report import write_reports

            res = write_reports(analyses, folder, stem)
            if isinstance(res, dict):
                written.extend(str(p) for p in res.values())
            elif isinstance(res, (list, tuple)):
                written.extend(str(p) for p in res)
            elif res is not None:
                written.append(str(res))
        if svg is not None:
            written.append(atomic_write_text(os.path.join(folder, stem + ".svg"), svg))
    except BaseException:
        # all or nothing: a failed export takes back the files it wrote (new names, never anyone else's)
        for p in written:
            try:
                os.unlink(p)
            except OSError:
                pass
        raise
    return written


def grouped_names(names: list[str]) -> list[str]:
    """File names that differ only in their extension written once, the extensions in braces
    (``x.gapscope.md``, ``x.gapscope.json`` -> ``x.gapscope.{md,json}``), in the order first written."""
    exts: dict[str, list[str]] = {}
    for n in names:
        stem, dot, ext = n.rpartition(".")
        key = stem if dot and stem else n
        exts.setdefault(key, []).append(ext if dot and stem else "")
    out = []
    for stem, es in exts.items():
        if len(es) > 1 and all(es):
            out.append(f"{stem}.{{{','.join(es)}}}")
        else:
            out += [f"{stem}.{e}" if e else stem for e in es]
    return out


def notice_width(screen_width: int) -> int:
    """The text width of a notice (a Textual toast: 60 columns at most, gapscope.tcss caps it at 42% of the
    screen, less its padding and border), one column spare."""
    return max(min(60, screen_width * 42 // 100) - 4, 12)


def break_at_marks(s: str, width: int) -> list[str]:
    """``s`` in lines of at most ``width`` characters, broken after a space, "/", "-", "." or "_" only: never inside
    a run of letters and digits (a run longer than ``width`` stays whole on its own line). A last line of a few
    characters ("md") takes the pieces before it along while they fit."""
    lines: list[list[str]] = [[]]
    for piece in re.findall(r"[^ /._-]*[ /._-]|[^ /._-]+$", s):
        if lines[-1] and len(("".join(lines[-1]) + piece).rstrip()) > width:
            lines.append([])
        lines[-1].append(piece)
    while len(lines) > 1 and len("".join(lines[-1])) < 8 and len(lines[-2]) > 1 and \
            len("".join([lines[-2][-1], *lines[-1]]).rstrip()) <= width:
        lines[-1].insert(0, lines[-2].pop())
    return ["".join(x).strip(" ") for x in lines]


def export_message(paths: list[str]) -> tuple[str, list[str]]:
    """(the status line, the notice's lines) after an export: the folder once, then the files, those of one stem
    as one name with their extensions in braces (``x.gapscope.{md,json,svg}``); the notice's lines are broken
    for its width by ``notice_lines``. At 80x24 three full names in a row split one mid-word."""
    folders = {os.path.dirname(p) for p in paths}
    names = grouped_names([os.path.basename(p) for p in paths]) if len(folders) == 1 else list(paths)
    where = f" in {folders.pop() or '.'}" if len(folders) == 1 else ""
    return "wrote " + ", ".join(names) + where, [f"wrote{where}:", *names]


def notice_lines(lines: list[str], screen_width: int) -> list[str]:
    """The notice's ``lines`` broken to its width on a screen ``screen_width`` wide (``break_at_marks``: a file
    name breaks after a "/", "-", "." or "_", never inside a word)."""
    width = notice_width(screen_width)
    return [piece for s in lines for piece in break_at_marks(s, width)]
