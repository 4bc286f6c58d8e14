#include "artune/simulator/nccl_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <span>
#include <unordered_map>

#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"

namespace artune::nccl {

namespace {

// ---- Constants of NVIDIA/nccl (release 2.28 tree, fetched for this model) ----

// Usable GB/s per NVLink lane by GPU generation: src/graph/topo.h SM60_NVLINK_BW 18, SM70_NVLINK_BW 20,
// SM80_NVLINK_BW 20, SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1.
double lane_gbps(int compcap) {
  if (compcap >= 100) return 40.1;
  if (compcap >= 90) return 20.6;
  if (compcap >= 80) return 20.0;
  if (compcap >= 70) return 20.0;
  if (compcap >= 60) return 18.0;
  return 20.0;  // topo.h: unknown generations get SM80_NVLINK_BW
}

// Speed steps of the channel search (src/graph/search.cc speedArrayIntra/Inter, sm90…, sm100…).
constexpr double kSpeedIntra[] = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
constexpr double kSpeedInter[] = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                  7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm90SpeedIntra[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
constexpr double kSm90SpeedInter[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                      15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm100SpeedIntra[] = {90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
constexpr double kSm100SpeedInter[] = {96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0,
                                       20.0, 17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
// Ring channels: src/init.cc ringGraph->maxChannels = MAXCHANNELS / 2 (src/include/device.h MAXCHANNELS 64).
constexpr int kMaxRingChannels = 32;
// NVLS heads: src/include/device.h NCCL_MAX_NVLS_ARITY 32 (search.cc caps NVLS channels by it and the GPUs).
constexpr int kMaxNvlsArity = 32;
// search.cc ncclTopoCompute: lower the speed while the next step keeps > 49% of the best found.
constexpr double kSpeedKeepRatio = 0.49;
// Bound on the depth-first ring search per channel (search.cc bounds its own with NCCL_SEARCH_TIMEOUT).
constexpr long kSearchBudget = 200000;

// tuning.cc, indices [algo: Tree, Ring, NVLS, NVLSTree, PAT][proto: LL, LL128, Simple]. CollNet omitted.
constexpr double kBaseLatency[kAlgos][kProtos] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
// hwLatencies [NVLINK, PCI, NET][algo][proto].
constexpr double kHwLatency[3][kAlgos][kProtos] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}}};
enum Hw { kHwNvlink = 0, kHwPci = 1, kHwNet = 2 };
// tuning.cc llMaxBws [Volta, Ampere, Hopper, Blackwell or Intel/AMD CPU][nodes 1, 2, >2].
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
// tuning.cc perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws, perChMaxNVLSTreeBws [compcap][nodes].
constexpr double kPerChRingLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}};
constexpr double kPerChTreeLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChNvlsTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
// tuning.cc nvlsEfficiency [Volta, Ampere, Hopper, Blackwell].
constexpr double kNvlsEfficiency[4] = {0.0, 0.0, 0.85, 0.74};
// tuning.cc treeCorrectionFactor [proto][log2(bytes/64)], 64 B to 256 MB.
constexpr double kTreeCorrection[kProtos][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
// tuning.cc getNetOverhead: 1 µs per network step on Intel hosts, 2 on AMD; ×3 for Simple.
constexpr double kNetOverheadIntelUs = 1.0;
constexpr double kNetOverheadAmdUs = 2.0;
// tuning.cc: ring busBw ×.5 for LL, ×.92 for LL128; tree ×.92, LL ÷3.8, LL128 ×7/9 (one node) or 120/128.
constexpr double kRingLLFactor = 0.5;
constexpr double kRingLL128Factor = 0.92;
constexpr double kTreeFactor = 0.92;
constexpr double kTreeLLFactor = 1.0 / 3.8;
constexpr double kTreeLL128OneNodeFactor = 7.0 / 9.0;
constexpr double kTreeLL128Factor = 120.0 / 128.0;
// tuning.cc: Tree's bus bandwidth ×.85 when its graph has the simpler TREE pattern (one GPU to and from the NIC;
// comm->maxTreePattern, over every rank, since v2.26.2-1); Graph::simple_tree says when search.cc ends there.
constexpr double kSimpleTreeFactor = 0.85;
// tuning.cc: PAT's bus bandwidth is the ring graph's ×.75.
constexpr double kPatBusFactor = 0.75;
// ncclTopoGetAlgoTime: multi-node Ring/Simple latency ×1.9 before sm80, ×1.4 after ("plateau effect").
constexpr double kRingPlateauPreAmpere = 1.9;
constexpr double kRingPlateau = 1.4;
// Protocol wire formats (src/device/prims_ll.h: 8-byte lines of 4 data + 4 flag bytes; prims_ll128.h:
// 128-byte lines carrying 120 data bytes).
constexpr double kLLWire = 2.0;
constexpr double kLL128Wire = 128.0 / 120.0;

// tuning.cc ncclPatEnable: sm60+ (CUDA atomics), one GPU per node; PAT latency: 8 µs base, the network Tree
// latency (ppn = 1) over 3.5 per tree level, and a linear 2.8 µs per rank.
constexpr int kPatMinCompcap = 60;
constexpr double kPatLevelDivisor = 3.5;
constexpr double kPatPerRankUs = 2.8;

// ---- Releases: how NCCL's choice differed before the modelled release (src/graph/tuning.cc by git tag) ----
// The constants above are v2.28.9-1's. Earlier releases chose with other entries and formulas; each kNcclXYZ
// below is the first release that ships what its line says, read at the tag named with `git diff vA vB --
// src/graph/tuning.cc` on NVIDIA/nccl between consecutive release tags (v2.19.3-1, v2.20.5-1, v2.21.5-1, …); a
// release before it had what the parentheses say. Only the choice follows the release (the cost table, NCCL's
// printed estimate, the algorithms it may run); the channel search and the time a pick takes stay the modelled
// release's.
//  - v2.21.5-1: Ring/LL bus bandwidth ×.5 (before: ×1/4, or ×1/3 for single-machine all-gather and
//    reduce-scatter); llMaxBws' Hopper row {141, 45, 35} (before: Ampere's {87.7, 22.5, 19.0}); hwLatencies
//    NVLINK NVLS and NVLSTree 25 µs (before: 23).
constexpr NcclRelease kNccl221{2, 21, 0};
constexpr double kRingLLQuarter = 1.0 / 4.0, kRingLLThird = 1.0 / 3.0;
constexpr double kHopperLlMaxBwBefore221[3] = {87.7, 22.5, 19.0};
constexpr double kNvlsNvlinkLatencyBefore221 = 23.0;
//  - v2.23.4-1: Tree/Simple latency base 8.4 and hwLatencies 4 (NVLINK), 4 (PCI), 14 (NET) (before: base 0 and
//    28 on every class); PAT for all-gather and reduce-scatter with one GPU per machine (bus ×.85 in 2.23, ×.75
//    from v2.24.3-1); the network latency of every algorithm with one GPU per machine is Tree's; Ring/LL128's
//    ×.7 with one GPU per machine gone (×.92 always); NVLS all-gather and reduce-scatter keep their bus
//    bandwidth unconverted (before: ×5/6 as for all-reduce).
constexpr NcclRelease kNccl223{2, 23, 0};
constexpr double kTreeSimpleLatencyBefore223 = 28.0;
constexpr double kRingLL128OneGpuPerMachineBefore223 = 0.7;
constexpr NcclRelease kNccl224{2, 24, 0};
constexpr double kPatBusFactorIn223 = 0.85;
//  - v2.25.1-1: the Blackwell rows of the tables (before, NCCL had none: sm100 takes Hopper's here).
constexpr NcclRelease kNccl225{2, 25, 0};
//  - v2.26.2-1: NVLS all-gather/reduce-scatter per-head bandwidth min(bwIntra·(ppn−1)/ppn, bwInter·.9)
//    (before: min(bwIntra, bwInter) as for all-reduce).
constexpr NcclRelease kNccl226{2, 26, 0};
constexpr double kNvlsAgRsInterShare = 0.9;
//  - v2.27.3-1 to v2.27.6-1: LL128 on sm90 and later only up to P2C (NCCL_LL128_C2C, 1 by default), so a graph
//    that sends to its NIC through PXN runs no LL128 (before and from v2.27.7-1: up to PXN).
constexpr NcclRelease kNccl2273{2, 27, 3};
constexpr NcclRelease kNccl2277{2, 27, 7};
//  - v2.28.3-1: NVLS and NVLSTree per-head bandwidth from nvlsEfficiency, (heads−1)/heads and the
//    perChMaxNVLSTreeBws cap, converted by nRanks/nsteps (before: min(bwIntra, bwInter), NVLSTree's bwInter
//    halved past two machines, ×5/6).
constexpr NcclRelease kNccl228{2, 28, 0};
constexpr double kNvlsRatioBefore228 = 5.0 / 6.0;
//  - v2.28.9-1: hwLatencies NET NVLSTree 20.9 µs (v2.19.1-1 to v2.28.7-1: 14).
constexpr NcclRelease kNccl2289{2, 28, 9};
constexpr double kNvlsTreeNetLatencyBefore2289 = 14.0;

// ---- The simulator's time model (nccl_model.hpp: launch_us, device_latency_us), apart from NCCL's choice ----
// Host time of one kernel launch with NCCL's enqueue, per GPU the issuing thread drives. Derived from the six
// single-process `all_reduce_perf -g 8` rows of togethercomputer/together-nccl-tests (H100, 8 B – 64 KiB,
// ring and default runs; tests/simulator/data/nccl_published.json): their mean time, 36.2 µs, less the
// device latency this model gives them (Ring/LL: 6.6 + 14 × 0.6 µs, ≈ 15.3 µs with the bytes), over the
// 8 launches one thread issues per iteration: (36.2 − 15.3) / 8 ≈ 2.6 µs. NVIDIA's NCCL team names the
// same cause (NVIDIA/nccl-tests#333: "-g 8 … CUDA latency overheads of single process jobs").
constexpr double kLaunchPerGpuUs = 2.6;
// Device time of NVLS's multicast round (reduce in the switch, multicast back, every GPU's flags), growing
// with the GPUs it joins. 2 GPUs: the three 2-GPU H100 rows of NVIDIA/nccl#1259 (128 – 512 B, CUDA graphs, so
// no launch time): 5.56, 5.99, 5.97 µs, mean 5.84 µs. 8 GPUs: NCCL's own figure for its 8-GPU NVSwitch
// machines, 25 µs (tuning.cc hwLatencies NVLINK/NVLS/Simple); the same issue reports that on 8 GPUs NVLS is
// slower than Ring, whose device latency here is 15 µs, and that the latency grows with the GPUs. Between
// and beyond, linear in the GPUs: 5.84 + (25 − 5.84) / 6 ≈ 3.19 µs per GPU past the second.
constexpr double kNvlsTwoGpuUs = 5.84;
constexpr double kNvlsEightGpuUs = 25.0;
constexpr double kNvlsPerGpuUs = (kNvlsEightGpuUs - kNvlsTwoGpuUs) / 6.0;
// Device time of one network step of NVLSTree (its tree between the machines' NVLS heads, Simple protocol): the
// time of Tree/Simple's network step, hwLatencies NET Tree/Simple = 14 µs in the table this model carries
// (NVIDIA/nccl src/graph/tuning.cc, v2.28.9-1; also v2.18.3-1 – v2.18.6-1 and v2.23.4-1 onwards). NVLSTree's
// network part is a tree over the same net transport and proxy with the same protocol, and NCCL charged it that
// figure: hwLatencies NET NVLSTree/Simple was 14 µs in every release from v2.19.1-1 through v2.28.7-1 (v2.18.x:
// 19), among them v2.21.5-1 that ran the H20 NVLSTree rows. v2.28.9-1 (commit dbc86fd0, "NCCL 2.28.9-1", whose
// notes name only a proxy-ordering hang fix and a GIN fix) raised that one entry to 20.9 (kept in v2.29.7-1)
// and no other. The table this model chooses with (kHwLatency) keeps 20.9, since it moves NCCL 2.28.9's pick,
// but the step's time is Tree/Simple's network step (as NVLS's round on fewer than 8 GPUs is timed by what it
// takes, above, not by NCCL's 25 µs weight). Not fitted: the 2 × 8 H20 NVLSTree rows of NVIDIA/nccl#1244 stay
// held out.
constexpr Algo kNvlsTreeNetStepAlgo = Algo::kTree;  // whose hwLatencies NET entry times an NVLSTree network step
// Device time of LL128 on one machine: LL's base and per-step latencies (6.6 + 0.6 µs per NVLink step for Ring),
// not the 14 + 1.9 µs per step NCCL's table weighs LL128 with. Both protocols move lines that carry their own flags,
// so a step waits for the same flag poll; the table's higher LL128 figures keep NCCL off LL128 at the sizes LL
// serves, as its 20.9 µs NVLSTree entry above weighs the choice only. Taken from the ring all-reduce rows
// h100-ring-4m and h100-ring-16m (togethercomputer/together-nccl-tests, 8 × H100, `-g 8`; NCCL picks LL128 at both):
// 53.09 and 126.62 µs measured, 83.15 and 148.39 µs with the table's latencies (40.6 µs on 8 GPUs: 14 + 14 × 1.9),
// 57.55 and 122.79 µs with LL's (12.8 µs), so those two rows are not held out. Held out, the same machine's ring
// all-gather and reduce-scatter at 16 MiB (LL128, 7 steps: 27.3 µs by the table, 10.8 by LL's) go from +29.4 and
// +27.3 % to +6.1 and +4.3 % (reports/nccl-validation/REPORT.md). Across machines the table's LL128 figures stay:
// there every ring step waits for the network step (docs/accuracy.md, "Medium sizes"), and the multi-machine
// medium rows are already below their measured times with them.
constexpr Proto kLl128OneMachineLatencyProto = Proto::kLL;

int cc_index(int compcap) { return compcap >= 100 ? 3 : compcap >= 90 ? 2 : compcap >= 80 ? 1 : 0; }
int log2i(int n) {
  int l = 0;
  while (n > 1) {
    n >>= 1;
    ++l;
  }
  return l;
}

int compcap_of(const Node& n) {
  if (n.arch.size() > 2 && n.arch[0] == 's' && n.arch[1] == 'm') {
    int v = 0;
    for (std::size_t i = 2; i < n.arch.size() && n.arch[i] >= '0' && n.arch[i] <= '9'; ++i)
      v = v * 10 + (n.arch[i] - '0');
    if (v >= 10 && v < 1000) return v;
  }
  return 70;  // no arch given: NCCL's Volta-class tables (the oldest it tunes for with NVLink)
}

// Link capacities as the search sees them: NVLink = lanes × per-lane usable GB/s of the GPU generation,
// others their nominal figure (the shipped configs carry PCIe and QPI at NCCL's PCI_BW / QPI figures).
class Capacities {
 public:
  Capacities(const Topology& topo, int compcap) : topo_(topo), lane_(lane_gbps(compcap)) {}
  double get(int l) {
    const auto it = left_.find(l);
    if (it != left_.end()) return it->second;
    const Link& link = topo_.links()[l];
    const double c = link.kind == LinkKind::kNvLink ? std::max(1, link.lanes) * lane_ : link.bandwidth_gbps;
    left_.emplace(l, c);
    return c;
  }
  void add(int l, double delta) { left_[l] = get(l) + delta; }
  // Whether `links` can each carry `bw` more (a link listed twice needs it twice).
  bool fits(const std::vector<int>& links, double bw) {
    for (const int l : links) {
      if (get(l) + 1e-9 < bw) return false;
    }
    return true;
  }
  void take(const std::vector<int>& links, double bw) {
    for (const int l : links) add(l, -bw);
  }

 private:
  const Topology& topo_;
  double lane_;
  std::unordered_map<int, double> left_;
};

struct Machine {
  std::vector<int> gpus;  // group members on this machine, in rank order
  std::vector<int> nics;  // NIC nodes of the machine (a fused card: its first port)
  std::unordered_map<int, std::vector<int>> ports;  // a fused card's first port -> all its ports

  // The ports a NIC of `nics` stands for.
  std::vector<int> ports_of(int nic) const {
    const auto it = ports.find(nic);
    return it == ports.end() ? std::vector<int>{nic} : it->second;
  }
  // A fused card's channels take their bandwidth from its ports together: its first port's link to the network
  // carries the others' capacity as well (search.cc checks a channel against the virtual NIC's speed).
  void pool_ports(const Topology& topo, Capacities& caps) const {
    for (const auto& [first, all] : ports) {
      const int link = topo.network_port(first);
      if (link < 0) continue;
      for (const int p : all) {
        const int other = topo.network_port(p);
        if (p != first && other >= 0) caps.add(link, caps.get(other));
      }
    }
  }
};

// Groups a machine's NIC ports into cards: ports whose bus ids match but for the last character (PCI functions of
// one device, topo.cc ncclTopoGetPath's multiPort test) are one card, in the order of their first port.
std::unordered_map<int, std::vector<int>> nic_cards(const Topology& topo, std::vector<int>& nics) {
  std::unordered_map<int, std::vector<int>> cards;
  std::vector<int> firsts;
  std::map<std::string, int> first_of;  // bus id without its last character -> first port
  for (const int nic : nics) {
    const std::string& bus = topo.nodes()[static_cast<std::size_t>(nic)].bus_id;
    if (bus.size() < 2) {
      firsts.push_back(nic);
      continue;
    }
    const auto [it, fresh] = first_of.emplace(bus.substr(0, bus.size() - 1), nic);
    if (fresh) firsts.push_back(nic);
    cards[it->second].push_back(nic);
  }
  std::erase_if(cards, [](const auto& card) { return card.second.size() < 2; });
  nics = std::move(firsts);
  return cards;
}

// Depth-first search for one directed ring over `gpus` at `bw` on the capacities left, starting at local
// GPU `start`, next GPUs tried by most capacity left on the way (search.cc sorts its candidates by
// bandwidth). Without a NIC the ring closes back to the start; with one (a machine of a cluster) it leaves
// through the NIC and comes back in through it to the start, both ends within `nic_type` of it (no cross-NIC),
// the way out on NCCL's send path (PXN through `nic_gpu`, the NIC's own GPU, where NCCL takes it).
bool find_ring(const Topology& topo, const std::vector<int>& gpus, double bw, PathType max_type, Capacities& caps,
               std::vector<int>& ring, int start, int nic, int nic_gpu, PathType nic_type) {
  const int n = static_cast<int>(gpus.size());
  ring.assign(1, start);
  std::vector<char> used(n, 0);
  used[start] = 1;
  long budget = kSearchBudget;
  auto route_links = [&](int a, int b) -> const std::vector<int>& { return topo.route(gpus[a], gpus[b]).links; };
  auto headroom = [&](int a, int b) {
    double h = std::numeric_limits<double>::infinity();
    for (const int l : route_links(a, b)) h = std::min(h, caps.get(l));
    return h;
  };
  auto rec = [&](auto&& self) -> bool {
    if (--budget < 0) return false;
    const int cur = ring.back();
    if (static_cast<int>(ring.size()) == n) {
      std::vector<int> back;
      if (nic >= 0) {
        const Route out = net_send_route(topo, gpus[cur], nic, nic_gpu);
        const Route& in = topo.route(nic, gpus[start]);
        if (out.type > nic_type || in.type > nic_type) return false;
        back = out.links;
        back.insert(back.end(), in.links.begin(), in.links.end());
        // search.cc: a channel takes its bandwidth from the port too (`if (net->net.bw < bw) continue;`, then
        // `net.bw -= bw` on the port's NET nodes), so a port carries as many channels as its speed holds.
        if (const int port = topo.network_port(nic); port >= 0) back.push_back(port);
      } else {
        if (n == 1) return true;
        if (topo.route(gpus[cur], gpus[start]).type > max_type) return false;
        back = route_links(cur, start);
      }
      if (!caps.fits(back, bw)) return false;
      caps.take(back, bw);
      return true;
    }
    std::vector<std::pair<double, int>> next;
    for (int j = 0; j < n; ++j) {
      if (used[j] || topo.route(gpus[cur], gpus[j]).type > max_type) continue;
      const double h = headroom(cur, j);
      if (h + 1e-9 >= bw) next.emplace_back(h, j);
    }
    std::stable_sort(next.begin(), next.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    for (const auto& [h, j] : next) {
      const auto& links = route_links(cur, j);
      if (!caps.fits(links, bw)) continue;
      caps.take(links, bw);
      used[j] = 1;
      ring.push_back(j);
      if (self(self)) return true;
      ring.pop_back();
      used[j] = 0;
      caps.take(links, -bw);
    }
    return false;
  };
  return rec(rec);
}

struct SearchResult {
  std::vector<std::pair<std::vector<int>, int>> rings;  // local order (indices into Machine::gpus), NIC
  double bw = 0;
};

class MachineSearch {
 public:
  MachineSearch(const Topology& topo, const Machine& m, int compcap, bool net)
      : topo_(topo), m_(m), compcap_(compcap), net_(net) {
    // Per NIC, once: its own GPU (PXN relays through it) and the GPUs to start a ring at, most local first
    // (search.cc ncclTopoSearchRecNet: net.localGpu, then ncclTopoGetLocal; NCCL starts a ring at no other GPU but
    // for its PCI-order reference on machines without NVSwitch), then the rest.
    const int n = static_cast<int>(m_.gpus.size());
    for (const int nic : m_.nics) {
      nic_gpu_[nic] = nic_local_gpu(topo_, nic, m_.gpus);
      std::vector<int>& starts = starts_[nic];
      starts.resize(static_cast<std::size_t>(n));
      std::iota(starts.begin(), starts.end(), 0);
      std::stable_sort(starts.begin(), starts.end(), [&](int a, int b) {
        return topo_.route(nic, m_.gpus[a]).type < topo_.route(nic, m_.gpus[b]).type;
      });
    }
  }

  // A NIC's own GPU (node) among the machine's group.
  int nic_gpu(int nic) const { return nic_gpu_.at(nic); }

  // Channels at `bw`, at most `max_channels`, over GPU-to-GPU paths no worse than `max_type`.
  std::vector<std::pair<std::vector<int>, int>> at(double bw, int max_channels, PathType max_type) const {
    // search.cc explores channel sets with backtracking; two greedy orders stand in for it here: each ring
    // followed by its reverse (the opposite directions of the same links, how NCCL's rings come in pairs
    // on NVLink meshes), and rings found one after another.
    auto paired = at_impl(bw, max_channels, max_type, true);
    if (static_cast<int>(paired.size()) >= max_channels) return paired;
    auto plain = at_impl(bw, max_channels, max_type, false);
    return plain.size() > paired.size() ? plain : paired;
  }

 private:
  std::vector<std::pair<std::vector<int>, int>> at_impl(double bw, int max_channels, PathType max_type,
                                                        bool pair) const {
    Capacities caps(topo_, compcap_);
    m_.pool_ports(topo_, caps);
    std::vector<std::pair<std::vector<int>, int>> out;
    const int n = static_cast<int>(m_.gpus.size());
    const int nics = static_cast<int>(m_.nics.size());
    std::vector<int> reverse;  // the reverse of the last ring (same NIC), tried next when pairing
    int reverse_nic = -1;
    // The farthest GPU-to-NIC path type the channels may take: search.cc widens typeInter for the whole graph
    // only while it finds no channel, and every channel then searches at that type (NICs under a CPU: PHB/SYS
    // for every channel, not only the first).
    PathType nic_floor = PathType::kPxb;
    // All links of a ring: its GPU-to-GPU routes, and through its NIC between its last and first GPU.
    auto ring_links = [&](const std::vector<int>& r, int nic) {
      std::vector<int> links;
      for (int i = 0; i < n; ++i) {
        if (i + 1 == n && nic >= 0) {
          const std::vector<int> o = net_send_route(topo_, m_.gpus[r[i]], nic, nic_gpu_.at(nic)).links;
          const auto& in = topo_.route(nic, m_.gpus[r[0]]).links;
          links.insert(links.end(), o.begin(), o.end());
          links.insert(links.end(), in.begin(), in.end());
          if (const int port = topo_.network_port(nic); port >= 0) links.push_back(port);
        } else if (n > 1) {
          const auto& l = topo_.route(m_.gpus[r[i]], m_.gpus[r[(i + 1) % n]]).links;
          links.insert(links.end(), l.begin(), l.end());
        }
      }
      return links;
    };
    while (static_cast<int>(out.size()) < max_channels) {
      if (pair && !reverse.empty()) {
        const std::vector<int> links = ring_links(reverse, reverse_nic);
        const bool ok = distinct_fit(caps, links, bw);
        if (ok) {
          caps.take(links, bw);
          out.emplace_back(reverse, reverse_nic);
        }
        reverse.clear();
        if (ok) continue;
      }
      std::vector<int> ring;
      int nic = -1;
      bool found = false;
      if (!net_) {
        found = find_ring(topo_, m_.gpus, bw, max_type, caps, ring, 0, -1, -1, PathType::kLoc);
      } else {
        // NICs round-robin from the channel's index, starting GPUs near the NIC (search.cc starts a
        // ring at the NIC and ends it there): within PXB of it first, then sending to it through an NVLink
        // peer (PXN), farther (PHB, SYS) only when neither finds a channel, as search.cc widens typeInter
        // only while it finds nothing.
        for (const PathType nic_type : {PathType::kPxb, PathType::kPxn, PathType::kSys}) {
          if (nic_type < nic_floor) continue;
          for (int t = 0; t < nics && !found; ++t) {
            nic = m_.nics[static_cast<std::size_t>((static_cast<int>(out.size()) + t) % nics)];
            for (const int s : starts_.at(nic)) {
              if (found) break;
              if (topo_.route(nic, m_.gpus[s]).type > nic_type) continue;
              std::vector<int> in = topo_.route(nic, m_.gpus[s]).links;
              if (const int port = topo_.network_port(nic); port >= 0) in.push_back(port);
              if (!caps.fits(in, bw)) continue;
              found = find_ring(topo_, m_.gpus, bw, max_type, caps, ring, s, nic, nic_gpu_.at(nic), nic_type);
            }
          }
          if (found) nic_floor = nic_type;
          if (found || !out.empty()) break;
        }
      }
      if (!found) break;
      if (pair && n > 1) {
        // Reverse: same GPUs backwards, still starting after the NIC and ending before it.
        reverse.assign(ring.rbegin(), ring.rend());
        reverse_nic = nic;
      }
      out.emplace_back(std::move(ring), nic);
    }
    return out;
  }

  // Whether links listed several times still fit bw for each listing.
  static bool distinct_fit(Capacities& caps, const std::vector<int>& links, double bw) {
    std::unordered_map<int, int> uses;
    for (const int l : links) ++uses[l];
    for (const auto& [l, k] : uses) {
      if (caps.get(l) + 1e-9 < k * bw) return false;
    }
    return true;
  }

  const Topology& topo_;
  const Machine& m_;
  int compcap_;
  bool net_;
  std::unordered_map<int, int> nic_gpu_;              // NIC node -> its own GPU (node), for PXN
  std::unordered_map<int, std::vector<int>> starts_;  // NIC node -> local GPU indices to start a ring at, in order
};

// The search's speed steps for a GPU generation, inside one machine or across machines (search.cc speedArray*).
std::span<const double> speed_steps(int compcap, bool inter) {
  if (compcap >= 100)
    return inter ? std::span<const double>(kSm100SpeedInter) : std::span<const double>(kSm100SpeedIntra);
  if (compcap >= 90) return inter ? std::span<const double>(kSm90SpeedInter) : std::span<const double>(kSm90SpeedIntra);
  return inter ? std::span<const double>(kSpeedInter) : std::span<const double>(kSpeedIntra);
}

// search.cc ncclTopoCompute for the Ring pattern on one machine: pass 1 from the fastest speed a GPU can
// use, lowering it while the next step keeps > 49% of the best bandwidth found, stopping at a perfect
// solution (channels × bw ≥ a GPU's total); duplication (ncclTopoDupChannels); pass 2 raising the
// speed for the same channel count.
SearchResult search_machine(const Topology& topo, const Machine& m, int compcap, bool net) {
  const std::span<const double> speeds = speed_steps(compcap, net);
  const int nspeeds = static_cast<int>(speeds.size());
  // maxBw: the fastest single path a ring edge can take; totalBw: a GPU's bandwidth out (paths.cc).
  Capacities caps(topo, compcap);
  m.pool_ports(topo, caps);
  double max_bw = 0, total_bw = 0;
  const int n = static_cast<int>(m.gpus.size());
  for (int i = 0; i < n; ++i) {
    // paths.cc: a GPU's total is its NVLink bandwidth, or its PCIe link when it has no NVLink.
    double nvlink = 0, other = 0;
    for (const int l : topo.out_links(m.gpus[i])) {
      if (topo.links()[l].kind == LinkKind::kNvLink) {
        nvlink += caps.get(l);
      } else {
        other = std::max(other, caps.get(l));
      }
    }
    total_bw = std::max(total_bw, nvlink > 0 ? nvlink : other);
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      double b = std::numeric_limits<double>::infinity();
      for (const int l : topo.route(m.gpus[i], m.gpus[j]).links) b = std::min(b, caps.get(l));
      max_bw = std::max(max_bw, b);
    }
  }
  const MachineSearch search(topo, m, compcap, net);
  if (net) {
    double nic_bw = 0;
    for (const int nic : m.nics) {
      for (const int g : m.gpus) {
        double b = std::numeric_limits<double>::infinity();
        for (const int l : net_send_route(topo, g, nic, search.nic_gpu(nic)).links) b = std::min(b, caps.get(l));
        // paths.cc: the GPU-to-NET path ends on the port, whose speed bounds it.
        if (const int port = topo.network_port(nic); port >= 0) b = std::min(b, caps.get(port));
        nic_bw = std::max(nic_bw, b);
      }
    }
    max_bw = n > 1 ? std::min(max_bw, nic_bw) : nic_bw;
    if (n == 1) total_bw = nic_bw * static_cast<double>(std::max<std::size_t>(1, m.nics.size()));
  }
  // Path types the rings may use: search.cc starts at the best GPU-to-GPU type and widens it only while no
  // channel is found (NVLink rings before rings through other GPUs or PCIe).
  PathType min_type = PathType::kSys, max_type = PathType::kLoc;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const PathType t = topo.route(m.gpus[i], m.gpus[j]).type;
      min_type = std::min(min_type, t);
      max_type = std::max(max_type, t);
    }
  }
  if (n == 1) min_type = max_type = PathType::kLoc;
  int idx = 0;
  while (idx < nspeeds - 1 && speeds[idx] > max_bw) ++idx;
  SearchResult best;
  PathType best_type = min_type;
  for (;;) {
    std::vector<std::pair<std::vector<int>, int>> rings;
    PathType type = best.rings.empty() ? min_type : best_type;
    for (;;) {
      rings = search.at(speeds[idx], kMaxRingChannels, type);
      if (!rings.empty() || !best.rings.empty() || type >= max_type) break;
      type = static_cast<PathType>(static_cast<int>(type) + 1);
    }
    const double got = static_cast<double>(rings.size()) * speeds[idx];
    if (got > static_cast<double>(best.rings.size()) * best.bw) {
      best.rings = std::move(rings);
      best.bw = speeds[idx];
      best_type = type;
    }
    if (!best.rings.empty() && static_cast<double>(best.rings.size()) * best.bw >= total_bw - 1e-9) break;
    if (idx + 1 >= nspeeds) break;
    if (!best.rings.empty() && speeds[idx + 1] / best.bw <= kSpeedKeepRatio) break;
    ++idx;
  }
  if (best.rings.empty()) {
    // search.cc falls back to the GPUs in index order at 0.1 GB/s when no ring fits.
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    best.rings.emplace_back(order, m.nics.empty() ? -1 : m.nics.front());
    best.bw = 0.1;
    return best;
  }
  // ncclTopoDupChannels: channels of ≥ 25 GB/s are doubled (not past sm80 below 50 GB/s with > 4 channels).
  const int nch = static_cast<int>(best.rings.size());
  if (best.bw >= 25.0 && !(compcap > 80 && best.bw < 50.0 && nch > 4)) {
    const int dup = std::min(2 * nch, kMaxRingChannels);
    for (int c = nch; c < dup; ++c) best.rings.push_back(best.rings[c - nch]);
    best.bw /= (dup + nch - 1) / nch;
  } else {
    // Pass 2: the same number of channels at a higher speed.
    int k = 0;
    while (k < nspeeds - 1 && speeds[k] > best.bw) ++k;
    while (k > 0) {
      auto rings = search.at(speeds[k - 1], nch, best_type);
      if (static_cast<int>(rings.size()) < nch) break;
      best.rings = std::move(rings);
      best.bw = speeds[--k];
    }
  }
  return best;
}

}  // namespace

