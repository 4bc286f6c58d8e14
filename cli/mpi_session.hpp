// MPI plumbing shared by the commands that run under mpirun (`topo discover`,
// `autotune`): the launcher's world size, one MPI session per command, string
// gather/broadcast, and the cluster discovery where every rank discovers its
// machine and rank 0 groups the ranks into machines by host name.

#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "artune_config.hpp"
#include "artune/executor/mpi/launcher.hpp"
#if ARTUNE_HAVE_MPI
#include "artune/executor/mpi/mpi_init.hpp"
#endif
#include "artune/topology/discovery.hpp"
#include "artune/topology/topology.hpp"

namespace artune::cli {

// The launcher's world size and rank (Open MPI, PMI/Hydra, PMIx, MVAPICH; nullopt outside a launcher)
// come from executor/mpi/launcher.hpp, shared with the backends.
using artune::launcher_rank;
using artune::launcher_world_size;

/// One machine of a cluster: its host's first rank speaks for it, and every rank on that host is listed.
struct ClusterMachine {
  DiscoveryResult discovery;  ///< from the host's first rank
  std::vector<int> ranks;     ///< MPI ranks on this host, ascending
};

/// The machines' topologies as one: a single machine as is, several joined over `net` under `name`.
Topology join_cluster(const std::vector<ClusterMachine>& machines, const NetworkSpec& net, const std::string& name);

#if ARTUNE_HAVE_MPI
/// MPI for one command unless someone already initialised it; finalised on every exit path if this session did.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  /// Rank in MPI_COMM_WORLD.
  int rank() const { return rank_; }
  /// Size of MPI_COMM_WORLD.
  int size() const { return size_; }

 private:
  bool owned_ = false;
  int rank_ = 0;
  int size_ = 1;
};

/// Throws BackendFailure naming `call` unless `rc` is MPI_SUCCESS (executor/mpi/mpi_init.hpp).
inline void check_mpi(int rc, const char* call) { artune::check_mpi(rc, call); }

/// Every rank's string, in rank order, on rank 0 (empty elsewhere). Collective.
std::vector<std::string> gather_strings(const MpiSession& mpi, const std::string& mine);

/// Rank 0's string on every rank. Collective.
std::string broadcast_string(std::string text);

/// Every rank runs `discover` (its Error is carried, not thrown, so no rank leaves the collective early);
/// rank 0 gets the machines in order of their first rank, grouped by DiscoveryResult::hostname, and throws
/// InvalidInput "rank K: ..." for the first rank that failed. Other ranks get an empty list, or their own
/// error as InvalidInput. Collective.
std::vector<ClusterMachine> gather_machines(const MpiSession& mpi, const std::function<DiscoveryResult()>& discover);
#endif

}  // namespace artune::cli
