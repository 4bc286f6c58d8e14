// The trees family (issue 25): the packing (synthesis/tree_packing.hpp) reaches the cut bound where the
// routes allow it, every root's trees span the participants and split its block into whole chunks; the
// plans of all three collectives pass the static verifier on machines, subsets and clusters.

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <numeric>
#include <set>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/synthesis/tree_packing.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/link_rates.hpp"

using namespace artune;
using synthesis::TreePacking;

namespace {

// Every root's trees: chunks summing to the block, each spanning every participant without a cycle.
void check_packing(const TreePacking& p, int n) {
  std::vector<int> chunks(static_cast<std::size_t>(n), 0);
  for (const auto& t : p.trees) {
    REQUIRE(t.parent_edge.size() == static_cast<std::size_t>(n));
    CHECK(t.chunks > 0);
    chunks[static_cast<std::size_t>(t.root)] += t.chunks;
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
  for (int c : chunks) CHECK(c == p.chunks);
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
      // Routes with CPU staging reach the bound here: no cut counts a path no transfer takes.
      CHECK(p.rate_gbps == doctest::Approx(p.bound_gbps).epsilon(1e-6));
    }
  }
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
  // block) and two through cpu0's scratch (3/8), reduced up and copied down: 12 ops.
  const Plan ar = build(t, Collective::kAllReduce, "trees", 1024, ReduceOp::kSum);
  CHECK(ar.ops.size() == 12);
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
        build(t, Collective::kAllReduce, "trees2", count, op, 3);
        build(t, Collective::kAllGather, "trees", count, op);
        build(t, Collective::kReduceScatter, "trees", count, op, 2);
      }
    }
  }
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
