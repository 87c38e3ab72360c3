"""More real clients (see ``benchmarks/hf_clients.py``): Hugging Face ``transformers`` models with random weights,
each a pathology and the fix a user would make as two phases of one ``capture run`` (timed un-profiled in the same
interleaved rounds). ``HF_CLIENTS_SIZE=tiny`` (the default without CUDA) gives small configs for a check on the CPU.

    python3 -m capture run benchmarks.hf_clients2:autocast_weights --name hf-autocast           # prefill_autocast, prefill_bf16
    python3 -m capture run benchmarks.hf_clients2:penalty_loop --name hf-penalty --active 4     # decode_loop, decode_vec
    python3 -m capture run benchmarks.hf_clients2:pageable_input --name hf-pageable             # step_pageable, step_pinned
    python3 -m capture run benchmarks.hf_clients2:sync_hook --name hf-synchook --active 4       # decode_hook, decode_nohook

What each pair is (the first phase is the variant, the second the fix):

- ``autocast_weights``: a Llama forward (batch 1, 64 tokens) with two layers of a 70B-sized Llama (hidden 8192,
  intermediate 28672, 64 heads, 8 KV heads; about 2.0e9 parameters with the embeddings and the head) under
  ``torch.autocast(dtype=torch.bfloat16)`` with the weights left in fp32, so every linear's weight is cast to bf16
  on every forward (``aten::_to_copy``: about 12 GB read and written), against the same weights cast to bf16 once,
  no autocast.
- ``penalty_loop``: a Llama decode step (4 layers of hidden 1024, batch 8, over a 256-token prefilled cache) whose
  logits get a repetition penalty over each sequence's prompt tokens in a Python loop over the sequences (index,
  compare, multiply, divide, where, index_put per sequence), against one gather / where / scatter over the whole
  batch. Next token: argmax.
- ``pageable_input``: a ViT-S/16-like classifier (12 layers, hidden 384, batch 64 at 224x224) fed a 38.5 MB fp32
  image batch from an ordinary (pageable) host tensor with a blocking ``.to("cuda")`` every step, against the same
  batch in a host buffer pinned once and copied with ``non_blocking=True``.
- ``sync_hook``: a Llama decode step (batch 4) with a forward hook on every decoder layer that logs the norm of the
  layer's output with ``.item()`` (a host sync per layer), against the same model without hooks.
"""

from __future__ import annotations

import copy

from benchmarks.hf_clients import LLAMA, LLAMA_DECODE, _decoder, _env, _llama, _setup

AUTOCAST = {
    "full": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=2, num_attention_heads=64,
                 num_key_value_heads=8, vocab_size=32000, batch=1, prompt=64),
    "tiny": LLAMA["tiny"],
}
PENALTY = {"full": dict(LLAMA_DECODE["full"], batch=8, num_hidden_layers=4), "tiny": dict(LLAMA_DECODE["tiny"], batch=2)}
VIT = {
    "full": dict(hidden_size=384, intermediate_size=1536, num_hidden_layers=12, num_attention_heads=6,
                 image_size=224, patch_size=16, num_labels=1000, batch=64),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 image_size=32, patch_size=8, num_labels=10, batch=2),
}


def autocast_weights():
    torch, dev, dtype, kw, batch, prompt, ids = _setup(AUTOCAST)
    m32, _ = _llama(kw, dev, torch.float32, "sdpa")  # the user's model, weights left in fp32
    m16 = copy.deepcopy(m32).to(torch.bfloat16)  # the fix: cast once

    @torch.no_grad()
    def prefill_autocast():
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            return m32(input_ids=ids, use_cache=False).logits

    @torch.no_grad()
    def prefill_bf16():
        return m16(input_ids=ids, use_cache=False).logits

    return {"prefill_autocast": prefill_autocast, "prefill_bf16": prefill_bf16}


def _penalty_loop(seen, p=1.2):
    import torch

    def pick(logits):
        logits = logits.float()
        for i in range(logits.shape[0]):  # the way it is often written: one sequence at a time
            logits[i, seen[i]] = torch.where(logits[i, seen[i]] < 0, logits[i, seen[i]] * p, logits[i, seen[i]] / p)
        return logits.argmax(-1, keepdim=True)

    return pick


def _penalty_vec(seen, p=1.2):
    import torch

    def pick(logits):
        logits = logits.float()
        v = logits.gather(1, seen)
        logits.scatter_(1, seen, torch.where(v < 0, v * p, v / p))
        return logits.argmax(-1, keepdim=True)

    return pick


def penalty_loop():
    torch, dev, dtype, kw, batch, prompt, ids = _setup(PENALTY)
    phases = {}
    for label, make in (("decode_loop", _penalty_loop), ("decode_vec", _penalty_vec)):
        model, config = _llama(kw, dev, dtype, "sdpa")
        phases[label] = _decoder(model, config, ids, prompt, make(ids))  # penalise each sequence's prompt tokens
    return phases


def pageable_input():
    import torch
    from transformers import ViTConfig, ViTForImageClassification

    _, size, dev, dtype = _env()
    kw = dict(VIT[size])
    batch = kw.pop("batch")
    config = ViTConfig(**kw)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(dev):
        model = ViTForImageClassification(config)
    model = model.to(dtype=dtype).eval()
    g = torch.Generator().manual_seed(7)
    host = torch.randn(batch, 3, kw["image_size"], kw["image_size"], generator=g)  # the loader's batch, pageable
    pinned = host.pin_memory() if dev.type == "cuda" else host  # the fix: pinned once (no pinning without CUDA)

    @torch.no_grad()
    def step_pageable():
        x = host.to(dev)
        return model(pixel_values=x.to(dtype)).logits

    @torch.no_grad()
    def step_pinned():
        x = pinned.to(dev, non_blocking=True)
        return model(pixel_values=x.to(dtype)).logits

    return {"step_pageable": step_pageable, "step_pinned": step_pinned}


def sync_hook():
    torch, dev, dtype, kw, batch, prompt, ids = _setup(LLAMA_DECODE)
    log: list = []

    def hook(module, args, output):
        h = output[0] if isinstance(output, tuple) else output  # decoder layers return a tensor in transformers 5
        log.append(h.norm().item())  # the sync, once per layer
        if len(log) > 4096:
            del log[:]

    phases = {}
    for label, hooked in (("decode_hook", True), ("decode_nohook", False)):
        model, config = _llama(kw, dev, dtype, "sdpa")
        if hooked:
            for layer in model.model.layers:
                layer.register_forward_hook(hook)
        phases[label] = _decoder(model, config, ids, prompt, lambda logits: logits.argmax(-1, keepdim=True))
    return phases
