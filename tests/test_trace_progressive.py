"""A progressive load (a preview of the window's beginning, progress reports, then the full model) ends with
exactly the model of a plain load; the preview holds only events of the full model, covers the beginning of
every track of a trace in Kineto's order, and never reaches the analysis; the explorer shows it, then the full
screen. Small thresholds (pieces of 64 KB, probes 32 KB apart) give many pieces on small traces."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os

import numpy as np
import pytest

from gapscope.analysis import analyze
from gapscope.trace import parallel, progressive, read, reader
from tests.helpers import assert_same_model
from gapscope.trace.model import TrackKind

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces",
                      "demo-eager.decode.json.gz")

pytestmark = pytest.mark.skipif(parallel._orjson is None or not hasattr(os, "fork"), reason="needs orjson and fork")


def same_model(a, b):
    """A full model on both sides, equal column for column and table for table."""
    assert_same_model(a, b)
    assert a.n == b.n and not a.partial and not b.partial


def track_key(t):
    return (t.kind.value, t.pid, t.tid, t.device, t.stream)


def event_keys(m) -> list[tuple]:
    """(track key, start, duration, kind, name) of every event, in the model's order: comparable across models
    whose track and name ids differ."""
    tk = [track_key(t) for t in m.tracks]
    return [(tk[tr], t, d, k, m.names[nm]) for tr, t, d, k, nm in
            zip(m.track.tolist(), m.ts_ns.tolist(), m.dur_ns.tolist(), m.kind.tolist(), m.name_id.tolist())]


@pytest.fixture
def small(monkeypatch):
    """Many pieces on both sides of the split, a preview of a few probes' worth."""
    monkeypatch.setattr(reader, "CHUNK", 64 << 10)
    monkeypatch.setattr(parallel, "PARALLEL_MIN", 1)
    monkeypatch.setattr(parallel, "_cpus", lambda: 2)
    monkeypatch.setattr(progressive, "PREVIEW_MIN", 1)
    monkeypatch.setattr(progressive, "HEAD", 96 << 10)
    monkeypatch.setattr(progressive, "MIN_STEP", 32 << 10)
    monkeypatch.setattr(progressive, "PROBES", 4096)
    monkeypatch.setattr(progressive, "BUDGET", 1 << 20)


def kineto_order(steps: int = 40, per_step: int = 60) -> dict:
    """A trace laid out as Kineto writes one: the cpu_op ranges (each step's run, sorted by time), then every
    python_function frame, then the runtime calls with their kernels and flows interleaved by time, then the
    metadata (thread names) last."""
    cpu, py, gpu = [], [], []
    t = 1000.0
    corr = 1
    for s in range(steps):
        cpu.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t,
                    "dur": per_step * 10.0})
        for i in range(per_step):
            t0 = t + i * 10.0
            py.append({"ph": "X", "cat": "python_function", "name": f"model.py({i % 7}): f{i % 5}", "pid": 1,
                       "tid": 1, "ts": t0 + 0.1, "dur": 8.0, "args": {"Python id": corr, "Python parent id": 0}})
            cpu.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm" if i % 2 else "aten::add", "pid": 1,
                        "tid": 1, "ts": t0 + 0.5, "dur": 6.0, "args": {"External id": corr}})
            gpu.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                        "ts": t0 + 1.0, "dur": 3.0, "args": {"correlation": corr, "External id": corr}})
            gpu.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": t0 + 1.0})
            gpu.append({"ph": "X", "cat": "kernel", "name": f"gemm_{i % 3}", "pid": 0, "tid": 7 + i % 2,
                        "ts": t0 + 5.0, "dur": 2.0 + i % 4,
                        "args": {"correlation": corr, "device": 0, "stream": 7 + i % 2, "External id": corr}})
            gpu.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7 + i % 2,
                        "ts": t0 + 5.0, "bp": "e"})
            corr += 1
        t += per_step * 10.0 + (50.0 if s % 3 else 400.0)
    meta = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "python main"}},
            {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU"}],
            "traceEvents": cpu + py + gpu + meta, "traceName": "kineto-order"}


def progressive_load(path, previews: list, reports: list):
    def first():
        previews.append(progressive.preview(str(path)))

    return read.load_uncached(str(path), progress=reports.append, first=first)


@pytest.fixture(scope="module")
def sample_doc():
    with gzip.open(SAMPLE, "rb") as f:
        return json.loads(f.read())


