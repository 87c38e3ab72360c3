"""Import rules of ARCHITECTURE.md: the headless layers never pull in textual, and only capture touches torch."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _modules_after_import(stmt: str) -> set[str]:
    code = f"import sys\n{stmt}\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "module", ["tui.trace", "tui.analysis", "tui.analysis.compare", "tui.report", "tui.cli", "tui.errors", "tui.fsutil",
               "tui.app"]
)
def test_headless_modules_import_neither_textual_nor_torch(module):
    mods = _modules_after_import(f"import {module}")
    assert module in mods
    assert "textual" not in mods, f"{module} imported textual"
    assert "torch" not in mods, f"{module} imported torch"


def test_capture_imports_without_torch_or_textual():
    mods = _modules_after_import("import capture, capture.cli")
    assert "capture.cli" in mods
    assert "textual" not in mods and "orjson" not in mods
    # torch is imported lazily, only when a capture actually runs
    assert "torch" not in mods


def test_capture_never_imports_tui():
    mods = _modules_after_import("import capture, capture.cli")
    assert not any(m == "tui" or m.startswith("tui.") for m in mods)


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
