"""The cause registry (gapscope/analysis/causes/): one module per cause, read by the classifier, the details, the
findings, the report and the explorer. A cause registered from outside (here: a toy one) is classified,
explained, titled and advised without touching any other module."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.synth import Synth
from tests.helpers import model_of
from tests.helpers import SCHEMA_PATH as SCHEMA
from gapscope.analysis import CAUSES, analyze
from gapscope.analysis import causes as registry
from gapscope.report import build_json, render_markdown



def _trace() -> Synth:
    """prev ends at 100 µs, next starts at 200 µs; the launching thread sleeps in app.py's poll for 90 µs."""
    s = Synth()
    s.launch(ts=0, dur=2, kernel="prev", k_ts=50, k_dur=50)
    s.python("app.py(3): poll_queue", 100, 94)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    return s


#: the rule order of gap-causes.md's table (the first rule that holds wins), written out: not read from the registry
RULE_ORDER = ["autotune", "copy", "collective", "sync", "user-sync", "gpu-wait", "profiler", "gil", "allocator",
              "stall", "python", "launch", "host-idle"]


def test_every_module_of_the_package_is_a_registered_cause_in_rule_order():
    names = [c.name for c in registry.all_causes()]
    assert names == RULE_ORDER and list(CAUSES) == RULE_ORDER
    assert [registry.code(n) for n in RULE_ORDER] == list(range(len(RULE_ORDER)))
    files = sorted(p.stem.replace("_", "-") for p in Path(registry.__file__).parent.glob("*.py")
                   if not p.stem.startswith("_"))
    assert sorted(names) == files
    letters = [c.letter for c in registry.all_causes()]
    assert len(set(letters)) == len(letters) and all(len(x) == 1 and x.isascii() for x in letters)


def test_schema_gap_cause_enum_is_the_registry():
    doc = json.loads(SCHEMA.read_text())
    enum = doc["properties"]["gaps"]["items"]["properties"]["cause"]["enum"]
    assert enum == list(CAUSES)


def test_a_registered_cause_is_used_everywhere():
    toy = registry.Cause(
        name="polling", order=55, letter="Q", colour="bright_blue",
        summary="the launching thread polled a queue",
        title="{n} gaps while the thread polled{where}: {t} of GPU idle",
        suggestion="Block on the queue instead of polling it.",
        rule=lambda c: c.wpos & (c.bd["python"] > 0.5 * c.w),
        explain=lambda a, d, tl: f"Polling for {d.dur_ns} ns.",
    )
    before = analyze(model_of(_trace()))
    big = int(np.argmax(before.gaps.dur_ns))
    assert CAUSES[int(before.gaps.cause[big])] == "python"
    with registry.register(toy):
        assert "polling" in CAUSES and CAUSES.index("polling") == CAUSES.index("allocator") + 1
        a = analyze(model_of(_trace()))
        i = int(np.argmax(a.gaps.dur_ns))
        assert CAUSES[int(a.gaps.cause[i])] == "polling"
        assert a.gap_detail(i).explanation == "Polling for 100000 ns."
        f = next(f for f in a.findings if f.cause == "polling")
        assert f.title == "1 gap while the thread polled: 100.0 µs of GPU idle"
        assert f.suggestion == "Block on the queue instead of polling it."
        assert a.cause_totals()["polling"] == {"count": 1, "total_ns": 100_000}
        doc = build_json([a])
        assert doc["causes"]["polling"]["count"] == 1
        assert "polling" in render_markdown([a])
        from gapscope.tui import glyphs

        assert glyphs.CAUSE_LETTERS["polling"] == "Q" and glyphs.CAUSE_COLOURS["polling"] == "bright_blue"
    assert "polling" not in CAUSES


def test_no_cause_name_spelled_outside_the_registry():
    """The rules that single a cause out name it by the registry's constants (causes.SYNC, ...), never by a string of
    their own: a comparison of a cause with a cause's name, ``code("...")`` / ``get("...")`` and ``cause="..."``."""
    import ast
    from pathlib import Path

    from gapscope.analysis import CAUSES

    names = set(CAUSES)
    root = Path(__file__).resolve().parent.parent / "gapscope"
    bad, seen = [], 0
    for path in sorted(root.rglob("*.py")):
        if "causes" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            seen += 1
            if isinstance(node, ast.Compare) and "cause" in ast.unparse(node):
                lits = [c.value for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)]
                bad += [f"{path.name}:{node.lineno}: {ast.unparse(node)}" for v in lits if v in names]
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("code", "get")
                    and isinstance(getattr(node.func.value, "id", None), str) and node.func.value.id in ("causes", "registry")
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in names):
                bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.keyword) and node.arg == "cause" and isinstance(node.value, ast.Constant) \
                    and node.value.value in names:
                bad.append(f"{path.name}:{node.value.lineno}: cause={node.value.value!r}")
    assert seen > 10000 and bad == []
