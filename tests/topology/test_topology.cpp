// The model itself, on topologies built by hand (no JSON): routes, path
// types, matrices, indices and validation of add_node/add_link.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <limits>

#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/topology.hpp"

using namespace artune;

namespace {

Node mk(std::string id, NodeKind kind, int machine = 0, int local = -1) {
  Node n;
  n.id = std::move(id);
  n.kind = kind;
  n.machine = machine;
  n.local_index = local;
  return n;
}

// A DGX-1-like machine: 2 sockets joined by SMP, 4 PCIe switches with 2 GPUs
// and 1 NIC each, and (optionally) the V100 hybrid cube-mesh NVLinks.
Topology dgx1_like(bool nvlink, int machine = 0, Topology* into = nullptr) {
  Topology local;
  Topology& t = into ? *into : local;
  const std::string p = into ? fmt::format("m{}/", machine) : "";
  const int cpu0 = t.add_node(mk(p + "cpu0", NodeKind::kCpu, machine));
  const int cpu1 = t.add_node(mk(p + "cpu1", NodeKind::kCpu, machine));
  t.add_duplex_link(cpu0, cpu1, LinkKind::kSmp, 10, 1);
  int gpu[8];
  for (int s = 0; s < 4; ++s) {
    const int sw = t.add_node(mk(p + "sw" + std::to_string(s), NodeKind::kPcieSwitch, machine));
    t.add_duplex_link(sw, s < 2 ? cpu0 : cpu1, LinkKind::kPcie, 12, 1);
    for (int k = 0; k < 2; ++k) {
      const int g = 2 * s + k;
      gpu[g] = t.add_node(mk(p + "gpu" + std::to_string(g), NodeKind::kGpu, machine, g));
      t.add_duplex_link(gpu[g], sw, LinkKind::kPcie, 12, 1);
    }
    const int nic = t.add_node(mk(p + "nic" + std::to_string(s), NodeKind::kNic, machine));
    t.add_duplex_link(nic, sw, LinkKind::kPcie, 12, 1);
  }
  if (nvlink) {
    const int nv2[][2] = {{0, 3}, {0, 4}, {1, 2}, {1, 5}, {2, 3}, {4, 7}, {5, 6}, {6, 7}};
    const int nv1[][2] = {{0, 1}, {0, 2}, {1, 3}, {2, 6}, {3, 7}, {4, 5}, {4, 6}, {5, 7}};
    for (auto& e : nv2) t.add_duplex_link(gpu[e[0]], gpu[e[1]], LinkKind::kNvLink, 50, 0.6, 2);
    for (auto& e : nv1) t.add_duplex_link(gpu[e[0]], gpu[e[1]], LinkKind::kNvLink, 25, 0.6, 1);
  }
  if (!into) t.finalize();
  return local;
}

int gpu(const Topology& t, int global) { return t.gpus().at(global); }

}  // namespace

TEST_CASE("topology.routes_nvlink_first") {
  const Topology t = dgx1_like(true);
  CHECK(t.route(gpu(t, 0), gpu(t, 3)).type == PathType::kNvl);
  CHECK(t.route(gpu(t, 0), gpu(t, 3)).bandwidth_gbps == 50);
  CHECK(t.route(gpu(t, 0), gpu(t, 3)).links.size() == 1);
  CHECK(t.route(gpu(t, 0), gpu(t, 1)).bandwidth_gbps == 25);
  // 3→4 has no NVLink: a copy engine does not relay through GPU 0 or 7, so it crosses the sockets.
  const Route& r34 = t.route(gpu(t, 3), gpu(t, 4));
  CHECK(r34.type == PathType::kSys);
  CHECK(r34.bandwidth_gbps == 10);
  CHECK(r34.links.size() == 5);  // gpu3→sw1→cpu0→cpu1→sw2→gpu4
  CHECK(r34.latency_us == doctest::Approx(5.0));
  CHECK(t.route(gpu(t, 2), gpu(t, 2)).type == PathType::kLoc);
  CHECK(t.route(gpu(t, 2), gpu(t, 2)).bandwidth_gbps == std::numeric_limits<double>::infinity());
}

