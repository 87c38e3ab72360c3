"""A built-in decoder-only transformer to record: random weights, nothing downloaded.

bf16 on CUDA, fp32 on CPU. Fixed prompt and fixed shapes with a static KV cache, so decode can be
captured in a CUDA graph. ``inject`` adds one known cause of GPU idle time, each in its own clearly
named function so that it shows up by name in the trace's CPU stacks:

    sync      _inject_sync_check       a data-dependent ``.item()`` in every layer
    sampling  _inject_host_sampling    logits copied to the host and sampled there, per token
    copy      _inject_pageable_copy    a large pageable host-to-device copy per step
    alloc     _inject_allocator_churn  ``empty_cache()`` and a fresh large allocation per layer
    python    _host_bookkeeping        ~100 us of pure-Python work between layers

Two isolating variants split a pair's measured saving (``benchmarks/whatif_pairs.py``, issue #14):

    sync-noitem  _inject_sync_ops      ``h.abs().amax()`` in every layer, its value never read (no sync)
    alloc-keep   _inject_fresh_buffer  the same fresh buffer and fill per layer, no ``empty_cache()`` (the
                                       caching allocator reuses the block: no cudaFree / cudaMalloc)

With ``tp_size > 1`` (under torch.distributed) attention and MLP are tensor-parallel (column-parallel
QKV / up projections, row-parallel output / down projections followed by an all-reduce), and
``late_rank`` makes one rank do extra host work (``_straggler_work``) before each all-reduce.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

INJECT = ("sync", "sampling", "copy", "alloc", "python", "sync-noitem", "alloc-keep")
LAYER_INJECT = ("sync", "alloc", "python", "sync-noitem", "alloc-keep")  # applied inside every layer
MODES = ("eager", "graph", "compile")


@dataclass(frozen=True)
class Config:
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    vocab: int
    batch: int
    prompt: int
    max_seq: int
    copy_mb: int  # size of the injected pageable copy
    alloc_mb: int  # size of the injected fresh allocation


SIZES = {
    "tiny": Config(d_model=64, n_heads=4, n_layers=2, d_ff=128, vocab=256, batch=1, prompt=16, max_seq=64, copy_mb=1, alloc_mb=1),
    "small": Config(d_model=256, n_heads=8, n_layers=4, d_ff=768, vocab=2048, batch=2, prompt=64, max_seq=192, copy_mb=8, alloc_mb=8),
    "full": Config(d_model=2048, n_heads=16, n_layers=8, d_ff=5632, vocab=32000, batch=4, prompt=512, max_seq=768, copy_mb=64, alloc_mb=256),
}


# ------------------------------------------------------------------------------- injected causes
def _inject_sync_check(h):
    """A data-dependent check on the host: ``.item()`` waits for the GPU to finish everything queued."""
    if h.abs().amax().item() > 1e4:  # never true for this model; the wait is the point
        h = h.clamp(-1e4, 1e4)
    return h


def _inject_sync_ops(h):
    """The sync check's ops without the sync: ``h.abs().amax()`` is computed and never read on the host."""
    h.abs().amax()
    return h


def _inject_host_sampling(logits, out_ids):
    """Sample the next token on the host: device-to-host copy, softmax and multinomial on the CPU, copy back."""
    import torch

    last = logits[:, -1, :].float().cpu()  # blocking device-to-host copy
    probs = torch.softmax(last / 0.8, dim=-1)
    toks = torch.multinomial(probs, 1)
    out_ids.copy_(toks.to(out_ids.device))


def _inject_pageable_copy(host_buf, dev_buf):
    """A large host-to-device copy from pageable (not pinned) memory, once per step."""
    dev_buf.copy_(host_buf)


def _inject_allocator_churn(nbytes: int, device):
    """Return cached blocks to the driver and allocate a large fresh buffer: cudaFree + cudaMalloc every time."""
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()
    buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
    buf.fill_(1)
    del buf


def _inject_fresh_buffer(nbytes: int, device):
    """The allocator churn's buffer and fill without ``empty_cache()``: the cached block is reused every time."""
    import torch

    buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
    buf.fill_(1)
    del buf


_LOOPS_PER_US: list[float] = []


def _loops_per_us() -> float:
    """Iterations of the busy loop below per microsecond, measured once (outside any profiled window)."""
    if not _LOOPS_PER_US:
        best = 0.0
        for _ in range(3):
            t0 = time.perf_counter_ns()
            acc = 0
            for i in range(20000):
                acc += i & 7
            best = max(best, 20000 / max(1.0, (time.perf_counter_ns() - t0) / 1000))
        _LOOPS_PER_US.append(best)
    return _LOOPS_PER_US[0]