@pytest.mark.parametrize("which", ["sample", "kineto"])
@pytest.mark.parametrize("split", [True, False], ids=["two-processes", "one-process"])
def test_progressive_load_ends_with_the_full_model(tmp_path, monkeypatch, small, sample_doc, which, split):
    doc = sample_doc if which == "sample" else kineto_order()
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(doc, indent=1).encode())
    if not split:
        monkeypatch.setattr(parallel, "PARALLEL_MIN", None)
    previews, reports = [], []
    prog = progressive_load(p, previews, reports)
    monkeypatch.setattr(parallel, "PARALLEL_MIN", None)
    monkeypatch.setattr(reader, "CHUNK", 8 << 20)  # the plain load: one process, pieces of the default size
    full = read.load_uncached(str(p))
    same_model(prog, full)
    # the reports: many, bytes never going back, ending with every byte and the building phase
    reading = [r for r in reports if r.phase == "reading"]
    assert len(reading) >= 10
    assert all(a.done <= b.done for a, b in zip(reading, reading[1:]))
    assert reading[-1].done <= reports[-1].done == reports[-1].total == os.path.getsize(p)
    assert reports[-1].phase == "building" and reports[-1].events >= full.n
    # the preview: a partial model of events the full model holds, fewer of them
    (pv,) = previews
    assert pv is not None and pv.partial and 0 < pv.n < full.n
    have = set(event_keys(full))
    assert all(k in have for k in event_keys(pv))


def test_preview_covers_the_beginning_of_every_run(tmp_path, small):
    """Kineto order: the GPU lanes' first events sit far past the file's head; the preview still has the first
    events of every track (the CPU thread, both streams), not only what the file's first bytes hold."""
    doc = kineto_order()
    p = tmp_path / "t.json"
    raw = json.dumps(doc, indent=1).encode()
    p.write_bytes(raw)
    first_kernel = raw.find(b'"cat": "kernel"')
    assert first_kernel > 4 * progressive.HEAD  # what the file's first bytes cannot show
    full = read.load_uncached(str(p))
    pv = progressive.preview(str(p))
    assert pv.n < full.n // 4  # a preview, not the trace
    got = set(event_keys(pv))
    keys = event_keys(full)
    off = full.track_offsets
    for t in full.tracks:
        a, b = int(off[t.id]), int(off[t.id + 1])
        if b > a:
            assert keys[a] in got, t.name  # the track's first event
    assert {t.kind for t in pv.tracks} >= {TrackKind.CPU, TrackKind.GPU}
    gpu = [t for t in pv.tracks if t.kind is TrackKind.GPU]
    assert {t.stream for t in gpu} == {7, 8}


def test_preview_of_a_file_too_small_or_gzip_is_none(tmp_path, sample_doc):
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(sample_doc).encode())
    assert progressive.preview(str(p)) is None  # under PREVIEW_MIN: it loads in about a second
    assert progressive.preview(SAMPLE, min_size=0) is None  # gzip: the whole file must be inflated first
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"not a trace" * 1000)
    assert progressive.preview(str(bad), min_size=0) is None


def test_a_preview_is_never_analysed(tmp_path, small):
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(kineto_order()).encode())
    pv = progressive.preview(str(p))
    with pytest.raises(ValueError, match="partial"):
        analyze(pv)


def test_progress_text():
    from gapscope.tui.progress import bar_text
    from gapscope.trace.progressive import LoadProgress

    t = bar_text(LoadProgress(250_000_000, 1_000_000_000, 812_345, "reading"), "big.json", 120, ascii=True)
    assert t.startswith("loading big.json ") and "250 MB of 1,000 MB, 812,345 events" in t
    bar = t.split(" ")[2]
    assert bar.count("#") * 3 == bar.count("-")  # a quarter of the bar
    assert "sorting and linking 3.27M events" in bar_text(LoadProgress(1, 1, 3_272_087, "building"), "b", 80)
    assert bar_text(None, "b", 80, phase="analysing").startswith("finding gaps in b")
    assert bar_text(None, "b", 80) == "loading b ... (Esc cancels)"  # before the first report


