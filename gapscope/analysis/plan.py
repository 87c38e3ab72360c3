"""The plan of actions: the last stage of the analysis (``build_plan(analysis, projection) -> Plan``), what the
Markdown, the JSON and the explorer render first and in one order.

A finding says what the trace shows; an action says what to change. Findings that one change fixes merge into one
action (the CUDA graph and the launch findings it removes; the sync, Python and allocator findings of one frame;
two findings with the same replayed fix). Each action states what it buys alone of the un-profiled step (the
largest of its findings' own fixes and its frame as one fused GPU call), and the plan what every action buys
together, from one replay with all of them applied (replay/together.py), never a sum of overlapping figures.

Rules (shared/design/plan.md):

- **Ranked by what the action buys.** A prerequisite (the syncs a CUDA graph cannot capture) is written inside the
  action it unlocks, with its own figure; it never leads on its own. A prerequisite worth at least the minor
  threshold alone is also an action of its own, ranked by its own figure.
- **Contained, not counted twice.** Once the step is a CUDA graph, no host work of the step runs: every host-side
  action is inside the graph action. A frame fused whole contains the frames nested in it.
- **Severity from the saving** (``ACTION_BANDS``): high >= 10% of the step, medium >= 3%, low >= 1%; below 1% an
  action is minor (severity ``info``) and folds into one line. The finding carrying an action's figure reads its
  severity; the others it fixes the band of their own figure, never above the action's; a finding no action fixes
  (not projected: a collective wait, the profiler's own work) is at most ``medium`` by its idle share, since idle
  time alone never makes a finding high.
- **One number per action**: ``Action.rank`` (1..n, minor actions after the others), the same in every rendering.

Text is data until the last moment: an action's ``change`` is a tuple of ``Span`` (prose, or a code name), which
Markdown escapes, the explorer styles and the JSON keeps apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import causes
from .findings import SEVERITIES
from .names import is_library_frame, is_user_frame, parse_frame
from .text import Span, Text, plain, spans  # noqa: F401  (Span, plain: re-exported for the front ends)
from .thresholds import (ACTION_BANDS, HEADLINE_MAX, LOOP_KERNELS_PER_CALL, MINOR_ACTION_PCT, NOT_PROJECTED_MAX_SEVERITY,
                         severity)


def _t(*parts) -> Text:
    """Spans from strings (prose) and 1-tuples (a code name): ``_t("Fuse ", (frame,), " into one call")``."""
    return spans(*parts)


@dataclass(frozen=True)
class Where:
    """Where the change goes: the frame as the trace names it, and its file, line and function when it is a Python
    frame (``path/file.py(123): func``)."""
    frame: str
    file: str | None
    line: int | None
    func: str

    @staticmethod
    def of(frame: str | None) -> "Where | None":
        if not frame:
            return None
        f, ln, fn = parse_frame(frame)
        return Where(frame, f, ln, fn)

    @property
    def loc(self) -> str:
        """``file.py:123`` of a Python frame, else the frame's name."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}" if self.file and self.line is not None else self.frame

    @property
    def short(self) -> str:
        """``func`` (``file.py:123``) of a Python frame, else the frame's name: what fits a narrow header."""
        if self.file and self.line is not None:
            return f"{self.func} ({self.file.rsplit('/', 1)[-1]}:{self.line})"
        return self.frame


@dataclass(frozen=True)
class Step:
    """A prerequisite inside an action: what to change first, where, what it buys alone (per step, ns; None: not
    projected) and its findings; ``action``: its own rank when it is also an action of its own."""
    change: Text
    where: Where | None
    saving_ns: int | None
    saving_pct: float | None
    findings: tuple[str, ...]
    action: int | None = None


@dataclass(frozen=True)
class Action:
    rank: int
    kind: str  # a key of ACTION_KINDS
    change: Text
    where: Where | None
    saving_ns: int  # per step, what it buys alone
    saving_pct: float
    severity: str
    minor: bool
    findings: tuple[str, ...]  # the ids of the findings it fixes, the one whose figure it carries first
    fix: str  # how the figure was measured: the fix replayed (the evidence, not the advice)
    needs: tuple[Step, ...] = ()
    #: the rank of the action that contains this one (a CUDA graph contains the host work of the step; a frame
    #: fused whole contains the frames inside it): its saving is part of that action's, not added to it
    inside: int | None = None
    #: the ranks of the actions this one is a prerequisite of
    unlocks: tuple[int, ...] = ()
    gap_rows: tuple[int, ...] = ()  # the gaps of its findings (the explorer's drill-down)
    kernels: int = 0  # the kernels its kernel fix changes (an op pattern)
    #: the change in a few words, verb first, with where it goes and what it needs first (``headline``): what a
    #: narrow header shows instead of ``change``
    headline: Text = ()


