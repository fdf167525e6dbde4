#!/usr/bin/env bash
# torch.profiler Chrome traces of small jobs on one GPU, each a case where a step detector can go wrong
# (record_step_traces.py says what each job records). Usage: record_step_traces.sh OUTDIR [JOB ...]
#   jobs (default all, in this order): accum4_gpt2s llama_1step llama_3steps llama_infer_1fwd llama_decode_8tok
#   moe_3steps ckpt_3steps gpt2s_1p5steps
#   options starting with -- (e.g. --quick, --both-variants, --set batch=4 as --set=batch=4) go to every job.
# Writes OUTDIR/<job>.json.gz (accum4_gpt2s and llama_1step also <job>_kernels.json.gz), OUTDIR/manifest.json and
# OUTDIR/run.log. With PACK=1 (the default) the traces and the manifest also go into OUTDIR/step_traces.tar and the
# loose traces are removed, so that OUTDIR holds 3 files (the device tool brings back at most 8); PACK=0 keeps them.
# Env: QUICK=1 (fewer warm-up/measured steps), JOB_TIMEOUT (s per job, default 50), TOTAL_BUDGET (s for all jobs,
# default 420; jobs that no longer fit are skipped), EXTRA_ARGS (more record_step_traces.py arguments).
# Each job is its own process under `timeout`: one failing or hanging job does not stop the others.
# Reads NVML and nvidia-smi only: never changes clocks, power limits or any other GPU setting.
set -u
OUT=${1:?usage: record_step_traces.sh OUTDIR [JOB ...]}
export RST_WRAPPER_CMD="bash $0 $*"
shift
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
JOBS=() ARGS=()
for a in "$@"; do  # --options go to record_step_traces.py (e.g. --quick), the rest are job names
  if [[ $a == -* ]]; then ARGS+=("$a"); else JOBS+=("$a"); fi
done
if [[ ${#JOBS[@]} -eq 0 ]]; then
  JOBS=(accum4_gpt2s llama_1step llama_3steps llama_infer_1fwd llama_decode_8tok moe_3steps ckpt_3steps gpt2s_1p5steps)
fi
JOB_TIMEOUT=${JOB_TIMEOUT:-50}
TOTAL_BUDGET=${TOTAL_BUDGET:-420}
[[ ${QUICK:-0} == 1 ]] && ARGS+=(--quick)
# shellcheck disable=SC2206
[[ -n ${EXTRA_ARGS:-} ]] && ARGS+=($EXTRA_ARGS)

log() { echo "== $(date -u +%H:%M:%S) $*"; }
smi() { nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv 2>&1; }

main() {
  local start=$SECONDS rcs=() j rc t left t0
  log "record_step_traces: ${JOBS[*]} -> $OUT (job timeout ${JOB_TIMEOUT}s, total budget ${TOTAL_BUDGET}s)"
  log "nvidia-smi before"; smi
  python3 -c 'import sys,torch,transformers;print("python",sys.version.split()[0],"torch",torch.__version__,"cuda",torch.version.cuda,"transformers",transformers.__version__)' 2>&1 | tail -1
  for j in "${JOBS[@]}"; do
    left=$((TOTAL_BUDGET - (SECONDS - start)))
    if ((left < 20)); then
      log "skip $j: the total budget is spent"
      rcs+=("$j=skipped")
      continue
    fi
    t=$JOB_TIMEOUT
    ((t > left)) && t=$left
    log "job $j (timeout ${t}s)"
    t0=$SECONDS
    timeout -k 5 "$t" python3 "$HERE/record_step_traces.py" "$j" --out "$OUT" "${ARGS[@]}"
    rc=$?
    ((rc == 124 || rc == 137)) && echo "   $j: timed out after ${t}s"
    log "job $j rc=$rc ($((SECONDS - t0)) s)"
    rcs+=("$j=$rc")
  done
  log "manifest"
  python3 "$HERE/record_step_traces.py" merge --out "$OUT" "${rcs[@]}"
  log "nvidia-smi after"; smi
  if [[ ${PACK:-1} == 1 ]]; then
    (cd "$OUT" && shopt -s nullglob && files=(*.json.gz) && tar -cf step_traces.tar "${files[@]}" manifest.json &&
      rm -f "${files[@]}" && echo "packed ${#files[@]} traces + manifest.json into $OUT/step_traces.tar" &&
      tar -tvf step_traces.tar)
  fi
  ls -l "$OUT"
  log "done in $((SECONDS - start)) s"
}
main 2>&1 | tee -a "$OUT/run.log"
exit "${PIPESTATUS[0]}"
