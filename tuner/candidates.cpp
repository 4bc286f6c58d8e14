#include "tuner/candidates.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "algorithms/builders.hpp"
#include "algorithms/collectives.hpp"
#include "core/output_file.hpp"
#include "algorithms/verifier.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "simulator/nccl_model.hpp"
#include "tuner/json_fields.hpp"

namespace artune {

using tuner_detail::Field;

std::string Candidate::label() const {
  std::string out = spec;
  if (!gpu_perm.empty()) out += fmt::format(" perm={}", fmt::join(gpu_perm, ","));
  if (!gather.empty()) out += fmt::format(" gather={}", fmt::join(gather, ","));
  if (segments > 1) out += fmt::format(" seg={}", segments);
  return out;
}

BuildOptions Candidate::build_options(const Topology& topo, std::int64_t count, ReduceOp op) const {
  BuildOptions options;
  options.count = count;
  options.reduce_op = op;
  options.gpu_perm = gpu_perm;
  for (const auto& id : gather) {
    const int node = topo.find_node(id);
    if (node < 0) throw InvalidInput(fmt::format("plan '{}': gather device '{}' is not in topology '{}'", label(), id, topo.name()));
    options.gather.push_back(node);
  }
  options.segments = segments;
  options.collective = collective;
  return options;
}

nlohmann::json candidate_to_json(const Candidate& c) {
  nlohmann::json doc = {{"family", c.family}, {"spec", c.spec},         {"gpu_perm", c.gpu_perm},
                        {"gather", c.gather}, {"segments", c.segments}, {"label", c.label()}};
  if (c.collective != Collective::kAllReduce) doc["collective"] = std::string(collective_flag_name(c.collective));
  return doc;
}

Candidate candidate_from_json(const nlohmann::json& doc, std::string_view where) {
  const Field f{doc, std::string(where)};
  Candidate c;
  c.family = f.at("family").str();
  c.spec = f.at("spec").str();
  if (c.spec.empty()) f.at("spec").fail("must not be empty");
  const Field perm = f.at("gpu_perm");
  for (std::size_t i = 0; i < perm.array_size(); ++i) c.gpu_perm.push_back(perm[i].int_in(0, static_cast<int>(kMaxPlanRanks) - 1));
  const Field gather = f.at("gather");
  for (std::size_t i = 0; i < gather.array_size(); ++i) c.gather.push_back(gather[i].str());
  c.segments = f.at("segments").int_in(1, kMaxSegments);
  if (f.has("collective")) {
    const Field kind = f.at("collective");
    try {
      c.collective = parse_collective_kind(kind.str(), "collective");
    } catch (const InvalidInput&) {
      kind.fail("must be allreduce, allgather or reducescatter");
    }
  }
  if (f.has("label") && f.at("label").str() != c.label()) {
    f.at("label").fail(fmt::format("does not match the plan's fields (expected '{}')", c.label()));
  }
  return c;
}

Plan build_candidate(const Topology& topo, const Candidate& candidate, std::int64_t count, ReduceOp op,
                     bool verify) {
  BuildOptions options = candidate.build_options(topo, count, op);
  options.verify = verify;
  return build_plan(topo, parse_collective_spec(candidate.collective, candidate.spec), options);
}

namespace {

/// Route bandwidth between the local GPUs of one machine (GB/s).
std::vector<std::vector<double>> local_bandwidth(const Topology& topo, int machine) {
  const auto gpus = topo.gpus_of_machine(machine);
  std::vector<std::vector<double>> bw(gpus.size(), std::vector<double>(gpus.size(), 0.0));
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = 0; j < gpus.size(); ++j) {
      if (i != j) bw[i][j] = topo.route(gpus[i], gpus[j]).bandwidth_gbps;
    }
  }
  return bw;
}

