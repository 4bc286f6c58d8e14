#pragma once
// Closed-form α-β-γ costs of all-reduce algorithms (Thakur, Rabenseifner and
// Gropp, "Optimization of Collective Communication Operations in MPICH",
// IJHPCA 2005) and the Patarasuk–Yuan bandwidth lower bound. n is the
// message size in bytes, p the number of ranks, α the cost of one message
// (µs), β the time per byte on a link (µs/B), γ the time per byte of a
// reduction (µs/B). The simulator is held to these on uniform topologies.

#include "simulator/cost_model.hpp"
#include "topology/topology.hpp"

namespace artune {

/// The three constants of the classic model.
struct AlphaBetaGamma {
  double alpha_us = 0;           ///< per message (latency + overheads)
  double beta_us_per_byte = 0;   ///< 1 / link bandwidth
  double gamma_us_per_byte = 0;  ///< 1 / reduce bandwidth
};

/// Ring: 2(p−1)α + 2(p−1)/p·nβ + (p−1)/p·nγ (reduce-scatter then all-gather over n/p chunks).
double ring_allreduce_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Recursive doubling: lg p·α + n·lg p·β + n·lg p·γ for p a power of two; otherwise the
/// p − p' extra ranks (p' = 2^⌊lg p⌋) first fold their vector into a partner (α + nβ + nγ)
/// and get the result back at the end (α + nβ).
double recursive_doubling_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Rabenseifner (recursive halving reduce-scatter, recursive doubling all-gather):
/// 2 lg p·α + 2(p−1)/p·nβ + (p−1)/p·nγ for p a power of two; otherwise the same fold
/// as recursive_doubling_us around the power-of-two core of p' ranks.
double halving_doubling_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Shuffle (parameter server) as TF builds it with pairwise reductions, `gathers` shards of n/g
/// bytes, each shard device with its own links to every rank: a shard on a rank (in place) takes
/// the p−1 other pieces one after another (p−1)(α + n/g·β + n/g·γ) and sends the result back to
/// all at once (α + n/g·β): pα + p·n/g·β + (p−1)·n/g·γ. A shard on a helper (a CPU) first copies
/// one piece, so it costs one more α + n/g·β.
double shuffle_us(int p, int gathers, double n_bytes, const AlphaBetaGamma& c, bool gather_on_ranks = true);
/// Ring all-gather of n bytes in all (n/p per rank; issue 17): (p−1)α + (p−1)/p·nβ.
double ring_allgather_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Ring reduce-scatter of n bytes per rank: (p−1)α + (p−1)/p·n(β + γ).
double ring_reducescatter_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Bruck all-gather: ⌈lg p⌉α + (p−1)/p·nβ (every rank receives each other block once, lg p rounds).
double bruck_allgather_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Recursive-halving reduce-scatter, p a power of two: lg p·α + (p−1)/p·n(β + γ).
double halving_reducescatter_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Patarasuk–Yuan lower bound on the bandwidth term of any all-reduce: 2(p−1)/p · n / B (B in GB/s).
double allreduce_lower_bound_us(int p, double n_bytes, double bandwidth_gbps);

/// The α, β, γ the simulator's cost model implies for one uncontended transfer-and-reduce from
/// `src` to `dst`: α = op overhead + route latency + link-kind α, β = 1 / min over the route's
/// links of bandwidth · efficiency, γ = 1 / reduce bandwidth of the destination's kind.
AlphaBetaGamma implied_alpha_beta_gamma(const Topology& topo, const CostModel& model, int src, int dst);

}  // namespace artune
