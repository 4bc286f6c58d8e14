#pragma once
// Small hand-built topologies, plans and cost models for the simulator tests.

#include <cstdint>
#include <string>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"

namespace artune::testing {

/// `gpus` GPUs; links added by the caller; finalize() afterwards.
inline Topology gpu_nodes(int gpus, int machine = 0) {
  Topology t;
  for (int i = 0; i < gpus; ++i) {
    Node n;
    n.id = "gpu" + std::to_string(i);
    n.kind = NodeKind::kGpu;
    n.machine = machine;
    n.local_index = i;
    t.add_node(n);
  }
  return t;
}

/// A cost model with round numbers: op overhead 2 µs, NVLink α 0.5 µs and
/// efficiency 0.5, GPU reduce 100 GB/s, copy 200 GB/s, groups 10 + 1 µs/step.
inline CostModel round_model() {
  CostModel m = CostModel::defaults(BackendProfile::kNccl);
  m.op_overhead_us = 2.0;
  for (auto& [kind, cost] : m.link) cost = {0.0, 1.0};
  m.link[LinkKind::kNvLink] = {0.5, 0.5};
  m.reduce_gbps[NodeKind::kGpu] = 100.0;
  m.memory_gbps[NodeKind::kGpu] = 200.0;
  m.group_base_latency_us = 10.0;
  m.group_hop_latency_us = 1.0;
  m.transfer_cap_gbps = 0;
  return m;
}

/// A plan over topology nodes `nodes` (all participants), `count` elements each.
inline Plan plan_over(const Topology& t, const std::vector<int>& nodes, std::int64_t count) {
  Plan p;
  p.spec = "hand";
  p.count = count;
  for (const int n : nodes) p.devices.push_back({n, t.nodes()[n].id, true});
  p.buffers.assign(nodes.size(), std::vector<std::int64_t>{count});
  return p;
}

inline int add_xfer(Plan& p, OpKind kind, int src, int dst, std::int64_t offset, std::int64_t count,
                    std::vector<int> deps = {}) {
  Op op;
  op.kind = kind;
  op.src = {src, 0, offset, count};
  op.dst = {dst, 0, offset, count};
  op.deps = std::move(deps);
  return p.add(op);
}

inline int add_group(Plan& p, Collective c, std::vector<int> group, std::int64_t count, int root = -1,
                     std::vector<int> deps = {}) {
  Op op;
  op.kind = OpKind::kGroup;
  op.collective = c;
  op.group = std::move(group);
  op.root = root;
  op.dst = {-1, 0, 0, count};
  op.deps = std::move(deps);
  return p.add(op);
}

}  // namespace artune::testing
