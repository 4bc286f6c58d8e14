#!/usr/bin/env bash
# The GPU check, run from the carry bundle (scripts/gpu_bundle.sh) on a bare machine with one or more NVIDIA
# GPUs: no build, no Debian packages, nothing installed. From the repository root:
#
#   bash scripts/gpu_check.sh [--bundle DIR] [--report DIR] [--phases 0,1,2,3,4,5] [--deadline S]
#                             [--archive FILE] [--families 'TOPO:SPEC ...'] [--sanitizer-limit S] [--dry-run]
#
# Phases, cheapest and most important first; each has its own time limit, and the report is written as each
# one ends (and archived to --archive after each), so a window cut short still leaves the phases that ran:
#   0  facts: nvidia-smi, driver, CUDA, the NCCL wheel's version, glibc/libstdc++, what the machine lacks     ~10 s
#   1  correctness of the cuda backend: every family × type × op (test programs: kernels bit-exact against
#      the host, plans of 1–8 devices on the GPUs there are, caller buffers in and out of place, CUDA graphs
#      on and off; the cuda communicator) and `artune run` of every family, all #wrong = 0            ~1–2 min
#   2  compute-sanitizer memcheck and racecheck on a 64 KiB run of every family                        ~1–2 min
#   3  speed: the copy, reduce and scale kernels against cudaMemcpy device to device
#      (bench_cuda_kernels), and `artune run --backend cuda` per call from 8 B to 1 GiB                 ~1 min
#   4  NCCL with the tuner plugin: the machine's NCCL (the nvidia-nccl wheel) loads
#      libnccl-tuner-artune.so through NCCL_TUNER_PLUGIN, every all-reduce result is checked, and the
#      NCCL_DEBUG=INFO log shows the plugin's init and, where NCCL consults it, its picks; where mpirun is
#      there, artune's nccl backend (its test, and `artune run` alone, back to back, as a graph,
#      unregistered)                                                                                  ~1 min
#   5  the rest of the bundled test suite (every test meson runs here that needs no build tools),
#      skips counted and listed                                                                 the time left
# --deadline S (default 500) bounds the whole check: a phase gets at most its own limit and never more than
# what is left. The verdict is "pass", "partial" (a phase skipped or cut short, or a test that could only run
# reduced on the GPUs there are) or "FAIL".
#
# --families replaces the list of family/topology pairs that phases 1 and 2 run (default: every family, see
# below), e.g. --families 'dgx1-v100:prings' to give one family's sanitizer runs the whole window; an entry
# TOPOLOGY:SPEC@K runs the spec pipelined in K segments (--segments K);
# --sanitizer-limit S (default 150) is phase 2's own time limit.
#
# --dry-run walks every phase on a machine without a GPU, from the same bundle, with the GPU steps replaced by
# the host-side replays that exist (cuda_kernels_host, the cuda lowering, the plan verifier's race check, the
# host reduce, the plugin replayed as NCCL calls it), and prints each phase's expected time on a GPU.
#
# Without --dry-run, a machine without a GPU is refused with one line on stderr and exit 2 (nothing written).
# NVIDIA_SMI (default nvidia-smi) names the nvidia-smi to ask; tests point it elsewhere.
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)

fail() {
  echo "gpu_check: $*" >&2
  exit 2
}

bundle=gpu-bundle
report=""
phases="0,1,2,3,4,5"
deadline=500
archive=""
dry=0
only_families=""
sanitizer_limit=150
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
    --report) report=${2:?--report needs a folder}; shift 2 ;;
    --phases) phases=${2:?--phases needs a list such as 0,1,4}; shift 2 ;;
    --deadline) deadline=${2:?--deadline needs seconds}; shift 2 ;;
    --archive) archive=${2:?--archive needs a file}; shift 2 ;;
    --families) only_families=${2:?--families needs a list such as 'dgx1-v100:prings dgx1-v100:rbtrees@16'}; shift 2 ;;
    --sanitizer-limit) sanitizer_limit=${2:?--sanitizer-limit needs seconds}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h | --help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) fail "unknown argument '$1' (see --help)" ;;
  esac
