"""Every threshold of the analysis lives in gapscope/analysis/thresholds.py (the README says so): a numeric constant
or cut-off written anywhere else in gapscope/analysis fails here, unless this file names it with the reason it is not
a threshold (a unit factor, a sentinel, a count that is structure, not a choice)."""

from __future__ import annotations

import ast
from pathlib import Path

from gapscope.analysis import thresholds
from gapscope.analysis.thresholds import SEVERITY_BANDS, severity

ANALYSIS = Path(__file__).resolve().parent.parent / "gapscope" / "analysis"

#: module-level numeric constants that are not thresholds: (file, name) -> why
ALLOWED_CONSTANTS = {
    ("replay/calibrate.py", "NO_HOST"): "a sentinel overhead that takes all recorded host time off",
    ("activity.py", "_SUB_BATCH"): "a batch size for one regex call (how long it holds the GIL), not a cut-off",
}
#: numeric literals compared against outside thresholds.py: (file, value) -> why
ALLOWED_LITERALS = {
    ("units.py", 1e3): "unit factor (ns -> µs)",
    ("units.py", 1e6): "unit factor (ns -> ms)",
    ("units.py", 1e9): "unit factor (ns -> s)",
    ("units.py", 1024): "unit factor (bytes -> KiB)",
    ("activity.py", 1000): "unit switch of a printed bandwidth (GB/s -> TB/s)",
    ("replay/result.py", 1e6): "unit switch of a printed time (µs -> ms)",
    ("replay/calibrate.py", 1e9): "the ceiling of the overhead search (1 s per event): where doubling stops",
    ("stacks.py", 2**62): "the int64 range of a packed (thread, time) key",
    ("compare/align.py", 2): "a fusion is one kernel for two or more: structure, not a choice",
    ("diagnosis.py", 2): "a pair is two traces: the trace-set kinds' definition, not a choice",
    ("intervals.py", 0.5): "np.percentile's interpolation takes the upper value from one half on: its arithmetic",
}
#: literals that are never a threshold: nothing, one, the sign
TRIVIAL = {0, 1, -1}
#: ``len(x) < 3`` with a count this small checks a shape (a matmul's two operands, a conv's four dims)
MAX_STRUCTURAL_LEN = 4
#: ``range(n)`` with a literal above this is a bound on work: it belongs in thresholds.py
MAX_LITERAL_RANGE = 64


def _number(node) -> float | None:
    """The value of a numeric literal expression (``-1``, ``64 * 1024``, ``4 << 20``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _number(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
        a, b = _number(node.left), _number(node.right)
        if a is not None and b is not None:
            return eval(compile(ast.Expression(node), "<literal>", "eval"))  # noqa: S307 - literals only
    return None


def _is_len(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"


def strays(path: Path, source: str | None = None) -> list[str]:
    """The thresholds written in one module outside thresholds.py: 'file:line: what'."""
    rel = path.relative_to(ANALYSIS).as_posix() if path.is_relative_to(ANALYSIS) else path.name
    tree = ast.parse(source if source is not None else path.read_text())
    out = []
    for node in tree.body:  # module-level numeric constants
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _number(node.value) is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = ast.unparse(t)
                if (rel, name) not in ALLOWED_CONSTANTS:
                    out.append(f"{rel}:{node.lineno}: constant {name} = {ast.unparse(node.value)}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):  # literal cut-offs: ``share >= 0.1``
            sides = [node.left, *node.comparators]
            for i, side in enumerate(sides):
                v = _number(side)
                if v is None or v in TRIVIAL or (rel, v) in ALLOWED_LITERALS:
                    continue
                others = sides[:i] + sides[i + 1:]
                if float(v).is_integer() and abs(v) <= MAX_STRUCTURAL_LEN and any(_is_len(o) for o in others):
                    continue
                out.append(f"{rel}:{node.lineno}: cut-off {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            for arg in node.args:
                v = _number(arg)
                if v is not None and v > MAX_LITERAL_RANGE:
                    out.append(f"{rel}:{node.lineno}: loop bound {ast.unparse(node)}")
    return out


def test_no_threshold_outside_thresholds_py():
    files = [p for p in sorted(ANALYSIS.rglob("*.py")) if p.name != "thresholds.py"]
    assert len(files) > 30  # the scan sees the analysis package
    found = [s for p in files for s in strays(p)]
    assert found == [], "thresholds outside gapscope/analysis/thresholds.py:\n" + "\n".join(found)


def test_the_scan_finds_a_reintroduced_stray():
    """The scan is not blind: each kind of stray it looks for is caught in a module written here."""
    src = ("X_SHARE = 0.7\nLIMIT = 64 * 1024\n"
           "def f(share, xs):\n"
           "    if share >= 0.03 or len(xs) > 100:\n        return 1\n"
           "    for _ in range(100_000):\n        pass\n"
           "    return len(xs) < 3 and share > 0 and share < 1\n")
    found = strays(ANALYSIS / "findings.py", src)
    assert sorted(s.split(": ", 1)[1] for s in found) == sorted([
        "constant X_SHARE = 0.7", "constant LIMIT = 64 * 1024", "cut-off share >= 0.03", "cut-off len(xs) > 100",
        "loop bound range(100000)"])


def test_allow_lists_name_only_what_exists():
    """An allowed name or literal that is gone from its module is a stale entry (and a hole for a new stray)."""
    for (name, const), _why in ALLOWED_CONSTANTS.items():
        [path] = [p for p in ANALYSIS.rglob(name)]
        assert f"{const} = " in path.read_text(), (name, const)
    for (name, value), _why in ALLOWED_LITERALS.items():
        [path] = [p for p in ANALYSIS.rglob(name)]
        tree = ast.parse(path.read_text())
        vals = {_number(s) for n in ast.walk(tree) if isinstance(n, ast.Compare) for s in [n.left, *n.comparators]}
        assert value in vals, (name, value)


def test_severity_bands():
    """The bands, written out here (a tenth of the window is high, 3% medium, half a percent low), at and just
    below each edge."""
    table = [(0.5, "high"), (0.1, "high"), (0.0999, "medium"), (0.03, "medium"), (0.0299, "low"), (0.005, "low"),
             (0.0049, "info"), (0.0, "info"), (float("nan"), "info")]
    assert [(s, severity(s)) for s, _ in table] == table
    assert [b for b, _ in SEVERITY_BANDS] == sorted((b for b, _ in SEVERITY_BANDS), reverse=True)


def test_ranks_and_findings_share_the_severity_function():
    """ranks/job.py grades its cross-rank findings with the findings' own function, not a copy of its bands."""
    from gapscope.analysis import findings
    from gapscope.analysis.ranks import job

    assert job.severity is thresholds.severity and findings.severity is thresholds.severity
    for mod in ("findings.py", "ranks/job.py"):
        src = (ANALYSIS / mod).read_text()
        assert "def _severity" not in src and "0.005" not in src, mod
