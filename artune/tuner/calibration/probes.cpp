// Calibration's microbenchmarks: device-pair classes and the plans that time them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "artune/core/error.hpp"
#include "artune/executor/harness/runner.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/calibration/detail.hpp"

namespace artune {

namespace calibration_detail {

std::vector<std::uint64_t> default_sizes() {
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = 4096; s <= (16u << 20); s *= 4) out.push_back(s);
  return out;
}

PlanDevice device_of(const Topology& topo, int node, bool participant) {
  PlanDevice d;
  d.node = node;
  d.name = topo.nodes().at(static_cast<std::size_t>(node)).id;
  d.participant = participant;
  return d;
}

/// Times a plan with the runner of `artune run` (median of the timed runs, slowest process each), unchecked.
double median_time_us(HarnessBackend& backend, const Plan& plan, DataType type, int warmup, int iterations) {
  SweepConfig config;
  config.type = type;
  config.iterations = std::max(1, iterations);
  config.warmup = warmup;
  config.check = 0;  // microbenchmark plans are not all-reduces
  return run_plan(backend, plan, config).time_us;
}

namespace {

std::vector<LinkKind> route_kinds(const Topology& topo, const Route& route) {
  std::set<LinkKind> kinds;
  for (int l : route.links) kinds.insert(topo.links().at(static_cast<std::size_t>(l)).kind);
  return {kinds.begin(), kinds.end()};
}

std::string kinds_text(const std::vector<LinkKind>& kinds) {
  std::vector<std::string> names;
  for (auto k : kinds) names.emplace_back(to_string(k));
  return fmt::format("{}", fmt::join(names, "+"));
}

}  // namespace

LinkKind bottleneck_kind(const Topology& topo, const Route& route) {
  LinkKind kind = LinkKind::kLoopback;
  double best = std::numeric_limits<double>::infinity();
  for (int l : route.links) {
    const Link& link = topo.links().at(static_cast<std::size_t>(l));
    if (link.bandwidth_gbps < best) {
      best = link.bandwidth_gbps;
      kind = link.kind;
    }
  }
  return kind;
}

/// Device-pair classes among the GPUs of machine 0 (and GPU → CPU socket): one representative pair
/// per (path type, bottleneck bandwidth, link kinds).
std::vector<ClassFit> pair_classes(const Topology& topo) {
  std::vector<ClassFit> out;
  std::set<std::tuple<int, int, long long, std::vector<LinkKind>>> seen;
  auto consider = [&](int a, int b) {
    const Route& r = topo.route(a, b);
    const auto kinds = route_kinds(topo, r);
    const auto key = std::make_tuple(static_cast<int>(topo.nodes()[b].kind), static_cast<int>(r.type),
                                     std::llround(r.bandwidth_gbps * 1000), kinds);
    if (!seen.insert(key).second) return;
    ClassFit c;
    c.src = a;
    c.dst = b;
    c.path = r.type;
    c.kinds = kinds;
    c.bottleneck_kind = bottleneck_kind(topo, r);
    c.nominal_gbps = r.bandwidth_gbps;
    c.route_latency_us = r.latency_us;
    std::string cell = std::string(to_string(r.type));
    if (const int lanes = topo.nvlink_lanes(a, b); lanes > 0) cell = fmt::format("NV{}", lanes);
    c.name = fmt::format("{}->{} {} ({} {:g} GB/s)", to_string(topo.nodes()[a].kind), to_string(topo.nodes()[b].kind),
                         cell, kinds_text(kinds), r.bandwidth_gbps);
    out.push_back(std::move(c));
  };
  const auto gpus = topo.gpus_of_machine(0);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = 0; j < gpus.size(); ++j) {
      if (i != j) consider(gpus[i], gpus[j]);
    }
  }
  const auto cpus = topo.nodes_of_kind(NodeKind::kCpu, 0);
  if (!gpus.empty() && !cpus.empty()) consider(gpus.front(), cpus.front());
  return out;
}

}  // namespace calibration_detail

using namespace calibration_detail;

