// Compiling a plan for the simulation: routes, rings, NCCL channel groups, host threads and the per-task
// phases of flows (Simulation::compile and the helpers it calls).

#include "artune/simulator/simulation.hpp"

#include <optional>

namespace artune::sim_detail {

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
  return cap_ > 0 ? cap_ : model_.memory_for(topo_.nodes()[node]) * kBytesPerUsPerGbps;
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
      reduce ? model_.reduce_for(topo_.nodes()[dst_node]) * kBytesPerUsPerGbps : thread_copy_rate(dst_node);
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
                    "all-reduce, all-gather or reduce-scatter over GPUs, the same number on every machine, "
                    "under the nccl or cuda "
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
  if (op.dst.count % k != 0) scalable_ = false;  // the largest piece does not scale with the count
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

// GPU backends run a group all-reduce, all-gather or reduce-scatter as NCCL does (nccl_model.hpp); host
// backends (cpu, mpi) keep the
// one-ring model of their own collectives, and broadcast/reduce inside the hybrids stay NCCL's ring chain.
bool Simulation::runs_nccl_model(const Op& op, const std::vector<int>& members) const {
  if (host_ || members.size() < 2 || !nccl::modelled(op.collective)) return false;
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

// An NCCL all-reduce, all-gather or reduce-scatter: NCCL's channels over the topology (nccl::search), the
// algorithm × protocol NCCL picks for this size (or the spec forces), NCCL's latency for it, then every
// channel's traffic as flows sharing the links max-min fairly with each other and with concurrent ops:
//  - Ring: each channel moves 2(k−1)/k of its share of the buffer over every edge of its ring ((k−1)/k for
//    all-gather and reduce-scatter); edges between machines go GPU → the channel's NIC → the next
//    machine's NIC → GPU. PAT (all-gather/reduce-scatter, one GPU per machine) moves the same bytes.
//  - Tree: inside a machine a chain along the channel's ring segment, across machines NCCL's double
//    binary tree between the segments' heads; every tree edge carries the channel's share up (reduce)
//    and down (broadcast).
//  - NVLS: every GPU sends its buffer to the NVSwitch (the switch reduces) and its reduced shard back
//    for the switch to multicast: (k+1)/k of the buffer each way on its switch links, at NCCL's NVLS
//    efficiency. NVLSTree adds the Tree's network edges between machines.
// Protocols put more bytes on the wire (LL 2×, LL128 128/120) and cap a channel's rate at NCCL's
// per-channel limits (tuning.cc; Tree's with NCCL's size correction, as NCCL's own estimate has it), converted
// to wire bytes.
void Simulation::compile_nccl_group(const Op& op, const std::vector<int>& members) {
  scalable_ = false;  // NCCL's algorithm, protocol and latency depend on the size
  auto git = nccl_graphs_.find(members);
  if (git == nccl_graphs_.end()) {
    // The release's search (NIC ports fused or not) and cost table (its choice).
    git = nccl_graphs_.emplace(members, nccl::search(topo_, members, model_.nccl_release)).first;
  }
  const std::string what = fmt::format("spec '{}'", plan_.spec.empty() ? std::string("nccl") : plan_.spec);
  const nccl::Forced forced = nccl::parse_variant(op.algo, fmt::format("plan: op {}: algo", op.id));
  const double bytes = static_cast<double>(op.dst.count) * es_;
  const Collective coll = op.collective;
  const nccl::Choice choice = nccl::choose(git->second, bytes, forced, what, coll);
  // A forced channel count runs the algorithm on that many of the search's channels (choose() costed it so).
  std::optional<nccl::Graph> restricted;
  if (forced.channels > 0) restricted = nccl::with_channels(git->second, choice.algo, forced.channels, what);
  const nccl::Graph& g = restricted ? *restricted : git->second;
  // A calibration overlay's per-link-kind α, beyond the profile's default, shifts NCCL's per-step latency of
  // that link class: a measured machine overrides NCCL's defaults (the efficiency already scales the links).
  const CostModel defaults = CostModel::defaults(model_.profile);
  auto shift = [&](LinkKind kind) { return model_.link_for(kind).alpha_us - defaults.link_for(kind).alpha_us; };
  const nccl::HopAdjust adjust{shift(g.nvlink_intra ? LinkKind::kNvLink : LinkKind::kPcie), shift(LinkKind::kNetwork)};
  // The time the call's latency takes (the host's launches as the program issues the call, the device's steps),
  // not NCCL's choice weights.
  const double latency = nccl::launch_us(model_.launch.gpus_per_thread, model_.launch.cuda_graph) +
                         nccl::device_latency_us(g, choice.algo, choice.proto, adjust, coll);
  const double wire = nccl::wire_factor(choice.proto);
  const double cap_gbps = nccl::channel_cap_gbps(g, choice.algo, choice.proto, bytes);
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
    // Out through the NIC on NCCL's send path (PXN where NCCL takes it), in from it directly; a fused NIC's
    // traffic spread evenly over its ports, port i to the peer's port i.
    const auto& pa = ch.nic_ports[static_cast<std::size_t>(ma)];
    const auto& pb = ch.nic_ports[static_cast<std::size_t>(mb)];
    const std::size_t ports = std::max(pa.size(), pb.size());
    for (std::size_t i = 0; i < ports; ++i) {
      const int na = pa[i % pa.size()], nb = pb[i % pb.size()];
      const Route send = nccl::net_send_route(topo_, a, na, ch.nic_gpus[static_cast<std::size_t>(ma)]);
      add_path_flow({&send.links, &topo_.route(na, nb).links, &topo_.route(nb, b).links},
                    work / static_cast<double>(ports), cap / static_cast<double>(ports), used, pending);
    }
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
    case nccl::Algo::kPat:  // one GPU per machine: PAT's exchanges move what a ring's edges do, over the NICs
    case nccl::Algo::kRing: {
      const double per_edge = (coll == Collective::kAllReduce ? 2.0 : 1.0) * (k - 1) / k * bytes / nch * wire;
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
        // All-reduce: the buffer up and the reduced shard back, (k+1)/k each way. All-gather: the GPU's block
        // up, the whole buffer multicast down; reduce-scatter: the whole buffer up (the switch reduces each
        // block), the GPU's reduced block down.
        const double all = bytes * (g.ppn + 1) / g.ppn, block = bytes / g.ppn;
        const double up = coll == Collective::kAllReduce ? all : coll == Collective::kAllGather ? block : bytes;
        const double down = coll == Collective::kAllReduce ? all : coll == Collective::kAllGather ? bytes : block;
        const Route* routes[] = {&topo_.route(gpu, sw), &topo_.route(sw, gpu)};
        for (int dir = 0; dir < 2; ++dir) {
          const Route* r = routes[dir];
          double slowest = std::numeric_limits<double>::infinity();
          for (const int l : r->links) slowest = std::min(slowest, link_capacity_[static_cast<std::size_t>(l)]);
          add_path_flow({&r->links}, dir == 0 ? up : down, eff * slowest, used, pending);
        }
      }
      if (choice.algo == nccl::Algo::kNvlsTree) tree_edges(bytes / nch, false);
      break;
    }
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
  if (compiled_) return;
  compile_ops();
  compiled_ = true;
  base_work_.reserve(flows_.size());
  for (const FlowSpec& f : flows_) base_work_.push_back(f.work);
}

void Simulation::set_factor(std::int64_t factor) {
  compile();
  ARTUNE_CHECK(factor >= 1 && (factor == 1 || scalable_), "Simulation::set_factor: the compiled plan does not scale");
  if (factor == factor_) return;
  factor_ = factor;
  const double k = static_cast<double>(factor);
  for (std::size_t i = 0; i < flows_.size(); ++i) flows_[i].work = base_work_[i] * k;
}

void Simulation::compile_ops() {
  const int n_ops = static_cast<int>(plan_.ops.size());
  programs_.reserve(n_ops);
  for (int i = 0; i < n_ops; ++i) {
    const Op& op = plan_.ops[i];
    if (op.id != i) throw InvalidInput(fmt::format("plan: op at position {} has id {}", i, op.id));
    for (const int d : op.deps) {
      if (d < 0 || d >= i) {
        throw InvalidInput(fmt::format("plan: op {}: dependency {} is not an earlier op", i, d));
      }
    }
  }
  if (use_symmetry_) find_symmetry();
  // The simulated ops' dependencies: with symmetry, on their orbits' representatives (an op waits for its
  // dependencies, which end when their representatives do).
  std::vector<std::vector<int>> folded_deps;
  if (sym_.order > 1) folded_deps.resize(static_cast<std::size_t>(n_ops));
  for (int i = 0; i < n_ops && sym_.order > 1; ++i) {
    if (!simulated(i)) continue;
    std::vector<int>& deps = folded_deps[static_cast<std::size_t>(i)];
    for (const int d : plan_.ops[i].deps) deps.push_back(sym_.op_rep[static_cast<std::size_t>(d)]);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  }
  std::vector<int> succ_count(n_ops + 1, 0);
  auto deps_of = [&](int i) -> const std::vector<int>& {
    return sym_.order > 1 ? folded_deps[static_cast<std::size_t>(i)] : plan_.ops[i].deps;
  };
  for (int i = 0; i < n_ops; ++i) {
    if (!simulated(i)) continue;
    for (const int d : deps_of(i)) ++succ_count[d];
  }
  for (int i = 0; i < n_ops; ++i) {
    const Op& op = plan_.ops[i];
    if (!simulated(i)) {
      programs_.push_back(Program{static_cast<int>(phases_.size()), 0, 1});  // never started
      continue;
    }
    switch (op.kind) {
      case OpKind::kCopy:
      case OpKind::kReduce: {
        const int sn = node_of(op.src.device, i, "source");
        const int dn = node_of(op.dst.device, i, "destination");
        const double bytes = static_cast<double>(op.src.count) * es_;
        const bool reduce = op.kind == OpKind::kReduce;
        if (sn == dn) {
          const double gbps = reduce ? model_.reduce_for(topo_.nodes()[dn]) : model_.memory_for(topo_.nodes()[dn]);
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
          const double work = bytes / (model_.reduce_for(topo_.nodes()[dn]) * kBytesPerUsPerGbps);
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
        const double gbps = model_.memory_for(topo_.nodes()[dn]);
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
    if (!simulated(i)) continue;
    const std::vector<int>& deps = deps_of(i);
    for (const int d : deps) succ_[fill[d]++] = i;
    deps_count_[i] = static_cast<int>(deps.size());
  }
  if (sym_.order > 1) fold_flows_onto_orbits();
  for (const auto& [prev, next] : serial) {
    succ_[fill[prev]++] = next;
    ++deps_count_[next];
  }
}

}  // namespace artune::sim_detail
