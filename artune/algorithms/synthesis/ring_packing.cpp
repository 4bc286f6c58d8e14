// Ring packing by column generation (ring_packing.hpp): the LP over rings on LEMON's GLPK interface, the
// cheapest ring at the LP's prices by Held and Karp's dynamic program over subsets of the participants.
#include "artune/algorithms/synthesis/ring_packing.hpp"

#include <fmt/format.h>

#include <lemon/lp.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>

#include "artune/algorithms/synthesis/cut_bound.hpp"
#include "artune/core/error.hpp"

namespace artune::synthesis {

namespace {

// A ring is added while its price is below its objective coefficient (1) by more than this.
constexpr double kRingReducedCost = 1e-9;
// Column generation stops here whatever the prices say (dgx1-v100 needs 45 rings, dgx-a100 17).
constexpr int kMaxRingColumns = 4000;
constexpr double kRingInfinity = std::numeric_limits<double>::infinity();

// A candidate ring: an order starting at participant 0, and the edge each hop takes.
struct Ring {
  std::vector<int> order;
  std::vector<int> hops;
  auto operator<=>(const Ring&) const = default;
};

// The cheapest ring at `price` per edge (the sum of its links' duals): Held and Karp over the subsets holding
// participant 0, each hop at the cheapest of its pair's edges (ties to the first listed). Empty order when no ring
// visits every participant.
Ring cheapest_ring(int n, const std::vector<std::vector<int>>& pair_edges, const std::vector<double>& price,
                   double* cost) {
  std::vector<double> hop(static_cast<std::size_t>(n * n), kRingInfinity);
  std::vector<int> hop_edge(static_cast<std::size_t>(n * n), -1);
  for (int p = 0; p < n * n; ++p) {
    for (const int e : pair_edges[static_cast<std::size_t>(p)]) {
      if (price[static_cast<std::size_t>(e)] < hop[static_cast<std::size_t>(p)]) {
        hop[static_cast<std::size_t>(p)] = price[static_cast<std::size_t>(e)];
        hop_edge[static_cast<std::size_t>(p)] = e;
      }
    }
  }
  const std::size_t subsets = std::size_t{1} << n;
  std::vector<double> best(subsets * static_cast<std::size_t>(n), kRingInfinity);
  std::vector<int> prev(subsets * static_cast<std::size_t>(n), -1);
  best[1 * static_cast<std::size_t>(n)] = 0;  // {0}, ending at 0
  for (std::size_t s = 1; s < subsets; s += 2) {
    for (int v = 0; v < n; ++v) {
      const double d = best[s * static_cast<std::size_t>(n) + static_cast<std::size_t>(v)];
      if (d == kRingInfinity) continue;
      for (int w = 1; w < n; ++w) {
        if ((s >> w) & 1) continue;
        const double c = d + hop[static_cast<std::size_t>(v * n + w)];
        const std::size_t t = (s | (std::size_t{1} << w)) * static_cast<std::size_t>(n) + static_cast<std::size_t>(w);
        if (c < best[t]) {
          best[t] = c;
          prev[t] = v;
        }
      }
    }
  }
  Ring ring;
  *cost = kRingInfinity;
  int last = -1;
  for (int v = 1; v < n; ++v) {
    const double c = best[(subsets - 1) * static_cast<std::size_t>(n) + static_cast<std::size_t>(v)] +
                     hop[static_cast<std::size_t>(v * n)];
    if (c < *cost) {
      *cost = c;
      last = v;
    }
  }
  if (last < 0) return ring;
  std::size_t s = subsets - 1;
  for (int v = last; v >= 0;) {
    ring.order.push_back(v);
    const int p = prev[s * static_cast<std::size_t>(n) + static_cast<std::size_t>(v)];
    s &= ~(std::size_t{1} << v);
    v = p;
  }
  std::reverse(ring.order.begin(), ring.order.end());
  for (int i = 0; i < n; ++i) {
    const int a = ring.order[static_cast<std::size_t>(i)], b = ring.order[static_cast<std::size_t>((i + 1) % n)];
    ring.hops.push_back(hop_edge[static_cast<std::size_t>(a * n + b)]);
  }
  return ring;
}

}  // namespace

RingPacking pack_rings(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates,
                       const PackingOptions& options) {
  ARTUNE_CHECK(rates.size() == topo.links().size(),
               fmt::format("ring packing: {} link rates for {} links", rates.size(), topo.links().size()));
  ARTUNE_CHECK(options.chunks >= 1, fmt::format("ring packing: {} chunks", options.chunks));
  const int n = static_cast<int>(participants.size());
  if (n < 2 || n > kMaxRingPackingParticipants) {
    throw InvalidInput(fmt::format("topology '{}': ring packing takes 2 to {} GPUs ({} given)", topo.name(),
                                   kMaxRingPackingParticipants, n));
  }
  const std::vector<TreeEdge> edges = candidate_edges(topo, participants, rates, options.staging);
  std::vector<std::vector<int>> pair_edges(static_cast<std::size_t>(n * n));
  for (std::size_t e = 0; e < edges.size(); ++e) {
    pair_edges[static_cast<std::size_t>(edges[e].from * n + edges[e].to)].push_back(static_cast<int>(e));
  }

  // One row per link some edge crosses: Σ over the rings of x · crossings ≤ its rate.
  lemon::Lp lp;
  lp.max();
  std::map<int, lemon::Lp::Row> rows;
  for (const TreeEdge& e : edges) {
    for (const int l : e.links) {
      if (!rows.contains(l)) rows.emplace(l, lp.addRow(lemon::Lp::Expr() <= rates[static_cast<std::size_t>(l)]));
    }
  }
  std::vector<lemon::Lp::Col> columns;
  std::vector<Ring> rings;
  std::vector<std::map<int, int>> crossings;  // per ring: link → times it crosses it
  std::set<Ring> seen;
  lemon::Lp::Expr objective;
  std::vector<double> price(edges.size(), 0.0);
  while (static_cast<int>(rings.size()) < kMaxRingColumns) {
    double cost = kRingInfinity;
    Ring ring = cheapest_ring(n, pair_edges, price, &cost);
    if (ring.order.empty()) {
      throw InvalidInput(fmt::format("topology '{}': no ring joins the participants", topo.name()));
    }
    if ((!rings.empty() && cost >= 1 - kRingReducedCost) || !seen.insert(ring).second) break;
    const lemon::Lp::Col x = lp.addCol();
    lp.colLowerBound(x, 0);
    std::map<int, int>& crossed = crossings.emplace_back();
    for (const int e : ring.hops) {
      for (const int l : edges[static_cast<std::size_t>(e)].links) ++crossed[l];
    }
    for (const auto& [l, k] : crossed) lp.coeff(rows.at(l), x, k);
    objective += x;
    lp.obj(objective);
    if (lp.solve() != lemon::LpBase::SOLVED || lp.primalType() != lemon::Lp::OPTIMAL) {
      throw InternalError("ring packing: the LP found no optimum");
    }
    columns.push_back(x);
    rings.push_back(std::move(ring));
    for (std::size_t e = 0; e < edges.size(); ++e) {
      price[e] = 0;
      for (const int l : edges[e].links) price[e] += lp.dual(rows.at(l));
    }
  }

  RingPacking out;
  out.chunks = options.chunks;
  out.rate_gbps = lp.primal();
  if (!(out.rate_gbps > 0)) {
    throw InvalidInput(fmt::format("topology '{}': the participants are not connected", topo.name()));
  }
  out.bound_gbps = collective_bound(topo, participants, Collective::kAllReduce, rates).busbw_gbps;
  // Whole pieces: out.chunks equal pieces of the buffer, apportioned to the rings by their LP rates (largest
  // remainders), then moved one at a time from a ring crossing the most loaded link (pieces over rate) to the ring
  // that lowers that maximum most, while one does (apportion_by_load).
  std::vector<double> weights;
  for (const lemon::Lp::Col& x : columns) weights.push_back(std::max(0.0, lp.primal(x)));
  const LoadedPieces loaded = apportion_by_load(weights, options.chunks, crossings, rates);
  const std::vector<int>& pieces = loaded.pieces;
  out.quantized_gbps = options.chunks / loaded.max_load;
  std::map<int, int> renumbered;  // edge index → index into out.edges
  for (std::size_t c = 0; c < rings.size(); ++c) {
    if (pieces[c] == 0) continue;
    PackedRing r;
    r.order = rings[c].order;
    r.chunks = pieces[c];
    for (const int e : rings[c].hops) {
      const auto [it, added] = renumbered.emplace(e, static_cast<int>(out.edges.size()));
      if (added) out.edges.push_back(edges[static_cast<std::size_t>(e)]);
      r.hops.push_back(it->second);
    }
    out.rings.push_back(std::move(r));
  }
  std::stable_sort(out.rings.begin(), out.rings.end(),
                   [](const PackedRing& a, const PackedRing& b) { return a.chunks > b.chunks; });
  return out;
}

}  // namespace artune::synthesis
