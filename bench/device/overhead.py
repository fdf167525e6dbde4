#!/usr/bin/env python3
"""Step-time overhead of gearshift on train_gpt.py: alternating pairs of runs without and with
`gearshift trace` (--mode trace) or `gearshift run --plan PLAN` in dry-run (--mode run); each pair's ratio of
median step times and the median ratio. The order inside a pair alternates (plain first, then wrapped first)
so that a slow drift of the GPU's state does not favour either side.

  overhead.py --gearshift BIN --mode trace --pairs 5 --out DIR -- <train_gpt.py args>
  overhead.py --gearshift BIN --mode run --plan plan.json --pairs 5 --out DIR -- <train_gpt.py args>

With --variant NAME:KEY=VALUE,KEY=VALUE (repeatable) each round runs the plain job and every variant (the
wrapped run with those environment variables added, e.g. the injection library's GEARSHIFT_FEED_* tuning), in
an order rotated every round, and reports each variant's median ratio to the same round's plain run. The key
WRAP picks how a variant runs the job: WRAP=gearshift (default, through --mode), WRAP=none (the job alone with
the variables, e.g. CUDA_INJECTION64_PATH only), WRAP=sink (the job under feed_sink.py, which names a socket of
its own in GEARSHIFT_RUNTIME_SOCKET and drains it: the injection library's feed without the gearshift process;
SINKARGS=A+B adds feed_sink.py arguments, e.g. --phases), WRAP=auto (`gearshift run --auto`, dry run).
--family F runs `train_families.py F` instead of train_gpt.py and compares the second half's s/step. RUNARGS=A+B adds arguments A B
to `gearshift run` (e.g. RUNARGS=--gpu-progress+activity).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(cmd)}")
    lines = r.stdout.splitlines()
    train = [l for l in lines if l.startswith("TRAIN family=")]
    if train:  # train_families.py: the second half's s/step (under --auto the plan is applied by then)
        kv = dict(x.split("=", 1) for x in train[-1].split()[1:])
        iv = [l for l in lines if l.startswith("TRAIN_INTERVALS ")]
        steps = [float(x) / 1e3 for x in iv[-1].split("=", 1)[1].split(",") if x] if iv else []
        return {"median_step_s": float(kv["late_step_s"]), "step_times_s": steps, "family": kv["family"]}, \
            r.stderr + r.stdout
    line = [l for l in lines if l.startswith("{")][-1]
    return json.loads(line), r.stderr + r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearshift", required=True)
    p.add_argument("--mode", choices=["trace", "run"], default="trace")
    p.add_argument("--plan", help="plan.json for --mode run")
    p.add_argument("--switch-latency-ms", default="6")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--out", required=True)
    p.add_argument("--tag", default="")
    p.add_argument("--inject", help="libgearshift_inject.so to name in CUDA_INJECTION64_PATH for the wrapped run "
                                    "(gearshift builds whose `run` does not set it itself)")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME:KEY=VALUE,... a wrapped run with these environment variables (repeatable)")
    p.add_argument("--family", help="run train_families.py FAMILY (its TRAIN line's late_step_s) instead of "
                                    "train_gpt.py")
    p.add_argument("--max-slowdown", default="0.5%", help="WRAP=auto: run --auto's budget")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    a = p.parse_args()
    args = [x for x in a.rest if x != "--"]
    here = os.path.dirname(os.path.abspath(__file__))
    if a.family:
        base = [sys.executable, os.path.join(here, "train_families.py"), a.family] + args
    else:
        base = [sys.executable, os.path.join(here, "train_gpt.py")] + args
    tag = a.tag or a.mode
    variants = [parse_variant(v) for v in a.variant] or [(tag, {})]

    def wrapped(name, i, how, runargs, extra):
        if how == "none":
            return base
        if how == "sink":
            sink = [x for x in extra.get("SINKARGS", "").split("+") if x]
            return [sys.executable, os.path.join(here, "feed_sink.py")] + sink + ["--"] + base
        if how == "auto":  # what a user runs: the warm-up, the plan, the dry-run verification
            return [a.gearshift, "run", "--auto", "--max-slowdown", a.max_slowdown, "--switch-latency-ms",
                    a.switch_latency_ms, "--dry-run-log", os.path.join(a.out, f"{name}_dry_{i}.jsonl"),
                    "--verify-log", os.path.join(a.out, f"{name}_verify_{i}.jsonl")] + runargs + ["--"] + base
        if a.mode == "trace":
            return [a.gearshift, "trace", "-o", os.path.join(a.out, f"overhead_{i}.jsonl.gz"), "--"] + base
        return [a.gearshift, "run", "--plan", a.plan, "--switch-latency-ms", a.switch_latency_ms,
                "--dry-run-log", os.path.join(a.out, f"{name}_dry_{i}.jsonl")] + runargs + ["--"] + base

    rounds = {name: [] for name, _ in variants}
    for i in range(a.pairs):
        # Plain first in even rounds, last in odd ones; the variants rotate so none always follows plain.
        k = i % len(variants)
        order = [None] + variants[k:] + variants[:k]
        if i % 2 == 1:
            order = order[1:] + order[:1]
        times, logs = {}, {}
        for v in order:
            if v is None:
                times[None], _ = run(base)
                continue
            name, extra = v
            how = extra.get("WRAP", "gearshift")
            runargs = [x for x in extra.get("RUNARGS", "").split("+") if x]
            env = dict(os.environ, **{k: x for k, x in extra.items() if k not in ("WRAP", "RUNARGS", "SINKARGS")})
            if a.inject and (a.mode == "run" or how in ("sink", "auto")):
                env["CUDA_INJECTION64_PATH"] = a.inject
            times[name], logs[name] = run(wrapped(name, i, how, runargs, extra), env)
        plain = times[None]
        for name, _ in variants:
            w = times[name]
            ratio = w["median_step_s"] / plain["median_step_s"]
            summary = [l for l in logs[name].splitlines() if l.startswith(("gearshift run", "  ", "gearshift-trace"))]
            rounds[name].append({"plain_s": plain["median_step_s"], "wrapped_s": w["median_step_s"], "ratio": ratio,
                                 "plain_first": i % 2 == 0, "gearshift_output": summary,
                                 "plain_steps_s": plain["step_times_s"], "wrapped_steps_s": w["step_times_s"]})
            print(f"round {i}: plain {plain['median_step_s']*1e3:.3f} ms, {name} {w['median_step_s']*1e3:.3f} ms, "
                  f"overhead {100*(ratio-1):+.3f} %", flush=True)
            if i == 0:
                print("\n".join(summary[-12:]), flush=True)
    for name, extra in variants:
        ratios = [x["ratio"] for x in rounds[name]]
        med = statistics.median(ratios)
        out = {"mode": a.mode, "variant": name, "env": extra, "pairs": rounds[name],
               "median_overhead_pct": 100 * (med - 1), "min_pct": 100 * (min(ratios) - 1),
               "max_pct": 100 * (max(ratios) - 1), "config": plain}
        print(json.dumps({"mode": a.mode, "tag": name, "env": extra, "median_overhead_pct": out["median_overhead_pct"],
                          "min_pct": out["min_pct"], "max_pct": out["max_pct"]}), flush=True)
        with open(os.path.join(a.out, f"overhead_{name}.json"), "w") as f:
            json.dump(out, f, indent=1)


def parse_variant(text):
    name, _, rest = text.partition(":")
    env = {}
    for kv in filter(None, rest.split(",")):
        k, eq, v = kv.partition("=")
        if not eq:
            raise SystemExit(f"--variant {text}: expected NAME:KEY=VALUE,...")
        env[k] = v
    return name, env


if __name__ == "__main__":
    main()
