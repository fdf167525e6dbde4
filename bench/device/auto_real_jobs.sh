#!/usr/bin/env bash
# `gearshift run --auto` on real training jobs of several families, one GPU, dry-run only (bench/results/2026-12-01-auto-real-jobs.md,
# "`gearshift run --auto` on real jobs and launchers").
# Usage: auto_real_jobs.sh BIN OUT [JOB ...]
#   jobs: llama moe ckpt compile accum (train_families.py; FAMILY_OPTIMIZER, e.g. gpt2s_lion, with that --optimizer) and megatron (Megatron-LM pretrain_gpt.py through
#   torchrun --nproc_per_node 1; needs MEGATRON_DIR with pretrain_gpt.py and the megatron-core wheel installed),
#   megatron_direct (the same started as one plain process), ddp / ddp_cpu (ddp_ranks.py: two gloo ranks through
#   torchrun on GPU 0 / on the CPU). ONLY_TRACE=1: the traces alone, no run --auto.
#   FAMILY_ARGS: arguments for every train_families.py job; ARGS_<job>: for that job only.
# For each job: `gearshift run --auto --max-slowdown $SLOWDOWN --switch-latency-ms 6` (OUT/JOB.auto.log, its plan,
# its dry-run log, its measured verification's blocks OUT/JOB.auto.verify.jsonl: in a dry run the job's noise floor); for the jobs named in TRACE_JOBS also `gearshift trace` (OUT/JOB.trace.jsonl.gz) and an offline plan + replay of it,
# and the live --auto plan replayed on that trace beside its live figures;
# with PAIRS=N (default 0; only for the jobs in PAIRS_JOBS when that is set) N alternating rounds of the plain job and the job under `run --auto` for the step-time
# overhead (the job's own TRAIN/iteration-time lines and each --auto run's live figures in OUT/JOB.pairs.log; its
# whole log in OUT/JOB.pairN.log).
# BIN holds gearshift, libgearshift_inject.so and the shared libraries they need. Reads NVML only: never changes
# clocks, power limits or any other GPU setting (`gearshift run` without --apply only logs what it would do).
set -u
BIN=$(cd "$1" && pwd); OUT=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
GS="$BIN/gearshift"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1 \
  GEARSHIFT_INJECT_LIBRARY="$BIN/libgearshift_inject.so" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  TOKENIZERS_PARALLELISM=false NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SLOWDOWN=${SLOWDOWN:-0.5%}
JOB_TIMEOUT=${JOB_TIMEOUT:-240}
mkdir -p "$OUT"
JOBS=("$@")
[[ ${#JOBS[@]} -eq 0 ]] && JOBS=(llama moe ckpt compile accum megatron)
log() { echo "== $(date -u +%H:%M:%S) $*"; }
smi() { nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,clocks_throttle_reasons.active --format=csv,noheader 2>&1; }

# The job's command line (an array in CMD).
job_cmd() {
  case $1 in
    megatron | megatron_direct)
      if [[ $1 == megatron ]]; then
        CMD=(torchrun --nproc_per_node 1 --master_port "${MASTER_PORT:-29611}")
      else  # started as a plain process: the environment torchrun would give
        export RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-29611}
        CMD=(python3)
      fi
      CMD+=("$MEGATRON_DIR/pretrain_gpt.py"
        --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024
        --micro-batch-size 8 --global-batch-size 8 --train-iters "${MEGATRON_ITERS:-80}" --lr 1e-4 --min-lr 1e-5
        --lr-decay-style cosine --bf16 --transformer-impl local --mock-data --tokenizer-type NullTokenizer
        --vocab-size 32000 --log-interval 10 --log-energy --eval-iters 0 --eval-interval 100000
        --no-gradient-accumulation-fusion --no-masked-softmax-fusion --no-bias-gelu-fusion
        --no-bias-dropout-fusion --no-persist-layer-norm --attention-backend unfused --distributed-backend nccl
        --split 100,0,0 ${MEGATRON_EXTRA:-}) ;;  # MEGATRON_EXTRA: more of Megatron-LM's arguments (later ones win)
    ddp | ddp_cpu)  # two data-parallel ranks through torchrun (gloo), both on GPU 0 or on the CPU; rank 1 half the batch
      CMD=(torchrun --nproc_per_node 2 --master_port "${MASTER_PORT:-29612}" "$HERE/ddp_ranks.py" --imbalance 0.5)
      [[ $1 == ddp_cpu ]] && CMD+=(--device cpu --steps 60)
      local per_ddp="ARGS_$1"; CMD+=(${!per_ddp:-}) ;;
    *) local per_job="ARGS_${1//-/_}"  # ARGS_<job>: that job's own arguments (e.g. ARGS_compile="--steps 1500")
       local opt=()  # FAMILY_OPTIMIZER (e.g. gpt2s_lion): the family with train_families.py's --optimizer
       [[ $1 == *_* ]] && opt=(--optimizer "${1#*_}")
       CMD=(python3 "$HERE/train_families.py" "${1%%_*}" "${opt[@]}" ${FAMILY_ARGS:-} ${!per_job:-}) ;;
  esac
}

