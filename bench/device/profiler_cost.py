"""What torch.profiler costs a launch-bound job's step, per CPU event it records (issue 46: a profiler's delay is
not slack). Dry: reads nothing but the job's own clock, changes no GPU setting.

For each job (a deep narrow MLP, launch-bound; ResNet-50 at a small batch, fp16, channels_last) it times steps
plain, then under torch.profiler (CPU + CUDA activities) as users run it: default, record_shapes, with_stack,
record_shapes + with_stack + profile_memory. Per configuration: the median step (ms, perf_counter around a step
ending in cuda.synchronize; the plain steps run before and after the profiled ones), the profiler's CPU events per step
(cpu_op / user_annotation and cuda_runtime events in its exported trace) and the cost per CPU event
(step − plain) / events. Prints one JSON line per configuration and writes the traces under OUT.
Usage: python3 profiler_cost.py OUT [--steps 60]
"""
import argparse
import gzip
import json
import os
import statistics
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule


def mlp_job():
    torch.manual_seed(0)
    layers = []
    for _ in range(24):
        layers += [nn.Linear(256, 256), nn.LayerNorm(256), nn.GELU()]
    model = nn.Sequential(*layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)  # a launch per parameter: launch-bound
    x = torch.randn(32, 256, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
    return step


def resnet_job():
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(16, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (16,), device="cuda")
    crit = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = crit(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step


def timed(step, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) * 1e3)
    return out


CONFIGS = {
    "default": {},
    "shapes": {"record_shapes": True},
    "stack": {"with_stack": True},
    "all": {"record_shapes": True, "with_stack": True, "profile_memory": True},
}


def profiled(step, n, kw, trace_path):
    steps = []
    # The trace is written when the active steps end (on_trace_ready): exported after the context, a schedule's
    # next cycle has already dropped it (the first run of this script counted 0 events).
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=2, active=n, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(trace_path), **kw) as prof:
        for _ in range(n + 2):
            t = time.perf_counter()
            step()
            torch.cuda.synchronize()
            steps.append((time.perf_counter() - t) * 1e3)
            prof.step()
    return steps[2:]


def events_per_step(trace_path, n):
    with open(trace_path) as f:
        ev = json.load(f)["traceEvents"]
    cats = {}
    for e in ev:
        c = e.get("cat")
        cats[c] = cats.get(c, 0) + 1
    cpu = cats.get("cpu_op", 0) + cats.get("user_annotation", 0)
    return cpu / n, cats.get("cuda_runtime", 0) / n, cats.get("kernel", 0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--jobs", default="mlp,resnet")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    for job in a.jobs.split(","):
        step = {"mlp": mlp_job, "resnet": resnet_job}[job]()
        timed(step, 20)  # warm-up: allocator, cuDNN autotune, lazy init
        plain = timed(step, a.steps)
        rows = []
        for name, kw in CONFIGS.items():
            path = os.path.join(a.out, f"{job}.{name}.json")
            prof = profiled(step, a.steps, kw, path)
            cpu, rt, k = events_per_step(path, a.steps)
            with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
                g.write(f.read())
            os.remove(path)
            rows.append((name, prof, cpu, rt, k))
        plain += timed(step, a.steps)  # plain again after: drift shows as the two halves' difference
        base = statistics.median(plain)
        for name, prof, cpu, rt, k in rows:
            med = statistics.median(prof)
            print(json.dumps({"job": job, "config": name, "plain_ms": round(base, 4), "profiled_ms": round(med, 4),
                              "slower_pct": round((med / base - 1) * 100, 2), "cpu_events_per_step": cpu,
                              "runtime_events_per_step": rt, "kernels_per_step": k,
                              "us_per_cpu_event": round((med - base) * 1e3 / cpu, 3) if cpu else None,
                              "us_per_cpu_and_runtime_event": round((med - base) * 1e3 / (cpu + rt), 3) if cpu + rt else None,
                              "plain_halves_ms": [round(statistics.median(plain[:a.steps]), 4),
                                                  round(statistics.median(plain[a.steps:]), 4)]}), flush=True)


if __name__ == "__main__":
    main()
