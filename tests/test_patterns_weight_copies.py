"""The ``copies`` pattern in the expert's words: autocast re-casting fp32 weights inside every matmul
(``weight_casts``: cast the model once instead) and ``w.t().contiguous()`` in a forward (``weight_transposes``:
store the weight transposed once)."""

from __future__ import annotations

import contextlib

import pytest

from tests.helpers import SAMPLE_TRACES, model_of
from tests.synth import Synth
from gapscope.analysis import analyze

BF = "c10::BFloat16"
CAST_ONCE = ("Cast the model to bf16 once (model.to(torch.bfloat16)) instead of letting autocast cast the fp32 "
             "weights on every forward")
TRANSPOSED = "the weight is transposed and copied on every call: store it transposed once"
AVOID = "Avoid the copies: keep one dtype end to end"


def _copies(s: Synth):
    return next((p for p in analyze(model_of(s)).patterns if p.kind == "copies"), None)


def _cast(s: Synth, ts: float, dims: list, k_ts: float, k_dur: float, to: str = BF) -> None:
    """torch's record of an autocast cast: aten::to > aten::_to_copy > aten::copy_, the copy's kernel."""
    code = "15" if to == BF else "5"
    s.cpu_op("aten::to", ts, 20, **{"Input Dims": [dims, [], [], [], []],
                                    "Input type": ["float", "Scalar", "Scalar", "Scalar", ""],
                                    "Concrete Inputs": ["", code, "False", "False", ""]})
    s.cpu_op("aten::_to_copy", ts + 1, 18, **{"Input Dims": [dims, [], [], [], [], [], []],
                                              "Input type": ["float", "Scalar", "", "", "", "Scalar", ""],
                                              "Concrete Inputs": ["", code, "", "", "", "False", ""]})
    s.cpu_op("aten::copy_", ts + 2, 15, **{"Input Dims": [dims, dims, []], "Input type": [to, "float", "Scalar"]})
    s.launch(ts=ts + 3, dur=2, kernel="direct_copy_kernel", k_ts=k_ts, k_dur=k_dur)


def _autocast_linears(layers: int = 2, to: str = BF, act: list | None = None) -> Synth:
    """``layers`` fp32 ``aten::linear`` calls of x [1, 16, 4096] by a [4096, 4096] weight under autocast: the
    weight (32 MiB as bf16, above the 4 MiB large-copy threshold) and the activation cast inside each, then the
    GEMM (launched from the bf16 aten::mm the linear calls)."""
    s = Synth()
    x, w = act or [1, 16, 4096], [4096, 4096]
    for j in range(layers):
        t0, k0 = 200 * j, 2000 + 200 * j
        s.cpu_op("aten::linear", t0, 150, **{"Input Dims": [x, w, []], "Input type": ["float", "float", ""],
                                             "Concrete Inputs": ["", "", ""]})
        _cast(s, t0 + 1, w, k0, 40, to)  # the weight
        _cast(s, t0 + 30, x, k0 + 50, 2, to)  # the activation
        s.cpu_op("aten::mm", t0 + 60, 30, **{"Input Dims": [[16, 4096], [4096, 4096]], "Input type": [to, to]})
        s.launch(ts=t0 + 61, dur=5, kernel="nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", k_ts=k0 + 60, k_dur=20)
    return s


def test_autocast_weight_casts_are_named_with_their_fix():
    p = _copies(_autocast_linears())
    assert p is not None
    wc = p.evidence["weight_casts"]
    # the two weight casts (32 MiB of bf16 each); the activation casts (128 KiB) are under the threshold
    assert wc == {"calls": 2, "bytes": 2 * 4096 * 4096 * 2, "ops": ["aten::linear"], "most": True, "to": "bf16"}
    assert all(type(v) is int for v in (wc["calls"], wc["bytes"])) and all(type(o) is str for o in wc["ops"])
    assert p.fix.startswith(CAST_ONCE)
    assert AVOID in p.fix  # the rest of the advice kept
    assert "weight_transposes" not in p.evidence
    import json

    json.dumps(p.evidence)  # JSON-able


def test_fp16_autocast_names_fp16():
    p = _copies(_autocast_linears(to="c10::Half"))
    assert p.evidence["weight_casts"]["calls"] == 2
    assert p.fix.startswith("Cast the model to fp16 once (model.to(torch.float16))")


