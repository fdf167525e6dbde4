#!/usr/bin/env bash
# The runtime's three ways into a job on a real GPU, dry-run only (never changes a GPU setting):
# the feed attached to a running PyTorch process (what gearshift.torch.enable() does), `gearshift run` injecting
# the tracer itself, and `gearshift run --auto`. Usage: feed_entry_checks.sh BIN PLAN OUT
set -u
BIN=$(cd "$1" && pwd); PLAN=$2; OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
log "feed attached to a running job"
python3 "$HERE/feed_attach_check.py" "$BIN/libgearshift_inject.so" --steps 10 2>&1 | tail -3
log "gearshift run --plan (injects the tracer itself), GPT-2 small, 20 steps"
"$BIN/gearshift" run --plan "$PLAN" --dry-run-log "$OUT/run.jsonl" -- python3 "$HERE/train_gpt.py" --preset gpt2 --batch 16 --steps 20 --warmup 3 2>&1 | grep -v '^{\|transformers' | tail -6
log "gearshift run --auto --max-slowdown 0.5%, GPT-2 small, 60 steps"
"$BIN/gearshift" run --auto --max-slowdown 0.5% --dry-run-log "$OUT/auto.jsonl" --plan-output "$OUT/auto.plan.json" -- \
  python3 "$HERE/train_gpt.py" --preset gpt2 --batch 16 --steps 60 --warmup 3 2>&1 | grep -v '^{\|transformers' | tail -10
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv
log "done"
