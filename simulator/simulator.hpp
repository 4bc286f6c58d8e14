#pragma once
// The cost-model simulator: predicted time, algbw, busbw, per-link load and
// the critical path of a plan on a topology.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "algorithms/plan.hpp"
#include "simulator/cost_model.hpp"
#include "topology/topology.hpp"

namespace artune {

/// Load carried by one directed link during a simulation.
struct LinkUsage {
  int link = -1;             ///< topology link index
  double bytes = 0;          ///< bytes that crossed it
  double busy_us = 0;        ///< time it carried at least one flow
  double utilisation = 0;    ///< bytes / (bandwidth · total time)
};

/// One op on the critical path.
struct CriticalStep {
  int op = -1;               ///< plan op id
  double start_us = 0;
  double end_us = 0;
  std::vector<int> links;    ///< links of its route (empty for local ops)
};

/// What a simulation predicts.
struct SimResult {
  double time_us = 0;        ///< completion time of the last op
  std::uint64_t bytes = 0;   ///< count · element size (nccl-tests "size")
  double algbw_gbps = 0;     ///< bytes / time
  double busbw_gbps = 0;     ///< algbw · 2(n−1)/n
  std::vector<LinkUsage> links;          ///< links that carried data, by index
  std::vector<CriticalStep> critical_path;
  int bottleneck_link = -1;  ///< link with the highest busy time (-1 when none)
};

/// Simulates `plan` on `topo` with the given element size and cost model. Deterministic.
SimResult simulate(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes);

/// A result as JSON (links by topology node ids).
nlohmann::json sim_result_to_json(const SimResult& result, const Topology& topo);

}  // namespace artune