@dataclass(frozen=True)
class Plan:
    """The ranked actions (``actions``, minor ones last, ``rank`` 1..n), what all of them buy together (``saving_ns``,
    per step, one replay), the step they are measured against (``baseline_ns``), whether the figures are in
    un-profiled time (``calibrated``), each finding's action (``rank_of``) and severity (``severity_of``), and the
    findings no action fixes (``unplanned``, in the findings' order)."""
    actions: tuple[Action, ...] = ()
    saving_ns: int = 0
    saving_pct: float = 0.0
    baseline_ns: int = 0
    calibrated: bool = False
    rank_of: dict = field(default_factory=dict)
    severity_of: dict = field(default_factory=dict)
    unplanned: tuple[str, ...] = ()

    @property
    def major(self) -> tuple[Action, ...]:
        return tuple(x for x in self.actions if not x.minor)

    @property
    def minor(self) -> tuple[Action, ...]:
        return tuple(x for x in self.actions if x.minor)

    @property
    def top(self) -> Action | None:
        return self.actions[0] if self.actions and not self.actions[0].minor else None

    def action(self, rank: int | None) -> Action | None:
        return self.actions[rank - 1] if rank is not None and 1 <= rank <= len(self.actions) else None

    def ordered_findings(self, findings: list) -> list:
        """``findings`` in plan order: by their action's rank (the finding carrying the figure first), then those no
        action fixes, in their own order."""
        pos = {fid: (a.rank, k) for a in self.actions for k, fid in enumerate(a.findings)}
        n = len(self.actions) + 1
        return sorted(findings, key=lambda f: pos.get(f.id, (n, 0)))


# ----------------------------------------------------------------------------------------------- the action kinds
@dataclass(frozen=True)
class ActionKind:
    """One kind of change: its name, whether a CUDA graph of the step contains it (``host``: host work a replay no
    longer runs; not a pageable copy or a host round trip, which a graph cannot capture), and the change in the
    field's words (``change(frame, finding)`` -> Text)."""
    name: str
    host: bool
    change: object


def _frame_text(verb, rest, alone):
    """``verb`` `frame` ``rest``; without a frame, ``alone``."""
    return lambda fr, f: _t(verb, (fr,), rest) if fr else _t(alone)


def _graph_change(fr, f):
    return _t("Capture the step as a CUDA graph (", ("torch.compile(mode=\"reduce-overhead\")",), " or ",
              ("torch.cuda.graph",), ")")


def _sync_change(fr, f):
    n = int((f.evidence or {}).get("gaps") or 0)
    what = f" ({n} gaps after syncs)" if n > 1 else " (1 gap after a sync)" if n == 1 else ""
    if fr:
        return _t("Stop reading GPU values on the host in ", (fr,), f"{what}: keep the decision on the GPU or read "
                  "the value a step later")
    return _t(f"Remove the synchronising calls{what}: keep the decision on the GPU or read the value a step later")


def _pattern_change(fr, f):
    ev = f.evidence or {}
    kind = ev.get("pattern")
    if kind == "fp32-matmul":
        rec = next((x for x in ev.get("fixes") or [] if x.get("recommended")), None)
        if rec is not None and rec.get("fix") == "tf32":
            return _t("Enable TF32 for the fp32 matmuls (", ("torch.backends.cuda.matmul.allow_tf32 = True",),
                      ") or run them in bf16")
        return _t("Run the fp32 matmuls in bf16 (", ("model.to(torch.bfloat16)",), " or ",
                  ("torch.autocast(\"cuda\", dtype=torch.bfloat16)",), ") or enable TF32")
    if kind == "eager-attention":
        return _t("Use fused attention (", ("scaled_dot_product_attention",), ", ", ("attn_implementation=\"sdpa\"",),
                  ") instead of materialising the score matrix")
    if kind == "unaligned-matmul":
        return _t("Pad the matmul dimensions to a multiple of 8 so cuBLAS picks tensor-core kernels")
    if kind == "copies":
        wc = ev.get("weight_casts") or {}
        if wc.get("most"):  # most of the bytes copied are autocast's casts of fp32 weights (patterns.py)
            to = wc.get("to") or "bf16"
            dt = "torch.float16" if to == "fp16" else "torch.bfloat16"
            return _t(f"Cast the model to {to} once (", (f"model.to({dt})",), f"): autocast casts the fp32 weights to "
                      f"{to} on every forward")
        key = _weight_copy(ev)
        wt = ev.get(key) or {}
        where = wt.get("frames") or []
        at = (" in ", (where[0],)) if len(where) == 1 else ()
        if key == "weight_transposes":
            return _t("The weight is transposed and copied on every call: store it transposed once (", ("w.t()",),
                      *at, " made once at load time instead of ", (".t().contiguous()",), " in the forward)")
        if key == "weight_recasts":
            to = wt.get("to") or "bf16"
            dt = "torch.float16" if to == "fp16" else "torch.bfloat16"
            return _t(f"The weight is cast to {to} on every call", *at, f": store it in {to} once (",
                      (f"model.to({dt})",), ")")
        if key == "weight_clones":
            return _t("The weight is copied on every call", *at, ": use it as it is (drop the ",
                      (".contiguous()",), "/", (".clone()",), ")")
        return _t("Keep one dtype and layout: the step converts or copies large tensors on every call")
    if kind == "optimizer":
        return _t("Use the multi-tensor optimizer (", ("foreach=True",), " or ", ("fused=True",), ")")
    if kind == "tiny-kernel-loop":
        loop = ev.get("frame") or fr
        return _t("Vectorise the loop in ", (loop,), ": one batched op over all items instead of small kernels "
                  "per item") if loop else _t("Vectorise the loop: one batched op instead of small kernels per item")
    return _t(f.title)


