"""Replay of each device's dependency chain, and what a finding's fix would save (issue #14).

The model, built once from the trace (``Replay``):

* **GPU work** (kernels, copies, memsets) keeps its recorded duration. An item starts at the latest of
  (its launch call's replayed time + its launch latency) and (the end of the previous item on its stream
  + the GPU-side dispatch gap). The launch latency is the observed one (start - launch call start) for
  an item that was *not* queued behind its stream; queued (replay/model.py, ``queued_behind``): it started
  within ``QUEUED_NS`` of the previous item's end, or it was launched more than the usual launch latency
  before that end (its launch reached the GPU while the stream was busy). For a queued item, whose observed
  latency says only how long it sat in the queue, it is
  the trace's median latency of un-queued items (capped at its observed one). The dispatch gap is the
  observed one for a queued item, the median of those (capped) for the others. With these choices a
  replay of the unchanged trace reproduces every recorded start; the residual reported is what the
  host side does not reproduce.
* **Host threads.** Each thread's own time between its anchors (launch calls and synchronising calls)
  is kept as recorded, less the profiler's overhead ``c`` per recorded host event when calibrated
  (below), less what a fix removes: a replayed time is ``f(t) + shift`` where ``f`` maps recorded thread
  time to replayed time (removed intervals squeezed out, ``c`` taken off per event since the window's
  origin) and ``shift`` is what the waits replayed so far added or took away. An un-queued item's launch
  latency also loses ``c`` (the launch call's own overhead).
* **Synchronising calls** return when the GPU work they wait for ends: a call named as a sync
  (``cuda*Synchronize``, blocking ``cudaMemcpy``; see names.py) always waits; a call that may wait
  (``cudaMemcpyAsync`` from pageable memory, ``cudaFree`` and other allocator calls, ``empty_cache``)
  waits only where the trace shows it waited (it ended after the GPU work launched before it). A wait
  covers all work launched before the call on the devices its thread launches to (a stream sync is
  treated as a device sync). The call returns at ``max(replayed call start, replayed end of that work)
  + tail``, the tail being the recorded time the call took after the work ended.
* **Event waits across streams** (``cudaEventRecord`` + ``cudaStreamWaitEvent``): Kineto records these
  calls without their event or stream ids, so they cannot be paired; an item whose start the recorded
  trace shows was held up by something other than its own stream keeps that delay through its observed
  launch latency (the replay of the unchanged trace stays exact), and a fix that moves host time does
  not move it earlier.
* **Collectives** (multi-rank traces, each rank replayed alone): an NCCL kernel keeps its recorded
  duration, its wait for the peer ranks included. A fix on one rank is projected as if the others
  kept their timing.

The measured span of a device is from the window's origin (the start of the first ``gapscope.step#k``
range, else the device window's first GPU start) to the end of its last GPU item inside the analysis
window, per step. **Calibration**: when the trace carries an un-profiled time of the same steps (our
capture's metadata, ``Analysis.distortion``), the replay takes a fixed overhead ``c`` off every host
event the profiler recorded (op, Python frame, runtime call, annotation), ``c`` chosen so that the replayed
span equals the un-profiled time ("un-profiled, calibrated"). Profiler distortion is per recorded event, not
proportional: a pure-Python loop that records one frame keeps its time, a dispatch path of 20 events per
kernel loses most of it. Otherwise projections are in profiled time and host-side savings may be
overstated (the profiler inflates host time, not GPU time).

**What-if per finding** (``project``): the fix removes host intervals from the launching threads, the
trace is replayed, and the saving is baseline - projection (per step, of the slowest device):

* ``python``: the frame's own time: its intervals minus the ops, runtime calls and other user frames
  inside them (library and built-in Python called from it counts as its own);
* ``sync``: the synchronising ops (``aten::item`` ...) and calls under the frame: their wait, and the
  run-ahead the host loses in them, come back through the replay. When the frame is a check (every
  synchronising op under it is a scalar read, every call of the frame holds one, and no GPU work is
  launched in a call after its last read), a second figure removes the whole check (``with_ops_ns``): the
  frame's host time (other user frames inside it excepted) and the GPU work launched from it, i.e. the ops
  computing the value read as well. The trace cannot show that nothing else uses those ops' results
  (Kineto records no tensor identities), so the fix text says "if nothing else uses them";
* ``allocator``: the allocator calls and ``empty_cache`` under the frame, the implicit syncs in them, and the
  host work they slowed right after they returned (``cudaFree`` / ``cudaMalloc`` of large blocks leave the host's
  caches cold): the events starting within ``COLD_NS`` after a call, against the median own time of the same
  names away from every call (replay/fixes.py, ``after_effect``). On the H200 demo that was 0.5 ms per decode step
  of recorded host time, and without it the projection was 34.8% for a measured 54.2%;
* ``copy``: a pageable copy's blocking: its launch call beyond the median launch-call cost, and the sync
  calls inside the op that issued it; on the GPU the copy takes what a pinned one of the same bytes takes
  (the trace's pinned bandwidth for that direction, else ``PINNED_GBPS``);
* ``launch`` (the launch-bound finding; else the short-gaps one): "the step as one graph replay": the
  window's GPU items back to back, each after the observed graph dispatch gap (the median gap between
  nodes of one ``cudaGraphLaunch``, or ``DEFAULT_GRAPH_GAP_NS`` when the trace has no graph launch), never
  less than the device's recorded busy time, plus the GPU's waits a graph replays as well (``dependency_waits``:
  each ``gpu-wait`` gap beyond its launch call + the usual idle-device launch latency + one graph gap, at least
  ``wait_min_ns``; tracelens' sglang decode: −463.98 ms (−97.9%) before, −731.4 µs with its 463.25 ms event wait
  kept). The fix text says what stays and, where items already are graph nodes, what the graph adds; a step
  that already is one graph replay gets no graph fix. A step whose host reads GPU values (replay/fixes.py,
  ``host_reads``: ``.item()``, ``.cpu()``, ``nonzero``'s count) cannot be captured until they are gone: the fix
  text names them per frame with the findings whose fix removes them (``graph_needs``), and the finding ranks
  behind the first of each frame's (``Projection.after``, ``ranked``).

* ``user-sync``: the user's own synchronisations of the frame (usersyncs.py) with their sites and, for a timer, the
  own time of the wrapper that calls it: that dense Python is taken off at its recorded time scaled by the step's own
  un-profiled / profiled ratio, its events left counting (``Replay.removal``'s ``counted``: the one per-event
  overhead prices a path of sixty tiny frames below nothing), and the calls no longer wait. hf-timer.decode_timer:
  −7.8% projected, −8.4% measured;
* ``gil``: the blamed thread's GIL holds (gilholds.py) taken off the launching thread, less its runtime calls;
* ``autotune``: each tuning call reduced to its real run: its trial items dropped, its host time before the real run
  removed (autotuning.py).

Other causes (collective, host-idle, profiler) are not projected (``None``).

This package's entry is ``project`` (replay, calibrate, then each finding's fix). The pieces: the chain and its
run in model.py, what each fix removes in fixes.py, a frame as one fused GPU call and the host round trip in
frames.py, the steps and the calibration in calibrate.py, the ``Projection`` and ``DeviceProjection`` results in
result.py.
"""

