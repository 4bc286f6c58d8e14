// The JSON topology loader: every rejected mistake names the file and the JSON
// path in one line; generators, join_machines and the JSON round trip.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;
using json = nlohmann::json;

namespace {

std::string data_path(const std::string& name) {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/tests/topology/data/" + name;
}

// Two GPUs on an NVLink, both under one CPU with a NIC.
json base() {
  return json::parse(R"({
    "name": "t",
    "devices": [{"id": "gpu0", "kind": "gpu"}, {"id": "gpu1", "kind": "gpu"},
                {"id": "cpu0", "kind": "cpu"}, {"id": "nic0", "kind": "nic"}],
    "links": [{"a": "gpu0", "b": "gpu1", "kind": "nvlink", "bandwidth": 25},
              {"a": "gpu0", "b": "cpu0", "kind": "pcie", "bandwidth": 12},
              {"a": "gpu1", "b": "cpu0", "kind": "pcie", "bandwidth": 12},
              {"a": "nic0", "b": "cpu0", "kind": "pcie", "bandwidth": 12}]
  })");
}

json compact_base() {
  return json::parse(R"({
    "name": "c",
    "compact": {"gpus": 4, "nvlink": [[0,1,0,0],[1,0,0,0],[0,0,0,2],[0,0,2,0]], "nvlink_lane_bandwidth": 25,
                "pcie_switches": [[0,1],[2,3]], "sockets": [[0],[1]], "nics_per_switch": 1}
  })");
}

// The loader's message for `doc`, or "<loaded>".
std::string error_of(const json& doc) {
  try {
    topology_from_json(doc, "x.json");
  } catch (const InvalidInput& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find('\n') == std::string::npos, "multi-line message: ", what);
    return what;
  }
  return "<loaded>";
}

std::string load_error(const std::string& spec) {
  try {
    load_topology(spec);
  } catch (const InvalidInput& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    return what;
  }
  return "<loaded>";
}

}  // namespace

TEST_CASE("io.full_form_loads_with_defaults") {
  const Topology t = topology_from_json(base(), "x.json");
  CHECK(t.name() == "t");
  CHECK(t.nodes().size() == 4);
  REQUIRE(t.links().size() == 8);  // four full-duplex links
  CHECK(t.links()[0].kind == LinkKind::kNvLink);
  CHECK(t.links()[0].latency_us == doctest::Approx(0.6));
  CHECK(t.links()[0].lanes == 1);
  CHECK(t.links()[1].src == t.links()[0].dst);
  CHECK(t.links()[2].latency_us == doctest::Approx(1.0));
  CHECK(t.gpus().size() == 2);
  CHECK(t.machine_count() == 1);
  CHECK(t.nodes()[t.gpus()[1]].id == "gpu1");
}

TEST_CASE("io.name_defaults_to_file_stem") {
  json doc = base();
  doc.erase("name");
  CHECK(topology_from_json(doc, "some/dir/my-box.json").name() == "my-box");
}

TEST_CASE("io.rejects_unknown_device_in_link") {
  json doc = base();
  doc["links"][2]["b"] = "cpu9";
  CHECK(error_of(doc) == "x.json: links[2].b: unknown device 'cpu9'");
}

TEST_CASE("io.rejects_self_link") {
  json doc = base();
  doc["links"][1]["b"] = "gpu0";
  CHECK(error_of(doc) == "x.json: links[1].b: a device cannot link to itself ('gpu0')");
}

TEST_CASE("io.rejects_duplicate_links") {
  json doc = base();
  doc["links"].push_back({{"a", "gpu1"}, {"b", "gpu0"}, {"kind", "nvlink"}, {"bandwidth", 50}});
  CHECK(error_of(doc) ==
        "x.json: links[4]: duplicate nvlink link between 'gpu1' and 'gpu0' (already given by links[0]); give one link "
        "with "
        "\"lanes\" instead");
  // A directed entry contradicting a full-duplex one is a duplicate too.
  doc = base();
  doc["links"].push_back({{"a", "gpu0"}, {"b", "cpu0"}, {"kind", "pcie"}, {"bandwidth", 6}, {"directed", true}});
  CHECK(error_of(doc).rfind("x.json: links[4]: duplicate pcie link", 0) == 0);
  // Different kinds between the same pair are different links.
  doc = base();
  doc["links"].push_back({{"a", "gpu0"}, {"b", "gpu1"}, {"kind", "pcie"}, {"bandwidth", 12}});
  CHECK(error_of(doc) == "<loaded>");
}

TEST_CASE("io.directed_links_need_a_reverse") {
  json doc = base();
  doc["links"][0]["directed"] = true;
  CHECK(error_of(doc) ==
        "x.json: links[0]: directed nvlink link 'gpu0' -> 'gpu1' has no reverse link (omit \"directed\" for a "
        "full-duplex link)");
  // An asymmetric pair is fine.
  doc["links"].push_back({{"a", "gpu1"}, {"b", "gpu0"}, {"kind", "nvlink"}, {"bandwidth", 20}, {"directed", true}});
  const Topology t = topology_from_json(doc, "x.json");
  const int g0 = t.find_node("gpu0"), g1 = t.find_node("gpu1");
  double forward = 0, backward = 0;
  for (const Link& l : t.links()) {
    if (l.kind != LinkKind::kNvLink) continue;
    if (l.src == g0 && l.dst == g1) forward = l.bandwidth_gbps;
    if (l.src == g1 && l.dst == g0) backward = l.bandwidth_gbps;
  }
  CHECK(forward == 25);
  CHECK(backward == 20);
}

TEST_CASE("io.rejects_non_positive_bandwidth") {
  json doc = base();
  doc["links"][3]["bandwidth"] = 0;
  CHECK(error_of(doc) == "x.json: links[3].bandwidth: must be > 0 (got 0)");
  doc["links"][3]["bandwidth"] = -12.5;
  CHECK(error_of(doc) == "x.json: links[3].bandwidth: must be > 0 (got -12.5)");
}

