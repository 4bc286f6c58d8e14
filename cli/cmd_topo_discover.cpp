// `artune topo discover`: discovers this machine (hwloc, CUDA runtime, NVML)
// and prints or writes its topology. Under mpirun every rank discovers its
// machine, ranks are grouped into machines by host name, and rank 0 joins
// one cluster topology.

#include <fmt/core.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune_config.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "core/error.hpp"
#include "topology/discovery.hpp"
#include "topology/io.hpp"
#include "topology/topology.hpp"

#if ARTUNE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API is enough; the C++ bindings only add warnings
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace artune::cli {
namespace {

struct DiscoverFlags {
  std::string output;
  bool require_gpu = false;
  bool allow_no_gpu = false;
  bool json = false;
  std::string hwloc_xml;
  std::string hostname;
  double nic_bandwidth = NetworkSpec{}.nic_bandwidth_gbps;
  double net_latency = NetworkSpec{}.latency_us;
  double oversubscription = NetworkSpec{}.oversubscription;
};

// ---------------------------------------------------------------------------
// Wire format between ranks: the exact nodes and links, nothing derived.

[[maybe_unused]] nlohmann::json to_wire(const DiscoveryResult& r) {
  nlohmann::json nodes = nlohmann::json::array(), links = nlohmann::json::array();
  for (const Node& n : r.topology.nodes())
    nodes.push_back({{"id", n.id}, {"kind", std::string(to_string(n.kind))}, {"local_index", n.local_index},
                     {"arch", n.arch}, {"bus_id", n.bus_id}});
  for (const Link& l : r.topology.links())
    links.push_back({{"src", l.src}, {"dst", l.dst}, {"kind", std::string(to_string(l.kind))},
                     {"bandwidth", l.bandwidth_gbps}, {"latency", l.latency_us}, {"lanes", l.lanes}});
  return {{"hostname", r.hostname}, {"gpu_count", r.gpu_count}, {"notes", r.notes},
          {"name", r.topology.name()}, {"description", r.topology.description()},
          {"nodes", nodes}, {"links", links}};
}

[[maybe_unused]] DiscoveryResult from_wire(const nlohmann::json& j) {
  DiscoveryResult r;
  r.hostname = j.at("hostname").get<std::string>();
  r.gpu_count = j.at("gpu_count").get<int>();
  r.notes = j.at("notes").get<std::vector<std::string>>();
  r.topology.set_name(j.at("name").get<std::string>());
  r.topology.set_description(j.at("description").get<std::string>());
  for (const auto& n : j.at("nodes")) {
    Node node;
    node.id = n.at("id").get<std::string>();
    node.kind = parse_node_kind(n.at("kind").get<std::string>()).value();
    node.local_index = n.at("local_index").get<int>();
    node.arch = n.at("arch").get<std::string>();
    node.bus_id = n.at("bus_id").get<std::string>();
    r.topology.add_node(node);
  }
  for (const auto& l : j.at("links")) {
    Link link;
    link.src = l.at("src").get<int>();
    link.dst = l.at("dst").get<int>();
    link.kind = parse_link_kind(l.at("kind").get<std::string>()).value();
    link.bandwidth_gbps = l.at("bandwidth").get<double>();
    link.latency_us = l.at("latency").get<double>();
    link.lanes = l.at("lanes").get<int>();
    r.topology.add_link(link);
  }
  r.topology.finalize();
  return r;
}

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
        std::string cell = a == b ? "X" : nv[a][b] > 0 ? fmt::format("NV{}", nv[a][b]) : std::string(to_string(types[a][b]));
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
  std::ofstream out(path);
  if (!out) throw InvalidInput(fmt::format("-o {}: cannot open for writing", path));
  out << doc.dump(2) << '\n';
  if (!out) throw InvalidInput(fmt::format("-o {}: write failed", path));
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
    nlohmann::json doc = {{"hostname", r.hostname}, {"gpu_count", r.gpu_count}, {"notes", r.notes},
                          {"packages", r.packages}, {"numa_nodes", r.numa_nodes}, {"cores", r.cores},
                          {"pus", r.pus}, {"topology", topology_to_json(r.topology)}};
    print_json(doc);
  } else {
    print_machine(r);
  }
  if (r.gpu_count == 0) {
    if (!flags.json) fmt::print("{}\n", kNoGpuMessage);
    if (wants_gpu_topology(flags))
      throw Unsupported(fmt::format("no GPU found on {}: cannot produce a GPU topology{} (--allow-no-gpu writes the "
                                    "CPU/NIC topology anyway)",
                                    r.hostname, flags.output.empty() ? "" : " for -o " + flags.output));
  }
  if (!flags.output.empty()) {
    write_json_file(flags.output, topology_to_json(r.topology));
    if (!flags.json) fmt::print("Wrote {} ({} GPU(s))\n", flags.output, r.gpu_count);
  } else if (r.gpu_count > 0 && !flags.json) {
    fmt::print("Write it with: artune topo discover -o FILE.json\n");
  }
}

// ---------------------------------------------------------------------------
// Under mpirun.

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end) return std::nullopt;
  return static_cast<int>(x);
}

// World size the launcher announces (Open MPI, PMI/Hydra, MVAPICH), if any.
std::optional<int> launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"})
    if (auto v = env_int(name)) return v;
  return std::nullopt;
}

[[maybe_unused]] std::optional<int> launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"})
    if (auto v = env_int(name)) return v;
  return std::nullopt;
}

