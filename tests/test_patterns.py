"""Op patterns (patterns.py) on synthetic traces with hand-computed answers, and on the real twins of
traces/: detected on the slow variant, not on its fix."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import SAMPLE_TRACES, model_of
from tests.synth import Synth
from gapscope.analysis import analyze

BF = "c10::BFloat16"
H = 1.15  # thresholds.CLOCK_HEADROOM


def _op(s, ts, name, dims, types, kernel, k_ts, k_dur):
    s.cpu_op(name, ts, 9, **{"Input Dims": dims, "Input type": types})
    s.launch(ts=ts + 1, dur=2, kernel=kernel, k_ts=k_ts, k_dur=k_dur)


def _kinds(a):
    return {p.kind: p for p in a.patterns}


def _attention(fused: bool):
    s = Synth()
    if fused:
        q = [1, 16, 1024, 128]
        _op(s, 0, "aten::_scaled_dot_product_flash_attention", [q, q, q], [BF] * 3, "flash", 100, 60)
    else:
        _op(s, 0, "aten::bmm", [[16, 1024, 128], [16, 128, 1024]], [BF, BF], "qk", 100, 30)
        _op(s, 20, "aten::_softmax", [[16, 1024, 1024], [], []], [BF, "Scalar", "Scalar"], "softmax", 140, 40)
        _op(s, 40, "aten::bmm", [[16, 1024, 1024], [16, 1024, 128]], [BF, BF], "pv", 190, 30)
    _op(s, 60, "aten::mm", [[1024, 2048], [2048, 2048]], [BF, BF], "mlp", 300, 100)
    return analyze(model_of(s))


def test_eager_attention_on_a_synthetic_trace():
    """QK^T, softmax over [16, 1024, 1024] and PV: 100 µs of kernels; the fix keeps the two matmuls (60 µs)."""
    a = _attention(fused=False)
    p = _kinds(a)["eager-attention"]
    assert (p.calls, p.kernel_ns, p.after_ns, p.saving_ns) == (3, 100_000, 60_000, 40_000)
    assert {o["op"] for o in p.ops} == {"aten::bmm", "aten::_softmax"}
    assert "scaled_dot_product_attention" in p.fix
    # the softmax's host dispatch goes with it (its outermost op)
    assert [a.model.names[a.model.name_id[e]] for e in p.host_removed.tolist()] == ["aten::_softmax"]
    (f,) = [f for f in a.findings if f.cause == "pattern"]
    assert f.evidence["pattern"] == "eager-attention" and f.evidence["kernel_saving_us"] == 40.0
    assert f.evidence["share_of_kernel_pct"] == pytest.approx(50.0)


def _masked_attention():
    """The eager attention of ``_attention`` with an additive mask: ``eager_mask`` (t 0-60 µs, inside ``model``)
    builds the [1, 1, 1024, 1024] mask (a causal ``le`` of its [1,1,1,1024] and [1,1,1024,1] pieces and a
    ``where``, 2 kernels of 3 µs, and a scalar copy with a cudaStreamSynchronize of 20 µs); ``find_packed``
    (t 70-90) reads [1, 1024] positions only; then, in the layer frame ``attn`` (t 100-200), QK^T, the mask add
    ``aten::add [[1,16,1024,1024],[1,1,1024,1024]]`` (20 µs), softmax and PV."""
    s = Synth()
    with s.frame("model", 0, 400):
        with s.frame("eager_mask", 0, 60):
            _op(s, 5, "aten::le", [[1, 1, 1, 1024], [1, 1, 1024, 1]], ["long int", "long int"], "le", 500, 3)
            s.runtime("cudaStreamSynchronize", 20, 20)
            _op(s, 45, "aten::where", [[1, 1, 1024, 1024], [], []], ["bool", BF, "Scalar"], "where", 510, 3)
        with s.frame("find_packed", 70, 20):
            _op(s, 72, "aten::ne", [[1, 1024], []], ["long int", "Scalar"], "ne", 520, 2)
        with s.frame("attn", 100, 100):
            _op(s, 100, "aten::bmm", [[16, 1024, 128], [16, 128, 1024]], [BF, BF], "qk", 600, 30)
            _op(s, 120, "aten::add", [[1, 16, 1024, 1024], [1, 1, 1024, 1024], []], [BF, BF, "Scalar"], "add",
                640, 20)
            _op(s, 140, "aten::_softmax", [[1, 16, 1024, 1024], [], []], [BF, "Scalar", "Scalar"], "softmax", 670, 40)
            _op(s, 160, "aten::bmm", [[16, 1024, 1024], [16, 1024, 128]], [BF, BF], "pv", 720, 30)
    return analyze(model_of(s))


def test_eager_attention_removes_the_mask_builder():
    """The mask's shape [1, 1, 1024, 1024] is the add's operand broadcast over the 16 heads; ``le`` (its pieces)
    and ``where`` (its shape) are mask ops, ``eager_mask`` their innermost common frame without a pattern call or
    a matmul (``model`` holds the layer): it goes whole, 60 µs of host time with its sync and its 2 kernels.
    ``find_packed`` (no mask shape) stays. The score ops' own kernels: 30 + 20 + 40 + 30 = 120 µs, the matmuls' 60
    kept."""
    a = _masked_attention()
    m = a.model
    p = _kinds(a)["eager-attention"]
    assert (p.calls, p.kernel_ns, p.after_ns) == (4, 120_000, 60_000)
    mk = p.mask
    assert mk["shape"] == [1, 1, 1024, 1024]
    assert mk["frames"] == [{"name": "eager_mask", "calls": 1}]
    assert (mk["host_ns"], mk["syncs"], mk["kernels"].size, mk["kernel_ns"]) == (60_000, 1, 2, 6_000)
    assert sorted(m.names[m.name_id[k]] for k in mk["kernels"].tolist()) == ["le", "where"]
    # the builder frame is in the removed host time, and its kernels run for 0 in the replay
    assert int(mk["removed"][0]) in p.host_removed.tolist()
    gone = dict(zip(p.kernels.tolist(), p.kernel_after_ns.tolist()))
    assert all(gone[k] == 0 for k in mk["kernels"].tolist())
    assert "find_packed" not in {m.names[m.name_id[e]] for e in p.host_removed.tolist()}
    assert "eager_mask" in p.fix and "is_causal" in p.fix
    (f,) = [f for f in a.findings if f.cause == "pattern"]
    assert f.evidence["mask"] == {"shape": [1, 1, 1024, 1024], "frames": [{"name": "eager_mask", "calls": 1}],
                                  "host_calls": 1, "host_us": 60.0, "host_per_step_us": 60.0, "syncs": 1,
                                  "gpu_launches": 2, "kernel_us": 6.0}
    # without a mask add there is no mask to build: the plain pattern has none
    assert _kinds(_attention(fused=False))["eager-attention"].mask is None


def test_mask_builder_on_the_eager_llama_prefill():
    """traces/hf-attn.prefill_eager: the mask added to the [16, 1024, 1024] scores is [1, 1, 1024, 1024]; its
    builder is masking_utils' ``eager_mask`` (361 µs of host time in the measured step, the torch.tensor(min_dtype)
    copy's cudaStreamSynchronize, 10 GPU launches); ``find_packed_sequence_indices``, which sdpa keeps, is not
    removed."""
    from gapscope.trace import load

    a = analyze(load(str(SAMPLE_TRACES / "hf-attn.prefill_eager.json.gz"), no_cache=True))
    p = _kinds(a)["eager-attention"]
    mk = p.mask
    assert mk["shape"] == [1, 1, 1024, 1024]
    assert mk["frames"] == [{"name": "transformers/masking_utils.py(539): eager_mask", "calls": 1}]
    assert (mk["host_ns"], mk["syncs"], mk["kernels"].size) == (360_960, 1, 10)
    names = {a.model.names[a.model.name_id[e]] for e in p.host_removed.tolist()}
    assert not any("find_packed_sequence_indices" in n for n in names)


def test_fused_attention_is_no_pattern():
    assert "eager-attention" not in _kinds(_attention(fused=True))


def _mm(dtype, kernel, k, n, dur, s=None, ts=0):
    s = s or Synth()
    _op(s, ts, "aten::mm", [[1024, k], [k, n]], [dtype, dtype], kernel, 100 + ts * 10, dur)
    return s


def test_fp32_matmul_without_tf32():
    """A float32 [1024,1024] x [1024,1024] on an sgemm kernel for 100 µs: TF32 leaves 100 x 67 / 494.5 µs (above
    its 3.78 µs floor)."""
    a = analyze(model_of(_mm("float", "ampere_sgemm_128x64_nn", 1024, 1024, 100)))
    p = _kinds(a)["fp32-matmul"]
    # both fixes, each with its own estimate: bf16 autocast leaves 100 x 67 / 989 µs (above its bf16 floor of
    # 2 x 1024^3 FLOPs at 989 x 1.15 TFLOP/s = 1.888 µs), TF32 100 x 67 / 494.5 µs; bf16 leaves less: recommended
    assert [(x["fix"], x["after_ns"], x["recommended"]) for x in p.fixes] == [
        ("bf16", int(100_000 * 67.0 / 989.0), True), ("tf32", int(100_000 * 67.0 / 494.5), False)]
    assert p.after_ns == int(100_000 * 67.0 / 989.0) and "allow_tf32" in p.fix and p.fix.startswith("Run the model in bf16")
    assert p.title.startswith("fp32 without TF32")
    (f,) = [f for f in a.findings if f.cause == "pattern"]
    assert [x["fix"] for x in f.evidence["fixes"]] == ["bf16", "tf32"]
    assert f.evidence["fixes"][1]["kernel_saving_us"] == (100_000 - int(100_000 * 67.0 / 494.5)) / 1e3
    # a 20 µs call: scaled, bf16 would take 1.35 µs, under its compute floor: the floor is what bf16 leaves
    a = analyze(model_of(_mm("float", "ampere_sgemm_128x64_nn", 1024, 1024, 20)))
    p = _kinds(a)["fp32-matmul"]
    assert p.fixes[0]["fix"] == "bf16" and p.fixes[0]["after_ns"] == int(2 * 1024 ** 3 / (989.0 * H * 1e3))
    # already TF32: bf16 halves it
    a = analyze(model_of(_mm("float", "sm80_xmma_gemm_tf32f32_tf32f32_f32", 1024, 1024, 100)))
    p = _kinds(a)["fp32-matmul"]
    assert p.after_ns == int(100_000 * 494.5 / 989.0) and p.title.startswith("fp32 matmuls")
    assert "fp32-matmul" not in _kinds(analyze(model_of(_mm(BF, "nvjet", 1024, 1024, 100))))


def test_bf16_after_ns_exact():
    """The bf16 estimate by itself: scaled by fp32 -> bf16 (67 -> 989 TFLOP/s), never below the bf16 floor (FLOPs
    at 989 x 1.15, HBM bytes halved at 4800 GB/s), never above what the call took."""
    from gapscope.analysis.floors import peaks_for
    from gapscope.analysis.patterns import bf16_after_ns

    p = peaks_for("NVIDIA H200")
    assert bf16_after_ns(98_900.0, 67.0, 0.0, 0.0, p) == pytest.approx(6_700.0)  # the ratio alone
    # memory-bound: 96 MB read in fp32, 48 MB in bf16: 10 µs at 4.8 TB/s, above the scaled 6.7 µs
    assert bf16_after_ns(98_900.0, 67.0, 0.0, 96e6, p) == pytest.approx(10_000.0)
    # compute floor: 1.1375e10 FLOPs at 1137.35 TFLOP/s = 10 µs
    assert bf16_after_ns(98_900.0, 67.0, 1.13735e10, 0.0, p) == pytest.approx(10_000.0)
    # never slower than it ran
    assert bf16_after_ns(5_000.0, 67.0, 1.13735e10, 0.0, p) == 5_000.0


def test_unaligned_matmul_dims():
    """[1024,2048] x [2048,5633] bf16 at 200 µs next to an aligned [1024,2048] x [2048,5632] at 40 µs: the fix
    leaves the odd one at the aligned one's floor/time ratio."""
    s = _mm(BF, "cutlass_75_align1", 2048, 5633, 200)
    _mm(BF, "nvjet_aligned", 2048, 5632, 40, s=s, ts=30)
    a = analyze(model_of(s))
    p = _kinds(a)["unaligned-matmul"]
    fl_bad = 2 * 1024 * 2048 * 5633 / (989.0 * H * 1e3)
    fl_good = 2 * 1024 * 2048 * 5632 / (989.0 * H * 1e3)
    assert p.calls == 1 and p.kernel_ns == 200_000
    assert p.after_ns == pytest.approx(fl_bad * 40_000 / fl_good, abs=1)
    assert "5633 -> 5696" in p.fix
    s = _mm(BF, "nvjet_aligned", 2048, 5632, 40)
    assert "unaligned-matmul" not in _kinds(analyze(model_of(s)))


