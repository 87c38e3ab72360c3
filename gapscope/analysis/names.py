"""Classify interned event names (runtime calls, aten ops, Python frames) into the groups the cause
rules need. Each classifier returns a boolean array over ``model.names`` so a whole column can be
classified with one fancy-index: ``is_sync[model.name_id[idx]]``."""

from __future__ import annotations

import re

import numpy as np

from .thresholds import NAME_SCAN

#: runtime/driver calls that block the CPU until the GPU has caught up
SYNC_RUNTIME = frozenset(
    {
        "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
        "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
        "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipCtxSynchronize",
    }
)
#: synchronous (blocking) copies; the *Async variants are not listed
BLOCKING_COPY_RUNTIME = frozenset(
    {
        "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyPeer", "cudaMemcpyFromSymbol",
        "cudaMemcpyToSymbol", "cudaMemset", "cuMemcpy", "cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cuMemcpyHtoD",
        "cuMemcpyHtoD_v2", "cuMemcpyDtoD_v2",
        # HIP: the same calls, plus hipMemcpyWithStream (a synchronous copy ordered on a stream; what
        # ``torch.tensor(..., device=...)`` and ``.to()`` without non_blocking call on ROCm)
        "hipMemcpy", "hipMemcpy2D", "hipMemcpy3D", "hipMemcpyPeer", "hipMemcpyFromSymbol", "hipMemcpyToSymbol",
        "hipMemset", "hipMemcpyDtoH", "hipMemcpyHtoD", "hipMemcpyDtoD", "hipMemcpyWithStream",
    }
)
#: aten ops that read a GPU value on the host. Ops that synchronise only for CUDA inputs (nonzero,
#: unique, masked_select, ...) are not listed: the synchronising runtime call below them marks them
#: (see CpuSets), which keeps their CPU-tensor calls out.
SYNC_OPS = frozenset({"aten::item", "aten::_local_scalar_dense", "aten::tolist", "aten::is_nonzero"})
ALLOCATOR_RUNTIME = frozenset(
    {
        "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaFreeHost", "cudaMallocHost", "cudaMallocManaged",
        "cudaMallocAsync", "cudaFreeAsync", "cudaHostRegister", "cudaHostUnregister",
        "cuMemAlloc", "cuMemAlloc_v2", "cuMemFree", "cuMemFree_v2", "cuMemHostAlloc", "cuMemFreeHost",
        "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve", "cuMemAddressFree",
        "hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree", "hipHostAlloc", "hipFreeHost", "hipMallocHost",
        "hipMallocManaged", "hipMallocAsync", "hipFreeAsync", "hipHostRegister", "hipHostUnregister",
        "hipExtMallocWithFlags", "hipMemCreate", "hipMemRelease", "hipMemMap", "hipMemUnmap",
        "hipMemAddressReserve", "hipMemAddressFree",
    }
)
#: calls that make a stream wait for an event recorded on another stream (a cross-stream dependency)
STREAM_WAIT_RUNTIME = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent"})
#: calls that record an event on a stream (the other end of a stream wait)
EVENT_RECORD_RUNTIME = frozenset(
    {"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "cuEventRecordWithFlags",
     "hipEventRecord", "hipEventRecordWithFlags"}
)
#: a whole captured graph launched by one call: its kernels share the call's correlation id
GRAPH_LAUNCH_RUNTIME = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
ALLOCATOR_OPS = frozenset({"empty_cache", "torch.cuda.empty_cache", "aten::empty_cache"})
LAUNCH_RUNTIME_RE = re.compile(
    r"^(cudaLaunch|cuLaunch|cudaGraphLaunch|cuGraphLaunch|hipLaunch|hipExtLaunch|hipModuleLaunch|hipExtModuleLaunch"
    r"|hipGraphLaunch|cudaMemcpyAsync|cudaMemsetAsync|hipMemcpyAsync|hipMemsetAsync)"
)
#: Python frames that are kernel launchers (generated Inductor wrappers, Triton's launcher): their time is
#: dispatch, like an aten op's, not user Python work
LAUNCHER_FRAME_RE = re.compile(r"(torchinductor_|(^|/)_inductor/|(^|/)triton/|triton_heuristics)")
COLLECTIVE_OP_RE = re.compile(r"^(record_param_comms$|c10d::|nccl:|c10d_functional::|_c10d_functional::|gloo:)")
COLLECTIVE_KERNEL_RE = re.compile(r"^(ncclDevKernel_|ncclKernel_|nccl[A-Z]\w*Kernel|rccl)")
PY_FRAME_RE = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$")
_LIB_PATH_RE = re.compile(
    r"(site-packages|dist-packages|/torch/|^torch/|/lib/python3|<frozen |^<built-in|^<string>|/contextlib\.py"
    r"|/threading\.py|/runpy\.py|^nn\.Module:|^torch/|/_dynamo/|/_inductor/|/triton/|torchinductor_)"
)

