#!/usr/bin/env bash
# Energy measurement on a real GPU (bench/results/2026-11-30-energy-measurement.md, "Energy measurement"); reads NVML only: never sets
# clocks, power limit or modes.
# Writes into $OUT: env.txt, gpus.txt, cost.jsonl, idle.json, train.json, train_log.txt, probe_log.csv.
# Analyse afterwards with bench/device/analyze.py $OUT.
# Usage (repo root): [BIN=build-dev/bin] OUT=/tmp/out bench/device/monitor_check.sh [PAIRS] [PHASE_STEPS]
# BIN holds the carried gearshift (bench/device/bundle.sh); nvml_probe is built there by bench/device/build.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gearshift-monitor-check}
mkdir -p "$OUT"
pairs=${1:-6}
phase_steps=${2:-40}
{
  date -u +%FT%TZ
  for t in g++ cmake ninja python3 nvidia-smi; do echo "$t: $(command -v $t)"; done
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv
  ldconfig -p | grep -m1 libnvidia-ml || true
  nproc; grep -m1 "model name" /proc/cpuinfo
} >"$OUT/env.txt" 2>&1

# The NVML library: the loader's, else the driver's folder.
if ! ldconfig -p | grep -q libnvidia-ml.so.1; then
  lib=$(find /usr/local/nvidia /usr/lib /usr/lib64 -name 'libnvidia-ml.so.1' 2>/dev/null | head -1)
  [ -n "$lib" ] && export GEARSHIFT_NVML_LIBRARY=$lib
fi
echo "GEARSHIFT_NVML_LIBRARY=${GEARSHIFT_NVML_LIBRARY:-}" >>"$OUT/env.txt"

bin=${BIN:-build-dev/bin}
"$bin/gearshift" --version >>"$OUT/env.txt" 2>&1 || { echo "no gearshift in $bin (bench/device/bundle.sh)" >&2; exit 1; }
[ -x "$bin/nvml_probe" ] || bash bench/device/build.sh "$bin" >>"$OUT/env.txt" 2>&1
echo "bin=$bin" >>"$OUT/env.txt"

"$bin/gearshift" gpus >"$OUT/gpus.txt" 2>&1; echo "rc=$?" >>"$OUT/gpus.txt"
"$bin/nvml_probe" cost 200 >"$OUT/cost.jsonl" 2>&1

# The independent reader logs the counter every 10 ms for the whole run, in its own process.
"$bin/nvml_probe" log "$OUT/probe_log.csv" 10 &
probe=$!
sleep 0.5
"$bin/gearshift" monitor --json -- sleep 3 >"$OUT/idle.json" 2>>"$OUT/env.txt"
python3 bench/device/monitor_train.py --pairs "$pairs" --phase-steps "$phase_steps" --monitor "$bin/gearshift" \
  >"$OUT/train.json" 2>"$OUT/train_log.txt"
echo "train rc=$?" >>"$OUT/env.txt"
kill -TERM $probe; wait $probe
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv >>"$OUT/env.txt" 2>&1
echo done >>"$OUT/env.txt"
