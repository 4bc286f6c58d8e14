// NCCL's channel search, cost table and pick (simulator/nccl_model.hpp) on the built-in machines, and
// the simulator running group all-reduces as NCCL does.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <tuple>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"

#include <nlohmann/json.hpp>

using namespace artune;

namespace {

nccl::Graph graph_of(const std::string& name) {
  const Topology t = load_topology(name);
  return nccl::search(t, t.gpus());
}

std::string pick(const nccl::Graph& g, double bytes, const nccl::Forced& forced = {}) {
  const nccl::Choice c = nccl::choose(g, bytes, forced, "test");
  return std::string(nccl::to_string(c.algo)) + "." + std::string(nccl::to_string(c.proto));
}

SimResult sim(const Topology& t, const std::string& spec, std::uint64_t bytes) {
  BuildOptions o;
  o.count = static_cast<std::int64_t>(bytes / 4);
  return simulate(build_plan(t, parse_spec(spec), o), t, CostModel::defaults(BackendProfile::kNccl), 4);
}

}  // namespace

TEST_CASE("nccl.channels_on_builtin_machines") {
  // DGX-1 P100: four NVLink 1 lanes of 18 GB/s (topo.h SM60_NVLINK_BW) per GPU: NCCL's published 4 rings.
  const nccl::Graph p100 = graph_of("dgx1-p100");
  CHECK(p100.channels == 4);
  CHECK(p100.bw_intra == 18.0);
  CHECK_FALSE(p100.ll128_ok);  // LL128 needs sm70+
  // DGX-1 V100: six lanes of 20 GB/s: six rings at 20 (two NV2 rings at 40 are not better).
  const nccl::Graph v100 = graph_of("dgx1-v100");
  CHECK(v100.channels == 6);
  CHECK(v100.bw_intra == 20.0);
  CHECK(v100.ll128_ok);
  // Every ring of the DGX-1 V100 is a Hamiltonian cycle over NVLink only.
  const Topology t = load_topology("dgx1-v100");
  for (const nccl::Channel& ch : v100.rings) {
    REQUIRE(ch.ring.size() == 8);
    for (int i = 0; i < 8; ++i) CHECK(t.nvlink_lanes(ch.ring[i], ch.ring[(i + 1) % 8]) > 0);
  }
  // NVSwitch machines: 3 (DGX-2) and 6 (DGX A100) rings at 40 GB/s, duplicated to 6 and 12 at 20.
  const nccl::Graph dgx2 = graph_of("dgx2");
  CHECK(dgx2.channels == 6);
  CHECK(dgx2.bw_intra == 20.0);
  const nccl::Graph a100 = graph_of("dgx-a100");
  CHECK(a100.channels == 12);
  CHECK(a100.bw_intra == 20.0);
  CHECK(a100.nvls_channels == 0);  // NVLS needs sm90
  // DGX H100: 18 lanes of 20.6 GB/s: 6 rings at the sm90 step 60, duplicated to 12 at 30; NVLS 8 heads at 40.
  const nccl::Graph h100 = graph_of("dgx-h100");
  CHECK(h100.channels == 12);
  CHECK(h100.bw_intra == 30.0);
  CHECK(h100.nvls_channels == 8);
  CHECK(h100.nvls_bw == 40.0);
  // PCIe only: the 6 GB/s QPI link between the sockets carries one ring.
  const nccl::Graph pcie = graph_of("pcie-8gpu");
  CHECK(pcie.channels == 1);
  CHECK(pcie.bw_intra == 6.0);
  CHECK_FALSE(pcie.nvlink_intra);
  CHECK_FALSE(pcie.ll128_ok);
}

TEST_CASE("nccl.cluster_channels_use_one_local_nic_each") {
  const Topology t = load_topology("2xdgx1-v100");
  const nccl::Graph g = nccl::search(t, t.gpus());
  CHECK(g.machines == 2);
  CHECK(g.ppn == 8);
  CHECK(g.channels == 4);  // four EDR NICs, a 12 GB/s PCIe path each (inter speed step 12)
  CHECK(g.bw_inter == 12.0);
  std::vector<int> nics;
  for (const nccl::Channel& ch : g.rings) {
    REQUIRE(ch.nics.size() == 2);
    REQUIRE(ch.ring.size() == 16);
    nics.push_back(ch.nics[0]);
    for (int m = 0; m < 2; ++m) {
      // The machine's segment starts and ends next to the channel's NIC.
      const int first = ch.ring[static_cast<std::size_t>(m * 8)], last = ch.ring[static_cast<std::size_t>(m * 8 + 7)];
      CHECK(t.route(ch.nics[m], first).type <= PathType::kPxb);
      CHECK(t.route(last, ch.nics[m]).type <= PathType::kPxb);
    }
  }
  std::sort(nics.begin(), nics.end());
  CHECK(std::unique(nics.begin(), nics.end()) == nics.end());  // every NIC carries one channel
}

TEST_CASE("nccl.pick_per_size") {
  // One machine: LL for small messages, LL128 or Simple for large, NVLS on H100.
  const nccl::Graph v100 = graph_of("dgx1-v100");
  CHECK(pick(v100, 8) == "ring.ll");
  CHECK(pick(v100, 65536) == "ring.ll");
  CHECK(pick(v100, 1 << 20) == "ring.ll128");
  CHECK(pick(v100, 1 << 30) == "ring.simple");
  const nccl::Graph h100 = graph_of("dgx-h100");
  CHECK(pick(h100, 8) == "ring.ll");
  CHECK(pick(h100, 65536) == "ring.ll");
  CHECK(pick(h100, 1 << 20) == "ring.ll");
  CHECK(pick(h100, 1 << 30) == "nvls.simple");
  // 16 machines: the tree's log-depth latency wins small sizes, NVLSTree (H100) or Ring the large ones.
  const nccl::Graph c16 = graph_of("16xdgx-h100");
  CHECK(pick(c16, 8) == "tree.ll");
  CHECK(pick(c16, 65536) == "tree.ll");
  CHECK(pick(c16, 1 << 20) == "tree.ll128");
  CHECK(pick(c16, 1 << 30) == "nvlstree.simple");
  const nccl::Graph v16 = graph_of("16xdgx1-v100");
  CHECK(pick(v16, 8) == "tree.ll");
  CHECK(pick(v16, 1 << 30) == "ring.simple");
  // Forcing: algorithm only = its best protocol; unavailable combinations are bad input.
  CHECK(pick(v100, 1 << 30, {nccl::Algo::kTree, std::nullopt}) == "tree.simple");
  CHECK(pick(v100, 8, {nccl::Algo::kRing, nccl::Proto::kSimple}) == "ring.simple");
  CHECK_THROWS_AS(nccl::choose(v100, 8, {nccl::Algo::kNvls, std::nullopt}, "x"), InvalidInput);
  CHECK_THROWS_AS(nccl::choose(graph_of("dgx1-p100"), 8, {std::nullopt, nccl::Proto::kLL128}, "x"), InvalidInput);
  CHECK_THROWS_AS(nccl::choose(h100, 8, {nccl::Algo::kNvlsTree, std::nullopt}, "x"), InvalidInput);
  CHECK_THROWS_AS(nccl::choose(h100, 8, {nccl::Algo::kPat, std::nullopt}, "x"), InvalidInput);
}

TEST_CASE("nccl.latency_table_values") {
  // tuning.cc: Ring/LL on one NVLink machine: 6.6 + 2(n−1)·0.6; Tree/LL: 6.8 + 2·(ppn−1)·0.6 + 2·log2(nodes)·5.
  const nccl::Graph v100 = graph_of("dgx1-v100");
  CHECK(nccl::all_reduce_latency_us(v100, nccl::Algo::kRing, nccl::Proto::kLL) == doctest::Approx(6.6 + 14 * 0.6));
  CHECK(nccl::all_reduce_latency_us(v100, nccl::Algo::kRing, nccl::Proto::kSimple) == doctest::Approx(8.4 + 14 * 3.4));
  const nccl::Graph c16 = graph_of("16xdgx-h100");
  CHECK(nccl::all_reduce_latency_us(c16, nccl::Algo::kTree, nccl::Proto::kLL) ==
        doctest::Approx(6.8 + 2 * (7 * 0.6 + 4 * 5.0)));
  // Ring: only the 2(nodes−1) steps that cross the network pay the network latency.
  CHECK(nccl::all_reduce_latency_us(c16, nccl::Algo::kRing, nccl::Proto::kLL) ==
        doctest::Approx(6.6 + (2 * 127 - 30) * 1.0 + 30 * 2.7));
  // PCIe machine: PCI latencies.
  CHECK(nccl::all_reduce_latency_us(graph_of("pcie-8gpu"), nccl::Algo::kRing, nccl::Proto::kLL) ==
        doctest::Approx(6.6 + 14 * 1.0));
}

TEST_CASE("nccl.tree_latency_grows_with_log_of_machines") {
  double prev = 0;
  for (const int m : {2, 4, 8, 16, 32}) {
    const Topology t = load_topology(std::to_string(m) + "xdgx-h100");
    const SimResult r = sim(t, "nccl", 8);
    REQUIRE(r.groups.size() == 1);
    CHECK(r.groups[0].algorithm == "tree");
    // Doubling the machines adds one tree level: 2 · 5 µs of network latency (Tree/LL), nothing else.
    if (prev > 0) CHECK(r.time_us - prev == doctest::Approx(10.0).epsilon(1e-3));
    prev = r.time_us;
  }
}

