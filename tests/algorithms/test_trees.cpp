// The trees family (issue 25): the packing (synthesis/tree_packing.hpp) reaches the cut bound where the
// routes allow it, every root's trees span the participants and split its block into whole chunks; the
// plans of all three collectives pass the static verifier on machines, subsets and clusters.

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <bit>
#include <numeric>
#include <set>
#include <string_view>
#include <tuple>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/synthesis/ring_packing.hpp"
#include "artune/algorithms/synthesis/tree_packing.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/link_rates.hpp"

using namespace artune;
using synthesis::TreePacking;

namespace {

// Every tree spans every participant without a cycle and carries some chunks.
void check_packing_spans(const TreePacking& p, int n) {
  for (const auto& t : p.trees) {
    REQUIRE(t.parent_edge.size() == static_cast<std::size_t>(n));
    CHECK(t.chunks > 0);
    CHECK(t.parent_edge[static_cast<std::size_t>(t.root)] == -1);
    for (int v = 0; v < n; ++v) {
      if (v == t.root) continue;
      int u = v;
      int steps = 0;
      while (u != t.root && steps <= n) {
        const int e = t.parent_edge[static_cast<std::size_t>(u)];
        REQUIRE(e >= 0);
        const auto& edge = p.edges[static_cast<std::size_t>(e)];
        CHECK((p.toward_root ? edge.from : edge.to) == u);
        u = p.toward_root ? edge.to : edge.from;
        ++steps;
      }
      CHECK(u == t.root);
    }
  }
}

// A reduce-broadcast tree is rooted at its centre: no participant reaches every other over the tree in fewer
// transfers (a route 1, an edge staged through a CPU 2) than its root does.
void check_rooted_at_centre(const TreePacking& p, const synthesis::WeightedTree& tree) {
  const int n = static_cast<int>(tree.parent_edge.size());
  std::vector<std::vector<std::pair<int, int>>> adjacent(static_cast<std::size_t>(n));
  for (int v = 0; v < n; ++v) {
    const int e = tree.parent_edge[static_cast<std::size_t>(v)];
    if (e < 0) continue;
    const auto& edge = p.edges[static_cast<std::size_t>(e)];
    const int cost = edge.via >= 0 ? 2 : 1;
    adjacent[static_cast<std::size_t>(edge.from)].push_back({edge.to, cost});
    adjacent[static_cast<std::size_t>(edge.to)].push_back({edge.from, cost});
  }
  const auto eccentricity = [&](int from) {
    std::vector<int> dist(static_cast<std::size_t>(n), -1);
    std::vector<int> stack{from};
    dist[static_cast<std::size_t>(from)] = 0;
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      for (const auto& [to, cost] : adjacent[static_cast<std::size_t>(u)]) {
        if (dist[static_cast<std::size_t>(to)] >= 0) continue;
        dist[static_cast<std::size_t>(to)] = dist[static_cast<std::size_t>(u)] + cost;
        stack.push_back(to);
      }
    }
    return *std::max_element(dist.begin(), dist.end());
  };
  const int at_root = eccentricity(tree.root);
  for (int v = 0; v < n; ++v) CHECK(eccentricity(v) >= at_root);
}

// Every root's trees: chunks summing to the block, each spanning every participant.
void check_packing(const TreePacking& p, int n) {
  check_packing_spans(p, n);
  std::vector<int> chunks(static_cast<std::size_t>(n), 0);
  for (const auto& t : p.trees) chunks[static_cast<std::size_t>(t.root)] += t.chunks;
  for (int c : chunks) CHECK(c == p.chunks);
}

// What the trees put on every link (each tree its weight's share of the rate, on the links of its edges, and
// with `both_ways` also on those of their reverses) stays within the link's rate, up to the rounding of the
// weights to chunks. A packing that placed only part of its demand fails here: the rounding to chunks scales
// the placed weights up to the whole block.
void check_link_loads(const Topology& t, const TreePacking& p, const LinkRates& rates, bool both_ways) {
  std::vector<double> load(rates.size(), 0.0);
  for (const auto& tree : p.trees) {
    const double share = p.rate_gbps * tree.chunks / p.chunks;
    for (int e : tree.parent_edge) {
      if (e < 0) continue;
      const auto& edge = p.edges[static_cast<std::size_t>(e)];
      for (int l : edge.links) load[static_cast<std::size_t>(l)] += share;
      if (both_ways) {
        for (int l : synthesis::reverse_links(t, t.gpus(), edge)) load[static_cast<std::size_t>(l)] += share;
      }
    }
  }
  const double rounding = p.rate_gbps * static_cast<double>(p.trees.size()) / p.chunks;
  for (std::size_t l = 0; l < rates.size(); ++l) {
    INFO("link " << l << " (" << t.links()[l].src << " -> " << t.links()[l].dst << ")");
    CHECK(load[l] <= rates[l] + rounding);
  }
}

