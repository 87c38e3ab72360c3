"""Trace model layer: read a PyTorch profiler (Kineto) trace into columns. No textual, no torch."""

from .model import Kind, TraceModel, Track, TrackKind
from .read import TraceError, load

__all__ = ["Kind", "TraceModel", "Track", "TrackKind", "TraceError", "load"]
