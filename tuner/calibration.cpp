#include "tuner/calibration.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/sizes.hpp"
#include "executor/runner.hpp"
#include "simulator/simulator.hpp"
#include "tuner/candidates.hpp"

namespace artune {

namespace {

std::vector<std::uint64_t> default_sizes() {
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = 4096; s <= (16u << 20); s *= 4) out.push_back(s);
  return out;
}

PlanDevice device_of(const Topology& topo, int node, bool participant = true) {
  PlanDevice d;
  d.node = node;
  d.name = topo.nodes().at(static_cast<std::size_t>(node)).id;
  d.participant = participant;
  return d;
}

/// Times a plan with the runner of `artune run` (median of the timed runs, slowest process each), unchecked.
double median_time_us(Backend& backend, const Plan& plan, DataType type, int warmup, int iterations) {
  SweepConfig config;
  config.type = type;
  config.iterations = std::max(1, iterations);
  config.warmup = warmup;
  config.check = 0;  // microbenchmark plans are not all-reduces
  return run_plan(backend, plan, config).time_us;
}

std::vector<LinkKind> route_kinds(const Topology& topo, const Route& route) {
  std::set<LinkKind> kinds;
  for (int l : route.links) kinds.insert(topo.links().at(static_cast<std::size_t>(l)).kind);
  return {kinds.begin(), kinds.end()};
}

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

std::string kinds_text(const std::vector<LinkKind>& kinds) {
  std::vector<std::string> names;
  for (auto k : kinds) names.emplace_back(to_string(k));
  return fmt::format("{}", fmt::join(names, "+"));
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

// The host memory probe: working sets kHostProbeMinBytes · 2^(k/2), k < kHostProbePoints (4 MiB … 256 MiB).
constexpr double kHostProbeMinBytes = 4.0 * (1 << 20);
constexpr int kHostProbePoints = 13;

constexpr double kMiB = 1024.0 * 1024.0;

// Refinement lets an overhead (µs) reach at least this, however small its start value.
constexpr double kMinOverheadCeilingUs = 100.0;

bool host_backend(BackendKind kind) { return kind == BackendKind::kCpu || kind == BackendKind::kMpi; }

double mape(const std::vector<ValidationRow>& rows, std::uint64_t min_bytes, bool defaults) {
  double sum = 0;
  int n = 0;
  for (const auto& r : rows) {
    if (r.bytes < min_bytes || !(r.measured_us > 0)) continue;
    const double p = defaults ? r.default_us : r.predicted_us;
    sum += std::abs(p - r.measured_us) / r.measured_us;
    ++n;
  }
  return n ? sum / n : 0.0;
}

}  // namespace

BackendProfile profile_for(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu: return BackendProfile::kCpu;
    case BackendKind::kMpi: return BackendProfile::kMpi;
    case BackendKind::kCuda: return BackendProfile::kCuda;
    case BackendKind::kNccl: return BackendProfile::kNccl;
  }
  return BackendProfile::kCpu;
}

