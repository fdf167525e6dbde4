"""GPT training on one GPU with gearshift, dry run (the GPU's clocks are never changed).

HF transformers GPT-2 medium-sized model with random weights (no download), bf16, AdamW. It measures
baseline steps with gearshift.Monitor (measured J/step and s/step, NVML energy counter), marks steps with
gearshift.torch.step() (NVTX "gearshift.step"), profiles 3 steps with torch.profiler, plans the exported
trace in process (gearshift.plan_trace: modelled saving), and runs the in-process runtime in dry-run
(gearshift.torch.enable(apply=False)) over a few more steps.

    python examples/train_gpt.py --steps 20 --out results/
Writes OUT/train_gpt.json (and the trace). Figures: 'measured' from NVML, 'modelled' from the planner.
"""

import argparse
import json
import os
import time

import torch

import gearshift
import gearshift.torch as gt


def build(args):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=args.layers, n_embd=args.hidden, n_head=args.heads, n_positions=args.seq,
                     vocab_size=50257)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).to("cuda", dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    data = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device="cuda")
    return model, opt, data


def train_step(model, opt, data):
    out = model(input_ids=data, labels=data)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model, opt, data = build(args)
    result = {"command": "python examples/train_gpt.py " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items() if k != "out"), "device": torch.cuda.get_device_name(0),
        "date": time.strftime("%Y-%m-%d")}

    for _ in range(args.warmup):
        train_step(model, opt, data)
    torch.cuda.synchronize()

    with gearshift.Monitor(gpu_indices=[torch.cuda.current_device()]) as mon:
        mon.begin_window("steps")
        for _ in range(args.steps):
            with gt.step():
                train_step(model, opt, data)
        m = mon.end_window("steps")
    result["measured"] = {"s_per_step": m.time_s / args.steps, "j_per_step": m.total_energy_j / args.steps,
                          "avg_power_w": m.total_energy_j / m.time_s, "approximate": m.approximate}

    trace = os.path.join(args.out, "train_gpt_trace.json")
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(3):
            with gt.step():
                train_step(model, opt, data)
        torch.cuda.synchronize()
    prof.export_chrome_trace(trace)
    t0 = time.perf_counter()
    plan = gearshift.plan_trace(trace, max_slowdown=0.005)
    result["plan_seconds"] = time.perf_counter() - t0
    result["modelled"] = plan["predicted"]
    result["plan_phases"] = len(plan["phases"])

    plan_path = os.path.join(args.out, "train_gpt_plan.json")
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    rt = gt.enable(plan=plan_path, apply=False, dry_run_log=os.path.join(args.out, "train_gpt_dryrun.jsonl"))
    for _ in range(3):
        with gt.step():
            train_step(model, opt, data)
    torch.cuda.synchronize()
    result["runtime_dry_run"] = gt.disable()
    result["runtime_writes_clocks"] = rt.writes_clocks
    try:
        gt.enable(plan=plan_path)
        gt.enable(plan=plan_path)
    except gearshift.AlreadyEnabledError as e:
        result["enable_twice"] = f"AlreadyEnabledError: {e}"
    finally:
        gt.disable()
    os.remove(trace)  # large; the figures above are what the run is for
    with open(os.path.join(args.out, "train_gpt.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