def _weight_copy(ev: dict) -> str | None:
    """Of a copies finding's user copies of weights (patterns.py: transposed, cast, copied as they are on every
    call), the evidence key of the one that moves the most bytes, or None."""
    keys = [k for k in ("weight_transposes", "weight_recasts", "weight_clones") if ev.get(k)]
    return max(keys, key=lambda k: int(ev[k].get("bytes") or 0), default=None)


#: an action's change in a few words, per kind ("{w}": where it goes, ``Where.short``; "{l}": ``Where.loc``); the op
#: patterns by pattern
SHORT = {
    "cuda-graph": "CUDA-graph the step",
    "fuse-frame": "Fuse {w} into one GPU call",
    "remove-syncs": "Stop the host reads of GPU values in {w}",
    "host-work": "Move the host work in {w} out of the step",
    "allocator": "Stop re-allocating GPU memory in {w}",
    "pinned-copy": "Pin the input and copy it non_blocking at {l}",
    "round-trip": "Keep the round trip in {w} on the GPU",
    "host-reads": "Keep the decisions in {w} on the GPU",
    "stall": "Warm up the stall in {w}",
    "vectorise-frame": "Vectorise {w}",
    "user-sync": "Drop the synchronisations in {w}",
    "gil-thread": "Move the other thread's Python off this process",
    "autotune": "Fix the input shapes: the autotuner tries each new one",
}
SHORT_PATTERN = {
    "fp32-matmul": "Run the fp32 matmuls in bf16 (or TF32)",
    "eager-attention": "Use fused attention (sdpa)",
    "unaligned-matmul": "Pad the matmul dimensions to multiples of 8",
    "copies": "Stop converting and copying large tensors every call",
    "optimizer": "Use the multi-tensor optimizer (foreach / fused)",
    "tiny-kernel-loop": "Vectorise the loop in {w}",
}
#: the copies pattern's headline when the user's own copies of weights lead it (``_weight_copy``)
WEIGHT_COPY_SHORT = {
    "weight_transposes": "Store the weights transposed once",
    "weight_recasts": "Store the weights in {to} once",
    "weight_clones": "Use the weights as they are: no copy per call",
}


def headline(kind: str, where: "Where | None", lead, needs=()) -> Text:
    """The change in a few words (``SHORT``), verb first, where it goes, and for a CUDA graph what it needs first."""
    ev = (lead.evidence or {}) if lead is not None else {}
    text = SHORT.get(kind, "")
    if kind in ("kernels", "vectorise-loop"):
        pat = ev.get("pattern")
        text = SHORT_PATTERN.get(pat, "")
        if pat == "fp32-matmul" and any(x.get("recommended") and x.get("fix") == "tf32" for x in ev.get("fixes") or []):
            text = "Enable TF32 for the fp32 matmuls"
        if pat == "copies" and (ev.get("weight_casts") or {}).get("most"):
            text = f"Cast the model to {(ev.get('weight_casts') or {}).get('to') or 'bf16'} once"
        elif pat == "copies" and _weight_copy(ev):
            text = WEIGHT_COPY_SHORT[_weight_copy(ev)].format(to=ev.get("weight_recasts", {}).get("to") or "bf16")
        if pat == "tiny-kernel-loop" and ev.get("frame"):
            where = Where.of(ev["frame"])
    if not text:
        return ()
    w = (where.loc if "{l}" in text else where.short) if where is not None else None
    text = text.replace("{l}", "{w}")
    if w is not None and len(text) - 3 + len(w) > HEADLINE_MAX:  # a long function name: its file and line only
        w = where.loc
    if "{w}" in text:
        head, _, tail = text.partition("{w}")
        out = _t(head, (w,), tail) if w else _t(head.removesuffix(" in ").removesuffix(" at ").rstrip() + tail)
    else:
        out = _t(text)
    firsts = [n for n in needs if n.where is not None]
    if kind == "cuda-graph" and firsts:
        more = f" (+{len(firsts) - 1} more)" if len(firsts) > 1 else ""
        out = out + _t(", after the syncs at ", (firsts[0].where.loc,), more)
    return out