void fit_cache_cliff(const std::vector<double>& working_set_bytes, const std::vector<double>& gbps, HostFit& fit) {
  if (working_set_bytes.size() != gbps.size()) throw InvalidInput("calibrate: cache probe: one rate per working set");
  std::vector<std::pair<double, double>> points;  // (working set, rate), increasing working sets
  for (std::size_t i = 0; i < gbps.size(); ++i) {
    if (gbps[i] > 0 && std::isfinite(gbps[i]) && working_set_bytes[i] > 0) points.emplace_back(working_set_bytes[i], gbps[i]);
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
int scratch_of(const Plan& plan, int device) { return plan.devices[static_cast<std::size_t>(device)].participant ? 1 : 0; }

}  // namespace

Plan copy_plan(const Topology& topo, const std::vector<int>& participants, int src, int dst, std::int64_t count) {
  Plan plan = participants_plan(topo, participants, count, "calibrate:copy");
  const int s = plan_device(plan, topo, src, count);
  const int d = plan_device(plan, topo, dst, count);
  if (!plan.devices[static_cast<std::size_t>(s)].participant) {
    throw InvalidInput(fmt::format("calibrate: copy source '{}' is not a participant", plan.devices[static_cast<std::size_t>(s)].name));
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

nlohmann::json make_overlay(const CalibrationResult& fits, BackendKind backend, DataType type) {
  nlohmann::json overlay;
  overlay["profile"] = std::string(to_string(profile_for(backend)));
  overlay["op_overhead_us"] = fits.op_overhead_us;
  double local_copy = fits.local_copy.fit.gbps;
  double reduce = 0;
  for (const auto& r : fits.reduce) {
    if (r.type == type) reduce = r.fit.gbps;
  }
  nlohmann::json links = nlohmann::json::object();
  if (host_backend(backend) && fits.host) {
    // One thread's rates, and the host they share: cores and memory bandwidth by working set.
    const HostFit& h = *fits.host;
    overlay["transfer_cap_gbps"] = h.thread_copy_gbps;
    local_copy = h.thread_copy_gbps;
    reduce = h.thread_reduce_gbps;
    overlay["host"] = {{"run_overhead_us", h.run_overhead_us}, {"cores", h.cores},
                       {"cache_bytes", h.cache_bytes},     {"cache_gbps", h.cache_gbps},
                       {"dram_gbps", h.dram_gbps}};
    for (const LinkKind k : {LinkKind::kNvLink, LinkKind::kPcie, LinkKind::kSmp, LinkKind::kLoopback}) {
      links[std::string(to_string(k))] = {{"alpha_us", 0.0}, {"efficiency", 1.0}};
    }
  } else if (host_backend(backend)) {
    // Host memory: every transfer is one thread's memcpy while the others copy too; no link is the limit.
    const double cap = fits.concurrent.fit.gbps;
    overlay["transfer_cap_gbps"] = cap;
    // The simulator charges a reducing transfer bytes/cap and then bytes/reduce; the backend reads and adds
    // in one pass. Pick the reduce rate that makes the sum match the measured reducing ring step.
    const double rr = fits.concurrent_reduce.fit.gbps;
    if (rr > 0 && cap > 0) reduce = rr < cap * 0.99 ? 1.0 / (1.0 / rr - 1.0 / cap) : 100.0 * cap;
    for (const LinkKind k : {LinkKind::kNvLink, LinkKind::kPcie, LinkKind::kSmp, LinkKind::kLoopback}) {
      links[std::string(to_string(k))] = {{"alpha_us", 0.0}, {"efficiency", 1.0}};
    }
  } else {
    overlay["transfer_cap_gbps"] = 0.0;
    // Efficiency per bottleneck link kind: the mean of fitted / nominal over its classes, at most 1.
    std::map<LinkKind, std::pair<double, int>> eff;
    for (const auto& c : fits.copies) {
      if (!(c.nominal_gbps > 0) || std::isinf(c.nominal_gbps)) continue;
      auto& e = eff[c.bottleneck_kind];
      e.first += std::min(1.0, c.fit.gbps / c.nominal_gbps);
      e.second += 1;
    }
    // α per link kind: least squares over classes of (fitted α − overhead − route latency) = Σ α_kind.
    std::vector<LinkKind> kinds;
    for (const auto& c : fits.copies) {
      for (auto k : c.kinds) {
        if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
      }
    }
    std::map<LinkKind, double> alpha;
    if (!kinds.empty()) {
      // Non-negative least squares by active set: solve, drop kinds that come out negative, repeat.
      std::vector<LinkKind> active = kinds;
      while (!active.empty()) {
        Eigen::MatrixXd a(static_cast<Eigen::Index>(fits.copies.size()), static_cast<Eigen::Index>(active.size()));
        Eigen::VectorXd v(static_cast<Eigen::Index>(fits.copies.size()));
        for (std::size_t i = 0; i < fits.copies.size(); ++i) {
          const auto& ck = fits.copies[i].kinds;
          for (std::size_t j = 0; j < active.size(); ++j) {
            a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) =
                std::find(ck.begin(), ck.end(), active[j]) != ck.end() ? 1.0 : 0.0;
          }
          v(static_cast<Eigen::Index>(i)) = fits.link_alpha_us.at(i);
        }
        const Eigen::VectorXd x = a.colPivHouseholderQr().solve(v);
        std::vector<LinkKind> keep;
        for (std::size_t j = 0; j < active.size(); ++j) {
          if (x(static_cast<Eigen::Index>(j)) >= 0) keep.push_back(active[j]);
        }
        if (keep.size() == active.size()) {
          for (std::size_t j = 0; j < active.size(); ++j) alpha[active[j]] = x(static_cast<Eigen::Index>(j));
          break;
        }
        active = keep;
      }
    }
    for (const auto& [k, e] : eff) {
      links[std::string(to_string(k))] = {{"alpha_us", alpha.count(k) ? alpha[k] : 0.0},
                                          {"efficiency", std::clamp(e.first / e.second, 1e-3, 1.0)}};
    }
  }
  overlay["links"] = std::move(links);
  nlohmann::json dev = nlohmann::json::object();
  if (reduce > 0) dev["reduce_gbps"] = reduce;
  if (local_copy > 0) dev["memory_gbps"] = local_copy;
  overlay["devices"] = nlohmann::json::object();
  if (!dev.empty()) {
    overlay["devices"]["gpu"] = dev;
    // Host backends run CPU gather shards on the same kind of thread.
    if (host_backend(backend)) overlay["devices"]["cpu"] = dev;
  }
  return overlay;
}

namespace {

/// One refinable model parameter, fitted as log(value + offset).
struct Param {
  std::string name;
  std::function<double(const CostModel&)> get;
  std::function<void(CostModel&, double)> set;
  double offset = 0;   ///< keeps zero-able parameters (overheads) in the log domain
  double max = 1e12;   ///< upper bound (efficiencies ≤ 1)
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

}  // namespace

RefineResult refine_model(const Topology& topo, const CostModel& start, const std::vector<TrainingRun>& runs,
                          BackendKind backend, std::size_t element_bytes) {
  if (runs.empty()) throw InvalidInput("refine: no whole-plan runs to fit");
  const std::vector<Param> params = refine_params(start, backend, topo, runs);
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
  for (const auto& p : params) out.parameters.push_back(fmt::format("{}: {:.4g} -> {:.4g}", p.name, p.get(start), p.get(out.model)));
  return out;
}

CalibrationResult calibrate(const Topology& topo, const CalibrationOptions& options) {
  CalibrationResult result;
  result.topology = topo.name();
  result.backend = std::string(to_string(options.backend));
  const auto gpus = topo.gpus_of_machine(0);
  if (gpus.size() < 2) throw InvalidInput(fmt::format("calibrate: topology '{}' needs at least 2 GPUs on machine 0", topo.name()));
  BackendOptions bo;
  bo.timeout_s = options.timeout_s;
  bo.topology = &topo;
  std::unique_ptr<Backend> backend = make_backend(options.backend, bo);
  result.root = backend->is_root();
  const auto sizes = options.sizes.empty() ? default_sizes() : options.sizes;
  std::vector<DataType> reduce_types = options.reduce_types;
  if (reduce_types.empty()) {
    reduce_types = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt32};
  }
  if (std::find(reduce_types.begin(), reduce_types.end(), options.type) == reduce_types.end()) {
    reduce_types.insert(reduce_types.begin(), options.type);
  }
  const std::size_t esize = element_size(options.type);
  result.copies = pair_classes(topo);
  // Whole-plan runs: the first (basic) candidate of every family, at the training and validation sizes.
  // Chosen here so that the progress counts them: they are a large share of the work (a plan run per family
  // and size), and a bar that left them out sat near 100 % while they ran.
  CandidateOptions co;
  co.max_cycles = 1;
  co.segments = {1};
  co.max_subchunks = 1;
  std::vector<Candidate> picks;
  {
    const CandidateSet set = generate_candidates(topo, co);
    std::set<std::string> families;
    for (const auto& c : set.candidates) {
      if (families.insert(c.family).second) picks.push_back(c);
    }
  }
  std::vector<std::uint64_t> tsizes;
  if (options.refine) {
    tsizes = options.training_sizes;
    if (tsizes.empty()) {
      // Geometric midpoints of the validation sizes: the fit never sees a validated size.
      const auto v = options.validation_sizes.empty() ? default_sizes() : options.validation_sizes;
      for (std::size_t i = 0; i + 1 < v.size(); ++i) {
        const auto mid = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(v[i]) * static_cast<double>(v[i + 1])));
        if (mid / esize * esize > v[i]) tsizes.push_back(mid / esize * esize);
      }
    }
  }
  const auto vsizes = options.validate ? (options.validation_sizes.empty() ? default_sizes() : options.validation_sizes)
                                       : std::vector<std::uint64_t>{};
  const std::size_t micro_steps = sizes.size() * (result.copies.size() + 3 + reduce_types.size()) + 2 +
                                  (host_backend(options.backend) ? kHostProbePoints : 0);
  const std::size_t steps = micro_steps + picks.size() * (tsizes.size() + vsizes.size());
  std::size_t done = 0;
  auto progress = [&](const std::string& what) {
    if (options.progress) options.progress(done, steps, what);
    ++done;
  };
  auto count_of = [&](std::uint64_t bytes, std::size_t es) { return std::max<std::int64_t>(1, bytes / es); };

  // Single copies per class.
  for (auto& c : result.copies) {
    for (auto bytes : sizes) {
      progress(fmt::format("copy {} at {}", c.name, format_size(bytes)));
      const auto count = count_of(bytes, esize);
      c.samples.push_back({static_cast<double>(count * esize),
                           median_time_us(*backend, copy_plan(topo, gpus, c.src, c.dst, count), options.type, options.warmup,
                                          options.iterations)});
    }
    c.fit = fit_alpha_beta(c.samples);
  }
  // Concurrent ring step over machine 0's GPUs (how all-reduce plans load the machine).
  result.concurrent.name = fmt::format("ring step, {} concurrent copies", gpus.size());
  result.concurrent.src = gpus.front();
  result.concurrent.dst = gpus.size() > 1 ? gpus[1] : gpus.front();
  for (auto bytes : sizes) {
    progress(fmt::format("concurrent copies at {}", format_size(bytes)));
    const auto count = count_of(bytes, esize);
    result.concurrent.samples.push_back(
        {static_cast<double>(count * esize),
         median_time_us(*backend, ring_step_plan(topo, gpus, count), options.type, options.warmup, options.iterations)});
  }
  result.concurrent.fit = fit_alpha_beta(result.concurrent.samples);
  result.concurrent_reduce.name = fmt::format("ring step, {} concurrent reduces", gpus.size());
  result.concurrent_reduce.src = result.concurrent.src;
  result.concurrent_reduce.dst = result.concurrent.dst;
  for (auto bytes : sizes) {
    progress(fmt::format("concurrent reducing copies at {}", format_size(bytes)));
    const auto count = count_of(bytes, esize);
    result.concurrent_reduce.samples.push_back(
        {static_cast<double>(count * esize), median_time_us(*backend, ring_step_plan(topo, gpus, count, true),
                                                            options.type, options.warmup, options.iterations)});
  }
  result.concurrent_reduce.fit = fit_alpha_beta(result.concurrent_reduce.samples);
  // Local copies and reductions, every participant at once.
  result.local_copy.type = options.type;
  for (auto bytes : sizes) {
    progress(fmt::format("local copies at {}", format_size(bytes)));
    const auto count = count_of(bytes, esize);
    result.local_copy.samples.push_back(
        {static_cast<double>(count * esize),
         median_time_us(*backend, local_plan(topo, gpus, count, false), options.type, options.warmup, options.iterations)});
  }
  result.local_copy.fit = fit_alpha_beta(result.local_copy.samples);
  for (DataType t : reduce_types) {
    ReduceFit rf;
    rf.type = t;
    const std::size_t es = element_size(t);
    for (auto bytes : sizes) {
      progress(fmt::format("{} reductions at {}", to_string(t), format_size(bytes)));
      const auto count = count_of(bytes, es);
      rf.samples.push_back({static_cast<double>(count * es),
                            median_time_us(*backend, local_plan(topo, gpus, count, true), t, options.warmup,
                                           options.iterations)});
    }
    rf.fit = fit_alpha_beta(rf.samples);
    result.reduce.push_back(std::move(rf));
  }
  // Per-op cost: the slope of dependent one-element copies between the closest pair.
  {
    progress("per-op overhead");
    const int a = gpus[0], b = gpus[1];
    const int short_chain = 16, long_chain = 80;
    const double t_short = median_time_us(*backend, chain_plan(topo, gpus, a, b, short_chain), options.type, options.warmup,
                                          options.iterations);
    const double t_long = median_time_us(*backend, chain_plan(topo, gpus, a, b, long_chain), options.type, options.warmup,
                                         options.iterations);
    result.op_time_us = std::max(0.0, (t_long - t_short) / (long_chain - short_chain));
    const double latency = 0.5 * (topo.route(a, b).latency_us + topo.route(b, a).latency_us);
    result.op_overhead_us = std::max(0.0, result.op_time_us - latency);
    if (host_backend(options.backend)) {
      result.host.emplace();
      result.host->run_overhead_us = std::max(0.0, t_short - short_chain * result.op_time_us);
    }
  }
  if (result.host) {
    HostFit& h = *result.host;
    const int n = static_cast<int>(gpus.size());
    h.threads = n;
    h.cores = std::max(1u, std::thread::hardware_concurrency());
    // Working sets from 4 MiB to 256 MiB, ×√2: the last-level caches of today's hosts (per socket or per
    // core complex) lie inside. Measured rather than read: what the OS reports (sysconf, a VM's cpuid) is
    // the nominal size, not the share the threads get.
    std::vector<double> ws;
    for (int k = 0; k < kHostProbePoints; ++k) ws.push_back(kHostProbeMinBytes * std::pow(2.0, 0.5 * k));
    // The fixed part of a ring step (run, op, latency) from its α-β fit over the microbenchmark sizes.
    const double alpha = result.concurrent.fit.alpha_us;
    std::vector<double> probe_ws;
    for (const double w : ws) {
      // A ring step: every participant holds its buffer and a scratch of `count` elements.
      const auto count = std::max<std::int64_t>(1024, static_cast<std::int64_t>(w / (2.0 * n * esize)));
      const double working_set = 2.0 * n * static_cast<double>(count * esize);
      progress(fmt::format("host memory, working set {}", format_size(static_cast<std::uint64_t>(working_set))));
      const double t = median_time_us(*backend, ring_step_plan(topo, gpus, count), options.type, options.warmup,
                                      options.iterations);
      h.probe.push_back({working_set, t});
      const double moving = t - alpha;
      h.probe_gbps.push_back(moving > 0 ? n * static_cast<double>(count * esize) / (moving * 1e3) : 0.0);
      probe_ws.push_back(working_set);
    }
    fit_cache_cliff(probe_ws, h.probe_gbps, h);
    // One thread's memcpy: single copies whose working set (every participant's two buffers) stays in cache.
    auto in_cache = [&](const std::vector<TimingSample>& samples) {
      std::vector<TimingSample> out;
      for (const auto& x : samples) {
        if (h.cache_bytes <= 0 || 2.0 * n * x.bytes <= h.cache_bytes) out.push_back(x);
      }
      return out.size() >= 2 ? out : samples;
    };
    h.thread_copy_gbps = result.copies.empty() ? result.concurrent.fit.gbps : fit_alpha_beta(in_cache(result.copies.front().samples)).gbps;
    // One thread's reduce kernel: the reducing ring step in cache ran min(threads, cores) of them at a time.
    const double running = std::min<double>(n, h.cores);
    h.thread_reduce_gbps = fit_alpha_beta(in_cache(result.concurrent_reduce.samples)).gbps * n / running;
  }
  for (const auto& c : result.copies) {
    result.link_alpha_us.push_back(c.fit.alpha_us - result.op_overhead_us - c.route_latency_us);
  }
  result.overlay = make_overlay(result, options.backend, options.type);
  result.model = CostModel::defaults(profile_for(options.backend));
  result.model.apply_overlay(result.overlay, "calibration");

  result.micro_overlay = result.overlay;
  const CostModel micro = result.model;

  auto run_family = [&](const Candidate& cand, std::uint64_t bytes, const char* what) -> std::optional<std::pair<Plan, Measurement>> {
    if (options.progress) options.progress(done, steps, fmt::format("{} {} at {}", what, cand.label(), format_size(bytes)));
    ++done;
    const auto count = count_of(bytes, esize);
    Plan plan;
    try {
      plan = build_candidate(topo, cand, count, ReduceOp::kSum);
    } catch (const InvalidInput&) {
      return std::nullopt;
    }
    Measurement m = measure_plan(*backend, plan, options.type, ReduceOp::kSum, options.warmup, std::max(3, options.iterations));
    return std::make_pair(std::move(plan), m);
  };
  std::int64_t training_wrong = 0;
  // Training and validation runs of a family interleaved by size: a host whose speed drifts while calibrate
  // runs (other tenants, frequency) then shifts the runs the fit sees and the runs it is judged on alike.
  struct WholeRun {
    const Candidate* cand;
    std::uint64_t bytes;
    bool training;
    std::optional<std::pair<Plan, Measurement>> result;
  };
  std::vector<WholeRun> whole;
  done = std::max(done, micro_steps);  // the microbenchmarks are over, whatever they counted
  for (const auto& cand : picks) {
    std::vector<std::pair<std::uint64_t, bool>> order;
    for (auto bytes : tsizes) order.emplace_back(bytes, true);
    for (auto bytes : vsizes) order.emplace_back(bytes, false);
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [bytes, training] : order) {
      whole.push_back({&cand, bytes, training, run_family(cand, bytes, training ? "training" : "validating")});
    }
  }
  std::vector<TrainingRun> runs;
  for (auto& w : whole) {
    if (!w.training || !w.result) continue;
    training_wrong += w.result->second.wrong;
    if (w.result->second.figures.time_us > 0) {
      runs.push_back({std::move(w.result->first), w.cand->label(), w.result->second.figures.time_us});
    }
  }
  if (!runs.empty() && result.host) {
    // On a host the ring steps (every thread copying, or reducing, at once) pin down what one thread does
    // against what the threads do together, which the whole-plan runs alone leave loose.
    for (const auto& x : result.concurrent.samples) {
      runs.push_back({ring_step_plan(topo, gpus, count_of(static_cast<std::uint64_t>(x.bytes), esize)), "ring step", x.time_us});
    }
    for (const auto& x : result.concurrent_reduce.samples) {
      runs.push_back({ring_step_plan(topo, gpus, count_of(static_cast<std::uint64_t>(x.bytes), esize), true),
                      "reducing ring step", x.time_us});
    }
  }
  if (!runs.empty()) {
    result.refined = refine_model(topo, result.model, runs, options.backend, esize);
    result.model = result.refined->model;
    result.overlay = result.model.to_json();
  }

  if (options.validate) {
    const CostModel defaults = CostModel::defaults(profile_for(options.backend));
    for (const auto& w : whole) {
      if (w.training || !w.result) continue;
      const Plan& plan = w.result->first;
      ValidationRow row;
      row.label = w.cand->label();
      row.family = w.cand->family;
      row.bytes = static_cast<std::uint64_t>(plan.count) * esize;
      row.default_us = simulate(plan, topo, defaults, esize).time_us;
      row.micro_us = simulate(plan, topo, micro, esize).time_us;
      row.predicted_us = simulate(plan, topo, result.model, esize).time_us;
      row.measured_us = w.result->second.figures.time_us;
      row.wrong = w.result->second.wrong;
      row.error_pct = row.measured_us > 0 ? 100.0 * (row.predicted_us - row.measured_us) / row.measured_us : 0.0;
      result.validation.push_back(std::move(row));
    }
    result.mape_all = mape(result.validation, 0, false);
    result.mape_64k = mape(result.validation, 64 * 1024, false);
    result.mape_default_64k = mape(result.validation, 64 * 1024, true);
    double sum = 0;
    int n = 0;
    for (const auto& row : result.validation) {
      if (row.bytes < 64 * 1024 || !(row.measured_us > 0)) continue;
      sum += std::abs(row.micro_us - row.measured_us) / row.measured_us;
      ++n;
    }
    result.mape_micro_64k = n ? sum / n : 0.0;
  }
  result.training_wrong = training_wrong;
  if (options.progress) options.progress(steps, steps, "calibration done");
  return result;
}

