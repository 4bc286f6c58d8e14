#pragma once
// The event-driven simulation behind simulate() (simulator.hpp): a plan compiled into per-task phases of
// flows over the topology's resources (simulation_compile.cpp), then run on the max-min flow engine in
// time order (simulation_run.cpp). Internal to the simulator; not installed.

#include "artune/simulator/simulator.hpp"

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

#include "artune/core/error.hpp"
#include "artune/simulator/flow_engine.hpp"
#include "artune/simulator/nccl_model.hpp"

namespace artune::sim_detail {

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

inline std::int64_t max_piece(std::int64_t count, int pieces) { return (count + pieces - 1) / pieces; }

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
      double eff = model.link_for(link.kind).efficiency;
      if (!(eff > 0) || eff > 1) {
        throw InvalidInput(fmt::format("cost model: efficiency of {} links must be in (0, 1]", to_string(link.kind)));
      }
      // A NIC port whose fabric states its own efficiency (topology JSON fabric.efficiency) runs its network
      // links at it in place of the cost model's.
      if (link.kind == LinkKind::kNetwork) {
        for (const int end : {link.src, link.dst}) {
          const Node& n = topo.nodes()[static_cast<std::size_t>(end)];
          if (n.kind == NodeKind::kNic && n.net.efficiency > 0) eff = n.net.efficiency;
        }
      }
      link_capacity_[l] = capacities[l] = link.bandwidth_gbps * eff * kBytesPerUsPerGbps;
    }
    capacity_ = std::move(capacities);
    scalable_ = !host_;  // host flows' rates and memory bandwidth depend on the sizes
  }

  /// Whether compile() folds machines the plan treats alike (simulation_symmetry.cpp); call before it.
  void use_symmetry(bool use) { use_symmetry_ = use; }
  /// Elements of the machines' group the compiled program was folded by (1: none).
  int symmetry_order() const { return sym_.order; }
  /// Compiles the plan (once; run() and lower_bound() call it).
  void compile();
  /// Whether the compiled program is linear in the plan's counts: every flow's work is proportional to its op's
  /// element count, nothing else depends on it (no host model, no NCCL model choosing by size, no group whose
  /// count leaves a remainder over its members). Valid after compile().
  bool scalable() const { return scalable_; }
  /// Runs and bounds the plan with every count multiplied by `factor` from now on (1: as given); a factor
  /// other than 1 needs scalable().
  void set_factor(std::int64_t factor);
  /// One simulation of the compiled program (each call starts from a fresh engine).
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
  void compile_ops();
  // Symmetry (simulation_symmetry.cpp): machines the plan treats alike are simulated once.
  struct Lift {
    std::vector<int> node, link, op;  // images of nodes, links and ops under one renaming of the machines
  };
  struct SymmetryIndex;
  bool lift_machine_map(const std::vector<int>& machine_map, const SymmetryIndex& index, Lift& out);
  void find_symmetry();
  void fold_flows_onto_orbits();
  bool simulated(int op) const { return sym_.order == 1 || sym_.op_rep[static_cast<std::size_t>(op)] == op; }
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
  struct Symmetry {
    int order = 1;               // elements of the machines' group found (1: none, every op is simulated)
    std::vector<int> op_rep;     // op → the op of its orbit that is simulated (the smallest id)
    std::vector<int> res_rep;    // engine resource → its orbit's representative (the smallest index)
    std::vector<int> res_orbit;  // engine resource → the size of its orbit
    bool weighted = false;       // some folded flow has a weight other than 1
  };
  Symmetry sym_;
  bool use_symmetry_ = true;
  bool compiled_ = false;
  bool scalable_ = true;
  std::int64_t factor_ = 1;
  std::vector<double> base_work_;  // every flow's work at factor 1
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

}  // namespace artune::sim_detail
