#include "artune/tuner/candidates.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/registry.hpp"
#include "artune/core/output_file.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/output_file.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parallel.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/tuner/json_fields.hpp"

namespace artune {

using tuner_detail::Field;

std::string Candidate::label() const {
  std::string out = spec;
  if (!gpu_perm.empty()) out += fmt::format(" perm={}", fmt::join(gpu_perm, ","));
  if (!gather.empty()) out += fmt::format(" gather={}", fmt::join(gather, ","));
  if (segments > 1) out += fmt::format(" seg={}", segments);
  return out;
}

Candidate parse_candidate_label(std::string_view label, std::string_view what) {
  Candidate c;
  std::vector<std::string> words;
  std::string word;
  for (char ch : label) {
    if (ch == ' ') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += ch;
    }
  }
  if (!word.empty()) words.push_back(word);
  if (words.empty()) throw InvalidInput(fmt::format("{}: empty", what));
  c.spec = words.front();
  const auto numbers = [&](const std::string& key, const std::string& text) {
    std::vector<int> out;
    std::size_t at = 0;
    while (at <= text.size()) {
      const std::size_t comma = std::min(text.find(',', at), text.size());
      const std::string item = text.substr(at, comma - at);
      std::size_t used = 0;
      int value = -1;
      try {
        value = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (item.empty() || used != item.size() || value < 0) {
        throw InvalidInput(fmt::format("{} '{}': {}= takes non-negative integers separated by commas, not '{}'", what,
                                       label, key, item));
      }
      out.push_back(value);
      at = comma + 1;
    }
    return out;
  };
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    const std::size_t eq = w.find('=');
    const std::string key = eq == std::string::npos ? w : w.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (key == "perm") {
      c.gpu_perm = numbers(key, value);
    } else if (key == "seg") {
      const std::vector<int> seg = numbers(key, value);
      if (seg.size() != 1 || seg[0] < 1) {
        throw InvalidInput(fmt::format("{} '{}': seg= takes one integer >= 1, not '{}'", what, label, value));
      }
      c.segments = seg[0];
    } else if (key == "gather") {
      std::size_t at = 0;
      while (at <= value.size()) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        if (comma == at) throw InvalidInput(fmt::format("{} '{}': gather= has an empty device id", what, label));
        c.gather.push_back(value.substr(at, comma - at));
        at = comma + 1;
      }
    } else {
      throw InvalidInput(
          fmt::format("{} '{}': '{}' is not perm=, gather= or seg= (the parameters of a plan label)", what, label, w));
    }
  }
  return c;
}

