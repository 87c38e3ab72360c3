"""The explorer's shape (issue 18): a thin App, small modules, the CSS in a .tcss shipped with the package, and
one failure formatter whose lines are one line each."""

from __future__ import annotations

import ast

import pytest

from tests.helpers import ROOT

APP = ROOT / "tui" / "app"


def _methods(path, cls: str) -> list[str]:
    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return [f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_the_app_is_thin():
    assert len(_methods(APP / "app.py", "GapscopeApp")) < 30


@pytest.mark.parametrize("path", sorted(APP.glob("*.py")), ids=lambda p: p.name)
def test_explorer_modules_stay_small(path):
    assert len(path.read_text().splitlines()) <= 600


def test_the_css_is_a_tcss_file_shipped_with_the_package():
    from gapscope.tui.app.app import GapscopeApp

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    assert GapscopeApp.CSS_PATH == "gapscope.tcss" and not GapscopeApp.CSS
    assert "#gaplist" in (APP / "gapscope.tcss").read_text()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "*.tcss" in data["gapscope.tui.app"]


def test_failure_is_one_line_and_keeps_bad_input_as_it_is():
    from gapscope.tui.app.loading import failure
    from gapscope.tui.errors import GapscopeError

    assert failure("loading", GapscopeError("t.json: not a trace")) == "t.json: not a trace"
    assert failure("analysis", GapscopeError("no window")) == "analysis failed: no window"
    assert failure("export", OSError(28, "No space left on device")) == \
        "export failed: [Errno 28] No space left on device"
    assert failure("loading", MemoryError(), "t.json").startswith("t.json: out of memory while loading (try --max-size")
    line = failure("loading", ValueError("bad\nvalue  " + "x" * 500), "2 traces")
    assert line.startswith("2 traces: loading failed (internal error ValueError: bad value xxx")
    assert "\n" not in line and len(line) < 260
