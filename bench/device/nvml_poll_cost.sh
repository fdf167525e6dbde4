#!/usr/bin/env bash
# What reading the GPU's NVML energy counter every 50 ms (as `gearshift run` does while live, src/monitor/
# run_energy.hpp) costs a job, without gearshift: the job alone, then beside a poller that calls
# nvmlDeviceGetTotalEnergyConsumption every PERIOD_MS, in ABBA order (plain, poll, poll, plain). Read-only NVML.
# Usage: nvml_poll_cost.sh OUT [FAMILY] [STEPS]   (train_families.py FAMILY; late_step_s: median s/step, 2nd half)
set -uo pipefail
OUT=$1; FAMILY=${2:-moe}; STEPS=${3:-150}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
J=(python3 "$HERE/train_families.py" "$FAMILY" --steps "$STEPS")
poller() {  # exec: $! is the poller itself, which kill then stops (a child left behind held the output open)
  exec python3 - "${PERIOD_MS:-50}" <<'PY'
import ctypes, sys, time
nvml = ctypes.CDLL("libnvidia-ml.so.1")
assert nvml.nvmlInit_v2() == 0
dev = ctypes.c_void_p()
assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0
mj, n, period = ctypes.c_ulonglong(), 0, float(sys.argv[1]) / 1e3
while True:
    nvml.nvmlDeviceGetTotalEnergyConsumption(dev, ctypes.byref(mj))
    n += 1
    time.sleep(period)
PY
}
for tag in p1 n1 n2 p2; do
  echo "== $(date -u +%T) $tag"
  if [[ $tag == n* ]]; then poller & P=$!; fi
  timeout 150 "${J[@]}" > "$OUT/$tag.log" 2>&1
  if [[ $tag == n* ]]; then kill $P; wait $P 2>/dev/null; fi
  grep -E "^TRAIN " "$OUT/$tag.log"
done
python3 - "$OUT" <<'PY'
import re, sys
v = {t: float(re.search(r"late_step_s=([0-9.]+)", open(f"{sys.argv[1]}/{t}.log").read()).group(1)) for t in ("p1", "n1", "n2", "p2")}
plain, poll = (v["p1"] + v["p2"]) / 2, (v["n1"] + v["n2"]) / 2
print(f"plain {1e3*plain:.2f} ms, with the NVML poller {1e3*poll:.2f} ms: {100*(poll/plain-1):+.2f} %; plain runs differ {100*(v['p2']/v['p1']-1):+.2f} %")
PY