TEST_CASE("io.rejects_negative_latency") {
  json doc = base();
  doc["links"][0]["latency"] = -1;
  CHECK(error_of(doc) == "x.json: links[0].latency: must be >= 0 (got -1)");
}

TEST_CASE("io.rejects_bad_lanes") {
  json doc = base();
  doc["links"][0]["lanes"] = 0;
  CHECK(error_of(doc) == "x.json: links[0].lanes: must be between 1 and 1024 (got 0)");
  doc["links"][0]["lanes"] = 2.5;
  CHECK(error_of(doc) == "x.json: links[0].lanes: must be an integer, not a number");
}

TEST_CASE("io.rejects_missing_fields") {
  json doc = base();
  doc["devices"][1].erase("id");
  CHECK(error_of(doc) == "x.json: devices[1].id: missing");
  doc = base();
  doc["devices"][2].erase("kind");
  CHECK(error_of(doc) == "x.json: devices[2].kind: missing");
  doc = base();
  doc["links"][1].erase("a");
  CHECK(error_of(doc) == "x.json: links[1].a: missing");
  doc = base();
  doc["links"][1].erase("bandwidth");
  CHECK(error_of(doc) == "x.json: links[1].bandwidth: missing");
  doc = base();
  doc.erase("links");
  CHECK(error_of(doc) == "x.json: links: missing");
  doc = base();
  doc.erase("devices");
  doc.erase("links");
  CHECK(error_of(doc) == "x.json: missing \"devices\" (full form), \"compact\" or \"machines\" (cluster)");
}

TEST_CASE("io.rejects_wrong_types") {
  json doc = base();
  doc["links"][0]["bandwidth"] = "25";
  CHECK(error_of(doc) == "x.json: links[0].bandwidth: must be a number, not a string");
  doc = base();
  doc["links"][0]["directed"] = "yes";
  CHECK(error_of(doc) == "x.json: links[0].directed: must be true or false, not a string");
  doc = base();
  doc["devices"][0]["id"] = 7;
  CHECK(error_of(doc) == "x.json: devices[0].id: must be a string, not a number");
  doc = base();
  doc["devices"] = json::object();
  CHECK(error_of(doc) == "x.json: devices: must be an array, not an object");
  doc = base();
  doc["links"][2] = json::array();
  CHECK(error_of(doc) == "x.json: links[2]: must be an object, not an array");
  CHECK(error_of(json::array()) == "x.json: must be an object, not an array");
  doc = base();
  doc["name"] = "";
  CHECK(error_of(doc) == "x.json: name: must not be empty");
}

TEST_CASE("io.rejects_duplicate_ids") {
  json doc = base();
  doc["devices"][3]["id"] = "gpu1";
  doc["devices"][3]["kind"] = "cpu";
  CHECK(error_of(doc) == "x.json: devices[3].id: duplicate id 'gpu1' (first given at devices[1])");
}

TEST_CASE("io.rejects_unknown_kinds") {
  json doc = base();
  doc["devices"][2]["kind"] = "tpu";
  CHECK(error_of(doc) ==
        "x.json: devices[2].kind: unknown kind 'tpu' (expected gpu, cpu, pcie_switch, nvswitch, nic or net_switch)");
  doc = base();
  doc["links"][0]["kind"] = "infinity-fabric";
  CHECK(error_of(doc) ==
        "x.json: links[0].kind: unknown kind 'infinity-fabric' (expected nvlink, pcie, smp or network)");
  doc = base();
  doc["links"][0]["kind"] = "loopback";
  CHECK(error_of(doc) == "x.json: links[0].kind: loopback links are implicit and cannot be given");
}

TEST_CASE("io.rejects_unknown_fields") {
  json doc = base();
  doc["links"][0]["bandwith"] = 25;
  CHECK(error_of(doc) ==
        "x.json: links[0].bandwith: unknown field (expected a, b, kind, bandwidth, latency, lanes, directed)");
  doc = base();
  doc["links"][0]["_note"] = "free";
  doc["comment"] = "free";
  CHECK(error_of(doc) == "<loaded>");
}

TEST_CASE("io.rejects_link_kind_that_cannot_attach") {
  json doc = base();
  doc["links"][1]["kind"] = "smp";
  CHECK(error_of(doc) == "x.json: links[1]: a smp link cannot attach to a gpu ('gpu0')");
  doc = base();
  doc["links"][3]["kind"] = "nvlink";
  CHECK(error_of(doc) == "x.json: links[3]: a nvlink link cannot attach to a nic ('nic0')");
}

TEST_CASE("io.rejects_gpu_local_index_gaps_and_duplicates") {
  json doc = base();
  doc["devices"][0]["local"] = 0;
  doc["devices"][1]["local"] = 2;
  CHECK(error_of(doc) == "x.json: devices: no GPU of machine 0 has local index 1 (GPU local indices must run 0..1)");
  doc["devices"][1]["local"] = 0;
  CHECK(error_of(doc) == "x.json: devices[1].local: local index 0 is already used by 'gpu0' (devices[0])");
  doc["devices"][0]["local"] = 1;
  const Topology t = topology_from_json(doc, "x.json");
  CHECK(t.nodes()[t.gpus()[0]].id == "gpu1");  // local order, not file order
}

TEST_CASE("io.rejects_machine_gaps_and_cross_machine_links") {
  json doc = base();
  for (auto& d : doc["devices"]) d["machine"] = 1;
  CHECK(error_of(doc) ==
        "x.json: devices: no device belongs to machine 0 (machines must be numbered 0..1 without gaps)");
  doc = base();
  doc["devices"][1]["machine"] = 1;
  CHECK(error_of(doc) ==
        "x.json: links[0]: a nvlink link cannot join machine 0 ('gpu0') and machine 1 ('gpu1'); only network links "
        "cross machines");
  doc = base();
  doc["devices"][0]["machine"] = -1;
  CHECK(error_of(doc) == "x.json: devices[0].machine: must be >= 0 (only a net_switch sits outside machines)");
}

