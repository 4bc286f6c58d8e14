#!/usr/bin/env bash
# Sanitizer runs, on demand (CI: a manual job; not part of scripts/test.sh).
#
#   bash scripts/sanitize.sh [TEST...]      ASan + UBSan build in build-sanitize/ (g++), then the whole
#                                           suite, or only the named tests (meson test names)
#   bash scripts/sanitize.sh --fuzz SECONDS clang + libFuzzer + ASan/UBSan build in build-fuzz/
#                                           (-Dfuzz=true), then every fuzz target for SECONDS on a copy of
#                                           its seed corpus (new inputs stay in build-fuzz/corpus/); exits 2
#                                           with one line when clang or libFuzzer is missing
#                                           (`bash scripts/setup.sh --with-clang` installs them)
#
# Leaks are reported except inside MPI, hwloc and CUDA/NVML initialisation (scripts/lsan.supp); every
# UBSan finding is fatal. Sanitizer builds reserve terabytes of address space, so the tests that cap
# memory with `ulimit -v` keep only their time limit there (ARTUNE_SANITIZE, tests/cli_runner.hpp).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
root=$(pwd)
# Full unwinding on malloc: leaks from dlopen()ed plugins (hwloc, CUDA) keep the library frames the
# suppressions match.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [ "${1:-}" = "--fuzz" ]; then
  seconds=${2:?usage: sanitize.sh --fuzz SECONDS}
  # libFuzzer comes with clang only (Debian: clang and libclang-rt-14-dev): check that it links before setup.
  probe=$(mktemp -d)
  trap 'rm -rf "$probe"' EXIT
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$probe/p.cpp"
  if ! command -v clang++ >/dev/null 2>&1 ||
     ! clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" >/dev/null 2>&1; then
    echo "sanitize.sh: --fuzz needs clang++ with libFuzzer; install them with: bash scripts/setup.sh --with-clang" >&2
    exit 2
  fi
  if [ ! -f build-fuzz/build.ninja ]; then
    CXX=clang++ CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
      -Dbuildtype=debugoptimized -Dbenchmarks=disabled -Dcuda=disabled
  fi
  # Seeds as the replay tests use them (fuzz/meson.build); libFuzzer wants plain folders.
  declare -A seeds=(
    [topology_json]="configs/*.json tests/topology/data/*.json"
    [nvidia_smi]="tests/topology/data/*.txt"
    [nccl_xml]="tests/topology/data/*.xml"
    [spec]="fuzz/corpus/spec/*"
    [decision_table]="reports/*/table.json"
    [calibration_overlay]="reports/*/overlay.json"
    [run_logs]="tests/logs/data/*.log"
  )
  targets=()
  for name in "${!seeds[@]}"; do targets+=("fuzz/fuzz_$name"); done
  ninja -C build-fuzz "${targets[@]}"
  for name in "${!seeds[@]}"; do
    corpus="build-fuzz/corpus/$name"
    mkdir -p "$corpus"
    # shellcheck disable=SC2086
    for seed in ${seeds[$name]}; do
      cp "$seed" "$corpus/$(printf '%s' "$seed" | tr / _)"  # reports/*/table.json share a file name
    done
    echo "== fuzz_$name for ${seconds}s"
    "build-fuzz/fuzz/fuzz_$name" -max_total_time="$seconds" -rss_limit_mb=4096 -max_len=65536 \
      -artifact_prefix="build-fuzz/crash-$name-" "$corpus"
  done
  exit 0
fi

if [ ! -f build-sanitize/build.ninja ]; then
  meson setup build-sanitize -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized \
    -Dbenchmarks=disabled
fi
ninja -C build-sanitize
meson test -C build-sanitize --print-errorlogs --timeout-multiplier 4 "$@"
