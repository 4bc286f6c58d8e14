#include "artune/simulator/closed_form.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "artune/core/error.hpp"
#include "artune/simulator/nccl_model.hpp"

namespace artune {

namespace {

constexpr double kBytesPerUsPerGbps = 1e3;

// The least latency NCCL's model charges collective `coll` over every GPU of `topo` (of the algorithm ×
// protocol pairs it offers there, or the ones the token forces), shifted as the simulator shifts it by a
// calibration's link-kind α; 0 where the model does not apply (machines of different GPU counts).
double library_latency_us(const Topology& topo, const AlgToken& token, const CostModel& model, Collective coll) {
  nccl::Graph g;
  try {
    g = nccl::search(topo, topo.gpus());
  } catch (const Error&) {
    return 0.0;
  }
  const nccl::CostTable table = nccl::cost_table(g, coll);
  const nccl::Forced forced = nccl::parse_variant(token.variant, "closed form");
  const CostModel defaults = CostModel::defaults(model.profile);
  auto shift = [&](LinkKind kind) { return model.link_for(kind).alpha_us - defaults.link_for(kind).alpha_us; };
  const nccl::HopAdjust adjust{shift(g.nvlink_intra ? LinkKind::kNvLink : LinkKind::kPcie), shift(LinkKind::kNetwork)};
  double best = std::numeric_limits<double>::infinity();
  for (int a = 0; a < nccl::kAlgos; ++a) {
    for (int p = 0; p < nccl::kProtos; ++p) {
      if (table.bandwidth[a][p] <= 0) continue;
      if (forced.algo && static_cast<int>(*forced.algo) != a) continue;
      if (forced.proto && static_cast<int>(*forced.proto) != p) continue;
      const auto algo = static_cast<nccl::Algo>(a);
      best = std::min(best, nccl::collective_latency_us(g, coll, algo, static_cast<nccl::Proto>(p), adjust));
    }
  }
  return std::isfinite(best) ? std::max(best, 0.0) : 0.0;
}

}  // namespace

AlphaBetaGamma implied_alpha_beta_gamma(const Topology& topo, const CostModel& model, int src, int dst) {
  const Route& route = topo.route(src, dst);
  AlphaBetaGamma c;
  c.alpha_us = model.op_overhead_us + route.latency_us;
  bool seen[8] = {};
  double min_bw = std::numeric_limits<double>::infinity();
  for (const int l : route.links) {
    const Link& link = topo.links()[l];
    const LinkClassCost cost = model.link_for(link.kind);
    const auto k = static_cast<std::size_t>(link.kind);
    if (k < 8 && !seen[k]) {
      seen[k] = true;
      c.alpha_us += cost.alpha_us;
    }
    min_bw = std::min(min_bw, link.bandwidth_gbps * cost.efficiency);
  }
  if (model.transfer_cap_gbps > 0) min_bw = std::min(min_bw, model.transfer_cap_gbps);
  c.beta_us_per_byte = std::isfinite(min_bw) ? 1.0 / (min_bw * kBytesPerUsPerGbps) : 0.0;
  c.gamma_us_per_byte = 1.0 / (model.reduce_for(topo.nodes()[dst]) * kBytesPerUsPerGbps);
  return c;
}

ClosedFormInput closed_form_input(const Topology& topo, const AlgToken& token, double bytes, const CostModel& model,
                                  Collective collective) {
  const std::vector<int> gpus = topo.gpus();
  if (gpus.empty()) throw InvalidInput(fmt::format("closed form: topology '{}' has no GPUs", topo.name()));
  ClosedFormInput in{.topo = topo, .token = token};
  in.ranks = static_cast<int>(gpus.size());
  in.machines = topo.machine_count();
  in.bytes = bytes;
  // The fastest pair of each kind (smallest α + β·bytes), so that the formulas stay lower bounds.
  auto best = [&](auto&& wanted) {
    AlphaBetaGamma out;
    double cost = std::numeric_limits<double>::infinity();
    for (const int a : gpus) {
      for (const int b : gpus) {
        if (a == b || !wanted(a, b)) continue;
        const AlphaBetaGamma c = implied_alpha_beta_gamma(topo, model, a, b);
        const double t = c.alpha_us + bytes * c.beta_us_per_byte;
        if (t < cost) cost = t, out = c;
      }
      break;  // GPU 0 stands for every GPU (its machine is the one the families look at)
    }
    return out;
  };
  const int m0 = topo.nodes()[gpus.front()].machine;
  in.link = best([&](int, int b) { return topo.nodes()[b].machine == m0; });
  in.network = in.machines > 1 ? best([&](int, int b) { return topo.nodes()[b].machine != m0; }) : in.link;
  if (in.ranks == 1) in.network = in.link;
  const auto cpus = topo.nodes_of_kind(NodeKind::kCpu, m0);
  if (!cpus.empty()) in.host = implied_alpha_beta_gamma(topo, model, gpus.front(), cpus.front());
  in.group_launch_us = model.group_base_latency_us;
  double step_latency = 0;
  if (in.ranks > 1) {
    const Route& r = topo.route(gpus[0], gpus[1]);
    step_latency = r.latency_us;
    bool seen[8] = {};
    for (const int l : r.links) {
      const auto k = static_cast<std::size_t>(topo.links()[l].kind);
      if (k < 8 && !seen[k]) {
        seen[k] = true;
        step_latency += model.link_for(topo.links()[l].kind).alpha_us;
      }
    }
  }
  in.group_step_us = model.group_hop_latency_us + step_latency;
  in.library_as_ring = model.profile != BackendProfile::kNccl && model.profile != BackendProfile::kCuda;
  if (!in.library_as_ring && in.ranks > 1) in.library_latency_us = library_latency_us(topo, token, model, collective);
  double ingress = 0;
  for (const Link& l : topo.links()) {
    if (l.dst == gpus.front()) ingress += l.bandwidth_gbps * model.link_for(l.kind).efficiency;
  }
  in.ingress_us_per_byte = ingress > 0 ? 1.0 / (ingress * kBytesPerUsPerGbps) : 0.0;
  return in;
}

ClosedForm closed_form_time(const Topology& topo, const AlgToken& token, double bytes, const CostModel& model,
                            Collective collective) {
  const Family& f = family_of(token, collective);
  return f.closed_form(closed_form_input(topo, token, bytes, model, collective));
}

}  // namespace artune