TEST_CASE("io.rejects_disconnected_devices") {
  json doc = base();
  doc["links"].erase(3);
  CHECK(error_of(doc) == "x.json: links: device 'nic0' is not connected to 'gpu0'");
}

TEST_CASE("io.rejects_ambiguous_form") {
  json doc = base();
  doc["compact"] = {{"gpus", 2}};
  CHECK(error_of(doc) == "x.json: give exactly one of \"devices\" (full form), \"compact\" or \"machines\" (cluster)");
}

TEST_CASE("io.compact_form_builds_the_layout") {
  const Topology t = topology_from_json(compact_base(), "c.json");
  CHECK(t.gpus().size() == 4);
  CHECK(t.nodes_of_kind(NodeKind::kCpu).size() == 2);
  CHECK(t.nodes_of_kind(NodeKind::kPcieSwitch).size() == 2);
  CHECK(t.nodes_of_kind(NodeKind::kNic).size() == 2);
  CHECK(t.nodes()[t.nodes_of_kind(NodeKind::kNic)[1]].arch == "mlx5_1");
  CHECK(t.nodes()[t.nodes_of_kind(NodeKind::kNic)[1]].bus_id.empty());  // one port per card: no card to tell
  // Two ports per card: a run of two NICs under one switch shares a bus id but for the function digit.
  json dual = compact_base();
  dual["compact"]["nics_per_switch"] = 2;
  dual["compact"]["nic_ports"] = 2;
  const Topology d = topology_from_json(dual, "d.json");
  const auto nics = d.nodes_of_kind(NodeKind::kNic);
  REQUIRE(nics.size() == 4);
  CHECK(d.nodes()[nics[0]].bus_id == "0000:00:00.0");
  CHECK(d.nodes()[nics[1]].bus_id == "0000:00:00.1");
  CHECK(d.nodes()[nics[2]].bus_id == "0000:01:00.0");
  CHECK(d.nodes()[nics[3]].bus_id == "0000:01:00.1");
  // 2 NVLink + 4 GPU-switch + 2 switch-CPU + 2 NIC + 1 SMP full-duplex links.
  CHECK(t.links().size() == 2 * 11);
  CHECK(t.nvlink_lanes(t.find_node("gpu2"), t.find_node("gpu3")) == 2);
  for (const Link& l : t.links()) {
    if (l.kind == LinkKind::kNvLink) CHECK(l.bandwidth_gbps == 25.0 * l.lanes);
    if (l.kind == LinkKind::kPcie) CHECK(l.bandwidth_gbps == 12.0);  // default PCIe Gen3
    if (l.kind == LinkKind::kSmp) CHECK(l.bandwidth_gbps == 10.0);   // default UPI
  }
}

TEST_CASE("io.compact_gpus_directly_under_sockets") {
  const json doc =
      json::parse(R"({"name": "d", "compact": {"gpus": 4, "sockets": [[0, 1], [2, 3]], "nics_per_socket": 1,
                                                        "smp_bandwidth": 16, "latency": {"pcie": 2.5, "smp": 0}}})");
  const Topology t = topology_from_json(doc, "d.json");
  CHECK(t.nodes_of_kind(NodeKind::kPcieSwitch).empty());
  CHECK(t.nodes_of_kind(NodeKind::kNic).size() == 2);
  CHECK(t.links().size() == 2 * (4 + 2 + 1));
  for (const Link& l : t.links()) {
    if (l.kind == LinkKind::kPcie) CHECK(l.latency_us == 2.5);
    if (l.kind == LinkKind::kSmp) {
      CHECK(l.latency_us == 0);
      CHECK(l.bandwidth_gbps == 16);
    }
  }
  json bad = doc;
  bad["compact"]["latency"]["network"] = 1;
  CHECK(error_of(bad) == "x.json: compact.latency.network: unknown field (expected nvlink, pcie, smp)");
  bad = doc;
  bad["compact"]["smp_bandwidth"] = 1e300;
  CHECK(error_of(bad) == "x.json: compact.smp_bandwidth: must be at most 1e+09 (got 1e+300)");
}

TEST_CASE("io.compact_nvswitch_is_one_merged_node") {
  const json doc =
      json::parse(R"({"name": "s", "compact": {"gpus": 4, "nvswitch": {"lanes_per_gpu": 18, "lane_bandwidth": 25}}})");
  const Topology t = topology_from_json(doc, "s.json");
  REQUIRE(t.nodes_of_kind(NodeKind::kNvSwitch).size() == 1);
  const int sw = t.nodes_of_kind(NodeKind::kNvSwitch)[0];
  for (int g : t.gpus()) {
    CHECK(t.nvlink_lanes(g, sw) == 18);
    CHECK(t.nvlink_lanes(sw, g) == 18);
  }
}

TEST_CASE("io.compact_rejects_bad_matrices") {
  json doc = compact_base();
  doc["compact"]["nvlink"].erase(3);
  CHECK(error_of(doc) == "x.json: compact.nvlink: must have 4 rows, one per GPU (got 3)");
  doc = compact_base();
  doc["compact"]["nvlink"][1] = {1, 0, 0};
  CHECK(error_of(doc) ==
        "x.json: compact.nvlink[1]: must have 4 entries, one per GPU (got 3); the matrix must be square");
  doc = compact_base();
  doc["compact"]["nvlink"][3][0] = 1;
  CHECK(error_of(doc) ==
        "x.json: compact.nvlink[3][0]: 1 differs from compact.nvlink[0][3] = 0: the matrix must be symmetric");
  doc = compact_base();
  doc["compact"]["nvlink"][2][2] = 1;
  CHECK(error_of(doc) == "x.json: compact.nvlink[2][2]: must be 0: a GPU has no NVLink to itself");
  doc = compact_base();
  doc["compact"]["nvlink"][0][1] = -1;
  CHECK(error_of(doc) == "x.json: compact.nvlink[0][1]: must be between 0 and 1024 (got -1)");
  doc = compact_base();
  doc["compact"].erase("nvlink_lane_bandwidth");
  CHECK(
      error_of(doc) ==
      "x.json: compact.nvlink_lane_bandwidth: missing (required when nvlink lists links: GB/s per lane and direction)");
}

