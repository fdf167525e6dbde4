#!/usr/bin/env bash
# Compares the plan files two gearshift builds write, byte for byte apart from provenance's "created" date:
# `gearshift plan TRACE -o plan.json` on every trace of the given folders (default: data/traces, data/step_traces,
# ../shared/data/traces), and `plan-ranks -o plan` (plan0.json, plan1.json) on the DDP job's two ranks where
# ../shared holds them. Also compares what each run prints and its exit status. Exit status 1 when any differs.
# Usage: scripts/plan_compare.sh OLD_GEARSHIFT NEW_GEARSHIFT [TRACE_DIR ...]
set -u
old=$(realpath "$1") new=$(realpath "$2")
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && dirs=("$root/data/traces" "$root/data/step_traces" "$root/../shared/data/traces")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The date a plan was made and planner timings: the only parts that differ between two runs of one build.
normalise() { sed -E -i 's/("created": )"[^"]*"/\1"DATE"/; s/("plan_ms": )[0-9.e+-]+/\1MS/' "$@"; }
same=0 differ=0
run_both() {  # a name, then the arguments after the binary; each side runs in its own empty folder
  local name=$1
  shift
  for side in old new; do
    local bin=$old
    [ $side = new ] && bin=$new
    rm -rf "${out:?}/$side" && mkdir "$out/$side"
    (cd "$out/$side" && "$bin" "$@" >stdout 2>stderr; echo "exit $?" >>stdout)
    normalise "$out/$side"/*
  done
  if diff -r "$out/old" "$out/new" >"$out/diff"; then
    same=$((same + 1))
    echo "same    $name: $(cd "$out/new" && for f in *.json; do [ -f "$f" ] && printf '%s %s bytes; ' "$f" "$(wc -c <"$f")"; done)$(tail -1 "$out/new/stdout")"
  else
    differ=$((differ + 1))
    echo "DIFFERS $name"
    head -8 "$out/diff"
  fi
}
for d in "${dirs[@]}"; do
  [ -d "$d" ] || { echo "skipped $d (absent)"; continue; }
  for t in "$d"/*.json.gz "$d"/*.jsonl.gz; do
    [ -f "$t" ] && run_both "plan $(basename "$t")" plan "$t" -o plan.json
  done
done
ddp="$root/../shared/data/traces/ddp2_gpt2m_rank0_h200_trace.json.gz"
[ -f "$ddp" ] && run_both "plan-ranks ddp2_gpt2m ranks 0, 1" plan-ranks "$ddp" "${ddp/rank0/rank1}" -o plan
# Without calibration too: with it these traces are refused (their profiler slowed the step), without it they plan.
[ -f "$ddp" ] && run_both "plan-ranks --no-calibrate ddp2_gpt2m" plan-ranks "$ddp" "${ddp/rank0/rank1}" --no-calibrate -o plan
echo "$same same, $differ differ"
[ "$differ" -eq 0 ]
