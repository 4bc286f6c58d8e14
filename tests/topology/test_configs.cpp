// The built-in configs: each loads, and has the link counts and rates of
// configs/HARDWARE.md (documented in configs/README.md).

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;

namespace {

struct Counts {
  int nvlink_pairs = 0;    // GPU pairs with a direct NVLink
  int nvlink_lanes = 0;    // bonded lanes over those pairs
  int nvswitch_links = 0;  // full-duplex GPU–NVSwitch links
  int pcie = 0;            // full-duplex PCIe links
  int smp = 0;             // full-duplex SMP links
};

Counts count_links(const Topology& t) {
  Counts c;
  for (const Link& l : t.links()) {
    if (l.src > l.dst) continue;  // each full-duplex link once
    const NodeKind a = t.nodes()[l.src].kind;
    const NodeKind b = t.nodes()[l.dst].kind;
    if (l.kind == LinkKind::kNvLink && a == NodeKind::kGpu && b == NodeKind::kGpu) {
      ++c.nvlink_pairs;
      c.nvlink_lanes += l.lanes;
    }
    if (l.kind == LinkKind::kNvLink && (a == NodeKind::kNvSwitch || b == NodeKind::kNvSwitch)) ++c.nvswitch_links;
    if (l.kind == LinkKind::kPcie) ++c.pcie;
    if (l.kind == LinkKind::kSmp) ++c.smp;
  }
  return c;
}

double link_bandwidth(const Topology& t, const std::string& a, const std::string& b, LinkKind kind) {
  const int x = t.find_node(a), y = t.find_node(b);
  for (const Link& l : t.links()) {
    if (l.src == x && l.dst == y && l.kind == kind) return l.bandwidth_gbps;
  }
  return 0;
}

// The DMA matrix of TF's cross_device_utils.py (DGX-1).
const std::vector<std::string> kSeedDma = {
    "YYYYYNNN", "YYYYNYNN", "YYYYNNYN", "YYYYNNNY", "YNNNYYYY", "NYNNYYYY", "NNYNYYYY", "NNNYYYYY",
};

}  // namespace

TEST_CASE("configs.builtin_names") {
  CHECK(builtin_topology_names() == std::vector<std::string>{"cluster-4xdgx1-v100", "dgx-a100", "dgx-h100", "dgx1-p100",
                                                             "dgx1-v100", "dgx2", "pcie-8gpu"});
  CHECK_THROWS_AS(builtin_topology_text("dgx3"), InvalidInput);
  CHECK(kDefaultTopology == "dgx1-v100");
}

TEST_CASE("configs.every_builtin_loads") {
  const std::vector<std::pair<std::string, std::size_t>> gpus = {{"cluster-4xdgx1-v100", 32},
                                                                 {"dgx-a100", 8},
                                                                 {"dgx-h100", 8},
                                                                 {"dgx1-p100", 8},
                                                                 {"dgx1-v100", 8},
                                                                 {"dgx2", 16},
                                                                 {"pcie-8gpu", 8}};
  for (const auto& [name, count] : gpus) {
    CAPTURE(name);
    const Topology t = load_topology(name);
    CHECK(t.name() == name);
    CHECK(!t.description().empty());
    CHECK(t.gpus().size() == count);
    for (std::size_t g = 0; g < t.gpus().size(); ++g) CHECK(t.nodes()[t.gpus()[g]].global_index == static_cast<int>(g));
  }
}

TEST_CASE("configs.embedded_text_matches_the_files") {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  for (const auto& name : builtin_topology_names()) {
    CAPTURE(name);
    std::ifstream in(std::string(root) + "/configs/" + name + ".json");
    REQUIRE(in.good());
    std::stringstream text;
    text << in.rdbuf();
    CHECK(text.str() == builtin_topology_text(name));
  }
}