TEST_CASE("io.cpu_arch_convention") {
  // configs/README.md "CPU architecture": NCCL's arch and, on x86_64, its vendor.
  CHECK(parse_cpu_arch("x86_64-amd") == CpuArch{CpuIsa::kX86, CpuVendor::kAmd});
  CHECK(parse_cpu_arch("x86_64-intel") == CpuArch{CpuIsa::kX86, CpuVendor::kIntel});
  CHECK(parse_cpu_arch("x86_64-zhaoxin") == CpuArch{CpuIsa::kX86, CpuVendor::kZhaoxin});
  CHECK(parse_cpu_arch("x86_64") == CpuArch{CpuIsa::kX86, CpuVendor::kUnknown});
  CHECK(parse_cpu_arch("arm64") == CpuArch{CpuIsa::kArm, CpuVendor::kUnknown});
  CHECK(parse_cpu_arch("ppc64") == CpuArch{CpuIsa::kPower, CpuVendor::kUnknown});
  CHECK(parse_cpu_arch("") == CpuArch{});
  for (const char* bad : {"amd", "epyc", "x86_64-AMD", "aarch64", "ppc64le", "arm64-amd", "x86_64-"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_cpu_arch(bad).has_value());
  }
  for (const char* text : {"", "x86_64", "x86_64-intel", "x86_64-amd", "x86_64-zhaoxin", "arm64", "ppc64"})
    CHECK(to_string(*parse_cpu_arch(text)) == text);
  // NCCL's <cpu arch= vendor=> (xml.cc kvDictCpuArch, kvDictCpuVendor) and uname/hwloc's machine names.
  CHECK(cpu_arch_from_nccl("x86_64", "AuthenticAMD") == "x86_64-amd");
  CHECK(cpu_arch_from_nccl("x86_64", "GenuineIntel") == "x86_64-intel");
  CHECK(cpu_arch_from_nccl("x86_64", "CentaurHauls") == "x86_64-zhaoxin");
  CHECK(cpu_arch_from_nccl("x86_64", "  Shanghai  ") == "x86_64-zhaoxin");
  CHECK(cpu_arch_from_nccl("x86_64", "HygonGenuine") == "x86_64");
  CHECK(cpu_arch_from_nccl("x86_64", "") == "x86_64");
  CHECK(cpu_arch_from_nccl("arm64", "") == "arm64");
  CHECK(cpu_arch_from_nccl("aarch64", "") == "arm64");
  CHECK(cpu_arch_from_nccl("ppc64", "") == "ppc64");
  CHECK(cpu_arch_from_nccl("ppc64le", "") == "ppc64");
  CHECK(cpu_arch_from_nccl("riscv64", "") == "");
  CHECK(cpu_arch_from_nccl("", "AuthenticAMD") == "");
}

TEST_CASE("io.compact_cpu_arch") {
  json doc = compact_base();
  doc["compact"]["cpu_arch"] = "x86_64-amd";
  const Topology t = topology_from_json(doc, "c.json");
  REQUIRE(t.nodes_of_kind(NodeKind::kCpu).size() == 2);
  for (const int cpu : t.nodes_of_kind(NodeKind::kCpu)) CHECK(t.nodes()[cpu].arch == "x86_64-amd");
  // Only CPUs take it: GPUs keep theirs (none here), NICs their port names.
  for (const int gpu : t.gpus()) CHECK(t.nodes()[gpu].arch.empty());
  CHECK(t.nodes()[t.nodes_of_kind(NodeKind::kNic)[0]].arch == "mlx5_0");
  // The full form written back keeps it, and reads back the same.
  const json full = topology_model_to_json(t);
  const Topology back = topology_from_json(full, "back.json");
  for (const int cpu : back.nodes_of_kind(NodeKind::kCpu)) CHECK(back.nodes()[cpu].arch == "x86_64-amd");
  // Without the field the CPUs state nothing.
  const Topology plain = topology_from_json(compact_base(), "c.json");
  for (const int cpu : plain.nodes_of_kind(NodeKind::kCpu)) CHECK(plain.nodes()[cpu].arch.empty());

  doc["compact"]["cpu_arch"] = "epyc";
  CHECK(error_of(doc) == "x.json: compact.cpu_arch: unknown CPU architecture 'epyc' (expected x86_64-intel, "
                         "x86_64-amd, x86_64-zhaoxin, x86_64, arm64 or ppc64)");
  doc["compact"]["cpu_arch"] = 3;
  CHECK(error_of(doc).rfind("x.json: compact.cpu_arch: ", 0) == 0);
}

