#pragma once
// `artune check`: published or local nccl-tests runs against the model — "is my number normal, and why not".
//
// Every row of every table is rebuilt as the plan NCCL ran (the collective, the size, the ranks on the
// topology's GPUs as the `Using devices` lines place them, NCCL's own choice or what the log forced with
// NCCL_ALGO/NCCL_PROTO), simulated with NCCL's model, and charged the launches the run paid (nccl-tests `-g`,
// `-G`: nccl::launch_us). The ratio is the measured bus bandwidth over the model's (= the model's time over
// the measured). A row outside the band is flagged with the likely cause the model gives: latency-bound or
// bandwidth-bound and by which link class, how many NICs or channels the measured figure amounts to against
// what the topology has, a forced algorithm or protocol and what NCCL's own choice would take, wrong results;
// and from an NCCL INFO log of the same run: the channels and NICs NCCL built against the model's search, a
// ring search that fell back, TUNING picks that differ from the model's.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/algorithms/plan.hpp"
#include "artune/logs/nccl_info_log.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// The band a row's ratio (measured busbw / model busbw) must stay in, per regime.
struct CheckBand {
  double low = 0.8;   ///< below: slow
  double high = 1.5;  ///< above: faster than the model
};

/// What to check and how.
struct CheckOptions {
  CostModel model = CostModel::defaults(BackendProfile::kNccl);  ///< the NCCL profile, or a calibration of it
  /// What the run forced, in the spec grammar ("nccl.ring", "nccl.ring.simple", "nccl"); "" = what the log
  /// shows (NCCL_ALGO/NCCL_PROTO), else NCCL's own choice.
  std::string spec;
  std::optional<Collective> collective;  ///< the collective when the log does not name its program
  /// Bandwidth-bound rows on one machine (the model's busbw is within 5 % of published large-message figures
  /// there: tests/simulator/data, sim_nccl_validation).
  CheckBand bandwidth_band{0.8, 1.5};
  /// Bandwidth-bound rows across machines (within 21 % there).
  CheckBand network_band{0.7, 1.5};
  /// Rows the model calls latency-bound (its small-message error averages 28 % on held-out rows, 50 % at worst).
  CheckBand latency_band{0.5, 2.0};
};

/// One row: measured next to the model.
struct CheckRow {
  int line = 0;
  std::uint64_t bytes = 0;
  double measured_us = 0, measured_busbw_gbps = 0;  ///< out-of-place (in-place where the row has no such half)
  double model_us = 0, model_busbw_gbps = 0;
  double ratio = 0;            ///< measured busbw / model busbw
  std::string nccl;            ///< the model's NCCL choice "ring/simple/24"
  std::string bound;           ///< "latency" or "bandwidth: nvlink 20.6 GB/s" (the limiting link class)
  double latency_share = 0;    ///< the model's latency over its time
  std::string verdict;         ///< "ok", "slow", "fast", "wrong"
  std::vector<std::string> causes;  ///< the likely causes of a flagged row
};

/// One table of a log.
struct CheckRun {
  std::string source;
  int header_line = 0;
  std::string program;       ///< "all_reduce_perf" ("" when the log does not say)
  Collective collective = Collective::kAllReduce;
  std::string collective_from;  ///< how the collective was known ("program", "parameter collective", "columns")
  int ranks = 0, machines = 0, gpus_per_machine = 0;
  int gpus_per_thread = 1;
  bool cuda_graph = false;
  std::string spec;          ///< what was simulated ("nccl", "nccl.ring", …)
  std::string spec_from;     ///< "parameter spec", "NCCL_ALGO=Ring (log)", "NCCL's own choice"
  std::string nccl_version;
  std::vector<std::string> findings;  ///< about the run as a whole (INFO log, environment, interleaved jobs)
  std::vector<CheckRow> rows;
  bool modelled = true;      ///< false for programs the model does not cover (broadcast, alltoall, …)
};

/// Everything check found.
struct CheckReport {
  std::string topology;
  std::vector<CheckRun> runs;
  int flagged() const;   ///< rows whose verdict is not "ok"
  int rows() const;
  nlohmann::json to_json() const;
  std::string text() const;  ///< the table and causes as `artune check` prints them
};

/// Checks every run of `runs` on `topo`; `info` is the NCCL INFO log of the same job (nullptr without one).
/// InvalidInput naming the log when a run does not fit the topology (more hosts than machines, a device
/// index the machine lacks) or forces what NCCL's model cannot run.
CheckReport check_runs(const Topology& topo, const std::vector<logs::TestRun>& runs, const logs::InfoLog* info,
                       const CheckOptions& options);

/// One row of a run as the plan NCCL ran: what check simulates and calibrate --from fits.
struct RunRowPlan {
  int line = 0;
  std::uint64_t bytes = 0;
  std::size_t element_bytes = 4;
  Plan plan;
  /// Launch time the run paid beyond the simulator's one launch per call (nccl-tests -g: more; -G: less).
  double launch_extra_us = 0;
  double measured_us = 0;  ///< out-of-place time (in-place where the row has no such half)
};
/// The plans of every row of `run` with bytes > 0, placed and forced as check_runs does (InvalidInput as there).
std::vector<RunRowPlan> run_row_plans(const Topology& topo, const logs::TestRun& run, const logs::InfoLog* info,
                                      const CheckOptions& options);

/// NCCL's printed cost table (logs::InfoLog::costs) against the model's (nccl::cost_table on `graph`, with its
/// release): every printed cell of a function and algorithm the model has (AllReduce, AllGather, ReduceScatter ×
/// Tree, Ring, NVLS, NVLSTree, PAT; CollNet is not modelled). A cell matches when latency and bandwidth each agree
/// to NCCL's printed digit (±0.05), or when both bandwidths are 0 (NCCL disabled the pair, so its latency weighs
/// nothing in the choice).
struct CostTableCheck {
  int cells = 0;     ///< printed cells compared
  int matching = 0;  ///< of them, as the model's
  std::vector<std::string> differing;  ///< "line 27: AllReduce tree/ll: NCCL 15.2/43.6 µs/GB/s, the model 15.2/40.1"
};
CostTableCheck compare_cost_table(const logs::InfoLog& info, const nccl::Graph& graph);

/// The collective a run measured: its program, else options.collective, else what its columns show (redop
/// "none": all-gather; size = count × ranks: reduce-scatter; else all-reduce); `from` says which.
std::optional<Collective> run_collective(const logs::TestRun& run, const std::optional<Collective>& forced,
                                         std::string* from);

}  // namespace artune