TEST_CASE("topology.routes_pcie_classes") {
  const Topology t = dgx1_like(false);
  CHECK(t.route(gpu(t, 0), gpu(t, 1)).type == PathType::kPix);
  CHECK(t.route(gpu(t, 0), gpu(t, 2)).type == PathType::kPhb);
  CHECK(t.route(gpu(t, 0), gpu(t, 4)).type == PathType::kSys);
  CHECK(t.route(gpu(t, 0), t.find_node("cpu0")).type == PathType::kPhb);
  CHECK(t.route(gpu(t, 0), t.find_node("cpu1")).type == PathType::kSys);
  CHECK(t.nearest_nic(gpu(t, 5)) == t.find_node("nic2"));
  // Both directions of a link are distinct links.
  const Route& there = t.route(gpu(t, 0), gpu(t, 1));
  const Route& back = t.route(gpu(t, 1), gpu(t, 0));
  CHECK(there.links != back.links);
}

TEST_CASE("topology.matrices") {
  const Topology t = dgx1_like(true);
  const auto peers = peer_matrix(t);
  const auto lanes = nvlink_matrix(t);
  const auto bw = bandwidth_matrix(t);
  CHECK(peers[0][3]);
  CHECK_FALSE(peers[3][4]);
  CHECK(lanes[0][3] == 2);
  CHECK(lanes[0][1] == 1);
  CHECK(lanes[3][4] == 0);
  int total = 0;
  for (int i = 0; i < 8; ++i) {
    int per_gpu = 0;
    for (int j = 0; j < 8; ++j) per_gpu += lanes[i][j];
    CHECK(per_gpu == 6);
    total += per_gpu;
  }
  CHECK(total / 2 == 24);
  CHECK(bw[0][0] == 0);
  CHECK(bw[3][4] == 10);
  CHECK(path_type_matrix(t)[1][5] == PathType::kNvl);
}

TEST_CASE("topology.cluster_routes_and_indices") {
  Topology t;
  for (int m = 0; m < 2; ++m) dgx1_like(false, m, &t);
  const int net = t.add_node(mk("net", NodeKind::kNetSwitch, -1));
  for (int nic : t.nodes_of_kind(NodeKind::kNic)) t.add_duplex_link(nic, net, LinkKind::kNetwork, 12.5, 2.7);
  t.finalize();
  CHECK(t.machine_count() == 2);
  CHECK(t.gpus_per_machine() == 8);
  REQUIRE(t.gpus().size() == 16);
  CHECK(t.nodes()[gpu(t, 11)].id == "m1/gpu3");
  CHECK(t.nodes()[gpu(t, 11)].global_index == 11);
  CHECK(t.nodes()[gpu(t, 11)].local_index == 3);
  const Route& r = t.route(gpu(t, 1), gpu(t, 9));
  CHECK(r.type == PathType::kNet);
  CHECK(r.bandwidth_gbps == 12);
  int network_links = 0;
  for (int l : r.links) network_links += t.links()[l].kind == LinkKind::kNetwork;
  CHECK(network_links == 2);
  CHECK(t.gpus_of_machine(1).size() == 8);
}

TEST_CASE("topology.fingerprint") {
  const Topology a = dgx1_like(true);
  const Topology b = dgx1_like(true);
  const Topology c = dgx1_like(false);
  CHECK(a.fingerprint() == b.fingerprint());
  CHECK(a.fingerprint() != c.fingerprint());
  CHECK(a.fingerprint().size() == 16);
  const Topology copy = a;  // copies get their own route cache
  CHECK(copy.route(gpu(copy, 3), gpu(copy, 4)).type == PathType::kSys);
}

