#include "artune/tuner/calibration/from_logs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/simulator/simulator.hpp"

namespace artune {

namespace {

double mape(const std::vector<LogFitRow>& rows, bool held, bool after) {
  double sum = 0;
  int n = 0;
  for (const auto& r : rows) {
    if (r.held_out != held || !(r.measured_us > 0)) continue;
    sum += std::fabs((after ? r.after_us : r.before_us) - r.measured_us) / r.measured_us;
    ++n;
  }
  return n > 0 ? sum / n : 0.0;
}

}  // namespace

LogCalibration calibrate_from_logs(const Topology& topo, const std::vector<LoggedRun>& runs,
                                   const CheckOptions& options) {
  LogCalibration out;
  out.topology = topo.name();
  struct Item {
    RunRowPlan row;
    std::string source;
    bool held = false;
  };
  std::vector<Item> items;
  std::map<std::size_t, int> element_sizes;
  for (const LoggedRun& lr : runs) {
    const logs::TestRun* run = lr.run;
    CheckOptions per_run = options;
    per_run.spec = lr.spec;
    std::vector<RunRowPlan> rows = run_row_plans(topo, *run, lr.info, per_run);
    if (rows.empty()) {
      out.notes.push_back(fmt::format("{}:{}: {} is not a collective NCCL's model covers: left out", run->source,
                                      run->header_line, run->program));
      continue;
    }
    // Held out: every other distinct size of the table (both copies of a size printed twice go the same way).
    std::set<std::uint64_t> sizes;
    for (const auto& r : rows) sizes.insert(r.bytes);
    std::map<std::uint64_t, int> rank;
    int k = 0;
    for (const auto b : sizes) rank[b] = k++;
    for (auto& r : rows) {
      ++element_sizes[r.element_bytes];
      Item it;
      it.held = rank[r.bytes] % 2 == 1;
      it.source = run->source;
      it.row = std::move(r);
      items.push_back(std::move(it));
    }
  }
  if (items.empty()) {
    throw InvalidInput(parameter("from_logs") + ": the logs hold no row of a collective NCCL's model covers");
  }
  // fit_nccl simulates every run with one element size: the rows of the most common one are used.
  const std::size_t es =
      std::max_element(element_sizes.begin(), element_sizes.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  std::vector<TrainingRun> training;
  for (const Item& it : items) {
    if (it.row.element_bytes != es) continue;
    LogFitRow fr;
    fr.source = it.source;
    fr.line = it.row.line;
    fr.bytes = it.row.bytes;
    fr.held_out = it.held;
    fr.measured_us = it.row.measured_us;
    out.rows.push_back(fr);
    // The simulator charges one launch per call; the run's other launches are taken off what it measured.
    const double measured = it.row.measured_us - it.row.launch_extra_us;
    if (!it.held && measured > 0) training.push_back({it.row.plan, fmt::format("{}:{}", it.source, it.row.line), measured});
  }
  if (element_sizes.size() > 1) {
    out.notes.push_back(fmt::format("rows of {}-byte elements only (the most common type); the others left out", es));
  }
  const int held = static_cast<int>(std::count_if(out.rows.begin(), out.rows.end(), [](const auto& r) { return r.held_out; }));
  if (training.size() < 2 || held < 2) {
    throw InvalidInput(fmt::format("{}: {} row(s) to fit and {} to hold out; calibration needs at least 2 of each",
                                   parameter("from_logs"), training.size(), held));
  }
  out.fit = fit_nccl(topo, options.model, training, es);
  std::size_t i = 0;
  for (const Item& it : items) {
    if (it.row.element_bytes != es) continue;
    LogFitRow& fr = out.rows[i++];
    fr.before_us = simulate(it.row.plan, topo, options.model, es).time_us + it.row.launch_extra_us;
    fr.after_us = simulate(it.row.plan, topo, out.fit.model, es).time_us + it.row.launch_extra_us;
  }
  out.mape_fit_before = mape(out.rows, false, false);
  out.mape_fit_after = mape(out.rows, false, true);
  out.mape_held_before = mape(out.rows, true, false);
  out.mape_held_after = mape(out.rows, true, true);
  out.overlay = out.fit.model.to_json();
  // For the tuner plugin: the class whose efficiency scales NCCL's bandwidth on one machine.
  out.overlay["nccl_intra"] = nccl_intra_class(topo, training.front().plan);
  return out;
}

std::string LogCalibration::summary() const {
  std::ostringstream o;
  const auto held = std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.held_out; });
  o << fmt::format("# calibration from logs: {} rows on {} ({} fitted, {} held out: every other size of each table)\n",
                   rows.size(), topology, rows.size() - static_cast<std::size_t>(held), held);
  for (const auto& n : notes) o << "#   " << n << "\n";
  o << "## NCCL fit\n";
  for (const auto& p : fit.parameters) o << p << "\n";
  o << fmt::format("rms relative error over the fitted rows: {:.3f} -> {:.3f} ({} iterations)\n", fit.rms_rel_before,
                   fit.rms_rel_after, fit.iterations);
  o << "## validation\n";
  o << fmt::format("{:<44}  {:>12}  {:>12}  {:>11}  {:>8}  {:>11}  {:>8}  {}\n", "row", "size", "measured(us)",
                   "before(us)", "error", "after(us)", "error", "");
  for (const auto& r : rows) {
    std::string where = fmt::format("{}:{}", r.source, r.line);
    if (where.size() > 44) where = "…" + where.substr(where.size() - 43);
    o << fmt::format("{:<44}  {:>12}  {:>12.2f}  {:>11.2f}  {:>+7.1f}%  {:>11.2f}  {:>+7.1f}%  {}\n", where, r.bytes,
                     r.measured_us, r.before_us, 100 * (r.before_us - r.measured_us) / r.measured_us, r.after_us,
                     100 * (r.after_us - r.measured_us) / r.measured_us, r.held_out ? "held out" : "fitted");
  }
  o << fmt::format("# MAPE, held-out rows: {:.1f}% before, {:.1f}% after; fitted rows: {:.1f}% before, {:.1f}% after\n",
                   100 * mape_held_before, 100 * mape_held_after, 100 * mape_fit_before, 100 * mape_fit_after);
  return o.str();
}

nlohmann::json LogCalibration::to_json() const {
  nlohmann::json j;
  j["topology"] = topology;
  j["parameters"] = fit.parameters;
  j["rms_rel_before"] = fit.rms_rel_before;
  j["rms_rel_after"] = fit.rms_rel_after;
  j["iterations"] = fit.iterations;
  j["notes"] = notes;
  j["mape"] = {{"held_out", {{"before", mape_held_before}, {"after", mape_held_after}}},
               {"fitted", {{"before", mape_fit_before}, {"after", mape_fit_after}}}};
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : rows) {
    rs.push_back({{"source", r.source},
                  {"line", r.line},
                  {"bytes", r.bytes},
                  {"held_out", r.held_out},
                  {"measured_us", r.measured_us},
                  {"before_us", r.before_us},
                  {"after_us", r.after_us}});
  }
  j["rows"] = std::move(rs);
  j["overlay"] = overlay;
  return j;
}

}  // namespace artune
