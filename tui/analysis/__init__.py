"""Analysis layer: gaps, causes, stacks, kernels, floors, findings. No textual, no torch.

    from tui.analysis import analyze
    a = analyze(model)                 # window="steps" (default) or "all"
    a.window_note, a.devices, a.gaps, a.gap_detail(0), a.findings, a.kernels
"""

from .core import CAUSE_EXPLANATIONS, Analysis, Finding, GapDetail, GapTable, analyze
from .activity import KernelStat
from .gaps import BUCKETS, CAUSES, DeviceStats
from .stacks import Frame
from .thresholds import Thresholds
from .window import AnalysisWindow

__all__ = ["analyze", "Analysis", "CAUSES", "CAUSE_EXPLANATIONS", "BUCKETS", "DeviceStats", "Finding", "Frame",
           "GapDetail", "GapTable", "KernelStat", "Thresholds", "AnalysisWindow"]

from .ranks import analyze_ranks, match_collectives, summarise  # noqa: E402

__all__ += ["analyze_ranks", "match_collectives", "summarise"]
