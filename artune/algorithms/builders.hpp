#pragma once
// Plan builders, one per algorithm family, and the dispatcher from a spec.

#include <cstdint>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/core/types.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// Inputs every builder shares.
struct BuildOptions {
  std::int64_t count = 0;  ///< elements per participant (≥ 1)
  ReduceOp reduce_op = ReduceOp::kSum;
  std::vector<int> participants;  ///< topology node indices of the ranks; empty = every GPU by global index
  std::vector<int> gpu_perm;  ///< order of local GPUs inside each machine (xring, 2d rings; rechd, tree rank order);
                              ///< empty = identity
  std::vector<int> gather;    ///< topology node indices of gather devices (shuffle); empty = default
  int segments = 1;           ///< pipeline depth applied after building (1 = none)
  bool verify =
      true;  ///< prove the plan with verify_or_throw before returning it (callers that verify anyway may skip)
  Collective collective = Collective::kAllReduce;  ///< what the plan computes (others: collectives.hpp)
  /// All-gather-v (and reduce-scatter-v): each rank's block size, in rank order, summing to count; empty =
  /// even blocks. The point-to-point families move the real sizes (Plan::blocks).
  std::vector<std::int64_t> blocks;
};

/// Builds the plan for `spec` (the range that applies to options.count) on `topo`.
/// InvalidInput names the spec token when the algorithm cannot apply. Ranks are the participants
/// in order (default: every GPU by global index), grouped into workers by machine; helpers (gather
/// shards off the ranks) follow them. Unless options.verify is false the plan has passed verify().
Plan build_plan(const Topology& topo, const AllReduceSpec& spec, const BuildOptions& options);
/// Convenience: parse then build.
Plan build_plan(const Topology& topo, std::string_view spec, const BuildOptions& options);

/// An upper bound on the ops build_plan(topo, spec, options) emits before pipelining, in closed form from
/// the family (Family::max_ops), the ranks and the count, without building anything; 0 when the family has
/// no such bound (hybrids, other collectives: the emitter's own limit applies while building).
std::uint64_t estimated_plan_ops(const Topology& topo, const AllReduceSpec& spec, const BuildOptions& options);
/// InvalidInput ("parameter spec T: the plan over N ranks would hold K ops, more than artune's limit …") when
/// estimated_plan_ops is beyond kMaxPlanOps. build_plan checks it before emitting; a caller that builds a
/// plan per size checks every size first, so that it refuses before building any.
void require_plan_fits(const Topology& topo, const AllReduceSpec& spec, const BuildOptions& options);

/// TF's _ring_permutations: for each subchunk s, pred[s][d] and rank[s][d].
struct RingPermutations {
  std::vector<std::vector<int>> pred_by_s_d;
  std::vector<std::vector<int>> rank_by_s_d;
  std::vector<std::vector<int>> order_by_s;  ///< the full ring order of each subchunk
};
/// Exactly TF's _ring_permutations (InvalidInput when subchunks > gpus per worker).
RingPermutations ring_permutations(int workers, int subchunks, const std::vector<int>& gpu_perm);

/// Cycles through every GPU of one machine along NVLink only (direct or through NVSwitches), as
/// local GPU indices starting at 0, each undirected cycle once (second entry < last), DFS order,
/// at most `limit` of them.
std::vector<std::vector<int>> nvlink_hamiltonian_cycles(const Topology& topo, int machine, int limit);
/// Up to `k` rings (local GPU indices) over one machine's GPUs whose directed links are pairwise
/// disjoint (a full-duplex lane carries one ring per direction; NV2 = two lanes); NVLink only when
/// the machine has an NVLink Hamiltonian cycle, else along PCIe routes; fewer if it holds fewer.
std::vector<std::vector<int>> link_disjoint_rings(const Topology& topo, int machine, int k);
/// Maximal NVLink-connected cliques partitioning one machine's GPUs (hierarchical copy groups), as
/// sorted local GPU indices: largest clique first, then the largest among the rest, …; sorted.
std::vector<std::vector<int>> nvlink_cliques(const Topology& topo, int machine);

}  // namespace artune
