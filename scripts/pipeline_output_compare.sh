#!/usr/bin/env bash
# Compares `gearshift pipeline` outputs of two builds, byte for byte (stdout without the solver's wall-time line,
# frontier.csv, pareto.csv, schedules.json), on the shared Perseus A100 profiles and on them stretched to 32
# stages (issue 48). Exit 1 on any difference.
# Usage: scripts/pipeline_output_compare.sh OLD_GEARSHIFT NEW_GEARSHIFT [SHARED_DIR]   (default ../shared)
set -euo pipefail
old=$1 new=$2 shared=${3:-"$(dirname "$0")/../../shared"}
dir=$shared/data/perseus/stage_profile
[ -d "$dir" ] || { echo "no $dir: nothing to compare" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The 8-stage profiles stretched to 32 stages: first and last stage kept at the ends, stages 1-6 repeated between.
stretch() {
  awk -F, -v S="$2" 'NR == 1 { print; next } { rows[++n] = $0; st[n] = $1 }
    END { for (s = 0; s < S; ++s) { from = s == 0 ? 0 : (s == S - 1 ? 7 : 1 + (s - 1) % 6)
            for (i = 1; i <= n; ++i) if (st[i] == from) { r = rows[i]; sub(/^[^,]*/, s, r); print r } } }' "$1"
}
stretch "$dir/gpt3-175b+a100_sxm_bf16.csv" 32 >"$work/gpt3_32.csv"
stretch "$dir/bloom+a100_sxm_bf16.csv" 32 >"$work/bloom_32.csv"
cases=()
for m in bloom gpt3-175b; do
  for mb in 12 24 48 96; do
    cases+=("$dir/$m+a100_sxm_bf16.csv --stages 8 --microbatches $mb --blocking-power-w 83.64")
    cases+=("$dir/$m+a100_sxm_bf16.csv --stages 8 --microbatches $mb --blocking-power-w 83.64 --cost-model exp-fit --json")
  done
  cases+=("$dir/$m+a100_sxm_bf16.csv --stages 8 --microbatches 16 --schedule gpipe --deadline-ms 6000 --straggler 1.1")
  cases+=("$dir/$m+a100_sxm_bf16.csv --stages 8 --microbatches 16 --schedule interleaved --virtual-stages 2 --json")
  cases+=("$dir/$m+a100_sxm_bf16.csv --stages 8 --microbatches 24 --time-unit-ms 0.1 --blocking-power-w 83.64")
done
cases+=("$work/gpt3_32.csv --stages 32 --microbatches 64 --blocking-power-w 83.64")
cases+=("$work/bloom_32.csv --stages 32 --microbatches 32 --cost-model exp-fit --json")
fail=0
for c in "${cases[@]}"; do
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    rm -rf "$work/$side" "$work/out"
    # The same -o for both (the outputs name it); the solver's wall time is the one field allowed to differ.
    # shellcheck disable=SC2086
    "$bin" pipeline $c -o "$work/out" | sed -E 's/solver wall time [0-9.]+ s/solver wall time X s/; s/"solve_seconds": ?[0-9.e+-]+/"solve_seconds": X/g' >"$work/stdout"
    sed -i -E 's/"solve_seconds": ?[0-9.e+-]+/"solve_seconds": X/g' "$work/out/schedules.json"
    mv "$work/stdout" "$work/out/stdout"
    mv "$work/out" "$work/$side"
  done
  if diff -rq "$work/old" "$work/new" >/dev/null; then
    echo "same: $c ($(wc -l <"$work/new/frontier.csv") frontier rows)"
  else
    echo "DIFFERENT: $c"; diff -rq "$work/old" "$work/new" || true; fail=1
  fi
done
exit $fail
