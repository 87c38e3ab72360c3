"""The ``autotune`` cause (gapscope/analysis/causes/autotune.py, autotuning.py): an autotuner ran its trials inside the
step. Synthetic traces for cuDNN's benchmark mode and a Triton benchmark, and the look-alikes that must not fire (a
convolution whose one algorithm launches several kernels: a layout transform, the convolution and the transform
back, or an FFT pipeline; a convolution that synchronises once; another op that synchronises and launches many
kernels), then the recorded client (traces/conv-autotune.*: a small convolutional network under
``cudnn.benchmark`` fed a new image size every step, and the same batches padded to one size).

Every synthetic scenario: kernel ``prev`` (launched at 0 µs) runs 50-100 µs; the main thread then calls one op from
100 µs that launches its kernels 20 µs apart, each running 5 µs."""

from __future__ import annotations

import functools

import numpy as np

from gapscope.analysis import CAUSES, analyze
from gapscope.analysis.plan import plain
from gapscope.trace import load
from tests.helpers import SAMPLE_TRACES, model_of, one_gap

SHAPE = {"Input Dims": [[16, 3, 263, 164], [32, 3, 7, 7], [], [], [], [], [], [], []]}


def _op(s, name, kernels, syncs_after=(), sync="cudaDeviceSynchronize", memsets=0, args=None):
    """``name`` from 100 µs: ``kernels`` launches 20 µs apart (kernel k named by the list), a synchronising call after
    the launches whose index is in ``syncs_after``, and ``memsets`` memsets at the start. Returns the op's end."""
    t = 100.0
    ev = s.cpu_op(name, t, 1, **(args or {}))
    t += 2
    for k in range(memsets):
        rt = s.runtime("cudaMemsetAsync", t, 2)
        s.events.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": t + 3,
                         "dur": 1, "args": {"device": 0, "stream": 7, "correlation": rt["args"]["correlation"],
                                            "bytes": 1024}})
        t += 5
    for k, kname in enumerate(kernels):
        s.launch(ts=t, dur=3, kernel=kname, k_ts=t + 6, k_dur=5)
        t += 20
        if k in syncs_after:
            s.runtime(sync, t - 8, 6)
    ev["dur"] = t - 100.0
    return t


def _trial_names(n):
    return [f"trial_algo{k // 2}_kernel{k % 2}" for k in range(n)]


def _analyze(s, after):
    s.launch(ts=after + 5, dur=3, kernel="next", k_ts=after + 20, k_dur=10)
    return analyze(model_of(s))


def _causes(a):
    return {c for c, v in a.cause_totals().items() if v["count"]}


def test_cudnn_trying_algorithms_for_a_new_shape_is_autotune():
    s = one_gap()
    # five algorithms of two kernels each, a synchronisation after each algorithm, then the winner's real run
    kernels = _trial_names(10) + ["nchwToNhwc", "implicit_gemm", "nhwcToNchw"]
    end = _op(s, "aten::cudnn_convolution", kernels, syncs_after={1, 3, 5, 7, 9}, memsets=2, args=SHAPE)
    a = _analyze(s, end)
    assert "autotune" in _causes(a)
    f = next(f for f in a.findings if f.cause == "autotune")
    at = f.evidence["autotune"]
    # by hand: 2 memsets and 10 trial kernels before the last synchronisation, 3 kernels of the real run after it
    assert at["kind"] == "cuDNN" and at["calls"] == 1 and at["trials"] == 12 and at["syncs"] == 5
    assert at["shapes"] == ["[16, 3, 263, 164], [32, 3, 7, 7]"]
    assert "cuDNN is autotuning every new shape (12 trial kernels for 1 convolution)" in f.suggestion
    i = int(f.gap_rows[0])
    assert "cuDNN autotuned `aten::cudnn_convolution` for the new shape" in a.gap_detail(i).explanation
    # the fix keeps the real run: the trials and the host time before it go
    assert a.projection.saving_ns[f.id] > 0
    x = a.plan.action(a.plan.rank_of[f.id])
    assert x.kind == "autotune" and "fix the shapes (pad or bucket) or turn benchmark off" in plain(x.change)


