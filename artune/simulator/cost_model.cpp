#include "artune/simulator/cost_model.hpp"
#include "artune/simulator/nccl_tuning.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "artune/core/error.hpp"
#include "artune/core/json_reader.hpp"
#include "artune/topology/link_rates.hpp"

namespace artune {

namespace {

// NCCL's tuning tables (src/graph/tuning.cc, NCCL 2.x; configs/HARDWARE.md):
// Ring algorithm, Simple protocol — base latency 8.4 µs per collective, per-hop
// latency 3.4 µs over NVLink, 5.7 µs over PCIe (SYS paths count as PCIe),
// 14 µs over the network.
constexpr double kNcclRingSimpleBaseUs = 8.4;
constexpr double kNcclSimpleNvlinkHopUs = 3.4;
constexpr double kNcclSimplePcieHopUs = 5.7;
constexpr double kNcclSimpleNetHopUs = 14.0;

// NCCL's ring search assumes 20 GB/s usable per sm70/sm80 NVLink of 25 GB/s
// nominal (sm60 18 of 20, sm90 20.6 of 25): about 80% of the line rate (topology/link_rates.hpp, where the
// plans derived from the topology read it too).
constexpr double kNcclNvlinkEfficiency = kUsableNvlinkShare;
// Copy engines (cudaMemcpyPeerAsync, the cuda backend's copies): p2pBandwidthLatencyTest's unidirectional P2P
// writes on an HGX H100 reach 371-377 GB/s per GPU pair through NVSwitch, of 450 GB/s line rate: 0.83-0.84
// (NVIDIA/nccl#1264; bidirectional 783 of 900, 0.87). NCCL's SM copies reach less (~20 of 25 GB/s per link with
// 128-byte payloads, copy engines use 256: sjeaugey in NVIDIA/nccl-tests#149), which kNcclNvlinkEfficiency holds.
constexpr double kCopyEngineNvlinkEfficiency = 0.84;
// Network ports (InfiniBand): an assumption, ~90% of the port rate (e.g. ~11.3 of 12.5 GB/s EDR), not cited to a
// measurement; what checks it is the NCCL model's multi-machine validation rows (tests/simulator/data,
// regime large_multi, reports/nccl-validation/REPORT.md), whose held-out error the tuner's --min-gain uses.
constexpr double kNetworkEfficiency = kUsableNetworkShare;
// The shipped configs carry PCIe and QPI/UPI at NCCL's usable figures
// (12 GB/s Gen3 x16, 6/10 GB/s across sockets), so no further derating.
constexpr double kPcieEfficiency = 1.0;
constexpr double kSmpEfficiency = 1.0;
// The tuner plugin reads a calibration against these same figures (nccl_tuning.hpp, compiled in without this file).
static_assert(kNcclNvlinkEfficiency == nccl_tuning::kProfileEfficiency[nccl_tuning::kNvlink]);
static_assert(kPcieEfficiency == nccl_tuning::kProfileEfficiency[nccl_tuning::kPci]);
static_assert(kNetworkEfficiency == nccl_tuning::kProfileEfficiency[nccl_tuning::kNet]);
static_assert(nccl_tuning::kProfileAlphaUs[nccl_tuning::kNvlink] == 0.0);
static_assert(kNcclSimplePcieHopUs - kNcclSimpleNvlinkHopUs == nccl_tuning::kProfileAlphaUs[nccl_tuning::kPci]);
static_assert(kNcclSimpleNetHopUs - kNcclSimplePcieHopUs == nccl_tuning::kProfileAlphaUs[nccl_tuning::kNet]);

// GPU reduce kernels are memory bound: dst ⊕= src reads two bytes and writes
// one per byte of src, so ~1/3 of HBM bandwidth (V100 900 GB/s → 300). A copy
// reads and writes: ~1/2 (→ 450, ~400 achieved). These are the GPU kind's
// rates, for GPUs of no known architecture (generators, hand-written files).
constexpr double kGpuReduceGbps = 300.0;
constexpr double kGpuMemoryGbps = 400.0;
// Per architecture (configs/HARDWARE.md "GPU memory"): the HBM bandwidth of the
// generation's datasheet times the fraction a reduce and a copy reach. Measured
// on one H200 (reports/gpu/NVIDIA_H200/run1/bench_kernels.txt, 1 GiB): reduce
// 3.72 TB/s counting 3 bytes per byte of src, copy (cudaMemcpy D2D) 3.87 TB/s
// counting 2, against 4.8 TB/s: 77% and 81%. Hopper and later use those
// fractions; sm60/sm70/sm80 keep the V100 figures' fractions (300 of 900/3:
// 100%, 400 of 900/2: 89%), which earlier validation rows were run with.
struct ArchRates {
  const char* arch;
  double hbm_gbps;           // datasheet memory bandwidth
  double reduce_fraction;    // of hbm_gbps / 3
  double copy_fraction;      // of hbm_gbps / 2
};
constexpr double kV100ReduceFraction = kGpuReduceGbps / (900.0 / 3);
constexpr double kV100CopyFraction = kGpuMemoryGbps / (900.0 / 2);
constexpr double kH200ReduceFraction = 3720.0 / 4800.0;
constexpr double kH200CopyFraction = 3870.0 / 4800.0;
constexpr ArchRates kArchRates[] = {
    {"sm60", 732.0, kV100ReduceFraction, kV100CopyFraction},    // P100 SXM2: 732 GB/s HBM2
    {"sm70", 900.0, kV100ReduceFraction, kV100CopyFraction},    // V100 SXM2: 900 GB/s HBM2
    {"sm80", 1555.0, kV100ReduceFraction, kV100CopyFraction},   // A100 40GB (DGX A100): 1555 GB/s HBM2
    {"sm90", 3350.0, kH200ReduceFraction, kH200CopyFraction},   // H100 SXM5 (DGX H100): 3.35 TB/s HBM3
    {"sm100", 8000.0, kH200ReduceFraction, kH200CopyFraction},  // B200: 8 TB/s HBM3e
};
// Host sockets when a GPU plan gathers on a CPU (TF's pscpu: multithreaded
// Eigen add over DDR4 at ~60 GB/s per socket, three streams per reduce).
constexpr double kHostMtReduceGbps = 20.0;
constexpr double kHostMtMemoryGbps = 30.0;
// One host thread (cpu and mpi backends: one worker or rank per device): a
// vectorised reduce loop streams ~15 GB/s, i.e. ~5 GB/s of src; memcpy ~10 GB/s.
constexpr double kHostThreadReduceGbps = 5.0;
constexpr double kHostThreadMemoryGbps = 10.0;

CostModel base_links(CostModel m, double nvlink_eff, double nvlink_alpha, double pcie_alpha, double smp_alpha,
                     double net_alpha) {
  m.link[LinkKind::kNvLink] = {nvlink_alpha, nvlink_eff};
  m.link[LinkKind::kPcie] = {pcie_alpha, kPcieEfficiency};
  m.link[LinkKind::kSmp] = {smp_alpha, kSmpEfficiency};
  m.link[LinkKind::kNetwork] = {net_alpha, kNetworkEfficiency};
  m.link[LinkKind::kLoopback] = {0.0, 1.0};
  return m;
}

const LinkKind kAllLinkKinds[] = {LinkKind::kNvLink, LinkKind::kPcie, LinkKind::kSmp, LinkKind::kNetwork,
                                  LinkKind::kLoopback};
const NodeKind kAllNodeKinds[] = {NodeKind::kGpu,      NodeKind::kCpu, NodeKind::kPcieSwitch,
                                  NodeKind::kNvSwitch, NodeKind::kNic, NodeKind::kNetSwitch};

[[noreturn]] void bad(std::string_view source, const std::string& path, std::string_view reason) {
  json_reader::fail(source, path, reason);
}

double number_at(const nlohmann::json& v, std::string_view source, const std::string& path, bool allow_zero,
                 double max = INFINITY) {
  json_reader::number(v, source, path);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || (!allow_zero && x == 0) || x > max) {
    if (max == 1.0) bad(source, path, "must be in (0, 1]");
    bad(source, path, allow_zero ? "must be a finite number ≥ 0" : "must be a finite number > 0");
  }
  return x;
}

// Plausibility bounds of an overlay: beyond them no measurement lies, and the
// simulator's times would overflow to inf (a latency of 1e308 µs, a bandwidth
// of 1e-300 GB/s). Calibration fits stay far inside them.
constexpr double kMaxLatencyUs = 1e6;       // one second per op or link crossing
constexpr double kMinBandwidthGbps = 1e-6;  // 1 KB/s
constexpr double kMinEfficiency = 1e-6;
constexpr double kMinHostCores = 0.01;  // an effective share of one core on a crowded host
constexpr double kMaxHostCores = 1e6;
constexpr double kMaxCacheBytes = 1e15;  // 1 PB
constexpr double kMaxGpusPerThread = 1024;  // the most GPUs a machine may have (topology JSON)

// A latency in µs: finite, ≥ 0, at most kMaxLatencyUs.
double latency_at(const nlohmann::json& v, std::string_view source, const std::string& path) {
  const double x = number_at(v, source, path, true);
  if (x > kMaxLatencyUs) bad(source, path, fmt::format("must be at most {:g} µs (got {:g})", kMaxLatencyUs, x));
  return x;
}

// A bandwidth in GB/s: finite, > 0 (or 0 where 0 means "none"), at least kMinBandwidthGbps.
double bandwidth_at(const nlohmann::json& v, std::string_view source, const std::string& path, bool allow_zero) {
  const double x = number_at(v, source, path, allow_zero);
  if (x != 0 && x < kMinBandwidthGbps) {
    bad(source, path, fmt::format("must be at least {:g} GB/s (got {:g})", kMinBandwidthGbps, x));
  }
  return x;
}

}  // namespace

