#include "simulator/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "core/error.hpp"
#include "simulator/flow_engine.hpp"
#include "simulator/nccl_model.hpp"

namespace artune {

namespace {

// 1 GB/s = 1e9 B/s = 1e3 B/µs.
constexpr double kBytesPerUsPerGbps = 1e3;
// Rings over at most this many members are searched exhaustively ((k−1)! orders).
constexpr int kExhaustiveRingMax = 9;

// One flow an op phase starts: over resources res_pool[res_begin, +res_count).
struct FlowSpec {
  int res_begin = 0;
  int res_count = 0;
  double work = 0;        // bytes (links), idle-device µs (compute) or thread-µs (host flows)
  double cap = 0;         // units/µs, 0 = none
  bool weighted = false;  // host flows: weights in w_pool[res_begin, +res_count); else 1 on every resource
};

// A phase waits `delay` µs, then runs its flows concurrently; it ends when all have.
struct Phase {
  double delay = 0;
  int flow_begin = 0;
  int flow_count = 0;
};

// An op: phases [phase_begin, +phase_count); the last one runs `last_repeats` times.
struct Program {
  int phase_begin = 0;
  int phase_count = 0;
  int last_repeats = 1;
};

struct RouteInfo {
  int res_begin = 0;
  int res_count = 0;
  double latency_us = 0;  // route latency + link-kind α (once per kind)
};

struct RingInfo {
  std::vector<int> order;        // topology nodes in ring order
  std::vector<RouteInfo> edges;  // order[i] → order[i+1 mod k]
  double max_edge_latency_us = 0;
};

struct TaskState {
  double start = 0;
  double end = -1;
  int phase = 0;  // index within the program
  int repeats_left = 0;
  int outstanding = 0;
  int deps_left = 0;
  int crit_dep = -1;
  int limiter = -1;  // resource that limited its last-ending flow
};

struct Timer {
  double time;
  std::uint64_t seq;
  int task;
};
struct TimerLater {
  bool operator()(const Timer& a, const Timer& b) const {
    if (a.time != b.time) return a.time > b.time;
    return a.seq > b.seq;
  }
};

std::int64_t max_piece(std::int64_t count, int pieces) { return (count + pieces - 1) / pieces; }

class Simulation {
 public:
  Simulation(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes)
      : plan_(plan), topo_(topo), model_(model), es_(static_cast<double>(element_bytes)) {
    links_ = static_cast<int>(topo.links().size());
    nodes_ = static_cast<int>(topo.nodes().size());
    if (element_bytes == 0) throw InvalidInput("simulate: element size must be > 0");
    for (int d = 0; d < static_cast<int>(plan.devices.size()); ++d) {
      const int node = plan.devices[d].node;
      if (node < 0 || node >= nodes_) {
        throw InvalidInput(fmt::format("plan: device {} ('{}'): node {} is not in topology '{}'", d,
                                       plan.devices[d].name, node, topo.name()));
      }
    }
    cap_ = model.transfer_cap_gbps > 0 ? model.transfer_cap_gbps * kBytesPerUsPerGbps : 0;
    std::vector<double> capacities(static_cast<std::size_t>(links_ + nodes_), 1.0);
    // Host resources after the links and devices: cores, then memory bandwidth.
    host_ = model.host.shares_resources();
    if (host_) {
      double working_set = 0;
      for (const auto& device_buffers : plan.buffers) {
        for (const std::int64_t elements : device_buffers) working_set += static_cast<double>(elements) * es_;
      }
      if (model.host.cores > 0) {
        cores_res_ = static_cast<int>(capacities.size());
        capacities.push_back(model.host.cores);
      }
      const double memory = model.host.memory_gbps(working_set);
      if (memory > 0) {
        memory_res_ = static_cast<int>(capacities.size());
        capacities.push_back(memory * kBytesPerUsPerGbps);
      }
    }
    link_capacity_.resize(links_);
    for (int l = 0; l < links_; ++l) {
      const Link& link = topo.links()[l];
      if (!(link.bandwidth_gbps > 0) || !std::isfinite(link.bandwidth_gbps)) {
        throw InvalidInput(fmt::format("topology '{}': link {} has no usable bandwidth", topo.name(), l));
      }
      const double eff = model.link_for(link.kind).efficiency;
      if (!(eff > 0) || eff > 1) {
        throw InvalidInput(fmt::format("cost model: efficiency of {} links must be in (0, 1]", to_string(link.kind)));
      }
      link_capacity_[l] = capacities[l] = link.bandwidth_gbps * eff * kBytesPerUsPerGbps;
    }
    capacity_ = capacities;
    engine_.emplace(std::move(capacities), host_);
  }

  SimResult run();
  double lower_bound();

 private:
  int node_of(int device, int op, const char* what) const {
    if (device < 0 || device >= static_cast<int>(plan_.devices.size())) {
      throw InvalidInput(fmt::format("plan: op {}: {} device {} does not exist", op, what, device));
    }
    return plan_.devices[device].node;
  }
  const RouteInfo& route_info(int a, int b);
  const RingInfo& ring_info(const std::vector<int>& members);
  void compile();
  void compile_group(const Op& op);
  bool runs_nccl_model(const Op& op, const std::vector<int>& members) const;
  void compile_nccl_group(const Op& op, const std::vector<int>& members);
  // Flows of one NCCL group op by their links: flows over the same links with the same work and cap (the
  // channels of a ring or tree that share an edge) are one flow of their summed work and cap, which max-min
  // sharing treats exactly as the separate flows and the engine settles much faster.
  struct PendingFlows {
    std::vector<int> links;                       // every flow's links, back to back
    std::vector<std::array<double, 2>> work_cap;  // per flow
    std::vector<std::pair<int, int>> span;        // per flow: [begin, count) in links
  };
  void add_path_flow(const std::vector<const std::vector<int>*>& parts, double work, double cap, std::vector<int>& used,
                     PendingFlows& pending);
  void push_one_phase_op(double delay, int flow_begin);
  void add_local(double delay, int node, double work);
  double thread_copy_rate(int node) const;
  [[gnu::noinline]] void add_host_flow(int res_begin, int res_count, int device_res, double bytes, double rate);
  // Host paths out of line: the GPU profiles' compile() stays as small as it was.
  [[gnu::noinline]] void add_host_transfer(const RouteInfo& r, int dst_node, double bytes, bool reduce);
  [[gnu::noinline]] void add_host_local(double delay, int node, double bytes, double rate);
  std::vector<int> threads_of(const Op& op) const;
  [[gnu::noinline]] std::vector<std::pair<int, int>> serial_deps(std::vector<int>& succ_count) const;
  std::vector<int> op_links(const Op& op);

