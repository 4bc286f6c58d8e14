#!/bin/sh
# Runs one MPI rank on its own, for the fault tests (test_mpi_cli.cpp): its output goes to DIR/rank-R.out (not
# through mpirun, so the rank's own report survives whatever happens to the launcher), and DIR/rank-R gets
# "STATUS SECONDS" when it ends (its exit status, 128 + signal when a signal ended it, and the end time in
# seconds since the epoch).
# Usage (under mpirun): ARTUNE_TEST_STATUS_DIR=DIR sh rank_status.sh PROGRAM ARGS...
dir=${ARTUNE_TEST_STATUS_DIR:?set ARTUNE_TEST_STATUS_DIR}
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:?not started by mpirun}}
"$@" >"$dir/rank-$rank.out" 2>&1
status=$?
echo "$status $(date +%s.%N)" >"$dir/rank-$rank.tmp" && mv "$dir/rank-$rank.tmp" "$dir/rank-$rank"
exit "$status"