BuildOptions Candidate::build_options(const Topology& topo, std::int64_t count, ReduceOp op) const {
  BuildOptions options;
  options.count = count;
  options.reduce_op = op;
  options.gpu_perm = gpu_perm;
  for (const auto& id : gather) {
    const int node = topo.find_node(id);
    if (node < 0)
      throw InvalidInput(
          fmt::format("plan '{}': gather device '{}' is not in topology '{}'", label(), id, topo.name()));
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
  for (std::size_t i = 0; i < perm.array_size(); ++i)
    c.gpu_perm.push_back(perm[i].int_in(0, static_cast<int>(kMaxPlanRanks) - 1));
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

Plan build_candidate(const Topology& topo, const Candidate& candidate, std::int64_t count, ReduceOp op, bool verify) {
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
    if (static_cast<int>(cycles.size()) > options_.max_cycles)
      cycles.resize(static_cast<std::size_t>(options_.max_cycles));
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
    // Every family's candidates, in their tuner positions (ties keep generation order, so the order is fixed).
    CandidateContext ctx{.topo = topo_, .machines = machines, .gpus = g, .large = large};
    ctx.orders = orders;
    ctx.expanded_orders = kExpandedOrders;
    ctx.subchunks = subs;
    ctx.best_cycles = cycles;
    ctx.bandwidth = bw;
    ctx.exhaustive_gpus = kExhaustiveGpus;
    ctx.include_library = options_.include_nccl;
    const bool all_reduce = options_.collective == Collective::kAllReduce;
    if (options_.include_nccl && all_reduce) ctx.library_algorithms = library_algorithms();
    ctx.disjoint_rings = &set_.disjoint_rings;
    ctx.cliques = &set_.cliques;
    std::vector<std::pair<int, const Family*>> order;
    for (const Family* f : families(options_.collective)) {
      if (f->candidates != nullptr) order.emplace_back(f->tuner_position, f);
    }
    order.emplace_back(kHybridPosition, nullptr);
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [position, family] : order) {
      if (family == nullptr) {
        if (machines > 1) add_hybrids();
        continue;
      }
      std::vector<CandidateSeed> seeds;
      family->candidates(ctx, seeds);
      for (CandidateSeed& seed : seeds) add_seed(family->name, std::move(seed));
    }
    build_pending();
    return std::move(set_);
  }

 private:
  static constexpr int kCycleSearchLimit = 4096;
  static constexpr int kExhaustiveGpus = 16;  ///< GPUs per machine up to which the searches are exhaustive
  static constexpr int kLargeSubchunks = 8;   ///< default subchunk cap beyond kExhaustiveGpus
  static constexpr int kHugeGpus = 64;        ///< GPUs per machine beyond which plans are not segmented
  bool huge_ = false;                         ///< no pipelined candidates beyond kHugeGpus
  static constexpr std::size_t kExpandedOrders = 2;
  static constexpr int kHybridPosition = 65;  ///< TF's hybrids come after the tree, before 2d

  // TF's hybrids across machines (in-machine level / across machines); for all-gather and reduce-scatter
  // the registry's (nccl/ring, nccl/bruck, …: the library inside, a point-to-point family across).
  void add_hybrids() {
    if (options_.collective != Collective::kAllReduce) {
      if (!options_.include_nccl) return;
      for (const Family* f : families(options_.collective)) {
        for (const SpecName& n : f->specs) {
          for (const char* upper : n.hybrid_uppers)
            add_segmented("hybrid", fmt::format("{}/{}", n.token, upper), {}, {}, true);
        }
      }
      return;
    }
    for (const char* spec : {"nccl/xring", "nccl/rechd", "nccl/pscpu", "pscpu/xring", "pscpu/rechd", "pscpu/pscpu"}) {
      const bool library = std::string_view(spec).substr(0, 4) == "nccl";
      if (library && !options_.include_nccl) continue;
      add_segmented("hybrid", spec, {}, {}, true);
    }
  }

  // NCCL's algorithms that its model offers here (a forced one can beat NCCL's own pick where its cost
  // table misjudges the machine).
  std::vector<std::string> library_algorithms() const {
    std::vector<std::string> out;
    nccl::CostTable table;
    try {
      if (topo_.gpus().size() > 1) {
        table = nccl::all_reduce_table(nccl::search(topo_, topo_.gpus(), options_.nccl_release));
      }
    } catch (const Error&) {
      // Machines with different GPU counts: NCCL's model needs the same count on each; no variants.
      return out;
    }
    for (const nccl::Algo a : {nccl::Algo::kRing, nccl::Algo::kTree, nccl::Algo::kNvls, nccl::Algo::kNvlsTree}) {
      const auto& bw = table.bandwidth[static_cast<int>(a)];
      if (bw[0] > 0 || bw[1] > 0 || bw[2] > 0) out.emplace_back(nccl::to_string(a));
    }
    return out;
  }

  void add_seed(const std::string& family, CandidateSeed seed) {
    if (seed.segments == CandidateSeed::Segments::kOne) {
      add(Candidate{family, std::move(seed.spec), std::move(seed.gpu_perm), std::move(seed.gather), 1});
      return;
    }
    add_segmented(family, seed.spec, seed.gpu_perm, seed.gather, seed.segments == CandidateSeed::Segments::kAll,
                  seed.depths);
  }

  void add_segmented(const std::string& family, const std::string& spec, const std::vector<int>& perm,
                     const std::vector<std::string>& gather, bool segmented, const std::vector<int>& depths = {}) {
    // A family's own depths replace the tuner's when the tuner pipelines at all (segments {1}: none anywhere).
    const bool pipelined = std::any_of(options_.segments.begin(), options_.segments.end(), [](int s) { return s > 1; });
    for (int seg : depths.empty() || !segmented || !pipelined ? options_.segments : depths) {
      if (seg < 1) continue;
      if (huge_ && seg > 1) continue;
      if (seg > 1 && !segmented) continue;
      add(Candidate{family, spec, perm, gather, seg});
    }
  }

  void add(Candidate c) {
    c.collective = options_.collective;
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
