#pragma once
// The min-cut bound (algorithms/synthesis/cut_bound.hpp) at the rates a simulated plan can reach: every link
// at its nominal bandwidth times the cost model's efficiency for its kind, and with in-network reduction
// where NCCL's model finds NVLS for the GPUs. `simulate`, `autotune`, `bound` and `alloc` print plans'
// busbw as a percentage of it.

#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/synthesis/cut_bound.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// Every link's rate under `model`: nominal bandwidth × the efficiency of its kind (loopbacks 0).
LinkRates effective_link_rates(const Topology& topo, const CostModel& model);
/// Whether the hardware reduces in the network for these participants (empty: every GPU): NCCL's model finds
/// NVLS heads for them (NVSwitch with sm90 or later).
bool in_network_reduction(const Topology& topo, const std::vector<int>& participants);
/// The bound of `collective` over `participants` (empty: every GPU) at `model`'s effective rates.
CollectiveBound effective_bound(const Topology& topo, const std::vector<int>& participants, Collective collective,
                                const CostModel& model);
/// The same at nominal rates.
CollectiveBound nominal_bound(const Topology& topo, const std::vector<int>& participants, Collective collective);
/// A plan's share of the bound: the bound's time over the plan's (1 = at the bound; 0 when either is 0).
double bound_fraction(const CollectiveBound& bound, double bytes, double time_us);

}  // namespace artune