#: every kind of action, looked up by name (``Action.kind``); the order is not a ranking
ACTION_KINDS = {k.name: k for k in (
    ActionKind("cuda-graph", False, _graph_change),
    ActionKind("fuse-frame", True, _frame_text("Fuse ", " into one GPU call (torch.compile it, or a fused op): its "
                                               "host time out, its kernels kept", "Fuse the step's host work")),
    ActionKind("remove-syncs", True, _sync_change),
    ActionKind("host-work", True, _frame_text("Move the host work in ", " out of the step (precompute, cache, or "
                                              "vectorise it on the GPU)", "Move the host work out of the step "
                                              "(precompute, cache, or vectorise it on the GPU)")),
    ActionKind("allocator", True, _frame_text("Stop freeing and re-allocating GPU memory in ", " (no "
                                              "torch.cuda.empty_cache() in the step; allocate once and reuse)",
                                              "Stop freeing and re-allocating GPU memory in the step (no "
                                              "torch.cuda.empty_cache(); allocate once and reuse)")),
    ActionKind("pinned-copy", False, lambda fr, f: _t("Pin the host buffer once (", ("tensor.pin_memory()",),
                                                     ") and copy it with ", ("non_blocking=True",),
                                                     *((" in ", (fr,)) if fr else ()))),
    ActionKind("round-trip", False, _frame_text("Keep the host round trip in ", " on the GPU (decide or sample on the "
                                               "device and feed the result straight back)", "Keep the host round "
                                               "trip on the GPU (decide or sample on the device)")),
    ActionKind("host-reads", False, _frame_text("Keep the work in ", " on the GPU: it reads GPU values on the host, "
                                                "which a CUDA graph cannot capture (decide on the device)",
                                                "Keep the step's decisions on the GPU: a CUDA graph cannot capture a "
                                                "host read of a GPU value")),
    ActionKind("stall", True, _frame_text("Take the one-off stall in ", " out of the step (warm it up first)",
                                          "Take the one-off stalls out of the step (warm up first)")),
    ActionKind("vectorise-frame", True, _frame_text("Vectorise ", ": one batched op over all items instead of a "
                                                    "Python loop launching small kernels one by one",
                                                    "Vectorise the loop: one batched op over all items")),
    ActionKind("kernels", False, _pattern_change),
    ActionKind("vectorise-loop", True, _pattern_change),
    # a CUDA graph contains none of these: a synchronisation cannot be captured, another thread keeps the GIL whatever
    # the launching thread issues, and an autotuner's trials run before a graph could be recorded
    ActionKind("user-sync", False, lambda fr, f: _user_sync_change(fr, f)),
    ActionKind("gil-thread", False, lambda fr, f: _gil_change(fr, f)),
    ActionKind("autotune", False, lambda fr, f: _autotune_change(fr, f)),
)}


def _often(ev: dict) -> tuple:
    """Spans for how often a ``user-sync`` finding's code synchronises: "twice per call of `forward` (16 times per
    step)"."""
    from .causes.user_sync import sync_words

    us = ev.get("user_sync") or {}
    often, _ = sync_words(ev)
    mark = f"`{us.get('caller')}`"
    if us.get("caller") and mark in often:
        head, _, tail = often.partition(mark)
        return (head, (us["caller"],), tail)
    return (often,)


def _user_sync_change(fr, f):
    ev = f.evidence or {}
    us = ev.get("user_sync") or {}
    where = (" in ", (fr,)) if fr else ()
    if us.get("timer"):
        return _t("Your timer", *where, " synchronises ", *_often(ev), ": drop it or time with CUDA events ("
                  , ("torch.cuda.Event(enable_timing=True)",), ") without synchronising")
    return _t("Your code", *where, " synchronises with the GPU ", *_often(ev), ": remove the synchronisation (",
              ("torch.cuda.synchronize()",), ") or wait on an event only where the host needs the result")


def _gil_change(fr, f):
    from .causes.gil import holder_of

    h = holder_of(f) or {}
    tid = h.get("tid", (f.evidence or {}).get("kind"))
    frames = h.get("frames") or []
    if frames and fr:
        what = (" (", (frames[0]["name"],), " from ", (fr,), ")")
    elif frames or fr:
        what = (" (", (frames[0]["name"] if frames else fr,), ")")
    else:
        what = ()
    share = f" for {h['window_share_pct']:.0f}% of the window" if h.get("window_share_pct") is not None else ""
    return _t(f"Move thread {tid}'s Python work off the process that feeds the GPU", *what,
              f": the launching thread waited for the GIL while it ran Python{share}")