def _host_bookkeeping(us: int = 100):
    """Pure-Python host work between layers (logging, shape bookkeeping): about ``us`` microseconds.

    The loop makes no function calls, so with_stack records this one frame, not thousands of calls.
    """
    acc = 0
    for i in range(int(us * _loops_per_us())):
        acc += i & 7
    return acc


def _straggler_work(us: int):
    """Extra host work on the late rank before each all-reduce: the others wait for it in the collective."""
    acc = 0
    for i in range(int(us * _loops_per_us())):
        acc += i & 7
    return acc


# ------------------------------------------------------------------------------------------ model
def build_model(cfg: Config, device, dtype, *, inject: str | None = None, tp_rank: int = 0, tp_size: int = 1,
                late_rank: int | None = None, late_us: int = 2000):
    import torch
    from torch import nn
    import torch.nn.functional as F

    if cfg.n_heads % tp_size or cfg.d_ff % tp_size:
        raise ValueError(f"heads ({cfg.n_heads}) and d_ff ({cfg.d_ff}) must divide by the number of ranks ({tp_size})")
    hd = cfg.d_model // cfg.n_heads
    heads = cfg.n_heads // tp_size
    ff = cfg.d_ff // tp_size

    def all_reduce(x):
        if tp_size == 1:
            return x
        import torch.distributed as dist

        if late_rank is not None and tp_rank == late_rank:
            _straggler_work(late_us)
        dist.all_reduce(x)
        return x

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-5)

    class Block(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.i = i
            self.norm1 = RMSNorm(cfg.d_model)
            self.qkv = nn.Linear(cfg.d_model, 3 * heads * hd, bias=False)  # column-parallel
            self.o = nn.Linear(heads * hd, cfg.d_model, bias=False)  # row-parallel
            self.norm2 = RMSNorm(cfg.d_model)
            self.up = nn.Linear(cfg.d_model, 2 * ff, bias=False)  # column-parallel (gate, up)
            self.down = nn.Linear(ff, cfg.d_model, bias=False)  # row-parallel
            shape = (cfg.batch, heads, cfg.max_seq, hd)
            self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
            self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

        def attn(self, x, pos, prefill: bool):
            B, T, _ = x.shape
            q, k, v = self.qkv(x).view(B, T, 3, heads, hd).permute(2, 0, 3, 1, 4)
            if prefill:
                self.k_cache[:, :, :T].copy_(k)
                self.v_cache[:, :, :T].copy_(v)
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                self.k_cache.index_copy_(2, pos, k)
                self.v_cache.index_copy_(2, pos, v)
                mask = (torch.arange(cfg.max_seq, device=x.device) <= pos).view(1, 1, 1, cfg.max_seq)
                a = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
            return all_reduce(self.o(a.transpose(1, 2).reshape(B, T, heads * hd)))

        def mlp(self, x):
            g, u = self.up(x).chunk(2, dim=-1)
            return all_reduce(self.down(F.silu(g) * u))

        def forward(self, x, pos, prefill: bool):
            with torch.profiler.record_function(f"layer.{self.i}"):
                with torch.profiler.record_function("attention"):
                    x = x + self.attn(self.norm1(x), pos, prefill)
                if inject == "sync":
                    x = _inject_sync_check(x)
                elif inject == "python":
                    _host_bookkeeping()
                elif inject == "alloc":
                    _inject_allocator_churn(cfg.alloc_mb << 20, x.device)
                elif inject == "sync-noitem":
                    x = _inject_sync_ops(x)
                elif inject == "alloc-keep":
                    _inject_fresh_buffer(cfg.alloc_mb << 20, x.device)
                with torch.profiler.record_function("mlp"):
                    x = x + self.mlp(self.norm2(x))
            return x

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
            self.pos_embed = nn.Embedding(cfg.max_seq, cfg.d_model)
            self.blocks = nn.ModuleList(Block(i) for i in range(cfg.n_layers))
            self.norm = RMSNorm(cfg.d_model)
            self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

        def forward(self, ids, pos, prefill: bool = False):
            if prefill:
                p = torch.arange(ids.shape[1], device=ids.device)
            else:
                p = pos
            x = self.embed(ids) + self.pos_embed(p)
            for b in self.blocks:
                x = b(x, pos, prefill)
            with torch.profiler.record_function("lm_head"):
                return self.head(self.norm(x))

    _loops_per_us()  # calibrate the busy loops now, not inside a profiled window
    # Build and initialise on the target device (a full-size model initialised on the CPU takes seconds).
    torch.manual_seed(0)
    shared = torch.Generator(device=device).manual_seed(0)  # replicated weights are equal on every rank
    for_rank = torch.Generator(device=device).manual_seed(1000 + tp_rank)  # shards differ per rank
    with torch.device(device):
        model = Decoder()
    sharded = ("qkv.weight", "o.weight", "up.weight", "down.weight")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                scale = 0.02 if "embed" in name else 1.0 / math.sqrt(p.shape[1])
                g = for_rank if name.endswith(sharded) else shared
                p.copy_(torch.randn(p.shape, generator=g, device=device) * scale)
    return model.to(device=device, dtype=dtype).eval()


def capture_graph(torch, fn):
    """``fn`` captured in one CUDA graph after two warm-up calls on a side stream (the documented recipe):
    (graph, its output tensors)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


class Demo:
    """The demo's state: model, static input buffers, and the step functions for each phase."""

    def __init__(self, size: str = "tiny", mode: str = "eager", inject: str | None = None, *, device=None,
                 tp_rank: int = 0, tp_size: int = 1, late_rank: int | None = None, late_us: int = 2000):
        import torch

        if size not in SIZES:
            raise ValueError(f"unknown size {size!r} (choose from {', '.join(SIZES)})")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (choose from {', '.join(MODES)})")
        if inject is not None and inject not in INJECT:
            raise ValueError(f"unknown cause {inject!r} (choose from {', '.join(INJECT)})")
        self.device = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
        on_cuda = self.device.type == "cuda"
        if mode == "graph" and not on_cuda:
            raise ValueError("--mode graph needs a CUDA device")
        if mode != "eager" and inject in LAYER_INJECT:
            raise ValueError(f"--inject {inject} works inside the layers and needs --mode eager")
        if mode == "graph" and inject == "copy":
            raise ValueError("--inject copy needs --mode eager or compile")
        self.cfg = SIZES[size]
        self.size, self.mode, self.inject = size, mode, inject
        self.dtype = torch.bfloat16 if on_cuda else torch.float32
        self.model = build_model(self.cfg, self.device, self.dtype, inject=inject, tp_rank=tp_rank, tp_size=tp_size,
                                 late_rank=late_rank, late_us=late_us)
        c = self.cfg
        g = torch.Generator().manual_seed(7)
        self.prompt = torch.randint(0, c.vocab, (c.batch, c.prompt), generator=g).to(self.device)
        self.ids = self.prompt[:, -1:].clone()  # static decode input
        self.pos = torch.tensor([c.prompt], dtype=torch.long, device=self.device)  # static decode position
        self.steps_run = 0
        if inject == "copy":
            n = (c.copy_mb << 20) // 4
            self.host_buf = torch.randn(n)  # pageable on purpose
            self.dev_buf = torch.empty(n, device=self.device)
        self._fwd = self.model
        if mode == "compile":
            self._fwd = torch.compile(self.model)
        self._graphs: dict[str, tuple] = {}

    # -- raw forward passes
    def _prefill(self):
        import torch

        with torch.no_grad():
            return self._fwd(self.prompt, self.pos, True)

    def _decode(self):
        import torch

        c = self.cfg
        with torch.no_grad():
            logits = self._fwd(self.ids, self.pos, False)
            if self.inject != "sampling":
                self.ids.copy_(logits[:, -1:, :].argmax(-1))  # greedy, stays on the device
            # next position, wrapping inside the decode region so the static cache never overflows
            self.pos.copy_(c.prompt + (self.pos + 1 - c.prompt) % (c.max_seq - c.prompt))
        return logits

    def _graphed(self, phase: str, fn):
        import torch

        if phase not in self._graphs:
            self._graphs[phase] = capture_graph(torch, fn)
        return self._graphs[phase]

    def step_fn(self, phase: str):
        """The step callable for ``prefill`` or ``decode``."""
        import torch

        fn = {"prefill": self._prefill, "decode": self._decode}[phase]
        if self.mode == "graph":
            graph, out = self._graphed(phase, fn)

            def step():
                graph.replay()
                if self.inject == "sampling" and phase == "decode":
                    _inject_host_sampling(out, self.ids)
                return out

            # the same forward pass run eagerly: the capture records it once after the window, so that the
            # replayed kernels get their ops, shapes and stacks (capture/recorder.py, REFERENCE_RANGE)
            step.gapscope_reference = fn
        else:
            def step():
                if self.inject == "copy":
                    _inject_pageable_copy(self.host_buf, self.dev_buf)
                out = fn()
                if self.inject == "sampling" and phase == "decode":
                    with torch.no_grad():
                        _inject_host_sampling(out, self.ids)
                return out

        step.__name__ = f"demo_{phase}_step"
        return step

    def fill_cache(self):
        """Run the prompt once so decode attends over a filled cache."""
        self._prefill()
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize()

    def describe(self) -> dict:
        return {"demo": True, "size": self.size, "mode": self.mode, "inject": self.inject,
                "dtype": str(self.dtype).replace("torch.", ""), "config": asdict(self.cfg)}