TEST_CASE("io.full_form_cpu_arch") {
  json doc = base();
  doc["devices"][2]["arch"] = "ppc64";
  const Topology t = topology_from_json(doc, "x.json");
  CHECK(t.nodes()[t.find_node("cpu0")].arch == "ppc64");
  doc["devices"][2]["arch"] = "x86_64-Intel";
  CHECK(error_of(doc) == "x.json: devices[2].arch: unknown CPU architecture 'x86_64-Intel' (expected x86_64-intel, "
                         "x86_64-amd, x86_64-zhaoxin, x86_64, arm64 or ppc64)");
  // Other kinds' arch is free text (a NIC's port name).
  doc = base();
  doc["devices"][3]["arch"] = "x86_64-Intel";
  CHECK(error_of(doc) == "<loaded>");
  // The built-in machines state it where a public source names the CPU, and clusters of them keep it.
  const auto cpu_archs = [](const Topology& topo) {
    std::set<std::string> archs;
    for (const int cpu : topo.nodes_of_kind(NodeKind::kCpu)) archs.insert(topo.nodes()[cpu].arch);
    return archs;
  };
  CHECK(cpu_archs(load_topology("dgx-a100")) == std::set<std::string>{"x86_64-amd"});
  CHECK(cpu_archs(load_topology("2xdgx-a100")) == std::set<std::string>{"x86_64-amd"});
  CHECK(cpu_archs(load_topology("dgx-h100")) == std::set<std::string>{"x86_64-intel"});
  CHECK(cpu_archs(load_topology("dgx1-v100")) == std::set<std::string>{"x86_64-intel"});
  CHECK(cpu_archs(load_topology("cluster-4xdgx1-v100")) == std::set<std::string>{"x86_64-intel"});
  CHECK(cpu_archs(load_topology("dgx1-p100")) == std::set<std::string>{"x86_64-intel"});
  CHECK(cpu_archs(load_topology("dgx2")) == std::set<std::string>{"x86_64-intel"});
  CHECK(cpu_archs(load_topology("pcie-8gpu")) == std::set<std::string>{""});  // a generic server: no source
  CHECK(cpu_archs(load_topology("uniform:8")) == std::set<std::string>{""});
}

TEST_CASE("io.compact_rejects_bad_grouping") {
  json doc = compact_base();
  doc["compact"]["pcie_switches"] = {{0, 1}, {1, 2, 3}};
  CHECK(error_of(doc) == "x.json: compact.pcie_switches[1][0]: GPU 1 is already listed in compact.pcie_switches[0]");
  doc["compact"]["pcie_switches"] = {{0, 1}, {2}};
  CHECK(error_of(doc) == "x.json: compact.pcie_switches: GPU 3 is under no switch (list every GPU exactly once)");
  doc["compact"]["pcie_switches"] = {{0, 1}, {2, 4}};
  CHECK(error_of(doc) == "x.json: compact.pcie_switches[1][1]: must be between 0 and 3 (got 4)");
  doc = compact_base();
  doc["compact"]["sockets"] = {{0}};
  CHECK(error_of(doc) == "x.json: compact.sockets: switch 1 is in no socket (list every switch exactly once)");
  doc = compact_base();
  doc["compact"].erase("pcie_switches");
  CHECK(error_of(doc) == "x.json: compact.sockets: GPU 2 is in no socket (list every GPU exactly once)");
  doc.erase("compact");
  doc["compact"] = {{"gpus", 2}, {"nics_per_switch", 1}};
  CHECK(error_of(doc) == "x.json: compact.nics_per_switch: needs pcie_switches (use nics_per_socket)");
  doc["compact"] = {{"gpus", 2}, {"pcie_switches", {{0, 1}}}, {"nics_per_switch", 3}, {"nic_ports", 2}};
  CHECK(error_of(doc) == "x.json: compact.nic_ports: 2 does not divide nics_per_switch (3)");
  doc["compact"] = {{"gpus", 2}, {"nics_per_socket", 2}, {"nic_ports", 0}};
  CHECK(error_of(doc) == "x.json: compact.nic_ports: must be between 1 and 8 (got 0)");
  doc["compact"] = {{"gpus", 0}};
  CHECK(error_of(doc) == "x.json: compact.gpus: must be between 1 and 1024 (got 0)");
  doc["compact"] = {{"gpus", 2}, {"pcie_bandwith", 12}};
  CHECK(error_of(doc).rfind("x.json: compact.pcie_bandwith: unknown field (expected gpus, arch, nvlink", 0) == 0);
}

TEST_CASE("io.cluster_form") {
  const json doc = json::parse(R"({
    "name": "pair",
    "machines": [{"config": "dgx1-v100"}, {"name": "u", "compact": {"gpus": 8, "nics_per_socket": 2}}],
    "network": {"nic_bandwidth": 25, "oversubscription": 2}
  })");
  const Topology t = topology_from_json(doc, "p.json");
  CHECK(t.name() == "pair");
  CHECK(t.machine_count() == 2);
  CHECK(t.gpus().size() == 16);
  CHECK(t.nodes()[t.gpus()[9]].id == "m1/gpu1");
  REQUIRE(t.network().has_value());
  CHECK(t.network()->nic_bandwidth_gbps == 25);
  for (const Link& l : t.links()) {
    if (l.kind == LinkKind::kNetwork) {
      CHECK(l.bandwidth_gbps == 12.5);
      CHECK(l.latency_us == doctest::Approx(2.7));
    }
  }
}

TEST_CASE("io.cluster_rejects_mistakes") {
  CHECK(error_of(json::parse(R"({"machines": []})")) == "x.json: machines: must list at least one machine");
  CHECK(
      error_of(json::parse(R"({"machines": [{"config": "dgx9"}]})"))
          .rfind("x.json: machines[0].config: 'dgx9' is neither a built-in machine, uniform:G nor a file (built-ins: ",
                 0) == 0);
  CHECK(error_of(json::parse(R"({"machines": [{"config": "cluster-4xdgx1-v100"}]})")) ==
        "x.json: machines[0].config: 'cluster-4xdgx1-v100' is a cluster; list single machines");
  CHECK(error_of(json::parse(R"({"machines": [{"machines": [{"config": "dgx1-v100"}]}]})")) ==
        "x.json: machines[0].machines: a cluster cannot be a machine of another cluster");
  CHECK(error_of(json::parse(R"({"machines": [{"config": "dgx1-v100", "count": 0}]})")) ==
        "x.json: machines[0].count: must be between 1 and 4096 (got 0)");
  CHECK(error_of(json::parse(R"({"machines": [{"config": "dgx1-v100"}], "network": {"oversubscription": 0.5}})")) ==
        "x.json: network.oversubscription: must be >= 1 (got 0.5)");
  CHECK(error_of(json::parse(R"({"machines": [{"compact": {"gpus": 2}}]})")) ==
        "x.json: machines[0]: machine 'x' has no NIC to join the network");
  CHECK(error_of(json::parse(R"({"machines": [{"compact": {"gpus": 2, "nvlink": 3}}]})")) ==
        "x.json: machines[0].compact.nvlink: must be an array, not a number");
}