def _autotune_change(fr, f):
    from .causes.autotune import tune_words

    ev = f.evidence or {}
    kind = (ev.get("autotune") or {}).get("kind") or ev.get("kind")
    words = tune_words(ev)
    if kind in ("cuDNN", None):
        return _t(words, ": fix the shapes (pad or bucket) or turn benchmark off (",
                  ("torch.backends.cudnn.benchmark = False",), ")")
    if kind == "MIOpen":
        return _t(words, ": fix the shapes (pad or bucket) or use MIOpen's fast find mode (",
                  ("MIOPEN_FIND_MODE=FAST",), ")")
    return _t(words, ": warm every shape up before the timed steps, cache the tuning, or mark the changing sizes "
              "dynamic")

def _own_kind(f) -> str | None:
    """The kind of a finding's own fix: a host round trip's, an op pattern's, else its cause's (the registry's
    ``Cause.action``)."""
    ev = f.evidence or {}
    if ev.get("pattern") == "round-trip":
        return "round-trip"
    if f.cause == "pattern":
        return "vectorise-loop" if ev.get("pattern") == "tiny-kernel-loop" else "kernels"
    c = next((c for c in causes.all_causes() if c.name == f.cause), None)
    return c.action if c is not None else None


def need_text(f) -> Text:
    """A prerequisite in a few words ("remove the 32 host reads of GPU values in `frame`"): the action it sits in
    says why."""
    ev = f.evidence or {}
    fr = ev.get("frame")
    at = ((" in ", (fr,)) if fr else ())
    if f.cause == causes.SYNC:
        n = int(ev.get("gaps") or 0)
        return _t(f"remove the host reads of GPU values ({n} sync{'s' if n != 1 else ''})" if n else
                  "remove the host reads of GPU values", *at)
    if ev.get("pattern") == "tiny-kernel-loop":
        return _t("vectorise the loop", *at)
    if ev.get("pattern") == "round-trip":
        return _t("keep the round trip on the GPU", *at)
    if _own_kind(f) == "user-sync":  # a CUDA graph cannot capture a synchronisation either
        n = (ev.get("user_sync") or {}).get("per_step")
        return _t(f"drop the {n:g} synchronisation{'' if n == 1 else 's'} per step" if n else
                  "drop the synchronisations", *at)
    if _own_kind(f) == "autotune":  # nor an autotuner's trials for a shape it has not seen
        kind = (ev.get("autotune") or {}).get("kind")
        who = f"{kind}'s" if kind else "the autotuner's"
        return _t(f"stop {who} trials in the step (fix the input shapes)")
    # a prerequisite of a CUDA graph is one for the host reads of GPU values under its frame (replay/fixes.py
    # ``graph_needs``), whatever the finding's own cause
    return _t("remove the host reads of GPU values", *at)


# ----------------------------------------------------------------------------------------------------- building
@dataclass
class _Draft:
    kind: str
    frame: str | None
    lead: object  # the finding whose change it is
    saving_ns: int
    fix: str
    findings: list
    fused: str | None = None  # the frame fused whole, when that is the figure
    needs: list = field(default_factory=list)


def _pct(ns, base) -> float:
    return 100.0 * ns / base if base > 0 else 0.0


def action_severity(pct: float) -> str:
    """The severity of an action that buys ``pct`` % of the step (``ACTION_BANDS``); below the last band: info."""
    for lowest, name in ACTION_BANDS:
        if pct >= lowest:
            return name
    return "info"


