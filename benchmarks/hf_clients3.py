"""Real clients, round three (see ``benchmarks/hf_clients.py``): each a pathology and the fix a user would make as two
phases of one ``capture run`` (timed un-profiled in the same interleaved rounds). Nothing is downloaded: models are
built from configs or in code with random weights. ``HF_CLIENTS_SIZE=tiny`` (the default without CUDA) gives small
configs for a check on the CPU.

    python3 -m capture run benchmarks.hf_clients3:layer_timer --name hf-timer --active 4     # decode_(no)timer
    python3 -m capture run benchmarks.hf_clients3:metrics_thread --name hf-gil --active 4    # decode_(no)thread
    python3 -m capture run benchmarks.hf_clients3:conv_shapes --name conv-autotune           # step_sizes, step_padded
    python3 -m capture run benchmarks.hf_clients3:weight_copy --name mlp-wcopy               # fwd_transpose, fwd_stored
    python3 -m capture run benchmarks.hf_clients3:weight_cast --name mlp-wcast               # fwd_cast, fwd_bf16

What each pair is (the first phase is the variant, the second the fix):

- ``layer_timer``: a Llama decode step (batch 4, 8 layers of hidden 1024 over a 256-token cache) whose decoder layers
  are wrapped by a hand-written per-layer timer that calls ``torch.cuda.synchronize()`` before and after each layer
  (16 device syncs per step), against the same model unwrapped.
- ``metrics_thread``: the same decode step while a background thread of the same process serialises a metrics
  snapshot (about 600 floats) with ``json.dumps`` in a loop, pausing 0.2 ms between snapshots, against the same step
  with that thread parked. The thread lives for the whole run and is parked (waiting on an ``Event``) outside the
  variant's steps, so the fix's trace shows a second thread that only waits.
- ``conv_shapes``: a small ResNet-like convolutional classifier built in code (no torchvision: a stem, three stages
  of two basic blocks, 32/64/128 channels; batch 16) under ``torch.backends.cudnn.benchmark = True``, fed a batch of
  a new image size every step (height and width from 160 to 287, never repeating within a run), so cudnn autotunes
  every convolution inside the step; against the same batches zero-padded to 288x288 (one shape, tuned once in the
  warm-up).
- ``weight_copy``: a stack of custom linear layers (8 blocks of 4096 -> 11008 -> 4096, 16 tokens) whose forward
  computes ``x @ w.t().contiguous()``, copying every weight transposed on every call, against the same weights
  stored transposed once (``x @ w_t``).
- ``weight_cast``: the same stack (8 blocks of 4096 -> 11008 -> 4096, 16 bf16 tokens) of custom linear layers whose
  weights are stored in float32 and cast to bf16 in the forward (``F.linear(x, self.weight.to(torch.bfloat16))``,
  no autocast) on every call, against the same weights stored in bf16 once.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time

from benchmarks.hf_clients import LLAMA_DECODE, _decoder, _env, _llama, _setup

CONV = {
    "full": dict(widths=(32, 64, 128), batch=16, lo=160, hi=288, classes=1000),
    "tiny": dict(widths=(4, 8, 8), batch=2, lo=24, hi=40, classes=10),
}
MLP = {
    "full": dict(hidden=4096, inner=11008, blocks=8, tokens=16),
    "tiny": dict(hidden=64, inner=128, blocks=2, tokens=4),
}
METRICS = {"full": dict(floats=600, pause_s=0.0002), "tiny": dict(floats=60, pause_s=0.0002)}


# ------------------------------------------------------------------------------------------ layer_timer
@contextlib.contextmanager
def _timer(name, log, sync):
    """The usual hand-written timer: synchronise, read the clock, run, synchronise, read the clock."""
    sync()
    t0 = time.perf_counter()
    yield
    sync()
    log.append((name, time.perf_counter() - t0))
    if len(log) > 4096:
        del log[:]


def _time_layers(model, log, sync):
    """Wrap every decoder layer's forward in ``_timer`` (the way a per-layer timing wrapper is often bolted on)."""
    for i, layer in enumerate(model.model.layers):
        inner = layer.forward

        def forward(*args, _inner=inner, _name=f"layer{i}", **kwargs):
            with _timer(_name, log, sync):
                return _inner(*args, **kwargs)

        layer.forward = forward


