#!/usr/bin/env bash
# Installs missing Debian packages, configures (once) and builds artune in
# ./build. Extra arguments go to `meson setup` on the first configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
fi
ninja -C build
