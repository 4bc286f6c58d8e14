// `artune topo discover`: discovers this machine (hwloc, CUDA runtime, NVML)
// and prints or writes its topology. Under mpirun every rank discovers its
// machine, ranks are grouped into machines by host name, and rank 0 joins
// one cluster topology.

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune_config.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/mpi_session.hpp"
#include "artune/core/error.hpp"
#include "artune/core/output_file.hpp"
#include "artune/topology/discovery.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/topology.hpp"

namespace artune::cli {
namespace {

// Bounds of the cluster flags: the JSON loader's bounds for bandwidths and latencies.
constexpr double kMinBandwidthGbps = 1e-6;
constexpr double kMaxFigure = 1e9;
constexpr double kMaxOversubscription = 1e6;

struct DiscoverFlags {
  std::string output;
  bool require_gpu = false;
  bool allow_no_gpu = false;
  bool json = false;
  std::string hwloc_xml;
  std::string hostname;
  bool hostname_given = false;
  double nic_bandwidth = NetworkSpec{}.nic_bandwidth_gbps;
  double net_latency = NetworkSpec{}.latency_us;
  double oversubscription = NetworkSpec{}.oversubscription;
};

// ---------------------------------------------------------------------------
// Printing.

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

void print_machine(const DiscoveryResult& r) {
  const Topology& t = r.topology;
  fmt::print("Host {}\n", r.hostname);
  if (r.packages || r.numa_nodes || r.cores)
    fmt::print("  CPUs:  {}, {}, {}, {}\n", plural(r.packages, "package", "packages"),
               plural(r.numa_nodes, "NUMA node", "NUMA nodes"), plural(r.cores, "core", "cores"),
               plural(r.pus, "hardware thread", "hardware threads"));
  else if (r.pus)
    fmt::print("  CPUs:  {}\n", plural(r.pus, "hardware thread", "hardware threads"));
  auto cpus = t.nodes_of_kind(NodeKind::kCpu);
  fmt::print("  Model: {}, {}, {}, {}\n", plural(cpus.size(), "CPU socket", "CPU sockets"),
             plural(t.nodes_of_kind(NodeKind::kPcieSwitch).size(), "PCIe switch", "PCIe switches"),
             plural(t.nodes_of_kind(NodeKind::kNic).size(), "NIC", "NICs"),
             plural(static_cast<std::size_t>(r.gpu_count), "GPU", "GPUs"));
  if (!r.pci_devices.empty()) {
    fmt::print("  PCI devices ({}):\n", r.pci_devices.size());
    for (const auto& d : r.pci_devices)
      fmt::print("    {}  {:<8} [{:04x}:{:04x}] class 0x{:04x}{}{}\n", d.bus_id, d.kind, d.vendor_id, d.device_id,
                 d.class_id, d.name.empty() ? "" : "  ", d.name);
  }
  for (int n : t.nodes_of_kind(NodeKind::kNic)) {
    const Node& nic = t.nodes()[n];
    fmt::print("  NIC {}: {} {}\n", nic.id, nic.arch.empty() ? "(unnamed)" : nic.arch, nic.bus_id);
  }
  if (r.gpu_count > 0) {
    for (int g : t.gpus()) {
      const Node& gpu = t.nodes()[g];
      fmt::print("  GPU {}: {}{}{}\n", gpu.id, gpu.bus_id.empty() ? "(bus id unknown)" : gpu.bus_id,
                 gpu.arch.empty() ? "" : " ", gpu.arch);
    }
    auto nv = nvlink_matrix(t);
    auto types = path_type_matrix(t);
    fmt::print("  Path types (NV# = bonded NVLinks):\n        ");
    for (std::size_t b = 0; b < nv.size(); ++b) fmt::print("{:>6}", fmt::format("GPU{}", b));
    fmt::print("\n");
    for (std::size_t a = 0; a < nv.size(); ++a) {
      fmt::print("  {:>6}", fmt::format("GPU{}", a));
      for (std::size_t b = 0; b < nv.size(); ++b) {
        std::string cell = a == b         ? "X"
                           : nv[a][b] > 0 ? fmt::format("NV{}", nv[a][b])
                                          : std::string(to_string(types[a][b]));
        fmt::print("{:>6}", cell);
      }
      fmt::print("\n");
    }
    if (!r.cuda_peer_access.empty()) {
      fmt::print("  CUDA peer access (P2P performance rank):\n");
      for (std::size_t a = 0; a < r.cuda_peer_access.size(); ++a) {
        fmt::print("  {:>6}", fmt::format("GPU{}", a));
        for (std::size_t b = 0; b < r.cuda_peer_access.size(); ++b)
          fmt::print("  {}({:>2})", r.cuda_peer_access[a][b] ? 'Y' : 'N', r.cuda_p2p_rank[a][b]);
        fmt::print("\n");
      }
    }
  } else {
    fmt::print("  GPUs:  none\n");
  }
  fmt::print("  Sources:\n");
  for (const auto& note : r.notes) fmt::print("    {}\n", note);
}

constexpr std::string_view kNoGpuMessage =
    "No GPU found: no NVIDIA GPU on the PCI bus, and neither the CUDA runtime nor NVML reports one.";

void write_json_file(const std::string& path, const nlohmann::json& doc) {
  write_output_file(path, doc.dump(2) + "\n", "--out");
}

DiscoveryResult discover(const DiscoverFlags& flags) {
  DiscoveryOptions options;
  options.hwloc_xml = flags.hwloc_xml;
  DiscoveryResult r = discover_local_machine(options);
  if (!flags.hostname.empty()) r.hostname = flags.hostname;
  return r;
}

bool wants_gpu_topology(const DiscoverFlags& f) { return (!f.output.empty() || f.require_gpu) && !f.allow_no_gpu; }

void finish_single(const DiscoverFlags& flags, const DiscoveryResult& r) {
  if (flags.json) {
    nlohmann::json doc = {{"hostname", r.hostname},
                          {"gpu_count", r.gpu_count},
                          {"notes", r.notes},
                          {"packages", r.packages},
                          {"numa_nodes", r.numa_nodes},
                          {"cores", r.cores},
                          {"pus", r.pus},
                          {"topology", topology_to_json(r.topology)}};
    print_json(doc);
  } else {
    print_machine(r);
  }
  if (r.gpu_count == 0) {
    if (!flags.json) fmt::print("{}\n", kNoGpuMessage);
    if (wants_gpu_topology(flags))
      throw Unsupported(
          fmt::format("no GPU found on {}: cannot produce a GPU topology{} (--allow-no-gpu writes the "
                      "CPU/NIC topology anyway)",
                      r.hostname, flags.output.empty() ? "" : " for --out " + flags.output));
  }
  if (!flags.output.empty()) {
    write_json_file(flags.output, topology_to_json(r.topology));
    if (!flags.json) fmt::print("Wrote {} ({} GPU(s))\n", flags.output, r.gpu_count);
  } else if (r.gpu_count > 0 && !flags.json) {
    fmt::print("Write it with: artune topo discover --out FILE.json\n");
  }
}

// ---------------------------------------------------------------------------
// Under mpirun.

[[maybe_unused]] void finish_cluster(const DiscoverFlags& flags, const std::vector<ClusterMachine>& machines) {
  std::vector<std::string> hosts;
  int gpus = 0;
  std::string which;  // hosts without a GPU
  for (std::size_t m = 0; m < machines.size(); ++m) {
    const DiscoveryResult& first = machines[m].discovery;
    hosts.push_back(first.hostname);
    if (!flags.json) {
      fmt::print("Machine {} = host {} (ranks {}): {} GPU(s)\n", m, first.hostname, fmt::join(machines[m].ranks, ","),
                 first.gpu_count);
      for (const auto& note : first.notes) fmt::print("    {}\n", note);
    }
    gpus += first.gpu_count;
    if (first.gpu_count == 0) which += fmt::format("{}{}", which.empty() ? "" : ", ", first.hostname);
  }
  if (!which.empty() && wants_gpu_topology(flags)) {
    throw Unsupported(
        fmt::format("no GPU found on {}: cannot produce a GPU cluster topology (--allow-no-gpu writes it "
                    "anyway)",
                    which));
  }
  NetworkSpec net;
  net.nic_bandwidth_gbps = flags.nic_bandwidth;
  net.latency_us = flags.net_latency;
  net.oversubscription = flags.oversubscription;
  const Topology cluster = join_cluster(machines, net, fmt::format("{}-machine cluster", machines.size()));
  if (flags.json) {
    print_json({{"machines", hosts}, {"gpu_count", gpus}, {"topology", topology_to_json(cluster)}});
  } else {
    fmt::print("Cluster: {} machine(s), {} GPU(s) in all\n", machines.size(), gpus);
    if (gpus == 0) fmt::print("{}\n", kNoGpuMessage);
  }
  if (!flags.output.empty()) {
    write_json_file(flags.output, topology_to_json(cluster));
    if (!flags.json) fmt::print("Wrote {} ({} machine(s), {} GPU(s))\n", flags.output, machines.size(), gpus);
  }
}

#if ARTUNE_HAVE_MPI
void run_under_mpi(const DiscoverFlags& flags) {
  MpiSession mpi;
  // Discovery never throws for missing devices; a bad --hwloc-xml fails on every rank alike.
  const auto machines = gather_machines(mpi, [&flags] { return discover(flags); });
  if (mpi.rank() == 0) finish_cluster(flags, machines);
}
#endif

void run_discover(const DiscoverFlags& flags) {
  auto world = launcher_world_size();
  if (world && *world > 1) {
#if ARTUNE_HAVE_MPI
    run_under_mpi(flags);
    return;
#else
    // Without MPI the ranks cannot talk: rank 0 describes its own machine only.
    int rank = launcher_rank().value_or(0);
    if (rank != 0) return;
    fmt::print("note: {} ranks under mpirun, but this artune was built without MPI: describing this machine only\n",
               *world);
#endif
  }
  finish_single(flags, discover(flags));
}

// Own range checks: CLI11's number validators print bounds as 300-digit doubles
// and let NaN through.
void check_range(const char* flag, double value, double lo, double hi, bool lo_inclusive = true) {
  const bool ok = std::isfinite(value) && (lo_inclusive ? value >= lo : value > lo) && value <= hi;
  if (!ok) throw InvalidInput(fmt::format("{}: must be a number from {:g} to {:g} (got {:g})", flag, lo, hi, value));
}

void validate(const DiscoverFlags& f) {
  check_range("--nic-bandwidth", f.nic_bandwidth, kMinBandwidthGbps, kMaxFigure);
  check_range("--net-latency", f.net_latency, 0, kMaxFigure);
  check_range("--oversubscription", f.oversubscription, 1, kMaxOversubscription);
  // Before discovery (which waits on every rank under mpirun): an unwritable -o fails first.
  if (!f.output.empty()) check_output_file(f.output, "--out");
  if (f.hostname_given && f.hostname.empty()) throw InvalidInput("--hostname: must not be empty");
  for (unsigned char c : f.hostname) {
    if (c < 0x20 || c == 0x7f) throw InvalidInput("--hostname: must not contain control characters");
  }
}

}  // namespace

void add_topo_discover_command(CLI::App* topo) {
  auto* cmd = topo->add_subcommand(
      "discover",
      "Discover this machine's topology: NUMA/CPU sockets and the PCIe tree (hwloc), GPUs (vendor 0x10de), "
      "peer access (CUDA runtime) and NVLinks (NVML). Under mpirun, every rank discovers its machine and rank 0 "
      "joins one cluster topology (ranks on the same host form one machine).");
  auto flags = std::make_shared<DiscoverFlags>();
  add_out_option(
      cmd, flags->output,
      fmt::format("write the discovered topology as JSON (exit 2 if no GPU was found; {})", kOutputPathHelp));
  auto* require_gpu = cmd->add_flag("--require-gpu", flags->require_gpu, "exit with status 2 when no GPU is found");
  auto* allow_no_gpu = cmd->add_flag("--allow-no-gpu", flags->allow_no_gpu,
                                     "write the topology even without GPUs (CPU sockets, PCIe switches and NICs only); "
                                     "excludes --require-gpu");
  require_gpu->excludes(allow_no_gpu);
  cmd->add_flag("--json", flags->json, "print the findings and the topology as JSON instead of text");
  cmd->add_option("--hwloc-xml", flags->hwloc_xml,
                  "read an hwloc XML export (lstopo --of xml) instead of probing this machine; CUDA and NVML are "
                  "not consulted")
      ->check(CLI::ExistingFile);
  auto* hostname =
      cmd->add_option("--hostname", flags->hostname,
                      "group MPI ranks by this name instead of the host name (containers that share a host name)");
  cmd->add_option(
         "--nic-bandwidth", flags->nic_bandwidth,
         fmt::format("cluster: per-NIC bandwidth in GB/s per direction ({:g} to {:g})", kMinBandwidthGbps, kMaxFigure))
      ->capture_default_str();
  cmd->add_option("--net-latency", flags->net_latency,
                  fmt::format("cluster: NIC-to-switch latency in microseconds (0 to {:g})", kMaxFigure))
      ->capture_default_str();
  cmd->add_option("--oversubscription", flags->oversubscription,
                  fmt::format("cluster: network oversubscription factor (1 to {:g})", kMaxOversubscription))
      ->capture_default_str();
  cmd->callback([flags, hostname, cmd] {
    warn_deprecated_output(cmd);
    flags->hostname_given = hostname->count() > 0;
    validate(*flags);
    run_discover(*flags);
  });
}

}  // namespace artune::cli
