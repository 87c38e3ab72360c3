"""Record a narrow, measured profiler window around a step function.

The recipe (what an expert does by hand):

1. call ``step()`` ``warmup`` times without the profiler (compilation, allocator, cuDNN/cuBLAS autotuning,
   CUDA graph capture all happen here);
2. time ``active`` calls without the profiler: synchronise, host clock, ``active`` steps, synchronise,
   host clock. The phases of one workload are timed in interleaved rounds (prefill, decode, decode,
   prefill, prefill, ...: the order alternates), at least ``repeats`` rounds and more while a time
   budget lasts (``budget_s``, up to ``max_rounds``), because the host of a shared GPU node drifts: two
   timings minutes apart can differ 2x, and interleaving gives every phase the same drift. The metadata
   keeps every sample and their min, p25, median, p75, max and n (``unprofiled``), the distortion
   against each of them (``distortion_spread``) and a flag, ``timing_noisy``, when p75/p25 or max/min
   passes ``NOISY_IQR`` or max/min ``NOISY_RANGE``. This timing must not follow a profiler session in the same process: Kineto
   may leave CUPTI attached after ``stop()`` (it calls ``cuptiFinalize`` only where ``TEARDOWN_CUPTI``
   says so), which slows every later kernel launch. ``Session.measure_all`` therefore times every phase
   before the first window, and the metadata says ``timed_after_profiler`` when a timing did follow one;
3. start the profiler, (several ranks: barrier + synchronise *after* the profiler started on every rank),
   run ``profiler_warmup`` steps (default 1) inside a ``gapscope.profiler_warmup`` range, synchronise
   (several ranks: barrier), then run exactly ``active`` steps each inside a ``gapscope.step#k`` range with
   no synchronise between them, synchronise once at the end, (several ranks: barrier), stop. The first step
   after ``start()`` pays the profiler's own start-up: on the H200 (torch 2.11) the first layer of the first
   recorded step took 1.36 ms against 0.72 ms for the others (1.15 against 0.80 in decode; the later steps'
   first layers 0.80-0.90). That step is recorded but lies outside the measured window (window.py selects
   only ``gapscope.step#k``), so neither the analysis nor the calibration to the un-profiled time sees it;
   A step that replays CUDA graphs can carry an eager reference, ``step.gapscope_reference`` (or ``reference=``): a
   callable that runs the same work once without the graphs, launching the same kernels in the same order. The
   replay's kernels link only to their ``cudaGraphLaunch`` (CUPTI records no kernel while a graph is captured), so
   after the measured steps, before the profiler stops, the reference runs once inside a ``gapscope.graph_reference``
   range: each kernel with its op, shapes and Python stack. The analysis maps the replayed kernels onto it by order
   and name (gapscope/analysis/graphs.py). It runs after the window, so the measured steps are recorded exactly as
   without it; what it costs is in the metadata (``graph_reference``: its host time and the window's distortion);
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
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

STEP_RANGE = "gapscope.step#{}"  # record_function name of each profiled step
WARMUP_RANGE = "gapscope.profiler_warmup"  # record_function name of the profiled steps outside the window
#: record_function name of the eager reference run of a step that replays CUDA graphs (after the window)
REFERENCE_RANGE = "gapscope.graph_reference"
#: profiled steps run before the measured ones, to take the profiler's start-up cost out of the window
PROFILER_WARMUP = 1
DEFAULT_REPEATS = 3  # API default: rounds of un-profiled timing (the CLI asks for more, see cli.py)
# The un-profiled timing is flagged noisy when p75/p25 passes NOISY_IQR or max/min passes NOISY_RANGE. A
# single outlier in 50 rounds is common even on a quiet node (one H200 run: max/min 1.19-1.38 with p75/p25
# at most 1.04 on stable eager phases), so max/min needs a wider limit than the quartiles to mean anything.
NOISY_IQR = 1.15
NOISY_RANGE = 1.5


class CaptureError(Exception):
    """A problem the user can fix (bad arguments, unwritable folder); shown as one line by the CLI."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def _quartiles(xs: list) -> tuple[float, float, float]:
    """p25, median, p75 with linear interpolation between order statistics (numpy's default)."""
    v = sorted(float(x) for x in xs)
    if len(v) == 1:
        return v[0], v[0], v[0]

    def q(f: float) -> float:
        pos = f * (len(v) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (pos - lo)

    return q(0.25), q(0.5), q(0.75)


@dataclass
class Timing:
    """Un-profiled host time of ``active`` steps: every sample (in nanoseconds) and their statistics."""

    active: int
    samples_ns: list
    after_profiler: bool  # a profiler session of this module ran earlier in this process
    interleaved: tuple = ()  # phases timed in the same rounds as this one (itself included)
    budget_s: float | None = None  # the time budget the rounds ran under (None: exactly ``repeats`` rounds)

    @property
    def median_ns(self) -> float:
        return float(statistics.median(self.samples_ns))

    def stats(self) -> dict:
        """min, p25, median, p75, max (µs), n, the two spread ratios and the noisy flag."""
        p25, med, p75 = _quartiles(self.samples_ns)
        lo, hi = float(min(self.samples_ns)), float(max(self.samples_ns))
        iqr = p75 / p25 if p25 > 0 else None
        rng = hi / lo if lo > 0 else None
        return {
            "min_us": lo / 1000.0, "p25_us": p25 / 1000.0, "median_us": med / 1000.0, "p75_us": p75 / 1000.0,
            "max_us": hi / 1000.0, "n": len(self.samples_ns),
            "p75_over_p25": iqr, "max_over_min": rng,
            "noisy": bool((iqr is not None and iqr > NOISY_IQR) or (rng is not None and rng > NOISY_RANGE)),
            "interleaved": list(self.interleaved), "budget_s": self.budget_s,
        }


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
        """What was written, the distortion and the un-profiled spread; a second line when the timing is noisy."""
        who = f"[rank {self.rank}] " if self.rank is not None else ""
        u = self.metadata.get("unprofiled") if isinstance(self.metadata.get("unprofiled"), dict) else None
        spread = ""
        if u and u.get("n", 0) > 1:
            spread = f", p25-p75 {u['p25_us'] / 1000:.3f}-{u['p75_us'] / 1000:.3f} ms, n={u['n']}"
        text = (
            f"{who}wrote {self.path}  distortion {self.distortion:.2f}x "
            f"(profiled {self.profiled_us / 1000:.3f} ms vs {self.unprofiled_us / 1000:.3f} ms "
            f"un-profiled median{spread}, {self.active} step{'s' if self.active != 1 else ''})"
        )
        note = noisy_note(self.metadata)
        return text + (f"\n{who}  {note}" if note else "")


def noisy_note(meta: dict) -> str | None:
    """"times on this node vary Nx; distortion uncertain (a-b x)" when the metadata's timing is noisy."""
    u = meta.get("unprofiled") if isinstance(meta, dict) else None
    if not isinstance(u, dict) or not u.get("noisy"):
        return None
    ds = meta.get("distortion_spread") or {}
    vary = u.get("max_over_min") or 0.0
    iqr = u.get("p75_over_p25") or 0.0
    rng = ""
    if isinstance(ds.get("vs_p75"), (int, float)) and isinstance(ds.get("vs_p25"), (int, float)):
        rng = f" ({ds['vs_p75']:.2f}x-{ds['vs_p25']:.2f}x against the p75 and p25)"
    return (f"un-profiled times on this node vary {vary:.2f}x (max/min; p75/p25 {iqr:.2f}x, n={u.get('n')}); "
            f"distortion uncertain{rng}")


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


def _time_once(step: Callable[[], Any], active: int, use_cuda: bool, dist) -> int:
    """Host time in ns of ``active`` un-profiled steps (synchronise at each end only)."""
    _barrier(dist, use_cuda)
    _synchronize(use_cuda)
    t0 = time.perf_counter_ns()
    for _k in range(active):
        step()
    _synchronize(use_cuda)
    return time.perf_counter_ns() - t0


def _time_steps(step: Callable[[], Any], active: int, use_cuda: bool, dist, repeats: int) -> list:
    """Host times in ns of ``repeats`` runs of ``active`` un-profiled steps (synchronise at each end only)."""
    samples = [_time_once(step, active, use_cuda, dist) for _ in range(max(1, repeats))]
    _barrier(dist, use_cuda)
    return samples


def _agree_stop(dist, stop: bool) -> bool:
    """Several ranks: rank 0's decision to stop the rounds, so that every rank times the same rounds."""
    if dist is None or dist.get_world_size() == 1:
        return stop
    box = [bool(stop)]
    try:
        dist.broadcast_object_list(box, src=0)
    except RuntimeError as exc:
        raise _collective_failed(dist, "agreeing on the timing rounds", exc) from exc
    return bool(box[0])


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
    budget_s: float | None = None,
    max_rounds: int | None = None,
) -> Timing:
    """Warm up and time ``active`` un-profiled calls of ``step``: ``repeats`` rounds, more within ``budget_s``.

    Call it (or ``measure_all`` for several phases) before recording any window (``Session.measure``
    does), so that no timing follows a profiler session of this process; pass the result to
    ``record(timing=...)``.
    """
    return measure_all({None: step}, warmup=warmup, actives={None: active}, repeats=repeats, cuda=cuda,
                       budget_s=budget_s, max_rounds=max_rounds)[None]


