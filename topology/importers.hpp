#pragma once
// Importers of foreign topology descriptions into the native model.

#include <string>
#include <string_view>

#include "topology/topology.hpp"

namespace artune {

/// Parses `nvidia-smi topo -m` output (tabs or spaces, SOC/SYS, NV#, NIC columns and legend,
/// CPU/NUMA affinity columns); `source` names the file in error messages.
Topology import_nvidia_smi(std::string_view text, std::string_view source);
/// Parses an NCCL topology XML (NCCL_TOPO_FILE format); `source` names the file in error messages.
Topology import_nccl_xml(std::string_view text, std::string_view source);

}  // namespace artune
