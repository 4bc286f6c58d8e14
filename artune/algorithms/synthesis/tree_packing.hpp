#pragma once
// Spanning-tree packing (Blink, MLSys'20; ForestColl, arXiv 2402.06787): weighted trees per root that move
// every participant's block to all others (out-trees: all-gather) or reduce every block into its owner
// (in-trees: reduce-scatter) at the rate the topology's capacity allows.
//
// How the trees are found:
//  1. Tree edges. A transfer between two participants takes NCCL's route (routes never relay through a
//     GPU), or is staged through a CPU socket's memory: two routes, GPU → CPU → GPU, which puts the PCIe
//     links of NVLink peers to use. Each edge consumes every link of its route(s).
//  2. Capacities by LP (LEMON on GLPK). Give every edge e a rate y_e with Σ_{e ∋ l} y_e ≤ rate(l) on every
//     link l, and maximise the rate x per root such that for every participant u the others can send x each
//     to u within y. By ForestColl's theorem (Edmonds' branchings on the graph with a source joined to every
//     participant at rate x) this is exactly when arborescences from every root, x of weight each, fit within
//     y. The condition enters the LP as cuts (every set of participants takes in x per participant outside it),
//     added as max flows of the LP's solution find them violated. Then, keeping x, the LP minimises
//     Σ y_e · |links of e| (no idle detours), then what any ordered pair carries beyond x (shallow trees). In-
//     trees on a topology whose links have equal rates both ways are the out-trees reversed.
//  3. Trees by Lovász's constructive proof of Edmonds' theorem: grow an arborescence from the root with the
//     most weight still to place, adding only arcs after which the arc's head can still get the remaining
//     demand from the source (one max flow on LEMON: only the cuts of sets holding the head change), then
//     give it the largest weight that keeps every participant fed (Dinkelbach over the cuts that fall
//     short), subtract, repeat.
//  4. Chunks. Each root's trees split its block in proportion to their weights, rounded to whole chunks of
//     1/chunks of the block (largest remainders); a tree that rounds to no chunk is dropped.
//
// The packing's rate can fall short of the cut bound (cut_bound.hpp) only where the bound counts paths no
// transfer takes: PCIe between NVLink peers without a CPU in the way, NVLink relayed through a GPU's copy
// engines. `rate_gbps` and `bound_gbps` say how far.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "artune/algorithms/synthesis/cut_bound.hpp"
#include "artune/topology/topology.hpp"

