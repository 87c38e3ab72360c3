"""capture/: recording windows, metadata, safe export, the demo and its CLI, two ranks on gloo (CPU)."""

from __future__ import annotations

import errno
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import gapscope.capture as capture  # noqa: E402
from gapscope.capture import cli as capture_cli  # noqa: E402
from gapscope.capture.recorder import CaptureError  # noqa: E402
from gapscope.trace import load  # noqa: E402
from tests.helpers import free_port  # noqa: E402
from tests.helpers.capture import Counter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _names(path) -> list[str]:
    m = load(str(path), no_cache=True)
    return [m.name(i) for i in range(m.n)]


def _names_in_steps(path) -> list[str]:
    """Names of the events that start inside a measured ``gapscope.step#k`` range (the profiler's warm-up step
    before them is recorded too, outside the window)."""
    m = load(str(path), no_cache=True)
    rng = [(int(m.ts_ns[i]), int(m.ts_ns[i] + m.dur_ns[i])) for i in range(m.n) if m.name(i).startswith("gapscope.step#")]
    return [m.name(i) for i in range(m.n) if any(a <= m.ts_ns[i] < b for a, b in rng)]


def _count(names: list[str], what: str) -> int:
    return sum(1 for n in names if n == what)


def _listing(d: Path) -> list[str]:
    return sorted(os.listdir(d)) if d.exists() else []