def test_dtype_round_trip_copies():
    """.float() then .to(bf16) of a [1, 1024, 2048] tensor (8 MB and 4 MiB): both copies, one round trip."""
    s = Synth()
    d = [[1, 1024, 2048], [1, 1024, 2048]]
    _op(s, 0, "aten::copy_", d, ["float", BF], "up", 100, 20)
    _op(s, 20, "aten::copy_", d, [BF, "float"], "down", 130, 10)
    p = _kinds(analyze(model_of(s)))["copies"]
    assert (p.calls, p.kernel_ns, p.after_ns) == (2, 30_000, 0)
    assert "1 shape(s) converted to float32 and back" in p.title
    s = Synth()
    _op(s, 0, "aten::copy_", [[1, 1024, 1024], [1, 1024, 1024]], [BF, BF], "small", 100, 20)  # 2 MiB
    assert "copies" not in _kinds(analyze(model_of(s)))


def _real(name):
    from gapscope.trace import load

    return analyze(load(SAMPLE_TRACES / f"{name}.json.gz"))


def test_eager_attention_on_the_real_twins():
    a = _real("hf-attn.prefill_eager")
    p = _kinds(a)["eager-attention"]
    assert "[16, 1024, 1024]" in p.title
    ops = {o["op"] for o in p.ops}
    assert {"aten::bmm", "aten::_softmax", "aten::copy_"} <= ops
    # more than a third of the kernel time; the fix leaves under a fifth of it
    total = int(a.model.dur_ns[a.call_floors.k].sum())
    assert p.kernel_ns > total / 3 and p.after_ns < p.kernel_ns / 5
    assert "eager-attention" not in _kinds(_real("hf-attn.prefill_sdpa"))


