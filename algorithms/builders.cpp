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

#include "algorithms/builders.hpp"
#include "algorithms/collective_families.hpp"
#include "algorithms/families.hpp"
#include "algorithms/verifier.hpp"
#include "core/error.hpp"
#include "core/sizes.hpp"

namespace artune {

namespace {

using detail::Emitter;
using detail::Slot;

// Rings found per machine when mring has no #K: enough for any machine shipped.
constexpr int kMaxRings = 64;

std::string token_text(const AlgToken& t) { return t.arg >= 0 ? fmt::format("{}#{}", t.name, t.arg) : t.name; }

struct Setup {
  const Topology& topo;
  const BuildOptions& options;
  std::vector<int> nodes;                  // topology node of each rank
  std::vector<std::vector<int>> workers;   // ranks of each worker (machine), in rank order
  std::vector<int> worker_machine;         // topology machine index of each worker
  int per_worker = -1;                     // ranks per worker when equal, else -1
  int scale_by = detail::kNoScale;
};

Setup make_setup(const Topology& topo, const BuildOptions& options) {
  Setup s{topo, options, {}, {}, {}, -1, detail::kNoScale};
  const auto& nodes = topo.nodes();
  if (options.participants.empty()) {
    s.nodes = topo.gpus();
    if (s.nodes.empty()) throw InvalidInput(fmt::format("topology '{}' has no GPUs to take part", topo.name()));
  } else {
    if (options.participants.size() > kMaxPlanRanks) {
      throw InvalidInput(fmt::format("--participants: {} ranks is more than artune's limit of {} ranks per plan",
                                     options.participants.size(), kMaxPlanRanks));
    }
    for (std::size_t i = 0; i < options.participants.size(); ++i) {
      const int node = options.participants[i];
      if (node < 0 || node >= static_cast<int>(nodes.size())) {
        throw InvalidInput(fmt::format("participants[{}]: topology '{}' has no node {}", i, topo.name(), node));
      }
      const NodeKind kind = nodes[static_cast<std::size_t>(node)].kind;
      if (kind != NodeKind::kGpu && kind != NodeKind::kCpu) {
        throw InvalidInput(fmt::format("participants[{}]: {} is a {}, not a GPU or CPU",
                                       i, nodes[static_cast<std::size_t>(node)].id, to_string(kind)));
      }
      if (std::find(s.nodes.begin(), s.nodes.end(), node) != s.nodes.end()) {
        throw InvalidInput(fmt::format("participants[{}]: {} appears twice", i, nodes[static_cast<std::size_t>(node)].id));
      }
      s.nodes.push_back(node);
    }
  }
  if (s.nodes.size() > kMaxPlanRanks) {
    throw InvalidInput(fmt::format("topology '{}': a plan over its {} GPUs would have more than artune's limit of {} "
                                   "ranks per plan (give --participants, or a smaller topology)",
                                   topo.name(), s.nodes.size(), kMaxPlanRanks));
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

int ranks(const Setup& s) { return static_cast<int>(s.nodes.size()); }

// Ops of a ring all-reduce over n members whose region is cut into `chunks` pieces (subchunks ×
// n, or rings × n): every non-empty piece crosses 2(n−1) ring edges (reduce-scatter, then
// all-gather). Pieces beyond `count` are empty and emit nothing.
std::uint64_t ring_ops(std::int64_t n, std::int64_t chunks, std::int64_t count) {
  if (n < 2) return 0;
  return 2 * static_cast<std::uint64_t>(n - 1) * static_cast<std::uint64_t>(std::min(chunks, count));
}

// Refuses a plan whose op count (computed in closed form before anything is emitted) is beyond
// kMaxPlanOps: the quadratic families would otherwise spend minutes and gigabytes before the
// emitter's own limit stops them.
void require_plan_size(const Setup& s, const AlgToken& token, std::uint64_t ops) {
  if (ops <= kMaxPlanOps) return;
  throw InvalidInput(fmt::format("--spec {}: the plan over {} ranks would hold {} ops, more than artune's limit of {} "
                                 "ops per plan (use fewer participants or subchunks, or a hierarchical spec such as 2d)",
                                 token_text(token), ranks(s), ops, kMaxPlanOps));
}

// The local ring order: --gpu-perm, or identity; must be a permutation of 0..G−1.
std::vector<int> local_order(const Setup& s, const AlgToken& token) {
  if (s.per_worker < 0) {
    throw InvalidInput(fmt::format("{}: machines hold different numbers of participants; a ring over workers "
                                   "needs the same number on each", token_text(token)));
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
    for (int x : perm) text += (text.empty() ? "" : ",") + std::to_string(x);
    throw InvalidInput(fmt::format("--gpu-perm {}: must be a permutation of 0..{} (the participants of each machine)",
                                   text, g - 1));
  }
  return perm;
}

std::vector<Slot> machine_slots(const std::vector<int>& ranks_of_worker) {
  std::vector<Slot> out;
  for (int r : ranks_of_worker) out.push_back(Slot{r, 0, 0});
  return out;
}

// Orders of TF's _ring_permutations mapped from global device index (worker·G + i) to slots.
detail::RingParams ring_params(const AlgToken& token, const std::vector<std::vector<int>>& workers,
                               const std::vector<int>& perm) {
  const int subchunks = token.arg < 0 ? 1 : token.arg;
  const int g = static_cast<int>(perm.size());
  if (subchunks > g) {
    throw InvalidInput(fmt::format("{}: {} subchunks exceed the {} devices per worker of the ring (TF requires "
                                   "num_subchunks <= num_gpus)", token_text(token), subchunks, g));
  }
  const RingPermutations perms = ring_permutations(static_cast<int>(workers.size()), subchunks, perm);
  detail::RingParams p;
  for (const auto& order : perms.order_by_s) {
    std::vector<int> mapped;
    for (int d : order) mapped.push_back(workers[static_cast<std::size_t>(d / g)][static_cast<std::size_t>(d % g)]);
    p.orders.push_back(std::move(mapped));
  }
  return p;
}

std::vector<int> gather_nodes_or(const Setup& s, std::vector<int> fallback) {
  const auto& nodes = s.topo.nodes();
  if (s.options.gather.empty()) return fallback;
  for (std::size_t i = 0; i < s.options.gather.size(); ++i) {
    const int node = s.options.gather[i];
    if (node < 0 || node >= static_cast<int>(nodes.size())) {
      throw InvalidInput(fmt::format("--gather: topology '{}' has no node {}", s.topo.name(), node));
    }
  }
  return s.options.gather;
}

// CPU sockets ordered so that consecutive shards land on different machines first (TF gives
// each worker's CPU to the shuffle), then on the further sockets of each machine.
std::vector<int> cpu_sockets(const Setup& s, const AlgToken& token) {
  std::vector<int> cpus;
  for (int m : s.worker_machine) {
    for (int c : s.topo.nodes_of_kind(NodeKind::kCpu, m)) cpus.push_back(c);
  }
  const auto& nodes = s.topo.nodes();
  std::stable_sort(cpus.begin(), cpus.end(), [&](int a, int b) {
    return nodes[static_cast<std::size_t>(a)].local_index < nodes[static_cast<std::size_t>(b)].local_index;
  });
  if (cpus.empty()) {
    throw InvalidInput(fmt::format("{}: topology '{}' has no CPU socket to gather on (give --gather)",
                                   token_text(token), s.topo.name()));
  }
  return cpus;
}

// First CPU socket of each worker's machine (TF's aux devices '/task:w/cpu:0').
std::vector<int> worker_cpus(const Setup& s, const AlgToken& token) {
  std::vector<int> out;
  for (int m : s.worker_machine) {
    const auto cpus = s.topo.nodes_of_kind(NodeKind::kCpu, m);
    if (cpus.empty()) {
      throw InvalidInput(fmt::format("{}: machine {} of topology '{}' has no CPU socket to gather on",
                                     token_text(token), m, s.topo.name()));
    }
    out.push_back(cpus.front());
  }
  return out;
}

std::vector<int> round_robin(const std::vector<int>& devices, int shards) {
  std::vector<int> out;
  for (int k = 0; k < shards; ++k) out.push_back(devices[static_cast<std::size_t>(k) % devices.size()]);
  return out;
}

std::vector<int> to_plan_devices(Emitter& e, const std::vector<int>& nodes) {
  std::vector<int> out;
  for (int node : nodes) out.push_back(e.device_for_node(node));
  return out;
}

// Gather plan devices of a flat shuffle family.
detail::ShuffleParams shuffle_params(Emitter& e, const Setup& s, const AlgToken& token) {
  std::vector<int> pool;
  int shards = token.arg;
  if (token.name == "pscpu") {
    pool = gather_nodes_or(s, {});
    if (pool.empty()) pool = cpu_sockets(s, token);
    if (shards < 0) shards = s.options.gather.empty() ? 1 : static_cast<int>(pool.size());
  } else if (token.name == "psgpu") {
    pool = gather_nodes_or(s, s.nodes);
    if (shards < 0) shards = s.options.gather.empty() ? 1 : static_cast<int>(pool.size());
  } else {  // shuffle
    pool = gather_nodes_or(s, s.nodes);
    if (shards < 0) shards = static_cast<int>(pool.size());
  }
  return detail::ShuffleParams{to_plan_devices(e, round_robin(pool, shards))};
}

detail::HierCopyParams hiercopy_params(const Setup& s, const AlgToken& token) {
  detail::HierCopyParams p;
  p.packs = token.arg < 0 ? ranks(s) : token.arg;
  bool any = false;
  std::vector<char> placed(static_cast<std::size_t>(ranks(s)), 0);
  for (std::size_t w = 0; w < s.workers.size(); ++w) {
    const int m = s.worker_machine[w];
    const auto gpus = s.topo.gpus_of_machine(m);
    for (const auto& clique : nvlink_cliques(s.topo, m)) {
      std::vector<int> group;
      for (int local : clique) {
        const int node = gpus[static_cast<std::size_t>(local)];
        for (int r : s.workers[w]) {
          if (s.nodes[static_cast<std::size_t>(r)] == node) group.push_back(r);
        }
      }
      if (group.empty()) continue;
      any = any || group.size() > 1;
      for (int r : group) placed[static_cast<std::size_t>(r)] = 1;
      p.groups.push_back(std::move(group));
    }
  }
  for (int r = 0; r < ranks(s); ++r) {
    if (!placed[static_cast<std::size_t>(r)]) p.groups.push_back({r});  // CPU ranks: groups of their own
  }
  if (!any && ranks(s) > 1) {
    throw InvalidInput(fmt::format("{}: topology '{}' has no NVLink groups (hierarchical copy needs GPUs joined "
                                   "by NVLink)", token_text(token), s.topo.name()));
  }
  return p;
}

detail::MultiRingParams multiring_params(const Setup& s, const AlgToken& token) {
  const auto& nodes = s.topo.nodes();
  std::vector<std::vector<std::vector<int>>> per_worker;  // rings as ranks
  int holds = kMaxRings;
  for (std::size_t w = 0; w < s.workers.size(); ++w) {
    const int m = s.worker_machine[w];
    const auto gpus = s.topo.gpus_of_machine(m);
    std::vector<int> rank_of_local(gpus.size(), -1);
    for (int r : s.workers[w]) {
      const int node = s.nodes[static_cast<std::size_t>(r)];
      if (nodes[static_cast<std::size_t>(node)].kind != NodeKind::kGpu) {
        throw InvalidInput(fmt::format("{}: rings follow GPU links; {} is not a GPU", token_text(token),
                                       nodes[static_cast<std::size_t>(node)].id));
      }
      const auto it = std::find(gpus.begin(), gpus.end(), node);
      rank_of_local[static_cast<std::size_t>(it - gpus.begin())] = r;
    }
    if (static_cast<std::size_t>(std::count_if(rank_of_local.begin(), rank_of_local.end(), [](int r) { return r >= 0; })) !=
        gpus.size()) {
      throw InvalidInput(fmt::format("{}: rings span whole machines; every GPU of machine {} must take part",
                                     token_text(token), m));
    }
    std::vector<std::vector<int>> rings;
    for (const auto& ring : link_disjoint_rings(s.topo, m, token.arg < 0 ? kMaxRings : token.arg)) {
      std::vector<int> mapped;
      for (int local : ring) mapped.push_back(rank_of_local[static_cast<std::size_t>(local)]);
      rings.push_back(std::move(mapped));
    }
    holds = std::min(holds, static_cast<int>(rings.size()));
    per_worker.push_back(std::move(rings));
  }
  if (holds == 0) {
    throw InvalidInput(fmt::format("{}: topology '{}' holds no link-disjoint ring", token_text(token), s.topo.name()));
  }
  const int want = token.arg < 0 ? holds : token.arg;
  if (want > holds) {
    throw InvalidInput(fmt::format("{}: topology '{}' holds {} link-disjoint ring{}, not {}", token_text(token),
                                   s.topo.name(), holds, holds == 1 ? "" : "s", want));
  }
  // Across machines ring j visits each machine along that machine's ring j (broken open where it
  // leaves for the next machine).
  detail::MultiRingParams p;
  for (int j = 0; j < want; ++j) {
    std::vector<int> order;
    for (const auto& rings : per_worker) {
      const auto& ring = rings[static_cast<std::size_t>(j)];
      order.insert(order.end(), ring.begin(), ring.end());
    }
    p.rings.push_back(std::move(order));
  }
  return p;
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

// A flat (one-level) algorithm over the given slots, for the whole setup.
void emit_flat(Emitter& e, const Setup& s, const AlgToken& token) {
  const std::vector<Slot> slots = detail::user_slots(ranks(s));
  const std::int64_t count = s.options.count;
  const std::string& name = token.name;
  if (name == "xring") {
    const detail::RingParams params = ring_params(token, s.workers, local_order(s, token));
    const auto subchunks = static_cast<std::int64_t>(params.orders.size());
    require_plan_size(s, token, ring_ops(ranks(s), subchunks * ranks(s), count));
    detail::emit_ring(e, slots, count, params, s.scale_by);
  } else if (name == "rechd") {
    detail::emit_rechd(e, ordered_slots(s, token), count, s.scale_by);
  } else if (name == "pscpu" || name == "psgpu" || name == "shuffle") {
    detail::emit_shuffle(e, slots, count, shuffle_params(e, s, token), s.scale_by);
  } else if (name == "hiercopy") {
    detail::emit_hiercopy(e, slots, count, hiercopy_params(s, token), s.scale_by);
  } else if (name == "nccl") {
    detail::emit_nccl(e, slots, count, s.scale_by, token.variant);
  } else if (name == "mring") {
    const detail::MultiRingParams params = multiring_params(s, token);
    const auto rings = static_cast<std::int64_t>(params.rings.size());
    require_plan_size(s, token, ring_ops(ranks(s), rings * ranks(s), count));
    detail::emit_multiring(e, slots, count, params, s.scale_by);
  } else if (name == "tree") {
    detail::emit_tree(e, ordered_slots(s, token), count, s.scale_by);
  } else if (name == "2d") {
    detail::TwoDParams p{s.workers, local_order(s, token)};
    // A ring in every machine (reduce-scatter and all-gather) plus one ring across machines per local GPU.
    const auto machines = static_cast<std::int64_t>(s.workers.size());
    const auto gpus = static_cast<std::int64_t>(p.local_order.size());
    require_plan_size(s, token, static_cast<std::uint64_t>(machines) * ring_ops(gpus, gpus, count) +
                                    ring_ops(machines, gpus * machines, count));
    detail::emit_two_d(e, slots, count, p, s.scale_by);
  } else {
    throw InvalidInput(fmt::format("{}: unknown algorithm", token_text(token)));
  }
}

// The upper level of a hybrid, across one representative per worker.
detail::UpperLevel upper_level(Emitter& e, const Setup& s, const SpecRange& range) {
  const AlgToken& token = *range.inter;
  const int workers = static_cast<int>(s.workers.size());
  if (token.name == "xring") {
    // TF build_nccl_then_ring / build_shuffle_then_ring: a ring over the workers with gpu_perm [0].
    std::vector<std::vector<int>> one_each;
    for (int w = 0; w < workers; ++w) one_each.push_back({w});
    const detail::RingParams p = ring_params(token, one_each, {0});
    return [p](Emitter& em, const std::vector<Slot>& reps, std::int64_t count, int scale_by) {
      detail::emit_ring(em, reps, count, p, scale_by);
    };
  }
  if (token.name == "rechd") {
    return [](Emitter& em, const std::vector<Slot>& reps, std::int64_t count, int scale_by) {
      detail::emit_rechd(em, reps, count, scale_by);
    };
  }
  if (token.name == "pscpu" || token.name == "shuffle") {
    std::vector<int> pool;
    int shards = token.arg;
    if (token.name == "pscpu") {
      // TF: nccl/pscpu gathers on every worker's CPU; pscpu/pscpu on the first #n of them (default 1).
      pool = gather_nodes_or(s, worker_cpus(s, token));
      if (shards < 0) shards = range.intra.name == "pscpu" && s.options.gather.empty() ? 1 : static_cast<int>(pool.size());
    } else {
      pool = s.options.gather;
      if (shards < 0) shards = pool.empty() ? workers : static_cast<int>(pool.size());
    }
    std::vector<int> gather;
    if (!pool.empty()) gather = to_plan_devices(e, round_robin(pool, shards));
    return [gather, shards](Emitter& em, const std::vector<Slot>& reps, std::int64_t count, int scale_by) {
      std::vector<int> devices = gather;
      if (devices.empty()) {  // shuffle without --gather: shards on the representatives
        for (int k = 0; k < shards; ++k) devices.push_back(reps[static_cast<std::size_t>(k) % reps.size()].device);
      }
      detail::emit_shuffle(em, reps, count, detail::ShuffleParams{devices}, scale_by);
    };
  }
  throw InvalidInput(fmt::format("{}: cannot run across machines in a hybrid", to_string(range)));
}

void emit_hybrid(Emitter& e, const Setup& s, const SpecRange& range) {
  std::vector<std::vector<Slot>> machines;
  for (const auto& w : s.workers) machines.push_back(machine_slots(w));
  const std::int64_t count = s.options.count;
  const detail::UpperLevel upper = upper_level(e, s, range);
  if (range.intra.name == "nccl") {
    detail::emit_nccl_hybrid(e, machines, count, upper, s.scale_by, range.intra.variant);
  } else if (range.intra.name == "pscpu") {
    std::vector<int> gather;
    if (!s.options.gather.empty() && range.inter->name != "pscpu" && range.inter->name != "shuffle") {
      if (s.options.gather.size() != s.workers.size()) {
        throw InvalidInput(fmt::format("--gather: {} needs one gather device per machine ({}), got {}",
                                       to_string(range), s.workers.size(), s.options.gather.size()));
      }
      gather = to_plan_devices(e, gather_nodes_or(s, {}));
    } else {
      gather = to_plan_devices(e, worker_cpus(s, range.intra));
    }
    detail::emit_shuffle_hybrid(e, machines, count, gather, upper, s.scale_by);
  } else {
    throw InvalidInput(fmt::format("{}: {} cannot be the in-machine level of a hybrid", to_string(range),
                                   token_text(range.intra)));
  }
}

// --gpu-perm applies to xring, 2d, rechd and tree; any family checks it, so that a mistyped
// permutation fails the same way whatever the spec (and a decision table cannot hide one).
void validate_gpu_perm(const Setup& s) {
  if (s.options.gpu_perm.empty()) return;
  if (s.per_worker < 0) {
    throw InvalidInput("--gpu-perm: the machines hold different numbers of participants, so no one local order "
                       "applies to all of them");
  }
  local_order(s, AlgToken{"gpu-perm", -1, ""});
}

// Gather shards hold data and reduce it: GPUs and CPU sockets can, switches and NICs cannot.
void validate_gather(const Setup& s) {
  const auto& nodes = s.topo.nodes();
  for (std::size_t i = 0; i < s.options.gather.size(); ++i) {
    const int node = s.options.gather[i];
    if (node < 0 || node >= static_cast<int>(nodes.size())) {
      throw InvalidInput(fmt::format("--gather: topology '{}' has no node {}", s.topo.name(), node));
    }
    const Node& n = nodes[static_cast<std::size_t>(node)];
    if (n.kind != NodeKind::kGpu && n.kind != NodeKind::kCpu) {
      throw InvalidInput(fmt::format("--gather: {} is a {}, not a GPU or CPU (gather shards hold and reduce data)",
                                     n.id, to_string(n.kind)));
    }
  }
}

}  // namespace

Plan build_plan(const Topology& topo, const AllReduceSpec& spec, const BuildOptions& options) {
  if (options.count < 1) throw InvalidInput(fmt::format("--count: must be ≥ 1 (got {})", options.count));
  if (static_cast<std::uint64_t>(options.count) > kMaxMessageBytes) {
    throw InvalidInput(fmt::format("--count: {} elements per rank is more than artune's limit of {}",
                                   options.count, kMaxMessageBytes));
  }
  if (options.segments < 1 || options.segments > kMaxSegments) {
    throw InvalidInput(fmt::format("--segments: must be between 1 and {} (got {})", kMaxSegments, options.segments));
  }
  const SpecRange& range = spec.pick(options.count);
  const Setup s = make_setup(topo, options);
  validate_gpu_perm(s);
  validate_gather(s);

  Plan plan;
  plan.spec = to_string(range);
  plan.count = options.count;
  plan.reduce_op = options.reduce_op;
  for (int node : s.nodes) {
    plan.devices.push_back(PlanDevice{node, topo.nodes()[static_cast<std::size_t>(node)].id, true});
    plan.buffers.push_back({options.count});
  }
  Emitter e(plan, topo);
  if (options.collective != Collective::kAllReduce) {
    // All-gather and reduce-scatter (issue 17): algorithms/collectives.cpp dispatches.
    plan.collective = options.collective;
    std::vector<int> ring_order;  // the ring families' order: --gpu-perm inside each machine
    for (const auto& w : s.workers) {
      for (std::size_t l = 0; l < w.size(); ++l) {
        ring_order.push_back(w[options.gpu_perm.empty() ? l : static_cast<std::size_t>(options.gpu_perm[l])]);
      }
    }
    detail::emit_collective(e, options.collective, range.intra, s.workers, ring_order, s.scale_by);
  } else if (range.inter && s.workers.size() > 1) {
    emit_hybrid(e, s, range);
  } else {
    // One machine: a hybrid is its in-machine algorithm alone (TF's _reduce_non_singleton).
    emit_flat(e, s, range.intra);
  }
  if (options.segments > 1) plan = pipeline(plan, options.segments);
  if (options.verify) verify_or_throw(plan);
  return plan;
}

Plan build_plan(const Topology& topo, std::string_view spec, const BuildOptions& options) {
  return build_plan(topo, parse_spec(spec), options);
}

}  // namespace artune
