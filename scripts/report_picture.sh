#!/usr/bin/env bash
# The README's picture: the plan report of the shipped GPT-3 XL trace, its top part, as headless chromium draws it.
# Usage: scripts/report_picture.sh [OUT.png]   (default docs/img/plan-report.png; needs chromium and libjs-chart.js)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/img/plan-report.png}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/src/cli/gearshift plan data/traces/gpt3xl_h200_trace.json.gz --report "$tmp/plan.html" > /dev/null
# --no-sandbox: a container running as root has no user namespace for chromium's sandbox.
timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
  --hide-scrollbars --user-data-dir="$tmp/profile" --window-size=1200,1245 --screenshot="$out" \
  "file://$tmp/plan.html" > /dev/null 2>&1
ls -l "$out"