def test_activation_casts_are_not_weight_casts():
    """Activation casts larger than the weight's (x [1, 8192, 4096]: 64 MiB as bf16, the weight 32 MiB) are most
    of the copied bytes: the weight casts are counted, the advice stays the general one."""
    p = _copies(_autocast_linears(act=[1, 8192, 4096]))  # 64 MiB of bf16 per activation cast
    wc = p.evidence["weight_casts"]
    assert wc["calls"] == 2 and wc["bytes"] == 2 * 4096 * 4096 * 2
    assert p.calls == 4  # both kinds of cast are large copies
    assert not p.fix.startswith("Cast the model") and p.fix.startswith(AVOID)


def test_a_plain_round_trip_has_no_weight_casts():
    """.float() then .to(bf16) outside any matmul: no weight_casts, the advice as before."""
    s = Synth()
    d = [[1, 1024, 2048], [1, 1024, 2048]]
    s.cpu_op("aten::copy_", 0, 9, **{"Input Dims": d, "Input type": ["float", BF]})
    s.launch(ts=1, dur=2, kernel="up", k_ts=100, k_dur=20)
    s.cpu_op("aten::copy_", 20, 9, **{"Input Dims": d, "Input type": [BF, "float"]})
    s.launch(ts=21, dur=2, kernel="down", k_ts=130, k_dur=10)
    p = _copies(s)
    assert p is not None and p.evidence == {} and p.fix.startswith(AVOID)


def _transposing_forward(calls: int, transposed: bool = True, cached_after: int | None = None) -> Synth:
    """A user ``forward`` doing ``x @ self.w.t().contiguous()`` with w [1024, 4096] fp32 (16 MiB): contiguous >
    clone > copy_ of the transposed [4096, 1024] view, then the mm. ``cached_after``: the calls after that many
    reuse the copy (only the mm)."""
    s = Synth()
    for j in range(calls):
        t0 = 300 * j
        if cached_after is not None and j >= cached_after:
            with s.frame("model.py(12): forward", t0, 200):
                s.cpu_op("aten::mm", t0 + 70, 20, **{"Input Dims": [[16, 4096], [4096, 1024]],
                                                      "Input type": ["float", "float"]})
                s.launch(ts=t0 + 71, dur=2, kernel="sgemm", k_ts=5100 + 300 * j, k_dur=20)
            continue
        with s.frame("model.py(12): forward", t0, 200):
            st = [[1024, 1], [1, 4096]] if transposed else [[1024, 1], [1024, 1]]
            s.cpu_op("aten::contiguous", t0 + 1, 60, **{"Input Dims": [[4096, 1024], []],
                                                         "Input type": ["float", "Scalar"],
                                                         "Input Strides": [st[1], []]})
            s.cpu_op("aten::clone", t0 + 2, 58, **{"Input Dims": [[4096, 1024], []], "Input type": ["float", ""],
                                                    "Input Strides": [st[1], []]})
            s.cpu_op("aten::copy_", t0 + 10, 40, **{"Input Dims": [[4096, 1024], [4096, 1024], []],
                                                     "Input type": ["float", "float", "Scalar"],
                                                     "Input Strides": [st[0], st[1], []]})
            s.launch(ts=t0 + 11, dur=2, kernel="transpose_copy", k_ts=5000 + 300 * j, k_dur=30)
            s.cpu_op("aten::mm", t0 + 70, 20, **{"Input Dims": [[16, 4096], [4096, 1024]],
                                                  "Input type": ["float", "float"]})
            s.launch(ts=t0 + 71, dur=2, kernel="sgemm", k_ts=5100 + 300 * j, k_dur=20)
    return s


def test_weight_transposed_on_every_call():
    p = _copies(_transposing_forward(3))
    assert p is not None
    wt = p.evidence["weight_transposes"]
    assert wt == {"calls": 3, "bytes": 3 * 4096 * 1024 * 4, "ops": ["aten::contiguous"],
                  "frames": ["model.py(12): forward"]}
    assert TRANSPOSED in p.fix and AVOID in p.fix
    assert "weight_casts" not in p.evidence


