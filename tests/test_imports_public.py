"""Test files share code through tests/helpers and reach the package through its public names: no test file imports
another test file (or conftest), and no private name (``_x``) is imported from gapscope, except any listed in
STILL_PRIVATE below (none now), each waiting for a public home in its module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: private names tests still import: (module, name) -> where the public name should come from; empty now, kept so
#: that a private name a test needs is listed here, with its module, until it has a public one
STILL_PRIVATE: dict[tuple[str, str], str] = {}


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                yield node.lineno, node.module, a.name
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, None


def _files():
    return sorted(TESTS.glob("*.py")) + sorted((TESTS / "helpers").glob("*.py"))


def test_no_test_file_imports_another():
    bad = [f"{p.name}:{ln}: {mod}" for p in _files() for ln, mod, _ in _imports(p)
           if mod.startswith(("tests.test_", "tests.conftest"))]
    assert bad == []


def test_no_private_name_of_the_package_is_imported():
    seen, bad = set(), []
    for p in _files():
        for ln, mod, name in _imports(p):
            if mod.startswith("gapscope") and name and name.startswith("_") and not name.startswith("__"):
                if (mod, name) in STILL_PRIVATE:
                    seen.add((mod, name))
                else:
                    bad.append(f"{p.name}:{ln}: from {mod} import {name}")
    assert bad == []
    assert seen == set(STILL_PRIVATE)  # an entry no test needs any more is dropped from the list