done
case $deadline in '' | *[!0-9]*) fail "--deadline: '$deadline' is not a whole number of seconds" ;; esac
case $sanitizer_limit in '' | *[!0-9]*) fail "--sanitizer-limit: '$sanitizer_limit' is not a whole number of seconds" ;; esac
for f in $only_families; do
  case $f in *?:?*@*[!0-9]* | *?:?*@) fail "--families: '$f': the segments after @ must be a whole number" ;; esac
  case $f in *?:?*) ;; *) fail "--families: '$f' is not TOPOLOGY:SPEC[@SEGMENTS] (e.g. dgx1-v100:prings)" ;; esac
done
case ,$phases, in *[!0-9,]*) fail "--phases: '$phases' is not a list of phase numbers 0-5" ;; esac

smi=${NVIDIA_SMI:-nvidia-smi}
if [ $dry = 0 ]; then
  command -v "$smi" >/dev/null 2>&1 || fail "no GPU: $smi not found (run this on a machine with NVIDIA GPUs)"
  caps=$("$smi" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | sort -u) ||
    fail "no GPU: nvidia-smi --query-gpu failed"
  [ -n "$caps" ] || fail "no GPU: nvidia-smi lists no device"
  gpus=$("$smi" --query-gpu=name --format=csv,noheader | wc -l)
  gpu_name=$("$smi" --query-gpu=name --format=csv,noheader | head -1 | tr -c 'A-Za-z0-9.\n-' '_' | sed 's/_*$//')
else
  caps="-"
  gpus=0
  gpu_name=dry-run
fi
[ -f "$bundle/manifest.json" ] || fail "no bundle at $bundle (make it with: bash scripts/gpu_bundle.sh)"
bundle=$(cd "$bundle" && pwd)
[ -n "$report" ] || report="reports/gpu/$gpu_name"
if [ -e "$report" ] && [ ! -d "$report" ]; then fail "--report: $report exists and is not a folder"; fi
mkdir -p "$report" || fail "--report: cannot make $report"
report=$(cd "$report" && pwd)
md="$report/REPORT.md"
t0=$(date +%s)
verdict=pass

say() { echo "$*" | tee -a "$report/gpu_check.log"; }
md() { echo "$*" >>"$md"; }
left() { echo $((deadline - ($(date +%s) - t0))); }
demote() {  # the verdict only gets worse: pass → partial → FAIL
  case $1 in FAIL) verdict=FAIL ;; partial) [ "$verdict" = FAIL ] || verdict=partial ;; esac
}
pack() { [ -z "$archive" ] || tar czf "$archive" -C "$(dirname "$report")" "$(basename "$report")" 2>/dev/null; }
# step NAME LIMIT CMD...: runs CMD with its output in NAME.txt, at most LIMIT seconds (and what is left);
# records the command, its exit status and time in the report. Returns CMD's status (124: out of time).
step() {
  local name=$1 limit=$2
  shift 2
  local budget
  budget=$(left)
  [ "$budget" -lt "$limit" ] && limit=$budget
  if [ "$limit" -le 0 ]; then
    md "- \`$name\`: not run (deadline reached)"
    return 124
  fi
  local s
  s=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" >"$report/$name.txt" 2>&1
  local rc=$?
  local took=$(($(date +%s) - s))
  local what=ok
  [ $rc = 0 ] || what="exit $rc"
  [ $rc = 124 ] && what="cut at ${limit} s"
  [ $rc = 77 ] && what="skipped (exit 77)"
  local shown="${*//$bundle/\$BUNDLE}"
  shown=${shown//$src\//}
  md "- \`$name\` ($took s, $what): \`${shown//$src/.}\`"
  say "  $name: $what ($took s)"
  return $rc
}
phase_on() { case ,$phases, in *,$1,*) return 0 ;; *) return 1 ;; esac; }
# phase N TITLE EXPECTED: opens a phase's section; the phase's own function follows.
phase_start() {
  phase_t=$(date +%s)
  phase_status=pass
  say "phase $1: $2 (expected on one H100/H200: $3)"
  md ""
  md "## Phase $1: $2"
  md ""
}
phase_end() {
  local took=$(($(date +%s) - phase_t))
  md ""
  md "Phase $1: **$phase_status** in $took s."
  say "phase $1: $phase_status ($took s)"
  demote "$phase_status"
  pack
}
bad() { phase_status=FAIL; }
cut() { [ "$phase_status" = FAIL ] || phase_status=partial; }
# Marks the phase by a step's status: 0 ok, 77 (a skip) or 124 (cut short) partial, anything else FAIL.
judge() { case $1 in 0) ;; 77 | 124) cut ;; *) bad ;; esac; }