def test_a_contiguous_copy_that_is_not_transposed_is_no_weight_transpose():
    p = _copies(_transposing_forward(3, transposed=False))
    assert p is not None and "weight_transposes" not in p.evidence and TRANSPOSED not in p.fix


def test_a_transpose_cached_after_the_first_calls_is_not_every_call():
    p = _copies(_transposing_forward(3, cached_after=2))
    assert p is not None and p.calls == 2 and "weight_transposes" not in p.evidence


def test_the_real_autocast_trace_says_cast_the_model_once():
    """hf-autocast.prefill_autocast (H200): a Llama with fp32 weights under bf16 autocast. Its large copies are
    the weights' casts inside aten::linear, every one of them."""
    path = SAMPLE_TRACES / "hf-autocast.prefill_autocast.json.gz"
    if not path.exists():
        pytest.skip("no hf-autocast sample trace")
    from gapscope.trace import load

    a = analyze(load(path))
    p = next(p for p in a.patterns if p.kind == "copies")
    wc = p.evidence["weight_casts"]
    assert wc["calls"] == p.calls and wc["ops"] == ["aten::linear"]
    assert p.fix.startswith(CAST_ONCE)
    f = next(f for f in a.findings if (f.evidence or {}).get("pattern") == "copies")
    assert f.suggestion.startswith(CAST_ONCE)
    # its bf16 twin has no such copies
    b = analyze(load(SAMPLE_TRACES / "hf-autocast.prefill_bf16.json.gz"))
    assert not any("weight_casts" in p.evidence for p in b.patterns)


RECAST = "the weight is cast to bf16 on every call: store it in bf16 once (model.to(torch.bfloat16))"
CLONED = "the weight is copied on every call: use it as it is (drop the .contiguous()/.clone())"
FWD = "model.py(20): forward"


def _casting_forward(calls: int = 3, *, framed: bool = True, cached_after: int | None = None,
                     batch_varies: bool = False, clone: bool = False) -> Synth:
    """A user ``forward`` doing ``F.linear(x, self.w.to(torch.bfloat16))`` outside autocast, w [4096, 4096] fp32 (the
    copy 32 MiB of bf16): aten::to > aten::_to_copy > aten::copy_ of the weight, then the bf16 linear > mm.
    ``clone``: ``F.linear(x, self.w.clone())`` instead (aten::clone > aten::copy_, fp32). ``cached_after``: the
    calls after that many reuse the cast weight (only the linear). ``batch_varies``: the weight is stored bf16
    and the input x [1024 * (call + 1), 4096] fp32 is cast instead (an activation). ``framed``: inside the frame."""
    s = Synth()
    w = [4096, 4096]
    for j in range(calls):
        t0, k0 = 400 * j, 5000 + 400 * j
        x = [1024 * (j + 1), 4096] if batch_varies else [16, 4096]
        cm = s.frame(FWD, t0, 300) if framed else contextlib.nullcontext()
        with cm:
            if cached_after is None or j < cached_after:
                src = x if batch_varies else w
                if clone:
                    s.cpu_op("aten::clone", t0 + 1, 58, **{"Input Dims": [src, []], "Input type": ["float", ""],
                                                           "Input Strides": [[src[1], 1], []]})
                    s.cpu_op("aten::copy_", t0 + 10, 40, **{"Input Dims": [src, src, []],
                                                             "Input type": ["float", "float", "Scalar"],
                                                             "Input Strides": [[src[1], 1], [src[1], 1], []]})
                    s.launch(ts=t0 + 11, dur=2, kernel="direct_copy_kernel", k_ts=k0, k_dur=60)
                else:
                    _cast(s, t0 + 1, src, k0, 60)
            to = "float" if clone else BF
            s.cpu_op("aten::linear", t0 + 100, 80, **{"Input Dims": [x, w, []], "Input type": [to, to, ""],
                                                      "Concrete Inputs": ["", "", ""]})
            s.cpu_op("aten::mm", t0 + 110, 40, **{"Input Dims": [x, [4096, 4096]], "Input type": [to, to]})
            s.launch(ts=t0 + 111, dur=2, kernel="nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", k_ts=k0 + 100, k_dur=20)
    return s


