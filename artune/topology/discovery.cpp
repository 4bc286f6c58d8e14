// Live discovery of the local machine.
//
// Three sources, each optional and each leaving a note of what it found or
// why it was skipped:
//   - hwloc: NUMA nodes (→ CPU sockets), the PCI tree (switches, GPUs as
//     devices of vendor 0x10de class 0x03xx, NICs of class 0x02xx);
//   - the CUDA runtime, loaded with dlopen so the binary starts without CUDA:
//     device ordinals, compute capability, peer access and P2P ranks;
//   - NVML, loaded with dlopen (no nvml.h here): NVLink lanes per GPU pair and
//     to NVSwitches.
// A PCIe switch is modelled the way NCCL does: its upstream port is the
// switch, the downstream port above each device (and the root port above
// each switch) is skipped, so devices under one switch are PIX.

#include "artune/topology/discovery.hpp"

#include <dlfcn.h>
#include <fmt/core.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "artune_config.hpp"
#include "artune/core/error.hpp"
#include "artune/topology/import/util.hpp"
#include "artune/topology/import/importers.hpp"

#if ARTUNE_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace artune {
namespace {

// ----------------------------------------------------------------------------
// What the sources report, before it becomes a Topology.

struct DCpu {
  int os_index = 0;
  double smp_gbps = detail::kQpiGbps;
  std::string arch;  // the node's arch (parse_cpu_arch) from the machine and hwloc's CPUVendor
};

struct DSwitch {
  int parent = -1;  // switch index, or -1: the CPU
  int cpu = 0;
  double bw = detail::kPcieGen3x16Gbps;
  std::string bus_id;
};

struct DDevice {
  std::string bus_id;
  std::string name;  // NICs: port name
  int parent = -1;
  int cpu = 0;
  double bw = detail::kPcieGen3x16Gbps;
};

struct Found {
  std::vector<DCpu> cpus;
  std::vector<DSwitch> switches;
  std::vector<DDevice> gpus;  // hwloc's, PCI order
  std::vector<DDevice> nics;
};

struct CudaGpu {
  std::string bus_id;
  int sm = 0;
};

struct CudaInfo {
  bool ok = false;
  std::vector<CudaGpu> gpus;  // by ordinal
  std::vector<std::vector<int>> peer;
  std::vector<std::vector<int>> rank;
};

struct NvmlInfo {
  bool ok = false;
  std::vector<std::string> bus_ids;                              // NVML index order
  std::vector<int> sm;                                           // 0 when unknown
  std::map<std::pair<std::string, std::string>, int> gpu_links;  // (bus, remote GPU bus) → lanes seen from bus
  std::map<std::string, int> switch_lanes;                       // bus → lanes to NVSwitches
  std::map<std::string, int> cpu_lanes;                          // bus → lanes to the CPU (POWER)
};

std::string local_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

[[maybe_unused]] std::string machine_arch() {
  struct utsname u {};
  if (uname(&u) != 0) return {};
  return u.machine;
}

// First line of a sysfs file, trimmed; empty if unreadable.
[[maybe_unused]] std::string read_sysfs(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  return std::string(detail::trim(line));
}

// Usable PCIe bandwidth of a device's link: sysfs max_link_speed/width as NCCL
// reads them (GPUs drop the current speed when idle), else hwloc's raw rate.
// `live` is false for an XML export of another machine, whose sysfs is not here.
[[maybe_unused]] double pcie_link_gbps(const std::string& bus_id, double hwloc_raw_gbps, bool live) {
  if (live) {
    const std::string base = "/sys/bus/pci/devices/" + bus_id + "/";
    auto speed = parse_pcie_link_speed(read_sysfs(base + "max_link_speed"));
    auto width = detail::parse_long(read_sysfs(base + "max_link_width"));
    if (speed && width && *width > 0) {
      double bw = pcie_bandwidth_gbps(*speed, static_cast<int>(*width));
      if (bw > 0) return bw;
    }
  }
  // hwloc reports the raw rate (width · GT/s · encoding / 8: Gen3 x16 = 15.75); find the
  // generation and width it comes from and take NCCL's usable figure for them.
  if (hwloc_raw_gbps > 0.1) {
    for (double gts : {2.5, 5.0, 8.0, 16.0, 32.0, 64.0}) {
      const double encoding = gts < 8.0 ? 0.8 : 128.0 / 130.0;
      for (int width : {1, 2, 4, 8, 12, 16, 32}) {
        const double raw = width * gts * encoding / 8.0;
        if (std::fabs(raw - hwloc_raw_gbps) < 0.01 * raw) return pcie_bandwidth_gbps(gts, width);
      }
    }
    return hwloc_raw_gbps * detail::kPcieGen3x16Gbps / 15.75;
  }
  return detail::kPcieGen3x16Gbps;
}

[[maybe_unused]] std::string pci_kind(unsigned vendor, unsigned class_id) {
  if (vendor == 0x10de && (class_id >> 8) == 0x03) return "gpu";
  if (vendor == 0x10de && class_id == 0x0680) return "nvswitch";
  if ((class_id >> 8) == 0x02) return "nic";
  if ((class_id >> 8) == 0x01) return "storage";
  if ((class_id >> 8) == 0x03) return "display";
  return "other";
}

// ----------------------------------------------------------------------------
// hwloc.

#if ARTUNE_HAVE_HWLOC

bool is_pci_bridge(hwloc_obj_t o) {
  return o && o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

std::string hwloc_bus_id(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", static_cast<unsigned>(a.domain), a.bus, a.dev, a.func);
}

class HwlocReader {
 public:
  HwlocReader(DiscoveryResult& result, Found& found) : result_(result), found_(found) {}

  void run(const std::string& xml) {
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0) {
      result_.notes.push_back("hwloc: hwloc_topology_init failed");
      return;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (!xml.empty() && hwloc_topology_set_xml(topo, xml.c_str()) != 0) {
      hwloc_topology_destroy(topo);
      throw InvalidInput(fmt::format("{}: cannot be read as an hwloc XML topology ({})", xml, std::strerror(errno)));
    }
    if (hwloc_topology_load(topo) != 0) {
      hwloc_topology_destroy(topo);
      if (!xml.empty()) throw InvalidInput(fmt::format("{}: hwloc could not load this XML topology", xml));
      result_.notes.push_back(fmt::format("hwloc: hwloc_topology_load failed ({})", std::strerror(errno)));
      return;
    }
    from_xml_ = !xml.empty();
    read(topo);
    hwloc_topology_destroy(topo);
  }

 private:
  void read(hwloc_topology_t topo) {
    if (const char* host = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "HostName"); host && *host && from_xml_)
      result_.hostname = host;
    result_.packages = std::max(0, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
    result_.numa_nodes = std::max(0, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE));
    result_.cores = std::max(0, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE));
    result_.pus = std::max(0, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
    result_.notes.push_back(fmt::format("hwloc: {} package(s), {} NUMA node(s), {} core(s), {} PU(s)", result_.packages,
                                        result_.numa_nodes, result_.cores, result_.pus));

    // CPU sockets: one per NUMA node, as NCCL's <cpu numaid>.
    // hwloc records uname's machine as the root's Architecture (hwloc XML from another host carries its own).
    const char* root_arch = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "Architecture");
    const std::string arch = root_arch && *root_arch ? std::string(root_arch) : machine_arch();
    for (int k = 0; k < std::max(1, result_.numa_nodes); ++k) {
      DCpu cpu;
      hwloc_obj_t numa = result_.numa_nodes ? hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, k) : nullptr;
      cpu.os_index = numa ? static_cast<int>(numa->os_index) : 0;
      hwloc_obj_t pkg = numa ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, numa) : nullptr;
      if (!pkg && numa && numa->cpuset)
        pkg = hwloc_get_next_obj_covering_cpuset_by_type(topo, numa->cpuset, HWLOC_OBJ_PACKAGE, nullptr);
      if (!pkg) pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
      if (pkg) {
        const char* vendor = hwloc_obj_get_info_by_name(pkg, "CPUVendor");
        const char* family = hwloc_obj_get_info_by_name(pkg, "CPUFamilyNumber");
        const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModelNumber");
        auto num = [](const char* s) {
          auto v = s ? detail::parse_long(s) : std::nullopt;
          return v ? static_cast<int>(*v) : -1;
        };
        cpu.smp_gbps = smp_bandwidth_gbps(arch, vendor ? vendor : "", num(family), num(model));
        cpu.arch = cpu_arch_from_nccl(arch, vendor ? vendor : "");
      }
      numa_objs_.push_back(numa);
      found_.cpus.push_back(cpu);
    }

    int host_bridges = 0, pci_bridges = 0;
    for (hwloc_obj_t b = hwloc_get_next_bridge(topo, nullptr); b; b = hwloc_get_next_bridge(topo, b)) {
      if (b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
        ++host_bridges;
      else
        ++pci_bridges;
    }
    std::map<std::string, int> kinds;
    for (hwloc_obj_t d = hwloc_get_next_pcidev(topo, nullptr); d; d = hwloc_get_next_pcidev(topo, d)) {
      const auto& a = d->attr->pcidev;
      DiscoveredPciDevice dev;
      dev.bus_id = hwloc_bus_id(a);
      dev.vendor_id = a.vendor_id;
      dev.device_id = a.device_id;
      dev.class_id = a.class_id;
      dev.kind = pci_kind(a.vendor_id, a.class_id);
      std::string openfabrics, network, any;
      for (hwloc_obj_t c = d->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
        if (!dev.name.empty()) dev.name += ' ';
        dev.name += c->name;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && openfabrics.empty()) openfabrics = c->name;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && network.empty()) network = c->name;
      }
      ++kinds[dev.kind];
      if (dev.kind == "gpu" || dev.kind == "nic") {
        DDevice node;
        node.bus_id = dev.bus_id;
        node.name = !openfabrics.empty() ? openfabrics : network;
        node.cpu = cpu_of(topo, d);
        node.parent = switch_above(d, node.cpu);
        node.bw = pcie_link_gbps(node.bus_id, a.linkspeed, !from_xml_);
        (dev.kind == "gpu" ? found_.gpus : found_.nics).push_back(node);
        if (dev.kind == "nic")
          result_.notes.push_back(
              fmt::format("hwloc: NIC {} at {}", node.name.empty() ? "(no OS name)" : node.name, node.bus_id));
        else
          result_.notes.push_back(fmt::format("hwloc: NVIDIA GPU [10de:{:04x}] at {}", a.device_id, node.bus_id));
      }
      result_.pci_devices.push_back(dev);
    }
    std::string by_kind;
    for (const auto& [kind, count] : kinds) by_kind += fmt::format("{}{} {}", by_kind.empty() ? "" : ", ", count, kind);
    result_.notes.push_back(
        fmt::format("hwloc: {} PCI device(s){}, {} host bridge(s), {} PCI bridge(s) → {} PCIe switch(es)",
                    result_.pci_devices.size(), by_kind.empty() ? "" : " (" + by_kind + ")", host_bridges, pci_bridges,
                    found_.switches.size()));
    if (!kinds.count("gpu"))
      result_.notes.push_back("hwloc: no NVIDIA GPU (PCI vendor 0x10de, class 0x03xx) among the PCI devices");
  }

  // The CPU socket of an I/O object: the NUMA node of its first non-I/O ancestor.
  int cpu_of(hwloc_topology_t topo, hwloc_obj_t o) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, o);
    if (!anc) return 0;
    for (std::size_t k = 0; k < numa_objs_.size(); ++k) {
      hwloc_obj_t numa = numa_objs_[k];
      if (numa && anc->nodeset && hwloc_bitmap_isset(anc->nodeset, numa->os_index)) return static_cast<int>(k);
    }
    for (std::size_t k = 0; k < numa_objs_.size(); ++k) {
      hwloc_obj_t numa = numa_objs_[k];
      if (numa && anc->cpuset && numa->cpuset && hwloc_bitmap_intersects(anc->cpuset, numa->cpuset))
        return static_cast<int>(k);
    }
    return 0;
  }

  // The switch right above a device (index into found_.switches), creating
  // the chain of switches up to the socket; -1 when it sits on a root port.
  int switch_above(hwloc_obj_t device, int cpu) {
    std::vector<hwloc_obj_t> chain;  // upstream ports, nearest first
    hwloc_obj_t port = device->parent;
    while (is_pci_bridge(port) && is_pci_bridge(port->parent)) {
      chain.push_back(port->parent);
      port = port->parent->parent;
    }
    std::vector<int> index;
    for (hwloc_obj_t up : chain) {
      auto it = switch_index_.find(up);
      if (it != switch_index_.end()) {
        index.push_back(it->second);
        continue;
      }
      DSwitch sw;
      sw.cpu = cpu;
      sw.bus_id = hwloc_bus_id(up->attr->bridge.upstream.pci);
      sw.bw = pcie_link_gbps(sw.bus_id, up->attr->bridge.upstream.pci.linkspeed, !from_xml_);
      switch_index_[up] = static_cast<int>(found_.switches.size());
      index.push_back(static_cast<int>(found_.switches.size()));
      found_.switches.push_back(sw);
    }
    for (std::size_t k = 0; k < index.size(); ++k)
      found_.switches[index[k]].parent = k + 1 < index.size() ? index[k + 1] : -1;
    return index.empty() ? -1 : index.front();
  }

  DiscoveryResult& result_;
  Found& found_;
  std::vector<hwloc_obj_t> numa_objs_;
  std::map<hwloc_obj_t, int> switch_index_;
  bool from_xml_ = false;
};

