"""benchmarks/audit.py, the independent checker, checked itself.

A small Kineto trace is written here by hand, and with it, by hand, the report that is right about it
(every number below is worked out in the comments from the events, not taken from gapscope). The
checker must find 0 mismatches in that report, and exactly the planted mismatch in each copy of it
that is wrong in one checked way. One more test runs the real ``python3 -m gapscope report`` on a trace
where its output is right, and one reads a trace a strict JSON parser rejects.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

_spec = importlib.util.spec_from_file_location("gapscope_audit", ROOT / "benchmarks" / "audit.py")
audit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit)

PID = 100


def X(cat, name, ts, end, pid=PID, tid=PID, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": round(end - ts, 3),
            "args": args}


def K(name, ts, end, corr, cat="kernel", **args):
    return X(cat, name, ts, end, pid=0, tid=7, device=0, stream=7, correlation=corr, **args)


def trace_events():
    """Times in µs. One CPU thread (pid = tid = 100), one GPU stream (device 0, stream 7)."""
    return [
        X("python_function", "main.py(10): step", 0, 230),
        X("python_function", "main.py(20): work", 5, 60),
        X("python_function", "<built-in function sleep>", 10, 50),
        X("cpu_op", "aten::mm", 60, 80, **{"External id": 1}),
        X("cuda_runtime", "cudaLaunchKernel", 65, 70, correlation=11),
        X("cpu_op", "aten::add", 80, 90, **{"External id": 2}),
        X("cuda_runtime", "cudaLaunchKernel", 82, 86, correlation=12),
        X("cpu_op", "aten::item", 100, 130, **{"External id": 3}),
        X("cpu_op", "aten::_local_scalar_dense", 101, 129, **{"External id": 4}),
        X("cuda_runtime", "cudaMemcpyAsync", 102, 105, correlation=13),
        X("cuda_runtime", "cudaStreamSynchronize", 105, 128, correlation=14),
        X("cuda_runtime", "cudaMalloc", 132, 136, correlation=17),
        X("cpu_op", "aten::mul", 140, 150, **{"External id": 5}),
        X("cuda_runtime", "cudaLaunchKernel", 142, 146, correlation=15),
        X("python_function", "main.py(30): post", 150, 190),
        X("python_function", "<built-in function sleep>", 152, 185),
        X("cpu_op", "aten::relu", 190, 198, **{"External id": 6}),
        X("cuda_runtime", "cudaLaunchKernel", 192, 196, correlation=16),
        X("python_function", "main.py(40): replay", 205, 215),
        X("cuda_runtime", "cudaGraphLaunch", 206, 210, correlation=20),
        K("gemm", 75, 95, 11, **{"External id": 1}),
        K("add_k", 96, 98, 12, **{"External id": 2}),
        K("Memcpy DtoH (Device -> Pageable)", 106, 108, 13, cat="gpu_memcpy", bytes=4000),
        K("mul_k", 147, 150, 15, **{"External id": 5}),
        K("relu_k", 200, 203, 16, **{"External id": 6}),
        K("g1", 211, 214, 20),
        K("g2", 214, 216, 20),
    ]


# The device window is the first .. last GPU op: [75, 216) = 141 µs (origin 75 µs). Kernels cover
# 20 + 2 + 3 + 3 + 3 + 2 = 33 µs; idle 108 µs = 76.596 %. The gaps (no kernel on any stream):
#   [95, 96)    1 µs  next add_k   (launched at 82: already queued)
#   [98, 147)  49 µs  next mul_k   (launched at 142: W = 44; aten::item [100, 130) holds the sync)
#   [150, 200) 50 µs  next relu_k  (launched at 192: W = 42; `sleep` [152, 185) owns 33 µs of it,
#                                   `post` 40 - 33 = 7 µs, aten::relu [190, 192) 2 µs)
#   [203, 211)  8 µs  next g1      (cudaGraphLaunch at 206: 3 µs into the gap, started 5 µs after it)
SLEEP_EXPLANATION = ("Python `sleep` (a built-in called from `main.py(30): post`) held the CPU for 33.0 µs of "
                     "the 42.0 µs before `aten::relu` was launched; GPU idle 50.0 µs.")
SYNC_EXPLANATION = ("The launching thread synchronised with the GPU in `cudaStreamSynchronize` and launched "
                    "`aten::mul` 44.0 µs after the GPU ran dry (30.0 µs of it in synchronising calls); GPU idle "
                    "49.0 µs.")
GRAPH_EXPLANATION = "`g1` was launched 3.0 µs into the gap but started 5.0 µs after its launch; GPU idle 8.0 µs."
QUEUED_EXPLANATION = "`aten::add` was already queued when the GPU went idle; it started 1.0 µs later."
HOST = {"pid": PID, "tid": PID, "from_us": 75.0, "to_us": 117.0,
        "frames": [{"name": "<built-in function sleep>", "self_us": 33.0}, {"name": "main.py(30): post", "self_us": 7.0}],
        "credited": {"name": "<built-in function sleep>", "self_us": 33.0}}


def gap(start, dur, cause, kernel, launch, op, explanation, **kw):
    return {"rank": None, "device": 0, "start_us": start, "dur_us": dur, "cause": cause,
            "next_op": {"kernel": kernel, "launch": launch, "op": op}, "cpu_stack": [], "cpu_breakdown": {},
            "explanation": explanation, **kw}


def example(row, start, dur, kernel, op, explanation, **kw):
    return {"row": row, "start_us": start, "dur_us": dur, "next_kernel": kernel, "next_op": op,
            "explanation": explanation, **kw}


def kernel_row(name, total, pct, floor=None):
    return {"name": name, "count": 1, "total_us": total, "pct": pct, "avg_us": total, "floor_us": floor,
            "bound": None if floor is None else "compute"}


def right_report(path="t.json"):
    return {
        "schema": "gapscope.findings/1",
        # what gapscope reports: the one frame holding 5-80% of the window, 40 µs of host work that launches nothing
        "frame_whatifs": [{"frame": "main.py(30): post", "calls": 1, "host_us": 40.0, "gpu_us": 0.0, "gpu_items": 0,
                           "saving_us": 40.0, "saving_pct": 28.37, "findings": ["python-1"]}],
        "traces": [{"path": path, "events": 27, "window_us": 141.0, "phase": None, "rank": None,
                    "distortion": None, "origin_us": 75.0, "window": {"mode": "all", "steps": []}}],
        "devices": [{"rank": None, "device": 0, "name": None, "window_us": 141.0, "kernel_busy_us": 33.0,
                     "copy_busy_us": 2.0, "compute_idle_us": 108.0, "compute_idle_pct": 76.596,
                     "verdict": {"kind": "mixed", "graph_replays": {"kernels": 2, "launches": 1},
                                 "text": "2 kernels from 1 graph replays"}}],
        "streams": [{"rank": None, "device": 0, "stream": 7, "busy_us": 33.0, "idle_us": 108.0, "gaps": 4,
                     "largest_gap_us": 50.0, "kernels": 6}],
        "gaps": [  # largest first; starts relative to the origin (75 µs)
            # stack_at_idle: the events of thread 100 open at the gap start (ts <= t0 < end); launch_stack: open
            # at the launch call's start (the call itself included)
            gap(75.0, 50.0, "python", "relu_k", "cudaLaunchKernel", "aten::relu", SLEEP_EXPLANATION, host=HOST,
                # t0 = 150: aten::mul [140, 150) has ended, post [150, 190) has begun, sleep [152, ...) not yet
                stack_at_idle=["main.py(10): step", "main.py(30): post"],
                launch_stack=["main.py(10): step", "aten::relu", "cudaLaunchKernel"]),
            gap(23.0, 49.0, "sync", "mul_k", "cudaLaunchKernel", "aten::mul", SYNC_EXPLANATION,
                stack_at_idle=["main.py(10): step"], launch_stack=["main.py(10): step", "aten::mul", "cudaLaunchKernel"]),
            gap(128.0, 8.0, "launch", "g1", "cudaGraphLaunch", None, GRAPH_EXPLANATION,
                stack_at_idle=["main.py(10): step"],
                launch_stack=["main.py(10): step", "main.py(40): replay", "cudaGraphLaunch"]),
            gap(20.0, 1.0, "launch", "add_k", "cudaLaunchKernel", "aten::add", QUEUED_EXPLANATION,
                stack_at_idle=["main.py(10): step"], launch_stack=["main.py(10): step", "aten::add", "cudaLaunchKernel"]),
        ],
        "causes": {"copy": {"count": 0, "total_us": 0.0}, "sync": {"count": 1, "total_us": 49.0},
                   "python": {"count": 1, "total_us": 50.0}, "launch": {"count": 2, "total_us": 9.0}},
        # grand total 33 µs: 20 / 33 = 60.606 %, 3 / 33 = 9.091 %, 2 / 33 = 6.061 %
        "kernels": [kernel_row("gemm", 20.0, 60.606, floor=10.0), kernel_row("mul_k", 3.0, 9.091),
                    kernel_row("relu_k", 3.0, 9.091), kernel_row("g1", 3.0, 9.091), kernel_row("add_k", 2.0, 6.061),
                    kernel_row("g2", 2.0, 6.061)],
        # one synchronisation, named by its outermost op
        "syncs": [{"name": "aten::item", "count": 1, "total_us": 30.0, "stacks": []}],
        "copies": [{"kind": "DtoH Pageable", "count": 1, "bytes": 4000, "total_us": 2.0, "gbps": 2.0, "pageable": True}],
        "allocator": {"cudaMalloc": {"count": 1, "total_us": 4.0}},
        "collectives": [],
        # kernels with a launch: all 6 (g1 and g2 share the cudaGraphLaunch): 5 distinct calls costing
        # 5 + 4 + 4 + 4 + 4 = 21 µs; every kernel but gemm is shorter than its launch call; delays 10, 14, 5,
        # 8, 5, 8 µs: median 8 µs
        "launches": [{"trace": 0, "count": 5, "kernels": 6, "delay_median_ns": 8000.0, "cost_total_ns": 21000,
                      "kernels_shorter_than_launch": 5, "calls": {"cudaLaunchKernel": 4, "cudaGraphLaunch": 1}}],
        "findings": [
            {"id": "python-1", "severity": "high", "cause": "python", "idle_us": 50.0, "suggestion": "",
             "title": "1 gap while host work from `main.py(30): post` held the CPU cost 50.0 µs of GPU idle",
             "evidence": {"cause": "python", "gaps": 1, "idle_us": 50.0, "share_of_window_pct": 35.461,
                          "largest_gap_us": 50.0, "frame": "main.py(30): post",
                          "examples": [example(0, 75.0, 50.0, "relu_k", "aten::relu", SLEEP_EXPLANATION, host=HOST)]}},
            # the fix counts calls: aten::item [100, 130) in step, its _local_scalar_dense and sync inside it
            {"id": "sync-1", "severity": "high", "cause": "sync", "idle_us": 49.0, "suggestion": "",
             "fix": "remove the 1 synchronising call in `main.py(10): step`",
             "title": "1 gap after a sync from `main.py(10): step` cost 49.0 µs of GPU idle",
             "evidence": {"cause": "sync", "gaps": 1, "idle_us": 49.0, "share_of_window_pct": 34.752,
                          "largest_gap_us": 49.0, "frame": "main.py(10): step",
                          "examples": [example(1, 23.0, 49.0, "mul_k", "aten::mul", SYNC_EXPLANATION)]}},
            {"id": "launch-1", "severity": "medium", "cause": "launch", "idle_us": 8.0, "suggestion": "",
             "title": "launch-bound: 1 gap while the CPU dispatched ops cost 8.0 µs of GPU idle",
             "evidence": {"cause": "launch", "gaps": 1, "idle_us": 8.0, "share_of_window_pct": 5.674,
                          "largest_gap_us": 8.0, "frame": None,
                          "examples": [example(2, 128.0, 8.0, "g1", None, GRAPH_EXPLANATION)]}},
            {"id": "launch-2", "severity": "info", "cause": "launch", "idle_us": 1.0, "suggestion": "",
             "title": "1 gaps shorter than 2.0 µs add up to 1.0 µs of GPU idle",
             "evidence": {"gaps": 1, "idle_us": 1.0, "share_of_window_pct": 0.709, "causes": {"launch": 1}}},
            {"id": "copy-1", "severity": "low", "cause": "copy", "idle_us": 0.0, "suggestion": "",
             "title": "1 DtoH Pageable copies (4000 bytes) use pageable memory",
             "evidence": {"kind": "DtoH Pageable", "count": 1, "bytes": 4000, "total_us": 2.0, "gbps": 2.0,
                          "pageable": True}},
        ],
    }


@pytest.fixture(scope="module")
def tr():
    return audit.Trace({"traceEvents": trace_events()})


def run(tr, rep):
    return audit.audit_report("t.json", tr, rep, "t").mismatches


def test_the_right_report_has_no_mismatch(tr):
    A = audit.audit_report("t.json", tr, right_report(), "t")
    assert A.mismatches == []
    assert A.checked > 100
    # every claim could be checked; only the gaps without a `host` object (all but the Python-held one) lack one, and
    # this hand-written report has no plan (its actions are checked on real reports: test_the_plan_is_checked_...)
    assert set(A.unchecked) == {"host frames (no `host` object)", "plan (no actions)"} and A.unchecked[
        "host frames (no `host` object)"] == 5


def test_own_time_is_exclusive_of_children(tr):
    own = tr.self_times((str(PID), str(PID)), 150_000, 192_000)
    assert own["<built-in function sleep>"] == 33_000
    assert own["main.py(30): post"] == 7_000
    assert own["aten::relu"] == 2_000
    assert own["main.py(10): step"] == 0
    own = tr.self_times((str(PID), str(PID)), 98_000, 142_000)
    assert own["cudaStreamSynchronize"] == 23_000 and own["aten::_local_scalar_dense"] == 28_000 - 26_000
    # [98, 100) and [130, 140) minus cudaMalloc [132, 136); aten::mul [140, 142) is its child
    assert own["main.py(10): step"] == ((100 - 98) + (140 - 130) - 4) * 1000


def _set(rep, path, value):
    cur = rep
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value


# (what is wrong, a path into the report and the wrong value -- or a function --, text the mismatch must carry)
WRONG = [
    ("device window", ("devices", 0, "window_us"), 140.0, "device 0 window_us"),
    ("kernel busy", ("devices", 0, "kernel_busy_us"), 34.0, "device 0 kernel_busy_us"),
    ("copy busy", ("devices", 0, "copy_busy_us"), 3.0, "device 0 copy_busy_us"),
    ("idle", ("devices", 0, "compute_idle_us"), 107.0, "device 0 compute_idle_us"),
    ("idle %", ("devices", 0, "compute_idle_pct"), 76.0, "device 0 compute_idle_pct"),
    ("trace window", ("traces", 0, "window_us"), 150.0, "trace window_us"),
    ("origin", ("traces", 0, "origin_us"), 70.0, "origin_us"),
    ("window mode", ("traces", 0, "window", "mode"), "steps", "window mode"),
    ("stream busy", ("streams", 0, "busy_us"), 30.0, "stream 7 busy_us"),
    ("stream gaps", ("streams", 0, "gaps"), 5, "stream 7 gaps"),
    ("stream largest gap", ("streams", 0, "largest_gap_us"), 49.0, "stream 7 largest_gap_us"),
    ("stream kernels", ("streams", 0, "kernels"), 5, "stream 7 kernels"),
    ("gap start", ("gaps", 1, "start_us"), 24.0, "start"),
    ("gap duration", ("gaps", 1, "dur_us"), 48.0, "dur_us"),
    ("next kernel", ("gaps", 1, "next_op", "kernel"), "relu_k", "next kernel"),
    ("launch call", ("gaps", 1, "next_op", "launch"), "cudaLaunchKernelExC", "launch call"),
    ("next op", ("gaps", 1, "next_op", "op"), "aten::add", "next op"),
    ("cause count", ("causes", "sync", "count"), 2, "cause counts add up"),
    ("cause total", ("causes", "launch", "total_us"), 10.0, "cause totals add up"),
    ("kernel count", ("kernels", 0, "count"), 2, "kernels `gemm` count"),
    ("kernel total", ("kernels", 0, "total_us"), 21.0, "kernels `gemm` total_us"),
    ("kernel pct", ("kernels", 0, "pct"), 50.0, "kernels `gemm` pct"),
    ("kernel floor above its average", ("kernels", 0, "floor_us"), 25.0, "floor (a lower bound"),
    ("kernels table drops a bigger row", ("kernels",), lambda r: r["kernels"][1:], "keeps the largest rows"),
    ("sync count", ("syncs", 0, "count"), 2, "syncs `aten::item` count"),
    ("sync total", ("syncs", 0, "total_us"), 23.0, "syncs `aten::item` total_us"),
    ("sync row missing", ("syncs",), [], "syncs table row `aten::item`"),
    ("one sync in two rows", ("syncs",), lambda r: r["syncs"] + [
        {"name": "cudaStreamSynchronize", "count": 1, "total_us": 23.0}], "counted apart from `aten::item`"),
    ("copy count", ("copies", 0, "count"), 2, "copies `DtoH Pageable` count"),
    ("copy bytes", ("copies", 0, "bytes"), 4096, "copies `DtoH Pageable` bytes"),
    ("copy total", ("copies", 0, "total_us"), 2.5, "copies `DtoH Pageable` total_us"),
    ("copy rate", ("copies", 0, "gbps"), 1.6, "copies `DtoH Pageable` gbps"),
    ("copy row missing", ("copies",), [], "copies row `DtoH Pageable`"),
    ("allocator count", ("allocator", "cudaMalloc", "count"), 3, "allocator `cudaMalloc` count"),
    ("allocator total", ("allocator", "cudaMalloc", "total_us"), 5.0, "allocator `cudaMalloc` total_us"),
    ("allocator row missing", ("allocator",), {}, "allocator table row `cudaMalloc`"),
    ("finding idle vs evidence", ("findings", 0, "idle_us"), 60.0, "idle_us vs evidence"),
    ("finding title count", ("findings", 1, "title"), "2 gaps after syncs from `main.py(10): step` cost 49.0 µs of GPU idle",
     "title count"),
    ("finding title time", ("findings", 1, "title"), "1 gap after a sync from `main.py(10): step` cost 59.0 µs of GPU idle",
     "title time"),
    ("finding largest gap", ("findings", 0, "evidence", "largest_gap_us"), 70.0, "largest_gap_us"),
    ("finding share", ("findings", 0, "evidence", "share_of_window_pct"), 50.0, "share_of_window_pct"),
    ("finding gaps vs listed", ("findings", 0, "evidence", "gaps"), 2, "findings of cause python: gaps"),
    ("finding example not a gap", ("findings", 1, "evidence", "examples", 0, "start_us"), 30.0, "is a gap"),
    ("finding example next kernel", ("findings", 1, "evidence", "examples", 0, "next_kernel"), "gemm", "next kernel"),
    ("finding example next op", ("findings", 1, "evidence", "examples", 0, "next_op"), "aten::relu", "next op"),
    ("short gaps count", ("findings", 3, "evidence", "gaps"), 2, "short gaps count"),
    ("short gaps idle", ("findings", 3, "evidence", "idle_us"), 1.5, "short gaps idle_us"),
    ("pageable finding bytes", ("findings", 4, "evidence", "bytes"), 8000, "copies bytes"),
    ("explanation GPU idle", ("gaps", 0, "explanation"), SLEEP_EXPLANATION.replace("idle 50.0", "idle 60.0"),
     "'GPU idle'"),
    ("explanation W", ("gaps", 0, "explanation"), SLEEP_EXPLANATION.replace("of the 42.0", "of the 45.0"),
     "W (launch - gap start)"),
    ("explanation X of W", ("gaps", 0, "explanation"), SLEEP_EXPLANATION.replace("for 33.0 µs", "for 43.0 µs"),
     "'X of W'"),
    ("a frame credited with more than its own time", ("gaps", 0, "explanation"),
     SLEEP_EXPLANATION.replace("for 33.0 µs", "for 40.0 µs"), "'held the CPU for X' by `sleep`"),
    ("a frame not on the thread", ("gaps", 0, "explanation"),
     SLEEP_EXPLANATION.replace("Python `sleep`", "Python `main.py(99): nowhere`"), "explanation frame"),
    ("sync time", ("gaps", 1, "explanation"), SYNC_EXPLANATION.replace("(30.0 µs of it", "(40.0 µs of it"),
     "in synchronising calls"),
    ("launched W after the GPU ran dry", ("gaps", 1, "explanation"),
     SYNC_EXPLANATION.replace("44.0 µs after", "40.0 µs after"), "after the GPU ran dry"),
    ("recorded nothing", ("gaps", 1, "explanation"),
     "The launching thread recorded nothing for 20.0 µs of the 44.0 µs before `aten::mul`; GPU idle 49.0 µs.",
     "recorded nothing"),
    ("allocator time", ("gaps", 1, "explanation"),
     "Allocator calls took 10.0 µs of the 44.0 µs before `aten::mul` was launched; GPU idle 49.0 µs.",
     "Allocator calls took"),
    ("launched W into the gap", ("gaps", 2, "explanation"), GRAPH_EXPLANATION.replace("3.0 µs into", "4.0 µs into"),
     "launched W into the gap"),
    ("started R after its launch", ("gaps", 2, "explanation"), GRAPH_EXPLANATION.replace("5.0 µs after", "6.0 µs after"),
     "started R after its launch"),
    ("not queued", ("gaps", 2, "explanation"),
     "`g1` was already queued when the GPU went idle; it started 8.0 µs later.", "'already queued'"),
    ("copy in an explanation", ("gaps", 1, "explanation"),
     "GPU idle 49.0 µs while DtoH Pageable copy of 8000 bytes ran for 2.0 µs at 2.0 GB/s.", "explanation copy"),
    ("host frame time", ("gaps", 0, "host", "frames", 1, "self_us"), 40.0, "host frame `main.py(30): post`"),
    ("host credited time", ("gaps", 0, "host", "credited", "self_us"), 40.0, "host credited"),
    ("host credited frame not the largest", ("gaps", 0, "host", "credited"),
     {"name": "main.py(30): post", "self_us": 7.0}, "credited frame has the most own time"),
    ("host frame of a finding example", ("findings", 0, "evidence", "examples", 0, "host", "frames", 0, "self_us"),
     30.0, "example 0"),
    ("host interval", ("gaps", 0, "host", "to_us"), 100.0, "host frame `<built-in function sleep>`"),
    ("verdict graph kernels", ("devices", 0, "verdict", "graph_replays", "kernels"), 3, "verdict graph_replays.kernels"),
    ("verdict graph launches", ("devices", 0, "verdict", "graph_replays", "launches"), 2,
     "verdict graph_replays.launches"),
    ("launch count", ("launches", 0, "count"), 6, "launches.count"),
    ("launched kernels", ("launches", 0, "kernels"), 5, "launches.kernels"),
    ("launch cost", ("launches", 0, "cost_total_ns"), 25000, "launches.cost_total_ns"),
    ("kernels shorter than their launch", ("launches", 0, "kernels_shorter_than_launch"), 6,
     "launches.kernels_shorter_than_launch"),
    ("launch delay", ("launches", 0, "delay_median_ns"), 9000.0, "launches.delay_median_ns"),
    ("launch calls by name", ("launches", 0, "calls", "cudaLaunchKernel"), 5, "launches.calls `cudaLaunchKernel`"),
    ("verdict silent on graph replays", ("devices", 0, "verdict"), {"kind": "mixed"}, "verdict graph replays"),
    ("a gap left out of the list", ("gaps",), lambda r: r["gaps"][:3], "gaps missing from the list"),
    ("a gap's cause vs the cause counts", ("gaps", 2, "cause"), "python", "causes.launch.count vs the gaps listed"),
    ("finding idle below its examples", ("findings", 0, "evidence", "idle_us"), 40.0, "idle >= its examples"),
    ("finding idle above gaps x largest", ("findings", 0, "evidence", "idle_us"), 80.0, "idle <= gaps x largest"),
    ("finding fewer gaps than examples", ("findings", 0, "evidence", "gaps"), 0, "gaps >= examples"),
    ("'already queued' finding whose kernel was not", ("findings", 2, "title"),
     "1 gap where the next kernel was already queued (GPU-side latency) cost 8.0 µs of GPU idle", "'already queued'"),
    ("verdict text", ("devices", 0, "verdict", "text"), "4 kernels from 2 graph replays", "verdict text"),
    ("sync fix counting nested calls", ("findings", 1, "fix"), "remove the 3 synchronising calls in `main.py(10): step`",
     "finding sync-1 fix: synchronising calls"),
    ("sync fix of another frame", ("findings", 1, "fix"), "remove the 1 synchronising call in `main.py(20): work`",
     "finding sync-1 fix frame"),
    # the launch stack given as the stack at the gap start (what the report did before issue 23)
    ("stack at idle is the launch stack", ("gaps", 0, "stack_at_idle"),
     ["main.py(10): step", "aten::relu", "cudaLaunchKernel"], "gap 0 (device 0, start 75.0 µs) stack_at_idle"),
    ("stack at idle misses a frame", ("gaps", 1, "stack_at_idle"), [], "stack_at_idle"),
    ("launch stack of another call", ("gaps", 2, "launch_stack"), ["main.py(10): step", "main.py(40): replay"],
     "launch_stack"),
]


@pytest.mark.parametrize("what,path,value,needle", WRONG, ids=[w[0] for w in WRONG])
def test_each_wrong_claim_is_caught(tr, what, path, value, needle):
    rep = copy.deepcopy(right_report())
    if callable(value):
        value = value(rep)
    if len(path) == 1:
        rep[path[0]] = value
    else:
        _set(rep, path, value)
    bad = run(tr, rep)
    assert bad, f"{what}: not caught"
    assert any(needle in line for line in bad), f"{what}: {bad}"
    assert all(line.startswith("t: ") and ": reported " in line and ", events say " in line for line in bad)


def test_steps_window_uses_the_launches_inside_the_step_ranges():
    ev = trace_events() + [X("user_annotation", "gapscope.step#0", 139, 200)]
    t = audit.Trace({"traceEvents": ev})
    devs, mode = audit.build_devices(t, "steps")
    # launched inside [139, 200): mul_k (142), relu_k (192) -> window [147, 203); the memcpy (102) is outside
    assert mode == "steps" and (devs[0].w0, devs[0].w1) == (147_000, 203_000)
    assert devs[0].gaps == [(150_000, 200_000)]
    rep = right_report()
    bad = run(t, rep)  # the report still claims the whole trace, though it was not asked for --whole-trace
    assert any("window mode" in line for line in bad)
    bad = audit.audit_report("t.json", t, rep, "t", whole=True).mismatches
    assert not any("window mode" in line for line in bad)
    rep["traces"][0]["window"]["mode"] = "steps"  # right mode, but the numbers are still the whole trace's
    bad = audit.audit_report("t.json", t, rep, "t").mismatches
    assert not any("window mode" in line for line in bad)
    assert any(line.startswith("t: device 0 window_us: reported 141.000 µs, events say 56.000 µs") for line in bad)


def test_collectives_count_time_and_exposed_part():
    # compute [0, 10); all-reduce [5, 20): 15 µs, of which [10, 20) = 10 µs no compute kernel overlaps
    t = audit.Trace({"traceEvents": [K("gemm", 0, 10, 1), K("ncclDevKernel_AllReduce_Sum_f32", 5, 20, 2)]})
    devs, _ = audit.build_devices(t, "all")
    right = {"name": "ncclDevKernel_AllReduce_Sum_f32", "count": 1, "total_us": 15.0, "exposed_us": 10.0,
             "wait_us": 0.0, "late_rank": None}
    for row, needle in ((right, None), ({**right, "count": 2}, "count"), ({**right, "total_us": 14.0}, "total_us"),
                        ({**right, "exposed_us": 15.0}, "exposed_us"), ({**right, "name": "x"}, "row")):
        A = audit.Audit("t")
        audit.check_collectives(A, t, {"collectives": [row]}, devs)
        if needle is None:
            assert A.mismatches == [] and A.checked == 3
        else:
            assert any(needle in line for line in A.mismatches), (needle, A.mismatches)


def test_integer_epoch_microseconds_are_exact():
    assert audit.to_ns(1683919259762483) == 1683919259762483000
    doc = json.loads('{"a": 1695835535123456.789}', parse_float=audit._parse_float)
    assert audit.to_ns(doc["a"]) == 1695835535123456789
    assert audit.to_ns(5142442314572.505) == 5142442314572505


def test_real_report_on_a_trace_it_gets_right(tmp_path):
    """The gapscope report itself, run as the checker runs it, on a launch-bound trace with one host sync."""
    ev = [e for e in trace_events() if e["name"] not in (
        "main.py(30): post", "<built-in function sleep>", "aten::item", "aten::_local_scalar_dense")]
    p = tmp_path / "right.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "audit.py"), str(p)], cwd=ROOT,
                         capture_output=True, text=True)
    assert "summary:" in out.stdout, out.stderr
    assert " 0 mismatches" in out.stdout, out.stdout
    assert out.returncode == 0


def test_broken_json_is_skipped_with_a_note(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"traceEvents": [{"name": "a "quoted" name", "ph": "X"}]}')
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "audit.py"), str(p)], cwd=ROOT,
                         capture_output=True, text=True)
    assert "skipped: not strict JSON" in out.stdout
    assert out.returncode == 0


def test_a_report_that_fails_is_a_mismatch(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": trace_events()}))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "audit.py"), "--report-cmd", "false", str(p)],
                         cwd=ROOT, capture_output=True, text=True)
    assert ": report: reported no JSON" in out.stdout and out.returncode == 1


def test_an_op_and_its_callee_with_one_interval_are_one_synchronisation():
    """Integer-µs traces (hta trace_filter_sampled rank 0): `aten::item` and the `aten::_local_scalar_dense` it
    calls can share one interval. The caller (the lower External id) is the outer one, whatever the file order:
    one synchronisation in the `aten::item` row, not none."""
    for order in (1, -1):
        ev = [dict(e) for e in trace_events()]
        for e in ev:
            if e["name"] == "aten::_local_scalar_dense":
                e["ts"], e["dur"] = 100, 30  # the interval of aten::item [100, 130)
        i = next(k for k, e in enumerate(ev) if e["name"] == "aten::item")
        ev[i:i + 2] = ev[i:i + 2][::order]
        t = audit.Trace({"traceEvents": ev})
        assert run(t, right_report()) == [], order


def test_python_frames_with_one_interval_nest_by_call_order():
    """A caller and its callee in the same µs interval (`torch/_ops.py(434): __call__` and its built-in, both
    [1814, 1816) in sidnb13's trace): the callee (the higher Python id, the later call) owns the time, in either
    file order."""
    def P(name, ts, end, pyid, parent):
        return X("python_function", name, ts, end, **{"Python id": pyid, "Python parent id": parent})

    frames = [P("exit.py(616): __exit__", 1812, 1817, 455, None), P("_ops.py(434): __call__", 1814, 1816, 457, 455),
              P("<built-in method of PyCapsule>", 1814, 1816, 458, 457)]
    for ev in (frames, frames[:1] + frames[:0:-1]):
        own = audit.Trace({"traceEvents": ev}).self_times((str(PID), str(PID)), 1812_000, 1817_000)
        assert own == {"exit.py(616): __exit__": 3_000, "_ops.py(434): __call__": 0,
                       "<built-in method of PyCapsule>": 2_000}, ev


def test_own_time_goes_to_the_event_that_started_last_whatever_its_kind():
    """A torch.compile call's shape (hf-compile's decode), µs: `TorchDynamo Cache Lookup` (a cpu_op, [10, 60)) runs
    Python guard frames that start and end inside it ([20, 30) with a built-in [22, 24), [40, 50)): they are nested in
    it, its own time is 50 - 10 - 10 = 30. `Pregraph bytecode` (a cpu_op, [70, 130)) opens inside `__enter__`
    ([68, 71), in `enter` [65, 72)) and closes inside `__exit__` ([125, 132), in `exit` [120, 136)): it owns what no
    event started after it covers, [70, 80) and [85, 120) around `set_eval_frame` [80, 85) = 45, not a child
    clipped to `__enter__`'s end; `exit` and `__exit__` own theirs from their start. The holder and the after-effect
    credit read the same rule."""
    def P(name, ts, end, pyid, parent):
        return X("python_function", name, ts, end, **{"Python id": pyid, "Python parent id": parent})

    ev = [X("user_annotation", "gapscope.step#0", 0, 200), P("eval_frame.py(1): compile_wrapper", 5, 190, 1, None),
          X("cpu_op", "TorchDynamo Cache Lookup", 10, 60, **{"External id": 1}),
          P("guards.py(2): fn", 20, 30, 2, 1), P("<built-in function b>", 22, 24, 3, 2),
          P("<string>(2): guard", 40, 50, 4, 1),
          P("utils.py(3): enter", 65, 72, 5, 1), P("<built-in method __enter__>", 68, 71, 6, 5),
          X("cpu_op", "Pregraph bytecode", 70, 130, **{"External id": 2}),
          P("<built-in function set_eval_frame>", 80, 85, 7, 1),
          P("utils.py(4): exit", 120, 136, 8, 1), P("<built-in method __exit__>", 125, 132, 9, 8)]
    t = audit.Trace({"traceEvents": ev})
    key = (str(PID), str(PID))
    own = t.self_times(key, 8_000, 190_000)
    assert own == {"eval_frame.py(1): compile_wrapper": 61_000, "TorchDynamo Cache Lookup": 30_000,
                   "guards.py(2): fn": 8_000, "<built-in function b>": 2_000, "<string>(2): guard": 10_000,
                   "utils.py(3): enter": 3_000, "<built-in method __enter__>": 2_000, "Pregraph bytecode": 45_000,
                   "<built-in function set_eval_frame>": 5_000, "utils.py(4): exit": 9_000,
                   "<built-in method __exit__>": 7_000}
    v, ns = audit.holder_in(t, key, 8_000, 190_000)
    assert (v.name, ns) == ("eval_frame.py(1): compile_wrapper", 61_000)
    v, ns = audit.holder_in(t, key, 10_000, 60_000)
    assert (v.name, ns) == ("TorchDynamo Cache Lookup", 30_000)
    credits = {v.name: ns for v, ns in audit._credits(t, key)}
    assert {k: credits[k] for k in own} == {**own, "eval_frame.py(1): compile_wrapper": 61_000 + 3_000}  # and [5, 8)


HOST_EXPLANATION = ("Host work in `main.py(30): post` held the CPU for 40.0 µs of the 42.0 µs before `aten::relu` was "
                    "launched; `built-in sleep` ran 33.0 µs of it itself (then `main.py(30): post` 7.0 µs, `aten::relu` "
                    "2.0 µs); GPU idle 50.0 µs.")
SPREAD_EXPLANATION = ("Host work in `main.py(30): post` held the CPU for 40.0 µs of the 42.0 µs before `aten::relu` was "
                      "launched, spread over many frames; the most own time: `built-in sleep` 33.0 µs, "
                      "`main.py(30): post` 7.0 µs; GPU idle 50.0 µs.")


@pytest.mark.parametrize("text,wrong,needle", [
    (HOST_EXPLANATION, None, None),
    (SPREAD_EXPLANATION, None, None),
    (HOST_EXPLANATION, ("ran 33.0 µs", "ran 35.0 µs"), "own time of `built-in sleep`"),
    (HOST_EXPLANATION, ("post` 7.0 µs", "post` 9.0 µs"), "own time of `main.py(30): post`"),
    (HOST_EXPLANATION, ("`aten::relu` 2.0", "`aten::mul` 2.0"), "own time of `aten::mul`"),
    (SPREAD_EXPLANATION, ("`built-in sleep` 33.0", "`built-in sleep` 30.0"), "own time of `built-in sleep`"),
], ids=["ran-right", "spread-right", "ran-wrong", "then-wrong", "then-absent", "spread-wrong"])
def test_the_frame_times_quoted_in_a_host_work_explanation(tr, text, wrong, needle):
    """"`F` ran X of it itself (then `A` a, ...)" and "the most own time: `A` a, ...": each quoted frame's own
    time in [gap start, launch) on the launching thread (built-ins by their short name)."""
    if wrong:
        text = text.replace(*wrong)
    rep = copy.deepcopy(right_report())
    rep["gaps"][0]["explanation"] = text
    bad = run(tr, rep)
    if needle is None:
        assert bad == []
    else:
        assert any(needle in line for line in bad), bad


def test_the_allocator_fix_after_effect_is_recomputed_from_the_events():
    """The allocator fix's "host work they slowed right after them (X per step, recorded)", recomputed by the checker's
    own reading of the events of the real alloc trace: right as reported, and a changed figure is a mismatch."""
    path = ROOT / "traces" / "demo-eager-alloc.decode.json.gz"
    out = subprocess.run([sys.executable, "-m", "gapscope", "report", "--json", "--top", "100000", str(path)], cwd=ROOT,
                         capture_output=True, text=True)
    rep = json.loads(out.stdout)
    tr = audit.Trace(audit.read_trace(str(path)))
    f = next(f for f in rep["findings"] if f["cause"] == "allocator")
    assert "slowed right after them (564.0 µs per step, recorded)" in f["fix"]
    assert audit.after_effect_ns(tr, f["evidence"]["frame"]) == pytest.approx(4 * 564.0e3, abs=4 * 50)

    def mismatches(r):
        A = audit.audit_report(str(path), tr, r, "t")
        return [m for m in A.mismatches if "after-effect" in m]

    assert mismatches(rep) == []
    bad = copy.deepcopy(rep)
    g = next(f for f in bad["findings"] if f["cause"] == "allocator")
    g["fix"] = g["fix"].replace("564.0 µs per step", "764.0 µs per step")
    assert len(mismatches(bad)) == 1


def test_the_graph_fix_host_reads_are_recounted_from_the_events():
    """The graph fix's "it needs the N syncs of `frame` ... removed first: the host reads their values", recounted by
    the checker's own reading of the events of the real sync trace (each of the 4 steps reads the check's value 8
    times): right as reported; a changed N, the frame's reads said to be outside any frame, and the clause left out
    are each a mismatch."""
    path = ROOT / "traces" / "demo-eager-sync.decode.json.gz"
    rep = audit.run_report(f"{sys.executable} -m gapscope", str(ROOT), str(path), False)
    tr = audit.Trace(audit.read_trace(str(path)))
    frame = "capture/demo.py(51): _inject_sync_check"
    f = next(f for f in rep["findings"] if f["cause"] == "launch" and "CUDA graph" in f["fix"])
    assert f"it needs the 32 syncs of `{frame}` removed first" in f["fix"]
    assert audit.host_reads(tr, True) == {frame: 32}

    def mismatches(r):
        A = audit.audit_report(str(path), tr, r, "t")
        return [m for m in A.mismatches if "host reads" in m]

    assert mismatches(rep) == []
    i = rep["findings"].index(f)
    for wrong in (f["fix"].replace("the 32 syncs", "the 31 syncs"),
                  f["fix"].replace(f"of `{frame}`", "outside any user frame"),
                  f["fix"][:f["fix"].index("; it needs")]):
        bad = copy.deepcopy(rep)
        bad["findings"][i]["fix"] = wrong
        assert len(mismatches(bad)) == 1, wrong


@pytest.fixture(scope="module")
def attn():
    """The eager-attention prefill (traces/), its raw events and the report of this checkout."""
    path = ROOT / "traces" / "hf-attn.prefill_eager.json.gz"
    tr = audit.Trace(audit.read_trace(str(path)))
    rep = audit.run_report(f"{sys.executable} -m gapscope", str(ROOT), str(path), False)
    return path, tr, rep


def _row(rep, pred):
    return next(r for r in rep["kernels"] if pred(r))


def test_floor_achieved_and_pattern_claims_are_recomputed(attn):
    path, tr, rep = attn
    A = audit.audit_report(str(path), tr, rep, "t")
    assert A.mismatches == []
    # a matmul row's FLOPs, a floor above the HBM floor, the pattern's call count and kernel time: each caught
    for what, change, needle in [
        ("flops", lambda r: _row(r, lambda k: k.get("op") == "aten::mm" and k.get("flops")).update(
            flops=_row(r, lambda k: k.get("op") == "aten::mm" and k.get("flops"))["flops"] * 1.01), "flops"),
        ("floor", lambda r: _row(r, lambda k: k.get("op") == "aten::mm" and k.get("flops")).update(
            floor_total_us=_row(r, lambda k: k.get("op") == "aten::mm" and k.get("flops"))["floored_total_us"]),
         "floor_total between the resident and the HBM floor"),
        ("pattern calls", lambda r: next(f for f in r["findings"] if f.get("cause") == "pattern")["evidence"]["ops"][0]
         .update(calls=999), "calls"),
        ("pattern time", lambda r: next(f for f in r["findings"] if f.get("cause") == "pattern")["evidence"]["ops"][0]
         .update(kernel_us=1.0), "kernel time"),
        # the additive mask's builder (masking_utils' eager_mask): its host time and its syncs, recounted
        ("mask host", lambda r: next(f for f in r["findings"] if f.get("cause") == "pattern")["evidence"]["mask"]
         .update(host_us=300.0), "mask builder"),
        ("mask syncs", lambda r: next(f for f in r["findings"] if f.get("cause") == "pattern")["evidence"]["mask"]
         .update(syncs=3), "mask builder syncs"),
        ("mask shape", lambda r: next(f for f in r["findings"] if f.get("cause") == "pattern")["evidence"]["mask"]
         .update(shape=[1, 1, 1024, 1000]), "mask shape"),
    ]:
        bad = copy.deepcopy(rep)
        change(bad)
        got = audit.audit_report(str(path), tr, bad, "t").mismatches
        assert any(needle in line for line in got), (what, got)


def _replay_and_reference(ref_order=("mm", "dtod", "copy")):
    """A step that replays one CUDA graph, and the eager reference run the capture records after it, µs:

        step#0 [0, 100): cudaGraphLaunch [10, 12) -> gemv [20, 25), memcpy32_post [25, 26), copy kernel [26, 36)
        graph_reference [200, 300): aten::mm [210, 220) -> gemv [230, 234); aten::copy_ [221, 225) ->
            cudaMemcpyAsync -> Memcpy DtoD [235, 236); aten::copy_ of two bf16 [4, 16, 512, 128] [226, 233) ->
            the copy kernel [237, 247)

    The replay's items, in start order, are the reference's GPU work token for token (a graph's copy node runs as
    ``memcpy32_post`` where the eager run has a ``Memcpy DtoD``): the replayed copy kernel is one call of the big
    ``aten::copy_``, 10 µs. ``ref_order`` reorders the reference's launches (a reference that does not match)."""
    big = [[4, 16, 512, 128], [4, 16, 512, 128], []]
    at = {"mm": (210, 220, 211, 230, 234), "dtod": (221, 225, 222, 235, 236), "copy": (226, 233, 227, 237, 247)}
    slots = sorted(at.values())
    ops = {"mm": ("aten::mm", "cudaLaunchKernel", "kernel", "gemv", {}),
           "dtod": ("aten::copy_", "cudaMemcpyAsync", "gpu_memcpy", "Memcpy DtoD (Device -> Device)", {}),
           "copy": ("aten::copy_", "cudaLaunchKernel", "kernel", "copy kernel",
                    {"Input Dims": big, "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"]})}
    ev = [X("user_annotation", "gapscope.step#0", 0, 100), X("cuda_runtime", "cudaGraphLaunch", 10, 12, correlation=50),
          K("gemv", 20, 25, 50), K("memcpy32_post", 25, 26, 50), K("copy kernel", 26, 36, 50),
          X("user_annotation", "gapscope.graph_reference", 200, 300)]
    for j, (what, (os_, oe, ls, ks, ke)) in enumerate(zip(ref_order, slots)):
        op, call, cat, kname, args = ops[what]
        ev += [X("cpu_op", op, os_, oe, **{"External id": 10 + j, **args}),
               X("cuda_runtime", call, ls, ls + 2, correlation=60 + j, **{"External id": 10 + j}),
               K(kname, ks, ke, 60 + j, cat=cat)]
    return audit.Trace({"traceEvents": ev})


