// Spanning-tree packing (tree_packing.hpp): edges, the LP on LEMON/GLPK, Lovász's tree growing on LEMON max
// flows, rounding to chunks.

#include "artune/algorithms/synthesis/tree_packing.hpp"

#include <fmt/format.h>

#include <lemon/lp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "artune/algorithms/synthesis/max_flow.hpp"
#include "artune/core/error.hpp"

namespace artune::synthesis {

namespace {

// Capacities and demands are normalised so that every root needs weight 1: values are O(1) to O(10).
// kTolerance absorbs the LP's and the max flows' rounding; kProbe is the infinitesimal weight by which a
// candidate arc is tested (far above the rounding, far below any structural gap between cuts).
constexpr double kTolerance = 1e-9;
constexpr double kProbe = 1e-6;
// Edge rates below this share of the per-root rate are LP noise.
constexpr double kNegligible = 1e-9;
// A root whose weight still to place is below this share is done (the rest rounds away in chunks).
constexpr double kDone = 1e-7;

// ---- 1. Tree edges --------------------------------------------------------------------------------------

bool usable(const std::vector<int>& links, const LinkRates& rates) {
  for (int l : links) {
    if (!(rates[static_cast<std::size_t>(l)] > 0)) return false;
  }
  return !links.empty();
}

}  // namespace

std::vector<TreeEdge> candidate_edges(const Topology& topo, const std::vector<int>& participants,
                                      const LinkRates& rates, bool staging) {
  const auto& nodes = topo.nodes();
  const int n = static_cast<int>(participants.size());
  std::vector<TreeEdge> edges;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const int na = participants[static_cast<std::size_t>(a)];
      const int nb = participants[static_cast<std::size_t>(b)];
      std::set<std::multiset<int>> seen;
      TreeEdge direct{a, b, -1, topo.route(na, nb).links};
      if (usable(direct.links, rates)) {
        seen.insert(std::multiset<int>(direct.links.begin(), direct.links.end()));
        edges.push_back(std::move(direct));
      }
      if (!staging) continue;
      const int machine = nodes[static_cast<std::size_t>(na)].machine;
      if (nodes[static_cast<std::size_t>(nb)].machine != machine) continue;
      for (int cpu : topo.nodes_of_kind(NodeKind::kCpu, machine)) {
        if (cpu == na || cpu == nb) continue;
        TreeEdge staged{a, b, cpu, topo.route(na, cpu).links};
        const auto& second = topo.route(cpu, nb).links;
        staged.links.insert(staged.links.end(), second.begin(), second.end());
        // A staged edge that crosses the links of one already listed adds nothing.
        if (!usable(staged.links, rates) ||
            !seen.insert(std::multiset<int>(staged.links.begin(), staged.links.end())).second)
          continue;
        edges.push_back(std::move(staged));
      }
    }
  }
  return edges;
}

namespace {

// The arc of an edge in the problem's direction: out-trees follow the data, in-trees run against it.
int arc_tail(const TreeEdge& e, bool toward_root) { return toward_root ? e.to : e.from; }
int arc_head(const TreeEdge& e, bool toward_root) { return toward_root ? e.from : e.to; }

// ---- 2. Capacities by LP --------------------------------------------------------------------------------

struct Capacities {
  double rate = 0;        // per-root rate x (GB/s)
  std::vector<double> y;  // per edge (GB/s)
};

// Relative shortfall of a max flow below its demand that counts as a violated cut (what is left below it is
// rounding, absorbed by Packer::feasible_scale).
constexpr double kCutTolerance = 1e-9;
// Rounds of cuts after which an LP is reported as not converging (the shipped machines take 0 to 2).
constexpr int kMaxCutRounds = 1000;

// The flow conditions of the trees' LP, as rows of cuts. Over arcs (tail, head) of capacity y[a] (an LP column),
// every participant u takes in x from each other one at once. By max-flow min-cut this holds iff every set T of
// participants (not all of them) takes in, over the arcs entering it, x times the participants outside T: one row
// per set. There are exponentially many; the LP starts with the sets of one participant and of all but one, and
// takes the others as the max flows of its current solution find them violated (cutting planes). On the shipped
// machines the first rows already hold the optimum, or two rounds follow (pcie-8gpu); the flows they replace,
// one per participant over every arc, made the LP about n times the size.
class FlowCuts {
 public:
  FlowCuts(int n, const std::vector<std::pair<int, int>>& arcs, lemon::Lp::Col x, std::vector<lemon::Lp::Col> y)
      : n_(n), arcs_(arcs), x_(x), y_(std::move(y)), net_(n + 1) {
    for (const auto& [tail, head] : arcs_) net_.add_arc(tail, head, 0);
    for (int v = 0; v < n_; ++v) net_.add_arc(n_, v, 0);
  }

  // The rows of one participant alone and of all but one (each a bound on x by itself).
  void add_initial(lemon::Lp& lp) {
    const std::uint32_t all = (std::uint32_t{1} << n_) - 1;
    for (int u = 0; u < n_; ++u) {
      add_row(lp, std::uint32_t{1} << u);
      add_row(lp, all & ~(std::uint32_t{1} << u));
    }
  }

