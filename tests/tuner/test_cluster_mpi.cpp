// Cluster mode: `mpirun -np 4 artune autotune --measure mpi` measures with all
// ranks, rank 0 alone prints and writes the table, and the table then runs
// under mpirun with #wrong = 0. Every command runs under `timeout` as a safety net.

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "tests/cli_runner.hpp"
#include "tests/test_support.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/decision_table.hpp"

namespace fs = std::filesystem;

namespace {

using Result = artune_test::CliResult;

// `mpirun -np NP artune ARGS` with stdout and stderr together, under a hard 180 s cap.
Result mpirun(int np, const std::string& args) {
  return artune_test::run_shell(
      "env OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -s KILL "
      "180 "
      "mpirun -np " +
      std::to_string(np) + " --oversubscribe " + artune_test::artune_bin() + " " + args + " 2>&1");
}

using artune_test::count_of;

}  // namespace

TEST_CASE("autotune.cluster_mode_mpi") {
  const artune_test::ScratchDir scratch("artune-cluster");
  const fs::path& dir = scratch.path();
  const std::string table = (dir / "table.json").string();
  const Result tune = mpirun(4,
                             "autotune -t uniform:4 -b 4K -e 16K -f 4 --measure mpi --top 2 --iters 2 --warmup 1"
                             " --segments 1 --max-cycles 1 -q --out " +
                                 table);
  INFO(tune.out);
  REQUIRE(tune.status == 0);
  CHECK(count_of(tune.out, "# decision table:") == 1);  // rank 0 alone prints
  const artune::DecisionTable t = artune::load_decision_table(table, artune::load_topology("uniform:4"));
  CHECK(t.measured_backend == "mpi");
  int points = 0;
  for (const auto& r : t.ranges) {
    for (const auto& p : r.points) {
      ++points;
      REQUIRE(p.measured.has_value());
      CHECK(p.measured->wrong == 0);
    }
  }
  CHECK(points == 2);
  const Result run = mpirun(4, "run --backend mpi -t uniform:4 --table " + table + " -b 4K -e 16K -f 4 -n 2 -w 1");
  INFO(run.out);
  CHECK(run.status == 0);
  CHECK(count_of(run.out, "# Out of bounds values : 0 OK") == 1);
}