// Profiles (every constant above is cited where it is defined):
//  nccl  plans run as NCCL point-to-point steps and collectives. A send/recv
//        step costs what NCCL charges one ring hop (Simple): 3.4 µs over NVLink;
//        link-kind α adds the rest of NCCL's hop latency on slower fabrics
//        (PCIe 5.7 − 3.4 = 2.3 µs, which SYS routes pay through their PCIe
//        links, so QPI/UPI adds 0; network routes pay PCIe's 2.3 plus 14 − 5.7 = 8.3 µs). NVLink at
//        NCCL's usable 80%. Groups: Ring/Simple base 8.4 µs, hop 3.4 µs.
//  cuda  one process, cudaMemcpyPeerAsync and reduction kernels ordered by
//        events: ~5 µs per op (launch ~3-4 µs + cudaStreamWaitEvent); copy
//        engines reach 90% of NVLink; copies across sockets are staged through
//        host memory (+5 µs). Groups as nccl.
//  cpu   one host thread per device, host buffers: ~1 µs to hand an op to a
//        worker (condition-variable wake-up); every transfer is one thread's
//        memcpy (≤ 10 GB/s), reduces and copies at one thread's host rate.
//        Groups are the same threads running a ring: base 2 µs, hop 1 µs.
//  mpi   one rank per device on host buffers: MPI_Isend/Irecv ~2 µs per op
//        in shared memory, +1.5 µs over InfiniBand verbs, +0.5 µs across
//        sockets; one rank copies at ≤ 10 GB/s. Groups are MPI collectives on
//        split communicators: base 5 µs, hop 2 µs.
// The host (HostModel): the cpu backend runs each plan device's ops on one
// thread in plan order (executor/cpu/cpu_backend.cpp), so serial_devices is
// on for cpu; mpi ranks post sends and receives without blocking, so it is
// off there. Run overhead, cores, cache size and the aggregate memory rates
// belong to the machine, not the backend: they stay 0 (not modelled) until
// `artune calibrate` measures them (tuner/calibration/calibration.cpp), because no
// default would fit both a 2-core VM and a 64-core server.
CostModel CostModel::defaults(BackendProfile profile) {
  CostModel m;
  m.profile = profile;
  switch (profile) {
    case BackendProfile::kNccl:
      // A route across sockets also crosses PCIe, whose α already makes it NCCL's PCIe hop;
      // a route across the network crosses PCIe to reach the NIC, so its α makes up the rest.
      m = base_links(m, kNcclNvlinkEfficiency, 0.0, kNcclSimplePcieHopUs - kNcclSimpleNvlinkHopUs, 0.0,
                     kNcclSimpleNetHopUs - kNcclSimplePcieHopUs);
      m.op_overhead_us = kNcclSimpleNvlinkHopUs;
      m.group_base_latency_us = kNcclRingSimpleBaseUs;
      m.group_hop_latency_us = kNcclSimpleNvlinkHopUs;
      break;
    case BackendProfile::kCuda:
      m = base_links(m, kCopyEngineNvlinkEfficiency, 0.0, 0.0, 5.0, kNcclSimpleNetHopUs - kNcclSimplePcieHopUs);
      m.op_overhead_us = 5.0;
      m.group_base_latency_us = kNcclRingSimpleBaseUs;
      m.group_hop_latency_us = kNcclSimpleNvlinkHopUs;
      break;
    case BackendProfile::kCpu:
      m = base_links(m, 1.0, 0.0, 0.0, 0.0, 0.0);
      m.op_overhead_us = 1.0;
      m.group_base_latency_us = 2.0;
      m.group_hop_latency_us = 1.0;
      m.transfer_cap_gbps = kHostThreadMemoryGbps;
      m.host.serial_devices = true;
      break;
    case BackendProfile::kMpi:
      m = base_links(m, 1.0, 0.0, 0.0, 0.5, 1.5);
      m.op_overhead_us = 2.0;
      m.group_base_latency_us = 5.0;
      m.group_hop_latency_us = 2.0;
      m.transfer_cap_gbps = kHostThreadMemoryGbps;
      break;
  }
  const bool host_threads = profile == BackendProfile::kCpu || profile == BackendProfile::kMpi;
  // On host backends a "GPU" is a host thread standing in for it.
  m.reduce_gbps[NodeKind::kGpu] = host_threads ? kHostThreadReduceGbps : kGpuReduceGbps;
  m.memory_gbps[NodeKind::kGpu] = host_threads ? kHostThreadMemoryGbps : kGpuMemoryGbps;
  m.reduce_gbps[NodeKind::kCpu] = host_threads ? kHostThreadReduceGbps : kHostMtReduceGbps;
  m.memory_gbps[NodeKind::kCpu] = host_threads ? kHostThreadMemoryGbps : kHostMtMemoryGbps;
  if (!host_threads) {
    for (const ArchRates& a : kArchRates) {
      m.gpu_arch[a.arch] = {a.hbm_gbps / 3 * a.reduce_fraction, a.hbm_gbps / 2 * a.copy_fraction};
    }
  }
  return m;
}

