"""The robustness corpus (empty, damaged, odd and hostile inputs) through ``gapscope info``, ``gapscope report``
(Markdown and ``--json``): each case loads (with a warning saying what was odd, where something was odd) or
fails with exactly one ``gapscope: error: ...`` line and exit 2. Never a traceback, never a hang, bounded memory.

The whole corpus runs in one child process (memory capped with RLIMIT_AS, each command under an alarm, the
child under a subprocess timeout); every case is then checked as its own test."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.synth import Synth
from tests.test_robust_load import _good, _kineto_layout

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).resolve().parent.parent / "tui" / "report" / "findings.schema.json"  # the contract shipped in the package


@dataclass
class Case:
    name: str
    make: object  # (folder: Path) -> Path
    outcome: str  # "ok": loads, no warning needed; "warn": loads and a warning contains `needle`; "error": exit 2
    needle: str = ""
    extra: tuple = ()  # extra command-line options (before the trace)
    warn_in: tuple = ("info", "report", "report_json")  # where the warning must show (analysis ones: reports)


def _write(folder: Path, name: str, data: bytes) -> Path:
    p = folder / name
    p.write_bytes(data)
    return p


def _raw() -> bytes:
    return _kineto_layout(_good().doc())


def _events(evs: list, top: dict | None = None) -> bytes:
    return json.dumps({"schemaVersion": 1, **(top or {}), "traceEvents": evs}).encode()


def _x(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _k(name, ts, dur, corr=-1, stream=7):
    return _x(name, ts, dur, cat="kernel", pid=0, tid=stream, device=0, stream=stream, correlation=corr)


def _rt(name, ts, dur, corr):
    return _x(name, ts, dur, cat="cuda_runtime", correlation=corr)


def _missing_fields(d):
    evs = [_x("aten::mm", 0, 10), _k("gemm", 20, 5)]
    evs += [{"ph": "X", "cat": "cpu_op", "name": "no_ts", "pid": 1, "tid": 1, "dur": 3},
            {"ph": "X", "cat": "cpu_op", "name": "no_dur", "pid": 1, "tid": 1, "ts": 30},
            {"cat": "cpu_op", "name": "no_ph", "pid": 1, "tid": 1, "ts": 31, "dur": 1},
            {"ph": "X", "name": "no_cat", "pid": 1, "tid": 1, "ts": 32, "dur": 1},
            {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 40, "dur": 2}]  # no name
    return _write(d, "missing_fields.json", _events(evs))


def _neg_zero(d):
    evs = [_x("aten::mm", 0, 10), _k("gemm", 20, 5), _k("zero", 30, 0), _k("neg", 40, -5), _x("neg_op", 50, -1)]
    return _write(d, "neg_zero.json", _events(evs))


def _mixed_ids(d):
    evs = [_x("aten::mm", 0, 10, pid="1", tid=1), _x("aten::add", 12, 3, pid=1, tid="1"),
           _rt("cudaLaunchKernel", 1, 2, corr="5"), _k("gemm", 20, 5, corr=5),
           _x("str_tid", 30, 2, pid="host", tid="thread 7"),
           {"ph": "X", "cat": "kernel", "name": "k2", "pid": "0", "tid": "stream 7", "ts": 40, "dur": 2,
            "args": {"device": "0", "stream": "7", "correlation": "x"}}]
    return _write(d, "mixed_ids.json", _events(evs))


def _dup_unsorted(d):
    s = _good()
    for i in range(5):
        s.launch(ts=100 + 10 * i, dur=1, kernel=f"k{i}", k_ts=103 + 10 * i, k_dur=4)
    evs = s.doc()["traceEvents"]
    evs = list(reversed(evs + evs))  # every event twice, newest first
    return _write(d, "dup_unsorted.json", _events(evs, {k: v for k, v in s.top.items()}))


def _overlap_stream(d):
    s = Synth()
    s.launch(ts=0, dur=1, kernel="a", k_ts=10, k_dur=20)
    s.launch(ts=2, dur=1, kernel="b", k_ts=15, k_dur=20)  # same stream, overlaps a
    s.launch(ts=4, dur=1, kernel="c", k_ts=15, k_dur=5)  # inside both
    s.launch(ts=50, dur=1, kernel="d", k_ts=60, k_dur=5)
    return s.write(d / "overlap.json")


def _orphans(d):
    s = Synth()
    s.launch(ts=0, dur=1, kernel="ok", k_ts=5, k_dur=2)
    s.kernel("no_launch", 20, 3, corr=999)
    s.runtime("cudaLaunchKernel", 30, 1)  # its kernel never ran (or was not recorded)
    s.kernel("after", 40, 2, corr=-1)
    return s.write(d / "orphans.json")


def _cpu_only(d):
    s = Synth()
    with s.frame("model.py(1): forward", 0, 100):
        s.cpu_op("aten::add", 5, 10)
    return s.write(d / "cpu_only.json")


def _single(d):
    return _write(d, "single.json", _events([_k("lonely", 5, 3)]))


def _single_cpu(d):
    return _write(d, "single_cpu.json", _events([_x("aten::add", 5, 3)]))


HOSTILE = ["[bold red]x[/]", "[/foo]", "[link=file:///etc/passwd]y", "\x1b[2J\x1b[31mansi\x1b[0m", "\x1b]0;title\x07",
           "ctl\x00\x01\x08\x7f\x9b", "tab\there", "rtl\u202eevil", "zw\u200bj", "emoji \U0001f600 ok",
           "a" * 200 + "[b]"]


def _hostile_names(d):
    s = Synth()
    s.annotation(HOSTILE[0], 0, 400)
    t = 10
    for i, n in enumerate(HOSTILE):
        with s.frame(f"{n}.py(1): {n}", t - 1, 30):
            s.cpu_op(n, t, 5)
            s.launch(n, ts=t + 6, dur=2, kernel=n, k_ts=t + 25, k_dur=3)
        t += 30
    return s.write(d / "hostile.json")


def _invalid_utf8(d):
    raw = _raw().replace(b'"aten::relu"', b'"aten::re\xff\xfelu\xc3"').replace(b'"gemm"', b'"ge\xed\xa0\x80mm"')
    return _write(d, "bad_utf8.json", raw)


def _raw_controls(d):
    raw = _raw().replace(b'"step"', b'"st\nep\x1b[31m\x00"')
    return _write(d, "raw_controls.json", raw)


def _huge_names(d):
    s = Synth()
    big = "x" * (1 << 20)
    s.annotation(big, 0, 100)
    with s.frame("model.py(1): " + "f" * (1 << 20), 0, 50):
        s.launch(ts=10, dur=2, kernel="k" * (1 << 20), k_ts=30, k_dur=5)
    s.launch(ts=60, dur=2, kernel="short", k_ts=80, k_dur=5)
    return s.write(d / "huge_names.json")


def _deep_args(d, depth=50_000, name="deep.json"):
    raw = _raw()
    j = raw.index(b'"args": {', raw.index(b'"aten::relu"')) + len(b'"args": {')
    return _write(d, name, raw[:j] + b'"deep": ' + b"[" * depth + b"]" * depth + b", " + raw[j:])


def _deep_open(d):
    raw = _raw()
    j = raw.index(b'"args": {', raw.index(b'"aten::relu"')) + len(b'"args": {')
    return _write(d, "deep_open.json", raw[:j] + b'"deep": ' + b"{\"a\":" * 100_000 + b"1, " + raw[j:])


def _deep_top(d, depth=1_000_000):
    return _write(d, "deep_top.json", b"[" * depth + b"]" * depth)


def _bomb(d):
    """4 MiB of blanks in 4 KiB: refused under --max-size 1M, loads (an empty trace) under 16M."""
    return _write(d, "bomb.json.gz", gzip.compress(b'{"traceEvents": [' + b" " * (4 << 20) + b"]}", 9))


def _unreadable(d):
    p = _write(d, "unreadable.json", _raw())
    p.chmod(0)
    return p


def _fifo(d):
    p = d / "fifo.json"
    os.mkfifo(p)
    return p


def _dir(d):
    p = d / "a_folder.json"
    p.mkdir()
    return p


CORPUS = [
    Case("empty", lambda d: _write(d, "empty.json", b""), "error", "empty file"),
    Case("empty_gz", lambda d: _write(d, "empty.json.gz", gzip.compress(b"")), "error", "empty"),
    Case("not_json", lambda d: _write(d, "text.json", b"hello world\n"), "error", "not JSON"),
    Case("binary", lambda d: _write(d, "bin.json", bytes(range(256)) * 64), "error", ""),
    Case("gz_not_gz", lambda d: _write(d, "plain.json.gz", _raw()), "ok"),
    Case("corrupt_gz", lambda d: _write(d, "bad.json.gz", b"\x1f\x8b\x08\x00garbage-not-deflate"), "error", "gzip"),
    Case("truncated_gz", lambda d: _write(d, "cut.json.gz", gzip.compress(_raw())[: len(gzip.compress(_raw())) * 2 // 3]),
         "warn", "gzip stream ends early"),
    Case("cut_mid_event", lambda d: _write(d, "cut.json", _raw()[: _raw().index(b'"aten::relu"')]), "warn",
         "ends inside the event list"),
    Case("unescaped_quote", lambda d: _write(d, "quote.json", _raw().replace(b'"step"', b'"st"ep"')), "warn",
         "unescaped"),
    Case("bare_inf_nan", lambda d: _write(d, "nan.json", _raw().replace(b'"dur": 3', b'"dur": inf', 1)
                                          .replace(b'"ts": 40', b'"ts": NaN')), "warn", "inf/nan"),
    Case("top_level_array", lambda d: _write(d, "arr.json", json.dumps(_good().doc()["traceEvents"]).encode()), "ok"),
    Case("empty_array", lambda d: _write(d, "empty_arr.json", b"[]"), "warn", "no timed events"),
    Case("no_trace_events", lambda d: _write(d, "noev.json", b'{"schemaVersion": 1}'), "error", "traceEvents"),
    Case("trace_events_not_list", lambda d: _write(d, "noev2.json", b'{"traceEvents": {"a": 1}}'), "error", ""),
    Case("missing_fields", _missing_fields, "warn", "no usable timestamp"),
    Case("negative_zero_dur", _neg_zero, "warn", "negative duration"),
    Case("mixed_ids", _mixed_ids, "ok"),
    Case("duplicated_unsorted", _dup_unsorted, "warn", "duplicate"),
    Case("overlapping_kernels", _overlap_stream, "warn", "overlap"),
    Case("orphan_gpu_op_and_launch", _orphans, "warn", "no launch call"),
    Case("cpu_only", _cpu_only, "warn", "no GPU activity", warn_in=("report", "report_json")),
    Case("single_event", _single, "ok"),
    Case("single_cpu_event", _single_cpu, "warn", "no GPU activity", warn_in=("report", "report_json")),
    Case("names_1mb", _huge_names, "ok"),
    Case("hostile_names", _hostile_names, "ok"),
    Case("invalid_utf8", _invalid_utf8, "warn", "UTF-8"),
    Case("raw_control_chars", _raw_controls, "warn", "control characters"),
    Case("deep_args", _deep_args, "warn", "nested too deeply"),
    Case("deep_unclosed", _deep_open, "ok"),
    Case("deep_top_level", lambda d: _deep_top(d, 20_000), "error", "nested too deeply"),
    Case("gzip_bomb", _bomb, "error", "--max-size", ("--max-size", "1M")),
    Case("gzip_bomb_limit_raised", _bomb, "warn", "no timed events", ("--max-size", "16M")),
    Case("directory", _dir, "error", "directory"),
    Case("missing", lambda d: d / "missing.json", "error", "no such file"),
    Case("unreadable", _unreadable, "error", "cannot read"),
    Case("fifo", _fifo, "error", "not a regular file"),
]


# ------------------------------------------------------------------------------------------- the runner
#: runs in a child: memory capped, each command under an alarm; results as JSON lines on fd 3's file
_DRIVER = r"""
import contextlib, io, json, os, resource, signal, sys, time
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
sys.path.insert(0, os.getcwd())
from gapscope.tui.cli import main