#endif  // ARTUNE_HAVE_HWLOC

// ----------------------------------------------------------------------------
// dlopen helpers.

void* open_first(const std::vector<const char*>& names, std::string& opened) {
  for (const char* name : names) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      opened = name;
      return h;
    }
  }
  return nullptr;
}

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// ----------------------------------------------------------------------------
// CUDA runtime.

CudaInfo query_cuda(std::vector<std::string>& notes) {
  CudaInfo info;
  std::string lib;
  void* h = open_first(
      {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "/usr/local/cuda/lib64/libcudart.so"},
      lib);
  if (!h) {
    notes.push_back("CUDA runtime: not available (libcudart.so not found)");
    return info;
  }
  using GetCount = int (*)(int*);
  using GetBusId = int (*)(char*, int, int);
  using CanAccess = int (*)(int*, int, int);
  using P2PAttr = int (*)(int*, int, int, int);
  using DevAttr = int (*)(int*, int, int);
  using ErrStr = const char* (*)(int);
  using Version = int (*)(int*);
  auto get_count = symbol<GetCount>(h, "cudaGetDeviceCount");
  auto get_bus = symbol<GetBusId>(h, "cudaDeviceGetPCIBusId");
  auto can_access = symbol<CanAccess>(h, "cudaDeviceCanAccessPeer");
  auto p2p_attr = symbol<P2PAttr>(h, "cudaDeviceGetP2PAttribute");
  auto dev_attr = symbol<DevAttr>(h, "cudaDeviceGetAttribute");
  auto err_str = symbol<ErrStr>(h, "cudaGetErrorString");
  auto version = symbol<Version>(h, "cudaRuntimeGetVersion");
  if (!get_count || !get_bus) {
    notes.push_back(fmt::format("CUDA runtime: {} lacks cudaGetDeviceCount/cudaDeviceGetPCIBusId", lib));
    return info;  // the library stays loaded: unloading the CUDA runtime is not safe
  }
  int v = 0;
  std::string ver = version && version(&v) == 0 ? fmt::format(" {}.{}", v / 1000, (v % 1000) / 10) : "";
  int count = 0;
  if (int rc = get_count(&count); rc != 0) {
    notes.push_back(fmt::format("CUDA runtime{} ({}): cudaGetDeviceCount failed: {} (error {})", ver, lib,
                                err_str ? err_str(rc) : "unknown error", rc));
    return info;
  }
  constexpr int kP2PPerformanceRank = 1;       // cudaDevP2PAttrPerformanceRank
  constexpr int kCcMajor = 75, kCcMinor = 76;  // cudaDevAttrComputeCapabilityMajor/Minor
  for (int d = 0; d < count; ++d) {
    char bus[64] = {};
    CudaGpu g;
    if (get_bus(bus, sizeof bus, d) == 0) g.bus_id = detail::normalize_bus_id(bus).value_or(bus);
    int major = 0, minor = 0;
    if (dev_attr && dev_attr(&major, kCcMajor, d) == 0 && dev_attr(&minor, kCcMinor, d) == 0) g.sm = major * 10 + minor;
    info.gpus.push_back(g);
  }
  info.peer.assign(count, std::vector<int>(count, 0));
  info.rank.assign(count, std::vector<int>(count, -1));
  int pairs = 0, peers = 0;
  for (int a = 0; a < count; ++a)
    for (int b = 0; b < count; ++b) {
      if (a == b) {
        info.peer[a][b] = 1;
        info.rank[a][b] = 0;
        continue;
      }
      ++pairs;
      int ok = 0;
      if (can_access && can_access(&ok, a, b) == 0) info.peer[a][b] = ok ? 1 : 0;
      peers += info.peer[a][b];
      int r = 0;
      if (p2p_attr && p2p_attr(&r, kP2PPerformanceRank, a, b) == 0) info.rank[a][b] = r;
    }
  info.ok = true;
  std::string sms;
  for (const auto& g : info.gpus) sms += fmt::format("{}sm{}", sms.empty() ? "" : ",", g.sm);
  notes.push_back(fmt::format("CUDA runtime{} ({}): {} device(s){}{}", ver, lib, count, count ? " (" + sms + ")" : "",
                              count > 1 ? fmt::format(", peer access on {} of {} ordered pairs", peers, pairs) : ""));
  return info;
}

