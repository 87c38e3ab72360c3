"""The explorer driven by key presses (Textual's Pilot) on synthetic and real traces."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from tests.synth import Synth
from tests.helpers.app import opened, run, settle, three_gaps
from tests.helpers import SCHEMA_PATH as SCHEMA
from gapscope.tui.app import GapscopeApp
from gapscope.tui.lanes import time_to_col
from gapscope.tui.navigate import event_under_cursor
from gapscope.tui.textdump import screen_text



def test_gap_keys_visit_gaps_by_size_and_stack_follows(tmp_path):
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p, size=(160, 48)) as (app, pilot):
            sc = app.scene
            assert sc.analysis is not None
            a = sc.analysis
            seen = []
            screens = []
            for key in (None, "n", "n", "N", "N"):
                if key:
                    await pilot.press(key)
                    await pilot.pause()
                row = sc.gaps.selected_row
                seen.append(int(a.gaps.dur_ns[row]))
                screens.append(screen_text(app))
                # the gap is on screen with context on both sides
                s, e, _ = sc.gaps.span(row)
                assert sc.view.t0 < s and e < sc.view.t1
                assert s - sc.view.t0 >= (e - s) // 2 and sc.view.t1 - e >= (e - s) // 2
                # the stack panel shows the stack of this gap
                det = a.gap_detail(row)
                py = [f.name for f in det.stack if f.kind == "python"]
                assert py, det.stack
                assert any(name.split(": ")[-1] in screens[-1] for name in py)
            assert seen == [500_000, 300_000, 100_000, 300_000, 500_000]
            assert "a_fn" in screens[0] and "b_fn" in screens[1] and "c_fn" in screens[2]
            # the gap list shows all three, largest first, with their next op (the kernel after each gap)
            rows = [ln for ln in screens[0].splitlines() if re.match(r"\s*[123]\s+\d", ln)]
            assert [r.split()[0] for r in rows] == ["1", "2", "3"], screens[0]
            assert ["500.0 µs", "300.0 µs", "100.0 µs"] == [" ".join(r.split()[1:3]) for r in rows]
            assert "k2" in rows[0] and "k1" in rows[1] and "ampere_sgemm" in rows[2]

    run(go())


def test_zoom_and_pan_keep_the_cursor_time(tmp_path):
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p) as (app, pilot):
            v = app.scene.view
            cur = v.cursor
            cw = app.lanes.cells_width()
            col = time_to_col(cur, v.t0, v.t1, cw)
            span = v.span
            await pilot.press("w")
            await pilot.pause()
            assert v.cursor == cur and v.span < span
            assert abs(time_to_col(cur, v.t0, v.t1, cw) - col) <= 1
            await pilot.press("s", "s")
            await pilot.pause()
            assert v.cursor == cur and v.span > span
            t0 = v.t0
            await pilot.press("d")
            await pilot.pause()
            assert v.cursor == cur and v.t0 > t0
            await pilot.press("a", "left")
            await pilot.pause()
            assert v.cursor == cur and v.t0 < t0
            await pilot.press("0")  # the analysed window: here the first kernel's start to the last one's end
            await pilot.pause()
            a = app.scene.analysis
            w0 = a.window_start_ns
            assert w0 == 5_000 and a.window_ns == 945_000 - 5_000
            assert v.t0 <= w0 and v.t1 >= w0 + a.window_ns and v.t1 - v.t0 <= a.window_ns * 1.03
            # the cursor moves by cells with H / L
            before = v.cursor
            await pilot.press("L")
            await pilot.pause()
            assert v.cursor > before

    run(go())


def test_search_finds_a_kernel_and_steps_through_matches(tmp_path):
    p = three_gaps(tmp_path, names=("gemm_a", "k1", "gemm_b", "k3"))

    async def go():
        async with opened(p) as (app, pilot):
            await pilot.press("slash")
            await pilot.press(*"gemm")
            await pilot.press("enter")
            await pilot.pause()
            sc = app.scene
            assert sc.search.matches.size == 2
            # the match nearest the cursor (issue 26): the cursor is at the largest gap's start (325 µs), gemm_a
            # starts 320 µs before it, gemm_b 500 µs after
            ev = event_under_cursor(app.scene, app.lanes.cells_width())
            assert ev >= 0 and app.scene.model.name(ev) == "gemm_a"
            assert sc.display.rows()[sc.display.cursor].lane.kind == "stream"
            assert "find 'gemm' 1/2: kernel gemm_a" in screen_text(app)
            # Enter hands the keys back (issue 15, defect 7): the box is closed, n / N step through the matches
            # and are not typed into the query
            box = app.query_one("#search")
            assert app.focused is app.lanes and not box.has_class("-on")
            await pilot.press("n")
            await pilot.pause()
            assert sc.model.name(event_under_cursor(app.scene, app.lanes.cells_width())) == "gemm_b"
            assert "find 'gemm' 2/2: kernel gemm_b" in screen_text(app)
            await pilot.press("N")
            await pilot.pause()
            assert sc.model.name(event_under_cursor(app.scene, app.lanes.cells_width())) == "gemm_a"
            assert box.value == "gemm" and sc.search.query == "gemm"
            # Escape ends the search; n goes back to walking gaps
            await pilot.press("escape")
            await pilot.pause()
            assert sc.search.query == ""
            await pilot.press("n")
            await pilot.pause()
            assert sc.gaps.selected == 1

    run(go())


def test_export_writes_report_and_svg_without_overwriting(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p) as (app, pilot):
            await pilot.press("e")
            await pilot.pause()
            first = list(app.last_export)
            await pilot.press("e")
            await pilot.pause()
            second = list(app.last_export)
            return first, second

    first, second = run(go())
    assert {Path(x).suffix for x in first} == {".md", ".json", ".svg"}
    assert not set(first) & set(second)
    for x in first + second:
        assert Path(x).parent == tmp_path and Path(x).stat().st_size > 0
    js = next(x for x in first if x.endswith(".json"))
    doc = json.loads(Path(js).read_text())
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    svg = Path(next(x for x in first if x.endswith(".svg"))).read_text()
    assert svg.lstrip().startswith("<svg") and "gapscope" in svg
    md = Path(next(x for x in first if x.endswith(".md"))).read_text()
    # the report of this trace: its name in the title, its three gaps largest first
    assert md.startswith("# gapscope report: three\\_gaps.json")  # Markdown-escaped
    sizes = re.findall(r"^\d+\. \*\*([^*]+)\*\* at", md, re.M)
    assert sizes == ["500.0 µs", "300.0 µs", "100.0 µs"], md


def test_export_falls_back_to_cwd_when_trace_folder_is_read_only(tmp_path, monkeypatch):
    import gapscope.tui.export as export

    ro = tmp_path / "ro"
    ro.mkdir()
    p = three_gaps(ro)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    real_access = os.access
    # root can write anywhere, so the read-only folder is simulated where the exporter asks
    monkeypatch.setattr(export.os, "access", lambda path, mode: False if os.path.abspath(path) == str(ro)
                        else real_access(path, mode))

    async def go():
        async with opened(p) as (app, pilot):
            await pilot.press("e")
            await pilot.pause()
            return list(app.last_export), screen_text(app)

    paths, txt = run(go())
    assert len(paths) == 3 and all(Path(x).parent == out for x in paths)
    assert not list(ro.glob("*.gapscope*"))
    assert "wrote" in txt  # the paths are shown


def test_markup_and_escape_sequences_in_names_render_literally(tmp_path):
    p = three_gaps(tmp_path, names=("[bold]", "[/x]", "\x1b[31mred", "[0]"), range_name="[0]", op_name="[/x]op",
                   fns=("[bold]fn", "x", "y"))

    async def go():
        async with opened(p, size=(160, 48)) as (app, pilot):
            txt = screen_text(app)
            await pilot.press("n")
            await pilot.pause()
            txt2 = screen_text(app)
            await pilot.press("slash", *"red", "enter", "escape", "enter")
            await pilot.pause()
            txt3 = screen_text(app)
            return txt + txt2 + txt3

    txt = run(go())
    assert "[/x]" in txt  # next op of the largest gap, in the gap list
    assert "[0]" in txt  # the range row
    assert "\\x1b[31mred" in txt  # shown escaped
    assert "\x1b" not in txt
    assert "[bold]" in txt


def test_resize_to_tiny_and_back(tmp_path):
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p, size=(80, 24)) as (app, pilot):
            for size in ((20, 5), (1, 1), (200, 60), (20, 5), (80, 24)):
                await pilot.resize_terminal(*size)
                await pilot.pause()
                await pilot.press("n", "w", "d", "j", "N", "s")
                await pilot.pause()
                screen_text(app)
            await pilot.press("question_mark")
            await pilot.pause()
            assert "next / previous gap" in screen_text(app)
            await pilot.press("escape")
            await pilot.pause()
            sc = app.scene
            return screen_text(app), sc.gaps.selected, sc.gaps.order.size, app.size

    txt, selected, n, size = run(go())
    # back at 80x24 the explorer is whole again: every line of the terminal drawn, the header names the trace,
    # the stack panel shows the gap the presses selected, the status and key lines are at the bottom
    lines = txt.splitlines()
    assert tuple(size) == (80, 24) and len(lines) == 24
    assert lines[0].startswith("three_gaps.json")
    assert n == 3 and f"gap {selected + 1}/3" in txt
    assert "cursor" in lines[-2] and "q quit" in lines[-1]


def test_bad_trace_shows_one_line_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ this is not json")

    async def go():
        app = GapscopeApp([str(bad)], load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            return app, None

    app, _ = run(go())
    # the explorer ends at once with exit status 2 (issue 26: it showed the error and waited for q); the
    # command line prints the one line (test_app_round3: the process)
    assert app.error and "bad.json" in app.error and app.return_code == 2


def test_ascii_mode_screens_are_plain_ascii(tmp_path):
    p = three_gaps(tmp_path, names=("k0", "k1", "k2", "void ns::kernel_with_a_very_long_name<float, 4>(float*)"),
                   fns=("frame_with_a_long_name_é", "a_fn", "c_fn"))

    async def go():
        async with opened(p, size=(80, 24), ascii=True) as (app, pilot):
            bad = {}
            for key in (None, "question_mark", "escape", "enter", "escape", "2", "3", "1", "n"):
                if key:
                    await pilot.press(key)
                    await pilot.pause()
                txt = screen_text(app)
                bad[key] = {c for c in txt if ord(c) > 127}
            return bad

    bad = run(go())
    assert all(not v for v in bad.values()), bad


def test_keys_without_gaps_are_greyed_out(tmp_path):
    s = Synth()
    with s.frame("model.py(1): f", 0, 100):
        s.cpu_op("aten::add", 1, 10)
    p = s.write(tmp_path / "cpu_only.json")

    async def go():
        async with opened(p) as (app, pilot):
            assert app.main.check_action("next_gap", ()) is None
            assert app.main.check_action("zoom", ()) is True
            await pilot.press("n", "enter", "space")  # nothing to do: no crash
            await pilot.pause()
            return screen_text(app)

    txt = run(go())
    # a CPU-only trace has nothing to explain; it must not claim the GPU was busy throughout
    assert "no GPU activity in this trace" in txt
    assert "ran kernels through the whole window" not in txt


def test_detail_of_kernel_under_cursor(tmp_path):
    p = three_gaps(tmp_path, names=("k0", "k1", "k2", "the_kernel"))

    async def go():
        async with opened(p, size=(120, 40)) as (app, pilot):
            await pilot.press("slash", *"the_kernel", "enter", "escape")
            await pilot.pause()
            await pilot.press("enter")
            await pilot.pause()
            return screen_text(app)

    txt = run(go())
    assert "kernel: the_kernel" in txt
    assert "launched by cudaLaunchKernel" in txt
    assert "grid" in txt


def test_real_trace_opens_on_the_top_actions_gap(shared_traces):
    p = shared_traces / "h200" / "stack_memory_compile_graph.pt.trace.json.gz"

    async def go():
        async with opened(p, size=(100, 30)) as (app, pilot):
            sc = app.scene
            a = sc.analysis
            g = a.gaps
            # the largest listed gap of the plan's first action (the report's action 1), else the largest listed gap
            top = a.plan.top
            listed = np.asarray(sc.gaps.row[sc.gaps.all_listed])
            pool = np.intersect1d(np.asarray(top.gap_rows if top is not None else [], np.int64), listed)
            pool = pool if pool.size else listed
            assert int(g.dur_ns[sc.gaps.selected_row]) == int(np.max(np.asarray(g.dur_ns)[pool]))
            for k in ("n", "space", "j", "2", "3", "1", "c", "c", "t", "g", "escape"):
                await pilot.press(k)
                await pilot.pause()
            return screen_text(app)

    assert "gapscope" in run(go())


def test_click_moves_lane_and_time_cursor(tmp_path):
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p, size=(120, 40)) as (app, pilot):
            sc = app.scene
            lv = app.lanes
            stream_row = next(i for i, r in enumerate(sc.display.rows()) if r.lane is not None and r.lane.kind == "stream")
            before = sc.view.cursor
            await pilot.click("#lanes", offset=(lv.size.width - 10, stream_row))
            await pilot.pause()
            assert sc.display.cursor == stream_row
            assert sc.view.cursor != before and sc.view.t0 <= sc.view.cursor < sc.view.t1

    run(go())


def test_ranks_of_one_job_share_a_tab_grouped_by_rank(shared_traces):
    paths = [shared_traces / "h200" / f"nccl_two_ranks.rank{r}.json.gz" for r in (1, 0)]

    async def go():
        app = GapscopeApp([str(p) for p in paths], load_opts={"no_cache": True})
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(app, pilot)
            sc = app.scene
            assert len(app.scenes) == 1 and len(sc.parts) == 2
            titles = [r.title for r in sc.display.rows() if r.lane is None]
            # rank order, whatever the order on the command line
            assert titles[0].startswith("rank 0 · host") and any(t.startswith("rank 1 · host") for t in titles)
            assert titles.index(next(t for t in titles if t.startswith("rank 1"))) > \
                titles.index(next(t for t in titles if t.startswith("rank 0 · cuda")))
            # the gap list merges both ranks, largest first
            assert set(sc.gaps.part[sc.gaps.order].tolist()) == {0, 1}
            d = sc.gaps.dur[sc.gaps.order]
            assert (np.diff(d) <= 0).all()
            seen = set()
            for _ in range(4):
                seen.add(sc.active)
                txt = screen_text(app)
                assert f"rank {sc.parts[sc.active].model.rank} cuda:" in txt
                await pilot.press("n")
                await pilot.pause()
            assert seen == {0, 1}

    run(go())


def test_escape_cancels_a_slow_load(tmp_path, monkeypatch):
    import threading

    import gapscope.trace

    p = three_gaps(tmp_path)
    release = threading.Event()
    started = threading.Event()
    real = gapscope.trace.load

    def slow_load(path, **kw):
        started.set()
        release.wait(20)
        return real(path, **kw)

    monkeypatch.setattr(gapscope.trace, "load", slow_load)

    async def go():
        app = GapscopeApp([str(p)], load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(50):
                if started.is_set():
                    break
                await pilot.pause(0.05)
            assert "loading three_gaps.json" in screen_text(app)
            await pilot.press("escape")
            await pilot.pause()
            release.set()
        return app

    app = run(go())
    assert app.cancelled and app.return_code == 130
    assert not app.scenes


def test_header_warns_about_distortion_and_missing_stacks(tmp_path):
    s = Synth(meta={"gapscope": {"profiled_us": 2600.0, "unprofiled_us": 1000.0, "torch": "2.13.0"}})
    s.launch(ts=0, dur=2, kernel="k0", k_ts=5, k_dur=10)
    s.launch(ts=100, dur=2, kernel="k1", k_ts=200, k_dur=10)
    p = s.write(tmp_path / "distorted.json")

    async def go():
        async with opened(p, size=(160, 30)) as (app, pilot):
            return screen_text(app)

    txt = run(go())
    lines = txt.splitlines()
    head = "\n".join(lines[:next(i for i, ln in enumerate(lines) if " span " in ln)])  # the header, above the axis
    assert "torch 2.13.0" in head
    assert "profiler distortion 2.60x" in head
    assert "no Python stacks" in head


def test_two_traces_open_in_tabs_and_t_switches(tmp_path):
    a = three_gaps(tmp_path / "a" if (tmp_path / "a").mkdir() is None else tmp_path)
    s = Synth()
    s.launch(ts=0, dur=2, kernel="decode_k0", k_ts=5, k_dur=10)
    s.launch(ts=50, dur=2, kernel="decode_k1", k_ts=80, k_dur=10)
    b = s.write(tmp_path / "decode.json")

    async def go():
        app = GapscopeApp([str(a), str(b)], load_opts={"no_cache": True})
        async with app.run_test(size=(120, 30)) as pilot:
            await settle(app, pilot)
            first = screen_text(app)
            await pilot.press("t")
            await pilot.pause()
            second = screen_text(app)
            await pilot.press("t")
            await pilot.pause()
            return app, first, second

    app, first, second = run(go())
    assert len(app.scenes) == 2 and app.current == 0
    assert "three_gaps.json [1/2]" in first
    assert "decode.json [2/2]" in second and "decode_k1" in second


def test_detail_of_a_copy_and_of_an_op(tmp_path):
    s = Synth()
    with s.frame("model.py(3): fetch", 0, 200):
        with s.op("aten::copy_", 1, 150):
            rt = s.runtime("cudaMemcpyAsync", 2, 100)
    s.memcpy("DtoH", 10, 50, nbytes=4_000_000, corr=rt["args"]["correlation"])
    p = s.write(tmp_path / "copy.json")

    async def go():
        async with opened(p, size=(120, 40)) as (app, pilot):
            await pilot.press("slash", *"Memcpy DtoH", "enter", "escape", "enter")
            await pilot.pause()
            copy = screen_text(app)
            await pilot.press("escape", "slash", *"aten::copy_", "enter", "escape", "enter")
            await pilot.pause()
            op = screen_text(app)
            return copy, op

    copy, op = run(go())
    assert "copy: Memcpy DtoH (Pageable -> Device)" in copy
    assert "bytes 4,000,000" in copy and "80.00 GB/s" in copy
    assert "memory: Pageable -> Device" in copy
    assert "op: aten::copy_" in op
    assert "fetch  model.py:3" in op  # its stack: the Python frame, function then file:line


def test_no_color_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = GapscopeApp([str(three_gaps(tmp_path))])
    assert app.no_color


@pytest.mark.parametrize("argv,needle", [
    (["/nonexistent/trace.json"], "no such file"),
    (["{trace}", "--max-size", "12Q"], "--max-size"),
    (["{trace}"], "needs a terminal"),  # stdout is a pipe here
])
def test_command_line_errors_are_one_line(tmp_path, argv, needle):
    import subprocess
    import sys

    from tests.helpers import ROOT

    trace = three_gaps(tmp_path)
    argv = [a.replace("{trace}", str(trace)) for a in argv]
    env = {k: v for k, v in os.environ.items() if k != "GAPSCOPE_FORCE_TUI"}
    r = subprocess.run([sys.executable, "-m", "gapscope", *argv], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env=env)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gapscope: error:") and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_gap_list_findings_and_kernels_views_drive_the_lanes(tmp_path):
    p = three_gaps(tmp_path, names=("k0", "k1", "k2", "the_gemm"))

    async def go():
        async with opened(p, size=(120, 40)) as (app, pilot):
            sc = app.scene
            a = sc.analysis
            # Tab to the gap list; down selects the next gap and moves the lanes there
            await pilot.press("tab")
            await pilot.pause()
            assert app.focused is app.query_one("#gaplist")
            await pilot.press("down")
            await pilot.pause()
            assert sc.gaps.selected == 1
            s, e, _ = sc.gaps.span(sc.gaps.selected_gap)
            assert sc.view.t0 < s < e < sc.view.t1
            # findings view: Enter goes to the finding's largest gap
            await pilot.press("3")
            await pilot.pause()
            assert app.query_one("#views").current == "findingsview"
            f0 = a.findings[0]
            await pilot.press("enter")
            await pilot.pause()
            assert app.query_one("#views").current == "lanesview"
            assert sc.gaps.selected_row in set(np.asarray(f0.gap_rows).tolist())
            # kernels view: Enter finds that kernel in the lanes
            await pilot.press("2")
            await pilot.pause()
            k0 = a.kernels[0].name
            await pilot.press("enter")
            await pilot.pause()
            ev = event_under_cursor(app.scene, app.lanes.cells_width())
            assert ev >= 0 and sc.model.name(ev) == k0

    run(go())


def test_space_expands_a_thread_into_stack_depth_rows(tmp_path):
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p, size=(120, 40)) as (app, pilot):
            sc = app.scene
            cpu_row = next(i for i, r in enumerate(sc.display.rows()) if r.lane is not None and r.lane.kind == "cpu")
            await pilot.press(*(["k"] * (sc.display.cursor - cpu_row)))
            await pilot.pause()
            assert sc.display.cursor == cpu_row
            n = len(sc.display.rows())
            await pilot.press("space")
            await pilot.pause()
            labels = [r.lane.label.strip() for r in sc.display.rows() if r.lane is not None and r.lane.kind == "depth"]
            assert len(sc.display.rows()) == n + len(labels) and labels[:1] == ["py 0"] and "op 0" in labels
            txt = screen_text(app)
            await pilot.press("space")
            await pilot.pause()
            assert len(sc.display.rows()) == n
            return txt

    txt = run(go())
    assert "model.py(11): a_fn" in txt  # the depth row names the frame


def test_large_trace_freezes_the_heap_until_exit(tmp_path, monkeypatch):
    """A large trace's objects go to the collector's permanent generation once loaded (no full collection
    walks them during key presses); the app's exit undoes it, and small traces are left alone."""
    import gc

    import gapscope.tui.app as appmod

    p = three_gaps(tmp_path)
    assert gc.get_freeze_count() == 0

    async def go(expect_frozen):
        async with opened(p) as (app, pilot):
            assert app._frozen is expect_frozen
            assert (gc.get_freeze_count() > 0) is expect_frozen
            before = app.scene.gaps.selected
            await pilot.press("n")
            await pilot.pause()
            assert app.scene.gaps.selected == before + 1
        assert gc.get_freeze_count() == 0

    run(go(False))
    monkeypatch.setattr(appmod, "FREEZE_EVENTS", 1)
    run(go(True))


