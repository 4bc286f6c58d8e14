#pragma once
// The nccl-tests-style runner: for every size of a sweep, build the plan,
// prepare the backend, warm up, time iterations (median, steady clock, the
// slowest rank per iteration), check results (#wrong summed over ranks) and
// report algbw and busbw with nccl-tests' definitions
// (algbw = bytes / time, busbw = algbw · 2(n−1)/n).

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/core/types.hpp"
#include "artune/executor/harness/harness.hpp"

namespace artune {

/// The most timed, warm-up or checked iterations per size (-n, -w, -c): a million runs of even the
/// smallest plan take minutes, and the timed ones keep a time each for the median.
inline constexpr int kMaxIterations = 1'000'000;

/// Makes the plan for a message of `count` elements (already verified).
using PlanFactory = std::function<Plan(std::int64_t count)>;

/// What to run.
struct SweepConfig {
  std::vector<std::uint64_t> sizes;  ///< message sizes in bytes (count = size / element size, at least 1)
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int iterations = 20;  ///< timed iterations (-n)
  int warmup = 5;       ///< untimed iterations first (-w)
  int check = 1;        ///< checked iterations (-c); 0 = no check
  /// Time the -n iterations issued back to back with one wait (nccl-tests' way; time = total / n, no
  /// spread) instead of each iteration alone (median of n, each ending in a wait).
  bool back_to_back = false;
};

/// One line of the table.
struct RunRow {
  std::uint64_t bytes = 0;  ///< count · element size
  std::int64_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int ranks = 0;
  double time_us = 0;  ///< median over timed iterations (0 when none)
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::int64_t wrong = -1;  ///< mismatching elements over all ranks; -1 when unchecked
  double spread_pct = 0;    ///< run-to-run spread: interquartile range of the timed iterations / median, %
  std::string plan;         ///< the plan that ran (Plan::spec; a decision table's label for run --table)
  Collective collective = Collective::kAllReduce;  ///< what the plan computes (busbw factor; all-gather: redop "none")
};

/// What `artune run` prints: the rows plus what produced them.
struct RunReport {
  std::string topology;
  std::string spec;
  std::string backend;
  SweepConfig config;
  std::vector<RunRow> rows;
  bool plan_column = false;                        ///< print each row's plan (run --table: the table's pick per size)
  Collective collective = Collective::kAllReduce;  ///< what the plans compute (header and JSON)
  /// Mean busbw over the rows (nccl-tests' "Avg bus bandwidth").
  double avg_busbw_gbps() const;
  /// Sum of #wrong over the checked rows.
  std::int64_t total_wrong() const;
};

/// nccl-tests bus bandwidth factor of all-reduce: 2(n−1)/n (0 for one rank); other collectives: bus_factor().
double allreduce_bus_factor(int ranks) noexcept;

/// Prepares, warms up, times and checks one plan on `backend`.
RunRow run_plan(HarnessBackend& backend, const Plan& plan, const SweepConfig& config);

/// Runs every size of `config`; `on_row` (optional) sees each row as soon as it is measured, and `on_checked`
/// (optional) is called once the sweep's largest plan passed the backend's up-front checks, before anything runs
/// (`artune run` prints its header there, so a refused sweep prints only its error).
/// Sizes that round to the element count of the previous size are skipped.
std::vector<RunRow> run_sweep(HarnessBackend& backend, const PlanFactory& make_plan, const SweepConfig& config,
                              const std::function<void(const RunRow&)>& on_row = {},
                              const std::function<void()>& on_checked = {});

/// Plans from a spec on a topology: build_plan with `base` (count and reduce op filled in per call)
/// followed by the static verifier (InvalidInput with its first problem).
PlanFactory spec_plan_factory(const Topology& topo, const std::string& spec, const BuildOptions& base);

/// The table header (two comment lines naming the columns, nccl-tests style).
void print_run_header(std::FILE* out, const RunReport& report);
/// One table row; `plan_column` appends the plan that ran (as the header does for report.plan_column).
void print_run_row(std::FILE* out, const RunRow& row, bool plan_column = false);
/// The footer: "# Out of bounds values" style #wrong summary and "# Avg bus bandwidth : X".
void print_run_footer(std::FILE* out, const RunReport& report);
/// The whole report as JSON ({"topology","spec","backend","ranks","rows":[…],"avg_busbw_gbps","wrong"}).
nlohmann::json run_report_to_json(const RunReport& report);

}  // namespace artune
