// The min-cut bound (algorithms/synthesis/cut_bound.hpp) against closed forms: rings of equal links, a fully
// connected machine, a star through one switch, a two-machine cluster; the split cut where one slow link
// separates the GPUs; partitions into three parts that bind tighter than any cut; the max-flow wrapper itself.

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "artune/algorithms/synthesis/cut_bound.hpp"
#include "artune/algorithms/synthesis/max_flow.hpp"
#include "artune/algorithms/synthesis/tree_packing.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/link_rates.hpp"

using namespace artune;

namespace {

// N GPUs in a ring of NVLinks of `b` GB/s each way (or one way only).
Topology ring(int n, double b, bool both_ways) {
  Topology t;
  t.set_name(fmt::format("ring{}", n));
  for (int g = 0; g < n; ++g) t.add_node({fmt::format("gpu{}", g), NodeKind::kGpu, 0, g, -1, "", ""});
  for (int g = 0; g < n; ++g) {
    if (both_ways) {
      t.add_duplex_link(g, (g + 1) % n, LinkKind::kNvLink, b, 0.6);
    } else {
      t.add_link({g, (g + 1) % n, LinkKind::kNvLink, b, 0.6, 1});
    }
  }
  t.finalize();
  return t;
}

// N GPUs joined by one switch, `b` GB/s each way per GPU.
Topology star(int n, double b) {
  Topology t;
  t.set_name(fmt::format("star{}", n));
  for (int g = 0; g < n; ++g) t.add_node({fmt::format("gpu{}", g), NodeKind::kGpu, 0, g, -1, "", ""});
  const int sw = t.add_node({"nvswitch0", NodeKind::kNvSwitch, 0, 0, -1, "", ""});
  for (int g = 0; g < n; ++g) t.add_duplex_link(g, sw, LinkKind::kNvLink, b, 0.6);
  t.finalize();
  return t;
}

double busbw(const Topology& t, Collective c, bool in_network = false) {
  return collective_bound(t, {}, c, nominal_link_rates(t), in_network).busbw_gbps;
}

}  // namespace

TEST_CASE("cut_bound.max_flow") {
  synthesis::FlowNetwork f(4);
  f.add_arc(0, 1, 3);
  f.add_arc(0, 2, 2);
  f.add_arc(1, 2, 1);
  f.add_arc(1, 3, 2);
  f.add_arc(2, 3, 3);
  std::vector<bool> side;
  CHECK(f.max_flow(0, 3, &side) == doctest::Approx(5));
  CHECK(side[0]);
  CHECK_FALSE(side[3]);
  CHECK(f.ends(2) == std::pair<int, int>{1, 2});
  f.set_capacity(0, 0);
  CHECK(f.max_flow(0, 3) == doctest::Approx(2));
}

TEST_CASE("cut_bound.ring_of_equal_links") {
  for (int n : {2, 3, 5, 8}) {
    INFO("ring of " << n);
    // Both ways: the cut around one GPU lets in 2b; every collective's busbw is 2b (the classic
    // 2(n−1)/n·M/B all-reduce bound with B = 2b, met by two rings, one each way; two GPUs get two links).
    const Topology both = ring(n, 10, true);
    CHECK(busbw(both, Collective::kAllGather) == doctest::Approx(20));
    CHECK(busbw(both, Collective::kReduceScatter) == doctest::Approx(20));
    CHECK(busbw(both, Collective::kAllReduce) == doctest::Approx(20));
    // One way: b.
    const Topology one = ring(n, 10, false);
    CHECK(busbw(one, Collective::kAllGather) == doctest::Approx(10));
    CHECK(busbw(one, Collective::kAllReduce) == doctest::Approx(10));
  }
}

TEST_CASE("cut_bound.fully_connected_uniform") {
  for (int n : {2, 4, 8}) {
    INFO("uniform:" << n);
    // Every GPU takes in (n−1)·25 GB/s of NVLink and 12 of PCIe from the CPU: that is busbw, whatever the collective.
    const Topology t = load_topology(fmt::format("uniform:{}", n));
    const double ingress = (n - 1) * 25.0 + 12.0;
    CHECK(busbw(t, Collective::kAllGather) == doctest::Approx(ingress));
    CHECK(busbw(t, Collective::kReduceScatter) == doctest::Approx(ingress));
    CHECK(busbw(t, Collective::kAllReduce) == doctest::Approx(ingress));
    // At the usable rates: NVLink at 80 %.
    CHECK(collective_bound(t, {}, Collective::kAllGather, usable_link_rates(t)).busbw_gbps ==
          doctest::Approx((n - 1) * 20.0 + 12.0));
  }
}

