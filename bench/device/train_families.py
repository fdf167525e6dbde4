#!/usr/bin/env python3
"""Training jobs of several model families on one GPU, as a user would run them under `gearshift run --auto`
(auto_real_jobs.sh runs them). Random weights (nothing downloaded), bf16, fused AdamW, random token batches copied
from pinned host memory; the loss is read (loss.item(): a synchronize) every --log-every steps, as a training loop
that logs does.

  train_families.py FAMILY [--steps N] [--log-every K] [--seed S] [--optimizer KIND]

Families (the models of record_step_traces.py, sized like small real runs):
  llama    Llama-like decoder, 16 x 2048 (GQA 16/8 heads, SwiGLU 5632), batch 4 x 2048 tokens (~1 B parameters)
  moe      Mixtral-like, 8 x 1024, 8 experts top-2, batch 8 x 1024
  ckpt     the llama job with gradient checkpointing (every decoder layer's forward recomputed in backward)
  compile  GPT-2 small (12 x 768) under torch.compile(mode="reduce-overhead"): forward and backward as CUDA graphs
  accum    GPT-2 small, 4 micro-batches of gradient accumulation per optimizer step
  input    GPT-2 small fed by a torch DataLoader with one worker whose CPU preprocessing (--prep-sort elements
           sorted per sample) is slower than the GPU's step: the GPU waits for each batch (an input-bound job)
  resnet   ResNet-50 (torchvision, else timm), fp16 autocast + GradScaler, channels_last, SGD with momentum,
           batch 64 x 224 x 224 random images: many short kernels, launch-bound on a fast GPU
  t5       T5-base seq2seq (transformers, 12 + 12 layers x 768), Adafactor (transformers.optimization), bf16
           autocast, batch 16 x 512 -> 128 tokens: no step markers and an optimizer of no fused kind
  gpt2s    GPT-2 small, plain steps (fused AdamW unless --optimizer)
--optimizer replaces the family's optimizer (not resnet's: its GradScaler needs a torch.optim one) by one whose
kernels are on no name list, each a loop over the parameters with no torch.optim class (so no profiler
annotation either): hand-sgd (p -= lr * grad), lion (Chen et al. 2023, sign of the interpolated momentum,
decoupled weight decay), adafactor (transformers.optimization.Adafactor, relative step).
At the end it prints one line `TRAIN family=F steps=N step_s=<median s/step> late_step_s=<same, second half>
j_per_step=<median J/step> ...`: the job's own count of its optimizer steps, their wall time per logging
interval (the first left out) and the GPU's energy per step over the same intervals (NVML's energy counter,
read only; nan where NVML is not there).

Never changes clocks, power limits or any other GPU setting.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from record_step_traces import GPT2S, LLAMA, MIXTRAL, Trainer, build_model  # noqa: E402

LLAMA_1B = dict(LLAMA, layers=16, hidden=2048, heads=16, kv_heads=8, ffn=5632, batch=4, seq=2048)
FAMILIES = {
    "llama": dict(LLAMA_1B, steps=80),
    "moe": dict(MIXTRAL, layers=8, hidden=1024, ffn=2048, batch=8, seq=1024, steps=120),
    "ckpt": dict(LLAMA_1B, ckpt=True, steps=60),
    "compile": dict(GPT2S, layers=12, batch=8, seq=1024, compile=True, steps=300),
    "accum": dict(GPT2S, layers=12, batch=8, seq=1024, accum=4, steps=80),
    "input": dict(GPT2S, layers=12, batch=8, seq=1024, loader=True, steps=120),
    "resnet": dict(model="resnet50", batch=64, steps=400),
    "t5": dict(model="t5", batch=16, seq=512, target=128, vocab=32128, steps=200),
    "gpt2s": dict(GPT2S, layers=12, batch=8, seq=1024, steps=80),
}


class HandOptimizer:
    """A per-parameter update loop written in the training script, as research code does: no torch.optim class,
    no fused or foreach kernel, no name an optimizer list would know."""

    def __init__(self, kind, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.01):
        self.kind, self.params, self.lr, self.betas, self.wd = kind, [p for p in params if p.requires_grad], lr, betas, weight_decay
        self.m = {}

    def step(self):
        import torch
        with torch.no_grad():
            for p in self.params:
                if p.grad is None:
                    continue
                g = p.grad
                if self.kind == "hand-sgd":
                    p.add_(g, alpha=-self.lr)
                else:  # lion
                    m = self.m.setdefault(p, torch.zeros_like(p))
                    u = (m * self.betas[0] + g * (1 - self.betas[0])).sign_()
                    p.mul_(1 - self.lr * self.wd).add_(u, alpha=-self.lr)
                    m.lerp_(g, 1 - self.betas[1])

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None


class VisionTrainer:
    """ResNet-50 steps as a torchvision recipe runs them: fp16 autocast, GradScaler (its unscale and inf check,
    one synchronize a step in scaler.step), channels_last, SGD with momentum; random images made on the GPU."""

    def __init__(self, spec, dev, seed):
        import torch
        try:
            import torchvision
            model = torchvision.models.resnet50()
        except ImportError:
            import timm
            model = timm.create_model("resnet50")
        self.torch, self.accum = torch, 1
        self.model = model.to(dev).to(memory_format=torch.channels_last).train()
        g = torch.Generator(device=dev).manual_seed(seed)
        self.x = torch.randn(spec["batch"], 3, 224, 224, device=dev, generator=g).to(memory_format=torch.channels_last)
        self.y = torch.randint(0, 1000, (spec["batch"],), device=dev, generator=g)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        self.scaler = torch.amp.GradScaler("cuda")
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def forward_loss(self):
        with self.torch.autocast("cuda", dtype=self.torch.float16):
            return self.loss_fn(self.model(self.x), self.y)

    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def update(self):
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad(set_to_none=True)


class Seq2SeqTrainer:
    """T5-base steps with Adafactor (relative step, no fused or foreach kernel: one small kernel chain per
    parameter) under bf16 autocast; random token batches copied from pinned host memory."""

    def __init__(self, spec, dev, seed):
        import torch
        import transformers as tf
        from transformers.optimization import Adafactor
        self.torch, self.accum, self.dev = torch, 1, dev
        cfg = tf.T5Config(vocab_size=spec["vocab"], d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12,
                          dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)
        with torch.device(dev):
            self.model = tf.T5ForConditionalGeneration(cfg).train()
        g = torch.Generator().manual_seed(seed)
        self.src = torch.randint(0, spec["vocab"], (spec["batch"], spec["seq"]), generator=g).pin_memory()
        self.tgt = torch.randint(0, spec["vocab"], (spec["batch"], spec["target"]), generator=g).pin_memory()
        self.opt = Adafactor(self.model.parameters(), scale_parameter=True, relative_step=True, warmup_init=True,
                             lr=None)

    def forward_loss(self):
        src = self.src.to(self.dev, non_blocking=True)
        tgt = self.tgt.to(self.dev, non_blocking=True)
        with self.torch.autocast("cuda", dtype=self.torch.bfloat16):
            return self.model(input_ids=src, labels=tgt).loss

    def backward(self, loss):
        loss.backward()

    def update(self):
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def nvml_energy_j():
    """A function returning GPU 0's energy counter in J (nvmlDeviceGetTotalEnergyConsumption, read only), or None."""
    import ctypes
    try:
        nv = ctypes.CDLL("libnvidia-ml.so.1")
        if nv.nvmlInit_v2() != 0:
            return None
        h = ctypes.c_void_p()
        idx = int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0)
        if nv.nvmlDeviceGetHandleByIndex_v2(idx, ctypes.byref(h)) != 0:
            return None
        mj = ctypes.c_ulonglong()

        def read():
            return mj.value / 1e3 if nv.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(mj)) == 0 else float("nan")
        return read
    except (OSError, ValueError):
        return None


