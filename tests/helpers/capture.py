"""Capture helpers (they need torch: import this only where torch is)."""

from __future__ import annotations

import torch


class Counter:
    """A step that counts its calls and marks each with a record_function range of its own."""

    def __init__(self, fail_on: int | None = None, exc: BaseException | None = None):
        self.calls = 0
        self.fail_on = fail_on
        self.exc = exc

    def __call__(self):
        self.calls += 1
        if self.fail_on is not None and self.calls == self.fail_on:
            raise self.exc
        with torch.profiler.record_function("test.marker"):
            return torch.ones(8, 8) @ torch.ones(8, 8)
