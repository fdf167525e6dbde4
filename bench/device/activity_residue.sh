#!/usr/bin/env bash
# Does kernel activity that was on and then turned off keep costing the job? (`run --auto` records every kernel
# during its warm-up, then turns activity off.) Dry-run only; reads NVML, never changes clocks or limits.
#  1. launch_cost_phases.cu, 12 s each: CPU ns per launch in each second, plain and through the injection
#     library's feed (feed_sink.py drains it): activity never on, on for the first 4 s then off, always on.
#  2. The accumulation job (train_families.py accum, STEPS steps; late_step_s is the median s/step of the second
#     half): plain, feed with activity never on, feed with activity on for the first 20 s then off,
#     `run --plan PLAN`, `run --auto`, plain again.
# (The periods are at most 60,000 ms: the library refuses a longer one with a note and records every kernel. The
# first run, 2026-12-03, asked for 600,000 ms, so its "never" and "on..._off" runs recorded every kernel.)
# Usage: activity_residue.sh BIN OUT PLAN [STEPS]   (BIN as bundle.sh makes it; PLAN from a `run --auto` of accum)
set -uo pipefail
B=$(cd "$1" && pwd); OUT=$2; PLAN=$3; STEPS=${4:-200}
HERE=$(cd "$(dirname "$0")" && pwd)
LIB="$B/libgearshift_inject.so"
export LD_LIBRARY_PATH="$B" GEARSHIFT_INJECT_LIBRARY="$LIB" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
log() { echo "== $(date -u +%T) $*"; }
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv,noheader
sink() {  # sink PERIOD_MS WINDOW_MS CMD...: the feed alone, activity as the two numbers say
  local p=$1 w=$2; shift 2
  env CUDA_INJECTION64_PATH="$LIB" GEARSHIFT_FEED_ACTIVITY_PERIOD_MS="$p" GEARSHIFT_FEED_ACTIVITY_WINDOW_MS="$w" \
    python3 "$HERE/feed_sink.py" -- "$@"
}
if [[ -z "${SKIP_MICRO:-}" ]]; then
  log "launch cost by second"
  nvcc -O2 -o "$OUT/lcp" "$HERE/launch_cost_phases.cu" || exit 1
  for r in 1 2; do
    echo "plain        $("$OUT/lcp" 12)"
    echo "never        $(sink 60000 0 "$OUT/lcp" 12 2>/dev/null)"
    echo "on4s_off     $(sink 60000 4000 "$OUT/lcp" 12 2>/dev/null)"
    echo "always       $(sink 0 0 "$OUT/lcp" 12 2>/dev/null)"
  done | tee "$OUT/launch_cost_phases.txt"
  rm -f "$OUT/lcp"
fi
J=(python3 "$HERE/train_families.py" accum --steps "$STEPS")
for m in ${MODES:-plain never on20s_off plan auto plain2}; do
  log "accum $m"
  case $m in
    plain*) timeout 120 "${J[@]}" 2>&1 | grep -E "^TRAIN" ;;
    never) sink 60000 0 timeout 120 "${J[@]}" 2>&1 | grep -E "^TRAIN|runtime feed" ;;
    on20s_off) sink 60000 20000 timeout 120 "${J[@]}" 2>&1 | grep -E "^TRAIN|runtime feed" ;;
    plan) timeout 120 "$B/gearshift" run --plan "$PLAN" --dry-run-log "$OUT/plan.dry.jsonl" -- "${J[@]}" > "$OUT/plan.log" 2>&1
          grep -E "^TRAIN|intended clocks|prediction|runtime feed" "$OUT/plan.log" ;;
    auto) timeout 130 "$B/gearshift" run --auto --max-slowdown 0.5% --switch-latency-ms 6 \
            --dry-run-log "$OUT/auto.dry.jsonl" -- "${J[@]}" > "$OUT/auto.log" 2>&1
          grep -E "^TRAIN|intended clocks|prediction|warm-up [0-9]|untraced step|runtime feed" "$OUT/auto.log" ;;
  esac
done
rm -f "$OUT"/*.dry.jsonl
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv,noheader