/// A ring order's static score: its bottleneck hop bandwidth, then the sum over hops.
std::pair<double, double> ring_score(const std::vector<int>& order, const std::vector<std::vector<double>>& bw) {
  double bottleneck = std::numeric_limits<double>::infinity(), sum = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int a = order[i], b = order[(i + 1) % order.size()];
    const double v = std::min(bw[a][b], bw[b][a]);
    bottleneck = std::min(bottleneck, v);
    sum += v;
  }
  return {bottleneck, sum};
}

/// Recursive halving-doubling cost of a device order (first step pairs neighbours, as TF does):
/// Σ over steps of the data exchanged / the slowest pair of that step, in arbitrary units.
double rechd_cost(const std::vector<int>& order, const std::vector<std::vector<double>>& bw) {
  const std::size_t p = order.size();
  double cost = 0, data = 0.5;
  for (std::size_t span = 1; span < p; span *= 2, data /= 2) {
    double slowest = std::numeric_limits<double>::infinity();
    for (std::size_t d = 0; d + span < p; ++d) {
      if ((d % (2 * span)) >= span) continue;
      const int a = order[d], b = order[d + span];
      slowest = std::min(slowest, std::min(bw[a][b], bw[b][a]));
    }
    cost += data / std::max(slowest, 1e-9);
  }
  return cost;
}

/// Hill-climbs pairwise swaps from `start` to lower rechd_cost (deterministic, first improvement).
std::vector<int> improve_rechd_order(std::vector<int> order, const std::vector<std::vector<double>>& bw) {
  double best = rechd_cost(order, bw);
  for (bool improved = true; improved;) {
    improved = false;
    for (std::size_t i = 0; i < order.size() && !improved; ++i) {
      for (std::size_t j = i + 1; j < order.size() && !improved; ++j) {
        std::swap(order[i], order[j]);
        const double c = rechd_cost(order, bw);
        if (c < best - 1e-12) {
          best = c;
          improved = true;
        } else {
          std::swap(order[i], order[j]);
        }
      }
    }
  }
  return order;
}

bool is_identity(const std::vector<int>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int>(i)) return false;
  }
  return true;
}

std::vector<int> subchunk_counts(int gpus, int max_subchunks) {
  const int cap = std::max(1, std::min(gpus, max_subchunks));
  std::vector<int> out;
  for (int s = 1; s <= cap; ++s) {
    // Every count when few GPUs; powers of two (and the cap) otherwise.
    if (cap <= 4 || (s & (s - 1)) == 0 || s == cap) out.push_back(s);
  }
  return out;
}

class Generator {
 public:
  Generator(const Topology& topo, const CandidateOptions& options) : topo_(topo), options_(options) {}