double CostModel::reduce_for(const Node& node) const {
  if (node.kind == NodeKind::kGpu) {
    if (const auto it = gpu_arch.find(node.arch); it != gpu_arch.end()) return it->second.reduce_gbps;
  }
  return reduce_for(node.kind);
}

double CostModel::memory_for(const Node& node) const {
  if (node.kind == NodeKind::kGpu) {
    if (const auto it = gpu_arch.find(node.arch); it != gpu_arch.end()) return it->second.memory_gbps;
  }
  return memory_for(node.kind);
}

double CostModel::reduce_for(NodeKind kind) const {
  const auto it = reduce_gbps.find(kind);
  if (it == reduce_gbps.end() || !(it->second > 0)) {
    throw InvalidInput(fmt::format("cost model: no reduce bandwidth for device kind '{}'", to_string(kind)));
  }
  return it->second;
}

double CostModel::memory_for(NodeKind kind) const {
  const auto it = memory_gbps.find(kind);
  if (it == memory_gbps.end() || !(it->second > 0)) {
    throw InvalidInput(fmt::format("cost model: no memory bandwidth for device kind '{}'", to_string(kind)));
  }
  return it->second;
}

LinkClassCost CostModel::link_for(LinkKind kind) const {
  const auto it = link.find(kind);
  return it == link.end() ? LinkClassCost{} : it->second;
}

