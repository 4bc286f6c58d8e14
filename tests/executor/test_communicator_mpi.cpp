// Communicator::create_mpi end to end: spawns `mpirun -np 4 communicator_mpi_prog …` (correct results on
// caller buffers; a rank that stops or dies ends the others' call with an error within the timeout, then
// the job). Every command runs under coreutils `timeout` as a safety net.

#include <doctest/doctest.h>

#include <string>

#include "tests/cli_runner.hpp"

namespace {

artune_test::CliResult mpirun_prog(const std::string& env, const std::string& mode) {
  const std::string prog = artune_test::require_env("ARTUNE_COMM_MPI_PROG");
  // LeakSanitizer cannot ptrace-stop the threads of a rank whose sibling is stopped or being killed (see
  // test_mpi_cli.cpp): off for the fault runs of a sanitizer build only.
  const std::string lsan = artune_test::sanitized_build() && mode == "fault"
                               ? " ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\""
                               : "";
  return artune_test::run_shell(
      "env OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + env + lsan +
      " timeout -s KILL 240 mpirun -np 4 --oversubscribe " + prog + " " + mode + " 2>&1");
}

using artune_test::count_of;

}  // namespace

TEST_CASE("communicator_mpi.caller_buffers_every_type_and_op") {
  const auto r = mpirun_prog("", "check");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(count_of(r.out, "communicator_mpi: 1120 checks per rank, 0 wrong") == 1);
}

TEST_CASE("communicator_mpi.allgather_and_reducescatter_every_type_and_op") {
  const auto r = mpirun_prog("", "collectives");
  INFO(r.out);
  CHECK(r.status == 0);
  // 7 types x 3 counts x 2 placements all-gathers, and reduce-scatters of every op verifiable over 4 ranks.
  CHECK(count_of(r.out, "communicator_mpi collectives: ") == 1);
  CHECK(count_of(r.out, " checks per rank, 0 wrong") == 1);
}

TEST_CASE("communicator_mpi.asynchronous_calls_in_order") {
  const auto r = mpirun_prog("", "async");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(count_of(r.out, "communicator_mpi async: 0 wrong") == 1);
}

TEST_CASE("communicator_mpi.stopped_rank_ends_the_call_with_a_timeout") {
  const auto r = mpirun_prog("ARTUNE_TEST_FAULT=stop:rank2:iter3", "fault");
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK(r.status != 137);  // ended by the communicator's timeout, not by the safety net
  CHECK(count_of(r.out, "caught Timeout: mpi backend: no progress for 3 s (a peer stopped or died)") >= 1);
  CHECK(count_of(r.out, "no error") == 0);
  // (Open MPI's "MPI_ABORT was invoked" banner is not checked: mpirun drops it when show_help runs out of
  // resources on a loaded machine.)
  CHECK(r.seconds < 120);
}

TEST_CASE("communicator_mpi.killed_rank_ends_the_job") {
  // mpirun ends the job as soon as a rank dies (the status is the killed rank's); no survivor hangs.
  const auto r = mpirun_prog("ARTUNE_TEST_FAULT=kill:rank1:iter2", "fault");
  INFO(r.out);
  CHECK(r.status != 0);
  // Open MPI's banner ("exited on signal 9") is not checked: mpirun may drop it on a loaded machine. The
  // elapsed-time check tells the job's own end from the safety net's kill.
  CHECK(count_of(r.out, "rank 1: no error") == 0);
  CHECK(r.seconds < 120);
}
