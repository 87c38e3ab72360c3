"""Open-to-first-frame benchmark through the real explorer, run by hand (not part of the test suite).

    python benchmarks/bench_open.py [TRACE...] [--repeat 3] [--keys] [--profile] [--no-report]
    python benchmarks/bench_open.py --keys-only [--repo DIR ...] [--rounds 2] [TRACE]
    python benchmarks/bench_open.py --progressive --repo OLD --repo NEW --rounds 3 [TRACE]

Default traces: one sample trace (traces/demo-eager.decode.json.gz) and /tmp/gapscope-bench/big_*.json
(made by benchmarks/gen_big.py). Every measurement runs in a fresh subprocess; times are the best of
``--repeat`` runs (the machine is shared: the least disturbed run is the closest to the real cost).

  floor     read + gunzip + one bare orjson.loads of the same bytes, GC paused; peak RSS
  cold      GapscopeApp(...).run_test(size=200x50) with an empty cache: from creating the app to the first
            LanesView.render_line call with a scene loaded (the lanes painted); peak RSS of the process
            PLUS the peak of its children (the loader's worker process, when it forks one: a child's
            ru_maxrss also counts the pages it shares with the parent at fork, so the sum over-counts)
  warm      the same with the cache entry written by a previous open
  load      tui.trace.load(path, no_cache=True) alone (the loader, no app)
  analysis  tui.analysis.analyze(model) + its report tables, on the cached model; ratio to cold load
  report    `python -m gapscope report TRACE > /dev/null` end to end (subprocess wall, empty cache)
  keys      (--keys, biggest trace only) pan / zoom / next gap at 200x50 through the Pilot: CPU time of the
            process from the key press to the redrawn screen (the pilot's own idle waits dominate wall time);
            "unbound": F12, which nothing binds, the floor of the measure (the pilot's waits on every widget
            and Textual's routing of the key up the focus chain, nothing redrawn)
            --keys-only: only that, on the biggest trace; --repo DIR (repeatable) runs the same child against
            another checkout of the project (e.g. `git archive` of an older commit), alternating the trees
            for --rounds rounds, so a before / after comes from one run
  progressive  (--progressive, biggest trace only) cold opens, the --repo checkouts alternating (the order
            reversed every other round), each round with its own floor: seconds to the first lanes drawn (a
            preview's where the tree has one), to the provisional gap list (lanes drawn on the preview with its
            provisional analysis in, where the tree has one), to the full model's lanes (and to them with the
            provisional list carried onto the full model, where the tree does that), to the gap list (lanes drawn
            with the full gaps in: the findings may still be being built), to the findings (the analysis whole), to
            the projection (polled); a pan every 0.2 s until then (none with --no-pan), sent as the terminal driver sends a key (the
            pilot's press waits for the process to be idle, up to 1 s a wait while the load thread works: it paced
            the presses and timed the last frame of its wait, not the key's), wall ms from sending it to the first
            lanes frame after the screen handled it, by what was on screen (the preview, the full model without
            gaps, its gaps, the projection being made): median / p95 / max, and each press over 200 ms with when it
            came and what held it (the screen's handlers and frames over 50 ms, wall and the screen thread's CPU,
            and the GIL holds over 50 ms seen by a thread waking every 5 ms, with the screen's and the other
            threads' stacks in this tree); every install of what the loader posts (wall / CPU ms); the longest
            handlers and GIL holds of the run; peak RSS app + worker. The table: the least of the rounds, ratios
            to the least floor, and the best same-round ratio
Imports (numpy, orjson, textual, tui) are done before every clock starts.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(REPO, "traces", "demo-eager.decode.json.gz")

_CHILD = r"""
import asyncio, gc, gzip, json, os, resource, sys, time
sys.path.insert(0, {repo!r})
mode, path = sys.argv[1], sys.argv[2]
import numpy, orjson
from gapscope.trace import load
from gapscope.analysis import analyze


def rss():
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return me, kids


out = {{"mode": mode}}
if mode == "floor":
    t = time.perf_counter()
    gc.disable()
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    out["size"] = len(raw)
    doc = orjson.loads(raw)
    out["s"] = time.perf_counter() - t
elif mode == "load":
    t = time.perf_counter()
    m = load(path, no_cache=True)
    out["s"] = time.perf_counter() - t
    out["n"] = m.n