Plan build(const Topology& t, Collective c, const char* spec, std::int64_t count, ReduceOp op, int segments = 1) {
  BuildOptions o;
  o.count = count;
  o.reduce_op = op;
  o.collective = c;
  o.segments = segments;
  return build_plan(t, parse_collective_spec(c, spec), o);  // verified
}

}  // namespace

TEST_CASE("trees.packing_reaches_the_bound") {
  for (const char* name :
       {"uniform:4", "dgx1-v100", "dgx1-v100[0,1,2,4,5]", "dgx1-p100", "dgx-a100", "pcie-8gpu", "dgx1-v100[1,2,3,4]"}) {
    const Topology t = load_topology(name);
    for (bool toward : {false, true}) {
      INFO(name << (toward ? " in-trees" : " out-trees"));
      const TreePacking p = synthesis::pack_trees(t, t.gpus(), usable_link_rates(t), toward);
      check_packing(p, static_cast<int>(t.gpus().size()));
      check_link_loads(t, p, usable_link_rates(t), false);
      // Routes with CPU staging reach the bound here: no cut counts a path no transfer takes.
      CHECK(p.rate_gbps == doctest::Approx(p.bound_gbps).epsilon(1e-6));
    }
  }
}

TEST_CASE("trees.shallow_and_mirrored") {
  // On dgx-h100 each root's trees are stars over the NVSwitch, one hop deep (an LP that stopped at rates of the
  // same value and cost on two rings made chains seven deep). In-trees on links with the same rate both ways are
  // the out-trees' rates reversed: every link carries in the in-trees what its partner carries in the out-trees.
  const Topology h100 = load_topology("dgx-h100");
  for (bool toward : {false, true}) {
    INFO((toward ? "in-trees" : "out-trees"));
    const TreePacking p = synthesis::pack_trees(h100, h100.gpus(), usable_link_rates(h100), toward);
    CHECK(synthesis::max_depth(p) == 1);
  }
  for (const char* name : {"dgx1-v100[0,1,2,4,5]", "dgx1-v100", "dgx-a100"}) {
    INFO(name);
    const Topology t = load_topology(name);
    const LinkRates rates = usable_link_rates(t);
    std::array<std::vector<double>, 2> load;
    for (bool toward : {false, true}) {
      const TreePacking p = synthesis::pack_trees(t, t.gpus(), rates, toward);
      auto& l = load[toward ? 1 : 0];
      l.assign(rates.size(), 0.0);
      for (const auto& tree : p.trees) {
        for (int e : tree.parent_edge) {
          if (e < 0) continue;
          for (int link : p.edges[static_cast<std::size_t>(e)].links)
            l[static_cast<std::size_t>(link)] += p.rate_gbps * tree.chunks / p.chunks;
        }
      }
    }
    for (std::size_t l = 0; l < rates.size(); ++l) {
      const auto& link = t.links()[l];
      for (std::size_t m = 0; m < rates.size(); ++m) {
        if (t.links()[m].src != link.dst || t.links()[m].dst != link.src) continue;
        INFO("link " << l << " (" << link.src << " -> " << link.dst << ")");
        CHECK(load[1][m] == doctest::Approx(load[0][l]).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("trees.reduce_broadcast_packing_reaches_the_bound") {
  // Trees spanning every participant, each rooted at its centre, the whole buffer in chunks; each tree edge loads
  // both directions. The trees' rate is the all-reduce's bound (split, two-way split, volume or partition): on
  // dgx1-v100[0,1,2,4] 45 GB/s, where the split cut allows 46 but the parts {gpu0} | {gpu1,gpu2} | {gpu4} as flows
  // 45 (gpu4's PCIe takes in only what crosses QPI), and on dgx1-v100[0,1,2,3,4,6] 47.5, where the partition
  // {gpu0-3} | {gpu4} | {gpu6} allows 49 between its parts and 47.5 as flows (docs/bound.md).
  for (const char* name : {"uniform:4", "dgx1-v100", "dgx1-v100[0,1,2,4,5]", "dgx1-v100[0,2,3,4,7]", "dgx1-p100",
                           "dgx-a100", "pcie-8gpu", "dgx1-v100[1,2,3,4]", "dgx1-v100[0,1,2,4]",
                           "dgx1-v100[0,1,2,3,4,6]"}) {
    INFO(name);
    const Topology t = load_topology(name);
    const int n = static_cast<int>(t.gpus().size());
    const TreePacking p = synthesis::pack_reduce_broadcast_trees(t, t.gpus(), usable_link_rates(t));
    REQUIRE(!p.trees.empty());
    int chunks = 0;
    for (const auto& tree : p.trees) {
      chunks += tree.chunks;
      check_rooted_at_centre(p, tree);
    }
    CHECK(chunks == p.chunks);
    check_packing_spans(p, n);
    check_link_loads(t, p, usable_link_rates(t), true);
    CHECK(p.rate_gbps == doctest::Approx(p.bound_gbps).epsilon(1e-6));
    if (std::string_view(name) == "dgx1-v100[0,1,2,4]") CHECK(p.rate_gbps == doctest::Approx(45));
    if (std::string_view(name) == "dgx1-v100[0,1,2,3,4,6]") CHECK(p.rate_gbps == doctest::Approx(47.5));
  }
}

TEST_CASE("trees.packed_trees_algbw") {
  // What `artune bound` prints beside the bound: the packings' LP rates as the collective's algbw, at the bound (the
  // whole DGX-1, a uniform machine, each collective; dgx1-v100[0,1,4], where gpu1's PCIe edges to gpu0 are staged
  // through cpu0 and load pcisw0's uplink both ways: 29 GB/s, the two-way split's, where the split cut allows 32).
  // Past kMaxTreePackingParticipants the packings refuse, in one line.
  for (const char* name : {"dgx1-v100", "uniform:4", "dgx1-v100[0,1,4]"}) {
    INFO(name);
    const Topology t = load_topology(name);
    const LinkRates rates = usable_link_rates(t);
    for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter}) {
      INFO(to_string(c));
      const double bound = collective_bound(t, t.gpus(), c, rates).algbw_gbps;
      const double packed = synthesis::packed_trees_algbw(t, t.gpus(), c, rates);
      CHECK(packed <= bound * (1 + 1e-9));
      CHECK(packed == doctest::Approx(bound).epsilon(1e-6));
      if (std::string_view(name) == "dgx1-v100[0,1,4]" && c == Collective::kAllReduce)
        CHECK(packed == doctest::Approx(29).epsilon(1e-6));
    }
  }
  const Topology one = load_topology("dgx1-v100[3]");
  CHECK(synthesis::packed_trees_algbw(one, one.gpus(), Collective::kAllReduce, usable_link_rates(one)) == 0);
  const Topology big = load_topology("uniform:25");
  CHECK_THROWS_WITH_AS(synthesis::packed_trees_algbw(big, big.gpus(), Collective::kAllReduce, usable_link_rates(big)),
                       doctest::Contains("at most 24 GPUs of one machine (25 given)"), InvalidInput);
}

TEST_CASE("trees.ring_packing") {
  // Every ring visits every participant once, each hop an edge from one to the next; the pieces sum to the
  // packing's; the rings' loads (pieces over the buffer, times the quantised rate) stay within every link's rate;
  // the LP's rate never passes the bound and equals it on machines whose GPUs all take in alike (every ring enters
  // each GPU once: its in-rate holds Σ x), where the whole pieces come within 1.5 % of it.
  // Below it: on dgx1-v100[0,1,2,4,5] (GPUs 2, 4 and 5 take in 72 GB/s each, 4 and 5 share one PCIe uplink) and on
  // pcie-8gpu, where every ring crosses QPI (6 GB/s) both ways.
  struct Case {
    std::string_view name;
    double rate;   // the LP's busbw (GB/s)
    double bound;  // the all-reduce's bound (busbw)
  };
  for (const Case c : {Case{"dgx1-v100", 126, 126}, Case{"dgx1-p100", 70, 70}, Case{"dgx-a100", 252, 252},
                       Case{"uniform:3", 52, 52}, Case{"uniform:2", 32, 32}, Case{"dgx1-v100[0,1,2,4,5]", 52, 79.2},
                       Case{"pcie-8gpu", 6, 10.5}}) {
    INFO(std::string(c.name));
    const Topology t = load_topology(std::string(c.name));
    const LinkRates rates = usable_link_rates(t);
    const int n = static_cast<int>(t.gpus().size());
    const synthesis::RingPacking p = synthesis::pack_rings(t, t.gpus(), rates);
    REQUIRE(!p.rings.empty());
    int pieces = 0;
    std::vector<double> load(rates.size(), 0.0);
    for (const auto& ring : p.rings) {
      CHECK(ring.chunks > 0);
      pieces += ring.chunks;
      REQUIRE(ring.order.size() == static_cast<std::size_t>(n));
      REQUIRE(ring.hops.size() == static_cast<std::size_t>(n));
      CHECK(std::set<int>(ring.order.begin(), ring.order.end()).size() == static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) {
        const auto& edge = p.edges[static_cast<std::size_t>(ring.hops[static_cast<std::size_t>(i)])];
        CHECK(edge.from == ring.order[static_cast<std::size_t>(i)]);
        CHECK(edge.to == ring.order[static_cast<std::size_t>((i + 1) % n)]);
        for (int l : edge.links) load[static_cast<std::size_t>(l)] += p.quantized_gbps * ring.chunks / p.chunks;
      }
    }
    CHECK(pieces == p.chunks);
    for (std::size_t l = 0; l < rates.size(); ++l) CHECK(load[l] <= rates[l] * (1 + 1e-9));
    CHECK(p.quantized_gbps <= p.rate_gbps * (1 + 1e-9));
    CHECK(p.rate_gbps <= p.bound_gbps * (1 + 1e-9));
    CHECK(p.rate_gbps == doctest::Approx(c.rate).epsilon(1e-6));
    CHECK(p.bound_gbps == doctest::Approx(c.bound).epsilon(1e-6));
    if (c.rate == c.bound) CHECK(p.quantized_gbps >= 0.985 * p.rate_gbps);
  }
  const Topology thirteen = load_topology("uniform:13");
  CHECK_THROWS_AS(synthesis::pack_rings(thirteen, thirteen.gpus(), usable_link_rates(thirteen)), InvalidInput);
}

TEST_CASE("trees.exact_packing_of_two_gpus") {
  // uniform:2: an NVLink of 25 GB/s and, through the CPU's memory, PCIe of 12 GB/s each way: the rate per
  // block is 37, split 25:12 between a direct tree and a staged one: 692 and 332 chunks of 1024.
  const Topology t = load_topology("uniform:2");
  const TreePacking p = synthesis::pack_trees(t, t.gpus(), nominal_link_rates(t), false);
  CHECK(p.rate_gbps == doctest::Approx(37));
  REQUIRE(p.trees.size() == 4);
  CHECK(p.trees[0].chunks == 692);
  CHECK(p.trees[1].chunks == 332);
  const auto& staged = p.edges[static_cast<std::size_t>(p.trees[1].parent_edge[1])];
  CHECK(staged.via == t.find_node("cpu0"));
  CHECK(staged.links.size() == 2);
  CHECK(p.edges[static_cast<std::size_t>(p.trees[0].parent_edge[1])].via == -1);
  // The plans pack at the usable rates (NVLink at 80 %: 20 GB/s against PCIe's 12): 640 and 384 chunks. The
  // all-reduce's trees carry their pieces whole: per root and phase one transfer over NVLink (its 5/8 of the
  // block) and two through cpu0's scratch (3/8), up into scratch of the root and reduced there (one local reduce
  // per tree), and copied down: 16 ops.
  const Plan ar = build(t, Collective::kAllReduce, "trees", 1024, ReduceOp::kSum);
  CHECK(ar.ops.size() == 16);
  int local_reduces = 0;
  for (const Op& op : ar.ops) local_reduces += op.kind == OpKind::kReduce && op.src.device == op.dst.device;
  CHECK(local_reduces == 4);
  CHECK(ar.devices.size() == 3);  // the two GPUs and cpu0
  CHECK(ar.ops[0].src.count == 320);
  // The all-gather runs each tree as copies by weight (32 per block): 20 over NVLink, 12 staged (24 ops), per root.
  const Plan ag = build(t, Collective::kAllGather, "trees", 1024, ReduceOp::kSum);
  CHECK(ag.ops.size() == 2 * (20 + 24));
}

TEST_CASE("trees.plans_verify") {
  for (const char* name : {"uniform:3", "dgx1-v100[0,1,2,4,5]", "dgx1-v100", "dgx-h100", "uniform:2x2"}) {
    const Topology t = load_topology(name);
    for (std::int64_t count : {1, 7, 1031}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        INFO(name << " count " << count << " " << to_string(op));
        build(t, Collective::kAllReduce, "trees", count, op);
        build(t, Collective::kAllReduce, "trees#3", count, op, 2);
        build(t, Collective::kAllReduce, "trees2", count, op, 3);
        build(t, Collective::kAllReduce, "rbtrees", count, op, 4);
        if (t.gpus().size() <= synthesis::kMaxRingPackingParticipants)
          build(t, Collective::kAllReduce, "prings", count, op, 2);
        build(t, Collective::kAllGather, "trees", count, op);
        build(t, Collective::kReduceScatter, "trees", count, op, 2);
      }
    }
  }
}

TEST_CASE("trees.reduce_broadcast_copies") {
  // rbtrees#C cuts the buffer into C equal pieces (default 64), apportioned to the trees by weight and balanced over
  // the links: every transfer of the plan moves one piece; the pieces of a tree sum to about its weight's share; at
  // #1 the whole buffer goes up and down one tree. Every plan verified (build).
  const Topology t = load_topology("dgx1-v100[0,1,2,3,4,5]");
  const auto copies_of = [](const Plan& p) {
    return std::count_if(p.ops.begin(), p.ops.end(), [](const Op& op) { return op.kind == OpKind::kCopy; });
  };
  const std::int64_t count = 1 << 20;
  const Plan fallback = build(t, Collective::kAllReduce, "rbtrees", count, ReduceOp::kSum);
  const Plan sixty_four = build(t, Collective::kAllReduce, "rbtrees#64", count, ReduceOp::kSum);
  CHECK(fallback.ops == sixty_four.ops);  // the plans' labels differ (the spec's text), not their ops
  const Plan more = build(t, Collective::kAllReduce, "reduce-broadcast-trees#128", count, ReduceOp::kSum);
  const Plan one = build(t, Collective::kAllReduce, "rbtrees#1", count, ReduceOp::kSum);
  for (const auto& [plan, pieces] : {std::pair<const Plan*, std::int64_t>{&sixty_four, 64}, {&more, 128}, {&one, 1}}) {
    for (const Op& op : plan->ops) {
      if (op.kind == OpKind::kCopy) CHECK(op.dst.count == count / pieces);
    }
  }
  const TreePacking p = synthesis::pack_reduce_broadcast_trees(t, t.gpus(), usable_link_rates(t));
  int most_staged = 0;  // the most edges of one tree staged through a CPU: two copies each way
  for (const synthesis::WeightedTree& tree : p.trees) {
    int staged = 0;
    for (int e : tree.parent_edge) staged += e >= 0 && p.edges[static_cast<std::size_t>(e)].via >= 0 ? 1 : 0;
    most_staged = std::max(most_staged, staged);
  }
  // One piece, one tree: each of its 5 edges carries it up and down, a staged edge in two transfers each way.
  CHECK(copies_of(one) >= 2 * 5);
  CHECK(copies_of(one) <= 2 * 5 + 2 * most_staged);
  CHECK(copies_of(more) > copies_of(sixty_four));
  CHECK(copies_of(sixty_four) > copies_of(one));
  CHECK(to_string(parse_collective_spec(Collective::kAllReduce, "reduce-broadcast-trees#128")) == "rbtrees#128");
  CHECK_THROWS_AS(parse_collective_spec(Collective::kAllReduce, "trees2#2"), InvalidInput);
}

TEST_CASE("trees.apportion_by_load") {
  // Two items of equal weight, each over a link of its own (rates 1 and 2), three pieces: largest remainders give
  // the first two (loads 2 and 0.5 pieces per unit of rate), and one moves to the second (1 and 1); a second move
  // would load the second link 1.5. An item crossing a link twice loads it twice: two pieces split evenly would
  // load the first link 2, both on the second item load the second 1.
  const LinkRates rates = {1.0, 2.0};
  const synthesis::LoadedPieces even = synthesis::apportion_by_load({0.5, 0.5}, 3, {{{0, 1}}, {{1, 1}}}, rates);
  CHECK(even.pieces == std::vector<int>{1, 2});
  CHECK(even.max_load == doctest::Approx(1.0));
  const synthesis::LoadedPieces twice = synthesis::apportion_by_load({0.5, 0.5}, 2, {{{0, 2}}, {{1, 1}}}, rates);
  CHECK(twice.pieces == std::vector<int>{0, 2});
  CHECK(twice.max_load == doctest::Approx(1.0));
}

TEST_CASE("trees.slices") {
  // trees#P: the buffer in P slices, each run through every phase as the whole plan of its slice (P times the
  // ops, each slice's on its own range), and each step of a slice after the same step of the slice before, so
  // that the phases overlap as a pipeline. One slice is the plan of `trees`. Every plan verified (build).
  for (const char* name : {"uniform:2x2", "dgx1-v100[0,1,2,4,5]", "2xpcie-8gpu"}) {
    INFO(name);
    const Topology t = load_topology(name);
    const std::int64_t count = 4096 * 3;
    const Plan whole = build(t, Collective::kAllReduce, "trees", count, ReduceOp::kAvg);
    CHECK(build(t, Collective::kAllReduce, "trees#1", count, ReduceOp::kAvg).ops == whole.ops);
    CHECK(to_string(parse_collective_spec(Collective::kAllReduce, "tree-packing#4")) == "trees#4");
    const int slices = 3;
    const Plan sliced = build(t, Collective::kAllReduce, "trees#3", count, ReduceOp::kAvg);
    REQUIRE(sliced.ops.size() == slices * whole.ops.size());
    const std::size_t per = whole.ops.size();
    const std::int64_t length = count / slices;
    for (std::size_t i = 0; i < sliced.ops.size(); ++i) {
      const Op& op = sliced.ops[i];
      const auto k = static_cast<std::int64_t>(i / per);
      // The slice's own range of the users' buffers (buffer 0; scratch and staging buffers are the op's own).
      for (const Location* l : {&op.src, &op.dst}) {
        if (l->buffer != 0 || (l == &op.src && op.kind == OpKind::kScale)) continue;
        CHECK(l->offset >= k * length);
        CHECK(l->offset + l->count <= (k + 1) * length);
      }
      if (k > 0) CHECK(std::binary_search(op.deps.begin(), op.deps.end(), static_cast<int>(i - per)));
    }
  }
  // More slices than elements: the empty ones are left out (two elements, two slices' plans).
  const Topology t = load_topology("uniform:2x2");
  CHECK(build(t, Collective::kAllReduce, "trees#64", 2, ReduceOp::kSum).ops.size() ==
        2 * build(t, Collective::kAllReduce, "trees", 1, ReduceOp::kSum).ops.size());
  // Refused up front, in one line, where the slices would pass the plan's op limit.
  BuildOptions o;
  o.count = 1 << 20;
  CHECK_THROWS_WITH_AS(build_plan(load_topology("128xdgx-h100"), parse_spec("trees#8"), o),
                       doctest::Contains("8 slices of"), InvalidInput);
  CHECK_THROWS_AS(parse_collective_spec(Collective::kAllGather, "trees#2"), InvalidInput);
}

TEST_CASE("trees.same_spec_same_plan") {
  // The packing depends on the topology and the participants alone (the usable rates), cached or not.
  const Topology t = load_topology("dgx1-v100[0,1,2,4,5]");
  const Plan a = build(t, Collective::kAllReduce, "trees", 4096, ReduceOp::kSum);
  const Plan b = build(load_topology("dgx1-v100[0,1,2,4,5]"), Collective::kAllReduce, "trees", 4096, ReduceOp::kSum);
  CHECK(a == b);
}

TEST_CASE("trees.refuses_uneven_blocks") {
  const Topology t = load_topology("uniform:3");
  BuildOptions o;
  o.count = 10;
  o.collective = Collective::kAllGather;
  o.blocks = {2, 3, 5};
  CHECK_THROWS_AS(build_plan(t, parse_collective_spec(Collective::kAllGather, "trees"), o), InvalidInput);
}


TEST_CASE("trees.every_dgx1_subset_within_the_link_rates") {
  // Every packing of every subset of 2-8 GPUs of both DGX-1s places its whole demand within the links' rates
  // (all-gather, reduce-scatter and reduce-broadcast trees: 3 × 247 × 2 packings).
  for (const char* machine : {"dgx1-v100", "dgx1-p100"}) {
    for (unsigned mask = 0; mask < 256; ++mask) {
      if (std::popcount(mask) < 2) continue;
      std::string name = std::string(machine) + "[";
      for (int g = 0; g < 8; ++g) {
        if (mask & (1u << g)) name += std::to_string(g) + ",";
      }
      name.back() = ']';
      INFO(name);
      const Topology t = load_topology(name);
      const LinkRates rates = usable_link_rates(t);
      for (bool toward : {false, true}) check_link_loads(t, synthesis::pack_trees(t, t.gpus(), rates, toward), rates, false);
      const TreePacking rb = synthesis::pack_reduce_broadcast_trees(t, t.gpus(), rates);
      check_link_loads(t, rb, rates, true);
      CHECK(rb.rate_gbps <= rb.bound_gbps * (1 + 1e-9));
    }
  }
}

// A cluster plan's transfers between two GPUs of one machine, per machine (kind, src local index, dst local index,
// src offset, count); each op that crosses machines goes to `crossing` instead.
using Transfer = std::tuple<int, int, int, std::int64_t, std::int64_t>;
std::vector<std::multiset<Transfer>> transfers_inside(
    const Topology& t, const Plan& plan, const std::function<void(const Op&, const Node&, const Node&)>& crossing) {
  std::vector<std::multiset<Transfer>> inside(static_cast<std::size_t>(t.machine_count()));
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kCopy && op.kind != OpKind::kReduce) continue;
    const Node& a = t.nodes()[static_cast<std::size_t>(plan.devices[static_cast<std::size_t>(op.src.device)].node)];
    const Node& b = t.nodes()[static_cast<std::size_t>(plan.devices[static_cast<std::size_t>(op.dst.device)].node)];
    if (a.machine != b.machine) {
      crossing(op, a, b);
      continue;
    }
    if (a.kind != NodeKind::kGpu || b.kind != NodeKind::kGpu || op.src.device == op.dst.device) continue;
    inside[static_cast<std::size_t>(a.machine)].insert(
        {static_cast<int>(op.kind), a.local_index, b.local_index, op.src.offset, op.src.count});
  }
  return inside;
}