# The programs, from the bundle. libnccl.so.2 comes from the machine (the nvidia-nccl wheel on the GPU machine);
# artune's nccl backend needs it to load.
artune="$bundle/bin/artune"
probe="$bundle/bin/nccl-plugin-probe"
bench="$bundle/bin/bench_cuda_kernels"
plugin="$bundle/lib/libnccl-tuner-artune.so"
pybin=$(command -v python3 || true)
find_nccl() {
  local found=""
  if [ -n "$pybin" ]; then
    found=$("$pybin" - <<'PY' 2>/dev/null
import glob, os, site
dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
for d in dirs:
    hits = sorted(glob.glob(os.path.join(d, "nvidia", "**", "libnccl.so*"), recursive=True))
    if hits:
        print(hits[0]); break
PY
    )
  fi
  [ -n "$found" ] || found=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
  [ -n "$found" ] || { [ -e /usr/local/cuda/lib64/libnccl.so.2 ] && found=/usr/local/cuda/lib64/libnccl.so.2; }
  echo "$found"
}
nccl_lib=$(find_nccl)
[ -z "$nccl_lib" ] || export LD_LIBRARY_PATH="$(dirname "$nccl_lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The machine's libstdc++ must be as new as the build's; otherwise the bundle's own travels in.
if ! "$artune" --version >/dev/null 2>"$report/loader.txt" && grep -q "GLIBCXX\|CXXABI\|GCC_" "$report/loader.txt"; then
  export LD_LIBRARY_PATH="$bundle/lib/fallback:$LD_LIBRARY_PATH"
  stdcxx="the bundle's (the machine's is older than the build's)"
else
  stdcxx="the machine's"
fi
rm -f "$report/loader.txt"
# The bundle's libhwloc loads its own plugins, never the machine's (built for another hwloc version).
export HWLOC_PLUGINS_PATH="$bundle/lib/hwloc"
mpirun=$(command -v mpirun || true)
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$sanitizer" ] || sanitizer=""
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc 2>/dev/null || echo 2)

