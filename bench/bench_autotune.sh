#!/usr/bin/env bash
# Wall time, CPU time and peak memory of `artune autotune` (default sizes 1K-1G, simulator only) per topology and
# thread count, RUNS runs each, and whether every run of a topology wrote the same table byte for byte.
#
#   bench/bench_autotune.sh [ARTUNE] [RUNS] [TOPO...]
#   e.g. bench/bench_autotune.sh build/cli/artune 3 dgx1-v100 4xdgx1-v100 16xdgx-h100 128xdgx-h100
#
# JOBS="1 2" picks the -j values. On a shared machine the wall time depends on the other load: compare the user
# CPU time (the work done) and the ratio of the two wall times.
set -euo pipefail
artune=${1:-build/cli/artune}
runs=${2:-3}
shift $(( $# >= 2 ? 2 : $# ))
topos=("$@")
[ ${#topos[@]} -gt 0 ] || topos=(dgx1-v100 4xdgx1-v100 16xdgx-h100 128xdgx-h100)
jobs=${JOBS:-1 2}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
printf '%-14s %3s %3s %10s %10s %10s %10s %s\n' topology j run wall_s user_s sys_s peak_MB table
for topo in "${topos[@]}"; do
  first=""
  for j in $jobs; do
    for ((r = 1; r <= runs; r++)); do
      out="$scratch/$topo-$j-$r.json"
      /usr/bin/time -f '%e %U %S %M' -o "$scratch/time" "$artune" autotune -t "$topo" -q -j "$j" --out "$out" >/dev/null
      read -r wall user sys kb <"$scratch/time"
      [ -n "$first" ] || first=$out
      same=$(cmp -s "$first" "$out" && echo same || echo DIFFERENT)
      printf '%-14s %3s %3s %10s %10s %10s %10s %s\n' "$topo" "$j" "$r" "$wall" "$user" "$sys" $((kb / 1024)) "$same"
    done
  done
done
