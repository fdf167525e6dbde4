#!/usr/bin/env bash
# The tracer's clock/power sampling on a real GPU (NVML read-only): a short traced GPT-2 run, then the trace's
# GPU name, sample count and the sampled clocks/power. Usage: trace_sampling_check.sh BIN OUT
set -u
BIN=$(cd "$1" && pwd); OUT=$2; HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$OUT"
"$BIN/gearshift" trace -o "$OUT/t.jsonl.gz" -- python3 "$HERE/train_gpt.py" --preset gpt2 --batch 16 --steps 5 --warmup 2 2>&1 | grep -v '^{\|transformers'
python3 - "$OUT/t.jsonl.gz" <<'PY'
import gzip, json, sys
with gzip.open(sys.argv[1], "rt") as f:
    head = json.loads(f.readline())
    p = [json.loads(l) for l in f if l.startswith('["p"')]
sm = sorted({r[3] for r in p}); mem = sorted({r[4] for r in p}); w = [r[5] / 1000 for r in p if r[5] >= 0]
print(json.dumps({"gpu": head["gpu"], "samples": len(p), "sm_mhz": [sm[0], sm[-1]] if sm else None,
                  "mem_mhz": mem, "power_w": [min(w), max(w)] if w else None,
                  "sampling_error": head["meta"].get("clock_sampling_error")}))
PY
