"""Every threshold the analysis uses, in one place.

``Thresholds`` is a frozen dataclass; pass ``analyze(model, config=Thresholds(...))`` to change one.
All times are integer nanoseconds, all shares are fractions in [0, 1].

The analysis window is not a threshold but a choice: ``analyze(model, window="steps")`` (the default)
restricts every number to the GPU work launched inside the capture's ``gapscope.step#k`` ranges (the
launch call's start decides; see window.py for the rule and its fall-backs), ``window="all"`` keeps the
whole trace. Traces without those ranges are always analysed whole.

Cause rules (see ../shared/design/gap-causes.md; the first rule that holds wins):

``most`` (0.5)
    "Most of the gap" / "most of [t0, t_launch]": a share strictly above one half. Used by the
    ``copy`` (copy activity on the device covers the gap), ``collective``, ``profiler``, ``python``,
    ``launch`` and ``host-idle`` rules.
``allocator_share`` (0.3)
    "A large share": allocator calls (cudaMalloc, cudaFree, cudaHostAlloc, cudaFreeHost, ...)
    on the launching thread take at least this share of [t0, t_launch]. Lower than ``most`` because
    one cudaFree implies a device-wide synchronisation whose cost shows up partly elsewhere.
``sync_share`` (0.2)
    The ``sync`` rule also holds when synchronising calls (``aten::item``, ``cudaStreamSynchronize``,
    blocking copies, ...) on the launching thread take at least this share of [t0, t_launch]: a
    synchronisation inside the gap empties the GPU queue whatever the CPU's speed, so the gap cannot
    be hidden by running ahead. Typical of CPU-bound eager decode, where the GPU has already drained
    when ``.item()`` is called and the thread is therefore not yet inside the call at t0.
``host_op_ns`` (50000)
    An aten op that runs at least 50 µs on the CPU without launching anything below it (CPU softmax,
    sampling, numpy conversion) is host computation: its time counts as ``python`` (host work that
    feeds no GPU), not as dispatch. Shorter ops without launches (view, reshape) stay dispatch cost.
``sync_slack_ns`` (1000)
    The ``sync`` rule asks whether the launching thread was inside a synchronising call at t0.
    CUPTI maps GPU timestamps onto the CPU clock with a small error, so a synchronising call that
    ended up to this long before t0 still counts.
``min_listed_gap_ns`` (2000)
    Gaps shorter than 2 µs are counted in every total (idle time, causes) but not listed as
    findings or top gaps: about 1 µs separates even dependent kernels of a CUDA graph, so such gaps
    are the GPU's own dispatch cost, not something the code can remove.
``large_distortion`` (1.3)
    A capture whose profiled step took more than 1.3x its un-profiled reference gets a warning:
    CPU-side causes are then inflated by the profiler itself.
``wait_latency_factor`` (4), ``wait_min_ns`` (20000)
    ``gpu-wait``: the next kernel was queued before the gap began, or launched early in it (see
    ``late_launch_share``) and then waited longer than max(20 µs, 4x the trace's median launch-to-start
    latency of the kernels that started on an idle device: launched one by one, with nothing of their device
    running between their launch and their start; a kernel queued behind busy kernels measures the queue)
    to start. The CPU had already issued it: the GPU waited on
    something else (an event from another stream or process, its own graph dispatch, work not traced).
    The launch finding's graph what-if keeps such a wait (a graph replays the same dependency) when its part
    beyond the launch call, the usual latency and one graph gap is at least ``wait_min_ns``; shorter is dispatch.
``stall_min_ns`` (100000)
    ``stall``: one call, op or range holds a gap when its own time in [t0, t_launch] (or the launch call's
    time in the gap) is most of it and at least 100 µs. Below that, one op or launch call taking most of a gap
    is ordinary dispatch (a cudaLaunchKernel costs 2-10 µs, an eager op's dispatch tens of µs) and stays
    ``launch``; above it the time is one thing's (a 6 ms cudaLaunchKernel loading its module, a 2.4 ms addmm,
    a compile region) and the advice is about that thing.
``late_launch_share`` (0.5)
    When the launch call was issued so early that less than this share of the gap lies in
    [t0, t_launch], the CPU was not the bottleneck: the gap is launch-to-start latency ("launch").
``user_sync_share`` (0.2)
    ``user-sync``: a synchronising runtime call made from the user's Python with no aten op around it
    (``torch.cuda.synchronize()``, ``Event.synchronize()``, ``Stream.synchronize()``), together with the code around
    it that launches nothing (a timer's context manager: usersync.py), takes at least this share of
    [t0, t_launch] on the launching thread (the share the ``sync`` rule asks of a synchronising call: a
    synchronisation in the gap drains the queue whatever the CPU's speed).
``gil_share`` (0.3)
    ``gil``: another Python thread of the launching thread's process held the GIL (ran Python while the launching
    thread recorded none: gil.py) for at least this share of [t0, t_launch]. Lower than ``most``: the launching
    thread's own Python between two waits is slowed by the hand-overs too (hf-gil.decode_thread: of its gaps with a
    share above 0.3, 88% are above 0.5).
``autotune_min_syncs`` (2), ``autotune_min_items`` (8)
    ``autotune``: one op call that synchronises with the GPU at least twice inside itself and launches at least
    this many GPU items (trial kernels, memsets) is an autotuner benchmarking algorithms for a new shape
    (``torch.backends.cudnn.benchmark``: 84 to 101 items and 20 synchronising calls per convolution in
    conv-autotune.step_sizes). One algorithm's pipeline (a layout transform, the convolution, the transform back;
    an FFT or Winograd convolution's few kernels) launches several kernels but never waits for the GPU inside the op.

Op patterns (patterns.py):

``pattern_min_share`` (0.02)
    An op pattern is a finding when its calls' kernel time is at least this share of the window's kernel time.
``attn_min_seq`` (128)
    Eager attention: the score matrix's query and key lengths are at least this (a shorter one is cheap).
``matmul_align`` (8)
    fp16/bf16 matmul dimensions that are not multiples of this (16 bytes) miss the aligned tensor-core kernels.
``large_copy_bytes`` (4 MiB)
    A copy or dtype conversion moving at least this much is a large copy.
``optimizer_min_ops`` (16)
    An optimizer step without foreach/fused ops is a pattern when it runs at least this many op calls per step.
``loop_min_kernels`` (16)
    A Python loop of tiny kernels (patterns_loop.py): its frame's calls launch at least this many kernels each
    (median), shorter (median) than the median launch call that issued them, with at least one synchronising
    call per iteration inside the repeated run below (a loop over layers with one sync elsewhere is not it).
``loop_min_calls`` (2)
    ... and its frame is called at least this many times in the window (a function run per layer or step: a
    script's top-level loop over its steps, called once, is the step loop, not a loop to batch).
``loop_min_repeats`` (2), ``loop_min_block`` (3), ``loop_max_block`` (64)
    ... in an op sequence of ``loop_min_block`` to ``loop_max_block`` ops that repeats back to back at least
    ``loop_min_repeats`` times within a call (the loop body, once per element or expert; a longer body is a
    model's forward, a decoding loop's step).

Before/after (compare/steptime.py):

``distortion_differs`` (1.15)
    Two captures whose profiler distortions (profiled / un-profiled time) differ by more than this factor
    (larger over smaller) get a warning: the profiler inflated their CPU-side idle by different amounts, so
    profiled idle and GPU span do not compare between them; the un-profiled step time still does.
``no_change_share`` (0.03)
    A step time that moved by less than this share of A's is "no clear change" when neither side has a
    p25–p75 spread to judge by (a single time, or one profiled step each); with spreads, overlapping
    p25–p75 ranges decide.

Several ranks (see ranks/):

``clock_tolerance_ns`` (100000)
    Collective end times of two ranks (after the trace time bases) that differ by less than this are
    "lined up"; beyond it a warning names the rank and the offset.
``clock_min_matches`` (3)
    Fewest matched calls whose end times can correct a clock offset.
``startup_skew_share`` (0.5)
    A leading collective is start-up skew, not a straggler, when the ranks' arrivals measured from each
    rank's own first event spread by at most this share of their spread on the common clock (the profilers
    started that far apart and each rank went straight to the collective), and that spread exceeds
    ``clock_tolerance_ns``. Only the first collectives (until one does not qualify) can be start-up skew.
``late_blame_share`` (0.2)
    A frame is blamed for a late rank when its excess own time (the late rank's minus the other ranks'
    median, in the intervals from each previous collective's end to the launch) is at least this share of how
    late the rank was in those calls (per call the longest wait of another rank). A host that is evenly slower spreads its
    excess over many frames, none of which reaches it.
``late_blame_top`` (3)
    At most this many blamed frames are named.
``frame_min_share`` (0.05), ``frame_max_share`` (0.8)
    A user frame gets a "one fused GPU call" what-if (replay/frames.py) when its inclusive host time per step is
    within this share of the recorded step: below, it is not worth a replay; above, it is the step itself, whose
    fused what-if is the launch finding's graph replay (the model's forward, the harness's step).
``frame_top`` (10)
    At most this many frames are replayed (largest inclusive host time first, the findings' frames before).
``frame_attach_share`` (0.5)
    A finding carries a frame's figure when at least this share of its idle time lies under the frame.
``graph_wait_note_share`` (0.01)
    The launch finding's graph fix says how much dependency wait it keeps (gpu-wait time a graph replays as
    well) when that is at least this share of the step: hf-sampling.decode_host keeps 6.6 µs of an 11 ms step,
    which would only clutter the fix; tracelens' sglang decode keeps 463 of its 474 ms.

Fixed values (module constants below ``Thresholds``, each with the reason for its value): the rest of the
analysis's cut-offs, defaults for what a trace may not measure, and the bounds on work. A test
(tests/test_thresholds.py) fails on a numeric constant or cut-off defined anywhere else in gapscope/analysis.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    most: float = 0.5
    allocator_share: float = 0.3
    sync_share: float = 0.2
    host_op_ns: int = 50_000
    sync_slack_ns: int = 1_000
    min_listed_gap_ns: int = 2_000
    large_distortion: float = 1.3
    late_launch_share: float = 0.5
    wait_latency_factor: int = 4
    wait_min_ns: int = 20_000
    stall_min_ns: int = 100_000
    user_sync_share: float = 0.2
    gil_share: float = 0.3
    autotune_min_syncs: int = 2
    autotune_min_items: int = 8
    #: findings: at most this many gaps get a full stack to build a signature (largest first)
    max_detailed_gaps: int = 2_000
    clock_tolerance_ns: int = 100_000
    clock_min_matches: int = 3
    startup_skew_share: float = 0.5
    late_blame_share: float = 0.2
    late_blame_top: int = 3
    pattern_min_share: float = 0.02
    attn_min_seq: int = 128
    matmul_align: int = 8
    large_copy_bytes: int = 4 << 20
    optimizer_min_ops: int = 16
    loop_min_kernels: int = 16
    loop_min_repeats: int = 2
    loop_min_block: int = 3
    loop_max_block: int = 64
    loop_min_calls: int = 2
    frame_min_share: float = 0.05
    frame_max_share: float = 0.8
    frame_top: int = 10
    frame_attach_share: float = 0.5
    graph_wait_note_share: float = 0.01
    distortion_differs: float = 1.15
    no_change_share: float = 0.03


DEFAULT = Thresholds()


# -- severity (findings.py, ranks/job.py) ---------------------------------------------------------------------

#: a finding's severity from its share of the window (idle time, or projected saving): (lowest share, severity),
#: highest first; below the last, "info". A tenth of the window is worth fixing first; half a percent is noise.
SEVERITY_BANDS = ((0.1, "high"), (0.03, "medium"), (0.005, "low"))

# -- the plan of actions (plan.py) -----------------------------------------------------------------------------

#: an action's severity from what it buys, in % of the step (shared/design/plan.md): high, medium, low
ACTION_BANDS = ((10.0, "high"), (3.0, "medium"), (1.0, "low"))
#: below this share of the step (%) an action is minor: severity info, folded into one line of the plan
MINOR_ACTION_PCT = 1.0
#: a finding no action fixes (not projected) is never more severe than this: idle time alone is not a saving
NOT_PROJECTED_MAX_SEVERITY = "medium"
#: how deep below a matmul's op call its autocast casts are looked for (aten::to > aten::_to_copy > aten::copy_;
#: activity.run_dtypes)
CAST_DEPTH = 4
#: a user function that launches at least this many GPU items per call is a loop to vectorise, not a frame to fuse
LOOP_KERNELS_PER_CALL = 16


def severity(share: float) -> str:
    """The severity of a finding that takes ``share`` of the window (``SEVERITY_BANDS``)."""
    for lowest, name in SEVERITY_BANDS:
        if share >= lowest:
            return name
    return "info"


# -- findings (findings.py) -----------------------------------------------------------------------------------

#: pageable copies are worth a finding of their own only when they take this share of the window (pinning
#: speeds the copy up; a copy that takes no time buys nothing from it)
PAGEABLE_MIN_SHARE = 0.005
#: gaps too short to list (``min_listed_gap_ns``) get a finding of their own when together they are at least this
#: share of the window (many tiny kernels back to back); less is the GPU's own dispatch cost
SHORT_GAPS_MIN_SHARE = 0.01

# -- causes (causes/*.py, gaps.py) ----------------------------------------------------------------------------

#: a copy this small is bound by latency, not bandwidth: pinning it changes nothing measurable
SMALL_COPY_BYTES = 64 * 1024
#: what the launching thread did meanwhile is said only when it is at least this long
MEANWHILE_MIN_NS = 20_000
#: ``gil``: the calls a holding thread's own code made while it held the GIL, named per thread (the largest first)
GIL_TOP_FRAMES = 3
#: ``autotune``: the distinct input shapes named in a finding (the largest number of trial items first)
AUTOTUNE_TOP_SHAPES = 4
#: the top frame "holds" the host time when its own time is at least this share of it; else it is spread
HOLDS_SHARE = 0.5
#: ``one_holder``'s screen: sample points per gap, and the share of them one event must run at
SCREEN_POINTS = 33
SCREEN_SHARE = 0.4
#: the Python frame holding a gap's CPU (the python cause's frame, the stack shown) is the most common one among
#: this many evenly spaced sample points of [t0, t_launch]
HOLDER_POINTS = 33

# -- timing of the capture (core.py) --------------------------------------------------------------------------

#: the un-profiled timing of our capture is "noisy" beyond these (the same limits as capture.recorder's
#: NOISY_IQR / NOISY_RANGE, which the capture cannot import from here)
NOISY_IQR = 1.15
NOISY_RANGE = 1.5

# -- verdict (verdict.py) -------------------------------------------------------------------------------------

#: the queue was empty at least this share of the window (and the GPU starved a real part of it): host-bound
HOST_EMPTY_SHARE = 0.7
HOST_STARVED_SHARE = 0.1
#: the queue was empty at most this share of the window while the GPU was busy at least GPU_BUSY_SHARE of it
GPU_EMPTY_SHARE = 0.3
GPU_BUSY_SHARE = 0.5
#: a device busy this share of its window is gpu-bound whatever the queue says
GPU_SATURATED_SHARE = 0.95
#: kernel rows named in a GPU-bound verdict
GPU_BOUND_TOP = 5
#: a GPU-bound device says what bounds its kernels (verdict.Limit) when at least this share of its kernel time has a
#: floor; when the floors add up to less than LIMIT_LATENCY_SHARE of that time, neither bandwidth nor compute is
#: what limits it but the kernels' own latency (too small to fill the GPU: a batch-4 decode of a small model)
LIMIT_MIN_FLOORED = 0.5
LIMIT_LATENCY_SHARE = 0.25

# -- before/after (compare.py, compare/steptime.py, compare/align.py) ---------------------------------------------

#: a matched finding whose per-step idle moved less than this share (of the larger) is "same"
SAME_SHARE = 0.05
#: a profiled stand-in gets a p25–p75 spread from its step ranges only with at least this many steps
MIN_SPREAD_STEPS = 4
#: the alignment keeps one bit per (A kernel, B kernel) pair of the step: 4e8 bits = 50 MB
MAX_ALIGN_CELLS = 400_000_000

# -- kernel floors and op patterns (floors.py, patterns.py, activity.py) --------------------------------------

#: the vendors' TFLOP/s are at the rated boost clock; GPUs run above it (H100/H200 SXM: 1980 MHz against the
#: 1830 MHz of the datasheet, +8%), so the compute floor uses peaks 15% higher to stay a lower bound
CLOCK_HEADROOM = 1.15
#: eager attention: the head dimension d of Q [.., L, d] is at most this (the largest flash attention takes; a
#: larger d is some other matmul)
ATTN_MAX_HEAD_DIM = 256
#: how many earlier calls of the device a call looks back at for an input one of them wrote (bmm -> softmax
#: -> copy_ -> bmm is three)
REUSE_LOOKBACK = 8

# -- replay (replay/model.py, replay/fixes.py, replay/calibrate.py) -------------------------------------------

#: an item that starts within this of its stream's previous end was queued behind it
QUEUED_NS = 2_000
#: launch latency of an un-queued item when the trace has none to measure (ns)
DEFAULT_LAUNCH_NS = 5_000
#: GPU-side gap between two nodes of a CUDA graph when the trace has no graph launch: the median measured in
#: traces/demo-graph.decode.json.gz (H200, torch 2.11, CUDA 13.0), 417 ns
DEFAULT_GRAPH_GAP_NS = 417
#: host-to-device / device-to-host bandwidth of a pinned copy when the trace has none to measure (GB/s = bytes/ns):
#: a conservative PCIe Gen4 x16 figure (an H200's Gen5 link does about twice that)
PINNED_GBPS = 25.0
#: a pinned copy measures the link's bandwidth from this size on (a smaller one is mostly its fixed latency)
BANDWIDTH_MIN_BYTES = 1 << 20
#: how long after an allocator call the host work it slowed is looked at (ns). Measured on the H200 (torch 2.11,
#: traces/demo-eager-alloc.decode.json.gz): launch calls took 10.2 µs (median) in the first 20 µs after a
#: ``cudaMalloc``, 7.7 µs at 100-200 µs and 5.3 µs from 400 µs on, as in the clean trace; an ``aten::linear`` 58.9
#: µs at 100-200 µs and 36-42 µs later. Beyond 200 µs the comparison below mixes in *which* code runs there: the
#: same split of the clean trace at every ``mlp`` start (where the churn sits in the bad one) gives -15 µs per
#: step at 200 µs but -266 µs at 400 µs and -712 µs at 800 µs.
COLD_NS = 200_000
#: instances of a name, away from every allocator call, needed for its usual own time
COLD_MIN_REF = 3
#: an un-profiled time up to this factor above the replayed recording is the same step within timing noise
#: (calibrated with no overhead taken off); above it, it was not measured under the recording's conditions
CAL_SLACK = 1.05

# -- bounds on work (stacks.py, names.py) ---------------------------------------------------------------------

#: frames of one stack at most (its innermost ones): a parent cycle in a damaged file must end
MAX_CHAIN = 10_000
#: steps of a walk up the parent links at most (a loaded trace nests far less deep): a cycle must end
MAX_PARENT_STEPS = 100_000
#: characters of a name that its patterns see (frame, launch and collective names are far shorter)
NAME_SCAN = 4096

# -- the analysis on two cores (forked.py) ---------------------------------------------------------------------

#: traces of fewer events than this are analysed in one process: the fork (and the child's copy-on-write faults)
#: costs more than the second core saves (measured: see benchmarks/README.md, "The analysis on two cores")
ANALYSIS_PARALLEL_MIN_EVENTS = 75_000
#: the parent waits for a forked child at least this long (s) after it is done with its own part ...
CHILD_WAIT_MIN_S = 10.0
#: ... or this many times the time since the fork, the longer: then it kills the child and computes it itself
CHILD_WAIT_FACTOR = 4.0
#: bytes per system call on the pipe to or from a forked child
FORK_PIPE_PIECE = 1 << 16
#: bytes per system call on the file a forked child writes its values into (forked.Forked)
FORK_FILE_PIECE = 1 << 24
#: an action's headline (plan.headline) at most this long, so that "10. −100.0%: " and it fit 80 columns; a longer
#: one names its frame by file and line only
HEADLINE_MAX = 66