# ------------------------------------------------------------------------------------------- record
def test_import_needs_no_torch():
    code = (
        "import sys; import capture, capture.cli, capture.recorder, capture.demo; "
        "bad = [m for m in ('torch', 'textual', 'numpy', 'orjson', 'tui') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_record_window_holds_exactly_active_steps(tmp_path):
    step = Counter()
    r = capture.record(step, name="mm", out_dir=str(tmp_path), warmup=2, active=3, repeats=2, quiet=True)
    assert r.path == str(tmp_path / "mm.json.gz")
    assert open(r.path, "rb").read(2) == b"\x1f\x8b"
    # warm-up + timing repeats + the profiler's warm-up step + the window, nothing more
    assert step.calls == 2 + 2 * 3 + 1 + 3
    names = _names(r.path)
    assert sorted(n for n in names if n.startswith("gapscope.step#")) == ["gapscope.step#0", "gapscope.step#1", "gapscope.step#2"]
    # un-profiled warm-up and timing calls are not recorded; the profiler's warm-up step is, in its own range
    assert _count(names, "test.marker") == 3 + 1
    assert _count(names, "gapscope.profiler_warmup") == 1
    assert _listing(tmp_path) == ["mm.json.gz"]  # no temporary files left behind


def test_profiler_warmup_step_is_recorded_before_the_window_and_left_out_of_it(tmp_path):
    from gapscope.analysis import analyze

    r = capture.record(Counter(), name="pw", out_dir=str(tmp_path), warmup=1, active=2, repeats=1, quiet=True,
                       stacks=False)
    m = load(r.path, no_cache=True)
    assert m.gapscope_meta["profiler_warmup"] == 1
    ranges = {}
    for i in range(m.n):
        nm = m.name(i)
        if nm in ("gapscope.profiler_warmup", "gapscope.step#0", "gapscope.step#1", "test.marker"):
            ranges.setdefault(nm, []).append((int(m.ts_ns[i]), int(m.ts_ns[i] + m.dur_ns[i])))
    (ws, we), = ranges["gapscope.profiler_warmup"]
    first_step = min(s for s, _ in ranges["gapscope.step#0"])
    assert we <= first_step  # the warm-up step ends (and is synchronised) before the window begins
    inside = [s for s, e in ranges["test.marker"] if ws <= s and e <= we]
    assert len(inside) == 1
    # the analysis window is made of the two measured steps only (a CPU trace is not clipped: no GPU work, but
    # the step ranges it would clip to are these)
    a = analyze(m)
    assert a.window.steps == ["gapscope.step#0", "gapscope.step#1"]
    from gapscope.analysis.window import STEP_RE

    assert STEP_RE.match("gapscope.profiler_warmup") is None


def test_profiler_warmup_zero_records_the_window_alone(tmp_path):
    step = Counter()
    r = capture.record(step, name="pw0", out_dir=str(tmp_path), warmup=1, active=2, repeats=1, quiet=True,
                       stacks=False, profiler_warmup=0)
    names = _names(r.path)
    assert step.calls == 1 + 2 + 2 and _count(names, "test.marker") == 2
    assert _count(names, "gapscope.profiler_warmup") == 0
    assert load(r.path, no_cache=True).gapscope_meta["profiler_warmup"] == 0
    with pytest.raises(CaptureError, match="profiler_warmup"):
        capture.record(Counter(), name="pw1", out_dir=str(tmp_path), active=1, repeats=1, quiet=True,
                       profiler_warmup=-1)


def test_record_metadata(tmp_path):
    r = capture.record(Counter(), name="meta", out_dir=str(tmp_path), phase="decode", active=2, repeats=1,
                       stacks=False, quiet=True, extra={"model": "toy"})
    m = load(r.path, no_cache=True)
    g = m.gapscope_meta
    assert g is not None
    assert g["name"] == "meta" and g["phase"] == "decode" and g["active"] == 2 and g["warmup"] == 3
    assert g["options"] == {"stacks": False, "shapes": True, "memory": False, "repeats": 1}
    assert g["torch"] == torch.__version__
    assert g["cpu_only"] is (not torch.cuda.is_available())
    assert g["unprofiled_us"] > 0 and g["profiled_us"] > 0
    assert g["distortion"] == pytest.approx(g["profiled_us"] / g["unprofiled_us"])
    assert r.distortion == pytest.approx(g["distortion"])
    assert isinstance(g["argv"], list)
    assert g["workload"] == {"model": "toy"}
    assert "rank" not in g  # not distributed
    assert m.metadata.get("with_stack") in (None, 0)  # the stacks option reached the profiler


def test_metadata_with_awkward_strings_keeps_the_trace_valid(tmp_path):
    # Kineto turns backslashes into slashes when it writes metadata: escapes must never reach it
    extra = {"quote": 'say "hi"', "backslash": "C:\\temp", "newline": "a\nb", "accent": "caf\u00e9", "nan": float("nan")}
    r = capture.record(Counter(), name="odd", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True,
                       extra=extra)
    raw = gzip.decompress(open(r.path, "rb").read())
    doc = json.loads(raw)  # strict JSON
    w = doc["gapscope"]["workload"]
    assert w["quote"] == "say 'hi'" and w["backslash"] == "C:/temp" and w["newline"] == "a b"
    assert w["accent"] == "caf?" and w["nan"] is None


def test_cpu_only_is_said_on_stderr(tmp_path, capsys):
    capture.record(Counter(), name="cpu", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, cuda=False)
    assert "records CPU activity only" in capsys.readouterr().err


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()], ids=["error", "interrupt"])
@pytest.mark.parametrize("where", ["warmup", "window"])
def test_exception_in_step_leaves_no_file_and_no_profiler(tmp_path, exc, where):
    # warm-up is call 1; with warmup=1, repeats=1, active=2 the window holds calls 4 and 5
    step = Counter(fail_on=1 if where == "warmup" else 5, exc=exc)
    with pytest.raises(type(exc)):
        capture.record(step, name="bad", out_dir=str(tmp_path), warmup=1, active=2, repeats=1, quiet=True)
    assert _listing(tmp_path) == []
    assert not torch.autograd._profiler_enabled()
    # and the next recording in the same process works
    r = capture.record(Counter(), name="good", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True)
    assert os.path.basename(r.path) == "good.json.gz"


def test_full_disk_while_exporting_leaves_nothing(tmp_path, monkeypatch):
    def no_space(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gzip.GzipFile, "write", no_space)
    with pytest.raises(CaptureError, match="No space left on device"):
        capture.record(Counter(), name="full", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True)
    assert _listing(tmp_path) == []
    assert not torch.autograd._profiler_enabled()


def test_existing_trace_is_never_replaced_unless_asked(tmp_path):
    (tmp_path / "x.json.gz").write_bytes(b"precious")
    r1 = capture.record(Counter(), name="x", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True)
    r2 = capture.record(Counter(), name="x", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True)
    assert (tmp_path / "x.json.gz").read_bytes() == b"precious"
    assert [os.path.basename(r1.path), os.path.basename(r2.path)] == ["x.1.json.gz", "x.2.json.gz"]
    r3 = capture.record(Counter(), name="x", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True,
                        overwrite=True)
    assert r3.path == str(tmp_path / "x.json.gz")
    assert load(r3.path, no_cache=True).gapscope_meta["name"] == "x"


