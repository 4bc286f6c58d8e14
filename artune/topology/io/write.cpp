// Joining machines into a cluster (join_machines) and writing a topology as JSON.

#include "artune/topology/io/io.hpp"

#include "artune/topology/io/detail.hpp"

namespace artune {

using namespace io_detail;

Topology join_machines(const std::vector<Topology>& machines, const NetworkSpec& network, std::string name) {
  if (machines.empty()) throw InvalidInput("join_machines: no machines to join");
  if (!(network.nic_bandwidth_gbps > 0) || !std::isfinite(network.nic_bandwidth_gbps)) {
    throw InvalidInput("join_machines: network nic_bandwidth must be > 0");
  }
  if (!(network.latency_us >= 0) || !std::isfinite(network.latency_us))
    throw InvalidInput("join_machines: network latency must be >= 0");
  if (!(network.oversubscription >= 1) || !std::isfinite(network.oversubscription)) {
    throw InvalidInput("join_machines: network oversubscription must be >= 1");
  }
  Topology out;
  out.set_name(std::move(name));
  std::size_t node_total = 1;
  for (const Topology& m : machines) node_total += m.nodes().size();
  std::vector<int> nics;
  for (std::size_t k = 0; k < machines.size(); ++k) {
    const Topology& machine = machines[k];
    if (machine.machine_count() > 1 || !machine.nodes_of_kind(NodeKind::kNetSwitch).empty()) {
      throw InvalidInput(
          fmt::format("join_machines: machine {} ({}) is itself a cluster", k, quote_text(machine.name())));
    }
    const std::string prefix = fmt::format("m{}/", k);
    const int offset = static_cast<int>(out.nodes().size());
    bool has_nic = false;
    for (const Node& node : machine.nodes()) {
      Node copy = node;
      copy.id = prefix + node.id;
      copy.machine = static_cast<int>(k);
      copy.global_index = -1;
      if (copy.kind == NodeKind::kNic && !copy.net.stated()) copy.net = network.fabric;
      const int index = out.add_node(std::move(copy));
      if (node.kind == NodeKind::kNic) {
        nics.push_back(index);
        has_nic = true;
      }
    }
    if (!has_nic)
      throw InvalidInput(
          fmt::format("join_machines: machine {} ({}) has no NIC to join the network", k, quote_text(machine.name())));
    for (Link link : machine.links()) {
      link.src += offset;
      link.dst += offset;
      out.add_link(link);
    }
  }
  const int net_switch = out.add_node({"net_switch", NodeKind::kNetSwitch, -1, 0, -1, "", ""});
  const double uplink = network.nic_bandwidth_gbps / network.oversubscription;
  for (int nic : nics) out.add_duplex_link(nic, net_switch, LinkKind::kNetwork, uplink, network.latency_us);
  out.set_network(network);

  bool same = true;
  for (const Topology& m : machines) same = same && m.name() == machines.front().name();
  const std::string what = same ? fmt::format("{} x {}", machines.size(), machines.front().name())
                                : fmt::format("{} machines", machines.size());
  out.set_description(fmt::format(
      "{} joined by one network switch ({:g} GB/s per NIC{}, {:g} us per hop)", what, network.nic_bandwidth_gbps,
      network.oversubscription > 1 ? fmt::format(", oversubscribed {:g}:1", network.oversubscription) : "",
      network.latency_us));
  out.finalize();
  return out;
}

nlohmann::json topology_model_to_json(const Topology& topo) {
  json doc = json::object();
  doc["name"] = topo.name();
  if (!topo.description().empty()) doc["description"] = topo.description();
  const bool cluster = topo.machine_count() > 1;
  json devices = json::array();
  for (const Node& node : topo.nodes()) {
    json d = {{"id", node.id}, {"kind", std::string(to_string(node.kind))}};
    if (node.kind == NodeKind::kNetSwitch ? node.machine != -1 : (cluster || node.machine != 0))
      d["machine"] = node.machine;
    d["local"] = node.local_index;
    if (!node.arch.empty()) d["arch"] = node.arch;
    if (!node.bus_id.empty()) d["bus_id"] = node.bus_id;
    if (node.net.stated()) d["fabric"] = fabric_to_json(node.net);
    devices.push_back(std::move(d));
  }
  doc["devices"] = std::move(devices);

  // Pairs of opposite links with equal attributes print as one full-duplex
  // entry; anything else prints as directed entries.
  const auto& links = topo.links();
  const auto& nodes = topo.nodes();
  std::map<std::tuple<int, int, LinkKind>, std::vector<int>> by_ends;
  for (int i = 0; i < static_cast<int>(links.size()); ++i)
    by_ends[{links[i].src, links[i].dst, links[i].kind}].push_back(i);
  std::vector<bool> used(links.size(), false);
  json out_links = json::array();
  for (int i = 0; i < static_cast<int>(links.size()); ++i) {
    if (used[i]) continue;
    used[i] = true;
    const Link& l = links[i];
    bool duplex = false;
    const auto it = by_ends.find({l.dst, l.src, l.kind});
    if (it != by_ends.end()) {
      for (int j : it->second) {
        const Link& r = links[j];
        if (!used[j] && r.bandwidth_gbps == l.bandwidth_gbps && r.latency_us == l.latency_us && r.lanes == l.lanes) {
          used[j] = true;
          duplex = true;
          break;
        }
      }
    }
    json e = {{"a", nodes[l.src].id},
              {"b", nodes[l.dst].id},
              {"kind", std::string(to_string(l.kind))},
              {"bandwidth", l.bandwidth_gbps},
              {"latency", l.latency_us}};
    if (l.lanes != 1) e["lanes"] = l.lanes;
    if (!duplex) e["directed"] = true;
    out_links.push_back(std::move(e));
  }
  doc["links"] = std::move(out_links);
  if (const auto& net = topo.network()) {
    doc["network"] = {{"nic_bandwidth", net->nic_bandwidth_gbps},
                      {"latency", net->latency_us},
                      {"oversubscription", net->oversubscription}};
    if (net->fabric.stated()) doc["network"]["fabric"] = fabric_to_json(net->fabric);
  }
  return doc;
}

nlohmann::json topology_to_json(const Topology& topo) {
  json doc = topology_model_to_json(topo);
  doc["machine_count"] = topo.machine_count();
  doc["gpus_per_machine"] = topo.gpus_per_machine();
  json gpus = json::array();
  for (int g : topo.gpus()) gpus.push_back(topo.nodes()[g].id);
  doc["gpus"] = std::move(gpus);
  doc["peer_matrix"] = peer_matrix(topo);
  doc["nvlink_matrix"] = nvlink_matrix(topo);
  json paths = json::array();
  for (const auto& row : path_type_matrix(topo)) {
    json r = json::array();
    for (PathType t : row) r.push_back(std::string(to_string(t)));
    paths.push_back(std::move(r));
  }
  doc["path_matrix"] = std::move(paths);
  doc["bandwidth_matrix"] = bandwidth_matrix(topo);
  doc["fingerprint"] = topo.fingerprint();
  return doc;
}

}  // namespace artune
