"""Issue 23 item 3: two stacks, two names. The launching thread's stack when the GPU went idle (t0: what the CPU
was doing as the queue ran dry) and the launch stack (what finally fed the GPU), each under its own name in the
JSON, the Markdown and the explorer's stack panel."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from tests.synth import Synth
from tests.helpers import SCHEMA_PATH
from gapscope.analysis import analyze
from gapscope.report import build_json, render_markdown
from gapscope.trace import load

SCHEMA = json.loads(SCHEMA_PATH.read_text())
MIXTRAL = Path(__file__).resolve().parent.parent / "traces" / "hf-mixtral.decode_eager.json.gz"


def rotary_then_attention(tmp_path) -> Path:
    """A decode step in miniature (µs): the GPU runs dry at 50 while the thread is in ``aten::mul`` inside
    ``apply_rotary_pos_emb`` (host work with no kernel); the kernel that ends the gap is launched at 130 from
    ``aten::_flash_attention_forward`` inside ``attention``. Gap [50, 140)."""
    s = Synth()
    with s.frame("model.py(10): forward", 0, 300):
        with s.op("aten::linear", 2, 8):
            s.launch(ts=4, dur=2, kernel="qkv_gemm", k_ts=10, k_dur=40)  # GPU busy [10, 50)
        with s.frame("model.py(20): apply_rotary_pos_emb", 40, 80):
            for k in range(6):  # aten::mul [45, 55), [57, 67), ... no kernel launched
                s.cpu_op("aten::mul", 45 + 12 * k, 10)
        with s.frame("model.py(30): attention", 120, 80):
            with s.op("aten::_flash_attention_forward", 125, 15):
                s.launch(ts=130, dur=5, kernel="flash_fwd", k_ts=140, k_dur=20)
    return s.write(tmp_path / "rotary.json")


IDLE = ["model.py(10): forward", "model.py(20): apply_rotary_pos_emb", "aten::mul"]
LAUNCH = ["model.py(10): forward", "model.py(30): attention", "aten::_flash_attention_forward", "cudaLaunchKernel"]


def test_json_gives_the_stack_when_the_gpu_went_idle_and_the_launch_stack(tmp_path):
    a = analyze(load(str(rotary_then_attention(tmp_path)), no_cache=True))
    doc = build_json([a])
    jsonschema.validate(doc, SCHEMA)
    g = doc["gaps"][0]
    assert (g["start_us"], g["dur_us"]) == (40.0, 90.0)  # [50, 140) from the window start at 10
    assert g["stack_at_idle"] == IDLE
    assert g["launch_stack"] == LAUNCH
    d = a.gap_detail(0)
    assert [f.name for f in d.idle_stack] == IDLE and [f.name for f in d.launch_stack] == LAUNCH


def test_markdown_names_both_stacks(tmp_path):
    a = analyze(load(str(rotary_then_attention(tmp_path)), no_cache=True))
    md = render_markdown([a])
    i = md.index("Launching thread when the GPU went idle:")
    j = md.index("Launch stack (what fed the GPU):")
    assert i < j
    assert "apply_rotary_pos_emb" in md[i:j] and "attention" not in md[i:j]
    assert "_flash_attention_forward" in md[j:j + 400]


def test_mixtral_decode_attention_launches_fed_gaps_the_thread_ran_dry_elsewhere():
    """The real trace (hf-mixtral.decode_eager, H200): the launch-bound gaps ended by the attention kernel have a
    launch stack in `aten::_cudnn_attention_forward`, while at t0 the thread was still before it (in the KV
    cache's `update` or the attention module's forward): the two stacks differ, 10 of the 10 largest gaps."""
    a = analyze(load(str(MIXTRAL)))
    doc = build_json([a], top=100)
    gaps = doc["gaps"]
    assert sum(g["stack_at_idle"] != g["launch_stack"] for g in gaps[:10]) == 10
    att = [g for g in gaps if g["cause"] == "launch" and "aten::_cudnn_attention_forward" in g["launch_stack"]]
    assert len(att) >= 20
    for g in att:
        assert "aten::_cudnn_attention_forward" not in g["stack_at_idle"]
        assert g["cpu_stack"] == g["launch_stack"]  # the launch cause points at what fed the GPU
        assert g["launch_stack"][-1] == g["next_op"]["launch"]
    assert any(g["stack_at_idle"][-1].startswith("transformers/cache_utils.py(") for g in att)


def test_explorer_stack_panel_names_both_stacks(tmp_path):
    import asyncio

    from gapscope.tui.app import GapscopeApp
    from gapscope.tui.panels import stack_text

    p = rotary_then_attention(tmp_path)

    async def go():
        app = GapscopeApp([str(p)], load_opts={"no_cache": True})
        async with app.run_test(size=(160, 48)) as pilot:
            for _ in range(3):
                await app.workers.wait_for_complete()
                await pilot.pause()
            return stack_text(app.scene, app.glyphs, full=True).plain

    txt = asyncio.run(go())
    i = txt.index("launching thread when the GPU went idle (innermost first):")
    j = txt.index("launch stack (what fed the GPU")
    assert i < j
    idle, launch = txt[i:j], txt[j:]
    # innermost first: aten::mul, then apply_rotary_pos_emb; the launch stack below the frame they share (forward)
    assert idle.index("aten::mul") < idle.index("apply_rotary_pos_emb") < idle.index("forward")
    assert "model.py(30): attention" not in idle and "model.py:30" not in idle
    assert launch.index("cudaLaunchKernel") < launch.index("aten::_flash_attention_forward") < launch.index("attention")
    assert "outer frames of the stack above" in launch


def test_frames_of_the_same_interval_list_the_caller_first():
    """Integer-µs traces (hta's): ``aten::to`` and the ``aten::_to_copy`` it calls share their interval; the stack
    lists the caller first (audit: the same order from External ids), and the signature is the inner op."""
    s = Synth()
    s.launch(ts=0, dur=2, kernel="k0", k_ts=5, k_dur=10)  # GPU idle from 15
    s.cpu_op("aten::to", 10, 20)
    s.cpu_op("aten::_to_copy", 10, 20)
    s.cpu_op("aten::copy_", 12, 16)
    s.launch(ts=20, dur=3, kernel="k1", k_ts=40, k_dur=5)
    a = analyze(model_of_synth(s))
    d = a.gap_detail(0)
    assert (d.start_ns, d.dur_ns) == (15_000, 25_000)
    assert [f.name for f in d.idle_stack] == ["aten::to", "aten::_to_copy", "aten::copy_"]
    assert [f.name for f in d.launch_stack] == ["aten::to", "aten::_to_copy", "aten::copy_", "cudaLaunchKernel"]
    assert a.details.signatures([0]) == [d.signature]


def model_of_synth(s):
    from tests.helpers import model_of

    return model_of(s)
