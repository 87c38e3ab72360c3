"""Explorer round 3 (issue 26): what an expert tripped over on Hugging Face traces. Each test here failed before
its fix."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.helpers import SAMPLE_TRACES
from tests.helpers.app import opened, run, settle, three_gaps
from gapscope.tui.app import GapscopeApp
from gapscope.tui.textdump import screen_text
from gapscope.trace.model import Kind

ROOT = Path(__file__).resolve().parent.parent
SYNC = SAMPLE_TRACES / "demo-eager-sync.decode.json.gz"
EAGER = SAMPLE_TRACES / "demo-eager.decode.json.gz"
MIXTRAL = SAMPLE_TRACES / "hf-mixtral.decode_eager.json.gz"


def _raw_window(path) -> tuple[int, int]:
    """The analysed window from the raw events, by the report's rule for a capture with step ranges: the first
    to the last GPU event overlapping a ``gapscope.step#`` range (ns, the file's own clock)."""
    with gzip.open(path, "rt") as f:
        ev = json.load(f)["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("gapscope.step#")]
    gpu = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in ev if e.get("ph") == "X" and e.get("cat") in
           ("kernel", "gpu_memcpy", "gpu_memset")]
    lo, hi = min(s for s, _ in steps), max(e for _, e in steps)
    inside = [(s, e) for s, e in gpu if s < hi and e > lo]
    return round(min(s for s, _ in inside) * 1e3), round(max(e for _, e in inside) * 1e3)