def tiled(copies: int = 4, steps: int = 2) -> dict:
    """benchmarks/gen_big.py's layout: whole copies of a Kineto-order trace one after another in the file, each
    shifted in time past the previous one (its CPU ops, then its frames, then its runtime calls and kernels)."""
    base = kineto_order(steps=steps)
    timed = [e for e in base["traceEvents"] if e["ph"] != "M"]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1000.0
    out = []
    for c in range(copies):
        for e in timed:
            e = dict(e, ts=e["ts"] + c * span)
            if "args" in e:
                e["args"] = {k: (v + c * 100_000 if isinstance(v, int) and k != "stream" and k != "device" else v)
                             for k, v in e["args"].items()}
            if "id" in e:
                e["id"] = e["id"] + c * 100_000
            out.append(e)
    return dict(base, traceEvents=out + [e for e in base["traceEvents"] if e["ph"] == "M"])


@pytest.mark.parametrize("layout", ["kineto", "tiled"])
def test_known_end_bounds_what_the_preview_holds(tmp_path, monkeypatch, small, layout):
    """Every event of the file that starts before the preview's known end is in the preview, on Kineto's order
    and on a tiled file (whose next copy's CPU ops follow the head while its frames and kernels lie further)."""
    doc = kineto_order() if layout == "kineto" else tiled()
    p = tmp_path / "t.json"
    raw = json.dumps(doc, indent=1).encode()
    p.write_bytes(raw)
    if layout == "tiled":  # the head ends in the second copy's CPU ops; no probe past it (one every 1 MB)
        second_frames = raw.find(b'"python_function"', raw.find(b'"ProfilerStep#1"', raw.find(b'"ProfilerStep#1"') + 1))
        monkeypatch.setattr(progressive, "HEAD", second_frames - 4096 - raw.find(b"["))
        monkeypatch.setattr(progressive, "MIN_STEP", 1 << 20)
    pv = progressive.read_preview(str(p))
    full = read.load_uncached(str(p))
    assert pv.model.partial and 0 < pv.decoded < pv.size == os.path.getsize(p)
    k = pv.known_end_ns
    assert k is not None and full.window_ns()[0] < k < full.window_ns()[1]
    got = set(event_keys(pv.model))
    before = [key for key, t in zip(event_keys(full), full.ts_ns.tolist()) if t < k]
    assert len(before) > 100 and all(key in got for key in before)


def test_provisional_gaps_are_the_full_loads_inside_the_known_span(tmp_path, small):
    """The provisional analysis (the explorer's only way to analyse a preview) lists only gaps that end before
    the known end, each one a gap of the full trace with the same times and cause; ``analyze`` still refuses. The
    numbers are data (``ProvisionalGaps``) over a plain ``Analysis`` of the preview's model, not an analysis of
    their own."""
    from gapscope.analysis import Analysis
    from gapscope.tui.loadstate import AnalysisState, ProvisionalGaps
    from gapscope.tui.progress import provisional_analysis

    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(kineto_order(steps=60), indent=1).encode())
    pv = progressive.read_preview(str(p))
    a = provisional_analysis(pv)
    assert isinstance(a, ProvisionalGaps) and len(a.gaps) > 10 and not a.carried
    assert type(a.source) is Analysis and a.gaps is a.source.gaps and a.model is pv.model
    with pytest.raises(ValueError, match="partial"):
        analyze(pv.model)
    g = a.gaps
    n = len(g)
    assert int(max(g.end_ns[:n])) <= pv.known_end_ns
    assert a.provisional_note.startswith("provisional: first ") and "% read" in a.provisional_note
    st = AnalysisState.provisional_of(a)
    assert st.status == "provisional" and st.source is a and st.gaps is a.gaps and not st.ready
    assert st.provisional_note == a.provisional_note and st.in_progress
    assert st.plan is None and st.projection is None and st.findings == [] and st.final is None
    full = analyze(read.load_uncached(str(p)))
    fg = full.gaps
    have = {(int(d), int(s), int(e)): int(c) for d, s, e, c in zip(fg.device[:len(fg)], fg.start_ns[:len(fg)],
                                                                  fg.end_ns[:len(fg)], fg.cause[:len(fg)])}
    for d, s, e, c in zip(g.device[:n], g.start_ns[:n], g.end_ns[:n], g.cause[:n]):
        assert have.get((int(d), int(s), int(e))) == int(c)


def test_only_the_explorer_reaches_the_provisional_analysis():
    """The provisional path (an analysis of a preview) is the explorer's: no module outside tui/ names it (the
    report, the commands and the analysis go through ``analyze``, which refuses a partial model)."""
    from tests.helpers import ROOT

    names = ("provisional_analysis", "ProvisionalGaps", "provisional_window", "carry_provisional")
    users = sorted(str(p.relative_to(ROOT)) for top in ("tui", "gapscope") for p in (ROOT / top).rglob("*.py")
                   if any(n in p.read_text() for n in names))
    assert users and all(u.startswith("tui/") for u in users), users


