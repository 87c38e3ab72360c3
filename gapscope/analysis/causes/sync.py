"""``sync``: the launching thread was inside a synchronising call when the GPU ran dry (or such calls took a
fair share of the time before the next launch): the gap is the CPU's time to resubmit work."""

from __future__ import annotations

from ..names import SYNC_OPS
from ..units import fmt_ns
from . import SYNC, Cause


def rule(c):
    return (c.in_sync_at_t0 | c.sync_in_gap) & (c.thread >= 0) & ~c.queued


def gather(a, x):
    return a.stacks.stack_at(x.thr, a.evidence.sync_anchor(x.thr, x.t0, x.tl)), {}


def sync_chain(a, stack) -> list[str]:
    """The synchronising calls on a stack, outermost first (``aten::item`` → ``aten::_local_scalar_dense`` →
    ``cudaStreamSynchronize`` is one synchronisation, named by its outermost op)."""
    m = a.model
    return [f.name for f in stack if 0 <= f.event < m.n and a.cpu.sync_mask[f.event]]


def explain(a, d, tl):
    w = max(tl - d.start_ns, 0)
    nk = f"`{d.next_op or d.next_kernel}`"
    chain = sync_chain(a, d.stack)
    sig = f" in `{d.signature}`" if d.signature and d.signature not in chain else ""
    s = f"`{chain[0]}`" if chain else "a synchronising call"
    if len(chain) > 1:
        s += f" (→ {' → '.join(f'`{c}`' for c in chain[1:])})"
    sb = d.breakdown.get("sync", 0)
    part = f" ({fmt_ns(sb)} of it in synchronising calls)" if sb else ""
    if d.next_kernel == "(end of window)":
        return (f"The launching thread synchronised with the GPU in {s}{sig}; no kernel followed before the "
                f"window ended; GPU idle {fmt_ns(d.dur_ns)}.")
    return (f"The launching thread synchronised with the GPU in {s}{sig} and launched {nk} {fmt_ns(w)} after "
            f"the GPU ran dry{part}; GPU idle {fmt_ns(d.dur_ns)}.")


def advise(a, details, ev):
    m = a.model
    blocking_copy = any(a.cpu.blocking_copy[f.event] for d in details for f in d.stack if 0 <= f.event < m.n)
    item = any(n in SYNC_OPS for d in details for n in sync_chain(a, d.stack))
    parts = []
    if blocking_copy:
        parts.append("A blocking copy made the host wait for the GPU (tensor.to()/.cpu()/torch.tensor(..., device=)): "
                     "copy from pinned memory with non_blocking=True, or keep the data where it is used.")
    if item or not blocking_copy:
        parts.append(CAUSE.suggestion)
    return " ".join(parts)


CAUSE = Cause(
    name=SYNC, action="remove-syncs", order=30, letter="S", colour="red",
    summary="the launching thread was waiting in a synchronising call when the GPU ran dry; the gap is the time it "
            "took the CPU to submit new work",
    # the count is of gaps (one synchronising call can leave several; calls are counted by the fix that removes
    # them): "855 syncs" beside "remove the 856 synchronising calls" read as two counts of one thing
    title="{n} gaps after syncs{where} cost {t} of GPU idle",
    suggestion="Remove the host synchronisation: avoid .item()/.cpu()/.tolist()/printing GPU values in the loop, keep "
               "the decision on the GPU (torch.where, sampling on device), or read the value one step later.",
    rule=rule, gather=gather, explain=explain, advise=advise, by_frame=True,
)