from __future__ import annotations

import numpy as np

from .. import causes
from .calibrate import CAL_SLACK, NO_HOST, _calibrate, _steps
from .frames import attach, candidates, frame_owners, frame_task, fused_frames, round_trip_fix
from .fixes import (_action_of, _check_ops, _graph_owner, _n, _own_keep, calls_under, dependency_waits, fix_for,
                    graph_needs, host_reads, kept_wait_text)
from ..forked import run_tasks
from .model import Replay
from .result import DeviceProjection, FrameWhatIf, Projection
from .together import FixParts, Together

#: the action kinds whose findings a CUDA graph of the step needs fixed first (besides the host reads of GPU values)
GRAPH_PREREQUISITES = ("user-sync", "autotune")

#: the sub-package's entry and its results; the pieces are imported from their own modules (model, fixes, frames,
#: calibrate, result)
__all__ = ["project", "start_ahead", "frames_ahead", "Projection", "DeviceProjection", "FrameWhatIf", "NO_HOST"]


def _start(a):
    """The projection's start, which no finding decides: the replay, the steps the window holds, the recorded and
    replayed spans, the calibration to the un-profiled time and the baseline span. (replay, the ``Projection`` so far,
    and (steps, recorded, replayed, c, baseline) or None when the replay spans no GPU item)."""
    m = a.model
    r = Replay(m, a.window, a.flags)
    p = Projection(graph_gap_ns=r.graph_gap_ns, graph_gap_observed=r.graph_gap_observed)
    if not r.devices or r.items.size == 0:
        return r, p, None
    steps = _steps(a)
    p.steps = steps
    rec = r.span(r.end.astype(np.float64))
    rep = r.span(r.run())
    dist = a.distortion
    c = 0.0
    slow = max(rec, key=lambda d: rec[d]) if rec else None
    unprof_long = False
    if dist and slow is not None and dist.get("unprofiled_us") and \
            float(dist["unprofiled_us"]) * 1e3 > CAL_SLACK * rep[slow]:
        # the profiler only adds time: an un-profiled time well above the recording is not this recording's
        # (hf-llama.decode: 213.5 ms measured for a 49.7 ms recording on a loaded node); c would be 0 and the
        # projection the profiled one, so it is not called calibrated
        from ..units import fmt_ns

        unprof_long = True
        p.notes.append(f"the capture's un-profiled time ({fmt_ns(float(dist['unprofiled_us']) * 1e3 / steps)} per "
                       f"step) is longer than the profiled step ({fmt_ns(rep[slow] / steps)}): it was not measured "
                       "under the same conditions, so nothing is calibrated")
    if dist and slow is not None and dist.get("unprofiled_us") and not unprof_long:
        target = float(dist["unprofiled_us"]) * 1e3
        # the capture times the same steps with a synchronize at each end: the recorded span is that window
        c = _calibrate(r, target, slow)
        p.calibrated = True
        g = m.gapscope_meta or {}
        smp = g.get("unprofiled_samples_us")
        if isinstance(smp, list) and smp and all(isinstance(x, (int, float)) for x in smp):
            p.unprofiled_range_ns = (int(min(smp) * 1e3 / steps), int(max(smp) * 1e3 / steps))
        elif isinstance(g.get("unprofiled"), dict):
            u = g["unprofiled"]
            if isinstance(u.get("min_us"), (int, float)) and isinstance(u.get("max_us"), (int, float)):
                p.unprofiled_range_ns = (int(u["min_us"] * 1e3 / steps), int(u["max_us"] * 1e3 / steps))
    base_end = r.run(None, c) if c else None
    base = r.span(base_end) if base_end is not None else rep
    return r, p, (steps, rec, rep, c, base)


