#pragma once
// NCCL as NCCL runs a collective: its channel search over the topology
// (NVIDIA/nccl src/graph/search.cc, paths.cc, rings.cc, topo.h), its
// algorithms (Ring, Tree, NVLS, NVLSTree, PAT) and protocols (LL, LL128,
// Simple) with the latency/bandwidth cost table of src/graph/tuning.cc, and
// its own pick of the cheapest algorithm × protocol per size.
//
// The simulator (simulator.cpp, compile_group) uses the channels found here to
// lay each channel's flows over the topology's links; the latencies and the
// protocol factors come from the same tables. Every constant is cited in
// nccl_model.cpp next to its definition.
//
// Rings are built hierarchically, as NCCL does: one search per machine over
// that machine's GPUs (no route matrix over the whole cluster), then the
// per-machine ring segments are chained across machines, one NIC per channel.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/core/nccl_release.hpp"
#include "artune/core/nccl_names.hpp"
#include "artune/simulator/nccl_tuning.hpp"
#include "artune/topology/net_kind.hpp"
#include "artune/topology/topology.hpp"

namespace artune::nccl {

/// NCCL's algorithms and protocols (core/nccl_names.hpp names them for the whole project).
using Algo = NcclAlgo;
using Proto = NcclProto;
inline constexpr int kAlgos = kNcclAlgos;
inline constexpr int kProtos = kNcclProtos;

/// "ring", "tree", "nvls", "nvlstree", "pat".
std::string_view to_string(Algo algo) noexcept;
/// "ll", "ll128", "simple".
std::string_view to_string(Proto proto) noexcept;

/// What a spec forces (NCCL_ALGO / NCCL_PROTO / minCTAs = maxCTAs); nullopt, 0 = NCCL's own choice.
struct Forced {
  std::optional<Algo> algo;    ///< forced algorithm
  std::optional<Proto> proto;  ///< forced protocol
  int channels = 0;            ///< forced channel count (always with an algorithm); 0 = the search's
  friend bool operator==(const Forced&, const Forced&) = default;
};
/// Parses a variant "ring", "ring.ll128", "tree.simple", "ring.simple.c8", … (empty = NCCL's choice; the
/// grammar of algorithms/spec.hpp parse_nccl_variant); InvalidInput naming `what`.
Forced parse_variant(std::string_view variant, std::string_view what);
/// Canonical text of a variant ("" when nothing is forced).
std::string to_string(const Forced& forced);

/// One channel: its ring over the group's GPUs (topology nodes, machine segments chained) and per machine
/// the NIC it enters and leaves by (empty on one machine).
struct Channel {
  std::vector<int> ring;      ///< topology GPU nodes in ring order; machine m's segment is ring[m·ppn, +ppn)
  std::vector<int> nics;      ///< per machine: NIC node of this channel
  std::vector<int> nic_gpus;  ///< per machine: that NIC's own GPU among the group's (nic_local_gpu), for PXN
  /// Per machine: the ports the channel's NIC stands for, itself first: more than one where NCCL fused the ports of
  /// one card into a virtual NIC (fuses_nic_ports); the channel's traffic across machines is spread over them.
  std::vector<std::vector<int>> nic_ports;
};

/// NCCL's graph for one group of GPUs: what ncclTopoCompute finds for the Ring pattern (Tree shares its
/// channels and chains, as NCCL builds trees on the ring's intra-machine order), plus NVLS.
struct Graph {
  int machines = 1;            ///< machines the group spans (NCCL nNodes)
  int ppn = 0;                 ///< GPUs of the group per machine
  int ranks = 0;               ///< GPUs in the group
  int compcap = 70;            ///< smallest compute capability (60, 70, 80, 90, 100)
  bool amd_cpu = false;        ///< NCCL's cpuVendor is AMD or mixed across machines (llMaxBws' AMD row)
  bool amd_x86_cpu = false;    ///< cpuArch x86 and cpuVendor AMD on every machine (getNetOverhead's 2 µs)
  bool power_cpu = false;      ///< cpuArch POWER on every machine (Tree/Simple PCI latency = Ring/Simple's)
  bool nvlink_intra = false;   ///< ring edges inside a machine are NVLink (NCCL's NVLINK latency class)
  bool ll128_ok = false;       ///< NCCL enables LL128 here (typeIntra ≤ NVB, NIC path ≤ PXB or PXN on sm90+, sm70+)
  PathType type_inter = PathType::kLoc;  ///< the ring graph's GPU-to-NIC path type (NCCL's typeInter; LOC alone)
  bool simple_tree = false;    ///< NCCL's tree graph has the simpler TREE pattern (Tree's bus bandwidth ×.85)
  int nvswitch = 0;            ///< NVSwitch nodes in a machine (NCCL's nvsCount)
  int channels = 0;            ///< ring/tree channels (after duplication)
  double bw_intra = 0;         ///< NCCL's per-channel GB/s inside a machine
  double bw_inter = 0;         ///< per-channel GB/s across machines (= bw_intra on one machine)
  /// The tree graph's per-channel GB/s inside a machine: bw_intra, raised on several machines as search.cc's
  /// pass 2 raises a tree pattern's bwIntra alone ("increase bwIntra for trees (2 nodes or collnet)"), up to
  /// twice bwInter while every channel's chain inside a machine fits its links. tuning.cc takes Tree's
  /// bandwidth from it on two machines (nNodes <= 2: bwIntra), from bw_inter on more.
  double tree_bw_intra = 0;
  int nvls_channels = 0;       ///< NVLS heads (0: NVLS not available)
  double nvls_bw = 0;          ///< NVLS per-head GB/s
  double nvls_bw_inter = 0;    ///< NVLS graph's bwInter on one machine (search.cc raises it to the top speed)
  std::vector<Channel> rings;  ///< one per channel
  /// The fabric of the NICs the channels cross (net_kind.hpp combine; InfiniBand's on one machine): NCCL adds
  /// its reported latency to each network step (twice for Simple), the simulator its extra step time, and
  /// protocols it does not allow are disabled across machines.
  NetFigures net;
  /// The NCCL release whose cost table chooses (its constants and formulas, nccl_model.cpp "Releases") and whose
  /// search found the channels where releases differ (NIC ports fused from 2.24, search()); the rest of the search
  /// and the simulator's time model are the modelled release's whatever it is.
  NcclRelease release = kModelledNcclRelease;
};

/// The most channels `algo` runs on `graph`: the search's ring/tree channels, NVLS's heads (0: not here).
int max_channels(const Graph& graph, Algo algo) noexcept;
/// The fewest channels `algo` can run on: NVLS and NVLSTree need two heads, the others one.
int min_channels(Algo algo) noexcept;
/// `graph` with `algo` restricted to its first `channels` channels (as NCCL runs when minCTAs = maxCTAs =
/// channels): the cost table, the latencies and the simulator's flows of that algorithm then see only these.
/// InvalidInput naming `what` unless min_channels(algo) ≤ channels ≤ max_channels(graph, algo).
Graph with_channels(const Graph& graph, Algo algo, int channels, std::string_view what);

/// A NIC's own GPU among `gpus` (paths.cc ncclTopoGetLocalGpu over the communicator's GPUs of that machine): the one
/// with the most bandwidth to it, then the best path type, then the first; -1 for none.
int nic_local_gpu(const Topology& topo, int nic, const std::vector<int>& gpus);

/// The path a GPU sends to a NIC of its machine on (NCCL's paths.cc, "PXN"): the topology's route, or, where the
/// NIC's own GPU (`local_gpu`, nic_local_gpu) is within PXB of the NIC, joined to `gpu` by NVLink, and has more
/// bandwidth to the NIC than `gpu` or spares it a path through a CPU, the NVLink route to that GPU followed by its
/// route to the NIC, of type PXN. NCCL takes it in this direction only (it receives from a NIC directly);
/// NCCL_PXN_DISABLE is 0 by default since 2.12.
Route net_send_route(const Topology& topo, int gpu, int nic, int local_gpu);

/// Searches NCCL's channels for a group of GPU nodes (ordered as the group's ranks). The group must hold
/// the same number of GPUs on every machine it spans; InvalidInput otherwise, or when a member is not a GPU.
/// Searches as `release` does where releases differ: from 2.24 NCCL fuses the ports of one NIC card (PCI functions of
/// one device: NIC nodes whose bus ids match but for the last character) into one virtual NIC of their summed speed
/// (fuses_nic_ports). The result's `release` is `release`.
Graph search(const Topology& topo, const std::vector<int>& gpus, const NcclRelease& release = kModelledNcclRelease);
/// Whether `release` fuses a NIC card's ports into one virtual NIC (topo.cc ncclTopoMakeVNics, NCCL_NET_MERGE_LEVEL
/// PORT by default, from v2.24.3-1).
bool fuses_nic_ports(const NcclRelease& release) noexcept;

/// NCCL's latency tables in this model's algorithm order (tuning.cc baseLatencies; hwLatencies by link class
/// NVLINK, PCI, NET): NCCL's own, or with a calibration written into them as the tuner plugin writes it into
/// NCCL's (nccl_tuning.hpp), for the choice NCCL makes once the plugin has run.
struct LatencyTables {
  double base[kAlgos][kProtos] = {};
  double hw[nccl_tuning::kHwClasses][kAlgos][kProtos] = {};
  /// NCCL's defaults (the modelled release's, kModelledNcclRelease).
  static const LatencyTables& defaults();
  /// The tables of an NCCL release (tuning.cc as that release shipped it).
  static LatencyTables of(const NcclRelease& release);
  /// NCCL's defaults with `c` written in for a communicator over `machines` machines.
  static LatencyTables calibrated(const nccl_tuning::Calibration& c, int machines);
};

/// NCCL's cost table for one collective over a graph: latency (µs) and bus bandwidth (GB/s) per algorithm ×
/// protocol, bandwidth 0 where NCCL disables the pair (tuning.cc ncclTopoTuneModel).
struct CostTable {
  double latency_us[kAlgos][kProtos] = {};  ///< NCCL's latencies
  double bandwidth[kAlgos][kProtos] = {};   ///< NCCL's algorithm bandwidth (GB/s); 0 = disabled
};
/// True for the collectives NCCL's model here covers: all-reduce, all-gather, reduce-scatter.
bool modelled(Collective coll) noexcept;
/// The cost table of `coll` (modelled) on `graph`, as `graph.release` computes it. All-reduce: Tree, Ring, NVLS (one machine), NVLSTree
/// (several); all-gather and reduce-scatter: Ring, NVLS (one machine) and PAT (one GPU per machine), over
/// k−1 steps, NVLS moving (ppn−1)/ppn of its bandwidth and PAT ×.75 of the ring graph's (tuning.cc).
CostTable cost_table(const Graph& graph, Collective coll);
/// The same with NCCL's latencies taken from `tables` (NCCL's formula, tuning.cc, over other constants).
CostTable cost_table(const Graph& graph, Collective coll, const LatencyTables& tables);
/// The cost table of an all-reduce on `graph`.
inline CostTable all_reduce_table(const Graph& graph) { return cost_table(graph, Collective::kAllReduce); }
/// NCCL's predicted time (µs) of one collective of `bytes` (NCCL's nBytes: the whole buffer) with algorithm
/// × protocol (ncclTopoGetAlgoTime); negative when disabled.
double algo_time(const Graph& graph, const CostTable& table, Algo algo, Proto proto, double bytes,
                 Collective coll = Collective::kAllReduce);

/// The pick for one collective.
struct Choice {
  Algo algo = Algo::kRing;
  Proto proto = Proto::kSimple;
  int channels = 0;         ///< channels it runs on
  double nccl_time_us = 0;  ///< NCCL's own estimate (its cost table), for reports
};
/// NCCL's choice for a collective `coll` (an all-reduce unless given) of `bytes` restricted by `forced`;
/// InvalidInput naming `what` when the forced algorithm/protocol/channel count is not available on this graph.
/// With forced channels the choice is costed on with_channels(graph, algo, channels), which is the graph the
/// collective then runs on.
Choice choose(const Graph& graph, double bytes, const Forced& forced, std::string_view what,
              Collective coll = Collective::kAllReduce);
/// NCCL's choice with its latencies from `tables` (e.g. LatencyTables::calibrated: what NCCL picks once the tuner
/// plugin wrote a calibration into its constants).
Choice choose(const Graph& graph, double bytes, const Forced& forced, std::string_view what, Collective coll,
              const LatencyTables& tables);

/// Per-step hardware latency (µs) inside a machine and across machines, and the base latency, for an
/// algorithm × protocol (tuning.cc baseLatencies, hwLatencies).
struct Latencies {
  double base_us = 0;   ///< once per collective
  double intra_us = 0;  ///< per step over NVLink or PCIe
  double inter_us = 0;  ///< per step across the network
};
/// Per-step latency a calibration adds to NCCL's defaults (µs, may be negative; the sum stays ≥ 0).
struct HopAdjust {
  double intra_us = 0;  ///< per step inside a machine (NVLink or PCIe, whichever the rings use)
  double inter_us = 0;  ///< per step across the network
};
/// The latencies NCCL charges on `graph`, shifted by a calibration's `adjust`.
Latencies latencies(const Graph& graph, Algo algo, Proto proto, const HopAdjust& adjust = {});
/// Total latency NCCL charges for a collective (its cost table's latency term), shifted by `adjust`.
double collective_latency_us(const Graph& graph, Collective coll, Algo algo, Proto proto,
                             const HopAdjust& adjust = {});
/// collective_latency_us of an all-reduce.
inline double all_reduce_latency_us(const Graph& graph, Algo algo, Proto proto, const HopAdjust& adjust = {}) {
  return collective_latency_us(graph, Collective::kAllReduce, algo, proto, adjust);
}

// ---- The time an all-reduce's latency takes (what the simulator charges), apart from NCCL's cost table ----
//
// NCCL's cost table (above) exists to *choose*: some of its constants are steering weights, not times (NVLS
// is charged 25 µs per call so that small sizes stay on Ring/Tree LL), and it leaves out what the host
// spends issuing the call. The simulator's small-message time is
//     launch_us(gpus per thread, CUDA graph) + device_latency_us(graph, algo, proto)
// where the device part is NCCL's base + per-step latencies per link class (steps crossing the network pay
// the network's, the others NVLink's or PCIe's), except NVLS whose multicast round grows with the GPUs it
// joins (5.84 µs measured on 2 H100s, NVIDIA/nccl#1259, to NCCL's 25 µs at 8) and NVLSTree, whose network
// steps take Tree/Simple's network step (14 µs; NCCL 2.28.9's 20.9 µs for NVLSTree weighs the choice only),
// and the launch part is one kernel launch per GPU the issuing thread drives.
// nccl_model.cpp cites every constant and the published rows each was derived from.

/// Host time (µs) of issuing one NCCL collective: one launch per GPU the calling thread drives
/// (nccl-tests `-g N` from one thread: N; one process per GPU: 1), none per call when the calls are replayed
/// from a CUDA graph (nccl-tests `-G`).
double launch_us(int gpus_per_thread = 1, bool cuda_graph = false);
/// Device time (µs) of NVLS's multicast round joining `gpus` GPUs of one machine (the constant derived from
/// published rows, see nccl_model.cpp; tests/simulator/test_nccl_validation.cpp recomputes it from them).
double nvls_round_us(int gpus);
/// Device-side latency (µs) of one collective (all-reduce unless given) with algorithm × protocol on `graph`,
/// shifted by `adjust`.
double device_latency_us(const Graph& graph, Algo algo, Proto proto, const HopAdjust& adjust = {},
                         Collective coll = Collective::kAllReduce);

/// Wire bytes per data byte of a protocol (LL: 8-byte flag per 8 bytes; LL128: 8 of every 128 bytes).
double wire_factor(Proto proto) noexcept;
/// Cap on one channel's data rate (GB/s) of an algorithm × protocol from NCCL's per-channel limits, 0 = none
/// (Ring: its bus bandwidth per channel; Tree, which runs all-reduce only: the algorithm bandwidth of NCCL's table
/// per channel × NCCL's size correction at `bytes`, as NCCL's own estimate of the call has it).
double channel_cap_gbps(const Graph& graph, Algo algo, Proto proto, double bytes);
/// NCCL's size correction of Tree's all-reduce bandwidth (tuning.cc treeCorrectionFactor) at `bytes`.
double tree_correction(Proto proto, double bytes) noexcept;
/// NVLS efficiency of the switch's reduction (tuning.cc nvlsEfficiency).
double nvls_efficiency(const Graph& graph) noexcept;

/// PAT (NCCL 2.23+, src/graph/tuning.cc ncclPatEnable and ncclTopoTuneModel): NCCL runs it for AllGather and
/// ReduceScatter only (never AllReduce: the cost table skips PAT for it), with the Simple protocol, when
/// every rank is on its own machine (nNodes == nRanks), on sm60+, with host-side networking. choose() never
/// picks PAT for an all-reduce (`nccl.pat` is refused there); these give what NCCL charges an
/// AllGather/ReduceScatter.
bool pat_enabled(const Graph& graph) noexcept;
/// NCCL's PAT latency (µs) for AllGather/ReduceScatter: 8 + log2(machines) · (network Tree latency / 3.5)
/// + 2.8 per rank; negative when PAT is not enabled on `graph`.
double pat_latency_us(const Graph& graph) noexcept;

/// Parent of machine `m` in NCCL's double binary tree `tree` (0 or 1) over `machines`; -1 for the root.
int tree_parent(int machines, int tree, int m);

}  // namespace artune::nccl
