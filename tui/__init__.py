"""gapscope: why was the GPU idle? Trace model, analysis, report and terminal explorer."""

__version__ = "0.1.0"