def start_ahead(a):
    """``_start`` in a forked child of a ``parallel`` analysis, ahead of the findings (core.Analysis): the replay
    pickles without the trace (replay/model.py); ``project`` puts the parent's back (its ``start``). What every frame's
    own time keeps (fixes._own_keep, once per replay) goes with it."""
    got = _start(a)
    if got[2] is not None:
        _own_keep(got[0])
    return got


def frames_ahead(a, start=None) -> dict | None:
    """The frames' what-ifs (frames.py), which need no finding, computed ahead of the findings: a forked child of a
    ``parallel`` analysis runs this while the parent builds the findings (core.Analysis). {"key": (c, baseline and
    recorded step), "frames": {frame: its ``FrameWhatIf`` or None}} for the frames that qualify before the findings
    put theirs first, or None (no GPU item to replay). ``project`` takes each frame it needs from here when the key
    is its own, and computes the others: the same code on the same data."""
    r, _, start = start if start is not None else _start(a)
    if start is None:
        return None
    steps, rec, _, c, base = start
    if not base or not rec:
        return None
    key = (c, max(base.values()) / steps, max(rec.values()) / steps)
    names = [n for n, _ in candidates(a, r, key[2])]
    return {"key": key, "frames": {n: frame_task(a, r, n, c, key[1]) for n in names}}


