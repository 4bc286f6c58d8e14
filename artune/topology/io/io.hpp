#pragma once
// Reading and writing topologies: the native JSON format (full and compact
// forms), built-in configs embedded in the binary, and generators.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/topology/topology.hpp"

namespace artune {

/// Resolves TOPO as the CLI takes it: a built-in name ("dgx1-v100"), a generator
/// ("uniform:8", "uniform:2x8", "4xdgx1-v100") or a JSON file path.
Topology load_topology(std::string_view spec);
/// Reads a JSON topology file; errors read "FILE: json.path: reason".
Topology load_topology_file(const std::string& path);
/// Builds a topology from parsed JSON (full or compact form); `source` prefixes error messages.
Topology topology_from_json(const nlohmann::json& doc, std::string_view source);
/// The whole model as JSON (full form), plus derived peer_matrix, nvlink_matrix, path and bandwidth matrices.
nlohmann::json topology_to_json(const Topology& topo);
/// The model alone (name, description, devices, links, network): what `topo import` writes and the loaders read.
nlohmann::json topology_model_to_json(const Topology& topo);
/// Names of the built-in configs, sorted.
std::vector<std::string> builtin_topology_names();
/// The JSON text of a built-in config; InvalidInput if unknown.
const std::string& builtin_topology_text(std::string_view name);
/// Joins machine topologies into one cluster (machine index = position; node ids get an "m<k>/" prefix):
/// a network switch node linked to every NIC (nic bandwidth / oversubscription, network latency).
Topology join_machines(const std::vector<Topology>& machines, const NetworkSpec& network, std::string name);
/// The default topology of the CLI ("dgx1-v100").
inline constexpr std::string_view kDefaultTopology = "dgx1-v100";

}  // namespace artune