def _analysis_state(a) -> dict:
    """What an analysis holds, comparable between two of the same model: its attributes' names, its gap table,
    devices, window, warnings, findings (and their gap rows), job and cross-rank inputs."""
    g = a.gaps
    return {"vars": sorted(k for k in vars(a) if k not in ("_details", "_holders")),
            "gaps": {k: getattr(g, k).tolist() for k in ("order", "device", "start_ns", "end_ns", "cause", "next_idx",
                                                         "launch_idx", "thread", "t_launch_ns")},
            "breakdown": {k: v.tolist() for k, v in g.breakdown.items()},
            "devices": [(d.device, d.window_start_ns, d.window_end_ns, d.idle_ns) for d in a.devices],
            "window": (a.window.mode, a.window.clipped, sorted(a.window.device.items())),
            "warnings": list(a.warnings), "alerts": [(w.kind, w.text) for w in a.alerts],
            "findings": [(f.id, f.title, f.severity, f.idle_ns, np.asarray(getattr(f, "gap_rows", ()), np.int64).tolist())
                         for f in a.findings],
            "job": (a.job, a.cross_rank, a.late_rank_note)}


def test_gaps_first_is_a_plain_analysis():
    """``analyze_gaps_first`` hands the analysis over once its gaps are classified and before its findings exist
    (the explorer lists them meanwhile), and returns what a plain ``analyze`` returns: the same attributes, gaps,
    warnings and findings, no job."""
    from gapscope.tui.loading import analyze_gaps_first
    from gapscope.trace import load

    m = load(SAMPLE, no_cache=True)
    seen = []

    def classified(a):
        seen.append((a, "findings" in vars(a), {k: getattr(a.gaps, k).copy() for k in ("start_ns", "cause")}))

    a = analyze_gaps_first(m, classified)
    assert len(seen) == 1 and seen[0][0] is a and seen[0][1] is False  # handed over before the findings
    assert seen[0][2]["start_ns"].tolist() == a.gaps.start_ns.tolist() and len(a.gaps) > 10
    plain = analyze(m)
    assert _analysis_state(a) == _analysis_state(plain)
    assert a.findings and a.job is None


def _full_of(pv_model, full_model, e: int) -> tuple:
    """(track key, start, duration, kind, name) of event ``e`` of ``pv_model``, and of the same index in
    ``full_model``: a preview's index read against the full model names another event."""
    def key(m, i):
        return (track_key(m.tracks[int(m.track[i])]), int(m.ts_ns[i]), int(m.dur_ns[i]), int(m.kind[i]),
                m.names[int(m.name_id[i])])

    return key(pv_model, e), key(full_model, e)


