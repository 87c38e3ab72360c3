"""A Hugging Face Llama decode over a static KV cache, eager and replayed from CUDA graphs (issue #39): the traces
whose replayed kernels get their ops, shapes and floors from the eager reference run the capture records.

Nothing is downloaded: the model is built from a config with random weights (benchmarks/hf_clients.py, the decode
size: 8 layers, hidden 1024, 16 heads, 8 KV heads, MLP 2816, vocab 32000, batch 4, prompt 256, bf16, sdpa), with a
``transformers`` ``StaticCache`` of prompt + 64 positions.

    python3 -m capture run benchmarks.hf_graphs:decode   --name hf-graphs  --active 4   # decode_eager, decode_graph
    python3 -m capture run benchmarks.hf_graphs:compiled --name hf-compile --active 4   # decode_compile
    python3 -m benchmarks.hf_graphs trap [rebind|pinned|pageable|check]               # the capture trap, below

- ``decode_eager``: one decode step (one token per sequence) run eagerly;
- ``decode_graph``: the same step captured by hand in one ``torch.cuda.graph`` and replayed; its
  ``gapscope_reference`` is ``decode_eager``'s forward;
- ``decode_compile``: ``torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)`` (cudagraph trees);
  its reference is the same forward compiled without CUDA graphs (the default mode: the same Inductor code, run
  eagerly), warmed up here so that its compilation stays out of the trace.

Every step keeps its state on the device: the next token goes into a static buffer (``argmax`` then ``copy_``) and
each layer's cache counter (``StaticLayer.cumulative_length``, a device tensor the forward advances in place) is
wrapped back into the decode region, so a replay reads and writes the same memory as the capture did and the cache
never overflows.

The trap (issue #39: a device-side assert in ``indexSelectSmallIndex``, ``srcIndex < srcSelectDimSize``, when a
hand-captured StaticCache decode was replayed): that kernel is the embedding's lookup (``aten::embedding`` ->
``index_select``), so the replay read token ids outside the vocabulary: the graph reads its input ids from the address
they had while it was captured, and what lies there on replay is not the next token. The ways a decode written the
eager way gets there, each run by ``trap VARIANT`` in its own process (H200, torch 2.11, transformers 5.17, 8 replays):
``rebind`` (the next token rebound to a new tensor every step: the graph keeps reading the warm-up's, freed after the
capture) and ``pinned`` (ids built on the host and copied in the step: the graph copies from the pinned buffer's
address on every replay) ran without an error there: what those addresses held was still a valid id; ``pageable``
(``torch.tensor(ids, device=...)`` in the step) is refused by torch while capturing. The assert itself was not
reproduced: it needs the stale memory to be handed to other data first. The steps here keep every input in static
device buffers updated in place inside the graph, and the prefill fills the cache before any capture; ``trap check``
replays ``decode_graph`` against the eager forward from the same state: logits and next tokens equal, bit for bit, over
three steps.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # python3 benchmarks/hf_graphs.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.hf_clients import LLAMA_DECODE, _llama, _setup  # noqa: E402

EXTRA = 64  # decode positions of the static cache after the prompt


def _state():
    """(torch, model, cache, static next-token buffer, forward step) with the prompt already in the cache."""
    torch, dev, dtype, kw, batch, prompt, ids = _setup(LLAMA_DECODE)
    from transformers import StaticCache

    model, config = _llama(kw, dev, dtype)
    max_len = prompt + EXTRA
    cache = StaticCache(config=config, max_cache_len=max_len)
    with torch.no_grad():
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)  # fills the cache (lazy initialisation)
    tok = out.logits[:, -1:].argmax(-1)  # [batch, 1], the static input of every decode step

    @torch.no_grad()
    def forward():
        out = model(input_ids=tok, past_key_values=cache, use_cache=True)
        tok.copy_(out.logits[:, -1:].argmax(-1))
        for layer in cache.layers:  # back into the decode region, on the device
            c = layer.cumulative_length
            c.copy_(prompt + (c - prompt) % (max_len - prompt))
        return out.logits

    return torch, model, cache, tok, forward


def _graphed(torch, fn):
    """``fn`` captured in one CUDA graph (capture/demo.py's recipe)."""
    from capture.demo import capture_graph

    return capture_graph(torch, fn)


def decode():
    """{decode_eager, decode_graph}: the eager step and the same step replayed from a hand-captured CUDA graph."""
    torch, _model, _cache, _tok, forward = _state()

    def decode_eager():
        return forward()

    steps = {"decode_eager": decode_eager}
    if torch.cuda.is_available():
        graph, out = _graphed(torch, forward)

        def decode_graph():
            graph.replay()
            return out

        decode_graph.gapscope_reference = forward  # the same kernels, launched one by one with their ops
        steps["decode_graph"] = decode_graph
    return steps


def compiled():
    """{decode_compile}: the forward under torch.compile(mode="reduce-overhead"), its reference the same forward
    compiled without CUDA graphs."""
    torch, model, cache, tok, _forward = _state()
    prompt = LLAMA_DECODE["full" if torch.cuda.is_available() else "tiny"]["prompt"]
    max_len = prompt + EXTRA
    torch._dynamo.mark_static_address(tok)  # no input copy before each replay
    fast = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    plain = torch.compile(model.forward, fullgraph=True)

    def make(fwd):
        @torch.no_grad()
        def step():
            out = fwd(input_ids=tok, past_key_values=cache, use_cache=True)
            tok.copy_(out.logits[:, -1:].argmax(-1))
            for layer in cache.layers:
                c = layer.cumulative_length
                c.copy_(prompt + (c - prompt) % (max_len - prompt))
            return out.logits

        return step

    decode_compile, reference = make(fast), make(plain)
    for _ in range(2):  # compile the reference now: its compilation would otherwise land in the trace
        reference()
    decode_compile.gapscope_reference = reference
    return {"decode_compile": decode_compile}


# ----------------------------------------------------------------------------------------------- the trap
def trap(variant: str = "rebind", replays: int = 8) -> int:
    """Capture the decode in one of the ways below and replay it; prints what happened. Run each variant in its own
    process: a device-side assert ends the CUDA context.

    - ``rebind``: the next token rebound each step (the graph keeps the warm-up's token tensor's address);
    - ``pinned``: the token ids built on the host and copied in the captured step (``pin_memory().to(non_blocking)``):
      the graph keeps the host buffer's address and copies from it on every replay, after the buffer went back to
      the pinned-memory cache and was handed to other data;
    - ``pageable``: the same from pageable memory (``torch.tensor(ids, device=...)``): a synchronous copy, refused
      while capturing;
    - ``check``: this module's ``decode_graph``: one replay against the eager forward from the same state, logits
      and next tokens compared."""
    import torch

    if variant == "check":
        return _check_replay()
    _, dev, dtype, kw, batch, prompt, ids = _setup(LLAMA_DECODE)
    from transformers import StaticCache

    model, config = _llama(kw, dev, dtype)
    cache = StaticCache(config=config, max_cache_len=prompt + EXTRA)
    with torch.no_grad():
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
    state = {"tok": out.logits[:, -1:].argmax(-1), "host": out.logits[:, -1:].argmax(-1).cpu()}

    @torch.no_grad()
    def naive():
        if variant == "pinned":
            x = state["host"].clone().pin_memory().to(dev, non_blocking=True)  # a host tensor copied in the step
        elif variant == "pageable":
            x = torch.tensor(state["host"].tolist(), device=dev)
        else:
            x = state["tok"]
        out = model(input_ids=x, past_key_values=cache, use_cache=True)
        state["tok"] = out.logits[:, -1:].argmax(-1)  # rebound: a new tensor every step
        return out.logits

    try:
        graph, _ = _graphed(torch, naive)
    except Exception as exc:  # noqa: BLE001 - what the capture refused is the result
        print(f"{variant}: the capture failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", flush=True)
        return 0
    # new buffers of the same sizes take the blocks freed after the capture; out-of-vocabulary ids in them
    junk = [torch.full((batch, 1), 10**6, dtype=torch.long, device=dev) for _ in range(4096)]
    pins = [torch.full((batch, 1), 10**6, dtype=torch.long).pin_memory() for _ in range(64)]
    for i in range(replays):
        graph.replay()
        torch.cuda.synchronize()
    del junk, pins
    print(f"{variant}: {replays} replays without an error", flush=True)
    return 0


def _check_replay() -> int:
    """One replay of ``decode_graph`` against the eager forward from the same state (cache, counters, token)."""
    torch, _model, cache, tok, forward = _state()
    graph, out = _graphed(torch, forward)
    layers = list(cache.layers)

    def snap():
        return ([(x.keys.clone(), x.values.clone(), x.cumulative_length.clone()) for x in layers], tok.clone())

    def restore(s):
        for x, (k, v, c) in zip(layers, s[0]):
            x.keys.copy_(k)
            x.values.copy_(v)
            x.cumulative_length.copy_(c)
        tok.copy_(s[1])

    worst = 0.0
    for step in range(3):
        s0 = snap()
        eager = forward().float().clone()
        t_eager = tok.clone()
        restore(s0)
        graph.replay()
        torch.cuda.synchronize()
        diff = (out.float() - eager).abs().max().item()
        worst = max(worst, diff)
        same = bool(torch.equal(tok, t_eager))
        print(f"check step {step}: replay vs eager logits max |diff| {diff:.3g}, next tokens equal {same}", flush=True)
        if not same:
            return 1
    print(f"check: the replay computes what the eager forward does (max |diff| {worst:.3g})", flush=True)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "trap":
        print(__doc__)
        sys.exit(2)
    sys.exit(trap(args[1] if len(args) > 1 else "rebind"))
