#pragma once
// Importers of foreign topology descriptions into the native model.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "artune/topology/topology.hpp"

namespace artune {

/// What `nvidia-smi topo -m` does not print about a GPU generation: its architecture, the rate of one NVLink lane,
/// how many lanes one GPU has, and its PCIe generation at x16 as NCCL counts it (width·speed/80). Sources:
/// configs/HARDWARE.md (NVIDIA P100/V100/A100/H100/H200 whitepapers and datasheets; B200: the Blackwell
/// technical brief, NVLink 5 at 1.8 TB/s over 18 links both ways = 50 GB/s per lane and direction).
struct GpuGeneration {
  std::string_view name;   ///< --gpu's value: "p100", "v100", "a100", "h100", "h200", "b200"
  std::string_view arch;   ///< "sm60" …
  double lane_gbps;        ///< per NVLink lane and direction
  int lanes_per_gpu;       ///< NVLink lanes of one GPU
  double pcie_gbps;        ///< x16 at the GPU's PCIe generation
};
/// Every generation `--gpu` names, oldest first.
std::span<const GpuGeneration> gpu_generations();
/// The generation called `name`, or nullptr.
const GpuGeneration* find_gpu_generation(std::string_view name);
/// The most NVLink lanes any GPU generation has (H100, H200, B200: 18).
int max_nvlink_lanes_per_gpu();

/// Rates and facts the nvidia-smi importer assigns: the text names link classes, not speeds.
struct NvidiaSmiImportOptions {
  double nvlink_lane_gbps = 25.0;  ///< per NVLink lane and direction (NVLink 2, as on DGX-1 V100)
  double pcie_gbps = 12.0;         ///< every PCIe link (Gen3 x16 as NCCL counts it)
  double smp_gbps = 6.0;           ///< socket-to-socket link (QPI, NCCL's P2P figure)
  std::string gpu_arch;            ///< every GPU's architecture ("sm90"; "" = not known)
  std::string cpu_arch;            ///< every CPU socket's `arch` ("x86_64-amd"; "" = not known): the text names none
  /// NVLink lanes one GPU has (0 = not known: the most of any generation). GPUs whose NV# cells add up to more
  /// lanes than that cannot be wired to each other directly: they sit on an NVSwitch (see import_nvidia_smi).
  int lanes_per_gpu = 0;
};

/// Parses `nvidia-smi topo -m` output (tabs or spaces, SOC/SYS, NV#, NIC columns and legend,
/// CPU/NUMA affinity columns); `source` names the file in error messages. NV# cells become direct NVLinks of #
/// lanes, except where they cannot be: a group of three or more GPUs with the same NV# in every pair, whose lanes
/// to the others ((group − 1)·#) exceed what one GPU has, is an NVSwitch machine (DGX-2 NV6, DGX A100 NV12, DGX/HGX
/// H100 and H200 NV18, H800 NV8): the group gets one NVSwitch with # lanes from each GPU, as the built-ins model
/// it. A 4-GPU HGX H100 board (NV6 in every pair: 3·6 = 18 lanes) stays directly wired.
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