elif mode == "analysis":
    m = load(path)
    gc.collect()
    t = time.perf_counter()
    a = analyze(m)
    a.kernels, a.syncs, a.copies, a.allocator, a.collectives, a.launches
    out["s"] = time.perf_counter() - t
    out["gaps"] = len(a.gaps)
elif mode == "progressive":
    # cold open through the explorer: the first lanes drawn (a preview's, where the tree has one), the first lanes
    # of the full model, and the gap list (the analysis installed); peak RSS of the app and of its worker
    from gapscope.tui.app import GapscopeApp
    from gapscope.tui.timeline import LanesView

    marks = {{}}
    frames = []
    orig = LanesView.render_line

    def state(sc):
        # what the scene shows: 'preview', 'provisional' (a preview's list), 'carried' (the full model with the
        # provisional list carried onto it), 'full' (the full model, no gaps), 'gaps' (its gaps, the findings being
        # built), 'findings' (the analysis whole), on any tree
        a = sc.analysis
        if getattr(sc.model, "partial", False):
            return "provisional" if sc.any_analysis else "preview"
        if not sc.any_analysis:
            return "full"
        st = sc.state  # tui/loadstate.py: where the analysis is
        if st.status == "provisional":
            return "carried"
        return "gaps" if st.status == "pending" else "findings"

    def render_line(self, y):
        sc = self.app.scene
        if sc is not None:
            now = time.perf_counter()
            if not frames or now - frames[-1] > 0.001:
                frames.append(now)
            st = state(sc)
            marks.setdefault("first", now)
            marks.setdefault(st, now)
            if st not in ("preview", "provisional"):
                marks.setdefault("full", now)
            if st in ("gaps", "findings"):
                marks.setdefault("gaps", now)  # the full gap list (on the old tree: with the findings)
        return orig(self, y)

    LanesView.render_line = render_line

    # what the app was doing while a key waited: the screen's long message handlers (any pump, > 50 ms of wall
    # time on the event loop) and the GIL holds (a thread waking every 5 ms that came back > 50 ms late: the
    # screen's and the load thread's stacks at that moment, the frames of this project)
    import threading, traceback
    from textual.message_pump import MessagePump
    handlers, holds, stop = [], [], threading.Event()
    orig_dispatch = MessagePump._dispatch_message

    key_done = {{}}  # id of a key event sent -> when the screen was done with it
    INSTALLS = ("PreviewLoaded", "ProvisionalReady", "SceneLoaded", "GapsReady", "AnalysisReady", "ProjectionReady")
    installs = []

    async def dispatch(self, message):
        h0, c0 = time.perf_counter(), time.thread_time()
        try:
            return await orig_dispatch(self, message)
        finally:
            h1 = time.perf_counter()
            dt = h1 - h0
            if dt > 0.05:  # wall, and the screen thread's own CPU in it (the rest: waiting for the GIL or a core)
                handlers.append((h0, dt, type(self).__name__ + "." + type(message).__name__
                                 + f" (CPU {{(time.thread_time() - c0) * 1000:.0f}})"))
            if type(message).__name__ in INSTALLS:  # every one, with the screen thread's CPU in it
                installs.append((type(message).__name__, h0 - t, dt * 1000, (time.thread_time() - c0) * 1000))
            if id(message) in key_done:
                key_done[id(message)] = h1

    MessagePump._dispatch_message = dispatch
    from textual.screen import Screen
    orig_frame = Screen._on_timer_update

    def frame(self):  # a frame: the layout and the lines redrawn (a timer's callback, not a message)
        h0, c0 = time.perf_counter(), time.thread_time()
        try:
            return orig_frame(self)
        finally:
            dt = time.perf_counter() - h0
            if dt > 0.05:
                handlers.append((h0, dt, type(self).__name__ + f".frame (CPU {{(time.thread_time() - c0) * 1000:.0f}})"))

    Screen._on_timer_update = frame
    main_id = threading.get_ident()

    def where(fr):
        st = [s for s in traceback.extract_stack(fr) if s.filename.startswith({repo!r} + "/tui/")] if fr is not None else []
        return " <- ".join(f"{{os.path.basename(s.filename)}}:{{s.lineno}} {{s.name}}" for s in reversed(st[-3:]))

    def watch():
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.005)
            now = time.perf_counter()
            late, last = now - last, now
            if late > 0.05:
                frs = sys._current_frames()
                me = threading.get_ident()
                other = [where(f) for i, f in frs.items() if i not in (main_id, me)]
                holds.append((now - late, late, where(frs.get(main_id)), " | ".join(o for o in other if o)))

    threading.Thread(target=watch, daemon=True).start()

    def doing(a, b):
        # the handlers and holds that overlap [a, b] (perf_counter), longest first
        hs = sorted((h for h in handlers if h[0] < b and h[0] + h[1] > a), key=lambda h: -h[1])
        gs = sorted((g for g in holds if g[0] < b and g[0] + g[1] > a), key=lambda g: -g[1])
        return ([f"handler {{n}} {{d * 1000:.0f}} ms at {{h0 - t:.2f}}" for h0, d, n in hs[:3]]
                + [f"GIL {{d * 1000:.0f}} ms at {{g0 - t:.2f}}: screen [{{m}}] load [{{o}}]" for g0, d, m, o in gs[:3]])

    # --no-pan: nobody at the keys (the pans' frames take CPU from the load: 0.2 s apart, ~70 of them at 1 GB)
    PAN = os.environ.get("GAPSCOPE_BENCH_PAN", "1") != "0"

    async def run():
        global t
        app = GapscopeApp([path], load_opts={{}})
        t = time.perf_counter()
        async with app.run_test(size=(200, 50)) as pilot:
            lag = []
            while "findings" not in marks or ("projection" not in marks and time.perf_counter() - marks["findings"] < 60):
                await asyncio.sleep(0.005)
                if app.error:
                    raise SystemExit(app.error)
                sc = app.scene
                if sc is not None and "findings" in marks and getattr(sc.analysis, "projection_if_ready", None) is not None:
                    marks.setdefault("projection", time.perf_counter())  # polled: the header shows it next frame
                if PAN and "first" in marks and "projection" not in marks and len(lag) < 600:
                    # a pan while the rest loads: wall ms from the key to the lanes redrawn, by what was shown
                    await asyncio.sleep(0.2)
                    phase = "projection" if "findings" in marks else state(app.scene)
                    phase = "preview" if phase == "provisional" else phase
                    # the key as a terminal sends it (the pilot's press waits for the process to be idle, up to
                    # 1 s a wait while the load thread works, so it would pace the presses, not time them): wall ms
                    # from sending it to the first lanes frame after the screen handled it
                    from textual import events
                    key = "a" if len(lag) % 2 else "d"
                    ev = events.Key(key, key)
                    ev.set_sender(app)
                    key_done[id(ev)] = None
                    k0 = time.perf_counter()
                    app._driver.send_message(ev)
                    while key_done[id(ev)] is None and time.perf_counter() - k0 < 60:
                        await asyncio.sleep(0.001)
                    done = key_done.pop(id(ev)) or time.perf_counter()
                    while (not frames or frames[-1] < done) and time.perf_counter() - done < 5:
                        await asyncio.sleep(0.001)
                    import bisect
                    i = bisect.bisect_left(frames, done)
                    ms = ((frames[i] if i < len(frames) else time.perf_counter()) - k0) * 1000
                    after = "projection" if "findings" in marks else state(app.scene)
                    lag.append((phase, ms, k0 - t, after, doing(k0, frames[-1]) if ms > 200 else []))
            stop.set()
            out["lag"] = sorted(x[1] for x in lag if x[0] == "preview")
            out["lag_by"] = {{ph: sorted(x[1] for x in lag if x[0] == ph) for ph in sorted({{x[0] for x in lag}})}}
            out["lag_all"] = [x[1] for x in lag]
            out["slow"] = [x for x in lag if x[1] > 200]
            # every stall a key could meet, whether or not a press met it: the longest handlers on the screen's
            # thread and the longest GIL holds, with when (s from the start) and where
            out["handlers"] = sorted(((d * 1000, h0 - t, n) for h0, d, n in handlers), reverse=True)[:10]
            out["holds"] = sorted(((d * 1000, g0 - t, m, o) for g0, d, m, o in holds), reverse=True)[:10]
            out["n_holds"] = [len([g for g in holds if g[1] > x]) for x in (0.05, 0.1, 0.2)]
            out["installs"] = installs
            for k in ("first", "full", "gaps", "findings"):
                out[k] = marks[k] - t
            for k in ("provisional", "carried", "projection"):
                out[k] = marks[k] - t if k in marks else None
            out["s"] = out["first"]
            out["n"] = app.scene.model.n
            out["rss"], out["rss_children"] = rss()
            print(json.dumps(out), flush=True)
            os._exit(0)

    asyncio.run(run())
