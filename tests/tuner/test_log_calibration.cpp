// artune calibrate --from on the published logs of tests/logs/data: per machine, the NCCL fit on every other
// size of each table lowers the error of the held-out rows by at least half wherever the uncalibrated
// error is above 20 % (issue 27's target), and the overlay it writes loads and makes check agree.

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/calibration/from_logs.hpp"
#include "artune/tuner/log_check.hpp"
#include "tests/logs/log_fixtures.hpp"
#include "tests/test_support.hpp"

using namespace artune;
using artune_test::error_of;

namespace {

std::string data(const std::string& name) { return (artune_test::log_data_dir() / name).string(); }

Topology fixture_topology(const std::string& name) {
  if (name.rfind("data/", 0) == 0) {
    return load_topology((artune_test::log_data_dir().parent_path().parent_path() / "simulator" / name).string());
  }
  return load_topology(name);
}

}  // namespace

TEST_CASE("log_calibration.held_out_error_halves_per_machine") {
  // Every fixture with a topology and a table, grouped by machine.
  std::map<std::string, std::vector<artune_test::LogFixture>> machines;
  for (const auto& f : artune_test::log_fixtures()) {
    if (!f.topology.empty() && f.tables > 0 && f.ranks > 1) machines[f.topology].push_back(f);
  }
  int targeted = 0;
  for (const auto& [topology, fixtures] : machines) {
    INFO("machine ", topology);
    std::vector<std::vector<logs::TestRun>> tables;
    std::size_t rows = 0;
    for (const auto& f : fixtures) {
      tables.push_back(logs::read_nccl_tests(data(f.file)));
      for (const auto& r : tables.back()) rows += r.rows.size();
    }
    if (rows < 8) {
      MESSAGE(topology, ": ", rows, " rows, too few to fit and validate");
      continue;
    }
    std::vector<LoggedRun> runs;
    for (std::size_t i = 0; i < fixtures.size(); ++i) {
      for (const auto& r : tables[i]) runs.push_back({&r, nullptr, fixtures[i].spec});
    }
    const Topology topo = fixture_topology(topology);
    const LogCalibration c = calibrate_from_logs(topo, runs, CheckOptions{});
    MESSAGE(fmt::format("{}: {} rows, held-out MAPE {:.1f}% -> {:.1f}%, fitted {:.1f}% -> {:.1f}%", topology,
                        c.rows.size(), 100 * c.mape_held_before, 100 * c.mape_held_after, 100 * c.mape_fit_before,
                        100 * c.mape_fit_after));
    int held = 0;
    for (const auto& r : c.rows) held += r.held_out ? 1 : 0;
    CHECK(held >= 2);
    CHECK(c.rows.size() - static_cast<std::size_t>(held) >= 2);
    // The fit never leaves its own rows worse than it found them (its objective: RMS of relative errors).
    CHECK(c.fit.rms_rel_after <= c.fit.rms_rel_before + 1e-12);
    if (c.mape_held_before > 0.20) {
      ++targeted;
      CHECK(c.mape_held_after <= 0.5 * c.mape_held_before);
    }
  }
  CHECK(targeted >= 1);
}

TEST_CASE("log_calibration.overlay_loads_and_check_agrees") {
  const auto runs = logs::read_nccl_tests(data("a3mega-2x8-h100-all_reduce.log"));
  const Topology topo = fixture_topology("data/2xa3mega-h100.json");
  const LogCalibration c = calibrate_from_logs(topo, {{&runs[0], nullptr, ""}}, CheckOptions{});
  CheckOptions calibrated;
  calibrated.model.apply_overlay(c.overlay, "fit");
  const CheckReport before = check_runs(topo, runs, nullptr, CheckOptions{});
  const CheckReport after = check_runs(topo, runs, nullptr, calibrated);
  CHECK(after.flagged() < before.flagged());
  // The fitted parameters are the network's (this cluster's NICs), reported with their start values.
  bool network = false;
  for (const auto& p : c.fit.parameters) network = network || p.rfind("links.network.", 0) == 0;
  CHECK(network);
  const nlohmann::json j = c.to_json();
  CHECK(j["rows"].size() == c.rows.size());
  CHECK(j["mape"]["held_out"]["after"].get<double>() == doctest::Approx(c.mape_held_after));
}

TEST_CASE("log_calibration.too_few_rows") {
  const auto runs = logs::read_nccl_tests(data("nccl-tests194-h100-pcie-pair-excerpt.log"));
  // Two rows: one to fit, one held out.
  CHECK(error_of([&] { calibrate_from_logs(load_topology("uniform:2"), {{&runs[0], nullptr, ""}}, CheckOptions{}); })
            .find("at least 2") != std::string::npos);
}
