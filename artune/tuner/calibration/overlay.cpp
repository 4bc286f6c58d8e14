// Calibration's overlay: the CostModel fields the microbenchmark fits give.
#include <fmt/format.h>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "artune/core/error.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/calibration/detail.hpp"

namespace artune {

using namespace calibration_detail;

BackendProfile profile_for(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu: return BackendProfile::kCpu;
    case BackendKind::kMpi: return BackendProfile::kMpi;
    case BackendKind::kCuda: return BackendProfile::kCuda;
    case BackendKind::kNccl: return BackendProfile::kNccl;
  }
  return BackendProfile::kCpu;
}

std::string profile_mismatch_warning(std::string_view what, std::string_view profile, BackendKind backend) {
  const std::string_view own = to_string(profile_for(backend));
  if (profile.empty() || profile == own) return "";
  const auto kind_of = [](std::string_view p) { return p == "nccl" || p == "cuda" ? "GPUs" : "host threads"; };
  return fmt::format(
      "{} was priced with the {} cost profile ({}), not the {} backend's ({}): its picks may not be "
      "the fastest here (tune for the {} profile, or measure on the {} backend)",
      what, profile, kind_of(profile), to_string(backend), kind_of(own), own, to_string(backend));
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
    overlay["host"] = {{"run_overhead_us", h.run_overhead_us},
                       {"cores", h.cores},
                       {"cache_bytes", h.cache_bytes},
                       {"cache_gbps", h.cache_gbps},
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

}  // namespace artune
