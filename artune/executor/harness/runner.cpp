#include "artune/executor/harness/runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <new>
#include <chrono>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/executor/harness/verification.hpp"

namespace artune {

double RunReport::avg_busbw_gbps() const {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const RunRow& r : rows) sum += r.busbw_gbps;
  return sum / static_cast<double>(rows.size());
}

std::int64_t RunReport::total_wrong() const {
  std::int64_t sum = 0;
  for (const RunRow& r : rows) sum += std::max<std::int64_t>(r.wrong, 0);
  return sum;
}

double allreduce_bus_factor(int ranks) noexcept { return ranks <= 1 ? 0.0 : 2.0 * (ranks - 1) / ranks; }

RunRow run_plan(HarnessBackend& backend, const Plan& plan, const SweepConfig& config) {
  if (config.iterations < 0 || config.warmup < 0 || config.check < 0) {
    throw InvalidInput("run: iterations, warm-up and check counts must be ≥ 0");
  }
  if (config.iterations > kMaxIterations) {
    throw InvalidInput(
        fmt::format("{}: {} exceeds the maximum of {}", parameter("iterations"), config.iterations, kMaxIterations));
  }
  if (config.warmup > kMaxIterations) {
    throw InvalidInput(
        fmt::format("{}: {} exceeds the maximum of {}", parameter("warmup"), config.warmup, kMaxIterations));
  }
  if (config.check > kMaxIterations) {
    throw InvalidInput(
        fmt::format("{}: {} exceeds the maximum of {}", parameter("check"), config.check, kMaxIterations));
  }
  if (config.check > 0) require_verifiable(config.type, config.op, plan.ranks());
  RunRow row;
  row.count = plan.count;
  row.bytes = static_cast<std::uint64_t>(plan.count) * element_size(config.type);
  row.type = config.type;
  row.op = config.op;
  row.ranks = plan.ranks();
  row.plan = plan.spec;
  row.collective = plan.collective;

  try {
    backend.prepare(plan, config.type, config.op);
    backend.fill_inputs(0);
  } catch (const std::bad_alloc&) {
    // Exit 3 with the size that was asked for, not a bare "out of memory".
    throw BackendFailure(fmt::format("{} backend: out of memory preparing a {}-byte run ({} elements on {} ranks)",
                                     backend.name(), row.bytes, plan.count, plan.ranks()));
  }
  if (config.back_to_back) {
    if (config.warmup > 0) backend.run_back_to_back(config.warmup);
  } else {
    for (int i = 0; i < config.warmup; ++i) backend.run();
  }

  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(config.iterations));
  if (config.back_to_back && config.iterations > 0) {
    // One figure: all iterations in flight together, one wait, the slowest rank's total over n.
    const auto t0 = std::chrono::steady_clock::now();
    backend.run_back_to_back(config.iterations);
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(backend.all_max(std::chrono::duration<double, std::micro>(t1 - t0).count()) / config.iterations);
  }
  for (int i = 0; i < (config.back_to_back ? 0 : config.iterations); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    backend.run();
    const auto t1 = std::chrono::steady_clock::now();
    // The iteration took as long as its slowest rank; the exchange also re-aligns ranks.
    times.push_back(backend.all_max(std::chrono::duration<double, std::micro>(t1 - t0).count()));
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    const std::size_t mid = times.size() / 2;
    row.time_us = times.size() % 2 == 1 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
    // Nearest-rank quartiles: with autotune's 5 iterations, the 2nd and 4th fastest.
    if (times.size() >= 2 && row.time_us > 0) {
      const double q1 = times[times.size() / 4];
      const double q3 = times[(3 * times.size()) / 4 < times.size() ? (3 * times.size()) / 4 : times.size() - 1];
      row.spread_pct = 100.0 * (q3 - q1) / row.time_us;
    }
    if (row.time_us > 0) {
      row.algbw_gbps = static_cast<double>(row.bytes) / (row.time_us * 1e-6) / 1e9;
      row.busbw_gbps = row.algbw_gbps * bus_factor(plan.collective, row.ranks);
    }
  }

  if (config.check > 0) {
    double wrong = 0;
    for (int c = 0; c < config.check; ++c) {
      // Fresh inputs per checked iteration (iteration 0 fed the timed runs).
      const int iteration = c + 1;
      backend.fill_inputs(iteration);
      backend.run();
      wrong += static_cast<double>(backend.count_wrong(iteration));
    }
    row.wrong = static_cast<std::int64_t>(backend.all_sum(wrong));
  }
  return row;
}

