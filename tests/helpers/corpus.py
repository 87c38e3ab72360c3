"""The robustness corpus: empty, damaged, odd and hostile inputs, each with what gapscope must do with it (load,
load with a warning naming what was odd, or exit 2 with one error line). tests/test_robust_report.py runs it
through the CLI, tests/test_robust_app.py through the explorer."""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import good_trace, kineto_layout
from tests.synth import Synth


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
    return kineto_layout(good_trace().doc())


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


def dup_unsorted(d):
    s = good_trace()
    for i in range(5):
        s.launch(ts=100 + 10 * i, dur=1, kernel=f"k{i}", k_ts=103 + 10 * i, k_dur=4)
    evs = s.doc()["traceEvents"]
    evs = list(reversed(evs + evs))  # every event twice, newest first
    return _write(d, "dup_unsorted.json", _events(evs, {k: v for k, v in s.top.items()}))


def overlap_stream(d):
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


def deep_args(d, depth=50_000, name="deep.json"):
    raw = _raw()
    j = raw.index(b'"args": {', raw.index(b'"aten::relu"')) + len(b'"args": {')
    return _write(d, name, raw[:j] + b'"deep": ' + b"[" * depth + b"]" * depth + b", " + raw[j:])


def _deep_open(d):
    raw = _raw()
    j = raw.index(b'"args": {', raw.index(b'"aten::relu"')) + len(b'"args": {')
    return _write(d, "deep_open.json", raw[:j] + b'"deep": ' + b"{\"a\":" * 100_000 + b"1, " + raw[j:])


def deep_top(d, depth=1_000_000):
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
    Case("top_level_array", lambda d: _write(d, "arr.json", json.dumps(good_trace().doc()["traceEvents"]).encode()), "ok"),
    Case("empty_array", lambda d: _write(d, "empty_arr.json", b"[]"), "warn", "no timed events"),
    Case("no_trace_events", lambda d: _write(d, "noev.json", b'{"schemaVersion": 1}'), "error", "traceEvents"),
    Case("trace_events_not_list", lambda d: _write(d, "noev2.json", b'{"traceEvents": {"a": 1}}'), "error", ""),
    Case("missing_fields", _missing_fields, "warn", "no usable timestamp"),
    Case("negative_zero_dur", _neg_zero, "warn", "negative duration"),
    Case("mixed_ids", _mixed_ids, "ok"),
    Case("duplicated_unsorted", dup_unsorted, "warn", "duplicate"),
    Case("overlapping_kernels", overlap_stream, "warn", "overlap"),
    Case("orphan_gpu_op_and_launch", _orphans, "warn", "no launch call"),
    Case("cpu_only", _cpu_only, "warn", "no GPU activity", warn_in=("report", "report_json")),
    Case("single_event", _single, "ok"),
    Case("single_cpu_event", _single_cpu, "warn", "no GPU activity", warn_in=("report", "report_json")),
    Case("names_1mb", _huge_names, "ok"),
    Case("hostile_names", _hostile_names, "ok"),
    Case("invalid_utf8", _invalid_utf8, "warn", "UTF-8"),
    Case("raw_control_chars", _raw_controls, "warn", "control characters"),
    Case("deep_args", deep_args, "warn", "nested too deeply"),
    Case("deep_unclosed", _deep_open, "ok"),
    Case("deep_top_level", lambda d: deep_top(d, 20_000), "error", "nested too deeply"),
    Case("gzip_bomb", _bomb, "error", "--max-size", ("--max-size", "1M")),
    Case("gzip_bomb_limit_raised", _bomb, "warn", "no timed events", ("--max-size", "16M")),
    Case("directory", _dir, "error", "directory"),
    Case("missing", lambda d: d / "missing.json", "error", "no such file"),
    Case("unreadable", _unreadable, "error", "cannot read"),
    Case("fifo", _fifo, "error", "not a regular file"),
]