TEST_CASE("io.cluster_file_with_relative_configs") {
  const Topology t = load_topology(data_path("cluster_relative.json"));
  CHECK(t.name() == "three-small");
  CHECK(t.machine_count() == 3);
  CHECK(t.gpus().size() == 6);
  CHECK(t.nodes()[t.gpus()[5]].id == "m2/gpu1");
  REQUIRE(t.network().has_value());
  CHECK(t.network()->nic_bandwidth_gbps == 25);  // from the first machine's nic_bandwidth
  CHECK(t.network()->latency_us == 5);
  for (const Link& l : t.links()) {
    if (l.kind == LinkKind::kNetwork) CHECK(l.bandwidth_gbps == 12.5);
  }
}

TEST_CASE("io.file_errors") {
  const std::string malformed = data_path("malformed.json");
  const std::string message = load_error(malformed);
  CHECK(message == (malformed + ": line 4, column 34: malformed JSON: syntax error while parsing object key - "
                                "unexpected '}'; expected string literal"));
  const std::string missing = data_path("no_such_file.json");
  CHECK(load_error(missing).rfind("topology '", 0) == 0);
  CHECK_THROWS_WITH_AS(load_topology_file(missing), doctest::Contains("no_such_file.json: cannot open"), InvalidInput);
  CHECK_THROWS_WITH_AS(load_topology_file(data_path("")), doctest::Contains("is a directory"), InvalidInput);
  CHECK(load_error(data_path("bad_bandwidth.json")) ==
        data_path("bad_bandwidth.json") + ": links[0].bandwidth: must be > 0 (got 0)");
  CHECK_THROWS_WITH_AS(topology_from_json(json::parse("{\"devices\": [], \"links\": []}"), "e.json"),
                       "e.json: devices: must list at least one device", InvalidInput);
}

TEST_CASE("io.unknown_name_lists_builtins") {
  const std::string message = load_error("dgx7");
  CHECK(message.find("'dgx7'") != std::string::npos);
  for (const auto& name : builtin_topology_names()) CHECK(message.find(name) != std::string::npos);
  CHECK(message.find("uniform:G") != std::string::npos);
  CHECK(load_error("").find("empty") != std::string::npos);
}

TEST_CASE("io.generator_uniform") {
  const Topology t = load_topology("uniform:8");
  CHECK(t.name() == "uniform:8");
  CHECK(t.gpus().size() == 8);
  CHECK(t.machine_count() == 1);
  int nvlinks = 0, pcie = 0;
  for (const Link& l : t.links()) {
    nvlinks += l.kind == LinkKind::kNvLink;
    pcie += l.kind == LinkKind::kPcie;
    if (l.kind == LinkKind::kNvLink) CHECK(l.bandwidth_gbps == 25);
    if (l.kind == LinkKind::kPcie) CHECK(l.bandwidth_gbps == 12);
  }
  CHECK(nvlinks == 8 * 7);
  CHECK(pcie == 2 * (8 + 1));
  CHECK(t.nodes_of_kind(NodeKind::kCpu).size() == 1);
  CHECK(t.nodes_of_kind(NodeKind::kNic).size() == 1);
  CHECK(load_topology("uniform:1").gpus().size() == 1);
}

TEST_CASE("io.generator_uniform_cluster") {
  const Topology t = load_topology("uniform:2x8");
  CHECK(t.name() == "uniform:2x8");
  CHECK(t.machine_count() == 2);
  REQUIRE(t.gpus().size() == 16);
  CHECK(t.gpus_per_machine() == 8);
  for (int g = 0; g < 16; ++g) {
    const Node& n = t.nodes()[t.gpus()[g]];
    CHECK(n.global_index == g);
    CHECK(n.machine == g / 8);
    CHECK(n.local_index == g % 8);
    CHECK(n.id == fmt::format("m{}/gpu{}", g / 8, g % 8));
  }
  CHECK(t.nodes_of_kind(NodeKind::kNetSwitch).size() == 1);
  CHECK(load_topology("2xuniform:8").fingerprint() == load_topology("uniform:2x8").fingerprint());
}

TEST_CASE("io.generator_n_machines_of_a_builtin") {
  const Topology t = load_topology("4xdgx1-v100");
  CHECK(t.name() == "4xdgx1-v100");
  CHECK(t.machine_count() == 4);
  CHECK(t.gpus().size() == 32);
  CHECK(t.nodes_of_kind(NodeKind::kNic).size() == 16);
  CHECK(t.network()->nic_bandwidth_gbps == 12.5);
  // Same machines and network as the shipped cluster example.
  const Topology shipped = load_topology("cluster-4xdgx1-v100");
  CHECK(shipped.links().size() == t.links().size());
  CHECK(shipped.nodes().size() == t.nodes().size());
}

TEST_CASE("io.generator_large_cluster") {
  const Topology t = load_topology("128xdgx-h100");
  CHECK(t.machine_count() == 128);
  REQUIRE(t.gpus().size() == 1024);
  const Node& last = t.nodes()[t.gpus()[1023]];
  CHECK(last.id == "m127/gpu7");
  CHECK(last.global_index == 1023);
  CHECK(t.network()->nic_bandwidth_gbps == 50);  // dgx-h100's NDR ports
  CHECK(t.nodes_of_kind(NodeKind::kNic).size() == 128 * 8);
}

