"""The moment the benchmarks call "first drawn frame": the first line the lanes draw once a trace is on screen (a
big plain trace's preview, gapscope/trace/progressive.py, where the tree has one: `bench_open.py --progressive` times
the full model's lanes and the gap list too).
Imported by the benchmark children (bench_open.py, profile_open.py) so both time the same event."""

from __future__ import annotations

import time


def watch_first_frame() -> dict:
    """Patch the lanes widget; the returned dict gets ``"t"`` (perf_counter) at the first lane line drawn with a
    trace loaded."""
    from gapscope.tui.timeline import LanesView

    first: dict = {}
    orig = LanesView.render_line

    def render_line(self, y):
        if "t" not in first and self.app.scene is not None:
            first["t"] = time.perf_counter()
        return orig(self, y)

    LanesView.render_line = render_line
    return first