TEST_CASE("nccl.simulated_busbw_on_single_machines") {
  // Large messages: every channel's ring shares the links; busbw = lanes · 25 GB/s · NVLink efficiency 0.8.
  const Topology v100 = load_topology("dgx1-v100");
  const SimResult r = sim(v100, "nccl", std::uint64_t{1} << 30);
  REQUIRE(r.groups.size() == 1);
  CHECK(r.groups[0].algorithm == "ring");
  CHECK(r.groups[0].protocol == "simple");
  CHECK(r.groups[0].channels == 6);
  CHECK(r.busbw_gbps == doctest::Approx(120.0).epsilon(0.01));
  // H100 NVLS: the switch reduces; (n+1)/n of the buffer each way at NVLS efficiency 0.85:
  // busbw = 450 · 0.8 · 0.85 · 2(n−1)/(n+1).
  const Topology h100 = load_topology("dgx-h100");
  const SimResult n = sim(h100, "nccl", std::uint64_t{1} << 30);
  CHECK(n.groups.at(0).algorithm == "nvls");
  CHECK(n.busbw_gbps == doctest::Approx(450 * 0.8 * 0.85 * 14.0 / 9.0).epsilon(0.01));
  // Forced ring on H100: 12 channels over 18 lanes: 360 GB/s.
  const SimResult ring = sim(h100, "nccl.ring", std::uint64_t{1} << 30);
  CHECK(ring.groups.at(0).algorithm == "ring");
  CHECK(ring.busbw_gbps == doctest::Approx(360.0).epsilon(0.02));  // less NCCL's 56 µs Ring/Simple latency
  // LL doubles the bytes on the wire and is capped at llMaxBw: much slower at 1 GiB.
  const SimResult ll = sim(v100, "nccl.ring.ll", std::uint64_t{1} << 30);
  CHECK(ll.groups.at(0).protocol == "ll");
  CHECK(ll.busbw_gbps < 0.5 * r.busbw_gbps + 1e-9);
  // Small messages cost one launch (2.6 µs) and the device's steps: Ring/LL 6.6 + 14 · 0.6 µs.
  CHECK(sim(v100, "nccl", 8).time_us == doctest::Approx(2.6 + 15.0).epsilon(1e-3));
}

TEST_CASE("nccl.time_model_apart_from_the_choice") {
  // The simulator charges one launch and the device's latency; the pick stays NCCL's (Ring/LL at 8 bytes on
  // 8 H100s). NVLS's multicast round grows with the GPUs: 5.84 µs on 2 (NVIDIA/nccl#1259), NCCL's 25 µs on 8.
  const Topology h100 = load_topology("dgx-h100");
  const nccl::Graph g = nccl::search(h100, h100.gpus());
  CHECK(nccl::device_latency_us(g, nccl::Algo::kNvls, nccl::Proto::kSimple) == doctest::Approx(25.0));
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  const Topology pair =
      load_topology(std::string(root != nullptr ? root : ".") + "/tests/simulator/data/h100-nvswitch-2gpu.json");
  const nccl::Graph g2 = nccl::search(pair, pair.gpus());
  CHECK(nccl::device_latency_us(g2, nccl::Algo::kNvls, nccl::Proto::kSimple) == doctest::Approx(5.84));
  CHECK(nccl::all_reduce_latency_us(g2, nccl::Algo::kNvls, nccl::Proto::kSimple) == doctest::Approx(25.0));
  const std::vector<int> four(h100.gpus().begin(), h100.gpus().begin() + 4);
  CHECK(nccl::device_latency_us(nccl::search(h100, four), nccl::Algo::kNvls, nccl::Proto::kSimple) ==
        doctest::Approx(5.84 + 2 * (25.0 - 5.84) / 6));
  CHECK(nccl::device_latency_us(g, nccl::Algo::kRing, nccl::Proto::kLL) ==
        doctest::Approx(nccl::all_reduce_latency_us(g, nccl::Algo::kRing, nccl::Proto::kLL)));
  CHECK(nccl::choose(g, 8, {}, "test").algo == nccl::Algo::kRing);
  CHECK(sim(h100, "nccl", 8).time_us == doctest::Approx(2.6 + 6.6 + 14 * 0.6).epsilon(1e-3));
  CHECK(sim(h100, "nccl.nvls", 8).time_us == doctest::Approx(2.6 + 25.0).epsilon(1e-3));
  // NVLSTree across 16 machines: the multicast round plus 2 · log2(16) network steps, each timed as Tree/Simple's
  // network step (14 µs); NCCL 2.28.9's 20.9 µs for NVLSTree's step weighs its choice only.
  const Topology c16t = load_topology("16xdgx-h100");
  const nccl::Graph c16 = nccl::search(c16t, c16t.gpus());
  CHECK(nccl::device_latency_us(c16, nccl::Algo::kNvlsTree, nccl::Proto::kSimple) == doctest::Approx(25.0 + 8 * 14.0));
  CHECK(nccl::all_reduce_latency_us(c16, nccl::Algo::kNvlsTree, nccl::Proto::kSimple) ==
        doctest::Approx(25.0 + 8 * 20.9));
  // A calibration's network shift moves NVLSTree's network steps as it moves Tree's.
  CHECK(nccl::device_latency_us(c16, nccl::Algo::kNvlsTree, nccl::Proto::kSimple, {0.0, 1.0}) ==
        doctest::Approx(25.0 + 8 * 15.0));
  // Launches: one per GPU the issuing thread drives, none per call under CUDA graphs.
  CHECK(nccl::launch_us() == doctest::Approx(2.6));
  CHECK(nccl::launch_us(8) == doctest::Approx(8 * 2.6));
  CHECK(nccl::launch_us(8, true) == 0.0);
  // A calibration's NVLink shift moves the NVLS round as it moves the NVLink steps.
  CHECK(nccl::device_latency_us(g, nccl::Algo::kNvls, nccl::Proto::kSimple, {1.0, 0.0}) == doctest::Approx(26.0));
}

TEST_CASE("nccl.pat_where_nccl_uses_it") {
  // NCCL enables PAT with one GPU per machine (sm60+), for AllGather/ReduceScatter only: never for the
  // all-reduce this model simulates, whatever the layout.
  const Topology c8 = load_topology("8xdgx-h100");
  std::vector<int> heads;
  for (int m = 0; m < 8; ++m) heads.push_back(c8.gpus_of_machine(m).front());
  const nccl::Graph one_per_machine = nccl::search(c8, heads);
  CHECK(one_per_machine.ppn == 1);
  CHECK(nccl::pat_enabled(one_per_machine));
  // 8 + log2(8) · 14 / 3.5 + 2.8 · 8 (tuning.cc, with the network Tree/Simple latency of 14 µs).
  CHECK(nccl::pat_latency_us(one_per_machine) == doctest::Approx(8 + 3 * 4.0 + 2.8 * 8));
  const nccl::Graph full = nccl::search(c8, c8.gpus());
  CHECK_FALSE(nccl::pat_enabled(full));
  CHECK(nccl::pat_latency_us(full) < 0);
  CHECK_FALSE(nccl::pat_enabled(graph_of("dgx-h100")));
  // All-reduce: PAT is never in the cost table, so neither NCCL's pick nor a forced PAT uses it.
  const nccl::CostTable t = nccl::all_reduce_table(one_per_machine);
  for (int p = 0; p < nccl::kProtos; ++p) CHECK(t.bandwidth[static_cast<int>(nccl::Algo::kPat)][p] == 0.0);
  CHECK(nccl::choose(one_per_machine, 8, {}, "x").algo != nccl::Algo::kPat);
  CHECK_THROWS_AS(nccl::choose(one_per_machine, 8, {nccl::Algo::kPat, std::nullopt}, "x"), InvalidInput);
}

TEST_CASE("nccl.specs_and_bad_input") {
  CHECK(to_string(parse_spec("nccl.ring.ll128")) == "nccl.ring.ll128");
  CHECK(to_string(parse_spec("nccl.tree/xring")) == "nccl.tree/xring");
  CHECK(parse_spec("nccl.nvls").ranges[0].intra.variant == "nvls");
  CHECK_THROWS_AS(parse_spec("nccl.bogus"), InvalidInput);
  CHECK_THROWS_AS(parse_spec("nccl.ring.ll256"), InvalidInput);
  const Topology v100 = load_topology("dgx1-v100");
  try {
    sim(v100, "nccl.nvls", 1 << 20);
    FAIL("nvls on a DGX-1 must be refused");
  } catch (const InvalidInput& e) {
    CHECK(std::string(e.what()).find("spec 'nccl.nvls'") != std::string::npos);
  }
  CHECK_THROWS_AS(nccl::parse_variant("ring.fast", "x"), InvalidInput);
  CHECK(nccl::to_string(nccl::parse_variant("tree.ll", "x")) == "tree.ll");
}

TEST_CASE("nccl.double_binary_tree") {
  // Every machine but the roots has a parent in each tree; a machine inside one tree is a leaf of the other.
  for (const int m : {2, 5, 8, 16}) {
    int roots = 0;
    std::vector<int> children0(m, 0), children1(m, 0);
    for (int i = 0; i < m; ++i) {
      for (int t = 0; t < 2; ++t) {
        const int p = nccl::tree_parent(m, t, i);
        if (p < 0) {
          ++roots;
        } else {
          (t == 0 ? children0 : children1)[p]++;
        }
      }
    }
    CHECK(roots == 2);
    if (m % 2 == 0) {
      for (int i = 0; i < m; ++i) CHECK((children0[i] == 0 || children1[i] == 0));
    }
  }
}