class Hang(BaseException):
    pass

def on_alarm(*_):
    raise Hang()

signal.signal(signal.SIGALRM, on_alarm)
jobs = json.load(open(sys.argv[1]))
out = open(sys.argv[2], "w")
real_open, real_access = open, os.access
for job in jobs:
    deny = job.get("deny")
    if deny:  # EACCES where root could read anyway: what a chmod 000 file gives a normal user
        import builtins
        def fake_open(f, *a, **k):
            if os.fspath(f) == deny if isinstance(f, (str, bytes, os.PathLike)) else False:
                raise PermissionError(13, "Permission denied", deny)
            return real_open(f, *a, **k)
        builtins.open = fake_open
        os.access = lambda p, m, **k: False if os.fspath(p) == deny else real_access(p, m, **k)
    o, e = io.StringIO(), io.StringIO()
    t = time.monotonic()
    try:
        signal.alarm(job.get("alarm", 60))
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            rc = main(job["argv"])
        signal.alarm(0)
    except Hang:
        rc = "hang"
    except BaseException as exc:
        signal.alarm(0)
        import traceback
        rc = "escaped"
        e.write(traceback.format_exc())
    if deny:
        import builtins
        builtins.open = real_open
        os.access = real_access
    out.write(json.dumps({"id": job["id"], "rc": rc, "out": o.getvalue(),
                          "err": e.getvalue(), "s": round(time.monotonic() - t, 2)}) + "\n")
    out.flush()
