#!/usr/bin/env bash
# Where the runtime feed's overhead comes from, dry-run only. Usage: overhead_split.sh BIN OUT [ROUNDS]
#  1. launch_cost.cu: CPU cost per launch and GPU time per empty kernel, plain vs the injection library with the
#     feed (every kernel's activity / launch callbacks only / activity in 25 of every 100 ms) vs `gearshift trace`.
#  2. GPT-2 small step time: plain vs `gearshift run --plan` with the same feed variants and a 50 ms flush,
#     ROUNDS rounds (default 3) in rotated order (overhead.py --variant; VARIANTS replaces the set, @LIB@ in a
#     spec stands for the injection library).
# BIN holds gearshift, libgearshift_inject.so and the shared libraries they need. Reads NVML only: never changes
# clocks, power limits or any other GPU setting.
set -u
BIN=$(cd "$1" && pwd); OUT=$2; ROUNDS=${3:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
GS="$BIN/gearshift"; LIB="$BIN/libgearshift_inject.so"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1 GEARSHIFT_INJECT_LIBRARY="$LIB"
mkdir -p "$OUT"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
log "machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv | tee "$OUT/nvidia-smi-before.csv"

if [[ -z "${SKIP_LAUNCH:-}" ]]; then  # SKIP_LAUNCH=1: step time only
  log "launch cost: CPU per launch, GPU per empty kernel"
  nvcc -O2 -o "$OUT/launch_cost" "$HERE/launch_cost.cu" || exit 1
  # The injection library's feed into a socket that feed_sink.py drains (no gearshift process).
  feed() { env "$@" CUDA_INJECTION64_PATH="$LIB" python3 "$HERE/feed_sink.py" -- "$OUT/launch_cost" 1000 2>/dev/null; }
  for r in 1 2; do
    echo "plain      $("$OUT/launch_cost" 1000)"
    echo "feed_all   $(feed)"
    echo "feed_cb    $(feed GEARSHIFT_FEED_ACTIVITY_PERIOD_MS=100 GEARSHIFT_FEED_ACTIVITY_WINDOW_MS=0)"
    echo "feed_w25   $(feed GEARSHIFT_FEED_ACTIVITY_PERIOD_MS=100 GEARSHIFT_FEED_ACTIVITY_WINDOW_MS=25)"
    echo "trace      $("$GS" trace -o "$OUT/lc.jsonl.gz" -- "$OUT/launch_cost" 1000 2>/dev/null | grep '^{')"
    rm -f "$OUT"/lc.jsonl.gz*
  done | tee "$OUT/launch_cost.txt"
  rm -f "$OUT/launch_cost"
fi

A=(--preset gpt2 --batch 16)
log "gpt2: trace 8 steps, plan (phase, L = 6 ms, 0.5 %)"
"$GS" trace -o "$OUT/gpt2.jsonl.gz" -- python3 "$HERE/train_gpt.py" "${A[@]}" --steps 8 --warmup 3 2>&1 | grep -v '^{' | tail -1
"$GS" plan "$OUT/gpt2.jsonl.gz" --gpu h200 --max-slowdown 0.5% --switch-latency-ms 6 -o "$OUT/gpt2.plan.json" > /dev/null || { log "plan failed"; exit 1; }
log "gpt2: step-time overhead, $ROUNDS rounds"
# Default variants: every kernel's activity, the launch callbacks alone, activity in 25 of every 100 ms, a 50 ms
# flush. VARIANTS (space-separated overhead.py --variant specs) replaces them.
VARIANTS=${VARIANTS:-all: cb_only:GEARSHIFT_FEED_ACTIVITY_PERIOD_MS=100,GEARSHIFT_FEED_ACTIVITY_WINDOW_MS=0 \
w25:GEARSHIFT_FEED_ACTIVITY_PERIOD_MS=100,GEARSHIFT_FEED_ACTIVITY_WINDOW_MS=25 flush50:GEARSHIFT_FEED_FLUSH_MS=50}
VARGS=(); for v in $VARIANTS; do VARGS+=(--variant "${v//@LIB@/$LIB}"); done
python3 "$HERE/overhead.py" --gearshift "$GS" --inject "$LIB" --mode run --plan "$OUT/gpt2.plan.json" --pairs "$ROUNDS" \
  --out "$OUT" "${VARGS[@]}" -- "${A[@]}" --steps "${STEPS:-30}" --warmup 5
rm -f "$OUT"/*_dry_*.jsonl "$OUT/gpt2.jsonl.gz"
log "done"; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit --format=csv | tee "$OUT/nvidia-smi-after.csv"