def test_unaligned_matmul_on_the_real_twins():
    p = _kinds(_real("hf-mlp.prefill_i5633"))["unaligned-matmul"]
    assert "5633" in p.title and any("cutlass_75" in o["kernel"] for o in p.ops)
    assert p.after_ns < p.kernel_ns / 3
    assert "unaligned-matmul" not in _kinds(_real("hf-mlp.prefill_i5632"))


def test_fp32_convolutions_on_the_real_twins():
    a = _real("resnet50.fp32")
    p = _kinds(a)["fp32-matmul"]
    assert p.title.startswith("fp32 without TF32") and "convolutions" in p.title
    assert any(o["op"] == "aten::cudnn_convolution" for o in p.ops)
    # the GPU-bound verdict points at the kernels, their floors and the pattern
    (v,) = a.verdicts
    assert v.kind == "gpu-bound" and "the top 5 kernels are" in v.reason and "1 pattern found" in v.reason
    assert "fp32-matmul" not in _kinds(_real("resnet50.bf16_cl"))


def test_mixtral_decode_gemv_has_its_hbm_floor():
    """[1,5632] x [5632,1024] bf16: 11.5 MB of weights, at least 2.4 µs at 4.8 TB/s (it was a 10 ns compute floor
    when every byte under twice the L2 was taken as free)."""
    a = _real("hf-mixtral.decode_eager")
    cf = a.call_floors
    i = next(j for j, sh in enumerate(cf.shapes) if sh and sh[:2] == [[1, 5632], [5632, 1024]])
    sel = (cf.shape == i) & cf.has & ~cf.resident
    assert sel.sum() > 0
    weights = 5632 * 1024 * 2
    assert np.all(cf.floor[sel] >= weights / 4800.0) and np.all(cf.floor[sel] <= (weights + 2 * 5632 * 2 + 2048) / 4800.0)
    # it launches a split-K GEMM and its reduction: each call's kernels together take at least the call's floor
    calls, inv = np.unique(cf.call[sel], return_inverse=True)
    took = np.bincount(inv, weights=a.model.dur_ns[cf.k[sel]])
    fl = np.zeros(calls.size)
    fl[inv] = cf.floor[sel]
    assert np.all(took >= fl)


