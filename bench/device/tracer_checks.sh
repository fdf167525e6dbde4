#!/usr/bin/env bash
# The CUPTI tracer on one GPU: hot-path benchmark, traced vs torch.profiler kernels, step detection, faults,
# step-time overhead of tracing (bench/results/2026-11-30-tracer.md, "CUPTI tracer"). Usage:
#   [SECTIONS="bench compare steps faults overhead"] [OVERHEAD_ARGS="--preset gpt3-xl --batch 8"] \
#   tracer_checks.sh BIN_DIR OUT_DIR [train_gpt.py args for the comparison runs]
# BIN_DIR holds gearshift, libgearshift_inject.so and cupti_callback_bench (built on a CUDA 13 machine).
# Reads NVML only; never changes clocks, power limits or any GPU setting.
set -u
BIN=$(cd "$1" && pwd); OUT=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=("$@"); [ ${#MODEL[@]} -eq 0 ] && MODEL=(--preset gpt2-medium --batch 8)
GS="$BIN/gearshift"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # libfmt/libbenchmark carried beside the binaries
mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
log() { echo "== $(date -u +%H:%M:%S) $*"; }
SECTIONS=${SECTIONS:-bench compare steps faults overhead}
on() { [[ " $SECTIONS " == *" $1 "* ]]; }
read -r -a OVERHEAD_MODEL <<< "${OVERHEAD_ARGS:-${MODEL[*]}}"

log "machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv
python3 -c 'import torch,transformers;print("torch",torch.__version__,"transformers",transformers.__version__)'
on bench && log "hot path benchmark" && "$BIN/cupti_callback_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 | tee "$OUT/bench.txt"

if on compare; then
log "traced run (gearshift trace) with Chrome output"
"$GS" trace -o "$OUT/gpt.jsonl.gz" --chrome "$OUT/gpt_chrome.json" -- \
  python3 "$HERE/train_gpt.py" "${MODEL[@]}" --steps 10 --warmup 5 2>&1 | tee "$OUT/traced.log"
[ -s "$OUT/gpt.jsonl.gz" ] || { log "NO TRACE: stopping"; exit 1; }
log "torch.profiler run"; python3 "$HERE/train_gpt.py" "${MODEL[@]}" --steps 10 --warmup 5 --profile "$OUT/torch.json" > "$OUT/profile.log" 2>&1; tail -2 "$OUT/profile.log"
log "compare"; python3 "$HERE/compare_traces.py" "$OUT/gpt.jsonl.gz" "$OUT/torch.json" --skip 5 --json "$OUT/compare.json"
gzip -f "$OUT/torch.json" "$OUT/gpt_chrome.json"
fi

if on steps; then
log "--steps 3 stops tracing, the program runs on"
"$GS" trace -o "$OUT/steps3.jsonl.gz" --steps 3 -- python3 "$HERE/train_gpt.py" "${MODEL[@]}" --steps 6 --warmup 2 2>&1 | grep -v '^{' ; echo "rc=${PIPESTATUS[0]}"
fi
if on faults; then
log "fault: CUPTI missing"
GEARSHIFT_CUPTI_LIBRARY=/nonexistent/libcupti.so "$GS" trace -o "$OUT/nocupti.jsonl.gz" -- python3 "$HERE/train_gpt.py" "${MODEL[@]}" --steps 2 --warmup 1 2>&1 | grep -v '^{'; echo "rc=${PIPESTATUS[0]}"
log "fault: torch.profiler inside gearshift trace (two CUPTI clients)"
"$GS" trace -o "$OUT/twoclients.jsonl.gz" -- python3 "$HERE/train_gpt.py" "${MODEL[@]}" --steps 3 --warmup 1 --profile "$OUT/twoclients_torch.json" 2>&1 | grep -v '^{' | tail -8; echo "rc=${PIPESTATUS[0]}"
rm -f "$OUT/twoclients_torch.json"
log "fault: disk full (64 KiB tmpfs)"
mkdir -p /tmp/gs_tiny && mount -t tmpfs -o size=64k tmpfs /tmp/gs_tiny 2>/dev/null && {
  "$GS" trace -o /tmp/gs_tiny/full.jsonl.gz -- python3 "$HERE/train_gpt.py" "${MODEL[@]}" --steps 3 --warmup 1 2>&1 | grep -v '^{'; echo "rc=${PIPESTATUS[0]}"
  umount /tmp/gs_tiny; } || echo "no tmpfs mount here; skipped"
fi

if on overhead; then
log "overhead: alternating pairs, ${OVERHEAD_MODEL[*]}"
python3 "$HERE/overhead.py" --gearshift "$GS" --pairs "${PAIRS:-5}" --out "$OUT" -- "${OVERHEAD_MODEL[@]}" --steps "${OVERHEAD_STEPS:-30}" --warmup 5
rm -f "$OUT"/overhead_*.jsonl.gz
fi
log "done"