[[maybe_unused]] void finish_cluster(const DiscoverFlags& flags, const std::vector<DiscoveryResult>& per_rank) {
  // Machines in order of their first rank; a host's first rank speaks for it.
  std::vector<std::string> hosts;
  std::map<std::string, std::vector<int>> ranks_of;
  std::vector<Topology> machines;
  for (std::size_t k = 0; k < per_rank.size(); ++k) {
    const auto& r = per_rank[k];
    if (!ranks_of.count(r.hostname)) {
      hosts.push_back(r.hostname);
      machines.push_back(r.topology);
    }
    ranks_of[r.hostname].push_back(static_cast<int>(k));
  }
  int gpus = 0;
  bool any_without = false;
  for (std::size_t m = 0; m < hosts.size(); ++m) {
    const auto& first = per_rank[ranks_of[hosts[m]].front()];
    std::string ranks;
    for (int k : ranks_of[hosts[m]]) ranks += fmt::format("{}{}", ranks.empty() ? "" : ",", k);
    if (!flags.json) {
      fmt::print("Machine {} = host {} (ranks {}): {} GPU(s)\n", m, hosts[m], ranks, first.gpu_count);
      for (const auto& note : first.notes) fmt::print("    {}\n", note);
    }
    gpus += first.gpu_count;
    any_without = any_without || first.gpu_count == 0;
  }
  if (any_without && wants_gpu_topology(flags)) {
    std::string which;
    for (std::size_t m = 0; m < hosts.size(); ++m)
      if (per_rank[ranks_of[hosts[m]].front()].gpu_count == 0) which += fmt::format("{}{}", which.empty() ? "" : ", ", hosts[m]);
    throw Unsupported(fmt::format("no GPU found on {}: cannot produce a GPU cluster topology (--allow-no-gpu writes it "
                                  "anyway)",
                                  which));
  }
  NetworkSpec net;
  net.nic_bandwidth_gbps = flags.nic_bandwidth;
  net.latency_us = flags.net_latency;
  net.oversubscription = flags.oversubscription;
  Topology cluster = machines.size() == 1 ? machines.front()
                                          : join_machines(machines, net, fmt::format("{}-machine cluster", machines.size()));
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
// Initialises MPI for this command unless someone already did; finalises on every exit path.
class MpiSession {
 public:
  MpiSession() {
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
      if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw BackendFailure("MPI_Init failed");
      owned_ = true;
    }
  }
  ~MpiSession() {
    int done = 0;
    MPI_Finalized(&done);
    if (owned_ && !done) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owned_ = false;
};

void check_mpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw BackendFailure(fmt::format("{} failed (error {})", call, rc));
}

void run_under_mpi(const DiscoverFlags& flags) {
  MpiSession session;
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  // Discovery never throws for missing devices; a bad --hwloc-xml fails on every rank alike.
  std::string mine;
  std::string error;
  try {
    mine = to_wire(discover(flags)).dump();
  } catch (const Error& e) {
    error = e.what();
  }
  if (!error.empty()) mine = nlohmann::json{{"error", error}}.dump();
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(rank == 0 ? size : 0);
  check_mpi(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::vector<int> offsets;
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int l : lengths) {
      offsets.push_back(total);
      total += l;
    }
    all.resize(total);
  }
  check_mpi(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                        MPI_COMM_WORLD),
            "MPI_Gatherv");
  if (rank != 0) {
    if (!error.empty()) throw InvalidInput(error);
    return;
  }
  std::vector<DiscoveryResult> per_rank;
  for (int k = 0; k < size; ++k) {
    auto doc = nlohmann::json::parse(all.substr(offsets[k], lengths[k]));
    if (doc.contains("error")) throw InvalidInput(fmt::format("rank {}: {}", k, doc["error"].get<std::string>()));
    per_rank.push_back(from_wire(doc));
  }
  finish_cluster(flags, per_rank);
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

}  // namespace

void add_topo_discover_command(CLI::App* topo) {
  auto* cmd = topo->add_subcommand(
      "discover",
      "Discover this machine's topology: NUMA/CPU sockets and the PCIe tree (hwloc), GPUs (vendor 0x10de), "
      "peer access (CUDA runtime) and NVLinks (NVML). Under mpirun, every rank discovers its machine and rank 0 "
      "joins one cluster topology (ranks on the same host form one machine).");
  auto flags = std::make_shared<DiscoverFlags>();
  cmd->add_option("-o,--output", flags->output, "write the discovered topology as JSON (exit 2 if no GPU was found)");
  cmd->add_flag("--require-gpu", flags->require_gpu, "exit with status 2 when no GPU is found");
  cmd->add_flag("--allow-no-gpu", flags->allow_no_gpu,
                "write the topology even without GPUs (CPU sockets, PCIe switches and NICs only)");
  cmd->add_flag("--json", flags->json, "print the findings and the topology as JSON instead of text");
  cmd->add_option("--hwloc-xml", flags->hwloc_xml,
                  "read an hwloc XML export (lstopo --of xml) instead of probing this machine; CUDA and NVML are "
                  "not consulted")
      ->check(CLI::ExistingFile);
  cmd->add_option("--hostname", flags->hostname,
                  "group MPI ranks by this name instead of the host name (containers that share a host name)");
  cmd->add_option("--nic-bandwidth", flags->nic_bandwidth, "cluster: per-NIC bandwidth in GB/s per direction")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--net-latency", flags->net_latency, "cluster: NIC-to-switch latency in microseconds")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--oversubscription", flags->oversubscription, "cluster: network oversubscription factor (>= 1)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  cmd->callback([flags] { run_discover(*flags); });
}

}  // namespace artune::cli