// ----------------------------------------------------------------------------
// NVML (declared here: there is no nvml.h on this machine).

struct NvmlPciInfo {  // nvmlPciInfo_t (v3 layout)
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};
using NvmlDevice = void*;

NvmlInfo query_nvml(std::vector<std::string>& notes) {
  NvmlInfo info;
  std::string lib;
  void* h = open_first({"libnvidia-ml.so.1", "libnvidia-ml.so"}, lib);
  if (!h) {
    notes.push_back("NVML: not available (libnvidia-ml.so.1 not found)");
    return info;
  }
  using Init = int (*)();
  using Count = int (*)(unsigned*);
  using Handle = int (*)(unsigned, NvmlDevice*);
  using Pci = int (*)(NvmlDevice, NvmlPciInfo*);
  using LinkState = int (*)(NvmlDevice, unsigned, int*);
  using RemotePci = int (*)(NvmlDevice, unsigned, NvmlPciInfo*);
  using RemoteType = int (*)(NvmlDevice, unsigned, int*);
  using Cc = int (*)(NvmlDevice, int*, int*);
  using Shutdown = int (*)();
  using ErrStr = const char* (*)(int);
  auto init = symbol<Init>(h, "nvmlInit_v2");
  auto count_fn = symbol<Count>(h, "nvmlDeviceGetCount_v2");
  auto handle_fn = symbol<Handle>(h, "nvmlDeviceGetHandleByIndex_v2");
  auto pci_fn = symbol<Pci>(h, "nvmlDeviceGetPciInfo_v3");
  auto state_fn = symbol<LinkState>(h, "nvmlDeviceGetNvLinkState");
  auto remote_fn = symbol<RemotePci>(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  auto type_fn = symbol<RemoteType>(h, "nvmlDeviceGetNvLinkRemoteDeviceType");  // optional (newer drivers)
  auto cc_fn = symbol<Cc>(h, "nvmlDeviceGetCudaComputeCapability");             // optional
  auto shutdown = symbol<Shutdown>(h, "nvmlShutdown");
  auto err_str = symbol<ErrStr>(h, "nvmlErrorString");
  if (!init || !count_fn || !handle_fn || !pci_fn || !shutdown) {
    notes.push_back(fmt::format("NVML: {} lacks the v2/v3 entry points", lib));
    dlclose(h);
    return info;
  }
  if (int rc = init(); rc != 0) {
    notes.push_back(fmt::format("NVML ({}): nvmlInit_v2 failed: {} (error {})", lib, err_str ? err_str(rc) : "?", rc));
    dlclose(h);
    return info;
  }
  unsigned count = 0;
  if (int rc = count_fn(&count); rc != 0) {
    notes.push_back(fmt::format("NVML: nvmlDeviceGetCount_v2 failed (error {})", rc));
    shutdown();
    dlclose(h);
    return info;
  }
  std::vector<NvmlDevice> devs(count, nullptr);
  for (unsigned i = 0; i < count; ++i) {
    NvmlPciInfo pci{};
    std::string bus;
    if (handle_fn(i, &devs[i]) == 0 && pci_fn(devs[i], &pci) == 0)
      bus = detail::normalize_bus_id(pci.bus_id).value_or(pci.bus_id);
    info.bus_ids.push_back(bus);
    int major = 0, minor = 0;
    info.sm.push_back(cc_fn && devs[i] && cc_fn(devs[i], &major, &minor) == 0 ? major * 10 + minor : 0);
  }
  const std::set<std::string> gpu_buses(info.bus_ids.begin(), info.bus_ids.end());
  constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
  constexpr int kTypeIbmNpu = 1, kTypeSwitch = 2;
  int active = 0;
  for (unsigned i = 0; i < count; ++i) {
    if (!devs[i] || !state_fn || !remote_fn) break;
    for (unsigned link = 0; link < kMaxLinks; ++link) {
      int on = 0;
      if (state_fn(devs[i], link, &on) != 0 || !on) continue;
      NvmlPciInfo remote{};
      if (remote_fn(devs[i], link, &remote) != 0) continue;
      ++active;
      std::string rbus = detail::normalize_bus_id(remote.bus_id).value_or(remote.bus_id);
      int type = -1;
      if (type_fn && type_fn(devs[i], link, &type) != 0) type = -1;
      if (type == kTypeIbmNpu)
        ++info.cpu_lanes[info.bus_ids[i]];
      else if (type != kTypeSwitch && gpu_buses.count(rbus))
        ++info.gpu_links[{info.bus_ids[i], rbus}];
      else
        ++info.switch_lanes[info.bus_ids[i]];
    }
  }
  shutdown();
  dlclose(h);
  info.ok = true;
  int switch_lanes = 0;
  for (const auto& [bus, n] : info.switch_lanes) switch_lanes += n;
  notes.push_back(fmt::format("NVML ({}): {} GPU(s), {} active NVLink lane end(s){}", lib, count, active,
                              switch_lanes ? fmt::format(" ({} to NVSwitches)", switch_lanes) : ""));
  return info;
}

// ----------------------------------------------------------------------------
// Assembly.

void assemble(DiscoveryResult& result, Found& found, const CudaInfo& cuda, const NvmlInfo& nvml) {
  if (found.cpus.empty()) found.cpus.push_back(DCpu{});
  // Which GPUs, in which order: CUDA ordinals when CUDA sees GPUs (what executors use),
  // else NVML order, else hwloc's PCI order.
  std::vector<std::string> order;
  std::vector<int> sm;
  if (cuda.ok && !cuda.gpus.empty()) {
    for (const auto& g : cuda.gpus) {
      order.push_back(g.bus_id);
      sm.push_back(g.sm);
    }
  } else if (nvml.ok && !nvml.bus_ids.empty()) {
    order = nvml.bus_ids;
    sm = nvml.sm;
  } else {
    for (const auto& g : found.gpus) {
      order.push_back(g.bus_id);
      sm.push_back(0);
    }
  }
  std::map<std::string, const DDevice*> hw_gpu;
  for (const auto& g : found.gpus) hw_gpu[g.bus_id] = &g;
  int hidden = 0;
  for (const auto& g : found.gpus)
    if (std::find(order.begin(), order.end(), g.bus_id) == order.end()) ++hidden;
  if (hidden)
    result.notes.push_back(
        fmt::format("{} GPU(s) seen by hwloc are not visible to CUDA/NVML (CUDA_VISIBLE_DEVICES?) "
                    "and are left out",
                    hidden));

  Topology topo;
  std::vector<int> gpu_node;
  for (std::size_t k = 0; k < order.size(); ++k) {
    Node n;
    n.id = fmt::format("gpu{}", k);
    n.kind = NodeKind::kGpu;
    n.local_index = static_cast<int>(k);
    n.bus_id = order[k];
    if (k < sm.size() && sm[k] > 0) n.arch = fmt::format("sm{}", sm[k]);
    gpu_node.push_back(topo.add_node(n));
  }
  std::vector<int> cpu_node;
  for (std::size_t k = 0; k < found.cpus.size(); ++k) {
    Node n;
    n.id = fmt::format("cpu{}", found.cpus[k].os_index);
    n.kind = NodeKind::kCpu;
    n.local_index = static_cast<int>(k);
    n.arch = found.cpus[k].arch;
    cpu_node.push_back(topo.add_node(n));
  }
  std::vector<int> switch_node;
  for (std::size_t k = 0; k < found.switches.size(); ++k) {
    Node n;
    n.id = fmt::format("pcisw{}", k);
    n.kind = NodeKind::kPcieSwitch;
    n.local_index = static_cast<int>(k);
    n.bus_id = found.switches[k].bus_id;
    switch_node.push_back(topo.add_node(n));
  }
  auto up = [&](int parent, int cpu) { return parent >= 0 ? switch_node[parent] : cpu_node[cpu]; };
  for (std::size_t k = 0; k < found.switches.size(); ++k)
    topo.add_duplex_link(switch_node[k], up(found.switches[k].parent, found.switches[k].cpu), LinkKind::kPcie,
                         found.switches[k].bw, detail::kPcieLatencyUs);
  for (std::size_t k = 0; k < order.size(); ++k) {
    auto it = hw_gpu.find(order[k]);
    if (it != hw_gpu.end())
      topo.add_duplex_link(gpu_node[k], up(it->second->parent, it->second->cpu), LinkKind::kPcie, it->second->bw,
                           detail::kPcieLatencyUs);
    else
      topo.add_duplex_link(gpu_node[k], cpu_node[0], LinkKind::kPcie, detail::kPcieGen3x16Gbps, detail::kPcieLatencyUs);
  }
  if (std::any_of(order.begin(), order.end(), [&](const std::string& b) { return !hw_gpu.count(b); }) && !order.empty())
    result.notes.push_back("GPUs hwloc did not report are attached to cpu0 over PCIe Gen3 x16 (placement unknown)");

  // NVLinks from NVML: GPU pairs (lanes as the lower GPU counts them), NVSwitch, CPU.
  auto lane_bw = [&](std::size_t a) { return nvlink_lane_bandwidth_gbps(a < sm.size() ? sm[a] : 0); };
  int nvlinks = 0;
  if (nvml.ok) {
    for (std::size_t a = 0; a < order.size(); ++a)
      for (std::size_t b = a + 1; b < order.size(); ++b) {
        auto ab = nvml.gpu_links.find({order[a], order[b]});
        auto ba = nvml.gpu_links.find({order[b], order[a]});
        int lanes = ab != nvml.gpu_links.end() ? ab->second : ba != nvml.gpu_links.end() ? ba->second : 0;
        if (ab != nvml.gpu_links.end() && ba != nvml.gpu_links.end() && ab->second != ba->second) {
          lanes = std::min(ab->second, ba->second);
          result.notes.push_back(
              fmt::format("NVML: gpu{}–gpu{} report {} and {} lanes; using {}", a, b, ab->second, ba->second, lanes));
        }
        if (!lanes) continue;
        topo.add_duplex_link(gpu_node[a], gpu_node[b], LinkKind::kNvLink, lanes * std::min(lane_bw(a), lane_bw(b)),
                             detail::kNvLinkLatencyUs, lanes);
        nvlinks += lanes;
      }
    int nvswitch = -1;
    for (std::size_t a = 0; a < order.size(); ++a) {
      auto it = nvml.switch_lanes.find(order[a]);
      if (it == nvml.switch_lanes.end()) continue;
      if (nvswitch < 0) {
        Node n;
        n.id = "nvswitch0";
        n.kind = NodeKind::kNvSwitch;
        n.local_index = 0;
        nvswitch = topo.add_node(n);
      }
      topo.add_duplex_link(gpu_node[a], nvswitch, LinkKind::kNvLink, it->second * lane_bw(a), detail::kNvLinkLatencyUs,
                           it->second);
      nvlinks += it->second;
    }
    for (std::size_t a = 0; a < order.size(); ++a) {
      auto it = nvml.cpu_lanes.find(order[a]);
      if (it == nvml.cpu_lanes.end()) continue;
      auto hw = hw_gpu.find(order[a]);
      int cpu = hw != hw_gpu.end() ? hw->second->cpu : 0;
      topo.add_duplex_link(gpu_node[a], cpu_node[cpu], LinkKind::kNvLink, it->second * lane_bw(a),
                           detail::kNvLinkLatencyUs, it->second);
    }
  }

  for (std::size_t k = 0; k < found.nics.size(); ++k) {
    Node n;
    n.id = fmt::format("nic{}", k);
    n.kind = NodeKind::kNic;
    n.local_index = static_cast<int>(k);
    n.arch = found.nics[k].name;
    n.bus_id = found.nics[k].bus_id;
    int node = topo.add_node(n);
    topo.add_duplex_link(node, up(found.nics[k].parent, found.nics[k].cpu), LinkKind::kPcie, found.nics[k].bw,
                         detail::kPcieLatencyUs);
  }
  for (std::size_t a = 0; a < found.cpus.size(); ++a)
    for (std::size_t b = a + 1; b < found.cpus.size(); ++b)
      topo.add_duplex_link(cpu_node[a], cpu_node[b], LinkKind::kSmp,
                           std::min(found.cpus[a].smp_gbps, found.cpus[b].smp_gbps), detail::kSmpLatencyUs);

  topo.set_name(result.hostname);
  topo.set_description(
      fmt::format("discovered on {}: {} GPU(s), {} NVLink lane(s), {} CPU socket(s), {} PCIe "
                  "switch(es), {} NIC(s)",
                  result.hostname, order.size(), nvlinks, found.cpus.size(), found.switches.size(), found.nics.size()));
  topo.finalize();
  result.topology = std::move(topo);
  result.gpu_count = static_cast<int>(order.size());
  if (cuda.ok && cuda.gpus.size() == order.size()) {
    result.cuda_peer_access = cuda.peer;
    result.cuda_p2p_rank = cuda.rank;
  }
}

}  // namespace

