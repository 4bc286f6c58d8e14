#include "artune/topology/link_rates.hpp"

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

}  // namespace artune
