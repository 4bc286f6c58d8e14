#!/usr/bin/env bash
# Installs missing Debian packages, configures (once) and builds what the main job runs in ./build: the artune
# command, the library and the NCCL tuner plugin (scripts/test.sh builds the rest: tests, benchmarks, fuzz
# replays). Extra arguments go to `meson setup` on the first configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
fi
ninja -C build cli/artune nccl_tuner/libnccl-tuner-artune.so
