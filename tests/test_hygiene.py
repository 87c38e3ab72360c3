"""Import rules of ARCHITECTURE.md: the headless layers never pull in textual, and only capture touches torch."""

import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT


def _modules_after_import(stmt: str) -> set[str]:
    code = f"import sys\n{stmt}\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "module", ["gapscope.trace", "gapscope.analysis", "gapscope.analysis.compare", "gapscope.report", "gapscope.cli", "gapscope.errors", "gapscope.fsutil",
               "gapscope.tui"]
)
def test_headless_modules_import_neither_textual_nor_torch(module):
    mods = _modules_after_import(f"import {module}")
    assert module in mods
    assert "textual" not in mods, f"{module} imported textual"
    assert "torch" not in mods, f"{module} imported torch"


@pytest.mark.parametrize("stmt", ["import gapscope.capture, gapscope.capture.cli", "import capture, capture.cli"],
                         ids=["installed", "checkout"])
def test_capture_imports_without_torch_or_textual(stmt):
    """``gapscope.capture`` as installed, and ``capture`` as a GPU node runs it from a checkout (``python -m capture``)."""
    mods = _modules_after_import(stmt)
    assert stmt.split(",")[-1].strip().split()[-1] in mods
    assert "textual" not in mods and "orjson" not in mods
    # torch is imported lazily, only when a capture actually runs
    assert "torch" not in mods


@pytest.mark.parametrize("stmt", ["import gapscope.capture, gapscope.capture.cli", "import capture, capture.cli"],
                         ids=["installed", "checkout"])
def test_capture_never_imports_tui(stmt):
    mods = _modules_after_import(stmt)
    assert not any(m in ("tui", "gapscope.tui") or m.startswith(("tui.", "gapscope.tui.")) for m in mods)


def test_the_package_list_holds_every_package_folder_under_one_name():
    """The wheel installs one top-level name, gapscope; a sub-package missing from pyproject's list would be left out
    of it silently."""
    tomllib = pytest.importorskip("tomllib")
    st = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {p.split(".")[0] for p in st["packages"]} == {"gapscope"}
    dirs = st["package-dir"]
    on_disk = set()
    for pkg, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            on_disk.add(".".join((pkg, *rel)))
    assert on_disk == set(st["packages"])


def test_only_the_gapscope_name_is_imported_from_the_checkout_by_tests_and_benchmarks():
    """A test importing ``tui.x`` would load a second copy of every module beside ``gapscope.tui.x`` (its patches
    and isinstance checks would miss)."""
    files = subprocess.run(["git", "ls-files", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    bad = re.compile(r"^\s*(from|import)\s+tui\b|[\"']tui\.(trace|analysis|report|app|cli)\b|-m tui\b")
    hits = [f"{f}:{n}" for f in files if f.endswith(".py")
            for n, line in enumerate((ROOT / f).read_text().splitlines(), 1)
            if bad.search(line) and f != "tests/test_hygiene.py"]
    assert files and not hits, hits


def test_no_absolute_path_of_one_machine_in_code_or_docs():
    """Code, tests, benchmarks and docs find files relative to the repository (``../shared`` for the shared
    corpus), never through one machine's folders."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    suffixes = (".py", ".sh", ".md", ".toml", ".cfg", ".txt", ".yml", ".yaml")
    machine = ("/" + "work/", "/" + "home/")  # split so this file does not match itself
    hits = []
    for f in files:
        if not f.endswith(suffixes) or not (ROOT / f).is_file():
            continue
        for n, line in enumerate((ROOT / f).read_text(errors="replace").splitlines(), 1):
            if any(m in line for m in machine):
                hits.append(f"{f}:{n}: {line.strip()[:120]}")
    assert files and not hits, "\n".join(hits)
