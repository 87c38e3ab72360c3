"""Where a cold open's time goes: py-spy samples of the explorer opening a trace (headless, 200x50, empty cache),
from the app's start to its first drawn frame, grouped by process, thread and phase.

    python benchmarks/profile_open.py [TRACE ...]        # default: the sample and /tmp/gapscope-bench/big_100M.json

Needs py-spy (`pip install py-spy`; not a dependency of gapscope). The child process imports everything first
and waits; py-spy attaches to it (and to the loader's forked worker, `--subprocesses`), then the open starts.
py-spy samples threads that are running (not those waiting on a lock, a pipe or the GIL), so each row is CPU
time; the rows of different threads and processes overlap in time. Sampled at 1 kHz: one sample ~ 1 ms.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(REPO, "traces", "demo-eager.decode.json.gz")

_CHILD = r"""
import asyncio, os, sys, threading, time
sys.path.insert(0, {repo!r})
import numpy, orjson
from gapscope.trace import load
from gapscope.tui.app import GapscopeApp
sys.path.insert(0, {bench!r})
from _first_frame import watch_first_frame

first = watch_first_frame()
print("ready", flush=True)
sys.stdin.readline()


async def run():
    app = GapscopeApp([sys.argv[1]], load_opts={{}})
    t = time.perf_counter()
    async with app.run_test(size=(200, 50)):
        while "t" not in first:
            await asyncio.sleep(0.002)
            if app.error:
                raise SystemExit(app.error)
        print(f"first frame {{first['t'] - t:.3f}} s", flush=True)
        for th in threading.enumerate():
            if th.name == "gapscope-cache-write":
                th.join()
        os._exit(0)

asyncio.run(run())
"""

# (phase, any of these frame substrings), first match from the innermost frame outwards
LOAD_PHASES = [
    ("cache write", ("cache.py",)),
    ("lanes (Scene)", ("scene.py", "lanes.py")),
    ("merge the worker's part", ("merge_parts",)),
    ("finish (sort, duplicates, nesting, links)", ("finish (gapscope/trace/build.py", "_finish (gapscope/trace/reader.py")),
    ("read + gunzip", ("read_bytes", "_gunzip", "_map (")),
    ("parse (typed decode + staging)", ("add_bytes", "_events", "stage_typed", "stage_dicts", "_commit")),
]
# the main thread: by the outermost marker (CSS applied while mounting counts as mounting)
MAIN_PHASES = [
    ("app: show the trace (fill panels)", ("_add_scene", "show_scene", "_first_frame_drawn")),
    ("layout + paint (arrange, compositor, widgets' lines)", ("_refresh_layout", "_compositor_refresh",
                                                              "render_update")),
    ("compose + mount widgets (their styles too)", ("_on_compose", "mount_all", "_register", "compose (")),
    ("styles (CSS parse, restyle)", ("stylesheet.py",)),
    ("app start (App.__init__, driver)", ("App.__init__", "_process_messages (textual/app.py", "driver")),
]


def _classify(frames: list[str], phases, outer_first: bool = False) -> str:
    if frames and frames[-1].split(" (")[0].endswith(("wait", "recv", "recv_bytes", "_recv", "acquire")):
        return "waiting (screen, worker): not CPU"
    for f in (frames if outer_first else reversed(frames)):
        for name, keys in phases:
            if any(k in f for k in keys):
                return name
    if any("pilot.py" in f or "run_test" in f for f in frames):
        return "benchmark harness (pilot, wait loop)"
    return "other"


def profile(path: str, env: dict, rate: int = 1000) -> tuple[str, collections.Counter]:
    # the script from a file: py-spy names each process by its command line, newlines included
    with tempfile.NamedTemporaryFile("w", suffix="_gapscope_open.py", delete=False) as f:
        f.write(_CHILD.format(repo=REPO, bench=os.path.dirname(os.path.abspath(__file__))))
        script = f.name
    child = subprocess.Popen([sys.executable, script, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env)
    assert child.stdout.readline().strip() == "ready"
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
        raw = f.name
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(child.pid), "-r", str(rate), "--threads",
                            "--subprocesses", "-f", "raw", "-o", raw], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    child.stdin.write("go\n")
    child.stdin.flush()
    out = child.stdout.read()
    child.wait()
    spy.wait(timeout=60)
    c: collections.Counter = collections.Counter()
    other: collections.Counter = collections.Counter()
    with open(raw) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not n.isdigit():
                continue
            frames = stack.split(";")
            n = int(n)
            head = frames[0]
            if len(frames) > 1 and frames[1].startswith("process "):
                c[("loader worker process", _classify(frames, LOAD_PHASES))] += n
                continue
            thread = frames[1] if len(frames) > 1 else ""
            if "gapscope-cache-write" in thread:
                c[("cache-write thread", "cache write")] += n
            elif "MainThread" in thread or thread.strip().endswith(f"({child.pid})"):
                c[("main thread (Textual)", _classify(frames, MAIN_PHASES, outer_first=True))] += n
            else:
                ph = _classify(frames, LOAD_PHASES)
                c[("load thread", ph)] += n
                if ph == "other":
                    other[" < ".join(f.split(" (")[0] for f in reversed(frames[-4:]))] += n
    if os.environ.get("PROFILE_OTHER"):
        for k, n in other.most_common(8):
            print(f"    load thread, other: {n:5d}  {k[:160]}")
    os.unlink(raw)
    os.unlink(script)
    return out.strip(), c


def main(argv=None) -> int:
    paths = (argv if argv is not None else sys.argv[1:]) or [SAMPLE, "/tmp/gapscope-bench/big_100M.json"]
    if shutil.which("py-spy") is None:
        print("profile_open: error: py-spy not found (pip install py-spy)", file=sys.stderr)
        return 2
    for p in paths:
        with tempfile.TemporaryDirectory(prefix="gapscope-prof-") as tmp:
            env = dict(os.environ, GAPSCOPE_CACHE_DIR=os.path.join(tmp, "cache"), GAPSCOPE_FORCE_TUI="1")
            first, c = profile(p, env)
        print(f"\n{os.path.basename(p)}: {first}; py-spy CPU samples (~ms) from the app's start to the first "
              "frame, plus the cache write after it")
        total = sum(c.values())
        by_thread = collections.Counter()
        for (th, _), n in c.items():
            by_thread[th] += n
        for th, tn in by_thread.most_common():
            print(f"  {th:28} {tn:6d}  {100 * tn / total:5.1f}%")
            for (t2, ph), n in sorted(c.items(), key=lambda kv: -kv[1]):
                if t2 == th:
                    print(f"      {ph:44} {n:6d}  {100 * n / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