TEST_CASE("trees.across_machines") {
  // On a cluster of machines alike, `trees` reduce-scatters in every machine up its in-trees, all-reduces each
  // block by a ring of the GPUs holding it (the same local GPU of every machine), and all-gathers down the
  // out-trees. Every machine runs the same trees, carried from the first: machine 1's transfers are machine 0's,
  // GPU for GPU; only the rings cross machines (2 machines: 2 reduces and 2 copies per local GPU).
  const Topology t = load_topology("2xpcie-8gpu");
  const Plan plan = build(t, Collective::kAllReduce, "trees", 4096, ReduceOp::kAvg);
  int across = 0;
  const auto inside = transfers_inside(t, plan, [&](const Op&, const Node& a, const Node& b) {
    ++across;
    CHECK(a.local_index == b.local_index);  // a rail: GPU k of one machine to GPU k of the other
  });
  CHECK(across == 8 * 4);
  CHECK(!inside[0].empty());
  CHECK(inside[0] == inside[1]);
}

TEST_CASE("trees.collectives_across_machines") {
  // All-gather on a cluster of machines alike: a ring across the machines per local GPU (each GPU sends its block
  // to the same GPU of the next machine, M − 1 steps), then every machine sends each row of blocks down its
  // out-trees; reduce-scatter runs it in reverse (in-trees per row, then the rings reduce). Only whole blocks of
  // the plan cross machines, each between GPUs of the same local index, and every machine runs the same trees.
  for (const char* name : {"2xpcie-8gpu", "uniform:3x4"}) {
    const Topology t = load_topology(name);
    const int machines = t.machine_count();
    const int gpus = static_cast<int>(t.gpus().size()) / machines;
    const std::int64_t count = 48 * 1024;
    for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
      INFO(name << " " << to_string(c));
      const Plan plan = build(t, c, "trees", count, ReduceOp::kSum);
      const OpKind crossing = c == Collective::kAllGather ? OpKind::kCopy : OpKind::kReduce;
      int across = 0;
      const auto inside = transfers_inside(t, plan, [&](const Op& op, const Node& a, const Node& b) {
        ++across;
        CHECK(op.kind == crossing);
        CHECK(a.local_index == b.local_index);
        CHECK(op.src.count == count / (machines * gpus));
      });
      CHECK(across == gpus * machines * (machines - 1));
      CHECK(!inside[0].empty());
      for (int m = 1; m < machines; ++m) CHECK(inside[static_cast<std::size_t>(m)] == inside[0]);
    }
  }
}

