"""Hostile inputs at full size: time and peak RSS of ``gapscope info`` and ``gapscope report`` on each.

    python benchmarks/bench_hostile.py                      # every case, this checkout
    python benchmarks/bench_hostile.py --repo OTHER_CHECKOUT --timeout 700 ws_array_gz threads
    python benchmarks/bench_hostile.py --list

The cases are built by ``tests/hostile.py`` in a temporary folder (``--dir`` to keep and reuse them; a case
already there is not built again). Every command runs in a fresh process (``python -m gapscope CMD --no-cache
CASE``, in the checkout given by ``--repo``) under a wall-clock limit; printed per command: wall time, CPU time (user + system, all its processes; the machine may
be shared, and CPU time moves less with the load), exit
status, the peak RSS of the largest process of the command (``ru_maxrss`` from ``wait4``: the loader's
forked worker is one of its children), the peak of the *sum* of the RSS of the command's processes sampled
every 20 ms (on a timeout both are the sampled peaks), and the first line of stderr. The budget of issue #16: every input answered (exit 0, or 2 with
one ``gapscope: error:`` line) within 30 s, peak RSS at most max(2 GB, 4x the decompressed JSON).
"""

from __future__ import annotations

import argparse
import gzip
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import hostile as H  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20

#: name -> (file name, builder(path)); full size
CASES = {
    "ws_array_gz": ("ws_array.json.gz", lambda p: H.whitespace_array(p, 2 * GiB)),
    "trailing_ws_gz": ("trailing_ws.json.gz", lambda p: H.trailing_whitespace(p, 3 * GiB // 2)),
    "zeros_gz": ("zeros.json.gz", lambda p: H.zeros(p, 2 * GiB)),
    "repeated_gz": ("repeated.json.gz", lambda p: H.repeated_events(p, 2 * GiB)),
    "ws_between_plain": ("ws_between.json", lambda p: H.whitespace_between_events(p, 20_000, GiB)),
    "threads": ("threads.json", lambda p: H.threads(p, 200_000)),
    "names": ("names.json", lambda p: H.names(p, 200_000)),
    "corr_collide": ("corr_collide.json", lambda p: H.colliding_correlations(p, 200_000)),
    "same_ts": ("same_ts.json", lambda p: H.same_timestamp(p, 500_000)),
    "gaps_1ns": ("gaps_1ns.json", lambda p: H.one_ns_gaps(p, 200_000)),
    "deep_python": ("deep_python.json", lambda p: H.deep_python(p, 20_000, 2_000)),
    "big_name": ("big_name.json", lambda p: H.big_name(p, 50 * MiB)),
    "quotes": ("quotes.json", lambda p: H.unescaped_quotes(p, 500_000)),
    "damaged_nested": ("damaged_nested.json", lambda p: H.damaged_nested(p, 2560, 25_000)),
}


def _json_size(path: Path) -> int:
    """The decompressed size (of a gzip: counted once, then kept beside it in ``NAME.size``)."""
    if path.suffix != ".gz":
        return path.stat().st_size
    side = path.with_name(path.name + ".size")
    if side.exists() and side.stat().st_mtime >= path.stat().st_mtime:
        return int(side.read_text())
    n = 0
    with gzip.open(path, "rb") as f:
        while True:
            b = f.read(64 * MiB)
            if not b:
                break
            n += len(b)
    side.write_text(str(n))
    return n


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def run_one(repo: Path, cmd: str, path: Path, timeout: float) -> dict:
    env = dict(os.environ)
    env.pop("GAPSCOPE_DEBUG", None)
    env["PYTHONPATH"] = str(repo)
    timef = tempfile.NamedTemporaryFile(suffix=".time")
    # ru_maxrss through /usr/bin/time: a child forked straight from this process starts from its peak
    args = ["/usr/bin/time", "-v", "-o", timef.name, sys.executable, "-m", "gapscope", cmd, "--no-cache", str(path)]
    errf = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=errf,
                            start_new_session=True)
    peak_sum = peak_max = 0
    timed_out = False
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        rss = [_rss(p) for p in _tree(proc.pid)[1:]]  # not /usr/bin/time itself
        peak_sum = max(peak_sum, sum(rss))
        peak_max = max([peak_max, *rss])
        if time.perf_counter() - t0 > timeout:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    errf.seek(0)
    err = errf.read().decode("utf-8", "replace").strip().splitlines()
    maxrss = 0
    cpu = 0.0
    for line in Path(timef.name).read_text().splitlines():
        if "User time (seconds)" in line or "System time (seconds)" in line:
            cpu += float(line.split(":")[1])
        if "Maximum resident set size" in line:
            maxrss = int(line.split(":")[1]) * 1024
        if "Exit status" in line and not timed_out:
            proc.returncode = int(line.split(":")[1])
    if timed_out:
        maxrss = peak_max
    return {"wall": wall, "cpu": cpu, "rc": "timeout" if timed_out else proc.returncode, "maxrss": maxrss,
            "peak_sum": peak_sum, "stderr": err[0][:150] if err else "", "stderr_lines": len(err)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    ap.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose gapscope runs (default: this one)")
    ap.add_argument("--dir", type=Path, default=None, help="build the cases here and keep them")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before a command is killed (default 120)")
    ap.add_argument("--commands", default="info,report", help="comma-separated: info, report (default both)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--build", nargs=2, metavar=("CASE", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.build:
        CASES[a.build[0]][1](Path(a.build[1]))
        return 0
    if a.list:
        for k, (fn, _) in CASES.items():
            print(f"{k:18s} {fn}")
        return 0
    names = a.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    tmp = None
    if a.dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="gapscope-hostile-")
        where = Path(tmp.name)
    else:
        where = a.dir
        where.mkdir(parents=True, exist_ok=True)
    repo = a.repo.resolve()
    print(f"repo {repo}  cases in {where}  limit {a.timeout:.0f} s")
    print(f"{'case':18s} {'file':>9s} {'JSON':>9s}  {'cmd':6s} {'wall s':>7s} {'cpu s':>6s} {'exit':>7s} {'maxRSS':>8s} "
          f"{'sum RSS':>8s}  budget  stderr")
    try:
        for name in names:
            fn, build = CASES[name]
            path = where / fn
            if not path.exists():
                t0 = time.perf_counter()
                subprocess.run([sys.executable, __file__, "--build", name, str(path)], check=True)
                print(f"  (built {fn} in {time.perf_counter() - t0:.1f} s)", flush=True)
            size = path.stat().st_size
            jsize = _json_size(path)
            for cmd in a.commands.split(","):
                r = run_one(repo, cmd, path, a.timeout)
                ok_rc = r["rc"] == 0 or (r["rc"] == 2 and r["stderr_lines"] == 1
                                         and r["stderr"].startswith("gapscope: error:"))
                within = ok_rc and r["wall"] <= 30 and r["maxrss"] <= max(2e9, 4 * jsize)
                print(f"{name:18s} {size / MiB:8.1f}M {jsize / MiB:8.1f}M  {cmd:6s} {r['wall']:7.2f} {r['cpu']:6.2f} {str(r['rc']):>7s} "
                      f"{r['maxrss'] / MiB:7.0f}M {r['peak_sum'] / MiB:7.0f}M  {'ok' if within else 'OVER':6s}  "
                      f"{r['stderr']}", flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