  // Adds the rows of the sets the LP's current solution violates (one per participant at most: the minimum cut
  // of the max flow into it from a source joined to every other one at x); returns how many were new.
  int separate(lemon::Lp& lp) {
    const double x = lp.primal(x_);
    for (std::size_t a = 0; a < arcs_.size(); ++a)
      net_.set_capacity(static_cast<int>(a), std::max(0.0, lp.primal(y_[a])));
    int added = 0;
    std::vector<bool> source_side;
    for (int u = 0; u < n_; ++u) {
      for (int v = 0; v < n_; ++v) net_.set_capacity(static_cast<int>(arcs_.size()) + v, v == u ? 0.0 : x);
      const double demand = (n_ - 1) * x;
      if (net_.max_flow(n_, u, &source_side) >= demand * (1 - kCutTolerance)) continue;
      std::uint32_t inside = 0;
      for (int v = 0; v < n_; ++v) {
        if (!source_side[static_cast<std::size_t>(v)]) inside |= std::uint32_t{1} << v;
      }
      added += add_row(lp, inside) ? 1 : 0;
    }
    return added;
  }

 private:
  // Σ y over the arcs entering `inside` ≥ x · the participants outside it; false if the set already has its row.
  bool add_row(lemon::Lp& lp, std::uint32_t inside) {
    if (!rows_.insert(inside).second) return false;
    const auto in = [&](int v) { return (inside >> v & 1U) != 0; };
    lemon::Lp::Expr entering;
    for (std::size_t a = 0; a < arcs_.size(); ++a) {
      if (!in(arcs_[a].first) && in(arcs_[a].second)) entering += y_[a];
    }
    lp.addRow(entering - (n_ - std::popcount(inside)) * x_ >= 0);
    return true;
  }

