// The full form of the topology JSON: every device and link spelled out (configs/README.md).

#include "artune/topology/io/detail.hpp"

namespace artune::io_detail {

// ---- full form -------------------------------------------------------------

Loaded parse_full(const json& doc, const Reader& reader, const std::string& path, const std::string& default_name) {
  reader.allow_keys(doc, path, {"name", "description", "devices", "links", "network", "nic_bandwidth"}, true);
  Loaded out;
  Topology& topo = out.topo;
  topo.set_name(Reader::find(doc, "name") ? reader.name(doc["name"], field(path, "name")) : default_name);
  if (const json* d = Reader::find(doc, "description"))
    topo.set_description(reader.string(*d, field(path, "description")));
  if (const json* v = Reader::find(doc, "nic_bandwidth"))
    out.nic_bandwidth = reader.positive(*v, field(path, "nic_bandwidth"));

  const std::string devices_path = field(path, "devices");
  const json& devices = reader.required(doc, path, "devices");
  reader.expect_array(devices, devices_path);
  if (devices.empty()) reader.fail(devices_path, "must list at least one device");

  std::unordered_map<std::string, std::size_t> index_of;
  std::map<std::tuple<int, NodeKind, int>, std::size_t> local_owner;
  std::vector<Node> nodes;
  nodes.reserve(devices.size());
  int max_machine = -1;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string p = item(devices_path, i);
    const json& d = devices[i];
    reader.expect_object(d, p);
    reader.allow_keys(d, p, {"id", "kind", "machine", "local", "arch", "bus_id", "fabric"});
    Node node;
    node.id = reader.name(reader.required(d, p, "id"), field(p, "id"));
    const std::string kind_text = reader.string(reader.required(d, p, "kind"), field(p, "kind"));
    const auto kind = parse_node_kind(kind_text);
    if (!kind) {
      reader.fail(field(p, "kind"),
                  fmt::format("unknown kind {} (expected gpu, cpu, pcie_switch, nvswitch, nic or net_switch)",
                              quote_text(kind_text)));
    }
    node.kind = *kind;
    node.machine = node.kind == NodeKind::kNetSwitch ? -1 : 0;
    if (const json* m = Reader::find(d, "machine")) {
      node.machine = static_cast<int>(reader.integer(*m, field(p, "machine"), -1, kMaxMachines - 1));
      if (node.kind == NodeKind::kNetSwitch && node.machine != -1) {
        reader.fail(field(p, "machine"), "a net_switch belongs to no machine (omit the field or give -1)");
      }
      if (node.kind != NodeKind::kNetSwitch && node.machine < 0) {
        reader.fail(field(p, "machine"), "must be >= 0 (only a net_switch sits outside machines)");
      }
    }
    if (const json* l = Reader::find(d, "local")) {
      node.local_index = static_cast<int>(reader.integer(*l, field(p, "local"), 0, 1 << 20));
      const auto [it, fresh] = local_owner.emplace(std::tuple(node.machine, node.kind, node.local_index), i);
      if (!fresh) {
        reader.fail(field(p, "local"), fmt::format("local index {} is already used by {} ({})", node.local_index,
                                                   quote_text(nodes[it->second].id), item(devices_path, it->second)));
      }
    }
    if (const json* a = Reader::find(d, "arch")) {
      node.arch = reader.string(*a, field(p, "arch"));
      if (node.kind == NodeKind::kCpu && !parse_cpu_arch(node.arch)) {
        reader.fail(field(p, "arch"),
                    fmt::format("unknown CPU architecture {} (expected {})", quote_text(node.arch), cpu_arch_choices()));
      }
    }
    if (const json* b = Reader::find(d, "bus_id")) node.bus_id = reader.string(*b, field(p, "bus_id"));
    if (const json* f = Reader::find(d, "fabric")) {
      if (node.kind != NodeKind::kNic) reader.fail(field(p, "fabric"), "only a nic has a fabric");
      node.net = parse_fabric(*f, reader, field(p, "fabric"));
    }
    const auto [it, fresh] = index_of.emplace(node.id, i);
    if (!fresh) {
      reader.fail(field(p, "id"), fmt::format("duplicate id {} (first given at {})", quote_text(node.id),
                                              item(devices_path, it->second)));
    }
    max_machine = std::max(max_machine, node.machine);
    nodes.push_back(std::move(node));
  }