std::string_view to_string(Algo algo) noexcept { return nccl_name(algo).spec; }

std::string_view to_string(Proto proto) noexcept { return nccl_name(proto).spec; }

Forced parse_variant(std::string_view variant, std::string_view what) {
  const NcclVariant v = parse_nccl_variant(variant, what);  // the grammar's one parser checks the names
  Forced out;
  out.algo = nccl_algo_of(v.algo);
  out.proto = nccl_proto_of(v.proto);
  out.channels = v.channels;
  return out;
}

std::string to_string(const Forced& forced) {
  NcclVariant v;
  if (forced.algo) v.algo = std::string(to_string(*forced.algo));
  if (forced.proto) v.proto = std::string(to_string(*forced.proto));
  v.channels = forced.channels;
  std::string out = to_string(v);
  return out.substr(0, 1) == "." ? out.substr(1) : out;  // a protocol alone has no algorithm before it
}

int max_channels(const Graph& g, Algo algo) noexcept {
  return (algo == Algo::kNvls || algo == Algo::kNvlsTree) ? g.nvls_channels : g.channels;
}

int min_channels(Algo algo) noexcept { return (algo == Algo::kNvls || algo == Algo::kNvlsTree) ? 2 : 1; }

Graph with_channels(const Graph& g, Algo algo, int channels, std::string_view what) {
  if (channels < min_channels(algo) || channels > max_channels(g, algo)) {
    throw InvalidInput(fmt::format("{}: NCCL {} runs on {}..{} channels here ({} GPUs on {} machine(s)), not {}",
                                   what, to_string(algo), min_channels(algo), max_channels(g, algo), g.ranks,
                                   g.machines, channels));
  }
  Graph out = g;
  if (algo == Algo::kNvls || algo == Algo::kNvlsTree) {
    out.nvls_channels = channels;
  } else {
    out.channels = channels;
    out.rings.resize(static_cast<std::size_t>(channels));
  }
  return out;
}