  int n_;
  std::vector<std::pair<int, int>> arcs_;
  lemon::Lp::Col x_;
  std::vector<lemon::Lp::Col> y_;
  FlowNetwork net_;  // participants 0..n−1, the source n; arcs as arcs_, then source → v
  std::set<std::uint32_t> rows_;
};

// Solves the LP, adding the cuts its solution violates, until it violates none; false if an LP has no optimum.
// After the first solve, rows are only added, so the basis stays dual feasible: the dual simplex goes on from it.
bool solve_with_cuts(lemon::Lp& lp, FlowCuts& cuts) {
  if (lp.solve() != lemon::LpBase::SOLVED || lp.primalType() != lemon::Lp::OPTIMAL) return false;
  for (int round = 0; round < kMaxCutRounds; ++round) {
    if (cuts.separate(lp) == 0) return true;
    if (lp.solveDual() != lemon::LpBase::SOLVED || lp.primalType() != lemon::Lp::OPTIMAL) return false;
  }
  throw InternalError(fmt::format("tree packing: the LP's cuts did not converge in {} rounds", kMaxCutRounds));
}

// The column x, one column y_e ≥ 0 per edge, and the rows of the links: Σ over the edges crossing each link
// (once per crossing; with `reverse`, an edge also crosses its reverse's links, and one without a reverse is
// held at 0) ≤ its rate. `cost`: the link crossings of the columns; `excess`: Σ over ordered pairs of
// participants of max(0, Σ y over the pair's edges − x), each term a column of its own.
struct EdgeColumns {
  lemon::Lp::Col x;
  std::vector<lemon::Lp::Col> y;
  lemon::Lp::Expr cost;
  lemon::Lp::Expr excess;
};
EdgeColumns add_edge_columns(lemon::Lp& lp, const Topology& topo, const std::vector<TreeEdge>& edges,
                             const std::vector<int>* reverse, const LinkRates& rates, bool with_excess) {
  EdgeColumns out;
  out.x = lp.addCol();
  lp.colLowerBound(out.x, 0);
  std::vector<lemon::Lp::Expr> on_link(topo.links().size());
  std::vector<bool> used(topo.links().size(), false);
  for (std::size_t e = 0; e < edges.size(); ++e) {
    out.y.push_back(lp.addCol());
    lp.colLowerBound(out.y.back(), 0);
    std::vector<const std::vector<int>*> crossed{&edges[e].links};
    if (reverse != nullptr) {
      if ((*reverse)[e] < 0) {
        lp.colUpperBound(out.y.back(), 0);
        continue;
      }
      crossed.push_back(&edges[static_cast<std::size_t>((*reverse)[e])].links);
    }
    for (const std::vector<int>* links : crossed) {
      for (int l : *links) {
        on_link[static_cast<std::size_t>(l)] += out.y.back();
        used[static_cast<std::size_t>(l)] = true;
      }
      out.cost += static_cast<double>(links->size()) * out.y.back();
    }
  }
  for (std::size_t l = 0; l < on_link.size(); ++l) {
    if (used[l]) lp.addRow(on_link[l] <= rates[l]);
  }
  if (!with_excess) return out;
  std::map<std::pair<int, int>, lemon::Lp::Expr> pair;
  for (std::size_t e = 0; e < edges.size(); ++e) pair[{edges[e].from, edges[e].to}] += out.y[e];
  for (const auto& [ends, carried] : pair) {
    const lemon::Lp::Col over = lp.addCol();
    lp.colLowerBound(over, 0);
    lp.addRow(over - carried + out.x >= 0);
    out.excess += over;
  }
  return out;
}

Capacities primal_values(const lemon::Lp& lp, const EdgeColumns& c) {
  Capacities out;
  out.rate = lp.primal(c.x);
  for (const lemon::Lp::Col& y : c.y) out.y.push_back(std::max(0.0, lp.primal(y)));
  return out;
}

// The LP of trees of one direction (false: out-trees, true: in-trees) from every participant at one rate x:
// edge rates y within the links such that every participant takes in x from each other one at once over the
// edges in the problem's direction (FlowCuts). Solved in three steps, each keeping what the one before reached:
// the largest x; then the fewest link crossings (no idle detours); then the least excess, what the ordered pairs
// of participants carry beyond x. Many edge rates reach the same x at the same cost, and which one the LP stops
// at shapes the trees: spread over the pairs, they leave fewer transfers in a row (pcie-8gpu's trees plan has
// 15 phases; without the step, tried while writing it, it was deeper and slower). Each step's bound is the value
// reached, with no margin: given one, the LP traded a sliver of x for stray edges of next to no rate, on which no
// tree can be grown (the packing then placed only part of its weight), and on dgx-h100 it stopped at rates on two
// rings, whose trees were chains seven hops deep (trees.shallow_and_mirrored holds them at one). Where a later
// step finds no optimum, the one before stands.
Capacities solve_lp(const Topology& topo, int n, const std::vector<TreeEdge>& edges, const LinkRates& rates,
                    bool toward_root) {
  lemon::Lp lp;
  lp.messageLevel(lemon::LpBase::MESSAGE_NOTHING);
  const EdgeColumns c = add_edge_columns(lp, topo, edges, nullptr, rates, true);
  std::vector<std::pair<int, int>> arcs;
  for (const TreeEdge& e : edges) arcs.emplace_back(arc_tail(e, toward_root), arc_head(e, toward_root));
  FlowCuts cuts(n, arcs, c.x, c.y);
  const auto must_solve = [&] {
    if (!solve_with_cuts(lp, cuts)) throw InternalError("tree packing: the LP of the edges' rates found no optimum");
  };
  cuts.add_initial(lp);
  lp.max();
  lp.obj(c.x);
  must_solve();
  const double best = lp.primal(c.x);
  if (!(best > 0)) throw InvalidInput(fmt::format("topology '{}': the participants are not connected", topo.name()));
  lp.colLowerBound(c.x, best);
  lp.min();
  lp.obj(c.cost);
  if (!solve_with_cuts(lp, cuts)) {
    lp.max();
    lp.obj(c.x);
    must_solve();
    return primal_values(lp, c);
  }
  const lemon::Lp::Row fewest = lp.addRow(c.cost <= lp.primal());
  lp.obj(c.excess);
  if (!solve_with_cuts(lp, cuts)) {
    lp.erase(fewest);
    lp.obj(c.cost);
    must_solve();
  }
  return primal_values(lp, c);
}

// The reverse of every edge (the same participants the other way, staged through the same CPU), or −1.
std::vector<int> reverse_edges(const std::vector<TreeEdge>& edges) {
  std::map<std::tuple<int, int, int>, int> index;
  for (std::size_t e = 0; e < edges.size(); ++e) index[{edges[e].from, edges[e].to, edges[e].via}] = static_cast<int>(e);
  std::vector<int> out;
  for (const TreeEdge& e : edges) {
    const auto it = index.find({e.to, e.from, e.via});
    out.push_back(it == index.end() ? -1 : it->second);
  }
  return out;
}

// Whether the in-trees' LP is the out-trees' LP mirrored: every edge has a reverse whose links are its own
// links' duplex partners in reverse order, at the same rates. Then out-trees with every edge reversed are
// in-trees at the same rate, and an all-reduce's two phases use each link pair alike, one each way (the LP
// alone would pick either of many optimal edge rates for each direction on its own).
bool mirrored(const Topology& topo, const std::vector<TreeEdge>& edges, const std::vector<int>& reverse,
              const LinkRates& rates) {
  const auto& links = topo.links();
  for (std::size_t e = 0; e < edges.size(); ++e) {
    if (reverse[e] < 0) return false;
    const std::vector<int>& forth = edges[e].links;
    const std::vector<int>& back = edges[static_cast<std::size_t>(reverse[e])].links;
    if (forth.size() != back.size()) return false;
    for (std::size_t i = 0; i < forth.size(); ++i) {
      const auto l = static_cast<std::size_t>(forth[i]);
      const auto m = static_cast<std::size_t>(back[back.size() - 1 - i]);
      if (links[m].src != links[l].dst || links[m].dst != links[l].src || rates[m] != rates[l]) return false;
    }
  }
  return true;
}

// The LP of an all-reduce by reduce and broadcast trees from one root (Blink, MLSys'20). A tree edge carries
// its tree's share down (broadcast, the edge's direction) and up (reduce, its reverse), so an edge at rate z
// loads the links of both directions with z. Maximise x such that the root can send x to every other
// participant within z (Edmonds: arborescences of total weight x from the root fit within z; each is a
// spanning tree whose every edge is used once each way). The second LP keeps x and spends the fewest link
// crossings. `y`: z per edge (0 for an edge without a reverse). This LP keeps its flows, one per sink, where the
// trees' LP took cuts: it is the smaller one (the flows all start at one root), and by cuts, tried while writing
// them, it stopped at other optimal rates whose trees scheduled worse (fewer DGX-1 P100 subsets at 95 % of the
// bound).
Capacities solve_reduce_broadcast_lp(const Topology& topo, int n, const std::vector<TreeEdge>& edges,
                                     const std::vector<int>& reverse, const LinkRates& rates, int root) {
  lemon::Lp lp;
  lp.messageLevel(lemon::LpBase::MESSAGE_NOTHING);
  const EdgeColumns c = add_edge_columns(lp, topo, edges, &reverse, rates, false);
  // One flow per sink u ≠ root, a column per arc within z: the root sends x to u over the edges with a reverse,
  // none into it.
  std::vector<lemon::Lp::Expr> from_root(static_cast<std::size_t>(n));
  from_root[static_cast<std::size_t>(root)] = c.x;
  for (int u = 0; u < n; ++u) {
    if (u == root) continue;
    std::vector<lemon::Lp::Expr> balance(static_cast<std::size_t>(n));
    for (std::size_t e = 0; e < edges.size(); ++e) {
      if (edges[e].from == u || reverse[e] < 0 || edges[e].to == root) continue;  // nothing leaves the sink
      const lemon::Lp::Col f = lp.addCol();
      lp.colLowerBound(f, 0);
      lp.addRow(f - c.y[e] <= 0);
      balance[static_cast<std::size_t>(edges[e].from)] += f;
      balance[static_cast<std::size_t>(edges[e].to)] -= f;
    }
    for (int v = 0; v < n; ++v) {
      if (v != u) lp.addRow(balance[static_cast<std::size_t>(v)] - from_root[static_cast<std::size_t>(v)] == 0);
    }
  }
  // The rate, then the fewest crossings at (up to rounding) that rate.
  lp.max();
  lp.obj(c.x);
  if (lp.solve() != lemon::LpBase::SOLVED || lp.primalType() != lemon::Lp::OPTIMAL) {
    throw InternalError("tree packing: the LP of the reduce-broadcast trees found no optimum");
  }
  const double best = lp.primal(c.x);
  if (!(best > 0)) throw InvalidInput(fmt::format("topology '{}': the participants are not connected", topo.name()));
  lp.colLowerBound(c.x, best * (1 - 1e-7));
  lp.min();
  lp.obj(c.cost);
  if (lp.solve() != lemon::LpBase::SOLVED || lp.primalType() != lemon::Lp::OPTIMAL) {
    lp.max();
    lp.obj(c.x);
    lp.solve();
  }
  return primal_values(lp, c);
}

// ---- 3. Trees -------------------------------------------------------------------------------------------

// The problem graph: participants 0..n−1, the source n, one arc per edge with capacity cap, one arc s→p per
// root with its remaining demand.
class Packer {
 public:
  // `demand`: per participant, the weight of the trees it roots (1 for every root; 0 for the others).
  Packer(int n, const std::vector<TreeEdge>& edges, std::vector<double> cap, bool toward_root,
         std::vector<double> demand)
      : n_(n), edges_(edges), cap_(std::move(cap)), toward_(toward_root), net_(n + 1), demand_(std::move(demand)),
        initial_(demand_) {
    for (std::size_t e = 0; e < edges_.size(); ++e) {
      arc_.push_back(net_.add_arc(arc_tail(edges_[e], toward_), arc_head(edges_[e], toward_), cap_[e]));
    }
    for (int p = 0; p < n_; ++p) source_arc_.push_back(net_.add_arc(n_, p, demand_[static_cast<std::size_t>(p)]));
  }

