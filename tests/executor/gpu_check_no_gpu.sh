#!/bin/sh
# scripts/gpu_check.sh on a machine without a GPU (forced through NVIDIA_SMI, so this also holds on a GPU
# machine), or given a bad flag: exit 2, exactly one line on stderr naming the reason, nothing on stdout, nothing built or written.
# $1: source root.
set -u
root=$1
status=0
for smi in /nonexistent/nvidia-smi true false; do
  out=$(cd "$root" && BUILD_DIR=build-gpu-check-test NVIDIA_SMI=$smi bash scripts/gpu_check.sh 2>/dev/null)
  rc=$?
  err=$(cd "$root" && BUILD_DIR=build-gpu-check-test NVIDIA_SMI=$smi bash scripts/gpu_check.sh 2>&1 >/dev/null)
  lines=$(printf '%s\n' "$err" | wc -l)
  echo "NVIDIA_SMI=$smi: exit $rc: $err"
  [ "$rc" -eq 2 ] || { echo "FAIL: exit $rc, expected 2"; status=1; }
  [ -z "$out" ] || { echo "FAIL: stdout not empty: $out"; status=1; }
  [ "$lines" -eq 1 ] || { echo "FAIL: $lines lines on stderr"; status=1; }
  case $err in "gpu_check: no GPU: "*) ;; *) echo "FAIL: unexpected message"; status=1 ;; esac
  [ ! -e "$root/build-gpu-check-test" ] || { echo "FAIL: a build folder was made"; status=1; }
done
# Bad flags are refused the same way, naming the flag, before anything else.
for args in "--families foo" "--families a:b@x" "--sanitizer-limit 2m" "--deadline x" "--phases a"; do
  # shellcheck disable=SC2086  # the flags are meant to split
  err=$(cd "$root" && NVIDIA_SMI=/nonexistent/nvidia-smi bash scripts/gpu_check.sh $args 2>&1 >/dev/null)
  rc=$?
  echo "$args: exit $rc: $err"
  [ "$rc" -eq 2 ] || { echo "FAIL: exit $rc, expected 2"; status=1; }
  case $err in "gpu_check: ${args%% *}: "*) ;; *) echo "FAIL: the message does not name ${args%% *}"; status=1 ;; esac
done
exit $status