namespace {

// The tree graph's pattern (search.cc ncclTopoCompute): one GPU per machine searches the simpler TREE; more
// search a BALANCED_TREE first, whose NIC two GPUs reach (half the network bandwidth each), starting from PIX
// paths between GPU and NIC. On sm90+ ("Try a simpler tree"), when that first search is not optimal the TREE (one
// GPU to and from the NIC) is tried at the same speed and path types and, finding its channels, ends the search.
// The first search is taken as optimal when every channel's NIC has two of the group's GPUs of its machine within
// PIX (a PCIe switch shared with the NIC), not otherwise (one NIC per GPU). `g`: channels and NICs searched.
bool balanced_tree_found(const Topology& topo, const Graph& g) {
  if (g.ppn < 2) return false;
  if (g.compcap < 90) return true;
  for (const Channel& ch : g.rings) {
    for (int mi = 0; mi < g.machines; ++mi) {
      const int nic = ch.nics[static_cast<std::size_t>(mi)];
      if (nic < 0) return false;
      int near = 0;
      for (int k = 0; k < g.ppn; ++k) {
        near += topo.route(ch.ring[static_cast<std::size_t>(mi * g.ppn + k)], nic).type <= PathType::kPix;
      }
      if (near < 2) return false;
    }
  }
  return true;
}

}  // namespace

