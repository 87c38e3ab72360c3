"""``gapscope capture`` / ``python -m capture``: record traces from the command line.

    gapscope capture demo [--phase prefill|decode|both] [--mode eager|graph|compile] [--inject CAUSE]
                          [--size tiny|small|full] [--out DIR] [--no-stacks] [--ranks [--late-rank R]]
                          [--dist-timeout S]
    gapscope capture run MODULE:FUNC [--out DIR] [--name NAME] ...

Errors are one line, ``gapscope: error: ...``, exit status 2. Only torch and the standard library are used.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from typing import Any

from .recorder import PROFILER_WARMUP, CaptureError

EPILOG = """\
examples:
  gapscope capture demo --phase both --out traces            prefill and decode of the demo model
  gapscope capture demo --phase decode --inject sync          decode with a .item() in every layer
  gapscope capture demo --mode graph --phase decode           decode replayed from a CUDA graph (and its eager
                                                             reference run, for the replayed kernels' ops)
  torchrun --nproc-per-node 2 -m capture demo --ranks --late-rank 1   two tensor-parallel ranks, one late
  gapscope capture run mypkg.bench:make_steps --active 4     FUNC returns a step or {phase: step}; a step
                                                             that replays CUDA graphs may carry
                                                             step.gapscope_reference, its eager run

traces are written as DIR/NAME[.PHASE][.rankR].json.gz; an existing file is never replaced
(the next free name NAME....1.json.gz is used) unless --overwrite is given.
"""


# Seconds a rank waits for the others in a collective (barrier, file-name agreement) before it fails.
# torch's defaults (10 min for NCCL, 30 min for gloo) make a rank whose peer failed look hung.
DEFAULT_DIST_TIMEOUT = 300.0
# Un-profiled timing: at least DEFAULT_ROUNDS interleaved rounds, more while DEFAULT_BUDGET_S lasts. On a
# shared GPU node the host drifts (an eager decode step ranged 7.7-15.1 ms within 40 rounds on our H200),
# so a median of 3 timings of one phase said little.
DEFAULT_ROUNDS = 5
DEFAULT_BUDGET_S = 5.0
DEFAULT_MAX_ROUNDS = 50


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse API
        raise CaptureError(message)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="traces", metavar="DIR", help="output folder (default: traces)")
    p.add_argument("--name", default=None, help="file name stem (default: from the workload)")
    p.add_argument("--warmup", type=int, default=3, metavar="N", help="un-profiled warm-up calls per phase (default 3)")
    p.add_argument("--active", type=int, default=None, metavar="N",
                   help="profiled calls per phase (default: 1 for prefill, 4 for decode, 1 otherwise)")
    p.add_argument("--profiler-warmup", type=int, default=PROFILER_WARMUP, metavar="N",
                   help="profiled steps run before the measured window and left out of it: the profiler's own "
                        f"start-up cost lands there (default {PROFILER_WARMUP})")
    p.add_argument("--repeats", type=int, default=DEFAULT_ROUNDS, metavar="N",
                   help="at least N rounds of un-profiled timing, every phase once per round, interleaved "
                        f"(default {DEFAULT_ROUNDS}); min, p25, median, p75, max and n go into the metadata")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="S",
                   help="more rounds while the rounds so far took less than S seconds, up to --max-rounds "
                        f"(default {DEFAULT_BUDGET_S:g}; 0: exactly --repeats rounds)")
    p.add_argument("--max-rounds", type=int, default=DEFAULT_MAX_ROUNDS, metavar="N",
                   help=f"at most N rounds of un-profiled timing (default {DEFAULT_MAX_ROUNDS})")
    p.add_argument("--no-stacks", action="store_true", help="record without Python stacks (less CPU distortion)")
    p.add_argument("--no-shapes", action="store_true", help="record without input shapes")
    p.add_argument("--no-graph-reference", action="store_true",
                   help="a step that replays CUDA graphs: do not record its eager reference run "
                        "(step.gapscope_reference) after the window; without it the replayed kernels have no op, "
                        "shapes or floor")
    p.add_argument("--memory", action="store_true", help="also record allocator events (profile_memory)")
    p.add_argument("--overwrite", action="store_true", help="replace existing traces of the same name")
    p.add_argument("--cpu", action="store_true", help="run and record on the CPU even when CUDA is available")
    p.add_argument("--no-summary", action="store_true", help="several ranks: skip the combined summary")
    p.add_argument("--dist-timeout", type=float, default=DEFAULT_DIST_TIMEOUT, metavar="S",
                   help="several ranks: seconds a rank waits in a barrier for the others before it fails, e.g. when "
                        f"another rank's step raised or hangs (default {DEFAULT_DIST_TIMEOUT:g}; "
                        "raise it for long warm-ups such as torch.compile)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gapscope capture", description="Record PyTorch profiler traces the way an expert would.",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", metavar="demo|run")
    d = sub.add_parser("demo", help="record the built-in decoder-only transformer (random weights)",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    d.add_argument("--phase", choices=("prefill", "decode", "both"), default="both")
    d.add_argument("--mode", choices=("eager", "graph", "compile"), default="eager")
    d.add_argument("--inject", choices=("sync", "sampling", "copy", "alloc", "python"), default=None,
                   metavar="CAUSE", help="add one known cause of GPU idle time: sync, sampling, copy, alloc, python")
    d.add_argument("--size", choices=("tiny", "small", "full"), default=None,
                   help="model size (default: full on CUDA, tiny on CPU)")
    d.add_argument("--ranks", action="store_true", help="tensor-parallel over the ranks of torchrun (all-reduces)")
    d.add_argument("--late-rank", type=int, default=None, metavar="R", help="with --ranks: rank R does extra host work before each all-reduce")
    d.add_argument("--late-us", type=int, default=2000, metavar="N", help="microseconds of extra work on the late rank (default 2000)")
    _common(d)
    r = sub.add_parser("run", help="record the step(s) returned by MODULE:FUNC",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    r.add_argument("target", metavar="MODULE:FUNC", help="FUNC() returns a step callable or a {phase: step} mapping")
    _common(r)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except UserCodeError as exc:
        if os.environ.get("GAPSCOPE_DEBUG") and exc.__cause__ is not None:
            raise exc.__cause__
        sys.stderr.write(f"gapscope: error: {exc} (set GAPSCOPE_DEBUG=1 for the traceback)\n")
        return 2
    except CaptureError as exc:
        sys.stderr.write(f"gapscope: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("gapscope: interrupted (no trace written for the interrupted phase)\n")
        return 130


class UserCodeError(CaptureError):
    """The workload (MODULE:FUNC, or a step it returned) raised: one line, the traceback on request."""


def _user_code(what: str, fn, *args):
    try:
        return fn(*args)
    except (CaptureError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise UserCodeError(f"{what} raised {type(exc).__name__}: {exc}"[:400]) from exc


def _main(argv: list[str]) -> int:
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if argv else 2
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        raise CaptureError("capture needs torch (pip install 'gapscope[capture]')") from None
    if args.active is not None and args.active < 1:
        raise CaptureError("--active must be at least 1")
    if args.warmup < 0 or args.repeats < 1:
        raise CaptureError("--warmup must be >= 0 and --repeats >= 1")
    if args.profiler_warmup < 0:
        raise CaptureError("--profiler-warmup must be >= 0")
    if not args.budget >= 0 or args.max_rounds < 1:
        raise CaptureError("--budget must be >= 0 seconds and --max-rounds >= 1")
    if not args.dist_timeout > 0:
        raise CaptureError("--dist-timeout must be more than 0 seconds")
    if args.what == "demo":
        return _demo(args)
    return _run(args)


# ------------------------------------------------------------------------------------ distributed
def _world_from_env() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def init_distributed(cpu: bool = False, timeout_s: float = DEFAULT_DIST_TIMEOUT):
    """Initialise torch.distributed from torchrun's environment if needed; returns (rank, world) or None.

    ``timeout_s`` is the process group's timeout: a rank whose peer failed (its step raised and it did not
    exit) or hangs fails in the next barrier after that long instead of waiting for torch's default. On
    gloo the barrier raises and the CLI prints one line; on NCCL the watchdog ends the process
    (TORCH_NCCL_ASYNC_ERROR_HANDLING). Under torchrun a rank that exits also makes the agent stop the others.
    A process group initialised by the caller is used as it is.
    """
    import datetime

    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if _world_from_env() <= 1 and "RANK" not in os.environ:
        return None
    use_cuda = torch.cuda.is_available() and not cpu
    timeout = datetime.timedelta(seconds=float(timeout_s))
    if use_cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local), timeout=timeout)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def gather_summaries(results: list, out_dir: str, stem: str, *, overwrite: bool = False) -> str | None:
    """Several ranks: each summarises its own traces (if tui.analysis is importable), rank 0 writes one file.

    Returns the combined file's path on rank 0, else None. Skipped (with a note) where the analysis
    package or its dependencies are missing, as on GPU nodes with torch alone.
    """
    import json

    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    summarise = None
    try:
        from gapscope.analysis import summarise  # type: ignore[attr-defined]  # optional, see docstring
    except Exception:  # ImportError, or a dependency that fails to import
        summarise = None
    mine: dict[str, Any] = {"rank": dist.get_rank(), "traces": []}
    for r in results:
        # file names only: the combined summary sits in the same folder as the rank traces
        entry: dict[str, Any] = {"file": os.path.basename(r.path), "phase": r.phase, "distortion": r.distortion,
                                 "profiled_us": r.profiled_us, "unprofiled_us": r.unprofiled_us}
        if summarise is not None:
            try:
                entry["summary"] = summarise(r.path)
            except Exception as exc:  # the summary is a bonus; the traces are written
                entry["summary_error"] = f"{type(exc).__name__}: {exc}"[:300]
        mine["traces"].append(entry)
    if summarise is None:
        mine["note"] = "gapscope.analysis not importable here: no per-rank summary"
    gathered: list[Any] | None = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    try:
        dist.gather_object(mine, gathered, dst=0)
    except RuntimeError as exc:
        from .recorder import _collective_failed

        raise _collective_failed(dist, "gathering the summaries", exc) from exc
    if dist.get_rank() != 0:
        return None
    if summarise is None:
        sys.stderr.write("gapscope capture: gapscope.analysis is not importable here; combined summary has timings only\n")
    job = _combine(gathered)
    for line in (job or {}).get("lines", []):
        print(f"[rank 0] {line}", flush=True)
    path = os.path.join(out_dir, f"{stem}.ranks.json")
    n = 0
    while not overwrite and os.path.exists(path):
        n += 1
        path = os.path.join(out_dir, f"{stem}.ranks.{n}.json")
    doc: dict[str, Any] = {"world_size": dist.get_world_size(), "ranks": gathered}
    if job is not None:
        doc["job"] = job  # the ranks matched: late rank, waits, clocks (see tui.analysis.ranks)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gapscope-", suffix=".tmp", dir=out_dir or ".")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, default=str)
        while True:
            if overwrite:
                os.replace(tmp, path)
                break
            try:
                os.link(tmp, path)  # fails if the name appeared meanwhile: never clobber
                break
            except FileExistsError:
                n += 1
                path = os.path.join(out_dir, f"{stem}.ranks.{n}.json")
    except OSError as exc:
        sys.stderr.write(f"gapscope capture: could not write {path} ({exc.strerror or exc})\n")
        return None
    finally:
        if tmp is not None and os.path.exists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path


def _combine(gathered: list | None) -> dict | None:
    """The job seen from the gathered summaries: collectives matched across ranks, the late rank and what its CPU
    did before the launches it was late for (``tui.analysis.ranks.combine_summaries``); None without it."""
    try:
        from gapscope.analysis.ranks import combine_summaries  # type: ignore[attr-defined]  # optional, as summarise
    except Exception:
        return None
    sums = [t["summary"] for g in (gathered or []) if isinstance(g, dict)
            for t in g.get("traces", []) if isinstance(t, dict) and isinstance(t.get("summary"), dict)]
    try:
        return combine_summaries(sums)
    except Exception as exc:  # the combined view is a bonus; the traces and summaries are written
        return {"error": f"{type(exc).__name__}: {exc}"[:300], "lines": []}


# ------------------------------------------------------------------------------------------- demo
def _demo(args) -> int:
    import torch

    from . import demo as demo_mod
    from .recorder import Session

    if args.late_rank is not None and not args.ranks:
        raise CaptureError("--late-rank needs --ranks")
    use_cuda = torch.cuda.is_available() and not args.cpu
    tp_rank, tp_size = 0, 1
    if args.ranks:
        if args.mode != "eager":
            raise CaptureError("--ranks records --mode eager only")
        info = init_distributed(cpu=args.cpu, timeout_s=args.dist_timeout)
        if info is None:
            raise CaptureError("--ranks needs torchrun (or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT in the environment)")
        tp_rank, tp_size = info
        if args.late_rank is not None and not 0 <= args.late_rank < tp_size:
            raise CaptureError(f"--late-rank {args.late_rank} is not a rank of this run (0..{tp_size - 1})")
    else:
        init_distributed(cpu=args.cpu, timeout_s=args.dist_timeout)  # under torchrun without --ranks: every rank records its own copy
    size = args.size or ("full" if use_cuda else "tiny")
    device = torch.device("cuda", torch.cuda.current_device()) if use_cuda else torch.device("cpu")
    try:
        demo = demo_mod.Demo(size, args.mode, args.inject, device=device, tp_rank=tp_rank, tp_size=tp_size,
                             late_rank=args.late_rank, late_us=args.late_us)
    except ValueError as exc:
        raise CaptureError(str(exc)) from None
    name = args.name or _demo_name(args)
    extra = demo.describe()
    if args.ranks:
        extra.update({"tensor_parallel": tp_size, "late_rank": args.late_rank,
                      "late_us": args.late_us if args.late_rank is not None else None})
    s = Session(name=name, out_dir=args.out, warmup=args.warmup, stacks=not args.no_stacks,
                shapes=not args.no_shapes, memory=args.memory, overwrite=args.overwrite, cuda=use_cuda, extra=extra,
                **_timing_options(args))
    phases = ("prefill", "decode") if args.phase == "both" else (args.phase,)
    actives = {phase: args.active or (4 if phase == "decode" else 1) for phase in phases}
    # every phase is warmed up and timed, in interleaved rounds, before the first profiler session of this
    # process (see Session.measure_all); the prefill step refills the cache, so one fill_cache suffices
    demo.fill_cache()
    s.measure_all({phase: demo.step_fn(phase) for phase in phases}, actives=actives, before=demo.fill_cache)
    for phase in phases:
        demo.fill_cache()
        r = s.phase(phase, demo.step_fn(phase), active=actives[phase])
        print(r.line(), flush=True)
    if args.ranks and not args.no_summary:
        p = gather_summaries(s.results, args.out, name, overwrite=args.overwrite)
        if p:
            print(f"combined summary: {p}", flush=True)
    _finish_distributed()
    return 0


def _timing_options(args) -> dict:
    return {"repeats": args.repeats, "budget_s": args.budget or None, "max_rounds": args.max_rounds,
            "profiler_warmup": args.profiler_warmup, "graph_reference": not args.no_graph_reference}


def _demo_name(args) -> str:
    parts = ["demo", args.mode]
    if args.inject:
        parts.append(args.inject)
    if args.ranks:
        parts.append("tp")
        if args.late_rank is not None:
            parts.append(f"late{args.late_rank}")
    if args.no_stacks:
        parts.append("nostacks")
    return "-".join(parts)


def _finish_distributed() -> None:
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            # every rank done (rank 0 may still be writing the summary) before tearing the group down
            dist.barrier()
            dist.destroy_process_group()
    except Exception:
        pass


# -------------------------------------------------------------------------------------------- run
def load_target(target: str):
    """Import MODULE:FUNC and call FUNC(); returns {phase or None: step}."""
    mod_name, sep, func_name = target.partition(":")
    if not sep or not mod_name or not func_name:
        raise CaptureError(f"{target!r}: expected MODULE:FUNC, e.g. mypkg.bench:make_step")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules in the current folder are found
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise CaptureError(f"cannot import {mod_name!r}: {exc}") from None
    except Exception as exc:  # the module itself failed while importing
        raise UserCodeError(f"importing {mod_name!r} raised {type(exc).__name__}: {exc}"[:400]) from exc
    func = mod
    for part in func_name.split("."):
        func = getattr(func, part, None)
        if func is None:
            raise CaptureError(f"module {mod_name!r} has no {func_name!r}")
    if not callable(func):
        raise CaptureError(f"{target} is not callable")
    made = _user_code(target, func)
    if callable(made):
        return {None: made}
    if isinstance(made, dict) and made and all(isinstance(k, str) and callable(v) for k, v in made.items()):
        return dict(made)
    raise CaptureError(f"{target} must return a step callable or a non-empty mapping of phase name to step "
                       f"(got {type(made).__name__})")


def _run(args) -> int:
    import torch

    from .recorder import Session

    init_distributed(cpu=args.cpu, timeout_s=args.dist_timeout)
    steps = load_target(args.target)
    name = args.name or args.target.partition(":")[0].rsplit(".", 1)[-1]
    use_cuda = torch.cuda.is_available() and not args.cpu
    s = Session(name=name, out_dir=args.out, warmup=args.warmup, stacks=not args.no_stacks,
                shapes=not args.no_shapes, memory=args.memory, overwrite=args.overwrite, cuda=use_cuda,
                extra={"target": args.target}, **_timing_options(args))
    def what(phase):
        return f"the {phase + ' ' if phase else ''}step of {args.target}"

    def active(phase):
        return args.active or (4 if phase == "decode" else 1)

    # every phase is warmed up and timed, in interleaved rounds, before the first profiler session of this process
    def named(phase, step):  # a step that raises while timed is named by its phase, as in the window
        return lambda: _user_code(what(phase), step)

    s.measure_all({p: named(p, st) for p, st in steps.items()}, actives={p: active(p) for p in steps})
    for phase, step in steps.items():
        r = _user_code(what(phase), lambda: s.phase(phase, step, active=active(phase)))  # noqa: B023 - called at once
        print(r.line(), flush=True)
    if not args.no_summary:
        p = gather_summaries(s.results, args.out, name, overwrite=args.overwrite)
        if p:
            print(f"combined summary: {p}", flush=True)
    _finish_distributed()
    return 0
