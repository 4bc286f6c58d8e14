#!/usr/bin/env bash
# Runs the benchmarks whose figures the docs quote and writes each one's raw output, ready to commit, to a file
# named after it under reports/bench/ (NAME plus .txt), with the command, the commit, the machine and its load
# average before and after every run, so that a figure in the docs can be read from (and is checked against:
# tests/core/docs_figures.py) the file it came from, and its spread judged from the runs beside it.
#
#   bash bench/run_reports.sh [--runs N] [--list] [NAME...]     (from the repository root, after a build)
#
# NAME picks benchmarks from the list below (default: all of them; --list prints it). --runs N overrides each
# benchmark's own number of runs. BUILD names the build folder (default build), OUT the output folder (default
# reports/bench). Nothing is asserted: these are measurements, and on a shared machine the
# load lines say how far to trust them. A benchmark that fails leaves its previous file in place (the output is
# written beside it and moved over it only when every run succeeded) and makes the script exit 1.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
b=$build/bench
mpirun_cmd="mpirun --allow-run-as-root --oversubscribe"

# name | runs | command (run from the repository root)
benchmarks=(
  "simulator|3|$b/bench_simulator --benchmark_min_time=0.5"
  "synthesis|2|$b/bench_synthesis --benchmark_min_time=1"
  "executor|2|$b/bench_executor"
  "tuner_plugin|3|env ARTUNE_TUNER_PLUGIN_PATH=$build/nccl_tuner/libnccl-tuner-artune.so $b/bench_tuner_plugin --benchmark_min_time=0.5"
  "watchdog|3|$b/bench_watchdog --benchmark_min_time=0.5"
  "communicator_overhead_4|3|$mpirun_cmd -np 4 $b/bench_communicator overhead"
  "communicator_overhead_8|3|$mpirun_cmd -np 8 $b/bench_communicator overhead"
  "communicator_large|3|$b/bench_communicator large 4 64M xring 20"
  "communicator_allgather|3|$mpirun_cmd -np 4 $b/bench_communicator allgather 1000 4096"
  "communicator_odd|3|$b/bench_communicator odd 4 100 ring"
  "communicator_resnet_4|1|$b/bench_communicator resnet 4 configs/fusion/resnet50.json 3"
  "communicator_resnet_8|1|$b/bench_communicator resnet 8 configs/fusion/resnet50.json 3"
  "calibrate_cpu|3|$build/cli/artune calibrate -t uniform:4 --backend cpu -q"
  "calibrate_mpi|3|$mpirun_cmd -np 4 $build/cli/artune calibrate -t uniform:4 --backend mpi -b 4K -e 4M -f 4 -q"
  "torch_allreduce|2|$mpirun_cmd -np 4 -x PYTHONPATH=$build/python /usr/bin/python3 bench/bench_torch.py allreduce"
  "torch_ddp|2|$mpirun_cmd -np 4 -x PYTHONPATH=$build/python /usr/bin/python3 bench/bench_torch.py ddp"
  "autotune|1|bash bench/bench_autotune.sh $build/cli/artune 3 dgx1-v100 4xdgx1-v100 16xdgx-h100 128xdgx-h100"
)

runs_override=""
names=()
while [ $# -gt 0 ]; do
  case $1 in
    --runs)
      runs_override=${2:-}
      case $runs_override in '' | *[!0-9]* | 0) echo "run_reports: --runs needs a whole number >= 1" >&2; exit 2 ;; esac
      shift 2 ;;
    --list) for e in "${benchmarks[@]}"; do IFS='|' read -r n r c <<<"$e"; printf '%-26s %s run(s): %s\n' "$n" "$r" "$c"; done; exit 0 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run_reports: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
for n in "${names[@]}"; do
  printf '%s\n' "${benchmarks[@]}" | grep -q "^$n|" || { echo "run_reports: unknown benchmark '$n' (see --list)" >&2; exit 2; }
done
[ -x "$build/cli/artune" ] || { echo "run_reports: no $build/cli/artune: build first (bash scripts/build.sh && ninja -C $build)" >&2; exit 2; }

load() { cut -d' ' -f1-3 /proc/loadavg; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
machine="$(nproc) cores ($cpu), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(. /etc/os-release && echo "$PRETTY_NAME")"

out_dir=${OUT:-reports/bench}
if [ -e "$out_dir" ] && [ ! -d "$out_dir" ]; then echo "run_reports: OUT=$out_dir is not a folder" >&2; exit 2; fi
mkdir -p "$out_dir"
status=0
tmp=""
trap '[ -z "$tmp" ] || rm -f "$tmp"' EXIT
for e in "${benchmarks[@]}"; do
  IFS='|' read -r name runs cmd <<<"$e"
  if [ ${#names[@]} -gt 0 ] && ! printf '%s\n' "${names[@]}" | grep -qx "$name"; then continue; fi
  [ -z "$runs_override" ] || runs=$runs_override
  out=$out_dir/$name.txt
  tmp=$(mktemp "$out_dir/.$name.XXXXXX")
  {
    echo "# $cmd"
    echo "# commit $commit, $(date -u '+%Y-%m-%d %H:%M UTC'), $machine"
  } >"$tmp"
  ok=1
  for ((r = 1; r <= runs; r++)); do
    echo "## run $r of $runs; load average before: $(load)" >>"$tmp"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086  # the command is a word list by design
    if ! $cmd >>"$tmp" 2>&1; then ok=0; fi
    echo "## run $r: $(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)") s wall; load average after: $(load)" >>"$tmp"
  done
  if [ $ok = 1 ]; then
    chmod 644 "$tmp" && mv "$tmp" "$out"
    echo "run_reports: $out ($runs run(s))"
  else
    echo "run_reports: $name failed; its output is not kept (rerun: $cmd)" >&2
    rm -f "$tmp"
    status=1
  fi
  tmp=""
done
exit $status
