#!/usr/bin/env bash
# Stream markers on one GPU (bench/results/2026-11-30-stream-markers.md, "Stream markers"), dry-run only. Usage: stream_marker_checks.sh BIN OUT
#  1. launch_cost.cu: CPU per launch and GPU per empty kernel, plain vs followed by a stream marker's two driver
#     calls; and through the injection library with markers as often as they can go (GEARSHIFT_FEED_MARKER_US=1:
#     its exit note counts the markers issued and seen on the real driver).
#  2. GPT-2 small: plain vs `gearshift run --plan` with markers (the default) vs --gpu-progress sync, GPT2_PAIRS
#     rotated rounds (default 5), 60 steps each (gpu_progress_overhead.sh).
#  3. GPT-3 XL with a plan of several phases (GPT3XL_SLOWDOWN, default 3 %): GPT3XL_PAIRS rounds (default 1) of
#     markers / sync / activity (GPT3XL_VARIANTS), for the in-time fraction each gets (gpu_progress_overhead.sh).
#  4. accum (only when ORDER names it): ACCUM_PAIRS rounds (default 5) of plain vs the default.
# ORDER (default "gpt2 gpt3xl") picks sections 2-4 and their order; SKIP_LAUNCH=1 leaves out section 1.
# BIN holds gearshift, libgearshift_inject.so and the shared libraries they need. Reads NVML only: never changes
# clocks, power limits or any other GPU setting.
set -u
BIN=$(cd "$1" && pwd); OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
LIB="$BIN/libgearshift_inject.so"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$OUT"
log() { echo "== $(date -u +%H:%M:%S) $*"; }

if [[ ${SKIP_LAUNCH:-0} != 1 ]]; then
  log "launch cost: plain vs a stream marker after every launch"
  nvcc -O2 -o "$OUT/launch_cost" "$HERE/launch_cost.cu" -lcuda || exit 1
  for r in 1 2; do
    echo "plain        $("$OUT/launch_cost" 1000)"
    echo "marker       $("$OUT/launch_cost" 1000 marker)"
    echo "feed_markers $(GEARSHIFT_FEED_MARKER_US=1 GEARSHIFT_FEED_ACTIVITY_PERIOD_MS=1000 GEARSHIFT_FEED_ACTIVITY_WINDOW_MS=0 \
      CUDA_INJECTION64_PATH="$LIB" python3 "$HERE/feed_sink.py" -- "$OUT/launch_cost" 1000 2>"$OUT/feed_markers.err")"
    grep "runtime feed" "$OUT/feed_markers.err"
  done | tee "$OUT/launch_cost.txt"
  rm -f "$OUT/launch_cost"
fi
gpt2() {
  SECTIONS=gpt2 PAIRS=${GPT2_PAIRS:-5} STEPS=60 VARIANTS=${GPT2_VARIANTS:-"WORKLOAD_markers: WORKLOAD_sync:RUNARGS=--gpu-progress+sync"} \
    bash "$HERE/gpu_progress_overhead.sh" "$BIN" "$OUT/gpt2"
}
gpt3xl() {
  SECTIONS=gpt3xl PAIRS=${GPT3XL_PAIRS:-1} STEPS=30 MAX_SLOWDOWN=${GPT3XL_SLOWDOWN:-3%} \
    VARIANTS=${GPT3XL_VARIANTS:-"WORKLOAD_markers: WORKLOAD_sync:RUNARGS=--gpu-progress+sync WORKLOAD_activity:RUNARGS=--gpu-progress+activity"} \
    bash "$HERE/gpu_progress_overhead.sh" "$BIN" "$OUT/gpt3xl"
}
accum() {  # ACCUM_PAIRS rounds of plain vs the default, 30 steps synchronized every step
  SECTIONS=accum ACCUM_SYNC=" " ACCUM_PAIRS=${ACCUM_PAIRS:-5} STEPS=30 bash "$HERE/gpu_progress_overhead.sh" "$BIN" "$OUT/accum"
}
for section in ${ORDER:-gpt2 gpt3xl}; do "$section"; done
log done