COPIES = {"id": "pattern-1", "cause": "pattern", "evidence": {"pattern": "copies", "kernel_us": 10.0, "ops": [
    {"op": "aten::copy_", "shapes": [[4, 16, 512, 128], [4, 16, 512, 128]], "dtypes": ["bf16", "bf16"], "calls": 1,
     "kernel_us": 10.0}]}}


def test_a_graph_replays_kernels_count_for_the_reference_runs_ops():
    tr = _replay_and_reference()
    m = audit.replay_map(tr)
    got = sorted((g.name, r.name) for g in tr.gpu for L, r in [m.get(id(g), (None, None))] if r is not None)
    assert got == [("copy kernel", "copy kernel"), ("gemv", "gemv"), ("memcpy32_post", "Memcpy DtoD (Device -> Device)")]
    devs, mode = audit.build_devices(tr, "steps")
    assert mode == "steps" and [k.name for k in devs[0].kernels] == ["gemv", "memcpy32_post", "copy kernel"]

    def mismatches(tr, finding):
        A = audit.Audit("t")
        audit.check_patterns(A, tr, {"findings": [finding]}, audit.build_devices(tr, "steps")[0])
        return A.mismatches

    assert mismatches(tr, COPIES) == []
    bad = copy.deepcopy(COPIES)
    bad["evidence"]["ops"][0]["calls"] = 2
    assert [x for x in mismatches(tr, bad) if "calls: reported 2, events say 1" in x]
    # a reference whose work is not the replay's (its launches in another order): nothing maps, no call is counted
    other = _replay_and_reference(("copy", "mm", "dtod"))
    assert audit.replay_map(other) == {}
    assert [x for x in mismatches(other, COPIES) if "calls: reported 1, events say 0" in x]