"""

COMMANDS = {"info": ["info"], "report": ["report"], "report_json": ["report", "--json"]}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every corpus case through every command, in one child process."""
    base = tmp_path_factory.mktemp("corpus")
    jobs, paths = [], {}
    for c in CORPUS:
        folder = base / c.name
        folder.mkdir()
        p = c.make(folder)
        paths[c.name] = p
        for cmd, words in COMMANDS.items():
            job = {"id": f"{c.name}/{cmd}", "argv": [*words, *c.extra, str(p)]}
            if c.name == "unreadable":
                job["deny"] = str(p)
            jobs.append(job)
    (base / "jobs.json").write_text(json.dumps(jobs))
    env = dict(os.environ, GAPSCOPE_CACHE_DIR=str(base / "cache"), NO_COLOR="1")
    env.pop("GAPSCOPE_DEBUG", None)
    r = subprocess.run([sys.executable, "-c", _DRIVER, str(base / "jobs.json"), str(base / "results.jsonl")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    got = {}
    if (base / "results.jsonl").exists():
        for line in (base / "results.jsonl").read_text().splitlines():
            d = json.loads(line)
            got[d["id"]] = d
    assert r.returncode == 0, f"the corpus runner died (rc {r.returncode}) after {len(got)} jobs: {r.stderr[-2000:]}"
    assert "Traceback" not in r.stderr
    return got, paths


@pytest.fixture(scope="module")
def schema():
    import jsonschema

    return jsonschema, json.loads(SCHEMA.read_text())


def _printable(text: str) -> bool:
    return not any((ord(ch) < 32 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0 for ch in text)


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_corpus_through_info_and_report(results, schema, case):
    got, paths = results
    jsonschema, sch = schema
    for cmd in COMMANDS:
        r = got[f"{case.name}/{cmd}"]
        where = f"{case.name}: gapscope {cmd}: rc {r['rc']}, stderr {r['err'][-1500:]!r}"
        assert r["rc"] in (0, 2), where  # not "hang", "escaped" (a traceback) or 3 (an internal error)
        assert "Traceback" not in r["err"], where  # how long each took: benchmarks/bench_robust.py corpus
        if case.outcome == "error":
            assert r["rc"] == 2, where
            lines = r["err"].splitlines()
            assert len(lines) == 1 and lines[0].startswith("gapscope: error: "), where
            assert case.needle in lines[0], where
            assert r["out"] == "", where
            continue
        assert r["rc"] == 0 and r["err"] == "", where
        # JSON escapes C0 controls itself; DEL and C1 (valid JSON) are left to the tool reading it
        text = r["out"] if cmd != "report_json" else "".join(ch for ch in r["out"] if not 0x7F <= ord(ch) < 0xA0)
        assert _printable(text), f"{where}: control characters in the output"
        if cmd == "info":
            assert r["out"].isascii(), where
            if case.outcome == "warn" and cmd in case.warn_in:
                assert case.needle in r["out"].split("warnings", 1)[-1], f"{where}: {r['out'][-800:]}"
        elif cmd == "report":
            assert r["out"].startswith("# gapscope report"), where
            if case.outcome == "warn" and cmd in case.warn_in:
                assert case.needle in r["out"], where
        else:
            doc = json.loads(r["out"])
            jsonschema.validate(doc, sch)
            if case.outcome == "warn" and cmd in case.warn_in:
                assert any(case.needle in w for t in doc["traces"] for w in t["warnings"]), where


# orjson 3.8 overflowed the C stack here (SIGSEGV); pyproject.toml requires orjson >= 3.10, which refuses
# nesting past 1024 levels with an ordinary decode error
@pytest.mark.parametrize("make", [lambda d: _deep_args(d, 200_000, "deep200k.json"), lambda d: _deep_top(d)],
                         ids=["args_200k_deep", "top_level_1M_deep"])
def test_very_deep_nesting_is_refused_not_a_crash(tmp_path, make):
    p = make(tmp_path)
    env = dict(os.environ, GAPSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "gapscope", "info", "--no-cache", str(p)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 2), (r.returncode, r.stderr[-500:])
    assert "Traceback" not in r.stderr


def test_report_output_escapes_control_characters_but_keeps_the_names(results):
    got, _ = results
    md = got["hostile_names/report"]["out"]
    assert "\\x1b[2J\\x1b[31mansi\\x1b[0m" in md  # shown, escaped
    assert "[link=file:///etc/passwd]y" in md and "emoji \U0001f600 ok" in md
    js = json.loads(got["hostile_names/report_json"]["out"])
    names = json.dumps(js)
    assert "\\u001b[2J" in names  # JSON keeps the exact string (escaped by JSON itself)


@pytest.mark.parametrize("make,needle", [(_dup_unsorted, "duplicate"), (_overlap_stream, "overlap")],
                         ids=["duplicated_events", "overlapping_kernels_one_stream"])
def test_odd_but_loadable_inputs_are_warned_about(tmp_path, make, needle):
    from gapscope.tui.trace import load

    m = load(str(make(tmp_path)), no_cache=True)
    assert any(needle in w for w in m.warnings), m.warnings
