#!/usr/bin/env bash
# Regenerates the committed reports in reports/:
#  - simulator reports (decision table, busbw per family, fusion of ResNet-50 and BERT-base)
#    for dgx1-v100, dgx-h100, pcie-8gpu and 4xdgx1-v100;
#  - the cpu backend of the machine running this script: calibration (overlay + fit + validation)
#    and an autotune whose top candidates are measured on that backend.
# Usage: scripts/make_reports.sh [ARTUNE_BINARY]   (default: build/cli/artune; run from anywhere)
# Each REPORT.md starts with the exact command that regenerates it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
artune="${1:-${ARTUNE:-build/cli/artune}}"
if [ ! -x "$artune" ]; then
  echo "make_reports.sh: no artune binary at '$artune' (build first, or pass its path)" >&2
  exit 2
fi
fusion="--fusion configs/fusion/resnet50.json --fusion configs/fusion/bert_base.json"

for topo in dgx1-v100 dgx-h100 pcie-8gpu 4xdgx1-v100; do
  out="reports/$topo"
  rm -rf "$out"
  mkdir -p "$out"
  echo "== $topo" >&2
  # shellcheck disable=SC2086
  "$artune" autotune -t "$topo" -q $fusion --out "$out/table.json" --report "$out" > "$out/autotune.txt"
done

# The cpu backend of this machine: 4 worker threads standing in for 4 GPUs (uniform:4).
out="reports/cpu-host"
rm -rf "$out"
mkdir -p "$out"
echo "== cpu backend of $(hostname)" >&2
"$artune" calibrate -t uniform:4 --backend cpu -q --out "$out/overlay.json" --report "$out" > "$out/calibrate.txt"
# shellcheck disable=SC2086
"$artune" autotune -t uniform:4 -b 1K -e 16M -f 2 -q --calibration "$out/overlay.json" --measure cpu --top 3 \
  --iters 10 --warmup 3 $fusion --out "$out/table.json" --report "$out" \
  --note "calibration fit, residuals and validation (predicted vs measured per family): CALIBRATION.md" \
  > "$out/autotune.txt"
echo "reports written under $root/reports" >&2
