// Live discovery and `artune topo discover`: this machine (no GPU expected),
// an hwloc XML export of a DGX-1-like machine, the CLI exit codes, and the
// cluster join under mpirun.

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "tests/test_support.hpp"
#include "artune/topology/discovery.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/topology.hpp"
#include "tests/cli_runner.hpp"

using namespace artune;
namespace fs = std::filesystem;

namespace {

std::string data_path(const std::string& name) {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/tests/topology/data/" + name;
}

// A machine with an NVIDIA driver loaded would legitimately report GPUs.
bool machine_has_nvidia_gpu() { return fs::exists("/dev/nvidia0") || fs::exists("/proc/driver/nvidia/gpus"); }

bool has_note(const DiscoveryResult& r, const std::string& prefix) {
  for (const auto& n : r.notes)
    if (n.rfind(prefix, 0) == 0) return true;
  return false;
}

using Run = artune_test::CliResult;

// `artune ARGS` with stdout and stderr together.
Run run(const std::string& args) { return artune_test::run_shell(artune_test::artune_bin() + " " + args + " 2>&1"); }

// One scratch folder for the whole program, removed when it ends.
fs::path scratch(const std::string& name) {
  static const artune_test::ScratchDir dir("artune_test_discovery");
  return dir.path() / name;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string which(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    fs::path candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (fs::exists(candidate)) return candidate.string();
    start = end + 1;
  }
  return {};
}

}  // namespace

TEST_CASE("discovery.local_machine_never_throws") {
  DiscoveryResult r;
  CHECK_NOTHROW(r = discover_local_machine());
  CHECK(!r.hostname.empty());
  CHECK(r.pus >= 1);
  CHECK(r.topology.nodes_of_kind(NodeKind::kCpu).size() >= 1);
  CHECK(has_note(r, "hwloc"));
  CHECK(has_note(r, "CUDA runtime"));
  CHECK(has_note(r, "NVML"));
  CHECK(r.gpu_count == static_cast<int>(r.topology.gpus().size()));
  if (!machine_has_nvidia_gpu()) {
    CHECK(r.gpu_count == 0);
    CHECK(has_note(r, "hwloc: no NVIDIA GPU"));
  }
  // Every reported NIC became a node.
  int nics = 0;
  for (const auto& d : r.pci_devices) nics += d.kind == "nic";
  CHECK(static_cast<int>(r.topology.nodes_of_kind(NodeKind::kNic).size()) == nics);
}