#: gapscope's own capture scaffolding (the step loop, the command line), not the workload: never the
#: frame a finding is about. ``capture/demo.py`` is the demo workload and stays a user frame.
#: Run as ``python -m gapscope capture`` (from a checkout) the command line adds ``gapscope/__main__.py``,
#: ``gapscope/cli.py``'s main and ``gapscope/commands/capture.py``'s run_argv above them (installed, they are under
#: site-packages: library frames already).
_GAPSCOPE_CLI = (r"|(^|/)gapscope/__main__\.py\(|(^|/)(tui|gapscope)/cli\.py\(\d+\): _?main$"
                 r"|(^|/)(tui|gapscope)/commands/capture\.py\(")
CAPTURE_FRAME_RE = re.compile(r"(^|/)capture/(recorder|cli|__main__|__init__)\.py\(" + _GAPSCOPE_CLI)
#: the frames a script is launched by (``python -m``'s runpy, gapscope's capture): the outermost levels of every
#: stack, the same on every event; the explorer folds them into one row of an expanded thread
HARNESS_FRAME_RE = re.compile(r"(^|/)capture/(recorder|cli|__main__|__init__)\.py\(|^<frozen runpy>|(^|/)runpy\.py\("
                              + _GAPSCOPE_CLI)
#: the capture's step ranges (and its profiler warm-up step's, before the window); like ``ProfilerStep#N`` they wrap
#: a whole step and say nothing about a gap
STEP_ANNOTATION_RE = re.compile(r"^(ProfilerStep#|gapscope\.step#|gapscope\.profiler_warmup$)")


#: the profiler's own frames and ops: record_function enter/exit (torch's profiler.py context manager, the
#: built-ins and the ``profiler::`` ops it calls) and the profiler's step/record machinery
PROFILER_FRAME_RE = re.compile(
    r"((^|/)torch/autograd/profiler\.py\(|(^|/)torch/profiler/profiler\.py\(|^profiler::_record_function"
    r"|^<built-in method _record_function_(enter|exit))"
)

_BUILTIN_FRAME_RE = re.compile(r"^<built-in (?:method|function) ?(?P<name>[\w.]*)")
#: built-ins behind ``torch.profiler.record_function`` ranges: cheap normally, costly while profiling
RECORD_FUNCTION_BUILTINS = frozenset(
    {"_record_function_enter_new", "_record_function_enter", "_record_function_exit", "_record_function_exit._RecordFunction"}
)


def builtin_name(name: str) -> str | None:
    """``'<built-in method view of Tensor object at 0x..>'`` -> ``'view'``; None for other frames."""
    m = _BUILTIN_FRAME_RE.match(name)
    if not m:
        return None
    # pybind11 bindings without a __name__ show as "<built-in method  of pybind11_builtins...>"
    return m.group("name") or "(unnamed C++ binding)"


def display_frame(name: str) -> str:
    """A frame name fit for a sentence: built-ins lose their ``of <object at 0x...>`` tail."""
    b = builtin_name(name)
    return f"built-in {b}" if b else name


#: top-level packages of the libraries a model runs on: Kineto writes their frames with paths relative to
#: site-packages (``transformers/models/llama/modeling_llama.py(364): forward``), so the path alone does not say
#: they are not the user's code
LIBRARY_PACKAGES = frozenset({
    "transformers", "torch", "torchvision", "torchaudio", "accelerate", "diffusers", "peft", "timm", "vllm",
    "sglang", "triton", "flash_attn", "xformers", "deepspeed", "megatron", "apex", "bitsandbytes", "safetensors",
    "huggingface_hub", "tokenizers", "numpy", "einops", "fairscale", "torchao", "optimum", "lightning",
    "pytorch_lightning"})


