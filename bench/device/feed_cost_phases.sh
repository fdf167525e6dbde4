#!/usr/bin/env bash
# What the live phase of `gearshift run` costs a CPU-bound job beyond its launch callbacks, measured inside one
# process so that the machine's drift between runs (±5 % between runs of GPT-2 small with gradient accumulation
# on the lent H200) cancels: the job runs with the injection library's feed into feed_sink.py, which alternates
# every PHASE_S seconds between "live" (stream markers every 5 ms, kernel activity 200 of every 5000 ms: what
# `run` asks for once it follows the job) and "quiet" (no markers, no kernel activity: the launch and synchronize
# callbacks alone), then turns the feed off (O) OFF_S seconds after the job connected: no CUPTI for the rest.
# The job's intervals (LOG_EVERY steps) are split by phase (those that lie wholly inside one); a plain run follows.
# PHASES overrides the two phases (feed_sink.py's --phases; the first is reported as "live", the second as
# "quiet"): e.g. PHASES="6:M 5000|A 60000 0;6:M 0|A 5000 200" splits the live phase's markers from its sampled
# activity. A list of more than two phases names them in NAMES (comma-separated; the last is what the others are
# set against), e.g. PHASES="6:M 5000|A 60000 0;6:M 0|A 5000 200;6:M 0|A 60000 0" NAMES=markers,activity,quiet.
# NO_PLAIN=1 skips the plain run after it. LOG_EVERY=K: the job's intervals of K steps (default 10; shorter phases
# need shorter intervals, e.g. PHASE_S=4 LOG_EVERY=2). JOB_TIMEOUT (default 150) seconds per run.
# Dry-run only: reads NVML, never changes clocks or limits. Usage: feed_cost_phases.sh BIN OUT [FAMILY] [STEPS]
set -uo pipefail
B=$(cd "$1" && pwd); OUT=$2; FAMILY=${3:-accum}; STEPS=${4:-400}
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$B" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
J=(python3 "$HERE/train_families.py" "$FAMILY" --steps "$STEPS" --log-every "${LOG_EVERY:-10}")
P=${PHASE_S:-6}
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv,noheader
echo "== $(date -u +%T) phases"
env CUDA_INJECTION64_PATH="$B/libgearshift_inject.so" GEARSHIFT_FEED_ACTIVITY_PERIOD_MS=60000 \
  GEARSHIFT_FEED_ACTIVITY_WINDOW_MS=0 timeout "${JOB_TIMEOUT:-150}" python3 "$HERE/feed_sink.py" \
  --phases "${PHASES:-$P:M 5000|A 5000 200;$P:M 0|A 60000 0}" --off-after "${OFF_S:-55}" -- "${J[@]}" > "$OUT/phases.log" 2>&1
grep -E "^TRAIN |runtime feed|turned the launch feed" "$OUT/phases.log"
if [[ ${NO_PLAIN:-0} != 1 ]]; then
  echo "== $(date -u +%T) plain"
  timeout "${JOB_TIMEOUT:-150}" "${J[@]}" > "$OUT/plain.log" 2>&1
  grep -E "^TRAIN " "$OUT/plain.log"
fi
python3 - "$OUT" <<'PY'
import os, re, statistics, sys
out = sys.argv[1]
text = open(f"{out}/phases.log").read()
iv = re.search(r"^TRAIN_INTERVALS ms_per_step=(.*)$", text, re.M)
if iv:
    ms = [float(x) for x in iv.group(1).split(",")]
    ends = [float(x) for x in re.search(r"^TRAIN_INTERVAL_ENDS monotonic_s=(.*)$", text, re.M).group(1).split(",")]
else:  # the job was cut (JOB_TIMEOUT): the intervals it printed as they ended
    at = re.findall(r"^TRAIN_AT step=\d+ ms_per_step=([0-9.]+) monotonic_s=([0-9.]+)", text, re.M)
    ms, ends = [float(a) for a, _ in at], [float(b) for _, b in at]
    print(f"the job was cut: {len(ms)} intervals it printed as they ended")
marks = [(float(t), tag) for t, tag in re.findall(r"^SINK_PHASE ([0-9.]+) (\S+)$", text, re.M)]
# Phase names: "live" and "quiet" for the default two, NAMES (comma-separated) for a longer PHASES list.
names = (os.environ.get("NAMES") or "live,quiet").split(",")
name = {str(i): n for i, n in enumerate(names)} | {"off": "off"}
by = {n: [] for n in name.values()}
cycles = {}  # cycle (one turn through the phases) -> phase -> its intervals: each phase against its neighbours
for i in range(1, len(ends)):  # the first interval holds the job's first steps: left out
    a, b = ends[i - 1], ends[i]
    cur = [tag for t, tag in marks if t <= a]
    nxt = [t for t, _ in marks if a < t < b]
    if cur and not nxt:
        if cur[-1] in name:
            by[name[cur[-1]]].append(ms[i])
            if cur[-1] != "off":
                cycles.setdefault((len(cur) - 1) // len(names), {}).setdefault(name[cur[-1]], []).append(ms[i])
for k, v in by.items():
    print(f"{k}: {len(v)} intervals, median {statistics.median(v):.2f} ms/step" if v else f"{k}: none")
try:
    plain = [float(x) for x in re.search(r"^TRAIN_INTERVALS ms_per_step=(.*)$", open(f"{out}/plain.log").read(), re.M).group(1).split(",")][1:]
    print(f"plain run: {len(plain)} intervals, median {statistics.median(plain):.2f} ms/step")
except (OSError, AttributeError):
    print("plain run: none")
base = names[-1]  # the last phase is the one the others are set against (quiet: the callbacks alone)
for n in names[:-1]:
    if by[n] and by[base]:
        print(f"{n} against {base} (same process): {100*(statistics.median(by[n])/statistics.median(by[base])-1):+.2f} %")
# Within each cycle, each phase's median against the base phase's median of the same cycle: the job's drift over
# seconds (H200 MoE: 130-195 ms/step within one run, 2026-12-04) cancels where the phases are short.
for n in names[:-1]:
    r = [100 * (statistics.median(c[n]) / statistics.median(c[base]) - 1) for c in cycles.values() if n in c and base in c]
    if r:
        print(f"{n} against {base}, paired within {len(r)} cycles: median {statistics.median(r):+.2f} % "
              f"(each: {', '.join(f'{x:+.1f}' for x in r)})")
if by[base] and by["off"]:
    print(f"{base} against off (same process, off later): {100*(statistics.median(by[base])/statistics.median(by['off'])-1):+.2f} %")
PY
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv,noheader