def test_the_frame_whatifs_subtree_host_time_is_recomputed_from_the_events():
    """Issue #25: each frame_whatifs row's calls, inclusive host time per step and GPU work under the frame, recomputed
    by the checker from the raw events of the real Mixtral trace (the eager experts' forward among them): right as
    reported, and a changed host time or GPU item count is a mismatch."""
    path = ROOT / "traces" / "hf-mixtral.decode_eager.json.gz"
    out = subprocess.run([sys.executable, "-m", "gapscope", "report", "--json", "--top", "100000", str(path)], cwd=ROOT,
                         capture_output=True, text=True)
    rep = json.loads(out.stdout)
    tr = audit.Trace(audit.read_trace(str(path)))
    rows = {w["frame"]: w for w in rep["frame_whatifs"]}
    w = rows["transformers/models/mixtral/modeling_mixtral.py(69): forward"]
    assert w["calls"] == 32 and w["gpu_items"] == 1632  # 8 layers x 4 steps; the experts' kernels and copies

    devs, mode = audit.build_devices(tr, "steps")

    def mismatches(r):
        A = audit.Audit("t")
        audit.check_frames(A, tr, r, devs, mode)
        assert A.checked == 5 * len(r["frame_whatifs"])
        return A.mismatches

    assert mismatches(rep) == []
    bad = copy.deepcopy(rep)
    k = [x["frame"] for x in bad["frame_whatifs"]].index(w["frame"])
    bad["frame_whatifs"][k]["host_us"] += 1.0
    bad["frame_whatifs"][k]["gpu_items"] -= 1
    assert len(mismatches(bad)) == 2