elif mode in ("open", "keys"):
    from gapscope.tui.app import GapscopeApp
    sys.path.insert(0, {bench!r})
    from _first_frame import watch_first_frame

    first = watch_first_frame()

    async def run():
        app = GapscopeApp([path], load_opts={{}})
        t = time.perf_counter()
        async with app.run_test(size=(200, 50)) as pilot:
            while "t" not in first:
                await asyncio.sleep(0.002)
                if app.error:
                    raise SystemExit(app.error)
            out["s"] = first["t"] - t
            out["n"] = app.scene.model.n
            if mode == "keys":
                await keys(app, pilot)
            out["rss"], out["rss_children"] = rss()
            print(json.dumps(out), flush=True)
            # the cache entry of a big trace is written by a thread after the load: let it finish (untimed), so
            # the next open finds it; then leave without waiting for the analysis thread
            import threading
            for th in threading.enumerate():
                if th.name == "gapscope-cache-write":
                    th.join()
            os._exit(0)

    async def keys(app, pilot):
        while not app.scene.any_analysis:
            await asyncio.sleep(0.05)
        await app.workers.wait_for_complete()
        await pilot.pause()
        sc = app.scene
        res = {{}}

        async def press(label, key):
            c0 = time.process_time()
            w0 = time.perf_counter()
            await pilot.press(key)
            await pilot.pause()
            res.setdefault(label, []).append(((time.process_time() - c0) * 1000, (time.perf_counter() - w0) * 1000))

        await press("fit", "0")
        # zoom in from the whole window down to ~one kernel, panning at each level, then zoom back out
        levels = 0
        while sc.view.span > 20_000 and levels < 40:
            for k in ("d", "a") * 3:
                await press(f"pan@{{sc.view.span}}", k)
            await press("zoom", "w")
            levels += 1
        for k in ("d", "a") * 3:
            await press(f"pan@{{sc.view.span}}", k)
        while len(res["zoom"]) < 100:
            await press("zoom", "s" if len(res["zoom"]) % 2 else "w")
        npan = sum(len(v) for k, v in res.items() if k.startswith("pan@"))
        while npan < 100:
            await press(f"pan@{{sc.view.span}}", "d" if npan % 2 else "a")
            npan += 1
        for _ in range(100):
            await press("next gap", "n")
        for _ in range(50):  # a key nothing binds: what the pilot and Textual's key routing cost by themselves
            await press("unbound", "f12")
        out["keys"] = res
        out["levels"] = levels

    asyncio.run(run())