@pytest.mark.parametrize("gaps_first", [False, True], ids=["analysis-whole", "gaps-first"])
def test_explorer_shows_the_preview_then_the_full_screen(tmp_path, monkeypatch, small, gaps_first):
    """Under run_test: the preview's lanes with the bar under the header (export off) and a provisional gap list
    (so said in the header, the list's title and the bar), then the full model with the provisional list still
    listed (its events the full model's: no gap of it points at a preview's index), then (gaps first: a large
    trace) the full gaps while the findings are built, then the full analysis, the bar gone: the model, the gaps,
    their order, the gap selected and the findings exactly those of a plain load."""
    from gapscope.tui import loading
    from gapscope.tui import progress as ui
    from gapscope.tui.app import GapscopeApp
    from gapscope.tui.loading import Loader
    from gapscope.tui.panels import stack_text
    from gapscope.tui.scene import Scene
    from gapscope.tui.textdump import screen_text

    import threading

    from gapscope.analysis import core

    listed = threading.Event()
    if gaps_first:  # the path of a large trace: gaps, then the findings, then the projection
        monkeypatch.setattr(loading, "PROJECT_FIRST_EVENTS", 1)
        build = core.build_findings

        def slow_findings(a):  # the findings of a large trace take seconds: they come after the gaps are listed
            if not a.model.partial:
                listed.wait(30)
            return build(a)

        monkeypatch.setattr(core, "build_findings", slow_findings)

    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(kineto_order(steps=60)).encode())
    seen = {}
    orig = GapscopeApp.replace_preview
    orig_prov = Loader.provisional

    def prov(self, sc, pv):
        seen["known"] = pv.known_end_ns
        orig_prov(self, sc, pv)

    def spy(app, scene):
        # the moment the full scene arrives, the preview is on screen
        seen["partial"] = app.scene.model.partial
        seen["bar"] = ui.bar(app) is not None
        seen["export"] = app.main.check_action("export", ())
        sc = app.scene
        seen["gaps"] = int(sc.gaps.order.size)
        seen["ends"] = int(sc.gaps.end.max()) if sc.gaps.order.size else None
        seen["header"] = app.main.query_one("#header").render().plain
        seen["screen"] = screen_text(app)
        orig(app, scene)

    async def go():
        app = GapscopeApp([str(p)], load_opts={"no_cache": True})
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                await app.workers.wait_for_complete()
                await pilot.pause()
                if app.scene is not None and app.scene.any_analysis and ui.bar(app) is None:
                    break
            return app, screen_text(app)

    orig_carried = GapscopeApp.replace_preview

    def spy_full(app, scene):
        spy(app, scene)
        sc = app.scene  # the full scene, the provisional list carried onto it
        st = sc.state
        a = st.provisional
        seen["carried"] = (st.status, a is not None and a.carried and sc.analysis is a and a.model is sc.model,
                           st.provisional_note, st.plan, st.projection, st.findings, st.stacks)
        seen["carried_gaps"] = [(int(sc.gaps.start[i]), int(sc.gaps.end[i]), int(sc.gaps.cause[i]))
                                for i in sc.gaps.order.tolist()]
        seen["carried_export"] = app.main.check_action("export", ())
        src, g = a.source, a.gaps
        seen["moved"] = int((g.next_idx != src.gaps.next_idx).sum())
        seen["same_events"] = [_full_of(src.model, sc.model, int(e))[0] == _full_of(sc.model, sc.model, int(f))[0]
                               for e, f in zip(src.gaps.next_idx.tolist(), g.next_idx.tolist()) if e >= 0]
        seen["thread"], seen["frames"] = [], []
        for row in np.flatnonzero(src.gaps.thread >= 0).tolist():
            d, d0 = a.gap_detail(row), src.gap_detail(row)
            seen["thread"].append((track_key(sc.model.tracks[d.thread_track]),
                                   track_key(src.model.tracks[d0.thread_track])))
            seen["frames"] += [(f.name, _full_of(sc.model, sc.model, f.event)[0][4])
                               for f in d.idle_stack + d.stack + d.launch_stack if f.event >= 0]
        seen["stack_text"] = str(stack_text(sc, app.glyphs))

    orig_install = GapscopeApp._install_analysis

    def spy_install(app, sc, ev):
        if getattr(ev, "merged", None) is not None:  # the gaps merged in the load thread, for these analyses
            seen.setdefault("premerged", []).append(type(ev).__name__)
        orig_install(app, sc, ev)
        if sc.state.status == "pending":
            st = sc.state
            seen.setdefault("pending", (sc.model.partial, st.findings, st.projection, st.plan, st.findings_note,
                                        sc.gaps.order.tolist(), sc.gaps.selected,
                                        app.main.check_action("export", ())))
            listed.set()

    monkeypatch.setattr(GapscopeApp, "replace_preview", spy_full)
    monkeypatch.setattr(GapscopeApp, "_install_analysis", spy_install)
    monkeypatch.setattr(Loader, "provisional", prov)
    app, final = asyncio.run(go())
    assert seen["partial"] is True and seen["bar"] is True and seen["export"] is None
    assert seen["gaps"] > 0 and seen["ends"] <= seen["known"]
    assert "provisional: first " in seen["header"]
    assert seen["screen"].count("provisional: first ") >= 2  # the header and the gap list's title (or the bar)
    assert "loading t.json" in seen["screen"] or "building the model" in seen["screen"]
    # the full model came with the provisional list, on its own events (the preview's indices are others')
    status, carried, note, *nothing = seen["carried"]
    assert status == "provisional" and carried and note.startswith("provisional: first ")
    assert nothing == [None, None, [], None]  # no plan, projection, findings nor stack index of a carried list
    assert seen["carried_export"] is None
    assert seen["moved"] > 0 and seen["same_events"] and all(seen["same_events"])
    assert seen["thread"] and all(a == b for a, b in seen["thread"])
    assert seen["frames"] and all(a == b for a, b in seen["frames"])
    assert "no detail" not in seen["stack_text"] and "cause: " in seen["stack_text"]
    sc = app.scene
    assert not sc.model.partial and sc.any_analysis and sc.gaps.order.size > 0
    assert "provisional" not in final and "loading t.json" not in final
    assert sc.state.status == "ready" and sc.state.final is sc.analysis and sc.state.provisional_note is None
    plain = read.load_uncached(str(p))
    same_model(sc.model, plain)
    ref = Scene(str(p), plain)
    a = analyze(plain)
    if not gaps_first:
        a.plan  # noqa: B018 - a small trace's projection and plan come before its analysis is shown
    ref.set_analysis(a, sc.part.min_listed_ns)
    for col in ("part", "row", "start", "end", "dur", "cause", "device", "order", "all_listed"):
        assert getattr(sc.gaps, col).tolist() == getattr(ref.gaps, col).tolist(), col
    assert sc.gaps.selected == ref.gaps.selected
    assert [(f.id, f.title) for f in sc.analysis.findings] == [(f.id, f.title) for f in a.findings]
    assert type(sc.analysis) is type(a)
    # (the screen asked for more of its tables than the reference did: every attribute but those)
    assert dict(_analysis_state(sc.analysis), vars=None) == dict(_analysis_state(a), vars=None)
    # every provisional gap is one of the full list's, same times and cause
    full = {(int(ref.gaps.start[i]), int(ref.gaps.end[i]), int(ref.gaps.cause[i])) for i in ref.gaps.order.tolist()}
    assert seen["carried_gaps"] and set(seen["carried_gaps"]) <= full
    if gaps_first:  # the full gaps listed while the findings were built: the final list, no findings, no export
        partial, findings, pj, plan, note, order, selected, export = seen["pending"]
        assert not partial and findings == [] and pj is None and plan is None and export is None
        assert note == "findings: being built"
        assert order == sc.gaps.order.tolist() and selected == sc.gaps.selected
        assert seen.get("premerged") == ["GapsReady"]  # merged in the load thread, the final columns above
    else:
        assert "pending" not in seen


