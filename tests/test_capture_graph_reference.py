"""capture/: the eager reference run of a step that replays CUDA graphs (``step.gapscope_reference``), recorded
once after the measured window in a ``gapscope.graph_reference`` range (on the CPU here; the GPU test records the
demo in graph mode and maps its replays)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import gapscope.capture as capture  # noqa: E402
from gapscope.capture import cli as capture_cli  # noqa: E402
from gapscope.capture.recorder import REFERENCE_RANGE, CaptureError  # noqa: E402
from gapscope.trace import load  # noqa: E402
from tests.helpers.capture import Counter  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


class Ref:
    """A reference run: counts its calls and marks each with its own range."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        with torch.profiler.record_function("test.reference"):
            return torch.ones(4, 4) @ torch.ones(4, 4)


def _ranges(path) -> dict:
    m = load(str(path), no_cache=True)
    out: dict = {}
    for i in range(m.n):
        out.setdefault(m.name(i), []).append((int(m.ts_ns[i]), int(m.ts_ns[i] + m.dur_ns[i])))
    return out


def test_the_steps_reference_is_recorded_once_after_the_window(tmp_path):
    step, ref = Counter(), Ref()
    step.gapscope_reference = ref
    r = capture.record(step, name="g", out_dir=str(tmp_path), warmup=1, active=2, repeats=1, quiet=True)
    assert ref.calls == 1 and step.calls == 1 + 2 + 1 + 2  # the reference is not timed nor warmed up
    rg = _ranges(r.path)
    (ref_rng,) = rg[REFERENCE_RANGE]
    (inner,) = rg["test.reference"]
    assert ref_rng[0] <= inner[0] and inner[1] <= ref_rng[1]
    last_step = max(e for _, e in rg["gapscope.step#1"])
    assert ref_rng[0] >= last_step  # after the measured window: the window is recorded as without it
    g = r.metadata["graph_reference"]
    assert g["range"] == REFERENCE_RANGE and g["runs"] == 1 and g["after_window"] and g["host_us"] > 0
    assert load(r.path, no_cache=True).gapscope_meta["graph_reference"]["runs"] == 1


def test_no_reference_without_one_or_when_turned_off(tmp_path):
    r = capture.record(Counter(), name="plain", out_dir=str(tmp_path), warmup=0, active=1, repeats=1, quiet=True)
    assert r.metadata["graph_reference"] is None and REFERENCE_RANGE not in _ranges(r.path)
    step, ref = Counter(), Ref()
    step.gapscope_reference = ref
    r = capture.record(step, name="off", out_dir=str(tmp_path), warmup=0, active=1, repeats=1, quiet=True,
                       graph_reference=False)
    assert ref.calls == 0 and r.metadata["graph_reference"] is None


def test_reference_argument_and_a_bad_one(tmp_path):
    ref = Ref()
    r = capture.record(Counter(), name="arg", out_dir=str(tmp_path), warmup=0, active=1, repeats=1, quiet=True,
                       reference=ref)
    assert ref.calls == 1 and r.metadata["graph_reference"]["runs"] == 1
    step = Counter()
    step.gapscope_reference = "not callable"
    with pytest.raises(CaptureError, match="graph reference .* is not callable"):
        capture.record(step, name="bad", out_dir=str(tmp_path), warmup=0, active=1, repeats=1, quiet=True)


def test_a_reference_that_raises_leaves_the_trace_and_says_so(tmp_path, capsys):
    def boom():
        raise RuntimeError("no eager path")

    step = Counter()
    step.gapscope_reference = boom
    r = capture.record(step, name="boom", out_dir=str(tmp_path), warmup=0, active=1, repeats=1)
    g = r.metadata["graph_reference"]
    assert g["runs"] == 0 and "RuntimeError: no eager path" in g["error"]
    assert "gapscope.step#0" in _ranges(r.path)
    assert "the graph reference of boom raised RuntimeError" in capsys.readouterr().err


def test_cli_run_records_the_reference_and_can_leave_it_out(tmp_path, capsys, monkeypatch):
    mod = tmp_path / "graphsteps.py"
    mod.write_text(
        "import torch\n"
        "def steps():\n"
        "    def decode():\n"
        "        return torch.ones(2, 2) @ torch.ones(2, 2)\n"
        "    def eager():\n"
        "        with torch.profiler.record_function('test.reference'):\n"
        "            return torch.ones(2, 2) @ torch.ones(2, 2)\n"
        "    decode.gapscope_reference = eager\n"
        "    return {'decode': decode}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    base = ["run", "graphsteps:steps", "--out", str(tmp_path / "out"), "--warmup", "0", "--active", "1",
            "--repeats", "1", "--budget", "0", "--cpu"]
    assert capture_cli.main(base + ["--name", "with"]) == 0
    assert REFERENCE_RANGE in _ranges(tmp_path / "out" / "with.decode.json.gz")
    assert capture_cli.main(base + ["--name", "without", "--no-graph-reference"]) == 0
    assert REFERENCE_RANGE not in _ranges(tmp_path / "out" / "without.decode.json.gz")
    capsys.readouterr()


def test_the_demo_graph_step_carries_its_eager_forward(monkeypatch):
    """The demo's graph step replays the graph of its forward pass and carries that forward pass, run eagerly, as its
    reference (checked on the CPU with the capture stubbed out: graph mode needs CUDA)."""
    from gapscope.capture import demo

    d = demo.Demo("tiny", "eager", device="cpu")
    replays = []

    class FakeGraph:
        def replay(self):
            replays.append(1)

    monkeypatch.setattr(d, "mode", "graph")
    monkeypatch.setattr(d, "_graphed", lambda phase, fn: (FakeGraph(), None))
    step = d.step_fn("decode")
    step()
    assert replays == [1] and step.gapscope_reference == d._decode
    assert not hasattr(demo.Demo("tiny", "eager", device="cpu").step_fn("decode"), "gapscope_reference")


@pytest.mark.gpu
@needs_cuda
def test_demo_graph_decode_maps_every_replayed_kernel(tmp_path, capsys):
    from gapscope.analysis import analyze

    rc = capture_cli.main(["demo", "--size", "tiny", "--mode", "graph", "--phase", "decode", "--out", str(tmp_path),
                           "--budget", "0", "--repeats", "1"])
    assert rc == 0, capsys.readouterr().err
    a = analyze(load(str(tmp_path / "demo-graph.decode.json.gz"), no_cache=True))
    cov = a.call_floors.graphs
    assert cov is not None and cov.mismatched == 0 and cov.mapped == cov.kernels > 0