def test_bad_arguments(tmp_path):
    with pytest.raises(CaptureError):
        capture.record(Counter(), name="a/b", out_dir=str(tmp_path), quiet=True)
    with pytest.raises(CaptureError):
        capture.record(Counter(), name="z", out_dir=str(tmp_path), active=0, quiet=True)
    with pytest.raises(CaptureError):
        capture.record("not callable", name="z", out_dir=str(tmp_path), quiet=True)
    assert _listing(tmp_path) == []


def test_session_writes_one_file_per_phase(tmp_path):
    s = capture.Session(name="model", out_dir=str(tmp_path), repeats=1, stacks=False, quiet=True)
    pre, dec = Counter(), Counter()
    s.phase("prefill", pre)
    s.phase("decode", dec, active=3, warmup=1)
    assert _listing(tmp_path) == ["model.decode.json.gz", "model.prefill.json.gz"]
    # each phase has its own warm-up, timing and profiler warm-up step
    assert pre.calls == 3 + 1 + 1 + 1 and dec.calls == 1 + 3 + 1 + 3
    assert load(str(tmp_path / "model.decode.json.gz"), no_cache=True).gapscope_meta["phase"] == "decode"
    assert _count(_names_in_steps(tmp_path / "model.decode.json.gz"), "test.marker") == 3
    assert [r.phase for r in s.results] == ["prefill", "decode"]


class Logged:
    """A step that logs whether a profiler was running at each call."""

    def __init__(self, log: list, tag: str):
        self.log, self.tag = log, tag

    def __call__(self):
        self.log.append((self.tag, torch.autograd._profiler_enabled()))
        return torch.ones(8, 8) @ torch.ones(8, 8)


def test_session_times_every_phase_before_the_first_window(tmp_path, monkeypatch):
    # Kineto may leave CUPTI attached after a window: a later un-profiled timing in the same process
    # would be slowed by it, so every phase is timed before the first profiler session
    from gapscope.capture import recorder

    monkeypatch.setattr(recorder, "_PROFILER_SESSIONS", [0])
    log: list = []
    s = capture.Session(name="two", out_dir=str(tmp_path), warmup=1, repeats=3, stacks=False, quiet=True)
    s.measure("prefill", Logged(log, "p"))
    s.measure("decode", Logged(log, "d"), active=2)
    assert log == [("p", False)] * (1 + 3 * 1) + [("d", False)] * (1 + 3 * 2)
    del log[:]
    pre = s.phase("prefill", Logged(log, "p"))
    dec = s.phase("decode", Logged(log, "d"), active=2)
    # the window's warm-up calls still run right before it (un-profiled), then the window itself
    # the profiled calls: each phase's profiler warm-up step, then its window
    assert log == [("p", False), ("p", True), ("p", True), ("d", False), ("d", True), ("d", True), ("d", True)]
    for r, n in ((pre, 1), (dec, 2)):
        g = load(r.path, no_cache=True).gapscope_meta
        assert g["timed_after_profiler"] is False and g["active"] == n
        assert len(g["unprofiled_samples_us"]) == 3 and g["options"]["repeats"] == 3
        assert g["unprofiled_us"] == pytest.approx(sorted(g["unprofiled_samples_us"])[1])
    assert s.timings == {}  # each timing is used once


def test_timing_after_a_window_is_flagged(tmp_path, monkeypatch):
    from gapscope.capture import recorder

    monkeypatch.setattr(recorder, "_PROFILER_SESSIONS", [0])
    a = capture.record(Counter(), name="a", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True)
    b = capture.record(Counter(), name="b", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True)
    assert a.metadata["timed_after_profiler"] is False
    assert b.metadata["timed_after_profiler"] is True
    t = capture.measure(Counter(), active=2, repeats=1)
    with pytest.raises(CaptureError, match="timing is of 2 steps"):
        capture.record(Counter(), name="c", out_dir=str(tmp_path), active=1, quiet=True, timing=t)


# -------------------------------------------------------------------------------------- demo / CLI
INJECT_FUNCS = {
    "sync": "_inject_sync_check",
    "sampling": "_inject_host_sampling",
    "copy": "_inject_pageable_copy",
    "alloc": "_inject_allocator_churn",
    "python": "_host_bookkeeping",
}