def test_one_algorithms_pipeline_is_not_autotune():
    """A layout transform, the convolution and the transform back: three kernels, no wait inside the op."""
    s = one_gap()
    end = _op(s, "aten::cudnn_convolution", ["nchwToNhwc", "implicit_gemm", "nhwcToNchw"], args=SHAPE)
    assert "autotune" not in _causes(_analyze(s, end))


def test_an_fft_convolution_of_many_kernels_is_not_autotune():
    s = one_gap()
    kernels = ["fft2d_r2c_32x32", "fft2d_r2c_32x32", "transpose", "cgemm", "transpose", "fft2d_c2r_32x32",
               "flip_filter", "fft2d_r2c_16x16", "add_bias", "relu"]
    end = _op(s, "aten::cudnn_convolution", kernels, args=SHAPE)
    assert "autotune" not in _causes(_analyze(s, end))


def test_a_convolution_that_synchronises_once_is_not_autotune():
    s = one_gap()
    end = _op(s, "aten::cudnn_convolution", _trial_names(10), syncs_after={4}, args=SHAPE)
    assert "autotune" not in _causes(_analyze(s, end))


def test_another_op_that_synchronises_and_launches_many_kernels_is_not_autotune():
    s = one_gap()
    end = _op(s, "aten::_unique2", _trial_names(10), syncs_after={3, 8}, sync="cudaStreamSynchronize")
    a = _analyze(s, end)
    assert "autotune" not in _causes(a)


def test_a_triton_benchmark_is_autotune():
    s = one_gap()
    with s.frame("app.py(5): step", 95, 400):
        with s.frame("torch/_inductor/runtime/triton_heuristics.py(900): benchmark_all_configs", 99, 300):
            with s.frame("triton/testing.py(120): do_bench", 100, 298):
                end = _op(s, "triton_poi_fused_add_0", _trial_names(10), syncs_after={4, 9})
    a = _analyze(s, end + 100)
    assert CAUSES[int(a.gaps.cause[np.argmax(a.gaps.dur_ns)])] in ("autotune", "launch", "python", "host-idle")
    f = next(f for f in a.findings if f.cause == "autotune")
    assert f.evidence["autotune"]["kind"] == "Triton" and f.evidence["autotune"]["trials"] == 10
    assert "Triton is autotuning every new shape" in f.suggestion
    # torch.cuda.synchronize() inside the benchmark is the library's, not the user's
    assert a.cause_totals()["user-sync"]["count"] == 0


# ------------------------------------------------------------------------------------------- the recorded client
@functools.lru_cache(maxsize=None)
def _real(name: str):
    return analyze(load(str(SAMPLE_TRACES / f"{name}.json.gz")))


def test_cudnn_benchmark_on_a_new_image_size_every_step():
    a = _real("conv-autotune.step_sizes")
    f = next(f for f in a.findings if f.cause == "autotune")
    at = f.evidence["autotune"]
    # the step's 15 convolutions have 7 distinct configurations: each tuned once, with tens of trial items
    assert at["kind"] == "cuDNN" and at["calls"] == 7 and at["trials"] >= 7 * 40 and at["syncs"] >= 7 * 2
    assert at["ops"] == ["aten::cudnn_convolution"] and at["shapes"]
    x = a.plan.action(a.plan.rank_of[f.id])
    assert x.rank <= 2 and x.kind == "autotune"
    words = plain(x.change)
    assert words.startswith(f"cuDNN is autotuning every new shape ({at['trials']} trial kernels for 7 convolutions)")
    assert "fix the shapes (pad or bucket) or turn benchmark off" in words
    # the CUDA graph needs the shapes fixed first
    g = a.plan.action(1)
    assert g.kind != "cuda-graph" or any(f.id in n.findings for n in g.needs)


def test_the_padded_twin_and_a_plain_resnet_do_not_autotune():
    for name in ("conv-autotune.step_padded", "resnet50.fp32", "resnet50.bf16_cl"):
        a = _real(name)
        assert a.cause_totals()["autotune"]["count"] == 0, name
        assert not any(x.kind == "autotune" for x in a.plan.actions), name
