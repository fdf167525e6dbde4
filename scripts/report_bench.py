#!/usr/bin/env python3
"""What `gearshift plan --report` costs (issue 17): the report's size and the wall time it adds to `gearshift plan`
on the shipped GPT-3 XL trace. Median of N runs each, alternating with and without --report.

    python3 scripts/report_bench.py [--binary build/src/cli/gearshift] [--runs 7]

Budget: report <= 5 MB, added time <= 0.5 s. Exits 1 when a budget is exceeded. Results: bench/results/2026-12-01-plan-report.md.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "src", "cli", "gearshift"))
    ap.add_argument("--trace", default=os.path.join(ROOT, "data", "traces", "gpt3xl_h200_trace.json.gz"))
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        html = os.path.join(d, "plan.html")
        plain, report = [], []
        timed([a.binary, "plan", a.trace])  # warm the page cache
        for _ in range(a.runs):
            plain.append(timed([a.binary, "plan", a.trace]))
            report.append(timed([a.binary, "plan", a.trace, "--report", html]))
        size = os.path.getsize(html)
    p, r = statistics.median(plain), statistics.median(report)
    print(f"gearshift plan            median {p:.3f} s over {a.runs} runs")
    print(f"gearshift plan --report   median {r:.3f} s over {a.runs} runs")
    print(f"added by --report         {r - p:+.3f} s (budget 0.5 s)")
    print(f"report size               {size / 1e6:.3f} MB (budget 5 MB)")
    return 0 if size <= 5e6 and r - p <= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