TEST_CASE("trees.machine_rates_beside_the_network") {
  // 2xpcie-8gpu: two GPUs and one EDR NIC (12.5 GB/s, 11.25 usable) under each PCIe switch, so each GPU's share
  // of its NIC is 5.625 GB/s; the links between a GPU and its NIC keep the rest for the trees, the NIC's own PCIe
  // link 12 − 11.25, and the links off the NIC paths (the switch's uplink to its CPU) all of theirs.
  const Topology t = load_topology("2xpcie-8gpu");
  const std::vector<int> machine0 = t.gpus_of_machine(0);
  const LinkRates usable = usable_link_rates(t);
  const LinkRates left = rates_beside_network(t, machine0);
  // The rate of the link between two adjacent devices (their route is that one link).
  auto rate_of = [](const Topology& topo, const LinkRates& rates, const char* a, const char* b) {
    const std::vector<int>& links = topo.route(topo.find_node(a), topo.find_node(b)).links;
    REQUIRE(links.size() == 1);
    return rates[static_cast<std::size_t>(links.front())];
  };
  CHECK(rate_of(t, usable, "m0/gpu0", "m0/pcisw0") == doctest::Approx(12.0));
  CHECK(rate_of(t, left, "m0/gpu0", "m0/pcisw0") == doctest::Approx(12.0 - 11.25 / 2));
  CHECK(rate_of(t, left, "m0/pcisw0", "m0/gpu1") == doctest::Approx(12.0 - 11.25 / 2));
  CHECK(rate_of(t, left, "m0/pcisw0", "m0/nic0") == doctest::Approx(12.0 - 11.25));
  CHECK(rate_of(t, left, "m0/nic0", "m0/pcisw0") == doctest::Approx(12.0 - 11.25));
  CHECK(rate_of(t, left, "m0/pcisw0", "m0/cpu0") == doctest::Approx(12.0));
  CHECK(rate_of(t, left, "m1/gpu0", "m1/pcisw0") == doctest::Approx(12.0));  // machine 1 is not asked about

  // A NIC of 50 GB/s under a switch with two GPUs on 12 GB/s links: the shares fill each GPU's only link (rate 0),
  // so the machine's trees take the whole rates and the plans of all three collectives still build (verified).
  const nlohmann::json machine = nlohmann::json::parse(R"({
    "name": "wide-nic", "description": "two PCIe GPUs and a 400 Gb/s NIC under one switch",
    "devices": [{"id": "gpu0", "kind": "gpu"}, {"id": "gpu1", "kind": "gpu"}, {"id": "sw", "kind": "pcie_switch"},
                {"id": "cpu0", "kind": "cpu"}, {"id": "nic0", "kind": "nic"}],
    "links": [{"a": "gpu0", "b": "sw", "kind": "pcie", "bandwidth": 12},
              {"a": "gpu1", "b": "sw", "kind": "pcie", "bandwidth": 12},
              {"a": "nic0", "b": "sw", "kind": "pcie", "bandwidth": 48},
              {"a": "sw", "b": "cpu0", "kind": "pcie", "bandwidth": 12}]})");
  const Topology one = topology_from_json(machine, "wide-nic");
  NetworkSpec net;
  net.nic_bandwidth_gbps = 50;
  const Topology wide = join_machines({one, one}, net, "2xwide-nic");
  const LinkRates wide_left = rates_beside_network(wide, wide.gpus_of_machine(0));
  CHECK(rate_of(wide, wide_left, "m0/gpu0", "m0/sw") == 0.0);
  for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce}) {
    INFO(to_string(c));
    const Plan plan = build(wide, c, "trees", 4 * 1024, ReduceOp::kSum, 4);
    CHECK(!plan.ops.empty());
  }
}
