"""The CUDA graph traces recorded with their eager reference run (traces/README.md, issue #39): every replayed kernel
mapped, most of their time with a floor, no row below its floor, the GEMV floors recomputed by the independent
script (benchmarks/check_graph_floors.py) from the raw events, the verdict's limit, the eager/graph comparison, and
the stack of a replayed kernel."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from tests.helpers import ROOT, SAMPLE_TRACES
from gapscope.analysis import analyze
from gapscope.trace import load

GRAPH_TRACES = ["demo-graph-ref.decode", "demo-graph-ref.prefill", "hf-graphs.decode_graph",
                "hf-compile.decode_compile"]


def _a(name: str):
    return analyze(load(SAMPLE_TRACES / f"{name}.json.gz"))


def _check_script():
    spec = importlib.util.spec_from_file_location("check_graph_floors", ROOT / "benchmarks" / "check_graph_floors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", GRAPH_TRACES)
def test_replayed_kernels_are_mapped_and_floored(name):
    a = _a(name)
    cov = a.call_floors.graphs
    assert cov.reference_runs == 1 and cov.mismatched == 0 and cov.mapped == cov.kernels > 0
    assert cov.floored_pct >= 90.0, cov.text()
    # every row with a floor took at least its floor, the op rows too
    for k in a.kernels:
        if k.floor_total_ns is not None:
            assert k.floor_total_ns <= k.floored_total_ns, k.name
    for o in a.op_floors:
        assert o.floor_total_ns <= o.total_ns, (o.op, o.kernels)


@pytest.mark.parametrize("name", ["demo-graph-ref.decode", "hf-graphs.decode_graph", "hf-compile.decode_compile"])
def test_independent_gemv_floors_from_the_raw_events(name, capsys):
    """The script reads the raw JSON, the model's config and the H200's bandwidth, none of gapscope's code."""
    assert _check_script().main([str(SAMPLE_TRACES / f"{name}.json.gz")]) == 0
    out = capsys.readouterr().out
    assert "calls below their floor: 0" in out and out.rstrip().endswith("OK")


def test_independent_floors_agree_with_the_report(capsys):
    assert _check_script().main(["--report", str(SAMPLE_TRACES / "hf-graphs.decode_graph.json.gz")]) == 0
    out = capsys.readouterr().out
    assert out.count(" ok") == 5 and "DIFFERS" not in out


def test_graph_decode_verdict_says_what_limits_it():
    a = _a("demo-graph-ref.decode")
    (v,) = a.verdicts
    assert v.kind == "gpu-bound" and v.limit.bound == "memory"
    # the demo's weights (capture/demo.py "full": 8 layers of d_model 2048, d_ff 5632, and the 32000 x 2048 head)
    d, ff, vocab, layers = 2048, 5632, 32000, 8
    weights = (layers * (d * 3 * d + d * d + d * 2 * ff + ff * d) + d * vocab) * 2
    assert weights <= v.limit.matmul_bytes <= weights * 1.01  # plus the activations, at most 1%
    assert v.limit.matmul_floor_ns == pytest.approx(v.limit.matmul_bytes / 4800.0)
    assert "memory-bound: per step the matmuls read 911.0 MiB" in v.reason
    assert json.dumps(v.evidence()["limit"])


def test_a_small_graph_decode_is_latency_bound():
    """The batch-4 Llama decode of hidden 1024: 455 kernels of about 2 µs a step, its floors a small part of them."""
    (v,) = _a("hf-graphs.decode_graph").verdicts
    assert v.kind == "gpu-bound" and v.limit.bound == "latency" and v.limit.kernels == 455
    assert v.limit.memory_floor_ns + v.limit.compute_floor_ns < 0.25 * v.limit.floored_ns
    assert "latency-bound: per step 455 kernels" in v.reason


def test_eager_and_graph_decode_compare_kernel_by_kernel():
    from gapscope.analysis.diagnosis import diagnose

    d = diagnose([_a("hf-graphs.decode_eager"), _a("hf-graphs.decode_graph")])
    rows = [r for r in d.comparison.kernels if r.op == "aten::mm"]
    assert rows and all(r.status == "both" and r.shapes for r in rows)
    # every GEMV of the step on both sides, per shape: 8 layers x (q, o) share [1024, 1024]
    qo = [r for r in rows if r.shapes == "[[4,1024],[1024,1024]]"]
    assert sum(r.a_count for r in qo) == sum(r.b_count for r in qo) == 4 * 16


def test_a_replayed_kernels_stack_is_its_reference_launch():
    """What the explorer needs for a replayed kernel: its op and the launch whose thread and time give its stack."""
    a = _a("hf-graphs.decode_graph")
    m, gm = a.model, a.graph_map
    k = gm.kernels[(m.kind[gm.kernels] == 0) & a.window.gpu_in(m, gm.kernels)]
    gemv = k[np.array([m.name(int(x)).startswith("nvjet") for x in k])]
    ops = {m.name(int(o)) for o in gm.op_of(m, gemv)}
    assert ops == {"aten::mm"}
    L = int(gm.launch_of(m, gemv[:1])[0])
    frames = [f.name for f in a.stacks.stack_at(int(m.track[L]), int(m.ts_ns[L]))]
    assert any("modeling_llama.py" in f for f in frames) and frames[-1] in ("cuLaunchKernelEx", "cudaLaunchKernel")