  void start_task(int task, double now);
  void begin_phase(int task, double now);
  void on_timer(int task, double now);
  void on_flow_end(int task, int limiter, double now);
  void phase_done(int task, double now);
  void finish_task(int task, double now);

  const Plan& plan_;
  const Topology& topo_;
  const CostModel& model_;
  double es_;
  int links_ = 0;
  int nodes_ = 0;
  double cap_ = 0;
  bool host_ = false;    // ops share the host resources (HostModel::shares_resources)
  int cores_res_ = -1;   // engine resource of the host's cores, -1 = none
  int memory_res_ = -1;  // engine resource of the host's memory bandwidth, -1 = none
  std::vector<double> link_capacity_;
  std::vector<double> capacity_;  // every engine resource's capacity (links, devices, host)
  std::optional<detail::FlowEngine> engine_;

  std::vector<int> res_pool_;
  std::vector<double> w_pool_;  // weights of host flows, at the same index as their resources in res_pool_
  std::unordered_map<std::uint64_t, RouteInfo> routes_;
  std::map<std::vector<int>, RingInfo> rings_;
  std::map<std::vector<int>, nccl::Graph> nccl_graphs_;
  std::unordered_map<int, std::vector<int>> group_links_;  // NCCL group op → links its flows cross
  std::vector<GroupRun> group_runs_;
  std::vector<FlowSpec> flows_;
  std::vector<Phase> phases_;
  std::vector<Program> programs_;
  std::vector<int> succ_begin_;
  std::vector<int> succ_;
  std::vector<int> deps_count_;  // plan deps plus the implicit ones of serial devices

