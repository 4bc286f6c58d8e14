#pragma once
// Parameters of the cost model, with documented defaults, overridable from a
// JSON calibration overlay.

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "topology/topology.hpp"

namespace artune {

/// Per link kind: extra latency and the fraction of nominal bandwidth achieved.
struct LinkClassCost {
  double alpha_us = 0;        ///< added per transfer crossing this kind of link
  double efficiency = 1.0;    ///< achieved / nominal bandwidth, in (0, 1]
};

/// Executor profiles whose per-op overhead differs.
enum class BackendProfile { kCuda, kNccl, kCpu, kMpi };

/// Every constant the simulator uses.
struct CostModel {
  std::map<LinkKind, LinkClassCost> link;          ///< per link kind
  std::map<NodeKind, double> reduce_gbps;          ///< reduce throughput of a device kind (bytes of src per s ·1e-9)
  std::map<NodeKind, double> memory_gbps;          ///< local copy/scale throughput
  double op_overhead_us = 0;                       ///< per op issued by the executing backend
  double group_base_latency_us = 0;                ///< library collective launch latency
  double group_hop_latency_us = 0;                 ///< per ring step inside a library collective
  BackendProfile profile = BackendProfile::kNccl;

  /// Defaults for a backend profile (documented in cost_model.cpp with sources).
  static CostModel defaults(BackendProfile profile = BackendProfile::kNccl);
  /// Applies a calibration overlay (only the fields present are replaced); InvalidInput names `source`.
  void apply_overlay(const nlohmann::json& overlay, std::string_view source);
  /// The whole model as JSON (same schema as an overlay).
  nlohmann::json to_json() const;
};

/// Parses "cuda", "nccl", "cpu", "mpi"; InvalidInput naming `what`.
BackendProfile parse_backend_profile(std::string_view text, std::string_view what = "--backend");
/// Name of a profile.
std::string_view to_string(BackendProfile profile) noexcept;

}  // namespace artune
