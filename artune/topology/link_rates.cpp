#include "artune/topology/link_rates.hpp"

#include <algorithm>
#include <map>

namespace artune {

LinkRates nominal_link_rates(const Topology& topo) {
  LinkRates rates;
  rates.reserve(topo.links().size());
  for (const Link& l : topo.links()) rates.push_back(l.kind == LinkKind::kLoopback ? 0.0 : l.bandwidth_gbps);
  return rates;
}

double usable_share(LinkKind kind) noexcept {
  switch (kind) {
    case LinkKind::kNvLink: return kUsableNvlinkShare;
    case LinkKind::kNetwork: return kUsableNetworkShare;
    default: return 1.0;
  }
}

LinkRates usable_link_rates(const Topology& topo) {
  LinkRates rates = nominal_link_rates(topo);
  for (std::size_t l = 0; l < rates.size(); ++l) rates[l] *= usable_share(topo.links()[l].kind);
  return rates;
}

LinkRates rates_beside_network(const Topology& topo, const std::vector<int>& participants) {
  LinkRates rates = usable_link_rates(topo);
  std::vector<int> nic_of;     // per participant: the NIC it leaves through (routes take the nearest), or -1
  std::map<int, int> leaving;  // NIC -> participants leaving through it
  for (const int node : participants) {
    nic_of.push_back(topo.nearest_nic(node));
    if (nic_of.back() >= 0) ++leaving[nic_of.back()];
  }
  LinkRates reserved(rates.size(), 0.0);
  for (std::size_t i = 0; i < participants.size(); ++i) {
    const int nic = nic_of[i];
    const int port = nic < 0 ? -1 : topo.network_port(nic);
    if (port < 0) continue;
    const double share = rates[static_cast<std::size_t>(port)] / leaving[nic];
    for (const int l : topo.route(participants[i], nic).links) reserved[static_cast<std::size_t>(l)] += share;
    for (const int l : topo.route(nic, participants[i]).links) reserved[static_cast<std::size_t>(l)] += share;
  }
  for (std::size_t l = 0; l < rates.size(); ++l) rates[l] = std::max(0.0, rates[l] - reserved[l]);
  return rates;
}

}  // namespace artune
