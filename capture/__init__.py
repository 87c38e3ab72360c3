"""gapscope capture: record forward-pass traces with torch.profiler the way an expert would.

Imports only torch and the standard library, and torch only when a capture actually runs,
so that the package stays importable on machines without torch.

    import gapscope.capture as capture
    r = capture.record(step, name="decode", active=4)      # warm-up, timing, narrow window
    s = capture.Session(name="llama"); s.phase("prefill", f); s.phase("decode", g, active=8)
"""

from .recorder import STEP_RANGE, CaptureError, CaptureResult, Session, Timing, measure, measure_all, record

__all__ = ["record", "measure", "measure_all", "Session", "Timing", "CaptureResult", "CaptureError", "STEP_RANGE"]
