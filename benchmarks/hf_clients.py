"""Real clients: Hugging Face ``transformers`` models and a torchvision ResNet-50, each a variant and its fix as two
phases of one ``capture run`` (so their un-profiled timings come from the same interleaved rounds).

Nothing is downloaded: models are built from configs with random weights. On CUDA they run in bf16 (ResNet: see
its phases); ``HF_CLIENTS_SIZE=tiny`` (the default without CUDA) gives small configs for a check on the CPU.

    python3 -m capture run benchmarks.hf_clients:mixtral  --name hf-mixtral --active 4    # decode_eager, decode_batched
    python3 -m capture run benchmarks.hf_clients:attention --name hf-attn                # prefill_eager, prefill_sdpa
    python3 -m capture run benchmarks.hf_clients:mlp_width --name hf-mlp                 # prefill_i5633, prefill_i5632
    python3 -m capture run benchmarks.hf_clients:sampling --name hf-sampling --active 4  # decode_host, decode_gpu
    python3 -m capture run benchmarks.hf_clients:generate --name hf-generate             # generate (top-p sampling)
    python3 -m capture run benchmarks.hf_clients:resnet   --name resnet50                # fp32, bf16_cl

What each pair is (the first phase is the variant, the second the fix a user would make):

- ``mixtral``: a Mixtral decode step (one token, batch 1, over a prefilled cache) with the experts as HF's eager
  Python loop over experts (``experts_implementation="eager"``: per layer a ``nonzero``, then per hit expert a
  ``where``, indexing, two linears and ``index_add_``) against HF's ``"batched_mm"``; same weights.
- ``attention``: a Llama prefill (batch 1, 1024 tokens) with ``attn_implementation="eager"`` (the score matrix
  ``[1,16,1024,1024]`` materialised, softmax in fp32) against ``"sdpa"``.
- ``mlp_width``: the same prefill (sdpa) with ``intermediate_size=5633`` (matmul dims not a multiple of 8) against
  5632.
- ``sampling``: a Llama decode step whose next token is drawn with top-p on the host (logits to numpy, sort, cumsum,
  draw, token back to the GPU) against the same top-p on the GPU (sort, cumsum, an exponential race: no sync).
- ``generate``: ``model.generate(do_sample=True, top_p=0.9, max_new_tokens=8)``, the library's own loop.
- ``resnet``: ResNet-50 inference, batch 32, 224x224, fp32 with TF32 off against bf16 channels_last.
"""

from __future__ import annotations

import os

LLAMA = {
    "full": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8, num_attention_heads=16,
                 num_key_value_heads=16, vocab_size=32000, batch=1, prompt=1024),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=4, vocab_size=256, batch=1, prompt=32),
}
LLAMA_DECODE = {
    "full": dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                 num_key_value_heads=8, vocab_size=32000, batch=4, prompt=256),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=256, batch=1, prompt=16),
}
MIXTRAL = {
    "full": dict(hidden_size=1024, intermediate_size=5632, num_hidden_layers=8, num_attention_heads=16,
                 num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2, vocab_size=32000, batch=1,
                 prompt=128),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, vocab_size=256, batch=1,
                 prompt=16),
}


def _env():
    import torch

    cuda = torch.cuda.is_available() and os.environ.get("HF_CLIENTS_CPU") != "1"
    size = os.environ.get("HF_CLIENTS_SIZE") or ("full" if cuda else "tiny")
    dev = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    return torch, size, dev, dtype


def _setup(table):
    """(torch, device, dtype, config kwargs, batch, prompt length, prompt ids) for a size table above."""
    torch, size, dev, dtype = _env()
    kw = dict(table[size])
    batch, prompt = kw.pop("batch"), kw.pop("prompt")
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, kw["vocab_size"], (batch, prompt), generator=g).to(dev)
    return torch, dev, dtype, kw, batch, prompt, ids


def _prefill(model, ids):
    """One forward over the prompt, no cache."""
    import torch

    return torch.no_grad()(lambda: model(input_ids=ids, use_cache=False).logits)


def _llama(cfg_kw, dev, dtype, attn="sdpa"):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(max_position_embeddings=4096, pad_token_id=0, bos_token_id=1, eos_token_id=2, **cfg_kw)
    config._attn_implementation = attn
    torch.manual_seed(0)
    with torch.device(dev):
        model = LlamaForCausalLM(config)
    return model.to(dtype=dtype).eval(), config


def _decoder(model, config, ids, prompt, pick):
    """A decode step over a prefilled DynamicCache, cropped back to the prompt every 64 steps; ``pick(logits)``
    chooses the next token of each sequence."""
    import torch
    from transformers import DynamicCache

    state = {}
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True, past_key_values=DynamicCache(config=config))
    state.update(cache=out.past_key_values, tok=out.logits[:, -1:].argmax(-1), n=0)

    @torch.no_grad()
    def decode():
        if state["n"] >= 64:
            state["cache"].crop(prompt)
            state["n"] = 0
        out = model(input_ids=state["tok"], past_key_values=state["cache"], use_cache=True)
        state["tok"] = pick(out.logits[:, -1, :])
        state["n"] += 1
        return state["tok"]

    return decode


def mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM

    torch, dev, dtype, kw, batch, prompt, ids = _setup(MIXTRAL)
    phases = {}
    base = None
    for label, impl in (("decode_eager", "eager"), ("decode_batched", "batched_mm")):
        config = MixtralConfig(max_position_embeddings=4096, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                               experts_implementation=impl, **kw)
        config._attn_implementation = "sdpa"
        torch.manual_seed(0)
        with torch.device(dev):
            model = MixtralForCausalLM(config)
        model = model.to(dtype=dtype).eval()
        if base is None:
            base = model.state_dict()
        else:
            model.load_state_dict(base)  # the same weights: the same routing, only the experts' code differs
        phases[label] = _decoder(model, config, ids, prompt, lambda logits: logits.argmax(-1, keepdim=True))
    return phases


def attention():
    torch, dev, dtype, kw, batch, prompt, ids = _setup(LLAMA)
    return {label: _prefill(_llama(kw, dev, dtype, attn)[0], ids)
            for label, attn in (("prefill_eager", "eager"), ("prefill_sdpa", "sdpa"))}


def mlp_width():
    torch, dev, dtype, kw, batch, prompt, ids = _setup(LLAMA)
    wide = kw["intermediate_size"]
    return {f"prefill_i{inter}": _prefill(_llama(dict(kw, intermediate_size=inter), dev, dtype, "sdpa")[0], ids)
            for inter in (wide + 1, wide)}


def _top_p_host(top_p=0.9, seed=11):
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)

    def pick(logits):
        x = logits.float().cpu().numpy()  # the sync and the copy to the host
        x = x - x.max(-1, keepdims=True)
        p = np.exp(x)
        p /= p.sum(-1, keepdims=True)
        order = np.argsort(-p, axis=-1)
        sp = np.take_along_axis(p, order, -1)
        keep = np.cumsum(sp, -1) - sp < top_p
        sp = np.where(keep, sp, 0.0)
        sp /= sp.sum(-1, keepdims=True)
        toks = [order[i, rng.choice(sp.shape[1], p=sp[i])] for i in range(sp.shape[0])]
        return torch.tensor(toks, device=logits.device).view(-1, 1)  # and the copy back

    return pick


def _top_p_gpu(top_p=0.9, seed=11):
    import torch

    gen = {}

    def pick(logits):
        if "g" not in gen:
            gen["g"] = torch.Generator(device=logits.device).manual_seed(seed)
        p = torch.softmax(logits.float(), -1)
        sp, order = torch.sort(p, -1, descending=True)
        keep = sp.cumsum(-1) - sp < top_p
        sp = sp.masked_fill(~keep, 0.0)
        q = torch.empty_like(sp).exponential_(generator=gen["g"])  # argmax(p / q) draws from p, without a sync
        choice = (sp / q).argmax(-1, keepdim=True)
        return order.gather(-1, choice)

    return pick


def sampling():
    torch, dev, dtype, kw, batch, prompt, ids = _setup(LLAMA_DECODE)
    phases = {}
    for label, pick in (("decode_host", _top_p_host()), ("decode_gpu", _top_p_gpu())):
        model, config = _llama(kw, dev, dtype, "sdpa")
        phases[label] = _decoder(model, config, ids, prompt, pick)
    return phases


def generate():
    torch, dev, dtype, kw, batch, prompt, ids = _setup(LLAMA_DECODE)
    model, _ = _llama(kw, dev, dtype, "sdpa")
    mask = torch.ones_like(ids)

    @torch.no_grad()
    def gen():
        return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, min_new_tokens=8,
                              do_sample=True, top_p=0.9, pad_token_id=0)

    return {"generate": gen}


def resnet():
    import torch
    import torchvision

    cuda = torch.cuda.is_available() and os.environ.get("HF_CLIENTS_CPU") != "1"
    dev = torch.device("cuda" if cuda else "cpu")
    tiny = (os.environ.get("HF_CLIENTS_SIZE") or ("full" if cuda else "tiny")) == "tiny"
    batch, hw = (2, 64) if tiny else (32, 224)
    torch.backends.cuda.matmul.allow_tf32 = False  # the variant: fp32 with TF32 off (the default for matmuls)
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    fp32 = torchvision.models.resnet50().to(dev).eval()
    fast = torchvision.models.resnet50().to(dev).eval()
    fast.load_state_dict(fp32.state_dict())
    x32 = torch.randn(batch, 3, hw, hw, device=dev)
    if cuda:
        fast = fast.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
        xf = x32.to(dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    else:
        xf = x32
    return {"fp32": torch.no_grad()(lambda: fp32(x32)), "bf16_cl": torch.no_grad()(lambda: fast(xf))}
