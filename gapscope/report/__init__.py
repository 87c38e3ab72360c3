"""Report layer: findings as Markdown (people) or JSON (tools, findings.schema.json). No textual."""

from __future__ import annotations

import os

from ..fsutil import atomic_write_text
from .jsonout import SCHEMA, build_json


def schema_text() -> str:
    """The JSON report's schema: the copy shipped in this package (``findings.schema.json``), the contract."""
    from importlib.resources import files

    return files(__package__).joinpath("findings.schema.json").read_text(encoding="utf-8")


def render_markdown(analyses, top: int = 10, minor: bool = False) -> str:
    """The Markdown report (markdown.py's ``render_markdown``), imported on first use: a JSON report does not load
    the Markdown modules (nor, through them, the ranks' tables). ``minor``: every action of the plan (``--all``)."""
    from .markdown import render_markdown as render

    return render(analyses, top, minor=minor)


def to_json_text(analyses, top: int = 50) -> str:
    """``build_json`` as indented text (analyses, or their diagnosis)."""
    import orjson

    return orjson.dumps(build_json(analyses, top=top), option=orjson.OPT_INDENT_2).decode() + "\n"


def write_reports(analyses, folder, stem: str, top: int = 10) -> list[str]:
    """Write ``stem.md`` and ``stem.json`` into ``folder`` without overwriting anything: the first of
    stem, stem-1, stem-2, ... for which neither file exists. Returns the two paths."""
    from ..analysis.diagnosis import diagnose

    folder = os.fspath(folder)
    diagnosis = diagnose(analyses)  # one diagnosis (and comparison) for both files
    md = render_markdown(diagnosis, top=top)
    js = to_json_text(diagnosis, top=max(top, 50))
    for k in range(10_000):
        s = stem if k == 0 else f"{stem}-{k}"
        pm, pj = os.path.join(folder, s + ".md"), os.path.join(folder, s + ".json")
        if os.path.exists(pm) or os.path.exists(pj):
            continue
        atomic_write_text(pm, md)
        try:
            atomic_write_text(pj, js)
        except Exception:
            os.unlink(pm)
            raise
        return [pm, pj]
    from ..errors import GapscopeError

    raise GapscopeError(f"{folder}: no free name for {stem}.md")


__all__ = ["SCHEMA", "schema_text", "build_json", "render_markdown", "write_reports", "to_json_text"]
