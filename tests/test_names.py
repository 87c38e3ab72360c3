"""Runtime/driver names the rules know, CUDA and HIP (issue 13 item 2). The table is written by hand from the
CUDA and HIP runtime APIs; it is not derived from the sets in gapscope/analysis/names.py."""

from __future__ import annotations

import pytest

from gapscope.analysis import analyze, names
from gapscope.analysis.names import name_flags
from gapscope.trace import load

# name -> the one flag it must raise (every other runtime flag stays down)
TABLE = {
    # synchronising calls
    "cudaStreamSynchronize": "sync_rt", "hipStreamSynchronize": "sync_rt",
    "cudaDeviceSynchronize": "sync_rt", "hipDeviceSynchronize": "sync_rt",
    "cudaEventSynchronize": "sync_rt", "hipEventSynchronize": "sync_rt",
    "cuCtxSynchronize": "sync_rt", "hipCtxSynchronize": "sync_rt",
    # blocking copies
    "cudaMemcpy": "blocking_copy", "hipMemcpy": "blocking_copy",
    "hipMemcpyWithStream": "blocking_copy",
    "cudaMemcpy2D": "blocking_copy", "hipMemcpy2D": "blocking_copy",
    "cudaMemcpy3D": "blocking_copy", "hipMemcpy3D": "blocking_copy",
    "cudaMemcpyPeer": "blocking_copy", "hipMemcpyPeer": "blocking_copy",
    "cudaMemcpyFromSymbol": "blocking_copy", "hipMemcpyFromSymbol": "blocking_copy",
    "cudaMemcpyToSymbol": "blocking_copy", "hipMemcpyToSymbol": "blocking_copy",
    "cudaMemset": "blocking_copy", "hipMemset": "blocking_copy",
    "cuMemcpyDtoH_v2": "blocking_copy", "hipMemcpyDtoH": "blocking_copy",
    "cuMemcpyHtoD_v2": "blocking_copy", "hipMemcpyHtoD": "blocking_copy",
    "cuMemcpyDtoD_v2": "blocking_copy", "hipMemcpyDtoD": "blocking_copy",
    # allocator
    "cudaMalloc": "alloc", "hipMalloc": "alloc",
    "cudaFree": "alloc", "hipFree": "alloc",
    "cudaHostAlloc": "alloc", "hipHostMalloc": "alloc", "hipHostAlloc": "alloc",
    "cudaFreeHost": "alloc", "hipHostFree": "alloc", "hipFreeHost": "alloc",
    "cudaMallocHost": "alloc", "hipMallocHost": "alloc",
    "cudaMallocManaged": "alloc", "hipMallocManaged": "alloc",
    "cudaMallocAsync": "alloc", "hipMallocAsync": "alloc",
    "cudaFreeAsync": "alloc", "hipFreeAsync": "alloc",
    "cudaHostRegister": "alloc", "hipHostRegister": "alloc",
    "cudaHostUnregister": "alloc", "hipHostUnregister": "alloc",
    "cuMemCreate": "alloc", "hipMemCreate": "alloc",
    "cuMemMap": "alloc", "hipMemMap": "alloc",
    "cuMemAddressReserve": "alloc", "hipMemAddressReserve": "alloc",
    # launches (kernels, graphs, async copies)
    "cudaLaunchKernel": "launch", "hipLaunchKernel": "launch",
    "cudaLaunchKernelExC": "launch", "hipExtLaunchKernel": "launch",
    "cuLaunchKernel": "launch", "hipModuleLaunchKernel": "launch", "hipExtModuleLaunchKernel": "launch",
    "cudaMemcpyAsync": "launch", "hipMemcpyAsync": "launch",
    "cudaMemsetAsync": "launch", "hipMemsetAsync": "launch",
    # graph replays are launches too (checked apart below)
    "cudaGraphLaunch": "graph_launch", "cuGraphLaunch": "graph_launch", "hipGraphLaunch": "graph_launch",
    # stream dependencies
    "cudaStreamWaitEvent": "stream_wait", "cuStreamWaitEvent": "stream_wait", "hipStreamWaitEvent": "stream_wait",
    "cudaEventRecord": "event_record", "hipEventRecord": "event_record",
    "cudaEventRecordWithFlags": "event_record", "hipEventRecordWithFlags": "event_record",
    # neither: queries and bookkeeping
    "cudaStreamQuery": None, "hipStreamQuery": None, "cudaEventQuery": None, "hipEventQuery": None,
    "hipPointerGetAttribute": None, "hipGetDevicePropertiesR0600": None, "hipStreamIsCapturing": None,
    "hipEventDestroy": None, "cudaGetDevice": None, "hipStreamGetCaptureInfo": None,
}
RUNTIME_FLAGS = ("sync_rt", "blocking_copy", "alloc", "launch", "graph_launch", "stream_wait", "event_record")


@pytest.mark.parametrize("name,flag", sorted(TABLE.items()))
def test_runtime_name_flags(name, flag):
    f = name_flags([name])
    up = {k for k in RUNTIME_FLAGS if f[k][0]}
    want = {flag} if flag else set()
    if flag == "graph_launch":
        want.add("launch")
    assert up == want


def test_every_cuda_name_in_the_rules_has_its_hip_twin():
    """For each cudaX the sets name, hipX is in the same set, except where HIP has no such call."""
    no_twin = {"cudaThreadSynchronize"}  # deprecated in CUDA; HIP never had it
    sets = [names.SYNC_RUNTIME, names.BLOCKING_COPY_RUNTIME, names.ALLOCATOR_RUNTIME, names.STREAM_WAIT_RUNTIME,
            names.EVENT_RECORD_RUNTIME, names.GRAPH_LAUNCH_RUNTIME]
    missing = [(n, "hip" + n[4:]) for s in sets for n in s
               if n.startswith("cuda") and n not in no_twin and "hip" + n[4:] not in s]
    assert missing == []


def test_sglang_blocking_copy_is_in_the_syncs_table(shared_traces):
    """The sglang decode's thread sat 463.06 ms in hipMemcpyWithStream (raw event: ts 4909914216566.336 µs,
    dur 463063.75 µs, correlation 92163) inside aten::copy_: the syncs table's first row is that copy."""
    a = analyze(load(shared_traces / "thirdparty" / "tracelens__sglang_Qwen3-8B_decode.json.gz"))
    top = a.syncs[0]
    assert top["chain"][-1] == "hipMemcpyWithStream" and top["count"] == 1
    assert top["wait_ns"] == 463_063_750
