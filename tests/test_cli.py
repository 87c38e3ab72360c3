import gzip
import json
import subprocess
import sys

from tests.helpers import ROOT
from gapscope import __version__


def gapscope(*args, **kw):
    return subprocess.run([sys.executable, "-m", "gapscope", *args], cwd=ROOT, capture_output=True, text=True, **kw)


def test_version():
    r = gapscope("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"gapscope {__version__}"


def test_help_shows_an_example_and_the_subcommands():
    r = gapscope("--help")
    assert r.returncode == 0
    for word in ("examples:", "gapscope report", "info", "report", "capture"):
        assert word in r.stdout


def test_no_arguments_prints_help_and_exits_2():
    r = gapscope()
    assert r.returncode == 2
    assert "usage:" in r.stdout


def test_unknown_option_is_one_line_exit_2():
    r = gapscope("report", "--no-such-flag", "x.json")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gapscope: error:")


def test_missing_trace_is_one_line_exit_2(tmp_path):
    for cmd in (("info",), ("report",), ()):
        r = gapscope(*cmd, str(tmp_path / "nope.json"), stdin=subprocess.DEVNULL)
        assert r.returncode == 2, (cmd, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gapscope: error:"), (cmd, r.stderr)
        assert "nope.json" in lines[0]


def test_options_before_the_trace_still_open_the_trace(tmp_path):
    # `gapscope --max-size 1K TRACE` means `gapscope open --max-size 1K TRACE` (not an argparse error)
    big = tmp_path / "big.json"
    big.write_text('{"traceEvents": [' + ",".join(['{"ph":"X","name":"a","ts":1,"dur":1,"pid":1,"tid":1}'] * 200) + "]}")
    r = gapscope("--max-size", "1K", str(big), stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gapscope: error:"), r.stderr
    assert "unrecognized" not in r.stderr and "invalid choice" not in r.stderr
    # the words were taken as `open --max-size 1K TRACE`: without a terminal the explorer refuses politely
    # (the size check comes later, when it loads the trace)
    assert lines == ["gapscope: error: the explorer needs a terminal; for text output use: gapscope report TRACE"]


def test_every_command_is_one_module_with_add_parser_and_run():
    """commands/: one module per command, listed once in COMMANDS, the parser built from them; none imports the cli
    module (the old ``cli`` <-> ``report.cli`` cycle)."""
    import ast

    from gapscope.cli import build_parser
    from gapscope.commands import COMMANDS

    folder = ROOT / "gapscope" / "commands"
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__", "common"}
    assert modules == {c.NAME for c in COMMANDS} == {"open", "info", "report", "diff", "capture"}
    for c in COMMANDS:
        assert callable(c.add_parser) and (callable(getattr(c, "run", None)) or callable(getattr(c, "run_argv", None)))
        tree = ast.parse((folder / f"{c.__name__.rsplit('.', 1)[-1]}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "cli" not in imported and not any(m.endswith(".cli") and "capture" not in m for m in imported)
    sub = next(a for a in build_parser()._subparsers._group_actions)
    assert list(sub.choices) == [c.NAME for c in COMMANDS]


def test_report_top_default_is_left_to_the_report():
    """--top not given: 10 for Markdown, 50 for JSON; an explicit --top 10 with --json stays 10."""
    from gapscope.cli import build_parser
    from gapscope.commands.report import report_top

    p = build_parser()
    assert report_top(p.parse_args(["report", "t.json"])) == 10
    assert report_top(p.parse_args(["report", "--json", "t.json"])) == 50
    assert report_top(p.parse_args(["report", "--json", "--top", "10", "t.json"])) == 10


_IMPORTS_WHILE_WAITING = r"""
import json, sys, time
from gapscope.trace import parallel, multi
from gapscope.cli import main

ANALYSIS = "gapscope.analysis.diagnosis"
seen = {}
orig_worker, orig_result, orig_load = parallel._worker, parallel._Job.result, multi.load_many


def slow_worker(*a, **k):
    time.sleep(0.5)  # the parent is surely done with its part and waits for this one
    return orig_worker(*a, **k)


def result(self, *a, **k):
    got = orig_result(self, *a, **k)
    seen["after the worker's part"] = ANALYSIS in sys.modules
    return got


def load_many(*a, **k):
    seen["when the load starts"] = ANALYSIS in sys.modules
    return orig_load(*a, **k)


parallel._worker, parallel._Job.result, multi.load_many = slow_worker, result, load_many
parallel.PARALLEL_MIN, parallel._cpus = 1, lambda: 2
rc = main(["report", "--json", "--no-cache", "-o", sys.argv[2], sys.argv[1]])
print(json.dumps({"rc": rc, **seen}))
"""


def test_report_imports_its_analysis_while_the_loader_waits_for_its_worker(tmp_path):
    # the analysis' modules (~50 ms) are imported in the loader's wait for its worker's part (``load``'s idle),
    # not before the load starts (where they delayed it: the report command imported them first)
    trace = tmp_path / "t.json"
    with gzip.open(ROOT / "traces" / "demo-eager-sync.decode.json.gz", "rb") as f:
        trace.write_bytes(f.read())
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-c", _IMPORTS_WHILE_WAITING, str(trace), str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"rc": 0, "when the load starts": False, "after the worker's part": True}
    assert json.loads(out.read_text())["traces"]  # the report itself