  std::vector<TaskState> state_;
  std::priority_queue<Timer, std::vector<Timer>, TimerLater> timers_;
  std::uint64_t seq_ = 0;
};

const RouteInfo& Simulation::route_info(int a, int b) {
  const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b);
  const auto it = routes_.find(key);
  if (it != routes_.end()) return it->second;
  const Route& route = topo_.route(a, b);
  RouteInfo info;
  info.res_begin = static_cast<int>(res_pool_.size());
  info.res_count = static_cast<int>(route.links.size());
  info.latency_us = route.latency_us;
  bool seen[8] = {};
  for (const int l : route.links) {
    if (l < 0 || l >= links_)
      throw InvalidInput(fmt::format("topology '{}': route uses unknown link {}", topo_.name(), l));
    res_pool_.push_back(l);
    const auto kind = static_cast<std::size_t>(topo_.links()[l].kind);
    if (kind < 8 && !seen[kind]) {
      seen[kind] = true;
      info.latency_us += model_.link_for(topo_.links()[l].kind).alpha_us;
    }
  }
  return routes_.emplace(key, info).first->second;
}

const RingInfo& Simulation::ring_info(const std::vector<int>& members) {
  const auto it = rings_.find(members);
  if (it != rings_.end()) return it->second;
  RingInfo info;
  info.order = best_ring_order(topo_, members);
  const int k = static_cast<int>(info.order.size());
  if (k > 1) {
    for (int i = 0; i < k; ++i) {
      const RouteInfo& r = route_info(info.order[i], info.order[(i + 1) % k]);
      info.edges.push_back(r);
      info.max_edge_latency_us = std::max(info.max_edge_latency_us, r.latency_us);
    }
  }
  return rings_.emplace(members, std::move(info)).first->second;
}

// Ends an op of one phase that starts after `delay` and moves the flows added since `flow_begin`.
void Simulation::push_one_phase_op(double delay, int flow_begin) {
  Program prog;
  prog.phase_begin = static_cast<int>(phases_.size());
  prog.phase_count = 1;
  phases_.push_back(Phase{delay, flow_begin, static_cast<int>(flows_.size()) - flow_begin});
  programs_.push_back(prog);
}

void Simulation::add_local(double delay, int node, double work) {
  const int first = static_cast<int>(flows_.size());
  if (work > 0) {
    FlowSpec f;
    f.res_begin = static_cast<int>(res_pool_.size());
    f.res_count = 1;
    f.work = work;
    res_pool_.push_back(links_ + node);
    flows_.push_back(f);
  }
  push_one_phase_op(delay, first);
}

// One host thread's rate (bytes/µs) copying into `node`: the per-transfer cap, else the device's copy rate.
double Simulation::thread_copy_rate(int node) const {
  return cap_ > 0 ? cap_ : model_.memory_for(topo_.nodes()[node].kind) * kBytesPerUsPerGbps;
}

// A host op as one flow whose work is the µs one thread needs for `bytes` at `rate` (its one-thread rate,
// B/µs), at most one thread, over the network links among res_pool[res_begin, +res_count) (`rate` bytes per
// thread-µs; links inside a machine stand for GPUs the host backend does not use),
// the executing device's engine when device_res ≥ 0, and the host resources: one core per thread, `rate`
// bytes of memory bandwidth per thread-µs. Fair shares are then equal shares of a core, as a scheduler
// time-slices threads, whatever each thread's own rate.
void Simulation::add_host_flow(int res_begin, int res_count, int device_res, double bytes, double rate) {
  FlowSpec f;
  f.res_begin = static_cast<int>(res_pool_.size());
  f.weighted = true;
  w_pool_.resize(res_pool_.size());  // weights run parallel to the resources they weigh
  f.work = bytes / rate;
  f.cap = 1.0;
  for (int i = 0; i < res_count; ++i) {
    // Host threads share host memory: only a network between machines is a real link for them.
    const int l = res_pool_[res_begin + i];
    if (topo_.links()[l].kind != LinkKind::kNetwork) continue;
    res_pool_.push_back(l);
    w_pool_.push_back(rate);
  }
  if (device_res >= 0) {
    res_pool_.push_back(device_res);
    w_pool_.push_back(1.0);
  }
  if (cores_res_ >= 0) {
    res_pool_.push_back(cores_res_);
    w_pool_.push_back(1.0);
  }
  if (memory_res_ >= 0) {
    res_pool_.push_back(memory_res_);
    w_pool_.push_back(rate);
  }
  f.res_count = static_cast<int>(res_pool_.size()) - f.res_begin;
  flows_.push_back(f);
}

// A transfer on a host: one pass on the destination's thread. A reducing pull is the reduce kernel reading
// the source where it lies (host memory), a plain pull a memcpy.
void Simulation::add_host_transfer(const RouteInfo& r, int dst_node, double bytes, bool reduce) {
  const double rate =
      reduce ? model_.reduce_for(topo_.nodes()[dst_node].kind) * kBytesPerUsPerGbps : thread_copy_rate(dst_node);
  const int first = static_cast<int>(flows_.size());
  if (bytes > 0) add_host_flow(r.res_begin, r.res_count, -1, bytes, rate);
  push_one_phase_op(model_.op_overhead_us + r.latency_us, first);
}

void Simulation::add_host_local(double delay, int node, double bytes, double rate) {
  const int first = static_cast<int>(flows_.size());
  if (bytes > 0) add_host_flow(0, 0, links_ + node, bytes, rate);
  push_one_phase_op(delay, first);
}

// Pairs (earlier, later) of ops that one device's thread runs in plan order, each counted in succ_count.
std::vector<std::pair<int, int>> Simulation::serial_deps(std::vector<int>& succ_count) const {
  std::vector<std::pair<int, int>> serial;
  std::vector<int> last(plan_.devices.size(), -1);
  for (int i = 0; i < static_cast<int>(plan_.ops.size()); ++i) {
    for (const int d : threads_of(plan_.ops[i])) {
      int& prev = last.at(static_cast<std::size_t>(d));
      if (prev >= 0 && (serial.empty() || serial.back() != std::make_pair(prev, i))) {
        serial.emplace_back(prev, i);
        ++succ_count[prev];
      }
      prev = i;
    }
  }
  return serial;
}

// The plan devices whose thread executes `op` on the cpu backend: the destination of a copy, reduce or
// scale (the receiver pulls), every member of a group.
std::vector<int> Simulation::threads_of(const Op& op) const {
  if (op.kind == OpKind::kGroup) return op.group;
  return {op.dst.device};
}

// A library collective as NCCL runs it (Ring algorithm, Simple protocol):
// all-reduce is 2(k−1) lockstep steps in which every member sends a chunk of
// count/k elements to its ring successor; reduce-scatter and all-gather are
// k−1 such steps; broadcast and reduce pipeline the whole buffer along the
// ring from (to) the root, costing (k−1) hops of latency and one buffer time.
// Reductions inside the library are fused with the copies (memory bound, far
// above link speed), so they add no compute time.
void Simulation::compile_group(const Op& op) {
  std::vector<int> members;
  members.reserve(op.group.size());
  for (const int d : op.group) members.push_back(node_of(d, op.id, "group"));
  {
    std::vector<int> sorted = members;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      throw InvalidInput(fmt::format("plan: op {}: group lists a device twice", op.id));
    }
  }
  if (members.empty()) throw InvalidInput(fmt::format("plan: op {}: group op with no devices", op.id));
  if (runs_nccl_model(op, members)) {
    compile_nccl_group(op, members);
    return;
  }
  if (!op.algo.empty()) {
    throw InvalidInput(
        fmt::format("spec '{}': op {}: a forced NCCL algorithm ('{}') needs NCCL's model: an "
                    "all-reduce over GPUs, the same number on every machine, under the nccl or cuda "
                    "backend",
                    plan_.spec, op.id, op.algo));
  }
  const int k = static_cast<int>(members.size());
  Program prog;
  prog.phase_begin = static_cast<int>(phases_.size());
  if (k == 1) {
    phases_.push_back({model_.group_base_latency_us, static_cast<int>(flows_.size()), 0});
    prog.phase_count = 1;
    programs_.push_back(prog);
    return;
  }
  const RingInfo& ring = ring_info(members);
  const double hop = model_.group_hop_latency_us + ring.max_edge_latency_us;
  const double count = static_cast<double>(op.dst.count);
  const int flow_begin = static_cast<int>(flows_.size());
  if (op.collective == Collective::kBroadcast || op.collective == Collective::kReduce) {
    const int root_node = node_of(op.root, op.id, "root");
    const auto pos = std::find(ring.order.begin(), ring.order.end(), root_node);
    if (pos == ring.order.end())
      throw InvalidInput(fmt::format("plan: op {}: root {} is not in the group", op.id, op.root));
    const int r = static_cast<int>(pos - ring.order.begin());
    // broadcast: root → root+1 → … ; reduce: root+1 → … → root.
    const int first_edge = op.collective == Collective::kBroadcast ? r : (r + 1) % k;
    double latency = model_.group_base_latency_us;
    const double bytes = count * es_;
    for (int e = 0; e < k - 1; ++e) {
      const RouteInfo& edge = ring.edges[(first_edge + e) % k];
      latency += model_.group_hop_latency_us + edge.latency_us;
      if (host_ && bytes > 0) {
        add_host_flow(edge.res_begin, edge.res_count, -1, bytes,
                      thread_copy_rate(ring.order[(first_edge + e + 1) % k]));
      } else if (bytes > 0 && edge.res_count > 0) {
        flows_.push_back({.res_begin = edge.res_begin, .res_count = edge.res_count, .work = bytes, .cap = cap_});
      }
    }
    phases_.push_back({latency, flow_begin, static_cast<int>(flows_.size()) - flow_begin});
    prog.phase_count = 1;
    programs_.push_back(prog);
    return;
  }
  const int steps = op.collective == Collective::kAllReduce ? 2 * (k - 1) : k - 1;
  const double chunk = static_cast<double>(max_piece(op.dst.count, k)) * es_;
  for (int e = 0; e < k; ++e) {
    const RouteInfo& edge = ring.edges[e];
    if (host_ && chunk > 0) {
      add_host_flow(edge.res_begin, edge.res_count, -1, chunk, thread_copy_rate(ring.order[(e + 1) % k]));
    } else if (chunk > 0 && edge.res_count > 0) {
      flows_.push_back({.res_begin = edge.res_begin, .res_count = edge.res_count, .work = chunk, .cap = cap_});
    }
  }
  const int n = static_cast<int>(flows_.size()) - flow_begin;
  phases_.push_back({model_.group_base_latency_us + hop, flow_begin, n});
  prog.phase_count = 1;
  if (steps > 1) {
    phases_.push_back({hop, flow_begin, n});
    prog.phase_count = 2;
    prog.last_repeats = steps - 1;
  }
  programs_.push_back(prog);
}