def test_the_tiny_kernel_loop_evidence_is_recomputed_from_the_events():
    """The Mixtral eager decode's loop of tiny kernels: the frame's calls, kernels per call, median kernel and
    launch call, syncs (in the call and in the repeated run) and the repeated op sequence, recounted by the
    checker from the raw events: right as reported, and each changed claim is a mismatch."""
    path = ROOT / "traces" / "hf-mixtral.decode_eager.json.gz"
    tr = audit.Trace(audit.read_trace(str(path)))
    rep = audit.run_report(f"{sys.executable} -m gapscope", str(ROOT), str(path), False)
    devs, _ = audit.build_devices(tr, "steps")
    f = next(f for f in rep["findings"] if (f.get("evidence") or {}).get("pattern") == "tiny-kernel-loop")
    A = audit.Audit("t")
    audit.check_loop(A, tr, rep, devs, f, "p")
    assert A.mismatches == [] and A.checked >= 12
    for key, value, needle in [("frame_calls", 31, "frame calls"), ("kernels_per_call", 41, "kernels per call"),
                               ("kernel_median_us", 9.0, "median kernel"), ("syncs_per_call", 12, "syncs per call"),
                               ("syncs_in_loop_per_call", 3, "syncs inside the repeated run"),
                               ("repeats_per_call", 3, "repeated op sequence")]:
        g = copy.deepcopy(f)
        g["evidence"][key] = value
        A = audit.Audit("t")
        audit.check_loop(A, tr, rep, devs, g, "p")
        assert any(needle in line for line in A.mismatches), (key, A.mismatches)