std::string CalibrationResult::summary() const {
  std::ostringstream out;
  out << fmt::format("# calibration of the {} backend on {}\n", backend, topology);
  auto fit_lines = [&](const std::string& name, const std::vector<TimingSample>& samples, const AlphaBetaFit& fit,
                       const std::string& extra) {
    out << fmt::format("{}: alpha {:.2f} us, {:.2f} GB/s{}; rms residual {:.2f} us, max rel. error {:.1f}%\n", name,
                       fit.alpha_us, fit.gbps, extra, fit.rms_residual_us, 100 * fit.max_rel_error);
    out << "    size       measured(us)  fitted(us)  residual(us)\n";
    for (std::size_t i = 0; i < samples.size(); ++i) {
      out << fmt::format("    {:>9}  {:>12.2f}  {:>10.2f}  {:>+12.2f}\n", format_size(static_cast<std::uint64_t>(samples[i].bytes)),
                         samples[i].time_us, fit.predict_us(samples[i].bytes), fit.residual_us.at(i));
    }
  };
  out << "## copies, one at a time, per device-pair class (time = alpha + bytes / bandwidth)\n";
  for (const auto& c : copies) {
    fit_lines(c.name, c.samples, c.fit, fmt::format(" (nominal {:g} GB/s)", c.nominal_gbps));
  }
  out << "## concurrent copies\n";
  fit_lines(concurrent.name, concurrent.samples, concurrent.fit, "");
  fit_lines(concurrent_reduce.name, concurrent_reduce.samples, concurrent_reduce.fit, "");
  out << "## local copies (every device at once)\n";
  fit_lines("copy", local_copy.samples, local_copy.fit, "");
  out << "## local reductions per type (every device at once; bandwidth in bytes of src)\n";
  for (const auto& r : reduce) fit_lines(std::string(to_string(r.type)), r.samples, r.fit, "");
  out << fmt::format("## per-op cost: {:.2f} us per dependent op, overhead {:.2f} us after route latency\n", op_time_us,
                     op_overhead_us);
  if (host) {
    out << fmt::format("## host: run overhead {:.2f} us, {:g} cores; {} participants copying at once, by working set\n",
                       host->run_overhead_us, host->cores, host->threads);
    out << "    working set  measured(us)  aggregate(GB/s)\n";
    for (std::size_t i = 0; i < host->probe.size(); ++i) {
      out << fmt::format("    {:>7.1f} MiB  {:>12.2f}  {:>15.2f}\n", host->probe[i].bytes / kMiB, host->probe[i].time_us,
                         host->probe_gbps.at(i));
    }
    if (host->cache_bytes > 0) {
      out << fmt::format("cache {:.1f} MiB: {:.2f} GB/s while the working set fits, {:.2f} GB/s for the part beyond",
                         host->cache_bytes / kMiB, host->cache_gbps, host->dram_gbps);
    } else {
      out << fmt::format("no cache step: {:.2f} GB/s at every working set", host->dram_gbps);
    }
    out << fmt::format("; one thread (cache-resident): copy {:.2f} GB/s, reduce {:.2f} GB/s\n", host->thread_copy_gbps,
                       host->thread_reduce_gbps);
  }
  out << "## overlay from the microbenchmark fits\n" << micro_overlay.dump() << "\n";
  if (refined) {
    out << fmt::format("## refined against whole-plan runs{} (Levenberg-Marquardt, {} iterations): RMS relative error "
                       "{:.1f}% -> {:.1f}%\n",
                       host ? " and the ring steps" : "", refined->iterations, 100 * refined->rms_rel_before,
                       100 * refined->rms_rel_after);
    for (const auto& p : refined->parameters) out << "    " << p << "\n";
  }
  if (!validation.empty()) {
    out << "## validation: predicted (calibrated) vs measured, per family and size (sizes not used for fitting)\n";
    out << fmt::format("{:<24} {:>9} {:>12} {:>12} {:>12} {:>12} {:>8} {:>6}\n", "plan", "size", "default(us)",
                       "micro(us)", "predicted", "measured", "error", "#wrong");
    for (const auto& r : validation) {
      out << fmt::format("{:<24} {:>9} {:>12.1f} {:>12.1f} {:>12.1f} {:>12.1f} {:>+7.1f}% {:>6}\n", r.label,
                         format_size(r.bytes), r.default_us, r.micro_us, r.predicted_us, r.measured_us, r.error_pct,
                         r.wrong);
    }
    out << fmt::format("MAPE: {:.1f}% over all rows, {:.1f}% for sizes >= 64K (uncalibrated defaults: {:.1f}%, "
                       "microbenchmark fit alone: {:.1f}%)\n",
                       100 * mape_all, 100 * mape_64k, 100 * mape_default_64k, 100 * mape_micro_64k);
  }
  return out.str();
}