TEST_CASE("nccl.calibration_overrides_defaults") {
  // A calibration overlay's NVLink efficiency scales every channel's links; its per-link-kind α beyond the
  // profile's default shifts NCCL's per-step latency of that class (NCCL's own pick still uses its tables).
  const Topology v100 = load_topology("dgx1-v100");
  BuildOptions o;
  o.count = (std::int64_t{1} << 30) / 4;
  const Plan big = build_plan(v100, parse_spec("nccl"), o);
  CostModel m = CostModel::defaults(BackendProfile::kNccl);
  m.apply_overlay(nlohmann::json::parse(R"({"links": {"nvlink": {"efficiency": 0.9}}})"), "calib.json");
  CHECK(simulate(big, v100, m, 4).busbw_gbps == doctest::Approx(135.0).epsilon(0.01));
  // 16 machines, 8 bytes, Tree/LL: 2·log2(16) = 8 network steps, each 5 µs slower.
  const Topology c16 = load_topology("16xdgx-h100");
  o.count = 2;
  const Plan small = build_plan(c16, parse_spec("nccl"), o);
  const CostModel base = CostModel::defaults(BackendProfile::kNccl);
  CostModel slow = base;
  slow.link[LinkKind::kNetwork].alpha_us += 5.0;
  const SimResult a = simulate(small, c16, base, 4), b = simulate(small, c16, slow, 4);
  CHECK(b.groups.at(0).algorithm == "tree");
  CHECK(b.time_us - a.time_us == doctest::Approx(8 * 5.0).epsilon(1e-6));
}

TEST_CASE("nccl.clusters_of_unlike_machines_search_each") {
  // A DGX-1 V100 beside a DGX-1 P100: the same GPU places and link count, other lanes and rates. Each machine is
  // searched on its own (a search is reused only on a machine of the same Topology::machine_shape), so the
  // group's channels are the slower machine's whichever comes first; reusing the V100's rings on the P100 put
  // them over its single-lane NVLinks and halved the simulated busbw when the V100 came first.
  const Topology v100 = load_topology("dgx1-v100"), p100 = load_topology("dgx1-p100");
  const Topology vp = join_machines({v100, p100}, NetworkSpec{}, "v100+p100");
  const Topology pv = join_machines({p100, v100}, NetworkSpec{}, "p100+v100");
  CHECK(vp.machine_shape(0) != vp.machine_shape(1));
  const nccl::Graph a = nccl::search(vp, vp.gpus()), b = nccl::search(pv, pv.gpus());
  const nccl::Graph alone = nccl::search(load_topology("2xdgx1-p100"), load_topology("2xdgx1-p100").gpus());
  CHECK(a.channels == b.channels);
  CHECK(a.bw_intra == b.bw_intra);
  CHECK(a.bw_intra == alone.bw_intra);
  const double t_vp = sim(vp, "nccl", 256u << 20).time_us, t_pv = sim(pv, "nccl", 256u << 20).time_us;
  CHECK(t_vp == doctest::Approx(t_pv).epsilon(1e-9));
}

TEST_CASE("nccl.where_the_model_does_not_apply") {
  BuildOptions o;
  o.count = 1 << 18;
  // Machines with different GPU counts: NCCL's model needs the same count on each, so the group keeps the
  // one-ring model, and forcing an NCCL algorithm there is bad input naming the spec.
  const Topology uneven =
      join_machines({load_topology("dgx1-v100"), load_topology("dgx2")}, NetworkSpec{}, "dgx1+dgx2");
  const SimResult r = simulate(build_plan(uneven, parse_spec("nccl"), o), uneven, CostModel::defaults(), 4);
  CHECK(r.groups.empty());
  CHECK(r.time_us > 0);
  CHECK_THROWS_AS(simulate(build_plan(uneven, parse_spec("nccl.ring"), o), uneven, CostModel::defaults(), 4),
                  InvalidInput);
  // Host backends run their own collectives: no NCCL model there either.
  const Topology v100 = load_topology("dgx1-v100");
  const SimResult mpi =
      simulate(build_plan(v100, parse_spec("nccl"), o), v100, CostModel::defaults(BackendProfile::kMpi), 4);
  CHECK(mpi.groups.empty());
  // NICs behind the CPU (uniform:2x8): rings still leave by them, one channel per NIC.
  const Topology far = load_topology("uniform:2x8");
  const nccl::Graph g = nccl::search(far, far.gpus());
  CHECK(g.channels >= 1);
  CHECK(g.bw_intra > 1.0);  // not search.cc's 0.1 GB/s fallback
  CHECK_FALSE(g.ll128_ok);  // NCCL keeps LL128 to NICs within PXB
}

TEST_CASE("nccl.forced_channels") {
  const Topology v100 = load_topology("dgx1-v100");
  const nccl::Graph g = nccl::search(v100, v100.gpus());
  REQUIRE(g.channels == 6);
  CHECK(nccl::max_channels(g, nccl::Algo::kRing) == 6);
  CHECK(nccl::min_channels(nccl::Algo::kRing) == 1);
  CHECK(nccl::min_channels(nccl::Algo::kNvls) == 2);
  CHECK(nccl::parse_variant("ring.simple.c2", "x") == nccl::Forced{nccl::Algo::kRing, nccl::Proto::kSimple, 2});
  CHECK(nccl::to_string(nccl::Forced{nccl::Algo::kTree, std::nullopt, 4}) == "tree.c4");
  // NCCL's cost table on c of the search's channels: Ring/Simple's bus bandwidth is c × the per-channel speed.
  const auto ring = static_cast<int>(nccl::Algo::kRing), simple = static_cast<int>(nccl::Proto::kSimple);
  const double full = nccl::all_reduce_table(g).bandwidth[ring][simple];
  for (const int c : {1, 2, 4}) {
    CAPTURE(c);
    const nccl::Graph gc = nccl::with_channels(g, nccl::Algo::kRing, c, "x");
    CHECK(gc.channels == c);
    CHECK(gc.rings.size() == static_cast<std::size_t>(c));
    CHECK(nccl::all_reduce_table(gc).bandwidth[ring][simple] == doctest::Approx(full * c / 6));
    const nccl::Forced forced = nccl::parse_variant(fmt::format("ring.simple.c{}", c), "x");
    const nccl::Choice choice = nccl::choose(g, 1 << 20, forced, "x");
    CHECK(choice.channels == c);
  }
  CHECK_THROWS_WITH_AS(nccl::with_channels(g, nccl::Algo::kRing, 7, "spec 'x'"),
                       "spec 'x': NCCL ring runs on 1..6 channels here (8 GPUs on 1 machine(s)), not 7", InvalidInput);
  CHECK_THROWS_AS(nccl::choose(g, 8, nccl::Forced{std::nullopt, std::nullopt, 2}, "x"), InvalidInput);

  // The simulator runs the collective on those channels: the latency does not depend on them, the bytes do.
  // On the DGX-1 one channel's ring gets each of its NVLinks alone, two channels split the buffer over two
  // rings on other links: (t1 − L) = 2 (t2 − L) with L the launch and NCCL's Ring/Simple latency.
  const std::uint64_t bytes = std::uint64_t{1} << 30;
  const SimResult r1 = sim(v100, "nccl.ring.simple.c1", bytes);
  const SimResult r2 = sim(v100, "nccl.ring.simple.c2", bytes);
  const SimResult r6 = sim(v100, "nccl.ring.simple", bytes);
  REQUIRE(r1.groups.size() == 1);
  CHECK(r1.groups[0].channels == 1);
  CHECK(r2.groups[0].channels == 2);
  CHECK(r6.groups[0].channels == 6);
  const double latency = nccl::launch_us() + nccl::device_latency_us(g, nccl::Algo::kRing, nccl::Proto::kSimple);
  CHECK(r1.groups[0].latency_us == doctest::Approx(latency));
  CHECK(r1.time_us - latency == doctest::Approx(2 * (r2.time_us - latency)).epsilon(1e-9));
  CHECK(r6.time_us < r2.time_us);
  CHECK_THROWS_WITH_AS(
      sim(v100, "nccl.ring.simple.c8", bytes),
      "spec 'nccl.ring.simple.c8': NCCL ring runs on 1..6 channels here (8 GPUs on 1 machine(s)), not 8",
      InvalidInput);
}

