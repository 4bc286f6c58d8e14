#!/usr/bin/env python3
"""The GPU-subset table of docs/bound.md: every k-subset (k = 2..8) of a machine scored by `artune alloc
--plans all` (the whole tuner per subset, 256 MiB all-reduce, nccl profile), summarised per k: the trees
family's share of the min-cut bound, its speedup over NCCL (modelled), how often it is at least as fast
as every other family, and of the sets below 95 % of the bound how many have trees packed over the routes
(`artune bound`, the trees family's LP) below 95 % of it themselves: no tree schedule reaches 95 % there.

    python3 scripts/subset_tables.py build/cli/artune dgx1-v100 [--json-dir DIR]

Prints a Markdown table; with --json-dir keeps each k's `alloc --json` output there.
"""
import argparse
import json
import math
import os
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artune", help="the artune binary")
    parser.add_argument("topology", help="a topology of 8 GPUs or fewer (dgx1-v100, dgx1-p100, ...)")
    parser.add_argument("--size", default="256M")
    parser.add_argument("--json-dir", help="keep each k's alloc --json output in this folder")
    args = parser.parse_args()

    rows = []
    k = 2
    while True:
        cmd = [args.artune, "alloc", "-t", args.topology, "-k", str(k), "--plans", "all", "--size", args.size,
               "-j", "1", "--json"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            if "GPUs asked for" in run.stderr:
                break
            sys.exit(f"subset_tables: {' '.join(cmd)} failed: {run.stderr.strip()}")
        if args.json_dir:
            with open(os.path.join(args.json_dir, f"{args.topology}_k{k}.json"), "w") as out:
                out.write(run.stdout)
        rows.extend((k, r) for r in json.loads(run.stdout)["ranked"])
        k += 1

    def share_of(r):
        return r["best_busbw_gbps"] * r["best_us"] / r["trees_us"] / r["bound_busbw_gbps"]

    packed = {}  # the packing's share of the bound, for the sets below 95 %
    for _, r in rows:
        if share_of(r) < 0.95:
            cmd = [args.artune, "bound", "-t", f"{args.topology}[{r['gpus']}]", "--json"]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"subset_tables: {' '.join(cmd)} failed: {run.stderr.strip()}")
            packed[r["gpus"]] = json.loads(run.stdout)["effective"]["packed_trees"]["fraction"]

    def line(label, subset):
        share = [share_of(r) for _, r in subset]
        vs_nccl = [r["nccl_us"] / r["trees_us"] for _, r in subset]
        at_least = sum(1 for _, r in subset if r["trees_us"] <= r["others_us"] * (1 + 1e-9))
        geo = math.exp(sum(math.log(x) for x in vs_nccl) / len(vs_nccl))
        median = sorted(share)[len(share) // 2]
        routes_short = sum(1 for _, r in subset if packed.get(r["gpus"], 1) < 0.95)
        print(f"| {label} | {len(subset)} | {100 * min(share):.1f} | {100 * median:.1f} | "
              f"{sum(1 for s in share if s >= 0.95)} | {routes_short} | {geo:.2f}x | {min(vs_nccl):.2f}x | "
              f"{max(vs_nccl):.2f}x | {at_least} |")

    print(f"| GPUs | sets | trees % of bound: worst | median | sets >= 95 % | below, packing < 95 % "
          f"| trees / nccl: geomean | worst | best | trees >= every other family |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in sorted({k for k, _ in rows}):
        line(str(k), [row for row in rows if row[0] == k])
    line("all", rows)


if __name__ == "__main__":
    main()