namespace artune::synthesis {

/// The most participants a tree packing takes. The reduce-broadcast LP has a flow per participant over every
/// pair's edges, and GLPK's simplex time grows steeply with them (`artune simulate -t uniform:N -s rbtrees -b 1M -e
/// 1M`: 0.24 s at 16 GPUs, 1.8 s at 24, and with this limit lifted 7.2 s at 26 and 96 s at 32; docs/bound.md); clusters
/// pack each machine's GPUs on their own.
inline constexpr int kMaxTreePackingParticipants = 24;

/// How data moves between two participants along a tree: the route between them, or staged through a CPU.
struct TreeEdge {
  int from = -1;           ///< participant (index into the participants) the data leaves
  int to = -1;             ///< participant it reaches
  int via = -1;            ///< topology node of the CPU socket it is staged through, or -1 (the route)
  std::vector<int> links;  ///< topology links it crosses (both routes when staged), in order
  friend bool operator==(const TreeEdge&, const TreeEdge&) = default;
};

/// One weighted tree of a root.
struct WeightedTree {
  int root = -1;                 ///< participant index
  std::vector<int> parent_edge;  ///< per participant: the edge joining it to its parent (index into edges); root −1
  int chunks = 0;                ///< its share of the root's block, in chunks
  friend bool operator==(const WeightedTree&, const WeightedTree&) = default;
};

/// Trees for every root: out-trees (data flows from the root) or in-trees (toward it).
struct TreePacking {
  bool toward_root = false;         ///< in-trees: an edge carries data from a participant to its parent
  int chunks = 0;                   ///< chunks per block
  double rate_gbps = 0;             ///< per-root rate of the fractional packing (GB/s at the rates given)
  double bound_gbps = 0;            ///< the cut bound's per-root rate at the same rates (≥ rate_gbps)
  std::vector<TreeEdge> edges;      ///< every edge some tree uses
  std::vector<WeightedTree> trees;  ///< by root, heaviest first; each root's chunks sum to `chunks` (reduce-broadcast
                                    ///< trees: all the trees' chunks do, each tree rooted at its centre)
  friend bool operator==(const TreePacking&, const TreePacking&) = default;
};

/// Knobs of the packing.
struct PackingOptions {
  int chunks = 1024;    ///< chunks per block (the rounding of tree weights)
  bool staging = true;  ///< allow edges staged through a CPU socket of the machine
};

/// Packs trees over `participants` (topology nodes, in rank order; 2 to kMaxTreePackingParticipants) at `rates`
/// (by link). InvalidInput when the participants are not connected at those rates, or too many.
TreePacking pack_trees(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates,
                       bool toward_root, const PackingOptions& options = {});

/// Trees for an all-reduce by reduction and broadcast (Blink, MLSys'20): weighted spanning trees packed from one
/// root (the participant with the most direct rate), each carrying its share (chunks of the whole buffer, summing
/// to `chunks`) up as an in-tree (reduce, every edge reversed) and down as an out-tree (broadcast, the edges'
/// direction) at once, so a tree edge loads the links of both directions. The LP maximises the trees' total
/// rate x: by Edmonds' theorem on an orientation of the edges (Frank), arborescences of weight x from the root
/// fit, and x is then the all-reduce's algbw at `rates` (`rate_gbps`). Every tree crosses each split cut once
/// each way, crosses a partition into p parts at least p − 1 times each way, and its N−1 edges carry its share
/// once each way, which is what the all-reduce's split, partition and volume bounds count (`bound_gbps`); x
/// falls short of them where routes bind that the links do not (a staged edge loads its CPU's PCIe uplink
/// whichever way it carries, docs/bound.md) or a route detours. Returned as out-trees, each then rooted
/// at its centre (the participant that reaches every other over the tree in the fewest transfers, a staged edge
/// counting two): the links' loads do not depend on the root, the pipeline's depth does.
TreePacking pack_reduce_broadcast_trees(const Topology& topo, const std::vector<int>& participants,
                                        const LinkRates& rates, const PackingOptions& options = {});

/// Depth of the deepest tree (edges from root to the farthest participant).
int max_depth(const TreePacking& packing);

/// The algbw (GB/s) of `collective` that trees packed over the routes carry at `rates`: the reduce-broadcast
/// packing's rate for the all-reduce, N × the per-root rate of the out-trees (all-gather) or in-trees
/// (reduce-scatter); 0 for fewer than 2 participants. Not a bound on every plan: the fractional optimum of the
/// trees family's LP (no rounding, no schedule), at or below the cut bound (collective_bound). Where it is below,
/// routes bind that no cut sees, and no tree packing over these routes reaches the bound. `artune bound` prints
/// it beside the bound (docs/bound.md).
double packed_trees_algbw(const Topology& topo, const std::vector<int>& participants, Collective collective,
                          const LinkRates& rates);

/// The edges a packing may use between the participants (every ordered pair: the route, and with `staging`
/// each path staged through a CPU socket of their machine that crosses other links), usable at `rates`.
std::vector<TreeEdge> candidate_edges(const Topology& topo, const std::vector<int>& participants,
                                      const LinkRates& rates, bool staging);
/// The links a tree edge crosses the other way (a reduce-broadcast tree's reduction up the edge): the reverse route
/// between its participants, or back through the same CPU when staged. `participants` as packed (topology nodes).
std::vector<int> reverse_links(const Topology& topo, const std::vector<int>& participants, const TreeEdge& edge);
/// Largest remainders: counts proportional to `weights` (not all 0), summing to `total`.
std::vector<int> apportion(const std::vector<double>& weights, int total);

/// Whole pieces for items that each load links (rings, reduce-broadcast trees), balanced over the links.
struct LoadedPieces {
  std::vector<int> pieces;  ///< per item, summing to the total
  double max_load = 0;      ///< the most loaded link's pieces (times crossed) over its rate
};
/// `total` equal pieces apportioned to the items by `weights` (apportion), then moved one at a time from an item
/// crossing the most loaded link to the item whose taking it lowers that maximum most, while one does: rounding
/// to whole pieces then overloads the links that bind as little as it can. crossings[i]: link → how many times
/// one piece of item i crosses it; a link's load is Σ pieces × crossings over its rate (ties: the lowest link).
LoadedPieces apportion_by_load(const std::vector<double>& weights, int total,
                               const std::vector<std::map<int, int>>& crossings, const LinkRates& rates);

}  // namespace artune::synthesis