// GPU backends run a group all-reduce as NCCL does (nccl_model.hpp); host backends (cpu, mpi) keep the
// one-ring model of their own collectives, and broadcast/reduce inside the hybrids stay NCCL's ring chain.
bool Simulation::runs_nccl_model(const Op& op, const std::vector<int>& members) const {
  if (host_ || members.size() < 2 || op.collective != Collective::kAllReduce) return false;
  if (model_.profile != BackendProfile::kNccl && model_.profile != BackendProfile::kCuda) return false;
  // NCCL's model needs GPUs, the same number on every machine of the group (else: the one-ring model).
  std::unordered_map<int, int> per_machine;
  for (const int n : members) {
    if (topo_.nodes()[n].kind != NodeKind::kGpu) return false;
    ++per_machine[topo_.nodes()[n].machine];
  }
  const int first = per_machine.begin()->second;
  return std::all_of(per_machine.begin(), per_machine.end(), [&](const auto& m) { return m.second == first; });
}

// One flow over the concatenated links of `parts` (a route, or GPU→NIC, NIC→NIC, NIC→GPU).
void Simulation::add_path_flow(const std::vector<const std::vector<int>*>& parts, double work, double cap,
                               std::vector<int>& used, PendingFlows& pending) {
  std::size_t count = 0;
  for (const std::vector<int>* part : parts) {
    for (const int l : *part) {
      if (l < 0 || l >= links_)
        throw InvalidInput(fmt::format("topology '{}': route uses unknown link {}", topo_.name(), l));
      used.push_back(l);
      ++count;
    }
  }
  if (work > 0 && count > 0) {
    pending.span.emplace_back(static_cast<int>(pending.links.size()), static_cast<int>(count));
    for (const std::vector<int>* part : parts) pending.links.insert(pending.links.end(), part->begin(), part->end());
    pending.work_cap.push_back({work, cap});
  }
}

