#!/bin/sh
# A test this build cannot run: prints why (its arguments) and exits 77, which Meson counts as skipped, so that
# the test still appears in every summary instead of silently missing.
echo "skipped: $*"
exit 77
