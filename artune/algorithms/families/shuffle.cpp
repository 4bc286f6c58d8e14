// Shuffle all-reduce (parameter-server style), as TF's build_shuffle_all_reduce,
// and the shuffle hybrid of _build_shuffle_hybrid.
//
// Cost (n sources, N gather shards, m bytes): each shard device receives
// n·m/N bytes and sends them back, so a single shard is bound by its links:
// 2·n·m/N·β per shard, (n−1)·m/N·γ of reduction, 2 steps of latency.

#include <fmt/format.h>

#include <algorithm>

#include "artune/algorithms/families/families.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune::detail {

namespace {

// Position of the slot whose region, shifted by `offset`, is exactly `target`; -1 if none.
int in_place_index(const std::vector<Slot>& slots, std::int64_t offset, const Slot& target) {
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    if (s.device == target.device && s.buffer == target.buffer && s.offset + offset == target.offset) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Where shard [offset, offset + count) is gathered on `device`: in place when the device holds
// one of the slots, else a fresh scratch region there.
Slot shard_target(Emitter& e, const std::vector<Slot>& slots, std::int64_t offset, std::int64_t count, int device) {
  for (const Slot& s : slots) {
    if (s.device == device) return Slot{s.device, s.buffer, s.offset + offset};
  }
  return Slot{device, e.scratch(device, count), 0};
}

}  // namespace

void emit_gather_to(Emitter& e, const std::vector<Slot>& slots, std::int64_t offset, std::int64_t count,
                    const Slot& target) {
  if (count == 0 || slots.empty()) return;
  const int self = in_place_index(slots, offset, target);
  const Location dst = at(target, 0, count);
  bool first = self < 0;
  for (int i = 0; i < static_cast<int>(slots.size()); ++i) {
    if (i == self) continue;
    const Location src = at(slots[static_cast<std::size_t>(i)], offset, count);
    if (first) {
      e.copy(src, dst);  // a foreign target starts from the first source
      first = false;
    } else {
      e.reduce(src, dst);
    }
  }
}

void emit_scatter_from(Emitter& e, const Slot& source, const std::vector<Slot>& slots, std::int64_t offset,
                       std::int64_t count) {
  if (count == 0) return;
  const int self = in_place_index(slots, offset, source);
  for (int i = 0; i < static_cast<int>(slots.size()); ++i) {
    if (i == self) continue;
    e.copy(at(source, 0, count), at(slots[static_cast<std::size_t>(i)], offset, count));
  }
}

void emit_shuffle(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const ShuffleParams& p,
                  int scale_by) {
  const int shards = static_cast<int>(p.gather_devices.size());
  if (shards < 1) throw InvalidInput("shuffle: no gather device");
  for (int k = 0; k < shards; ++k) {
    const auto [off, len] = ragged_piece(count, shards, k);
    if (len == 0) continue;
    const Slot target = shard_target(e, slots, off, len, p.gather_devices[static_cast<std::size_t>(k)]);
    emit_gather_to(e, slots, off, len, target);
    if (scale_by != kNoScale) e.scale(at(target, 0, len), scale_by);
    emit_scatter_from(e, target, slots, off, len);
  }
}

void emit_shuffle_hybrid(Emitter& e, const std::vector<std::vector<Slot>>& machines, std::int64_t count,
                         const std::vector<int>& gather, const UpperLevel& upper, int scale_by) {
  if (gather.size() != machines.size()) {
    throw InvalidInput(fmt::format("shuffle hybrid: {} gather devices for {} machines (one per machine)", gather.size(),
                                   machines.size()));
  }
  std::vector<Slot> reps;
  for (std::size_t m = 0; m < machines.size(); ++m) {
    const Slot target = shard_target(e, machines[m], 0, count, gather[m]);
    emit_gather_to(e, machines[m], 0, count, target);
    reps.push_back(target);
  }
  upper(e, reps, count, scale_by);
  for (std::size_t m = 0; m < machines.size(); ++m) emit_scatter_from(e, reps[m], machines[m], 0, count);
}

// ---------------------------------------------------------------------------
// The shuffle family's record: pscpu (shards on CPU sockets), psgpu (on GPUs, TF's default of one),
// shuffle (on the --gather devices, every rank by default).

namespace {

std::vector<int> gather_nodes_or(const Setup& s, std::vector<int> fallback) {
  const auto& nodes = s.topo.nodes();
  if (s.options.gather.empty()) return fallback;
  for (std::size_t i = 0; i < s.options.gather.size(); ++i) {
    const int node = s.options.gather[i];
    if (node < 0 || node >= static_cast<int>(nodes.size())) {
      throw InvalidInput(fmt::format("{}: topology '{}' has no node {}", parameter("gather"), s.topo.name(), node));
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
    throw InvalidInput(fmt::format("{}: topology '{}' has no CPU socket to gather on (give {})", token_text(token),
                                   s.topo.name(), parameter("gather")));
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
ShuffleParams shuffle_params(Emitter& e, const Setup& s, const AlgToken& token) {
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
  return ShuffleParams{to_plan_devices(e, round_robin(pool, shards))};
}

void emit_shuffle_family(Emitter& e, const Setup& s, const AlgToken& token) {
  emit_shuffle(e, user_slots(ranks(s)), s.options.count, shuffle_params(e, s, token), s.scale_by);
}

UpperLevel shuffle_upper(Emitter& e, const Setup& s, const SpecRange& range) {
  const AlgToken& token = *range.inter;
  if (token.name != "pscpu" && token.name != "shuffle") {
    throw InvalidInput(fmt::format("{}: cannot run across machines in a hybrid", to_string(range)));
  }
  const int workers = static_cast<int>(s.workers.size());
  std::vector<int> pool;
  int shards = token.arg;
  if (token.name == "pscpu") {
    // TF: nccl/pscpu gathers on every worker's CPU; pscpu/pscpu on the first #n of them (default 1).
    pool = gather_nodes_or(s, worker_cpus(s, token));
    if (shards < 0) {
      shards = range.intra.name == "pscpu" && s.options.gather.empty() ? 1 : static_cast<int>(pool.size());
    }
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
    emit_shuffle(em, reps, count, ShuffleParams{devices}, scale_by);
  };
}

// TF's _build_shuffle_hybrid: each machine gathered on its CPU (or its --gather device), `upper` across.
void shuffle_lower(Emitter& e, const Setup& s, const SpecRange& range, const UpperLevel& upper) {
  if (range.intra.name != "pscpu") {
    throw InvalidInput(
        fmt::format("{}: {} cannot be the in-machine level of a hybrid", to_string(range), token_text(range.intra)));
  }
  std::vector<std::vector<Slot>> machines;
  for (const auto& w : s.workers) machines.push_back(machine_slots(w));
  std::vector<int> gather;
  if (!s.options.gather.empty() && range.inter->name != "pscpu" && range.inter->name != "shuffle") {
    if (s.options.gather.size() != s.workers.size()) {
      throw InvalidInput(fmt::format("{}: {} needs one gather device per machine ({}), got {}", parameter("gather"),
                                     to_string(range), s.workers.size(), s.options.gather.size()));
    }
    gather = to_plan_devices(e, gather_nodes_or(s, {}));
  } else {
    gather = to_plan_devices(e, worker_cpus(s, range.intra));
  }
  emit_shuffle_hybrid(e, machines, s.options.count, gather, upper, s.scale_by);
}

// Shards on distinct devices of one machine, each with its own links to every rank (GPUs of a uniform
// machine; CPU sockets whose PCIe links are per GPU): exact. More shards than devices to hold them, or
// several machines: the chain of one shard, a lower bound.
ClosedForm shuffle_closed_form(const ClosedFormInput& in) {
  const bool on_cpus = in.token.name == "pscpu";
  const int shards = in.token.arg >= 0 ? in.token.arg : in.token.name == "shuffle" ? in.ranks : 1;
  const int holders = on_cpus ? static_cast<int>(in.topo.nodes_of_kind(NodeKind::kCpu).size()) : in.ranks;
  const int per_holder = (shards + std::max(holders, 1) - 1) / std::max(holders, 1);
  const double t = shuffle_us(in.ranks, shards, in.bytes * per_holder, on_cpus ? in.host : in.link, !on_cpus);
  const bool exact = in.machines == 1 && shards <= holders;
  return {t, exact ? Exactness::kExact : Exactness::kLowerBound};
}

// One machine: each CPU socket alone, all sockets, GPU 0 alone, every GPU.
void shuffle_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (ctx.machines > 1) return;
  const auto& nodes = ctx.topo.nodes();
  std::vector<std::string> all_cpus;
  for (int c : ctx.topo.nodes_of_kind(NodeKind::kCpu, 0)) {
    out.push_back({"shuffle", {}, {nodes[static_cast<std::size_t>(c)].id}});
    all_cpus.push_back(nodes[static_cast<std::size_t>(c)].id);
  }
  if (all_cpus.size() > 1) out.push_back({"shuffle", {}, all_cpus});
  std::vector<std::string> all_gpus;
  for (int gpu : ctx.topo.gpus_of_machine(0)) all_gpus.push_back(nodes[static_cast<std::size_t>(gpu)].id);
  out.push_back({"shuffle", {}, {all_gpus.front()}});
  out.push_back({"shuffle", {}, all_gpus});
}

}  // namespace

}  // namespace artune::detail

namespace artune::family {
const Family shuffle{
    .name = "shuffle",
    .readable = "shuffle",
    .specs = {{"pscpu",
               "shuffle-cpu",
               ArgKind::kShards,
               "shuffle reduce gathered on CPU sockets; #N = gather shards",
               {"xring", "pscpu", "rechd"}},
              {"psgpu", "shuffle-gpu", ArgKind::kShards, "shuffle reduce gathered on GPUs; #N = gather shards"},
              {"shuffle", nullptr, ArgKind::kShards, "shuffle reduce on the gather devices; #N = gather shards"}},
    .emit = detail::emit_shuffle_family,
    .upper = detail::shuffle_upper,
    .lower = detail::shuffle_lower,
    .closed_form = detail::shuffle_closed_form,
    .candidates = detail::shuffle_candidates,
    .tuner_position = 40,
};
}  // namespace artune::family