int nic_local_gpu(const Topology& topo, int nic, const std::vector<int>& gpus) {
  int best = -1;
  for (const int g : gpus) {
    if (topo.nodes()[static_cast<std::size_t>(g)].machine != topo.nodes()[static_cast<std::size_t>(nic)].machine) continue;
    if (best < 0) {
      best = g;
      continue;
    }
    const Route& r = topo.route(g, nic);
    const Route& b = topo.route(best, nic);
    if (r.bandwidth_gbps > b.bandwidth_gbps + 1e-9 ||
        (std::abs(r.bandwidth_gbps - b.bandwidth_gbps) <= 1e-9 && r.type < b.type)) {
      best = g;
    }
  }
  return best;
}

Route net_send_route(const Topology& topo, int gpu, int nic, int local_gpu) {
  const Route& direct = topo.route(gpu, nic);
  if (local_gpu < 0 || local_gpu == gpu) return direct;
  const Route& peer_to_nic = topo.route(local_gpu, nic);
  const Route& to_peer = topo.route(gpu, local_gpu);
  // paths.cc: the peer within PXB of the NIC, joined to us by NVLink (NVL: direct or through NVSwitches), with more
  // bandwidth to the NIC than ours or sparing us a path through a CPU.
  if (peer_to_nic.type > PathType::kPxb || to_peer.type > PathType::kNvl) return direct;
  if (!(peer_to_nic.bandwidth_gbps > direct.bandwidth_gbps + 1e-9 || direct.type > PathType::kPxb)) return direct;
  Route pxn;
  pxn.type = PathType::kPxn;
  pxn.links = to_peer.links;
  pxn.links.insert(pxn.links.end(), peer_to_nic.links.begin(), peer_to_nic.links.end());
  pxn.bandwidth_gbps = std::min(to_peer.bandwidth_gbps, peer_to_nic.bandwidth_gbps);
  pxn.latency_us = to_peer.latency_us + peer_to_nic.latency_us;
  return pxn;
}

