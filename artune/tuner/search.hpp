#pragma once
// The search: every candidate simulated at every size; optionally the top-K per
// size measured for real through an executor backend, verified, and the measured
// best kept. Produces the decision table.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "artune/core/types.hpp"
#include "artune/executor/harness/harness.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/candidates.hpp"
#include "artune/tuner/decision_table.hpp"

namespace artune {

/// Called as work advances: units done, units in all, and what is being done.
using ProgressFn = std::function<void(std::size_t done, std::size_t total, std::string_view what)>;

/// What to search.
struct SearchOptions {
  std::vector<std::uint64_t> sizes;  ///< bytes, ascending
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  CostModel model = CostModel::defaults();
  std::string calibration;  ///< overlay file the model came from ("" = defaults)
  CandidateOptions candidates;
  /// Generates the candidates (empty = generate_candidates; autotune --target nccl: generate_nccl_candidates).
  std::function<CandidateSet(const Topology&, const CandidateOptions&)> generate;
  /// Keep the previous size's pick while it is within this fraction of the fastest (fewer, longer ranges
  /// instead of flips between near-equal variants); 0 = always the fastest.
  double keep_within = 0.01;
  /// A predicted pick replaces NCCL's own choice (the `nccl` candidate, where it is one) only when it is at least
  /// this fraction faster; otherwise NCCL's choice stays (SizePoint::kept = "min-gain"). < 0: the model's validated
  /// error for the size's regime (default_min_gain); 0: the fastest prediction wins. Measured picks
  /// (measure_top) are chosen on their measurements and their run-to-run spread instead.
  double min_gain = -1;
  ProgressFn progress;  ///< optional; called from one thread at a time
  int jobs = 0;         ///< threads simulating candidates (0 = every core); never changes the result
  /// Simulate every candidate at every size; false: interpolate sizes where a candidate's time is verified
  /// affine (size_sampling.hpp); the figures of picks, runners-up and NCCL are simulated either way.
  bool exhaustive = false;
  /// Without exhaustive: skip a candidate at the sizes at either end of the sweep where its lower bound
  /// (simulate_lower_bound) is already slower than NCCL's plan and TF's pick simulated there (two families, so it
  /// can be neither the pick nor the runner-up). Its figures there are then absent: off when the top K are
  /// measured or a report plots every family.
  bool prune = true;
};

/// The simulated scores of all candidates at one size.
struct SizeScores {
  std::uint64_t bytes = 0;
  std::int64_t count = 0;
  std::vector<std::optional<Figures>> predicted;  ///< per candidate; empty when it cannot build at this size
  std::vector<std::size_t> ranking;               ///< candidate indices, fastest first
  std::optional<Measurement> measured_pick;       ///< filled by measure_top
  std::vector<std::pair<std::size_t, Measurement>> measured;  ///< candidates measured at this size
};

/// Everything the search found (the report writer reads it).
struct SearchResult {
  std::string topology_name;
  CandidateSet set;
  std::vector<SizeScores> sizes;
  std::vector<std::size_t> pick;  ///< per size: the chosen candidate
  std::size_t simulations = 0;    ///< (candidate, size) simulations run
  std::size_t pruned = 0;         ///< (candidate, size) pairs skipped by their lower bound (prune)
  std::size_t verified = 0;       ///< (candidate, size) plans put to the verifier (the picks, and ahead of them the
                                  ///< fastest where it beats NCCL's own choice by the minimum gain)
  DecisionTable table;
  std::vector<std::uint64_t> unmeasured_for_memory;  ///< sizes measure_top skipped: they did not fit in memory
};

/// The NCCL model's validated error: the held-out mean absolute percentage error of its predictions against
/// published nccl-tests figures (tests/simulator/test_nccl_validation.cpp, which checks these against the data
/// at every run; reports/nccl-validation/REPORT.md), per regime: time of messages up to 64 KiB, time of medium ones
/// (above 64 KiB, below 64 MiB: a regime the validation reports without a target), busbw of larger ones on one
/// machine and across machines.
struct ModelError {
  double small_pct;
  double medium_pct;
  double large_single_pct;
  double large_multi_pct;
};
inline constexpr ModelError kValidatedModelError{
    .small_pct = 18.0, .medium_pct = 22.2, .large_single_pct = 3.4, .large_multi_pct = 7.9};
/// The largest message of the small regime (the validation's 8 B – 64 KiB).
inline constexpr std::uint64_t kSmallMessageBytes = 64 << 10;
/// The smallest message of the large regimes (64 MiB); the medium regime lies between.
inline constexpr std::uint64_t kLargeMessageBytes = std::uint64_t{64} << 20;

/// SearchOptions::min_gain's default at one size: the validated error of its regime, as a fraction (a pick that
/// the model calls faster than NCCL by less than its own error is not advice worth acting on).
double default_min_gain(int machines, std::uint64_t bytes);

/// Simulates every candidate at every size and builds the table from the predicted best.
SearchResult search(const Topology& topo, const SearchOptions& options);

/// How to measure.
struct MeasureOptions {
  BackendKind backend = BackendKind::kCpu;
  int top_k = 3;  ///< candidates per size run for real
  int warmup = 2;
  int iterations = 5;
  double timeout_s = 60;
  std::uint64_t max_bytes = 0;  ///< skip sizes above this (0 = measure all)
  /// Host memory the cpu backend may use for one run (0 = what this machine and the process limits allow,
  /// see host_memory_budget()); sizes whose plans need more are skipped and listed in unmeasured_for_memory.
  std::uint64_t memory_budget_bytes = 0;
  ProgressFn progress;
};

/// Runs one plan for real: warm-up, timed iterations (the max over processes), then a verification
/// pass; the figures are the mean time. Throws BackendFailure/Timeout from the backend.
Measurement measure_plan(HarnessBackend& backend, const Plan& plan, DataType type, ReduceOp op, int warmup, int iterations);

/// The measured pick among `measured` (candidate index, measurement): the fastest with #wrong = 0, except that
/// candidates within the run-to-run spread of the fastest (gap ≤ the larger spread_pct of the two) tie, and a tie
/// keeps `previous` (the previous size's pick) when it is among them, else the lowest candidate index (the simplest).
/// nullopt when no run was correct.
std::optional<std::size_t> measured_choice(const std::vector<std::pair<std::size_t, Measurement>>& measured,
                                           std::optional<std::size_t> previous);

/// Runs the top-K predicted candidates per size for real, keeps the measured best among those with
/// #wrong = 0 (measured_choice: ties within the run-to-run spread keep the previous or simpler pick), and rebuilds
/// `result.table` with the measured figures.
void measure_top(SearchResult& result, const Topology& topo, const SearchOptions& search_options,
                 const MeasureOptions& options);

/// Host memory one in-process run may take while measuring: 80 % of available_host_memory()
/// (executor/backend.hpp: MemAvailable, the cgroup limit, RLIMIT_AS).
std::uint64_t host_memory_budget();

/// Host bytes the cpu backend holds to run and verify `plan`: every buffer of every device plus the
/// verification's expected result and staged input.
std::uint64_t host_bytes_for_run(const Plan& plan, std::size_t element_bytes);

/// Rebuilds result.table from result.pick and the scores.
void rebuild_table(SearchResult& result, const Topology& topo, const SearchOptions& options);

}  // namespace artune
