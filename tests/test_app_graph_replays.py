"""The explorer on a CUDA graph decode (traces/hf-graphs.decode_graph, captured by hand in one torch.cuda.graph): a
replayed kernel's detail names the op and shows the Python stack of the eager reference run's kernel it maps to
(analysis/graphs.py), where the trace itself links it only to cudaGraphLaunch."""

from __future__ import annotations

import numpy as np

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened, run
from gapscope.tui.panels import event_text


def test_a_replayed_kernels_detail_has_its_op_and_model_stack():
    async def go():
        async with opened(SAMPLE_TRACES / "hf-graphs.decode_graph.json.gz", size=(160, 48)) as (app, pilot):
            sc = app.scene
            m, gm = sc.model, sc.analysis.graph_map
            mapped = gm.kernels[gm.ref >= 0]
            names = np.array([m.name(int(e)) for e in mapped])
            ev = int(mapped[np.flatnonzero(np.char.find(names.astype(str), "nvjet") >= 0)[0]])
            return m, gm, ev, event_text(sc, ev, app.glyphs).plain

    m, gm, ev, txt = run(go())
    assert m.name(int(m.launch[ev])) == "cudaGraphLaunch" and int(m.op[ev]) < 0  # what the trace alone says
    ref = int(gm.reference_of([ev])[0])
    assert f"from op {m.name(int(m.op[ref]))}" in txt and "aten::mm" in txt
    assert "CUDA graph replay's node" in txt
    assert "modeling_llama.py" in txt  # the model's frame, from the reference kernel's launch stack


def test_a_replayed_kernels_bar_names_its_op():
    """Zoomed in on a replayed GEMM, its bar on the stream lane reads ``mm · nvjet_…`` (the reference's op)."""
    from gapscope.tui.textdump import screen_text

    async def go():
        async with opened(SAMPLE_TRACES / "hf-graphs.decode_graph.json.gz", size=(160, 48)) as (app, pilot):
            sc = app.scene
            m, gm = sc.model, sc.analysis.graph_map
            mapped = gm.kernels[gm.ref >= 0]
            names = np.array([m.name(int(e)) for e in mapped]).astype(str)
            ev = int(mapped[np.flatnonzero(np.char.find(names, "nvjet") >= 0)[0]])
            s, d = int(m.ts_ns[ev]), int(m.dur_ns[ev])
            sc.view.focus(s, s + d, 140, context=0.5)  # the kernel fills most of the window
            app.main.refresh_view()
            await pilot.pause()
            return screen_text(app)

    txt = run(go())
    assert "mm · nvjet" in txt