TEST_CASE("topology.machine_shape") {
  // Machines built alike have equal shapes, whatever their ids; another machine, or the same one with a GPU of
  // another architecture, does not.
  const Topology twins = load_topology("2xdgx1-v100");
  CHECK(twins.machine_shape(0) == twins.machine_shape(1));
  CHECK(twins.machine_shape(0).find("x:net_switch") != std::string::npos);  // the links leaving it count
  const Topology mixed = join_machines({load_topology("dgx1-v100"), load_topology("dgx1-p100")}, NetworkSpec{}, "vp");
  CHECK(mixed.machine_shape(0) != mixed.machine_shape(1));
  Topology a = dgx1_like(true), b = dgx1_like(true);
  CHECK(a.machine_shape(0) == b.machine_shape(0));
  Node odd = a.nodes()[static_cast<std::size_t>(gpu(a, 0))];
  odd.id = "gpu8";
  odd.local_index = 8;
  Node same = odd;
  odd.arch = "sm90";
  same.arch = "sm70";
  const int x = a.add_node(odd), y = b.add_node(same);
  a.add_duplex_link(gpu(a, 0), x, LinkKind::kNvLink, 25, 0.7);
  b.add_duplex_link(gpu(b, 0), y, LinkKind::kNvLink, 25, 0.7);
  CHECK(a.machine_shape(0) != b.machine_shape(0));
  CHECK(a.fingerprint() == b.fingerprint());  // decision tables of earlier releases keep loading
}

TEST_CASE("topology.memoised_traits_follow_changes") {
  // fingerprint() and machine_shape() are memoised; a node, a link or a network added after the first call
  // changes them as if nothing had been kept.
  Topology t = dgx1_like(true);
  const std::string fp = t.fingerprint(), shape = t.machine_shape(0);
  CHECK(t.fingerprint() == fp);
  Node extra = t.nodes()[static_cast<std::size_t>(gpu(t, 0))];
  extra.id = "gpu8";
  extra.local_index = 8;
  const int x = t.add_node(extra);
  const std::string with_node = t.fingerprint();
  CHECK(with_node != fp);
  CHECK(t.machine_shape(0) != shape);
  const std::string shape_with_node = t.machine_shape(0);
  t.add_duplex_link(gpu(t, 0), x, LinkKind::kNvLink, 25, 0.7);
  CHECK(t.fingerprint() != with_node);
  CHECK(t.machine_shape(0) != shape_with_node);
  const std::string with_link = t.fingerprint();
  NetworkSpec net;
  net.latency_us = 3;
  t.set_network(net);
  CHECK(t.fingerprint() != with_link);
  Topology fresh = dgx1_like(true);
  fresh.add_node(extra);
  fresh.add_duplex_link(gpu(fresh, 0), fresh.find_node("gpu8"), LinkKind::kNvLink, 25, 0.7);
  fresh.set_network(net);
  CHECK(fresh.fingerprint() == t.fingerprint());  // never asked before: computed from scratch, the same
  CHECK(fresh.machine_shape(0) == t.machine_shape(0));
}

TEST_CASE("topology.rejects_bad_construction") {
  Topology t;
  const int a = t.add_node(mk("a", NodeKind::kGpu));
  const int b = t.add_node(mk("b", NodeKind::kGpu));
  CHECK_THROWS_WITH_AS(t.add_node(mk("a", NodeKind::kCpu)), doctest::Contains("duplicate device id 'a'"), InvalidInput);
  CHECK_THROWS_WITH_AS(t.add_link({a, a, LinkKind::kNvLink, 25, 1, 1}), doctest::Contains("itself"), InvalidInput);
  CHECK_THROWS_WITH_AS(t.add_link({a, b, LinkKind::kNvLink, 0, 1, 1}), doctest::Contains("bandwidth"), InvalidInput);
  CHECK_THROWS_WITH_AS(t.add_link({a, b, LinkKind::kNvLink, 25, -1, 1}), doctest::Contains("latency"), InvalidInput);
  CHECK_THROWS_WITH_AS(t.add_link({a, 7, LinkKind::kNvLink, 25, 1, 1}), doctest::Contains("does not exist"),
                       InvalidInput);
  t.finalize();
  CHECK_THROWS_AS(t.route(a, b), Unsupported);  // no link at all
  Topology dup;
  dup.add_node(mk("g0", NodeKind::kGpu, 0, 0));
  dup.add_node(mk("g1", NodeKind::kGpu, 0, 0));
  CHECK_THROWS_WITH_AS(dup.finalize(), doctest::Contains("local index 0 is used twice"), InvalidInput);
}