TEST_CASE("nccl.all_gather_and_reduce_scatter") {
  // One GPU on each of 4 machines: Ring with every protocol and PAT Simple; never Tree, NVLS or NVLSTree.
  const Topology four = load_topology("uniform:4x1");
  const nccl::Graph g = nccl::search(four, four.gpus());
  REQUIRE(g.ppn == 1);
  const auto a = [](nccl::Algo x) { return static_cast<int>(x); };
  const auto p = [](nccl::Proto x) { return static_cast<int>(x); };
  for (const Collective coll : {Collective::kAllGather, Collective::kReduceScatter}) {
    CAPTURE(to_string(coll));
    const nccl::CostTable t = nccl::cost_table(g, coll);
    const nccl::CostTable ar = nccl::all_reduce_table(g);
    for (int q = 0; q < nccl::kProtos; ++q) {
      CHECK(t.bandwidth[a(nccl::Algo::kTree)][q] == 0.0);
      CHECK(t.bandwidth[a(nccl::Algo::kNvls)][q] == 0.0);
      // Ring: k−1 steps instead of 2(k−1): the bus-to-algorithm ratio k/(k−1) is twice all-reduce's.
      CHECK(t.bandwidth[a(nccl::Algo::kRing)][q] == doctest::Approx(2 * ar.bandwidth[a(nccl::Algo::kRing)][q]));
    }
    // PAT Simple: the ring graph's bus bandwidth × .75, not converted; latency 8 + log2(4)·14/3.5 + 2.8·4.
    CHECK(t.bandwidth[a(nccl::Algo::kPat)][p(nccl::Proto::kLL)] == 0.0);
    CHECK(t.bandwidth[a(nccl::Algo::kPat)][p(nccl::Proto::kSimple)] == doctest::Approx(g.channels * g.bw_inter * 0.75));
    CHECK(t.latency_us[a(nccl::Algo::kPat)][p(nccl::Proto::kSimple)] == doctest::Approx(8 + 2 * 4.0 + 2.8 * 4));
    // Ring latency: base + (k−1) steps, all of them across machines here (ppn 1: the network Tree latency).
    const nccl::Latencies l = nccl::latencies(g, nccl::Algo::kRing, nccl::Proto::kLL);
    CHECK(t.latency_us[a(nccl::Algo::kRing)][p(nccl::Proto::kLL)] == doctest::Approx(l.base_us + 3 * l.inter_us));
    CHECK(nccl::choose(g, 1 << 22, nccl::parse_variant("pat", "x"), "x", coll).algo == nccl::Algo::kPat);
    CHECK_THROWS_AS(nccl::choose(g, 8, nccl::parse_variant("tree", "x"), "x", coll), InvalidInput);
  }
  // NVLS all-gather on one NVSwitch machine: (ppn−1)/ppn of the heads' NVLink speed where all-reduce has ×2,
  // and no bus-to-algorithm conversion where all-reduce has k/(2(k−1)) = 8/14.
  const nccl::Graph h = graph_of("dgx-h100");
  const int nvls = a(nccl::Algo::kNvls), simple = p(nccl::Proto::kSimple);
  CHECK(nccl::cost_table(h, Collective::kAllGather).bandwidth[nvls][simple] ==
        doctest::Approx(nccl::all_reduce_table(h).bandwidth[nvls][simple] * (7.0 / 8) / 2 / (8.0 / 14)));

  // The simulator runs a library all-gather as NCCL would: NCCL's pick, on its channels.
  BuildOptions o;
  o.count = 1 << 20;
  o.collective = Collective::kAllGather;
  const SimResult r =
      simulate(build_collective_plan(four, "nccl.pat", o), four, CostModel::defaults(BackendProfile::kNccl), 4);
  REQUIRE(r.groups.size() == 1);
  CHECK(r.groups[0].algorithm == "pat");
  CHECK(r.groups[0].latency_us == doctest::Approx(nccl::launch_us() + 8 + 2 * 4.0 + 2.8 * 4));
}

TEST_CASE("nccl.network_kind_per_nic") {
  // A cluster whose NICs state their fabric: 2 DGX H100 joined by EFA (aws-ofi-nccl reports 75 µs and runs
  // Simple only, net_kind.cpp), the same over InfiniBand (stated and unstated), RoCE (NCCL's IB transport).
  auto cluster = [](const nlohmann::json& fabric, double nic_gbps = 50) {
    nlohmann::json doc = {{"machines", {{{"config", "dgx-h100"}, {"count", 2}}}},
                          {"network", {{"nic_bandwidth", nic_gbps}}}};
    if (!fabric.is_null()) doc["network"]["fabric"] = fabric;
    return topology_from_json(doc, "test.json");
  };
  const Topology plain = cluster(nullptr), ib = cluster("ib"), roce = cluster("roce"), efa = cluster("efa");
  const nccl::Graph gp = nccl::search(plain, plain.gpus());
  const nccl::Graph gi = nccl::search(ib, ib.gpus());
  const nccl::Graph gr = nccl::search(roce, roce.gpus());
  const nccl::Graph ge = nccl::search(efa, efa.gpus());
  CHECK(gp.net == net_kind_defaults(NetKind::kInfiniBand));
  CHECK(gi.net == gp.net);
  CHECK(gr.net.kind == NetKind::kRoce);
  CHECK(ge.net.kind == NetKind::kEfa);
  CHECK(ge.net.reported_latency_us == 75);
  CHECK(ge.net.protocols == kNetSimple);
  CHECK(ge.channels == gp.channels);
  // NCCL's cost table: every network step + 75 µs, + 150 under Simple (tuning.cc latencyInter and the flush).
  // Ring all-reduce over 2 machines crosses 2·(2−1) = 2 network steps; Tree 2·log2(2) = 2.
  const nccl::CostTable tp = nccl::all_reduce_table(gp), te = nccl::all_reduce_table(ge),
                        tr = nccl::all_reduce_table(gr);
  const int ring = static_cast<int>(nccl::Algo::kRing), tree = static_cast<int>(nccl::Algo::kTree);
  const int simple = static_cast<int>(nccl::Proto::kSimple);
  CHECK(te.latency_us[ring][simple] - tp.latency_us[ring][simple] == doctest::Approx(2 * 150));
  CHECK(te.latency_us[tree][simple] - tp.latency_us[tree][simple] == doctest::Approx(2 * 150));
  // LL and LL128 are off across EFA; on InfiniBand and RoCE they stay on, and RoCE is costed as InfiniBand.
  for (int a = 0; a < nccl::kAlgos; ++a) {
    for (int p = 0; p < nccl::kProtos; ++p) {
      CAPTURE(a);
      CAPTURE(p);
      if (p != simple) CHECK(te.bandwidth[a][p] == 0);
      CHECK(tr.bandwidth[a][p] == tp.bandwidth[a][p]);
      CHECK(tr.latency_us[a][p] == tp.latency_us[a][p]);
    }
  }
  CHECK(tp.bandwidth[ring][static_cast<int>(nccl::Proto::kLL)] > 0);
  CHECK(pick(ge, 8).find(".simple") != std::string::npos);
  CHECK(pick(gp, 8).find(".simple") == std::string::npos);
  CHECK_THROWS_WITH_AS(nccl::choose(ge, 8, nccl::parse_variant("ring.ll", "test"), "test"),
                       doctest::Contains("the network (efa) allows only simple"), InvalidInput);
  // The simulator's device time pays NCCL's own estimate on EFA: ring/simple 2 steps × 150 µs more.
  CHECK(nccl::device_latency_us(ge, nccl::Algo::kRing, nccl::Proto::kSimple) -
            nccl::device_latency_us(gp, nccl::Algo::kRing, nccl::Proto::kSimple) ==
        doctest::Approx(300));
  const SimResult se = sim(efa, "nccl.ring.simple", 8), sp = sim(plain, "nccl.ring.simple", 8);
  CHECK(se.time_us - sp.time_us == doctest::Approx(300));
  // A port's own figures replace the kind's: the extra step time on every protocol, the reported latency, the
  // protocols, the efficiency of its network links (large transfers at half the rate: twice the time at 1 GiB
  // where the NICs bound the ring: 200 Gb/s ports do; at 400 Gb/s the NVLink into each NIC's own GPU, which carries
  // the channel's PXN traffic besides the ring's, binds first).
  const Topology tuned = cluster(
      {{"kind", "efa"}, {"extra_step_us", 10}, {"reported_latency_us", 35}, {"protocols", {"simple", "ll128"}}});
  const nccl::Graph gt = nccl::search(tuned, tuned.gpus());
  CHECK(gt.net.reported_latency_us == 35);
  CHECK(gt.net.protocols == (kNetSimple | kNetLL128));
  CHECK(nccl::all_reduce_table(gt).latency_us[ring][simple] - tp.latency_us[ring][simple] == doctest::Approx(2 * 70));
  CHECK(nccl::device_latency_us(gt, nccl::Algo::kRing, nccl::Proto::kSimple) -
            nccl::device_latency_us(gp, nccl::Algo::kRing, nccl::Proto::kSimple) ==
        doctest::Approx(20));
  const Topology slow = cluster({{"efficiency", 0.45}}, 25), base = cluster(nullptr, 25);
  const double big = 1024.0 * 1024 * 1024;
  const SimResult ss = sim(slow, "nccl.ring.simple", static_cast<std::uint64_t>(big));
  const SimResult sb = sim(base, "nccl.ring.simple", static_cast<std::uint64_t>(big));
  CHECK(ss.busbw_gbps == doctest::Approx(sb.busbw_gbps / 2).epsilon(0.02));
}

