// The dispatcher: from a parsed spec, the topology and the options to a plan.
//
// It resolves participants (ranks in order, grouped into workers = machines),
// maps the spec's names to the families' emitters with their parameters, adds
// helper devices (gather shards) as the families ask for them, and applies the
// pipeline transform. Every plan it returns has passed the static verifier
// unless the caller opts out (options.verify) because it verifies itself.

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/families/families.hpp"
#include "artune/algorithms/registry.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/core/sizes.hpp"

namespace artune {

namespace detail {

std::string token_text(const AlgToken& t) { return t.arg >= 0 ? fmt::format("{}#{}", t.name, t.arg) : t.name; }

// Ops of a ring all-reduce over n members whose region is cut into `chunks` pieces (subchunks ×
// n, or rings × n): every non-empty piece crosses 2(n−1) ring edges (reduce-scatter, then
// all-gather). Pieces beyond `count` are empty and emit nothing.
std::uint64_t ring_ops(std::int64_t n, std::int64_t chunks, std::int64_t count) {
  if (n < 2) return 0;
  return 2 * static_cast<std::uint64_t>(n - 1) * static_cast<std::uint64_t>(std::min(chunks, count));
}

// Scales of an avg over a region cut into `chunks` pieces: one per non-empty piece (none for sum, …).
std::uint64_t scale_ops(const Setup& s, std::int64_t chunks, std::int64_t count) {
  return s.scale_by == kNoScale ? 0 : static_cast<std::uint64_t>(std::min(chunks, count));
}

// Refuses a plan whose op count (Family::max_ops, computed before anything is emitted) is beyond kMaxPlanOps.
void require_plan_size(const Setup& s, const AlgToken& token, std::uint64_t ops) {
  if (ops <= kMaxPlanOps) return;
  // Suggest a hierarchical spec only to a flat one: a hierarchical plan this large needs fewer participants.
  const bool flat = token_text(token).find('/') == std::string::npos && token_text(token) != "2d";
  throw InvalidInput(fmt::format("{} {}: the plan over {} ranks would hold {} ops, more than artune's limit of {} "
                                 "ops per plan (use fewer participants or subchunks{})",
                                 parameter("spec"), token_text(token), ranks(s), ops, kMaxPlanOps,
                                 flat ? ", or a hierarchical spec such as 2d" : ""));
}

// The local ring order: --gpu-perm, or identity; must be a permutation of 0..G−1.
std::vector<int> local_order(const Setup& s, const AlgToken& token) {
  if (s.per_worker < 0) {
    throw InvalidInput(
        fmt::format("{}: machines hold different numbers of participants; a ring over workers "
                    "needs the same number on each",
                    token_text(token)));
  }
  const int g = s.per_worker;
  if (s.options.gpu_perm.empty()) {
    std::vector<int> id(static_cast<std::size_t>(g));
    std::iota(id.begin(), id.end(), 0);
    return id;
  }
  std::vector<int> perm = s.options.gpu_perm;
  std::vector<int> check = perm;
  std::sort(check.begin(), check.end());
  std::vector<int> id(static_cast<std::size_t>(g));
  std::iota(id.begin(), id.end(), 0);
  if (check != id) {
    std::string text;
    for (int x : perm) {
      if (!text.empty()) text += ',';  // piecewise: g++ 12's false -Wrestrict (GCC bug 105329) on "," + temporary
      text += std::to_string(x);
    }
    throw InvalidInput(fmt::format("{} {}: must be a permutation of 0..{} (the participants of each machine)",
                                   parameter("gpu_perm"), text, g - 1));
  }
  return perm;
}

std::vector<Slot> machine_slots(const std::vector<int>& ranks_of_worker) {
  std::vector<Slot> out;
  for (int r : ranks_of_worker) out.push_back(Slot{r, 0, 0});
  return out;
}

// Ranks in the order of --gpu-perm inside each worker, workers concatenated (rechd and tree take
// part in this order, as TF's rechd pairs its input devices in list order); rank order without it.
std::vector<Slot> ordered_slots(const Setup& s, const AlgToken& token) {
  if (s.options.gpu_perm.empty()) return detail::user_slots(ranks(s));
  const std::vector<int> perm = local_order(s, token);
  std::vector<Slot> out;
  for (const auto& w : s.workers) {
    for (int l : perm) out.push_back(Slot{w[static_cast<std::size_t>(l)], 0, 0});
  }
  return out;
}

}  // namespace detail

namespace {

using detail::Emitter;
using detail::Setup;
using detail::Slot;

Setup make_setup(const Topology& topo, const BuildOptions& options) {
  Setup s{topo, options, {}, {}, {}, -1, detail::kNoScale};
  const auto& nodes = topo.nodes();
  if (options.participants.empty()) {
    s.nodes = topo.gpus();
    if (s.nodes.empty()) throw InvalidInput(fmt::format("topology '{}' has no GPUs to take part", topo.name()));
  } else {
    if (options.participants.size() > kMaxPlanRanks) {
      throw InvalidInput(fmt::format("{}: {} ranks is more than artune's limit of {} ranks per plan",
                                     parameter("participants"), options.participants.size(), kMaxPlanRanks));
    }
    for (std::size_t i = 0; i < options.participants.size(); ++i) {
      const int node = options.participants[i];
      if (node < 0 || node >= static_cast<int>(nodes.size())) {
        throw InvalidInput(fmt::format("participants[{}]: topology '{}' has no node {}", i, topo.name(), node));
      }
      const NodeKind kind = nodes[static_cast<std::size_t>(node)].kind;
      if (kind != NodeKind::kGpu && kind != NodeKind::kCpu) {
        throw InvalidInput(fmt::format("participants[{}]: {} is a {}, not a GPU or CPU", i,
                                       nodes[static_cast<std::size_t>(node)].id, to_string(kind)));
      }
      if (std::find(s.nodes.begin(), s.nodes.end(), node) != s.nodes.end()) {
        throw InvalidInput(
            fmt::format("participants[{}]: {} appears twice", i, nodes[static_cast<std::size_t>(node)].id));
      }
      s.nodes.push_back(node);
    }
  }
  if (s.nodes.size() > kMaxPlanRanks) {
    throw InvalidInput(
        fmt::format("topology '{}': a plan over its {} GPUs would have more than artune's limit of {} "
                    "ranks per plan (give {}, or a smaller topology)",
                    topo.name(), s.nodes.size(), kMaxPlanRanks, parameter("participants")));
  }
  std::map<int, int> worker_of_machine;
  std::vector<int> machines;
  for (int node : s.nodes) machines.push_back(nodes[static_cast<std::size_t>(node)].machine);
  std::vector<int> sorted = machines;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (int m : sorted) {
    worker_of_machine[m] = static_cast<int>(s.worker_machine.size());
    s.worker_machine.push_back(m);
  }
  s.workers.resize(s.worker_machine.size());
  for (int r = 0; r < static_cast<int>(s.nodes.size()); ++r) {
    s.workers[static_cast<std::size_t>(worker_of_machine[machines[static_cast<std::size_t>(r)]])].push_back(r);
  }
  s.per_worker = static_cast<int>(s.workers.front().size());
  for (const auto& w : s.workers) {
    if (static_cast<int>(w.size()) != s.per_worker) s.per_worker = -1;
  }
  if (options.reduce_op == ReduceOp::kAvg) s.scale_by = static_cast<int>(s.nodes.size());
  return s;
}

// --gpu-perm applies to xring, 2d, rechd and tree; any family checks it, so that a mistyped
// permutation fails the same way whatever the spec (and a decision table cannot hide one).
void validate_gpu_perm(const Setup& s) {
  if (s.options.gpu_perm.empty()) return;
  if (s.per_worker < 0) {
    throw InvalidInput(
        parameter("gpu_perm") +
        ": the machines hold different numbers of participants, so no one local order applies to all of them");
  }
  detail::local_order(s, AlgToken{"gpu-perm", -1, ""});
}

// Gather shards hold data and reduce it: GPUs and CPU sockets can, switches and NICs cannot.
void validate_gather(const Setup& s) {
  const auto& nodes = s.topo.nodes();
  for (std::size_t i = 0; i < s.options.gather.size(); ++i) {
    const int node = s.options.gather[i];
    if (node < 0 || node >= static_cast<int>(nodes.size())) {
      throw InvalidInput(fmt::format("{}: topology '{}' has no node {}", parameter("gather"), s.topo.name(), node));
    }
    const Node& n = nodes[static_cast<std::size_t>(node)];
    if (n.kind != NodeKind::kGpu && n.kind != NodeKind::kCpu) {
      throw InvalidInput(fmt::format("{}: {} is a {}, not a GPU or CPU (gather shards hold and reduce data)",
                                     parameter("gather"), n.id, to_string(n.kind)));
    }
  }
}

void check_build_options(const BuildOptions& options) {
  if (options.count < 1) throw InvalidInput(fmt::format("{}: must be ≥ 1 (got {})", parameter("count"), options.count));
  if (static_cast<std::uint64_t>(options.count) > kMaxMessageBytes) {
    throw InvalidInput(fmt::format("{}: {} elements per rank is more than artune's limit of {}", parameter("count"),
                                   options.count, kMaxMessageBytes));
  }
  if (options.segments < 1 || options.segments > kMaxSegments) {
    throw InvalidInput(
        fmt::format("{}: must be between 1 and {} (got {})", parameter("segments"), kMaxSegments, options.segments));
  }
}

// The family's closed-form bound on the ops of a flat all-reduce (Family::max_ops), 0 when it has none.
std::uint64_t closed_form_ops(const Setup& s, const SpecRange& range) {
  if (s.options.collective != Collective::kAllReduce || (range.inter && s.workers.size() > 1)) return 0;
  const Family& family = family_of(range.intra);
  return family.max_ops != nullptr ? family.max_ops(s, range.intra) : 0;
}

}  // namespace

std::uint64_t estimated_plan_ops(const Topology& topo, const AllReduceSpec& spec, const BuildOptions& options) {
  check_build_options(options);
  return closed_form_ops(make_setup(topo, options), spec.pick(options.count));
}

void require_plan_fits(const Topology& topo, const AllReduceSpec& spec, const BuildOptions& options) {
  check_build_options(options);
  const SpecRange& range = spec.pick(options.count);
  const Setup s = make_setup(topo, options);
  detail::require_plan_size(s, range.intra, closed_form_ops(s, range));
}

Plan build_plan(const Topology& topo, const AllReduceSpec& spec, const BuildOptions& options) {
  check_build_options(options);
  const SpecRange& range = spec.pick(options.count);
  const Setup s = make_setup(topo, options);
  validate_gpu_perm(s);
  validate_gather(s);
  // Refused in closed form before anything is emitted: the quadratic families would otherwise spend
  // minutes and gigabytes before the emitter's own limit stops them.
  detail::require_plan_size(s, range.intra, closed_form_ops(s, range));

  Plan plan;
  plan.spec = to_string(range);
  plan.count = options.count;
  plan.reduce_op = options.reduce_op;
  for (int node : s.nodes) {
    plan.devices.push_back(PlanDevice{node, topo.nodes()[static_cast<std::size_t>(node)].id, true});
    plan.buffers.push_back({options.count});
  }
  if (!options.blocks.empty()) {
    if (options.collective == Collective::kAllReduce) throw InvalidInput("blocks: an all-reduce has no blocks");
    if (options.blocks.size() != s.nodes.size()) {
      throw InvalidInput(fmt::format("blocks: {} sizes for {} ranks", options.blocks.size(), s.nodes.size()));
    }
    std::int64_t sum = 0;
    for (const std::int64_t b : options.blocks) {
      if (b < 0) throw InvalidInput(fmt::format("blocks: size {} is negative", b));
      sum += b;
    }
    if (sum != options.count) throw InvalidInput(fmt::format("blocks: sum to {}, not count = {}", sum, options.count));
    plan.blocks = options.blocks;
  }
  Emitter e(plan, topo);
  // The families of the plan's collective (all-gather and reduce-scatter ones since issue 17).
  plan.collective = options.collective;
  if (range.inter && s.workers.size() > 1) {
    const Family& intra = family_of(range.intra, options.collective);
    const Family& inter = family_of(*range.inter, options.collective);
    if (options.collective != Collective::kAllReduce) {
      // All-gather and reduce-scatter hybrids (issue 17): the in-machine level around one across-machines
      // collective per local GPU.
      if (inter.across == nullptr) {
        throw InvalidInput(fmt::format("{}: cannot run across machines in a hybrid", to_string(range)));
      }
      if (intra.inside == nullptr) {
        throw InvalidInput(fmt::format("{}: {} cannot be the in-machine level of a hybrid", to_string(range),
                                       detail::token_text(range.intra)));
      }
      intra.inside(e, s, range, inter.across);
    } else {
      if (inter.upper == nullptr) {
        throw InvalidInput(fmt::format("{}: cannot run across machines in a hybrid", to_string(range)));
      }
      if (intra.lower == nullptr) {
        throw InvalidInput(fmt::format("{}: {} cannot be the in-machine level of a hybrid", to_string(range),
                                       detail::token_text(range.intra)));
      }
      intra.lower(e, s, range, inter.upper(e, s, range));
    }
  } else {
    // One machine: a hybrid is its in-machine algorithm alone (TF's _reduce_non_singleton).
    family_of(range.intra, options.collective).emit(e, s, range.intra);
  }
  if (options.segments > 1) plan = pipeline(plan, options.segments);
  if (options.verify) verify_or_throw(plan);
  return plan;
}

Plan build_plan(const Topology& topo, std::string_view spec, const BuildOptions& options) {
  return build_plan(topo, parse_spec(spec), options);
}

}  // namespace artune