TEST_CASE("cut_bound.star_through_one_switch") {
  for (int n : {2, 3, 8}) {
    INFO("star of " << n);
    const Topology t = star(n, 50);
    CHECK(busbw(t, Collective::kAllGather) == doctest::Approx(50));
    CHECK(busbw(t, Collective::kReduceScatter) == doctest::Approx(50));
    CHECK(busbw(t, Collective::kAllReduce) == doctest::Approx(50));
    // Reducing in the switch: M crosses each GPU's link each way, busbw = 2(n−1)/n · 50.
    const CollectiveBound nvls = collective_bound(t, {}, Collective::kAllReduce, nominal_link_rates(t), true);
    CHECK(nvls.in_network);
    CHECK(nvls.busbw_gbps == doctest::Approx(2.0 * (n - 1) / n * 50));
    CHECK(nvls.algbw_gbps == doctest::Approx(50));
  }
}

TEST_CASE("cut_bound.two_machines") {
  // uniform:2x4: a machine reaches the other through its one NIC, behind a 12 GB/s PCIe link: 4 blocks
  // leave a machine over it.
  const Topology t = load_topology("uniform:2x4");
  const BoundCut ag = spread_cut(t, {}, nominal_link_rates(t));
  CHECK(ag.rate_gbps == doctest::Approx(12.0 / 4));
  CHECK(ag.ranks_inside == 4);
  CHECK(busbw(t, Collective::kAllGather) == doctest::Approx(7 * 12.0 / 4));
  // All-reduce: every result crosses that link: algbw 12.
  const CollectiveBound ar = collective_bound(t, {}, Collective::kAllReduce, nominal_link_rates(t));
  CHECK(ar.algbw_gbps == doctest::Approx(12));
  CHECK(ar.cuts.front().what == "split");
}

TEST_CASE("cut_bound.dgx1") {
  const Topology t = load_topology("dgx1-v100");
  const LinkRates usable = usable_link_rates(t);
  // Every GPU takes in 6 NVLink lanes (120 GB/s usable) and PCIe; two GPUs under one PCIe switch share its
  // uplink (12 GB/s): 7 blocks each over 2·120 + 12 → 18 GB/s per block.
  const BoundCut ag = spread_cut(t, {}, usable);
  CHECK(ag.rate_gbps == doctest::Approx(18));
  CHECK(ag.receivers.size() == 2);
  CHECK(collective_bound(t, {}, Collective::kAllGather, usable).busbw_gbps == doctest::Approx(126));
  // All-reduce: 14 buffers into the GPUs, which take in 8·120 + 4·12 GB/s.
  const CollectiveBound ar = collective_bound(t, {}, Collective::kAllReduce, usable);
  CHECK(ar.busbw_gbps == doctest::Approx(126));
  CHECK(ar.cuts.front().what == "volume");
  // GPUs 1-3 and 4: only QPI (6 GB/s) between the sockets: every result crosses it, algbw 6, busbw 9.
  const Topology q = load_topology("dgx1-v100[1,2,3,4]");
  const CollectiveBound qb = collective_bound(q, {}, Collective::kAllReduce, usable_link_rates(q));
  CHECK(qb.algbw_gbps == doctest::Approx(6));
  CHECK(qb.busbw_gbps == doctest::Approx(9));
  CHECK(qb.cuts.front().what == "split");
  CHECK(cut_text(q, qb.cuts.front()) == "{gpu1,gpu2,gpu3} -> {gpu4}: 1 links (smp), 6.00 GB/s");
}

TEST_CASE("cut_bound.cluster_of_dgx1") {
  // Four DGX-1s with 4 EDR NICs each (11.25 GB/s usable): three machines send the fourth their 24 blocks over
  // its 4 NICs. The machines are alike, so the max flows run to the first machine's GPUs only.
  const Topology t = load_topology("4xdgx1-v100");
  const BoundCut ag = spread_cut(t, {}, usable_link_rates(t));
  CHECK(ag.rate_gbps == doctest::Approx(4 * 11.25 / 24));
  CHECK(ag.ranks_inside == 24);
  CHECK(ag.links.size() == 4);
}