def project(a, start=None, ahead=None) -> Projection:
    """Replay ``a``'s trace, calibrate it to the un-profiled time when the trace has one, and project the
    saving of each finding's fix. ``start``: ``start_ahead``'s answer (a forked child's), else it is computed here;
    ``ahead``: a function giving ``frames_ahead``'s answer (the same child's) or None, asked once the findings'
    fixes are replayed."""
    m = a.model
    if start is not None:
        start[0].attach(m, a.window, a.flags)
    r, p, start = start if start is not None else _start(a)
    if start is None:
        return p
    steps, rec, rep, c, base = start
    # the graph what-if keeps the GPU's waits on dependencies the host's issuing cannot explain
    floor = r.floor()
    dw = {d: ns for d, (ns, _) in dependency_waits(a, r).items()}
    graph = r.graph(dw)
    dist = a.distortion
    for dv in r.devices:
        if dv not in rec:
            continue
        res = 100.0 * abs(rep[dv] - rec[dv]) / rec[dv] if rec[dv] > 0 else 0.0
        p.devices.append(DeviceProjection(dv, steps, rec[dv], rep[dv], base[dv], floor.get(dv, 0),
                                          graph.get(dv, 0), res, p.calibrated, c))
    if p.calibrated and p.devices and max(base.values()) > 1.01 * float(dist["unprofiled_us"]) * 1e3:
        over = 100.0 * (max(base.values()) / (float(dist["unprofiled_us"]) * 1e3) - 1)
        p.notes.append(f"the replay without any host time is still {over:.0f}% above the un-profiled time (the "
                       "profiler also slows the GPU side): the projection starts from that longer step")
    if r.items.size and a.flags["coll_kernel"][m.name_id[r.items[r.in_window]]].any():
        p.notes.append("each rank is replayed alone: collective kernels keep their recorded duration, their wait "
                       "for the other ranks included")
    if not base or not rec:  # no GPU item of the window on any device the replay spans: nothing to project
        return p
    base_step = max(base.values()) / steps
    w_step = max(dw.values(), default=0) / steps
    if w_step >= a.config.graph_wait_note_share * base_step:
        p.waits_ns = int(round(w_step))
    graph_owner = _graph_owner(a)
    # each finding's fix and each frame's fused what-if: independent replays, on two processes when the analysis
    # is ``parallel`` (forked.run_tasks; the same results), merged here in the findings' order
    rec_step = max(rec.values()) / steps
    extra = {(f.evidence or {}).get("frame") for f in a.findings} - {None}
    names = [n for n, _ in candidates(a, r, rec_step, extra)]
    frames = [lambda n=n: frame_task(a, r, n, c, base_step) for n in names]
    fixes = [lambda f=f: _finding_fix(a, r, f, c, base_step, graph, steps, graph_owner) for f in a.findings]
    if ahead is None:
        done = run_tasks(frames + fixes, getattr(a, "parallel", False))
        fr, done = done[:len(frames)], done[len(frames):]
    else:
        # the frames are the child's, computed while this process built the findings: the fixes here, in this
        # process (the child is still on the frames meanwhile: a second child would share the two cores three
        # ways; measured on big_100M.json, 47-52 ms for the projection with one, 43-48 ms without)
        done = [t() for t in fixes]
        got = ahead()
        known = got["frames"] if isinstance(got, dict) and got.get("key") == (c, base_step, rec_step) else {}
        fr = [known[n] if n in known else t() for n, t in zip(names, frames)]
    seen: dict[tuple, str] = {}
    for f, got in zip(a.findings, done):
        if got is None:
            p.saving_ns[f.id] = None
            continue
        kind, sv, what, sv2, parts = got
        if parts is not None:
            p.parts[f.id] = parts
        if kind == "round-trip":
            p.saving_ns[f.id] = sv
            p.what[f.id] = what
            seen[(what, sv)] = f.id
            continue
        if sv2 is not None:
            p.with_ops_ns[f.id] = sv2
        # two findings with the same fix (a copy's gaps and its pageable memory) are one saving, not two
        first = seen.get((what, sv))
        if first is not None:
            p.saving_ns[f.id] = None
            p.what[f.id] = f"the same fix as {first}"
            continue
        seen[(what, sv)] = f.id
        p.saving_ns[f.id] = sv
        p.what[f.id] = what
    # each frame that matters as one fused GPU call, and the findings whose gaps lie under one
    p.frames = fused_frames(fr)
    p.frame_of = attach(a, p.frames)
    p.frame_owner = frame_owners(a.findings, p.frame_of, p.saving_ns)
    # what several fixes buy together: one replay of them all (together.py; the plan asks)
    p.together = Together(a, r, c, base_step, steps, dw)
    # the graph fix of a step whose host reads GPU values comes after the fixes that remove those reads
    if graph_owner is not None and p.saving_ns.get(graph_owner) is not None:
        p.graph_owner = graph_owner
        reads = host_reads(a, r)
        if reads:
            text, groups = graph_needs(a, reads, p.frame_of, graph_owner)
            p.what[graph_owner] += text
            if groups:
                p.after[graph_owner] = groups
        # the user's own synchronisations (torch.cuda.synchronize() in a timer) cannot be captured either, nor an
        # autotuner's trials for shapes that change every step: each such finding is a prerequisite of its own (the
        # graph fix's text already names the synchronising calls)
        own = [[f.id] for f in a.findings if _action_of(f.cause) in GRAPH_PREREQUISITES and p.saving_ns.get(f.id)]
        if own:
            p.after.setdefault(graph_owner, []).extend(own)
    return p