void CostModel::apply_overlay(const nlohmann::json& overlay, std::string_view source) {
  json_reader::expect_object(overlay, source, "");
  // Validate into a copy so that a bad overlay leaves the model untouched.
  CostModel m = *this;
  for (const auto& [key, value] : overlay.items()) {
    if (key == "profile") {
      if (!value.is_string()) bad(source, key, "must be a string (cuda, nccl, cpu, mpi)");
      m.profile = parse_backend_profile(value.get<std::string>(), fmt::format("{}: {}", source, key));
    } else if (key == "op_overhead_us") {
      m.op_overhead_us = latency_at(value, source, key);
    } else if (key == "group_base_latency_us") {
      m.group_base_latency_us = latency_at(value, source, key);
    } else if (key == "group_hop_latency_us") {
      m.group_hop_latency_us = latency_at(value, source, key);
    } else if (key == "transfer_cap_gbps") {
      m.transfer_cap_gbps = bandwidth_at(value, source, key, true);
    } else if (key == "links") {
      if (!value.is_object()) bad(source, key, json_reader::type_error("an object of link kinds", value));
      for (const auto& [kind_name, fields] : value.items()) {
        const std::string path = fmt::format("links.{}", kind_name);
        const auto kind = parse_link_kind(kind_name);
        if (!kind) bad(source, path, "unknown link kind (nvlink, pcie, smp, network, loopback)");
        json_reader::expect_object(fields, source, path);
        LinkClassCost cost = m.link_for(*kind);
        for (const auto& [field, v] : fields.items()) {
          const std::string fpath = fmt::format("{}.{}", path, field);
          if (field == "alpha_us") {
            cost.alpha_us = latency_at(v, source, fpath);
          } else if (field == "efficiency") {
            cost.efficiency = number_at(v, source, fpath, false, 1.0);
            if (cost.efficiency < kMinEfficiency) {
              bad(source, fpath, fmt::format("must be at least {:g} (got {:g})", kMinEfficiency, cost.efficiency));
            }
          } else {
            bad(source, fpath, "unknown key (alpha_us, efficiency)");
          }
        }
        m.link[*kind] = cost;
      }
    } else if (key == "devices") {
      if (!value.is_object()) bad(source, key, json_reader::type_error("an object of device kinds", value));
      for (const auto& [kind_name, fields] : value.items()) {
        const std::string path = fmt::format("devices.{}", kind_name);
        const auto kind = parse_node_kind(kind_name);
        if (!kind) bad(source, path, "unknown device kind (gpu, cpu, pcie_switch, nvswitch, nic, net_switch)");
        json_reader::expect_object(fields, source, path);
        for (const auto& [field, v] : fields.items()) {
          const std::string fpath = fmt::format("{}.{}", path, field);
          if (field == "reduce_gbps") {
            m.reduce_gbps[*kind] = bandwidth_at(v, source, fpath, false);
          } else if (field == "memory_gbps") {
            m.memory_gbps[*kind] = bandwidth_at(v, source, fpath, false);
          } else {
            bad(source, fpath, "unknown key (reduce_gbps, memory_gbps)");
          }
        }
        // A calibration measured this machine's GPUs: its figures hold for every GPU, whatever its architecture.
        if (*kind == NodeKind::kGpu) m.gpu_arch.clear();
      }
    } else if (key == "gpu_arch") {
      if (!value.is_object()) bad(source, key, json_reader::type_error("an object of GPU architectures", value));
      for (const auto& [arch, fields] : value.items()) {
        const std::string path = fmt::format("gpu_arch.{}", arch);
        json_reader::expect_object(fields, source, path);
        DeviceRates rates = m.gpu_arch.count(arch) ? m.gpu_arch.at(arch) : DeviceRates{};
        for (const auto& [field, v] : fields.items()) {
          const std::string fpath = fmt::format("{}.{}", path, field);
          if (field == "reduce_gbps") {
            rates.reduce_gbps = bandwidth_at(v, source, fpath, false);
          } else if (field == "memory_gbps") {
            rates.memory_gbps = bandwidth_at(v, source, fpath, false);
          } else {
            bad(source, fpath, "unknown key (reduce_gbps, memory_gbps)");
          }
        }
        if (!(rates.reduce_gbps > 0) || !(rates.memory_gbps > 0)) {
          bad(source, path, "needs both reduce_gbps and memory_gbps");
        }
        m.gpu_arch[arch] = rates;
      }
    } else if (key == "host") {
      json_reader::expect_object(value, source, key);
      for (const auto& [field, v] : value.items()) {
        const std::string fpath = fmt::format("host.{}", field);
        if (field == "run_overhead_us") {
          m.host.run_overhead_us = latency_at(v, source, fpath);
        } else if (field == "serial_devices") {
          m.host.serial_devices = json_reader::boolean(v, source, fpath);
        } else if (field == "cores") {
          const double x = number_at(v, source, fpath, true);
          if (x != 0 && (x < kMinHostCores || x > kMaxHostCores)) {
            bad(source, fpath,
                fmt::format("must be 0 (no limit) or in [{:g}, {:g}] (got {:g})", kMinHostCores, kMaxHostCores, x));
          }
          m.host.cores = x;
        } else if (field == "cache_bytes") {
          const double x = number_at(v, source, fpath, true);
          if (x > kMaxCacheBytes) bad(source, fpath, fmt::format("must be at most {:g} (got {:g})", kMaxCacheBytes, x));
          m.host.cache_bytes = x;
        } else if (field == "cache_gbps") {
          m.host.cache_gbps = bandwidth_at(v, source, fpath, true);
        } else if (field == "dram_gbps") {
          m.host.dram_gbps = bandwidth_at(v, source, fpath, true);
        } else {
          bad(source, fpath,
              "unknown key (run_overhead_us, serial_devices, cores, cache_bytes, cache_gbps, dram_gbps)");
        }
      }
    } else if (key == "launch") {
      json_reader::expect_object(value, source, key);
      for (const auto& [field, v] : value.items()) {
        const std::string fpath = fmt::format("launch.{}", field);
        if (field == "gpus_per_thread") {
          const double x = number_at(v, source, fpath, false, kMaxGpusPerThread);
          if (x != std::floor(x)) bad(source, fpath, fmt::format("must be a whole number ≥ 1 (got {:g})", x));
          m.launch.gpus_per_thread = static_cast<int>(x);
        } else if (field == "cuda_graph") {
          m.launch.cuda_graph = json_reader::boolean(v, source, fpath);
        } else {
          bad(source, fpath, "unknown key (gpus_per_thread, cuda_graph)");
        }
      }
    } else if (key == "nccl_release") {
      if (!value.is_string()) bad(source, key, json_reader::type_error("an NCCL release such as \"2.21.5\"", value));
      m.nccl_release = parse_nccl_release(value.get<std::string>(), fmt::format("{}: {}", source, key));
    } else if (key == "nccl_intra") {
      // For the NCCL tuner plugin (nccl_tuning.hpp): the simulator sees the topology itself.
      if (!value.is_string() || (value.get<std::string>() != "nvlink" && value.get<std::string>() != "pcie")) {
        bad(source, key, "must be \"nvlink\" or \"pcie\"");
      }
    } else {
      bad(source, key,
          "unknown key (profile, op_overhead_us, group_base_latency_us, group_hop_latency_us, "
          "transfer_cap_gbps, links, devices, gpu_arch, host, launch, nccl_release, nccl_intra)");
    }
  }
  *this = std::move(m);
}

