#pragma once
// Parameters of the cost model, with documented defaults, overridable from a
// JSON calibration overlay.
//
// How the simulator uses them (all times in µs, bandwidths in GB/s = 1e9 B/s):
//  - a transfer (copy/reduce between two devices) waits
//      op_overhead_us + route latency (sum of the topology's link latencies)
//      + Σ link[kind].alpha_us over the distinct link kinds its route crosses
//    and then moves its bytes as a flow over the route's directed links, each
//    of capacity bandwidth · link[kind].efficiency, shared max-min fairly with
//    concurrent flows (and never faster than transfer_cap_gbps when set);
//  - a reduce then spends bytes / reduce_gbps[kind of the destination device];
//  - a local copy or scale costs op_overhead_us + bytes / memory_gbps[kind],
//    a local reduce op_overhead_us + bytes / reduce_gbps[kind];
//  - a group all-reduce over GPUs on the GPU profiles (nccl, cuda) runs as NCCL
//    runs it (nccl_model.hpp: channels, algorithm × protocol, NCCL's latency
//    tables; link efficiency scales its links, link-kind α beyond the
//    profile's default shifts NCCL's per-step latency of that class);
//  - other group ops (host profiles, broadcast/reduce in hybrids) run as the
//    library's ring over the group's best ring order: group_base_latency_us
//    once, then per ring step group_hop_latency_us + the step's route latency
//    and link-kind α, plus the chunk's flow time.
//
// Host backends (cpu, mpi) run every op on a host thread; `host` (see
// HostModel) describes the machine those threads share. With it off (all 0,
// the GPU profiles) nothing above changes.

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "artune/core/nccl_release.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// Per link kind: extra latency and the fraction of nominal bandwidth achieved.
struct LinkClassCost {
  double alpha_us = 0;      ///< added once per transfer (or ring step) whose route crosses this kind of link
  double efficiency = 1.0;  ///< achieved / nominal bandwidth, in (0, 1]
  friend bool operator==(const LinkClassCost&, const LinkClassCost&) = default;
};

/// The host that runs a host backend's threads: what one op per thread at a time cannot express.
/// Every field at 0 (false) leaves that part out.
///
///  - run_overhead_us: once per run, before any op starts (waking the worker threads and collecting
///    their completion).
///  - serial_devices: one thread per plan device runs the ops it executes (copies and reduces on their
///    destination, scales, its part of group ops) one at a time in plan order, as the cpu backend does.
///  - cores, cache_gbps, dram_gbps ("host resources"; on when any is > 0): every op becomes one flow of
///    its bytes at its one-thread rate — a transfer at transfer_cap_gbps (memory_gbps of the destination
///    when there is no cap), a reducing transfer at reduce_gbps of the destination (the reduce kernel reads
///    the source where it lies: one pass, no separate copy), local copies and scales at memory_gbps, local
///    reduces at reduce_gbps, group chunks at the cap. It shares, max-min fairly in shares of a core (as a
///    scheduler time-slices threads), the network links of its route (links inside a machine join the
///    GPUs the host threads stand in for; host memory carries those bytes) and the host resources:
///      cores: capacity `cores`, an op running at its one-thread rate occupying one core;
///      memory: for a plan whose working set W (Σ buffer bytes over its devices) fits cache_bytes C,
///      cache_gbps; above, the part C/W of the working set the cache still holds moves at cache_gbps
///      and the rest at dram_gbps: 1/rate = (C/W)/cache_gbps + (1 − C/W)/dram_gbps (a rate of 0 = no
///      limit for its part). Streaming threads do not lose the whole cache at once when W passes C:
///      the host probe of `artune calibrate` falls off as this blend, not as a step.
struct HostModel {
  double run_overhead_us = 0;   ///< once per run, before the first op
  bool serial_devices = false;  ///< each plan device's ops run one at a time, in plan order
  double cores = 0;             ///< cores shared by all host ops (0 = no limit)
  double cache_bytes = 0;       ///< working sets up to this size run at cache_gbps
  double cache_gbps = 0;        ///< aggregate rate of all host ops with a cache-resident working set (0 = no limit)
  double dram_gbps = 0;         ///< aggregate rate of the part of a working set the cache does not hold (0 = no limit)
  /// Whether ops share the host resources (cores or memory bandwidth).
  bool shares_resources() const { return cores > 0 || cache_gbps > 0 || dram_gbps > 0; }
  /// Aggregate memory rate (GB/s, 0 = no limit) for a plan whose buffers total `working_set_bytes`.
  double memory_gbps(double working_set_bytes) const {
    const double held = working_set_bytes <= cache_bytes ? 1.0 : cache_bytes / working_set_bytes;
    const double us_per_byte =
        (cache_gbps > 0 ? held / cache_gbps : 0.0) + (dram_gbps > 0 ? (1 - held) / dram_gbps : 0.0);
    return us_per_byte > 0 ? 1.0 / us_per_byte : 0.0;
  }
  friend bool operator==(const HostModel&, const HostModel&) = default;
};