{
  echo "# GPU check: $gpus x $gpu_name"
  echo
  if [ $dry = 1 ]; then
    echo "**Dry run** on $(uname -n) (no GPU): every phase with its GPU steps replaced by host-side replays."
  else
    echo "\`bash scripts/gpu_check.sh --phases $phases --deadline $deadline$([ -n "$only_families" ] &&
      echo " --families '$only_families'")$([ "$sanitizer_limit" = 150 ] || echo " --sanitizer-limit $sanitizer_limit")\` on $(date -u '+%Y-%m-%d %H:%M UTC') (sm $(echo "$caps" |
      paste -sd, -)), bundle \`$(head -1 "$bundle/BUNDLE.txt")\`."
  fi
  echo
  echo "\$BUNDLE below is the bundle's folder; every command ran from the repository root."
} >"$md"
: >"$report/gpu_check.log"
say "gpu_check: $gpus x $gpu_name, bundle $bundle, report $report, deadline ${deadline} s$([ $dry = 1 ] && echo ', dry run')"

# The families and the topology each runs on (plans of 2–8 devices; with fewer GPUs they share them).
families="uniform:4:xring uniform:8:xring#2 uniform:5:rechd uniform:8:pscpu uniform:8:psgpu#2 uniform:8:nccl
  uniform:8:tree dgx1-v100:hiercopy dgx1-v100:mring#2 uniform:2x4:nccl/xring uniform:2x4:2d uniform:3:rechd
  uniform:2:xring dgx1-v100:trees uniform:8:trees2 dgx1-v100:rbtrees dgx1-v100:prings"
[ -n "$only_families" ] && families=$only_families
# An entry is TOPOLOGY:SPEC, or TOPOLOGY:SPEC@K to run it pipelined in K segments (--segments K).
topo_of() { echo "${1%:*}"; }
spec_of() { local x="${1##*:}"; echo "${x%@*}"; }
seg_of() { case ${1##*:} in *@*) echo "${1##*@}" ;; *) echo 1 ;; esac; }
label_of() { local x; x=$(spec_of "$1"); [ "$(seg_of "$1")" = 1 ] || x="${x}_seg$(seg_of "$1")"; echo "${x//[#\/]/_}"; }

# ------------------------------------------------------------------------------------------------ phase 0
phase0() {
  phase_start 0 "facts" "10 s"
  {
    echo "## uname"; uname -a
    echo "## os-release"; cat /etc/os-release 2>/dev/null
    echo "## glibc"; ldd --version 2>&1 | head -1
    echo "## libstdc++ (newest GLIBCXX)"
    for f in /usr/lib/x86_64-linux-gnu/libstdc++.so.6 /lib64/libstdc++.so.6; do
      [ -e "$f" ] && { echo "$f: $(grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$f" | sort -uV | tail -1)"; }
    done
    echo "libstdc++ used: $stdcxx"
    echo "## bundle"; cat "$bundle/BUNDLE.txt"
    echo "## nvcc"; (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 | tail -2
    echo "## compute-sanitizer"; [ -n "$sanitizer" ] && "$sanitizer" --version 2>&1 | head -2
    echo "## NCCL library used: ${nccl_lib:-none found}"
    echo "## python3: ${pybin:-none}"; [ -n "$pybin" ] && "$pybin" - <<'PY' 2>&1
import importlib, sys
print(sys.version.split()[0])
for m in ("numpy", "torch", "mpi4py", "nvidia.nccl", "pybind11", "mesonbuild"):
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", ""), getattr(mod, "__file__", ""))
    except Exception as e:
        print(m, "missing:", type(e).__name__)
try:
    import torch
    print("torch.cuda.nccl.version()", torch.cuda.nccl.version() if torch.cuda.is_available() else "no CUDA")
except Exception as e:
    print("torch nccl:", e)
PY
    echo "## build machine's dependencies here (absent is expected)"
    for h in /usr/include/nlohmann/json.hpp /usr/include/CLI/CLI.hpp /usr/include/fmt/format.h \
      /usr/include/eigen3/Eigen/Core /usr/include/doctest/doctest.h /usr/include/hwloc.h; do
      [ -e "$h" ] && echo "present: $h" || echo "absent: $h"
    done
    for p in mpirun meson ninja cmake gnuplot readelf patchelf; do
      echo "$p: $(command -v $p || echo absent)"
    done
  } >"$report/facts.txt" 2>&1
  if [ $dry = 0 ]; then
    "$smi" -q >"$report/nvidia-smi-q.txt" 2>&1
    "$smi" topo -m >"$report/nvidia-smi-topo.txt" 2>&1
    md "- GPU: $("$smi" --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,pcie.link.gen.max \
      --format=csv,noheader | head -1) (name, memory, driver, max SM/memory clocks, PCIe gen)"
    md "- CUDA (driver): $(grep -m1 'CUDA Version' "$report/nvidia-smi-q.txt" | sed 's/.*: //')"
  fi
  md "- glibc $(ldd --version 2>&1 | head -1 | awk '{print $NF}'), libstdc++: $stdcxx; NCCL: ${nccl_lib:-none found}"
  md "- the rest: \`facts.txt\`$([ $dry = 0 ] && echo ', `nvidia-smi-q.txt`, `nvidia-smi-topo.txt`')"
  step version 10 "$artune" --version || bad
  step topo_discover 30 "$artune" topo discover --json || cut
  phase_end 0
}

# ------------------------------------------------------------------------------------------------ phase 1
phase1() {
  phase_start 1 "correctness of the cuda backend" "1-2 min"
  local rc
  if [ $dry = 0 ]; then
    step tests_gpu 240 "$pybin" scripts/gpu_bundle.py tests "$bundle" "$src" --jobs 4 --logs "$report/tests" \
      --only cuda_backend,communicator_cuda,cuda_kernels_host,cuda_dispatch,cuda_program,plan_lower,communicator
    rc=$?
    judge $rc
    # A skipped test, or one that said what it could not check on this machine (REDUCED), makes the phase partial.
    if [ $rc = 0 ] && grep -qE "^(SKIP|REDUCED)" "$report/tests_gpu.txt"; then
      cut
      md "- reduced here: $(grep -A1 '^REDUCED' "$report/tests_gpu.txt" | grep '|' | sed 's/^ *| //' | sort -u | paste -sd';' -)"
    fi
  else
    # Host replays: the kernels' lane bodies, the lowering and its graph, bit-exact and race-free.
    step tests_host 150 "$pybin" scripts/gpu_bundle.py tests "$bundle" "$src" --jobs 2 --logs "$report/tests" \
      --only cuda_kernels_host,cuda_dispatch,cuda_program,plan_lower
    judge $?
  fi
  local backend=cuda
  [ $dry = 1 ] && backend=cpu
  for f in $families; do
    local t s
    t=$(topo_of "$f")
    s=$(spec_of "$f")
    local k l
    k=$(seg_of "$f")
    l=$(label_of "$f")
    [ $dry = 1 ] && { step "lower_${l}_$t" 20 "$artune" plan -t "$t" -s "$s" --segments "$k" --count 64K \
      --lower cuda || bad; }
    # The test programs above cover every type × op; the command line runs two of them per family.
    for dto in float:sum bfloat16:avg; do
      step "run_${backend}_${l}_${t}_${dto%:*}" 30 "$artune" run -t "$t" -s "$s" --segments "$k" --backend $backend \
        -b 8 -e 4M -f 32 -d "${dto%:*}" -o "${dto#*:}" -n 2 -w 1 -c 2 || bad
    done
    step "run_${backend}_${l}_${t}_b2b" 30 "$artune" run -t "$t" -s "$s" --segments "$k" --backend $backend \
      -b 1K -e 1M -f 32 -n 3 -w 1 -c 1 --back-to-back || bad
  done
  # Every #wrong in the tables must be 0 (a wrong result also exits 1, judged above).
  if grep -hE '^ +[0-9]' "$report"/run_*.txt 2>/dev/null | awk '$NF != 0 && $NF != "N/A" {bad=1} END {exit !bad}'; then
    md "- a table has #wrong ≠ 0"
    bad
  fi
  phase_end 1
}

# ------------------------------------------------------------------------------------------------ phase 2
phase2() {
  phase_start 2 "compute-sanitizer memcheck and racecheck" "1-2 min"
  if [ $dry = 1 ]; then
    # The plan verifier's own race check (every plan step's reads and writes against the schedule) and the
    # cuda lowering's host replay stand in for the sanitizer.
    for f in $families; do
      step "verify_$(label_of "$f")_$(topo_of "$f")" 30 "$artune" plan -t "$(topo_of "$f")" \
        -s "$(spec_of "$f")" --segments "$(seg_of "$f")" --count 64K || bad
    done
  elif [ -z "$sanitizer" ]; then
    md "- compute-sanitizer not found: phase skipped"
    cut
  else
    local list="$report/sanitizer_jobs.txt"
    : >"$list"
    for tool in memcheck racecheck; do
      for f in $families; do echo "$tool $(topo_of "$f") $(spec_of "$f") $(seg_of "$f") $(label_of "$f")" >>"$list"; done
    done
    # Four at a time on the GPU; each job's output in its own san_*.txt.
    san_one() {  # tool topology spec segments label
      local out="$report/san_$1_$5_${2//:/_}.txt"
      if "$sanitizer" --tool "$1" --error-exitcode 9 "$artune" run -t "$2" -s "$3" --segments "$4" --backend cuda \
        -b 64K -e 64K -n 1 -w 0 -c 1 >"$out" 2>&1; then echo "ok $1 $2 $3 seg $4"; else echo "FAILED $1 $2 $3 seg $4 (exit $?)"; fi
    }
    san_all() {
      while read -r tool t s k l; do
        san_one "$tool" "$t" "$s" "$k" "$l" &
        while [ "$(jobs -rp | wc -l)" -ge 4 ]; do wait -n; done
      done <"$list"
      wait
    }
    export -f san_one san_all
    export report sanitizer artune list
    step sanitizer "$sanitizer_limit" bash -c san_all
    judge $?
    grep -q FAILED "$report/sanitizer.txt" && bad
    md "- $(grep -c '^ok' "$report/sanitizer.txt") of $(wc -l <"$list") sanitizer runs clean; each run's output in \`san_*.txt\`"
  fi
  phase_end 2
}

# ------------------------------------------------------------------------------------------------ phase 3
phase3() {
  phase_start 3 "speed: kernels against cudaMemcpy, the cuda backend per call" "1 min"
  step bench_kernels 90 "$bench" --benchmark_min_time=0.05 --benchmark_counters_tabular=true
  judge $?
  # Two plan devices on the GPU to 1 GiB (checked), eight to 256 MiB; each alone (median) and back to back.
  local backend=cuda iters=20 warm=5
  # The dry run (cpu threads, no GPU) only checks the commands: few iterations, since eight threads waking each other
  # on a loaded 2-core CI machine took the back-to-back sweep past its 60 s (0 s when the machine is idle).
  [ $dry = 1 ] && backend=cpu iters=3 warm=1
  for tpe in uniform:2:xring:1G uniform:8:xring:256M uniform:8:nccl:256M; do
    local kind n s max t
    IFS=: read -r kind n s max <<<"$tpe"
    t=$kind:$n
    [ $dry = 1 ] && max=1M
    step "sweep_${backend}_${s}_$t" 60 "$artune" run -t "$t" -s "$s" --backend $backend -b 8 -e "$max" -f 2 -d float \
      -o sum -n $iters -w $warm -c 1 || bad
    step "sweep_${backend}_${s}_${t}_b2b" 60 "$artune" run -t "$t" -s "$s" --backend $backend -b 8 -e "$max" -f 2 \
      -d float -o sum -n $iters -w $warm -c 0 --back-to-back || bad
  done
  phase_end 3
}

# ------------------------------------------------------------------------------------------------ phase 4
phase4() {
  phase_start 4 "NCCL with the tuner plugin" "30 s"
  local ranks=2
  # A table over NCCL's own choices for 2 ranks on one machine (what the probe runs), simulated here.
  step nccl_table 60 "$artune" autotune -t uniform:2 --target nccl -b 8 -e 256M -f 4 --out "$report/nccl-table.json" ||
    bad
  step plugin_replay 20 env ARTUNE_TUNER_TABLE="$report/nccl-table.json" "$probe" --replay "$plugin" --ranks $ranks \
    -b 8 -e 256M -f 4 || bad
  if [ $dry = 1 ]; then
    md "- dry run: NCCL itself needs a GPU; the replay above is what NCCL's getCollInfo calls would get"
  elif [ -z "$nccl_lib" ]; then
    md "- no libnccl.so.2 on this machine: NCCL runs left out"
    cut
  else
    step nccl_without_plugin 60 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING "$probe" --nccl-lib "$nccl_lib" \
      -b 8 -e 256M -f 4 -n 20 -w 5
    judge $?
    step nccl_with_plugin 60 env NCCL_TUNER_PLUGIN="$plugin" ARTUNE_TUNER_TABLE="$report/nccl-table.json" \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV "$probe" --nccl-lib "$nccl_lib" -b 8 -e 256M -f 4 -n 20 -w 5
    judge $?
    local log="$report/nccl_with_plugin.txt"
    md "- NCCL: $(grep -m1 '^# NCCL' "$log")"
    md "- ranks: $(grep -m1 'rank(s)' "$log" | sed 's/^# //')"
    if grep -q "artune tuner:" "$log"; then
      md "- the plugin's init logged through NCCL:"
      md '```'
      grep "artune tuner:\|TUNER\|tuner\|Tuner" "$log" | head -8 >>"$md"
      md '```'
    else
      md "- **the plugin's init line is missing from NCCL's log**"
      bad
    fi
    if grep -qiE "algo [A-Z]|algorithm [A-Z]| Ring | Tree |NVLS" "$log"; then
      md "- NCCL's TUNING lines (the pick per call):"
      md '```'
      grep -iE "opCount|algo |algorithm " "$log" | head -12 >>"$md"
      md '```'
    fi
    grep -q "one rank: NCCL runs a local copy" "$log" &&
      md "- one rank only: NCCL never consults a tuner for it; the picks are shown by the replay above"
  fi
  # artune's nccl backend, one rank per GPU under mpirun, where the machine has one.
  if [ $dry = 0 ] && [ -n "$nccl_lib" ] && [ -n "$mpirun" ]; then
    local np=$gpus mpi="$mpirun --allow-run-as-root --oversubscribe -x LD_LIBRARY_PATH -x HWLOC_PLUGINS_PATH"
    step tests_nccl 120 "$pybin" scripts/gpu_bundle.py tests "$bundle" "$src" --logs "$report/tests" --only nccl_backend
    judge $?
    if grep -q "^REDUCED" "$report/tests_nccl.txt"; then
      cut
      md "- reduced here: $(grep -A1 '^REDUCED' "$report/tests_nccl.txt" | grep '|' | sed 's/^ *| //' | head -1)"
    fi
    for mode in alone b2b b2b_graph b2b_noreg; do
      local extra="" reg=1
      case $mode in b2b) extra=--back-to-back ;; b2b_graph) extra="--back-to-back --graph" ;;
        b2b_noreg) extra=--back-to-back reg=0 ;; esac
      step "nccl_backend_${np}gpu_allreduce_$mode" 60 $mpi -x ARTUNE_NCCL_REGISTER=$reg -np "$np" "$artune" run \
        -t "uniform:$np" -s nccl --backend nccl -b 8 -e 256M -f 4 -d float -o sum -n 20 -w 5 -c 1 $extra || bad
    done
  elif [ $dry = 0 ]; then
    md "- no mpirun on this machine: artune's nccl backend (one rank per GPU under mpirun) left out"
    cut
  fi
  phase_end 4
}