nlohmann::json CostModel::to_json() const {
  nlohmann::json doc;
  doc["profile"] = std::string(to_string(profile));
  doc["op_overhead_us"] = op_overhead_us;
  doc["group_base_latency_us"] = group_base_latency_us;
  doc["group_hop_latency_us"] = group_hop_latency_us;
  doc["transfer_cap_gbps"] = transfer_cap_gbps;
  nlohmann::json links = nlohmann::json::object();
  for (const LinkKind kind : kAllLinkKinds) {
    const auto it = link.find(kind);
    if (it == link.end()) continue;
    links[std::string(to_string(kind))] = {{"alpha_us", it->second.alpha_us}, {"efficiency", it->second.efficiency}};
  }
  doc["links"] = std::move(links);
  nlohmann::json devices = nlohmann::json::object();
  for (const NodeKind kind : kAllNodeKinds) {
    nlohmann::json d = nlohmann::json::object();
    if (const auto it = reduce_gbps.find(kind); it != reduce_gbps.end()) d["reduce_gbps"] = it->second;
    if (const auto it = memory_gbps.find(kind); it != memory_gbps.end()) d["memory_gbps"] = it->second;
    if (!d.empty()) devices[std::string(to_string(kind))] = std::move(d);
  }
  doc["devices"] = std::move(devices);
  nlohmann::json arch = nlohmann::json::object();
  for (const auto& [name, rates] : gpu_arch) {
    arch[name] = {{"reduce_gbps", rates.reduce_gbps}, {"memory_gbps", rates.memory_gbps}};
  }
  doc["gpu_arch"] = std::move(arch);
  doc["host"] = {{"run_overhead_us", host.run_overhead_us},
                 {"serial_devices", host.serial_devices},
                 {"cores", host.cores},
                 {"cache_bytes", host.cache_bytes},
                 {"cache_gbps", host.cache_gbps},
                 {"dram_gbps", host.dram_gbps}};
  doc["launch"] = {{"gpus_per_thread", launch.gpus_per_thread}, {"cuda_graph", launch.cuda_graph}};
  doc["nccl_release"] = to_string(nccl_release);
  return doc;
}

