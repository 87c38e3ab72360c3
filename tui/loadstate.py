"""Where a part's analysis is (tui/scene.py ``Part.state``): one explicit value, ``AnalysisState``, that the screen
asks what it has, never an object that may or may not be a real ``Analysis``.

- ``pending``: the analysis is being made. Nothing yet (``source`` None), or, on a large trace, the full
  analysis with its gaps classified while its findings are built in the load thread (tui/loading.py
  ``analyze_gaps_first``): its gaps are listed, nothing lazily computed of it is asked on the screen's thread;
- ``provisional``: a preview's numbers (tui/progress.py ``provisional_analysis``), ``ProvisionalGaps``: the gaps of
  the part of the window the preview knows whole, then (carried) the same gaps on the full model's events;
- ``ready``: the final analysis, a plain load's;
- ``failed``: no analysis, ``error`` says why (the lanes stay).

Findings, projection and plan are the final analysis' only (``findings`` empty, ``plan`` and ``projection`` None
until ``ready``). No textual here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from ..analysis import Analysis

Status = Literal["pending", "provisional", "ready", "failed"]

FINDINGS_NOTE = "findings: being built"


@dataclass(frozen=True, eq=False)
class ProvisionalGaps:
    """A preview's provisional numbers, data the state carries (never an ``Analysis``): ``source``, the plain
    ``Analysis`` of the preview's (partial) model over the span of the window it knows whole; ``gaps``, its gap
    table, on the events of ``model``: the preview's, or, once carried onto the full model (``carried``), the
    same gaps with their event and thread columns the full model's (``detail_map`` maps a gap's detail the same
    way). ``provisional_note`` is what the header, the gap list's title and the bar say."""

    source: Analysis
    model: object
    gaps: object
    provisional_note: str
    detail_map: Callable | None = None
    _details: dict = field(default_factory=dict, repr=False)

    @property
    def carried(self) -> bool:
        return self.detail_map is not None

    # what the gap list, its rows and the header's window line read (tui/scenegaps.py, tui/gaplist.py)
    @property
    def config(self):
        return self.source.config

    @property
    def window(self):
        return self.source.window

    @property
    def devices(self) -> list:
        return self.source.devices

    @property
    def window_start_ns(self) -> int:
        return self.source.window_start_ns

    @property
    def window_ns(self) -> int:
        return self.source.window_ns

    @property
    def stacks(self):
        """The preview's stack index; None once carried (the full model's events are not in it: the stack of an
        event on the lanes is the model's own parent chain meanwhile)."""
        return None if self.carried else self.source.stacks

    def gap_detail(self, row: int):
        """The gap's detail (the preview's analysis'), its events and thread those of ``model``."""
        if not self.carried:
            return self.source.gap_detail(row)
        row = int(row)
        d = self._details.get(row)
        if d is None:
            d = self._details[row] = self.detail_map(self.source.gap_detail(row))
        return d


@dataclass(frozen=True, eq=False)
class AnalysisState:
    """One part's analysis as the screen sees it (module docstring). Made by the load thread (tui/loading.py) and
    installed by the app (tui/app.py) through ``Scene.set_analysis``; a new value at every step, so that a cache
    keyed on it by identity is forgotten when the analysis moves on."""

    status: Status = "pending"
    #: the full analysis: the final one (ready), or the one whose findings are being built (pending)
    analysis: Analysis | None = None
    #: the preview's numbers (provisional)
    provisional: ProvisionalGaps | None = None
    #: why there is no analysis (failed)
    error: str | None = None

    # ---------------------------------------------------------------- the states
    @classmethod
    def ready_of(cls, analysis: Analysis) -> "AnalysisState":
        return cls("ready", analysis=analysis)

    @classmethod
    def gaps_of(cls, analysis: Analysis) -> "AnalysisState":
        """The full analysis, its gaps classified, its findings still being built."""
        return cls("pending", analysis=analysis)

    @classmethod
    def provisional_of(cls, gaps: ProvisionalGaps) -> "AnalysisState":
        return cls("provisional", provisional=gaps)

    @classmethod
    def failed_with(cls, error: str) -> "AnalysisState":
        return cls("failed", error=error)

    # ---------------------------------------------------------------- what it has
    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def source(self):
        """What the part's gaps are listed from (``Part.analysis``): the full analysis (ready, pending), the
        preview's numbers (provisional), or None."""
        if self.status == "provisional":
            return self.provisional
        return self.analysis if self.status in ("ready", "pending") else None

    @property
    def in_progress(self) -> bool:
        """Gaps are listed that are not the final analysis' yet (provisional, or pending with its findings being
        built): nothing of it is exported, compared or ranked."""
        return self.status in ("pending", "provisional") and self.source is not None

    @property
    def gaps(self):
        s = self.source
        return s.gaps if s is not None else None

    @property
    def window(self):
        """The analysed window (``AnalysisWindow``) the gaps are listed in, or None before any."""
        s = self.source
        return s.window if s is not None else None

    @property
    def final(self) -> Analysis | None:
        """The final analysis, or None before it is ready."""
        return self.analysis if self.ready else None

    @property
    def findings(self) -> list:
        return list(self.analysis.findings) if self.ready else []

    @property
    def graph_map(self):
        """The CUDA graph replays' map to the eager reference run (analysis/graphs.py ``GraphMap``: a replayed
        kernel's op and the launch whose stack is its code location), made first in the analysis; None before."""
        return vars(self.analysis).get("graph_map") if self.analysis is not None else None

    @property
    def projection(self):
        """The projection once the loader made it (``Analysis.projection_if_ready``), None before the analysis is
        ready."""
        return self.analysis.projection_if_ready if self.ready else None

    @property
    def plan(self):
        """The plan once the loader made it (``Analysis.plan_if_ready``), None before the analysis is ready."""
        return self.analysis.plan_if_ready if self.ready else None

    @property
    def provisional_note(self) -> str | None:
        """``provisional: first 27.6 ms of the window, 0.4% read`` while the numbers are a preview's, else None."""
        return self.provisional.provisional_note if self.status == "provisional" else None

    @property
    def findings_note(self) -> str | None:
        return FINDINGS_NOTE if self.status == "pending" and self.analysis is not None else None

    # the analysis' tables, computed on first use: the final analysis', and the preview's (its own numbers, on its
    # own model); of an analysis whose findings are being built only those already made (none is computed on the
    # screen's thread meanwhile); none of a carried list
    @property
    def _computing(self) -> Analysis | None:
        """The analysis whose tables the screen may compute: the final one, or the preview's."""
        if self.ready:
            return self.analysis
        if self.status == "provisional" and not self.provisional.carried:
            return self.provisional.source
        return None

    @property
    def _made(self) -> dict:
        """The tables already made of an analysis whose findings are being built (its attributes)."""
        return vars(self.analysis) if self.status == "pending" and self.analysis is not None else {}

    @property
    def kernels(self) -> list:
        a = self._computing
        return (a.kernels if a is not None else self._made.get("kernels")) or []

    @property
    def patterns(self) -> list:
        a = self._computing
        return (a.patterns if a is not None else self._made.get("patterns")) or []

    @property
    def verdicts(self) -> list | None:
        a = self._computing
        return a.verdicts if a is not None else self._made.get("verdicts")

    @property
    def stacks(self):
        """The stack index of the events of the part's model, or None (a carried list has none)."""
        s = self.source
        return s.stacks if s is not None else None


#: a part nothing is known of yet
NOT_YET = AnalysisState()
