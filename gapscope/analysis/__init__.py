"""Analysis layer: gaps, causes, stacks, kernels, floors, findings. No textual, no torch.

    from gapscope.analysis import analyze
    a = analyze(model)                 # window="steps" (default) or "all"
    a.window_note, a.devices, a.gaps, a.gap_detail(0), a.findings, a.kernels
    d = diagnose([a, b])               # the trace set's kind, warnings, verdicts, comparison (what reports render)

The names below are imported on first use (PEP 562), so that ``tui.analysis.thresholds`` or ``units`` can be
imported on their own without the whole layer (the explorer reads a threshold for its first frame).
"""

from __future__ import annotations

import importlib

_WHERE = {
    "analyze": "core", "Analysis": "core", "CAUSE_EXPLANATIONS": "core", "Finding": "types", "GapDetail": "types",
    "GapTable": "types", "AnalysisWarning": "types", "Evidence": "evidence",
    "KernelStat": "activity", "OpFloorStat": "activity",
    "Verdict": "verdict",
    "BUCKETS": "gaps", "CAUSES": "gaps", "DeviceStats": "gaps",
    "Frame": "stacks",
    "Thresholds": "thresholds",
    "AnalysisWindow": "window",
    "analyze_ranks": "ranks", "match_collectives": "ranks", "summarise": "ranks",
    "diagnose": "diagnosis", "Diagnosis": "diagnosis",
}

__all__ = list(_WHERE)


def __getattr__(name: str):
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
