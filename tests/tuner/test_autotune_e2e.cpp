// End to end through the built binary: `artune autotune --measure cpu` on
// uniform:4 writes a measured decision table and a report; `artune run --table`
// runs the table's picks with #wrong = 0; another topology is refused.

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "tests/cli_runner.hpp"
#include "tests/test_support.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/decision_table.hpp"

namespace fs = std::filesystem;

namespace {

using Result = artune_test::CliResult;
using artune_test::artune_bin;
using artune_test::run_shell;  // stdout only; commands add 2>&1 where they want stderr too

}  // namespace

TEST_CASE("autotune.e2e_measure_cpu_then_run_table") {
  const artune_test::ScratchDir scratch("artune-e2e");
  const fs::path& dir = scratch.path();
  const std::string table = (dir / "table.json").string();
  const std::string report = (dir / "report").string();

  const Result tune = run_shell(artune_bin() +
                                " autotune -t uniform:4 -b 4K -e 64K -f 4 --measure cpu --top 2 --iters 3 --warmup 1"
                                " --segments 1,2 --max-cycles 2 -q --out " +
                                table + " --report " + report + " 2>&1");
  INFO(tune.out);
  REQUIRE(tune.status == 0);
  CHECK(tune.out.find("measured on cpu") != std::string::npos);
  // Every time column says whether it was simulated or measured; no NCCL baseline on the cpu profile.
  CHECK(tune.out.find("pred(us)") != std::string::npos);
  CHECK(tune.out.find("meas(us)") != std::string::npos);
  CHECK(tune.out.find("# no NCCL baseline") != std::string::npos);
  CHECK(tune.out.find("TF choose_the_best") == std::string::npos);  // only with --tf

  const artune::Topology topo = artune::load_topology("uniform:4");
  const artune::DecisionTable t = artune::load_decision_table(table, topo);
  CHECK(t.measured_backend == "cpu");
  int points = 0;
  for (const auto& r : t.ranges) {
    for (const auto& p : r.points) {
      ++points;
      REQUIRE(p.measured.has_value());
      CHECK(p.measured->wrong == 0);
      CHECK(p.measured->figures.time_us > 0);
      CHECK(p.predicted.time_us > 0);
    }
  }
  CHECK(points == 3);
  CHECK(fs::exists(fs::path(report) / "REPORT.md"));
  CHECK(fs::exists(fs::path(report) / "results.json"));
  // The measured report: each measurement carries its spread; TF's choose_the_best (nccl on uniform:4, a
  // candidate) is measured beside the top candidates, so its gain compares measured with measured.
  {
    std::ifstream in(fs::path(report) / "REPORT.md");
    const std::string md((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(md.find("| spread |") != std::string::npos);
    CHECK(md.find("| measured |") != std::string::npos);  // the basis column of "gain vs TF"
    for (const auto& r : t.ranges) {
      for (const auto& p : r.points) {
        CHECK(p.measured->spread_pct >= 0);
        REQUIRE(p.tf_measured.has_value());
        CHECK(p.tf_measured->wrong == 0);
      }
    }
  }

  // The table's picks run for real, verified.
  const Result run = run_shell(artune_bin() + " run -t uniform:4 --table " + table +
                               " --backend cpu -b 4K -e 64K -f 4 -n 3 -w 1 --json");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  REQUIRE(doc["rows"].size() == 3);
  for (const auto& row : doc["rows"]) CHECK(row["wrong"] == 0);

  // A table tuned for uniform:4 is refused on uniform:8 with a one-line reason (exit 2).
  const Result refused =
      run_shell(artune_bin() + " run -t uniform:8 --table " + table + " --backend cpu -b 4K -e 4K 2>&1");
  CHECK(refused.status == 2);
  CHECK(refused.out.find("tuned for topology 'uniform:4'") != std::string::npos);
  // A corrupt table is refused too.
  {
    std::ofstream bad(table, std::ios::trunc);
    bad << "{\"schema\": \"artune.decision_table\", \"schema_version\": 1";
  }
  const Result corrupt =
      run_shell(artune_bin() + " run -t uniform:4 --table " + table + " --backend cpu -b 4K -e 4K 2>&1");
  CHECK(corrupt.status == 2);
  CHECK(corrupt.out.find(table + ": line 1, column") != std::string::npos);
  CHECK(corrupt.out.find("malformed JSON") != std::string::npos);
}

TEST_CASE("autotune.vs_nccl_baseline") {
  // Simulator only, dgx1-v100: every point carries NCCL's own choice, and the report compares with it.
  const artune_test::ScratchDir scratch("artune-vs-nccl");
  const fs::path& dir = scratch.path();
  const std::string table = (dir / "table.json").string();
  const std::string report = (dir / "report").string();
  const Result tune = run_shell(artune_bin() + " autotune -t dgx1-v100 -b 1M -e 1G -f 1024 --max-cycles 2 -q -o " +
                                table + " --report " + report + " 2>&1");
  INFO(tune.out);
  REQUIRE(tune.status == 0);
  const artune::DecisionTable t = artune::load_decision_table(table, artune::load_topology("dgx1-v100"));
  for (const auto& r : t.ranges) {
    for (const auto& p : r.points) {
      CHECK(p.nccl_predicted.time_us > 0);
      // NCCL's own choice is a candidate, so no pick is slower than it.
      CHECK(p.predicted.time_us <= p.nccl_predicted.time_us);
    }
  }
  std::ifstream md(fs::path(report) / "REPORT.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  CHECK(text.find("| vs NCCL |") != std::string::npos);
  CHECK(text.find("NCCL (us)") != std::string::npos);
}
