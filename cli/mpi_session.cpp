#include "cli/mpi_session.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/topology/io.hpp"

#if ARTUNE_HAVE_MPI
#include "artune/executor/mpi/mpi_init.hpp"
#endif

namespace artune::cli {
namespace {

#if ARTUNE_HAVE_MPI
// Wire format between ranks: the exact nodes and links, nothing derived.
nlohmann::json to_wire(const DiscoveryResult& r) {
  nlohmann::json nodes = nlohmann::json::array(), links = nlohmann::json::array();
  for (const Node& n : r.topology.nodes())
    nodes.push_back({{"id", n.id},
                     {"kind", std::string(to_string(n.kind))},
                     {"local_index", n.local_index},
                     {"arch", n.arch},
                     {"bus_id", n.bus_id}});
  for (const Link& l : r.topology.links())
    links.push_back({{"src", l.src},
                     {"dst", l.dst},
                     {"kind", std::string(to_string(l.kind))},
                     {"bandwidth", l.bandwidth_gbps},
                     {"latency", l.latency_us},
                     {"lanes", l.lanes}});
  return {{"hostname", r.hostname},
          {"gpu_count", r.gpu_count},
          {"notes", r.notes},
          {"name", r.topology.name()},
          {"description", r.topology.description()},
          {"nodes", nodes},
          {"links", links}};
}

DiscoveryResult from_wire(const nlohmann::json& j) {
  DiscoveryResult r;
  r.hostname = j.at("hostname").get<std::string>();
  r.gpu_count = j.at("gpu_count").get<int>();
  r.notes = j.at("notes").get<std::vector<std::string>>();
  r.topology.set_name(j.at("name").get<std::string>());
  r.topology.set_description(j.at("description").get<std::string>());
  for (const auto& n : j.at("nodes")) {
    Node node;
    node.id = n.at("id").get<std::string>();
    node.kind = parse_node_kind(n.at("kind").get<std::string>()).value();
    node.local_index = n.at("local_index").get<int>();
    node.arch = n.at("arch").get<std::string>();
    node.bus_id = n.at("bus_id").get<std::string>();
    r.topology.add_node(node);
  }
  for (const auto& l : j.at("links")) {
    Link link;
    link.src = l.at("src").get<int>();
    link.dst = l.at("dst").get<int>();
    link.kind = parse_link_kind(l.at("kind").get<std::string>()).value();
    link.bandwidth_gbps = l.at("bandwidth").get<double>();
    link.latency_us = l.at("latency").get<double>();
    link.lanes = l.at("lanes").get<int>();
    r.topology.add_link(link);
  }
  r.topology.finalize();
  return r;
}
#endif

}  // namespace

Topology join_cluster(const std::vector<ClusterMachine>& machines, const NetworkSpec& net, const std::string& name) {
  if (machines.size() == 1) return machines.front().discovery.topology;
  std::vector<Topology> topologies;
  for (const auto& m : machines) topologies.push_back(m.discovery.topology);
  return join_machines(topologies, net, name);
}

#if ARTUNE_HAVE_MPI
MpiSession::MpiSession() {
  owned_ = ensure_mpi();
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

MpiSession::~MpiSession() {
  int done = 0;
  MPI_Finalized(&done);
  if (owned_ && !done) MPI_Finalize();
}

std::vector<std::string> gather_strings(const MpiSession& mpi, const std::string& mine) {
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(mpi.rank() == 0 ? mpi.size() : 0));
  check_mpi(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::vector<int> offsets;
  std::string all;
  if (mpi.rank() == 0) {
    int total = 0;
    for (int l : lengths) {
      offsets.push_back(total);
      total += l;
    }
    all.resize(static_cast<std::size_t>(total));
  }
  check_mpi(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                        MPI_COMM_WORLD),
            "MPI_Gatherv");
  std::vector<std::string> out;
  for (std::size_t k = 0; k < lengths.size(); ++k)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[k]), static_cast<std::size_t>(lengths[k])));
  return out;
}

std::string broadcast_string(std::string text) {
  int length = static_cast<int>(text.size());
  check_mpi(MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  text.resize(static_cast<std::size_t>(length));
  check_mpi(MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
  return text;
}

std::vector<ClusterMachine> gather_machines(const MpiSession& mpi, const std::function<DiscoveryResult()>& discover) {
  std::string mine, error;
  try {
    mine = to_wire(discover()).dump();
  } catch (const Error& e) {
    error = e.what();
  }
  if (!error.empty()) mine = nlohmann::json{{"error", error}}.dump();
  const std::vector<std::string> all = gather_strings(mpi, mine);
  if (mpi.rank() != 0) {
    if (!error.empty()) throw InvalidInput(error);
    return {};
  }
  // Machines in order of their first rank; a host's first rank speaks for it.
  std::vector<ClusterMachine> machines;
  std::map<std::string, std::size_t> machine_of;
  for (std::size_t k = 0; k < all.size(); ++k) {
    const auto doc = nlohmann::json::parse(all[k]);
    if (doc.contains("error")) throw InvalidInput(fmt::format("rank {}: {}", k, doc["error"].get<std::string>()));
    const std::string host = doc.at("hostname").get<std::string>();
    auto [it, fresh] = machine_of.emplace(host, machines.size());
    if (fresh) machines.push_back({from_wire(doc), {}});
    machines[it->second].ranks.push_back(static_cast<int>(k));
  }
  return machines;
}
#endif

}  // namespace artune::cli