def test_the_kernels_view_shows_achieved_figures_and_the_pattern():
    """Explorer view 2 on the i5633 prefill: the peak and achieved columns, and the top kernel's info box with its
    achieved figures and the unaligned-matmul pattern it belongs to."""
    from tests.helpers.app import view_text

    txt, sc = view_text(SAMPLE_TRACES / "hf-mlp.prefill_i5633.json.gz", "2")
    k = sc.analysis.kernels[0]
    assert "cutlass_75" in k.name
    assert "peak" in txt and "achieved" in txt
    assert f"{k.peak_pct:.0f}%" in txt and "TFLOP/s" in txt
    assert "pattern: matmul dimensions not multiples of 8" in txt


def _sgd(foreach: bool, params: int = 20):
    """One Optimizer.step#SGD.step range: per parameter an aten::mul_ and an aten::add_ on a [1024, 1024] fp32
    (4 MB each, 4 µs kernels), or one aten::_foreach_add_ over them all."""
    s = Synth()
    s.annotation("Optimizer.step#SGD.step", 0, 1000)
    p = [1024, 1024]
    if foreach:
        s.cpu_op("aten::_foreach_add_", 10, 50, **{"Input Dims": [[p] * params, [p] * params], "Input type": [
            "GenericList[Tensor]", "GenericList[Tensor]"]})
        s.launch(ts=11, dur=2, kernel="multi_tensor_apply", k_ts=100, k_dur=40)
    else:
        t = 10
        for i in range(params):
            for j, op in enumerate(("aten::mul_", "aten::add_")):
                s.cpu_op(op, t, 9, **{"Input Dims": [p, p] if op == "aten::add_" else [p, []],
                                      "Input type": ["float", "float"] if op == "aten::add_" else ["float", "Scalar"]})
                s.launch(ts=t + 1, dur=2, kernel=op[6:-1], k_ts=100 + 10 * (2 * i + j), k_dur=4)
                t += 10
    return analyze(model_of(s))