std::vector<RunRow> run_sweep(HarnessBackend& backend, const PlanFactory& make_plan, const SweepConfig& config,
                              const std::function<void(const RunRow&)>& on_row,
                              const std::function<void()>& on_checked) {
  std::vector<RunRow> rows;
  const auto elem = static_cast<std::uint64_t>(element_size(config.type));
  // The largest plan first, checked but not run: a sweep the machine cannot hold is refused before
  // anything is measured (or allocated), not when it reaches its last size.
  std::int64_t largest = 0;
  for (std::uint64_t bytes : config.sizes) {
    largest = std::max(largest, static_cast<std::int64_t>(std::max<std::uint64_t>(bytes / elem, 1)));
  }
  std::optional<Plan> largest_plan;
  if (largest > 0) {
    largest_plan = make_plan(largest);
    backend.check_plan(*largest_plan, config.type);
  }
  if (on_checked) on_checked();
  std::int64_t previous = -1;
  for (std::uint64_t bytes : config.sizes) {
    const auto count = static_cast<std::int64_t>(std::max<std::uint64_t>(bytes / elem, 1));
    if (count == previous) continue;
    previous = count;
    const Plan plan = count == largest && largest_plan ? std::move(*largest_plan) : make_plan(count);
    if (count == largest) largest_plan.reset();
    rows.push_back(run_plan(backend, plan, config));
    if (on_row) on_row(rows.back());
  }
  return rows;
}

PlanFactory spec_plan_factory(const Topology& topo, const std::string& spec, const BuildOptions& base) {
  const AllReduceSpec parsed = parse_collective_spec(base.collective, spec);
  return [&topo, parsed, base](std::int64_t count) {
    BuildOptions options = base;
    options.count = count;
    Plan plan = build_plan(topo, parsed, options);
    verify_or_throw(plan);
    return plan;
  };
}

void print_run_header(std::FILE* out, const RunReport& report) {
  const Collective c = report.rows.empty() ? report.collective : report.rows.front().collective;
  fmt::print(
      out, "# artune run: topology {}, {}spec {}, backend {}, {} {}, -n {} -w {} -c {}{}\n", report.topology,
      c == Collective::kAllReduce ? ""
                                  : fmt::format("collective {} ({}_perf), ", collective_flag_name(c), to_string(c)),
      report.spec, report.backend, to_string(report.config.type), to_string(report.config.op), report.config.iterations,
      report.config.warmup, report.config.check, report.config.back_to_back ? ", back to back (time = total / n)" : "");
  fmt::print(out, "#\n");
  fmt::print(out, "# {:>10} {:>12} {:>8} {:>6} {:>10} {:>11} {:>11} {:>7}{}\n", "size", "count", "type", "redop",
             "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", report.plan_column ? "  plan" : "");
  std::fflush(out);
}

void print_run_row(std::FILE* out, const RunRow& row, bool plan_column) {
  const std::string wrong = row.wrong < 0 ? "N/A" : std::to_string(row.wrong);
  // nccl-tests prints "none" as the all-gather's redop: it reduces nothing.
  const std::string_view redop = row.collective == Collective::kAllGather ? "none" : to_string(row.op);
  fmt::print(out, "  {:>10} {:>12} {:>8} {:>6} {:>10.2f} {:>11.3f} {:>11.3f} {:>7}{}\n", row.bytes, row.count,
             to_string(row.type), redop, row.time_us, row.algbw_gbps, row.busbw_gbps, wrong,
             plan_column ? "  " + row.plan : std::string());
  std::fflush(out);
}

void print_run_footer(std::FILE* out, const RunReport& report) {
  const bool checked = report.config.check > 0;
  const std::int64_t wrong = report.total_wrong();
  if (checked) fmt::print(out, "# Out of bounds values : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  fmt::print(out, "# Avg bus bandwidth : {:.4f}\n", report.avg_busbw_gbps());
  fmt::print(out, "#\n");
  std::fflush(out);
}

nlohmann::json run_report_to_json(const RunReport& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RunRow& r : report.rows) {
    rows.push_back({{"size", r.bytes},
                    {"count", r.count},
                    {"type", to_string(r.type)},
                    {"redop", r.collective == Collective::kAllGather ? "none" : to_string(r.op)},
                    {"time_us", r.time_us},
                    {"algbw_gbps", r.algbw_gbps},
                    {"busbw_gbps", r.busbw_gbps},
                    {"wrong", r.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.wrong)},
                    {"spread_pct", r.spread_pct},
                    {"plan", r.plan}});
  }
  return {{"topology", report.topology},
          {"collective", collective_flag_name(report.collective)},
          {"spec", report.spec},
          {"backend", report.backend},
          {"ranks", report.rows.empty() ? 0 : report.rows.front().ranks},
          {"type", to_string(report.config.type)},
          {"op", to_string(report.config.op)},
          {"iterations", report.config.iterations},
          {"warmup", report.config.warmup},
          {"check", report.config.check},
          {"timing", report.config.back_to_back ? "back_to_back" : "per_iteration"},
          {"rows", rows},
          {"avg_busbw_gbps", report.avg_busbw_gbps()},
          {"wrong", report.config.check > 0 ? nlohmann::json(report.total_wrong()) : nlohmann::json(nullptr)}};
}

}  // namespace artune
