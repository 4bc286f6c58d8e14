#!/usr/bin/env bash
# Installs the Debian packages artune's build, tests, benchmarks and reports
# need. Idempotent: installs only what is missing and runs `apt-get update`
# at most once per invocation. Run as root (or through sudo).
#   bash scripts/setup.sh               the build, tests, benchmarks and reports
#   bash scripts/setup.sh --with-clang  also clang and libFuzzer (scripts/sanitize.sh --fuzz)
set -euo pipefail

packages=(
  build-essential pkg-config cmake meson ninja-build
  nlohmann-json3-dev libcli11-dev libfmt-dev doctest-dev
  libbenchmark-dev libeigen3-dev libhwloc-dev hwloc liblemon-dev
  libopenmpi-dev openmpi-bin
  gnuplot-nox python3 patchelf
  python3-dev python3-numpy python3-pybind11 pybind11-dev libdlpack-dev python3-torch
)

case "${1:-}" in
  "") ;;
  --with-clang) packages+=(clang libclang-rt-14-dev) ;;
  *) echo "setup.sh: unknown argument '$1' (the only one is --with-clang)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