LaunchMode parse_launch_mode(std::string_view text, int gpus_per_machine, std::string_view what) {
  LaunchMode mode;
  if (text == "process") return mode;
  if (text == "graph") {
    mode.cuda_graph = true;
    return mode;
  }
  if (text == "thread" && gpus_per_machine >= 1) {
    mode.gpus_per_thread = gpus_per_machine;
    return mode;
  }
  if (text.substr(0, 7) == "thread:") {
    const std::string_view digits = text.substr(7);
    int g = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), g);
    const bool ok = ec == std::errc() && end == digits.data() + digits.size() && digits.size() <= 4;
    if (ok && g >= 1 && (gpus_per_machine < 1 || g <= gpus_per_machine)) {
      mode.gpus_per_thread = static_cast<int>(g);
      return mode;
    }
    if (ok && g >= 1) {
      throw InvalidInput(
          fmt::format("{}: '{}': one thread drives at most the {} GPUs of a machine", what, text, gpus_per_machine));
    }
  }
  throw InvalidInput(fmt::format(
      "{}: '{}' is not a launch mode (process: one process per GPU, the default; thread:G: one thread driving G "
      "GPUs, as nccl-tests with G GPUs per process; thread: every GPU of a machine; graph: CUDA graph replay, as "
      "nccl-tests in graph mode)",
      what, text));
}

std::string to_string(const LaunchMode& mode) {
  if (mode.cuda_graph) return "graph";
  if (mode.gpus_per_thread > 1) return fmt::format("thread:{}", mode.gpus_per_thread);
  return "process";
}

BackendProfile parse_backend_profile(std::string_view text, std::string_view what) {
  if (text == "nccl") return BackendProfile::kNccl;
  if (text == "cuda") return BackendProfile::kCuda;
  if (text == "cpu") return BackendProfile::kCpu;
  if (text == "mpi") return BackendProfile::kMpi;
  throw InvalidInput(fmt::format("{}: '{}' is not a backend (cuda, nccl, cpu, mpi)", what, text));
}

std::string_view to_string(BackendProfile profile) noexcept {
  switch (profile) {
    case BackendProfile::kCuda: return "cuda";
    case BackendProfile::kNccl: return "nccl";
    case BackendProfile::kCpu: return "cpu";
    case BackendProfile::kMpi: return "mpi";
  }
  return "?";
}

}  // namespace artune
