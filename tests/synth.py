"""Build small Kineto-format traces in code, for edge cases and cause rules.

Times are given in microseconds (floats allowed) as in real traces; the builder writes the
torch >= 2.4 layout (``baseTimeNanoseconds``, 3-decimal relative µs) unless told otherwise.

    t = Synth()
    with t.op("aten::mm", 0, 10):
        t.launch("cudaLaunchKernel", 1, 3, kernel="gemm", k_ts=12, k_dur=5)
    t.write(tmp_path / "x.json")
"""

from __future__ import annotations

import contextlib
import gzip
import json
from pathlib import Path

PID = 1000
TID = 1000


class Synth:
    def __init__(self, *, device_name: str = "NVIDIA H200", pid: int = PID, tid: int = TID, meta: dict | None = None):
        self.events: list[dict] = []
        self.pid = pid
        self.tid = tid
        self._corr = 1000
        self._ext = 1
        self._pyid = 1
        self._py_stack: list[int] = []
        self.top: dict = {
            "schemaVersion": 1,
            "deviceProperties": [
                {"id": 0, "name": device_name, "totalGlobalMem": 150109880320, "computeMajor": 9,
                 "computeMinor": 0, "numSms": 132}
            ],
            "baseTimeNanoseconds": 1790000000000000000,
        }
        if meta:
            self.top.update(meta)
        self.events.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": tid,
                            "args": {"name": f"thread {tid} (python3)"}})

    # ------------------------------------------------------------- cpu side
    def _x(self, cat, name, ts, dur, tid=None, pid=None, **args) -> dict:
        e = {"ph": "X", "cat": cat, "name": name, "pid": self.pid if pid is None else pid,
             "tid": self.tid if tid is None else tid, "ts": ts, "dur": dur, "args": args}
        self.events.append(e)
        return e

    def cpu_op(self, name, ts, dur, tid=None, **args) -> dict:
        ext = self._ext
        self._ext += 1
        return self._x("cpu_op", name, ts, dur, tid=tid, **{"External id": ext, **args})

    @contextlib.contextmanager
    def op(self, name, ts, dur, tid=None, **args):
        yield self.cpu_op(name, ts, dur, tid=tid, **args)

    def annotation(self, name, ts, dur, tid=None) -> dict:
        return self._x("user_annotation", name, ts, dur, tid=tid)

    def runtime(self, name, ts, dur, tid=None, **args) -> dict:
        c = self._corr
        self._corr += 1
        return self._x("cuda_runtime", name, ts, dur, tid=tid, correlation=c, **args)

    def python(self, name, ts, dur, tid=None) -> dict:
        """A with_stack Python frame; nested under the innermost open python() context, if any."""
        pid_ = self._pyid
        self._pyid += 1
        parent = self._py_stack[-1] if self._py_stack else None
        return self._x("python_function", name, ts, dur, tid=tid,
                       **{"Python id": pid_, "Python parent id": parent})

    @contextlib.contextmanager
    def frame(self, name, ts, dur, tid=None):
        e = self.python(name, ts, dur, tid=tid)
        self._py_stack.append(e["args"]["Python id"])
        try:
            yield e
        finally:
            self._py_stack.pop()

    # ------------------------------------------------------------- gpu side
    def kernel(self, name, ts, dur, *, corr=None, stream=7, device=0, **args) -> dict:
        a = {"device": device, "stream": stream, "correlation": corr if corr is not None else -1,
             "grid": [1, 1, 1], "block": [128, 1, 1], **args}
        e = {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur, "args": a}
        self.events.append(e)
        return e

    def memcpy(self, direction, ts, dur, *, nbytes, corr=None, stream=7, device=0, src="Pageable", dst="Device") -> dict:
        name = f"Memcpy {direction} ({src} -> {dst})"
        a = {"device": device, "stream": stream, "correlation": corr if corr is not None else -1, "bytes": nbytes,
             "memory bandwidth (GB/s)": nbytes / (dur * 1e3) if dur else 0}
        e = {"ph": "X", "cat": "gpu_memcpy", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur, "args": a}
        self.events.append(e)
        return e

    def launch(self, name="cudaLaunchKernel", ts=0.0, dur=2.0, *, kernel="kernel", k_ts=None, k_dur=1.0,
               stream=7, device=0, tid=None) -> tuple[dict, dict]:
        """A launch call and the kernel it launched, linked by correlation (and flow events)."""
        rt = self.runtime(name, ts, dur, tid=tid)
        c = rt["args"]["correlation"]
        k = self.kernel(kernel, ts + dur + 1 if k_ts is None else k_ts, k_dur, corr=c, stream=stream, device=device)
        self.events.append({"ph": "s", "id": c, "pid": self.pid, "tid": self.tid if tid is None else tid,
                            "ts": ts, "cat": "ac2g", "name": "ac2g"})
        self.events.append({"ph": "f", "id": c, "pid": device, "tid": stream, "ts": k["ts"], "cat": "ac2g",
                            "name": "ac2g", "bp": "e"})
        return rt, k

    def memory(self, ts, nbytes, total=0, tid=None) -> dict:
        e = {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": self.pid,
             "tid": self.tid if tid is None else tid, "ts": ts,
             "args": {"Total Reserved": total, "Total Allocated": total, "Bytes": nbytes, "Device Id": 0,
                      "Device Type": 1, "Addr": 1}}
        self.events.append(e)
        return e

    def overhead(self, name, ts, dur) -> dict:
        e = {"ph": "X", "cat": "overhead", "name": name, "pid": -1, "tid": 0, "ts": ts, "dur": dur}
        self.events.append(e)
        return e

    # ------------------------------------------------------------- output
    def doc(self) -> dict:
        return {**self.top, "traceEvents": list(self.events), "traceName": "synth"}

    def dumps(self) -> bytes:
        return json.dumps(self.doc()).encode()

    def write(self, path, *, gz: bool | None = None) -> Path:
        path = Path(path)
        data = self.dumps()
        if gz is None:
            gz = path.suffix == ".gz"
        path.write_bytes(gzip.compress(data) if gz else data)
        return path


def damage_bytes(data: bytes, damage) -> bytes:
    """``data`` damaged by each (what, where) in turn: where is a fraction of the length; what is cut, flip, or
    one of quote / inf / nan / bracket / brace / comma inserted there."""
    b = bytearray(data)
    for what, where in damage:
        if not b:
            break
        i = min(int(where * len(b)), len(b) - 1)
        if what == "cut":
            del b[i:]
        elif what == "flip":
            b[i] ^= 0x55
        else:
            b[i:i] = {"quote": b'"', "inf": b"inf", "nan": b"NaN", "bracket": b"[", "brace": b"{",
                      "comma": b","}[what]
    return bytes(b)
