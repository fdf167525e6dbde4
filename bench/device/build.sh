#!/usr/bin/env bash
# Build nvml_probe (the independent energy-counter reader of monitor_check.sh) with g++ alone: it needs only the
# NVML wrapper, no -dev package. gearshift itself is built by CMake and carried (bundle.sh): its CLI registers
# every command, so it cannot be linked from the monitor's sources alone as this script once did.
# Usage: bench/device/build.sh OUTDIR   (env: CXX, LDFLAGS)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build-device/bin}
mkdir -p "$out"
${CXX:-g++} ${LDFLAGS:-} -std=c++20 -O2 -Isrc -pthread src/gpu/nvml.cpp bench/device/nvml_probe.cpp \
  -o "$out/nvml_probe" -ldl
echo "built $out/nvml_probe"
