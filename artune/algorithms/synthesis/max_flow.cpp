// FlowNetwork on LEMON (Debian liblemon-dev): Preflow is Goldberg–Tarjan push-relabel with the highest-label
// rule and the gap heuristic; its first phase alone gives the maximum flow value and a minimum cut.

#include "artune/algorithms/synthesis/max_flow.hpp"

#include <fmt/format.h>

#include <lemon/preflow.h>
#include <lemon/smart_graph.h>

#include "artune/core/error.hpp"

namespace artune::synthesis {

struct FlowNetwork::Impl {
  lemon::SmartDigraph graph;
  lemon::SmartDigraph::ArcMap<double> capacity{graph};
  std::vector<lemon::SmartDigraph::Node> vertices;
  std::vector<lemon::SmartDigraph::Arc> arcs;
};

FlowNetwork::FlowNetwork(int nodes) : impl_(std::make_unique<Impl>()) {
  ARTUNE_CHECK(nodes >= 0, fmt::format("flow network of {} vertices", nodes));
  impl_->vertices.reserve(static_cast<std::size_t>(nodes));
  for (int i = 0; i < nodes; ++i) impl_->vertices.push_back(impl_->graph.addNode());
}
FlowNetwork::~FlowNetwork() = default;
FlowNetwork::FlowNetwork(FlowNetwork&&) noexcept = default;
FlowNetwork& FlowNetwork::operator=(FlowNetwork&&) noexcept = default;

int FlowNetwork::add_arc(int from, int to, double capacity) {
  const int n = nodes();
  ARTUNE_CHECK(from >= 0 && from < n && to >= 0 && to < n && capacity >= 0,
               fmt::format("flow network: arc {}->{} of capacity {} over {} vertices", from, to, capacity, n));
  const auto arc = impl_->graph.addArc(impl_->vertices[static_cast<std::size_t>(from)],
                                       impl_->vertices[static_cast<std::size_t>(to)]);
  impl_->capacity[arc] = capacity;
  impl_->arcs.push_back(arc);
  return static_cast<int>(impl_->arcs.size()) - 1;
}

void FlowNetwork::set_capacity(int arc, double capacity) {
  ARTUNE_CHECK(arc >= 0 && arc < arcs() && capacity >= 0,
               fmt::format("flow network: capacity {} for arc {} of {}", capacity, arc, arcs()));
  impl_->capacity[impl_->arcs[static_cast<std::size_t>(arc)]] = capacity;
}

double FlowNetwork::capacity(int arc) const { return impl_->capacity[impl_->arcs.at(static_cast<std::size_t>(arc))]; }

std::pair<int, int> FlowNetwork::ends(int arc) const {
  const auto a = impl_->arcs.at(static_cast<std::size_t>(arc));
  return {impl_->graph.id(impl_->graph.source(a)), impl_->graph.id(impl_->graph.target(a))};
}

int FlowNetwork::nodes() const { return static_cast<int>(impl_->vertices.size()); }

int FlowNetwork::arcs() const { return static_cast<int>(impl_->arcs.size()); }

double FlowNetwork::max_flow(int source, int target, std::vector<bool>* source_side) const {
  const int n = nodes();
  ARTUNE_CHECK(source >= 0 && source < n && target >= 0 && target < n && source != target,
               fmt::format("flow network: max flow {}->{} over {} vertices", source, target, n));
  using Preflow = lemon::Preflow<lemon::SmartDigraph, lemon::SmartDigraph::ArcMap<double>>;
  Preflow preflow(impl_->graph, impl_->capacity, impl_->vertices[static_cast<std::size_t>(source)],
                  impl_->vertices[static_cast<std::size_t>(target)]);
  preflow.runMinCut();
  if (source_side != nullptr) {
    source_side->assign(static_cast<std::size_t>(n), false);
    for (int i = 0; i < n; ++i)
      (*source_side)[static_cast<std::size_t>(i)] = preflow.minCut(impl_->vertices[static_cast<std::size_t>(i)]);
  }
  return preflow.flowValue();
}

}  // namespace artune::synthesis
