#!/usr/bin/env python3
"""Calibration of the DVFS model on every H200 trace gearshift ships or reads, as a Markdown table.

Runs `gearshift plan TRACE --json` per trace and prints, per trace: the measured power the model was calibrated
to (and where it comes from), the calibrated activity scale and memory/uncore power, the modelled baseline step
time and energy beside the measured ones, the chosen plan's saving range (5th / expected / 95th percentile of the
conditioned draws, sim/saving_range.hpp) and the calibration/disagreement warnings (sim/measurement.hpp).
Usage: scripts/calibration_table.py GEARSHIFT_BINARY TRACE...   (called by scripts/model_validation.sh)
"""
import json
import os
import subprocess
import sys


def main() -> int:
    binary, traces = sys.argv[1], sys.argv[2:]
    print("| trace | calibrated to (measured) | activity scale | memory W | modelled s/step | measured s/step "
          "| modelled J/step | measured J/step | saving low / expected / high % | warnings |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in traces:
        name = os.path.basename(path).replace(".json.gz", "")
        r = subprocess.run([binary, "plan", path, "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"| {name} | exit {r.returncode}: {r.stderr.strip()[:120]} | | | | | | | | |")
            continue
        j = json.loads(r.stdout)
        m, b, meas = j["model"], j["baseline"], j.get("measured", {})
        w = m.get("calibrated_to_power_w")
        cal = f"{w:.0f} W" if w else "uncalibrated"
        mt, me = meas.get("time_s"), meas.get("energy_j")
        mw = []
        for x in m.get("warnings", []):
            if "at its bound" in x:
                mw.append("fit at its bound")
            elif "caps dense GEMMs" in x:
                mw.append("GEMMs capped below half the clock")
        if mt and abs(b["time_s"] / mt - 1) > 0.05:
            mw.append(f"step {100 * (b['time_s'] / mt - 1):+.0f} %")
        if me and abs(b["energy_j"] / me - 1) > 0.05:
            mw.append(f"energy {100 * (b['energy_j'] / me - 1):+.0f} %")
        g = j["saving_range"]
        rng = f"{g['saving_low_pct']:.2f} / {g['saving_expected_pct']:.2f} / {g['saving_high_pct']:.2f}"
        print(f"| {name} | {cal} | {m['activity_scale']:.3f} | {m.get('memory_w_at_max', 0):.0f} "
              f"| {b['time_s']:.4f} | {mt if mt is None else f'{mt:.4f}'} | {b['energy_j']:.2f} "
              f"| {me if me is None else f'{me:.2f}'} | {rng} | {'; '.join(mw) if mw else '—'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
