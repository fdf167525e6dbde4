#!/usr/bin/env python3
"""Step-time overhead of gearshift on train_gpt.py: alternating pairs of runs without and with
`gearshift trace` (--mode trace) or `gearshift run --plan PLAN` in dry-run (--mode run); each pair's ratio of
median step times and the median ratio. The order inside a pair alternates (plain first, then wrapped first)
so that a slow drift of the GPU's state does not favour either side.

  overhead.py --gearshift BIN --mode trace --pairs 5 --out DIR -- <train_gpt.py args>
  overhead.py --gearshift BIN --mode run --plan plan.json --pairs 5 --out DIR -- <train_gpt.py args>
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
    line = [l for l in r.stdout.splitlines() if l.startswith("{")][-1]
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
    p.add_argument("rest", nargs=argparse.REMAINDER)
    a = p.parse_args()
    args = [x for x in a.rest if x != "--"]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_gpt.py")
    base = [sys.executable, script] + args
    tag = a.tag or a.mode
    pairs = []
    for i in range(a.pairs):
        if a.mode == "trace":
            wrapped = [a.gearshift, "trace", "-o", os.path.join(a.out, f"overhead_{i}.jsonl.gz"), "--"] + base
        else:
            wrapped = [a.gearshift, "run", "--plan", a.plan, "--switch-latency-ms", a.switch_latency_ms,
                       "--dry-run-log", os.path.join(a.out, f"{tag}_dry_{i}.jsonl"), "--"] + base
        env = dict(os.environ, CUDA_INJECTION64_PATH=a.inject) if a.inject and a.mode == "run" else None
        if i % 2 == 0:
            plain, _ = run(base)
            wrap, log = run(wrapped, env)
        else:
            wrap, log = run(wrapped, env)
            plain, _ = run(base)
        ratio = wrap["median_step_s"] / plain["median_step_s"]
        summary = [l for l in log.splitlines() if l.startswith(("gearshift run", "  ", "gearshift-trace"))]
        pairs.append({"plain_s": plain["median_step_s"], "wrapped_s": wrap["median_step_s"], "ratio": ratio,
                      "plain_first": i % 2 == 0, "gearshift_output": summary})
        print(f"pair {i}: plain {plain['median_step_s']*1e3:.3f} ms, {a.mode} {wrap['median_step_s']*1e3:.3f} ms, "
              f"overhead {100*(ratio-1):+.3f} %", flush=True)
        if i == 0:
            print("\n".join(summary[-12:]), flush=True)
    ratios = [x["ratio"] for x in pairs]
    med = statistics.median(ratios)
    out = {"mode": a.mode, "pairs": pairs, "median_overhead_pct": 100 * (med - 1),
           "min_pct": 100 * (min(ratios) - 1), "max_pct": 100 * (max(ratios) - 1), "config": plain}
    print(json.dumps({"mode": a.mode, "tag": tag, "median_overhead_pct": out["median_overhead_pct"],
                      "min_pct": out["min_pct"], "max_pct": out["max_pct"]}), flush=True)
    with open(os.path.join(a.out, f"overhead_{tag}.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