// data/dgx1_like_hwloc.xml: a DGX-1-like machine, 2 Broadwell packages (1 NUMA node each), per package two PLX
// switches behind a root port, each switch with 2 NVIDIA V100 GPUs and 1 Mellanox NIC; an NVMe drive on a root
// port of package 0. Written as hwloc exports XML (no comments): hwloc's built-in minimal parser reads it, so it
// loads without the libxml2 plugin (libhwloc-plugins), as on the bare GPU machine.
TEST_CASE("discovery.hwloc_xml_of_a_dgx1_like_machine") {
  DiscoveryOptions options;
  options.hwloc_xml = data_path("dgx1_like_hwloc.xml");
  const DiscoveryResult r = discover_local_machine(options);
  CHECK(r.hostname == "dgx1-like");
  CHECK(r.packages == 2);
  CHECK(r.numa_nodes == 2);
  CHECK(r.cores == 8);
  REQUIRE(r.gpu_count == 8);
  const Topology& t = r.topology;
  CHECK(t.nodes_of_kind(NodeKind::kCpu).size() == 2);
  CHECK(t.nodes_of_kind(NodeKind::kPcieSwitch).size() == 4);
  CHECK(r.pci_devices.size() == 13);  // 8 GPUs, 4 NICs, 1 NVMe drive
  const std::vector<std::string> buses = {"0000:06:00.0", "0000:07:00.0", "0000:0a:00.0", "0000:0b:00.0",
                                          "0000:85:00.0", "0000:86:00.0", "0000:89:00.0", "0000:8a:00.0"};
  for (int g = 0; g < 8; ++g) CHECK(t.nodes()[t.gpus()[g]].bus_id == buses[g]);
  const auto types = path_type_matrix(t);
  CHECK(types[0][1] == PathType::kPix);
  CHECK(types[0][2] == PathType::kPhb);
  CHECK(types[0][4] == PathType::kSys);
  CHECK(types[6][7] == PathType::kPix);
  // No NVLinks without NVML; hwloc's 15.75 GB/s raw Gen3 x16 is NCCL's usable 12.
  CHECK(nvlink_matrix(t)[0][1] == 0);
  CHECK(bandwidth_matrix(t)[0][1] == doctest::Approx(12));
  std::vector<std::string> nics;
  for (int n : t.nodes_of_kind(NodeKind::kNic)) nics.push_back(t.nodes()[n].arch);
  CHECK(nics == std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"});
  for (int g = 0; g < 8; ++g) CHECK(t.nodes()[t.nearest_nic(t.gpus()[g])].arch == "mlx5_" + std::to_string(g / 2));
  for (const Link& l : t.links())
    if (l.kind == LinkKind::kSmp) CHECK(l.bandwidth_gbps == doctest::Approx(6));  // Broadwell QPI
  // The CPUs' arch (configs/README.md) from the root's Architecture and each package's CPUVendor.
  for (const int cpu : t.nodes_of_kind(NodeKind::kCpu)) CHECK(t.nodes()[cpu].arch == "x86_64-intel");
  CHECK(has_note(r, "read "));
  CHECK(!has_note(r, "NVML"));
}

TEST_CASE("discovery.hwloc_xml_cpu_vendor_and_architecture") {
  // The same machine with other CPUs: hwloc's CPUVendor AuthenticAMD, then the XML of an aarch64 host.
  std::ifstream in(data_path("dgx1_like_hwloc.xml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto replace_all = [](std::string s, const std::string& from, const std::string& to) {
    for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
    return s;
  };
  const auto discover = [](const std::string& name, const std::string& xml) {
    const fs::path file = scratch(name);
    std::ofstream(file) << xml;
    DiscoveryOptions options;
    options.hwloc_xml = file.string();
    return discover_local_machine(options).topology;
  };
  const std::string amd_xml = replace_all(text, "\"GenuineIntel\"", "\"AuthenticAMD\"");
  REQUIRE(amd_xml != text);
  const Topology amd = discover("amd_hwloc.xml", amd_xml);
  REQUIRE(amd.nodes_of_kind(NodeKind::kCpu).size() == 2);
  for (const int cpu : amd.nodes_of_kind(NodeKind::kCpu)) CHECK(amd.nodes()[cpu].arch == "x86_64-amd");
  for (const Link& l : amd.links())
    if (l.kind == LinkKind::kSmp) CHECK(l.bandwidth_gbps == doctest::Approx(16));  // NCCL's AMD_BW
  const std::string arm_xml = replace_all(text, "value=\"x86_64\"", "value=\"aarch64\"");
  REQUIRE(arm_xml != text);
  const Topology arm = discover("arm_hwloc.xml", arm_xml);
  for (const int cpu : arm.nodes_of_kind(NodeKind::kCpu)) CHECK(arm.nodes()[cpu].arch == "arm64");
}

TEST_CASE("discovery.hwloc_xml_unreadable") {
  DiscoveryOptions options;
  options.hwloc_xml = data_path("does_not_exist.xml");
  CHECK_THROWS_AS(discover_local_machine(options), InvalidInput);
  options.hwloc_xml = data_path("dgx1_v100_topo_m.txt");
  CHECK_THROWS_AS(discover_local_machine(options), InvalidInput);
}

TEST_CASE("discovery.cli_without_gpu") {
  if (machine_has_nvidia_gpu()) return;  // the no-GPU behaviour needs a machine without one
  Run plain = run("topo discover");
  CHECK(plain.status == 0);
  CHECK(contains(plain.out, "No GPU found"));
  CHECK(contains(plain.out, "Sources:"));
  CHECK(contains(plain.out, "NVML"));

  Run required = run("topo discover --require-gpu");
  CHECK(required.status == 2);
  CHECK(contains(required.out, "artune: no GPU found on"));

  const fs::path out = scratch("none.json");
  fs::remove(out);
  Run written = run("topo discover --out " + out.string());
  CHECK(written.status == 2);
  CHECK(!fs::exists(out));

  Run allowed = run("topo discover --allow-no-gpu --out " + out.string());
  CHECK(allowed.status == 0);
  REQUIRE(fs::exists(out));
  const Topology t = load_topology_file(out.string());
  CHECK(t.gpus().empty());
  CHECK(!t.nodes_of_kind(NodeKind::kCpu).empty());

  Run json = run("topo discover --json");
  CHECK(json.status == 0);
  const auto doc = nlohmann::json::parse(json.out);
  CHECK(doc.at("gpu_count") == 0);
  CHECK(doc.at("notes").size() >= 3);
}

TEST_CASE("discovery.cli_writes_a_gpu_topology_from_hwloc_xml") {
  const fs::path out = scratch("dgx1_like.json");
  Run r = run("topo discover --hwloc-xml " + data_path("dgx1_like_hwloc.xml") + " --out " + out.string());
  CHECK(r.status == 0);
  CHECK(contains(r.out, "GPU gpu7: 0000:8a:00.0"));
  REQUIRE(fs::exists(out));
  const Topology t = load_topology_file(out.string());
  CHECK(t.gpus().size() == 8);
  CHECK(path_type_matrix(t)[0][1] == PathType::kPix);

  Run missing = run("topo discover --hwloc-xml " + data_path("nope.xml"));
  CHECK(missing.status == 2);
  Run help = run("topo discover --help");
  CHECK(help.status == 0);
  CHECK(contains(help.out, "--require-gpu"));
}

TEST_CASE("discovery.cli_cluster_under_mpirun") {
  const std::string mpirun = which("mpirun");
  if (mpirun.empty()) {
    MESSAGE("mpirun not found: cluster discovery not exercised");
    return;
  }
  const std::string bin = artune_test::artune_bin();
  const std::string xml = data_path("dgx1_like_hwloc.xml");
  const fs::path out = scratch("cluster.json");
  fs::remove(out);
  // Two "hosts" (MPMD contexts with different --hostname): rank 0 joins two machines.
  const std::string discover = bin + " topo discover --hwloc-xml " + xml + " --out " + out.string();
  const std::string command = mpirun + " --oversubscribe -np 1 " + discover + " --hostname host-a : -np 1 " + discover +
                              " --hostname host-b 2>&1";
  const Run two = artune_test::run_shell(command);
  INFO(two.out);
  REQUIRE(two.status == 0);
  CHECK(contains(two.out, "Machine 0 = host host-a (ranks 0): 8 GPU(s)"));
  CHECK(contains(two.out, "Machine 1 = host host-b (ranks 1): 8 GPU(s)"));
  REQUIRE(fs::exists(out));
  const Topology cluster = load_topology_file(out.string());
  CHECK(cluster.machine_count() == 2);
  CHECK(cluster.gpus().size() == 16);
  CHECK(cluster.gpus_per_machine() == 8);
  CHECK(cluster.nodes_of_kind(NodeKind::kNetSwitch).size() == 1);
  CHECK(cluster.route(cluster.gpus()[0], cluster.gpus()[8]).type == PathType::kNet);
  CHECK(cluster.route(cluster.gpus()[0], cluster.gpus()[1]).type == PathType::kPix);

  // Same host name on both ranks: one machine.
  fs::remove(out);
  const std::string same = mpirun + " --oversubscribe -np 2 " + discover + " 2>&1";
  const Run one = artune_test::run_shell(same);
  INFO(one.out);
  CHECK(one.status == 0);
  CHECK(contains(one.out, "Machine 0 = host dgx1-like (ranks 0,1): 8 GPU(s)"));
  REQUIRE(fs::exists(out));
  CHECK(load_topology_file(out.string()).machine_count() == 1);
}