# ----------------------------------------------------------------- defect 1: `0` fits the analysed window
def test_zero_fits_the_analysed_window_and_the_docs_say_so():
    w0, w1 = _raw_window(SYNC)

    async def go():
        async with opened(SYNC, size=(120, 40)) as (app, pilot):
            await pilot.press("0")
            await pilot.pause()
            v = app.scene.view
            base = app.scene.model.metadata.get("baseTimeNanoseconds") or 0
            return v.t0, v.t1, v.lo, v.hi, int(base)

    t0, t1, lo, hi, base = run(go())
    # the model's times are the file's µs in ns. The lanes reach 3.8 ms beyond the window (the capture's
    # set-up and the profiler's warm-up step); `0` showed all of them
    span = w1 - w0
    assert hi - lo > span + 3_000_000
    # the window and a margin of 1% each side so that edge kernels are not cut
    assert abs(t0 - (w0 - span // 100)) <= 1_000 and abs(t1 - (w1 + span // 100)) <= 1_000, (t0 - w0, t1 - w1)
    from gapscope.tui.main import MainScreen

    help0 = dict(MainScreen.KEY_HELP)["0 / Home"]
    readme = next(ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("| `0` / `Home` | fit"))
    assert "analysed window" in help0 and "analysed window" in readme and "trace" not in help0.split("(")[0]


# ----------------------------------------------------------------- defect 2: j / k in the tables
def test_j_and_k_move_in_the_kernels_findings_and_diff_lists():
    async def go():
        app = GapscopeApp([str(EAGER), str(SYNC)], load_opts={"no_cache": True})
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(app, pilot)
            got = {}
            for view, tid in (("3", "#findings"), ("2", "#kernels")):
                await pilot.press(view)
                await settle(app, pilot)
                tb = app.screen.query_one(tid)
                seen = [tb.cursor_row]
                for k in ("j", "j", "k"):
                    await pilot.press(k)
                    await pilot.pause()
                    seen.append(tb.cursor_row)
                got[tid] = seen
            await pilot.press("1")
            await pilot.pause()
            await pilot.press("D")
            for _ in range(4):
                await settle(app, pilot)
            await pilot.press("tab")  # the list of changes
            await pilot.pause()
            tb = app.screen.query_one("#deltas")
            seen = [tb.cursor_row]
            for k in ("j", "j", "k"):
                await pilot.press(k)
                await pilot.pause()
                seen.append(tb.cursor_row)
            got["#deltas"] = seen
            return got

    got = run(go())
    assert got == {"#findings": [0, 1, 2, 1], "#kernels": [0, 1, 2, 1], "#deltas": [0, 1, 2, 1]}, got


# ----------------------------------------------------------------- defect 3: the findings detail
def test_evidence_values_read_as_the_report_writes_them():
    from gapscope.tui.evidence import evidence_lines

    lines = evidence_lines({"share_of_window_pct": 48.96327992572372, "idle_us": 78185.906,
                            "gap_causes": {"sync": [855, 49083.814], "python": [3, 957.818]},
                            "examples": [{"row": 12, "explanation": "The GPU waited for the host."}],
                            "wait_by_rank_us": {"0": 2135.0, "1": 3.5}, "bytes": 268435456, "ratio": 1.6878,
                            "frame": "transformers/models/mixtral/modeling_mixtral.py(352): forward",
                            "issued_ops": ["aten::mm", "aten::mul"], "timing_noisy": True, "steps": 4,
                            "launch_rate_per_ms": 16.5522788733524})
    assert lines == ["The GPU waited for the host.",
                     "share of the window: 49.0%",
                     "GPU idle: 78.19 ms",
                     "gaps by cause: sync 855 gaps (49.08 ms), python 3 gaps (957.8 µs)",
                     "wait by rank: rank 0 2.13 ms, rank 1 3.5 µs",
                     "bytes: 256.0 MiB",
                     "profiled / un-profiled: 1.69x",
                     "where: transformers/models/mixtral/modeling_mixtral.py(352): forward",
                     "ops issued in these gaps: aten::mm, aten::mul",
                     "timing noisy: yes",
                     "steps: 4",
                     "launch rate: 16.6/ms"]


def test_findings_detail_has_no_raw_floats_or_reprs():
    async def go():
        async with opened(SYNC, size=(160, 48)) as (app, pilot):
            await pilot.press("3")
            await settle(app, pilot)
            tb = app.screen.query_one("#findings")
            out = []
            for _ in range(tb.row_count):
                out.append(str(app.screen.query_one("#findinginfo").render()))
                await pilot.press("j")
                await pilot.pause()
            return out

    infos = run(go())
    assert len(infos) >= 5
    text = "\n".join(infos)
    assert "gaps by cause: " in text and "share of the window: " in text
    assert not re.search(r"\d\.\d{4,}", text), text  # 48.96327992572372
    assert "{" not in text and "[" not in text and "_us:" not in text and "_pct" not in text
    assert " 1 gaps" not in text


# ----------------------------------------------------------------- defect 4: every depth, the launcher folded
def _depth_labels(sc) -> list[str]:
    """The depth rows' labels, those folded into a "lanes empty here" row too."""
    lanes = [ln for r in sc.display.rows() for ln in ((r.lane,) if r.lane is not None else (r.folded or ()))]
    return [ln.label.strip() for ln in lanes if ln.kind == "depth"]


def test_expanded_thread_shows_every_depth_with_the_launcher_frames_folded():
    from gapscope.trace import load

    m = load(str(MIXTRAL), no_cache=True)
    py = np.flatnonzero(m.kind == Kind.PYTHON)
    deepest = int(m.depth[py].max())
    forward = [i for i in py.tolist() if m.name(i) == "transformers/models/mixtral/modeling_mixtral.py(69): forward"]
    assert forward and int(m.depth[forward[0]]) >= 25  # what the findings name, below the old cap of 24

    async def go():
        async with opened(MIXTRAL, size=(200, 50)) as (app, pilot):
            sc = app.scene
            sc.display.cursor = next(i for i, r in enumerate(sc.display.rows()) if r.lane is not None and r.lane.kind == "cpu"
                                  and r.lane.track == int(m.track[forward[0]]))
            await pilot.press("space")
            await pilot.pause()
            labels = _depth_labels(sc)
            fold = next(i for i, r in enumerate(sc.display.rows()) if r.lane is not None and r.lane.harness_fold)
            sc.display.cursor = fold
            await pilot.press("space")  # the launcher's levels, one by one
            await pilot.pause()
            shown = _depth_labels(sc)
            await pilot.press("space")
            await pilot.pause()
            again = _depth_labels(sc)
            return labels, shown, again

    labels, shown, again = run(go())
    # levels 0-9: runpy, capture/__main__.py, capture/cli.py, capture/recorder.py, one frame each
    assert labels[0] == "py 0-9 launcher" and "py 9" not in labels and "py 10" in labels
    assert f"py {deepest}" in labels and "py 25" in labels
    assert shown[:10] == [f"py {k}" for k in range(10)] and "py 0-9 launcher" not in shown
    assert again == labels


def test_v_puts_the_launch_mark_on_the_depth_row_of_the_launch(tmp_path):
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p, size=(120, 40)) as (app, pilot):
            sc = app.scene
            cpu = next(i for i, r in enumerate(sc.display.rows()) if r.lane is not None and r.lane.kind == "cpu")
            sc.display.cursor = cpu
            await pilot.press("space")
            await pilot.pause()
            stream = next(i for i, r in enumerate(sc.display.rows()) if r.lane is not None and r.lane.kind == "stream")
            sc.display.cursor = stream
            k = int(np.flatnonzero(sc.model.kind == Kind.KERNEL)[2])  # gemm k2, launched at 821 µs
            sc.view.focus(int(sc.model.ts_ns[k]), int(sc.model.ts_ns[k] + sc.model.dur_ns[k]), 100, context=20)
            sc.view.cursor = int(sc.model.ts_ns[k]) + 1
            app.main.refresh_view()
            await pilot.pause()
            row = sc.launch.link[2]
            await pilot.press("v")
            await pilot.pause()
            return sc.display.rows()[row].lane.label.strip(), sc.display.cursor == row, screen_text(app), row

    label, on_it, txt, row = run(go())
    assert label.startswith("op ") and on_it  # the launch's own depth row, not the thread's folded row
    assert "◆" in txt


# ----------------------------------------------------------------- defect 5: search counts
def test_search_counts_what_the_kernels_view_counts_and_starts_nearest_the_cursor():
    async def go():
        async with opened(MIXTRAL, size=(200, 50)) as (app, pilot):
            sc = app.scene
            a = sc.analysis
            k = next(k for k in a.kernels if k.name.startswith("void at::native::"))
            q = k.name
            cursor = sc.view.cursor
            await pilot.press("slash")
            await pilot.pause()
            app.screen.query_one("#search").value = q
            await pilot.press("enter")
            await pilot.pause()
            return q, k.count, cursor, sc.search.matches.copy(), sc.search.pos, screen_text(app), sc.model

    q, calls, cursor, matches, pos, txt, m = run(go())
    # from the raw events: every kernel of that name, and those the report's window holds
    hit = [i for i in np.flatnonzero(np.isin(m.kind, [Kind.KERNEL])).tolist() if q.lower() in m.name(i).lower()]
    assert len(hit) == matches.size > calls
    assert f"({calls} in the window, {matches.size - calls} outside" in txt
    t = m.ts_ns[matches]
    assert abs(int(t[pos]) - cursor) == int(np.abs(t - cursor).min())


# ----------------------------------------------------------------- defect 6: D in tab order, x swaps
def test_d_compares_in_tab_order_from_either_tab_and_x_swaps():
    async def go():
        app = GapscopeApp([str(EAGER), str(SYNC)], load_opts={"no_cache": True})
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(app, pilot)
            await pilot.press("t")  # the second tab
            await pilot.pause()
            await pilot.press("D")
            for _ in range(4):
                await settle(app, pilot)
            first = [os.path.basename(p.path) for p in app.screen.scene.parts]
            head = screen_text(app).splitlines()[0]
            await pilot.press("x")
            for _ in range(4):
                await settle(app, pilot)
            swapped = [os.path.basename(p.path) for p in app.screen.scene.parts]
            head2 = screen_text(app).splitlines()[0]
            return first, head, swapped, head2, screen_text(app)

    first, head, swapped, head2, txt = run(go())
    assert first == [EAGER.name, SYNC.name] and head.startswith(f"A before: {EAGER.name}")
    assert swapped == [SYNC.name, EAGER.name] and head2.startswith(f"A before: {SYNC.name}")
    assert re.search(r"\bx swap\b", txt)  # the footer offers the swap ("swap A/B" before the diff's key table)


# ----------------------------------------------------------------- defect 7: late ranks first
def test_ranks_line_lists_the_rank_the_others_wait_for_first():
    from gapscope.tui import glyphs as G
    from gapscope.tui.panels import ranks_line

    class Eight:
        multi = True

        def rank_summary(self):
            # rank 5 is the late one: five ranks wait for it; the cross-rank rule did not call it late (it arrived
            # last at less than half of its collectives) and it waits for nobody
            return [{"rank": r, "idle_pct": 40.0 + r, "analysed": True,
                     "wait_ns": 0 if r == 5 else 1_000_000 * (r + 1), "wait_for": None if r in (5, 7) else 5,
                     "skew": False, "late": None} for r in range(8)]

    text = "".join(s for s, _ in ranks_line(Eight(), G.ASCII, 80))
    assert text.startswith("r5 45.0% idle") and "more ranks" in text, text


# ----------------------------------------------------------------- defect 8: bad input exits at once
def test_a_file_that_is_not_a_trace_exits_at_once_with_one_line(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    env = dict(os.environ, GAPSCOPE_FORCE_TUI="1", TERM="xterm-256color")
    # no key is sent: before, the explorer showed the error and waited for q (the timeout would hit)
    r = subprocess.run([sys.executable, "-m", "gapscope", str(bad)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    # (without a terminal Textual draws on stderr; the line comes after it has left the alternate screen)
    assert r.stderr.count("gapscope: error: ") == 1 and "Traceback" not in r.stderr
    last = r.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert re.search(r"gapscope: error: [^\x1b]*notes\.json: not a PyTorch profiler trace[^\x1b]*$", last), last[-300:]


# ----------------------------------------------------------------- defect 9: README on stack order
def test_readme_says_innermost_first_as_the_explorer_does():
    readme = (ROOT / "README.md").read_text()
    assert "outermost first" not in readme.split("## Try it")[0]
    screen = readme.split("```")[1]  # the first screen, as benchmarks/readme_screen.py draws it
    assert "launching thread when the GPU went idle" in screen and "(innermost first):" in screen
    assert screen.strip() == (ROOT / "tests" / "readme_screen.txt").read_text().strip()


# ----------------------------------------------------------------- friction 1: the export notice
def test_export_notice_stays_off_the_gap_list_at_80x24(tmp_path):
    p = three_gaps(tmp_path)

    async def go():
        app = GapscopeApp([str(p)], load_opts={"no_cache": True})
        async with app.run_test(size=(80, 24), notifications=True) as pilot:  # (run_test hides them by default)
            await settle(app, pilot)
            await pilot.press("e")
            await pilot.pause()
            await pilot.pause(0.2)
            toast = next(w for w in app.screen.walk_children() if type(w).__name__ == "Toast")
            return toast.region, app.screen.query_one("#gaplist").region

    toast, gl = run(go())
    assert toast.x >= gl.right, (toast, gl)


# ----------------------------------------------------------------- friction 2: host time in range stats
def test_range_stats_credit_the_launching_thread_by_own_time(tmp_path):
    """three_gaps: in [15, 315) µs the thread runs model.py(10): b_fn from 14 to 316 µs, aten::mm at 16-21 µs
    and cudaLaunchKernel at 311-313 µs inside it: b_fn's own time in the range is 300 - 5 - 2 = 293 µs."""
    from gapscope.tui import glyphs as G
    from gapscope.tui.rangestats import range_stats, range_text

    p = three_gaps(tmp_path)

    async def go():
        async with opened(p, size=(120, 40)) as (app, pilot):
            sc = app.scene
            base = int(sc.model.ts_ns.min()) - 0  # the first event (the range annotation) is at 0 µs
            a, b = base + 15_000, base + 315_000
            return range_stats(sc, a, b), range_text(sc, a, b, G.UNICODE).plain

    st, txt = run(go())
    (h,) = st["parts"][0]["host"]
    assert h["frames"] == [("model.py(10): b_fn", 293_000)]
    assert dict(h["ops"]) == {"aten::mm": 5_000, "cudaLaunchKernel": 2_000}
    assert h["busy"] == 300_000 and h["idle"] == 0
    assert "model.py(10): b_fn" in txt and "293.0 µs" in txt


# ----------------------------------------------------------------- friction 3: f right after n
def test_f_right_after_n_zooms_tighter_then_says_so(tmp_path):
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p, size=(120, 40)) as (app, pilot):
            v = app.scene.view
            await pilot.press("n", "N")  # on the largest gap, shown with its context
            await pilot.pause()
            spans = [v.span]
            msgs = []
            for _ in range(2):
                await pilot.press("f")
                await pilot.pause()
                spans.append(v.span)
                msgs.append(app.main._status_msg)
            return spans, msgs

    spans, msgs = run(go())
    # the 500 µs gap: 3x its length with context, then 1.1x, then the same with a message
    assert spans == [1_500_000, 550_000, 550_000]
    assert msgs[0].startswith("f again") and msgs[1].startswith("f: zoomed to the gap already")