def test_batch_norm_and_pooling_bytes_are_recomputed():
    """resnet50.fp32: the batch norm and max-pool rows' bytes are recomputed by the checker's own cost code
    (x and the per-channel parameters in, y out; pooling's output from its kernel, stride and padding plus the
    int64 indices); a changed byte count is a mismatch."""
    path = ROOT / "traces" / "resnet50.fp32.json.gz"
    tr = audit.Trace(audit.read_trace(str(path)))
    rep = audit.run_report(f"{sys.executable} -m gapscope", str(ROOT), str(path), False)
    assert audit.audit_report(str(path), tr, rep, "t").mismatches == []
    for op in ("aten::cudnn_batch_norm", "aten::max_pool2d_with_indices"):
        bad = copy.deepcopy(rep)
        r = next(k for k in bad["kernels"] if k.get("op") == op and k.get("bytes"))
        r["bytes"] *= 1.01
        got = audit.audit_report(str(path), tr, bad, "t").mismatches
        assert any("bytes" in line for line in got), (op, got)


def test_the_plan_is_checked_against_itself_the_findings_and_the_events():
    """The audit's plan check (check_plan) on the real sync trace: right as reported; an action's severity out of its
    band, a finding's rank that is not its action's, a frame the trace never recorded and a plan worth less than
    its best action are each a mismatch."""
    path = ROOT / "traces" / "demo-eager-sync.decode.json.gz"
    rep = audit.run_report(f"{sys.executable} -m gapscope", str(ROOT), str(path), False)
    tr = audit.Trace(audit.read_trace(str(path)))

    def mismatches(r):
        A = audit.audit_report(str(path), tr, r, "t")
        return [m for m in A.mismatches if "action" in m or "plan" in m or "finding" in m and "rank" in m]

    assert rep["actions"] and mismatches(rep) == []
    bad = copy.deepcopy(rep)
    bad["actions"][0]["severity"] = "low"
    assert mismatches(bad)
    bad = copy.deepcopy(rep)
    fid = bad["actions"][1]["findings"][0]
    next(f for f in bad["findings"] if f["id"] == fid)["rank"] = 1
    assert mismatches(bad)
    bad = copy.deepcopy(rep)
    bad["actions"][1]["where"]["frame"] = "capture/demo.py(999): nowhere"
    assert mismatches(bad)
    bad = copy.deepcopy(rep)
    bad["plan"]["saving_us"] = bad["actions"][0]["saving_us"] / 2
    assert mismatches(bad)
