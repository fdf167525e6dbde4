#!/usr/bin/env bash
# The online runtime on one GPU, dry-run only: per-launch cost, `gearshift run --plan` on three workloads, the
# step-time overhead of `run` and of `trace` (bench/results/2026-11-30-runtime.md, "Online runtime"). Usage:
#   [SECTIONS="launch runtime run_overhead trace_overhead"] [PAIRS=5] runtime_dry_run_checks.sh BIN OUT
# BIN holds gearshift, libgearshift_inject.so, cupti_callback_bench (built on the dev machine) and the shared
# libraries they need. Reads NVML only: never changes clocks, power limits or any other GPU setting
# (`gearshift run` without --apply only logs the changes it would make).
set -u
BIN=$(cd "$1" && pwd); OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
GS="$BIN/gearshift"; LIB="$BIN/libgearshift_inject.so"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
SECTIONS=${SECTIONS:-launch runtime run_overhead trace_overhead}
on() { [[ " $SECTIONS " == *" $1 "* ]]; }
PAIRS=${PAIRS:-5}
# The three workloads: GPT-2 small, the GPT-3 XL shape, and gradient accumulation with a varying
# sequence length (each optimizer step: 2 microbatches of a length drawn from 512/768/1024).
declare -A W=([gpt2]="--preset gpt2 --batch 16" [gpt3xl]="--preset gpt3-xl --batch 8"
              [accum]="--preset gpt2-medium --batch 8 --accum 2 --vary-seq 512,768,1024")
WORKLOADS=${WORKLOADS:-gpt2 gpt3xl accum}

log "machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv | tee "$OUT/nvidia-smi-before.csv"

if on launch; then
  log "hot path: per-launch CPU cost, empty kernels"
  nvcc -O2 -o "$OUT/launch_cost" "$HERE/launch_cost.cu" || exit 1
  for r in 1 2 3; do
    echo "plain $("$OUT/launch_cost" 2000)"
    echo "trace $("$GS" trace -o "$OUT/lc.jsonl.gz" -- "$OUT/launch_cost" 2000 2>/dev/null | grep '^{')"
    echo "feed  $(CUDA_INJECTION64_PATH="$LIB" python3 "$HERE/feed_sink.py" -- "$OUT/launch_cost" 2000 2>/dev/null)"
  done | tee "$OUT/launch_cost.txt"
  rm -f "$OUT"/lc.jsonl.gz*
  "$BIN/cupti_callback_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 | tee "$OUT/callback_bench.txt"
fi

if on runtime; then
  for w in $WORKLOADS; do
    read -r -a A <<< "${W[$w]}"
    log "$w: trace 8 steps, plan (phase, L = 6 ms, 0.5 %), run dry 40 steps (synchronized each step, then not)"
    "$GS" trace -o "$OUT/$w.jsonl.gz" -- python3 "$HERE/train_gpt.py" "${A[@]}" --steps 8 --warmup 3 2>&1 | grep -v '^{' | tail -2
    "$GS" plan "$OUT/$w.jsonl.gz" --gpu h200 --max-slowdown 0.5% --switch-latency-ms 6 -o "$OUT/$w.plan.json" --json > "$OUT/$w.plan_report.json" || { log "plan failed"; continue; }
    python3 -c "import json,sys;r=json.load(open(sys.argv[1]));print({k:r[k] for k in r if k in ('baseline','iterations','chosen')})" "$OUT/$w.plan_report.json" 2>/dev/null | cut -c1-600
    CUDA_INJECTION64_PATH="$LIB" "$GS" run --plan "$OUT/$w.plan.json" --switch-latency-ms 6 --dry-run-log "$OUT/$w.dry.jsonl" -- \
      python3 "$HERE/train_gpt.py" "${A[@]}" --steps 40 --warmup 3 > "$OUT/$w.run.out" 2> "$OUT/$w.run.err"
    echo "rc=$?"; grep -v '^{' "$OUT/$w.run.err" | tail -8; grep '^{' "$OUT/$w.run.out" | python3 -c "import json,sys;d=json.loads(sys.stdin.read());print('median step',d['median_step_s'])"
    echo "dry-run log lines: $(wc -l < "$OUT/$w.dry.jsonl")"; head -c 300 "$OUT/$w.dry.jsonl"; echo
    gzip -f "$OUT/$w.dry.jsonl"
    # Without the per-step synchronize the CPU runs ahead of the GPU (as real training does): the runtime sees
    # launches early and can issue changes L ahead.
    CUDA_INJECTION64_PATH="$LIB" "$GS" run --plan "$OUT/$w.plan.json" --switch-latency-ms 6 --dry-run-log "$OUT/$w.nosync.dry.jsonl" -- \
      python3 "$HERE/train_gpt.py" "${A[@]}" --steps 40 --warmup 3 --sync-every 0 > /dev/null 2> "$OUT/$w.nosync.run.err"
    echo "rc=$? (no per-step sync)"; grep -v '^{' "$OUT/$w.nosync.run.err" | tail -4
    rm -f "$OUT/$w.nosync.dry.jsonl" "$OUT/$w.dry.jsonl.gz"
  done
fi

if on run_overhead; then
  for w in ${RUN_OVERHEAD:-gpt2 gpt3xl}; do
    read -r -a A <<< "${W[$w]}"
    [ -s "$OUT/$w.plan.json" ] || continue
    log "run overhead: $w, $PAIRS alternating pairs"
    python3 "$HERE/overhead.py" --gearshift "$GS" --mode run --plan "$OUT/$w.plan.json" --inject "$LIB" --tag "run_$w" \
      --pairs "$PAIRS" --out "$OUT" -- "${A[@]}" --steps "${STEPS:-30}" --warmup 5
    rm -f "$OUT"/run_"$w"_dry_*.jsonl
  done
fi

if on trace_overhead; then
  read -r -a A <<< "${W[gpt3xl]}"
  log "trace overhead: gpt3xl, $PAIRS alternating pairs"
  python3 "$HERE/overhead.py" --gearshift "$GS" --mode trace --tag trace_gpt3xl --pairs "$PAIRS" --out "$OUT" -- "${A[@]}" --steps "${STEPS:-30}" --warmup 5
  rm -f "$OUT"/overhead_[0-9]*.jsonl.gz
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit --format=csv | tee "$OUT/nvidia-smi-after.csv"
log "done"
