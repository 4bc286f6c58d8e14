#pragma once
// Importers of foreign topology descriptions into the native model.

#include <optional>
#include <string>
#include <string_view>

#include "artune/topology/topology.hpp"

namespace artune {

/// Rates the nvidia-smi importer assigns: the text names link classes, not speeds.
struct NvidiaSmiImportOptions {
  double nvlink_lane_gbps = 25.0;  ///< per NVLink lane and direction (NVLink 2, as on DGX-1 V100)
  double pcie_gbps = 12.0;         ///< every PCIe link (Gen3 x16 as NCCL counts it)
  double smp_gbps = 6.0;           ///< socket-to-socket link (QPI, NCCL's P2P figure)
};

/// Parses `nvidia-smi topo -m` output (tabs or spaces, SOC/SYS, NV#, NIC columns and legend,
/// CPU/NUMA affinity columns); `source` names the file in error messages.
Topology import_nvidia_smi(std::string_view text, std::string_view source);
/// Same, with explicit link rates.
Topology import_nvidia_smi(std::string_view text, std::string_view source, const NvidiaSmiImportOptions& options);
/// Parses an NCCL topology XML (NCCL_TOPO_FILE format); `source` names the file in error messages.
Topology import_nccl_xml(std::string_view text, std::string_view source);

/// PCIe transfer rate in GT/s from sysfs/NCCL text ("8 GT/s", "8.0 GT/s PCIe", "16"); nullopt unless Gen1–6.
std::optional<double> parse_pcie_link_speed(std::string_view text);
/// Usable PCIe bandwidth per direction the NCCL way: width·v/80 GB/s with v = 15/30/60/120/240/480 for
/// 2.5…64 GT/s (Gen3 x16 = 12, Gen4 x16 = 24, Gen5 x16 = 48); 0 for an unknown rate.
double pcie_bandwidth_gbps(double gts, int width);
/// Per-lane NVLink bandwidth (GB/s per direction) of a GPU generation: 20 for sm6x (NVLink 1), else 25.
double nvlink_lane_bandwidth_gbps(int sm);
/// Socket-to-socket bandwidth (GB/s) NCCL assumes for a CPU: Intel Skylake+ (family 6, model ≥ 0x55) 10,
/// older Intel 6, AMD 16, POWER 32, others 6.
double smp_bandwidth_gbps(std::string_view arch, std::string_view vendor, int family, int model);

}  // namespace artune