class PrepDataset:
    """Random token samples, each after a CPU preprocessing step (sorting `sort` random floats, as a tokenizer
    or augmentation would cost): a map-style dataset for torch's DataLoader."""

    def __init__(self, vocab, seq, sort, seed):
        self.vocab, self.seq, self.sort, self.seed = vocab, seq, sort, seed

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        import numpy as np
        import torch
        rng = np.random.default_rng(self.seed + i)
        x = rng.random(self.sort)
        x.sort()
        return torch.from_numpy(rng.integers(0, self.vocab, self.seq, dtype=np.int64))


class Args:  # what build_model reads
    attn = "sdpa"
    moe_experts = "eager"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("family", choices=sorted(FAMILIES))
    p.add_argument("--steps", type=int, help="optimizer steps (default: the family's)")
    p.add_argument("--log-every", type=int, default=10, help="read the loss every K steps (a synchronize)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prep-sort", type=int, default=400_000, help="input: random floats sorted per sample (CPU work)")
    p.add_argument("--workers", type=int, default=1, help="input: DataLoader workers")
    p.add_argument("--optimizer", choices=("family", "hand-sgd", "lion", "adafactor"), default="family",
                   help="replace the family's optimizer (see above)")
    a = p.parse_args()

    import torch

    spec = dict(FAMILIES[a.family])
    steps = a.steps or spec["steps"]
    dev = torch.device("cuda")
    torch.manual_seed(a.seed)
    if spec["model"] in ("resnet50", "t5"):
        tr = (VisionTrainer if spec["model"] == "resnet50" else Seq2SeqTrainer)(spec, dev, a.seed)
        model = tr.model
        facts = {"params": sum(p.numel() for p in model.parameters())}
    else:
        model, facts = build_model(spec, Args, dev)
        if spec.get("ckpt"):
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        tr = Trainer(model, spec, dev, a.seed)
    if a.optimizer != "family":
        if spec["model"] == "resnet50":
            sys.exit("--optimizer: resnet keeps its SGD (GradScaler steps a torch.optim optimizer)")
        if a.optimizer == "adafactor":
            from transformers.optimization import Adafactor
            tr.opt = Adafactor(model.parameters(), scale_parameter=True, relative_step=True, warmup_init=True, lr=None)
        else:
            tr.opt = HandOptimizer(a.optimizer, model.parameters())
    if spec.get("compile"):
        tr.model = torch.compile(model, mode="reduce-overhead")
    batches = None
    if spec.get("loader"):
        loader = torch.utils.data.DataLoader(PrepDataset(spec["vocab"], spec["seq"], a.prep_sort, a.seed),
                                             batch_size=spec["batch"], num_workers=a.workers, pin_memory=True)
        batches = iter(loader)
    energy = nvml_energy_j()
    t0 = time.perf_counter()
    times, losses, joules, ends = [], [], [], []
    last = time.perf_counter()
    last_j = energy() if energy else float("nan")
    for i in range(steps):
        loss = None
        for _ in range(tr.accum):
            if batches is not None:
                ids = next(batches).to(dev, non_blocking=True)
                loss = tr.model(input_ids=ids, labels=ids, use_cache=False).loss
            else:
                loss = tr.forward_loss()
            tr.backward(loss) if hasattr(tr, "backward") else loss.backward()
        if hasattr(tr, "update"):
            tr.update()
        else:
            tr.opt.step()
            tr.opt.zero_grad(set_to_none=True)
        if spec.get("compile"):
            torch.compiler.cudagraph_mark_step_begin()
        if a.log_every > 0 and (i + 1) % a.log_every == 0:
            losses.append(loss.item())  # the synchronize a logging loop makes
            now = time.perf_counter()
            times.append((now - last) / a.log_every)
            ends.append(time.monotonic())
            last = now
            # As it happens: lines the injection library writes to stderr (e.g. "turned the launch feed off")
            # then fall between the intervals before and after them in a log of both streams.
            print(f"TRAIN_AT step={i + 1} ms_per_step={times[-1] * 1e3:.1f} monotonic_s={ends[-1]:.3f}", flush=True)
            if energy:
                j = energy()
                joules.append((j - last_j) / a.log_every)
                last_j = j
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    # The first logging interval holds the warm-up (cuBLAS heuristics, compilation): leave it out of s/step.
    step_s = statistics.median(times[1:]) if len(times) > 1 else wall / steps
    # The second half alone: under `gearshift run --auto` the plan is applied by then (the warm-up before it
    # records every kernel's activity), so this is the figure the overhead pairs compare.
    late_s = statistics.median(times[len(times) // 2:]) if len(times) > 1 else step_s
    j_step = statistics.median(joules[1:]) if len(joules) > 1 else float("nan")
    print(f"TRAIN family={a.family} steps={steps} step_s={step_s:.5f} late_step_s={late_s:.5f} j_per_step={j_step:.2f} "
          f"wall_s={wall:.2f} params={facts['params']} "
          f"log_every={a.log_every} last_loss={losses[-1] if losses else float('nan'):.3f}", flush=True)
    # Every logging interval's s/step, in order: which steps ran slower (e.g. while run --auto measured them).
    print("TRAIN_INTERVALS ms_per_step=" + ",".join(f"{t * 1e3:.1f}" for t in times), flush=True)
    # CLOCK_MONOTONIC at each interval's end: lines up the intervals with another process's clock (feed_sink.py's
    # phases).
    print("TRAIN_INTERVAL_ENDS monotonic_s=" + ",".join(f"{t:.3f}" for t in ends), flush=True)


if __name__ == "__main__":
    main()