def _held_preview(tmp_path, monkeypatch):
    """A trace the explorer previews, then reads only once ``gate`` is set (the keys pressed meanwhile): (path,
    gate)."""
    import threading

    from gapscope.tui.loading import Loader

    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(kineto_order(steps=60)).encode())
    gate = threading.Event()
    orig_show = Loader.show_preview

    def show(self, path):
        orig_show(self, path)
        gate.wait(60)  # the reader parses once the keys were pressed

    monkeypatch.setattr(Loader, "show_preview", show)
    return p, gate


@contextlib.asynccontextmanager
async def _previewing(p):
    """The explorer on ``p`` (not analysed), once it shows the preview: yields (app, pilot)."""
    from gapscope.tui.app import GapscopeApp

    app = GapscopeApp([str(p)], load_opts={"no_cache": True}, analyze=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):
            await pilot.pause()
            if app.scene is not None:
                break
        assert app.scene.model.partial
        yield app, pilot


def test_esc_on_the_preview_closes_the_search_box_then_cancels(tmp_path, monkeypatch, small):
    """Esc on the preview ends what is open first (the search box), as on any trace; the load goes on. Only an
    Esc with nothing else to end cancels the load."""
    p, gate = _held_preview(tmp_path, monkeypatch)
    seen = {}

    async def go():
        async with _previewing(p) as (app, pilot):
            await pilot.press("slash")
            await pilot.pause()
            box = app.main.search_keys.search_box()
            assert box is not None and box.has_class("-on")
            await pilot.press("escape")
            await pilot.pause()
            seen["closed"] = not box.has_class("-on")
            seen["running"] = not app.cancelled and app.is_running
            await pilot.press("escape")
            await pilot.pause()
            seen["cancelled"] = app.cancelled
            gate.set()
        seen["rc"] = app.return_code

    asyncio.run(go())
    assert seen == {"closed": True, "running": True, "cancelled": True, "rc": 130}