def test_optimizer_without_foreach():
    """40 per-parameter calls in one step, 160 µs of kernels: each kernel at most at its op's floor, the 40 ops'
    host dispatch removed. The floors see one [1024, 1024] fp32 signature, and an input like an output one of the
    last calls wrote is taken as in the L2 (one input per earlier output): mul_0 reads 4 MB (873 ns), add_0 8 - 4
    MB (873 ns); every later call finds all its inputs among the outputs before it, so it has no floor and keeps
    its 4 µs (the floors stay lower bounds; the estimate claims nothing for those)."""
    a = _sgd(foreach=False)
    p = _kinds(a)["optimizer"]
    assert (p.calls, p.kernel_ns) == (40, 160_000)
    mb4 = 1024 * 1024 * 4
    assert p.after_ns == 2 * int(mb4 / 4800.0) + 38 * 4000
    assert p.host_removed.size == 40 and "foreach=True" in p.fix
    assert "40 per-parameter op calls per optimizer step (2 kinds of op, 1 step)" in p.title
    assert "optimizer" not in _kinds(_sgd(foreach=True))
    assert "optimizer" not in _kinds(_sgd(foreach=False, params=4))  # 8 calls: below optimizer_min_ops


def test_optimizer_without_foreach_on_real_training_traces(shared_traces):
    from gapscope.trace import load

    a = analyze(load(shared_traces / "thirdparty" / "kineto__tbp_2021-06_resnet50_nw0_worker0.1623143089861.pt.trace.json.gz"))
    p = _kinds(a)["optimizer"]
    assert "SGD.step runs 483 per-parameter op calls per optimizer step" in p.title
    assert {o["op"] for o in p.ops} == {"aten::add_", "aten::mul_"}
    # ROCm's minitoy trainer steps SGD with foreach: no pattern
    b = analyze(load(shared_traces / "thirdparty" / "hta__amd_mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert "optimizer" not in _kinds(b)


LOOP = "mymoe.py(10): experts_loop"
BODY = ["aten::where", "aten::index", "aten::linear", "aten::mul", "aten::index_add_"]


def _moe(kind: str = "loop", k_dur: float = 1.0):
    """``mymodel.py(5): forward`` calls the experts frame twice (two layers). ``loop``: per call an
    ``aten::nonzero`` (one kernel, a cudaStreamSynchronize inside), then 3 experts, each ``where, index, linear,
    mul, index_add_`` (one ``k_dur`` µs kernel each, launched by a 5 µs cudaLaunchKernel; ``where`` syncs too):
    16 kernels and 4 syncs per call, 3 of them in the loop. ``nosync``: the same loop sized without a sync
    (``topk`` for ``nonzero``, a ``where`` that does not sync). ``onesync``: the ``nonzero`` sync only, none per iteration (a
    loop over layers with one sync in the step looks like this). ``batched``:
    per call ``index, bmm, bmm, index_add_`` (4 kernels), no sync."""
    s = Synth()
    t = 0

    def op(name, kernel=True, sync=False):
        nonlocal t
        s.cpu_op(name, t, 9, **{"Input Dims": [[4, 8]], "Input type": ["float"]})
        if kernel:
            s.launch(ts=t + 1, dur=5, kernel=name[6:] + "_kernel", k_ts=t + 7, k_dur=k_dur)
        if sync:
            s.runtime("cudaStreamSynchronize", t + 6.5 if kernel else t + 1, 0.4)
        t += 10

    with s.frame("mymodel.py(5): forward", 0, 400):
        for layer in range(2):
            t = 1 + 200 * layer
            with s.frame(LOOP, t - 0.5, 190):
                if kind == "batched":
                    for name in ("aten::index", "aten::bmm", "aten::bmm", "aten::index_add_"):
                        op(name)
                    continue
                op("aten::nonzero" if kind != "nosync" else "aten::topk", sync=kind != "nosync")
                for _ in range(3):
                    for name in BODY:  # where(mask) syncs, as it sizes its output (nonzero)
                        op(name, sync=kind == "loop" and name == "aten::where")
    return analyze(model_of(s))


def test_tiny_kernel_loop_on_a_synthetic_trace():
    """2 calls x 16 one-µs kernels under 5 µs launch calls, 4 syncs per call (3 in the loop), the 5-op body 3x per call: the
    experts frame is the pattern, not the model frame around it (which holds the same loop and more)."""
    a = _moe()
    p = _kinds(a)["tiny-kernel-loop"]
    ev = p.evidence
    assert ev["frame"] == LOOP and ev["frame_calls"] == 2
    assert (p.calls, p.kernel_ns, ev["kernels_per_call"]) == (32, 32_000, 16)
    assert (ev["kernel_median_us"], ev["launch_median_us"], ev["kernels_shorter_than_launch_pct"]) == (1.0, 5.0, 100.0)
    assert ev["syncs_per_call"] == 4 and set(ev["sync_ops"]) == {"aten::nonzero", "aten::where"}
    assert ev["syncs_in_loop_per_call"] == 3  # the wheres; the nonzero's sync comes before the loop
    assert (ev["repeated_ops"], ev["repeats_per_call"], ev["calls_with_repeat"]) == (BODY, 3, 2)
    assert "batched_mm" in p.fix and "repeats 3x per call" in p.title
    assert [q.evidence.get("frame") for q in a.patterns if q.kind == "tiny-kernel-loop"] == [LOOP]
    # the finding carries no kernel-time estimate: its projected saving is the frame's fused what-if
    (f,) = [f for f in a.findings if (f.evidence or {}).get("pattern") == "tiny-kernel-loop"]
    assert f.kernels.size == 0 and "after_us" not in f.evidence


def test_no_tiny_kernel_loop_on_the_fixed_twins():
    assert "tiny-kernel-loop" not in _kinds(_moe("batched"))  # 4 kernels per call, no sync
    assert "tiny-kernel-loop" not in _kinds(_moe("nosync"))  # no data-dependent sync
    # 1 sync per call for 3 iterations: not the experts frame; the model frame around it, whose 2 layers repeat
    # back to back with a sync each, is called once (loop_min_calls): a step loop, not a loop to batch
    assert "tiny-kernel-loop" not in _kinds(_moe("onesync"))
    assert "tiny-kernel-loop" not in _kinds(_moe("loop", k_dur=8.0))  # kernels longer than their launch


def test_tiny_kernel_loop_on_the_real_mixtral_twins():
    """HF Mixtral decode with the eager experts loop: modeling_mixtral.py(69) forward, 8 calls per step (4
    steps), 40 kernels per call (median 1.5 µs against a 5.4 µs launch call), 11 syncs per call, the per-expert
    body twice per call (top-2 of one token); its figure is the frame's fused what-if. The batched_mm twin has
    none: its experts frame launches 11 kernels per call, no sync, no repeated sequence."""
    from gapscope.analysis.patterns_loop import loop_stats

    frame = "transformers/models/mixtral/modeling_mixtral.py(69): forward"
    a = _real("hf-mixtral.decode_eager")
    (p,) = [q for q in a.patterns if q.kind == "tiny-kernel-loop"]
    ev = p.evidence
    assert ev["frame"] == frame and (ev["frame_calls"], ev["calls_per_step"]) == (32, 8.0)
    assert (ev["kernels_per_call"], p.calls, ev["syncs_per_call"], ev["repeats_per_call"]) == (40, 1280, 11, 2)
    assert ev["kernel_median_us"] < ev["launch_median_us"]
    assert ev["repeated_ops"][0] == "aten::eq" and ev["repeated_ops"][-1] == "aten::index_add_"
    assert {"aten::linear", "aten::index", "aten::where"} <= set(ev["repeated_ops"])
    (f,) = [f for f in a.findings if (f.evidence or {}).get("pattern") == "tiny-kernel-loop"]
    w = a.projection.frame_whatif(f.id)
    assert w is not None and w.frame == frame and w.saving_ns > 0
    assert a.projection.best_ns(f.id) == w.saving_ns
    b = _real("hf-mixtral.decode_batched")
    assert "tiny-kernel-loop" not in _kinds(b)
    st = loop_stats(b, "transformers/integrations/moe.py(112): batched_mm_experts_forward")
    assert (st["kernels_per_call"], st["syncs_per_call"], st["block"]) == (11, 0, [])


def test_tandem_repeat():
    from gapscope.analysis.patterns_loop import tandem_repeat

    # the block covering the most, back to back: (b, c, d) x3 covers 9 of the 11
    seq = ("a", "b", "c", "d", "b", "c", "d", "b", "c", "d", "e")
    assert tandem_repeat(seq, 3, 2) == (("b", "c", "d"), 3, 1)
    assert tandem_repeat(seq * 2, 3, 2) == (seq, 2, 0)  # the whole sequence twice covers more...
    assert tandem_repeat(seq * 2, 3, 2, max_block=8) == (("b", "c", "d"), 3, 1)  # ... unless the body is capped
    assert tandem_repeat(("a", "b", "c", "a", "b", "x"), 3, 2) is None  # not back to back
    assert tandem_repeat(("a", "b", "a", "b"), 3, 2) is None  # a block shorter than min_block


def test_the_explorer_shows_the_tiny_kernel_loop():
    """Explorer on the Mixtral eager decode: view 2's top kernel (a GEMV the experts loop launches) names the
    pattern without claiming kernel time (its saving is in its finding)."""
    from tests.helpers.app import view_text

    txt, _ = view_text(SAMPLE_TRACES / "hf-mixtral.decode_eager.json.gz", "2")
    assert "pattern: Python loop of tiny kernels" in txt
    assert "projected in its finding)" in " ".join(txt.split())  # wrapped at the panel's width


def test_in_calls_is_the_last_call_started_before_each_time():
    """``patterns_loop.in_calls`` (two binary searches per call) against its definition, per time: the last call
    starting at or before it, kept when the time is before that call's end. Random disjoint calls, some of zero
    length or touching, and times on their edges."""
    from gapscope.analysis.patterns_loop import in_calls

    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(0, 12))
        gaps = rng.integers(0, 4, n)  # 0: a call starting where the one before ended
        durs = rng.integers(0, 5, n)  # 0: an empty call
        s = np.cumsum(gaps + np.r_[0, durs[:-1]]) if n else np.zeros(0, np.int64)
        e = s + durs
        ts = np.sort(np.r_[rng.integers(-2, int(e[-1]) + 3 if n else 3, 15), s, e]).astype(np.int64)
        pos, call = in_calls(s, e, ts)
        want_pos, want_call = [], []
        for p, t in enumerate(ts.tolist()):
            j = int(np.searchsorted(s, t, side="right")) - 1
            if j >= 0 and t < e[j]:
                want_pos.append(p)
                want_call.append(j)
        o = np.argsort(pos, kind="stable")
        assert pos[o].tolist() == want_pos and call[o].tolist() == want_call