TEST_CASE("cut_bound.partition_of_three_pairs") {
  // Three pairs of GPUs, 100 GB/s inside each, joined in a triangle by 10 GB/s links. A cut around one pair lets
  // in 20 (algbw ≤ 20); the three pairs as parts have 3·2·10 = 60 GB/s between them and every byte crosses
  // between parts 2·(3−1) times: algbw ≤ 15, busbw 15·2·5/6 = 25. Reduce-broadcast trees meet it: each tree
  // crosses two of the triangle's links, 1.5 trees of 10 GB/s.
  Topology t;
  t.set_name("three-pairs");
  for (int g = 0; g < 6; ++g) t.add_node({fmt::format("gpu{}", g), NodeKind::kGpu, 0, g, -1, "", ""});
  for (int pair = 0; pair < 3; ++pair) {
    t.add_duplex_link(2 * pair, 2 * pair + 1, LinkKind::kNvLink, 100, 0.6);
    t.add_duplex_link(2 * pair + 1, (2 * pair + 2) % 6, LinkKind::kNvLink, 10, 0.6);
  }
  t.finalize();
  const LinkRates rates = nominal_link_rates(t);
  CHECK(splitting_cut(t, {}, rates).rate_gbps == doctest::Approx(20));
  const BoundCut part = partition_cut(t, {}, rates);
  CHECK(part.rate_gbps == doctest::Approx(15));
  CHECK(part.gbps == doctest::Approx(60));
  CHECK(part.links.size() == 6);
  CHECK(part.parts == std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}});
  const CollectiveBound b = collective_bound(t, {}, Collective::kAllReduce, rates);
  CHECK(b.algbw_gbps == doctest::Approx(15));
  CHECK(b.busbw_gbps == doctest::Approx(25));
  CHECK(b.cuts.front().what == "partition");
  CHECK(cut_text(t, b.cuts.front()) ==
        "{gpu0,gpu1} | {gpu2,gpu3} | {gpu4,gpu5}: 6 links (nvlink) between the parts, 60.00 GB/s");
  const synthesis::TreePacking trees = synthesis::pack_reduce_broadcast_trees(t, t.gpus(), rates);
  CHECK(trees.rate_gbps == doctest::Approx(15));
  // Fewer than three participants, or more than the search covers: no partition bound.
  CHECK(partition_cut(t, {0, 2}, rates).rate_gbps == std::numeric_limits<double>::infinity());
  const Topology big = load_topology("uniform:9");
  CHECK(partition_cut(big, {}, nominal_link_rates(big)).rate_gbps == std::numeric_limits<double>::infinity());
}

TEST_CASE("cut_bound.partition_of_a_dgx1_subset") {
  // dgx1-v100[0,1,2,3,4,6]: the NVLink quad 0-3, gpu4 (two lanes to gpu0, one to gpu6) and gpu6 (one lane to
  // gpu2). No cut binds as much as the three of them as parts: per direction 40 + 20 + 20 GB/s of NVLink, gpu6's
  // PCIe switch to cpu1 (12) and QPI (6), 98 GB/s each way for 4 buffers: algbw 49 where the split cut gives 52.
  const Topology t = load_topology("dgx1-v100[0,1,2,3,4,6]");
  const CollectiveBound b = collective_bound(t, {}, Collective::kAllReduce, usable_link_rates(t));
  CHECK(b.algbw_gbps == doctest::Approx(49));
  REQUIRE(b.cuts.front().what == "partition");
  CHECK(b.cuts.front().gbps == doctest::Approx(196));
  CHECK(cut_text(t, b.cuts.front()).rfind("{gpu0,gpu1,gpu2,gpu3} | {gpu4} | {gpu6}: 10 links", 0) == 0);
  CHECK(splitting_cut(t, {}, usable_link_rates(t)).rate_gbps == doctest::Approx(52));
  // Every device in a part: the NICs (leaves, peeled off the search) with their PCIe switches.
  const auto id = [&](int v) { return t.nodes()[static_cast<std::size_t>(v)].id; };
  std::vector<std::vector<std::string>> parts;
  for (const std::vector<int>& part : b.cuts.front().parts) {
    parts.emplace_back();
    for (int v : part) parts.back().push_back(id(v));
  }
  CHECK(parts == std::vector<std::vector<std::string>>{
                     {"gpu0", "gpu1", "gpu2", "gpu3", "cpu0", "pcisw0", "pcisw1", "nic0", "nic1"},
                     {"gpu4", "cpu1", "pcisw2", "nic2"},
                     {"gpu6", "pcisw3", "nic3"}});
  // The same six GPUs as participants of a whole cluster: gpu5 and gpu7 stay as devices that can relay (their
  // NVLinks join gpu4 and gpu6 to the rest), the network and the other machines are one unit in a single part.
  // The best partition found keeps the quad's GPUs apart and gpu4, gpu6 with the relays: 729 GB/s for 8 buffers.
  // Participants on two machines are not searched.
  const Topology c = load_topology("4xdgx1-v100");
  const LinkRates cr = usable_link_rates(c);
  const std::vector<int> six = {c.gpus()[0], c.gpus()[1], c.gpus()[2], c.gpus()[3], c.gpus()[4], c.gpus()[6]};
  const BoundCut in_cluster = partition_cut(c, six, cr);
  CHECK(in_cluster.rate_gbps == doctest::Approx(729.0 / 8));
  REQUIRE(in_cluster.parts.size() == 5);
  int beyond = 0;  // devices off machine 0 (the network switch included)
  for (const Node& node : c.nodes()) beyond += node.machine != 0 ? 1 : 0;
  for (const std::vector<int>& part : in_cluster.parts) {
    const bool holds_m1 = std::find(part.begin(), part.end(), c.gpus()[8]) != part.end();
    int off_machine = 0;
    for (int v : part) off_machine += c.nodes()[static_cast<std::size_t>(v)].machine != 0 ? 1 : 0;
    CHECK(off_machine == (holds_m1 ? beyond : 0));  // all of them in the part of m1/gpu0
  }
  CHECK(partition_cut(c, {c.gpus()[0], c.gpus()[1], c.gpus()[8]}, cr).rate_gbps ==
        std::numeric_limits<double>::infinity());
}
