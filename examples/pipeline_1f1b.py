"""Two pipeline stages over two GPUs with torch.distributed (NCCL for activations, gloo for gearshift's
planning), 1F1B, dry run (the GPUs' clocks are never changed).

Each stage holds half of a pre-norm transformer stack (bf16). Every forward and backward runs inside
gearshift.pipeline.instruction(kind, microbatch) (NVTX ranges + recorded times); each rank measures its GPU's
energy per iteration with gearshift.Monitor (measured, NVML); then the ranks plan over the job's own process
group: all-gather of profiles and iteration times, the pipeline planner on rank 0, per-rank schedules
scattered back (gearshift.distributed.plan_pipeline_stages). The profile holds only the clock the GPUs ran at
(no clock is locked in a dry run), so the plan can only say what that profile supports.

    python examples/pipeline_1f1b.py --iters 10 --microbatches 8 --out results/
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import gearshift
import gearshift.distributed as gd
import gearshift.pipeline as gp


def make_stage(rank, args):
    torch.manual_seed(rank)
    layers = [torch.nn.TransformerEncoderLayer(args.hidden, args.heads, 4 * args.hidden, dropout=0.0,
                                               batch_first=True, norm_first=True) for _ in range(args.layers // 2)]
    mods = torch.nn.ModuleDict({"blocks": torch.nn.Sequential(*layers)})
    if rank == 0:
        mods["embed"] = torch.nn.Embedding(args.vocab, args.hidden)
    else:
        mods["head"] = torch.nn.Linear(args.hidden, args.vocab)
    return mods.to("cuda", dtype=torch.bfloat16)


def iteration(rank, mods, opt, batches, args):
    """One 1F1B iteration of M microbatches on a 2-stage pipeline (batched P2P so NCCL cannot deadlock)."""
    M, shape = args.microbatches, (args.micro_batch, args.seq, args.hidden)
    peer = 1 - rank
    saved = {}

    def fwd(i, x_in=None):
        with gp.instruction("forward", i, sync=args.sync):
            if rank == 0:
                y = mods["blocks"](mods["embed"](batches[i]))
                saved[i] = y
                return y
            x_in.requires_grad_(True)
            y = mods["head"](mods["blocks"](x_in)).float()
            loss = torch.nn.functional.cross_entropy(y.view(-1, y.size(-1)), batches[i].view(-1))
            saved[i] = (x_in, loss)
            return None

    def bwd(i, grad=None):
        with gp.instruction("backward", i, sync=args.sync):
            if rank == 0:
                saved.pop(i).backward(grad)
                return None
            x_in, loss = saved.pop(i)
            loss.backward()
            return x_in.grad

    def exchange(send=None, recv_like=True):
        ops, buf = [], None
        if send is not None:
            ops.append(dist.P2POp(dist.isend, send.detach().contiguous(), peer))
        if recv_like:
            buf = torch.empty(shape, device="cuda", dtype=torch.bfloat16)
            ops.append(dist.P2POp(dist.irecv, buf, peer))
        for r in dist.batch_isend_irecv(ops):
            r.wait()
        return buf

    if rank == 0:  # warm-up 1 forward, steady 1F1B, cool-down 1 backward
        exchange(send=fwd(0), recv_like=False)
        for i in range(1, M):
            y = fwd(i)
            g = exchange(send=y)
            bwd(i - 1, g)
        bwd(M - 1, exchange())
    else:
        x = exchange()
        fwd(0, x)
        g = bwd(0)
        for i in range(1, M):
            x = exchange(send=g)
            fwd(i, x)
            g = bwd(i)
        exchange(send=g, recv_like=False)
    opt.step()
    opt.zero_grad(set_to_none=True)


def worker(rank, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
    gloo = dist.new_group(backend="gloo")  # gearshift's object collectives stay on the CPU
    mods = make_stage(rank, args)
    opt = torch.optim.AdamW(mods.parameters(), lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(7)
    batches = [torch.randint(0, args.vocab, (args.micro_batch, args.seq), device="cuda", generator=g)
               for _ in range(args.microbatches)]
    for _ in range(args.warmup):
        iteration(rank, mods, opt, batches, args)
    torch.cuda.synchronize()
    gp.recorder().clear()
    dist.barrier(group=gloo)
    with gearshift.Monitor(gpu_indices=[rank]) as mon:
        mon.begin_window("iters")
        for _ in range(args.iters):
            iteration(rank, mods, opt, batches, args)
        m = mon.end_window("iters")
    s_per_iter = m.time_s / args.iters
    measured = {"rank": rank, "s_per_iter": s_per_iter, "j_per_iter": m.energy_j[rank] / args.iters,
                "avg_power_w": m.avg_power_w[rank], "approximate": m.approximate,
                "instruction_mean_s": {k: v[0] for k, v in gp.recorder().mean_times().items()}}
    times = gd.gather_step_times(s_per_iter, group=gloo)
    everyone = [None, None]
    dist.all_gather_object(everyone, measured, group=gloo)
    try:
        planned = gd.plan_pipeline_stages(stage=rank, stages=2, microbatches=args.microbatches,
                                          sm_clock_mhz=1980, power_w=m.avg_power_w[rank],
                                          step_time_s=s_per_iter, group=gloo)
        plan_out = {"straggler_factor": planned["straggler_factor"], "t_min_s": planned["summary"]["t_min_s"],
                    "schedule_clocks": sorted({i["sm_clock_mhz"] for i in planned["schedule"]["instructions"]}),
                    "instructions": len(planned["schedule"]["instructions"])}
    except gearshift.GearshiftError as e:
        plan_out = {"error": f"{type(e).__name__}: {e}"}
    if rank == 0:
        result = {"date": time.strftime("%Y-%m-%d"), "device": torch.cuda.get_device_name(0),
                  "command": "python examples/pipeline_1f1b.py " + " ".join(
                      f"--{k} {v}" for k, v in vars(args).items() if k != "out"),
                  "measured": everyone, "gathered_iteration_times_s": times,
                  "straggler_factors": gd.straggler_factors(times), "plan_on_rank0": plan_out}
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "pipeline_1f1b.json"), "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result, indent=1))
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--sync", type=int, default=1, help="synchronize around instructions (GPU times)")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    if torch.cuda.device_count() < 2:
        raise SystemExit("needs two GPUs")
    mp.spawn(worker, args=(args,), nprocs=2, join=True)


if __name__ == "__main__":
    main()