TEST_CASE("io.generator_rejects_bad_specs") {
  CHECK(load_error("uniform:0") == "topology 'uniform:0': G must be between 1 and 256 GPUs per machine");
  CHECK(load_error("uniform:257").find("between 1 and 256") != std::string::npos);
  CHECK(load_error("uniform:x") == "topology 'uniform:x': expected uniform:G or uniform:NxG (N machines of G GPUs)");
  CHECK(load_error("uniform:2x") == "topology 'uniform:2x': expected uniform:G or uniform:NxG (N machines of G GPUs)");
  CHECK(load_error("uniform:0x8") == "topology 'uniform:0x8': the machine count must be between 1 and 4096");
  CHECK(load_error("0xdgx1-v100") == "topology '0xdgx1-v100': the machine count must be between 1 and 4096");
  CHECK(
      load_error("2xcluster-4xdgx1-v100") ==
      "topology '2xcluster-4xdgx1-v100': 'cluster-4xdgx1-v100' is already a cluster; NxNAME repeats a single machine");
  CHECK(load_error("3xnothing").rfind("topology '3xnothing': not a built-in", 0) == 0);
  CHECK(load_error("uniform:300x256") ==
        "topology 'uniform:300x256': 76800 GPUs in all is more than the supported 65536");
  CHECK(load_error("uniform:100x256") ==
        "topology 'uniform:100x256': 6579600 directed links in all is more than the supported 4000000");
}

TEST_CASE("io.join_machines") {
  const Topology small = load_topology_file(data_path("small_machine.json"));
  NetworkSpec net;
  net.nic_bandwidth_gbps = 25;
  net.latency_us = 3;
  net.oversubscription = 2;
  const Topology t = join_machines({small, small, small}, net, "trio");
  CHECK(t.name() == "trio");
  CHECK(t.machine_count() == 3);
  CHECK(t.gpus().size() == 6);
  CHECK(t.find_node("m2/nic0") >= 0);
  const int sw = t.find_node("net_switch");
  REQUIRE(sw >= 0);
  CHECK(t.nodes()[sw].machine == -1);
  int network_links = 0;
  for (const Link& l : t.links()) {
    if (l.kind != LinkKind::kNetwork) continue;
    ++network_links;
    CHECK(l.bandwidth_gbps == 12.5);
    CHECK(l.latency_us == 3);
    CHECK((l.src == sw || l.dst == sw));
  }
  CHECK(network_links == 6);
  CHECK(t.network()->oversubscription == 2);

  const Topology no_nic = topology_from_json(json::parse(R"({"name": "lonely", "compact": {"gpus": 2}})"), "l.json");
  CHECK_THROWS_WITH_AS(join_machines({small, no_nic}, net, "x"),
                       "join_machines: machine 1 ('lonely') has no NIC to join the network", InvalidInput);
  CHECK_THROWS_WITH_AS(join_machines({t}, net, "x"), "join_machines: machine 0 ('trio') is itself a cluster",
                       InvalidInput);
  CHECK_THROWS_AS(join_machines({}, net, "x"), InvalidInput);
  net.oversubscription = 0.5;
  CHECK_THROWS_AS(join_machines({small}, net, "x"), InvalidInput);
}

TEST_CASE("io.json_round_trip") {
  std::vector<std::string> specs = builtin_topology_names();
  specs.push_back("uniform:2x4");
  for (const auto& spec : specs) {
    CAPTURE(spec);
    const Topology t = load_topology(spec);
    const json model = topology_model_to_json(t);
    const Topology back = topology_from_json(model, "round.json");
    CHECK(back.name() == t.name());
    CHECK(back.description() == t.description());
    CHECK(back.fingerprint() == t.fingerprint());
    REQUIRE(back.links().size() == t.links().size());
    for (std::size_t i = 0; i < t.links().size(); ++i) {
      const Link& a = t.links()[i];
      const Link& b = back.links()[i];
      CHECK(t.nodes()[a.src].id == back.nodes()[b.src].id);
      CHECK(t.nodes()[a.dst].id == back.nodes()[b.dst].id);
      CHECK(a.kind == b.kind);
      CHECK(a.bandwidth_gbps == b.bandwidth_gbps);
      CHECK(a.latency_us == b.latency_us);
      CHECK(a.lanes == b.lanes);
    }
    for (std::size_t i = 0; i < t.nodes().size(); ++i) {
      CHECK(t.nodes()[i].machine == back.nodes()[i].machine);
      CHECK(t.nodes()[i].local_index == back.nodes()[i].local_index);
      CHECK(t.nodes()[i].global_index == back.nodes()[i].global_index);
      CHECK(t.nodes()[i].arch == back.nodes()[i].arch);
    }
  }
}

TEST_CASE("io.to_json_derived_fields") {
  const Topology t = load_topology("dgx1-v100");
  const json doc = topology_to_json(t);
  CHECK(doc["machine_count"] == 1);
  CHECK(doc["gpus"].size() == 8);
  REQUIRE(doc["peer_matrix"].size() == 8);
  CHECK(doc["peer_matrix"][0][1].is_boolean());
  CHECK(doc["nvlink_matrix"][0] == json({0, 1, 1, 2, 2, 0, 0, 0}));
  CHECK(doc["path_matrix"][0][0] == "X");
  CHECK(doc["path_matrix"][0][3] == "NVL");
  CHECK(doc["bandwidth_matrix"][0][3] == 50.0);
  CHECK(doc["fingerprint"] == t.fingerprint());
  // The derived output loads back; derived keys are ignored.
  CHECK(topology_from_json(doc, "shown.json").fingerprint() == t.fingerprint());
  // A directed, asymmetric pair prints as two directed entries.
  json asym = base();
  asym["links"][0]["directed"] = true;
  asym["links"].push_back({{"a", "gpu1"}, {"b", "gpu0"}, {"kind", "nvlink"}, {"bandwidth", 20}, {"directed", true}});
  const json out = topology_model_to_json(topology_from_json(asym, "a.json"));
  int directed = 0;
  for (const auto& l : out["links"]) directed += l.value("directed", false);
  CHECK(directed == 2);
  CHECK(topology_from_json(out, "a2.json").fingerprint() == topology_from_json(asym, "a.json").fingerprint());
}