  CandidateSet run() {
    const int machines = topo_.machine_count();
    const auto gpus0 = topo_.gpus_of_machine(0);
    const int g = static_cast<int>(gpus0.size());
    if (topo_.gpus().empty()) throw InvalidInput(fmt::format("topology '{}' has no GPUs to tune", topo_.name()));
    // Every candidate is a plan over all GPUs: past the plan limit none could be built, and the per-machine
    // matrices below would be allocated for nothing (plan, simulate and run refuse the same topologies).
    if (topo_.gpus().size() > kMaxPlanRanks) {
      throw InvalidInput(fmt::format("topology '{}': {} GPUs is more than artune's limit of {} ranks per plan",
                                     escape_control(topo_.name()), topo_.gpus().size(), kMaxPlanRanks));
    }
    const auto bw = local_bandwidth(topo_, 0);

    // Ring orders: NVLink Hamiltonian cycles of machine 0, best first by static score, plus identity.
    std::vector<std::vector<int>> cycles;
    // Machines beyond kExhaustiveGpus GPUs skip the exhaustive searches (Hamiltonian cycles,
    // ring packing, rechd hill-climbing): their cost grows far faster than the GPU count, and
    // every candidate there also costs a plan build and verification with many operations.
    const bool large = g > kExhaustiveGpus;
    if (g >= 3 && !large) cycles = nvlink_hamiltonian_cycles(topo_, 0, kCycleSearchLimit);
    set_.hamiltonian_cycles = static_cast<int>(cycles.size());
    std::stable_sort(cycles.begin(), cycles.end(), [&](const auto& a, const auto& b) {
      const auto sa = ring_score(a, bw), sb = ring_score(b, bw);
      if (sa.first != sb.first) return sa.first > sb.first;
      return sa.second > sb.second;
    });
    if (static_cast<int>(cycles.size()) > options_.max_cycles) cycles.resize(static_cast<std::size_t>(options_.max_cycles));
    std::vector<std::vector<int>> orders;
    std::vector<int> identity(static_cast<std::size_t>(g));
    std::iota(identity.begin(), identity.end(), 0);
    for (const auto& c : cycles) orders.push_back(c);
    if (std::find(orders.begin(), orders.end(), identity) == orders.end()) orders.push_back(identity);

    // Building and verifying one plan costs ~GPUs² operations: past kHugeGpus only unsegmented
    // plans and at most 2 subchunks by default, so that a 256-GPU machine tunes in seconds.
    huge_ = g > kHugeGpus;
    const int max_sub = options_.max_subchunks > 0 ? options_.max_subchunks : huge_ ? 2 : large ? kLargeSubchunks : g;
    const auto subs = subchunk_counts(g, max_sub);
    // Full expansion (subchunks × segments) for the best few orders; the rest once each.
    for (std::size_t k = 0; k < orders.size(); ++k) {
      const bool expand = k < kExpandedOrders || orders[k] == identity;
      const std::vector<int> perm = is_identity(orders[k]) ? std::vector<int>{} : orders[k];
      for (int s : subs) {
        if (!expand && s != 1) continue;
        add_segmented("ring", s == 1 ? "xring" : fmt::format("xring#{}", s), perm, {}, expand);
      }
    }

    if (machines == 1) {
      if (g >= 3) {
        const auto rings = link_disjoint_rings(topo_, 0, large ? kLargeRings : g);
        set_.disjoint_rings = static_cast<int>(rings.size());
        for (int k = 2; k <= static_cast<int>(rings.size()); ++k) {
          add_segmented("mring", fmt::format("mring#{}", k), {}, {}, true);
        }
      }
      // Recursive halving-doubling: identity, the best ring order, and a hill-climbed order.
      std::set<std::vector<int>> rechd_orders;
      rechd_orders.insert(identity);
      if (!cycles.empty()) rechd_orders.insert(cycles.front());
      if ((g & (g - 1)) == 0 && !large) rechd_orders.insert(improve_rechd_order(identity, bw));
      for (const auto& o : rechd_orders) add_segmented("rechd", "rechd", is_identity(o) ? std::vector<int>{} : o, {}, true);
      // Shuffle: each CPU socket alone, all sockets, GPU 0 alone, every GPU (psgpu).
      const auto cpus = topo_.nodes_of_kind(NodeKind::kCpu, 0);
      std::vector<std::string> all_cpus;
      for (int c : cpus) {
        add_segmented("shuffle", "shuffle", {}, {topo_.nodes()[c].id}, true);
        all_cpus.push_back(topo_.nodes()[c].id);
      }
      if (all_cpus.size() > 1) add_segmented("shuffle", "shuffle", {}, all_cpus, true);
      std::vector<std::string> all_gpus;
      for (int gpu : gpus0) all_gpus.push_back(topo_.nodes()[gpu].id);
      add_segmented("shuffle", "shuffle", {}, {all_gpus.front()}, true);
      add_segmented("shuffle", "shuffle", {}, all_gpus, true);
      // Hierarchical copy over the NVLink cliques, 1…2n packs (powers of two).
      set_.cliques = nvlink_cliques(topo_, 0);
      const bool joined = std::any_of(set_.cliques.begin(), set_.cliques.end(), [](const auto& c) { return c.size() > 1; });
      if (set_.cliques.size() >= 2 && joined) {
        for (int packs = 1; packs <= 2 * std::min(g, kExhaustiveGpus); packs *= 2) add_segmented("hiercopy", fmt::format("hiercopy#{}", packs), {}, {}, false);
      }
      add_segmented("tree", "tree", {}, {}, true);
    } else {
      // Clusters: flat rechd across every GPU, the TF hybrids and the 2-D plan.
      add_segmented("rechd", "rechd", {}, {}, true);
      for (const char* spec : {"nccl/xring", "nccl/rechd", "nccl/pscpu", "pscpu/xring", "pscpu/rechd", "pscpu/pscpu"}) {
        const bool library = std::string_view(spec).substr(0, 4) == "nccl";
        if (library && !options_.include_nccl) continue;
        add_segmented("hybrid", spec, {}, {}, true);
      }
      // 2d is point-to-point rings only (no library collective): its in-machine
      // reduce-scatter/all-gather ring follows each of the best ring orders.
      for (std::size_t k = 0; k < orders.size(); ++k) {
        if (k >= kExpandedOrders && orders[k] != identity) continue;
        add_segmented("2d", "2d", is_identity(orders[k]) ? std::vector<int>{} : orders[k], {}, true);
      }
      set_.cliques = nvlink_cliques(topo_, 0);
    }
    if (options_.include_nccl) {
      add(Candidate{"nccl", "nccl", {}, {}, 1});
      // NCCL's algorithms one at a time, as NCCL_ALGO forces them, where NCCL has them here: a forced one
      // can beat NCCL's own pick where its cost table misjudges the machine.
      nccl::CostTable table;
      try {
        if (topo_.gpus().size() > 1) table = nccl::all_reduce_table(nccl::search(topo_, topo_.gpus()));
      } catch (const Error&) {
        // Machines with different GPU counts: NCCL's model needs the same count on each; no variants.
      }
      for (const nccl::Algo a : {nccl::Algo::kRing, nccl::Algo::kTree, nccl::Algo::kNvls, nccl::Algo::kNvlsTree}) {
        const auto& bw = table.bandwidth[static_cast<int>(a)];
        if (bw[0] > 0 || bw[1] > 0 || bw[2] > 0) {
          add(Candidate{"nccl", fmt::format("nccl.{}", nccl::to_string(a)), {}, {}, 1});
        }
      }
    }
    build_pending();
    return std::move(set_);
  }

