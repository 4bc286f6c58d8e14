// The min-cut bound (algorithms/synthesis/cut_bound.hpp) against closed forms: rings of equal links, a fully
// connected machine, a star through one switch, a two-machine cluster; the split cut where one slow link
// separates the GPUs; partitions into three parts that bind tighter than any cut; the max-flow wrapper itself.

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
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
  const BoundCut links_between = partition_cut(t, {}, usable_link_rates(t), false);
  CHECK(links_between.rate_gbps == doctest::Approx(49));
  CHECK_FALSE(links_between.as_flows);
  CHECK(links_between.gbps == doctest::Approx(196));
  CHECK(cut_text(t, links_between).rfind("{gpu0,gpu1,gpu2,gpu3} | {gpu4} | {gpu6}: 10 links", 0) == 0);
  CHECK(splitting_cut(t, {}, usable_link_rates(t)).rate_gbps == doctest::Approx(52));
  // As flows, the same three parts allow less: the quad's PCIe takes in only what crosses QPI (6), since cpu0 has
  // nothing but what it is sent, so 40 + 20 + 6 into the quad, 40 + 20 + 12 into gpu4 and 20 + 20 + 12 into gpu6
  // (their switches' uplinks from cpu1), 190 GB/s for 4 buffers: 47.5. The trees' packing reaches it.
  const CollectiveBound b = collective_bound(t, {}, Collective::kAllReduce, usable_link_rates(t));
  CHECK(b.algbw_gbps == doctest::Approx(47.5));
  REQUIRE(b.cuts.front().what == "partition");
  CHECK(b.cuts.front().as_flows);
  CHECK(cut_text(t, b.cuts.front())
            .rfind("{gpu0,gpu1,gpu2,gpu3} | {gpu4} | {gpu6}: 15 links (nvlink+pcie+smp) full", 0) == 0);
  CHECK(synthesis::packed_trees_algbw(t, t.gpus(), Collective::kAllReduce, usable_link_rates(t)) ==
        doctest::Approx(47.5));
  // Every device in a part: the NICs (leaves, peeled off the search) with their PCIe switches.
  const auto id = [&](int v) { return t.nodes()[static_cast<std::size_t>(v)].id; };
  std::vector<std::vector<std::string>> parts;
  for (const std::vector<int>& part : links_between.parts) {
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

TEST_CASE("cut_bound.two_way_split_of_a_dgx1_subset") {
  // dgx1-v100[0,1,4] at NCCL's usable rates: gpu1 has one NVLink lane to gpu0 (20 GB/s) and its PCIe link (12),
  // so the split cut {gpu1} allows 32. But gpu0 sits under gpu1's PCIe switch and their route is the NVLink, so
  // whatever gpu1 takes in over PCIe comes down the switch's uplink from cpu0, which has it from QPI (6) or from
  // gpu0 up the same uplink, which gpu1's own results climb too: with t each way over gpu1's PCIe,
  // t ≤ 6 + (12 − t), t = 9, and algbw 20 + 9 = 29. The two directions fill both NVLinks, both uplinks and QPI.
  const Topology t = load_topology("dgx1-v100[0,1,4]");
  const LinkRates rates = usable_link_rates(t);
  CHECK(splitting_cut(t, {}, rates).rate_gbps == doctest::Approx(32));
  const BoundCut two_way = two_way_split_cut(t, {}, rates);
  CHECK(two_way.rate_gbps == doctest::Approx(29));
  const auto id = [&](int v) { return t.nodes()[static_cast<std::size_t>(v)].id; };
  REQUIRE(two_way.inside.size() == 1);
  CHECK(id(two_way.inside.front()) == "gpu1");
  std::vector<std::string> filled;
  for (int l : two_way.links) {
    const Link& link = t.links()[static_cast<std::size_t>(l)];
    filled.push_back(id(link.src) + ">" + id(link.dst));
  }
  std::sort(filled.begin(), filled.end());
  CHECK(filled ==
        std::vector<std::string>{"cpu0>cpu1", "cpu0>pcisw0", "cpu1>cpu0", "gpu0>gpu1", "gpu1>gpu0", "pcisw0>cpu0"});
  CHECK(cut_text(t, two_way) == "{gpu1} <-> {gpu0,gpu4} at once: 6 links (nvlink+pcie+smp) full, 76.00 GB/s");
  const CollectiveBound b = collective_bound(t, {}, Collective::kAllReduce, rates);
  CHECK(b.algbw_gbps == doctest::Approx(29));
  CHECK(b.cuts.front().what == "two-way split");
  // What trees packed over the routes carry meets it: the bound is reached, not just approached.
  CHECK(synthesis::packed_trees_algbw(t, t.gpus(), Collective::kAllReduce, rates) == doctest::Approx(29));
  // gpu0 of [0,1,5,7] is in gpu1's place, and gpu7's split {gpu7} has the same 32 GB/s on its own (NVLink to gpu5
  // and PCIe, its switch's uplink free for it): the least two-way split is still found, not the first of the ties.
  const Topology tie = load_topology("dgx1-v100[0,1,5,7]");
  const BoundCut tied = two_way_split_cut(tie, {}, usable_link_rates(tie));
  CHECK(tied.rate_gbps == doctest::Approx(29));
  REQUIRE(tied.inside.size() == 1);
  CHECK(tie.nodes()[static_cast<std::size_t>(tied.inside.front())].id == "gpu0");
  // Where the switches reduce (NVLS) the split alone bounds; where no uplink is climbed both ways, the two-way split
  // is the split cut itself: rings, a fully connected machine, the whole DGX-1.
  CHECK(collective_bound(t, {}, Collective::kAllReduce, rates, true).algbw_gbps == doctest::Approx(32));
  for (const Topology& same : {ring(5, 10, true), load_topology("uniform:4"), load_topology("dgx1-v100")}) {
    const LinkRates r = nominal_link_rates(same);
    INFO(same.name());
    CHECK(two_way_split_cut(same, {}, r).rate_gbps == doctest::Approx(splitting_cut(same, {}, r).rate_gbps));
  }
  // More than kPartitionParticipants participants, or several machines: not asked.
  const Topology big = load_topology("uniform:9");
  CHECK(two_way_split_cut(big, {}, nominal_link_rates(big)).rate_gbps == std::numeric_limits<double>::infinity());
  const Topology two = load_topology("2xdgx1-v100");
  CHECK(two_way_split_cut(two, {two.gpus()[0], two.gpus()[1]}, nominal_link_rates(two)).rate_gbps ==
        std::numeric_limits<double>::infinity());
}

TEST_CASE("cut_bound.volume_by_flows") {
  // dgx1-p100[0,1,4] at NCCL's usable rates (NVLink 16 GB/s per lane, PCIe 12, QPI 6): gpu0 has NVLinks to gpu1 and
  // gpu4, those two none to each other. Every GPU can take in 16 per NVLink, but gpu0 and gpu1 share their switch's
  // uplink (12 between them), and what gpu4 takes in over PCIe comes from cpu1, which has nothing of its own: only
  // what crosses QPI (6). (4·16 + 12 + 6) / 2(3−1) = 20.5, where letting the sockets send as they like gave 22.
  const Topology t = load_topology("dgx1-p100[0,1,4]");
  const LinkRates rates = usable_link_rates(t);
  const BoundCut volume = volume_cut(t, {}, rates);
  CHECK(volume.rate_gbps == doctest::Approx(20.5));
  CHECK(splitting_cut(t, {}, rates).rate_gbps == doctest::Approx(22));
  const CollectiveBound b = collective_bound(t, {}, Collective::kAllReduce, rates);
  CHECK(b.algbw_gbps == doctest::Approx(20.5));
  CHECK(b.cuts.front().what == "volume");
  CHECK(synthesis::packed_trees_algbw(t, t.gpus(), Collective::kAllReduce, rates) == doctest::Approx(20.5));
  // The links it fills (the optimum's; others fill other links beside): the four NVLinks, the uplink down to gpu0
  // and gpu1, QPI towards gpu4.
  const auto id = [&](int v) { return t.nodes()[static_cast<std::size_t>(v)].id; };
  std::vector<std::string> filled;
  for (int l : volume.links) {
    const Link& link = t.links()[static_cast<std::size_t>(l)];
    filled.push_back(id(link.src) + ">" + id(link.dst));
  }
  std::sort(filled.begin(), filled.end());
  const std::vector<std::string> binding = {"cpu0>cpu1", "cpu0>pcisw0", "gpu0>gpu1",
                                            "gpu0>gpu4", "gpu1>gpu0",   "gpu4>gpu0"};
  CHECK(std::includes(filled.begin(), filled.end(), binding.begin(), binding.end()));
  CHECK(volume.as_flows);
  CHECK(cut_text(t, volume).rfind(fmt::format("{{gpu0,gpu1,gpu4}} take in as flows filling {} links", filled.size()),
                                  0) == 0);
  // Where the max flow is as low (the whole DGX-1: every GPU's NVLink and its share of one uplink), it stands.
  const Topology whole = load_topology("dgx1-v100");
  const BoundCut max_flow = volume_cut(whole, {}, usable_link_rates(whole));
  CHECK_FALSE(max_flow.as_flows);
  CHECK(max_flow.rate_gbps == doctest::Approx(72));
  CHECK(cut_text(whole, max_flow) ==
        "{gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7} take in over 36 links (nvlink+pcie), 1008.00 GB/s");
}

TEST_CASE("cut_bound.packing_reaches_the_bound_on_every_dgx1_subset") {
  // The bound is a bound on every plan, and the reduce-broadcast trees are one plan: on every subset of 2–8 GPUs of
  // both DGX-1 machines, at NCCL's usable rates, the trees' packing carries exactly what the bound allows (the two-way
  // split and the flows of volume and partitions closed every gap that staged PCIe routes had left, docs/bound.md).
  for (const char* machine : {"dgx1-v100", "dgx1-p100"}) {
    int sets = 0;
    for (unsigned mask = 1; mask < 256; ++mask) {
      if (std::popcount(mask) < 2) continue;
      std::string list;
      for (int g = 0; g < 8; ++g) {
        if (((mask >> g) & 1U) == 0) continue;
        if (!list.empty()) list += ',';  // piecewise: g++ 12's false -Wrestrict (GCC bug 105329) on "," + string
        list += std::to_string(g);
      }
      const Topology t = load_topology(fmt::format("{}[{}]", machine, list));
      const LinkRates rates = usable_link_rates(t);
      const double bound = collective_bound(t, {}, Collective::kAllReduce, rates).algbw_gbps;
      const double packed = synthesis::packed_trees_algbw(t, t.gpus(), Collective::kAllReduce, rates);
      INFO(t.name());
      CHECK(packed <= bound * (1 + 1e-6));
      CHECK(packed >= bound * (1 - 1e-6));
      ++sets;
    }
    CHECK(sets == 247);
  }
}