  // The largest x ≤ 1 such that, with every demand scaled by x, every participant can receive all of it from
  // the source (the LP's solution met this at x = 1 up to rounding; this makes it exact before anything is
  // taken).
  double feasible_scale() {
    double x = 1.0;
    const double total = std::accumulate(initial_.begin(), initial_.end(), 0.0);
    std::vector<bool> side;
    for (int step = 0; step < 100; ++step) {
      for (int p = 0; p < n_; ++p)
        net_.set_capacity(source_arc_[static_cast<std::size_t>(p)], x * initial_[static_cast<std::size_t>(p)]);
      double best = x;
      for (int v = 0; v < n_; ++v) {
        const double flow = net_.max_flow(n_, v, &side);
        if (flow >= total * x * (1 - 1e-12)) continue;
        // Cut ratio: arcs into the sink side from participants over the demand on the source side.
        double into = 0;
        double inside = 0;
        for (int p = 0; p < n_; ++p) inside += side[static_cast<std::size_t>(p)] ? initial_[static_cast<std::size_t>(p)] : 0;
        for (std::size_t e = 0; e < edges_.size(); ++e) {
          const int t = arc_tail(edges_[e], toward_), h = arc_head(edges_[e], toward_);
          if (side[static_cast<std::size_t>(t)] && !side[static_cast<std::size_t>(h)]) into += cap_[e];
        }
        if (inside > 0) best = std::min(best, into / inside);
      }
      if (best >= x) break;
      x = best;
    }
    return x;
  }

  void scale_capacities(double factor) {
    for (double& c : cap_) c *= factor;
  }

  // Grows and weighs trees until every root's demand is placed; returns (root, parent edges, weight).
  struct Tree {
    int root;
    std::vector<int> parent_edge;
    double weight;
  };
  std::vector<Tree> run() {
    std::vector<Tree> trees;
    const int limit = 64 * n_ + static_cast<int>(edges_.size()) * 4;
    for (int round = 0; round < limit; ++round) {
      int root = 0;
      for (int p = 1; p < n_; ++p) {
        if (demand_[static_cast<std::size_t>(p)] > demand_[static_cast<std::size_t>(root)]) root = p;
      }
      if (demand_[static_cast<std::size_t>(root)] < kDone) break;
      Tree t{root, grow(root), 0.0};
      t.weight = weigh(t.root, t.parent_edge);
      if (!(t.weight > 0)) break;
      for (int v = 0; v < n_; ++v) {
        const int e = t.parent_edge[static_cast<std::size_t>(v)];
        if (e >= 0) cap_[static_cast<std::size_t>(e)] = std::max(0.0, cap_[static_cast<std::size_t>(e)] - t.weight);
      }
      demand_[static_cast<std::size_t>(root)] = std::max(0.0, demand_[static_cast<std::size_t>(root)] - t.weight);
      trees.push_back(std::move(t));
    }
    return trees;
  }