// An NCCL all-reduce: NCCL's channels over the topology (nccl::search), the algorithm × protocol NCCL picks
// for this size (or the spec forces), NCCL's latency for it, then every channel's traffic as flows sharing
// the links max-min fairly with each other and with concurrent ops:
//  - Ring: each channel moves 2(k−1)/k of its share of the buffer over every edge of its ring; edges
//    between machines go GPU → the channel's NIC → the next machine's NIC → GPU.
//  - Tree: inside a machine a chain along the channel's ring segment, across machines NCCL's double
//    binary tree between the segments' heads; every tree edge carries the channel's share up (reduce)
//    and down (broadcast).
//  - NVLS: every GPU sends its buffer to the NVSwitch (the switch reduces) and its reduced shard back
//    for the switch to multicast: (k+1)/k of the buffer each way on its switch links, at NCCL's NVLS
//    efficiency. NVLSTree adds the Tree's network edges between machines.
// Protocols put more bytes on the wire (LL 2×, LL128 128/120) and cap a channel's rate at NCCL's
// per-channel limits (tuning.cc), converted to wire bytes.
void Simulation::compile_nccl_group(const Op& op, const std::vector<int>& members) {
  auto git = nccl_graphs_.find(members);
  if (git == nccl_graphs_.end()) git = nccl_graphs_.emplace(members, nccl::search(topo_, members)).first;
  const nccl::Graph& g = git->second;
  const std::string what = fmt::format("spec '{}'", plan_.spec.empty() ? std::string("nccl") : plan_.spec);
  const nccl::Forced forced = nccl::parse_variant(op.algo, fmt::format("plan: op {}: algo", op.id));
  const double bytes = static_cast<double>(op.dst.count) * es_;
  const nccl::Choice choice = nccl::choose(g, bytes, forced, what);
  // A calibration overlay's per-link-kind α, beyond the profile's default, shifts NCCL's per-step latency of
  // that link class: a measured machine overrides NCCL's defaults (the efficiency already scales the links).
  const CostModel defaults = CostModel::defaults(model_.profile);
  auto shift = [&](LinkKind kind) { return model_.link_for(kind).alpha_us - defaults.link_for(kind).alpha_us; };
  const nccl::HopAdjust adjust{shift(g.nvlink_intra ? LinkKind::kNvLink : LinkKind::kPcie), shift(LinkKind::kNetwork)};
  // The time the call's latency takes (one launch, the device's steps), not NCCL's choice weights.
  const double latency = nccl::launch_us() + nccl::device_latency_us(g, choice.algo, choice.proto, adjust);
  const double wire = nccl::wire_factor(choice.proto);
  const double cap_gbps = nccl::channel_cap_gbps(g, choice.algo, choice.proto);
  const double cap = cap_gbps > 0 ? cap_gbps * wire * kBytesPerUsPerGbps : cap_;
  const int k = g.ranks;
  const int nch = std::max(1, g.channels);
  std::vector<int> used;
  PendingFlows pending;
  const int flow_begin = static_cast<int>(flows_.size());
  auto machine_of = [&](int node) { return topo_.nodes()[node].machine; };
  // A GPU-to-GPU hop of channel c: the route inside a machine, through the channel's NICs across machines.
  auto hop = [&](const nccl::Channel& ch, int a, int ma, int b, int mb, double work) {
    if (machine_of(a) == machine_of(b)) {
      const Route& r = topo_.route(a, b);
      add_path_flow({&r.links}, work, cap, used, pending);
      return;
    }
    const int na = ch.nics[static_cast<std::size_t>(ma)], nb = ch.nics[static_cast<std::size_t>(mb)];
    add_path_flow({&topo_.route(a, na).links, &topo_.route(na, nb).links, &topo_.route(nb, b).links}, work, cap, used,
                  pending);
  };
  auto tree_edges = [&](double share, bool chains) {
    for (int c = 0; c < nch; ++c) {
      const nccl::Channel& ch = g.rings[static_cast<std::size_t>(c)];
      for (int m = 0; m < g.machines; ++m) {
        const int base = m * g.ppn;
        if (chains) {
          for (int i = 0; i + 1 < g.ppn; ++i) {
            const int a = ch.ring[static_cast<std::size_t>(base + i)],
                      b = ch.ring[static_cast<std::size_t>(base + i + 1)];
            hop(ch, a, m, b, m, share);
            hop(ch, b, m, a, m, share);
          }
        }
        const int parent = nccl::tree_parent(g.machines, c % 2, m);
        if (parent < 0) continue;
        const int head = ch.ring[static_cast<std::size_t>(base)];
        const int phead = ch.ring[static_cast<std::size_t>(parent * g.ppn)];
        hop(ch, head, m, phead, parent, share);
        hop(ch, phead, parent, head, m, share);
      }
    }
  };
  switch (choice.algo) {
    case nccl::Algo::kRing: {
      const double per_edge = 2.0 * (k - 1) / k * bytes / nch * wire;
      for (int c = 0; c < nch; ++c) {
        const nccl::Channel& ch = g.rings[static_cast<std::size_t>(c)];
        for (int i = 0; i < k; ++i) {
          const int j = (i + 1) % k;
          hop(ch, ch.ring[static_cast<std::size_t>(i)], i / g.ppn, ch.ring[static_cast<std::size_t>(j)], j / g.ppn,
              per_edge);
        }
      }
      break;
    }
    case nccl::Algo::kTree: tree_edges(bytes / nch * wire, true); break;
    case nccl::Algo::kNvls:
    case nccl::Algo::kNvlsTree: {
      const double eff = nccl::nvls_efficiency(g);
      for (const int gpu : members) {
        int sw = -1;
        for (const int l : topo_.out_links(gpu)) {
          if (topo_.nodes()[topo_.links()[l].dst].kind == NodeKind::kNvSwitch) sw = topo_.links()[l].dst;
        }
        if (sw < 0) continue;
        const double work = bytes * (g.ppn + 1) / g.ppn;
        for (const Route* r : {&topo_.route(gpu, sw), &topo_.route(sw, gpu)}) {
          double slowest = std::numeric_limits<double>::infinity();
          for (const int l : r->links) slowest = std::min(slowest, link_capacity_[static_cast<std::size_t>(l)]);
          add_path_flow({&r->links}, work, eff * slowest, used, pending);
        }
      }
      if (choice.algo == nccl::Algo::kNvlsTree) tree_edges(bytes / nch, false);
      break;
    }
    case nccl::Algo::kPat: break;  // nccl::choose never picks PAT for all-reduce
  }
  {
    // Equal flows (same links, work and cap) next to each other, in a fixed order; each run becomes one flow.
    const std::size_t nf = pending.span.size();
    std::vector<int> order(nf);
    for (std::size_t i = 0; i < nf; ++i) order[i] = static_cast<int>(i);
    auto less = [&](int a, int b) {
      const auto [ab, ac] = pending.span[static_cast<std::size_t>(a)];
      const auto [bb, bc] = pending.span[static_cast<std::size_t>(b)];
      if (ac != bc) return ac < bc;
      for (int i = 0; i < ac; ++i) {
        const int x = pending.links[static_cast<std::size_t>(ab + i)],
                  y = pending.links[static_cast<std::size_t>(bb + i)];
        if (x != y) return x < y;
      }
      return pending.work_cap[static_cast<std::size_t>(a)] < pending.work_cap[static_cast<std::size_t>(b)];
    };
    std::sort(order.begin(), order.end(), [&](int a, int b) { return less(a, b) || (!less(b, a) && a < b); });
    for (std::size_t i = 0; i < nf;) {
      std::size_t j = i + 1;
      while (j < nf && !less(order[i], order[j])) ++j;
      const auto [b, c] = pending.span[static_cast<std::size_t>(order[i])];
      const auto [work, cap] = pending.work_cap[static_cast<std::size_t>(order[i])];
      const auto n = static_cast<double>(j - i);
      FlowSpec f;
      f.res_begin = static_cast<int>(res_pool_.size());
      f.res_count = c;
      res_pool_.insert(res_pool_.end(), pending.links.begin() + b, pending.links.begin() + b + c);
      f.work = work * n;
      f.cap = cap * n;
      flows_.push_back(f);
      i = j;
    }
  }
  Program prog;
  prog.phase_begin = static_cast<int>(phases_.size());
  phases_.push_back({latency, flow_begin, static_cast<int>(flows_.size()) - flow_begin});
  prog.phase_count = 1;
  programs_.push_back(prog);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  group_links_[op.id] = std::move(used);
  group_runs_.push_back({op.id, std::string(nccl::to_string(choice.algo)), std::string(nccl::to_string(choice.proto)),
                         choice.channels, latency});
}

