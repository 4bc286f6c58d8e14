// `artune check` through the built binary: the table and its exit status (0 every row in the band, 1 a row
// outside it), --json, and damaged or missing input as one line naming the file and line (exit 2).

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.hpp"
#include "tests/logs/log_fixtures.hpp"
#include "tests/test_support.hpp"

using artune_test::run_artune;

namespace {

std::string data(const std::string& name) { return (artune_test::log_data_dir() / name).string(); }

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("cli_check.a_normal_run_and_a_slow_one") {
  const auto ok = run_artune({"check", "-t", "dgx-h100", "-s", "nccl.ring", data("together-h100-all_reduce_ring.log")});
  CHECK(ok.status == 0);
  CHECK(ok.out.find("# 0 of 31 rows outside the band") != std::string::npos);
  CHECK(ok.out.find("ring/simple/12") != std::string::npos);
  CHECK(ok.err.empty());
  // Without --spec the model takes NCCL's own choice (NVLS): the large rows are slow and Ring is named.
  const auto slow = run_artune({"check", "-t", "dgx-h100", data("together-h100-all_reduce_ring.log")});
  CHECK(slow.status == 1);
  CHECK(slow.out.find("did ring run?") != std::string::npos);
  CHECK(lines(slow.err) == 1);
  CHECK(slow.err.find("rows outside the model's band") != std::string::npos);
}

TEST_CASE("cli_check.an_info_log_beside_the_table") {
  // A file with NCCL INFO lines only belongs to the tables of the other files (the same job's log).
  const auto r = run_artune({"check", "-t", "dgx-h100", "-s", "nccl.ring", data("together-h100-all_reduce_ring.log"),
                             data("nccl1876-leonardo-info.log")});
  CHECK(r.status == 0);
  CHECK(r.out.find("fell back to the simple order") != std::string::npos);
  // INFO lines alone are nothing to check.
  const auto only = run_artune({"check", "-t", "dgx-h100", data("nccl1876-leonardo-info.log")});
  CHECK(only.status == 2);
  CHECK(only.err.find("no nccl-tests table to check") != std::string::npos);
}

TEST_CASE("cli_check.json_and_several_files") {
  const auto r = run_artune({"check", "-t", "dgx-h100", "-s", "nccl.ring", "--json",
                             data("together-h100-all_gather_ring.log"), data("together-h100-reduce_scatter_ring.log")});
  CHECK(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["runs"].size() == 2);
  CHECK(j["runs"][0]["collective"] == "allgather");
  CHECK(j["runs"][1]["collective"] == "reducescatter");
  CHECK(j["flagged"] == 0);
  CHECK(j["topology"] == "dgx-h100");
}

TEST_CASE("cli_check.bad_input_is_one_line") {
  artune_test::ScratchDir dir("artune-check");
  const std::string text = artune_test::slurp(data("together-h100-all_reduce_ring.log"));
  const std::string cut = (dir.path() / "cut.log").string();
  {
    std::ofstream out(cut, std::ios::binary);
    out << text.substr(0, text.find("    4194304       1048576") + 40);  // ends in the middle of a row
  }
  const auto damaged = run_artune({"check", "-t", "dgx-h100", cut});
  CHECK(damaged.status == 2);
  CHECK(lines(damaged.err) == 1);
  CHECK(damaged.err.find(cut + ":37:") != std::string::npos);
  const auto missing = run_artune({"check", "-t", "dgx-h100", (dir.path() / "none.log").string()});
  CHECK(missing.status == 2);
  CHECK(lines(missing.err) == 1);
  CHECK(missing.err.find("none.log") != std::string::npos);
  const std::string empty = (dir.path() / "empty.log").string();
  { std::ofstream out(empty); out << "nothing to see\n"; }
  const auto nothing = run_artune({"check", "-t", "dgx-h100", empty});
  CHECK(nothing.status == 2);
  CHECK(nothing.err.find("no nccl-tests table") != std::string::npos);
  const auto spec = run_artune({"check", "-t", "dgx-h100", "-s", "nccl.bogus", data("together-h100-all_reduce_ring.log")});
  CHECK(spec.status == 2);
  CHECK(lines(spec.err) == 1);
  CHECK(spec.err.find("--spec") != std::string::npos);
  const auto hosts = run_artune({"check", "-t", "dgx-h100", data("a3mega-2x8-h100-all_reduce.log")});
  CHECK(hosts.status == 2);
  CHECK(hosts.err.find("spans 2 hosts") != std::string::npos);
}

TEST_CASE("cli_check.calibrate_from_logs") {
  artune_test::ScratchDir dir("artune-calib-from");
  const std::string topo = (artune_test::log_data_dir().parent_path().parent_path() / "simulator" / "data" /
                            "2xa3mega-h100.json").string();
  const std::string out = (dir.path() / "a3.json").string();
  const auto r = run_artune({"calibrate", "-t", topo, "--from", data("a3mega-2x8-h100-all_reduce.log"), "--out", out});
  CHECK(r.status == 0);
  CHECK(r.out.find("## NCCL fit") != std::string::npos);
  CHECK(r.out.find("held out") != std::string::npos);
  CHECK(r.out.find("# MAPE, held-out rows: 64.0% before, 19.3% after") != std::string::npos);
  // The overlay it wrote makes check agree with more of the same log.
  const auto before = run_artune({"check", "-t", topo, "--json", data("a3mega-2x8-h100-all_reduce.log")});
  const auto after =
      run_artune({"check", "-t", topo, "--json", "--calibration", out, data("a3mega-2x8-h100-all_reduce.log")});
  CHECK(nlohmann::json::parse(after.out)["flagged"].get<int>() < nlohmann::json::parse(before.out)["flagged"].get<int>());
  // Logs are fitted, not measured: the measurement flags are refused.
  const auto both = run_artune({"calibrate", "-t", topo, "--backend", "nccl", "--from", data("a3mega-2x8-h100-all_reduce.log")});
  CHECK(both.status == 2);
  CHECK(lines(both.err) == 1);
  CHECK(both.err.find("--from") != std::string::npos);
}
