// simulate() and the simulator's public helpers (ring orders, link names, JSON of a result); the simulation
// itself is in simulation.hpp, simulation_compile.cpp and simulation_run.cpp.

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
#include "artune/simulator/simulation.hpp"

namespace artune {

using sim_detail::kExhaustiveRingMax;
using sim_detail::Simulation;

SimResult simulate(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes) {
  Simulation sim(plan, topo, model, element_bytes);
  return sim.run();
}

double simulate_lower_bound(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes) {
  Simulation sim(plan, topo, model, element_bytes);
  return sim.lower_bound();
}

CompiledPlan::CompiledPlan(const Plan& plan, const Topology& topo, const CostModel& model, std::size_t element_bytes,
                           Machines machines)
    : sim_(std::make_unique<Simulation>(plan, topo, model, element_bytes)) {
  sim_->use_symmetry(machines == Machines::kFold);
  sim_->compile();
}
CompiledPlan::~CompiledPlan() = default;
CompiledPlan::CompiledPlan(CompiledPlan&&) noexcept = default;
CompiledPlan& CompiledPlan::operator=(CompiledPlan&&) noexcept = default;

bool CompiledPlan::scalable() const { return sim_->scalable(); }
int CompiledPlan::symmetry_order() const { return sim_->symmetry_order(); }

SimResult CompiledPlan::run(std::int64_t factor) {
  sim_->set_factor(factor);
  return sim_->run();
}

double CompiledPlan::lower_bound(std::int64_t factor) {
  sim_->set_factor(factor);
  return sim_->lower_bound();
}

std::string link_name(const Topology& topo, int link) {
  if (link < 0 || link >= static_cast<int>(topo.links().size())) return "-";
  const Link& l = topo.links()[link];
  return fmt::format("{}->{} ({})", topo.nodes()[l.src].id, topo.nodes()[l.dst].id, to_string(l.kind));
}

std::vector<CriticalRun> critical_runs(const Plan& plan, const SimResult& result) {
  std::vector<CriticalRun> runs;
  for (std::size_t i = 0; i < result.critical_path.size(); ++i) {
    const CriticalStep& step = result.critical_path[i];
    if (step.op < 0 || step.op >= static_cast<int>(plan.ops.size())) {
      throw InvalidInput(fmt::format("critical path step {} names op {}, which the plan ({} ops) lacks", i, step.op,
                                     plan.ops.size()));
    }
    const Op& op = plan.ops[static_cast<std::size_t>(step.op)];
    const bool moves = op.kind == OpKind::kCopy || op.kind == OpKind::kReduce;
    const int src = moves ? op.src.device : -1;
    const int dst = op.kind == OpKind::kGroup ? -1 : op.dst.device;
    if (!runs.empty()) {
      CriticalRun& last = runs.back();
      if (last.kind == op.kind && last.src_device == src && last.dst_device == dst &&
          last.limiting_link == step.limiting_link) {
        ++last.ops;
        last.end_us = step.end_us;
        continue;
      }
    }
    runs.push_back({static_cast<int>(i), 1, step.start_us, step.end_us, op.kind, src, dst, step.limiting_link});
  }
  return runs;
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

namespace {

nlohmann::json link_json(const Topology& topo, int l) {
  if (l < 0) return nullptr;
  const Link& link = topo.links()[l];
  return {{"index", l},
          {"src", topo.nodes()[link.src].id},
          {"dst", topo.nodes()[link.dst].id},
          {"kind", std::string(to_string(link.kind))},
          {"name", link_name(topo, l)}};
}

}  // namespace

nlohmann::json link_usage_to_json(const LinkUsage& u, const Topology& topo) {
  nlohmann::json j = link_json(topo, u.link);
  j["bandwidth_gbps"] = topo.links()[u.link].bandwidth_gbps;
  j["bytes"] = u.bytes;
  j["busy_us"] = u.busy_us;
  j["saturated_us"] = u.saturated_us;
  j["first_busy_us"] = u.first_busy_us;
  j["last_busy_us"] = u.last_busy_us;
  j["utilisation"] = u.utilisation;
  return j;
}

nlohmann::json sim_result_to_json(const SimResult& result, const Topology& topo) {
  nlohmann::json doc;
  doc["time_us"] = result.time_us;
  doc["bytes"] = result.bytes;
  doc["ranks"] = result.ranks;
  doc["algbw_gbps"] = result.algbw_gbps;
  doc["busbw_gbps"] = result.busbw_gbps;
  doc["bottleneck"] = link_json(topo, result.bottleneck_link);
  nlohmann::json links = nlohmann::json::array();
  for (const LinkUsage& u : result.links) links.push_back(link_usage_to_json(u, topo));
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
