#pragma once
// Parameters of the cost model, with documented defaults, overridable from a
// JSON calibration overlay.
//
// How the simulator uses them (all times in µs, bandwidths in GB/s = 1e9 B/s):
//  - a transfer (copy/reduce between two devices) waits
//      op_overhead_us + route latency (sum of the topology's link latencies)
//      + Σ link[kind].alpha_us over the distinct link kinds its route crosses
//    and then moves its bytes as a flow over the route's directed links, each
//    of capacity bandwidth · link[kind].efficiency, shared max-min fairly with
//    concurrent flows (and never faster than transfer_cap_gbps when set);
//  - a reduce then spends bytes / reduce_gbps[kind of the destination device];
//  - a local copy or scale costs op_overhead_us + bytes / memory_gbps[kind],
//    a local reduce op_overhead_us + bytes / reduce_gbps[kind];
//  - a group op runs as the library's ring over the group's best ring order:
//    group_base_latency_us once, then per ring step group_hop_latency_us +
//    the step's route latency and link-kind α, plus the chunk's flow time.

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "topology/topology.hpp"

namespace artune {

/// Per link kind: extra latency and the fraction of nominal bandwidth achieved.
struct LinkClassCost {
  double alpha_us = 0;        ///< added once per transfer (or ring step) whose route crosses this kind of link
  double efficiency = 1.0;    ///< achieved / nominal bandwidth, in (0, 1]
  friend bool operator==(const LinkClassCost&, const LinkClassCost&) = default;
};

/// Executor profiles whose per-op overhead differs.
enum class BackendProfile { kCuda, kNccl, kCpu, kMpi };

/// Every constant the simulator uses.
struct CostModel {
  std::map<LinkKind, LinkClassCost> link;          ///< per link kind (every kind present in defaults())
  std::map<NodeKind, double> reduce_gbps;          ///< reduce throughput of a device kind (bytes of src per s ·1e-9)
  std::map<NodeKind, double> memory_gbps;          ///< local copy/scale throughput
  double op_overhead_us = 0;                       ///< per op issued by the executing backend
  double group_base_latency_us = 0;                ///< library collective launch latency
  double group_hop_latency_us = 0;                 ///< per ring step inside a library collective (NVLink hop)
  double transfer_cap_gbps = 0;                    ///< per-transfer rate limit (a host thread's memcpy); 0 = none
  BackendProfile profile = BackendProfile::kNccl;

  /// Defaults for a backend profile (documented in cost_model.cpp with sources).
  static CostModel defaults(BackendProfile profile = BackendProfile::kNccl);
  /// Applies a calibration overlay (only the fields present are replaced); InvalidInput names
  /// `source` and the JSON path ("calib.json: links.nvlink.efficiency: must be in (0, 1]").
  void apply_overlay(const nlohmann::json& overlay, std::string_view source);
  /// The whole model as JSON (same schema as an overlay):
  /// {"profile","op_overhead_us","group_base_latency_us","group_hop_latency_us","transfer_cap_gbps",
  ///  "links":{"nvlink":{"alpha_us","efficiency"},…},"devices":{"gpu":{"reduce_gbps","memory_gbps"},…}}.
  nlohmann::json to_json() const;
  /// Reduce throughput of a device kind; InvalidInput when the model has none for it.
  double reduce_for(NodeKind kind) const;
  /// Copy throughput of a device kind; InvalidInput when the model has none for it.
  double memory_for(NodeKind kind) const;
  /// The cost of a link kind (defaults to α 0, efficiency 1 for kinds the map lacks).
  LinkClassCost link_for(LinkKind kind) const;
  friend bool operator==(const CostModel&, const CostModel&) = default;
};

/// Parses "cuda", "nccl", "cpu", "mpi"; InvalidInput naming `what`.
BackendProfile parse_backend_profile(std::string_view text, std::string_view what = "--backend");
/// Name of a profile.
std::string_view to_string(BackendProfile profile) noexcept;

}  // namespace artune