TEST_CASE("nccl.every_nic_port_carries_channels_up_to_its_speed") {
  // search.cc takes a channel's bandwidth from its NIC port too (`if (net->net.bw < bw) continue;`, then
  // `net.bw -= bw`), and paths.cc bounds a GPU's path to the network by the port's speed: an A100 machine with
  // 16 ports of 100 Gb/s (12.5 GB/s, 4 under each PCIe switch) runs 16 channels of 12 GB/s (sm80's inter speed
  // step below 12.5), one per port, where the ports' speed used to be ignored (8 channels of 24 GB/s on 8 of the
  // 16 ports, half the busbw). Its 16 × 12.5 GB/s equal the DGX A100's 8 × 25, and so does the busbw (on AMD
  // hosts as the DGX A100's and Oracle's BM.GPU4.8 of this layout: NCCL's ring steps pay the AMD net overhead).
  const nlohmann::json a16 = {{"name", "a100-16nic"},
                              {"compact",
                               {{"gpus", 8},
                                {"arch", "sm80"},
                                {"cpu_arch", "x86_64-amd"},
                                {"nvswitch", {{"lanes_per_gpu", 12}, {"lane_bandwidth", 25}}},
                                {"pcie_switches", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
                                {"sockets", {{0, 1}, {2, 3}}},
                                {"pcie_bandwidth", 24},
                                {"smp_bandwidth", 16},
                                {"nics_per_switch", 4},
                                {"nic_bandwidth", 12.5}}}};
  const Topology machine = topology_from_json(a16, "a16.json");
  const Topology c16 = join_machines({machine, machine}, NetworkSpec{12.5, 2.7, 1.0}, "2xa100-16nic");
  const Topology c8 = load_topology("2xdgx-a100");
  const nccl::Graph g16 = nccl::search(c16, c16.gpus());
  const nccl::Graph g8 = nccl::search(c8, c8.gpus());
  CHECK(g16.channels == 16);
  CHECK(g16.bw_inter == 12.0);
  CHECK(g8.channels == 8);
  CHECK(g8.bw_inter == 24.0);
  for (int m = 0; m < 2; ++m) {
    std::set<int> ports;
    for (const nccl::Channel& ch : g16.rings) ports.insert(ch.nics[static_cast<std::size_t>(m)]);
    CHECK(ports.size() == 16);
  }
  const std::uint64_t big = std::uint64_t{1} << 30;
  CHECK(sim(c16, "nccl.ring.simple", big).busbw_gbps ==
        doctest::Approx(sim(c8, "nccl.ring.simple", big).busbw_gbps).epsilon(1e-6));
  // A port slower than a channel's speed step takes none at that step: 8 ports of 12.5 GB/s give 8 channels of
  // 12 GB/s (the GPUs' 24 GB/s PCIe no longer sets the channel speed).
  nlohmann::json a8 = a16;
  a8["compact"]["nics_per_switch"] = 2;
  const Topology m8 = topology_from_json(a8, "a8.json");
  const Topology slow = join_machines({m8, m8}, NetworkSpec{12.5, 2.7, 1.0}, "2xa100-8slow");
  const nccl::Graph gs = nccl::search(slow, slow.gpus());
  CHECK(gs.channels == 8);
  CHECK(gs.bw_inter == 12.0);
}

TEST_CASE("nccl.nics_under_the_cpus_carry_every_channel_at_the_widened_type") {
  // A DGX-1 V100 whose two 100 Gb/s NICs hang off the CPUs (one per socket) instead of the PCIe switches: no GPU
  // is within PXB of a NIC, so search.cc widens typeInter for the whole graph and every channel searches at it.
  // Both ports then carry a channel of 12 GB/s (the first channel alone used to, at half the busbw).
  nlohmann::json doc = nlohmann::json::parse(builtin_topology_text("dgx1-v100"));
  doc["name"] = "dgx1-cpu-nics";
  doc["compact"].erase("nics_per_switch");
  doc["compact"]["nics_per_socket"] = 1;
  doc["compact"]["nic_bandwidth"] = 12.5;
  const Topology machine = topology_from_json(doc, "dgx1-cpu-nics.json");
  REQUIRE(machine.nodes_of_kind(NodeKind::kNic).size() == 2);
  const Topology c = join_machines({machine, machine}, NetworkSpec{12.5, 2.7, 1.0}, "2xdgx1-cpu-nics");
  const nccl::Graph g = nccl::search(c, c.gpus());
  CHECK(g.channels == 2);
  CHECK(g.bw_inter == 12.0);
  std::set<int> ports;
  for (const nccl::Channel& ch : g.rings) ports.insert(ch.nics[0]);
  CHECK(ports.size() == 2);
  // Both ports busy: the 1 GiB ring's busbw is bounded by two ports at the network efficiency (2 × 12.5 × 0.9),
  // where one channel was bounded by one.
  const double busbw = sim(c, "nccl.ring.simple", std::uint64_t{1} << 30).busbw_gbps;
  CHECK(busbw > 1.8 * 12.5 * 0.9);
  CHECK(busbw <= 2 * 12.5 * 0.9 * 16.0 / 15.0);
}

TEST_CASE("nccl.cpu_type_across_machines") {
  // NCCL's CPU type (configs/README.md "CPU architecture"): each rank takes its machine's first CPU, mixed when
  // the ranks' differ (init.cc); tuning.cc v2.28.9-1 reads it in getNetOverhead (line 214), llMaxBws (line 253)
  // and the POWER Tree/Simple latency (line 260).
  const int ring = static_cast<int>(nccl::Algo::kRing), tree = static_cast<int>(nccl::Algo::kTree);
  const int ll = static_cast<int>(nccl::Proto::kLL), simple = static_cast<int>(nccl::Proto::kSimple);
  // Two DGX A100 (2 × AMD EPYC 7742 each, configs/dgx-a100.json).
  const nccl::Graph amd = graph_of("2xdgx-a100");
  CHECK(amd.amd_cpu);
  CHECK(amd.amd_x86_cpu);
  CHECK_FALSE(amd.power_cpu);
  nccl::Graph intel = amd;  // the same machines stating Intel CPUs
  intel.amd_cpu = intel.amd_x86_cpu = false;
  // Ring over 16 ranks on 2 machines: 30 steps, 2 of them across the network (NET Ring/LL 2.7 µs); the 28
  // NVLink steps (0.6 µs) pay getNetOverhead: 2 µs on AMD, 1 on Intel; × 3 under Simple (NVLink 3.4 µs).
  CHECK(nccl::all_reduce_latency_us(amd, nccl::Algo::kRing, nccl::Proto::kLL) ==
        doctest::Approx(6.6 + 28 * 2.0 + 2 * 2.7));
  CHECK(nccl::all_reduce_latency_us(intel, nccl::Algo::kRing, nccl::Proto::kLL) ==
        doctest::Approx(6.6 + 28 * 1.0 + 2 * 2.7));
  CHECK(nccl::all_reduce_latency_us(amd, nccl::Algo::kRing, nccl::Proto::kSimple) ==
        doctest::Approx(8.4 + 28 * 6.0 + 2 * 14.0));
  CHECK(nccl::all_reduce_latency_us(intel, nccl::Algo::kRing, nccl::Proto::kSimple) ==
        doctest::Approx(8.4 + 28 * 3.4 + 2 * 14.0));
  // Tree does not pay it.
  CHECK(nccl::all_reduce_latency_us(amd, nccl::Algo::kTree, nccl::Proto::kLL) ==
        nccl::all_reduce_latency_us(intel, nccl::Algo::kTree, nccl::Proto::kLL));
  // llMaxBws across 2 machines: AMD 22.5 GB/s, Intel 39, capping the bus bandwidth of Ring/LL (busBw × .5)
  // and Tree/LL (busBw ÷ 3.8); the table holds algorithm bandwidth: Ring × 16/30 (nRanks/nsteps), Tree × .5.
  const nccl::CostTable ta = nccl::all_reduce_table(amd), ti = nccl::all_reduce_table(intel);
  CHECK(ta.bandwidth[ring][ll] == doctest::Approx(22.5 * 16 / 30));
  CHECK(ti.bandwidth[ring][ll] == doctest::Approx(39.0 * 16 / 30));
  CHECK(ta.bandwidth[tree][ll] == doctest::Approx(22.5 * 0.5));
  CHECK(ti.bandwidth[tree][ll] == doctest::Approx(39.0 * 0.5));
  for (int p = 0; p < nccl::kProtos; ++p) {  // the other protocols do not read it
    if (p == ll) continue;
    CHECK(ta.bandwidth[ring][p] == ti.bandwidth[ring][p]);
    CHECK(ta.bandwidth[tree][p] == ti.bandwidth[tree][p]);
  }
  CHECK(nccl::channel_cap_gbps(amd, nccl::Algo::kRing, nccl::Proto::kLL, 8) == doctest::Approx(22.5 / amd.channels));
  CHECK(nccl::channel_cap_gbps(intel, nccl::Algo::kRing, nccl::Proto::kLL, 8) == doctest::Approx(39.0 / amd.channels));
  // The simulator's ring steps pay the same overhead: its device latency of Ring/LL is 28 µs longer.
  CHECK(nccl::device_latency_us(amd, nccl::Algo::kRing, nccl::Proto::kLL) -
            nccl::device_latency_us(intel, nccl::Algo::kRing, nccl::Proto::kLL) ==
        doctest::Approx(28.0));

  // On one machine neither applies (index1 is the GPU generation there; no network step).
  const nccl::Graph one = graph_of("dgx-a100");
  CHECK(one.amd_cpu);
  nccl::Graph one_intel = one;
  one_intel.amd_cpu = one_intel.amd_x86_cpu = false;
  const nccl::CostTable oa = nccl::all_reduce_table(one), oi = nccl::all_reduce_table(one_intel);
  for (int a = 0; a < nccl::kAlgos; ++a) {
    for (int p = 0; p < nccl::kProtos; ++p) {
      CHECK(oa.bandwidth[a][p] == oi.bandwidth[a][p]);
      CHECK(oa.latency_us[a][p] == oi.latency_us[a][p]);
    }
  }

  // Clusters of inline machines that state other CPUs: the DGX A100 layout with each machine's cpu_arch.
  auto cluster = [](const std::string& first, const std::string& second) {
    auto machine = [](const std::string& cpu_arch) {
      nlohmann::json m = {{"compact",
                           {{"gpus", 8},
                            {"arch", "sm80"},
                            {"nvswitch", {{"lanes_per_gpu", 12}, {"lane_bandwidth", 25}}},
                            {"pcie_switches", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
                            {"sockets", {{0, 1}, {2, 3}}},
                            {"pcie_bandwidth", 24},
                            {"smp_bandwidth", 16},
                            {"nics_per_switch", 2},
                            {"nic_bandwidth", 25}}}};
      if (!cpu_arch.empty()) m["compact"]["cpu_arch"] = cpu_arch;
      return m;
    };
    const nlohmann::json doc = {{"machines", {machine(first), machine(second)}}, {"network", {{"nic_bandwidth", 25}}}};
    const Topology t = topology_from_json(doc, "test.json");
    return nccl::search(t, t.gpus());
  };
  auto flags = [](const nccl::Graph& g) { return std::tuple(g.amd_cpu, g.amd_x86_cpu, g.power_cpu); };
  CHECK(flags(cluster("x86_64-amd", "x86_64-amd")) == std::tuple(true, true, false));
  // A machine that states nothing (or x86_64 without a vendor) is taken to match.
  CHECK(flags(cluster("x86_64-amd", "")) == std::tuple(true, true, false));
  CHECK(flags(cluster("", "x86_64-amd")) == std::tuple(true, true, false));
  CHECK(flags(cluster("x86_64", "x86_64-amd")) == std::tuple(true, true, false));
  // AMD beside Intel: NCCL's vendor is MIXED, which reads llMaxBws' AMD row but is not "x86 AMD" for the overhead.
  const nccl::Graph mixed = cluster("x86_64-amd", "x86_64-intel");
  CHECK(flags(mixed) == std::tuple(true, false, false));
  CHECK(nccl::all_reduce_table(mixed).bandwidth[ring][ll] == doctest::Approx(22.5 * 16 / 30));
  CHECK(nccl::all_reduce_latency_us(mixed, nccl::Algo::kRing, nccl::Proto::kLL) ==
        doctest::Approx(6.6 + 28 * 1.0 + 2 * 2.7));
  CHECK(flags(cluster("x86_64-intel", "x86_64-intel")) == std::tuple(false, false, false));
  CHECK(flags(cluster("", "")) == std::tuple(false, false, false));
  CHECK(flags(cluster("arm64", "arm64")) == std::tuple(false, false, false));
  CHECK(flags(cluster("x86_64-zhaoxin", "x86_64-zhaoxin")) == std::tuple(false, false, false));
  CHECK(flags(cluster("ppc64", "ppc64")) == std::tuple(false, false, true));
  CHECK(flags(cluster("ppc64", "x86_64-intel")) == std::tuple(false, false, false));

  // POWER: Tree/Simple takes Ring/Simple's PCI latency where the rings run over PCIe (a PCIe-only machine).
  auto pcie_machine = [](const std::string& cpu_arch) {
    const nlohmann::json doc = {{"compact",
                                 {{"gpus", 4},
                                  {"arch", "sm70"},
                                  {"cpu_arch", cpu_arch},
                                  {"pcie_switches", {{0, 1}, {2, 3}}},
                                  {"nics_per_switch", 1},
                                  {"nic_bandwidth", 12.5}}}};
    const Topology t = topology_from_json(doc, "pcie.json");
    return nccl::search(t, t.gpus());
  };
  const nccl::Graph power = pcie_machine("ppc64"), x86 = pcie_machine("x86_64-intel");
  CHECK(power.power_cpu);
  CHECK_FALSE(power.nvlink_intra);
  const nccl::Latencies pt = nccl::latencies(power, nccl::Algo::kTree, nccl::Proto::kSimple);
  const nccl::Latencies xt = nccl::latencies(x86, nccl::Algo::kTree, nccl::Proto::kSimple);
  const nccl::Latencies pr = nccl::latencies(power, nccl::Algo::kRing, nccl::Proto::kSimple);
  // hwLatencies PCI Tree/Simple 4.0, Ring/Simple 5.7 (v2.28.9-1: the "de-penalizing" raises it there).
  CHECK(pr.intra_us == doctest::Approx(5.7));
  CHECK(pt.intra_us == doctest::Approx(5.7));
  CHECK(xt.intra_us == doctest::Approx(4.0));
  CHECK(nccl::latencies(power, nccl::Algo::kTree, nccl::Proto::kLL).intra_us == doctest::Approx(1.0));
  // Tree all-reduce on one machine of 4: 8.4 + 2·(4−1) steps.
  CHECK(nccl::all_reduce_table(power).latency_us[tree][simple] == doctest::Approx(8.4 + 6 * 5.7));
  CHECK(nccl::all_reduce_table(x86).latency_us[tree][simple] == doctest::Approx(8.4 + 6 * 4.0));
  // On NVLink rings the PCI row is not read.
  CHECK(nccl::latencies(amd, nccl::Algo::kTree, nccl::Proto::kSimple).intra_us ==
        nccl::latencies(intel, nccl::Algo::kTree, nccl::Proto::kSimple).intra_us);
}

TEST_CASE("nccl.releases_choose_with_their_own_tables") {
  // NCCL's choice follows the cost table of its release (src/graph/tuning.cc by tag, nccl_model.cpp "Releases");
  // the channel search and the simulated time stay the model's.
  const NcclRelease r2195{2, 19, 5}, r2205{2, 20, 5}, r2215{2, 21, 5}, r2223{2, 22, 3}, r2234{2, 23, 4},
      r2287{2, 28, 7};
  // Latency tables: Tree/Simple base 0 and 28 µs per step on every link class before 2.23 (4/4/14 after, base 8.4);
  // NVLS and NVLSTree over NVLink 23 µs before 2.21; NVLSTree's network step 14 µs before 2.28.9 (20.9 from it).
  const int tree = static_cast<int>(nccl::Algo::kTree), simple = static_cast<int>(nccl::Proto::kSimple);
  const int nvls = static_cast<int>(nccl::Algo::kNvls), nvlstree = static_cast<int>(nccl::Algo::kNvlsTree);
  const nccl::LatencyTables old = nccl::LatencyTables::of(r2205);
  CHECK(old.base[tree][simple] == 0.0);
  for (int hw = 0; hw < 3; ++hw) CHECK(old.hw[hw][tree][simple] == 28.0);
  CHECK(old.hw[0][nvls][simple] == 23.0);
  CHECK(old.hw[0][nvlstree][simple] == 23.0);
  CHECK(old.hw[2][nvlstree][simple] == 14.0);
  CHECK(nccl::LatencyTables::of(r2215).hw[0][nvls][simple] == 25.0);
  CHECK(nccl::LatencyTables::of(r2234).hw[1][tree][simple] == 4.0);
  CHECK(nccl::LatencyTables::of(r2287).hw[2][nvlstree][simple] == 14.0);
  const nccl::LatencyTables& now = nccl::LatencyTables::defaults();
  CHECK(now.base[tree][simple] == 8.4);
  CHECK(now.hw[2][nvlstree][simple] == 20.9);
  CHECK(nccl::LatencyTables::of(kModelledNcclRelease).hw[2][nvlstree][simple] == 20.9);

  // Tree/Simple across 2 machines of 8 GPUs: 2 · ((8 − 1) · intra + log2(2) · inter) + base.
  nccl::Graph two = graph_of("2xdgx-h100");
  CHECK(nccl::all_reduce_latency_us(two, nccl::Algo::kTree, nccl::Proto::kSimple) ==
        doctest::Approx(8.4 + 2 * (7 * 4.0 + 14.0)));
  two.release = r2223;
  CHECK(nccl::all_reduce_latency_us(two, nccl::Algo::kTree, nccl::Proto::kSimple) ==
        doctest::Approx(2 * (7 * 28.0 + 28.0)));

  // Ring/LL's bus bandwidth: × 1/4 for all-reduce before 2.21, × 1/2 from it, under llMaxBws' cap (Volta, one
  // machine: 39 GB/s), then × ranks/steps.
  nccl::Graph v100 = graph_of("dgx1-v100");
  const double x = v100.channels * v100.bw_intra, ratio = 8.0 / 14.0;
  const int ring = static_cast<int>(nccl::Algo::kRing), ll = static_cast<int>(nccl::Proto::kLL);
  CHECK(nccl::all_reduce_table(v100).bandwidth[ring][ll] == doctest::Approx(std::min(39.0, x / 2) * ratio));
  v100.release = r2205;
  CHECK(nccl::all_reduce_table(v100).bandwidth[ring][ll] == doctest::Approx(std::min(39.0, x / 4) * ratio));
  // Single-machine all-gather: × 1/3 before 2.21.
  CHECK(nccl::cost_table(v100, Collective::kAllGather).bandwidth[ring][ll] ==
        doctest::Approx(std::min(39.0, x / 3) * 8.0 / 7.0));

  // Hopper's LL cap on one machine: Ampere's 87.7 GB/s before 2.21, 141 from it.
  nccl::Graph h100 = graph_of("dgx-h100");
  const double hx = h100.channels * h100.bw_intra;
  CHECK(nccl::all_reduce_table(h100).bandwidth[ring][ll] == doctest::Approx(std::min(141.0, hx / 2) * 8.0 / 14.0));
  h100.release = r2215;
  CHECK(nccl::all_reduce_table(h100).bandwidth[ring][ll] == doctest::Approx(std::min(141.0, hx / 2) * 8.0 / 14.0));
  h100.release = r2205;
  CHECK(nccl::all_reduce_table(h100).bandwidth[ring][ll] == doctest::Approx(std::min(87.7, hx / 4) * 8.0 / 14.0));

  // NVLSTree before 2.28: heads × min(bwIntra, bwInter / 2 past two machines) × 5/6.
  nccl::Graph three = graph_of("3xdgx-h100");
  three.release = r2215;
  const double net = three.bw_inter * three.channels / three.nvls_channels;
  CHECK(nccl::all_reduce_table(three).bandwidth[nvlstree][simple] ==
        doctest::Approx(three.nvls_channels * std::min(three.nvls_bw, net / 2) * 5.0 / 6.0));
  // ... which moves NCCL's pick at 1 MiB on 3 × 8 H100: NVLSTree with 2.21's table, Tree/LL128 with 2.28.9's.
  CHECK(pick(three, 1 << 20) == "nvlstree.simple");
  CHECK(pick(graph_of("3xdgx-h100"), 1 << 20) == "tree.ll128");

  // PAT first shipped in 2.23: earlier releases cannot run it.
  const Topology c8 = load_topology("8xdgx-h100");
  std::vector<int> heads;
  for (int m = 0; m < 8; ++m) heads.push_back(c8.gpus_of_machine(m).front());
  nccl::Graph one_per_machine = nccl::search(c8, heads);
  CHECK(nccl::pat_enabled(one_per_machine));
  one_per_machine.release = r2223;
  CHECK_FALSE(nccl::pat_enabled(one_per_machine));
  CHECK_THROWS_AS(nccl::choose(one_per_machine, 8, {nccl::Algo::kPat, std::nullopt}, "x", Collective::kAllGather),
                  InvalidInput);
  one_per_machine.release = r2195;
  CHECK(nccl::choose(one_per_machine, 1 << 20, {}, "x", Collective::kAllGather).algo == nccl::Algo::kRing);
}

TEST_CASE("nccl.release_in_the_simulator") {
  // The cost model's release reaches the NCCL group ops: the same plan simulated as NCCL 2.21 makes its choice.
  const Topology t = load_topology("3xdgx-h100");
  BuildOptions o;
  o.count = (1 << 20) / 4;
  const Plan plan = build_plan(t, parse_spec("nccl"), o);
  CostModel m = CostModel::defaults();
  CHECK(simulate(plan, t, m, 4).groups.front().algorithm == "tree");
  m.nccl_release = NcclRelease{2, 21, 5};
  CHECK(simulate(plan, t, m, 4).groups.front().algorithm == "nvlstree");
}

TEST_CASE("nccl.tree_graph_pattern") {
  // search.cc ncclTopoCompute: the tree graph is first searched as a BALANCED_TREE (two GPUs of a machine reach the
  // channel's NIC) from PIX GPU–NIC paths; on sm90+ a first search that is not optimal falls back to the simpler
  // TREE, and one GPU per machine always searches TREE. tuning.cc: Tree's bus bandwidth × .85 for a TREE graph.
  const auto machine = [](const std::string& arch, const nlohmann::json& switches, int nics_per_switch) {
    const nlohmann::json j = {{"name", "m-" + arch},
                              {"compact",
                               {{"gpus", 8},
                                {"arch", arch},
                                {"cpu_arch", "x86_64-intel"},
                                {"nvswitch", {{"lanes_per_gpu", 18}, {"lane_bandwidth", 25}}},
                                {"pcie_switches", switches},
                                {"pcie_bandwidth", 48},
                                {"nics_per_switch", nics_per_switch},
                                {"nic_bandwidth", 50}}}};
    return topology_from_json(j, "m.json");
  };
  const nlohmann::json pairs = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  const nlohmann::json singles = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
  const NetworkSpec net{50, 2.7, 1.0};
  // H100 machines with a NIC per GPU, each under its own switch (the built-in dgx-h100): TREE.
  const nccl::Graph own = graph_of("2xdgx-h100");
  CHECK(own.simple_tree);
  const Topology own_json = join_machines({machine("sm90", singles, 1), machine("sm90", singles, 1)}, net, "own");
  CHECK(nccl::search(own_json, own_json.gpus()).simple_tree);
  // Two GPUs and two NICs under each switch: the balanced tree is found at PIX, no fallback.
  const Topology shared = join_machines({machine("sm90", pairs, 2), machine("sm90", pairs, 2)}, net, "shared");
  const nccl::Graph g_shared = nccl::search(shared, shared.gpus());
  CHECK_FALSE(g_shared.simple_tree);
  // Before sm90 NCCL never falls back (the A100's layout alike or not).
  const Topology ampere = join_machines({machine("sm80", singles, 1), machine("sm80", singles, 1)}, net, "a100");
  CHECK_FALSE(nccl::search(ampere, ampere.gpus()).simple_tree);
  CHECK_FALSE(graph_of("2xdgx-a100").simple_tree);
  // One GPU per machine: TREE whatever the machine.
  const Topology four = load_topology("4xdgx-a100");
  const std::vector<int> one_each = {four.gpus()[0], four.gpus()[8], four.gpus()[16], four.gpus()[24]};
  CHECK(nccl::search(four, one_each).simple_tree);
  // One machine: no network, no fallback taken by the model.
  CHECK_FALSE(graph_of("dgx-h100").simple_tree);
  // The factor: on graphs alike but for the pattern, every Tree cell is .85 of the balanced one; Ring's is the same.
  nccl::Graph balanced = own;
  balanced.simple_tree = false;
  const nccl::CostTable t = nccl::all_reduce_table(own), b = nccl::all_reduce_table(balanced);
  const int tree = static_cast<int>(nccl::Algo::kTree), ring = static_cast<int>(nccl::Algo::kRing);
  for (int p = 0; p < nccl::kProtos; ++p) {
    CAPTURE(p);
    CHECK(t.bandwidth[tree][p] == doctest::Approx(0.85 * b.bandwidth[tree][p]).epsilon(1e-12));
    CHECK(t.bandwidth[ring][p] == b.bandwidth[ring][p]);
    CHECK(t.latency_us[tree][p] == b.latency_us[tree][p]);
  }
  // Tree/LL on three H100 machines, in closed form (NVIDIA/nccl#1453's 64 KiB line, NCCL 2.21 printed 37.798233 µs):
  // llMaxBw 20.4 GB/s × .85 × .5, × .6 at 64 KiB (treeCorrectionFactor), after the 25.2 µs latency.
  nccl::Graph three = graph_of("3xdgx-h100");
  three.release = NcclRelease{2, 21, 5};
  REQUIRE(three.simple_tree);
  const nccl::CostTable t3 = nccl::all_reduce_table(three);
  const double ll = nccl::algo_time(three, t3, nccl::Algo::kTree, nccl::Proto::kLL, 65536);
  CHECK(ll == doctest::Approx(25.2 + 65536.0 / (1000.0 * 20.4 * 0.85 * 0.5 * 0.6)).epsilon(1e-9));
}

TEST_CASE("nccl.tree_correction_in_the_simulated_time") {
  // tuning.cc treeCorrectionFactor, per protocol and log2(bytes / 64): what NCCL's estimate and now the simulated
  // time of a Tree all-reduce scale Tree's bandwidth by.
  CHECK(nccl::tree_correction(nccl::Proto::kLL, 64) == 1.0);
  CHECK(nccl::tree_correction(nccl::Proto::kLL, 65536) == 0.6);
  CHECK(nccl::tree_correction(nccl::Proto::kLL, 262144) == 0.4);
  CHECK(nccl::tree_correction(nccl::Proto::kSimple, 32) == 1.0);  // below 64 B: no entry
  CHECK(nccl::tree_correction(nccl::Proto::kSimple, 64) == 0.9);
  CHECK(nccl::tree_correction(nccl::Proto::kLL128, double(std::uint64_t{1} << 30)) == 1.0);
  // Two H100 machines at 64 KiB, Tree/LL forced: the channels run at the table's rate × .6, and nothing else
  // limits them, so the time is the launch, the device latency and 64 KiB at .6 of Tree/LL's algorithm bandwidth.
  const Topology t = load_topology("2xdgx-h100");
  const nccl::Graph g = nccl::search(t, t.gpus());
  const double bw = nccl::all_reduce_table(g).bandwidth[static_cast<int>(nccl::Algo::kTree)][static_cast<int>(nccl::Proto::kLL)];
  REQUIRE(bw > 0);
  CHECK(nccl::channel_cap_gbps(g, nccl::Algo::kTree, nccl::Proto::kLL, 65536) ==
        doctest::Approx(bw / g.channels * 0.6).epsilon(1e-12));
  const double expect = nccl::launch_us() + nccl::device_latency_us(g, nccl::Algo::kTree, nccl::Proto::kLL) +
                        65536.0 / (1000.0 * bw * 0.6);
  CHECK(sim(t, "nccl.tree.ll", 65536).time_us == doctest::Approx(expect).epsilon(1e-6));
}

TEST_CASE("nccl.pxn_sends_to_a_nic_through_its_own_gpu") {
  // paths.cc (PXN): a GPU sends to a NIC through the NIC's own GPU over NVLink when that GPU is within PXB of the
  // NIC and the sender's own path crosses a CPU (or carries less); receiving stays direct.
  const Topology h = load_topology("2xdgx-h100");  // each GPU with its own NIC under its own PCIe switch
  const std::vector<int> gpus = h.nodes_of_kind(NodeKind::kGpu, 0);
  const std::vector<int> nics = h.nodes_of_kind(NodeKind::kNic, 0);
  REQUIRE(gpus.size() == 8);
  REQUIRE(nics.size() == 8);
  for (const int nic : nics) {
    int own = -1;
    for (const int g : gpus) {
      if (h.route(g, nic).type == PathType::kPix) own = g;
    }
    REQUIRE(own >= 0);
    // The NIC's own GPU sends directly; every other GPU through it: its NVLink route to that GPU, then that GPU's
    // PCIe route to the NIC.
    CHECK(nccl::nic_local_gpu(h, nic, gpus) == own);
    CHECK(nccl::net_send_route(h, own, nic, own).links == h.route(own, nic).links);
    for (const int g : gpus) {
      if (g == own) continue;
      const Route pxn = nccl::net_send_route(h, g, nic, own);
      CHECK(h.route(g, nic).type > PathType::kPxb);
      CHECK(pxn.type == PathType::kPxn);
      std::vector<int> expect = h.route(g, own).links;
      const std::vector<int>& tail = h.route(own, nic).links;
      expect.insert(expect.end(), tail.begin(), tail.end());
      CHECK(pxn.links == expect);
      CHECK(h.route(nic, g).type > PathType::kPxb);  // receiving is not PXN
    }
  }
  // The ring search: each channel enters a machine at its NIC's own GPU and leaves through PXN, so the graph's
  // GPU-to-NIC type is PXN, which keeps LL128 on sm90 (tuning.cc).
  const nccl::Graph g = nccl::search(h, h.gpus());
  for (const nccl::Channel& ch : g.rings) {
    for (int m = 0; m < g.machines; ++m) {
      const int nic = ch.nics[static_cast<std::size_t>(m)];
      const int head = ch.ring[static_cast<std::size_t>(m * g.ppn)];
      const int tail = ch.ring[static_cast<std::size_t>(m * g.ppn + g.ppn - 1)];
      CHECK(h.route(nic, head).type == PathType::kPix);
      CHECK(ch.nic_gpus[static_cast<std::size_t>(m)] == nccl::nic_local_gpu(h, nic, h.gpus()));
      CHECK(nccl::net_send_route(h, tail, nic, ch.nic_gpus[static_cast<std::size_t>(m)]).type == PathType::kPxn);
    }
  }
  CHECK(g.ll128_ok);
  CHECK(g.type_inter == PathType::kPxn);
  // LL128 over PXN: every release's table keeps it but v2.27.3-1 to v2.27.6-1's (NCCL_LL128_C2C 1: only up to P2C).
  const int ring = static_cast<int>(nccl::Algo::kRing), ll128 = static_cast<int>(nccl::Proto::kLL128);
  for (const auto& [release, on] : std::vector<std::pair<NcclRelease, bool>>{
           {{2, 22, 3}, true}, {{2, 27, 3}, false}, {{2, 27, 6}, false}, {{2, 27, 7}, true}, {{2, 28, 9}, true}}) {
    nccl::Graph at = g;
    at.release = release;
    CAPTURE(to_string(release));
    CHECK((nccl::all_reduce_table(at).bandwidth[ring][ll128] > 0) == on);
  }
  // Without NVLink between the GPUs there is no peer to relay through: two PCIe machines send through the CPU.
  const Topology p = load_topology("2xpcie-8gpu");
  const std::vector<int> pg = p.nodes_of_kind(NodeKind::kGpu, 0);
  for (const int nic : p.nodes_of_kind(NodeKind::kNic, 0)) {
    const int own = nccl::nic_local_gpu(p, nic, pg);
    for (const int gpu : pg) CHECK(nccl::net_send_route(p, gpu, nic, own).type == p.route(gpu, nic).type);
  }
  // Nor is there where every NIC sits under a CPU (no GPU within PXB of any): see the test above.
}

TEST_CASE("nccl.graphs_found_once_per_topology_and_group") {
  // search keeps the graphs it finds (a sweep, the tuner and a calibration's fit ask for the same one many times);
  // the key holds what the search reads beyond the topology's fingerprint: the GPUs' architectures.
  nlohmann::json doc = nlohmann::json::parse(builtin_topology_text("dgx-h100"));
  const Topology h100 = topology_from_json(doc, "h100.json");
  doc["compact"]["arch"] = "sm80";
  const Topology as_a100 = topology_from_json(doc, "h100.json");
  REQUIRE(h100.fingerprint() == as_a100.fingerprint());
  const nccl::Graph g90 = nccl::search(h100, h100.gpus());
  const nccl::Graph g80 = nccl::search(as_a100, as_a100.gpus());
  CHECK(g90.nvls_channels == 8);  // NVLS needs sm90
  CHECK(g80.nvls_channels == 0);
  // Asked again: the same graph, for either.
  CHECK(nccl::search(h100, h100.gpus()).nvls_channels == 8);
  CHECK(nccl::search(as_a100, as_a100.gpus()).nvls_channels == 0);
  // Another group of the same topology is its own entry.
  const std::vector<int> two{h100.gpus()[0], h100.gpus()[1]};
  CHECK(nccl::search(h100, two).ranks == 2);
  CHECK(nccl::search(h100, h100.gpus()).ranks == 8);
}

TEST_CASE("nccl.tree_graph_raises_its_intra_speed_across_machines") {
  // search.cc pass 2 of a tree pattern raises bwIntra alone, while it is below twice bwInter and every channel's
  // chain fits its links; tuning.cc takes Tree's bandwidth from it on two machines. 2 × Oracle BM.GPU4.8 as NCCL
  // 2.19.3 sees it (its 100 Gb/s ports not fused, below): 16 channels at 12 GB/s (one per port); the chains then fit
  // 15 GB/s (16 × 15 = 240 GB/s, an A100's 12 NVLink lanes at 20) but not the next step, 18.
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  const Topology oci =
      load_topology(std::string(root != nullptr ? root : ".") + "/tests/simulator/data/2xoci-bm-gpu4.8.json");
  nccl::Graph g = nccl::search(oci, oci.gpus(), NcclRelease{2, 19, 3});
  REQUIRE(g.channels == 16);
  CHECK(g.bw_intra == 12.0);
  CHECK(g.bw_inter == 12.0);
  CHECK(g.tree_bw_intra == 15.0);
  const int tree = static_cast<int>(nccl::Algo::kTree), ring = static_cast<int>(nccl::Algo::kRing);
  const int simple = static_cast<int>(nccl::Proto::kSimple);
  const nccl::CostTable t = nccl::all_reduce_table(g);
  CHECK(t.bandwidth[tree][simple] == doctest::Approx(16 * 15.0 * 0.92 * 0.5));
  CHECK(t.bandwidth[ring][simple] == doctest::Approx(16 * 12.0 * 16.0 / 30.0));
  // NCCL 2.19.3 picks Tree at 1 GiB, as the published run above the machines' 200 GB/s of network shows
  // (oci-a100-2x8-roce16-1g); with the ring's speed for the tree graph it would pick Ring.
  CHECK(pick(g, double(1 << 30)) == "tree.simple");
  nccl::Graph flat = g;
  flat.tree_bw_intra = flat.bw_intra;
  CHECK(pick(flat, double(1 << 30)) == "ring.simple");
  // Past two machines tuning.cc takes bwInter (the raised speed is not read), and on one machine nothing is raised.
  nccl::Graph three = graph_of("3xdgx-a100");
  REQUIRE(three.tree_bw_intra > three.bw_inter);
  const double before = nccl::all_reduce_table(three).bandwidth[tree][simple];
  CHECK(before == doctest::Approx(std::min(three.channels * three.bw_inter * 0.92, three.channels * 17.8) * 0.5));
  three.tree_bw_intra *= 2;
  CHECK(nccl::all_reduce_table(three).bandwidth[tree][simple] == before);
  const nccl::Graph one = graph_of("dgx-a100");
  CHECK(one.tree_bw_intra == one.bw_intra);
}

TEST_CASE("nccl.nic_ports_of_one_card_fuse_from_2_24") {
  // 2 x Oracle BM.GPU4.8: 8 dual-port ConnectX-6 cards of 2 x 100 Gb/s per machine (Oracle's topology file lists two
  // <net> ports in each <nic>). NCCL 2.24+ fuses each card's ports into one 200 Gb/s NIC: 8 channels at 24 GB/s,
  // whose trees the per-channel cap keeps below the rings (8 x 23.6), so Ring at 1 GiB; before 2.24, 16 channels
  // at 12 and trees raised to 15: Tree (the 2.19.3 run above the network's 200 GB/s; the 2.25/2.26 runs at 95 % of
  // it, a ring).
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  const Topology oci =
      load_topology(std::string(root != nullptr ? root : ".") + "/tests/simulator/data/2xoci-bm-gpu4.8.json");
  const NcclRelease r2193{2, 19, 3}, r2251{2, 25, 1};
  CHECK_FALSE(nccl::fuses_nic_ports(NcclRelease{2, 23, 4}));
  CHECK(nccl::fuses_nic_ports(NcclRelease{2, 24, 3}));
  const nccl::Graph fused = nccl::search(oci, oci.gpus(), r2251);
  CHECK(fused.release == r2251);
  REQUIRE(fused.channels == 8);
  CHECK(fused.bw_inter == 24.0);
  for (const nccl::Channel& ch : fused.rings) {
    REQUIRE(ch.nic_ports.size() == 2);
    for (std::size_t m = 0; m < 2; ++m) {
      REQUIRE(ch.nic_ports[m].size() == 2);
      CHECK(ch.nic_ports[m][0] == ch.nics[m]);
      const std::string& a = oci.nodes()[static_cast<std::size_t>(ch.nic_ports[m][0])].bus_id;
      const std::string& b = oci.nodes()[static_cast<std::size_t>(ch.nic_ports[m][1])].bus_id;
      CHECK(a.substr(0, a.size() - 1) == b.substr(0, b.size() - 1));
    }
  }
  CHECK(pick(fused, double(1 << 30)) == "ring.simple");
  const nccl::Graph ports = nccl::search(oci, oci.gpus(), r2193);
  CHECK(ports.channels == 16);
  CHECK(ports.bw_inter == 12.0);
  CHECK(ports.rings.front().nic_ports.front().size() == 1);
  CHECK(pick(ports, double(1 << 30)) == "tree.simple");
  // The fused channels' traffic crosses both ports of each card evenly.
  BuildOptions o;
  o.count = 1 << 28;
  CostModel model = CostModel::defaults(BackendProfile::kNccl);
  model.nccl_release = r2251;
  const SimResult r = simulate(build_plan(oci, parse_spec("nccl"), o), oci, model, 4);
  double port0 = -1, port1 = -1;
  for (const LinkUsage& u : r.links) {
    const std::string name = link_name(oci, u.link);
    if (name.find("m0/nic0->") == 0) port0 = u.bytes;
    if (name.find("m0/nic1->") == 0) port1 = u.bytes;
  }
  CHECK(port0 > 0);
  CHECK(port0 == doctest::Approx(port1));
}
