// Importers: `nvidia-smi topo -m` text and NCCL topology XML, on the samples of
// configs/HARDWARE.md, variants of them, and malformed input (one-line errors with
// the file and line).

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/topology/import/importers.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/topology.hpp"

using namespace artune;

namespace {

std::string data_path(const std::string& name) {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/tests/topology/data/" + name;
}

std::string read_data(const std::string& name) {
  std::ifstream in(data_path(name), std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open ", data_path(name));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Topology smi(const std::string& name) { return import_nvidia_smi(read_data(name), name); }
Topology xml(const std::string& name) { return import_nccl_xml(read_data(name), name); }

// The importer's one-line message, or "<imported>".
template <typename F>
std::string error_of(F&& import) {
  try {
    import();
  } catch (const InvalidInput& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find('\n') == std::string::npos, "multi-line message: ", what);
    return what;
  }
  return "<imported>";
}

std::string smi_error(const std::string& text) {
  return error_of([&] { import_nvidia_smi(text, "t.txt"); });
}
std::string xml_error(const std::string& text) {
  return error_of([&] { import_nccl_xml(text, "t.xml"); });
}

int count_kind(const Topology& t, NodeKind kind) { return static_cast<int>(t.nodes_of_kind(kind).size()); }

int total_nvlink_lanes(const Topology& t) {
  int lanes = 0;
  for (const auto& row : nvlink_matrix(t))
    for (int n : row) lanes += n;
  return lanes / 2;
}

std::vector<std::string> nic_names(const Topology& t) {
  std::vector<std::string> names;
  for (int n : t.nodes_of_kind(NodeKind::kNic)) names.push_back(t.nodes()[n].arch);
  return names;
}

// The two ways an nvidia-smi path class can read; NODE is PHB in the model.
PathType smi_class(const std::string& cell) {
  if (cell == "X") return PathType::kLoc;
  if (cell.rfind("NV", 0) == 0) return PathType::kNvl;
  if (cell == "PIX") return PathType::kPix;
  if (cell == "PXB") return PathType::kPxb;
  if (cell == "PHB" || cell == "NODE") return PathType::kPhb;
  return PathType::kSys;
}

const char* kTwoGpus =
    "\tGPU0\tGPU1\tCPU Affinity\n"
    "GPU0\t X \tNV2\t0-7\n"
    "GPU1\tNV2\t X \t0-7\n";

}  // namespace

// ---------------------------------------------------------------------------
// nvidia-smi topo -m

TEST_CASE("importers.smi_dgx1_v100_sample_matches_config") {
  const Topology imported = smi("dgx1_v100_topo_m.txt");
  const Topology config = load_topology("dgx1-v100");
  CHECK(peer_matrix(imported) == peer_matrix(config));
  CHECK(nvlink_matrix(imported) == nvlink_matrix(config));
  CHECK(imported.gpus().size() == 8);
  CHECK(total_nvlink_lanes(imported) == 24);
  CHECK(imported.nvlink_lanes(imported.gpus()[0], imported.gpus()[1]) == 1);  // GPU0-GPU1 is NV1
  CHECK(imported.nvlink_lanes(imported.gpus()[0], imported.gpus()[3]) == 2);
  CHECK(count_kind(imported, NodeKind::kCpu) == 2);
  CHECK(nic_names(imported) == std::vector<std::string>{"mlx5_0"});
  // GPU0/GPU1/mlx5_0 are PIX to each other: one switch; the rest is not printed (NVLink hides it).
  CHECK(count_kind(imported, NodeKind::kPcieSwitch) == 1);
  const int nic = imported.nodes_of_kind(NodeKind::kNic)[0];
  CHECK(imported.route(imported.gpus()[0], nic).type == PathType::kPix);
  CHECK(imported.route(imported.gpus()[2], nic).type == PathType::kPhb);
  CHECK(imported.route(imported.gpus()[0], imported.gpus()[5]).type == PathType::kSys);
  // Default rates: NVLink 2 lanes of 25 GB/s, PCIe Gen3 x16 = 12, QPI 6.
  CHECK(bandwidth_matrix(imported)[0][3] == doctest::Approx(50));
  CHECK(imported.route(imported.gpus()[0], nic).bandwidth_gbps == doctest::Approx(12));
  CHECK(imported.description().find("8 GPUs, 24 NVLinks, 1 NICs, 2 sockets") != std::string::npos);
}

TEST_CASE("importers.smi_spaces_and_soc_variants") {
  const Topology tabs = smi("dgx1_v100_topo_m.txt");
  const Topology spaces = smi("dgx1_v100_topo_m_spaces.txt");
  CHECK(spaces.nodes().size() == tabs.nodes().size());
  CHECK(spaces.links().size() == tabs.links().size());
  CHECK(path_type_matrix(spaces) == path_type_matrix(tabs));
  CHECK(bandwidth_matrix(spaces) == bandwidth_matrix(tabs));

  // Older driver: SOC for SYS and no NIC column.
  const Topology soc = smi("dgx1_v100_topo_m_soc.txt");
  const Topology config = load_topology("dgx1-v100");
  CHECK(peer_matrix(soc) == peer_matrix(config));
  CHECK(nvlink_matrix(soc) == nvlink_matrix(config));
  CHECK(count_kind(soc, NodeKind::kNic) == 0);
  CHECK(count_kind(soc, NodeKind::kCpu) == 2);
  CHECK(soc.route(soc.gpus()[1], soc.gpus()[4]).type == PathType::kSys);
}

TEST_CASE("importers.smi_newer_layout_rebuilds_the_whole_machine") {
  // NIC0..NIC3 columns with a NIC legend, NUMA Affinity and GPU NUMA ID: the PIX cells
  // reveal all four switches, so every derived matrix equals the config's.
  const Topology imported = smi("dgx1_v100_topo_m_newer.txt");
  const Topology config = load_topology("dgx1-v100");
  CHECK(peer_matrix(imported) == peer_matrix(config));
  CHECK(nvlink_matrix(imported) == nvlink_matrix(config));
  CHECK(path_type_matrix(imported) == path_type_matrix(config));
  CHECK(bandwidth_matrix(imported) == bandwidth_matrix(config));
  CHECK(nic_names(imported) == std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"});
  CHECK(count_kind(imported, NodeKind::kPcieSwitch) == 4);
  CHECK(count_kind(imported, NodeKind::kCpu) == 2);
  for (int g = 0; g < 8; ++g) {
    const int nic = imported.nearest_nic(imported.gpus()[g]);
    REQUIRE(nic >= 0);
    CHECK(imported.nodes()[nic].arch == "mlx5_" + std::to_string(g / 2));
  }
}

TEST_CASE("importers.smi_pcie_classes_rebuild_a_tree") {
  // PIX groups, a PXB parent switch, root-port GPUs (PHB/NODE) and two sockets, no NVLink.
  const std::string text = read_data("pcie_tree_topo_m.txt");
  const Topology t = import_nvidia_smi(text, "pcie_tree_topo_m.txt");
  CHECK(count_kind(t, NodeKind::kPcieSwitch) == 4);  // parent + 2 leaves on socket 0, 1 leaf on socket 1
  CHECK(count_kind(t, NodeKind::kCpu) == 2);
  CHECK(total_nvlink_lanes(t) == 0);
  // Every printed GPU class comes back from the model's routes.
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);  // header
  const auto types = path_type_matrix(t);
  for (int a = 0; a < 8; ++a) {
    std::getline(lines, line);
    std::istringstream words(line);
    std::string name, cell;
    words >> name;
    CHECK(name == "GPU" + std::to_string(a));
    for (int b = 0; b < 8; ++b) {
      words >> cell;
      CHECK_MESSAGE(types[a][b] == smi_class(cell), "GPU", a, "-GPU", b, " printed ", cell, " got ",
                    to_string(types[a][b]));
    }
  }
  const auto peers = peer_matrix(t);
  CHECK(peers[0][2]);   // PXB
  CHECK(peers[4][5]);   // PIX
  CHECK(!peers[4][6]);  // NODE
  CHECK(!peers[0][4]);  // SYS
  CHECK(nic_names(t) == std::vector<std::string>{"mlx5_0", "mlx5_1"});
  CHECK(t.nodes()[t.nearest_nic(t.gpus()[3])].arch == "mlx5_0");
}

TEST_CASE("importers.smi_rates_from_options") {
  NvidiaSmiImportOptions options;
  options.nvlink_lane_gbps = 20;  // NVLink 1
  options.pcie_gbps = 24;
  const Topology t = import_nvidia_smi(read_data("dgx1_v100_topo_m.txt"), "x", options);
  CHECK(bandwidth_matrix(t)[0][3] == doctest::Approx(40));
  CHECK(bandwidth_matrix(t)[0][1] == doctest::Approx(20));
  const int nic = t.nodes_of_kind(NodeKind::kNic)[0];
  CHECK(t.route(t.gpus()[0], nic).bandwidth_gbps == doctest::Approx(24));
  options.pcie_gbps = 0;
  CHECK(error_of([&] { import_nvidia_smi(kTwoGpus, "x", options); }) == "x: link rates must be > 0");
}

TEST_CASE("importers.smi_minimal_and_crlf") {
  const Topology t = import_nvidia_smi(kTwoGpus, "t.txt");
  CHECK(t.gpus().size() == 2);
  CHECK(nvlink_matrix(t)[0][1] == 2);
  CHECK(count_kind(t, NodeKind::kCpu) == 1);
  std::string crlf;
  for (char c : std::string(kTwoGpus)) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  CHECK(nvlink_matrix(import_nvidia_smi(crlf, "t.txt")) == nvlink_matrix(t));
  // Leading blank lines are fine; the first text line is the header.
  CHECK(import_nvidia_smi(std::string("\n\n") + kTwoGpus, "t.txt").gpus().size() == 2);
}

TEST_CASE("importers.smi_malformed_files") {
  auto file_error = [](const std::string& name) { return error_of([&] { smi(name); }); };
  CHECK(file_error("malformed_topo_m_not_square.txt") ==
        "malformed_topo_m_not_square.txt: line 5: row GPU3 has 8 cells, expected 9 (matrix not square)");
  CHECK(file_error("malformed_topo_m_unknown_cell.txt") ==
        "malformed_topo_m_unknown_cell.txt: line 7: unknown cell 'NVL' in row GPU5, column GPU4");
  CHECK(file_error("malformed_topo_m_asymmetric.txt") ==
        "malformed_topo_m_asymmetric.txt: line 8: asymmetric NVLink counts: GPU6–GPU2 is NV2 but GPU2–GPU6 is NV1");
  CHECK(file_error("malformed_topo_m_no_gpu.txt") ==
        "malformed_topo_m_no_gpu.txt: line 1: no GPU rows (expected columns GPU0 GPU1 …)");
}

TEST_CASE("importers.smi_rejects_mistakes") {
  CHECK(smi_error("") == "t.txt: line 1: empty input: no `nvidia-smi topo -m` matrix");
  CHECK(smi_error("\tGPU0\tGPU1\n") == "t.txt: line 2: no matrix rows after the header");
  CHECK(smi_error("\tGPU0\tGPU1\nGPU0\t X \tNV1\n") ==
        "t.txt: line 3: column GPU1 has no row (2 columns, 1 rows: matrix not square)");
  CHECK(smi_error("\tGPU0\tGPU1\nGPU0\t X \tNV1\tPIX\nGPU1\tNV1\t X \n") ==
        "t.txt: line 2: row GPU0 has 3 cells, expected 2 (matrix not square)");
  CHECK(smi_error("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV1\t0-3\t7\nGPU1\tNV1\t X \n") ==
        "t.txt: line 2: row GPU0 has 2 values after the matrix, the header names 1 affinity column(s)");
  CHECK(smi_error("\tGPU0\tGPU1\nGPU0\tPIX\tNV1\nGPU1\tNV1\t X \n") ==
        "t.txt: line 2: diagonal cell of GPU0 is 'PIX', expected X");
  CHECK(smi_error("\tGPU0\tGPU1\nGPU0\t X \tX\nGPU1\tX\t X \n") ==
        "t.txt: line 2: cell GPU0–GPU1 is X off the diagonal");
  CHECK(smi_error("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPXB\t X \n") ==
        "t.txt: line 3: asymmetric cells: GPU1–GPU0 is PXB but GPU0–GPU1 is PIX");
  CHECK(smi_error("\tGPU0\tGPU2\nGPU0\t X \tPIX\nGPU2\tPIX\t X \n") ==
        "t.txt: line 1: GPU columns must be GPU0…GPU1 (found GPU1 missing or repeated)");
  CHECK(smi_error("\tGPU0\tmlx5_0\nGPU0\t X \tNV1\nmlx5_0\tNV1\t X \n") ==
        "t.txt: line 2: NV1 between GPU0 and mlx5_0: NVLink joins GPUs only");
  CHECK(smi_error("\tGPU0\tGPU1\tCPU Affinity\tBogus\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n") ==
        "t.txt: line 1: unknown column 'Bogus' in the header row");
  CHECK(smi_error("\tGPU0\tGPU0\nGPU0\t X \tPIX\n") == "t.txt: line 1: duplicate column 'GPU0'");
  CHECK(smi_error("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU0\tPIX\t X \n") ==
        "t.txt: line 3: duplicate row 'GPU0' (first on line 2)");
  CHECK(smi_error("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU7\tPIX\t X \n") ==
        "t.txt: line 3: row 'GPU7' is not a column of the header");
  CHECK(smi_error("\tGPU0\tGPU1\nGPU0\t X \tNV0\nGPU1\tNV0\t X \n") ==
        "t.txt: line 2: unknown cell 'NV0' in row GPU0, column GPU1");
  // PIX is transitive under one switch: GPU0–GPU2 cannot be PXB.
  CHECK(smi_error("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\tPXB\nGPU1\tPIX\t X \tPIX\nGPU2\tPXB\tPIX\t X \n") ==
        "t.txt: line 2: GPU0–GPU2 is PXB but the other cells imply PIX (inconsistent PCIe classes)");
  // PHB chains put GPU0 and GPU2 on one socket, so SYS between them contradicts.
  CHECK(smi_error("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPHB\tSYS\nGPU1\tPHB\t X \tPHB\nGPU2\tSYS\tPHB\t X \n") ==
        "t.txt: line 2: GPU0–GPU2 is SYS but the other cells imply PHB (inconsistent PCIe classes)");
  CHECK(smi_error(std::string(kTwoGpus) + "\nNIC Legend:\n\n  NIC0 mlx5_0\n") ==
        "t.txt: line 7: NIC legend line 'NIC0 mlx5_0' is not 'NICk: name'");
}

// ---------------------------------------------------------------------------
// NCCL topology XML

TEST_CASE("importers.xml_dgx1_v100_matches_config") {
  const Topology imported = xml("dgx1_v100_nccl.xml");
  const Topology config = load_topology("dgx1-v100");
  CHECK(peer_matrix(imported) == peer_matrix(config));
  CHECK(nvlink_matrix(imported) == nvlink_matrix(config));
  CHECK(path_type_matrix(imported) == path_type_matrix(config));
  CHECK(bandwidth_matrix(imported) == bandwidth_matrix(config));
  CHECK(total_nvlink_lanes(imported) == 24);
  CHECK(count_kind(imported, NodeKind::kPcieSwitch) == 4);
  CHECK(count_kind(imported, NodeKind::kCpu) == 2);
  CHECK(count_kind(imported, NodeKind::kNvSwitch) == 0);
  CHECK(nic_names(imported) == std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"});
  const Node& gpu5 = imported.nodes()[imported.gpus()[5]];
  CHECK(gpu5.bus_id == "0000:86:00.0");
  CHECK(gpu5.arch == "sm70");
  // Broadwell (family 6, model 79): QPI at NCCL's 6 GB/s.
  for (const Link& l : imported.links())
    if (l.kind == LinkKind::kSmp) CHECK(l.bandwidth_gbps == doctest::Approx(6));
  CHECK(imported.description().find("NIC rates: mlx5_0 12.5 GB/s") != std::string::npos);
}

TEST_CASE("importers.xml_hardware_md_sample") {
  // One GPU of the machine: NVLinks to GPUs absent from the file are skipped, as NCCL does.
  const Topology t = xml("nccl_sample_hardware_md.xml");
  REQUIRE(t.gpus().size() == 1);
  CHECK(count_kind(t, NodeKind::kCpu) == 1);
  CHECK(count_kind(t, NodeKind::kPcieSwitch) == 1);
  CHECK(nic_names(t) == std::vector<std::string>{"mlx5_0"});
  CHECK(total_nvlink_lanes(t) == 0);
  const int nic = t.nodes_of_kind(NodeKind::kNic)[0];
  const Route& r = t.route(t.gpus()[0], nic);
  CHECK(r.type == PathType::kPix);
  CHECK(r.bandwidth_gbps == doctest::Approx(12));  // 8 GT/s x16
  CHECK(t.nodes()[t.gpus()[0]].bus_id == "0000:06:00.0");
  CHECK(t.description().find("2 NVLink target(s) not in the file ignored") != std::string::npos);
}

TEST_CASE("importers.xml_nvswitch_is_one_merged_node") {
  const Topology imported = xml("dgx_a100_nvswitch_nccl.xml");
  const Topology config = load_topology("dgx-a100");
  REQUIRE(count_kind(imported, NodeKind::kNvSwitch) == 1);
  const int nvs = imported.nodes_of_kind(NodeKind::kNvSwitch)[0];
  for (int g : imported.gpus()) {
    CHECK(imported.nvlink_lanes(g, nvs) == 12);  // 6 switches × 2 links
    CHECK(imported.route(g, nvs).bandwidth_gbps == doctest::Approx(300));
  }
  CHECK(peer_matrix(imported) == peer_matrix(config));
  CHECK(nvlink_matrix(imported) == nvlink_matrix(config));
  CHECK(path_type_matrix(imported) == path_type_matrix(config));
  CHECK(bandwidth_matrix(imported) == bandwidth_matrix(config));
  // Nested Gen4 switches: a top switch per GPU pair holding one sub-switch per GPU+NIC.
  CHECK(count_kind(imported, NodeKind::kPcieSwitch) == 12);
  const auto nics = imported.nodes_of_kind(NodeKind::kNic);
  REQUIRE(nics.size() == 8);
  CHECK(imported.route(nics[0], nics[1]).type == PathType::kPxb);
  CHECK(imported.route(nics[0], nics[2]).type == PathType::kPhb);
  CHECK(imported.route(nics[0], nics[4]).type == PathType::kSys);
  CHECK(imported.route(imported.gpus()[0], nics[0]).type == PathType::kPix);
  CHECK(imported.route(imported.gpus()[0], nics[0]).bandwidth_gbps == doctest::Approx(24));  // Gen4 x16
  for (const Link& l : imported.links())
    if (l.kind == LinkKind::kSmp) CHECK(l.bandwidth_gbps == doctest::Approx(16));  // AMD
  CHECK(imported.find_node("cpu3") >= 0);                                          // CPU ids follow numaid
  CHECK(imported.find_node("cpu7") >= 0);
  // <cpu arch="x86_64" vendor="AuthenticAMD">: the CPUs' arch as the built-in dgx-a100 states it.
  for (const int cpu : imported.nodes_of_kind(NodeKind::kCpu)) CHECK(imported.nodes()[cpu].arch == "x86_64-amd");
  for (const int cpu : config.nodes_of_kind(NodeKind::kCpu)) CHECK(config.nodes()[cpu].arch == "x86_64-amd");
}

TEST_CASE("importers.xml_cpu_arch_and_vendor") {
  // NCCL's <cpu arch= vendor=> (src/graph/xml.cc: arch x86_64, arm64 or ppc64; on x86_64 the CPUID vendor).
  auto cpu_arch = [](const std::string& attributes) {
    const Topology t = import_nccl_xml(R"(<system version="1"><cpu numaid="0" )" + attributes + R"(>
  <pci busid="0000:0a:00.0" class="0x030200" vendor="0x10de" link_speed="16.0 GT/s PCIe" link_width="16">
   <gpu dev="0" sm="80"/></pci></cpu></system>)",
                                       "t.xml");
    return t.nodes()[static_cast<std::size_t>(t.nodes_of_kind(NodeKind::kCpu)[0])].arch;
  };
  CHECK(cpu_arch(R"(arch="x86_64" vendor="AuthenticAMD" familyid="143" modelid="49")") == "x86_64-amd");
  CHECK(cpu_arch(R"(arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143")") == "x86_64-intel");
  CHECK(cpu_arch(R"(arch="x86_64" vendor="  Shanghai  ")") == "x86_64-zhaoxin");
  CHECK(cpu_arch(R"(arch="x86_64" vendor="CentaurHauls")") == "x86_64-zhaoxin");
  CHECK(cpu_arch(R"(arch="x86_64" vendor="HygonGenuine")") == "x86_64");
  CHECK(cpu_arch(R"(arch="x86_64")") == "x86_64");
  CHECK(cpu_arch(R"(arch="arm64")") == "arm64");
  CHECK(cpu_arch(R"(arch="ppc64")") == "ppc64");
  CHECK(cpu_arch(R"(vendor="AuthenticAMD")") == "");
  CHECK(cpu_arch("") == "");
  // Every socket keeps its own, and the DGX-1 file's Broadwell sockets are Intel.
  const Topology v100 = xml("dgx1_v100_nccl.xml");
  REQUIRE(v100.nodes_of_kind(NodeKind::kCpu).size() == 2);
  for (const int cpu : v100.nodes_of_kind(NodeKind::kCpu)) CHECK(v100.nodes()[cpu].arch == "x86_64-intel");
}

TEST_CASE("importers.xml_reader_features") {
  // Single quotes, blanks around '=', entities, comments anywhere, self-closing and explicit empty elements.
  const char* text = R"(<?xml version='1.0'?>
<!-- leading comment -->
<system version = "1">
 <cpu numaid='0' vendor="Genuine&amp;Intel" arch="x86_64">
  <!-- a comment between elements -->
  <pci busid="0000:0A:00.0" class="0x030200" vendor="0x10de" link_speed="16.0 GT/s PCIe" link_width="8">
   <gpu dev="1" sm="60"><nvlink target="0000:0b:00.0" count="4"></nvlink></gpu>
  </pci>
  <pci busid="0b:00.0" class="0x030000" vendor="0x10de" link_speed="" link_width="0">
   <gpu dev="0" sm="60"><nvlink target="0000:0a:00.0" count="4"/></gpu>
  </pci>
  <nic><net name="eth&#48;" speed="25000"/></nic >
 </cpu >
</system>
<!-- trailing comment -->
)";
  const Topology t = import_nccl_xml(text, "t.xml");
  REQUIRE(t.gpus().size() == 2);
  // Local index by dev: gpu0 is the one at 0b.
  CHECK(t.nodes()[t.gpus()[0]].bus_id == "0000:0b:00.0");
  CHECK(t.nodes()[t.gpus()[1]].bus_id == "0000:0a:00.0");
  CHECK(nvlink_matrix(t)[0][1] == 4);
  CHECK(bandwidth_matrix(t)[0][1] == doctest::Approx(80));  // sm60: NVLink 1 at 20 GB/s per lane
  CHECK(t.route(t.gpus()[1], t.nodes_of_kind(NodeKind::kCpu)[0]).bandwidth_gbps == doctest::Approx(12));  // Gen4 x8
  CHECK(t.route(t.gpus()[0], t.nodes_of_kind(NodeKind::kCpu)[0]).bandwidth_gbps ==
        doctest::Approx(12));  // unknown → Gen3 x16
  CHECK(nic_names(t) == std::vector<std::string>{"eth0"});
  CHECK(t.nodes()[t.nodes_of_kind(NodeKind::kCpu)[0]].arch == "x86_64");  // vendor "Genuine&Intel": not one NCCL knows
}

TEST_CASE("importers.xml_malformed_file") {
  CHECK(error_of([] { xml("malformed_nccl.xml"); }) ==
        "malformed_nccl.xml: line 14: closing tag </pcie> does not match <pci> of line 7");
}

TEST_CASE("importers.xml_rejects_mistakes") {
  const std::string gpu = R"(<pci busid="0000:06:00.0" class="0x030200" vendor="0x10de"><gpu dev="0" sm="70"/></pci>)";
  auto wrap = [&](const std::string& inner) {
    return "<system version=\"1\">\n<cpu numaid=\"0\">\n" + inner + "\n</cpu>\n</system>\n";
  };
  CHECK(xml_error("") == "t.xml: line 1: no root element");
  CHECK(xml_error("<system>\n<!-- open") == "t.xml: line 2: unterminated comment");
  CHECK(xml_error("<system>\nhello\n</system>") == "t.xml: line 2: unexpected text inside <system>");
  CHECK(xml_error("<system version=1/>") == "t.xml: line 1: attribute value must be quoted");
  CHECK(xml_error("<system a=\"1\" a=\"2\"/>") == "t.xml: line 1: duplicate attribute 'a' in <system>");
  CHECK(xml_error("<system a=\"1\"b=\"2\"/>") ==
        "t.xml: line 1: expected a blank before the next attribute of <system>");
  CHECK(xml_error("<system a=\"x&foo;\"/>") == "t.xml: line 1: unknown entity &foo;");
  CHECK(xml_error("<system a=\"x<\"/>") == "t.xml: line 1: '<' inside an attribute value");
  CHECK(xml_error("<system>\n<cpu numaid=\"0\">\n</system>") ==
        "t.xml: line 3: closing tag </system> does not match <cpu> of line 2");
  CHECK(xml_error("<system>\n<cpu numaid=\"0\">\n") == "t.xml: line 2: <cpu> is never closed");
  CHECK(xml_error("<system/>\n<system/>") == "t.xml: line 2: content after the root element");
  CHECK(xml_error("<!DOCTYPE system>\n<system/>") == "t.xml: line 1: DOCTYPE/CDATA sections are not supported");
  CHECK(xml_error("<topology/>") == "t.xml: line 1: root element is <topology>, expected <system>");
  CHECK(xml_error("<system>\n</system>") ==
        "t.xml: line 1: no GPU in the topology (no <gpu> element or NVIDIA display-class <pci>)");
  CHECK(xml_error("<system>\n<gpu/>\n</system>") == "t.xml: line 2: unexpected <gpu> in <system> (expected <cpu>)");
  CHECK(xml_error("<system>\n<cpu/>\n</system>") == "t.xml: line 2: <cpu> has no 'numaid' attribute");
  CHECK(xml_error(wrap(R"(<pci busid="0000:06:00.0" class="0x030200"><gpu sm="70"/></pci>)")) ==
        "t.xml: line 3: <gpu> has no 'dev' attribute");
  CHECK(xml_error(wrap(R"(<pci busid="06:00" class="0x030200"><gpu dev="0"/></pci>)")) ==
        "t.xml: line 3: <pci> busid=\"06:00\": expected a PCI bus id such as 0000:06:00.0");
  CHECK(xml_error(wrap(R"(<pci busid="0000:06:00.0" class="0x030200" link_speed="7 GT/s"><gpu dev="0"/></pci>)")) ==
        "t.xml: line 3: <pci> link_speed=\"7 GT/s\": expected 2.5, 5, 8, 16, 32 or 64 GT/s");
  CHECK(xml_error(
            wrap(R"(<pci busid="0000:06:00.0" class="0x030200"><pci busid="0000:07:00.0" class="0x030200"/></pci>)")) ==
        "t.xml: line 3: <pci busid=\"0000:06:00.0\"> of class 0x030200 holds a <pci>: only bridges (class 0x0604xx) "
        "nest");
  CHECK(xml_error(wrap(gpu + "\n" + gpu)) == "t.xml: line 4: duplicate <pci busid=\"0000:06:00.0\">");
  CHECK(xml_error(wrap(R"(<pci busid="0000:06:00.0" class="0x030200"><gpu dev="0"><foo/></gpu></pci>)")) ==
        "t.xml: line 3: unexpected <foo> in <gpu> (expected <nvlink>)");
  CHECK(
      xml_error(wrap(
          R"(<pci busid="0000:06:00.0" class="0x030200"><gpu dev="0"><nvlink target="0000:07:00.0" count="0"/></gpu></pci>)")) ==
      "t.xml: line 3: <nvlink> count=\"0\": expected an integer in [1, 64]");
  CHECK(
      xml_error(wrap(
          R"(<pci busid="0000:06:00.0" class="0x030200"><gpu dev="0"><nvlink target="0000:06:00.0" count="1"/></gpu></pci>)")) ==
      "t.xml: line 3: <nvlink> targets its own GPU");
  const std::string asym = wrap(
      "<pci busid=\"0000:06:00.0\" class=\"0x030200\"><gpu dev=\"0\"><nvlink target=\"0000:07:00.0\" "
      "count=\"2\"/></gpu></pci>\n"
      "<pci busid=\"0000:07:00.0\" class=\"0x030200\"><gpu dev=\"1\"><nvlink target=\"0000:06:00.0\" "
      "count=\"1\"/></gpu></pci>");
  CHECK(xml_error(asym) ==
        "t.xml: line 4: asymmetric NVLink counts: GPU 0000:07:00.0 lists 1 link(s) to 0000:06:00.0, but GPU "
        "0000:06:00.0 lists 2 (line 3)");
  const std::string twice = wrap(
      "<pci busid=\"0000:06:00.0\" class=\"0x030200\"><gpu dev=\"0\"/></pci>\n"
      "<pci busid=\"0000:07:00.0\" class=\"0x030200\"><gpu dev=\"0\"/></pci>");
  CHECK(xml_error(twice) == "t.xml: line 4: duplicate <gpu dev=\"0\"> (first on line 3)");
  CHECK(xml_error("<system>\n<cpu numaid=\"0\"/>\n<cpu numaid=\"0\"/>\n</system>") ==
        "t.xml: line 3: duplicate <cpu numaid=\"0\">");
}

TEST_CASE("importers.pcie_and_nvlink_rates") {
  CHECK(parse_pcie_link_speed("8 GT/s").value() == 8.0);
  CHECK(parse_pcie_link_speed("16.0 GT/s PCIe").value() == 16.0);
  CHECK(parse_pcie_link_speed("2.5 GT/s").value() == 2.5);
  CHECK(parse_pcie_link_speed("32GT/s").value() == 32.0);
  CHECK(!parse_pcie_link_speed("Unknown"));
  CHECK(!parse_pcie_link_speed("7 GT/s"));
  CHECK(pcie_bandwidth_gbps(2.5, 16) == doctest::Approx(3));
  CHECK(pcie_bandwidth_gbps(5.0, 16) == doctest::Approx(6));
  CHECK(pcie_bandwidth_gbps(8.0, 16) == doctest::Approx(12));
  CHECK(pcie_bandwidth_gbps(16.0, 16) == doctest::Approx(24));
  CHECK(pcie_bandwidth_gbps(32.0, 16) == doctest::Approx(48));
  CHECK(pcie_bandwidth_gbps(8.0, 8) == doctest::Approx(6));
  CHECK(pcie_bandwidth_gbps(7.0, 16) == 0);
  CHECK(nvlink_lane_bandwidth_gbps(60) == 20);
  CHECK(nvlink_lane_bandwidth_gbps(70) == 25);
  CHECK(nvlink_lane_bandwidth_gbps(90) == 25);
  CHECK(smp_bandwidth_gbps("x86_64", "GenuineIntel", 6, 79) == 6);   // Broadwell QPI
  CHECK(smp_bandwidth_gbps("x86_64", "GenuineIntel", 6, 85) == 10);  // Skylake UPI
  CHECK(smp_bandwidth_gbps("x86_64", "AuthenticAMD", 23, 49) == 16);
  CHECK(smp_bandwidth_gbps("ppc64le", "IBM", -1, -1) == 32);
}

TEST_CASE("importers.xml_net_latency_is_the_plugins_reported_latency") {
  // NCCL's XML carries the latency the net plugin reports (<net latency=>; 75 µs from aws-ofi-nccl on p4d/p5):
  // the NIC's fabric keeps it as reported_latency_us; 0 (NCCL's IB and socket transports) states nothing.
  auto text = [](const std::string& latency) {
    return R"(<system version="1"><cpu numaid="0" vendor="GenuineIntel" arch="x86_64">
  <pci busid="0000:0a:00.0" class="0x030200" vendor="0x10de" link_speed="16.0 GT/s PCIe" link_width="16">
   <gpu dev="0" sm="80"/></pci>
  <nic><net name="rdmap16s27" speed="100000" )" +
           latency + R"(/></nic></cpu></system>)";
  };
  const Topology efa = import_nccl_xml(text(R"(latency="75")"), "t.xml");
  CHECK(efa.nodes()[static_cast<std::size_t>(efa.nodes_of_kind(NodeKind::kNic)[0])].net.reported_latency_us == 75);
  const Topology ib = import_nccl_xml(text(R"(latency="0")"), "t.xml");
  CHECK(!ib.nodes()[static_cast<std::size_t>(ib.nodes_of_kind(NodeKind::kNic)[0])].net.stated());
  CHECK(xml_error(text(R"(latency="fast")")).find("latency=\"fast\": expected a number") != std::string::npos);
  CHECK(xml_error(text(R"(latency="-1")")).find("latency=\"-1\"") != std::string::npos);
}
