#pragma once
// Calibration: microbenchmarks through an executor backend (copies per device
// pair class, concurrent copies, reductions per type, per-op overhead; on host
// backends also the host: run overhead, cores, and the aggregate copy rate by
// working set, which locates the cache cliff), a least-squares fit of α and
// bandwidth per class, a CostModel overlay, and a validation set (each family
// at several sizes, predicted vs measured).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/algorithms/plan.hpp"
#include "artune/core/types.hpp"
#include "artune/executor/backend.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/fit.hpp"
#include "artune/tuner/search.hpp"

namespace artune {

/// What to calibrate and how hard.
struct CalibrationOptions {
  BackendKind backend = BackendKind::kCpu;
  double timeout_s = 60;
  DataType type = DataType::kFloat32;           ///< type of the copy and validation runs
  std::vector<std::uint64_t> sizes;             ///< microbenchmark sizes in bytes (empty = 4K…16M, ×4)
  std::vector<DataType> reduce_types;           ///< reduction throughput per type (empty = float, double, half, int32)
  std::vector<std::uint64_t> validation_sizes;  ///< empty = 4K…16M, ×4
  std::vector<std::uint64_t> training_sizes;  ///< refinement runs (empty = geometric midpoints of the validation sizes)
  bool refine = true;                         ///< refine the fit against whole-plan runs (see refine_model)
  bool validate = true;
  int warmup = 2;
  int iterations = 7;  ///< timed runs per point (the median is kept)
  ProgressFn progress;
};

/// One device-pair class and its fitted copy line.
struct ClassFit {
  std::string name;        ///< e.g. "gpu->gpu NV2 (nvlink 50 GB/s)"
  int src = -1, dst = -1;  ///< representative topology nodes
  PathType path = PathType::kLoc;
  std::vector<LinkKind> kinds;  ///< distinct link kinds on the route
  LinkKind bottleneck_kind = LinkKind::kNvLink;
  double nominal_gbps = 0;  ///< route bottleneck bandwidth
  double route_latency_us = 0;
  std::vector<TimingSample> samples;
  AlphaBetaFit fit;
};

/// A reduction throughput fit for one type.
struct ReduceFit {
  DataType type = DataType::kFloat32;
  std::vector<TimingSample> samples;  ///< bytes of src
  AlphaBetaFit fit;
};

/// The host under a host backend (cpu, mpi), measured for the cost model's HostModel.
struct HostFit {
  std::vector<TimingSample> probe;  ///< every participant copying to its ring neighbour; bytes = working set
  std::vector<double> probe_gbps;   ///< aggregate copy rate of each probe point (all threads together)
  int threads = 0;                  ///< participants copying at once in the probe
  double run_overhead_us = 0;       ///< chain time extrapolated to zero ops
  double cores = 0;                 ///< hardware threads of the host
  double cache_bytes = 0;           ///< working sets up to here copy at cache_gbps (0: no cliff found)
  double cache_gbps = 0;            ///< aggregate copy rate below the cliff
  double dram_gbps = 0;             ///< aggregate copy rate above it
  double thread_copy_gbps = 0;      ///< one thread's memcpy, cache-resident (single copies)
  double thread_reduce_gbps = 0;    ///< one thread's reduce kernel, cache-resident (reducing ring step)
};

/// Fits the host memory of HostModel to aggregate rates measured at several working sets: cache_bytes C,
/// cache_gbps and dram_gbps such that 1/rate(W) = h/cache_gbps + (1 − h)/dram_gbps with h = min(1, C/W), by
/// least squares on relative errors (C on a grid of 2^(1/8) steps, the two rates linear for each C). When the
/// best cache rate is under 1.25 × the DRAM rate there is no cliff worth modelling: cache_bytes is 0 and both
/// rates are the single-level fit. Exposed for tests.
void fit_cache_cliff(const std::vector<double>& working_set_bytes, const std::vector<double>& gbps, HostFit& fit);

/// One whole-plan run used to refine the model: the plan and its measured time.
struct TrainingRun {
  Plan plan;
  std::string label;
  double measured_us = 0;
};

/// How refinement went.
struct RefineResult {
  CostModel model;            ///< the refined model
  double rms_rel_before = 0;  ///< RMS relative error over the runs, start model
  double rms_rel_after = 0;   ///< the same, refined model
  int iterations = 0;
  std::vector<std::string> parameters;  ///< "name: before -> after"
};

/// Levenberg–Marquardt least squares on relative residuals (simulated − measured) / measured over whole-plan
/// runs, in log space of the model's rate and overhead parameters (host backends: op overhead, transfer cap,
/// reduce and copy rates, and with host resources in the start model the run overhead and the aggregate cache
/// and DRAM rates; GPU backends: op overhead, reduce rate, efficiency per link kind the runs cross).
/// Captures what microbenchmarks of one op cannot (several workers sharing cores and memory). Each parameter
/// stays within a factor 100 of its start value (efficiencies ≤ 1; overheads may reach 100 µs from any start).
/// `calibrate` on a host backend adds the ring-step microbenchmarks to the runs.
RefineResult refine_model(const Topology& topo, const CostModel& start, const std::vector<TrainingRun>& runs,
                          BackendKind backend, std::size_t element_bytes);

/// The NCCL fit (`artune calibrate --backend nccl`, `--from RUN.log`): from NCCL runs (all-reduce, all-gather,
/// reduce-scatter; NCCL's own or a forced choice, several sizes),
/// per link class the NCCL rings cross — NVLink or PCIe inside a machine, the network across machines — the
/// efficiency (share of NCCL's per-lane rate the channels reach: links.<kind>.efficiency) and the per-step
/// latency (links.<kind>.alpha_us; beyond the profile's default it shifts NCCL's per-step latency of that
/// class), by the least squares of refine_model on relative residuals. The overlay then carries the machine's
/// figures in place of NCCL's defaults. InvalidInput when the runs hold no NCCL collective over 2+ GPUs.
RefineResult fit_nccl(const Topology& topo, const CostModel& start, const std::vector<TrainingRun>& runs,
                      std::size_t element_bytes);

/// The link class NCCL's rings use inside a machine for the group of `gpus` ("nvlink" or "pcie"): an overlay
/// written by the NCCL fit carries it as "nccl_intra", for the tuner plugin (which does not see the topology).
std::string nccl_intra_class(const Topology& topo, const std::vector<int>& gpus);
/// The same for the first NCCL group op of `plan` ("nvlink" when it has none).
std::string nccl_intra_class(const Topology& topo, const Plan& plan);

/// Predicted vs measured for one validation run.
struct ValidationRow {
  std::string label;
  std::string family;
  std::uint64_t bytes = 0;
  double default_us = 0;    ///< predicted with the uncalibrated defaults
  double micro_us = 0;      ///< predicted with the microbenchmark fit alone
  double predicted_us = 0;  ///< predicted with the calibrated (refined) model
  double measured_us = 0;
  double error_pct = 0;  ///< (predicted − measured) / measured · 100
  std::int64_t wrong = 0;
};

/// Everything calibration found.
struct CalibrationResult {
  std::string topology;
  std::string backend;
  bool root = true;                     ///< this process prints (rank 0 under mpirun)
  std::vector<ClassFit> copies;         ///< one flow at a time, per class
  ClassFit concurrent;                  ///< every participant copying to its ring neighbour at once
  ClassFit concurrent_reduce;           ///< the same ring step reducing into the neighbour
  ReduceFit local_copy;                 ///< local copies, every participant at once
  std::optional<HostFit> host;          ///< host backends: the host (run overhead, cores, cache cliff)
  std::vector<ReduceFit> reduce;        ///< local reduces per type, every participant at once
  double op_time_us = 0;                ///< per dependent op (chain of one-element copies)
  double op_overhead_us = 0;            ///< op_time_us − route latency
  std::vector<double> link_alpha_us;    ///< per class: fitted α − overhead − route latency (before clamping)
  nlohmann::json micro_overlay;         ///< the overlay from the microbenchmark fits alone
  nlohmann::json overlay;               ///< the CostModel overlay written by calibrate (refined when refine is on)
  CostModel model;                      ///< defaults for the profile with the overlay applied
  std::optional<RefineResult> refined;  ///< refinement against whole-plan runs
  std::optional<RefineResult> nccl;     ///< nccl backend: the NCCL fit (fit_nccl) over NCCL all-reduce runs
  std::int64_t training_wrong = 0;      ///< #wrong summed over the refinement runs (must be 0)
  std::vector<ValidationRow> validation;
  double mape_all = 0;          ///< fraction, every validation row
  double mape_64k = 0;          ///< fraction, rows ≥ 64 KiB
  double mape_default_64k = 0;  ///< the same with the uncalibrated defaults
  double mape_micro_64k = 0;    ///< the same with the microbenchmark fit alone

