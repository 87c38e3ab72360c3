"""Independent reading of a Kineto trace for tests: the raw events (json/gzip only, no ``tui`` import), the GPU
idle gaps recomputed from the raw kernels, the launch call behind the kernel that ends each gap, and how the
launching thread spent the CPU's part of the gap. Tests compare gapscope's analysis against these numbers, so
nothing here may use gapscope's code or tables: the name patterns below are written out by hand from the
design notes (../shared/design/kineto-format.md, gap-causes.md) and from the events of the traces themselves.

Times are integer ns relative to the trace's own base, ``rint(ts_us * 1000)`` as the format notes say.
"""

from __future__ import annotations

import bisect
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

GPU_WORK_CATS = {"kernel"}  # gaps are where no kernel runs (copies do not close a compute gap)
LAUNCHING_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
BUSY_CATS = {"cpu_op", "cuda_runtime", "cuda_driver", "runtime", "operator"}


def is_profiler_name(name: str) -> bool:
    """The profiler's own work on a thread, by name (hand-written): record_function enter/exit as Python
    frames (torch/autograd/profiler.py), the built-in methods and the ``profiler::`` ops below them, and
    ``prof.step()`` (torch/profiler/profiler.py)."""
    return ("autograd/profiler.py" in name or "torch/profiler/" in name or "_record_function_enter" in name
            or "_record_function_exit" in name or name.startswith("profiler::"))


def is_step_range(e: dict) -> bool:
    """A step range (torch's ``ProfilerStep#N``, the capture's ``gapscope.step#N``) wraps the whole step: it says
    nothing about what the thread was doing."""
    return e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(("ProfilerStep#", "gapscope.step#"))


def ns(x) -> int:
    if isinstance(x, int):  # integer µs since the epoch (torch <= 2.3): exact, beyond a float's 53 bits
        return x * 1000
    return int(round(float(x) * 1000))


def read_events(path: Path) -> list[dict]:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def covered(union: list[tuple[int, int]], a: int, b: int) -> int:
    """ns of [a, b) inside a union of disjoint sorted intervals."""
    i = bisect.bisect_right(union, a, key=lambda iv: iv[1])  # the first interval ending after a
    total = 0
    for s, e in union[i:]:
        if s >= b:
            break
        total += max(0, min(e, b) - max(s, a))
    return total


@dataclass
class RawGap:
    device: int
    start: int
    end: int
    next_kernel: dict
    launch: dict | None  # the runtime call with the next kernel's correlation

    @property
    def dur(self) -> int:
        return self.end - self.start

    @property
    def thread(self):
        return None if self.launch is None else (self.launch.get("pid"), self.launch.get("tid"))

    @property
    def t_launch(self) -> int:
        """When the next kernel's launch call started, clipped to the gap (as the CPU's part of the gap ends)."""
        if self.launch is None:
            return self.end
        return min(max(ns(self.launch["ts"]), self.start), self.end)


class RawTrace:
    def __init__(self, path: Path):
        self.events = [e for e in read_events(path) if isinstance(e, dict)]
        self.x = [e for e in self.events if e.get("ph") == "X" and e.get("ts") is not None]
        self.launch_by_corr: dict[int, dict] = {}
        for e in self.x:
            if e.get("cat") in LAUNCHING_CATS and isinstance(e.get("args"), dict):
                c = e["args"].get("correlation")
                if c is not None:
                    self.launch_by_corr.setdefault(c, e)
        self._thread_events: dict = {}
        self._unions: dict = {}

    def kernels(self, device: int) -> list[dict]:
        return [e for e in self.x if e.get("cat") in GPU_WORK_CATS and self.device_of(e) == device
                and ns(e.get("dur", 0)) > 0]

    @staticmethod
    def device_of(e: dict) -> int:
        a = e.get("args") or {}
        return int(a["device"]) if "device" in a else int(e["pid"])

    def gaps(self, device: int) -> list[RawGap]:
        """The idle intervals between kernels on ``device`` (leading and trailing idle not included), each with
        the kernel that ends it (the longest one starting there) and that kernel's launch call."""
        ks = sorted(self.kernels(device), key=lambda e: (ns(e["ts"]), -ns(e["dur"])))
        out = []
        run_end = None
        for k in ks:
            s = ns(k["ts"])
            if run_end is not None and s > run_end:
                c = (k.get("args") or {}).get("correlation")
                out.append(RawGap(device, run_end, s, k, self.launch_by_corr.get(c)))
            e = s + ns(k["dur"])
            run_end = e if run_end is None else max(run_end, e)
        return out

    def copies_in(self, device: int, a: int, b: int) -> bool:
        """Whether a copy or memset ran on ``device`` during [a, b)."""
        key = ("copies", device)
        if key not in self._unions:
            self._unions[key] = union([(ns(e["ts"]), ns(e["ts"]) + max(ns(e.get("dur", 0)), 1)) for e in self.x
                                       if e.get("cat") in ("gpu_memcpy", "gpu_memset", "Memcpy", "Memset")
                                       and self.device_of(e) == device])
        return covered(self._unions[key], a, b) > 0

    def thread_events(self, thread) -> list[dict]:
        if thread not in self._thread_events:
            self._thread_events[thread] = [e for e in self.x if (e.get("pid"), e.get("tid")) == thread]
        return self._thread_events[thread]

    def thread_union(self, thread, what: str, pred) -> list[tuple[int, int]]:
        """The union of the thread's events that ``pred`` accepts (cached under ``what``)."""
        key = (thread, what)
        if key not in self._unions:
            self._unions[key] = union([(ns(e["ts"]), ns(e["ts"]) + ns(e.get("dur", 0)))
                                        for e in self.thread_events(thread) if pred(e)])
        return self._unions[key]

    def runtime_calls(self, thread) -> list[tuple[int, int, str]]:
        """(start, end, name) of the thread's runtime and driver calls, by start."""
        key = (thread, "runtime-calls")
        if key not in self._unions:
            self._unions[key] = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e.get("dur", 0)), e.get("name", ""))
                                       for e in self.thread_events(thread) if e.get("cat") in LAUNCHING_CATS)
        return self._unions[key]

    def runtime_names_in(self, thread, a: int, b: int) -> list[str]:
        calls = self.runtime_calls(thread)
        longest = max((e - s for s, e, _ in calls), default=0)
        i = bisect.bisect_left(calls, (a - longest,))
        out = []
        for s, e, name in calls[i:]:
            if s >= b:
                break
            if e > a:
                out.append(name)
        return out

    def host_ops(self, thread, min_ns: int) -> list[tuple[int, int]]:
        """cpu ops of at least ``min_ns`` on the thread with no runtime call inside them: host computation."""
        key = (thread, "host-ops", min_ns)
        if key not in self._unions:
            calls = self.runtime_calls(thread)
            out = []
            for e in self.thread_events(thread):
                if e.get("cat") != "cpu_op" or ns(e.get("dur", 0)) < min_ns:
                    continue
                s, t = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
                i = bisect.bisect_left(calls, (s,))
                if not (i < len(calls) and calls[i][0] < t):
                    out.append((s, t))
            self._unions[key] = union(out)
        return self._unions[key]