out["rss"], out["rss_children"] = rss()
print(json.dumps(out))
"""


def _child(mode: str, path: str, env: dict, repo: str = REPO) -> dict:
    r = subprocess.run([sys.executable, "-c", _CHILD.format(repo=repo, bench=BENCH), mode, path], capture_output=True,
                       text=True,
                       env=env, timeout=1800)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} {path}: rc {r.returncode}\n{r.stderr[-3000:]}")
    return json.loads(lines[-1])


def _best(mode: str, path: str, env: dict, repeat: int, fresh_cache: bool = False) -> dict:
    best = None
    for _ in range(repeat):
        if fresh_cache:
            shutil.rmtree(env["GAPSCOPE_CACHE_DIR"], ignore_errors=True)
        r = _child(mode, path, env)
        if best is None or r["s"] < best["s"]:
            best = r
    return best


def _json_size(path: str) -> int:
    import gzip

    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return os.path.getsize(path)
    n = 0
    with gzip.open(path, "rb") as f:
        while b := f.read(1 << 24):
            n += len(b)
    return n


def _report(path: str, env: dict, repeat: int) -> float:
    best = None
    for _ in range(repeat):
        shutil.rmtree(env["GAPSCOPE_CACHE_DIR"], ignore_errors=True)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gapscope", "report", path], cwd=REPO, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best


def _pct(xs, q):
    import numpy as np

    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def machine() -> str:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import numpy
    import orjson
    import textual

    return (f"{cpu or platform.processor()}, {len(os.sched_getaffinity(0))} cores, {mem:.0f} GiB; "
            f"Python {platform.python_version()}, orjson {orjson.__version__}, numpy {numpy.__version__}, "
            f"textual {textual.__version__}; load average at start {os.getloadavg()[0]:.2f}")


def profile(path: str, env: dict) -> None:
    """cProfile of what the explorer's load thread does before the first frame: load + lanes (Scene)."""
    code = (f"import sys; sys.path.insert(0, {REPO!r})\n"
            "import cProfile, pstats, io, time\n"
            "from gapscope.trace import load\nfrom gapscope.tui.scene import Scene\n"
            "pr = cProfile.Profile(); t = time.perf_counter(); pr.enable()\n"
            f"m = load({path!r}, no_cache=True); s = Scene({path!r}, m)\n"
            "pr.disable(); print(f'load + lanes under cProfile: {time.perf_counter() - t:.2f} s (parent process)')\n"
            "st = pstats.Stats(pr); st.sort_stats('tottime').print_stats(18)\n")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def _print_keys(big: str, k: dict) -> None:
    print(f"\nkeys on {os.path.basename(big)} at 200x50 ({k['levels']} zoom levels from the whole window to "
          "<= 20 us): CPU ms from key press to redrawn screen (wall incl. pilot waits)")
    groups = {"pan": [], "zoom": k["keys"]["zoom"], "next gap": k["keys"]["next gap"]}
    if "unbound" in k["keys"]:
        groups["unbound"] = k["keys"]["unbound"]
    worst_level = (0.0, None)
    for lab, v in k["keys"].items():
        if lab.startswith("pan@"):
            groups["pan"].extend(v)
            p95 = _pct([c for c, _ in v], 95)
            if p95 > worst_level[0]:
                worst_level = (p95, int(lab[4:]))
    for lab, v in groups.items():
        c = [x for x, _ in v]
        w = [y for _, y in v]
        print(f"  {lab:9} n={len(c):3}  median {_pct(c, 50):6.1f}  p95 {_pct(c, 95):6.1f}  max {max(c):6.1f}"
              f"   (wall median {_pct(w, 50):6.1f} p95 {_pct(w, 95):6.1f})")
    print(f"  worst pan p95 at one zoom level: {worst_level[0]:.1f} ms (window {worst_level[1]} ns)")


