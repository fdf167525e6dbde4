#!/usr/bin/env bash
# Rehearses `gearshift run --auto` on a recorded step without a GPU: the stand-in job (runtime_fake_job) launches
# PLAN's positions step after step through the launch feed (its kernels as L/C lines, its memcpy/memset positions
# as Y lines while recorded), or, given a trace (*.gz: gearshift's or torch.profiler's), the steps it recorded over and over as the
# job ran them (launches at their CPU times, every op and synchronize at its recorded times: `--trace` mode), on the simulated GPU drawing WATTS (GEARSHIFT_SIMGPU_POWER_W) with its SM clock read
# as SM_MHZ while none is locked. PLAN is any plan.json: one `gearshift plan` made from a device run's trace, or the
# one a device run's `--auto` wrote. What --auto decides on the GPU's measured power is then reproducible here:
# whether it plans, at what MODELLED saving, or why it refuses (bench/results/2026-12-05-s26-rehearsals.md, "Rehearsals of --auto").
# Usage: bench/rehearse_auto.sh BUILD_DIR PLAN WATTS STEPS OUT_DIR [SM_MHZ] [-- extra `gearshift run` options]
# Always passed: --max-slowdown 0.5% --switch-latency-ms 6 (issue 15's checks); extra options come after them.
# Not replayed: the job's own synchronizes (the stand-in makes one a step), step variants, jitter, CUPTI's cost,
# CUDA graph launches (the stand-in exits 2 on such a plan).
# Writes OUT_DIR/auto.log (gearshift's output), OUT_DIR/auto.plan.json, OUT_DIR/dry.jsonl; prints auto.log.
set -euo pipefail
if [[ $# -lt 5 ]]; then
  echo "usage: $0 BUILD_DIR PLAN WATTS STEPS OUT_DIR [SM_MHZ] [-- extra run options]" >&2
  exit 2
fi
build=$1 plan=$2 watts=$3 steps=$4 out=$5
shift 5
sm=""
if [[ $# -gt 0 && $1 != "--" ]]; then sm=$1; shift; fi
[[ $# -gt 0 && $1 == "--" ]] && shift
mkdir -p "$out"
rm -rf "$out/locks" "$out/sim.state"*
env=(GEARSHIFT_NVML_LIBRARY="$build/src/gpu/libgearshift_simgpu.so" GEARSHIFT_SIMGPU_STATE="$out/sim.state"
     GEARSHIFT_LOCK_DIR="$out/locks" GEARSHIFT_SIMGPU_POWER_W="$watts")
[[ -n $sm ]] && env+=(GEARSHIFT_SIMGPU_SM_CLOCK_MHZ="$sm")
mode=()
[[ $plan == *.gz ]] && mode=(--trace)  # a trace (gearshift's .jsonl.gz, torch.profiler's .json.gz); else a plan
rc=0
env "${env[@]}" "$build/src/cli/gearshift" run --auto --max-slowdown 0.5% --switch-latency-ms 6 \
  --plan-output "$out/auto.plan.json" --dry-run-log "$out/dry.jsonl" "$@" \
  -- "$build/src/runtime/runtime_fake_job" "${mode[@]}" "$plan" "$steps" >"$out/auto.log" 2>&1 || rc=$?
cat "$out/auto.log"
exit $rc
