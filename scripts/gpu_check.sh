#!/usr/bin/env bash
# One command for a machine with NVIDIA GPUs (run from anywhere, as root or not):
#   1. builds artune in build-gpu/ for the GPUs' own architecture (nvidia-smi --query-gpu=compute_cap),
#   2. runs the cuda and nccl tests (device tests included; none may skip),
#   3. runs compute-sanitizer memcheck, racecheck and initcheck over a small `artune run` of every plan
#      family and every data type on the cuda backend,
#   4. sweeps 8 B – 1 GiB nccl-tests style: `artune run` on the cuda backend (1 GPU and all GPUs), on the
#      nccl backend (mpirun, one rank per GPU), and plain ncclAllReduce through the nccl backend (-s nccl),
#      each iteration alone and --back-to-back (issued n times; --graph: one captured run launched n times;
#      ARTUNE_NCCL_REGISTER=0: buffers unregistered), and nccl-tests' all_reduce_perf when it is installed,
#   5. writes reports/gpu/<gpu name>/REPORT.md, the raw tables and busbw.png.
# On a machine without a GPU it exits 2 with one line, before building anything.
# Budget: under 25 minutes on one H100 (the sweep uses -n 20 -w 5; sanitizer runs use 64 KiB messages).
#
# Environment: BUILD_DIR (default build-gpu), GPU_CHECK_QUICK=1 (sweep to 1 MiB only: a fast smoke run),
# NVIDIA_SMI (default nvidia-smi; tests point it elsewhere to check the no-GPU refusal).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "gpu_check: $*" >&2
  exit 2
}

smi=${NVIDIA_SMI:-nvidia-smi}
command -v "$smi" >/dev/null 2>&1 || fail "no GPU: $smi not found (run this on a machine with NVIDIA GPUs)"
caps=$("$smi" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | sort -u) ||
  fail "no GPU: nvidia-smi --query-gpu failed"
[ -n "$caps" ] || fail "no GPU: nvidia-smi lists no device"
gpus=$("$smi" --query-gpu=name --format=csv,noheader | wc -l)
gpu_name=$("$smi" --query-gpu=name --format=csv,noheader | head -1 | tr -c 'A-Za-z0-9.\n-' '_' | sed 's/_*$//')
archs=$(echo "$caps" | paste -sd, -)
build=${BUILD_DIR:-build-gpu}
out="reports/gpu/$gpu_name"
mkdir -p "$out"
log="$out/gpu_check.log"
: >"$log"
say() { echo "$*" | tee -a "$log"; }
say "gpu_check: $gpus x $gpu_name (sm $archs), build $build, report $out"

# 1. Build for this GPU.
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dgpu_archs="$archs" >>"$log" 2>&1
else
  meson configure "$build" -Dgpu_archs="$archs" >>"$log" 2>&1
fi
ninja -C "$build" >>"$log" 2>&1 || fail "build failed (see $log)"
artune="$build/cli/artune"

# 2. Tests: the GPU ones must run, not skip.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tests_ok=yes
meson test -C "$build" --print-errorlogs cuda_dispatch cuda_program cuda_kernels_host cuda_backend nccl_backend \
  nccl_host plan_lower bootstrap_mpi >"$out/tests.txt" 2>&1 || tests_ok=no
if grep -q "SKIP" "$out/tests.txt"; then tests_ok=no; fi
say "tests: $tests_ok ($out/tests.txt)"

# 3. compute-sanitizer over every family and type (small messages, one GPU per plan device where there are).
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san_ok=yes
: >"$out/sanitizer.txt"
sanitize() {  # tool, spec, type
  local topo=dgx1-v100
  case $2 in nccl/xring | 2d) topo=uniform:2x4 ;; esac
  if ! "$sanitizer" --tool "$1" --error-exitcode 9 "$artune" run -t "$topo" -s "$2" --backend cuda \
    -b 64K -e 64K -d "$3" -o sum -n 1 -w 0 -c 1 >>"$out/sanitizer.txt" 2>&1; then
    san_ok=no
    echo "FAILED: $1 $2 $3" >>"$out/sanitizer.txt"
  fi
}
families="xring xring#2 rechd pscpu psgpu#2 nccl tree hiercopy mring#2 nccl/xring 2d"
types="float half bfloat16 double int32 uint8 int64"
if [ -x "$sanitizer" ]; then
  # memcheck: every family x every type; racecheck and initcheck (slower): every family in float, every
  # type through the ring.
  for spec in $families; do for type in $types; do sanitize memcheck "$spec" "$type"; done; done
  for tool in racecheck initcheck; do
    for spec in $families; do sanitize "$tool" "$spec" float; done
    for type in $types; do sanitize "$tool" xring "$type"; done
  done
else
  san_ok="skipped (compute-sanitizer not found)"
fi
say "compute-sanitizer: $san_ok ($out/sanitizer.txt)"