  const std::vector<double>& demand() const { return demand_; }

 private:
  double total_demand() const { return std::accumulate(demand_.begin(), demand_.end(), 0.0); }

  // Loads the network with the capacities less `mu` on the arcs of the (partial) tree.
  void load(int root, const std::vector<int>& parent_edge, double mu) {
    for (std::size_t e = 0; e < edges_.size(); ++e) net_.set_capacity(arc_[e], cap_[e]);
    for (int p = 0; p < n_; ++p) {
      net_.set_capacity(source_arc_[static_cast<std::size_t>(p)], demand_[static_cast<std::size_t>(p)]);
    }
    net_.set_capacity(source_arc_[static_cast<std::size_t>(root)],
                      std::max(0.0, demand_[static_cast<std::size_t>(root)] - mu));
    for (int e : parent_edge) {
      if (e >= 0)
        net_.set_capacity(arc_[static_cast<std::size_t>(e)], std::max(0.0, cap_[static_cast<std::size_t>(e)] - mu));
    }
  }

  // The participant `head` still gets the remaining demand (less `mu`) from the source. Taking an arc into
  // `head` lowers only the cuts of the sets that hold `head`, and the least of those is the max flow to it:
  // every other set kept its margin from the steps before.
  bool extendable(int head, double mu) { return net_.max_flow(n_, head) >= total_demand() - mu - kTolerance; }

  std::vector<int> grow(int root) {
    std::vector<int> parent_edge(static_cast<std::size_t>(n_), -1);
    std::vector<int> depth(static_cast<std::size_t>(n_), -1);
    depth[static_cast<std::size_t>(root)] = 0;
    int placed = 1;
    while (placed < n_) {
      // Candidates: arcs from the tree out of it with capacity left, shallow tails first (short trees
      // pipeline better), then the widest, then routes before staging.
      std::vector<int> candidates;
      for (std::size_t e = 0; e < edges_.size(); ++e) {
        const int t = arc_tail(edges_[e], toward_), h = arc_head(edges_[e], toward_);
        if (depth[static_cast<std::size_t>(t)] >= 0 && depth[static_cast<std::size_t>(h)] < 0 && cap_[e] > kTolerance)
          candidates.push_back(static_cast<int>(e));
      }
      std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
        const auto key = [&](int e) {
          const TreeEdge& edge = edges_[static_cast<std::size_t>(e)];
          return std::tuple(depth[static_cast<std::size_t>(arc_tail(edge, toward_))], edge.via >= 0 ? 1 : 0,
                            -cap_[static_cast<std::size_t>(e)]);
        };
        return key(a) < key(b);
      });
      int chosen = -1;
      for (int e : candidates) {
        // An arc with less capacity than the probe (LP noise) would pass the test and then cap the tree's
        // weight at next to nothing: the packing stalled short of the demand (dgx1-p100's in-trees at 80 %,
        // the rest hidden by the rounding to chunks, which scaled the placed trees up beyond the links' rates).
        if (cap_[static_cast<std::size_t>(e)] < kProbe) continue;
        const int h = arc_head(edges_[static_cast<std::size_t>(e)], toward_);
        parent_edge[static_cast<std::size_t>(h)] = e;
        load(root, parent_edge, kProbe);
        if (extendable(h, kProbe)) {
          chosen = e;
          break;
        }
        parent_edge[static_cast<std::size_t>(h)] = -1;
      }
      if (chosen < 0) {
        // Rounding left no arc provably safe; take the widest one (the weight step below keeps it feasible).
        if (candidates.empty()) throw InternalError("tree packing: a tree cannot reach every participant");
        chosen = *std::min_element(candidates.begin(), candidates.end(), [&](int a, int b) {
          return cap_[static_cast<std::size_t>(a)] > cap_[static_cast<std::size_t>(b)];
        });
        parent_edge[static_cast<std::size_t>(arc_head(edges_[static_cast<std::size_t>(chosen)], toward_))] = chosen;
      }
      const TreeEdge& edge = edges_[static_cast<std::size_t>(chosen)];
      depth[static_cast<std::size_t>(arc_head(edge, toward_))] =
          depth[static_cast<std::size_t>(arc_tail(edge, toward_))] + 1;
      ++placed;
    }
    return parent_edge;
  }

  // The largest weight the complete tree can take: each arc's capacity and the root's demand, then every
  // cut X that would fall short (ρ(X) − μ·t(X) < K − μ with t(X) tree arcs into X) lowers it to
  // (ρ(X) − K)/(t(X) − 1).
  double weigh(int root, const std::vector<int>& parent_edge) {
    double mu = demand_[static_cast<std::size_t>(root)];
    for (int e : parent_edge) {
      if (e >= 0) mu = std::min(mu, cap_[static_cast<std::size_t>(e)]);
    }
    std::vector<bool> side;
    for (int step = 0; step < 100 && mu > 0; ++step) {
      load(root, parent_edge, mu);
      const double need = total_demand() - mu;
      double lowest = mu;
      for (int v = 0; v < n_; ++v) {
        if (net_.max_flow(n_, v, &side) >= need - kTolerance) continue;
        // ρ(X) and t(X) of the sink side X before subtracting μ.
        double rho = 0;
        int t = 0;
        for (int p = 0; p < n_; ++p) {
          if (side[static_cast<std::size_t>(p)]) continue;
          rho += demand_[static_cast<std::size_t>(p)];
          if (p == root) ++t;
        }
        for (std::size_t e = 0; e < edges_.size(); ++e) {
          const int tail = arc_tail(edges_[e], toward_), head = arc_head(edges_[e], toward_);
          if (!side[static_cast<std::size_t>(tail)] || side[static_cast<std::size_t>(head)]) continue;
          rho += cap_[e];
          if (parent_edge[static_cast<std::size_t>(head)] == static_cast<int>(e)) ++t;
        }
        if (t >= 2) lowest = std::min(lowest, std::max(0.0, (rho - total_demand()) / (t - 1)));
      }
      if (lowest >= mu * (1 - 1e-12)) break;
      mu = lowest;
    }
    return mu;
  }

  int n_;
  const std::vector<TreeEdge>& edges_;
  std::vector<double> cap_;
  bool toward_;
  FlowNetwork net_;
  std::vector<double> demand_;
  std::vector<double> initial_;  // the demands asked for (demand_ is what is left to place)
  std::vector<int> arc_;
  std::vector<int> source_arc_;
};