def build_plan(a, pj) -> Plan:
    """The plan of analysis ``a`` from its projection ``pj`` (replay/__init__.py ``project``): its findings merged
    into actions, ranked, with what they buy together. An empty plan without a projected step."""
    findings = list(a.findings)
    if pj is None or pj.baseline_ns <= 0 or not findings:
        return _unplanned_only(a, findings, pj)
    base = pj.baseline_ns
    by_id = {f.id: f for f in findings}
    sv = pj.saving_ns
    drafts: list[_Draft] = []
    used: set[str] = set()
    # 1. the step as one CUDA graph, with the launch findings it removes and the fixes it needs first
    g = pj.graph_owner
    graph = None
    if g is not None and (sv.get(g) or 0) > 0 and g in by_id:  # a graph that buys nothing is no action
        launch = [f for f in findings if f.cause == causes.LAUNCH]
        graph = _Draft("cuda-graph", None, by_id[g], int(sv[g]), pj.what.get(g, ""),
                       [by_id[g]] + [f for f in launch if f.id != g])
        used |= {f.id for f in graph.findings}
        for grp in pj.after.get(g, []):
            members = [by_id[d] for d in grp if d in by_id]
            if members:
                first = max(members, key=lambda f: (pj.best_ns(f.id) or 0, -findings.index(f)))
                graph.needs.append(first)
        drafts.append(graph)
    # 2. every other finding with a fix: grouped by the frame the change goes to; the same fix twice is one
    groups: dict[tuple, list] = {}
    same_as = {fid: w[len("the same fix as "):] for fid, w in pj.what.items() if w.startswith("the same fix as ")}
    for f in findings:
        if f.id in used or f.cause == causes.LAUNCH:
            continue
        if f.id in same_as:
            continue
        fused = pj.frame_of.get(f.id) if pj.ranked_with(f.id) == f.id else None
        own = sv.get(f.id)
        if own is None and fused is None:
            continue
        ev = f.evidence or {}
        key = ("pattern", f.id) if f.cause == "pattern" and ev.get("pattern") != "tiny-kernel-loop" else \
            ("frame", fused or ev.get("frame") or f.id)
        groups.setdefault(key, []).append(f)
    for fid, twin in same_as.items():
        for key, fs in groups.items():
            if any(x.id == twin for x in fs) and fid in by_id:
                fs.append(by_id[fid])
    for key, fs in groups.items():
        drafts.append(_group_draft(key, fs, pj))
    # the user's own function fused whole because the graph needs its host reads gone: a host round trip to keep on
    # the GPU (hf-sampling.decode_host: `pick` copies the logits to the host, samples there and sends the token back)
    if graph is not None:
        prereq = {f.id for f in graph.needs}
        for d in drafts:
            if d.kind == "fuse-frame" and d.frame and not is_library_frame(d.frame) and \
                    prereq & {f.id for f in d.findings}:
                # reads that decide on the host (an .item() check): stop reading; host work on them: a round trip
                d.kind = "remove-syncs" if any(f.cause == causes.SYNC for f in d.findings) else \
                    "round-trip" if _copies_back(a, d.frame) else "host-reads"
    # library code the user does not edit (transformers, torch): once the step is a CUDA graph its host work is gone
    # with it, so fusing such a frame is no change of its own but part of the graph action (hf-penalty.decode_loop:
    # seven "fuse modeling_llama.py(364): forward" actions of -80% ahead of the user's own per-sequence loop)
    drafts = [d for d in drafts if d.saving_ns > 0]  # a fix that buys nothing is no action
    if graph is not None:
        prereq = {f.id for f in graph.needs}
        keep = []
        for d in drafts:
            if d is not graph and ACTION_KINDS[d.kind].host and d.frame and is_library_frame(d.frame) and \
                    not prereq & {f.id for f in d.findings}:
                graph.findings += d.findings
            else:
                keep.append(d)
        drafts = keep
    # 3. one action each; ranked by what it buys alone
    drafts.sort(key=lambda d: (-d.saving_ns, findings.index(d.lead)))
    rank = {id(d): k for k, d in enumerate(drafts, 1)}
    lead_rank = {f.id: rank[id(d)] for d in drafts for f in d.findings}
    # containment: host work inside the graph; a frame fused whole contains the frames nested in it
    # the innermost container is named: a frame fused whole that holds this action's frame, else the graph
    inside: dict[int, int] = {}
    nest = _nesting(a, [d for d in drafts if d.frame and ACTION_KINDS[d.kind].host], {d.frame for d in drafts if d.fused})
    for d in drafts:
        outer = next((o for o in drafts if o.fused and o.frame == nest.get(d.frame) and o is not d), None)
        if outer is not None:
            inside[id(d)] = rank[id(outer)]
        elif graph is not None and d is not graph and ACTION_KINDS[d.kind].host and \
                not {f.id for f in graph.needs} & {f.id for f in d.findings}:  # a prerequisite is not inside it
            inside[id(d)] = rank[id(graph)]
    unlocks: dict[int, list[int]] = {}
    actions = []
    for d in drafts:
        r = rank[id(d)]
        needs = []
        for f in d.needs:
            s = pj.saving_ns.get(f.id)  # its own fix; a loop with none of its own: its frame fused whole
            s = pj.best_ns(f.id) if s is None else s
            own_rank = lead_rank.get(f.id)
            if own_rank is not None:
                unlocks.setdefault(own_rank, []).append(r)
            needs.append(Step(need_text(f),
                              Where.of((f.evidence or {}).get("frame")), s, None if s is None else _pct(s, base),
                              (f.id,), own_rank))
        pct = _pct(d.saving_ns, base)
        minor = pct < MINOR_ACTION_PCT
        rows = np.concatenate([np.asarray(f.gap_rows, np.int64) for f in d.findings]) if d.findings else ()
        actions.append(Action(
            rank=r, kind=d.kind, change=_partly_graphed(d.fix) or ACTION_KINDS[d.kind].change(d.frame, d.lead),
            where=Where.of(d.frame),
            saving_ns=d.saving_ns, saving_pct=pct, severity="info" if minor else action_severity(pct), minor=minor,
            findings=tuple(f.id for f in d.findings), fix=d.fix, needs=tuple(needs), inside=inside.get(id(d)),
            gap_rows=tuple(sorted(set(np.asarray(rows, np.int64).tolist()))),
            kernels=int(sum(np.asarray(f.kernels).size for f in d.findings)),
            headline=_partly_graphed(d.fix, short=True) or headline(d.kind, Where.of(d.frame), d.lead, needs)))
    # minor actions after the others, each group by saving: the ranks are renumbered once
    order = sorted(actions, key=lambda x: (x.minor, x.rank))
    new = {x.rank: k for k, x in enumerate(order, 1)}
    unl = {new[k]: tuple(sorted({new[v] for v in vs})) for k, vs in unlocks.items()}  # two needs, one action: once
    actions = tuple(_renumber(x, new, unl.get(new[x.rank], ())) for x in order)
    together = _together(pj, actions, by_id)
    best = max((x.saving_ns for x in actions), default=0)
    together = max(together, best)
    rank_of = {fid: x.rank for x in actions for fid in x.findings}
    for fid, twin in same_as.items():
        if twin in rank_of:
            rank_of.setdefault(fid, rank_of[twin])
    # the finding carrying an action's figure reads its severity; the others it fixes, the band of their own figure
    # (their own fix, or their frame fused whole), never above the action's
    sev = {}
    for x in actions:
        top = SEVERITIES.index(x.severity)
        for k, fid in enumerate(x.findings):
            own = pj.best_ns(fid)
            band = x.severity if k == 0 or own is None else action_severity(_pct(own, base))
            sev[fid] = SEVERITIES[max(top, SEVERITIES.index(band))]
    for fid, twin in same_as.items():
        if twin in sev:
            sev.setdefault(fid, sev[twin])
    unplanned = tuple(f.id for f in findings if f.id not in rank_of)
    for f in findings:
        if f.id not in sev:
            sev[f.id] = _unplanned_severity(f)
    return Plan(actions, together, _pct(together, base), base, bool(pj.calibrated), rank_of, sev, unplanned)