def test_keys_work_on_the_preview_and_the_full_scene_keeps_the_view(tmp_path, monkeypatch, small):
    """Zoom and pan on the preview while the trace is read (the load held until the keys are in): the full scene
    opens where the person was, not on the whole window."""
    from gapscope.tui.app import GapscopeApp

    p, gate = _held_preview(tmp_path, monkeypatch)
    seen = {}
    orig = GapscopeApp.replace_preview

    def spy(app, scene):
        orig(app, scene)
        seen["after"] = (app.scene.view.t0, app.scene.view.t1, app.scene.model.partial)

    monkeypatch.setattr(GapscopeApp, "replace_preview", spy)

    async def go():
        async with _previewing(p) as (app, pilot):
            v = app.scene.view
            whole = (v.t0, v.t1)
            for k in ("w", "w", "d"):
                await pilot.press(k)
            seen["preview"] = (v.t0, v.t1)
            assert seen["preview"] != whole and v.span < (whole[1] - whole[0]) // 3
            gate.set()
            for _ in range(400):
                await app.workers.wait_for_complete()
                await pilot.pause()
                if "after" in seen:
                    break

    asyncio.run(go())
    assert seen["after"] == (*seen["preview"], False)


@pytest.mark.parametrize("gaps_first", [False, True], ids=["analysis-whole", "gaps-first"])
def test_the_gap_picked_on_the_provisional_list_stays_picked(tmp_path, monkeypatch, small, gaps_first):
    """A gap picked on the preview's provisional list (`n`) is still the one selected on the full model (the list
    carried onto it) and once the full gaps are in (another list, the same gap by its times), and the view the
    person had stays."""
    from gapscope.tui import loading
    from gapscope.tui.app import GapscopeApp
    if gaps_first:
        monkeypatch.setattr(loading, "PROJECT_FIRST_EVENTS", 1)
    p, gate = _held_preview(tmp_path, monkeypatch)
    seen = {}
    orig = GapscopeApp.replace_preview

    def spy(app, scene):
        orig(app, scene)
        sc = app.scene
        seen["carried"] = (sc.state.status == "provisional" and sc.state.provisional.carried,
                           sc.gaps.span(sc.gaps.selected_gap))

    monkeypatch.setattr(GapscopeApp, "replace_preview", spy)

    async def go():
        app = GapscopeApp([str(p)], load_opts={"no_cache": True})
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(400):
                await pilot.pause()
                if app.scene is not None and app.scene.any_analysis:
                    break
            sc = app.scene
            assert sc.model.partial and sc.gaps.order.size > 3
            for _ in range(3):
                await pilot.press("n")
            await pilot.pause()
            seen["picked"] = (sc.gaps.selected, sc.gaps.span(sc.gaps.selected_gap))
            seen["view"] = (sc.view.t0, sc.view.t1)
            gate.set()
            for _ in range(400):
                await app.workers.wait_for_complete()
                await pilot.pause()
                if not app.scene.model.partial and app.scene.state.ready:
                    break
            sc = app.scene
            seen["final"] = (type(sc.state.final).__name__, sc.gaps.span(sc.gaps.selected_gap),
                             (sc.view.t0, sc.view.t1))

    asyncio.run(go())
    assert seen["picked"][0] > 0  # moved off the list's first gap
    assert seen["carried"] == (True, seen["picked"][1])
    assert seen["final"] == ("Analysis", seen["picked"][1], seen["view"])


def test_findings_that_fail_after_the_gaps_leave_no_pending_list(monkeypatch):
    """A large trace's gaps are listed before its findings; when the findings then fail, the explorer ends as a
    plain load whose analysis failed: no gaps listed, the error said (not a list left waiting for findings)."""
    from gapscope.analysis import core
    from gapscope.tui import loading
    from gapscope.tui.app import GapscopeApp

    monkeypatch.setattr(loading, "PROJECT_FIRST_EVENTS", 1)

    import threading

    listed = threading.Event()

    def boom(a):
        listed.wait(30)  # once the gaps are on screen
        raise RuntimeError("findings broke")

    monkeypatch.setattr(core, "build_findings", boom)
    seen = {}
    orig = GapscopeApp._install_analysis

    def spy(app, sc, ev):
        orig(app, sc, ev)
        seen.setdefault("listed", int(sc.gaps.order.size))
        listed.set()

    monkeypatch.setattr(GapscopeApp, "_install_analysis", spy)

    async def go():
        app = GapscopeApp([SAMPLE], load_opts={"no_cache": True})
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(400):
                await app.workers.wait_for_complete()
                await pilot.pause()
                if app.scene is not None and app.scene.analysis_error:
                    break
            sc = app.scene
            seen["status"] = sc.state.status
            seen["final"] = (sc.analysis, int(sc.gaps.order.size), sc.analysis_error,
                             app.main.check_action("export", ()))

    asyncio.run(go())
    assert seen["listed"] > 0
    a, listed, err, export = seen["final"]
    assert a is None and listed == 0 and "findings broke" in err and export is True
    assert seen["status"] == "failed"


