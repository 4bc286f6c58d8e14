// The compact form of the topology JSON: one machine from GPU counts, NVLink lanes and a PCIe/CPU layout
// (configs/README.md).

#include "artune/topology/io/detail.hpp"

namespace artune::io_detail {

// ---- compact form ----------------------------------------------------------

// Reads a list of lists of indices in [0, limit) in which every index appears
// at most once; returns the lists and, per index, the list holding it (-1).
std::pair<std::vector<std::vector<int>>, std::vector<int>> parse_partition(const json& value, const Reader& reader,
                                                                           const std::string& path, int limit,
                                                                           std::string_view what) {
  reader.expect_array(value, path);
  std::vector<std::vector<int>> groups;
  std::vector<int> owner(limit, -1);
  for (std::size_t g = 0; g < value.size(); ++g) {
    const std::string gp = item(path, g);
    reader.expect_array(value[g], gp);
    groups.emplace_back();
    for (std::size_t k = 0; k < value[g].size(); ++k) {
      const std::string ip = item(gp, k);
      const int index = static_cast<int>(reader.integer(value[g][k], ip, 0, limit - 1));
      if (owner[index] >= 0)
        reader.fail(ip, fmt::format("{} {} is already listed in {}", what, index, item(path, owner[index])));
      owner[index] = static_cast<int>(g);
      groups.back().push_back(index);
    }
  }
  return {std::move(groups), std::move(owner)};
}

Loaded parse_compact(const json& doc, const Reader& reader, const std::string& path, const std::string& default_name) {
  reader.allow_keys(doc, path, {"name", "description", "compact"});
  Loaded out;
  Topology& topo = out.topo;
  topo.set_name(Reader::find(doc, "name") ? reader.name(doc["name"], field(path, "name")) : default_name);
  if (const json* d = Reader::find(doc, "description"))
    topo.set_description(reader.string(*d, field(path, "description")));

  const std::string cp = field(path, "compact");
  const json& c = doc["compact"];
  reader.expect_object(c, cp);
  reader.allow_keys(
      c, cp,
      {"gpus", "arch", "nvlink", "nvlink_lane_bandwidth", "nvswitch", "pcie_switches", "sockets", "pcie_bandwidth",
       "smp_bandwidth", "nics_per_switch", "nics_per_socket", "nic_ports", "nic_bandwidth", "latency", "cpu_arch"});
  const int gpus =
      static_cast<int>(reader.integer(reader.required(c, cp, "gpus"), field(cp, "gpus"), 1, kMaxGpusPerMachine));
  std::string arch;
  if (const json* a = Reader::find(c, "arch")) arch = reader.string(*a, field(cp, "arch"));
  std::string cpu_arch;
  if (const json* a = Reader::find(c, "cpu_arch")) {
    cpu_arch = reader.string(*a, field(cp, "cpu_arch"));
    if (!parse_cpu_arch(cpu_arch)) {
      reader.fail(field(cp, "cpu_arch"),
                  fmt::format("unknown CPU architecture {} (expected {})", quote_text(cpu_arch), cpu_arch_choices()));
    }
  }

  // Latencies: per kind, overridable.
  double lat_nvlink = kNvlinkLatencyUs, lat_pcie = kPcieLatencyUs, lat_smp = kSmpLatencyUs;
  if (const json* l = Reader::find(c, "latency")) {
    const std::string lp = field(cp, "latency");
    reader.expect_object(*l, lp);
    reader.allow_keys(*l, lp, {"nvlink", "pcie", "smp"});
    if (const json* v = Reader::find(*l, "nvlink")) lat_nvlink = reader.non_negative(*v, field(lp, "nvlink"));
    if (const json* v = Reader::find(*l, "pcie")) lat_pcie = reader.non_negative(*v, field(lp, "pcie"));
    if (const json* v = Reader::find(*l, "smp")) lat_smp = reader.non_negative(*v, field(lp, "smp"));
  }

  // NVLink: a symmetric matrix of bonded lane counts.
  std::vector<std::vector<int>> nvlink(gpus, std::vector<int>(gpus, 0));
  bool any_nvlink = false;
  if (const json* m = Reader::find(c, "nvlink")) {
    const std::string mp = field(cp, "nvlink");
    reader.expect_array(*m, mp);
    if (static_cast<int>(m->size()) != gpus) {
      reader.fail(mp, fmt::format("must have {} rows, one per GPU (got {})", gpus, m->size()));
    }
    for (int i = 0; i < gpus; ++i) {
      const std::string rp = item(mp, i);
      reader.expect_array((*m)[i], rp);
      if (static_cast<int>((*m)[i].size()) != gpus) {
        reader.fail(rp, fmt::format("must have {} entries, one per GPU (got {}); the matrix must be square", gpus,
                                    (*m)[i].size()));
      }
      for (int j = 0; j < gpus; ++j) {
        nvlink[i][j] = static_cast<int>(reader.integer((*m)[i][j], item(rp, j), 0, kMaxLanes));
      }
    }
    for (int i = 0; i < gpus; ++i) {
      if (nvlink[i][i] != 0) reader.fail(item(item(mp, i), i), "must be 0: a GPU has no NVLink to itself");
      for (int j = 0; j < i; ++j) {
        if (nvlink[i][j] != nvlink[j][i]) {
          reader.fail(item(item(mp, i), j), fmt::format("{} differs from {} = {}: the matrix must be symmetric",
                                                        nvlink[i][j], item(item(mp, j), i), nvlink[j][i]));
        }
        any_nvlink = any_nvlink || nvlink[i][j] > 0;
      }
    }
  }
  double lane_bandwidth = 0;
  if (const json* v = Reader::find(c, "nvlink_lane_bandwidth")) {
    lane_bandwidth = reader.positive(*v, field(cp, "nvlink_lane_bandwidth"));
  } else if (any_nvlink) {
    reader.fail(field(cp, "nvlink_lane_bandwidth"),
                "missing (required when nvlink lists links: GB/s per lane and direction)");
  }

  int switch_lanes = 0;
  double switch_lane_bandwidth = 0;
  if (const json* s = Reader::find(c, "nvswitch")) {
    const std::string sp = field(cp, "nvswitch");
    reader.expect_object(*s, sp);
    reader.allow_keys(*s, sp, {"lanes_per_gpu", "lane_bandwidth"});
    switch_lanes = static_cast<int>(
        reader.integer(reader.required(*s, sp, "lanes_per_gpu"), field(sp, "lanes_per_gpu"), 1, kMaxLanes));
    switch_lane_bandwidth = reader.positive(reader.required(*s, sp, "lane_bandwidth"), field(sp, "lane_bandwidth"));
  }

  // PCIe: GPUs under switches, switches (or GPUs when there are no switches)
  // under sockets.
  std::vector<std::vector<int>> switches;
  const json* switches_json = Reader::find(c, "pcie_switches");
  if (switches_json != nullptr) {
    const std::string sp = field(cp, "pcie_switches");
    auto [groups, owner] = parse_partition(*switches_json, reader, sp, gpus, "GPU");
    if (groups.empty())
      reader.fail(sp, "must list at least one switch (omit the field when GPUs sit directly under CPUs)");
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (groups[g].empty()) reader.fail(item(sp, g), "a switch must hold at least one GPU");
    }
    for (int i = 0; i < gpus; ++i) {
      if (owner[i] < 0) reader.fail(sp, fmt::format("GPU {} is under no switch (list every GPU exactly once)", i));
    }
    switches = std::move(groups);
  }
  const bool has_switches = !switches.empty();
  const int socket_items = has_switches ? static_cast<int>(switches.size()) : gpus;
  const std::string_view socket_item_name = has_switches ? "switch" : "GPU";
  std::vector<std::vector<int>> sockets;
  if (const json* s = Reader::find(c, "sockets")) {
    const std::string sp = field(cp, "sockets");
    auto [groups, owner] = parse_partition(*s, reader, sp, socket_items, socket_item_name);
    if (groups.empty()) reader.fail(sp, "must list at least one socket");
    for (int i = 0; i < socket_items; ++i) {
      if (owner[i] < 0)
        reader.fail(sp, fmt::format("{} {} is in no socket (list every {} exactly once)", socket_item_name, i,
                                    socket_item_name));
    }
    sockets = std::move(groups);
  } else {
    sockets.emplace_back(socket_items);
    std::iota(sockets.back().begin(), sockets.back().end(), 0);
  }

