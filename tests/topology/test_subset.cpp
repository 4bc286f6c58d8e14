// GPU subsets of a topology (TOPO[LIST]): what is kept, how GPUs are renumbered, that routes between kept
// GPUs are the full machine's, and every mistake in the list is one line naming the topology.

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/subset.hpp"

using namespace artune;

namespace {

std::string error_of(const std::string& spec) {
  try {
    load_topology(spec);
  } catch (const InvalidInput& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find('\n') == std::string::npos, "multi-line message: ", what);
    return what;
  }
  return "<loaded>";
}

std::vector<std::string> gpu_ids(const Topology& t) {
  std::vector<std::string> ids;
  for (int g : t.gpus()) ids.push_back(t.nodes()[static_cast<std::size_t>(g)].id);
  return ids;
}

}  // namespace

TEST_CASE("subset.dgx1_five_gpus") {
  const Topology full = load_topology("dgx1-v100");
  const Topology t = load_topology("dgx1-v100[0,1,2,4,5]");
  CHECK(t.name() == "dgx1-v100[0,1,2,4,5]");
  CHECK(gpu_ids(t) == std::vector<std::string>{"gpu0", "gpu1", "gpu2", "gpu4", "gpu5"});
  for (int i = 0; i < 5; ++i)
    CHECK(t.nodes()[static_cast<std::size_t>(t.gpus()[static_cast<std::size_t>(i)])].global_index == i);
  CHECK(t.machine_count() == 1);
  // Every CPU socket, PCIe switch and NIC of the machine stays.
  for (NodeKind kind : {NodeKind::kCpu, NodeKind::kPcieSwitch, NodeKind::kNic}) {
    CHECK(t.nodes_of_kind(kind).size() == full.nodes_of_kind(kind).size());
  }
  // Routes between kept GPUs are the machine's: same class, bandwidth and devices along the way.
  for (int a : t.gpus()) {
    for (int b : t.gpus()) {
      const std::string ida = t.nodes()[static_cast<std::size_t>(a)].id,
                        idb = t.nodes()[static_cast<std::size_t>(b)].id;
      const Route& r = t.route(a, b);
      const Route& f = full.route(full.find_node(ida), full.find_node(idb));
      CHECK(r.type == f.type);
      CHECK(r.bandwidth_gbps == f.bandwidth_gbps);
      REQUIRE(r.links.size() == f.links.size());
      for (std::size_t k = 0; k < r.links.size(); ++k) {
        CHECK(t.nodes()[static_cast<std::size_t>(t.links()[static_cast<std::size_t>(r.links[k])].dst)].id ==
              full.nodes()[static_cast<std::size_t>(full.links()[static_cast<std::size_t>(f.links[k])].dst)].id);
      }
    }
  }
  CHECK(t.nvlink_lanes(t.find_node("gpu0"), t.find_node("gpu4")) == 2);
  CHECK(t.nvlink_lanes(t.find_node("gpu4"), t.find_node("gpu5")) == 1);
  CHECK(t.route(t.find_node("gpu2"), t.find_node("gpu4")).type == PathType::kSys);
  // GPUs 3, 6 and 7 are gone, with their NVLinks.
  CHECK(t.find_node("gpu3") < 0);
  CHECK(t.links().size() ==
        full.links().size() - 2 * (10 /* NVLinks touching gpu3, gpu6, gpu7 */ + 3 /* their PCIe */));
}

TEST_CASE("subset.order_ranges_ids") {
  const Topology t = load_topology("dgx1-v100[4,0]");
  CHECK(gpu_ids(t) == std::vector<std::string>{"gpu4", "gpu0"});
  CHECK(t.name() == "dgx1-v100[4,0]");
  CHECK(gpu_ids(load_topology("dgx1-v100[0-3]")) == std::vector<std::string>{"gpu0", "gpu1", "gpu2", "gpu3"});
  CHECK(gpu_ids(load_topology("dgx1-v100[gpu6, 7]")) == std::vector<std::string>{"gpu6", "gpu7"});
  CHECK(gpu_ids(load_topology("uniform:8[0,3]")).size() == 2);
  // A subset of a subset.
  CHECK(gpu_ids(load_topology("dgx1-v100[0,1,2,4,5][1,3]")) == std::vector<std::string>{"gpu1", "gpu4"});
}

TEST_CASE("subset.file_source") {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  const std::string file = std::string(root != nullptr ? root : ".") + "/configs/dgx1-p100.json";
  const Topology t = load_topology(file + "[1,2,3,5]");
  CHECK(gpu_ids(t) == std::vector<std::string>{"gpu1", "gpu2", "gpu3", "gpu5"});
}

TEST_CASE("subset.cluster") {
  const Topology t = load_topology("4xdgx1-v100[0,8,9]");
  CHECK(t.machine_count() == 2);
  CHECK(gpu_ids(t) == std::vector<std::string>{"m0/gpu0", "m1/gpu0", "m1/gpu1"});
  CHECK(t.network().has_value());
  CHECK(t.nodes_of_kind(NodeKind::kNetSwitch).size() == 1);
  CHECK(t.route(t.gpus()[0], t.gpus()[1]).type == PathType::kNet);
  // Global indices of machines that hold different numbers of GPUs are consecutive.
  CHECK(t.nodes()[static_cast<std::size_t>(t.gpus()[2])].global_index == 2);

  const Topology one = load_topology("4xdgx1-v100[m1/gpu3,m1/gpu4]");
  CHECK(one.machine_count() == 1);
  CHECK(!one.network().has_value());
  CHECK(one.nodes_of_kind(NodeKind::kNetSwitch).empty());
  CHECK(one.route(one.gpus()[0], one.gpus()[1]).type == PathType::kSys);
}

TEST_CASE("subset.errors") {
  CHECK(error_of("dgx1-v100[0,9]") == "topology 'dgx1-v100[0,9]': GPU 9 does not exist ('dgx1-v100' has GPUs 0-7)");
  CHECK(error_of("dgx1-v100[0,0]") == "topology 'dgx1-v100[0,0]': GPU 'gpu0' is named twice");
  CHECK(error_of("dgx1-v100[1,0-2]") == "topology 'dgx1-v100[1,0-2]': GPU 'gpu1' is named twice");
  CHECK(error_of("dgx1-v100[]").find("the GPU list is empty") != std::string::npos);
  CHECK(error_of("dgx1-v100[0,,1]").find("empty item") != std::string::npos);
  CHECK(error_of("dgx1-v100[cpu0]") == "topology 'dgx1-v100[cpu0]': 'cpu0' is a cpu, not a GPU");
  CHECK(error_of("dgx1-v100[x]").find("'x' is neither a GPU index") != std::string::npos);
  CHECK(error_of("dgx1-v100[3-1]").find("runs backwards") != std::string::npos);
  CHECK(error_of("dgx1-v100[-1]").find("neither a GPU index") != std::string::npos);
  CHECK(error_of("nosuch[0]").find("nosuch") != std::string::npos);
}

TEST_CASE("subset.split_spec") {
  CHECK(split_subset_spec("dgx1-v100[0,1]").base == "dgx1-v100");
  CHECK(split_subset_spec("dgx1-v100[0,1]").list == "0,1");
  CHECK(split_subset_spec("dgx1-v100").base.empty());
  CHECK(split_subset_spec("[0]").base.empty());
  CHECK(split_subset_spec("a[b]c").base.empty());
}
