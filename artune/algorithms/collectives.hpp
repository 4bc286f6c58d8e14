#pragma once
// All-gather and reduce-scatter as plans of their own (issue 17), next to all-reduce.
//
// A plan's `collective` says what it computes (see Plan); the families per collective:
//
//   all-gather:     ring (n−1 steps), bruck (⌈lg n⌉ steps, any n), rd (recursive doubling; a
//                   non-power-of-two folds the last n − 2^⌊lg n⌋ ranks onto the first), nccl (one group op)
//   reduce-scatter: ring (n−1 steps), halving (recursive halving, same fold), nccl (one group op)
//
// Their specs are one algorithm name each (no `#n`, ranges or hybrids).

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
/// Parses a spec of collective `c` (all-reduce: parse_spec); InvalidInput naming --spec and the token.
AllReduceSpec parse_collective_spec(Collective c, std::string_view text);
/// Builds (and verifies, unless options.verify is false) the plan of `spec` for options.collective.
Plan build_collective_plan(const Topology& topo, std::string_view spec, const BuildOptions& options);

}  // namespace artune