  double pcie_bandwidth = kDefaultPcieBandwidth;
  if (const json* v = Reader::find(c, "pcie_bandwidth"))
    pcie_bandwidth = reader.positive(*v, field(cp, "pcie_bandwidth"));
  double smp_bandwidth = kDefaultSmpBandwidth;
  if (const json* v = Reader::find(c, "smp_bandwidth")) smp_bandwidth = reader.positive(*v, field(cp, "smp_bandwidth"));
  int nics_per_switch = 0;
  if (const json* v = Reader::find(c, "nics_per_switch")) {
    nics_per_switch = static_cast<int>(reader.integer(*v, field(cp, "nics_per_switch"), 0, 64));
    if (!has_switches && nics_per_switch > 0)
      reader.fail(field(cp, "nics_per_switch"), "needs pcie_switches (use nics_per_socket)");
  }
  int nics_per_socket = 0;
  if (const json* v = Reader::find(c, "nics_per_socket"))
    nics_per_socket = static_cast<int>(reader.integer(*v, field(cp, "nics_per_socket"), 0, 64));
  if (const json* v = Reader::find(c, "nic_bandwidth"))
    out.nic_bandwidth = reader.positive(*v, field(cp, "nic_bandwidth"));
  // Ports per NIC card: consecutive NICs under one parent are the ports of one card, told apart as NCCL does
  // (PCI functions of one device: bus ids equal but for the last digit; NCCL 2.24+ fuses them into one NIC).
  int nic_ports = 1;
  if (const json* v = Reader::find(c, "nic_ports")) {
    nic_ports = static_cast<int>(reader.integer(*v, field(cp, "nic_ports"), 1, 8));
    for (const auto& [count, name] :
         {std::pair{nics_per_switch, "nics_per_switch"}, {nics_per_socket, "nics_per_socket"}}) {
      if (count % nic_ports != 0) {
        reader.fail(field(cp, "nic_ports"), fmt::format("{} does not divide {} ({})", nic_ports, name, count));
      }
    }
  }

