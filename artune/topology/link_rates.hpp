#pragma once
// What links carry: their nominal rates, and the share of them transfers reach as NCCL counts it. The nccl
// cost profile (simulator/cost_model.cpp) takes its link efficiencies from here, and the plans derived from
// the topology (algorithms/synthesis) are made for these usable rates, so the same spec gives the same plan
// whichever command builds it.

#include <vector>

#include "artune/topology/topology.hpp"

namespace artune {

/// NCCL's ring search counts 20 GB/s usable per sm70/sm80 NVLink lane of 25 GB/s nominal (sm60 18 of 20,
/// sm90 20.6 of 25): about 80% of the line rate.
inline constexpr double kUsableNvlinkShare = 0.8;
/// InfiniBand: NCCL and MPI reach ~90% of the port rate (e.g. ~11.3 of 12.5 GB/s EDR).
inline constexpr double kUsableNetworkShare = 0.9;

/// The rate (GB/s) every directed link carries, by topology link index.
using LinkRates = std::vector<double>;
/// Every link at its nominal bandwidth (loopbacks 0: they carry nothing between devices).
LinkRates nominal_link_rates(const Topology& topo);
/// The usable share of a link kind: NVLink and network as above, PCIe and QPI/UPI 1 (the shipped configs give
/// them at NCCL's usable figures already: 12 GB/s Gen3 x16, 6/10 GB/s across sockets).
double usable_share(LinkKind kind) noexcept;
/// Every link at nominal × usable_share of its kind.
LinkRates usable_link_rates(const Topology& topo);
/// The usable rates left to traffic inside a machine while `participants` (GPU nodes) each send and receive their
/// share of their NIC across machines at the NIC's rate: a participant's share (its NIC's usable port rate over the
/// participants leaving through that NIC, Topology::nearest_nic as routes take it) is taken off every link between
/// it and its NIC, both ways (floored at 0). What a machine's part of a plan across machines may count on while
/// the network traffic runs beside it (algorithms/families/trees.cpp).
LinkRates rates_beside_network(const Topology& topo, const std::vector<int>& participants);

}  // namespace artune
