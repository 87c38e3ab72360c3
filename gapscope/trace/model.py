"""The columnar trace model: one numpy array per field, events sorted by (track, ts, -dur).

Everything downstream (analysis, lanes, report) works on these arrays with vectorised queries.
There are no per-event Python objects once a model is built; event args are JSON bytes in one buffer
(``BlobList``), decoded only when someone asks about one event: interned (deduplicated, without their ids)
for GPU work and instants, as written in the trace for CPU ops (one entry each).
"""

from __future__ import annotations

import enum
import json
import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:  # orjson is a dependency of the viewer; GPU nodes that only have torch fall back to json.
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised on GPU nodes only
    _orjson = None


#: args keys already held in columns, or per-call noise: never part of what ``event_args`` returns
ARGS_DROP = frozenset(
    {
        "correlation",
        "External id",
        "external id",
        "Python id",
        "Python parent id",
        "Ev Idx",
        "Addr",
        "device",
        "stream",
        "context",
        "Record function id",
        "Fwd thread id",
        "Sequence number",
        "external ts",
    }
)


class BlobList:
    """A read-only sequence of bytes kept as one buffer plus int64 offsets: the args table of a trace with
    millions of events is two objects, not millions."""

    __slots__ = ("data", "offs")

    def __init__(self, data: bytes = b"", offs: np.ndarray | None = None):
        self.data = data if isinstance(data, (bytes, bytearray)) else bytes(data)
        self.offs = np.zeros(1, dtype=np.int64) if offs is None else np.asarray(offs, dtype=np.int64)

    @classmethod
    def of(cls, items) -> BlobList:
        items = list(items)
        offs = np.zeros(len(items) + 1, dtype=np.int64)
        if items:
            np.cumsum(np.fromiter(map(len, items), np.int64, len(items)), out=offs[1:])
        return cls(b"".join(items), offs)

    def __len__(self) -> int:
        return int(self.offs.shape[0]) - 1

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(n))]
        i = operator.index(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("args index out of range")
        return self.data[int(self.offs[i]) : int(self.offs[i + 1])]

    def __iter__(self):
        d = self.data
        o = self.offs.tolist()
        for a, b in zip(o, o[1:]):
            yield d[a:b]

    def __eq__(self, other) -> bool:
        if isinstance(other, BlobList):
            return self.data == other.data and np.array_equal(self.offs, other.offs)
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BlobList({len(self)} entries, {len(self.data)} bytes)"

    def __getstate__(self):
        return (self.data, self.offs)

    def __setstate__(self, state) -> None:
        self.data, self.offs = state


class Kind(enum.IntEnum):
    """Event kinds, the ``kind`` column (uint8)."""

    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2
    CPU_OP = 3
    PYTHON = 4
    RUNTIME = 5
    DRIVER = 6
    ANNOTATION = 7  # record_function ranges, ProfilerStep#N (cpu side)
    GPU_ANNOTATION = 8  # GPU-side copy of a record_function range: an overlay, not GPU work
    SYNC = 9  # cuda_sync events (enable_cuda_sync_events)
    OVERHEAD = 10  # the profiler's own work
    INSTANT = 11  # ph "i" events: [memory], [OutOfMemory], window markers
    OTHER = 12  # anything else, kept rather than dropped


#: kinds that are GPU work on a stream (they keep a device busy)
GPU_WORK_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
#: kinds that nest by time on a CPU thread
CPU_NEST_KINDS = (Kind.CPU_OP, Kind.ANNOTATION, Kind.RUNTIME, Kind.DRIVER)

NO_ID = -1  # sentinel for missing ids in the int64 id columns


class TrackKind(str, enum.Enum):
    CPU = "cpu"  # a CPU thread (pid, tid)
    GPU = "gpu"  # a device stream (device, stream)
    OTHER = "other"  # profiler overhead, window markers, string pids


@dataclass
class Track:
    """One row of the tracks side table. Events of track ``id`` are ``model.track_slice(id)``."""

    id: int
    kind: TrackKind
    pid: int | str
    tid: int | str
    name: str  # display name: "thread 523 (python3)", "cuda:0 stream 7", "profiler overhead"
    device: int = -1  # GPU tracks: device index
    stream: int = -1  # GPU tracks: stream id
    rank: int | None = None  # multi-rank loads
    sort_index: int = 0


@dataclass(eq=False)
class TraceModel:
    """A loaded trace. Column arrays all have length ``n`` and share one event order."""

    path: str
    ts_ns: np.ndarray  # int64, relative to the trace's own time base (rint(ts_us * 1000))
    dur_ns: np.ndarray  # int64, >= 0
    kind: np.ndarray  # uint8, Kind
    track: np.ndarray  # int32, index into tracks
    name_id: np.ndarray  # int32, index into names
    corr: np.ndarray  # int64, args.correlation or NO_ID
    ext_id: np.ndarray  # int64, args["External id"] or NO_ID
    py_id: np.ndarray  # int64, args["Python id"] or NO_ID
    py_parent: np.ndarray  # int64, args["Python parent id"] or NO_ID
    depth: np.ndarray  # int16, nesting depth on its track (cpu family by time, python by tree)
    parent: np.ndarray  # int64, event index of the enclosing event in the same family, or -1
    args_id: np.ndarray  # int32, index into args (JSON bytes: interned for GPU work, per event for CPU ops) or -1
    nbytes: np.ndarray  # int64, bytes for copies/memsets/[memory] events, else 0
    launch: np.ndarray  # int64, for GPU work: index of the launching runtime/driver call, or -1
    op: np.ndarray  # int64, for GPU work and runtime calls: index of the innermost aten op, or -1
    track_offsets: np.ndarray  # int64, len(tracks)+1: events of track t are [off[t], off[t+1])
    names: list[str]
    args: BlobList  # a sequence of JSON bytes (a list also works)
    tracks: list[Track]
    devices: list[dict] = field(default_factory=list)  # deviceProperties
    metadata: dict = field(default_factory=dict)  # top-level keys other than traceEvents
    warnings: list[str] = field(default_factory=list)
    category_counts: dict = field(default_factory=dict)  # raw "cat" spelling (or "<none>") -> count
    #: a preview of a trace still being read (gapscope/trace/progressive.py): drawn, never analysed, never cached
    partial: bool = False

    # ------------------------------------------------------------------ basics
    @property
    def n(self) -> int:
        return int(self.ts_ns.shape[0])

    @property
    def end_ns(self) -> np.ndarray:
        return self.ts_ns + self.dur_ns

    def track_slice(self, track_id: int) -> slice:
        return slice(int(self.track_offsets[track_id]), int(self.track_offsets[track_id + 1]))

    def name(self, i: int) -> str:
        return self.names[int(self.name_id[i])]

    def event_args(self, i: int) -> dict[str, Any]:
        """Decoded args of event ``i`` (without the ids already held in columns)."""
        a = int(self.args_id[i])
        if a < 0:
            return {}
        raw = self.args[a]
        d = _orjson.loads(raw) if _orjson is not None else json.loads(raw)
        if not isinstance(d, dict):
            return {}
        return {k: v for k, v in d.items() if k not in ARGS_DROP}

    def window_ns(self) -> tuple[int, int]:
        """(first start, last end) over every timed event; (0, 0) for an empty trace."""
        if self.n == 0:
            return (0, 0)
        return (int(self.ts_ns.min()), int((self.ts_ns + self.dur_ns).max()))

    # ---------------------------------------------------------------- metadata
    @property
    def gapscope_meta(self) -> dict | None:
        """Metadata written by gapscope's capture (top-level key ``gapscope``), if any."""
        m = self.metadata.get("gapscope")
        return m if isinstance(m, dict) else None

    @property
    def distributed(self) -> dict | None:
        d = self.metadata.get("distributedInfo")
        return d if isinstance(d, dict) else None

    @property
    def rank(self) -> int | None:
        g = self.gapscope_meta
        if g and isinstance(g.get("rank"), int):
            return g["rank"]
        d = self.distributed
        if d and isinstance(d.get("rank"), int):
            return d["rank"]
        return None

    def device_name(self, device: int) -> str | None:
        """The GPU's name: its ``deviceProperties`` entry, else the one name every entry shares. The one source of
        device names for the report, the JSON and the explorer: a ROCm trace can number its GPU tracks unlike its
        deviceProperties (sglang on an MI300X: kernels on device 9, one entry with id 0, "AMD Instinct MI300X")."""
        props = [p for p in self.devices if isinstance(p, dict)]
        for p in props:
            if p.get("id") == device:
                n = p.get("name")
                if n:
                    return str(n)
                break
        names = {str(p.get("name")) for p in props if p.get("name")}
        return names.pop() if len(names) == 1 else None

    def gpu_tracks(self) -> list[Track]:
        return [t for t in self.tracks if t.kind is TrackKind.GPU]

    def cpu_tracks(self) -> list[Track]:
        return [t for t in self.tracks if t.kind is TrackKind.CPU]

    def gpu_devices(self) -> list[int]:
        return sorted({t.device for t in self.tracks if t.kind is TrackKind.GPU})

    # ------------------------------------------------------------ navigation
    def ancestors(self, i: int) -> list[int]:
        """Event indices enclosing ``i`` in its family, innermost first (``i`` excluded)."""
        out = []
        p = int(self.parent[i])
        while p >= 0 and len(out) < 10_000:
            out.append(p)
            p = int(self.parent[p])
        return out

    def kernels_of_launch(self, launch_idx: int) -> np.ndarray:
        """GPU events launched by runtime call ``launch_idx`` (a cudaGraphLaunch fans out to many)."""
        return np.flatnonzero(self.launch == launch_idx)
