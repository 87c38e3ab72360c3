"""The robustness corpus (empty, damaged, odd and hostile inputs) through ``gapscope info``, ``gapscope report``
(Markdown and ``--json``): each case loads (with a warning saying what was odd, where something was odd) or
fails with exactly one ``gapscope: error: ...`` line and exit 2. Never a traceback, never a hang, bounded memory.

The whole corpus runs in one child process (memory capped with RLIMIT_AS, each command under an alarm, the
child under a subprocess timeout); every case is then checked as its own test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SCHEMA_PATH as SCHEMA
from tests.helpers.corpus import CORPUS, deep_args, deep_top, dup_unsorted, overlap_stream

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------------------- the runner
#: runs in a child: memory capped, each command under an alarm; results as JSON lines on fd 3's file
_DRIVER = r"""
import contextlib, io, json, os, resource, signal, sys, time
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
sys.path.insert(0, os.getcwd())
from gapscope.cli import main

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
@pytest.mark.parametrize("make", [lambda d: deep_args(d, 200_000, "deep200k.json"), lambda d: deep_top(d)],
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


@pytest.mark.parametrize("make,needle", [(dup_unsorted, "duplicate"), (overlap_stream, "overlap")],
                         ids=["duplicated_events", "overlapping_kernels_one_stream"])
def test_odd_but_loadable_inputs_are_warned_about(tmp_path, make, needle):
    from gapscope.trace import load

    m = load(str(make(tmp_path)), no_cache=True)
    assert any(needle in w for w in m.warnings), m.warnings
