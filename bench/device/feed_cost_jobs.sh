#!/usr/bin/env bash
# What watching costs a launch-bound job, split by part, dry-run only (bench/results/2026-12-07-s31-feed.md, "What watching costs a
# launch-bound job"). Usage: feed_cost_jobs.sh BIN OUT [ROUNDS] [FAMILY]
# FAMILY (default resnet: ResNet-50, AMP + GradScaler, channels_last; train_families.py) runs ROUNDS rounds (default
# 2) of, in rotated order (overhead.py --family): the plain job; the injection library loaded with no feed
# (libonly); its feed drained by feed_sink.py with the launch callbacks alone (sink_cb); the same with what the
# runtime asks for once a plan runs (stream markers every 5 ms, kernel activity 200 ms of every 5 s: sink_run); and
# `gearshift run --auto` (auto). Each variant's figure is its second half's s/step over the same round's plain run.
# STEPS (default 400) optimizer steps per run.
# BIN holds gearshift, libgearshift_inject.so and the shared libraries they need. Reads NVML only: never changes
# clocks, power limits or any other GPU setting.
set -u
BIN=$(cd "$1" && pwd); OUT=$2; ROUNDS=${3:-2}; FAMILY=${4:-resnet}
HERE=$(cd "$(dirname "$0")" && pwd)
GS="$BIN/gearshift"; LIB="$BIN/libgearshift_inject.so"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1 GEARSHIFT_INJECT_LIBRARY="$LIB"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv,noheader | tee "$OUT/nvidia-smi.csv"
CB="GEARSHIFT_FEED_ACTIVITY_PERIOD_MS=100,GEARSHIFT_FEED_ACTIVITY_WINDOW_MS=0"
python3 "$HERE/overhead.py" --gearshift "$GS" --inject "$LIB" --mode run --family "$FAMILY" --pairs "$ROUNDS" \
  --out "$OUT" --variant "libonly:WRAP=none,CUDA_INJECTION64_PATH=$LIB" --variant "sink_cb:WRAP=sink,$CB" \
  --variant "sink_run:WRAP=sink,$CB,SINKARGS=--phases+1:M 5000|A 5000 200" --variant "auto:WRAP=auto" \
  -- --steps "${STEPS:-400}"
grep -h "gearshift run --auto: \(plan\|untraced\|warm-up\)\|verification\|noise" "$OUT"/overhead_auto.json 2>/dev/null | head -5
