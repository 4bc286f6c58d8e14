// `artune run --backend mpi` end to end: spawns `mpirun -np 8 artune run …`
// and checks exit codes, what rank 0 prints, declared machine indices, and
// that a rank that stops (SIGSTOP) or dies (SIGKILL) mid-run ends the job
// with a clear error instead of a hang. Every command runs under coreutils
// `timeout` as a safety net; the assertions on elapsed time are generous
// bounds that only a hang can exceed.

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/cli_runner.hpp"
#include "tests/test_support.hpp"

namespace {

using Result = artune_test::CliResult;
using artune_test::require_env;

// Environment for a run that ends in an error (a bad flag, wrong results, a stopped or killed rank). In a sanitizer
// build LeakSanitizer is off for it: at exit LSan ptrace-stops every thread of the process, and its tracer crashes
// ("Tracer caught signal 11", "LeakSanitizer has encountered a fatal error") when the process leaves without
// MPI_Finalize while Open MPI's threads are torn down, a sibling rank is SIGSTOPped or mpirun kills the job. The
// same code runs leak-checked in the tests that succeed.
std::string error_run(const std::string& env) {
  if (!artune_test::sanitized_build()) return env;
  return env + " ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\"";
}

// mpirun -np 8 [machine wrapper] artune run --backend mpi ARGS, with a hard 120 s cap.
Result mpirun_artune(const std::string& env, const std::string& args, int gpus_per_machine = 0, int ranks = 8) {
  const std::string bin = require_env("ARTUNE_BIN");
  const std::string wrapper =
      gpus_per_machine > 0 ? "sh " + require_env("ARTUNE_SOURCE_ROOT") + "/tests/executor/machine_index.sh " : "";
  const std::string per =
      gpus_per_machine > 0 ? "ARTUNE_TEST_GPUS_PER_MACHINE=" + std::to_string(gpus_per_machine) + " " : "";
  return artune_test::run_shell(
      "env OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + per + env +
      " timeout -s KILL 120 mpirun -np " + std::to_string(ranks) + " --oversubscribe " + wrapper + bin +
      " run --backend mpi " + args + " 2>&1");
}

using artune_test::count_of;

// True when no process runs with DIR/NAME on its command line (the pattern's bracket keeps pgrep's own shell
// from matching itself) within 10 s of the job's end: a rank that mpirun has just killed may still be exiting
// (slowly under a sanitizer); one that is still there after that is an orphan.
bool no_process_with(const artune_test::ScratchDir& dir, const std::string& name) {
  const std::string pattern = dir.path().filename().string() + "/[" + name.substr(0, 1) + "]" + name.substr(1);
  for (int i = 0; i < 100; ++i) {
    if (artune_test::run_shell("pgrep -f " + artune_test::shell_quote(pattern)).out.empty()) return true;
    ::usleep(100000);
  }
  return false;
}

// DIR/NAME holding the uniform:4 topology as JSON, for a fault test: the file name, unique to the test, is how
// no_process_with() finds leftover ranks by their command line.
std::string fault_topology(const artune_test::ScratchDir& dir, const std::string& name) {
  const std::string topo = dir.file(name);
  REQUIRE(artune_test::run_shell(artune_test::shell_quote(require_env("ARTUNE_BIN")) +
                                 " topo show -t uniform:4 --json > " + artune_test::shell_quote(topo))
              .status == 0);
  return topo;
}

// Table rows (not comments) whose type and redop columns are `type` and `op` and whose #wrong is 0.
int clean_rows(const std::string& text, const std::string& type, const std::string& op) {
  int n = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.size() == 8 && w[0] != "#" && w[2] == type && w[3] == op && w[7] == "0") ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("mpi_cli.only_rank_0_prints") {
  const Result r = mpirun_artune("", "-t uniform:8 -s rechd -b 1K -e 64K -f 8 -n 2 -w 1 -d bfloat16 -o max");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(count_of(r.out, "# artune run:") == 1);
  CHECK(clean_rows(r.out, "bfloat16", "max") == 3);
  CHECK(count_of(r.out, "# Avg bus bandwidth :") == 1);
  CHECK(count_of(r.out, "# Out of bounds values : 0 OK") == 1);
}

TEST_CASE("mpi_cli.json") {
  const Result r = mpirun_artune("", "-t uniform:8 -s 2d -b 4K -e 4K -n 1 -w 0 --json");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(count_of(r.out, "\"backend\": \"mpi\"") == 1);
  CHECK(count_of(r.out, "\"wrong\": 0") == 2);  // the row and the total
}

TEST_CASE("mpi_cli.declared_machines_2x4_and_4x2") {
  Result r = mpirun_artune("", "-t uniform:2x4 -s 2d -b 1K -e 16K -f 4 -n 2 -w 1 -o avg -d half", 4);
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(clean_rows(r.out, "half", "avg") == 3);
  r = mpirun_artune("", "-t uniform:4x2 -s nccl/xring -b 1K -e 1K -n 2 -w 1", 2);
  INFO(r.out);
  CHECK(r.status == 0);
  r = mpirun_artune("", "-t uniform:4x2 -s pscpu/pscpu -b 3K -e 3K -n 2 -w 1 -d int64 -o prod", 2);
  INFO(r.out);
  CHECK(r.status == 0);
}

TEST_CASE("mpi_cli.wrong_machine_index_is_bad_input") {
  const Result r = mpirun_artune(error_run("ARTUNE_MACHINE_INDEX=0"), "-t uniform:2x4 -s 2d -b 1K -e 1K -n 1 -w 0");
  INFO(r.out);
  CHECK(r.status == 2);
  CHECK(count_of(r.out, "rank 4: mpi backend: this rank declares machine 0") == 1);
  CHECK(count_of(r.out, "on machine 1") == 1);
}

TEST_CASE("mpi_cli.wrong_process_count_is_bad_input") {
  const Result r = mpirun_artune(error_run(""), "-t uniform:4 -s xring -b 1K -e 1K");
  INFO(r.out);
  CHECK(r.status == 2);
  CHECK(count_of(r.out, "artune: mpi backend: the plan has 4 ranks but mpirun started 8 processes") == 1);
}

TEST_CASE("mpi_cli.wrong_results_exit_1") {
  // Run 4 is the check run (-w 1 -n 2 -c 1): rank 5 corrupts one input element there.
  const Result r =
      mpirun_artune(error_run("ARTUNE_TEST_FAULT=flip:rank5:iter4"), "-t uniform:8 -s xring -b 4K -e 4K -n 2 -w 1");
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(count_of(r.out, "# Out of bounds values : 8 FAILED") == 1);  // that element on all 8 ranks
  CHECK(count_of(r.out, "artune: run: 8 wrong elements") == 1);
}

TEST_CASE("mpi_cli.stopped_rank_times_out") {
  const Result r = mpirun_artune(error_run("ARTUNE_TEST_FAULT=stop:rank3:iter2"),
                                 "-t uniform:8 -s xring -b 64K -e 64K -n 5 -w 1 --timeout 3");
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK(r.status != 137);  // ended by the backend's timeout, not by the safety net
  // Only rank 0 reports (the README's promise), once.
  CHECK(count_of(r.out, "mpi backend: no progress for 3 s (a peer stopped or died)") == 1);
  CHECK(count_of(r.out, "artune: rank ") == 0);
  CHECK(r.status == 3);  // rank 0's MPI_Abort carries the timeout's exit status (Open MPI's help text may be lost)
  CHECK(r.seconds < 60);
}

TEST_CASE("mpi_cli.stopped_rank_4_ranks_64M_exit_3_no_orphans") {
  // The issue's case: 4 ranks, 64 MiB x 200 iterations, --timeout 10, rank 2 stops at its 5th run. Every rank
  // ends (exit 3 from the timeout, reported once by rank 0), and no artune process is left behind. The topology
  // file name is unique to this test so that leftover processes can be found by their command line.
  artune_test::ScratchDir dir("artune-fault");
  const std::string topo = fault_topology(dir, "fault-stop-topology.json");
  const Result r = mpirun_artune(error_run("ARTUNE_TEST_FAULT=stop:rank2:iter5"),
                                 "-t " + topo + " -s xring -b 64M -e 64M -n 200 -w 1 --timeout 10", 0, 4);
  INFO(r.out);
  CHECK(r.status == 3);
  CHECK(count_of(r.out, "artune: mpi backend: no progress for 10 s (a peer stopped or died)") == 1);
  CHECK(r.seconds < 60);  // a hang would reach the 120 s safety net
  CHECK(no_process_with(dir, "fault-stop-topology.json"));
}

TEST_CASE("mpi_cli.stopped_rank_0_survivors_report_exit_3_no_orphans") {
  // The survivors' own path: rank 0 stops (SIGSTOP) at its 5th run, so mpirun keeps the job and no rank 0
  // reports. Every other rank's watchdog gives up after --timeout, waits the 3 s that rank 0 would take to
  // announce its report, then reports itself ("artune: rank R: ... no progress ...") and ends the job with
  // exit 3; mpirun then kills the stopped rank, and no artune process is left behind.
  artune_test::ScratchDir dir("artune-fault");
  const std::string topo = fault_topology(dir, "fault-stop0-topology.json");
  const Result r = mpirun_artune(error_run("ARTUNE_TEST_FAULT=stop:rank0:iter5"),
                                 "-t " + topo + " -s xring -b 64M -e 64M -n 200 -w 1 --timeout 10", 0, 4);
  INFO(r.out);
  CHECK(r.status == 3);
  // One line per survivor that got to speak before the first one's MPI_Abort ended the job (1 to 3), each
  // the watchdog's, none from rank 0.
  const int lines = count_of(r.out, "artune: rank ");
  CHECK(lines >= 1);
  CHECK(lines <= 3);
  CHECK(count_of(r.out, ": mpi backend: no progress for 10 s (a peer stopped or died)") == lines);
  CHECK(count_of(r.out, "(rank 0 did not report within 3 s)") == lines);
  CHECK(count_of(r.out, "artune: rank 0:") == 0);
  CHECK(count_of(r.out, "artune: mpi backend:") == 0);
  CHECK(r.seconds < 60);  // a hang would reach the 120 s safety net
  CHECK(no_process_with(dir, "fault-stop0-topology.json"));
}

TEST_CASE("mpi_cli.killed_rank_4_ranks_64M_no_orphans") {
  // Rank 2 dies (SIGKILL) mid-run. Open MPI's mpirun notices at once, names the rank and ends the others (its
  // own exit status, 137, is mpirun's: the launcher, not artune, decides it for a rank killed by a signal).
  artune_test::ScratchDir dir("artune-fault");
  const std::string topo = fault_topology(dir, "fault-kill-topology.json");
  const Result r = mpirun_artune(error_run("ARTUNE_TEST_FAULT=kill:rank2:iter5"),
                                 "-t " + topo + " -s xring -b 64M -e 64M -n 200 -w 1 --timeout 10", 0, 4);
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK(count_of(r.out, "process rank 2") + count_of(r.out, "no progress") >= 1);
  CHECK(r.seconds < 60);
  CHECK(no_process_with(dir, "fault-kill-topology.json"));
}

TEST_CASE("mpi_cli.killed_rank_ends_the_job") {
  const Result r = mpirun_artune(error_run("ARTUNE_TEST_FAULT=kill:rank6:iter3"),
                                 "-t uniform:8 -s rechd -b 64K -e 64K -n 5 -w 1 --timeout 3");
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK((count_of(r.out, "rank 6") >= 1 || count_of(r.out, "no progress") >= 1));
  CHECK(r.seconds < 60);
}
