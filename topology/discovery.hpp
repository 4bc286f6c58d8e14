#pragma once
// Live discovery of the local machine: hwloc for the PCIe tree and NUMA,
// the CUDA runtime for peer access, NVML (dlopen) for NVLink counts.

#include <string>
#include <vector>

#include "topology/topology.hpp"

namespace artune {

/// What discovery found on this machine.
struct DiscoveryResult {
  Topology topology;                 ///< CPUs, PCIe switches, NICs and GPUs that were found
  int gpu_count = 0;                 ///< GPUs found (0 on a machine without GPUs)
  std::string hostname;              ///< this machine's host name
  std::vector<std::string> notes;    ///< human-readable lines: what each source found or why it was skipped
};

/// Discovers the local machine; never throws for missing GPUs (gpu_count = 0 says so).
DiscoveryResult discover_local_machine();

}  // namespace artune
