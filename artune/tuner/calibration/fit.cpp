// Calibration's fits: the host's cache cliff and the refinement of the model against whole-plan runs.
#include <fmt/format.h>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "artune/core/error.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/calibration/detail.hpp"

namespace artune {

using namespace calibration_detail;

void fit_cache_cliff(const std::vector<double>& working_set_bytes, const std::vector<double>& gbps, HostFit& fit) {
  if (working_set_bytes.size() != gbps.size()) throw InvalidInput("calibrate: cache probe: one rate per working set");
  std::vector<std::pair<double, double>> points;  // (working set, rate), increasing working sets
  for (std::size_t i = 0; i < gbps.size(); ++i) {
    if (gbps[i] > 0 && std::isfinite(gbps[i]) && working_set_bytes[i] > 0)
      points.emplace_back(working_set_bytes[i], gbps[i]);
  }
  std::sort(points.begin(), points.end());
  fit.cache_bytes = 0;
  fit.cache_gbps = fit.dram_gbps = 0;
  if (points.empty()) return;
  // For a cache size c: minimise Σ (g·(h/cache + (1−h)/dram) − 1)² over a = 1/cache, b = 1/dram ≥ 0.
  struct Level {
    double sse = INFINITY, a = 0, b = 0;
  };
  auto solve = [&](double c) {
    double uu = 0, uv = 0, vv = 0, u1 = 0, v1 = 0;
    for (const auto& [w, g] : points) {
      const double h = w <= c ? 1.0 : c / w;
      const double u = g * h, v = g * (1 - h);
      uu += u * u;
      uv += u * v;
      vv += v * v;
      u1 += u;
      v1 += v;
    }
    Level best;
    auto consider = [&](double a, double b) {
      if (a < 0 || b < 0) return;
      double sse = 0;
      for (const auto& [w, g] : points) {
        const double h = w <= c ? 1.0 : c / w;
        const double e = g * (h * a + (1 - h) * b) - 1;
        sse += e * e;
      }
      if (sse < best.sse) best = {sse, a, b};
    };
    const double det = uu * vv - uv * uv;
    if (det > 1e-12 * uu * vv) consider((u1 * vv - v1 * uv) / det, (v1 * uu - u1 * uv) / det);
    if (uu > 0) consider(u1 / uu, 0);
    if (vv > 0) consider(0, v1 / vv);
    return best;
  };
  const Level flat = solve(0);  // no cache: one rate
  fit.dram_gbps = fit.cache_gbps = flat.b > 0 ? 1 / flat.b : 0;
  Level best;
  double best_c = 0;
  // Cache sizes from a quarter of the smallest working set to the second largest (the largest must miss).
  const double top = points.size() >= 2 ? points[points.size() - 2].first : 0;
  for (int k = 0;; ++k) {
    const double c = points.front().first / 4 * std::exp2(k / 8.0);
    if (c > top) break;
    const Level l = solve(c);
    if (l.sse < best.sse) {
      best = l;
      best_c = c;
    }
  }
  if (!(best.a > 0) || !(best.b > 0)) return;
  const double cache = 1 / best.a, dram = 1 / best.b;
  if (!(cache >= 1.25 * dram)) return;
  fit.cache_bytes = best_c;
  fit.cache_gbps = cache;
  fit.dram_gbps = dram;
}

namespace {

/// One refinable model parameter, fitted as log(value + offset).
struct Param {
  std::string name;
  std::function<double(const CostModel&)> get;
  std::function<void(CostModel&, double)> set;
  double offset = 0;  ///< keeps zero-able parameters (overheads) in the log domain
  double max = 1e12;  ///< upper bound (efficiencies ≤ 1)
};

std::vector<Param> refine_params(const CostModel& start, BackendKind backend, const Topology& topo,
                                 const std::vector<TrainingRun>& runs) {
  std::vector<Param> p;
  p.push_back({"op_overhead_us", [](const CostModel& m) { return m.op_overhead_us; },
               [](CostModel& m, double v) { m.op_overhead_us = v; }, 0.05});
  auto both = [](std::map<NodeKind, double> CostModel::*field) {
    return [field](CostModel& m, double v) {
      (m.*field)[NodeKind::kGpu] = v;
      (m.*field)[NodeKind::kCpu] = v;
    };
  };
  if (host_backend(backend)) {
    p.push_back({"transfer_cap_gbps", [](const CostModel& m) { return m.transfer_cap_gbps; },
                 [](CostModel& m, double v) { m.transfer_cap_gbps = v; }, 0});
    p.push_back({"reduce_gbps", [](const CostModel& m) { return m.reduce_for(NodeKind::kGpu); },
                 both(&CostModel::reduce_gbps), 0});
    p.push_back({"memory_gbps", [](const CostModel& m) { return m.memory_for(NodeKind::kGpu); },
                 both(&CostModel::memory_gbps), 0});
    if (start.host.shares_resources()) {
      p.push_back({"host.run_overhead_us", [](const CostModel& m) { return m.host.run_overhead_us; },
                   [](CostModel& m, double v) { m.host.run_overhead_us = v; }, 0.05});
      if (start.host.cache_gbps > 0) {
        p.push_back({"host.cache_gbps", [](const CostModel& m) { return m.host.cache_gbps; },
                     [](CostModel& m, double v) { m.host.cache_gbps = v; }, 0});
      }
      if (start.host.dram_gbps > 0) {
        p.push_back({"host.dram_gbps", [](const CostModel& m) { return m.host.dram_gbps; },
                     [](CostModel& m, double v) { m.host.dram_gbps = v; }, 0});
      }
    }
  } else {
    p.push_back({"reduce_gbps", [](const CostModel& m) { return m.reduce_for(NodeKind::kGpu); },
                 [](CostModel& m, double v) { m.reduce_gbps[NodeKind::kGpu] = v; }, 0});
    std::set<LinkKind> kinds;
    for (const auto& run : runs) {
      for (const auto& op : run.plan.ops) {
        if (!is_transfer(op)) continue;
        const int a = run.plan.devices[static_cast<std::size_t>(op.src.device)].node;
        const int b = run.plan.devices[static_cast<std::size_t>(op.dst.device)].node;
        for (int l : topo.route(a, b).links) kinds.insert(topo.links()[static_cast<std::size_t>(l)].kind);
      }
    }
    for (LinkKind k : kinds) {
      p.push_back({fmt::format("links.{}.efficiency", to_string(k)),
                   [k](const CostModel& m) { return m.link_for(k).efficiency; },
                   [k](CostModel& m, double v) { m.link[k].efficiency = v; }, 0, 1.0});
    }
  }
  (void)start;
  return p;
}

/// The kinds of link an NCCL group op's channels cross: NVLink or PCIe inside a machine (what NCCL's rings
/// use there), the network when the group spans machines.
std::set<LinkKind> nccl_link_kinds(const Topology& topo, const std::vector<TrainingRun>& runs) {
  std::set<LinkKind> kinds;
  for (const auto& run : runs) {
    for (const auto& op : run.plan.ops) {
      if (op.kind != OpKind::kGroup || !nccl::modelled(op.collective)) continue;
      std::vector<int> members;
      for (const int d : op.group) members.push_back(run.plan.devices[static_cast<std::size_t>(d)].node);
      if (members.size() < 2) continue;
      const nccl::Graph g = nccl::search(topo, members);
      kinds.insert(g.nvlink_intra ? LinkKind::kNvLink : LinkKind::kPcie);
      if (g.machines > 1) kinds.insert(LinkKind::kNetwork);
    }
  }
  return kinds;
}

RefineResult least_squares(const Topology& topo, const CostModel& start, const std::vector<TrainingRun>& runs,
                           const std::vector<Param>& params, std::size_t element_bytes);

}  // namespace

RefineResult fit_nccl(const Topology& topo, const CostModel& start, const std::vector<TrainingRun>& runs,
                      std::size_t element_bytes) {
  if (runs.empty()) throw InvalidInput("calibrate: nccl fit: no NCCL all-reduce runs to fit");
  const std::set<LinkKind> kinds = nccl_link_kinds(topo, runs);
  if (kinds.empty()) throw InvalidInput("calibrate: nccl fit: the runs hold no NCCL all-reduce over 2 or more GPUs");
  std::vector<Param> params;
  for (const LinkKind k : kinds) {
    // Efficiency: the share of NCCL's per-lane (per-link) rate the channels reach; α: the per-step latency
    // of that class, beyond the profile's default a shift of NCCL's (simulator: HopAdjust).
    params.push_back({fmt::format("links.{}.efficiency", to_string(k)),
                      [k](const CostModel& m) { return m.link_for(k).efficiency; },
                      [k](CostModel& m, double v) { m.link[k].efficiency = v; }, 0, 1.0});
    params.push_back({fmt::format("links.{}.alpha_us", to_string(k)),
                      [k](const CostModel& m) { return m.link_for(k).alpha_us; },
                      [k](CostModel& m, double v) { m.link[k].alpha_us = v; }, 0.05});
  }
  return least_squares(topo, start, runs, params, element_bytes);
}

std::string nccl_intra_class(const Topology& topo, const std::vector<int>& gpus) {
  if (gpus.size() < 2) return "nvlink";
  return nccl::search(topo, gpus).nvlink_intra ? "nvlink" : "pcie";
}

std::string nccl_intra_class(const Topology& topo, const Plan& plan) {
  for (const auto& op : plan.ops) {
    if (op.kind != OpKind::kGroup) continue;
    std::vector<int> members;
    for (const int d : op.group) members.push_back(plan.devices[static_cast<std::size_t>(d)].node);
    return nccl_intra_class(topo, members);
  }
  return "nvlink";
}

RefineResult refine_model(const Topology& topo, const CostModel& start, const std::vector<TrainingRun>& runs,
                          BackendKind backend, std::size_t element_bytes) {
  if (runs.empty()) throw InvalidInput("refine: no whole-plan runs to fit");
  return least_squares(topo, start, runs, refine_params(start, backend, topo, runs), element_bytes);
}

namespace {

RefineResult least_squares(const Topology& topo, const CostModel& start, const std::vector<TrainingRun>& runs,
                           const std::vector<Param>& params, std::size_t element_bytes) {
  const auto np = static_cast<Eigen::Index>(params.size());
  const auto nr = static_cast<Eigen::Index>(runs.size());
  // Each parameter stays within a factor 100 of where the microbenchmarks put it: a rate the runs cannot
  // identify (e.g. a reduce rate hidden behind the copy rate) must not run off to infinity.
  Eigen::VectorXd lo(np), hi(np);
  for (Eigen::Index k = 0; k < np; ++k) {
    const auto& p = params[static_cast<std::size_t>(k)];
    const double v = std::max(p.get(start), 1e-9) + p.offset;
    lo(k) = std::log(v / 100);
    // An overhead the microbenchmarks put near 0 (a noisy slope) may still be tens of µs.
    const double up = p.offset > 0 ? std::max(v * 100, kMinOverheadCeilingUs + p.offset) : v * 100;
    hi(k) = std::log(std::min(up, p.max + p.offset));
  }
  auto clamp_theta = [&](Eigen::VectorXd t) {
    for (Eigen::Index k = 0; k < np; ++k) t(k) = std::clamp(t(k), lo(k), std::max(lo(k), hi(k)));
    return t;
  };
  auto model_at = [&](const Eigen::VectorXd& theta) {
    CostModel m = start;
    for (Eigen::Index k = 0; k < np; ++k) {
      const auto& p = params[static_cast<std::size_t>(k)];
      p.set(m, std::clamp(std::exp(theta(k)) - p.offset, 0.0, p.max));
    }
    return m;
  };
  auto residuals = [&](const Eigen::VectorXd& theta) {
    const CostModel m = model_at(theta);
    Eigen::VectorXd r(nr);
    for (Eigen::Index i = 0; i < nr; ++i) {
      const auto& run = runs[static_cast<std::size_t>(i)];
      r(i) = (simulate(run.plan, topo, m, element_bytes).time_us - run.measured_us) / run.measured_us;
    }
    return r;
  };
  Eigen::VectorXd theta(np);
  for (Eigen::Index k = 0; k < np; ++k) {
    const auto& p = params[static_cast<std::size_t>(k)];
    theta(k) = std::log(std::max(p.get(start), 1e-9) + p.offset);
  }
  RefineResult out;
  Eigen::VectorXd r = residuals(theta);
  double cost = r.squaredNorm();
  out.rms_rel_before = std::sqrt(cost / static_cast<double>(nr));
  double lambda = 1e-2;
  constexpr double kStep = 1e-3;
  for (int it = 0; it < 50; ++it) {
    Eigen::MatrixXd jac(nr, np);
    for (Eigen::Index k = 0; k < np; ++k) {
      Eigen::VectorXd t = theta;
      // Step inwards at an upper bound so the difference still sees the parameter move.
      const double h = t(k) + kStep > hi(k) ? -kStep : kStep;
      t(k) += h;
      jac.col(k) = (residuals(t) - r) / h;
    }
    const Eigen::MatrixXd a = jac.transpose() * jac;
    const Eigen::VectorXd g = jac.transpose() * r;
    bool accepted = false;
    while (lambda < 1e10) {
      Eigen::MatrixXd damped = a;
      for (Eigen::Index k = 0; k < np; ++k) damped(k, k) += lambda * std::max(a(k, k), 1e-12);
      Eigen::VectorXd delta = damped.ldlt().solve(-g);
      for (Eigen::Index k = 0; k < np; ++k) delta(k) = std::clamp(delta(k), -1.0, 1.0);  // at most ×e per step
      const Eigen::VectorXd trial = clamp_theta(theta + delta);
      const Eigen::VectorXd rt = residuals(trial);
      const double c = rt.squaredNorm();
      if (c < cost) {
        const double gain = (cost - c) / std::max(cost, 1e-300);
        theta = trial;
        r = rt;
        cost = c;
        lambda = std::max(lambda / 3, 1e-7);
        accepted = gain > 1e-7;
        break;
      }
      lambda *= 4;
    }
    out.iterations = it + 1;
    if (!accepted) break;
  }
  out.model = model_at(theta);
  out.rms_rel_after = std::sqrt(cost / static_cast<double>(nr));
  for (const auto& p : params)
    out.parameters.push_back(fmt::format("{}: {:.4g} -> {:.4g}", p.name, p.get(start), p.get(out.model)));
  return out;
}

}  // namespace

}  // namespace artune