def test_a_trace_read_before_the_screen_is_mounted_still_opens(tmp_path, monkeypatch):
    """The load starts on the app's Load event, so a small trace (here: one already in memory) is ready before
    the widgets it fills exist; its scene is added only once the screen is mounted (it failed with
    NoMatches('#lanes') in a clean-clone CI run)."""
    import gapscope.tui.app as appmod
    import gapscope.trace

    p = three_gaps(tmp_path)
    model = gapscope.trace.load(str(p), no_cache=True)
    monkeypatch.setattr(gapscope.trace, "load", lambda path, **kw: model)
    from gapscope.tui.main import MainScreen

    order = []
    orig_mount, orig_add = MainScreen.on_mount, appmod.GapscopeApp._add_scene

    def on_mount(self):
        orig_mount(self)
        order.append("mounted")

    def add_scene(self, sc):
        order.append("scene")
        orig_add(self, sc)

    monkeypatch.setattr(MainScreen, "on_mount", on_mount)
    monkeypatch.setattr(appmod.GapscopeApp, "_add_scene", add_scene)

    async def go():
        async with opened(p) as (app, pilot):
            assert app.error is None and app.scene is not None
            assert "idle gaps" in screen_text(app)

    for _ in range(5):
        order.clear()
        run(go())
        assert order == ["mounted", "scene"]


def test_header_says_the_distortion_is_unknown_when_the_unprofiled_time_is_longer(tmp_path):
    """hf-llama.decode's capture timed 213.5 ms un-profiled for a 49.7 ms recording (a loaded node): a ratio
    below 1 is no distortion; the header says it cannot be read (the report: nothing calibrated)."""
    s = Synth(meta={"gapscope": {"profiled_us": 1000.0, "unprofiled_us": 4000.0, "torch": "2.13.0"}})
    s.launch(ts=0, dur=2, kernel="k0", k_ts=5, k_dur=10)
    s.launch(ts=100, dur=2, kernel="k1", k_ts=200, k_dur=10)
    p = s.write(tmp_path / "slow_unprofiled.json")

    for size in ((80, 24), (160, 30)):
        async def go():
            async with opened(p, size=size) as (app, pilot):
                return screen_text(app)

        lines = run(go()).splitlines()
        head = "\n".join(lines[:next(i for i, ln in enumerate(lines) if " span " in ln)])
        assert "un-profiled slower than profiled: distortion unknown" in head, head
        assert "0.25x" not in head