def test_a_weight_cast_on_every_call_outside_autocast():
    p = _copies(_casting_forward(3))
    assert p is not None
    assert p.evidence["weight_recasts"] == {"calls": 3, "bytes": 3 * 4096 * 4096 * 2, "ops": ["aten::to"],
                                            "frames": [FWD], "to": "bf16"}
    assert not {"weight_casts", "weight_transposes", "weight_clones"} & set(p.evidence)
    assert f"In {FWD} {RECAST}" in p.fix
    assert AVOID in p.fix


def test_a_weight_cloned_on_every_call():
    p = _copies(_casting_forward(3, clone=True))
    assert p is not None
    assert p.evidence["weight_clones"] == {"calls": 3, "bytes": 3 * 4096 * 4096 * 4, "ops": ["aten::clone"],
                                           "frames": [FWD]}
    assert "weight_recasts" not in p.evidence and "weight_transposes" not in p.evidence
    assert f"In {FWD} {CLONED}" in p.fix


@pytest.mark.parametrize("kw", [dict(batch_varies=True), dict(framed=False), dict(cached_after=1),
                                dict(batch_varies=True, clone=True), dict(framed=False, clone=True),
                                dict(cached_after=1, clone=True)],
                         ids=["activation", "no-user-frame", "once", "activation-clone", "clone-no-frame",
                              "clone-once"])
def test_look_alikes_are_not_weight_copies(kw):
    """An activation (its shape changes with the batch, the linear's input, not its weight), a cast outside any
    user frame, a cast made once and kept: large copies, none of them a weight copied on every call."""
    p = _copies(_casting_forward(3, **kw))
    assert p is not None and p.calls >= 1
    assert not {"weight_recasts", "weight_clones"} & set(p.evidence), p.evidence
    assert RECAST not in p.fix and CLONED not in p.fix


def test_a_transposed_clone_is_a_transpose_not_a_plain_copy():
    p = _copies(_transposing_forward(3))
    assert "weight_transposes" in p.evidence and "weight_clones" not in p.evidence


@pytest.mark.parametrize("clone, words, head", [
    (False, f"The weight is cast to bf16 on every call in {FWD}: store it in bf16 once (model.to(torch.bfloat16))",
     "Store the weights in bf16 once"),
    (True, f"The weight is copied on every call in {FWD}: use it as it is (drop the .contiguous()/.clone())",
     "Use the weights as they are: no copy per call"),
], ids=["cast", "clone"])
def test_the_plan_words_the_action(clone, words, head):
    """The copies finding's action (its kind's change, and its headline) in the field's words."""
    from gapscope.analysis.plan import ACTION_KINDS, headline, plain
    from gapscope.analysis.thresholds import HEADLINE_MAX

    a = analyze(model_of(_casting_forward(4, clone=clone)))
    f = next(f for f in a.findings if (f.evidence or {}).get("pattern") == "copies")
    assert plain(ACTION_KINDS["kernels"].change(None, f)) == words
    assert plain(headline("kernels", None, f)) == head and len(head) <= HEADLINE_MAX


def test_the_real_cast_in_the_forward_trace_says_store_it_in_bf16_once():
    """mlp-wcast.fwd_cast (H200): 8 MLP blocks whose linear casts its fp32 weight to bf16 every forward, outside
    autocast: all 16 large copies are those casts, in the linear's forward; its twin stores the weights in bf16."""
    path = SAMPLE_TRACES / "mlp-wcast.fwd_cast.json.gz"
    if not path.exists():
        pytest.skip("no mlp-wcast sample trace")
    from gapscope.trace import load

    p = next(p for p in analyze(load(path)).patterns if p.kind == "copies")
    wr = p.evidence["weight_recasts"]
    assert wr["calls"] == p.calls == 16 and wr["to"] == "bf16" and wr["ops"] == ["aten::to"]
    assert len(wr["frames"]) == 1 and wr["frames"][0].endswith(": forward")
    assert not {"weight_casts", "weight_transposes", "weight_clones"} & set(p.evidence)
    b = analyze(load(SAMPLE_TRACES / "mlp-wcast.fwd_bf16.json.gz"))
    assert not any({"weight_recasts", "weight_clones"} & set(p.evidence) for p in b.patterns)