void Simulation::compile() {
  const int n_ops = static_cast<int>(plan_.ops.size());
  programs_.reserve(n_ops);
  std::vector<int> succ_count(n_ops + 1, 0);
  for (int i = 0; i < n_ops; ++i) {
    const Op& op = plan_.ops[i];
    if (op.id != i) throw InvalidInput(fmt::format("plan: op at position {} has id {}", i, op.id));
    for (const int d : op.deps) {
      if (d < 0 || d >= i) {
        throw InvalidInput(fmt::format("plan: op {}: dependency {} is not an earlier op", i, d));
      }
      ++succ_count[d];
    }
    switch (op.kind) {
      case OpKind::kCopy:
      case OpKind::kReduce: {
        const int sn = node_of(op.src.device, i, "source");
        const int dn = node_of(op.dst.device, i, "destination");
        const double bytes = static_cast<double>(op.src.count) * es_;
        const bool reduce = op.kind == OpKind::kReduce;
        const NodeKind dst_kind = topo_.nodes()[dn].kind;
        if (sn == dn) {
          const double gbps = reduce ? model_.reduce_for(dst_kind) : model_.memory_for(dst_kind);
          if (host_) {
            add_host_local(model_.op_overhead_us, dn, bytes, gbps * kBytesPerUsPerGbps);
          } else {
            add_local(model_.op_overhead_us, dn, bytes / (gbps * kBytesPerUsPerGbps));
          }
          break;
        }
        const RouteInfo& r = route_info(sn, dn);
        if (host_) {
          add_host_transfer(r, dn, bytes, reduce);
          break;
        }
        Program prog;
        prog.phase_begin = static_cast<int>(phases_.size());
        Phase move{model_.op_overhead_us + r.latency_us, static_cast<int>(flows_.size()), 0};
        if (bytes > 0) {
          flows_.push_back({.res_begin = r.res_begin, .res_count = r.res_count, .work = bytes, .cap = cap_});
          move.flow_count = 1;
        }
        phases_.push_back(move);
        prog.phase_count = 1;
        if (reduce) {
          const double work = bytes / (model_.reduce_for(dst_kind) * kBytesPerUsPerGbps);
          Phase compute{0.0, static_cast<int>(flows_.size()), 0};
          if (work > 0) {
            flows_.push_back(
                {.res_begin = static_cast<int>(res_pool_.size()), .res_count = 1, .work = work, .cap = 0.0});
            res_pool_.push_back(links_ + dn);
            compute.flow_count = 1;
          }
          phases_.push_back(compute);
          prog.phase_count = 2;
        }
        programs_.push_back(prog);
        break;
      }
      case OpKind::kScale: {
        const int dn = node_of(op.dst.device, i, "destination");
        const double bytes = static_cast<double>(op.dst.count) * es_;
        const double gbps = model_.memory_for(topo_.nodes()[dn].kind);
        if (host_) {
          add_host_local(model_.op_overhead_us, dn, bytes, gbps * kBytesPerUsPerGbps);
        } else {
          add_local(model_.op_overhead_us, dn, bytes / (gbps * kBytesPerUsPerGbps));
        }
        break;
      }
      case OpKind::kGroup: compile_group(op); break;
    }
  }
  // Serial devices: each op also waits for the previous op its thread (any of them, for a group) executes.
  std::vector<std::pair<int, int>> serial;  // (earlier, later)
  if (model_.host.serial_devices) serial = serial_deps(succ_count);
  // Successor lists (CSR), in op order.
  succ_begin_.assign(n_ops + 1, 0);
  for (int i = 0; i < n_ops; ++i) succ_begin_[i + 1] = succ_begin_[i] + succ_count[i];
  succ_.resize(succ_begin_[n_ops]);
  deps_count_.assign(n_ops, 0);
  std::vector<int> fill(succ_begin_.begin(), succ_begin_.end() - 1);
  for (int i = 0; i < n_ops; ++i) {
    for (const int d : plan_.ops[i].deps) succ_[fill[d]++] = i;
    deps_count_[i] = static_cast<int>(plan_.ops[i].deps.size());
  }
  for (const auto& [prev, next] : serial) {
    succ_[fill[prev]++] = next;
    ++deps_count_[next];
  }
}

void Simulation::start_task(int task, double now) {
  TaskState& s = state_[task];
  s.start = now;
  s.phase = 0;
  const Program& p = programs_[task];
  s.repeats_left = p.phase_count == 1 ? p.last_repeats - 1 : p.last_repeats;
  begin_phase(task, now);
}

void Simulation::begin_phase(int task, double now) {
  const Phase& ph = phases_[programs_[task].phase_begin + state_[task].phase];
  timers_.push({now + ph.delay, seq_++, task});
}

void Simulation::on_timer(int task, double now) {
  TaskState& s = state_[task];
  const Phase& ph = phases_[programs_[task].phase_begin + s.phase];
  s.outstanding = ph.flow_count;
  if (ph.flow_count == 0) {
    phase_done(task, now);
    return;
  }
  for (int f = ph.flow_begin; f < ph.flow_begin + ph.flow_count; ++f) {
    const FlowSpec& spec = flows_[f];
    engine_->start(now, spec.work, std::span<const int>(res_pool_.data() + spec.res_begin, spec.res_count), spec.cap,
                   task,
                   spec.weighted ? std::span<const double>(w_pool_.data() + spec.res_begin, spec.res_count)
                                 : std::span<const double>());
  }
}

void Simulation::on_flow_end(int task, int limiter, double now) {
  TaskState& s = state_[task];
  s.limiter = limiter;
  if (--s.outstanding == 0) phase_done(task, now);
}

void Simulation::phase_done(int task, double now) {
  TaskState& s = state_[task];
  const Program& p = programs_[task];
  if (s.phase + 1 < p.phase_count) {
    ++s.phase;
    if (s.phase + 1 == p.phase_count) s.repeats_left = p.last_repeats - 1;
    begin_phase(task, now);
  } else if (s.repeats_left > 0) {
    --s.repeats_left;
    begin_phase(task, now);
  } else {
    finish_task(task, now);
  }
}

void Simulation::finish_task(int task, double now) {
  state_[task].end = now;
  for (int k = succ_begin_[task]; k < succ_begin_[task + 1]; ++k) {
    const int next = succ_[k];
    TaskState& n = state_[next];
    if (--n.deps_left == 0) {
      n.crit_dep = task;
      start_task(next, now);
    }
  }
}