// ---- 4. Chunks ------------------------------------------------------------------------------------------

}  // namespace

// Largest remainders: chunk counts proportional to `weights`, summing to `chunks`.
std::vector<int> apportion(const std::vector<double>& weights, int chunks) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int> out(weights.size(), 0);
  std::vector<std::pair<double, std::size_t>> remainders;
  int given = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double exact = weights[i] / total * chunks;
    out[i] = static_cast<int>(std::floor(exact));
    given += out[i];
    remainders.emplace_back(exact - out[i], i);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t k = 0; given < chunks && k < remainders.size(); ++k, ++given) ++out[remainders[k].second];
  return out;
}

std::vector<int> reverse_links(const Topology& topo, const std::vector<int>& participants, const TreeEdge& edge) {
  const int from = participants[static_cast<std::size_t>(edge.from)];
  const int to = participants[static_cast<std::size_t>(edge.to)];
  if (edge.via < 0) return topo.route(to, from).links;
  std::vector<int> out = topo.route(to, edge.via).links;
  const std::vector<int>& back = topo.route(edge.via, from).links;
  out.insert(out.end(), back.begin(), back.end());
  return out;
}

LoadedPieces apportion_by_load(const std::vector<double>& weights, int total,
                               const std::vector<std::map<int, int>>& crossings, const LinkRates& rates) {
  ARTUNE_CHECK(weights.size() == crossings.size(), "apportion_by_load: a weight per item's crossings");
  LoadedPieces out{apportion(weights, total), 0};
  std::vector<int>& pieces = out.pieces;
  std::vector<std::int64_t> load(rates.size(), 0);  // pieces crossing each link
  auto move = [&](std::size_t item, int k) {
    for (const auto& [l, x] : crossings[item]) load[static_cast<std::size_t>(l)] += std::int64_t{k} * x;
  };
  for (std::size_t i = 0; i < pieces.size(); ++i) move(i, pieces[i]);
  // The most loaded link and its load.
  auto worst = [&] {
    std::pair<double, int> m{0.0, -1};
    for (std::size_t l = 0; l < load.size(); ++l) {
      if (load[l] == 0) continue;
      const double v = static_cast<double>(load[l]) / rates[l];
      if (v > m.first) m = {v, static_cast<int>(l)};
    }
    return m;
  };
  for (int step = 0; step < total; ++step) {
    const auto [now, link] = worst();
    std::pair<double, int> best{now, link};
    std::size_t from = 0, to = 0;
    for (std::size_t a = 0; a < pieces.size(); ++a) {
      if (pieces[a] == 0 || !crossings[a].contains(link)) continue;
      move(a, -1);
      for (std::size_t b = 0; b < pieces.size(); ++b) {
        if (b == a) continue;
        move(b, 1);
        const auto w = worst();
        if (w.first < best.first) {
          best = w;
          from = a;
          to = b;
        }
        move(b, -1);
      }
      move(a, 1);
    }
    if (!(best.first < now)) break;
    move(from, -1);
    move(to, 1);
    --pieces[from];
    ++pieces[to];
  }
  out.max_load = worst().first;
  return out;
}

