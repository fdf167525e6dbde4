#!/usr/bin/env bash
# Step-time cost of `gearshift run --plan` against `run --auto` on one job (dry-run): where the live overhead of
# a CPU-sensitive job comes from. Runs plain, `run --plan PLAN`, `run --auto`, plain again; prints each run's
# TRAIN line (train_families.py: late_step_s is the median s/step of the second half).
# Usage: overhead_plan_vs_auto.sh BIN OUT PLAN [FAMILY] [STEPS]   (BIN as bundle.sh makes it; PLAN from a
# `run --auto --plan-output` of the same job). Reads NVML only: never changes clocks or limits.
set -uo pipefail
B=$(cd "$1" && pwd); OUT=$2; PLAN=$3; FAMILY=${4:-accum}; STEPS=${5:-200}
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$B" GEARSHIFT_INJECT_LIBRARY="$B/libgearshift_inject.so" PYTHONUNBUFFERED=1 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
J=(python3 "$HERE/train_families.py" "$FAMILY" --steps "$STEPS")
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv,noheader
for m in plain plan auto plain2; do
  echo "== $m $(date -u +%T)"
  case $m in
    plain*) timeout 100 "${J[@]}" 2>&1 | grep -E "^TRAIN" ;;
    plan) timeout 100 "$B/gearshift" run --plan "$PLAN" --dry-run-log "$OUT/plan.dry.jsonl" -- "${J[@]}" > "$OUT/plan.log" 2>&1
          grep -E "^TRAIN|in-time|prediction|GPU progress" "$OUT/plan.log" ;;
    auto) timeout 110 "$B/gearshift" run --auto --max-slowdown 0.5% --switch-latency-ms 6 \
            --dry-run-log "$OUT/auto.dry.jsonl" -- "${J[@]}" > "$OUT/auto.log" 2>&1
          grep -E "^TRAIN|intended clocks|prediction|warm-up [0-9]" "$OUT/auto.log" ;;
  esac
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv,noheader
