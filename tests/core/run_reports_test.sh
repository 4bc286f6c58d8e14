#!/bin/sh
# bench/run_reports.sh, the script that writes the benchmark outputs the docs quote: its list and its errors, one
# benchmark run twice into a scratch folder (the command, the commit, and a load line before and after each run),
# and a failing benchmark leaving the previous file in place with no temporary file behind.
#   run_reports_test.sh SOURCE_ROOT BUILD_ROOT
set -u
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
script="$src/bench/run_reports.sh"

bash "$script" --list >"$tmp/list" || fail "--list exited $?"
grep -q '^watchdog ' "$tmp/list" || fail "--list does not name watchdog"
grep -q '^torch_ddp ' "$tmp/list" || fail "--list does not name torch_ddp"
bash "$script" nosuch 2>"$tmp/err"
[ $? = 2 ] || fail "an unknown benchmark must exit 2"
grep -q "unknown benchmark 'nosuch'" "$tmp/err" || fail "unknown benchmark: $(cat "$tmp/err")"
bash "$script" --runs 0 watchdog 2>"$tmp/err"
[ $? = 2 ] || fail "--runs 0 must exit 2"
: >"$tmp/file"
OUT="$tmp/file" bash "$script" watchdog 2>"$tmp/err"
[ $? = 2 ] || fail "OUT naming a file must exit 2"

BUILD="$build" OUT="$tmp/out" bash "$script" --runs 2 watchdog >"$tmp/log" 2>&1 || fail "watchdog: $(cat "$tmp/log")"
f="$tmp/out/watchdog.txt"
[ -f "$f" ] || fail "no $f"
head -1 "$f" | grep -q "^# .*bench/bench_watchdog" || fail "line 1 is not the command: $(head -1 "$f")"
sed -n 2p "$f" | grep -q "^# commit \([0-9a-f]\{7,\}\|unknown\)" || fail "line 2 is not the commit: $(sed -n 2p "$f")"
[ "$(grep -c '^## run [12] of 2; load average before: [0-9]' "$f")" = 2 ] || fail "not two 'before' load lines"
[ "$(grep -c '^## run [12]: [0-9.]* s wall; load average after: [0-9]' "$f")" = 2 ] || fail "not two 'after' lines"
[ "$(grep -c 'BM_ArmDisarm ' "$f")" = 2 ] || fail "not two runs of the benchmark's output"

# A build without the benchmark: the run fails, exit 1, the previous file stays, nothing else is left behind.
mkdir -p "$tmp/fake/cli"
printf '#!/bin/sh\n' >"$tmp/fake/cli/artune"
chmod +x "$tmp/fake/cli/artune"
cp "$f" "$tmp/before"
BUILD="$tmp/fake" OUT="$tmp/out" bash "$script" --runs 1 watchdog >"$tmp/log" 2>&1
[ $? = 1 ] || fail "a failing benchmark must exit 1"
cmp -s "$f" "$tmp/before" || fail "a failing benchmark replaced the previous output"
[ "$(ls -A "$tmp/out")" = "watchdog.txt" ] || fail "left behind: $(ls -A "$tmp/out")"
echo "run_reports: list, errors, output format and failure handling as documented"