def _cli(argv, capsys):
    rc = capture_cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_demo_both_phases_tiny(tmp_path, capsys, monkeypatch):
    from gapscope.capture import recorder

    monkeypatch.setattr(recorder, "_PROFILER_SESSIONS", [0])
    rc, out, err = _cli(["demo", "--size", "tiny", "--cpu", "--out", str(tmp_path), "--repeats", "1", "--warmup", "1"], capsys)
    assert rc == 0, err
    assert _listing(tmp_path) == ["demo-eager.decode.json.gz", "demo-eager.prefill.json.gz"]
    assert sum(ln.startswith("wrote ") and "distortion" in ln for ln in out.splitlines()) == 2
    dec = load(str(tmp_path / "demo-eager.decode.json.gz"), no_cache=True)
    g = dec.gapscope_meta
    assert g["phase"] == "decode" and g["active"] == 4 and g["workload"]["size"] == "tiny"
    names = _names_in_steps(tmp_path / "demo-eager.decode.json.gz")
    assert _count(names, "layer.0") == 4 and _count(names, "layer.1") == 4  # one per decode step
    assert any(n.endswith(": _decode") for n in names)  # Python stacks are on by default
    pre = load(str(tmp_path / "demo-eager.prefill.json.gz"), no_cache=True)
    assert pre.gapscope_meta["active"] == 1
    # decode was timed before the prefill window, not after it, in the same interleaved rounds as prefill
    assert g["timed_after_profiler"] is False and pre.gapscope_meta["timed_after_profiler"] is False
    u, up = g["unprofiled"], pre.gapscope_meta["unprofiled"]
    assert u["interleaved"] == up["interleaved"] == ["prefill", "decode"]
    assert u["n"] == up["n"] == len(g["unprofiled_samples_us"]) >= 5 and u["budget_s"] == 5.0
    assert u["min_us"] <= u["p25_us"] <= u["median_us"] <= u["p75_us"] <= u["max_us"]
    assert any(n == "aten::scaled_dot_product_attention" for n in (pre.name(i) for i in range(pre.n)))


@pytest.mark.parametrize("inject", sorted(INJECT_FUNCS))
def test_demo_injected_cause_shows_its_function(tmp_path, capsys, inject):
    rc, out, err = _cli(["demo", "--size", "tiny", "--cpu", "--phase", "decode", "--inject", inject, "--active", "2",
                         "--out", str(tmp_path), "--repeats", "1", "--warmup", "1"], capsys)
    assert rc == 0, err
    path = tmp_path / f"demo-eager-{inject}.decode.json.gz"
    names = _names_in_steps(path)
    fn = INJECT_FUNCS[inject]
    hits = [n for n in names if n.endswith(f": {fn}")]
    per_layer = inject in ("sync", "alloc", "python")
    assert len(hits) == (2 * 2 if per_layer else 2)  # 2 layers x 2 steps, or once per step
    if inject == "sync":
        assert "aten::item" in names
    if inject == "sampling":
        assert "aten::multinomial" in names
    assert load(str(path), no_cache=True).gapscope_meta["workload"]["inject"] == inject


def test_demo_without_stacks_has_no_python_frames(tmp_path, capsys):
    rc, _, err = _cli(["demo", "--size", "tiny", "--cpu", "--phase", "decode", "--no-stacks", "--active", "1",
                       "--out", str(tmp_path), "--repeats", "1", "--warmup", "1"], capsys)
    assert rc == 0, err
    m = load(str(tmp_path / "demo-eager-nostacks.decode.json.gz"), no_cache=True)
    assert not any(".py(" in m.name(i) for i in range(m.n))
    assert m.gapscope_meta["options"]["stacks"] is False