  // Machines must be numbered 0..M-1, and each machine's GPUs 0..G-1:
  // a GPU's global index is machine·G + local.
  std::vector<int> gpus_in_machine(max_machine + 1, 0);
  std::vector<bool> machine_seen(max_machine + 1, false);
  std::vector<std::set<int>> given_gpu_locals(max_machine + 1);
  for (const Node& node : nodes) {
    if (node.machine < 0) continue;
    machine_seen[node.machine] = true;
    if (node.kind == NodeKind::kGpu) {
      ++gpus_in_machine[node.machine];
      if (node.local_index >= 0) given_gpu_locals[node.machine].insert(node.local_index);
    }
  }
  // The generators' limits hold for full-form files too: the GPU-pair matrices of routes and candidates grow
  // with the square of these counts.
  long long total_gpus = 0;
  for (int m = 0; m <= max_machine; ++m) {
    total_gpus += gpus_in_machine[m];
    if (gpus_in_machine[m] > kMaxGpusPerMachine) {
      reader.fail(devices_path, fmt::format("machine {} has {} GPUs, more than the supported {} per machine", m,
                                            gpus_in_machine[m], kMaxGpusPerMachine));
    }
  }
  if (total_gpus > kMaxTotalGpus) {
    reader.fail(devices_path, fmt::format("{} GPUs in all is more than the supported {}", total_gpus, kMaxTotalGpus));
  }
  for (int m = 0; m <= max_machine; ++m) {
    if (!machine_seen[m]) {
      reader.fail(devices_path,
                  fmt::format("no device belongs to machine {} (machines must be numbered 0..{} without gaps)", m,
                              max_machine));
    }
    // Devices without "local" take the indices after the largest given one,
    // so the final set has no gap exactly when the given ones are 0..k-1.
    const auto& given = given_gpu_locals[m];
    if (!given.empty() && static_cast<int>(given.size()) != *given.rbegin() + 1) {
      int missing = 0;
      while (given.count(missing) != 0) ++missing;
      reader.fail(devices_path,
                  fmt::format("no GPU of machine {} has local index {} (GPU local indices must run 0..{})", m, missing,
                              gpus_in_machine[m] - 1));
    }
  }

  // The network's fabric is every NIC's that states none of its own.
  std::optional<NetworkSpec> network;
  if (const json* n = Reader::find(doc, "network"))
    network = parse_network(*n, reader, field(path, "network"), out.nic_bandwidth);
  for (Node& node : nodes) {
    if (network && node.kind == NodeKind::kNic && !node.net.stated()) node.net = network->fabric;
    topo.add_node(std::move(node));
  }

