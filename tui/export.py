"""The export key: findings report (Markdown + JSON) and an SVG of the screen, never overwriting anything."""

from __future__ import annotations

import glob
import os

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


def export_message(paths: list[str]) -> tuple[str, list[str]]:
    """(the status line, the notice's lines) after an export: the folder once, then the file names, one a line
    (the notice is narrow, over the stack panel; full paths wrapped over the gap list at 80x24)."""
    folders = {os.path.dirname(p) for p in paths}
    names = [os.path.basename(p) for p in paths] if len(folders) == 1 else list(paths)
    where = f" in {folders.pop() or '.'}" if len(folders) == 1 else ""
    return "wrote " + ", ".join(names) + where, [f"wrote{where}:", *names]
