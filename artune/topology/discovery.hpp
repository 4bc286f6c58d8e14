#pragma once
// Live discovery of the local machine: hwloc for the PCIe tree and NUMA,
// the CUDA runtime for peer access, NVML (dlopen) for NVLink counts.

#include <string>
#include <vector>

#include "artune/topology/topology.hpp"

namespace artune {

/// A PCI device as discovery saw it (for the report; only GPUs and NICs become topology nodes).
struct DiscoveredPciDevice {
  std::string bus_id;      ///< "0000:06:00.0"
  unsigned vendor_id = 0;  ///< e.g. 0x10de
  unsigned device_id = 0;  ///< device id
  unsigned class_id = 0;   ///< class and subclass, e.g. 0x0302
  std::string kind;        ///< "gpu", "nic", "nvswitch", "storage", "display", "other"
  std::string name;        ///< OS device names (e.g. "mlx5_0 ib0") when known
};

/// What discovery found on this machine.
struct DiscoveryResult {
  Topology topology;                             ///< CPUs, PCIe switches, NICs and GPUs that were found
  int gpu_count = 0;                             ///< GPUs found (0 on a machine without GPUs)
  std::string hostname;                          ///< this machine's host name
  std::vector<std::string> notes;                ///< human-readable lines: what each source found or why it was skipped
  int packages = 0;                              ///< CPU packages (sockets); 0 when unknown
  int numa_nodes = 0;                            ///< NUMA nodes; 0 when unknown
  int cores = 0;                                 ///< physical cores; 0 when unknown
  int pus = 0;                                   ///< hardware threads (logical CPUs)
  std::vector<DiscoveredPciDevice> pci_devices;  ///< every PCI device hwloc reported (bridges excluded)
  std::vector<std::vector<int>> cuda_peer_access;  ///< CUDA's cudaDeviceCanAccessPeer per GPU pair (empty: unknown)
  std::vector<std::vector<int>> cuda_p2p_rank;     ///< cudaDevP2PAttrPerformanceRank per pair (empty: unknown)
};

/// Where discovery looks.
struct DiscoveryOptions {
  std::string
      hwloc_xml;  ///< read this hwloc XML export (lstopo --of xml) instead of the live machine; skips CUDA and NVML
  bool use_cuda = true;  ///< ask the CUDA runtime (dlopen) for GPUs, peer access and P2P ranks
  bool use_nvml = true;  ///< ask NVML (dlopen) for NVLink counts
};

/// Discovers the local machine; never throws for missing GPUs (gpu_count = 0 says so).
DiscoveryResult discover_local_machine();
/// Discovers with explicit sources; failures of a source become notes (InvalidInput only for an unreadable hwloc_xml).
DiscoveryResult discover_local_machine(const DiscoveryOptions& options);

}  // namespace artune