def test_gaps_merged_in_the_load_thread_are_the_screens_merge():
    """``Scene.premerge`` (the load thread's) installs exactly the columns, rows and covers a merge on the screen's
    thread makes; a merge made of another analysis (or before another part's came) is not used."""
    from gapscope.tui.scene import Scene

    plain = read.load_uncached(SAMPLE)
    a, other = analyze(plain), analyze(plain)
    ref = Scene(SAMPLE, plain)
    ref.set_analysis(a, 2000)
    cols = ("part", "row", "start", "end", "dur", "cause", "device", "order", "all_listed")

    def state(sc):
        return ({c: getattr(sc.gaps, c).tolist() for c in cols}, sc.gaps.selected, sc.gaps.window,
                {k: (ln.segs.starts.tolist(), ln.segs.ends.tolist(), ln.segs.ref.tolist())
                 for k, ln in sc.gaps.lanes.items()}, sorted(sc.gaps.cover), len(sc.display.rows()))

    sc = Scene(SAMPLE, plain)
    merged = sc.premerge(0, a, 2000)
    assert merged.gaps.largest_first.size > 1 and sc.gaps.order.size == 0  # the scene is not touched
    sc.set_analysis(a, 2000, 0, merged)
    assert state(sc) == state(ref)
    assert all(sc.gaps.lanes[k] is merged.lanes[k] for k in merged.lanes)  # installed, not made again
    # of another analysis object, or another threshold: merged again from what is installed
    for wrong in (Scene(SAMPLE, plain).premerge(0, other, 2000), Scene(SAMPLE, plain).premerge(0, a, 10**9)):
        sc = Scene(SAMPLE, plain)
        sc.set_analysis(a, 2000, 0, wrong)
        assert state(sc) == state(ref)
        assert not any(sc.gaps.lanes[k] is wrong.lanes.get(k) for k in sc.gaps.lanes)


def test_pieces_are_small_only_while_the_screen_is_used(tmp_path, monkeypatch, small):
    """The parent's pieces: Meter.piece for ACTIVE_S after a load starts or a key (``touch``), the reader's own
    size otherwise; pieces of changing sizes still end with exactly the plain load's model."""
    import time

    monkeypatch.setattr(progressive.Meter, "piece", 16 << 10)
    meter = progressive.Meter(lambda r: None, 100)
    assert meter.piece_now() == 16 << 10  # a load starting: its first frames are drawn meanwhile
    monkeypatch.setattr(progressive, "_active_until", 0.0)
    assert meter.piece_now() == reader.CHUNK  # nobody at the keys
    progressive.touch()
    assert progressive._active_until > time.monotonic() and meter.piece_now() == 16 << 10
    monkeypatch.setattr(progressive.Meter, "piece", 1 << 30)
    assert meter.piece_now() == reader.CHUNK  # never past the reader's size
    doc = kineto_order()
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(doc, indent=1).encode())
    asked = []

    def sizes(self):
        asked.append(16 << 10 if len(asked) % 3 else reader.CHUNK)
        return asked[-1]

    monkeypatch.setattr(progressive.Meter, "piece_now", sizes)
    prog = progressive_load(p, [], [])
    assert len(set(asked)) == 2 and len(asked) >= 6
    monkeypatch.setattr(parallel, "PARALLEL_MIN", None)
    monkeypatch.setattr(reader, "CHUNK", 8 << 20)
    same_model(prog, read.load_uncached(str(p)))


def test_a_key_marks_the_screen_in_use(tmp_path, monkeypatch):
    """The explorer tells the reader on every key (gapscope/trace/progressive.py ``touch``)."""
    import time

    from gapscope.tui.app import GapscopeApp

    async def go():
        app = GapscopeApp([SAMPLE], load_opts={"no_cache": True})
        async with app.run_test(size=(100, 30)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            monkeypatch.setattr(progressive, "_active_until", 0.0)
            await pilot.press("d")
            await pilot.pause()
            return progressive._active_until

    assert asyncio.run(go()) > time.monotonic()
