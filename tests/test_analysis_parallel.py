"""The analysis on two cores (gapscope/analysis/forked.py): a ``parallel`` analysis gives the same JSON and Markdown as
the serial one on every sample trace and on a synthetic tiled one; a child that fails, dies or hangs leaves the
parent to compute its part (the same reports, nothing printed, no zombie left); the switch is the caller's."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from gapscope.analysis import analyze, core, forked
from gapscope.analysis import replay as replay_pkg
from gapscope.report import render_markdown, to_json_text
from gapscope.trace import load

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "traces").glob("*.json.gz"))


def reports(model, parallel: bool) -> tuple[str, str]:
    """The JSON and Markdown reports of one fresh analysis of ``model``."""
    a = analyze(model, parallel=parallel)
    assert a.parallel is parallel
    return to_json_text([a], top=50), render_markdown([a], 10)


def no_child_left() -> bool:
    """No child of this process, running or a zombie, once the analyses no longer referenced are gone (an analysis
    ends its child when it goes: Analysis' finalizer)."""
    import gc

    gc.collect()
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.fixture
def always(monkeypatch):
    """Fork whatever the trace's size (the cut-off is for speed only)."""
    monkeypatch.setenv("GAPSCOPE_ANALYSIS_PARALLEL", "always")


@pytest.fixture(scope="module")
def tiled_model(tmp_path_factory):
    """A synthetic trace: a sample tiled to ~3 MB by benchmarks/gen_big.py (fresh ids per copy)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gen_big
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    p = tmp_path_factory.mktemp("tiled") / "tiled.json"
    gen_big.generate(str(ROOT / "traces" / "demo-eager-sync.decode.json.gz"), str(p), 3 << 20)
    return load(str(p), no_cache=True)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name.split(".json")[0] for p in SAMPLES])
def test_parallel_reports_equal_serial_on_samples(path, always):
    m = load(str(path), no_cache=True)
    assert reports(m, True) == reports(m, False)
    assert no_child_left()


def test_parallel_reports_equal_serial_on_tiled(tiled_model, always, monkeypatch):
    js, md = reports(tiled_model, False)
    assert reports(tiled_model, True) == (js, md)
    monkeypatch.setenv("GAPSCOPE_ANALYSIS_PARALLEL", "1")
    monkeypatch.setattr(forked, "ANALYSIS_PARALLEL_MIN_EVENTS", tiled_model.ts_ns.size)  # the cut-off: just big enough
    assert reports(tiled_model, True) == (js, md)
    assert no_child_left()


def test_the_parallel_path_forks(tiled_model, always, monkeypatch):
    """The kernels' side's values, then the projection's start (the replay, calibrated) and the frames' what-ifs come
    from one child, sent one after the other; the fixes are the parent's. Without that child's answers (a projection
    made apart from the analysis' child), the frames' and the fixes' replays are shared between the parent and a second
    child."""
    parent = os.getpid()
    real_side, real_ahead, real_tasks = core._kernel_side, core._projection_ahead, forked.run_tasks
    real_result = forked.Forked.result
    answers, task_by = [], []

    def side(a):
        return dict(real_side(a), _pid=os.getpid())

    def ahead(a):
        got = real_ahead(a)
        return dict(got, _pid=os.getpid()) if got else got

    def result(self, i=0):
        got = real_result(self, i)
        if isinstance(got, dict) and "_pid" in got:
            answers.append((i, got["_pid"], got))
        return got

    def tasks(ts, par):
        def timed(t):
            time.sleep(0.02)  # long enough for the child to take some
            return os.getpid(), t()
        got = real_tasks([lambda t=t: timed(t) for t in ts], par)
        task_by.extend(p for p, _ in got)
        return [v for _, v in got]

    monkeypatch.setattr(core, "_kernel_side", side)
    monkeypatch.setattr(core, "_projection_ahead", ahead)
    monkeypatch.setattr(forked.Forked, "result", result)
    monkeypatch.setattr(replay_pkg, "run_tasks", tasks)
    js, md = reports(tiled_model, False)
    answers.clear(), task_by.clear()
    assert reports(tiled_model, True) == (js, md)
    side_by = [p for i, p, _ in answers if i == 0]
    ahead_by = [(p, got) for i, p, got in answers if i == 2]
    assert side_by and side_by[0] != parent  # the kernels' side: computed by a child
    assert ahead_by and ahead_by[0][0] == side_by[0]  # the frames' what-ifs: by the same child, after it
    assert ahead_by[0][1]["frames"]  # (the tiled trace has frames that qualify)
    assert not task_by  # the fixes: in the parent, no second child
    assert no_child_left()
    # a projection made without the child's answers: the replays shared with a second child, the same reports
    a = analyze(tiled_model, parallel=True)
    vars(a).pop("_side").close()
    assert to_json_text([a], top=50) == js
    assert parent in task_by and {p for p in task_by if p != parent}
    assert no_child_left()


def failing(how: str, parent: int):
    """What a child does instead of its work: raise (after printing), die, or hang."""
    if os.getpid() == parent:
        return
    if how == "raise":
        print("the child prints this")
        sys.stderr.write("and this\n")
        raise RuntimeError("child failed")
    if how == "die":
        os._exit(3)
    time.sleep(60)


@pytest.mark.parametrize("where", ["side", "start", "frames", "tasks"])
@pytest.mark.parametrize("how", ["raise", "die", "hang"])
def test_a_failing_child_leaves_the_work_to_the_parent(how, where, tiled_model, always, monkeypatch, capfd):
    """Whichever of the child's answers fails (the kernels' side, the projection's start, the frames' what-ifs; a
    task of the second child of a projection made without the first's answers), the parent computes it."""
    js, md = reports(tiled_model, False)
    parent = os.getpid()
    real = {"side": (core, "_kernel_side"), "start": (replay_pkg, "start_ahead"), "frames": (replay_pkg, "frame_task"),
            "tasks": (replay_pkg, "_finding_fix")}
    mod, name = real[where]
    fn = getattr(mod, name)

    def broken(*args):
        failing(how, parent)
        return fn(*args)

    monkeypatch.setattr(mod, name, broken)
    monkeypatch.setattr(forked, "CHILD_WAIT_MIN_S", 0.5)
    monkeypatch.setattr(forked, "CHILD_WAIT_FACTOR", 0.0)
    capfd.readouterr()
    t = time.perf_counter()
    if where == "tasks":  # the projection's replays shared with a second child: the first child's answers dropped
        a = analyze(tiled_model, parallel=True)
        vars(a).pop("_side").close()
        assert (to_json_text([a], top=50), render_markdown([a], 10)) == (js, md)
    else:
        assert reports(tiled_model, True) == (js, md)
    assert time.perf_counter() - t < 30  # a hung child was killed, not waited for
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert no_child_left()


def test_an_analysis_that_fails_reaps_its_child(tiled_model, always, monkeypatch):
    """An error in the parent after the fork (here: in the findings) ends the child before it propagates."""
    def boom(a):
        raise RuntimeError("findings failed")

    monkeypatch.setattr(core, "build_findings", boom)
    with pytest.raises(RuntimeError, match="findings failed"):
        analyze(tiled_model, parallel=True)
    assert no_child_left()


def test_run_tasks_failing_task_is_computed_by_the_parent(always):
    """A task that fails in the child is run again by the parent, which meets the same error."""
    parent = os.getpid()

    def bad():
        time.sleep(0.01)
        raise ValueError("bad task")

    tasks = [lambda: (time.sleep(0.01), 1)[1]] * 6 + [bad]
    with pytest.raises(ValueError, match="bad task"):
        forked.run_tasks(tasks, True)
    assert no_child_left()

    def child_only_fails():
        if os.getpid() != parent:
            raise KeyError("child")
        return "here"

    assert forked.run_tasks([child_only_fails] * 8, True) == ["here"] * 8
    assert no_child_left()


def test_the_switch(tiled_model, monkeypatch):
    """Off unless asked; asked, off below the cut-off and with GAPSCOPE_ANALYSIS_PARALLEL=0."""
    monkeypatch.delenv("GAPSCOPE_ANALYSIS_PARALLEL", raising=False)
    assert analyze(tiled_model).parallel is False
    monkeypatch.setattr(forked, "ANALYSIS_PARALLEL_MIN_EVENTS", tiled_model.ts_ns.size + 1)
    assert analyze(tiled_model, parallel=True).parallel is False
    monkeypatch.setattr(forked, "ANALYSIS_PARALLEL_MIN_EVENTS", tiled_model.ts_ns.size)
    assert analyze(tiled_model, parallel=True).parallel is (len(os.sched_getaffinity(0)) >= 2)
    monkeypatch.setenv("GAPSCOPE_ANALYSIS_PARALLEL", "0")
    assert analyze(tiled_model, parallel=True).parallel is False
    assert forked.run_tasks([os.getpid] * 4, False) == [os.getpid()] * 4


def test_the_report_command_asks_for_it(tmp_path, always):
    from gapscope.commands.report import analyses_for

    class Args:
        no_cache, max_size, whole_trace = True, None, False

    (a,) = analyses_for([str(SAMPLES[0])], Args())
    assert a.parallel is True
    a.projection  # the child's last answer taken: it is ended and reaped
    assert no_child_left()


def test_an_analysis_dropped_before_its_projection_reaps_its_child(tiled_model, always):
    """The child's last answer (the frames' what-ifs) is the projection's; an analysis never projected ends its child
    when it goes, whatever the child is doing then."""
    import gc

    a = analyze(tiled_model, parallel=True)
    assert a.parallel and a.findings is not None
    del a
    gc.collect()
    assert no_child_left()
