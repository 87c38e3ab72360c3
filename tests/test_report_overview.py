"""Many unrelated traces (a folder) get one row each, not a table as wide as the folder."""

from tests.helpers import SAMPLE_TRACES
from gapscope.analysis import analyze
from gapscope.report import render_markdown
from gapscope.trace import load

NAMES = ["demo-eager-sync.decode.json.gz", "demo-eager-copy.decode.json.gz",
         "demo-eager-alloc.decode.json.gz", "demo-graph.decode.json.gz"]


def test_four_traces_get_an_overview_row_each():
    analyses = [analyze(load(SAMPLE_TRACES / n)) for n in NAMES]
    md = render_markdown(analyses)
    assert md.startswith("# gapscope report: 4 traces\n")
    rows = [ln for ln in md.splitlines() if ln.startswith("| demo-")]
    assert len(rows) == 4
    by_name = {r.split(" · ")[0].strip("| "): r for r in rows}
    assert "| copy " in by_name["demo-eager-copy.decode.json.gz"]
    # each row names its trace's biggest cause (in the 2026-12-01 alloc recording that is launch, 20.4 ms,
    # ahead of allocator, 12.1 ms: the allocator calls took 363 µs there against 886 µs in the older one)
    for n, a in zip(NAMES, analyses):
        biggest = max(a.cause_totals().items(), key=lambda kv: kv[1]["total_ns"])[0]
        assert f"| {biggest} " in by_name[n], (n, biggest)
    assert " vs " not in md.splitlines()[0]
    # every trace still has its own section
    assert all(f"## {n}" in md.replace("\\", "") for n in NAMES)


def test_two_traces_stay_side_by_side():
    md = render_markdown([analyze(load(SAMPLE_TRACES / n)) for n in NAMES[:2]])
    assert " vs " in md.splitlines()[0] and "## What changed" in md


def test_builtin_frames_are_shortened_in_stack_listings():
    # the raw trace names it `<built-in method embedding of type object at 0x...>` and has pybind11 objects
    md = render_markdown([analyze(load(SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"))])
    assert "`built-in embedding`" in md and "pybind11_builtins" not in md and "object at 0x" not in md