namespace {

// Trees of one direction from the LP's edge rates at per-root rate `rate`, for the participants whose `demand`
// is 1 (the others root no tree); `bound_gbps` is the cut bound of that rate.
TreePacking decompose(int n, const std::vector<TreeEdge>& edges, const std::vector<double>& y, double rate,
                      bool toward_root, const std::vector<double>& demand, double bound_gbps,
                      const PackingOptions& options) {
  TreePacking out;
  out.toward_root = toward_root;
  out.chunks = options.chunks;
  out.bound_gbps = bound_gbps;

  // Normalise to weight 1 per root; drop edges the LP left (almost) unused.
  std::vector<TreeEdge> kept;
  std::vector<double> cap;
  for (std::size_t e = 0; e < edges.size(); ++e) {
    if (y[e] <= kNegligible * rate) continue;
    kept.push_back(edges[e]);
    cap.push_back(y[e] / rate);
  }
  Packer packer(n, kept, cap, toward_root, demand);
  const double scale = packer.feasible_scale();
  packer.scale_capacities(1.0 / scale);  // exact at weight 1 per root: the rate is rate · scale
  out.rate_gbps = rate * scale;
  const auto trees = packer.run();

  // Chunks per root; edges renumbered to those the trees use.
  std::vector<int> renumber(kept.size(), -1);
  for (int root = 0; root < n; ++root) {
    if (!(demand[static_cast<std::size_t>(root)] > 0)) continue;
    std::vector<const Packer::Tree*> mine;
    std::vector<double> weights;
    for (const auto& t : trees) {
      if (t.root == root) {
        mine.push_back(&t);
        weights.push_back(t.weight);
      }
    }
    if (mine.empty()) throw InternalError(fmt::format("tree packing: no tree for participant {}", root));
    const std::vector<int> chunks = apportion(weights, options.chunks);
    std::vector<WeightedTree> rooted;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (chunks[i] == 0) continue;
      WeightedTree w{root, mine[i]->parent_edge, chunks[i]};
      for (int& e : w.parent_edge) {
        if (e < 0) continue;
        if (renumber[static_cast<std::size_t>(e)] < 0) {
          renumber[static_cast<std::size_t>(e)] = static_cast<int>(out.edges.size());
          out.edges.push_back(kept[static_cast<std::size_t>(e)]);
        }
        e = renumber[static_cast<std::size_t>(e)];
      }
      rooted.push_back(std::move(w));
    }
    std::stable_sort(rooted.begin(), rooted.end(),
                     [](const WeightedTree& a, const WeightedTree& b) { return a.chunks > b.chunks; });
    out.trees.insert(out.trees.end(), rooted.begin(), rooted.end());
  }
  return out;
}

void check_inputs(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates,
                  const PackingOptions& options) {
  ARTUNE_CHECK(rates.size() == topo.links().size(),
               fmt::format("tree packing: {} link rates for {} links", rates.size(), topo.links().size()));
  ARTUNE_CHECK(options.chunks >= 1, fmt::format("tree packing: {} chunks per block", options.chunks));
  if (participants.size() > static_cast<std::size_t>(kMaxTreePackingParticipants)) {
    throw InvalidInput(fmt::format("topology '{}': tree packing takes at most {} GPUs of one machine ({} given)",
                                   topo.name(), kMaxTreePackingParticipants, participants.size()));
  }
}

TreePacking single(int chunks, bool toward_root) {
  TreePacking out;
  out.toward_root = toward_root;
  out.chunks = chunks;
  out.trees.push_back(WeightedTree{0, {-1}, chunks});
  return out;
}

}  // namespace

TreePacking pack_trees(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates,
                       bool toward_root, const PackingOptions& options) {
  check_inputs(topo, participants, rates, options);
  const int n = static_cast<int>(participants.size());
  if (n < 2) return n == 1 ? single(options.chunks, toward_root) : TreePacking{toward_root, options.chunks, 0, 0, {}, {}};
  const std::vector<TreeEdge> edges = candidate_edges(topo, participants, rates, options.staging);
  Capacities lp;
  const std::vector<int> reverse = reverse_edges(edges);
  if (toward_root && mirrored(topo, edges, reverse, rates)) {
    // The out-trees' LP, each edge's rate given to its reverse: the same trees with the data the other way.
    const Capacities out = solve_lp(topo, n, edges, rates, false);
    lp.rate = out.rate;
    lp.y.assign(edges.size(), 0.0);
    for (std::size_t e = 0; e < edges.size(); ++e) lp.y[static_cast<std::size_t>(reverse[e])] = out.y[e];
  } else {
    lp = solve_lp(topo, n, edges, rates, toward_root);
  }
  return decompose(n, edges, lp.y, lp.rate, toward_root, std::vector<double>(static_cast<std::size_t>(n), 1.0),
                   spread_cut(topo, participants, rates, toward_root).rate_gbps, options);
}