# 4. Sweeps, nccl-tests style.
max=1G
[ "${GPU_CHECK_QUICK:-0}" = 1 ] && max=1M
sweep="-b 8 -e $max -f 2 -d float -o sum -n 20 -w 5 -c 1 --timeout 120"
run_sweep() {  # name, command...
  local name=$1
  shift
  if "$@" >"$out/$name.txt" 2>&1; then say "sweep $name: ok"; else say "sweep $name: FAILED (exit $?)"; fi
}
run_sweep cuda_1gpu env CUDA_VISIBLE_DEVICES=0 "$artune" run -t uniform:1 -s xring --backend cuda $sweep
run_sweep cuda_2on1 env CUDA_VISIBLE_DEVICES=0 "$artune" run -t uniform:2 -s xring --backend cuda $sweep
# One rank through NCCL: blocking communicators, the watchdog and both back-to-back modes on any GPU count.
run_sweep nccl_1gpu_allreduce_b2b env CUDA_VISIBLE_DEVICES=0 mpirun --oversubscribe -np 1 "$artune" run \
  -t uniform:1 -s nccl --backend nccl $sweep --back-to-back
run_sweep nccl_1gpu_allreduce_b2b_graph env CUDA_VISIBLE_DEVICES=0 mpirun --oversubscribe -np 1 "$artune" run \
  -t uniform:1 -s nccl --backend nccl $sweep --back-to-back --graph
if [ "$gpus" -ge 2 ]; then
  run_sweep "cuda_${gpus}gpu_xring" "$artune" run -t "uniform:$gpus" -s xring --backend cuda $sweep
  run_sweep "cuda_${gpus}gpu_group" "$artune" run -t "uniform:$gpus" -s nccl --backend cuda $sweep
  run_sweep "nccl_${gpus}gpu_xring" mpirun --oversubscribe -np "$gpus" "$artune" run -t "uniform:$gpus" -s xring \
    --backend nccl $sweep
  run_sweep "nccl_${gpus}gpu_allreduce" mpirun --oversubscribe -np "$gpus" "$artune" run -t "uniform:$gpus" -s nccl \
    --backend nccl $sweep
  # nccl-tests' timing: the n runs in flight with one wait (issued; one graph; unregistered buffers).
  for mode in b2b b2b_graph b2b_noreg; do
    extra="--back-to-back"
    reg=1
    case $mode in b2b_graph) extra="--back-to-back --graph" ;; b2b_noreg) reg=0 ;; esac
    run_sweep "nccl_${gpus}gpu_allreduce_$mode" mpirun --oversubscribe -np "$gpus" -x ARTUNE_NCCL_REGISTER=$reg \
      "$artune" run -t "uniform:$gpus" -s nccl --backend nccl $sweep $extra
    run_sweep "nccl_${gpus}gpu_xring_$mode" mpirun --oversubscribe -np "$gpus" -x ARTUNE_NCCL_REGISTER=$reg \
      "$artune" run -t "uniform:$gpus" -s xring --backend nccl $sweep $extra
  done
  if command -v all_reduce_perf >/dev/null 2>&1; then
    run_sweep "nccltests_${gpus}gpu" mpirun --oversubscribe -np "$gpus" all_reduce_perf -b 8 -e "$max" -f 2 -d float \
      -o sum -n 20 -w 5 -g 1
  fi
fi

# 5. Report: the tables side by side and a busbw plot.
{
  echo "# GPU check: $gpus x $gpu_name"
  echo
  echo "Produced by \`bash scripts/gpu_check.sh\` on $(date -u +%Y-%m-%d) (sm $archs, $("$smi" \
    --query-gpu=driver_version --format=csv,noheader | head -1) driver)."
  echo
  echo "- tests: $tests_ok"
  echo "- compute-sanitizer (memcheck: every family x type; racecheck, initcheck: every family in float and"
  echo "  every type through xring): $san_ok"
  echo
  for f in "$out"/cuda_*.txt "$out"/nccl_*.txt "$out"/nccltests_*.txt; do
    [ -f "$f" ] || continue
    echo "## $(basename "$f" .txt)"
    echo
    echo '```'
    cat "$f"
    echo '```'
    echo
  done
} >"$out/REPORT.md"
if command -v gnuplot >/dev/null 2>&1; then
  plot=""
  for f in "$out"/cuda_*.txt "$out"/nccl_*.txt; do
    [ -f "$f" ] || continue
    grep -E '^ +[0-9]' "$f" >"$f.dat" || true
    plot="$plot${plot:+, }'$f.dat' using 1:7 with linespoints title '$(basename "$f" .txt)'"
  done
  if [ -n "$plot" ]; then
    gnuplot -e "set terminal png size 1000,600; set output '$out/busbw.png'; set logscale x 2; \
      set xlabel 'message size (bytes)'; set ylabel 'busbw (GB/s)'; set key left top; \
      set title 'artune run, $gpus x $gpu_name'; plot $plot" >>"$log" 2>&1 || say "plot failed"
    rm -f "$out"/*.txt.dat
  fi
fi
say "report: $out/REPORT.md"
[ "$tests_ok" = yes ] && [ "$san_ok" != no ] || exit 1