  /// The fit, its residuals and the validation table as text (what `artune calibrate` prints).
  std::string summary() const;
  /// A JSON summary for reports (includes the overlay and summary text).
  nlohmann::json to_json() const;
};

/// The cost-model profile that models a backend.
BackendProfile profile_for(BackendKind kind);

/// The one-line warning for something priced with cost profile `profile` (`what`: "the table t.json") that runs on
/// `backend`; "" when the profile is the backend's own (or empty). Used by `artune run --table` and the
/// Communicator, once each.
std::string profile_mismatch_warning(std::string_view what, std::string_view profile, BackendKind backend);

/// Builds the overlay from fits: host backends (cpu, mpi) with a host fit get its HostModel ("host") and
/// one thread's rates (transfer cap and copy rate: its memcpy; reduce rate: its reduce kernel), efficiency 1;
/// without one, a per-transfer cap from the concurrent copy bandwidth and the reduce rate that makes a reducing
/// transfer (flow at the cap, then the reduce) take what the concurrent reducing ring step took. GPU backends
/// get per-link-kind efficiency (fitted / nominal, ≤ 1) and α per link kind by least squares over the classes
/// (clamped ≥ 0). Exposed for tests.
nlohmann::json make_overlay(const CalibrationResult& fits, BackendKind backend, DataType type);

/// Microbenchmark plans (not all-reduces; they bypass the verifier). Every plan has the same participants
/// (all GPUs of machine 0, so the mpi and nccl backends see one rank per GPU); a node that is not a
/// participant (a CPU socket) joins as a helper. One copy src→dst into scratch:
Plan copy_plan(const Topology& topo, const std::vector<int>& participants, int src, int dst, std::int64_t count);
/// Every node copies (or reduces) its buffer 0 into the scratch buffer of the next node (a ring step).
Plan ring_step_plan(const Topology& topo, const std::vector<int>& nodes, std::int64_t count, bool reduce = false);
/// Every node reduces (or copies) its scratch buffer into its buffer 0, all at once.
Plan local_plan(const Topology& topo, const std::vector<int>& nodes, std::int64_t count, bool reduce);
/// A chain of `ops` dependent one-element copies bouncing between participants a and b.
Plan chain_plan(const Topology& topo, const std::vector<int>& participants, int a, int b, int ops);

/// Runs the microbenchmarks and the fit on `topo` through the backend, then the validation set.
CalibrationResult calibrate(const Topology& topo, const CalibrationOptions& options);

}  // namespace artune
