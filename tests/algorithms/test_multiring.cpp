// Multi-ring over link-disjoint Hamiltonian cycles.
#include <doctest/doctest.h>

#include <map>

#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

namespace {

// Directed lane use of a set of rings (local indices) must stay within each connection's lanes.
void check_disjoint(const Topology& t, const std::vector<std::vector<int>>& rings) {
  const auto gpus = t.gpus_of_machine(0);
  std::map<std::pair<int, int>, int> used;
  for (const auto& ring : rings) {
    REQUIRE(ring.size() == gpus.size());
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const int a = gpus[static_cast<std::size_t>(ring[i])];
      const int b = gpus[static_cast<std::size_t>(ring[(i + 1) % ring.size()])];
      CHECK(t.nvlink_lanes(a, b) > 0);  // NVLink only
      ++used[{a, b}];
    }
  }
  for (const auto& [edge, n] : used) CHECK(n <= t.nvlink_lanes(edge.first, edge.second));
}

}  // namespace

TEST_CASE("mring.dgx1_v100_six_nvlink_rings") {
  // 6 NVLink lanes per GPU: the NV2 cycle 0-3-2-1-5-6-7-4 carries 2 rings each way and the NV1
  // cycle 0-1-3-7-5-4-6-2 one each way: 6 rings, every lane of every link used once per direction.
  const Topology& t = topo("dgx1-v100");
  const auto rings = link_disjoint_rings(t, 0, 64);
  CHECK(rings.size() == 6);
  check_disjoint(t, rings);

  const Plan plan = build_verified("dgx1-v100", "mring", opts(6000));
  CHECK(count_of(plan, OpKind::kReduce) == 6 * 7 * 8);
  for (const Op& op : plan.ops) {
    CHECK(t.nvlink_lanes(plan.devices[static_cast<std::size_t>(op.src.device)].node,
                         plan.devices[static_cast<std::size_t>(op.dst.device)].node) > 0);
    CHECK(op.dst.count == 125);  // 6000 / 6 rings / 8 chunks
  }
  CHECK(throws_mentioning([] { build_plan(topo("dgx1-v100"), "mring#7", opts(100)); },
                          {"mring#7", "dgx1-v100", "holds 6"}));
}

TEST_CASE("mring.ring_counts") {
  // DGX-1 P100: 4 single NVLinks per GPU → 2 undirected cycles → 4 rings.
  CHECK(link_disjoint_rings(topo("dgx1-p100"), 0, 64).size() == 4);
  check_disjoint(topo("dgx1-p100"), link_disjoint_rings(topo("dgx1-p100"), 0, 64));
  // DGX-2: 6 lanes into the NVSwitch per GPU → 6 rings.
  CHECK(link_disjoint_rings(topo("dgx2"), 0, 64).size() == 6);
  // PCIe only: every GPU has one uplink, so one ring.
  CHECK(link_disjoint_rings(topo("pcie-8gpu"), 0, 64).size() == 1);
  // uniform:2: one link each way → one ring.
  CHECK(link_disjoint_rings(topo("uniform:2"), 0, 64).size() == 1);
  // Asking for fewer gives fewer.
  CHECK(link_disjoint_rings(topo("dgx1-v100"), 0, 2).size() == 2);
  CHECK(link_disjoint_rings(topo("dgx1-v100"), 0, 0).empty());
}

TEST_CASE("mring.split_and_avg") {
  const Plan plan = build_verified("dgx1-p100", "mring#3", opts(100, ReduceOp::kAvg));
  std::int64_t scaled = 0;
  for (const Op& op : ops_of(plan, OpKind::kScale)) scaled += op.dst.count;
  CHECK(scaled == 100);
  build_verified("4xdgx1-v100", "mring", opts(1000));
  build_verified("uniform:2x8", "mring#2", opts(13, ReduceOp::kAvg));
}
