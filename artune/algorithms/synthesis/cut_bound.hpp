#pragma once
// The min-cut throughput bound of a collective on a topology (ForestColl, arXiv 2402.06787): no schedule
// moves data across a set of devices faster than the links crossing its boundary allow.
//
// All-gather of a buffer of M bytes over participants P (|P| = N, block M/N each): a set S of devices
// (GPUs, switches, CPUs, NICs alike) holding some but not all participants has to send the |S ∩ P| blocks
// it holds to the participants outside, over the links leaving S of total rate B⁺(S), so
//
//     T_allgather ≥ M/N · max_S |S ∩ P| / B⁺(S).
//
// Reduce-scatter is the same on the reversed links: every participant outside S needs its block reduced
// over S's inputs, at least one block each (S may combine its own first). Both are refined by what two
// participants can take in together over their own links (two GPUs under one PCIe switch share its uplink:
// routes never turn in a switch between NVLink peers), each needing N−1 blocks.
//
// All-reduce: every set S splitting the participants must send the other side M bytes of results, so
// T ≥ M / min_S B⁺(S), whatever reduces where (NVLS included: where the hardware reduces in the network
// that is the bound). Plans that reduce on the participants also move 2(N−1)·M bytes into them in all
// (N−1 transfers to combine N inputs and N−1 to spread the sum: the one-way gossip bound), so
// T ≥ 2(N−1)·M / (what the participants can take in together); the bound is the larger. On rings of equal
// links, fully connected machines and stars it is the classic 2(N−1)/N · M / B of one GPU's links B; where a
// slow link splits the GPUs (QPI between DGX-1 quads) the split cut sets it, and a plan that runs its
// reduce-scatter and all-gather in the two directions of that link at once can beat the sum of the two
// collectives' bounds.
//
// Partitions refine the all-reduce's bound where neither of those binds: contract each part of a partition of
// the devices (every part holding a participant) to one vertex, and a plan becomes a gossip among the p parts,
// which needs 2(p−1) transfers of every byte between parts whatever combines where (the one-way gossip bound
// again, of which the volume bound is the finest partition), so T ≥ 2(p−1)·M / (the rates of the links
// between parts, both ways). Where three groups of GPUs are joined by slower links than each holds inside
// (a DGX-1 quad and two GPUs of the other), it is tighter than any single cut: a spanning tree crosses such
// a partition at least twice, a cut only once.
//
// LPs of flows refine the all-reduce's bounds on one machine, all from what a device does with a byte: a
// participant sends what it knows, a switch forwards a byte as it came, and only a device with memory outside the
// plan (a CPU socket, another GPU) can copy it several ways or combine it. The two-way split asks each split for
// flows both ways at once, which share no link unless such a device sits at both ends (it holds whatever combines
// where). The volume and partition bounds ask for each participant's (each part's) receptions as flows from the
// others, which a CPU socket can copy but not create; like the volume bound itself, they hold for plans that
// combine on the participants (every family but NVLS, where they are not asked, and the shuffle gathered on CPU
// sockets, which bound_sim checks never beats them on the shipped machines).
//
// The maximum over cuts is found without enumerating them. With a source s joined to every participant by
// an arc of rate x, the minimum s–u cut over all u ∈ P is ≥ N·x exactly when B⁺(S) ≥ x·|S ∩ P| for every
// S above, so the largest such x (the all-gather's rate per block) is a ratio min B⁺(S)/|S ∩ P|, which
// Dinkelbach's iteration finds: start from a single GPU's in-rate over N−1, run the max flows, and as long
// as one falls short, move x down to the ratio of the cut that fell short. Each step strictly lowers x
// through cut ratios, so few steps suffice (2–4 on the shipped configs). Machines of a cluster that are
// built alike are asked once: the max flow to a GPU equals the flow to its twins on the other machines.

#include <limits>
#include <string>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/topology/link_rates.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// A set of devices and the links crossing its boundary that bound a collective.
struct BoundCut {
  std::string
      what;  ///< "all-gather", "reduce-scatter", "split", "in-network", "volume", "partition" or "two-way split"
  std::vector<int> inside;  ///< topology nodes of S (the side that sends), sorted
  std::vector<int> links;   ///< links out of S, by index
  int ranks_inside = 0;     ///< participants in S
  int ranks_outside = 0;    ///< participants outside S
  double gbps = 0;          ///< Σ rates of `links`
  double rate_gbps = 0;     ///< what it allows: per block (all-gather, reduce-scatter), else the all-reduce's algbw
  /// Set when the bound is on what a few participants can take in together (all-gather; send out, reduce-scatter)
  /// over their own links rather than on a cut: these participants (nodes), each needing N−1 blocks.
  std::vector<int> receivers;
  /// Set for a partition (all-reduce): the nodes of each part, the participants' parts first; `links` are the
  /// links between parts (both ways), `gbps` their rates.
  std::vector<std::vector<int>> parts;
  /// Set where an LP of flows set it (volume, partition): `links` are then the links its optimum fills, `parts`
  /// the participants alone.
  bool as_flows = false;
};

/// The bound of one collective over a topology's participants at some link rates.
struct CollectiveBound {
  Collective collective = Collective::kAllReduce;  ///< all-reduce, all-gather or reduce-scatter
  int ranks = 0;                                   ///< participants N
  double us_per_byte = 0;   ///< the least time per byte of the buffer (nccl-tests' size); 0 for one rank
  double algbw_gbps = 0;    ///< size / time at the bound (0 for one rank)
  double busbw_gbps = 0;    ///< algbw · bus_factor(collective, N)
  bool in_network = false;  ///< set by the in-network cut (all-reduce where the hardware reduces)
  /// The cut that sets it, one: the collective's own (all-gather, reduce-scatter), or for the all-reduce the
  /// tightest of the split ("split", "in-network" with NVLS), volume and partition bounds.
  std::vector<BoundCut> cuts;
  /// The bound's time for a buffer of `bytes` (µs).
  double time_us(double bytes) const { return bytes * us_per_byte; }
};