namespace {

// Roots a reduce-broadcast tree at its centre. Such a tree is a spanning tree whose every edge carries the
// tree's share once each way (the LP gave each edge one rate for both directions), so any participant can be its
// root with the same load on every link; what the root sets is the pipeline's depth, the transfers a piece passes
// up to the root and back down. The centre has the least eccentricity in transfers (1 per route, 2 per edge
// staged through a CPU); ties keep the LP's root, then the lowest index. A path of six participants rooted at
// one end is five hops deep, at its middle three. The re-rooted edges are the reverse `candidates`.
void recentre(TreePacking& p, WeightedTree& tree, const std::vector<TreeEdge>& candidates) {
  const int n = static_cast<int>(tree.parent_edge.size());
  struct Arc {
    int to, via, cost;
  };
  std::vector<std::vector<Arc>> adjacent(static_cast<std::size_t>(n));
  for (int v = 0; v < n; ++v) {
    const int e = tree.parent_edge[static_cast<std::size_t>(v)];
    if (e < 0) continue;
    const TreeEdge& edge = p.edges[static_cast<std::size_t>(e)];
    const int cost = edge.via >= 0 ? 2 : 1;
    adjacent[static_cast<std::size_t>(edge.from)].push_back({edge.to, edge.via, cost});
    adjacent[static_cast<std::size_t>(edge.to)].push_back({edge.from, edge.via, cost});
  }
  // Distances from `from` over the tree, with each participant's parent arc toward `from`.
  const auto walk = [&](int from, std::vector<int>* parent, std::vector<int>* via) {
    std::vector<int> dist(static_cast<std::size_t>(n), -1);
    std::vector<int> stack{from};
    dist[static_cast<std::size_t>(from)] = 0;
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      for (const Arc& a : adjacent[static_cast<std::size_t>(u)]) {
        if (dist[static_cast<std::size_t>(a.to)] >= 0) continue;
        dist[static_cast<std::size_t>(a.to)] = dist[static_cast<std::size_t>(u)] + a.cost;
        if (parent != nullptr) (*parent)[static_cast<std::size_t>(a.to)] = u;
        if (via != nullptr) (*via)[static_cast<std::size_t>(a.to)] = a.via;
        stack.push_back(a.to);
      }
    }
    return *std::max_element(dist.begin(), dist.end());
  };
  int centre = tree.root;
  int least = walk(tree.root, nullptr, nullptr);
  for (int v = 0; v < n; ++v) {
    if (v == tree.root) continue;
    const int eccentricity = walk(v, nullptr, nullptr);
    if (eccentricity < least) {
      least = eccentricity;
      centre = v;
    }
  }
  if (centre == tree.root) return;
  std::vector<int> parent(static_cast<std::size_t>(n), -1), via(static_cast<std::size_t>(n), -1);
  walk(centre, &parent, &via);
  std::vector<int> parent_edge(static_cast<std::size_t>(n), -1);
  for (int v = 0; v < n; ++v) {
    if (v == centre) continue;
    const auto same = [&](const TreeEdge& e) {
      return e.from == parent[static_cast<std::size_t>(v)] && e.to == v && e.via == via[static_cast<std::size_t>(v)];
    };
    auto it = std::find_if(p.edges.begin(), p.edges.end(), same);
    if (it == p.edges.end()) {
      const auto found = std::find_if(candidates.begin(), candidates.end(), same);
      ARTUNE_CHECK(found != candidates.end(),
                   fmt::format("tree packing: no edge from {} to {} to re-root a tree at {}",
                               parent[static_cast<std::size_t>(v)], v, centre));
      p.edges.push_back(*found);
      it = p.edges.end() - 1;
    }
    parent_edge[static_cast<std::size_t>(v)] = static_cast<int>(it - p.edges.begin());
  }
  tree.root = centre;
  tree.parent_edge = std::move(parent_edge);
}

}  // namespace

TreePacking pack_reduce_broadcast_trees(const Topology& topo, const std::vector<int>& participants,
                                        const LinkRates& rates, const PackingOptions& options) {
  check_inputs(topo, participants, rates, options);
  const int n = static_cast<int>(participants.size());
  if (n < 2) return n == 1 ? single(options.chunks, false) : TreePacking{false, options.chunks, 0, 0, {}, {}};
  const std::vector<TreeEdge> edges = candidate_edges(topo, participants, rates, options.staging);
  const std::vector<int> reverse = reverse_edges(edges);
  // The root: the participant with the most rate to the others over direct routes (the trees' value does not
  // depend on it, their depth does).
  std::vector<double> reach(static_cast<std::size_t>(n), 0.0);
  for (const TreeEdge& e : edges) {
    if (e.via >= 0) continue;
    double slowest = std::numeric_limits<double>::infinity();
    for (int l : e.links) slowest = std::min(slowest, rates[static_cast<std::size_t>(l)]);
    reach[static_cast<std::size_t>(e.from)] += slowest;
  }
  const int root = static_cast<int>(std::max_element(reach.begin(), reach.end()) - reach.begin());
  const Capacities lp = solve_reduce_broadcast_lp(topo, n, edges, reverse, rates, root);
  std::vector<double> demand(static_cast<std::size_t>(n), 0.0);
  demand[static_cast<std::size_t>(root)] = 1.0;
  TreePacking packing =
      decompose(n, edges, lp.y, lp.rate, false, demand,
                collective_bound(topo, participants, Collective::kAllReduce, rates).algbw_gbps, options);
  for (WeightedTree& tree : packing.trees) recentre(packing, tree, edges);
  return packing;
}

int max_depth(const TreePacking& packing) {
  int deepest = 0;
  for (const WeightedTree& t : packing.trees) {
    for (std::size_t v = 0; v < t.parent_edge.size(); ++v) {
      int d = 0;
      for (int u = static_cast<int>(v);
           t.parent_edge[static_cast<std::size_t>(u)] >= 0 && d <= static_cast<int>(t.parent_edge.size()); ++d) {
        const TreeEdge& e = packing.edges[static_cast<std::size_t>(t.parent_edge[static_cast<std::size_t>(u)])];
        u = packing.toward_root ? e.to : e.from;
      }
      deepest = std::max(deepest, d);
    }
  }
  return deepest;
}

double packed_trees_algbw(const Topology& topo, const std::vector<int>& participants, Collective collective,
                          const LinkRates& rates) {
  const int n = static_cast<int>(participants.size());
  if (n < 2) return 0;
  switch (collective) {
    case Collective::kAllReduce:
      return pack_reduce_broadcast_trees(topo, participants, rates).rate_gbps;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      return n * pack_trees(topo, participants, rates, collective == Collective::kReduceScatter).rate_gbps;
    default:
      throw InvalidInput(fmt::format("packed trees: {} is not a plan-level collective", to_string(collective)));
  }
}

}  // namespace artune::synthesis