def _copies_back(a, frame: str) -> bool:
    """Whether ``frame``'s calls copy a GPU value to the host and a result back (a device-to-host then a
    host-to-device copy launched under them): a host round trip (sampling on the host)."""
    from .replay.frames import frame_calls, inside_on_thread, subtree_intervals
    from ..trace.model import Kind

    m = a.model
    c = frame_calls(m, frame, a.window)
    if c.size == 0:
        return False
    s, e, t = subtree_intervals(m, c)
    cp = np.flatnonzero((m.kind == int(Kind.MEMCPY)) & (m.launch >= 0))
    if cp.size == 0:
        return False
    L = m.launch[cp]
    ok = inside_on_thread((s, e, t), m.track[L].astype(np.int64), m.ts_ns[L])
    names = {m.name(int(i)) for i in cp[ok]}
    return any("DtoH" in n or "Device -> Pageable" in n or "Device -> Pinned" in n for n in names) and \
        any("HtoD" in n for n in names)


def _partly_graphed(fix: str, short: bool = False) -> Text:
    """A CUDA graph action on a step that already replays graphs (the replayed fix says "K of its N GPU items already
    are graph nodes", replay/fixes.py): the change is to capture the rest, not to start using CUDA graphs. () else."""
    import re

    got = re.search(r"(\d+) of its (\d+) GPU items already are graph nodes", fix or "")
    if got is None:
        return ()
    k, n = int(got.group(1)), int(got.group(2))
    if short:
        return _t(f"Graph the rest of the step ({n - k} of {n} GPU items outside it)")
    return _t(f"Capture the rest of the step in the CUDA graph: {n - k} of its {n} GPU items (and the host work "
              "between them) still run outside the graph replays (move them inside the compiled or captured region)")


def _renumber(x: Action, new: dict, unlocks: tuple) -> Action:
    from dataclasses import replace

    needs = tuple(replace(s, action=new.get(s.action) if s.action is not None else None) for s in x.needs)
    return replace(x, rank=new[x.rank], inside=new.get(x.inside) if x.inside is not None else None, needs=needs,
                   unlocks=unlocks)


#: a module's forward (or its call) is a model's layer to fuse or compile, not a loop to vectorise
MODULE_CALLS = frozenset({"forward", "__call__", "_call_impl", "_wrapped_call_impl"})


