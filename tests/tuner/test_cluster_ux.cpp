// Cluster mode without surprises, under mpirun with 2-3 small processes:
// GPU-less hosts without -t are refused (never a silent dgx1-v100), the cpu
// backend under mpirun is refused, and a wrong rank count for `run` ends with
// one line and no table header on every rank. Each command runs under
// `timeout` as a safety net.

#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.hpp"

namespace {

using Result = artune_test::CliResult;
using artune_test::count_of;

// `mpirun -np NP artune ARGS` with stdout and stderr together, under a hard 120 s cap.
Result mpirun(int np, const std::string& args) {
  return artune_test::run_shell(
      "env OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -s KILL "
      "120 "
      "mpirun -np " +
      std::to_string(np) + " --oversubscribe " + artune_test::artune_bin() + " " + args + " 2>&1");
}

// Open MPI's MPI_Abort banner ("MPI_ABORT was invoked on rank 0 …"): the ranks finalise instead. (mpirun still
// says that a process returned a non-zero status: the command's status is 2.)
void check_no_abort_banner(const std::string& out) { CHECK(out.find("MPI_ABORT") == std::string::npos); }

bool this_host_has_gpus() {
  const Result r =
      artune_test::run_shell(artune_test::shell_quote(artune_test::artune_bin()) + " topo discover --json 2>/dev/null");
  if (r.status != 0) return false;
  const auto doc = nlohmann::json::parse(r.out, nullptr, false);
  return doc.is_object() && doc.value("gpu_count", 0) > 0;
}

}  // namespace

TEST_CASE("cluster_ux.no_gpu_without_t_is_refused") {
  if (this_host_has_gpus()) {
    MESSAGE("this host has GPUs: the GPU-less refusal cannot be exercised here");
    return;
  }
  const Result r = mpirun(2, "autotune -b 4K -e 4K -q");
  INFO(r.out);
  CHECK(r.status == 2);
  // One line, from rank 0, naming the cause and the topology that describes these ranks.
  CHECK(count_of(r.out, "artune: cluster mode: no GPU found on") == 1);
  CHECK(count_of(r.out, "-t uniform:2") == 1);
  CHECK(r.out.find("# decision table") == std::string::npos);
  CHECK(r.out.find("dgx1-v100") == std::string::npos);
  check_no_abort_banner(r.out);
}

TEST_CASE("cluster_ux.cpu_backend_under_mpirun_is_refused") {
  const Result tune = mpirun(2, "autotune -t uniform:2 -b 4K -e 4K --measure cpu -q");
  INFO(tune.out);
  CHECK(tune.status == 2);
  CHECK(count_of(tune.out,
                 "artune: --measure cpu: the cpu backend runs every device as a thread of one process and "
                 "ignores the 2 MPI ranks; under mpirun use --measure mpi") == 1);
  CHECK(tune.out.find("# decision table") == std::string::npos);
  const Result cal = mpirun(2, "calibrate -t uniform:2 --backend cpu -b 4K -e 16K -q");
  INFO(cal.out);
  CHECK(cal.status == 2);
  CHECK(count_of(cal.out, "artune: --backend cpu: the cpu backend runs every device") == 1);
}

TEST_CASE("cluster_ux.wrong_rank_count_before_any_output") {
  const Result r = mpirun(3, "run --backend mpi -t uniform:4 -s xring -b 1K -e 4K -n 1 -w 0");
  INFO(r.out);
  CHECK(r.status == 2);
  CHECK(count_of(r.out,
                 "artune: mpi backend: the plan has 4 ranks but mpirun started 3 processes (use mpirun -np 4)") == 1);
  // Nothing before the error: no table header, no rows.
  CHECK(r.out.find("# artune run") == std::string::npos);
  CHECK(r.out.find("#wrong") == std::string::npos);
  check_no_abort_banner(r.out);
}
