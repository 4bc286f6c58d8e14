#pragma once
// What a NIC port's fabric changes in a collective: the latency the fabric's NCCL net plugin reports to NCCL
// (NCCL adds it to every network step of its cost table, twice for Simple), the extra time each step across the
// network takes, the share of the port's line rate large transfers reach, and the protocols NCCL may run across
// the network.
//
// The defaults per kind (net_kind.cpp cites each source):
//
//   kind    reported latency   extra µs per network step (LL, LL128, Simple)   efficiency     protocols
//   ib      0 (IB transport)   0, 0, 0                                          cost model's   LL, LL128, Simple
//   roce    0 (IB transport)   0, 0, 0                                          cost model's   LL, LL128, Simple
//   efa     75 (aws-ofi-nccl)  75, 75, 150 (NCCL's own charge)                  cost model's   Simple
//   socket  0 (socket transp.) 0, 0, 0                                          cost model's   LL, LL128, Simple
//
// A topology states a port's kind and may override any figure for that port (topology JSON `devices[].fabric`,
// or `network.fabric` for every NIC of a cluster that states none: configs/README.md, Network kinds); a port that
// states nothing is InfiniBand.

#include <string_view>
#include <vector>

#include "artune/topology/topology.hpp"

namespace artune {

/// A port's figures, every one resolved (the kind's default where the topology gives none).
struct NetFigures {
  NetKind kind = NetKind::kInfiniBand;
  /// The latency the net plugin reports to NCCL (ncclNetProperties_t.latency, NCCL's graph latencyInter), µs.
  double reported_latency_us = 0;
  /// Time each step across the network takes beyond NCCL's own NET figure (tuning.cc hwLatencies), µs per
  /// protocol (LL, LL128, Simple).
  double extra_step_us[3] = {0, 0, 0};
  /// Share of the line rate large transfers reach, in (0, 1]; negative = the cost model's network efficiency.
  double efficiency = -1;
  unsigned protocols = kNetAllProtocols;  ///< NetProtocol bits NCCL may run across machines
  friend bool operator==(const NetFigures&, const NetFigures&) = default;
};

/// The defaults of a kind.
NetFigures net_kind_defaults(NetKind kind) noexcept;
/// A port's figures: the kind's defaults (InfiniBand when unstated) with the port's own overrides.
NetFigures net_figures(const NicNet& net) noexcept;
/// The figures a collective whose channels cross `ports` sees: the slowest of each (largest latencies, smallest
/// efficiency, the protocols every port allows); the kind of the first port. InfiniBand's for none.
NetFigures combine(const std::vector<NetFigures>& ports) noexcept;
/// The protocols of a NetProtocol set, in NCCL's order ("ll", "ll128", "simple").
std::vector<std::string_view> protocol_names(unsigned protocols);
/// "ll", "ll128", "simple" joined by "," for a NetProtocol set.
std::string protocols_text(unsigned protocols);

}  // namespace artune
