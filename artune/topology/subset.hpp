#pragma once
// GPU subsets of a topology: `TOPO[0,1,2,4,5]` keeps the named GPUs of any topology source (built-in,
// generator, file) with every device that connects them, as a job sees a machine it was given part of.
//
// What a subset keeps and how it renumbers:
//  - the named GPUs, renumbered 0..k−1 per machine in the order listed (as CUDA_VISIBLE_DEVICES renumbers
//    CUDA's ordinals); their ids (gpu4, m1/gpu3) stay the hardware's names;
//  - every other device of a machine that keeps a GPU (CPU sockets, PCIe switches, NVSwitches, NICs) and
//    every link between kept devices, so routes are chosen the way NCCL chooses them on the real machine:
//    NVLink, then PCIe through the same switches and sockets (a route never relays through a GPU, so the
//    GPUs left out carry nothing);
//  - machines without a named GPU are left out with their hardware; the network switch and the network
//    stay when two or more machines remain.

#include <string>
#include <string_view>
#include <vector>

#include "artune/topology/topology.hpp"

namespace artune {

/// Splits "NAME[LIST]" into its base and its list; nullopt when `spec` does not end in a bracketed list.
struct SubsetSpec {
  std::string base;  ///< the topology the subset is cut from ("dgx1-v100", "4xdgx-h100", a file)
  std::string list;  ///< what is between the brackets ("0,1,2,4,5")
};
/// The base and list of a subset spec, or an empty base when `spec` has no trailing "[…]".
SubsetSpec split_subset_spec(std::string_view spec);

/// The GPU nodes a selection names, in the order listed: items are global GPU indices (`5`), ranges of them
/// (`0-3`) or GPU ids (`gpu5`, `m1/gpu3`), comma-separated. InvalidInput quoting `where` for an empty list or
/// item, an index or id the topology lacks, a node that is not a GPU, and a GPU named twice.
std::vector<int> parse_gpu_selection(const Topology& topo, std::string_view list, std::string_view where);

/// The subset of `topo` that keeps `gpus` (GPU node indices, in rank order) as described above, named `name`.
/// InvalidInput for an empty selection, a node that is not a GPU or one given twice.
Topology subset_topology(const Topology& topo, const std::vector<int>& gpus, std::string name);

/// The GPUs as a subset spec's list: "0,1,2,4,5" (global indices; ids of machines that number GPUs otherwise).
std::string gpu_list_text(const Topology& topo, const std::vector<int>& gpus);

}  // namespace artune