TEST_CASE("configs.dgx1_v100_hybrid_cube_mesh") {
  const Topology t = load_topology("dgx1-v100");
  const Counts c = count_links(t);
  CHECK(c.nvlink_pairs == 16);
  CHECK(c.nvlink_lanes == 24);
  const auto nv = nvlink_matrix(t);
  for (int g = 0; g < 8; ++g) {
    int lanes = 0;
    for (int h = 0; h < 8; ++h) lanes += nv[g][h];
    CHECK(lanes == 6);
  }
  const std::set<std::pair<int, int>> nv2 = {{0, 3}, {0, 4}, {1, 2}, {1, 5}, {2, 3}, {4, 7}, {5, 6}, {6, 7}};
  const std::set<std::pair<int, int>> nv1 = {{0, 1}, {0, 2}, {1, 3}, {2, 6}, {3, 7}, {4, 5}, {4, 6}, {5, 7}};
  for (int i = 0; i < 8; ++i) {
    for (int j = i + 1; j < 8; ++j) {
      const int expected = nv2.count({i, j}) ? 2 : nv1.count({i, j}) ? 1 : 0;
      CHECK(nv[i][j] == expected);
      CHECK(nv[j][i] == expected);
    }
  }
  CHECK(link_bandwidth(t, "gpu0", "gpu3", LinkKind::kNvLink) == 50);
  CHECK(link_bandwidth(t, "gpu0", "gpu1", LinkKind::kNvLink) == 25);
  CHECK(t.nodes()[t.gpus()[0]].arch == "sm70");
  // PCIe: 4 switches with 2 GPUs and 1 NIC each, 2 sockets joined by QPI.
  CHECK(t.nodes_of_kind(NodeKind::kPcieSwitch).size() == 4);
  CHECK(t.nodes_of_kind(NodeKind::kNic).size() == 4);
  CHECK(t.nodes_of_kind(NodeKind::kCpu).size() == 2);
  CHECK(c.pcie == 8 + 4 + 4);
  CHECK(c.smp == 1);
  CHECK(link_bandwidth(t, "cpu0", "cpu1", LinkKind::kSmp) == 6);
  CHECK(link_bandwidth(t, "gpu0", "pcisw0", LinkKind::kPcie) == 12);
}

TEST_CASE("configs.dgx1_p100_matches_the_seed") {
  const Topology t = load_topology("dgx1-p100");
  const Counts c = count_links(t);
  CHECK(c.nvlink_pairs == 16);
  CHECK(c.nvlink_lanes == 16);
  const auto nv = nvlink_matrix(t);
  for (int g = 0; g < 8; ++g) {
    int links = 0;
    for (int h = 0; h < 8; ++h) links += nv[g][h];
    CHECK(links == 4);
  }
  CHECK(link_bandwidth(t, "gpu0", "gpu4", LinkKind::kNvLink) == 20);
  const auto peers = peer_matrix(t);
  for (int i = 0; i < 8; ++i) {
    std::string row;
    for (int j = 0; j < 8; ++j) row += peers[i][j] ? 'Y' : 'N';
    CHECK(row == kSeedDma[i]);
  }
}

TEST_CASE("configs.nvswitch_machines") {
  struct Expect {
    const char* name;
    int gpus;
    int lanes;
    double per_gpu;
    double pcie;
    int nics;
    const char* arch;
  };
  for (const Expect& e : {Expect{"dgx2", 16, 6, 150, 12, 8, "sm70"}, Expect{"dgx-a100", 8, 12, 300, 24, 8, "sm80"},
                          Expect{"dgx-h100", 8, 18, 450, 48, 8, "sm90"}}) {
    CAPTURE(e.name);
    const Topology t = load_topology(e.name);
    REQUIRE(t.nodes_of_kind(NodeKind::kNvSwitch).size() == 1);
    const int sw = t.nodes_of_kind(NodeKind::kNvSwitch)[0];
    const Counts c = count_links(t);
    CHECK(c.nvlink_pairs == 0);
    CHECK(c.nvswitch_links == e.gpus);
    for (int g : t.gpus()) {
      CHECK(t.nvlink_lanes(g, sw) == e.lanes);
      CHECK(link_bandwidth(t, t.nodes()[g].id, "nvswitch0", LinkKind::kNvLink) == e.per_gpu);
      CHECK(t.nodes()[g].arch == e.arch);
    }
    CHECK(link_bandwidth(t, "gpu0", "pcisw0", LinkKind::kPcie) == e.pcie);
    CHECK(static_cast<int>(t.nodes_of_kind(NodeKind::kNic).size()) == e.nics);
    CHECK(t.nodes_of_kind(NodeKind::kCpu).size() == 2);
  }
}

TEST_CASE("configs.pcie_8gpu") {
  const Topology t = load_topology("pcie-8gpu");
  const Counts c = count_links(t);
  CHECK(c.nvlink_pairs == 0);
  CHECK(c.nvswitch_links == 0);
  CHECK(t.nodes_of_kind(NodeKind::kPcieSwitch).size() == 4);
  CHECK(t.nodes_of_kind(NodeKind::kCpu).size() == 2);
  CHECK(c.smp == 1);
  for (const auto& row : nvlink_matrix(t)) {
    for (int lanes : row) CHECK(lanes == 0);
  }
}

TEST_CASE("configs.cluster_example") {
  const Topology t = load_topology("cluster-4xdgx1-v100");
  CHECK(t.machine_count() == 4);
  CHECK(t.gpus_per_machine() == 8);
  CHECK(t.nodes_of_kind(NodeKind::kNic).size() == 16);
  CHECK(t.nodes_of_kind(NodeKind::kNetSwitch).size() == 1);
  REQUIRE(t.network().has_value());
  CHECK(t.network()->nic_bandwidth_gbps == 12.5);
  CHECK(t.network()->oversubscription == 1);
  CHECK(count_links(t).nvlink_lanes == 4 * 24);
  CHECK(t.nodes()[t.gpus()[13]].id == "m1/gpu5");
}
