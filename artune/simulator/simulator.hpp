#pragma once
// The cost-model simulator: predicted time, algbw, busbw, per-link load and
// the critical path of a plan on a topology.
//
// Discrete events over the plan's dependency graph: an op starts when its
// last dependency ends; its bytes move as flows over directed links that
// concurrent flows share max-min fairly (see cost_model.hpp for what each op
// costs). Ops never queue for a resource, they share it, so the critical path
// walks back through the dependency that finished last and each step names the
// link that limited its rate. No wall clock and no unordered iteration: the
// same inputs give bit-identical results.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "artune/algorithms/plan.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// Load carried by one directed link during a simulation.
struct LinkUsage {
  int link = -1;            ///< topology link index
  double bytes = 0;         ///< bytes that crossed it
  double busy_us = 0;       ///< time it carried at least one flow
  double saturated_us = 0;  ///< time its achievable bandwidth was fully used (it limited a flow)
  /// When it first carried a flow and when its last flow ended: busy_us falls within [first_busy_us, last_busy_us],
  /// so last − first − busy is the time it idled in between (a schedule's gaps on a link that binds), first the time
  /// it waited at the start (pipeline fill) and the total time − last the time it idled at the end (drain).
  double first_busy_us = 0;
  double last_busy_us = 0;
  double utilisation = 0;   ///< bytes / (achievable bandwidth = nominal · efficiency, · total time)
  friend bool operator==(const LinkUsage&, const LinkUsage&) = default;
};

/// One op on the critical path.
struct CriticalStep {
  int op = -1;  ///< plan op id
  double start_us = 0;
  double end_us = 0;
  std::vector<int> links;  ///< links of its route (group ops: of its ring; empty for local ops)
  int limiting_link = -1;  ///< link that limited its last flow most (-1: none, latency or compute bound)
  friend bool operator==(const CriticalStep&, const CriticalStep&) = default;
};

/// How a library (NCCL) ran one group op: the algorithm × protocol NCCL picked (or the spec forced) and the
/// channels it ran on.
struct GroupRun {
  int op = -1;            ///< plan op id
  std::string algorithm;  ///< "ring", "tree", "nvls", "nvlstree" (NCCL's names, lower case)
  std::string protocol;   ///< "ll", "ll128", "simple"
  int channels = 0;       ///< channels (NVLS: heads) it ran on
  double latency_us = 0;  ///< latency NCCL's tables charge it (before its bytes move)
  friend bool operator==(const GroupRun&, const GroupRun&) = default;
};

/// What a simulation predicts.
struct SimResult {
  double time_us = 0;                       ///< completion time of the last op
  std::uint64_t bytes = 0;                  ///< count · element size (nccl-tests "size")
  int ranks = 0;                            ///< participants n
  double algbw_gbps = 0;                    ///< bytes / time (0 when the time is 0)
  double busbw_gbps = 0;                    ///< algbw · 2(n−1)/n
  std::vector<LinkUsage> links;             ///< links that carried data, by index
  std::vector<CriticalStep> critical_path;  ///< first op to last
  int bottleneck_link = -1;      ///< link that was saturated longest (then busiest; -1 when no link carried data)
  std::vector<GroupRun> groups;  ///< group ops run by the NCCL model (GPU profiles), in op order
  friend bool operator==(const SimResult&, const SimResult&) = default;
};

/// A run of consecutive critical-path steps that are alike: the same op kind between the same two devices,
/// limited by the same link (a pipelined op's segments, one after another, fold into one run). Each step of the
/// path starts as the one before it ends, so the runs tile [0, time_us].
struct CriticalRun {
  int first_step = 0;     ///< index of its first step in SimResult::critical_path
  int ops = 0;            ///< steps in the run
  double start_us = 0;    ///< its first step's start
  double end_us = 0;      ///< its last step's end
  OpKind kind = OpKind::kCopy;
  int src_device = -1;    ///< plan device the data comes from (copy, reduce), -1 for scale and group ops
  int dst_device = -1;    ///< plan device it goes to (group ops: -1)
  int limiting_link = -1; ///< as CriticalStep::limiting_link
  friend bool operator==(const CriticalRun&, const CriticalRun&) = default;
};

/// The critical path of `result` (a simulation of `plan`) folded into runs of alike steps, first to last.
/// InvalidInput when a step names an op the plan lacks.
std::vector<CriticalRun> critical_runs(const Plan& plan, const SimResult& result);

/// Simulates `plan` on `topo` with the given element size and cost model. Deterministic.
/// InvalidInput when the plan names devices, links or ops that do not exist.
SimResult simulate(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes);

/// A time simulate() can never beat for the same inputs, from the compiled plan without running it: the larger of
/// the busiest resource's work over its capacity and the longest dependency chain of ops each at its flows'
/// fastest possible rates (see simulator.cpp). Costs a compilation, not a simulation. InvalidInput as simulate().
double simulate_lower_bound(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes);

namespace sim_detail {
class Simulation;
}

/// A plan compiled once for the simulator, then simulated and lower-bounded as often as needed: at its own
/// counts, or (where scalable()) at every count multiplied by a whole factor, which gives what simulate() and
/// simulate_lower_bound() give for scale_plan(plan, factor) without building or compiling that plan (the tuner's
/// size sweeps, tuner/plan_scaling.hpp). `plan`, `topo` and `model` must outlive it. InvalidInput as simulate().
class CompiledPlan {
 public:
  /// How the compilation treats machines the plan treats alike.
  enum class Machines {
    kFold,   ///< simulated once per orbit of the machines' symmetry (simulator/simulation_symmetry.cpp; the default)
    kWhole,  ///< every op simulated (the reference the folding is tested against)
  };
  CompiledPlan(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes,
               Machines machines = Machines::kFold);
  ~CompiledPlan();
  CompiledPlan(CompiledPlan&&) noexcept;
  CompiledPlan& operator=(CompiledPlan&&) noexcept;

  /// Whether the compiled program is linear in the counts (no host model, no NCCL model choosing by size, no
  /// group whose count leaves a remainder over its members): run(factor) and lower_bound(factor) for factor > 1.
  bool scalable() const;
  /// How many copies of every op the folding simulated as one (1: no symmetry found, or kWhole).
  int symmetry_order() const;
  /// simulate() of the plan with its counts times `factor` (1, or any ≥ 1 when scalable()).
  SimResult run(std::int64_t factor = 1);
  /// simulate_lower_bound() of the plan with its counts times `factor` (as run()).
  double lower_bound(std::int64_t factor = 1);

 private:
  std::unique_ptr<sim_detail::Simulation> sim_;
};

/// A result as JSON (links by topology node ids).
nlohmann::json sim_result_to_json(const SimResult& result, const Topology& topo);
/// One link's load as JSON: the link (index, src, dst, kind, name, bandwidth_gbps) and what it carried (bytes,
/// busy_us, saturated_us, first_busy_us, last_busy_us, utilisation); sim_result_to_json's "links" entries.
nlohmann::json link_usage_to_json(const LinkUsage& usage, const Topology& topo);

/// "gpu3->cpu0 (pcie)": a link as reports name it.
std::string link_name(const Topology& topo, int link);

/// The ring order a library (NCCL) would use over `nodes`: the cyclic order that maximises the smallest
/// route bandwidth between neighbours, then their sum (exhaustive up to 9 nodes, nearest neighbour beyond);
/// starts with nodes[0].
std::vector<int> best_ring_order(const Topology& topo, const std::vector<int>& nodes);

}  // namespace artune
