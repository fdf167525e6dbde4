#!/usr/bin/env python3
"""GPT training steps with random weights, for tracing and energy work on one GPU.

HF transformers GPT2LMHeadModel built from a GPT2Config (nothing is downloaded), bf16 weights, fused AdamW,
random token batches. Every step is wrapped in an NVTX range "gearshift.step" (what `gearshift trace --steps`
counts) and ends with a device synchronize so that the step's GPU work lies inside its range.

  python3 train_gpt.py --preset gpt2-medium --batch 8 --steps 30 --warmup 5
  python3 train_gpt.py ... --profile trace.json     # torch.profiler over the measured steps, Chrome trace out
  python3 train_gpt.py ... --accum 2                 # gradient accumulation: 2 microbatches per optimizer step
  python3 train_gpt.py ... --vary-seq 512,768,1024   # each step's sequence length drawn from the list

Prints one JSON line: config, per-step wall times (s) of the measured steps and their median.
"""
import argparse
import json
import random
import statistics
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

PRESETS = {  # n_layer, n_embd, n_head
    "gpt2": (12, 768, 12),
    "gpt2-medium": (24, 1024, 16),
    "gpt2-large": (36, 1280, 20),
    "gpt2-xl": (48, 1600, 25),
    "gpt3-xl": (24, 2048, 16),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="gpt2-medium")
    p.add_argument("--n-layer", type=int)
    p.add_argument("--n-embd", type=int)
    p.add_argument("--n-head", type=int)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=30, help="measured steps")
    p.add_argument("--warmup", type=int, default=5, help="steps before the measured ones")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-nvtx", action="store_true", help="do not emit gearshift.step NVTX ranges")
    p.add_argument("--profile", metavar="JSON", help="run torch.profiler over the measured steps, write Chrome trace")
    p.add_argument("--sync-every", type=int, default=1,
                   help="synchronize the device every N steps (0: only at the end; the CPU then runs ahead of the "
                        "GPU as in real training, and step times are CPU-side)")
    p.add_argument("--accum", type=int, default=1, help="microbatches per optimizer step (gradient accumulation)")
    p.add_argument("--vary-seq", metavar="L1,L2,...", help="draw each step's sequence length from this list")
    a = p.parse_args()

    if not torch.cuda.is_available():
        print("train_gpt.py: no CUDA device", file=sys.stderr)
        return 2
    n_layer, n_embd, n_head = PRESETS[a.preset]
    n_layer, n_embd, n_head = a.n_layer or n_layer, a.n_embd or n_embd, a.n_head or n_head
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    cfg = GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_positions=a.seq, vocab_size=50257,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    with torch.device(dev):  # initialised on the GPU: a GPT-3 XL shape starts in seconds, not a minute
        model = GPT2LMHeadModel(cfg).to(dtype=torch.bfloat16)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    params = sum(t.numel() for t in model.parameters())
    gen = torch.Generator(device=dev).manual_seed(a.seed)

    seqs = [int(x) for x in a.vary_seq.split(",")] if a.vary_seq else [a.seq]
    if max(seqs) > a.seq:
        p.error("--vary-seq lengths must be <= --seq")
    pick = random.Random(a.seed)

    def step() -> None:
        seq = pick.choice(seqs)
        for _ in range(a.accum):
            ids = torch.randint(0, cfg.vocab_size, (a.batch, seq), device=dev, generator=gen)
            loss = model(input_ids=ids, labels=ids).loss / a.accum
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    nvtx = not a.no_nvtx
    times = []
    prof = None
    for i in range(a.warmup + a.steps):
        if i == a.warmup and a.profile:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                      torch.profiler.ProfilerActivity.CUDA])
            prof.__enter__()
        t0 = time.perf_counter()
        if nvtx:
            torch.cuda.nvtx.range_push("gearshift.step")
        if prof is not None:  # torch.profiler's own step annotation, what its traces carry with a schedule
            with torch.profiler.record_function(f"ProfilerStep#{i}"):
                step()
                torch.cuda.synchronize()
        else:
            step()
            if a.sync_every and (i + 1) % a.sync_every == 0:
                torch.cuda.synchronize()
        if nvtx:
            torch.cuda.nvtx.range_pop()
        t1 = time.perf_counter()
        if i >= a.warmup:
            times.append(t1 - t0)
    torch.cuda.synchronize()
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.profile)
    print(json.dumps({"preset": a.preset, "n_layer": n_layer, "n_embd": n_embd, "n_head": n_head, "seq": a.seq,
                      "accum": a.accum, "sync_every": a.sync_every, "vary_seq": seqs if a.vary_seq else None,
                      "batch": a.batch, "params": params, "gpu": torch.cuda.get_device_name(0),
                      "torch": torch.__version__, "warmup": a.warmup, "step_times_s": times,
                      "median_step_s": statistics.median(times)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