/// How the program issues its NCCL calls, which the simulator charges as host time per call (nccl::launch_us):
/// one process (or thread) per GPU launches one kernel per call; one thread driving G GPUs (nccl-tests
/// `all_reduce_perf -g G`) launches G, one after another; calls replayed from a CUDA graph (nccl-tests `-G`)
/// launch none per call.
struct LaunchMode {
  int gpus_per_thread = 1;  ///< GPUs one thread issues each call to (≥ 1)
  bool cuda_graph = false;  ///< calls replayed from a CUDA graph
  friend bool operator==(const LaunchMode&, const LaunchMode&) = default;
};
/// Parses a --launch value: "process" (one process per GPU, the default), "thread:G" (one thread driving G GPUs,
/// as `all_reduce_perf -g G`), "thread" (one thread driving every GPU of a machine: G = `gpus_per_machine`),
/// "graph" (CUDA graph replay, as `all_reduce_perf -G`). InvalidInput naming `what` for anything else, and for
/// G < 1 or G > `gpus_per_machine` (when that is ≥ 1).
LaunchMode parse_launch_mode(std::string_view text, int gpus_per_machine, std::string_view what);
/// "process", "thread:G" or "graph".
std::string to_string(const LaunchMode& mode);

/// Executor profiles whose per-op overhead differs.
enum class BackendProfile { kCuda, kNccl, kCpu, kMpi };

/// A device's local throughput (bytes of src per s ·1e-9): reduce (dst ⊕= src) and copy/scale.
struct DeviceRates {
  double reduce_gbps = 0;
  double memory_gbps = 0;
  friend bool operator==(const DeviceRates&, const DeviceRates&) = default;
};

/// Every constant the simulator uses.
struct CostModel {
  std::map<LinkKind, LinkClassCost> link;  ///< per link kind (every kind present in defaults())
  std::map<NodeKind, double> reduce_gbps;  ///< reduce throughput of a device kind (bytes of src per s ·1e-9)
  std::map<NodeKind, double> memory_gbps;  ///< local copy/scale throughput
  /// GPUs of a known architecture ("sm90"): their own reduce and copy throughput, which replaces the GPU kind's
  /// (GPU profiles only; a calibration overlay's devices.gpu figures, measured on the machine, clear it).
  std::map<std::string, DeviceRates> gpu_arch;
  double op_overhead_us = 0;               ///< per op issued by the executing backend
  double group_base_latency_us = 0;        ///< library collective launch latency
  double group_hop_latency_us = 0;         ///< per ring step inside a library collective (NVLink hop)
  double transfer_cap_gbps = 0;            ///< per-transfer rate limit (a host thread's memcpy); 0 = none
  HostModel host;                          ///< the host under host backends (all 0 for GPU profiles)
  LaunchMode launch;                       ///< how the program issues its NCCL calls (NCCL group ops only)
  /// The NCCL release whose choice NCCL group ops follow (nccl_model.hpp Graph::release; --nccl-version).
  NcclRelease nccl_release = kModelledNcclRelease;
  BackendProfile profile = BackendProfile::kNccl;

  /// Defaults for a backend profile (documented in cost_model.cpp with sources).
  static CostModel defaults(BackendProfile profile = BackendProfile::kNccl);
  /// Applies a calibration overlay (only the fields present are replaced; "launch" is
  /// {"gpus_per_thread": G, "cuda_graph": bool}; "nccl_release" an NCCL release "2.21.5"; "nccl_intra", the class NCCL's rings
  /// use inside the fitted machine, is for the NCCL tuner plugin and checked only); InvalidInput names
  /// `source` and the JSON path ("calib.json: links.nvlink.efficiency: must be in (0, 1]").
  void apply_overlay(const nlohmann::json& overlay, std::string_view source);
  /// The whole model as JSON (same schema as an overlay):
  /// {"profile","op_overhead_us","group_base_latency_us","group_hop_latency_us","transfer_cap_gbps",
  ///  "links":{"nvlink":{"alpha_us","efficiency"},…},"devices":{"gpu":{"reduce_gbps","memory_gbps"},…},
  ///  "host":{"run_overhead_us","serial_devices","cores","cache_bytes","cache_gbps","dram_gbps"},
  ///  "launch":{"gpus_per_thread","cuda_graph"},"nccl_release":"2.28.9"}.
  nlohmann::json to_json() const;
  /// Reduce throughput of a device kind; InvalidInput when the model has none for it.
  double reduce_for(NodeKind kind) const;
  /// Copy throughput of a device kind; InvalidInput when the model has none for it.
  double memory_for(NodeKind kind) const;
  /// Reduce and copy throughput of one device: its architecture's (gpu_arch) where the model has one, else its
  /// kind's.
  double reduce_for(const Node& node) const;
  double memory_for(const Node& node) const;
  /// The cost of a link kind (defaults to α 0, efficiency 1 for kinds the map lacks).
  LinkClassCost link_for(LinkKind kind) const;
  friend bool operator==(const CostModel&, const CostModel&) = default;
};

/// Parses "cuda", "nccl", "cpu", "mpi"; InvalidInput naming `what`.
BackendProfile parse_backend_profile(std::string_view text, std::string_view what = "parameter backend");
/// Name of a profile.
std::string_view to_string(BackendProfile profile) noexcept;

}  // namespace artune