std::vector<int> Simulation::op_links(const Op& op) {
  std::vector<int> out;
  auto append = [&](const RouteInfo& r) {
    for (int i = 0; i < r.res_count; ++i) out.push_back(res_pool_[r.res_begin + i]);
  };
  if (op.kind == OpKind::kCopy || op.kind == OpKind::kReduce) {
    const int sn = plan_.devices[op.src.device].node;
    const int dn = plan_.devices[op.dst.device].node;
    if (sn != dn) append(route_info(sn, dn));
  } else if (op.kind == OpKind::kGroup && group_links_.count(op.id) != 0) {
    return group_links_.at(op.id);
  } else if (op.kind == OpKind::kGroup && op.group.size() > 1) {
    std::vector<int> members;
    for (const int d : op.group) members.push_back(plan_.devices[d].node);
    for (const RouteInfo& e : ring_info(members).edges) append(e);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return out;
}

SimResult Simulation::run() {
  compile();
  const int n_ops = static_cast<int>(plan_.ops.size());
  state_.assign(n_ops, TaskState{});
  for (int i = 0; i < n_ops; ++i) state_[i].deps_left = deps_count_[i];
  // The host backend's run starts (its threads wake) before the first op can.
  const double t0 = model_.host.run_overhead_us;
  for (int i = 0; i < n_ops; ++i) {
    if (state_[i].deps_left == 0) start_task(i, t0);
  }
  detail::FlowEngine& engine = *engine_;
  for (;;) {
    auto next = engine.next_completion();
    const bool have_timer = !timers_.empty();
    if (next.second < 0 && !have_timer) break;
    double now;
    if (next.second < 0) {
      now = timers_.top().time;
    } else if (!have_timer) {
      now = next.first;
    } else {
      now = std::min(next.first, timers_.top().time);
    }
    while (next.second >= 0 && next.first == now) {
      const detail::FlowEnd end = engine.finish(next.second, now);
      on_flow_end(static_cast<int>(end.tag), end.limiter, now);
      next = engine.next_completion();
    }
    while (!timers_.empty() && timers_.top().time == now) {
      const int task = timers_.top().task;
      timers_.pop();
      on_timer(task, now);
    }
    engine.settle(now);
  }

  SimResult result;
  result.bytes = static_cast<std::uint64_t>(plan_.count) * static_cast<std::uint64_t>(es_);
  result.ranks = plan_.ranks();
  int last = -1;
  for (int i = 0; i < n_ops; ++i) {
    if (state_[i].end < 0) {
      throw InvalidInput(fmt::format("plan: op {} never ran (its dependencies never completed)", i));
    }
    if (last < 0 || state_[i].end >= state_[last].end) last = i;
  }
  result.time_us = last < 0 ? 0.0 : state_[last].end;
  if (!std::isfinite(result.time_us)) {
    // Only figures far outside real hardware get here (a link of 1e-300 GB/s): say so rather than print inf.
    throw InvalidInput(
        fmt::format("topology '{}': the predicted time of plan {} is not finite; a link bandwidth or "
                    "latency (or a calibration figure) is far outside real hardware",
                    topo_.name(), plan_.spec));
  }
  if (result.time_us > 0) {
    result.algbw_gbps = static_cast<double>(result.bytes) / (result.time_us * kBytesPerUsPerGbps);
    const int n = result.ranks;
    result.busbw_gbps = result.algbw_gbps * bus_factor(plan_.collective, n);  // nccl-tests' factor per collective
  }
  for (int l = 0; l < links_; ++l) {
    const detail::ResourceStats& st = engine.stats(l);
    if (st.work <= 0) continue;
    LinkUsage u;
    u.link = l;
    u.bytes = st.work;
    u.busy_us = st.busy_us;
    u.saturated_us = st.saturated_us;
    u.utilisation = result.time_us > 0 ? st.work / (link_capacity_[l] * result.time_us) : 0.0;
    result.links.push_back(u);
  }
  const LinkUsage* best = nullptr;
  for (const LinkUsage& u : result.links) {
    if (best == nullptr || u.saturated_us > best->saturated_us ||
        (u.saturated_us == best->saturated_us && u.busy_us > best->busy_us)) {
      best = &u;
    }
  }
  result.bottleneck_link = best ? best->link : -1;
  result.groups = group_runs_;
  for (int t = last; t >= 0; t = state_[t].crit_dep) {
    CriticalStep step;
    step.op = t;
    step.start_us = state_[t].start;
    step.end_us = state_[t].end;
    step.links = op_links(plan_.ops[t]);
    step.limiting_link = state_[t].limiter < links_ ? state_[t].limiter : -1;
    result.critical_path.push_back(std::move(step));
  }
  std::reverse(result.critical_path.begin(), result.critical_path.end());
  return result;
}

// Two bounds no run of the compiled program can beat, from its flows alone (no events):
//  - resources: every flow's work crosses each of its resources, which max-min sharing never fills past its
//    capacity (Σ weight·rate ≤ capacity at every instant), and nothing moves before the run starts: the run
//    ends no earlier than start + (work the resource must carry) / capacity, for every resource;
//  - paths: an op starts no earlier than its last dependency (serial devices included) ends, a phase takes
//    its delay plus, for each of its flows, work / (the flow's fastest possible rate: its cap, and capacity /
//    weight on each resource it crosses): the run ends no earlier than the longest chain of such ops.
// The larger of the two, less a relative 1e-9 for the rounding of the event simulation's arithmetic.
double Simulation::lower_bound() {
  compile();
  const int n_ops = static_cast<int>(plan_.ops.size());
  const double t0 = model_.host.run_overhead_us;
  std::vector<double> load(capacity_.size(), 0.0);
  std::vector<double> start(static_cast<std::size_t>(n_ops), t0);
  double path = t0;
  for (int i = 0; i < n_ops; ++i) {
    const Program& p = programs_[static_cast<std::size_t>(i)];
    double duration = 0;
    for (int k = 0; k < p.phase_count; ++k) {
      const Phase& ph = phases_[static_cast<std::size_t>(p.phase_begin + k)];
      const double times = k + 1 == p.phase_count ? p.last_repeats : 1;
      double longest = 0;
      for (int fi = ph.flow_begin; fi < ph.flow_begin + ph.flow_count; ++fi) {
        const FlowSpec& f = flows_[static_cast<std::size_t>(fi)];
        double rate = f.cap > 0 ? f.cap : std::numeric_limits<double>::infinity();
        for (int j = 0; j < f.res_count; ++j) {
          const auto at = static_cast<std::size_t>(f.res_begin + j);
          const double w = f.weighted ? w_pool_[at] : 1.0;
          const auto r = static_cast<std::size_t>(res_pool_[at]);
          rate = std::min(rate, capacity_[r] / w);
          load[r] += f.work * w * times;
        }
        if (f.work > 0 && std::isfinite(rate)) longest = std::max(longest, f.work / rate);
      }
      duration += (ph.delay + longest) * times;
    }
    const double end = start[static_cast<std::size_t>(i)] + duration;
    path = std::max(path, end);
    for (int k = succ_begin_[static_cast<std::size_t>(i)]; k < succ_begin_[static_cast<std::size_t>(i) + 1]; ++k) {
      double& next = start[static_cast<std::size_t>(succ_[static_cast<std::size_t>(k)])];
      next = std::max(next, end);
    }
  }
  double resources = t0;
  for (std::size_t r = 0; r < capacity_.size(); ++r) resources = std::max(resources, t0 + load[r] / capacity_[r]);
  return std::max(path, resources) * (1.0 - 1e-9);
}

}  // namespace