def layer_timer():
    torch, dev, dtype, kw, batch, prompt, ids = _setup(LLAMA_DECODE)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)  # nothing to wait for on the CPU
    log: list = []
    phases = {}
    for label, timed in (("decode_timer", True), ("decode_notimer", False)):
        model, config = _llama(kw, dev, dtype, "sdpa")
        if timed:
            _time_layers(model, log, sync)
        phases[label] = _decoder(model, config, ids, prompt, lambda logits: logits.argmax(-1, keepdim=True))
    return phases


# ------------------------------------------------------------------------------------------ metrics_thread
class _MetricsThread:
    """A background thread that serialises a metrics snapshot with ``json.dumps`` in a loop while ``run()`` is
    entered, and waits on an Event (holding nothing) otherwise."""

    def __init__(self, floats: int, pause_s: float):
        self.snapshot = {"step": 0, "loss": 1.25,
                         "metrics": {f"layer{i // 8}.stat{i % 8}": 1.0 / (i + 3) for i in range(floats)}}
        self.pause_s = pause_s
        self.go = threading.Event()
        self.idle = threading.Event()
        self.idle.set()
        self.written = 0
        self.thread = threading.Thread(target=self._loop, name="metrics", daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            self.go.wait()
            while self.go.is_set():
                self.snapshot["step"] += 1
                self.written += len(json.dumps(self.snapshot))
                time.sleep(self.pause_s)
            self.idle.set()

    @contextlib.contextmanager
    def running(self):
        self.idle.clear()
        self.go.set()
        try:
            yield
        finally:
            self.go.clear()
            self.idle.wait()  # the thread is parked again before the step returns: nothing of it runs outside


def metrics_thread():
    torch, dev, dtype, kw, batch, prompt, ids = _setup(LLAMA_DECODE)
    metrics = _MetricsThread(**METRICS["full" if dev.type == "cuda" else "tiny"])
    t0 = time.perf_counter()
    for _ in range(50):
        json.dumps(metrics.snapshot)
    print(f"metrics_thread: one json.dumps of the snapshot takes {(time.perf_counter() - t0) / 50 * 1e6:.0f} us")
    phases = {}
    for label, threaded in (("decode_thread", True), ("decode_nothread", False)):
        model, config = _llama(kw, dev, dtype, "sdpa")
        decode = _decoder(model, config, ids, prompt, lambda logits: logits.argmax(-1, keepdim=True))
        if threaded:
            def decode_thread(_decode=decode):
                with metrics.running():
                    return _decode()

            phases[label] = decode_thread
        else:
            phases[label] = decode
    return phases


# ------------------------------------------------------------------------------------------ conv_shapes
def _convnet(widths, classes):
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
            return (y + (x if self.down is None else self.down(x))).relu()

    layers = [nn.Conv2d(3, widths[0], 7, 2, 3, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = widths[0]
    for k, w in enumerate(widths):
        layers += [Block(cin, w, 1 if k == 0 else 2), Block(w, w, 1)]
        cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def _sizes(lo, hi, seed=5):
    """Every (height, width) in [lo, hi) once, in a fixed shuffled order: a new shape at every step of a run."""
    import random

    pairs = [(h, w) for h in range(lo, hi) for w in range(lo, hi)]
    random.Random(seed).shuffle(pairs)
    return pairs


def conv_shapes():
    import torch
    import torch.nn.functional as F

    _, size, dev, dtype = _env()
    cfg = CONV[size]
    torch.backends.cudnn.benchmark = True  # the setting under test: autotune each new input shape
    torch.manual_seed(0)
    model = _convnet(cfg["widths"], cfg["classes"]).to(dev, dtype).eval()
    sizes = _sizes(cfg["lo"], cfg["hi"])
    hi, batch = cfg["hi"], cfg["batch"]
    g = torch.Generator(device=dev).manual_seed(3)

    def batch_of(k):
        h, w = sizes[k % len(sizes)]
        return torch.randn(batch, 3, h, w, device=dev, generator=g).to(dtype)

    def stepper(pad):
        state = {"k": 0}

        @torch.no_grad()
        def step():
            x = batch_of(state["k"])
            state["k"] += 1
            if pad:  # the fix: one shape for every batch
                x = F.pad(x, (0, hi - x.shape[-1], 0, hi - x.shape[-2]))
            return model(x)

        return step

    return {"step_sizes": stepper(False), "step_padded": stepper(True)}


# ------------------------------------------------------------------------------------------ weight_copy
def _mlp(cfg, dev, dtype, stored):
    import torch
    from torch import nn

    class CopyLinear(nn.Module):
        """A hand-written linear over a weight kept as [out, in]: transposed and copied on every call."""

        def __init__(self, weight):
            super().__init__()
            self.weight = nn.Parameter(weight, requires_grad=False)

        def forward(self, x):
            return x @ self.weight.t().contiguous()

    class StoredLinear(nn.Module):
        """The fix: the weight stored transposed ([in, out]) once."""

        def __init__(self, weight):
            super().__init__()
            self.weight_t = nn.Parameter(weight.t().contiguous(), requires_grad=False)

        def forward(self, x):
            return x @ self.weight_t

    class Block(nn.Module):
        def __init__(self, up, down):
            super().__init__()
            kind = StoredLinear if stored else CopyLinear
            self.up, self.down = kind(up), kind(down)

        def forward(self, x):
            return x + self.down(torch.nn.functional.silu(self.up(x)))

    torch.manual_seed(0)
    h, f = cfg["hidden"], cfg["inner"]
    blocks = [Block(torch.randn(f, h, device=dev, dtype=dtype) * h ** -0.5,
                    torch.randn(h, f, device=dev, dtype=dtype) * f ** -0.5) for _ in range(cfg["blocks"])]
    return nn.Sequential(*blocks).eval()


def weight_copy():
    import torch

    _, size, dev, dtype = _env()
    cfg = MLP[size]
    x = torch.randn(cfg["tokens"], cfg["hidden"], device=dev, dtype=dtype)
    phases = {}
    for label, stored in (("fwd_transpose", False), ("fwd_stored", True)):
        model = _mlp(cfg, dev, dtype, stored)
        phases[label] = torch.no_grad()(lambda m=model: m(x))
    return phases


# ------------------------------------------------------------------------------------------ weight_cast
def _cast_mlp(cfg, dev, stored):
    import torch
    from torch import nn

    class CastLinear(nn.Module):
        """A hand-written linear over a weight kept in float32, cast to bf16 on every call (no autocast)."""

        def __init__(self, weight):
            super().__init__()
            self.weight = nn.Parameter(weight, requires_grad=False)

        def forward(self, x):
            return torch.nn.functional.linear(x, self.weight.to(torch.bfloat16))

    class Bf16Linear(nn.Module):
        """The fix: the weight stored in bf16 once."""

        def __init__(self, weight):
            super().__init__()
            self.weight = nn.Parameter(weight.to(torch.bfloat16), requires_grad=False)

        def forward(self, x):
            return torch.nn.functional.linear(x, self.weight)

    class Block(nn.Module):
        def __init__(self, up, down):
            super().__init__()
            kind = Bf16Linear if stored else CastLinear
            self.up, self.down = kind(up), kind(down)

        def forward(self, x):
            return x + self.down(torch.nn.functional.silu(self.up(x)))

    torch.manual_seed(0)
    h, f = cfg["hidden"], cfg["inner"]
    blocks = [Block(torch.randn(f, h, device=dev) * h ** -0.5, torch.randn(h, f, device=dev) * f ** -0.5)
              for _ in range(cfg["blocks"])]
    return nn.Sequential(*blocks).eval()


def weight_cast():
    import torch

    _, size, dev, _ = _env()
    cfg = MLP[size]
    x = torch.randn(cfg["tokens"], cfg["hidden"], device=dev, dtype=torch.bfloat16)
    phases = {}
    for label, stored in (("fwd_cast", False), ("fwd_bf16", True)):
        model = _cast_mlp(cfg, dev, stored)
        phases[label] = torch.no_grad()(lambda m=model: m(x))
    return phases