  const std::string links_path = field(path, "links");
  const json& links = reader.required(doc, path, "links");
  reader.expect_array(links, links_path);
  // (src, dst, kind) → the links[] entry that gave it.
  std::map<std::tuple<int, int, LinkKind>, std::size_t> given;
  std::vector<std::tuple<int, int, LinkKind, std::size_t>> directed;
  std::vector<std::pair<int, int>> edges;
  const auto& all = topo.nodes();
  for (std::size_t j = 0; j < links.size(); ++j) {
    const std::string p = item(links_path, j);
    const json& l = links[j];
    reader.expect_object(l, p);
    reader.allow_keys(l, p, {"a", "b", "kind", "bandwidth", "latency", "lanes", "directed"});
    int ends[2] = {-1, -1};
    for (int e = 0; e < 2; ++e) {
      const char* key = e == 0 ? "a" : "b";
      const std::string id = reader.string(reader.required(l, p, key), field(p, key));
      ends[e] = topo.find_node(id);
      if (ends[e] < 0) reader.fail(field(p, key), fmt::format("unknown device {}", quote_text(id)));
    }
    const int a = ends[0];
    const int b = ends[1];
    const std::string kind_text = reader.string(reader.required(l, p, "kind"), field(p, "kind"));
    const auto kind = parse_link_kind(kind_text);
    if (!kind) {
      reader.fail(field(p, "kind"),
                  fmt::format("unknown kind {} (expected nvlink, pcie, smp or network)", quote_text(kind_text)));
    }
    if (*kind == LinkKind::kLoopback) reader.fail(field(p, "kind"), "loopback links are implicit and cannot be given");
    if (a == b) reader.fail(field(p, "b"), fmt::format("a device cannot link to itself ({})", quote_text(all[a].id)));
    for (int end : {a, b}) {
      if (!endpoint_allowed(*kind, all[end].kind)) {
        reader.fail(p, fmt::format("a {} link cannot attach to a {} ({})", to_string(*kind), to_string(all[end].kind),
                                   quote_text(all[end].id)));
      }
    }
    if (all[a].machine >= 0 && all[b].machine >= 0 && all[a].machine != all[b].machine && *kind != LinkKind::kNetwork) {
      reader.fail(
          p,
          fmt::format("a {} link cannot join machine {} ({}) and machine {} ({}); only network links cross machines",
                      to_string(*kind), all[a].machine, quote_text(all[a].id), all[b].machine, quote_text(all[b].id)));
    }
    const double bandwidth = reader.positive(reader.required(l, p, "bandwidth"), field(p, "bandwidth"));
    double latency = default_latency(*kind);
    if (const json* v = Reader::find(l, "latency")) latency = reader.non_negative(*v, field(p, "latency"));
    int lanes = 1;
    if (const json* v = Reader::find(l, "lanes"))
      lanes = static_cast<int>(reader.integer(*v, field(p, "lanes"), 1, kMaxLanes));
    bool is_directed = false;
    if (const json* v = Reader::find(l, "directed")) is_directed = reader.boolean(*v, field(p, "directed"));

    // Two entries for the same direction and kind contradict each other (or
    // double-count); bonded links are one entry with "lanes".
    const auto claim = [&](int src, int dst) {
      const auto [it, fresh] = given.emplace(std::tuple(src, dst, *kind), j);
      if (!fresh) {
        reader.fail(
            p, fmt::format(
                   "duplicate {} link between {} and {} (already given by {}); give one link with \"lanes\" instead",
                   to_string(*kind), quote_text(all[a].id), quote_text(all[b].id), item(links_path, it->second)));
      }
    };
    claim(a, b);
    if (is_directed) {
      topo.add_link({a, b, *kind, bandwidth, latency, lanes});
      directed.emplace_back(a, b, *kind, j);
    } else {
      claim(b, a);
      topo.add_duplex_link(a, b, *kind, bandwidth, latency, lanes);
    }
    edges.emplace_back(a, b);
  }
  // Every physical link is full duplex: a directed entry needs its reverse
  // (directed entries exist for asymmetric bandwidths or latencies).
  for (const auto& [a, b, kind, j] : directed) {
    if (given.count(std::tuple(b, a, kind)) == 0) {
      reader.fail(
          item(links_path, j),
          fmt::format("directed {} link {} -> {} has no reverse link (omit \"directed\" for a full-duplex link)",
                      to_string(kind), quote_text(all[a].id), quote_text(all[b].id)));
    }
  }
  check_connected(topo, edges, reader, links_path);
  if (network) topo.set_network(*network);
  finalize_checked(topo, reader, devices_path);
  return out;
}

}  // namespace artune::io_detail