TEST_CASE("io.generator_limits_hold_for_every_input_path") {
  // A cluster's "count" is held to the same GPU and link totals as the NxNAME generator, before any copy
  // is made (55 bytes used to reach std::bad_alloc or gigabytes of memory).
  CHECK(error_of(json::parse(R"({"machines":[{"config":"uniform:256","count":300}]})")) ==
        "x.json: machines[0]: 76800 GPUs in all is more than the supported 65536");
  CHECK(error_of(json::parse(R"({"machines":[{"config":"uniform:256","count":4096}]})")) ==
        "x.json: machines[0]: 1048576 GPUs in all is more than the supported 65536");
  CHECK(error_of(json::parse(R"({"machines":[{"config":"uniform:256","count":200}]})")) ==
        "x.json: machines[0]: 13159200 directed links in all is more than the supported 4000000");
  // Totals add up over entries.
  CHECK(error_of(
            json::parse(R"({"machines":[{"config":"uniform:256","count":40},{"config":"uniform:256","count":40}]})")) ==
        "x.json: machines[1]: 5263680 directed links in all is more than the supported 4000000");
  // A full-form machine is held to the per-machine GPU limit of the generators.
  json devices = json::array({{{"id", "cpu0"}, {"kind", "cpu"}}});
  json links = json::array();
  for (int g = 0; g < 1025; ++g) {
    std::string id = "g";
    id += std::to_string(g);
    devices.push_back({{"id", id}, {"kind", "gpu"}});
    links.push_back({{"a", id}, {"b", "cpu0"}, {"kind", "pcie"}, {"bandwidth", 12}});
  }
  CHECK(error_of(json{{"devices", devices}, {"links", links}}) ==
        "x.json: devices: machine 0 has 1025 GPUs, more than the supported 1024 per machine");
}

TEST_CASE("io.nic_fabric") {
  // A NIC's fabric (net_kind.hpp): a kind alone or an object of overrides; the network's fabric is every NIC's
  // that states none; written back and read again unchanged.
  json doc = base();
  doc["devices"][3]["fabric"] = "efa";
  Topology t = topology_from_json(doc, "x.json");
  const Node& nic = t.nodes()[static_cast<std::size_t>(t.find_node("nic0"))];
  CHECK(nic.net.kind == NetKind::kEfa);
  CHECK(nic.net.extra_step_us < 0);
  doc["devices"][3]["fabric"] = {{"kind", "roce"},
                                 {"reported_latency_us", 5},
                                 {"extra_step_us", 12.5},
                                 {"efficiency", 0.8},
                                 {"protocols", {"simple", "ll"}}};
  t = topology_from_json(doc, "x.json");
  const NicNet want{NetKind::kRoce, 5, 12.5, 0.8, static_cast<int>(kNetSimple | kNetLL)};
  CHECK(t.nodes()[static_cast<std::size_t>(t.find_node("nic0"))].net == want);
  const Topology back = topology_from_json(topology_model_to_json(t), "y.json");
  CHECK(back.nodes()[static_cast<std::size_t>(back.find_node("nic0"))].net == want);
  CHECK(back.fingerprint() == t.fingerprint());
  CHECK(topology_from_json(base(), "x.json").fingerprint() != t.fingerprint());
  // A cluster's network fabric reaches every NIC; its own fabric wins.
  const json cluster = {{"machines", {{{"config", "dgx-h100"}, {"count", 2}}}},
                        {"network", {{"nic_bandwidth", 50}, {"fabric", {{"kind", "socket"}, {"extra_step_us", 40}}}}}};
  const Topology c = topology_from_json(cluster, "c.json");
  for (const int n : c.nodes_of_kind(NodeKind::kNic)) {
    CHECK(c.nodes()[static_cast<std::size_t>(n)].net == NicNet{NetKind::kSocket, -1, 40, -1, -1});
  }
  const Topology c2 = topology_from_json(topology_model_to_json(c), "c2.json");
  CHECK(c2.fingerprint() == c.fingerprint());
  // Bad values: one line naming the field.
  auto with = [](const json& fabric) {
    json d = base();
    d["devices"][3]["fabric"] = fabric;
    return d;
  };
  CHECK(error_of(with("eth")) ==
        "x.json: devices[3].fabric: unknown network kind 'eth' (expected ib, roce, efa or socket)");
  CHECK(error_of(with(3)).rfind("x.json: devices[3].fabric: must be a network kind or an object", 0) == 0);
  CHECK(error_of(with({{"kind", "ib"}, {"speed", 1}})).rfind("x.json: devices[3].fabric.speed: unknown field", 0) == 0);
  CHECK(error_of(with({{"efficiency", 0}})) == "x.json: devices[3].fabric.efficiency: must be in (0, 1] (got 0)");
  CHECK(error_of(with({{"efficiency", 1.5}})) == "x.json: devices[3].fabric.efficiency: must be in (0, 1] (got 1.5)");
  CHECK(error_of(with({{"extra_step_us", -1}})) == "x.json: devices[3].fabric.extra_step_us: must be >= 0 (got -1)");
  CHECK(error_of(with({{"reported_latency_us", "75"}})) ==
        "x.json: devices[3].fabric.reported_latency_us: must be a number, not a string");
  CHECK(error_of(with({{"protocols", json::array()}})) ==
        "x.json: devices[3].fabric.protocols: must list at least one protocol (ll, ll128, simple)");
  CHECK(error_of(with({{"protocols", {"simple", "fast"}}})) ==
        "x.json: devices[3].fabric.protocols[1]: unknown protocol 'fast' (expected ll, ll128 or simple)");
  json on_gpu = base();
  on_gpu["devices"][0]["fabric"] = "ib";
  CHECK(error_of(on_gpu) == "x.json: devices[0].fabric: only a nic has a fabric");
  json bad_network = cluster;
  bad_network["network"]["fabric"] = "tcp";
  try {
    topology_from_json(bad_network, "c.json");
    FAIL("loaded");
  } catch (const InvalidInput& e) {
    CHECK(std::string(e.what()) ==
          "c.json: network.fabric: unknown network kind 'tcp' (expected ib, roce, efa or socket)");
  }
}