# ------------------------------------------------------------------------------------------------ phase 5
phase5() {
  phase_start 5 "the rest of the bundled suite" "2-4 min"
  local skip=cuda_backend,communicator_cuda,cuda_kernels_host,cuda_dispatch,cuda_program,plan_lower,communicator
  skip=$skip,nccl_backend
  if [ $dry = 1 ]; then
    step suite_list 30 "$pybin" scripts/gpu_bundle.py tests "$bundle" "$src" --list
    judge $?
    md "- dry run: the suite is listed, not run (the default suite runs it here)"
  else
    step suite $(($(left) > 0 ? $(left) : 0)) "$pybin" scripts/gpu_bundle.py tests "$bundle" "$src" --jobs "$jobs" --logs "$report/tests" \
      --skip "$skip"
    judge $?
    md "- $(tail -1 "$report/suite.txt")"
    local skips
    skips=$(grep -cE "^(SKIP|REDUCED)" "$report/suite.txt")
    [ "$skips" = 0 ] || {
      md "- skipped or reduced: $(grep -E '^(SKIP|REDUCED)' "$report/suite.txt" | awk '{print $1 " " $2}' | paste -sd',' -)"
      cut
    }
  fi
  phase_end 5
}

for p in 0 1 2 3 4 5; do
  if phase_on $p; then
    if [ "$(left)" -le 0 ]; then
      md ""
      md "## Phase $p: not run (the ${deadline} s deadline was reached)"
      demote partial
      continue
    fi
    "phase$p"
  else
    md ""
    md "## Phase $p: not selected (--phases $phases)"
    demote partial
  fi
done
md ""
md "**Verdict: $verdict** after $(($(date +%s) - t0)) s."
pack
say "gpu_check: $verdict ($(($(date +%s) - t0)) s), report $md"
[ "$verdict" != FAIL ]
