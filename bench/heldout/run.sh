#!/usr/bin/env bash
# Held-out trace variants (session 28): the shipped GPT-2 / GPT-3 XL H200 traces transformed into what a job
# no test had seen would record (a stall between steps, a slow warm-up step, an optimizer run per layer, FSDP2's
# per-layer foreach copy, markers around each layer, CUDA graph launches, PCIe/NVL boards, wrong time units,
# contradictory meta), each planned by `gearshift plan`. Prints one row per variant: exit code and the step
# found, or the refusal. Nothing needs a GPU. Usage: bench/heldout/run.sh GEARSHIFT_BINARY OUT_DIR
set -uo pipefail
G=$(realpath "$1"); OUT=$2; HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/v" && cd "$OUT" || exit 1
py() { python3 "$HERE/$1" "${@:2}" > /dev/null; }
py gen_foreach_fwd_only.py gpt2; py gen_foreach_fwd_only.py gpt3xl
py gen_foreach_per_layer.py 3; py gen_foreach_per_layer.py 6; py gen_foreach_markers.py
py gen_opt_in_backward.py; py gen_opt_in_backward_markers.py
for a in "2000000 5" "2000000 20" "300000 10" "150000 8" "2000000 5 markers"; do py gen_stall.py $a; done
py gen_timing.py
for f in t_warm3x_4steps t_warm3x_3steps t_stall2s_5steps t_ckpt30s_6steps foreach_per_layer_3steps; do
  py gen_nometa.py v/$f.json.gz v/${f}_nometa.json.gz
done
py gen_h100pcie.py; py gen_gpu_names.py; py gen_graphs.py; py gen_graph_kineto.py; py gen_nooptname.py
py gen_units.py; py gen_meta.py
for m in true micro half double layer; do py gen_markers.py $m; done
for a in "4 2" "4 3" "2 3" "4 3 1"; do py gen_accum.py $a; done
py gen_alternating.py; py gen_checkpointing.py
printf '%-44s %-4s %s\n' variant exit "step found, or the refusal"
for f in v/*.json.gz; do
  out=$(timeout 120 "$G" plan "$f" 2>&1); rc=$?
  line=$(grep -m1 '^Iterations' <<<"$out" | cut -c15-); [[ -z $line ]] && line=$(grep -m1 '^gearshift:' <<<"$out" | cut -d: -f3- | cut -c1-150)
  saving=$(grep -m1 '^phase  *6 ms' <<<"$out" | awk '{print $6}')
  printf '%-44s %-4s %s%s\n' "$(basename "$f" .json.gz)" "$rc" "${line:0:110}" "${saving:+; phase 6 ms $saving}"
done
