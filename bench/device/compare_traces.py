#!/usr/bin/env python3
"""Compare a gearshift CUPTI trace with a torch.profiler Chrome trace of the same script, step by step.

Steps are the CPU step ranges (gearshift: NVTX "gearshift.step"; torch.profiler: "ProfilerStep#N"); because
train_gpt.py synchronizes at the end of each step, a step's kernels start inside its range. For each trace the
steady-state step is the most common per-step multiset of kernel names; the two must be equal, and their GPU
kernel time per step (median over steps) is compared.

  compare_traces.py GEARSHIFT.jsonl.gz TORCH.json [--skip N] [--json OUT]
"""
import argparse
import collections
import gzip
import json
import statistics
import sys


def gearshift_steps(path, skip):
    names, kernels, ranges = {}, [], []
    with gzip.open(path, "rt") as f:
        header = json.loads(f.readline())
        complete = False
        for line in f:
            r = json.loads(line)
            tag = r[0]
            if tag == "n":
                names[r[1]] = r[2]
            elif tag == "k":
                kernels.append((r[2], r[3], names[r[1]]))
            elif tag == "m" and r[1].startswith("gearshift.step") and not r[4]:
                ranges.append((r[2], r[2] + r[3]))
            elif tag == "end":
                complete = r[1].get("complete", False)
    ranges.sort()
    return split(kernels, ranges[skip:]), {"complete": complete, "header": header}


def torch_steps(path, skip):
    with open(path) as f:
        t = json.load(f)
    events = t["traceEvents"] if isinstance(t, dict) else t
    kernels, ranges = [], []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        ts, dur = float(e["ts"]) * 1000.0, float(e.get("dur", 0)) * 1000.0  # us -> ns
        if cat == "kernel":
            kernels.append((ts, dur, e["name"]))
        elif cat == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"):
            ranges.append((ts, ts + dur))
    ranges.sort()
    return split(kernels, ranges[skip:]), {}


def split(kernels, ranges):
    kernels.sort()
    steps = []
    i = 0
    for lo, hi in ranges:
        while i < len(kernels) and kernels[i][0] < lo:
            i += 1
        names, gpu_ns = collections.Counter(), 0.0
        j = i
        while j < len(kernels) and kernels[j][0] < hi:
            names[kernels[j][2]] += 1
            gpu_ns += kernels[j][1]
            j += 1
        steps.append((names, gpu_ns))
    return steps


def steady(steps):
    keyed = collections.Counter(frozenset(s[0].items()) for s in steps)
    key, n = keyed.most_common(1)[0]
    return collections.Counter(dict(key)), n, statistics.median(s[1] for s in steps)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("gearshift")
    p.add_argument("torch")
    p.add_argument("--skip", type=int, default=0, help="gearshift step ranges to skip (warm-up steps)")
    p.add_argument("--json", help="write the comparison here")
    a = p.parse_args()
    g_steps, g_info = gearshift_steps(a.gearshift, a.skip)
    t_steps, _ = torch_steps(a.torch, 0)
    if not g_steps or not t_steps:
        print(f"no steps: gearshift {len(g_steps)}, torch.profiler {len(t_steps)}")
        return 1
    g_names, g_n, g_gpu = steady(g_steps)
    t_names, t_n, t_gpu = steady(t_steps)
    diff = {k: (g_names.get(k, 0), t_names.get(k, 0)) for k in set(g_names) | set(t_names)
            if g_names.get(k, 0) != t_names.get(k, 0)}
    out = {
        "gearshift_steps": len(g_steps), "gearshift_steady_steps": g_n, "torch_steps": len(t_steps),
        "torch_steady_steps": t_n, "kernels_per_step_gearshift": sum(g_names.values()),
        "kernels_per_step_torch": sum(t_names.values()), "distinct_gearshift": len(g_names),
        "distinct_torch": len(t_names), "names_and_counts_equal": not diff,
        "differences": {k: {"gearshift": v[0], "torch": v[1]} for k, v in sorted(diff.items())[:20]},
        "gpu_ms_per_step_gearshift": g_gpu / 1e6, "gpu_ms_per_step_torch": t_gpu / 1e6,
        "gpu_time_rel_diff": (g_gpu - t_gpu) / t_gpu, "gearshift_trace_complete": g_info["complete"],
    }
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if not diff and abs(out["gpu_time_rel_diff"]) <= 0.02 else 1


if __name__ == "__main__":
    sys.exit(main())