 private:
  static constexpr int kCycleSearchLimit = 4096;
  static constexpr int kExhaustiveGpus = 16;   ///< GPUs per machine up to which the searches are exhaustive
  static constexpr int kLargeSubchunks = 8;    ///< default subchunk cap beyond kExhaustiveGpus
  static constexpr int kLargeRings = 4;
  static constexpr int kHugeGpus = 64;         ///< GPUs per machine beyond which plans are not segmented
  bool huge_ = false;        ///< link-disjoint rings sought beyond kExhaustiveGpus
  static constexpr std::size_t kExpandedOrders = 2;

  void add_segmented(const std::string& family, const std::string& spec, const std::vector<int>& perm,
                     const std::vector<std::string>& gather, bool segmented) {
    for (int seg : options_.segments) {
      if (seg < 1) continue;
      if (huge_ && seg > 1) continue;
      if (seg > 1 && !segmented) continue;
      add(Candidate{family, spec, perm, gather, seg});
    }
  }

  void add(Candidate c) {
    if (!labels_.insert(c.label()).second) return;
    pending_.push_back(std::move(c));
  }

  // Builds and verifies every pending candidate on options_.jobs threads (each fills its own slot), then keeps
  // them in generation order: the set is the same whatever the number of threads.
  void build_pending() {
    std::vector<std::size_t> ops(pending_.size(), 0);
    std::vector<std::string> why(pending_.size());
    parallel_for(pending_.size(), options_.jobs, [&](std::size_t i) {
      try {
        // build_plan verifies the plan (verify_or_throw) and throws on a problem: caught here.
        ops[i] = build_candidate(topo_, pending_[i], options_.verify_count, ReduceOp::kSum).ops.size();
      } catch (const Error& e) {
        const std::string label = pending_[i].label();
        const std::string what = e.what();
        why[i] = what.rfind(label + ":", 0) == 0 ? what : fmt::format("{}: {}", label, what);
        if (why[i].empty()) why[i] = label;
      }
    });
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      if (!why[i].empty()) {
        set_.rejected.push_back(std::move(why[i]));
        continue;
      }
      set_.plan_ops.push_back(ops[i]);
      set_.candidates.push_back(std::move(pending_[i]));
    }
    pending_.clear();
  }

  const Topology& topo_;
  const CandidateOptions& options_;
  CandidateSet set_;
  std::set<std::string> labels_;
  std::vector<Candidate> pending_;  ///< unique candidates not yet built and verified
};