/// The all-gather's bound: the largest rate per block (GB/s) and the cut that sets it (`reverse`: the links
/// reversed, i.e. the reduce-scatter's). `participants` are topology nodes (default: every GPU). InvalidInput
/// when a participant cannot reach the others.
BoundCut spread_cut(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates,
                    bool reverse = false);
/// The least rate (GB/s) of a cut splitting the participants, and that cut: no all-reduce delivers results
/// faster (algbw ≤ it), whatever reduces where.
BoundCut splitting_cut(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates);
/// The all-reduce's volume bound: an all-reduce whose reductions run on the participants moves 2(N−1) buffers
/// into them in all (N−1 to combine N inputs, N−1 to spread the result: the one-way gossip bound), so
/// algbw ≤ (what the participants can take in together, every GPU and CPU sending) / 2(N−1). On one machine of up
/// to kPartitionParticipants participants, what they take in is also asked as flows (an LP): each participant's
/// from the others, none forwarding another's, switches forwarding, a CPU socket (or a GPU outside the plan)
/// copying a byte it was sent to several receivers, so that a byte loads a link once per receiver unless such a
/// copy lies ahead; the lesser of the two stands, its `links` then the links the LP fills. `rate_gbps` is that
/// algbw; `receivers` all participants.
BoundCut volume_cut(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates);

/// The all-reduce's partition bound: algbw ≤ (Σ rates of the links between parts) / 2(p−1) over partitions of the
/// devices into p ≥ 3 parts each holding a participant (two parts are the split cut's, which is tighter). Every
/// partition of up to kPartitionParticipants participants of one machine is tried, each other device of the
/// machine put in the part it has the most rate to (then moved while a move lowers the rate between parts;
/// devices with one neighbour, such as NICs, join it; the network and other machines are one unit); any
/// partition gives a bound, so this one is a bound even where a better partition exists. On a one-machine topology
/// the kPartitionsAsFlows partitions of least rate are then asked as flows between the parts (an LP: each part takes
/// in at least x and all of them 2(p−1)·x from the other parts' participants, switches forwarding, CPU sockets
/// copying but never creating a byte), which can only lower it (the cut's `as_flows` then set), those whose rate
/// between parts is kFlowsBelowCut times `below` or more skipped; `as_flows` false (a switch that reduces, NVLS,
/// combines outside every part) asks none. `rate_gbps` is that algbw; infinite with fewer than 3 or more than
/// kPartitionParticipants participants, or participants on several machines.
constexpr int kPartitionParticipants = 8;
/// On a machine of its own, the partitions of least rate between parts, up to this many, are asked again as flows (an
/// LP per partition): a PCIe uplink that carries bytes both into a part and out of another counts once between the
/// parts, but its rate is spent on both. The least of all stands.
constexpr int kPartitionsAsFlows = 4;
/// A partition whose rate between parts is this many times the least bound known is not asked as flows: on the DGX-1
/// subsets the flows lower a binding partition's rate by up to about a tenth (56.67 → 51.67 GB/s on
/// dgx1-v100[0,1,2,4,6,7], 49 → 44.5 on [1,2,3,6,7]).
constexpr double kFlowsBelowCut = 1.15;
BoundCut partition_cut(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates,
                       bool as_flows = true, double below = std::numeric_limits<double>::infinity());

/// The all-reduce's two-way split bound: the split cut crossed both ways at once. A plan's results cross every set S
/// splitting the participants both ways (M bytes of what the rest adds into S, M of what S adds out), and the two
/// directions can share a link only where a device that can combine copies (a CPU socket's memory, a GPU outside
/// the plan) feeds it towards another: bytes a participant emits carry what its side knows, useless to its own
/// side, and switches forward them unchanged. So a link that carries S's bytes out cannot also carry the rest's
/// bytes towards S, and where both directions climb the same PCIe uplink (a GPU whose NVLink peer sits under its
/// switch, every route between them the NVLink) the split cut's rate is out of reach. For each split, one LP: a
/// flow of x from the rest into S and one of x from S into the rest over the bound's network (routes' turns only,
/// participants sending or receiving but never forwarding), summed on every link but those between combining
/// devices; its largest x bounds the algbw. Every split of up to kPartitionParticipants participants of a
/// one-machine topology is asked but those that cannot go below `below` (the least rate is returned, infinite when
/// none is asked). `inside` holds S's participants, `links` the links the optimum fills.
BoundCut two_way_split_cut(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates,
                           double below = std::numeric_limits<double>::infinity());

/// The bound of `collective` (all-reduce, all-gather or reduce-scatter) over `participants` (empty: every GPU)
/// at `rates`; `in_network_reduction`: the hardware can reduce in the network (all-reduce only).
CollectiveBound collective_bound(const Topology& topo, std::vector<int> participants, Collective collective,
                                 const LinkRates& rates, bool in_network_reduction = false);

/// "gpu0,gpu1 | 3 links, 60.00 GB/s": a cut for one line of text (S's participants, or its nodes when it
/// holds none, then the boundary).
std::string cut_text(const Topology& topo, const BoundCut& cut);

}  // namespace artune
