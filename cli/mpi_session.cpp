#include "cli/mpi_session.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"

#if ARTUNE_HAVE_MPI
#include "artune/executor/mpi/mpi_init.hpp"
#endif

namespace artune::cli {
namespace {

#if ARTUNE_HAVE_MPI
// Between ranks: the host's facts and its topology in the model form the loaders read.
nlohmann::json to_wire(const DiscoveryResult& r) {
  return {{"hostname", r.hostname},
          {"gpu_count", r.gpu_count},
          {"notes", r.notes},
          {"topology", topology_model_to_json(r.topology)}};
}

DiscoveryResult from_wire(const nlohmann::json& j, std::string_view source) {
  DiscoveryResult r;
  r.hostname = j.at("hostname").get<std::string>();
  r.gpu_count = j.at("gpu_count").get<int>();
  r.notes = j.at("notes").get<std::vector<std::string>>();
  r.topology = topology_from_json(j.at("topology"), source);
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
    if (fresh) machines.push_back({from_wire(doc, fmt::format("rank {}", k)), {}});
    machines[it->second].ranks.push_back(static_cast<int>(k));
  }
  return machines;
}
#endif

}  // namespace artune::cli
