#!/bin/sh
# The GPU carry bundle made from this build: self-contained (every ELF resolves its libraries inside the bundle
# or on the allow-list; the bundled artune runs --version and a cpu run with nothing else on the library path,
# and, as root, inside a root of glibc and the allow-list only), at most 60 MiB, and scripts/gpu_check.sh
# --dry-run walks every phase from it with verdict "pass". Leaves nothing behind.
# $1: build folder, $2: source root.
set -u
build=$(cd "$1" && pwd)
root=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/artune-gpu-bundle-test.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
status=0
python3 "$root/scripts/gpu_bundle.py" make "$build" "$work/bundle" || exit 1
python3 "$root/scripts/gpu_bundle.py" check "$work/bundle" --chroot || status=1
bash "$root/scripts/gpu_check.sh" --dry-run --bundle "$work/bundle" --report "$work/report" >"$work/dry.txt" 2>&1 ||
  status=1
cat "$work/dry.txt"
grep -q "^\*\*Verdict: pass\*\*" "$work/report/REPORT.md" || { echo "FAIL: the dry run's verdict is not pass"; status=1; }
for p in 0 1 2 3 4 5; do
  grep -q "^Phase $p: \*\*pass\*\*" "$work/report/REPORT.md" || { echo "FAIL: phase $p did not pass"; status=1; }
done
# The bundle itself is never written by a run.
[ ! -e "$work/bundle/tests" ] || { echo "FAIL: the dry run unpacked into the bundle"; status=1; }
exit $status