auto_run() {  # JOB TAG
  job_cmd "$1"
  timeout -k 10 "$JOB_TIMEOUT" "$GS" run --auto --max-slowdown "$SLOWDOWN" --switch-latency-ms 6 \
    --warmup-timeout "${WARMUP_TIMEOUT:-120}" --plan-output "$OUT/$1.$2.plan.json" \
    --dry-run-log "$OUT/$1.$2.dry.jsonl" --verify-log "$OUT/$1.$2.verify.jsonl" \
    --untraced-dump "$OUT/$1.$2.untraced.txt" -- "${CMD[@]}"
}

for j in "${JOBS[@]}"; do
  export CUDA_DEVICE_MAX_CONNECTIONS=1
  [[ $j == megatron* ]] || unset CUDA_DEVICE_MAX_CONNECTIONS
  if [[ ${ONLY_TRACE:-0} != 1 ]]; then
  log "job $j: run --auto"; smi
  t0=$SECONDS
  auto_run "$j" auto > "$OUT/$j.auto.log" 2>&1
  echo "   rc=$? ($((SECONDS - t0)) s)"
  grep -E "gearshift run|TRAIN|steps |clock changes|kernel time|GPU progress|warm-up|refus|exit|energy|pid|rank|verification|step time|resolving|block " "$OUT/$j.auto.log" |
    grep -v "^ *$" | tail -40
  fi
  if [[ " ${TRACE_JOBS:-} " == *" $j "* ]]; then
    log "job $j: trace, plan, replay"
    job_cmd "$j"
    timeout -k 10 "$JOB_TIMEOUT" "$GS" trace -o "$OUT/$j.trace.jsonl.gz" -- "${CMD[@]}" > "$OUT/$j.trace.log" 2>&1
    echo "   trace rc=$?"; tail -4 "$OUT/$j.trace.log"
    tr=$(ls "$OUT/$j".trace.jsonl.gz* 2>/dev/null | head -1)
    if [[ -n $tr ]]; then
      "$GS" plan "$tr" --max-slowdown "$SLOWDOWN" --switch-latency-ms 6 -o "$OUT/$j.offline.plan.json" 2>&1 | tail -30
      "$GS" replay "$tr" --plan "$OUT/$j.offline.plan.json" 2>&1 | tail -8
      # Replay beside live (issue 15): the plan `--auto` took live, replayed on this trace, next to its live figures.
      if [[ -f $OUT/$j.auto.plan.json ]]; then
        echo "   replay of the live --auto plan (live: $(grep -hE 'prediction accuracy|intended clocks' "$OUT/$j.auto.log" |
          sed 's/^ *//' | tr '\n' ';'))"
        "$GS" replay "$tr" --plan "$OUT/$j.auto.plan.json" --gpu-progress markers --activity-period-ms 5000 \
          --activity-window-ms 200 2>&1 | tail -6  # followed as live follows; the trace's first steps, which live
        # never follows (its plan comes after the warm-up), count too: cut them with trace_excerpt.py to compare
      fi
    fi
  fi
  pairs=${PAIRS:-0}
  [[ -n ${PAIRS_JOBS:-} && " $PAIRS_JOBS " != *" $j "* ]] && pairs=0
  for ((r = 1; r <= pairs; r++)); do
    job_cmd "$j"
    log "job $j pair $r: plain"
    "${CMD[@]}" 2>&1 | grep -E "^TRAIN| iteration +[0-9]+/" | tail -3 | sed "s/^/plain $r: /" >> "$OUT/$j.pairs.log"
    log "job $j pair $r: run --auto"
    auto_run "$j" "pair$r" > "$OUT/$j.pair$r.log" 2>&1  # kept whole: when the plan applied, its live figures
    grep -E "^TRAIN| iteration +[0-9]+/" "$OUT/$j.pair$r.log" | tail -3 | sed "s/^/auto $r: /" >> "$OUT/$j.pairs.log"
    grep -E "prediction accuracy|intended clocks|in-time guard:|energy while live" "$OUT/$j.pair$r.log" | sed "s/^/auto $r: /" >> "$OUT/$j.pairs.log"
  done
  [[ -f $OUT/$j.pairs.log ]] && cat "$OUT/$j.pairs.log"
done
# The device tool brings back 8 files at most: one archive per job.
if [[ ${PACK:-1} == 1 ]]; then
  for j in "${JOBS[@]}"; do
    list=$(mktemp)
    (cd "$OUT" && find . -maxdepth 1 -name "$j.*" ! -name "$j.tar" -printf '%P\n' > "$list" && [[ -s $list ]] &&
      tar cf "$j.tar" -T "$list" && xargs rm -f < "$list")
    rm -f "$list"
  done
fi
log "done"; smi