  // Nodes: GPUs first (local index = position), then the merged NVSwitch,
  // CPU sockets, PCIe switches and NICs.
  for (int g = 0; g < gpus; ++g) topo.add_node({fmt::format("gpu{}", g), NodeKind::kGpu, 0, g, -1, arch, ""});
  const int nvswitch = switch_lanes > 0 ? topo.add_node({"nvswitch0", NodeKind::kNvSwitch, 0, 0, -1, "", ""}) : -1;
  std::vector<int> cpu(sockets.size());
  for (std::size_t s = 0; s < sockets.size(); ++s) {
    cpu[s] = topo.add_node({fmt::format("cpu{}", s), NodeKind::kCpu, 0, static_cast<int>(s), -1, cpu_arch, ""});
  }
  std::vector<int> pcisw(switches.size());
  for (std::size_t k = 0; k < switches.size(); ++k) {
    pcisw[k] = topo.add_node({fmt::format("pcisw{}", k), NodeKind::kPcieSwitch, 0, static_cast<int>(k), -1, "", ""});
  }
  int nic_count = 0;
  const auto add_nic = [&](int parent) {
    const std::string bus_id =
        nic_ports > 1 ? fmt::format("0000:{:02x}:00.{}", nic_count / nic_ports, nic_count % nic_ports) : "";
    const int nic = topo.add_node(
        {fmt::format("nic{}", nic_count), NodeKind::kNic, 0, nic_count, -1, fmt::format("mlx5_{}", nic_count), bus_id});
    ++nic_count;
    topo.add_duplex_link(nic, parent, LinkKind::kPcie, pcie_bandwidth, lat_pcie);
  };

  for (int i = 0; i < gpus; ++i) {
    for (int j = i + 1; j < gpus; ++j) {
      if (nvlink[i][j] > 0) {
        topo.add_duplex_link(i, j, LinkKind::kNvLink, nvlink[i][j] * lane_bandwidth, lat_nvlink, nvlink[i][j]);
      }
    }
  }
  if (nvswitch >= 0) {
    // One merged NVSwitch node, as NCCL models it: each GPU reaches it with
    // all its lanes, so a single route gets the GPU's whole NVLink bandwidth.
    for (int g = 0; g < gpus; ++g) {
      topo.add_duplex_link(g, nvswitch, LinkKind::kNvLink, switch_lanes * switch_lane_bandwidth, lat_nvlink,
                           switch_lanes);
    }
  }
  for (std::size_t s = 0; s < sockets.size(); ++s) {
    for (int member : sockets[s]) {
      if (has_switches) {
        for (int g : switches[member])
          topo.add_duplex_link(g, pcisw[member], LinkKind::kPcie, pcie_bandwidth, lat_pcie);
        topo.add_duplex_link(pcisw[member], cpu[s], LinkKind::kPcie, pcie_bandwidth, lat_pcie);
        for (int n = 0; n < nics_per_switch; ++n) add_nic(pcisw[member]);
      } else {
        topo.add_duplex_link(member, cpu[s], LinkKind::kPcie, pcie_bandwidth, lat_pcie);
      }
    }
    for (int n = 0; n < nics_per_socket; ++n) add_nic(cpu[s]);
  }
  for (std::size_t s = 0; s < cpu.size(); ++s) {
    for (std::size_t t = s + 1; t < cpu.size(); ++t) {
      topo.add_duplex_link(cpu[s], cpu[t], LinkKind::kSmp, smp_bandwidth, lat_smp);
    }
  }
  finalize_checked(topo, reader, cp);
  return out;
}

}  // namespace artune::io_detail