nlohmann::json CalibrationResult::to_json() const {
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : copies) {
    classes.push_back({{"class", c.name}, {"alpha_us", c.fit.alpha_us}, {"gbps", c.fit.gbps},
                       {"nominal_gbps", c.nominal_gbps}, {"rms_residual_us", c.fit.rms_residual_us}});
  }
  nlohmann::json reduces = nlohmann::json::array();
  for (const auto& r : reduce) {
    reduces.push_back({{"type", std::string(to_string(r.type))}, {"alpha_us", r.fit.alpha_us}, {"gbps", r.fit.gbps}});
  }
  std::vector<double> probe_ws, probe_us;
  if (host) {
    for (const auto& x : host->probe) {
      probe_ws.push_back(x.bytes);
      probe_us.push_back(x.time_us);
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : validation) {
    rows.push_back({{"plan", r.label}, {"family", r.family}, {"bytes", r.bytes}, {"default_us", r.default_us},
                    {"micro_us", r.micro_us},
                    {"predicted_us", r.predicted_us}, {"measured_us", r.measured_us}, {"error_pct", r.error_pct},
                    {"wrong", r.wrong}});
  }
  return {{"topology", topology},
          {"backend", backend},
          {"copies", classes},
          {"concurrent", {{"alpha_us", concurrent.fit.alpha_us}, {"gbps", concurrent.fit.gbps}}},
          {"concurrent_reduce", {{"alpha_us", concurrent_reduce.fit.alpha_us}, {"gbps", concurrent_reduce.fit.gbps}}},
          {"local_copy", {{"alpha_us", local_copy.fit.alpha_us}, {"gbps", local_copy.fit.gbps}}},
          {"reduce", reduces},
          {"op_time_us", op_time_us},
          {"op_overhead_us", op_overhead_us},
          {"host", host ? nlohmann::json{{"run_overhead_us", host->run_overhead_us},
                                         {"cores", host->cores},
                                         {"threads", host->threads},
                                         {"probe_working_set_bytes", probe_ws},
                                         {"probe_us", probe_us},
                                         {"probe_gbps", host->probe_gbps},
                                         {"cache_bytes", host->cache_bytes},
                                         {"cache_gbps", host->cache_gbps},
                                         {"dram_gbps", host->dram_gbps},
                                         {"thread_copy_gbps", host->thread_copy_gbps},
                                         {"thread_reduce_gbps", host->thread_reduce_gbps}}
                        : nlohmann::json()},
          {"overlay", overlay},
          {"micro_overlay", micro_overlay},
          {"refined", refined ? nlohmann::json{{"rms_rel_before", refined->rms_rel_before},
                                               {"rms_rel_after", refined->rms_rel_after},
                                               {"iterations", refined->iterations},
                                               {"parameters", refined->parameters}}
                              : nlohmann::json()},
          {"mape_micro_64k", mape_micro_64k},
          {"validation", rows},
          {"mape_all", mape_all},
          {"mape_64k", mape_64k},
          {"mape_default_64k", mape_default_64k},
          {"summary", summary()}};
}

}  // namespace artune