def _finding_fix(a, r: Replay, f, c: float, base_step: float, graph: dict, steps: int, graph_owner):
    """What finding ``f``'s fix saves per step, from its replay: None (not projected), or (kind, saving ns, what
    the fix does, the saving with the ops computing a check's values or None); kind "round-trip" (the whole round
    trip removed) or "fix". ``project`` merges these in the findings' order (the same fix twice is one saving)."""
    if f.cause == causes.LAUNCH and f.id != graph_owner:
        return None
    if (f.evidence or {}).get("pattern") == "round-trip":
        # the whole round trip (the read, the host work on its result, the copies), not the frame's own time
        try:
            rt = round_trip_fix(a, r, f)
        except (ValueError, IndexError, KeyError):
            rt = None
        if rt is not None:
            (s, e, t), drop, what = rt
            end = r.run(r.removal(s, e, t), c, drop=drop)
            return ("round-trip", int(round(max(base_step - max(r.span(end).values()) / steps, 0.0))), what, None,
                    FixParts(iv=(s, e, t), drop=drop))
    try:
        fx = fix_for(a, r, f)
    except (ValueError, IndexError, KeyError):
        fx = None
    if fx is None:
        return None
    kind, iv, what, dur = fx
    parts = None
    if kind == "graph":
        proj_step = max(graph.values()) / steps
        what += kept_wait_text(a, r, base_step)
    else:
        s, e, t = iv
        # (item durations, calls that no longer wait[, items dropped: an autotuner's trials[, host intervals removed
        # whose events keep their per-event overhead: an un-profiled estimate of dense host code]])
        d, nw, dr, ct = (tuple(dur) + (None, None))[:4] if dur is not None else (None, None, None, None)
        end = r.run(r.removal(s, e, t, ct), c, d, nw, drop=dr)
        proj_step = max(r.span(end).values()) / steps
        parts = FixParts(iv=(s, e, t), dur=d, nowait=nw, drop=dr, counted=ct)
    sv = int(round(max(base_step - proj_step, 0.0)))
    sv2 = None
    if f.cause == causes.SYNC and kind == "remove":
        frame = (f.evidence or {}).get("frame")
        try:
            reads = calls_under(r, r.flags["sync_op"] | r.flags["sync_rt"] | r.flags["blocking_copy"], frame)
            chk = _check_ops(r, frame, reads)
        except (ValueError, IndexError, KeyError):
            chk = None
        if chk is not None and chk[2] > 0:  # no op of the frame computed the values: the read alone
            (cs, ce, ct), drop, n_ops = chk
            end = r.run(r.removal(cs, ce, ct), c, drop=drop)
            sv2 = int(round(max(base_step - max(r.span(end).values()) / steps, sv)))
            from ..units import fmt_ns

            what = (f"{what}; with the {_n(n_ops, 'op')} computing the values read, if nothing else uses "
                    f"them: −{fmt_ns(sv2)} per step")
    return "fix", sv, what, sv2, parts
