// The bound at a cost model's rates (bound.hpp).

#include "artune/simulator/bound.hpp"

#include "artune/core/error.hpp"
#include "artune/simulator/nccl_model.hpp"

namespace artune {

LinkRates effective_link_rates(const Topology& topo, const CostModel& model) {
  LinkRates rates = nominal_link_rates(topo);
  for (std::size_t l = 0; l < rates.size(); ++l) rates[l] *= model.link_for(topo.links()[l].kind).efficiency;
  return rates;
}

bool in_network_reduction(const Topology& topo, const std::vector<int>& participants) {
  const std::vector<int>& gpus = participants.empty() ? topo.gpus() : participants;
  if (gpus.size() < 2) return false;
  for (int g : gpus) {
    if (topo.nodes()[static_cast<std::size_t>(g)].kind != NodeKind::kGpu) return false;
  }
  try {
    return nccl::search(topo, gpus).nvls_channels > 0;
  } catch (const InvalidInput&) {
    return false;  // NCCL's model does not take this group (machines holding different numbers of GPUs)
  }
}

CollectiveBound effective_bound(const Topology& topo, const std::vector<int>& participants, Collective collective,
                                const CostModel& model) {
  return collective_bound(topo, participants, collective, effective_link_rates(topo, model),
                          collective == Collective::kAllReduce && in_network_reduction(topo, participants));
}

CollectiveBound nominal_bound(const Topology& topo, const std::vector<int>& participants, Collective collective) {
  return collective_bound(topo, participants, collective, nominal_link_rates(topo),
                          collective == Collective::kAllReduce && in_network_reduction(topo, participants));
}

double bound_fraction(const CollectiveBound& bound, double bytes, double time_us) {
  if (!(time_us > 0) || !(bound.us_per_byte > 0)) return 0.0;
  return bound.time_us(bytes) / time_us;
}

}  // namespace artune
