"""A Hugging Face ``transformers`` Llama built from a config with random weights, as steps for ``capture run``.

    python3 -m capture run benchmarks.hf_llama:steps --name hf-llama --out traces
    HF_LLAMA_SIZE=tiny python3 -m capture run benchmarks.hf_llama:steps --cpu ...   # a check on the CPU
    HF_LLAMA_PHASES=decode python3 -m capture run benchmarks.hf_llama:steps --name hf-llama-warm --warmup 70
        # decode alone, warmed up over every cache length it will see (see traces/README.md)

Nothing is downloaded: the model is ``LlamaForCausalLM(LlamaConfig(...))`` (8 layers, hidden 1024, 16 heads,
8 KV heads, MLP 2816, vocab 32000; bf16 on CUDA, sdpa attention), batch 4, prompt 256 tokens.
Phases (``capture run`` records one trace each; decode is 4 steps a window, the others 1):

- ``generate``: ``model.generate(prompt, max_new_tokens=8, min_new_tokens=8)``, greedy, with the
  library's own cache and loop (the way most people call it);
- ``prefill``: one forward over the prompt with ``use_cache=True`` (a fresh ``DynamicCache``);
- ``decode``: one forward of one new token per sequence over a prefilled ``DynamicCache``, the next
  token picked on the device (argmax); the cache is cropped back to the prompt every 64 steps, so
  decode always attends over 256 to 320 positions.
"""

from __future__ import annotations

import os

SIZES = {
    "full": dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                 num_key_value_heads=8, vocab_size=32000, batch=4, prompt=256),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=256, batch=1, prompt=16),
}


def steps():
    import torch
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    size = os.environ.get("HF_LLAMA_SIZE") or ("full" if torch.cuda.is_available() else "tiny")
    cfg_kw = dict(SIZES[size])
    batch, prompt = cfg_kw.pop("batch"), cfg_kw.pop("prompt")
    cuda = torch.cuda.is_available() and os.environ.get("HF_LLAMA_CPU") != "1"
    dev = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    config = LlamaConfig(max_position_embeddings=2048, pad_token_id=0, bos_token_id=1, eos_token_id=2, **cfg_kw)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(dev):
        model = LlamaForCausalLM(config)
    model = model.to(dtype=dtype).eval()
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, config.vocab_size, (batch, prompt), generator=g).to(dev)
    mask = torch.ones_like(ids)

    @torch.no_grad()
    def generate():
        return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, min_new_tokens=8,
                              do_sample=False, pad_token_id=0)

    @torch.no_grad()
    def prefill():
        return model(input_ids=ids, attention_mask=mask, past_key_values=DynamicCache(config=config),
                     use_cache=True).logits

    state = {}

    @torch.no_grad()
    def _prime():
        cache = DynamicCache(config=config)
        out = model(input_ids=ids, use_cache=True, past_key_values=cache)
        state["cache"] = out.past_key_values
        state["tok"] = out.logits[:, -1:].argmax(-1)
        state["n"] = 0

    _prime()

    @torch.no_grad()
    def decode():
        if state["n"] >= 64:
            state["cache"].crop(prompt)
            state["n"] = 0
        out = model(input_ids=state["tok"], past_key_values=state["cache"], use_cache=True)
        state["tok"] = out.logits[:, -1:].argmax(-1)
        state["n"] += 1
        return out.logits

    steps = {"generate": generate, "prefill": prefill, "decode": decode}
    only = [p for p in os.environ.get("HF_LLAMA_PHASES", "").split(",") if p]
    return {p: steps[p] for p in only} if only else steps
