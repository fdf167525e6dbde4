#!/usr/bin/env python3
"""A data-parallel training job of two (or more) ranks started by torchrun, for what one GPU (or none) allows of
issue 19: the launch feed and rank discovery through torchrun, one runtime serving several processes on one GPU.

  torchrun --nproc_per_node 2 ddp_ranks.py [--device cuda|cpu] [--steps N] [--log-every K] [--imbalance F]

Every rank runs a small GPT-2 (4 x 512, vocabulary 8192, random weights, nothing downloaded) under
DistributedDataParallel with the gloo backend, all on one device: gloo reduces CUDA tensors through the host, so
two ranks can share one GPU (NCCL refuses two ranks on one GPU). --imbalance F gives the last rank F times the
others' batch (as ../shared/data/traces/ddp2_* do): the others wait for it in the all-reduce. The loss is read
every --log-every steps. At the end each rank prints `TRAIN rank=R steps=N step_s=<median s/step over logging
intervals, the first left out> batch=B device=D`.

Never changes clocks, power limits or any other GPU setting.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--imbalance", type=float, default=1.0, help="the last rank's batch over the others'")
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", 0) if a.device == "cuda" else torch.device("cpu")
    if a.device == "cuda":
        torch.cuda.set_device(dev)
    torch.manual_seed(rank)
    cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=a.seq)
    model = GPT2LMHeadModel(cfg).to(dev)
    ddp = DDP(model, device_ids=[0] if a.device == "cuda" else None)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    batch = a.batch if rank < world - 1 else max(1, round(a.batch * a.imbalance))
    if a.device == "cpu":
        batch, seq = max(1, batch // 4), a.seq // 4
    else:
        seq = a.seq
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device=dev)
    marks = []
    for step in range(1, a.steps + 1):
        loss = ddp(x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % a.log_every == 0:
            loss.item()  # a synchronize, as a logging loop does
            marks.append(time.perf_counter())
    per = [(b - m) / a.log_every for m, b in zip(marks[1:], marks[2:])] or [float("nan")]
    print(f"TRAIN rank={rank} world={world} steps={a.steps} step_s={statistics.median(per):.5f} batch={batch} "
          f"device={dev} pid={os.getpid()} local_rank={os.environ.get('LOCAL_RANK')}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
