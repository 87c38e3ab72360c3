"""Sample traces recorded by our capture on an H200 with one injected cause each (traces/, see
benchmarks/record_samples.sh): the findings name the injected cause, its stack names the injected
function, and the cause explains more idle time than in the same model's trace without injection.
The traces are in the repository: a missing one fails. GAPSCOPE_SAMPLES=DIR points at another folder."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

from tests.helpers import SAMPLE_TRACES

SAMPLES = Path(os.environ.get("GAPSCOPE_SAMPLES", SAMPLE_TRACES))

# inject name -> (the cause, function the stack must name). Sampling copies the logits to the host (a short
# sync) and then samples in Python for far longer: its gaps are the Python work's.
INJECTED = {
    "sync": ("sync", "_inject_sync_check"),
    "sampling": ("python", "_inject_host_sampling"),
    "copy": ("copy", "_inject_pageable_copy"),
    "alloc": ("allocator", "_inject_allocator_churn"),
    "python": ("python", "_host_bookkeeping"),
}


def _find(pattern: str) -> list[Path]:
    assert SAMPLES.is_dir(), f"{SAMPLES} is missing"
    rx = re.compile(pattern)
    return sorted(p for p in SAMPLES.iterdir() if rx.search(p.name) and "nostacks" not in p.name
                  and "-tp" not in p.name and p.name.endswith((".json", ".json.gz")))


def _analyze(p: Path):
    from gapscope.analysis import analyze
    from gapscope.trace import load

    return analyze(load(str(p), no_cache=True))


@functools.lru_cache(maxsize=1)  # one analysis for the five injections
def _baseline():
    c = _find(r"^demo[-_](eager|clean)\.decode\.")
    assert c, f"no trace recorded without injection in {SAMPLES}"
    return _analyze(c[0])


@pytest.mark.parametrize("inject", sorted(INJECTED))
def test_injected_cause_is_found(inject):
    files = _find(rf"^demo.*[-_]{inject}[.\-_].*decode")
    assert files, f"no sample trace with --inject {inject} in {SAMPLES}"
    cause, func = INJECTED[inject]
    a = _analyze(files[0])
    hits = [f for f in a.findings if f.cause == cause and f.idle_ns > 0
            and func in (f.evidence.get("frame") or "")]
    assert hits, [f.title for f in a.findings]
    f = hits[0]
    assert a.findings.index(f) < 3, [x.title for x in a.findings[:5]]
    stack = [fr.name for fr in a.gap_detail(int(f.gap_rows[0])).stack]
    assert any(func in s for s in stack), stack
    # the injected function explains a visible share of the GPU's idle time, and the same function's
    # finding does not exist in the trace recorded without injection
    assert f.severity in ("high", "medium"), f.title
    base = _baseline()
    assert not [g for g in base.findings if func in (g.evidence.get("frame") or "")]


def test_late_rank_is_named():
    files = [p for p in sorted(SAMPLES.iterdir()) if "late1" in p.name and re.search(r"\.rank\d+\.json(\.gz)?$", p.name)]
    assert len(files) == 2, files
    from gapscope.analysis import analyze_ranks
    from gapscope.trace import load

    aa = analyze_ranks([load(str(p), no_cache=True) for p in files])
    rows = aa[0].cross_rank.rows
    assert rows, "no collectives matched across ranks"
    top = max(rows, key=lambda r: r.count)  # the model's all-reduces, not the capture's barriers
    assert top.late_rank == 1
    assert top.wait_by_rank[0] > top.wait_by_rank[1]
