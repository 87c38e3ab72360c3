"""gapscope: why was the GPU idle? Trace model, analysis, report and terminal explorer (installed as ``gapscope.tui``)."""

from .. import __version__  # one version, in the gapscope package

__all__ = ["__version__"]
