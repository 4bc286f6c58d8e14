// Routes and path types on the shipped configs and generated clusters.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "artune/topology/io/io.hpp"

using namespace artune;

namespace {

int gpu(const Topology& t, int global) { return t.gpus().at(global); }

PathType path(const Topology& t, int a, int b) { return t.route(gpu(t, a), gpu(t, b)).type; }

std::vector<std::string> hop_ids(const Topology& t, const Route& r) {
  std::vector<std::string> ids;
  for (int l : r.links) ids.push_back(t.nodes()[t.links()[l].dst].id);
  return ids;
}

}  // namespace

TEST_CASE("routes.dgx1_v100") {
  const Topology t = load_topology("dgx1-v100");
  const Route& r01 = t.route(gpu(t, 0), gpu(t, 1));
  CHECK(r01.type == PathType::kNvl);
  CHECK(r01.links.size() == 1);
  CHECK(r01.bandwidth_gbps == 25);
  CHECK(r01.latency_us == doctest::Approx(0.6));
  CHECK(t.route(gpu(t, 0), gpu(t, 3)).bandwidth_gbps == 50);
  // 3 and 4 share no NVLink and sit under different sockets.
  CHECK(path(t, 3, 4) == PathType::kSys);
  CHECK(!t.peer_access(gpu(t, 3), gpu(t, 4)));
  CHECK(t.route(gpu(t, 3), gpu(t, 4)).bandwidth_gbps == 6);  // QPI
  // Row 0 of a DGX-1 V100 nvidia-smi sample (configs/HARDWARE.md): X NV1 NV1 NV2 NV2 SYS SYS SYS.
  const std::vector<PathType> row0 = {PathType::kLoc, PathType::kNvl, PathType::kNvl, PathType::kNvl,
                                      PathType::kNvl, PathType::kSys, PathType::kSys, PathType::kSys};
  CHECK(path_type_matrix(t)[0] == row0);
  CHECK(t.route(gpu(t, 5), gpu(t, 5)).type == PathType::kLoc);
  // GPU 2's nearest NIC is the one on its PCIe switch.
  CHECK(t.nodes()[t.nearest_nic(gpu(t, 2))].id == "nic1");
}

TEST_CASE("routes.pcie_8gpu") {
  const Topology t = load_topology("pcie-8gpu");
  const Route& pix = t.route(gpu(t, 0), gpu(t, 1));
  CHECK(pix.type == PathType::kPix);
  CHECK(hop_ids(t, pix) == std::vector<std::string>{"pcisw0", "gpu1"});
  CHECK(pix.bandwidth_gbps == 12);
  CHECK(pix.latency_us == doctest::Approx(2.0));
  const Route& phb = t.route(gpu(t, 0), gpu(t, 2));
  CHECK(phb.type == PathType::kPhb);
  CHECK(hop_ids(t, phb) == std::vector<std::string>{"pcisw0", "cpu0", "pcisw1", "gpu2"});
  const Route& sys = t.route(gpu(t, 0), gpu(t, 4));
  CHECK(sys.type == PathType::kSys);
  CHECK(hop_ids(t, sys) == std::vector<std::string>{"pcisw0", "cpu0", "cpu1", "pcisw2", "gpu4"});
  CHECK(sys.bandwidth_gbps == 6);
  // Peers: only GPUs under the same switch.
  const auto peers = peer_matrix(t);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) CHECK(peers[i][j] == (i / 2 == j / 2));
  }
}

TEST_CASE("routes.nvswitch_gives_full_per_gpu_bandwidth") {
  const Topology t = load_topology("dgx-h100");
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      if (i == j) continue;
      const Route& r = t.route(gpu(t, i), gpu(t, j));
      CHECK(r.type == PathType::kNvl);
      CHECK(r.links.size() == 2);
      CHECK(r.bandwidth_gbps == 450);
    }
  }
  CHECK(bandwidth_matrix(load_topology("dgx2"))[0][15] == 150);
  CHECK(bandwidth_matrix(load_topology("dgx-a100"))[3][6] == 300);
}

TEST_CASE("routes.cluster_crosses_the_network") {
  const Topology t = load_topology("cluster-4xdgx1-v100");
  CHECK(path(t, 0, 1) == PathType::kNvl);
  CHECK(path(t, 0, 7) == PathType::kSys);
  const Route& net = t.route(gpu(t, 0), gpu(t, 8));
  CHECK(net.type == PathType::kNet);
  CHECK(hop_ids(t, net) ==
        std::vector<std::string>{"m0/pcisw0", "m0/nic0", "net_switch", "m1/nic0", "m1/pcisw0", "m1/gpu0"});
  CHECK(net.bandwidth_gbps == 12);  // PCIe Gen3 under the 12.5 GB/s EDR port
  CHECK(net.latency_us == doctest::Approx(1 + 1 + 2.7 + 2.7 + 1 + 1));
  const auto types = path_type_matrix(t);
  for (int i = 0; i < 32; ++i) {
    for (int j = 0; j < 32; ++j) {
      if (i / 8 != j / 8) CHECK(types[i][j] == PathType::kNet);
    }
  }
  const Route& far = t.route(gpu(t, 6), gpu(t, 27));
  CHECK(hop_ids(t, far).front() == "m0/pcisw3");
  CHECK(hop_ids(t, far).back() == "m3/gpu3");
}

TEST_CASE("routes.uniform_cluster") {
  const Topology t = load_topology("uniform:2x4");
  CHECK(path(t, 0, 3) == PathType::kNvl);
  CHECK(t.route(gpu(t, 0), gpu(t, 3)).bandwidth_gbps == 25);
  const Route& r = t.route(gpu(t, 1), gpu(t, 6));
  CHECK(r.type == PathType::kNet);
  CHECK(hop_ids(t, r) == std::vector<std::string>{"m0/cpu0", "m0/nic0", "net_switch", "m1/nic0", "m1/cpu0", "m1/gpu2"});
  CHECK(r.bandwidth_gbps == 12);
}

TEST_CASE("routes.oversubscribed_network") {
  const Topology small = load_topology("uniform:2");
  NetworkSpec net;
  net.nic_bandwidth_gbps = 50;
  net.oversubscription = 10;
  const Topology t = join_machines({small, small}, net, "over");
  CHECK(t.route(gpu(t, 0), gpu(t, 3)).bandwidth_gbps == 5);
}
