#!/usr/bin/env bash
# Makes the GPU carry bundle: builds artune here (scripts/build.sh: ./build, with CUDA for sm_80 and sm_90, i.e.
# A100, H100 and H200) and gathers into one folder everything scripts/gpu_check.sh runs on a bare GPU machine
# (artune, nccl-plugin-probe, bench_cuda_kernels, the NCCL tuner plugin, the suite's test programs) with every
# shared library they need that such a machine lacks, stripped, then checks that the folder is self-contained.
#
#   bash scripts/gpu_bundle.sh [OUT]          (default OUT: gpu-bundle, git-ignored)
#
# Then carry OUT to the GPU machine with the repository and run `bash scripts/gpu_check.sh --bundle OUT` there.
# The layout and the allow-list of what the GPU machine provides are in scripts/gpu_bundle.py.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-bundle}
bash scripts/setup.sh
bash scripts/build.sh && ninja -C build  # the GPU check runs the test programs too
python3 -c "import json, sys; o = {x['name']: x['value'] for x in json.load(open('build/meson-info/intro-buildoptions.json'))}; sys.exit('90' not in o['gpu_archs'].split(','))" ||
  { echo "gpu_bundle: build/ is not configured for sm_90 (meson configure build -Dgpu_archs=80,90)" >&2; exit 2; }
python3 scripts/gpu_bundle.py make build "$out"
python3 scripts/gpu_bundle.py check "$out" --chroot