// The DMA adjacency TF's _has_dgx1_like_links compares against (cross_tower_ops._dgx1_links).
const std::vector<std::vector<int>> kDgx1Links = {{1, 2, 3, 4}, {0, 2, 3, 5}, {0, 1, 3, 6}, {0, 1, 2, 7},
                                                  {0, 5, 6, 7}, {1, 4, 6, 7}, {2, 4, 5, 7}, {3, 4, 5, 6}};

bool has_dgx1_like_links(const Topology& topo) {
  const auto gpus = topo.gpus_of_machine(0);
  if (gpus.size() < 8) return false;
  for (std::size_t i = 0; i < 8; ++i) {
    std::set<int> links;
    for (std::size_t j = 0; j < gpus.size(); ++j) {
      if (i != j && topo.peer_access(gpus[i], gpus[j])) links.insert(static_cast<int>(j));
    }
    std::set<int> dgx1(kDgx1Links[i].begin(), kDgx1Links[i].end());
    std::set<int> with_self = dgx1;
    with_self.insert(static_cast<int>(i));
    if (links != dgx1 && links != with_self) return false;
  }
  return true;
}

}  // namespace

CandidateSet generate_candidates(const Topology& topo, const CandidateOptions& options) {
  return Generator(topo, options).run();
}

Candidate tf_choose_the_best(const Topology& topo, std::uint64_t bytes) {
  if (topo.gpus().empty()) {
    // ReductionToOneDeviceCrossTowerOps: everything gathered on the first device.
    const auto cpus = topo.nodes_of_kind(NodeKind::kCpu);
    return Candidate{"shuffle", "shuffle", {}, {cpus.empty() ? std::string() : topo.nodes()[cpus.front()].id}, 1};
  }
  if (topo.machine_count() > 1) {
    // MultiWorkerAllReduce's default: ("pscpu/pscpu", 2e5, 2 shards), then ("xring", 2 shards).
    if (bytes <= 200000) return Candidate{"hybrid", "pscpu#2/pscpu#2", {}, {}, 1};
    return Candidate{"ring", "xring#2", {}, {}, 1};
  }
  if (has_dgx1_like_links(topo)) {
    const int n = static_cast<int>(topo.gpus().size());
    return Candidate{"hiercopy", fmt::format("hiercopy#{}", n), {}, {}, 1};
  }
  return Candidate{"nccl", "nccl", {}, {}, 1};
}

std::string tf_choose_the_best_reason(const Topology& topo, std::uint64_t bytes) {
  if (topo.gpus().empty()) return "non-GPU devices: reduction to one device";
  if (topo.machine_count() > 1) {
    return bytes <= 200000 ? "MultiWorkerAllReduce default: pscpu/pscpu (2 shards) up to 2e5 bytes"
                           : "MultiWorkerAllReduce default: xring (2 shards) above 2e5 bytes";
  }
  if (has_dgx1_like_links(topo)) return "DGX-1-like DMA links: hierarchical_copy, one pack per GPU";
  return "no DGX-1-like links: nccl, one pack";
}

}  // namespace artune
