"""``allocator``: allocator calls (cudaMalloc/cudaFree/hipMalloc/empty_cache...) took a large share of the
launching thread's time before the next launch."""

from __future__ import annotations

from ..units import fmt_ns
from . import ALLOCATOR, Cause


def rule(c):
    a = c.bd["allocator"]
    return c.wpos & (a >= c.cfg.allocator_share * c.w) & (a > 0) & ~c.late


def gather(a, x):
    st = a.evidence.alloc_stack(x.thr, x.t0, x.tl) or x.launch_stack
    return st, {"issued_ops": a.evidence.ops_in(x.thr, x.t0, x.tl)}


def explain(a, d, tl):
    w = max(tl - d.start_ns, 0)
    nk = f"`{d.next_op or d.next_kernel}`"
    sig = f" in `{d.signature}`" if d.signature else ""
    return (f"Allocator calls took {fmt_ns(d.breakdown.get('allocator', 0))} of the {fmt_ns(w)} before {nk} was "
            f"launched{sig}; GPU idle {fmt_ns(d.dur_ns)}.")


CAUSE = Cause(
    name=ALLOCATOR, action="allocator", order=50, letter="A", colour="bright_magenta",
    summary="allocator calls (cudaMalloc/cudaFree/empty_cache) took a large share of the CPU time before the next "
            "launch",
    title="{n} gaps after allocator calls{where} cost {t} of GPU idle",
    suggestion="Avoid torch.cuda.empty_cache() and per-step allocations of new sizes: preallocate buffers, reuse "
               "tensors (out=), or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
    rule=rule, gather=gather, explain=explain, by_frame=True, extra_keys=("issued_ops",),
)
