#!/usr/bin/env bash
# Rebuilds and runs the Perseus reference check for `gearshift pipeline` (issue 6):
#  level A (exp-fit, README §4) and level B (hull) on the 8 A100 frontiers, plus solver wall times,
#  then times the CLI end to end on the largest A100 case and on a 0.1 ms grid.
# Usage: scripts/pipeline_reference_check.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
make build BUILD="$build" JOBS="${JOBS:-2}" >/dev/null
date -u +"run at %Y-%m-%dT%H:%M:%SZ on $(nproc) cores"
"$build/bench/pipeline_reference_check"
prof=../shared/data/perseus/stage_profile/bloom+a100_sxm_bf16.csv
out=$(mktemp -d)
for args in "--microbatches 96 --cost-model exp-fit" "--microbatches 96" "--microbatches 96 --time-unit-ms 0.1"; do
  start=$(date +%s.%N)
  "$build/src/cli/gearshift" pipeline "$prof" --stages 8 $args --blocking-power-w 83.64 -o "$out" --json >/dev/null
  end=$(date +%s.%N)
  echo "gearshift pipeline bloom $args: $(wc -l <"$out/frontier.csv") frontier rows, $(echo "$end - $start" | bc) s wall (CLI end to end)"
done
rm -rf "$out"
