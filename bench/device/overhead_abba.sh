#!/usr/bin/env bash
# Step-time overhead of `gearshift run --auto` on one job, in ABBA rounds (plain, auto, auto, plain, ...): a drift of
# the machine over the call cancels within a round, which one-sided pairs (plain always first) do not. With
# GIVEUP_S set, also one `run --auto` that gives up during the warm-up (--warmup-timeout GIVEUP_S; the job's launch
# feed turned off then) beside its own plain run. Dry-run only; reads NVML, never changes clocks or limits.
# Timing: a run of accum takes ~60 s at 240 steps; 2 rounds and the give-up pair of 240 steps did not fit in one
# 600 s device call (2026-12-03), 2 rounds of 200 steps do.
# Usage: overhead_abba.sh BIN OUT [FAMILY] [STEPS] [ROUNDS]   (train_families.py FAMILY; late_step_s: the median
# s/step of the job's second half). Prints each run's TRAIN line, then overhead.py-style figures: per round
# (mean of the two auto runs against the mean of the two plain ones) and the plain runs' own spread.
set -uo pipefail
B=$(cd "$1" && pwd); OUT=$2; FAMILY=${3:-accum}; STEPS=${4:-200}; ROUNDS=${5:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$B" GEARSHIFT_INJECT_LIBRARY="$B/libgearshift_inject.so" PYTHONUNBUFFERED=1 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
J=(python3 "$HERE/train_families.py" "$FAMILY" --steps "$STEPS")
T=${JOB_TIMEOUT:-150}
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv,noheader
run_one() {  # MODE TAG
  echo "== $(date -u +%T) $1 $2"
  case $1 in
    plain) timeout "$T" "${J[@]}" > "$OUT/$2.log" 2>&1 ;;
    auto) timeout "$T" "$B/gearshift" run --auto --max-slowdown 0.5% --switch-latency-ms 6 \
            --dry-run-log "$OUT/$2.dry.jsonl" -- "${J[@]}" > "$OUT/$2.log" 2>&1 ;;
    giveup) timeout "$T" "$B/gearshift" run --auto --max-slowdown 0.5% --switch-latency-ms 6 \
              --warmup-timeout "${GIVEUP_S:-6}" --dry-run-log "$OUT/$2.dry.jsonl" -- "${J[@]}" > "$OUT/$2.log" 2>&1 ;;
  esac
  grep -E "^TRAIN |warm-up [0-9]|gave up|untraced step|intended clocks|prediction|runtime feed|turned the launch feed|calibrated to the measured|cannot reproduce|energy while live" "$OUT/$2.log"
  rm -f "$OUT/$2.dry.jsonl"  # not needed here; the logs say what the runs did
}
for r in $(seq 1 "$ROUNDS"); do
  run_one plain "r${r}_p1"; run_one auto "r${r}_a1"; run_one auto "r${r}_a2"; run_one plain "r${r}_p2"
done
if [[ -n "${GIVEUP_S:-}" ]]; then run_one giveup g_a; run_one plain g_p; fi
python3 - "$OUT" "$ROUNDS" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def late(tag):
    m = re.search(r"^TRAIN .*late_step_s=([0-9.]+)", open(f"{out}/{tag}.log").read(), re.M)
    return float(m.group(1)) if m else float("nan")
per = []
for r in range(1, rounds + 1):
    p = (late(f"r{r}_p1") + late(f"r{r}_p2")) / 2; a = (late(f"r{r}_a1") + late(f"r{r}_a2")) / 2
    per.append(100 * (a / p - 1))
    print(f"round {r}: plain {p*1e3:.2f} ms, auto {a*1e3:.2f} ms, overhead {per[-1]:+.2f} %; plain runs differ "
          f"{100*(late(f'r{r}_p2')/late(f'r{r}_p1')-1):+.2f} %")
print(f"median overhead over {rounds} rounds: {statistics.median(per):+.2f} %")
import os
if os.path.exists(f"{out}/g_a.log"):
    print(f"gave-up run against the plain run after it: {100*(late('g_a')/late('g_p')-1):+.2f} %")
PY
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv,noheader
# The device tool brings back 8 files at most: the logs as one tar beside OUT.
tar -cf "$OUT.tar" -C "$OUT" . && rm -rf "$OUT"
