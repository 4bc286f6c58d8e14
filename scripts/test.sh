#!/usr/bin/env bash
# Builds artune (scripts/build.sh), then the tests, and runs the whole test suite with Meson.
# Extra arguments go to `meson test` (e.g. --suite executor).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ninja -C build  # everything else: the tests, benchmarks and fuzz replays
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
meson test -C build --print-errorlogs --num-processes 2 "$@"
