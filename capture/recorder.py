"""Record a narrow, measured profiler window around a step function.

The recipe (what an expert does by hand):

1. call ``step()`` ``warmup`` times without the profiler (compilation, allocator, cuDNN/cuBLAS autotuning,
   CUDA graph capture all happen here);
2. time ``active`` calls without the profiler: synchronise, host clock, ``active`` steps, synchronise,
   host clock; repeat a few times and keep the median (every sample is kept in the metadata). This
   timing must not follow a profiler session in the same process: Kineto may leave CUPTI attached
   after ``stop()`` (it calls ``cuptiFinalize`` only where ``TEARDOWN_CUPTI`` says so), which slows
   every later kernel launch. ``Session.measure`` therefore times every phase before the first window,
   and the metadata says ``timed_after_profiler`` when a timing did follow one;
3. start the profiler, (several ranks: barrier + synchronise *after* the profiler started on every rank),
   synchronise, run exactly ``active`` steps each inside a ``gapscope.step#k`` range with no synchronise
   between them, synchronise once at the end, (several ranks: barrier), stop;
4. export to a temporary name in the output folder, gzip, and link it under the final name only when
   complete. An existing trace is never replaced unless ``overwrite=True``; otherwise the next free
   name ``<stem>.1.json.gz``, ``<stem>.2.json.gz``, ... is used (agreed on by every rank).

torch is imported inside functions only, so that ``import capture`` works without it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

STEP_RANGE = "gapscope.step#{}"  # record_function name of each profiled step
DEFAULT_REPEATS = 3


class CaptureError(Exception):
    """A problem the user can fix (bad arguments, unwritable folder); shown as one line by the CLI."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


@dataclass
class Timing:
    """Un-profiled host time of ``active`` steps: the median and every sample, in nanoseconds."""

    active: int
    samples_ns: list
    after_profiler: bool  # a profiler session of this module ran earlier in this process

    @property
    def median_ns(self) -> float:
        return float(statistics.median(self.samples_ns))


_PROFILER_SESSIONS = [0]  # profiler sessions started by record() in this process


@dataclass
class CaptureResult:
    """What one recording produced."""

    path: str
    name: str
    phase: str | None
    active: int
    profiled_us: float  # host time of the profiled window (active steps), microseconds
    unprofiled_us: float  # median host time of the same number of steps without the profiler
    distortion: float  # profiled_us / unprofiled_us
    cpu_only: bool
    rank: int | None = None
    world_size: int | None = None
    metadata: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        who = f"[rank {self.rank}] " if self.rank is not None else ""
        return (
            f"{who}wrote {self.path}  distortion {self.distortion:.2f}x "
            f"(profiled {self.profiled_us / 1000:.3f} ms vs {self.unprofiled_us / 1000:.3f} ms "
            f"un-profiled, {self.active} step{'s' if self.active != 1 else ''})"
        )


