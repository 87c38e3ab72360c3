"""``stall``: one thing held the gap. One runtime or driver call (a 6 ms ``cudaLaunchKernel`` loading its
module on first use, a ``cudaGraphLaunch`` uploading its graph), one op's own CPU time (a 2.4 ms ``aten::addmm``
on its first call, a custom op's host work), a compile or guard region (``Torch-Compiled Region``) or a data
loader's range took most of the CPU's part of the gap (``gaps.one_holder``; at least ``stall_min_ns``).
``launch`` is many short dispatches back to back; this is one long one, and the advice is about that thing,
not torch.compile or CUDA graphs. Its rule comes before ``python``'s, so a compile or data-loader range holding the gap is named as
such with the advice for it; a long CPU-only op (host tensor work, host-side sampling) stays ``python``'s. One Python frame holding the
gap is the ``python`` cause (it names the frame and its own time)."""

from __future__ import annotations

from ...trace.model import Kind
from ..names import STEP_ANNOTATION_RE, display_frame
from ..units import fmt_ns
from . import STALL, Cause

#: what the holder is, from its kind and name: the advice depends on it
KINDS = ("graph-launch", "driver", "compile", "loader", "op", "range")


def rule(c):
    return (c.held_ev >= 0) & (c.held_ns > c.cfg.most * c.held_of) & (c.held_ns >= c.cfg.stall_min_ns)


def holder_kind(a, e: int) -> str:
    m = a.model
    name = m.name(e)
    k = int(m.kind[e])
    if k in (int(Kind.RUNTIME), int(Kind.DRIVER)):
        return "graph-launch" if a.flags["graph_launch"][m.name_id[e]] else "driver"
    if name.startswith("Torch-Compiled Region") or "TorchDynamo" in name or "CompiledFunction" in name \
            or "torch/_dynamo" in name:
        return "compile"
    if "DataLoader" in name:
        return "loader"
    return "op" if k == int(Kind.CPU_OP) else "range"


def gather(a, x):
    g = a.gaps
    e, ns, of = a.details.holder_of(x.i)  # as the classifier found it
    m = a.model
    st = a.stacks.stack_at(x.thr, int(m.ts_ns[e]) + max(int(m.dur_ns[e]) // 2, 0)) if x.thr >= 0 else []
    # the stack down to the holder (its midpoint may fall in a short callee: not what held the CPU)
    cut = [k for k, f in enumerate(st) if f.event == e]
    st = st[:cut[0] + 1] if cut else st
    held = {"event": int(e), "name": m.name(e), "kind": holder_kind(a, e), "ns": int(ns), "of_ns": int(of),
            "launch_call": bool(e == int(g.launch_idx[x.i]))}
    return st, {"held_by": held}


def _where(a, d) -> str:
    """`aten::topk` around a runtime call: the op it ran in."""
    h = d.extra["held_by"]
    ops = [f.name for f in d.stack if f.kind == "op" and f.event != h["event"] and f.name != h["name"]
           and not STEP_ANNOTATION_RE.match(f.name)]
    return f" in `{ops[-1]}`" if ops else ""


def explain(a, d, tl):
    h = d.extra["held_by"]
    nk = f"`{d.next_op or d.next_kernel}`"
    name = f"`{display_frame(h['name'])}`"
    what = {"graph-launch": "One graph launch call", "driver": "One runtime call", "compile": "One compiled region",
            "loader": "The data loader", "op": "One op's own CPU time", "range": "One range"}[h["kind"]]
    if h["launch_call"]:
        body = (f"{what}, the launch call {name} of {nk}, ran on the CPU for {fmt_ns(h['ns'])} of the gap before "
                f"the kernel could start")
    else:
        own = " (its own time, not its callees')" if h["kind"] in ("op", "compile", "range", "loader") else ""
        body = (f"{what}, {name}{_where(a, d)}, held the CPU for {fmt_ns(h['ns'])}{own} of the "
                f"{fmt_ns(h['of_ns'])} before {nk} was launched")
    return f"{body}: one thing held the CPU, not a stream of short dispatches; GPU idle {fmt_ns(d.dur_ns)}."


def group(a, d):
    return display_frame(d.extra["held_by"]["name"])


ADVICE = {
    "driver": "A single driver call this slow is not dispatch cost: typically lazy module loading on a kernel's "
              "first launch (CUDA_MODULE_LOADING=LAZY loads each module on first use: warm the step up before "
              "measuring, or set CUDA_MODULE_LOADING=EAGER), the profiler flushing its activity buffer, or a full "
              "launch queue. torch.compile and CUDA graphs do not remove it.",
    "graph-launch": "A graph launch this slow is the graph's first replay uploading it (graph.upload(), or one "
                    "warm-up replay before the timed loop), or a replay whose graph was re-instantiated.",
    "compile": "A torch.compile region spent this time on the host: recompilation or guard evaluation "
               "(TORCH_LOGS=recompiles,guards shows which); mark changing sizes dynamic "
               "(torch._dynamo.mark_dynamic, dynamic=True) and warm up before measuring.",
    "loader": "The data loader held the training thread: more workers (num_workers), pin_memory=True, "
              "prefetch_factor, or move decoding and augmentation off the main thread.",
    "op": "One op's own CPU time, not its kernels: host work inside the op (argument checks, a CPU fallback, "
          "cuBLAS/cuDNN handle creation or algorithm search on its first call, a custom op's Python wrapper). "
          "Warm the op up before measuring, look at its inputs (CPU tensors, new shapes), or profile it with "
          "with_stack=True.",
    "range": "One record_function range held the CPU with nothing recorded below it: record with "
             "with_stack=True to see the code inside it.",
}


REPEATED = ("It held {n} gaps, so it is not only a first call: its host work runs every time (a custom op's "
            "wrapper, a CPU fallback, shape-dependent set-up): move it out of the loop or make the op cheaper on "
            "the host.")


def advise(a, details, ev):
    kinds = []
    for d in details:
        k = d.extra["held_by"]["kind"]
        if k not in kinds:
            kinds.append(k)
    s = " ".join(ADVICE[k] for k in kinds)
    n = int(ev.get("gaps") or 0)
    if n > 1 and any(k in ("op", "range", "compile", "driver") for k in kinds):
        s += " " + REPEATED.format(n=n)
    return s


CAUSE = Cause(
    name=STALL, action="stall", order=55, letter="T", colour="bright_red",
    summary="one call, op or range (a slow driver call, one op's own CPU time, a compile region, the data loader) "
            "held the launching thread for most of the gap: a one-off stall, not a stream of dispatches",
    title="{n} gaps each held by one `{what}` alone{where} cost {t} of GPU idle",
    suggestion=ADVICE["driver"],
    rule=rule, gather=gather, explain=explain, group=group, advise=advise,
)
