#!/usr/bin/env python3
"""Step-time overhead of `gearshift trace`: alternating pairs of runs of train_gpt.py without and with the
injection library; reports each pair's ratio of median step times and the median ratio.

  overhead.py --gearshift BIN --pairs 5 --out DIR -- <train_gpt.py args>
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
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    line = [l for l in r.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line), r.stderr + r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearshift", required=True)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--out", required=True)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    a = p.parse_args()
    args = [x for x in a.rest if x != "--"]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_gpt.py")
    base = [sys.executable, script] + args
    pairs = []
    for i in range(a.pairs):
        plain, _ = run(base)
        traced, log = run([a.gearshift, "trace", "-o", os.path.join(a.out, f"overhead_{i}.jsonl.gz"), "--"] + base)
        ratio = traced["median_step_s"] / plain["median_step_s"]
        pairs.append({"plain_s": plain["median_step_s"], "traced_s": traced["median_step_s"], "ratio": ratio})
        print(f"pair {i}: plain {plain['median_step_s']*1e3:.3f} ms, traced {traced['median_step_s']*1e3:.3f} ms, "
              f"overhead {100*(ratio-1):+.3f} %", flush=True)
        if i == 0:
            print(log[-1500:], flush=True)
    med = statistics.median(x["ratio"] for x in pairs)
    out = {"pairs": pairs, "median_overhead_pct": 100 * (med - 1), "config": plain}
    print(json.dumps({"median_overhead_pct": out["median_overhead_pct"]}))
    with open(os.path.join(a.out, "overhead.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
