#!/usr/bin/env python3
"""GPT training steps on one GPU for gearshift's device checks (no downloads: random weights and data).

HF transformers GPT2LMHeadModel from a GPT2Config, bf16 weights, fused AdamW, sequence 1024.

Plain run:   train_gpt.py --steps 50                      -> JSON with per-step times
Overhead:    train_gpt.py --pairs 6 --phase-steps 40 --monitor BIN
             alternates phases with and without `BIN monitor --interval-ms 100 --json -- sleep 1e6` running
             (order swapped every pair), and reports per phase the median step time, the monitor's CPU time
             while the phase ran (from /proc, clock ticks) and the monitor's JSON (its energy window).
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def build(args):
    cfg = GPT2Config(n_layer=args.layers, n_embd=args.hidden, n_head=args.heads, n_positions=args.seq,
                     vocab_size=50257)
    model = GPT2LMHeadModel(cfg).to(device="cuda", dtype=torch.bfloat16)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    data = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device="cuda")
    params = sum(p.numel() for p in model.parameters())
    return model, opt, data, params


def step(model, opt, data):
    loss = model(input_ids=data, labels=data).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def timed_steps(model, opt, data, n):
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        step(model, opt, data)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return times


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, clock ticks (all threads)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--pairs", type=int, default=0)
    ap.add_argument("--phase-steps", type=int, default=40)
    ap.add_argument("--monitor", default="")
    ap.add_argument("--settle", type=float, default=0.5, help="s between starting the monitor and timing")
    args = ap.parse_args()

    model, opt, data, params = build(args)
    timed_steps(model, opt, data, args.warmup)
    out = {"model": {"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "params": params,
                     "batch": args.batch, "seq": args.seq, "dtype": "bf16", "optimizer": "AdamW(fused)"},
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    if args.pairs == 0:
        t = timed_steps(model, opt, data, args.steps)
        out["step_s"] = t
        out["median_step_s"] = statistics.median(t)
        print(json.dumps(out))
        return

    hz = os.sysconf("SC_CLK_TCK")
    phases = []
    for pair in range(args.pairs):
        order = [True, False] if pair % 2 == 0 else [False, True]
        for with_monitor in order:
            proc = None
            if with_monitor:
                proc = subprocess.Popen([args.monitor, "monitor", "--interval-ms", "100", "--json", "--",
                                         "sleep", "1000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
            time.sleep(args.settle)  # both arms wait alike; the monitor is past start-up when timing begins
            c0 = cpu_ticks(proc.pid) if proc else 0
            w0 = time.monotonic()
            t = timed_steps(model, opt, data, args.phase_steps)
            wall = time.monotonic() - w0
            c1 = cpu_ticks(proc.pid) if proc else 0
            ph = {"pair": pair, "monitor": with_monitor, "median_step_s": statistics.median(t),
                  "mean_step_s": statistics.fmean(t), "wall_s": wall,
                  "phase_begin_monotonic_ns": int(w0 * 1e9), "phase_end_monotonic_ns": int((w0 + wall) * 1e9)}
            if proc:
                time.sleep(args.settle)
                proc.send_signal(signal.SIGTERM)  # forwarded to sleep; the monitor reports and exits 143
                stdout, stderr = proc.communicate(timeout=30)
                ph["monitor_cpu_s"] = (c1 - c0) / hz
                ph["monitor_cpu_pct_of_core"] = 100.0 * (c1 - c0) / hz / wall
                ph["monitor_rc"] = proc.returncode
                ph["monitor_json"] = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
                ph["monitor_stderr"] = stderr[-2000:]
            phases.append(ph)
            print(json.dumps(ph), file=sys.stderr)
    out["phases"] = phases
    print(json.dumps(out))


if __name__ == "__main__":
    main()
