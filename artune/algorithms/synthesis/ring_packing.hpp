#pragma once
// Ring packing: weighted Hamiltonian rings over the participants at the rates the topology's capacity allows, for
// an all-reduce by rings (each ring reduce-scatters and all-gathers its pieces of the buffer), the `prings` plans.
//
// A ring whose every hop moves data at rate x carries an all-reduce at busbw x (its share S takes 2(N−1)/N·S/x on
// each hop), so rings side by side reach busbw Σ x. The packing is the LP
//     maximise Σ_c x_c  subject to  Σ_c x_c · (crossings of link l by ring c) ≤ rate(l) for every link l,
// over every ring c: an order of the participants, and for each hop the route between them or a path staged
// through a CPU socket (the tree packing's candidate edges, tree_packing.hpp). The rings are too many to list
// (7! orders of 8 GPUs, times the hops' choices), so the LP is solved by column generation: from the LP's duals
// (a price per link), the cheapest ring is found exactly by Held and Karp's dynamic program over subsets (each hop
// at its cheapest edge) and added while it costs less than the 1 it adds to the objective.
//
// Where it reaches the bound: every ring enters and leaves each participant once, over two different neighbours, so
// Σ x_c is at most any participant's in-rate, and on machines whose GPUs all take in alike (the whole DGX-1, DGX
// A100) that is the all-reduce's bound, which the LP reaches (126 GB/s busbw on dgx1-v100, 70 on dgx1-p100, 252 on
// dgx-a100). On GPU subsets whose GPUs differ the rings fall short of it (52 of 79.2 GB/s on dgx1-v100[0,1,2,4,5]),
// and the trees go further.
//
// Whole pieces: the buffer is cut into `chunks` equal pieces and each ring takes a whole number of them, in
// proportion to its rate (largest remainders), then pieces move between rings while that lowers the most loaded
// link's load. Equal pieces are what lets the fabric's sharing realise the LP: a link shared evenly between the
// transfers on it gives every piece the same rate, and a ring's pieces then move at the rate their count asks for.
// Pieces of unequal size (each ring's weight cut into a few copies, tried first) left the smaller rings' copies with
// more than their share and the plan well short of the LP in simulation.

#include <vector>

#include "artune/algorithms/synthesis/tree_packing.hpp"
#include "artune/topology/topology.hpp"

namespace artune::synthesis {

/// The most participants a ring packing takes (Held and Karp's program grows as 2^N·N²).
inline constexpr int kMaxRingPackingParticipants = 12;

/// One weighted ring.
struct PackedRing {
  std::vector<int> order;  ///< participants (indices into the participants) in ring order
  std::vector<int> hops;   ///< per position i: the edge (index into edges) from order[i] to order[i+1 mod N]
  int chunks = 0;          ///< its pieces of the buffer
  friend bool operator==(const PackedRing&, const PackedRing&) = default;
};

/// Rings over the participants with their shares of the buffer.
struct RingPacking {
  int chunks = 0;                ///< equal pieces of the buffer (the rounding of ring weights)
  double rate_gbps = 0;          ///< the LP's Σ x: the all-reduce's busbw at the rates given
  double bound_gbps = 0;         ///< the all-reduce's cut bound (busbw) at the same rates (≥ rate_gbps)
  double quantized_gbps = 0;     ///< busbw of the rings with their whole pieces (≤ rate_gbps)
  std::vector<TreeEdge> edges;   ///< every edge some ring uses
  std::vector<PackedRing> rings; ///< most pieces first; their pieces sum to `chunks`
  friend bool operator==(const RingPacking&, const RingPacking&) = default;
};

/// Packs rings over `participants` (topology nodes, in rank order; 2 to kMaxRingPackingParticipants) at `rates`
/// (by link). InvalidInput when there are more participants or they are not connected at those rates.
RingPacking pack_rings(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates,
                       const PackingOptions& options = {});

}  // namespace artune::synthesis