SimResult simulate(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes) {
  Simulation sim(plan, topo, model, element_bytes);
  return sim.run();
}

double simulate_lower_bound(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes) {
  Simulation sim(plan, topo, model, element_bytes);
  return sim.lower_bound();
}

std::string link_name(const Topology& topo, int link) {
  if (link < 0 || link >= static_cast<int>(topo.links().size())) return "-";
  const Link& l = topo.links()[link];
  return fmt::format("{}->{} ({})", topo.nodes()[l.src].id, topo.nodes()[l.dst].id, to_string(l.kind));
}

std::vector<int> best_ring_order(const Topology& topo, const std::vector<int>& nodes) {
  const int k = static_cast<int>(nodes.size());
  if (k <= 3) return nodes;  // every cyclic order of ≤ 3 members is the same ring or its reverse
  std::vector<std::vector<double>> bw(k, std::vector<double>(k, 0.0));
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < k; ++j) {
      if (i != j) bw[i][j] = topo.route(nodes[i], nodes[j]).bandwidth_gbps;
    }
  }
  std::vector<int> best;
  if (k <= kExhaustiveRingMax) {
    std::vector<int> perm(k);
    for (int i = 0; i < k; ++i) perm[i] = i;
    double best_min = -1, best_sum = -1;
    do {
      double mn = std::numeric_limits<double>::infinity(), sum = 0;
      for (int i = 0; i < k; ++i) {
        const double b = bw[perm[i]][perm[(i + 1) % k]];
        mn = std::min(mn, b);
        sum += b;
      }
      if (mn > best_min || (mn == best_min && sum > best_sum)) {
        best_min = mn;
        best_sum = sum;
        best = perm;
      }
    } while (std::next_permutation(perm.begin() + 1, perm.end()));
  } else {
    std::vector<bool> used(k, false);
    best.push_back(0);
    used[0] = true;
    for (int step = 1; step < k; ++step) {
      const int cur = best.back();
      int pick = -1;
      for (int j = 0; j < k; ++j) {
        if (!used[j] && (pick < 0 || bw[cur][j] > bw[cur][pick])) pick = j;
      }
      used[pick] = true;
      best.push_back(pick);
    }
  }
  std::vector<int> out;
  out.reserve(k);
  for (const int i : best) out.push_back(nodes[i]);
  return out;
}

nlohmann::json sim_result_to_json(const SimResult& result, const Topology& topo) {
  nlohmann::json doc;
  doc["time_us"] = result.time_us;
  doc["bytes"] = result.bytes;
  doc["ranks"] = result.ranks;
  doc["algbw_gbps"] = result.algbw_gbps;
  doc["busbw_gbps"] = result.busbw_gbps;
  auto link_json = [&](int l) -> nlohmann::json {
    if (l < 0) return nullptr;
    const Link& link = topo.links()[l];
    return {{"index", l},
            {"src", topo.nodes()[link.src].id},
            {"dst", topo.nodes()[link.dst].id},
            {"kind", std::string(to_string(link.kind))},
            {"name", link_name(topo, l)}};
  };
  doc["bottleneck"] = link_json(result.bottleneck_link);
  nlohmann::json links = nlohmann::json::array();
  for (const LinkUsage& u : result.links) {
    nlohmann::json j = link_json(u.link);
    j["bandwidth_gbps"] = topo.links()[u.link].bandwidth_gbps;
    j["bytes"] = u.bytes;
    j["busy_us"] = u.busy_us;
    j["saturated_us"] = u.saturated_us;
    j["utilisation"] = u.utilisation;
    links.push_back(std::move(j));
  }
  doc["links"] = std::move(links);
  nlohmann::json path = nlohmann::json::array();
  for (const CriticalStep& s : result.critical_path) {
    nlohmann::json j = {{"op", s.op}, {"start_us", s.start_us}, {"end_us", s.end_us}, {"links", s.links}};
    j["limiting_link"] =
        s.limiting_link >= 0 ? nlohmann::json(link_name(topo, s.limiting_link)) : nlohmann::json(nullptr);
    path.push_back(std::move(j));
  }
  doc["critical_path"] = std::move(path);
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupRun& g : result.groups) {
    groups.push_back({{"op", g.op},
                      {"algorithm", g.algorithm},
                      {"protocol", g.protocol},
                      {"channels", g.channels},
                      {"latency_us", g.latency_us}});
  }
  doc["groups"] = std::move(groups);
  return doc;
}

}  // namespace artune