namespace {

/// A plan over `participants` (buffers: user + one scratch of `count` each); returns a node's plan device,
/// adding a helper with one scratch buffer for a node that is not a participant.
int plan_device(Plan& plan, const Topology& topo, int node, std::int64_t count) {
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    if (plan.devices[d].node == node) return static_cast<int>(d);
  }
  plan.devices.push_back(device_of(topo, node, false));
  plan.buffers.push_back({count});
  return static_cast<int>(plan.devices.size() - 1);
}

Plan participants_plan(const Topology& topo, const std::vector<int>& participants, std::int64_t count,
                       std::string spec) {
  Plan plan;
  plan.spec = std::move(spec);
  plan.count = count;
  for (int node : participants) {
    plan.devices.push_back(device_of(topo, node));
    plan.buffers.push_back({count, count});
  }
  return plan;
}

/// The scratch buffer of a plan device: 1 on participants, 0 on helpers.
int scratch_of(const Plan& plan, int device) {
  return plan.devices[static_cast<std::size_t>(device)].participant ? 1 : 0;
}

}  // namespace

Plan copy_plan(const Topology& topo, const std::vector<int>& participants, int src, int dst, std::int64_t count) {
  Plan plan = participants_plan(topo, participants, count, "calibrate:copy");
  const int s = plan_device(plan, topo, src, count);
  const int d = plan_device(plan, topo, dst, count);
  if (!plan.devices[static_cast<std::size_t>(s)].participant) {
    throw InvalidInput(fmt::format("calibrate: copy source '{}' is not a participant",
                                   plan.devices[static_cast<std::size_t>(s)].name));
  }
  Op op;
  op.kind = OpKind::kCopy;
  op.src = Location{s, 0, 0, count};
  op.dst = Location{d, scratch_of(plan, d), 0, count};
  plan.add(op);
  return plan;
}

Plan ring_step_plan(const Topology& topo, const std::vector<int>& nodes, std::int64_t count, bool reduce) {
  Plan plan;
  plan.spec = reduce ? "calibrate:ring_step_reduce" : "calibrate:ring_step";
  plan.count = count;
  const int n = static_cast<int>(nodes.size());
  for (int node : nodes) {
    plan.devices.push_back(device_of(topo, node));
    plan.buffers.push_back({count, count});
  }
  for (int i = 0; i < n; ++i) {
    Op op;
    op.kind = reduce ? OpKind::kReduce : OpKind::kCopy;
    op.src = Location{i, 0, 0, count};
    op.dst = Location{(i + 1) % n, 1, 0, count};
    plan.add(op);
  }
  return plan;
}

Plan local_plan(const Topology& topo, const std::vector<int>& nodes, std::int64_t count, bool reduce) {
  Plan plan;
  plan.spec = reduce ? "calibrate:local_reduce" : "calibrate:local_copy";
  plan.count = count;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    plan.devices.push_back(device_of(topo, nodes[i]));
    plan.buffers.push_back({count, count});
    Op op;
    op.kind = reduce ? OpKind::kReduce : OpKind::kCopy;
    op.src = Location{static_cast<int>(i), 1, 0, count};
    op.dst = Location{static_cast<int>(i), 0, 0, count};
    plan.add(op);
  }
  return plan;
}

Plan chain_plan(const Topology& topo, const std::vector<int>& participants, int a, int b, int ops) {
  Plan plan = participants_plan(topo, participants, 1, "calibrate:chain");
  const int da = plan_device(plan, topo, a, 1);
  const int db = plan_device(plan, topo, b, 1);
  for (int i = 0; i < ops; ++i) {
    Op op;
    op.kind = OpKind::kCopy;
    // a.0 → b.scratch, b.scratch → a.scratch, a.scratch → b.scratch, …: each copy reads what the previous wrote.
    const bool forward = i % 2 == 0;
    op.src = forward ? Location{da, i == 0 ? 0 : scratch_of(plan, da), 0, 1} : Location{db, scratch_of(plan, db), 0, 1};
    op.dst = forward ? Location{db, scratch_of(plan, db), 0, 1} : Location{da, scratch_of(plan, da), 0, 1};
    if (i > 0) op.deps = {i - 1};
    plan.add(op);
  }
  return plan;
}

}  // namespace artune