namespace {

// search.cc ncclTopoCompute, pass 2 of a tree pattern (every release this model covers): with the channels found,
// raise bwIntra alone, one speed step at a time, while it is below twice bwInter and the channels still fit. A
// tree's channel runs the ring's chain inside each machine (NCCL builds its trees on the rings' intra order),
// each hop taking bwIntra of its links one way (search.cc followPath); the NICs keep bwInter. A maintainer on why
// (NVIDIA/nccl#645): on two machines, "due to tree's double-bandwidth effect", 2 × the network speed is the limit.
double raised_tree_bw_intra(const Topology& topo, const Graph& g) {
  const std::span<const double> speeds = speed_steps(g.compcap, true);
  const int nspeeds = static_cast<int>(speeds.size());
  int k = 0;
  while (k < nspeeds - 1 && speeds[k] > g.bw_inter) ++k;
  double bw = g.bw_intra;
  const auto chains_fit = [&](double speed) {
    Capacities caps(topo, g.compcap);
    for (const Channel& ch : g.rings) {
      for (int m = 0; m < g.machines; ++m) {
        for (int i = 0; i + 1 < g.ppn; ++i) {
          const auto at = static_cast<std::size_t>(m * g.ppn + i);
          const auto& links = topo.route(ch.ring[at], ch.ring[at + 1]).links;
          if (!caps.fits(links, speed)) return false;
          caps.take(links, speed);
        }
      }
    }
    return true;
  };
  while (k > 0 && bw < 2 * g.bw_inter && chains_fit(speeds[k - 1])) bw = speeds[--k];
  return bw;
}

// NCCL's graph for a group, found anew (search keeps them).
Graph find_graph(const Topology& topo, const std::vector<int>& gpus, bool fuse_ports) {
  Graph g;
  g.ranks = static_cast<int>(gpus.size());
  if (gpus.empty()) throw InvalidInput("nccl: a collective over no GPUs");
  // Members by machine, machines in order of first appearance.
  std::vector<Machine> machines;
  std::unordered_map<int, int> machine_index;
  // NICs per machine in one pass over the nodes (a lookup per machine would scan every node each time).
  std::unordered_map<int, std::vector<int>> nics_of;
  for (int i = 0; i < static_cast<int>(topo.nodes().size()); ++i) {
    if (topo.nodes()[i].kind == NodeKind::kNic) nics_of[topo.nodes()[i].machine].push_back(i);
  }
  int compcap = 1000;
  for (const int node : gpus) {
    if (node < 0 || node >= static_cast<int>(topo.nodes().size()) || topo.nodes()[node].kind != NodeKind::kGpu) {
      throw InvalidInput(fmt::format("nccl: node {} of topology '{}' is not a GPU", node, topo.name()));
    }
    const Node& n = topo.nodes()[node];
    compcap = std::min(compcap, compcap_of(n));
    auto [it, fresh] = machine_index.emplace(n.machine, static_cast<int>(machines.size()));
    if (fresh) {
      machines.emplace_back();
      machines.back().nics = nics_of[n.machine];
      if (fuse_ports) machines.back().ports = nic_cards(topo, machines.back().nics);
    }
    machines[it->second].gpus.push_back(node);
  }
  g.compcap = compcap;
  g.machines = static_cast<int>(machines.size());
  g.ppn = static_cast<int>(machines.front().gpus.size());
  for (const Machine& m : machines) {
    if (static_cast<int>(m.gpus.size()) != g.ppn) {
      throw InvalidInput(
          fmt::format("nccl: topology '{}': the group has {} GPUs on one machine and {} on another; "
                      "NCCL's model needs the same number on every machine",
                      topo.name(), g.ppn, m.gpus.size()));
    }
  }
  const bool net = g.machines > 1;
  for (const Machine& m : machines) {
    if (net && m.nics.empty()) {
      throw InvalidInput(fmt::format("nccl: topology '{}': a machine of the group has no NIC", topo.name()));
    }
  }
  // The CPU type: every rank takes its machine's first CPU (search.cc ncclTopoComputeCommCPU, cpus->nodes[0]);
  // init.cc marks the architecture or vendor MIXED when the ranks' differ. tuning.cc reads the AMD row of
  // llMaxBws for an AMD or mixed vendor, getNetOverhead 2 µs for x86 AMD (1 µs otherwise), and gives Tree/
  // Simple Ring's PCI latency on POWER. A CPU node's arch is configs/README.md's; what a machine does not
  // state (architecture or vendor) is taken to match the others, and a group stating nothing is Intel's.
  CpuArch cpu_type;
  bool mixed_isa = false, mixed_vendor = false;
  for (const Machine& m : machines) {
    int first = -1;
    for (const int cpu : topo.nodes_of_kind(NodeKind::kCpu, topo.nodes()[m.gpus.front()].machine)) {
      if (first < 0 || topo.nodes()[cpu].local_index < topo.nodes()[first].local_index) first = cpu;
    }
    const CpuArch type = first < 0 ? CpuArch{} : parse_cpu_arch(topo.nodes()[first].arch).value_or(CpuArch{});
    if (type.isa != CpuIsa::kUnknown) {
      mixed_isa = mixed_isa || (cpu_type.isa != CpuIsa::kUnknown && type.isa != cpu_type.isa);
      cpu_type.isa = type.isa;
    }
    if (type.vendor != CpuVendor::kUnknown) {
      mixed_vendor = mixed_vendor || (cpu_type.vendor != CpuVendor::kUnknown && type.vendor != cpu_type.vendor);
      cpu_type.vendor = type.vendor;
    }
  }
  g.amd_cpu = mixed_vendor || cpu_type.vendor == CpuVendor::kAmd;
  g.amd_x86_cpu = !mixed_isa && !mixed_vendor && cpu_type.isa == CpuIsa::kX86 && cpu_type.vendor == CpuVendor::kAmd;
  g.power_cpu = !mixed_isa && cpu_type.isa == CpuIsa::kPower;
  g.nvswitch = static_cast<int>(topo.nodes_of_kind(NodeKind::kNvSwitch, topo.nodes()[gpus.front()].machine).size());

  // One search per distinct machine: machines of the same shape (Topology::machine_shape: the same devices and
  // links, place for place) whose GPUs sit at the same local indices find the same rings (NCCL searches every
  // machine the same way), so the result of the first is mapped onto the others by local index; a machine of
  // another shape is searched on its own.
  std::vector<SearchResult> results(machines.size());
  std::unordered_map<std::string, int> by_shape;
  for (std::size_t mi = 0; mi < machines.size(); ++mi) {
    std::string shape = topo.machine_shape(topo.nodes()[machines[mi].gpus.front()].machine) + "|";
    for (const int node : machines[mi].gpus) shape += fmt::format("{},", topo.nodes()[node].local_index);
    const auto it = by_shape.find(shape);
    if (it != by_shape.end()) {
      // Same local layout: rings by local index, NICs by their position in the machine.
      const SearchResult& ref = results[static_cast<std::size_t>(it->second)];
      const Machine& rm = machines[static_cast<std::size_t>(it->second)];
      SearchResult r;
      r.bw = ref.bw;
      for (const auto& [order, nic] : ref.rings) {
        int nic_pos = -1;
        for (std::size_t k = 0; k < rm.nics.size(); ++k) {
          if (rm.nics[k] == nic) nic_pos = static_cast<int>(k);
        }
        r.rings.emplace_back(order, nic_pos >= 0 ? machines[mi].nics[static_cast<std::size_t>(nic_pos)] : -1);
      }
      results[mi] = std::move(r);
      continue;
    }
    by_shape.emplace(shape, static_cast<int>(mi));
    results[mi] = search_machine(topo, machines[mi], compcap, net);
  }
  std::size_t nch = results.front().rings.size();
  double bw = results.front().bw;
  for (const SearchResult& r : results) {
    nch = std::min(nch, r.rings.size());
    bw = std::min(bw, r.bw);
  }
  g.channels = static_cast<int>(nch);
  g.bw_intra = g.bw_inter = g.tree_bw_intra = bw;
  for (std::size_t c = 0; c < nch; ++c) {
    Channel ch;
    for (std::size_t mi = 0; mi < machines.size(); ++mi) {
      const auto& [order, nic] = results[mi].rings[c];
      for (const int local : order) ch.ring.push_back(machines[mi].gpus[static_cast<std::size_t>(local)]);
      if (net) {
        ch.nics.push_back(nic);
        ch.nic_gpus.push_back(nic >= 0 ? nic_local_gpu(topo, nic, machines[mi].gpus) : -1);
        ch.nic_ports.push_back(nic >= 0 ? machines[mi].ports_of(nic) : std::vector<int>{});
      }
    }
    g.rings.push_back(std::move(ch));
  }
  // The fabric the channels cross: search.cc copies each channel's NIC latency into the graph (latencyInter);
  // with ports of different kinds the slowest figures count (net_kind.hpp combine).
  if (net) {
    std::vector<NetFigures> ports;
    for (const Channel& ch : g.rings) {
      for (const int nic : ch.nics) {
        if (nic >= 0) ports.push_back(net_figures(topo.nodes()[static_cast<std::size_t>(nic)].net));
      }
    }
    g.net = combine(ports);
  }
  // Link classes of the ring edges inside a machine (tuning.cc: NVLINK latencies when typeIntra is NVL).
  g.nvlink_intra = g.ppn > 1;
  PathType worst = PathType::kLoc;
  for (const Channel& ch : g.rings) {
    for (int i = 0; i + 1 < g.ppn; ++i) {
      const PathType t = topo.route(ch.ring[i], ch.ring[i + 1]).type;
      worst = std::max(worst, t);
    }
  }
  if (g.ppn > 1 && worst > PathType::kNvl) g.nvlink_intra = false;
  // LL128 (tuning.cc): typeIntra ≤ NVB, the graph's GPU–NIC path type (typeInter: the NIC into the machine's
  // first GPU, its last GPU's send path out) ≤ PXB, or ≤ PXN on sm90 and later (every release from v2.19.3-1 but
  // v2.27.3-1 to v2.27.6-1, which the cost table takes from type_inter), sm70 or later.
  PathType nic_path = PathType::kPix;
  if (net) {
    for (const Channel& ch : g.rings) {
      for (int mi = 0; mi < g.machines; ++mi) {
        const int nic = ch.nics[static_cast<std::size_t>(mi)];
        if (nic < 0) continue;
        const int head = ch.ring[static_cast<std::size_t>(mi * g.ppn)];
        const int tail = ch.ring[static_cast<std::size_t>(mi * g.ppn + g.ppn - 1)];
        const int nic_gpu = ch.nic_gpus[static_cast<std::size_t>(mi)];
        nic_path = std::max({nic_path, topo.route(nic, head).type, net_send_route(topo, tail, nic, nic_gpu).type});
      }
    }
  }
  if (net) g.type_inter = nic_path;
  g.ll128_ok = worst <= PathType::kNvb &&
               (nic_path <= PathType::kPxb || (compcap >= 90 && nic_path <= PathType::kPxn)) && compcap >= 70;
  g.simple_tree = net && !balanced_tree_found(topo, g);
  if (net) g.tree_bw_intra = raised_tree_bw_intra(topo, g);
  // NVLS (search.cc: an NVSwitch and sm90+): one head per GPU up to NCCL_MAX_NVLS_ARITY, at the fastest
  // intra speed at which every head's share of a GPU's NVLink bandwidth fits.
  if (g.nvswitch > 0 && compcap >= 90 && g.ppn >= 2) {
    g.nvls_channels = std::min(kMaxNvlsArity, g.ppn);
    Capacities caps(topo, compcap);
    double total = 0;
    for (const int l : topo.out_links(machines.front().gpus.front())) {
      if (topo.links()[l].kind == LinkKind::kNvLink) total += caps.get(l);
    }
    const double* speeds = compcap >= 100 ? kSm100SpeedIntra : kSm90SpeedIntra;
    const int nspeeds = compcap >= 100 ? std::size(kSm100SpeedIntra) : std::size(kSm90SpeedIntra);
    for (int i = 0; i < nspeeds; ++i) {
      if (speeds[i] * g.nvls_channels <= total + 1e-9) {
        g.nvls_bw = speeds[i];
        break;
      }
    }
    g.nvls_bw_inter = speeds[0];
    if (g.nvls_bw == 0) g.nvls_channels = 0;
  }
  return g;
}

// Graphs kept per process (search), the oldest dropped first past this many.
constexpr std::size_t kGraphCacheEntries = 64;

}  // namespace