DiscoveryResult discover_local_machine(const DiscoveryOptions& options) {
  DiscoveryResult result;
  result.hostname = local_hostname();
  Found found;
  const bool from_file = !options.hwloc_xml.empty();
#if ARTUNE_HAVE_HWLOC
  try {
    HwlocReader(result, found).run(options.hwloc_xml);
  } catch (const InvalidInput&) {
    throw;
  } catch (const std::exception& e) {
    result.notes.push_back(fmt::format("hwloc: failed: {}", e.what()));
  }
#else
  if (from_file)
    throw InvalidInput(
        fmt::format("{}: this artune was built without hwloc and cannot read hwloc XML", options.hwloc_xml));
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  result.pus = cpus > 0 ? static_cast<int>(cpus) : 0;
  result.notes.push_back(
      fmt::format("hwloc: not built in (configure with -Dhwloc=enabled); {} logical CPU(s), "
                  "PCIe tree unknown",
                  result.pus));
#endif
  if (from_file)
    result.notes.push_back(
        fmt::format("read {} instead of this machine: CUDA and NVML not consulted", options.hwloc_xml));
  CudaInfo cuda;
  NvmlInfo nvml;
  try {
    if (options.use_cuda && !from_file) cuda = query_cuda(result.notes);
  } catch (const std::exception& e) {
    result.notes.push_back(fmt::format("CUDA runtime: failed: {}", e.what()));
  }
  try {
    if (options.use_nvml && !from_file) nvml = query_nvml(result.notes);
  } catch (const std::exception& e) {
    result.notes.push_back(fmt::format("NVML: failed: {}", e.what()));
  }
  try {
    assemble(result, found, cuda, nvml);
  } catch (const std::exception& e) {
    result.notes.push_back(fmt::format("building the topology failed: {}", e.what()));
    result.gpu_count = 0;
  }
  return result;
}

DiscoveryResult discover_local_machine() { return discover_local_machine(DiscoveryOptions{}); }

}  // namespace artune