def _group_draft(key, fs: list, pj) -> _Draft:
    """One action from findings fixed by one change: its figure the largest of their own fixes and of the frame
    fused whole (when one of them carries that what-if), its kind from the figure that won."""
    best_own = max(fs, key=lambda f: (pj.saving_ns.get(f.id) or 0))
    own_ns = int(pj.saving_ns.get(best_own.id) or 0)
    w = next((pj.frame_whatif(f.id) for f in fs if pj.ranked_with(f.id) == f.id and pj.frame_whatif(f.id)), None)
    loop = next((f for f in fs if (f.evidence or {}).get("pattern") == "tiny-kernel-loop"), None)
    frame = key[1] if key[0] == "frame" and isinstance(key[1], str) and key[1] not in {f.id for f in fs} else None
    if frame is None and key[0] == "frame":
        frame = (best_own.evidence or {}).get("frame")
    if loop is not None and w is not None:
        d = _Draft("vectorise-loop", w.frame, loop, max(w.saving_ns, own_ns),
                   f"`{w.frame}` as one fused GPU call (its whole host subtree out, its GPU work kept)", [], w.frame)
    elif w is not None and w.saving_ns > own_ns and is_user_frame(w.frame) and not is_library_frame(w.frame) and \
            parse_frame(w.frame)[2] not in MODULE_CALLS and w.gpu_items >= LOOP_KERNELS_PER_CALL * max(w.calls, 1):
        # the user's own function launching many small kernels per call: a loop over items (a per-sequence penalty)
        d = _Draft("vectorise-frame", w.frame, best_own, w.saving_ns,
                   f"`{w.frame}` as one fused GPU call (its whole host subtree out, its {w.gpu_items} GPU items in "
                   f"{w.calls} calls kept)", [], w.frame)
    elif w is not None and w.saving_ns > own_ns:
        d = _Draft("fuse-frame", w.frame, best_own, w.saving_ns,
                   f"`{w.frame}` as one fused GPU call (its whole host subtree out, its GPU work kept)", [], w.frame)
    else:
        d = _Draft(_own_kind(best_own) or "host-work", frame if key[0] == "frame" else None, best_own, own_ns,
                   pj.what.get(best_own.id, ""), [])
    lead = d.lead
    d.findings = [lead] + [f for f in sorted(fs, key=lambda f: -(pj.saving_ns.get(f.id) or 0)) if f is not lead]
    return d


def _nesting(a, drafts: list, fused: set) -> dict[str, str]:
    """Frame -> the innermost frame of ``fused`` (frames fused whole) other than itself whose calls contain every call
    of it (on its thread): the inner frame's figure is part of the outer one's."""
    from .replay.frames import frame_calls, inside_on_thread, subtree_intervals

    m = a.model
    frames = sorted({d.frame for d in drafts if d.frame})
    calls = {fr: frame_calls(m, fr, a.window) for fr in frames}
    out: dict[str, str] = {}
    for fr in frames:
        c = calls[fr]
        if c.size == 0:
            continue
        best, best_ns = None, None
        for other in frames:
            oc = calls[other]
            if other == fr or other not in fused or oc.size == 0:
                continue
            s, e, t = subtree_intervals(m, oc)
            thr = m.track[c].astype(np.int64)
            # each call starts inside the outer frame's calls and ends by their end ([s, e] closed at its end)
            ok = inside_on_thread((s, e, t), thr, m.ts_ns[c]) & \
                inside_on_thread((s, e + 1, t), thr, m.ts_ns[c] + m.dur_ns[c])
            ns = int((e - s).sum())
            if ok.all() and (best_ns is None or ns < best_ns):
                best, best_ns = other, ns
        if best is not None:
            out[fr] = best
    return out


def _together(pj, actions: tuple, by_id: dict) -> int:
    """What every action buys together, from one replay (replay/together.py): every finding's own fix, every frame
    fused whole that no other fused frame contains, and the step as one CUDA graph when the plan has one."""
    tg = getattr(pj, "together", None)
    if tg is None or not actions:
        return 0
    parts = [pj.parts[fid] for x in actions for fid in x.findings if fid in pj.parts]
    fused = {x.where.frame for x in actions if x.kind in ("fuse-frame", "vectorise-loop") and x.where is not None
             and x.inside is None}
    graph = any(x.kind == "cuda-graph" for x in actions)
    try:
        return tg.saving_ns(parts, sorted(fused), graph)
    except (ValueError, IndexError, KeyError):
        return 0


def _unplanned_severity(f) -> str:
    """A finding no action fixes: by its idle share, never above ``NOT_PROJECTED_MAX_SEVERITY`` (idle time alone
    never makes a finding high); the profiler's own work is information."""
    if f.cause in ("profiler", "pattern"):  # the profiler's own work; a kernel pattern whose fix was not projected
        return "info"
    cap = SEVERITIES.index(NOT_PROJECTED_MAX_SEVERITY)
    return SEVERITIES[max(cap, SEVERITIES.index(f.severity))] if f.severity in SEVERITIES else f.severity


def _unplanned_only(a, findings: list, pj) -> Plan:
    base = pj.baseline_ns if pj is not None else 0
    return Plan((), 0, 0.0, base, bool(pj is not None and pj.calibrated), {},
                {f.id: _unplanned_severity(f) for f in findings}, tuple(f.id for f in findings))


__all__ = ["ACTION_KINDS", "Action", "ActionKind", "Plan", "Span", "Step", "Where", "action_severity", "build_plan",
           "plain", "severity"]