bool fuses_nic_ports(const NcclRelease& release) noexcept { return !(release < kNccl224); }

Graph search(const Topology& topo, const std::vector<int>& gpus, const NcclRelease& release) {
  // The graph depends on the topology (its nodes, links and NIC fabrics: the fingerprint; the GPUs' and CPUs'
  // architectures: Node::arch; the NICs' bus ids, which tell a card's ports), the group and whether the release fuses
  // NIC ports only, and a size sweep, the tuner and a calibration's fit ask for the same one many times over: found
  // once per process.
  std::string topology_key = topo.fingerprint();
  for (const Node& node : topo.nodes()) {
    if (!node.arch.empty() && node.kind != NodeKind::kNic) topology_key += "|" + node.arch;
    if (node.kind == NodeKind::kNic && !node.bus_id.empty()) topology_key += "|" + node.bus_id;
  }
  const bool fuse = fuses_nic_ports(release);
  topology_key += fuse ? "|fused" : "|ports";
  using Key = std::pair<std::string, std::vector<int>>;
  static std::mutex mutex;
  static std::map<Key, Graph> cache;
  static std::deque<Key> order;
  Key key{std::move(topology_key), gpus};
  {
    std::lock_guard lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) {
      Graph g = it->second;
      g.release = release;
      return g;
    }
  }
  Graph g = find_graph(topo, gpus, fuse);
  g.release = release;
  std::lock_guard lock(mutex);
  if (cache.emplace(key, g).second) {
    order.push_back(std::move(key));
    if (order.size() > kGraphCacheEntries) {
      cache.erase(order.front());
      order.pop_front();
    }
  }
  return g;
}

