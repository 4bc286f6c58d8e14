#!/usr/bin/env bash
# The Python binding on a GPU machine: the GPU bundle's programs are built here for Debian's Python 3.11, but a GPU
# machine's PyTorch lives in its own Python (3.12 on the project's lent machines), so the binding is compiled there,
# against that Python and its pybind11, from the sources of this tree and a static libartune built here; then the
# CUDA tensor test (tests/executor/test_python_cuda.py) runs with the machine's PyTorch.
#
#   bash scripts/gpu_python.sh make [OUT]                       here, after the build (default OUT: gpu-pybundle)
#   bash scripts/gpu_python.sh run [--py DIR] [--bundle DIR]    on the GPU machine, from the repository root
#
# `make` gathers into OUT (git-ignored): libartune.a (every module, position-independent), build/artune_config.hpp,
# DLPack's header and Open MPI's headers (the ABI of the bundle's libmpi). `run` needs a C++ compiler, the
# machine's python3 with pybind11 and torch, CUDA's headers, the GPU bundle (scripts/gpu_bundle.sh: its lib/ has
# every shared library libartune needs) and NCCL (the nvidia-nccl wheel, found as scripts/gpu_check.sh finds it).
# It exits 77 when one of those is missing (nothing was tested), else with the test's status. PYTHON names the
# interpreter (default: python3 on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "gpu_python: $*" >&2
  exit 2
}
skip() {
  echo "gpu_python: SKIP: $*"
  exit 77
}

mode=${1:-}
shift || true
case $mode in
  make)
    out=${1:-gpu-pybundle}
    [ -f build/artune/comm/libartune.a ] || fail "no build/artune/comm/libartune.a (build first: bash scripts/build.sh && ninja -C build)"
    [ -f build/artune_config.hpp ] || fail "no build/artune_config.hpp"
    [ -f /usr/include/dlpack/dlpack.h ] || fail "no /usr/include/dlpack/dlpack.h (apt-get install libdlpack-dev)"
    mpi_inc=/usr/lib/x86_64-linux-gnu/openmpi/include
    [ -f $mpi_inc/mpi.h ] || fail "no $mpi_inc/mpi.h (apt-get install libopenmpi-dev)"
    if [ -e "$out" ] && [ ! -d "$out" ]; then fail "$out exists and is not a folder"; fi
    rm -rf "$out"
    mkdir -p "$out/include/dlpack" "$out/include/openmpi"
    cp build/artune/comm/libartune.a "$out/"
    cp build/artune_config.hpp "$out/include/"
    cp /usr/include/dlpack/dlpack.h "$out/include/dlpack/"
    cp -r $mpi_inc/. "$out/include/openmpi/"
    echo "gpu_python: $out: $(du -sh "$out" | cut -f1) (commit $(git rev-parse --short HEAD))"
    ;;
  run)
    py=gpu-pybundle
    bundle=gpu-bundle
    while [ $# -gt 0 ]; do
      case $1 in
        --py) py=${2:?--py needs a folder}; shift 2 ;;
        --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
        *) fail "unknown argument '$1'" ;;
      esac
    done
    [ -f "$py/libartune.a" ] || fail "no $py/libartune.a (make it here first: bash scripts/gpu_python.sh make)"
    [ -d "$bundle/lib" ] || fail "no $bundle/lib (the GPU bundle: bash scripts/gpu_bundle.sh)"
    python=${PYTHON:-python3}
    command -v "$python" >/dev/null || skip "no $python"
    command -v c++ >/dev/null || skip "no C++ compiler"
    pyinc=$("$python" -m pybind11 --includes 2>/dev/null) || skip "$python has no pybind11"
    "$python" -c "import torch" 2>/dev/null || skip "$python has no torch"
    cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
    [ -f "$cuda_inc/cuda_runtime.h" ] || skip "no CUDA headers at $cuda_inc"
    nccl=$("$python" -c "import nvidia.nccl, os; d = os.path.join(list(nvidia.nccl.__path__)[0], 'lib'); print(os.path.join(d, 'libnccl.so.2'))" 2>/dev/null || true)
    [ -f "$nccl" ] || skip "no libnccl.so.2 from the nvidia-nccl wheel"
    suffix=$("$python" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
    pkg=$(mktemp -d)
    trap 'rm -rf "$pkg"' EXIT
    mkdir "$pkg/artune"
    cp python/artune/*.py "$pkg/artune/"
    lib=$(cd "$bundle/lib" && pwd)
    echo "gpu_python: building artune._artune for $("$python" --version) ($suffix)"
    # shellcheck disable=SC2086  # pybind11's include flags are a word list
    c++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -pthread $pyinc -I. -Iinclude -I"$py/include" \
      -I"$py/include/openmpi" -I"$cuda_inc" -DNDEBUG -DOMPI_SKIP_MPICXX=1 -DARTUNE_HAVE_NCCL=1 -DARTUNE_HAVE_CUDA=1 \
      -DARTUNE_HAVE_DLPACK=1 python/src/binding.cpp -o "$pkg/artune/_artune$suffix" \
      -Wl,--start-group "$py/libartune.a" "$lib"/libfmt.so.9 "$lib"/liblemon.so.1.3.1 "$lib"/libhwloc.so.15 \
      "$lib"/libmpi.so.40 "$lib"/libcudart.so.13 "$lib"/libglpk.so.40 "$nccl" -ldl -Wl,--end-group \
      -Wl,-rpath,"$lib":"$(dirname "$nccl")"
    export HWLOC_PLUGINS_PATH="$lib/hwloc"
    PYTHONPATH="$pkg" "$python" -c "import artune; print('gpu_python: artune', artune.__file__)"
    PYTHONPATH="$pkg" "$python" tests/executor/test_python_cuda.py
    ;;
  *) fail "usage: gpu_python.sh make [OUT] | run [--py DIR] [--bundle DIR]" ;;
esac