# ------------------------------------------------------------------------------------------ helpers
def _json_safe(value: Any) -> Any:
    """Make metadata survive Kineto's JSON writer.

    Kineto pastes the string given to ``add_metadata_json`` into the file and turns every backslash
    into a slash, so any JSON escape (``\\"``, ``\\n``, ``\\u00e9``) would corrupt the whole trace.
    Strings are therefore reduced to printable ASCII without quotes or backslashes.
    """
    if isinstance(value, dict):
        return {_json_safe(str(k)): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    s = str(value)
    out = []
    for ch in s:
        if ch == '"':
            out.append("'")
        elif ch == "\\":
            out.append("/")
        elif " " <= ch <= "~":
            out.append(ch)
        elif ch in "\t\n\r":
            out.append(" ")
        else:
            out.append("?")
    return "".join(out)


def _synchronize(use_cuda: bool) -> None:
    if use_cuda:
        import torch

        torch.cuda.synchronize()


def _dist():
    """torch.distributed when initialised with more than one rank... or with one; else None."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return None
    if dist.is_available() and dist.is_initialized():
        return dist
    return None


def _collective_failed(dist, what: str, exc: BaseException) -> CaptureError:
    """A collective that timed out or lost a peer, as one line: another rank failed or hangs."""
    detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return CaptureError(
        f"rank {dist.get_rank()}: {what} failed: another rank failed, hangs, or did not arrive within the "
        f"process group's timeout (gapscope capture --dist-timeout) ({type(exc).__name__}: {detail})"
    )


def _barrier(dist, use_cuda: bool) -> None:
    if dist is None:
        return
    try:
        if use_cuda and dist.get_backend() == "nccl":
            import torch

            dist.barrier(device_ids=[torch.cuda.current_device()])
        else:
            dist.barrier()
    except RuntimeError as exc:  # DistBackendError, gloo's timeout and lost-peer errors
        raise _collective_failed(dist, "barrier", exc) from exc


def _process_groups(dist) -> dict:
    """{group name: [global ranks]} for every process group this rank knows, best effort."""
    out: dict[str, Any] = {}
    try:
        from torch.distributed import distributed_c10d as c10d

        names = getattr(c10d._world, "pg_names", {})
        ranks = getattr(c10d._world, "pg_group_ranks", {})
        for pg, nm in names.items():
            r = ranks.get(pg)
            out[str(nm)] = sorted(int(k) for k in r.keys()) if isinstance(r, dict) else None
    except Exception:  # private API: its absence only costs the group list
        pass
    return out


def environment(use_cuda: bool) -> dict:
    """Versions and device of this process, for the trace metadata."""
    import torch

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "cpu_only": not use_cuda,
        "device": None,
    }
    if use_cuda:
        idx = torch.cuda.current_device()
        env["device"] = torch.cuda.get_device_name(idx)
        env["device_index"] = idx
        env["device_count"] = torch.cuda.device_count()
    dist = _dist()
    if dist is not None:
        env["rank"] = dist.get_rank()
        env["world_size"] = dist.get_world_size()
        env["backend"] = str(dist.get_backend())
        env["process_groups"] = _process_groups(dist)
    return env


def _stem(name: str, phase: str | None, rank: int | None) -> str:
    for part, what in ((name, "name"), (phase, "phase")):
        if part is not None and (not part or os.sep in part or part.startswith(".")):
            raise CaptureError(f"bad {what} {part!r}: use a plain file-name part")
    s = name
    if phase:
        s += f".{phase}"
    if rank is not None:
        s += f".rank{rank}"
    return s


def _free_index(out_dir: str, stem: str, start: int = 0) -> int:
    """Smallest n >= start such that the trace name for n does not exist (0 means no number)."""
    n = start
    while os.path.exists(os.path.join(out_dir, _numbered(stem, n))):
        n += 1
    return n


def _numbered(stem: str, n: int) -> str:
    return f"{stem}.json.gz" if n == 0 else f"{stem}.{n}.json.gz"


def _agree_index(dist, n: int) -> int:
    """Every rank uses the largest free number any rank found, so rank files keep one name."""
    if dist is None or dist.get_world_size() == 1:
        return n
    found: list[Any] = [None] * dist.get_world_size()
    try:
        dist.all_gather_object(found, n)
    except RuntimeError as exc:
        raise _collective_failed(dist, "agreeing on the file name", exc) from exc
    return max(int(x) for x in found)


def _export(prof, out_dir: str, stem: str, n: int, overwrite: bool) -> str:
    """Export, gzip and link into place; on any failure nothing is left under the final name."""
    tmp_json = tmp_gz = None
    try:
        fd, tmp_json = tempfile.mkstemp(prefix=f".{stem}.", suffix=".json.tmp", dir=out_dir)
        os.close(fd)
        prof.export_chrome_trace(tmp_json)
        fd, tmp_gz = tempfile.mkstemp(prefix=f".{stem}.", suffix=".gz.tmp", dir=out_dir)
        with os.fdopen(fd, "wb") as raw, open(tmp_json, "rb") as src:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                shutil.copyfileobj(src, gz, 1 << 20)
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(tmp_gz, 0o666 & ~_umask())  # mkstemp makes 0600; a trace is an ordinary file
        while True:
            final = os.path.join(out_dir, _numbered(stem, n))
            if overwrite:
                os.replace(tmp_gz, final)
                return final
            try:
                os.link(tmp_gz, final)  # fails if the name appeared meanwhile: never clobber
                return final
            except FileExistsError:
                n += 1
            except OSError:
                if os.path.exists(final):
                    n += 1
                    continue
                os.rename(tmp_gz, final)  # filesystems without hard links
                tmp_gz = None
                return final
    except OSError as exc:
        raise CaptureError(
            f"{os.path.join(out_dir, _numbered(stem, n))}: cannot write the trace "
            f"({exc.strerror or exc}); nothing was written"
        ) from None
    finally:
        for t in (tmp_json, tmp_gz):
            if t and os.path.exists(t):
                try:
                    os.unlink(t)
                except OSError:
                    pass


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def _time_steps(step: Callable[[], Any], active: int, use_cuda: bool, dist, repeats: int) -> list:
    """Host times in ns of ``repeats`` runs of ``active`` un-profiled steps (synchronise at each end only)."""
    samples = []
    for _ in range(max(1, repeats)):
        _barrier(dist, use_cuda)
        _synchronize(use_cuda)
        t0 = time.perf_counter_ns()
        for _k in range(active):
            step()
        _synchronize(use_cuda)
        samples.append(time.perf_counter_ns() - t0)
    _barrier(dist, use_cuda)
    return samples


def _use_cuda(cuda: bool | None) -> bool:
    import torch

    use_cuda = torch.cuda.is_available() if cuda is None else bool(cuda)
    if use_cuda and not torch.cuda.is_available():
        raise CaptureError("cuda=True but no CUDA device is available")
    return use_cuda


def _check_counts(active: Any, warmup: Any) -> tuple[int, int]:
    if int(active) < 1 or int(warmup) < 0:
        raise CaptureError(f"need active >= 1 and warmup >= 0 (got active={active}, warmup={warmup})")
    return int(active), int(warmup)


def measure(
    step: Callable[[], Any],
    *,
    warmup: int = 3,
    active: int = 1,
    repeats: int = DEFAULT_REPEATS,
    cuda: bool | None = None,
) -> Timing:
    """Warm up and time ``active`` un-profiled calls of ``step`` ``repeats`` times (steps 1 and 2).

    Call it for every phase before recording any of them (``Session.measure`` does), so that no
    timing follows a profiler session of this process; pass the result to ``record(timing=...)``.
    """
    if not callable(step):
        raise CaptureError(f"step is not callable (got {type(step).__name__})")
    active, warmup = _check_counts(active, warmup)
    use_cuda = _use_cuda(cuda)
    for _ in range(warmup):
        step()
    _synchronize(use_cuda)
    samples = _time_steps(step, active, use_cuda, _dist(), repeats)
    return Timing(active=active, samples_ns=samples, after_profiler=_PROFILER_SESSIONS[0] > 0)


def _stop_quietly(prof) -> None:
    try:
        prof.stop()
    except Exception:
        pass


# ------------------------------------------------------------------------------------------ record
def record(
    step: Callable[[], Any],
    *,
    name: str,
    out_dir: str = "traces",
    warmup: int = 3,
    active: int = 1,
    phase: str | None = None,
    stacks: bool = True,
    shapes: bool = True,
    memory: bool = False,
    repeats: int = DEFAULT_REPEATS,
    overwrite: bool = False,
    cuda: bool | None = None,
    extra: dict | None = None,
    quiet: bool = False,
    timing: Timing | None = None,
) -> CaptureResult:
    """Warm up, time, and record exactly ``active`` calls of ``step`` into one gzip'd trace.

    ``cuda=None`` records CUDA activity when a CUDA device is available; without one only CPU activity
    is recorded, and the metadata (``cpu_only``) and stderr say so. ``extra`` is stored in the trace
    metadata under ``workload``. Exceptions (KeyboardInterrupt too) raised by ``step`` stop the profiler
    and propagate; no file is written then. ``timing`` (from ``measure`` with the same ``active``) is used
    instead of timing here; the ``warmup`` calls still run right before the window.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if not callable(step):
        raise CaptureError(f"step for {name!r} is not callable (got {type(step).__name__})")
    active, warmup = _check_counts(active, warmup)
    if timing is not None and timing.active != active:
        raise CaptureError(f"timing is of {timing.active} steps but the window has {active}")
    use_cuda = _use_cuda(cuda)
    if torch.autograd._profiler_enabled():
        raise CaptureError("a profiler is already running in this process; stop it before recording")
    dist = _dist()
    rank = dist.get_rank() if dist is not None else None
    world = dist.get_world_size() if dist is not None else None
    stem = _stem(name, phase, rank)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise CaptureError(f"{out_dir}: cannot create the output folder ({exc.strerror or exc})") from None
    if not os.access(out_dir, os.W_OK):
        raise CaptureError(f"{out_dir}: output folder is not writable")
    n = 0 if overwrite else _agree_index(dist, _free_index(out_dir, stem))
    if not use_cuda and not quiet:
        sys.stderr.write(f"gapscope capture: no CUDA device: {stem} records CPU activity only\n")

    # 1. warm-up, 2. un-profiled timing (done earlier by measure() when given)
    if timing is None:
        timing = measure(step, warmup=warmup, active=active, repeats=repeats, cuda=use_cuda)
    else:
        for _ in range(warmup):
            step()
        _synchronize(use_cuda)
    unprofiled_ns = timing.median_ns

    env = environment(use_cuda)  # before the window, so that its calls stay out of the trace

    # 3. the profiled window
    activities = [ProfilerActivity.CPU]
    if use_cuda:
        activities.append(ProfilerActivity.CUDA)
    kw = dict(activities=activities, record_shapes=shapes, with_stack=stacks, profile_memory=memory)
    try:
        # one cycle only, so accumulating changes nothing; it silences a per-start warning on torch >= 2.4
        prof = profile(**kw, acc_events=True)
    except TypeError:  # older torch
        prof = profile(**kw)
    prof.start()
    _PROFILER_SESSIONS[0] += 1
    try:
        _barrier(dist, use_cuda)  # after every rank's profiler is up: start-up time differs per process
        _synchronize(use_cuda)
        t0 = time.perf_counter_ns()
        for k in range(active):
            with record_function(STEP_RANGE.format(k)):
                step()
        _synchronize(use_cuda)
        profiled_ns = time.perf_counter_ns() - t0
        _barrier(dist, use_cuda)
        meta = {
            "name": name,
            "phase": phase,
            "warmup": warmup,
            "active": active,
            "options": {"stacks": bool(stacks), "shapes": bool(shapes), "memory": bool(memory),
                        "repeats": len(timing.samples_ns)},
            "unprofiled_us": unprofiled_ns / 1000.0,
            "unprofiled_samples_us": [x / 1000.0 for x in timing.samples_ns],
            "timed_after_profiler": timing.after_profiler,
            "profiled_us": profiled_ns / 1000.0,
            "distortion": (profiled_ns / unprofiled_ns) if unprofiled_ns > 0 else None,
            "step_range": STEP_RANGE.format("k"),
            "argv": list(sys.argv),
            "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "gapscope_capture": 1,
            **env,
        }
        if extra:
            meta["workload"] = extra
        meta = _json_safe(meta)
        prof.add_metadata_json("gapscope", json.dumps(meta, ensure_ascii=True, allow_nan=False))
    except BaseException:
        _stop_quietly(prof)
        raise
    prof.stop()

    path = _export(prof, out_dir, stem, n, overwrite)
    result = CaptureResult(
        path=path,
        name=name,
        phase=phase,
        active=active,
        profiled_us=profiled_ns / 1000.0,
        unprofiled_us=unprofiled_ns / 1000.0,
        distortion=meta["distortion"] or float("nan"),
        cpu_only=not use_cuda,
        rank=rank,
        world_size=world,
        metadata=meta,
    )
    return result


class Session:
    """Several phases of one workload recorded as separate traces, each with its own warm-up.

        s = Session(name="llama", out_dir="traces")
        s.measure("prefill", prefill_step)              # optional: time every phase first,
        s.measure("decode", decode_step, active=8)      # before any profiler runs in the process
        s.phase("prefill", prefill_step)
        s.phase("decode", decode_step, active=8)
        for r in s.results: print(r.line())
    """

    def __init__(self, name: str, out_dir: str = "traces", **defaults: Any):
        self.name = name
        self.out_dir = out_dir
        self.defaults = defaults
        self.results: list[CaptureResult] = []
        self.timings: dict[str | None, Timing] = {}

    _MEASURE_KEYS = ("warmup", "active", "repeats", "cuda")

    def measure(self, phase: str | None, step: Callable[[], Any], **options: Any) -> Timing:
        """Warm up and time ``phase`` now; its ``phase()`` call later uses this timing."""
        kw = {**self.defaults, **options}
        t = measure(step, **{k: v for k, v in kw.items() if k in self._MEASURE_KEYS})
        self.timings[phase] = t
        return t

    def phase(self, phase: str | None, step: Callable[[], Any], **options: Any) -> CaptureResult:
        kw = {**self.defaults, **options}
        t = self.timings.pop(phase, None)
        if t is not None and "timing" not in kw and t.active == int(kw.get("active", 1)):
            kw["timing"] = t
        r = record(step, name=self.name, out_dir=self.out_dir, phase=phase, **kw)
        self.results.append(r)
        return r