namespace {

// What a network step adds beyond NCCL's NET row on `g`'s fabric: NCCL's cost table adds the plugin's reported
// latency (graph latencyInter), once more for Simple (tuning.cc ncclTopoTuneModel: "Also add the flush extra
// latency"); the simulator's device time adds the port's extra step time (net_kind.cpp: by default the same).
enum class NetView { kNccl, kDevice };
double net_extra_us(const Graph& g, Proto proto, NetView view) {
  if (g.machines <= 1) return 0.0;
  const int p = static_cast<int>(proto);
  if (view == NetView::kDevice) return g.net.extra_step_us[p];
  return g.net.reported_latency_us * (proto == Proto::kSimple ? 2 : 1);
}

Latencies latencies_in(const LatencyTables& t, const Graph& g, Algo algo, Proto proto, const HopAdjust& adjust,
                       NetView view = NetView::kNccl) {
  const int a = static_cast<int>(algo), p = static_cast<int>(proto);
  const int intra_hw = (algo == Algo::kNvls || algo == Algo::kNvlsTree || g.nvlink_intra) ? kHwNvlink : kHwPci;
  // The device's time of LL128 on one machine is LL's (kLl128OneMachineLatencyProto); NCCL's choice keeps the table's.
  const int timed = view == NetView::kDevice && g.machines == 1 && proto == Proto::kLL128
                        ? static_cast<int>(kLl128OneMachineLatencyProto)
                        : p;
  Latencies l;
  l.base_us = t.base[a][timed];
  l.intra_us = t.hw[intra_hw][a][timed];
  // tuning.cc: "De-penalize Tree/Simple latency on Power systems to favor Tree than Ring".
  if (g.power_cpu && intra_hw == kHwPci && algo == Algo::kTree && proto == Proto::kSimple)
    l.intra_us = t.hw[kHwPci][static_cast<int>(Algo::kRing)][p];
  // tuning.cc (v2.23.4-1 on): with one GPU per machine latencies are fully exposed: the Tree network latency.
  const bool exposed = g.ppn == 1 && (view == NetView::kDevice || !(g.release < kNccl223));
  l.inter_us = exposed ? t.hw[kHwNet][static_cast<int>(Algo::kTree)][p] : t.hw[kHwNet][a][p];
  l.inter_us += net_extra_us(g, proto, view);
  if (algo == Algo::kRing && g.machines > 1) {
    double overhead = g.amd_x86_cpu ? kNetOverheadAmdUs : kNetOverheadIntelUs;
    if (proto == Proto::kSimple) overhead *= 3;
    l.intra_us = std::max(l.intra_us, overhead);
  }
  l.intra_us = std::max(0.0, l.intra_us + adjust.intra_us);
  l.inter_us = std::max(0.0, l.inter_us + adjust.inter_us);
  return l;
}

double pat_latency_in(const LatencyTables& t, const Graph& g, NetView view = NetView::kNccl) {
  if (!pat_enabled(g)) return -1.0;
  const double net = t.hw[kHwNet][static_cast<int>(Algo::kTree)][static_cast<int>(Proto::kSimple)] +
                     net_extra_us(g, Proto::kSimple, view);
  return t.base[static_cast<int>(Algo::kPat)][static_cast<int>(Proto::kSimple)] + log2i(g.machines) * net / kPatLevelDivisor +
         kPatPerRankUs * g.ranks;
}

double collective_latency_in(const LatencyTables& t, const Graph& g, Collective coll, Algo algo, Proto proto,
                             const HopAdjust& adjust, NetView view = NetView::kNccl) {
  const Latencies l = latencies_in(t, g, algo, proto, adjust, view);
  const bool all_reduce = coll == Collective::kAllReduce;
  // tuning.cc: all-reduce takes 2(k−1) ring steps, 2(nodes−1) of them across machines; the others half.
  const int nsteps = (all_reduce ? 2 : 1) * (g.ranks - 1);
  switch (algo) {
    case Algo::kRing: {
      const int inter_steps = g.machines == 1 ? 0 : (all_reduce ? 2 : 1) * (g.machines - 1);
      return l.base_us + (nsteps - inter_steps) * l.intra_us + inter_steps * l.inter_us;
    }
    case Algo::kTree: return l.base_us + 2 * ((g.ppn - 1) * l.intra_us + log2i(g.machines) * l.inter_us);
    case Algo::kNvls: return l.intra_us + (g.machines > 1 ? l.inter_us : 0.0);
    case Algo::kNvlsTree: return l.base_us + l.intra_us + 2 * log2i(g.machines) * l.inter_us;
    case Algo::kPat: return all_reduce ? l.base_us : std::max(0.0, pat_latency_in(t, g, view));
  }
  return l.base_us;
}

}  // namespace

const LatencyTables& LatencyTables::defaults() {
  static const LatencyTables t = [] {
    LatencyTables d;
    for (int a = 0; a < kAlgos; ++a) {
      for (int p = 0; p < kProtos; ++p) {
        d.base[a][p] = kBaseLatency[a][p];
        for (int k = 0; k < nccl_tuning::kHwClasses; ++k) d.hw[k][a][p] = kHwLatency[k][a][p];
      }
    }
    return d;
  }();
  return t;
}

LatencyTables LatencyTables::of(const NcclRelease& release) {
  LatencyTables t = defaults();
  const int tree = static_cast<int>(Algo::kTree), simple = static_cast<int>(Proto::kSimple);
  if (release < kNccl223) {
    t.base[tree][simple] = 0.0;
    for (auto& cls : t.hw) cls[tree][simple] = kTreeSimpleLatencyBefore223;
  }
  if (release < kNccl221) {
    t.hw[kHwNvlink][static_cast<int>(Algo::kNvls)][simple] = kNvlsNvlinkLatencyBefore221;
    t.hw[kHwNvlink][static_cast<int>(Algo::kNvlsTree)][simple] = kNvlsNvlinkLatencyBefore221;
  }
  if (release < kNccl2289) t.hw[kHwNet][static_cast<int>(Algo::kNvlsTree)][simple] = kNvlsTreeNetLatencyBefore2289;
  return t;
}

LatencyTables LatencyTables::calibrated(const nccl_tuning::Calibration& c, int machines) {
  LatencyTables t = defaults();
  nccl_tuning::apply(t.base, t.hw, c, machines);
  return t;
}

Latencies latencies(const Graph& g, Algo algo, Proto proto, const HopAdjust& adjust) {
  return latencies_in(LatencyTables::of(g.release), g, algo, proto, adjust);
}

double collective_latency_us(const Graph& g, Collective coll, Algo algo, Proto proto, const HopAdjust& adjust) {
  return collective_latency_in(LatencyTables::of(g.release), g, coll, algo, proto, adjust);
}

double launch_us(int gpus_per_thread, bool cuda_graph) {
  return cuda_graph ? 0.0 : kLaunchPerGpuUs * std::max(1, gpus_per_thread);
}

double nvls_round_us(int gpus) { return kNvlsTwoGpuUs + kNvlsPerGpuUs * std::max(0, gpus - 2); }

double device_latency_us(const Graph& g, Algo algo, Proto proto, const HopAdjust& adjust, Collective coll) {
  const LatencyTables& t = LatencyTables::defaults();
  if (algo != Algo::kNvls && algo != Algo::kNvlsTree)
    return collective_latency_in(t, g, coll, algo, proto, adjust, NetView::kDevice);
  // NVLS: the multicast round for this many GPUs per machine, shifted as the NVLink steps are.
  const Latencies l = latencies_in(t, g, algo, proto, adjust, NetView::kDevice);
  const double round = std::max(0.0, nvls_round_us(g.ppn) + adjust.intra_us);
  if (algo == Algo::kNvls) return round + (g.machines > 1 ? l.inter_us : 0.0);
  // NVLSTree: the multicast round, then up and down the tree between the machines (log2 of them each way), each
  // network step timed as Tree/Simple's (kNvlsTreeNetStepAlgo: NCCL 2.28.9's 20.9 µs weighs its choice only).
  const Latencies tree = latencies_in(t, g, kNvlsTreeNetStepAlgo, proto, adjust, NetView::kDevice);
  return l.base_us + round + 2 * log2i(g.machines) * tree.inter_us;
}

bool modelled(Collective coll) noexcept {
  return coll == Collective::kAllReduce || coll == Collective::kAllGather || coll == Collective::kReduceScatter;
}

CostTable cost_table(const Graph& g, Collective coll) { return cost_table(g, coll, LatencyTables::of(g.release)); }

