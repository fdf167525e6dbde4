#!/usr/bin/env python3
"""Analyse bench/device/monitor_check.sh's output folder: energy agreement with the independent counter log,
training-step overhead with/without the monitor, the monitor's CPU use. Usage: analyze.py DIR"""
import bisect
import csv
import json
import statistics
import sys


def load_probe(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append((int(r["t_start_ns"]), int(r["t_end_ns"]), int(r["energy_mj"])))
    # Ticks: the value changed between two reads; located at the midpoint of (prev start, this end).
    ticks = []
    for a, b in zip(rows, rows[1:]):
        if b[2] != a[2]:
            ticks.append(((a[0] + b[1]) // 2, b[2], b[1] - a[0]))
    return rows, ticks


def energy_at(ticks, t):
    """Counter (mJ) at time t, linear between the located ticks around t."""
    times = [x[0] for x in ticks]
    i = bisect.bisect_right(times, t)
    if i == 0 or i == len(ticks):
        return None
    (t0, e0, _), (t1, e1, _) = ticks[i - 1], ticks[i]
    return e0 + (e1 - e0) * (t - t0) / (t1 - t0)


def main(d):
    rows, ticks = load_probe(f"{d}/probe_log.csv")
    steps = [(b[0] - a[0]) / 1e6 for a, b in zip(ticks, ticks[1:])]
    print(f"probe: {len(rows)} reads, {len(ticks)} counter steps, step period median {statistics.median(steps):.1f} ms,"
          f" tick location uncertainty median {statistics.median(t[2] for t in ticks) / 1e6:.1f} ms")
    windows = []
    idle = json.loads(open(f"{d}/idle.json").read().strip().splitlines()[-1])
    windows.append(("idle sleep 3", idle))
    train = json.loads(open(f"{d}/train.json").read().strip().splitlines()[-1])
    for ph in train["phases"]:
        if ph.get("monitor_json"):
            windows.append((f"training pair {ph['pair']}", ph["monitor_json"]))
    print("\nenergy per window: gearshift monitor vs independent counter log (separate process)")
    print(f"{'window':<20} {'time_s':>7} {'monitor_J':>10} {'probe_J':>10} {'diff_%':>7} method")
    diffs = []
    for name, j in windows:
        g = j["gpus"][0]
        e0 = energy_at(ticks, j["begin_monotonic_ns"])
        e1 = energy_at(ticks, j["end_monotonic_ns"])
        if e0 is None or e1 is None:
            print(f"{name:<20} outside the probe log")
            continue
        ref = (e1 - e0) / 1e3
        diff = 100 * (g["energy_j"] - ref) / ref
        diffs.append(abs(diff))
        print(f"{name:<20} {g['time_s']:7.3f} {g['energy_j']:10.2f} {ref:10.2f} {diff:7.3f} {g['method']}")
    print(f"max |diff| {max(diffs):.3f} %")

    print("\ntraining step, median per phase (s), alternating pairs")
    by_pair = {}
    for ph in train["phases"]:
        by_pair.setdefault(ph["pair"], {})[ph["monitor"]] = ph
    overheads = []
    for p, v in sorted(by_pair.items()):
        on, off = v[True]["median_step_s"], v[False]["median_step_s"]
        overheads.append(100 * (on - off) / off)
        print(f"pair {p}: with {on:.5f}  without {off:.5f}  overhead {overheads[-1]:+.3f} %")
    print(f"median overhead {statistics.median(overheads):+.3f} % over {len(overheads)} pairs")
    cpu = [ph["monitor_cpu_s"] for ph in train["phases"] if ph["monitor"]]
    wall = [ph["wall_s"] for ph in train["phases"] if ph["monitor"]]
    print(f"monitor CPU: {sum(cpu):.2f} s over {sum(wall):.1f} s of phases = {100 * sum(cpu) / sum(wall):.2f} % of a core"
          f" (per phase: {', '.join(f'{100 * c / w:.2f}' for c, w in zip(cpu, wall))} %)")
    print(f"\nmodel: {train['model']}, GPU {train['gpu']}, torch {train['torch']}")


if __name__ == "__main__":
    main(sys.argv[1])