def measure_all(
    steps: dict,
    *,
    warmup: int = 3,
    actives: dict | None = None,
    repeats: int = DEFAULT_REPEATS,
    cuda: bool | None = None,
    budget_s: float | None = None,
    max_rounds: int | None = None,
    before: Callable[[], Any] | None = None,
) -> dict:
    """Time several phases of one workload in interleaved rounds; returns {phase: Timing}.

    ``steps`` is {phase: step}; ``actives`` {phase: steps per sample} (default 1). Each phase is warmed up
    (``warmup`` calls), then every round times each phase once, the order reversed every other round
    (a, b, b, a, a, b, ...) so that neither phase always follows the other. At least ``repeats`` rounds
    run; with ``budget_s`` more follow until that many seconds of rounds have passed or ``max_rounds``
    (default 10 x ``repeats``, at least 50) is reached. ``before()`` runs once after the warm-ups (the
    demo fills its KV cache there). Several ranks time the same rounds (rank 0 decides when to stop).
    """
    if not steps:
        raise CaptureError("nothing to time: no steps given")
    for ph, st in steps.items():
        if not callable(st):
            raise CaptureError(f"step{' for ' + repr(ph) if ph is not None else ''} is not callable "
                               f"(got {type(st).__name__})")
    actives = {ph: _check_counts((actives or {}).get(ph, 1), warmup)[0] for ph in steps}
    warmup = _check_counts(1, warmup)[1]
    repeats = max(1, int(repeats))
    if budget_s is not None and budget_s <= 0:
        budget_s = None
    if max_rounds is None:
        max_rounds = max(50, 10 * repeats) if budget_s is not None else repeats
    max_rounds = max(repeats, int(max_rounds))
    use_cuda = _use_cuda(cuda)
    dist = _dist()
    for st in steps.values():
        for _ in range(warmup):
            st()
    if before is not None:
        before()
    _synchronize(use_cuda)
    order = list(steps)
    samples: dict[Any, list] = {ph: [] for ph in order}
    t_start = time.monotonic()
    rounds = 0
    while True:
        seq = order if rounds % 2 == 0 else order[::-1]
        for ph in seq:
            samples[ph].append(_time_once(steps[ph], actives[ph], use_cuda, dist))
        rounds += 1
        if rounds >= max_rounds:
            break
        if rounds >= repeats:
            stop = budget_s is None or time.monotonic() - t_start >= budget_s
            if _agree_stop(dist, stop):
                break
    _barrier(dist, use_cuda)
    after = _PROFILER_SESSIONS[0] > 0
    phases = tuple(str(p) for p in order if p is not None) if len(order) > 1 else ()
    return {ph: Timing(active=actives[ph], samples_ns=samples[ph], after_profiler=after, interleaved=phases,
                       budget_s=budget_s) for ph in order}


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
    budget_s: float | None = None,
    max_rounds: int | None = None,
    profiler_warmup: int = PROFILER_WARMUP,
    reference: Callable[[], Any] | None = None,
    graph_reference: bool = True,
) -> CaptureResult:
    """Warm up, time, and record exactly ``active`` calls of ``step`` into one gzip'd trace.

    ``cuda=None`` records CUDA activity when a CUDA device is available; without one only CPU activity
    is recorded, and the metadata (``cpu_only``) and stderr say so. ``extra`` is stored in the trace
    metadata under ``workload``. Exceptions (KeyboardInterrupt too) raised by ``step`` stop the profiler
    and propagate; no file is written then. ``timing`` (from ``measure`` with the same ``active``) is used
    instead of timing here; the ``warmup`` calls still run right before the window. ``reference`` (default: the
    step's ``gapscope_reference`` attribute) is the eager run of a step that replays CUDA graphs, recorded once
    after the window (the module's docstring); ``graph_reference=False`` leaves it out.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if not callable(step):
        raise CaptureError(f"step for {name!r} is not callable (got {type(step).__name__})")
    active, warmup = _check_counts(active, warmup)
    if int(profiler_warmup) < 0:
        raise CaptureError(f"need profiler_warmup >= 0 (got {profiler_warmup})")
    profiler_warmup = int(profiler_warmup)
    if timing is not None and timing.active != active:
        raise CaptureError(f"timing is of {timing.active} steps but the window has {active}")
    if reference is None:
        reference = getattr(step, "gapscope_reference", None)
    if not graph_reference:
        reference = None
    if reference is not None and not callable(reference):
        raise CaptureError(f"the graph reference of {name!r} is not callable (got {type(reference).__name__})")
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
        timing = measure(step, warmup=warmup, active=active, repeats=repeats, cuda=use_cuda, budget_s=budget_s,
                         max_rounds=max_rounds)
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
    # No acc_events=True (it silenced a per-start warning): with it, stop() also parses every event into
    # Python FunctionEvents, which only the export's caller could need, costs time after the window, and
    # raised UnicodeDecodeError on a transformers generate() with stacks (torch 2.13, an event name cut
    # inside a UTF-8 character), losing the whole trace. The export reads Kineto's results directly.
    prof = profile(**kw)
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": one cycle here
        warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle.*")
        prof.start()
    _PROFILER_SESSIONS[0] += 1
    try:
        _barrier(dist, use_cuda)  # after every rank's profiler is up: start-up time differs per process
        if profiler_warmup:
            # the profiler's start-up lands in these steps, outside the measured window (see the module docstring)
            with record_function(WARMUP_RANGE):
                for _k in range(profiler_warmup):
                    step()
            _synchronize(use_cuda)
            _barrier(dist, use_cuda)
        _synchronize(use_cuda)
        t0 = time.perf_counter_ns()
        for k in range(active):
            with record_function(STEP_RANGE.format(k)):
                step()
        _synchronize(use_cuda)
        profiled_ns = time.perf_counter_ns() - t0
        _barrier(dist, use_cuda)
        ref_meta = None
        if reference is not None:
            # after the window: the measured steps are recorded as without it (see the module's docstring)
            t1 = time.perf_counter_ns()
            try:
                with record_function(REFERENCE_RANGE):
                    reference()
                _synchronize(use_cuda)
                ref_meta = {"range": REFERENCE_RANGE, "runs": 1, "host_us": (time.perf_counter_ns() - t1) / 1000.0,
                            "after_window": True}
            except Exception as exc:  # the window is recorded: a failing reference costs only the replays' ops
                why = f"{type(exc).__name__}: {exc}"[:300]
                ref_meta = {"range": REFERENCE_RANGE, "runs": 0, "error": why, "after_window": True}
                if not quiet:
                    sys.stderr.write(f"gapscope capture: the graph reference of {stem} raised {why}; the trace is "
                                     "written without it\n")
            _barrier(dist, use_cuda)
        ustats = timing.stats()

        def against(key: str):
            v = ustats[key] * 1000.0
            return profiled_ns / v if v > 0 else None

        meta = {
            "name": name,
            "phase": phase,
            "warmup": warmup,
            "active": active,
            "profiler_warmup": int(profiler_warmup),
            "options": {"stacks": bool(stacks), "shapes": bool(shapes), "memory": bool(memory),
                        "repeats": len(timing.samples_ns)},
            "unprofiled_us": unprofiled_ns / 1000.0,
            "unprofiled_samples_us": [x / 1000.0 for x in timing.samples_ns],
            "unprofiled": ustats,  # min/p25/median/p75/max in µs, n, spread ratios, noisy, interleaved phases
            "timing_noisy": ustats["noisy"],
            "timed_after_profiler": timing.after_profiler,
            "profiled_us": profiled_ns / 1000.0,
            "distortion": (profiled_ns / unprofiled_ns) if unprofiled_ns > 0 else None,  # against the median
            # against each statistic: vs_p75..vs_p25 is the distortion's spread, vs_min its upper bound
            "distortion_spread": {k: against(f"{k[3:]}_us") for k in ("vs_min", "vs_p25", "vs_median", "vs_p75",
                                                                      "vs_max")},
            "step_range": STEP_RANGE.format("k"),
            "graph_reference": ref_meta,
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

    _MEASURE_KEYS = ("warmup", "active", "repeats", "cuda", "budget_s", "max_rounds")

    def measure(self, phase: str | None, step: Callable[[], Any], **options: Any) -> Timing:
        """Warm up and time ``phase`` now; its ``phase()`` call later uses this timing."""
        kw = {**self.defaults, **options}
        t = measure(step, **{k: v for k, v in kw.items() if k in self._MEASURE_KEYS})
        self.timings[phase] = t
        return t

    def measure_all(self, steps: dict, actives: dict | None = None, before: Callable[[], Any] | None = None,
                    **options: Any) -> dict:
        """Warm up and time every phase of ``steps`` ({phase: step}) in interleaved rounds (``measure_all``)."""
        kw = {**self.defaults, **options}
        kw = {k: v for k, v in kw.items() if k in self._MEASURE_KEYS and k != "active"}
        ts = measure_all(steps, actives=actives, before=before, **kw)
        self.timings.update(ts)
        return ts

    def phase(self, phase: str | None, step: Callable[[], Any], **options: Any) -> CaptureResult:
        kw = {**self.defaults, **options}
        t = self.timings.pop(phase, None)
        if t is not None and "timing" not in kw and t.active == int(kw.get("active", 1)):
            kw["timing"] = t
        r = record(step, name=self.name, out_dir=self.out_dir, phase=phase, **kw)
        self.results.append(r)
        return r
