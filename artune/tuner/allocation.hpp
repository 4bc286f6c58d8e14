#pragma once
// Where to allocate a job: every k-subset of a machine's free GPUs ranked by the predicted time of its best
// all-reduce (or all-gather, reduce-scatter) and of NCCL's, with each one's penalty against the best subset
// and against the whole machine. The subsets are topology subsets (topology/subset.hpp): the GPUs with every
// device that connects them, routed as NCCL routes them.
//
// What "its best plan" is, by --plans: the min-cut bound (algorithms/synthesis/cut_bound.hpp) — the least
// time of any plan, which the trees family approaches, at the cost of a few max flows per subset; the trees
// family itself, built and simulated at every pipeline depth it is tuned with; or every tuner candidate
// (tuner/search.hpp), the autotune pick at that size.

#include <cstdint>
#include <string>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/synthesis/cut_bound.hpp"
#include "artune/core/types.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// What a subset's best plan is taken to be.
enum class AllocationPlans {
  kBound,  ///< the min-cut bound's time (no plan built)
  kTrees,  ///< the trees family's tuner candidates (trees; trees2, rbtrees for all-reduce) at their depths, simulated
  kAll,    ///< every tuner candidate, simulated (the autotune pick)
};

/// Parses "bound", "trees", "all"; InvalidInput naming `what`.
AllocationPlans parse_allocation_plans(std::string_view text, std::string_view what);

/// Knobs of rank_subsets.
struct AllocationOptions {
  int k = 0;                                       ///< GPUs the job asks for
  std::uint64_t bytes = std::uint64_t{256} << 20;  ///< message size the plans are predicted at
  DataType type = DataType::kFloat32;
  Collective collective = Collective::kAllReduce;
  CostModel model = CostModel::defaults();
  AllocationPlans plans = AllocationPlans::kBound;
  int jobs = 0;  ///< threads scoring subsets (0 = every core); never changes the result
};

/// One k-subset and its predictions.
struct SubsetScore {
  std::vector<int> gpus;       ///< GPU nodes of the topology, in index order
  std::string list;            ///< "0,1,2,4" (global GPU indices; ids where a cluster numbers them otherwise)
  CollectiveBound bound;       ///< the min-cut bound at the model's rates (its cuts' nodes are the subset topology's)
  std::string bound_cut;       ///< the cut that sets it, as cut_text writes it
  std::string best_plan;       ///< the best plan's label ("bound" under AllocationPlans::kBound)
  double best_us = 0;          ///< its predicted time
  double best_busbw_gbps = 0;  ///< its busbw
  double nccl_us = 0;          ///< NCCL's predicted time (0 where NCCL's model does not take the subset)
  double nccl_busbw_gbps = 0;  ///< NCCL's busbw
  // AllocationPlans::kAll only: the fastest candidate of the trees family and the fastest of every other family.
  std::string trees_plan;
  double trees_us = 0;
  std::string others_plan;
  double others_us = 0;
};

/// Every k-subset ranked, and the whole machine for comparison.
struct Allocation {
  std::vector<SubsetScore> ranked;  ///< fastest best plan first (ties: NCCL's time, then the list)
  SubsetScore machine;              ///< every GPU of the topology, scored the same way
};

/// Ranks every k-subset of `free_gpus` (GPU nodes of `topo`). InvalidInput (naming parameter gpus / free)
/// when k is not between 1 and the free GPUs' count, or the subsets number more than kMaxAllocationSubsets.
Allocation rank_subsets(const Topology& topo, const std::vector<int>& free_gpus, const AllocationOptions& options);

/// Most subsets rank_subsets scores (C(n, k) beyond it is refused: C(16, 8) = 12870 fits).
inline constexpr std::uint64_t kMaxAllocationSubsets = 20000;

}  // namespace artune
