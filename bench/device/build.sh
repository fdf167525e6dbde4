#!/usr/bin/env bash
# Build gearshift (monitor path only, no Prometheus) and nvml_probe with g++ alone, for a machine without the
# Debian -dev packages: header-only fmt/CLI11/nlohmann from build-device/vendor (a carried, git-ignored copy of
# /usr/include/{fmt,CLI,nlohmann}), embedded GPU specs generated with cmake -P.
# Usage: bench/device/build.sh OUTDIR   (env: CXX, LDFLAGS, JOBS)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build-device/bin}
obj=build-device/obj
mkdir -p "$out" "$obj" build-device/gen
for n in h200 h100 a100 a40 rtx3080ti; do
  cmake -DIN=data/gpus/$n.json -DOUT=build-device/gen/embedded_spec_$n.cpp -DSYMBOL=spec_$n -P cmake/EmbedFile.cmake
done
common=(src/gpu/spec.cpp src/gpu/nvml.cpp src/gpu/cuda_visible.cpp build-device/gen/embedded_spec_*.cpp)
cli=(src/monitor/energy.cpp src/monitor/sampler.cpp src/monitor/export.cpp src/cli/main.cpp src/cli/cmd_gpus.cpp
     src/cli/cmd_monitor.cpp src/launch/child_process.cpp src/gpu/open_gpus.cpp)
export CXX=${CXX:-g++} OBJ=$obj
printf '%s\n' "${common[@]}" "${cli[@]}" bench/device/nvml_probe.cpp |
  xargs -P "${JOBS:-$(nproc)}" -I{} sh -c \
    '$CXX -std=c++20 -O2 -DFMT_HEADER_ONLY -Isrc -isystem build-device/vendor -pthread -c {} -o $OBJ/$(echo {} | tr / _).o'
objs() { for f in "$@"; do echo "$obj/$(echo "$f" | tr / _).o"; done; }
$CXX ${LDFLAGS:-} $(objs "${common[@]}" "${cli[@]}") -o "$out/gearshift" -ldl -pthread
$CXX ${LDFLAGS:-} $(objs "${common[@]}" bench/device/nvml_probe.cpp) -o "$out/nvml_probe" -ldl -pthread
echo "built $out/gearshift $out/nvml_probe"