TEST_CASE("topology.kind_names") {
  CHECK(parse_node_kind("pcie_switch") == NodeKind::kPcieSwitch);
  CHECK(parse_link_kind("smp") == LinkKind::kSmp);
  CHECK_FALSE(parse_node_kind("toaster").has_value());
  CHECK(to_string(PathType::kPxb) == "PXB");
  CHECK(to_string(LinkKind::kNvLink) == "nvlink");
}

TEST_CASE("topology.nearest_nic_spreads_over_tied_nics") {
  // Two GPUs and two NICs under one switch: each GPU gets its own NIC.
  Topology t;
  const int cpu = t.add_node(mk("cpu0", NodeKind::kCpu));
  const int sw = t.add_node(mk("sw0", NodeKind::kPcieSwitch));
  t.add_duplex_link(sw, cpu, LinkKind::kPcie, 48, 1);
  int g[2], n[2];
  for (int i = 0; i < 2; ++i) {
    g[i] = t.add_node(mk("gpu" + std::to_string(i), NodeKind::kGpu, 0, i));
    n[i] = t.add_node(mk("nic" + std::to_string(i), NodeKind::kNic));
    t.add_duplex_link(g[i], sw, LinkKind::kPcie, 48, 1);
    t.add_duplex_link(n[i], sw, LinkKind::kPcie, 48, 1);
  }
  t.finalize();
  CHECK(t.nearest_nic(g[0]) == n[0]);
  CHECK(t.nearest_nic(g[1]) == n[1]);
  CHECK(t.nearest_nic(cpu) == n[0]);
}

TEST_CASE("topology.nvswitch_lanes_in_nvlink_matrix") {
  // Four GPUs on one merged NVSwitch with 18 lanes each: nvidia-smi prints NV18.
  Topology t;
  const int nvs = t.add_node(mk("nvswitch0", NodeKind::kNvSwitch));
  for (int i = 0; i < 4; ++i) {
    const int g = t.add_node(mk("gpu" + std::to_string(i), NodeKind::kGpu, 0, i));
    t.add_duplex_link(g, nvs, LinkKind::kNvLink, 450, 0.6, 18);
  }
  t.finalize();
  const auto lanes = nvlink_matrix(t);
  CHECK(lanes[0][0] == 0);
  CHECK(lanes[0][3] == 18);
  CHECK(t.nvlink_lanes(t.gpus()[0], t.gpus()[3]) == 0);  // no direct link
  CHECK(t.route(t.gpus()[0], t.gpus()[3]).type == PathType::kNvl);
  CHECK(t.route(t.gpus()[0], t.gpus()[3]).bandwidth_gbps == 450);
}

TEST_CASE("topology.large_cluster_routes") {
  // 64 machines of 2 GPUs, one NIC each: every cross-machine route is GPU→NIC→switch→NIC→GPU.
  Topology t;
  const int net = t.add_node(mk("net", NodeKind::kNetSwitch, -1));
  for (int m = 0; m < 64; ++m) {
    const std::string p = fmt::format("m{}/", m);
    const int cpu = t.add_node(mk(p + "cpu0", NodeKind::kCpu, m));
    const int nic = t.add_node(mk(p + "nic0", NodeKind::kNic, m));
    t.add_duplex_link(nic, cpu, LinkKind::kPcie, 12, 1);
    t.add_duplex_link(nic, net, LinkKind::kNetwork, 12.5, 2.7);
    for (int g = 0; g < 2; ++g) {
      const int gpu = t.add_node(mk(p + "gpu" + std::to_string(g), NodeKind::kGpu, m, g));
      t.add_duplex_link(gpu, cpu, LinkKind::kPcie, 12, 1);
    }
  }
  t.finalize();
  for (int a = 0; a < 128; a += 7) {
    for (int b = 0; b < 128; b += 5) {
      const Route& r = t.route(t.gpus()[a], t.gpus()[b]);
      if (a / 2 != b / 2) {
        CHECK(r.type == PathType::kNet);
        CHECK(r.links.size() == 6);
      }
    }
  }
}
