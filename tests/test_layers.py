"""The package's shape, read from the source (issue 22): the layers of ARCHITECTURE.md import only downwards, no
two modules import each other (not even through a function-level import), and a module's private names stay in
its own sub-package. These replace the old size cap: a module is as long as its one responsibility needs."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.helpers import ROOT

_TOPS = {"tui": "gapscope.tui", "capture": "gapscope.capture", "gapscope": "gapscope"}


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = _TOPS[parts[0]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for top in _TOPS for p in sorted((ROOT / top).rglob("*.py"))}


def _package(mod: str) -> str:
    return mod if MODULES[mod].name == "__init__.py" else mod.rsplit(".", 1)[0]


@functools.lru_cache(maxsize=None)
def _tree(mod: str) -> ast.Module:
    return ast.parse(MODULES[mod].read_text())


def _optional(mod: str) -> set[int]:
    """Line numbers of imports inside a ``try`` that catches ImportError or Exception (an optional dependency, as capture's
    per-rank summary that uses the analysis when it is installed)."""
    lines = set()
    for node in ast.walk(_tree(mod)):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError", "Exception") or
                isinstance(h.type, ast.Tuple) and any(getattr(e, "id", "") in ("ImportError", "ModuleNotFoundError", "Exception")
                                                        for e in h.type.elts) for h in node.handlers):
            for sub in node.body:
                lines |= {n.lineno for n in ast.walk(sub) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def _typing_only(mod: str) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (for annotations; they never run)."""
    lines = set()
    for node in ast.walk(_tree(mod)):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines |= {n.lineno for n in ast.walk(sub) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def _imports(mod: str, optional: bool = True):
    """(imported module, imported name or None) for every import statement in ``mod`` that can run, lazy ones
    included; ``optional=False`` also leaves out the imports guarded by ``except ImportError``."""
    skip = _typing_only(mod) | (set() if optional else _optional(mod))
    for node in ast.walk(_tree(mod)):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in MODULES:
                    yield a.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package(mod).split(".")
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            for a in node.names:
                if f"{src}.{a.name}" in MODULES:
                    yield f"{src}.{a.name}", None
                elif src in MODULES:
                    yield src, a.name


@functools.lru_cache(maxsize=None)
def _graph(optional: bool = True) -> dict[str, set[str]]:
    graph = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _ in _imports(m, optional):
            # a module importing its own package's __init__ (or a parent's) is Python's normal package set-up
            if target != m and not m.startswith(target + "."):
                graph[m].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_scan_sees_the_package():
    assert {"gapscope.analysis.core", "gapscope.tui.main", "gapscope.capture.recorder"} <= set(MODULES)
    graph = _graph()
    assert "gapscope.trace" in graph["gapscope.analysis.core"] or any(
        t.startswith("gapscope.trace") for t in graph["gapscope.analysis.core"])
    # the cycle finder finds a planted cycle
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(dict(_graph())) == []


# layer -> the gapscope layers it must never import (ARCHITECTURE.md, "Layers and their rules")
FORBIDDEN = {
    "gapscope.capture": ("gapscope.tui",),
    "gapscope.trace": ("gapscope.analysis", "gapscope.report", "gapscope.tui", "gapscope.commands"),
    "gapscope.analysis": ("gapscope.report", "gapscope.tui", "gapscope.commands"),
    "gapscope.report": ("gapscope.tui", "gapscope.commands"),
}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_import_only_downwards(layer):
    bad = [(m, t) for m in MODULES if m == layer or m.startswith(layer + ".")
           for t in _graph(optional=False)[m] if t.startswith(FORBIDDEN[layer])]
    assert bad == []


def test_private_names_stay_in_their_sub_package():
    bad = []
    for m in MODULES:
        for src, name in _imports(m):
            if name and name.startswith("_") and not name.startswith("__") and _package(src) != _package(m):
                bad.append(f"{m} imports {src}.{name}")
    assert bad == []


def test_no_headless_class_over_30_methods():
    """A class of the headless library with more than 30 methods holds more than one responsibility (the analysis
    had 38: its gaps' details now live in analysis/details.py)."""
    big = []
    for m, path in MODULES.items():
        if not m.startswith("gapscope.") or m.startswith(("gapscope.tui", "gapscope.capture")):
            continue
        for node in ast.walk(_tree(m)):
            if isinstance(node, ast.ClassDef):
                n = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
                if n > 30:
                    big.append(f"{m}.{node.name}: {n}")
    assert big == []
