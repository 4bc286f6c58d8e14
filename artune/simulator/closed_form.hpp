#pragma once
// Closed-form α-β-γ costs of all-reduce algorithms (Thakur, Rabenseifner and
// Gropp, "Optimization of Collective Communication Operations in MPICH",
// IJHPCA 2005) and the Patarasuk–Yuan bandwidth lower bound. n is the
// message size in bytes, p the number of ranks, α the cost of one message
// (µs), β the time per byte on a link (µs/B), γ the time per byte of a
// reduction (µs/B). The simulator is held to these on uniform topologies.

#include "artune/algorithms/registry.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

// AlphaBetaGamma and the classic formulas (ring_allreduce_us, recursive_doubling_us, halving_doubling_us,
// shuffle_us, allreduce_lower_bound_us) live with the families in algorithms/registry.hpp.

/// The α, β, γ the simulator's cost model implies for one uncontended transfer-and-reduce from
/// `src` to `dst`: α = op overhead + route latency + link-kind α, β = 1 / min over the route's
/// links of bandwidth · efficiency, γ = 1 / reduce bandwidth of the destination's kind.
AlphaBetaGamma implied_alpha_beta_gamma(const Topology& topo, const CostModel& model, int src, int dst);

/// What the family's closed form is given for an all-reduce over every GPU of `topo`: the implied
/// constants of the fastest GPU pair inside a machine (`link`), across machines (`network`), to a CPU
/// socket (`host`), the library's ring latencies and the bandwidth into GPU 0.
ClosedFormInput closed_form_input(const Topology& topo, const AlgToken& token, double bytes, const CostModel& model,
                                  Collective collective = Collective::kAllReduce);

/// The closed-form time of one spec range (no hybrid: its in-machine token) for `bytes` over every GPU
/// of `topo` under `model`: the family's α-β-γ formula with the best constants the topology offers, so
/// that it is exact on a uniform machine where the family says so (Exactness::kExact) and otherwise
/// never above the simulated time there (Exactness::kLowerBound; for pruning, see each family's note).
/// InvalidInput when the topology has no GPU. `collective`: whose family the token names (all-gather and
/// reduce-scatter families price n bytes in all, n/p per rank).
ClosedForm closed_form_time(const Topology& topo, const AlgToken& token, double bytes, const CostModel& model,
                            Collective collective = Collective::kAllReduce);

}  // namespace artune
