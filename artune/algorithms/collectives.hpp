#pragma once
// All-gather and reduce-scatter as plans of their own (issue 17), next to all-reduce.
//
// A plan's `collective` says what it computes (see Plan); the families per collective:
//
//   all-gather:     ring (n−1 steps), bruck (⌈lg n⌉ steps, any n), rd (recursive doubling; a
//                   non-power-of-two folds the last n − 2^⌊lg n⌋ ranks onto the first), nccl (one group op)
//   reduce-scatter: ring (n−1 steps), halving (recursive halving, same fold), nccl (one group op)
//
//   hybrids:        nccl/ring, nccl/bruck, nccl/rd (all-gather), nccl/ring, nccl/halving (reduce-scatter):
//                   the library inside each machine, the point-to-point family across machines per local GPU
//                   (collective_nccl.cpp); nccl.ALGO/… forces NCCL's choice inside
//
// Their specs are one algorithm name each or one such hybrid (no `#n` or ranges).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// The spec names of `c` with one-line descriptions (all-reduce: spec_algorithms()).
std::vector<std::pair<std::string, std::string>> collective_algorithms(Collective c);
/// Parses a spec of collective `c` (all-reduce: parse_spec): a name, or a hybrid INTRA/INTER; InvalidInput naming
/// the spec parameter and the token.
AllReduceSpec parse_collective_spec(Collective c, std::string_view text);
/// Builds (and verifies, unless options.verify is false) the plan of `spec` for options.collective.
Plan build_collective_plan(const Topology& topo, std::string_view spec, const BuildOptions& options);

}  // namespace artune
