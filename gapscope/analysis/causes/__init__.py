"""The cause registry: one module per cause of GPU idle, each holding everything about its cause.

A cause module defines ``CAUSE = Cause(...)``: its rule (a mask over all gaps, tried in ``order``; the first
rule that holds wins), what it gathers for one gap's detail (the stack to show, extra evidence), the sentence
that explains one gap, the finding title, the advice (fitted to the finding's evidence), and its letter and
colour in the explorer. The gap classifier (``gaps.classify``), the gap details and explanations
(``core.Analysis``), the findings, the report and the explorer all read the registry; nothing else names a
cause's rule or text. Adding a cause is one new module in this package (found by ``pkgutil``) plus its tests:
its rule reads the classifier's columns (``gaps.RuleContext``), its ``gather`` the trace through the analysis'
public evidence API (``a.evidence``: evidence.py; ``a.holder``), its texts the ``GapDetail`` (types.py).

``CAUSES`` is a live, ordered view of the cause names (index = the ``cause`` code stored per gap).
``register(cause)`` adds a cause for the duration of a ``with`` block (tests, plug-ins).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Cause:
    name: str
    #: rules are tried in increasing order; the first that holds gives the gap its cause
    order: float
    #: one letter on the gap row and in the lanes (plain ASCII, so it also works with --ascii)
    letter: str
    #: one Rich colour for this cause everywhere (gap list, lanes, panels)
    colour: str
    #: one sentence: what this cause means (the report's cause table, the help screen)
    summary: str
    #: finding title; fields: {n} gaps, {t} idle, {where} " from `frame`" or "", {what} (copy kind)
    title: str
    #: the default advice; ``advise`` fits it to a finding's evidence
    suggestion: str
    #: ctx (see gaps.RuleContext) -> bool mask over the gaps: the rule
    rule: Callable[[Any], np.ndarray]
    #: (analysis, types.GapContext) -> (stack frames, extra evidence dict); None: the stack at the gap start. It
    #: asks the trace through ``analysis.evidence`` (evidence.py) and ``analysis.holder``, never private names
    gather: Callable | None = None
    #: (analysis, GapDetail, t_launch) -> one explanation sentence
    explain: Callable | None = None
    #: (analysis, GapDetail) -> extra part of the finding's group key (e.g. the copy kind), or None
    group: Callable | None = None
    #: (analysis, list of GapDetail of the finding's examples, evidence dict) -> advice fitting that evidence
    advise: Callable | None = None
    #: findings of this cause are split by the frame a person would fix
    by_frame: bool = False
    #: the kind of action (analysis/plan.py ``ACTION_KINDS``) that fixes a finding of this cause: its own fix, as the
    #: replay projects it (replay/fixes.py); None: no action of its own (not projected)
    action: str | None = None
    #: evidence keys worth copying from a GapDetail's ``extra`` into a finding example
    extra_keys: tuple = field(default_factory=tuple)
    #: (analysis, the finding's gap rows, its evidence so far) -> more evidence keys for the finding (counts per step,
    #: the thread or shapes behind it), merged in before ``advise`` and the plan read them; None: nothing more
    evidence: Callable | None = None

    def advice(self, a, details, evidence) -> str:
        return self.advise(a, details, evidence) if self.advise else self.suggestion


#: the built-in causes' names: each cause module names itself with one of these, and the rules elsewhere that single
#: a cause out (the CUDA graph for launch gaps, a sync's prerequisites, the classifier's fallback) name it by these,
#: never by a string of their own
LAUNCH, SYNC, USER_SYNC, PYTHON, ALLOCATOR, STALL, COPY = "launch", "sync", "user-sync", "python", "allocator", "stall", "copy"
COLLECTIVE, PROFILER, HOST_IDLE, GPU_WAIT, GIL, AUTOTUNE = "collective", "profiler", "host-idle", "gpu-wait", "gil", "autotune"

_BUILTIN: list[Cause] = []
_EXTRA: list[Cause] = []
_ORDERED: list[Cause] = []
_VERSION = [0]  # bumped whenever the registry changes (caches of derived tables key on it)


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        c = getattr(mod, "CAUSE", None)
        if isinstance(c, Cause):
            _BUILTIN.append(c)
    _reorder()


def _reorder() -> None:
    allc = sorted(_BUILTIN + _EXTRA, key=lambda c: (c.order, c.name))
    names = [c.name for c in allc]
    if len(set(names)) != len(names):
        raise ValueError(f"two causes share a name: {names}")
    letters = [c.letter for c in allc]
    if len(set(letters)) != len(letters):
        raise ValueError(f"two causes share a letter: {letters}")
    _ORDERED[:] = allc
    _VERSION[0] += 1


def version() -> int:
    return _VERSION[0]


class _Names(Sequence):
    """The cause names in rule order, always current (a tuple would go stale after ``register``)."""

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(c.name for c in _ORDERED[i])
        return _ORDERED[i].name

    def __len__(self) -> int:
        return len(_ORDERED)

    def index(self, name, *_):
        for i, c in enumerate(_ORDERED):
            if c.name == name:
                return i
        raise ValueError(f"{name!r} is not a cause")

    def __repr__(self) -> str:
        return repr(tuple(self))


CAUSES = _Names()


def all_causes() -> list[Cause]:
    return list(_ORDERED)


def get(name: str) -> Cause:
    return _ORDERED[CAUSES.index(name)]


def code(name: str) -> int:
    return CAUSES.index(name)


@contextmanager
def register(cause: Cause):
    """Add ``cause`` to the registry inside the block (its rule is tried at its ``order``)."""
    _EXTRA.append(cause)
    try:
        _reorder()
        yield cause
    finally:
        _EXTRA.remove(cause)
        _reorder()


_discover()

__all__ = ["CAUSES", "Cause", "all_causes", "get", "code", "register"]