def keys_only(paths: list[str], repos: list[str], rounds: int) -> int:
    """Key press timings on the biggest trace, per checkout, the checkouts alternating round by round."""
    big = max(paths, key=os.path.getsize)
    print(machine())
    with tempfile.TemporaryDirectory(prefix="gapscope-bench-") as tmp:
        env = dict(os.environ, GAPSCOPE_CACHE_DIR=os.path.join(tmp, "cache"), GAPSCOPE_FORCE_TUI="1")
        _child("analysis", big, env)  # writes the cache entry (and waits for it): every timed child opens warm
        for r in range(rounds):
            for repo in repos:
                print(f"\nround {r + 1}, {repo} (load average {os.getloadavg()[0]:.2f}):", end="")
                _print_keys(big, _child("keys", big, env, repo))
    return 0


def _lag(xs: list) -> str:
    return f"{_pct(xs, 50):.0f} / {max(xs):.0f} ({len(xs)})" if xs else "- (no preview)"


def progressive(paths: list[str], repos: list[str], rounds: int, pan: bool = True) -> int:
    """Cold opens of the biggest trace, the checkouts alternating within each round, each round with its own
    floor (the bare parse of the same bytes): time to the first lanes, to the full model's lanes and to the gap
    list, and the peak RSS of the app plus its worker; the table takes the least of the rounds and the ratios to
    the least floor."""
    big = max(paths, key=os.path.getsize)
    size = _json_size(big)
    print(machine())
    print(f"{os.path.basename(big)}: {size / 1e6:.0f} MB of JSON; {rounds} rounds, checkouts alternating")
    res: dict = {r: [] for r in repos}
    floors = []
    with tempfile.TemporaryDirectory(prefix="gapscope-bench-") as tmp:
        env = dict(os.environ, GAPSCOPE_CACHE_DIR=os.path.join(tmp, "cache"), GAPSCOPE_FORCE_TUI="1",
                   GAPSCOPE_BENCH_PAN="1" if pan else "0")
        for r in range(rounds):
            fl = _child("floor", big, env)
            floors.append(fl["s"])
            line = [f"round {r + 1} (load {os.getloadavg()[0]:.1f}): floor {fl['s']:.2f}"]
            for repo in (repos if r % 2 == 0 else repos[::-1]):
                shutil.rmtree(env["GAPSCOPE_CACHE_DIR"], ignore_errors=True)
                o = _child("progressive", big, env, repo)
                o["floor"] = fl["s"]
                res[repo].append(o)
                lag = o.get("lag") or []
                pr = "-" if o.get("provisional") is None else f"{o['provisional']:.2f}"
                opt = {k: ("-" if o.get(k) is None else f"{o[k]:.2f}") for k in ("carried", "findings", "projection")}
                line.append(f"{os.path.basename(repo)}: first {o['first']:.2f} provisional gaps {pr} full {o['full']:.2f}"
                            f" (provisional list carried: {opt['carried']}) gaps {o['gaps']:.2f} findings "
                            f"{opt['findings']} projection {opt['projection']} RSS "
                            f"{(o['rss'] + o['rss_children']) / size:.2f}x"
                            + (f" keys while reading n={len(lag)} median {_pct(lag, 50):.0f} max {max(lag):.0f} ms"
                               if lag else "")
                            + "".join(f"; keys on {ph}: n={len(xs)} median {_pct(xs, 50):.0f} max {max(xs):.0f} ms"
                                      for ph, xs in (o.get("lag_by") or {}).items() if xs and ph != "preview"))
            print("  " + " | ".join(line), flush=True)
            for repo in (repos if r % 2 == 0 else repos[::-1]):
                o = res[repo][-1]
                xs = o.get("lag_all") or []
                if not xs:
                    continue
                print(f"    {os.path.basename(repo)} keys from the first lanes to the projection: n={len(xs)} median "
                      f"{_pct(xs, 50):.0f} p95 {_pct(xs, 95):.0f} max {max(xs):.0f} ms; over 200 ms: "
                      f"{len(o['slow'])}" + "".join(f"; {ph} p95 {_pct(v, 95):.0f} max {max(v):.0f} (n={len(v)})"
                                                     for ph, v in o["lag_by"].items() if v), flush=True)
                for ph, ms, at, after, what in o["slow"]:
                    print(f"      {ms:6.0f} ms at {at:6.2f} s ({ph} -> {after}): " + ("; ".join(what) or "?"))
                print("    what the loader posted, handled on the screen's thread (s from the start: wall / CPU ms): "
                      + "; ".join(f"{n} at {at:.2f}: {w:.0f} / {c:.0f}" for n, at, w, c in o.get("installs", [])))
                print("    longest handlers on the screen's thread: " + "; ".join(
                    f"{n} {d:.0f} ms at {at:.2f} s" for d, at, n in o["handlers"]))
                print(f"    GIL holds over 50 / 100 / 200 ms: {' / '.join(map(str, o['n_holds']))}; the longest:")
                for d, at, m, oth in o["holds"][:6]:
                    print(f"      {d:5.0f} ms at {at:6.2f} s: screen [{m}] others [{oth}]")
    fmin = min(floors)
    hdr = ("checkout", "floor s (min)", "first lanes s", "/floor", "provisional gap list s", "/floor", "full lanes s",
           "/floor", "gap list s", "/floor", "findings s", "projection s",
           "peak RSS/JSON (app+worker)", "same-round ratios first / gaps (best)",
           "pan while reading, wall ms median / max (n)")
    table = [hdr]
    for repo in repos:
        rs = res[repo]
        first = min(o["first"] for o in rs)
        full = min(o["full"] for o in rs)
        gaps = min(o["gaps"] for o in rs)
        provs = [o["provisional"] for o in rs if o.get("provisional") is not None]
        prov = (f"{min(provs):.2f}", f"{min(provs) / fmin:.3f}x") if provs else ("-", "-")
        rss_o = min(rs, key=lambda o: o["rss"] + o["rss_children"])
        table.append((repo, f"{fmin:.2f}", f"{first:.2f}", f"{first / fmin:.3f}x", *prov, f"{full:.2f}",
                      f"{full / fmin:.2f}x", f"{gaps:.2f}", f"{gaps / fmin:.2f}x",
                      f"{min(o['findings'] for o in rs):.2f}",
                      "-" if any(o.get("projection") is None for o in rs) else f"{min(o['projection'] for o in rs):.2f}",
                      f"{(rss_o['rss'] + rss_o['rss_children']) / size:.2f} ({rss_o['rss'] / size:.2f}+"
                      f"{rss_o['rss_children'] / size:.2f})",
                      f"{min(o['first'] / o['floor'] for o in rs):.3f}x / {min(o['gaps'] / o['floor'] for o in rs):.2f}x",
                      _lag([x for o in rs for x in o.get("lag") or []])))
    widths = [max(len(r[i]) for r in table) for i in range(len(hdr))]
    for i, r in enumerate(table):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keys", action="store_true", help="key press timings on the biggest trace")
    ap.add_argument("--profile", action="store_true", help="cProfile of one cold load + lanes of the 2nd trace")
    ap.add_argument("--no-report", action="store_true")
    ap.add_argument("--keys-only", action="store_true", help="only the key press timings, on the biggest trace")
    ap.add_argument("--repo", action="append", help="with --keys-only: a checkout to time (repeatable; default "
                                                    "this one)")
    ap.add_argument("--rounds", type=int, default=1, help="with --keys-only / --progressive: rounds over the "
                                                            "checkouts")
    ap.add_argument("--progressive", action="store_true",
                    help="cold opens of the biggest trace: first lanes, full lanes, gap list, RSS (--repo: "
                         "checkouts to compare, alternating; --rounds)")
    ap.add_argument("--no-pan", action="store_true",
                    help="with --progressive: no pans while the trace loads (a person who waits for the gap list)")
    a = ap.parse_args(argv)
    if a.progressive:
        paths = a.traces or sorted(glob.glob("/tmp/gapscope-bench/big_*.json"), key=os.path.getsize)
        return progressive(paths, [os.path.abspath(r) for r in (a.repo or [REPO])], max(a.rounds, 1), not a.no_pan)
    if a.keys_only:
        paths = a.traces or sorted(glob.glob("/tmp/gapscope-bench/big_*.json"), key=os.path.getsize)
        return keys_only(paths, [os.path.abspath(r) for r in (a.repo or [REPO])], a.rounds)
    paths = a.traces or [SAMPLE] + sorted(glob.glob("/tmp/gapscope-bench/big_*.json"), key=os.path.getsize)
    print(machine())
    print(f"best of {a.repeat} fresh processes per cell")
    rows = []
    with tempfile.TemporaryDirectory(prefix="gapscope-bench-") as tmp:
        env = dict(os.environ, GAPSCOPE_CACHE_DIR=os.path.join(tmp, "cache"), GAPSCOPE_FORCE_TUI="1")
        for p in paths:
            size = _json_size(p)
            fl = _best("floor", p, env, a.repeat)
            ld = _best("load", p, env, a.repeat)
            co = _best("open", p, env, a.repeat, fresh_cache=True)
            wa = _best("open", p, env, a.repeat)  # the cold runs left the cache entry
            an = _best("analysis", p, env, a.repeat)
            rep = None if a.no_report else _report(p, env, a.repeat)
            rows.append((p, size, fl, ld, co, wa, an, rep))
            r = rows[-1]
            print(f"  {os.path.basename(p)}: floor {fl['s']:.2f} load {ld['s']:.2f} cold {co['s']:.2f} "
                  f"warm {wa['s']:.3f} analysis {an['s']:.2f} report {rep if rep is None else round(rep, 2)}",
                  flush=True)
        hdr = ("trace", "JSON MB", "events", "floor s", "cold open s", "cold/floor", "load s", "warm open s",
               "analysis s", "analysis/load", "report s", "floor RSS/JSON", "cold RSS/JSON (self+worker)")
        table = [hdr]
        for p, size, fl, ld, co, wa, an, rep in rows:
            table.append((os.path.basename(p), f"{size / 1e6:.0f}", f"{co['n']:,}", f"{fl['s']:.2f}", f"{co['s']:.2f}",
                          f"{co['s'] / fl['s']:.2f}x", f"{ld['s']:.2f}", f"{wa['s']:.3f}", f"{an['s']:.2f}",
                          f"{an['s'] / ld['s']:.2f}", "-" if rep is None else f"{rep:.2f}",
                          f"{fl['rss'] / size:.2f}",
                          f"{(co['rss'] + co['rss_children']) / size:.2f} ({co['rss'] / size:.2f}+"
                          f"{co['rss_children'] / size:.2f})"))
        widths = [max(len(r[i]) for r in table) for i in range(len(hdr))]
        for i, r in enumerate(table):
            print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
            if i == 0:
                print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        if a.keys:
            _print_keys(paths[-1], _child("keys", paths[-1], env))
        if a.profile:
            profile(paths[1] if len(paths) > 1 else paths[0], env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
