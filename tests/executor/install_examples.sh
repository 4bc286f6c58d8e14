#!/bin/sh
# Installs the build into a folder inside the build dir (meson install --destdir), then builds the
# programs of examples/ against that tree through pkg-config only and runs them: the install set
# (headers, libartune static and shared with its SONAME, artune.pc) is tested, not assumed.
# Usage: install_examples.sh BUILD_DIR SOURCE_DIR
# ARTUNE_EXAMPLE_FLAGS: extra compiler flags for the examples (a sanitized build's -fsanitize=…).
set -eu
build=$1
src=$2
dest="$build/install-examples.$$"
trap 'rm -rf "$dest"' EXIT INT TERM
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null

pc=$(find "$dest" -name artune.pc)
[ -n "$pc" ] || { echo "FAIL: artune.pc not installed"; exit 1; }
# As the README says: PKG_CONFIG_PATH alone. artune.pc is relocatable (its prefix is found from its own folder), so
# the staged tree works as it lies, with no PKG_CONFIG_SYSROOT_DIR (which would also move Open MPI's paths).
export PKG_CONFIG_PATH="$(dirname "$pc")"
libdir=$(pkg-config --variable=libdir artune)
incdir=$(pkg-config --variable=includedir artune)
cxx="c++ -std=c++20 ${ARTUNE_EXAMPLE_FLAGS:-}"
fail=0
expect() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }

# The public headers are there; test-only and backend-internal headers are not.
expect '[ -f "$incdir/artune/communicator.hpp" ] && [ -f "$incdir/artune/artune.h" ]' "public headers installed"
expect '[ -f "$incdir/artune/executor/backend.hpp" ]' "module headers under include/artune/<module>/"
expect '[ ! -e "$incdir/artune/executor/test_fault.hpp" ]' "test_fault.hpp not installed"
expect '[ -z "$(find "$incdir" -name "*_backend.hpp")" ]' "backend internals not installed"
expect 'readelf -d "$libdir/libartune.so" | grep -q "SONAME.*libartune\.so\.0\.1"' "SONAME libartune.so.0.1"
expect '[ -f "$libdir/libartune.a" ]' "static library installed"
expect '! grep -q gnuplot "$libdir/libartune.so"' "libartune carries no report code (no gnuplot launcher: artune/report is the CLI's)"
expect '[ ! -e "$incdir/artune/report" ] && [ ! -e "$incdir/artune/tuner/report.hpp" ]' "report headers not installed"
expect '[ -z "$(find "$dest" -name "libartune_*.a")" ]' "no internal static library installed"
# The NCCL tuner plugin: artune.pc names it, and what it names loads as NCCL loads it (dlopen, the v5 symbol).
plugin=$(pkg-config --variable=nccl_tuner_plugin artune)
expect '[ -n "$plugin" ] && [ -f "$plugin" ]' "nccl_tuner_plugin names the installed plugin (got '$plugin')"
expect 'python3 -c "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL); lib.ncclTunerPlugin_v5" "$plugin"' \
  "the plugin artune.pc names loads and has ncclTunerPlugin_v5"
# The Python package lands where its interpreter looks for the prefix's modules (meson's summary names both): the
# folder artune/ with the extension and the pure-Python modules beside it, importable from the staged tree as is.
pymod=$(find "$dest" -name "_artune.cpython-*.so")
if [ -n "$pymod" ]; then
  pkgdir=$(dirname "$pymod")
  prefix=$(meson introspect --buildoptions "$build" | python3 -c "import json, sys; print([o['value'] for o in json.load(sys.stdin) if o['name'] == 'prefix'][0])")
  site=$(/usr/bin/python3 -c "import site, sys; p = sys.argv[1].rstrip('/') + '/'; print(next((d for d in site.getsitepackages() if d.startswith(p)), ''))" "$prefix")
  expect '[ -z "$site" ] || [ "$pkgdir" = "$dest$site/artune" ]' "python package in $site/artune (got $pkgdir)"
  expect '[ -f "$pkgdir/__init__.py" ] && [ -f "$pkgdir/torch.py" ]' "artune/__init__.py and artune/torch.py beside the extension"
  expect 'PYTHONPATH="$(dirname "$pkgdir")" /usr/bin/python3 -c "import artune; artune.Communicator"' \
    "the staged package imports"
  if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    expect 'PYTHONPATH="$(dirname "$pkgdir")" /usr/bin/python3 -c "import artune.torch; artune.torch.allreduce_hook"' \
      "the staged artune.torch imports"
    # The PyTorch example as a user runs it, from the staged package: DDP with the artune hook on 2 ranks.
    if command -v mpirun >/dev/null; then
      out=$(PYTHONPATH="$(dirname "$pkgdir")" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            timeout -s KILL 300 mpirun -np 2 --oversubscribe -x PYTHONPATH /usr/bin/python3 "$src/examples/torch_ddp.py" \
            --steps 3 2>&1)
      expect 'echo "$out" | grep -q "2 ranks, artune.torch.allreduce_hook, gradient plan .*; replicas identical: True"' \
        "examples/torch_ddp.py: $out"
    fi
  fi
fi
expect '[ "$(echo $(pkg-config --libs artune))" = "-L$libdir -lartune" ]' "a shared-library consumer needs only -lartune (got: $(pkg-config --libs artune))"

# threads/cpu example against the shared library, then the static one; neither sees the source tree.
cd "$dest"
$cxx -o threads_cpu "$src/examples/threads_cpu.cpp" $(pkg-config --cflags --libs artune)
out=$(LD_LIBRARY_PATH="$libdir" ./threads_cpu)
expect 'echo "$out" | grep -q "rank 3: 513 elements, first 2.50 (expected 2.50)"' "threads_cpu (shared): $out"
expect 'LD_LIBRARY_PATH="$libdir" ldd ./threads_cpu | grep -q "libartune.so.0.1 => $libdir"' "threads_cpu links the installed libartune.so"
# Static: libartune.a plus what artune.pc declares private (its Requires.private as the system's shared
# libraries, its Libs.private outside the sysroot).
private_requires=$(pkg-config --print-requires-private artune | cut -d' ' -f1)
private_libs=$(sed -n 's/^Libs.private: //p' "$pc")
$cxx -o threads_cpu_static "$src/examples/threads_cpu.cpp" $(pkg-config --cflags artune) \
  "$libdir/libartune.a" $(pkg-config --libs $private_requires) $private_libs
expect './threads_cpu_static | grep -q "first 2.50"' "threads_cpu (static)"

# MPI example: pkg-config for artune (installed tree) and for the system's Open MPI, in one call as the README has it.
if pkg-config --exists ompi-cxx && command -v mpirun >/dev/null; then
  $cxx -o mpi_allreduce "$src/examples/mpi_allreduce.cpp" $(pkg-config --cflags --libs artune ompi-cxx)
  out=$(LD_LIBRARY_PATH="$libdir" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout -s KILL 120 mpirun -np 3 --oversubscribe -x LD_LIBRARY_PATH ./mpi_allreduce)
  expect 'echo "$out" | grep -q "mpi_allreduce: 3 ranks, sum 6.0 (expected 6.0), max 3.0, plan rechd"' "mpi_allreduce: $out"
fi
[ "$fail" -eq 0 ] && echo "install_examples: all checks passed"
exit "$fail"
