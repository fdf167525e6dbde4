#!/usr/bin/env bash
# Copies the built gearshift, its injection library and the shared libraries the GPU machine lacks (Debian's fmt,
# cpp-httplib, brotli) into one folder to carry to the device machine. Usage: bundle.sh [BUILD] [OUT]
# (default build and build-dev/bin; both git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}; out=${2:-build-dev/bin}
mkdir -p "$out"
cp "$build/src/cli/gearshift" "$build/src/cupti/libgearshift_inject.so" "$out/"
ldd "$build/src/cli/gearshift" | awk '/=> \// {print $3}' | grep -E 'libfmt|httplib|brotli' | xargs -I{} cp -L {} "$out/"
ls -la "$out"
