#!/usr/bin/env bash
# Step-time overhead and in-time fraction of `gearshift run` on one GPU with the runtime's default GPU progress
# (the job's synchronizes; kernel activity sampled 200 of every 5000 ms), dry-run only (bench/results/2026-11-30-gpu-progress.md,
# "Where the overhead is, and GPU progress from synchronizes"). Usage:
#   [SECTIONS="gpt2 accum gpt3xl"] [PAIRS=5] [STEPS=30] [MAX_SLOWDOWN=0.5%] [ACTIVITY_FOR="gpt2"]
#   [ACCUM_SYNC="1 0"] [ACCUM_PAIRS=0] [VARIANTS="NAME:K=V,... ..."] gpu_progress_overhead.sh BIN OUT
#  gpt2, gpt3xl: trace 8 steps, plan (phase, L = 6 ms, MAX_SLOWDOWN), then PAIRS rounds of plain vs
#                `gearshift run --plan` (overhead.py; the workloads in ACTIVITY_FOR also with --gpu-progress
#                activity), STEPS steps each, synchronized every step. VARIANTS: overhead.py's --variant
#                values instead (WORKLOAD in a name is replaced by the workload's).
#  accum:        GPT-2 medium, gradient accumulation x2, sequence length drawn from 512/768/1024: one run of 40
#                steps per --sync-every value in ACCUM_SYNC (0: no synchronize, the runtime falls back to kernel
#                activity), then ACCUM_PAIRS rounds of overhead.py (STEPS steps, synchronized every step).
# BIN holds gearshift, libgearshift_inject.so and the shared libraries they need. Reads NVML only: never changes
# clocks, power limits or any other GPU setting (`gearshift run` without --apply only logs what it would do).
set -u
BIN=$(cd "$1" && pwd); OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
GS="$BIN/gearshift"; LIB="$BIN/libgearshift_inject.so"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1 GEARSHIFT_INJECT_LIBRARY="$LIB"
mkdir -p "$OUT"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
SECTIONS=${SECTIONS:-gpt2 accum gpt3xl}
PAIRS=${PAIRS:-5}; STEPS=${STEPS:-30}; MAX_SLOWDOWN=${MAX_SLOWDOWN:-0.5%}; ACTIVITY_FOR=${ACTIVITY_FOR:-${GPT2_ACTIVITY:-1}}
[[ $ACTIVITY_FOR == 1 ]] && ACTIVITY_FOR=gpt2
[[ $ACTIVITY_FOR == 0 ]] && ACTIVITY_FOR=
declare -A W=([gpt2]="--preset gpt2 --batch 16" [gpt3xl]="--preset gpt3-xl --batch 8"
              [accum]="--preset gpt2-medium --batch 8 --accum 2 --vary-seq 512,768,1024")
log "machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv | tee -a "$OUT/nvidia-smi.csv"

plan() {  # workload -> $OUT/$1.plan.json
  read -r -a A <<< "${W[$1]}"
  log "$1: trace 8 steps, plan (phase, L = 6 ms, $MAX_SLOWDOWN)"
  "$GS" trace -o "$OUT/$1.jsonl.gz" -- python3 "$HERE/train_gpt.py" "${A[@]}" --steps 8 --warmup 3 2>&1 | grep -v '^{' | tail -1
  "$GS" plan "$OUT/$1.jsonl.gz" --gpu h200 --max-slowdown "$MAX_SLOWDOWN" --switch-latency-ms 6 -o "$OUT/$1.plan.json" > /dev/null
  rm -f "$OUT/$1.jsonl.gz"
}

for w in $SECTIONS; do
  read -r -a A <<< "${W[$w]}"
  plan "$w" || { log "$w: plan failed"; continue; }
  if [[ $w == accum ]]; then
    for sync in ${ACCUM_SYNC:-1 0}; do
      log "accum: run --plan, 40 steps, --sync-every $sync"
      "$GS" run --plan "$OUT/accum.plan.json" --switch-latency-ms 6 --dry-run-log "$OUT/accum.dry.jsonl" -- \
        python3 "$HERE/train_gpt.py" "${A[@]}" --steps 40 --warmup 3 --sync-every $sync > /dev/null 2> "$OUT/accum.sync$sync.err"
      echo "rc=$?"; grep -v "^\[transformers\]" "$OUT/accum.sync$sync.err" | tail -8
    done
    rm -f "$OUT/accum.dry.jsonl"
    if (( ${ACCUM_PAIRS:-0} > 0 )); then
      log "accum: step-time overhead, $ACCUM_PAIRS rounds"
      python3 "$HERE/overhead.py" --gearshift "$GS" --mode run --plan "$OUT/accum.plan.json" --pairs "$ACCUM_PAIRS" \
        --out "$OUT" --variant "accum_default:" -- "${A[@]}" --steps "$STEPS" --warmup 5
      rm -f "$OUT"/*_dry_*.jsonl
    fi
    continue
  fi
  V=(--variant "${w}_sync:")
  [[ " $ACTIVITY_FOR " == *" $w "* ]] && V+=(--variant "${w}_activity:RUNARGS=--gpu-progress+activity")
  if [[ -n ${VARIANTS:-} ]]; then
    V=(); for v in $VARIANTS; do V+=(--variant "${v//WORKLOAD/$w}"); done
  fi
  log "$w: step-time overhead, $PAIRS rounds"
  python3 "$HERE/overhead.py" --gearshift "$GS" --mode run --plan "$OUT/$w.plan.json" --pairs "$PAIRS" --out "$OUT" \
    "${V[@]}" -- "${A[@]}" --steps "$STEPS" --warmup 5
  rm -f "$OUT"/*_dry_*.jsonl
done
log "done"; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit --format=csv | tee -a "$OUT/nvidia-smi.csv"