@pytest.mark.parametrize(
    "argv, message",
    [
        (["demo", "--mode", "graph", "--cpu"], "needs a CUDA device"),
        (["demo", "--mode", "compile", "--inject", "sync", "--cpu"], "needs --mode eager"),
        (["demo", "--late-rank", "1", "--cpu"], "--late-rank needs --ranks"),
        (["demo", "--ranks", "--cpu"], "needs torchrun"),
        (["demo", "--inject", "nope"], "invalid choice"),
        (["demo", "--active", "0"], "--active must be at least 1"),
        (["demo", "--dist-timeout", "0"], "--dist-timeout must be more than 0"),
        (["run", "nocolon"], "expected MODULE:FUNC"),
        (["run", "no_such_module_xyz:f"], "cannot import"),
        (["run", "json:no_such_func"], "has no"),
        (["run", "json:dumps"], "json:dumps raised TypeError"),  # FUNC itself fails: one line, no traceback
        (["frobnicate"], "invalid choice"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.delenv("GAPSCOPE_DEBUG", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    rc, out, err = _cli([*argv, "--out", str(tmp_path)] if argv[0] in ("demo", "run") else argv, capsys)
    assert rc == 2
    assert err.startswith("gapscope: error: ") and err.count("\n") == 1 and message in err
    assert _listing(tmp_path) == []


def test_capture_run_module_func_with_phases(tmp_path, capsys, monkeypatch):
    (tmp_path / "mybench.py").write_text(
        "import torch\n"
        "def steps():\n"
        "    a = torch.ones(16, 16)\n"
        "    return {'prefill': lambda: a @ a, 'decode': lambda: a + 1}\n"
        "def one():\n"
        "    return lambda: torch.zeros(4).sum()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out_dir = tmp_path / "out"
    rc, out, err = _cli(["run", "mybench:steps", "--out", str(out_dir), "--repeats", "1", "--active", "2"], capsys)
    assert rc == 0, err
    assert _listing(out_dir) == ["mybench.decode.json.gz", "mybench.prefill.json.gz"]
    assert sum(ln.startswith("wrote ") and "distortion" in ln for ln in out.splitlines()) == 2
    rc, out, err = _cli(["run", "mybench:one", "--name", "single", "--out", str(out_dir), "--repeats", "1"], capsys)
    assert rc == 0, err
    g = load(str(out_dir / "single.json.gz"), no_cache=True).gapscope_meta
    assert g["phase"] is None and g["workload"] == {"target": "mybench:one"}


def test_run_target_must_return_steps(tmp_path, capsys, monkeypatch):
    (tmp_path / "badbench.py").write_text("def f():\n    return 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rc, _, err = _cli(["run", "badbench:f", "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "must return a step callable" in err


def test_run_step_that_raises_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GAPSCOPE_DEBUG", raising=False)
    (tmp_path / "failbench.py").write_text(
        "calls = []\n"
        "def steps():\n"
        "    def decode():\n"
        "        calls.append(1)\n"
        "        if len(calls) > 2:\n"
        "            raise ValueError('cache full')\n"
        "    return {'decode': decode}\n"
        "def broken_import():\n"
        "    pass\n"
    )
    (tmp_path / "failimport.py").write_text("raise RuntimeError('no config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out_dir = tmp_path / "out"
    rc, _, err = _cli(["run", "failbench:steps", "--out", str(out_dir), "--warmup", "1", "--repeats", "1", "--active", "1"], capsys)
    assert rc == 2 and "Traceback" not in err
    assert [ln for ln in err.splitlines() if ln.startswith("gapscope: error: ")] == [err.splitlines()[-1]]
    assert "the decode step of failbench:steps raised ValueError: cache full" in err
    assert _listing(out_dir) == []
    assert not torch.autograd._profiler_enabled()
    rc, _, err = _cli(["run", "failimport:f", "--out", str(out_dir)], capsys)
    assert rc == 2 and "importing 'failimport' raised RuntimeError: no config" in err
    monkeypatch.setenv("GAPSCOPE_DEBUG", "1")
    with pytest.raises(RuntimeError, match="no config"):
        capture_cli.main(["run", "failimport:f", "--out", str(out_dir)])


def test_python_dash_m_capture(tmp_path):
    r = subprocess.run([sys.executable, "-m", "capture", "demo", "--size", "tiny", "--cpu", "--phase", "prefill",
                        "--no-stacks", "--warmup", "1", "--repeats", "1", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "demo-eager-nostacks.prefill.json.gz" in r.stdout and "distortion" in r.stdout
    r = subprocess.run([sys.executable, "-m", "capture", "demo", "--inject", "bogus"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("gapscope: error: ") and "Traceback" not in r.stderr


def test_small_size_and_memory_option(tmp_path, capsys):
    rc, _, err = _cli(["demo", "--size", "small", "--cpu", "--phase", "decode", "--active", "1", "--memory", "--no-stacks",
                       "--warmup", "1", "--repeats", "1", "--out", str(tmp_path)], capsys)
    assert rc == 0, err
    m = load(str(tmp_path / "demo-eager-nostacks.decode.json.gz"), no_cache=True)
    g = m.gapscope_meta
    assert g["workload"]["config"]["n_layers"] == 4 and g["options"]["memory"] is True
    assert any(m.name(i) == "[memory]" for i in range(m.n))  # allocator events were recorded
    # 4 layers in the one measured step (and 4 more in the profiler's warm-up step before it)
    assert sum(1 for n in _names_in_steps(tmp_path / "demo-eager-nostacks.decode.json.gz") if n.startswith("layer.")) == 4
    assert sum(1 for i in range(m.n) if m.name(i).startswith("layer.")) == 8


def test_gapscope_dispatches_capture(tmp_path, capsys):
    from gapscope.cli import main as gapscope_main

    rc = gapscope_main(["capture", "demo", "--size", "tiny", "--cpu", "--phase", "prefill", "--out", str(tmp_path),
                        "--repeats", "1", "--warmup", "1", "--no-stacks"])
    assert rc == 0
    assert _listing(tmp_path) == ["demo-eager-nostacks.prefill.json.gz"]


def test_missing_torch_is_one_line(tmp_path):
    code = "import sys; sys.modules['torch'] = None; from capture.cli import main; sys.exit(main(['demo']))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr == "gapscope: error: capture needs torch (pip install 'gapscope[capture]')\n"


# ------------------------------------------------------------------------------------------- ranks
def _rank_worker(rank: int, world: int, port: int, out_dir: str, rcs) -> None:
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    rc = capture_cli.main(["demo", "--ranks", "--cpu", "--size", "tiny", "--phase", "decode", "--active", "2",
                           "--late-rank", "1", "--late-us", "500", "--warmup", "1", "--repeats", "1",
                           "--out", out_dir])
    rcs[rank] = rc


def test_two_ranks_on_gloo_with_a_late_rank(tmp_path):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    rcs = ctx.Manager().dict()
    mp.start_processes(_rank_worker, args=(2, free_port(), str(tmp_path), rcs), nprocs=2, join=True,
                       start_method="spawn")
    assert dict(rcs) == {0: 0, 1: 0}
    stem = "demo-eager-tp-late1"
    files = _listing(tmp_path)
    assert f"{stem}.decode.rank0.json.gz" in files and f"{stem}.decode.rank1.json.gz" in files
    assert f"{stem}.ranks.json" in files
    straggler = {}
    for r in (0, 1):
        m = load(str(tmp_path / f"{stem}.decode.rank{r}.json.gz"), no_cache=True)
        g = m.gapscope_meta
        assert g["rank"] == r and g["world_size"] == 2 and g["backend"] == "gloo"
        assert [0, 1] in g["process_groups"].values()
        assert m.rank == r
        assert g["workload"]["late_rank"] == 1 and g["workload"]["tensor_parallel"] == 2
        names = _names_in_steps(tmp_path / f"{stem}.decode.rank{r}.json.gz")
        straggler[r] = sum(1 for n in names if n.endswith(": _straggler_work"))
        assert _count(names, "gapscope.step#1") == 1
        assert any("all_reduce" in n for n in names)
    # 2 layers x 2 all-reduces x 2 steps on the late rank, none on the other
    assert straggler == {0: 0, 1: 8}
    combined = json.loads((tmp_path / f"{stem}.ranks.json").read_text())
    assert combined["world_size"] == 2 and [r["rank"] for r in combined["ranks"]] == [0, 1]
    assert [r["traces"][0]["file"] for r in combined["ranks"]] == [f"{stem}.decode.rank0.json.gz", f"{stem}.decode.rank1.json.gz"]


def _failing_rank_worker(rank: int, world: int, port: int, folder: str, rcs) -> None:
    """Rank 1's step raises during the warm-up and its process stays alive (as a wedged rank would) until rank 0
    has returned, or for at most 60 s. Rank 0 notes whether rank 1 was still alive when it returned: if it was,
    rank 0 gave up by its own timeout, not because rank 1 went away. (How long that takes: benchmarks/bench_failfast.py.)"""
    import time

    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    sys.path.insert(0, folder)
    rc = capture_cli.main(["run", "rankfail:steps", "--cpu", "--dist-timeout", "1.5", "--warmup", "1", "--repeats", "1",
                           "--active", "1", "--out", os.path.join(folder, "out")])
    if rank == 1:
        rcs[1] = (rc, None)
        for _ in range(600):  # without a timeout rank 0 would wait in the barrier for gloo's 30 minutes
            if 0 in rcs:
                break
            time.sleep(0.1)
        rcs["rank1_gone"] = True
    else:
        rcs[0] = (rc, not rcs.get("rank1_gone", False))


def test_failed_rank_makes_the_others_fail_not_hang(tmp_path, capfd):
    import torch.multiprocessing as mp

    (tmp_path / "rankfail.py").write_text(
        "import os, torch\n"
        "def steps():\n"
        "    def decode():\n"
        "        if os.environ['RANK'] == '1':\n"
        "            raise ValueError('boom on rank 1')\n"
        "        return torch.ones(4) + 1\n"
        "    return {'decode': decode}\n"
    )
    rcs = mp.get_context("spawn").Manager().dict()
    mp.start_processes(_failing_rank_worker, args=(2, free_port(), str(tmp_path), rcs), nprocs=2, join=True,
                       start_method="spawn")
    err = capfd.readouterr().err
    assert rcs[1][0] == 2 and "raised ValueError: boom on rank 1" in err
    rc0, rank1_alive = rcs[0]
    assert rc0 == 2 and rank1_alive, (rc0, rank1_alive)  # failed at the barrier while rank 1 still hung on
    assert "timed out" in err.lower()  # by the timeout, not by rank 1 closing its connections
    assert "gapscope: error: rank 0: barrier failed: another rank failed, hangs, or did not arrive" in err
    assert not (tmp_path / "out").exists() or _listing(tmp_path / "out") == []


# --------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("mode", ["eager", "graph", "compile"])
def test_demo_decode_on_gpu(tmp_path, capsys, mode):
    rc, _, err = _cli(["demo", "--size", "tiny", "--mode", mode, "--phase", "decode", "--out", str(tmp_path)], capsys)
    assert rc == 0, err
    m = load(str(tmp_path / f"demo-{mode}.decode.json.gz"), no_cache=True)
    assert m.gapscope_meta["cpu_only"] is False and m.gapscope_meta["device"]
    assert len(m.gpu_tracks()) >= 1
    names = {m.name(i) for i in range(m.n)}
    if mode == "graph":
        assert "cudaGraphLaunch" in names


# ------------------------------------------------------------------------- un-profiled timing (#14)
class FakeTime:
    """recorder's clock: perf_counter_ns advances only when a Timed step says so; the rest is the real time."""

    def __init__(self):
        import time as _t

        self._t = _t
        self.ns = 0

    def perf_counter_ns(self):
        return self.ns

    def __getattr__(self, name):
        return getattr(self._t, name)


class Timed:
    """A step that takes the next of ``durations_us`` on the fake clock (the last one repeats) and logs its calls."""

    def __init__(self, clock: FakeTime, durations_us, log: list | None = None, tag: str = ""):
        self.clock, self.durations, self.log, self.tag, self.calls = clock, list(durations_us), log, tag, 0

    def __call__(self):
        d = self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1
        self.clock.ns += int(d * 1000)
        if self.log is not None:
            self.log.append(self.tag)
        return torch.ones(2) + 1


def test_measure_all_interleaves_the_phases_and_keeps_their_spread(monkeypatch):
    from gapscope.capture import recorder

    clock = FakeTime()
    monkeypatch.setattr(recorder, "time", clock)
    log: list = []
    # warm-up takes the first duration of each step; then a: 10, 10, 10, 30 µs per sample (1 step),
    # b: 50 µs a step, 2 steps a sample -> 100 µs every time
    a = Timed(clock, [10, 10, 10, 10, 30], log, "a")
    b = Timed(clock, [50], log, "b")
    ts = capture.measure_all({"a": a, "b": b}, actives={"a": 1, "b": 2}, warmup=1, repeats=4, cuda=False)
    # warm-up of each, then rounds a b | b a | a b | b a (the order alternates)
    assert log == ["a", "b"] + ["a", "b", "b"] + ["b", "b", "a"] + ["a", "b", "b"] + ["b", "b", "a"]
    assert ts["a"].samples_ns == [10_000, 10_000, 10_000, 30_000] and ts["b"].samples_ns == [100_000] * 4
    sa, sb = ts["a"].stats(), ts["b"].stats()
    assert (sa["min_us"], sa["p25_us"], sa["median_us"], sa["p75_us"], sa["max_us"], sa["n"]) == (10, 10, 10, 15, 30, 4)
    assert sa["p75_over_p25"] == pytest.approx(1.5) and sa["max_over_min"] == pytest.approx(3.0)
    assert sa["noisy"] is True and sb["noisy"] is False
    assert sa["interleaved"] == ["a", "b"] and sa["budget_s"] is None


def test_measure_all_adds_rounds_within_the_budget(monkeypatch):
    from gapscope.capture import recorder

    clock = FakeTime()
    monkeypatch.setattr(recorder, "time", clock)
    a, b = Timed(clock, [5]), Timed(clock, [7])
    # budget far larger than 7 trivial rounds: max_rounds stops them; no budget: exactly `repeats`
    ts = capture.measure_all({"a": a, "b": b}, warmup=0, repeats=2, budget_s=60, max_rounds=7, cuda=False)
    assert [len(t.samples_ns) for t in ts.values()] == [7, 7] and ts["a"].budget_s == 60
    ts = capture.measure_all({"a": a, "b": b}, warmup=0, repeats=2, cuda=False)
    assert [len(t.samples_ns) for t in ts.values()] == [2, 2]
    # a budget already spent: the minimum rounds still run
    ts = capture.measure_all({"a": a}, warmup=0, repeats=3, budget_s=1e-9, max_rounds=50, cuda=False)
    assert len(ts["a"].samples_ns) == 3


def test_noisy_timing_goes_into_the_metadata_the_output_and_the_analysis(tmp_path, monkeypatch):
    from gapscope.capture import recorder
    from gapscope.analysis import analyze
    from gapscope.tui.panels import header_warnings

    clock = FakeTime()
    monkeypatch.setattr(recorder, "time", clock)
    # un-profiled samples 1000, 1000, 2000, 2000 µs (p25 1000, p75 2000: noisy); the window takes 3000 µs
    noisy = capture.measure(Timed(clock, [1000, 1000, 1000, 2000, 2000]), warmup=1, repeats=4, cuda=False)
    r = capture.record(Timed(clock, [3000]), name="noisy", out_dir=str(tmp_path), warmup=0, stacks=False,
                       quiet=True, timing=noisy, cuda=False)
    g = load(r.path, no_cache=True).gapscope_meta
    u = g["unprofiled"]
    assert (u["min_us"], u["p25_us"], u["median_us"], u["p75_us"], u["max_us"], u["n"]) == (1000, 1000, 1500, 2000, 2000, 4)
    assert g["timing_noisy"] is True and u["noisy"] is True
    assert g["unprofiled_us"] == 1500 and g["distortion"] == pytest.approx(2.0)
    ds = g["distortion_spread"]
    assert (ds["vs_min"], ds["vs_p25"], ds["vs_median"], ds["vs_p75"], ds["vs_max"]) == pytest.approx((3, 3, 2, 1.5, 1.5))
    assert "vary 2.00x" in r.line() and "distortion uncertain (1.50x-3.00x" in r.line()

    a = analyze(load(r.path, no_cache=True))
    d = a.distortion
    assert d["ratio_low"] == pytest.approx(1.5) and d["ratio_high"] == pytest.approx(3.0)
    assert d["unprofiled_n"] == 4 and d["timing_noisy"] is True
    warn = [w for w in a.warnings if w.startswith("times on this node vary 2.0x; distortion uncertain")]
    assert len(warn) == 1 and "1.50x–3.00x" in warn[0]
    from types import SimpleNamespace

    assert warn[0] in header_warnings(SimpleNamespace(model=a.model, analysis=a))

    # steady samples: no flag, no warning, no extra line
    steady = capture.measure(Timed(clock, [1000]), warmup=1, repeats=4, cuda=False)
    r2 = capture.record(Timed(clock, [3000]), name="steady", out_dir=str(tmp_path), warmup=0, stacks=False,
                        quiet=True, timing=steady, cuda=False)
    assert r2.metadata["timing_noisy"] is False and "\n" not in r2.line()
    a2 = analyze(load(r2.path, no_cache=True))
    assert a2.distortion["timing_noisy"] is False and a2.distortion["ratio_low"] == pytest.approx(3.0)
    assert not any(w.startswith("times on this node vary") for w in a2.warnings)

    # a trace recorded before the spread was kept reads as before
    old = ROOT / "traces" / "demo-eager-tp.decode.rank0.json.gz"
    if old.exists():
        m = load(str(old), no_cache=True)
        assert "unprofiled" not in m.gapscope_meta
        a3 = analyze(m)
        assert set(a3.distortion) == {"profiled_us", "unprofiled_us", "ratio"}
        assert not any(w.startswith("times on this node vary") for w in a3.warnings)