CostTable cost_table(const Graph& g, Collective coll, const LatencyTables& tables) {
  CostTable t;
  if (g.ranks <= 1 || !modelled(coll)) return t;
  const bool all_reduce = coll == Collective::kAllReduce;
  const NcclRelease& release = g.release;
  const int cci = release < kNccl225 ? std::min(cc_index(g.compcap), 2) : cc_index(g.compcap);
  const int index2 = g.machines <= 2 ? g.machines - 1 : 2;
  const int index1 = g.machines == 1 ? cci : (g.amd_cpu ? 1 : 0);
  const double ll_max = index1 == 2 && release < kNccl221 ? kHopperLlMaxBwBefore221[index2]
                                                                 : kLlMaxBw[index1][index2];
  const double ring_ll = !(release < kNccl221)                  ? kRingLLFactor
                         : g.machines > 1 || all_reduce ? kRingLLQuarter : kRingLLThird;
  const double ring_ll128 =
      release < kNccl223 && g.ppn < 2 ? kRingLL128OneGpuPerMachineBefore223 : kRingLL128Factor;
  const bool nvls_efficiency = !(release < kNccl228);
  const double nsteps = (all_reduce ? 2.0 : 1.0) * (g.ranks - 1);
  for (int a = 0; a < kAlgos; ++a) {
    const Algo algo = static_cast<Algo>(a);
    // tuning.cc: PAT does not run all-reduce; all-gather and reduce-scatter run Ring, NVLS and PAT only.
    if (all_reduce ? algo == Algo::kPat : (algo == Algo::kTree || algo == Algo::kNvlsTree)) continue;
    if (algo == Algo::kPat && !pat_enabled(g)) continue;
    for (int p = 0; p < kProtos; ++p) {
      const Proto proto = static_cast<Proto>(p);
      const bool nvls = algo == Algo::kNvls || algo == Algo::kNvlsTree;
      if ((nvls || algo == Algo::kPat) && proto != Proto::kSimple) continue;
      double bw = g.machines > 2 ? g.bw_inter : algo == Algo::kTree ? g.tree_bw_intra : g.bw_intra;
      int nch = g.channels;
      if (nvls) {
        if (g.nvls_channels < 2) continue;
        nch = g.nvls_channels;
        // The NVLS graph's network share: the rings' NICs spread over its heads.
        // One machine: search.cc raises the NVLS graph's bwInter while it fits, up to the top speed step.
        const double net = g.machines > 1 ? g.bw_inter * g.channels / nch : g.nvls_bw_inter;
        if (nvls_efficiency) {
          // All-reduce pipelines two operations; all-gather/reduce-scatter move (ppn−1)/ppn.
          const double intra = g.nvls_bw * kNvlsEfficiency[cci] * (nch - 1) / nch *
                               (all_reduce ? 2.0 : static_cast<double>(g.ppn - 1) / g.ppn);
          const double inter = net * ((g.machines <= 2 && algo == Algo::kNvlsTree) ? 2 : 1);
          bw = std::min({intra, inter,
                         algo == Algo::kNvlsTree ? kPerChNvlsTree[cci][index2] : std::numeric_limits<double>::max()});
        } else if (algo == Algo::kNvlsTree) {
          bw = std::min(g.nvls_bw, g.machines <= 2 ? net : net / 2);
        } else if (all_reduce || release < kNccl226) {
          bw = std::min(g.nvls_bw, net);
        } else {
          bw = std::min(g.nvls_bw * (g.ppn - 1) / g.ppn, net * kNvlsAgRsInterShare);
        }
      }
      double bus = nch * bw;
      if (algo == Algo::kRing && proto == Proto::kLL) bus = std::min(ll_max, bus * ring_ll);
      if (algo == Algo::kRing && proto == Proto::kLL128)
        bus = std::min(bus * ring_ll128, nch * kPerChRingLL128[cci][index2]);
      if (algo == Algo::kTree) bus = std::min(bus * kTreeFactor, nch * kPerChTree[cci][index2]);
      if (algo == Algo::kTree && proto == Proto::kLL) bus = std::min(bus * kTreeLLFactor, ll_max);
      if (algo == Algo::kTree && proto == Proto::kLL128) {
        bus = std::min(bus * (g.machines == 1 ? kTreeLL128OneNodeFactor : kTreeLL128Factor),
                       nch * kPerChTreeLL128[cci][index2]);
      }
      if (algo == Algo::kTree && g.simple_tree) bus *= kSimpleTreeFactor;
      if (algo == Algo::kPat) bus *= release < kNccl224 ? kPatBusFactorIn223 : kPatBusFactor;
      // Bus to algorithm bandwidth: all-gather/reduce-scatter convert Ring only (tuning.cc; before v2.23.4-1 NVLS
      // too); NVLS and NVLSTree by 5/6 before v2.28.3-1.
      if (nvls && !nvls_efficiency && (all_reduce || release < kNccl223)) {
        bus *= kNvlsRatioBefore228;
      } else if (all_reduce || algo == Algo::kRing) {
        bus *= algo == Algo::kTree ? 0.5 : g.ranks / nsteps;
      }
      // Enabled: LL128 where NCCL enables it; NVLSTree only across machines; NVLS only on one (no CollNet).
      bool on = true;
      if (proto == Proto::kLL128 && !g.ll128_ok) on = false;
      if (proto == Proto::kLL128 && g.type_inter == PathType::kPxn && release >= kNccl2273 && release < kNccl2277) {
        on = false;
      }
      if (algo == Algo::kNvlsTree && g.machines == 1) on = false;
      if (algo == Algo::kNvls && g.machines > 1) on = false;
      // A fabric that allows only some protocols (aws-ofi-nccl sets NCCL_PROTO=simple on EFA, net_kind.cpp).
      if (g.machines > 1 && (g.net.protocols & (1u << p)) == 0) on = false;
      t.bandwidth[a][p] = on ? bus : 0.0;
      t.latency_us[a][p] = collective_latency_in(tables, g, coll, algo, proto, {});
    }
  }
  return t;
}

double algo_time(const Graph& g, const CostTable& t, Algo algo, Proto proto, double bytes, Collective coll) {
  const int a = static_cast<int>(algo), p = static_cast<int>(proto);
  double bw = t.bandwidth[a][p];
  double lat = t.latency_us[a][p];
  if (bw <= 0) return -1.0;
  const bool all_reduce = coll == Collective::kAllReduce;  // ncclTopoGetAlgoTime corrects all-reduce only
  if (all_reduce && algo == Algo::kTree) bw *= tree_correction(proto, bytes);
  if (all_reduce && algo == Algo::kRing && proto == Proto::kSimple && g.machines > 1 &&
      bytes / (static_cast<double>(g.channels) * g.ranks) >= 64) {
    lat *= g.compcap < 80 ? kRingPlateauPreAmpere : kRingPlateau;
  }
  return lat + bytes / (1000.0 * bw);
}

Choice choose(const Graph& graph, double bytes, const Forced& forced, std::string_view what, Collective coll) {
  return choose(graph, bytes, forced, what, coll, LatencyTables::of(graph.release));
}

Choice choose(const Graph& graph, double bytes, const Forced& forced, std::string_view what, Collective coll,
              const LatencyTables& tables) {
  if (forced.channels > 0 && !forced.algo) {
    throw InvalidInput(fmt::format("{}: a forced NCCL channel count needs a forced algorithm", what));
  }
  const Graph g = forced.channels > 0 ? with_channels(graph, *forced.algo, forced.channels, what) : graph;
  const CostTable t = cost_table(g, coll, tables);
  Choice best;
  double best_time = -1;
  for (int a = 0; a < kAlgos; ++a) {
    if (forced.algo && static_cast<int>(*forced.algo) != a) continue;
    for (int p = 0; p < kProtos; ++p) {
      if (forced.proto && static_cast<int>(*forced.proto) != p) continue;
      const double time = algo_time(g, t, static_cast<Algo>(a), static_cast<Proto>(p), bytes, coll);
      if (time < 0) continue;
      if (best_time < 0 || time < best_time) {
        best_time = time;
        best.algo = static_cast<Algo>(a);
        best.proto = static_cast<Proto>(p);
      }
    }
  }
  if (best_time < 0) {
    throw InvalidInput(fmt::format(
        "{}: NCCL {} is not available for {} here ({} GPUs on {} machine(s), sm{}, {} NVSwitch; NVLS needs an "
        "NVSwitch and sm90+ on one machine, NVLSTree several such machines, LL128 NVLink and sm70+, PAT one GPU "
        "per machine and does not run all-reduce, Tree and NVLSTree run all-reduce only{})",
        what, to_string(forced), to_string(coll), g.ranks, g.machines, g.compcap, g.nvswitch > 0 ? "with" : "no",
        g.machines > 1 && g.net.protocols != kNetAllProtocols
            ? fmt::format("; the network ({}) allows only {}", artune::to_string(g.net.kind),
                          protocols_text(g.net.protocols))
            : ""));
  }
  best.nccl_time_us = best_time;
  best.channels = (best.algo == Algo::kNvls || best.algo == Algo::kNvlsTree) ? g.nvls_channels : g.channels;
  return best;
}

double wire_factor(Proto proto) noexcept {
  return proto == Proto::kLL ? kLLWire : proto == Proto::kLL128 ? kLL128Wire : 1.0;
}

double channel_cap_gbps(const Graph& g, Algo algo, Proto proto, double bytes) {
  const int cci = cc_index(g.compcap);
  const int index2 = g.machines <= 2 ? g.machines - 1 : 2;
  const int index1 = g.machines == 1 ? cci : (g.amd_cpu ? 1 : 0);
  const int nch = std::max(1, g.channels);
  if (algo == Algo::kRing) {
    if (proto == Proto::kLL) return kLlMaxBw[index1][index2] / nch;
    if (proto == Proto::kLL128) return kPerChRingLL128[cci][index2];
    return 0.0;
  }
  if (algo == Algo::kTree) {
    // A tree channel moves its share once up and once down per edge, at most at the algorithm bandwidth
    // NCCL's table gives one channel (busBw × .92, per-channel caps, protocol factors, × .5), corrected for the
    // size as NCCL corrects it (treeCorrectionFactor).
    return all_reduce_table(g).bandwidth[static_cast<int>(Algo::kTree)][static_cast<int>(proto)] / nch *
           tree_correction(proto, bytes);
  }
  if (algo == Algo::kNvlsTree) return kPerChNvlsTree[cci][index2];
  return 0.0;
}

double nvls_efficiency(const Graph& g) noexcept { return kNvlsEfficiency[cc_index(g.compcap)]; }

double tree_correction(Proto proto, double bytes) noexcept {
  const auto b = static_cast<std::uint64_t>(bytes);
  const int log_size = (b >> 6) == 0 ? -1 : log2i(static_cast<int>(std::min<std::uint64_t>(b >> 6, 1u << 30)));
  return log_size >= 0 && log_size < 23 ? kTreeCorrection[static_cast<int>(proto)][log_size] : 1.0;
}


bool pat_enabled(const Graph& g) noexcept {
  return !(g.release < kNccl223) && g.compcap >= kPatMinCompcap && g.ppn == 1 && g.ranks > 1;
}

double pat_latency_us(const Graph& g) noexcept { return pat_latency_in(LatencyTables::of(g.release), g); }

int tree_parent(int machines, int tree, int m) {
  // Binary tree in heap order over the machines; the second tree mirrors the ranks so that a machine
  // inside one tree is a leaf of the other (NCCL's double binary tree, src/graph/trees.cc).
  const int r = tree == 0 ? m : machines - 1 - m;
  if (r == 0) return -1;
  const int parent = (r - 1) / 2;
  return tree == 0 ? parent : machines - 1 - parent;
}

}  // namespace artune::nccl