def is_library_frame(name: str) -> bool:
    """A Python frame of a library the model runs on (torch, transformers, ...; ``LIBRARY_PACKAGES``) rather than
    code its user edits: by an installed-package path, or a relative path whose first folder is such a package."""
    m = PY_FRAME_RE.match(name)
    if not m:
        return False
    f = m.group("file")
    return bool(_LIB_PATH_RE.search(name)) or f.split("/", 1)[0] in LIBRARY_PACKAGES


def is_sync_name(name: str) -> bool:
    """A call or op that makes the host wait for the GPU: a synchronising runtime call (``SYNC_RUNTIME``), a blocking
    copy (``BLOCKING_COPY_RUNTIME``) or a host read of a GPU value (``SYNC_OPS``). The one definition the analysis'
    flags (``name_flags``) and the explorer's lanes share; a query (``cudaEventQuery``) does not wait."""
    return name in SYNC_RUNTIME or name in BLOCKING_COPY_RUNTIME or name in SYNC_OPS


def is_allocator_name(name: str) -> bool:
    """An allocator call (``ALLOCATOR_RUNTIME``, ``ALLOCATOR_OPS``) or ``empty_cache`` under any name."""
    return name in ALLOCATOR_RUNTIME or name in ALLOCATOR_OPS or "empty_cache" in name


def is_user_frame(name: str) -> bool:
    """A Python frame of the user's code: not torch or another library, not gapscope's capture."""
    return bool(PY_FRAME_RE.match(name)) and not _LIB_PATH_RE.search(name) and not CAPTURE_FRAME_RE.search(name)


def name_flags(names: list[str]) -> dict[str, np.ndarray]:
    """Boolean flags per interned name."""
    n = len(names)
    f = {k: np.zeros(n, dtype=bool) for k in ("sync_rt", "blocking_copy", "sync_op", "alloc", "launch", "coll_op",
                                                   "coll_kernel", "user_frame", "empty_cache", "launcher_frame",
                                                   "capture_frame", "profiler_frame", "graph_launch",
                                                   "stream_wait", "step_range", "event_record")}
    for i, nm in enumerate(names):
        # patterns look at a name's first NAME_SCAN characters: a 50 MB name took 9 s of searches
        head = nm if len(nm) <= NAME_SCAN else nm[:NAME_SCAN]
        if nm in SYNC_RUNTIME:
            f["sync_rt"][i] = True
        if nm in BLOCKING_COPY_RUNTIME:
            f["blocking_copy"][i] = True
        if nm in SYNC_OPS:
            f["sync_op"][i] = True
        if nm in ALLOCATOR_RUNTIME or nm in ALLOCATOR_OPS:
            f["alloc"][i] = True
        if "empty_cache" in nm:
            f["empty_cache"][i] = True
        if nm in STREAM_WAIT_RUNTIME:
            f["stream_wait"][i] = True
        if nm in EVENT_RECORD_RUNTIME:
            f["event_record"][i] = True
        if nm in GRAPH_LAUNCH_RUNTIME:
            f["graph_launch"][i] = True
        if LAUNCH_RUNTIME_RE.match(head):
            f["launch"][i] = True
        if COLLECTIVE_OP_RE.match(head):
            f["coll_op"][i] = True
        if COLLECTIVE_KERNEL_RE.match(head):
            f["coll_kernel"][i] = True
        if LAUNCHER_FRAME_RE.search(head):
            f["launcher_frame"][i] = True
        if STEP_ANNOTATION_RE.match(head):
            f["step_range"][i] = True
        if PROFILER_FRAME_RE.search(head):
            f["profiler_frame"][i] = True
        if CAPTURE_FRAME_RE.search(head):
            f["capture_frame"][i] = True
        elif PY_FRAME_RE.match(head) and not _LIB_PATH_RE.search(head):
            f["user_frame"][i] = True
    return f


def parse_frame(name: str) -> tuple[str | None, int | None, str]:
    """``path/file.py(123): func`` -> (path, 123, func); other names -> (None, None, name)."""
    m = PY_FRAME_RE.match(name)
    if not m:
        return None, None, name
    return m.group("file"), int(m.group("line")), m.group("func")
