#pragma once
// The topology model: a directed multigraph of devices and links, with routes
// chosen the way NCCL chooses them (ordered path types, bottleneck bandwidth).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "artune/core/nccl_names.hpp"

namespace artune {

/// What a topology node is.
enum class NodeKind { kGpu, kCpu, kPcieSwitch, kNvSwitch, kNic, kNetSwitch };

/// What a directed link is made of.
enum class LinkKind { kNvLink, kPcie, kSmp, kNetwork, kLoopback };

/// NCCL's ordered path types, best first: a route's class. NODE is the
/// nvidia-smi class for crossing PCIe host bridges inside one NUMA node. PXN
/// (a GPU sending to a NIC through an NVLink peer's PCIe) is NCCL's only: no
/// topology route has it, the NCCL model's send path to a NIC may
/// (simulator/nccl_model.hpp net_send_route).
enum class PathType { kLoc, kNvl, kNvb, kPix, kPxb, kPxn, kPhb, kNode, kSys, kNet };

/// The fabric a NIC port sits on (NCCL's network transport or plugin for it): what the latency NCCL charges per
/// network step, the port's achievable rate and the protocols NCCL may run across it depend on. Defaults per kind
/// and their sources: net_kind.hpp, net_kind.cpp.
enum class NetKind {
  kInfiniBand,  ///< "ib": InfiniBand through NCCL's IB verbs transport
  kRoce,        ///< "roce": RoCE (RDMA over Ethernet) through the same IB verbs transport
  kEfa,         ///< "efa": AWS Elastic Fabric Adapter through the aws-ofi-nccl plugin
  kSocket,      ///< "socket": TCP sockets through NCCL's socket transport (NCCL_NET=Socket, no RDMA)
};

/// Protocols NCCL may run across a network: bit per NCCL protocol (core/nccl_names.hpp nccl_proto_bit).
enum NetProtocol : unsigned {
  kNetLL = nccl_proto_bit(NcclProto::kLL),
  kNetLL128 = nccl_proto_bit(NcclProto::kLL128),
  kNetSimple = nccl_proto_bit(NcclProto::kSimple),
  kNetAllProtocols = kNetLL | kNetLL128 | kNetSimple,
};

/// A NIC port's fabric as the topology states it: the kind and any figure given for this port in place of the
/// kind's default (negative = the kind's). Everything unset means "not stated": an InfiniBand port.
struct NicNet {
  std::optional<NetKind> kind;      ///< the fabric; nullopt = not stated (InfiniBand)
  double reported_latency_us = -1;  ///< latency the net plugin reports to NCCL (its graph latencyInter, µs)
  double extra_step_us = -1;        ///< time each network step takes beyond NCCL's NET figure (µs, every protocol)
  double efficiency = -1;           ///< fraction of the port's line rate large transfers reach, in (0, 1]
  int protocols = -1;               ///< NetProtocol bits NCCL may run across this port
  /// Whether anything is stated.
  bool stated() const {
    return kind || reported_latency_us >= 0 || extra_step_us >= 0 || efficiency >= 0 || protocols >= 0;
  }
  friend bool operator==(const NicNet&, const NicNet&) = default;
};

/// A device of the topology.
struct Node {
  std::string id;  ///< unique name, e.g. "gpu3" or "m1/gpu3" in clusters
  NodeKind kind = NodeKind::kGpu;
  int machine = 0;        ///< machine (worker) index; -1 for a network switch shared by all machines
  int local_index = -1;   ///< index among nodes of this kind inside its machine
  int global_index = -1;  ///< GPUs: machine·G + local index; other kinds: index among all nodes of the kind
  std::string arch;       ///< GPUs: e.g. "sm70" (optional); CPUs: see parse_cpu_arch; NICs: port name such as "mlx5_0"
  std::string bus_id;     ///< PCI bus id when known (importers, discovery)
  NicNet net{};           ///< NICs: the port's fabric (unstated: InfiniBand)
};

/// A directed link; a full-duplex physical link is two Links.
struct Link {
  int src = -1;  ///< node index
  int dst = -1;  ///< node index
  LinkKind kind = LinkKind::kPcie;
  double bandwidth_gbps = 0;  ///< GB/s (1e9 bytes/s) in this direction, all lanes together
  double latency_us = 0;      ///< one-way latency of this hop
  int lanes = 1;              ///< bonded lanes (NV2 = 2)
};

/// The path between two nodes: its class, links and bottleneck.
struct Route {
  PathType type = PathType::kLoc;
  std::vector<int> links;     ///< link indices from source to destination (empty for LOC)
  double bandwidth_gbps = 0;  ///< bottleneck bandwidth (infinite for LOC: std::numeric_limits<double>::infinity())
  double latency_us = 0;      ///< sum of link latencies
};

/// How machines of a cluster are joined.
struct NetworkSpec {
  double nic_bandwidth_gbps = 12.5;  ///< per NIC and direction
  double latency_us = 2.7;           ///< NIC to switch hop
  double oversubscription = 1.0;     ///< ≥ 1; divides the uplink bandwidth
  NicNet fabric{};                   ///< the fabric of every NIC that states none of its own
};

/// What of a node beyond its name and place changes what artune predicts, as text (equal for nodes that act
/// alike): a GPU's or CPU's architecture (the NCCL model's compute capability and CPU rules; a NIC's `arch` is
/// its port name, which does not count) and a NIC's stated fabric.
std::string node_traits(const Node& node);

/// A machine or a cluster: nodes, directed links and derived routes.
class Topology {
 public:
  Topology();
  ~Topology();
  Topology(const Topology&);
  Topology& operator=(const Topology&);
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  /// Adds a node and returns its index; ids must be unique (InvalidInput otherwise).
  int add_node(Node node);
  /// Adds one directed link and returns its index.
  int add_link(Link link);
  /// Adds both directions of a full-duplex link; returns the index of the src→dst one.
  int add_duplex_link(int a, int b, LinkKind kind, double bandwidth_gbps, double latency_us, int lanes = 1);
  /// Assigns GPU global indices (machine·G + local), builds adjacency and checks consistency; call after building.
  void finalize();

  /// Display name ("dgx1-v100", "4xdgx1-v100", …).
  const std::string& name() const { return name_; }
  /// Sets the display name.
  void set_name(std::string name) { name_ = std::move(name); }
  /// Free-text description.
  const std::string& description() const { return description_; }
  /// Sets the description.
  void set_description(std::string d) { description_ = std::move(d); }

  /// All nodes; a node's index is its position.
  const std::vector<Node>& nodes() const { return nodes_; }
  /// All directed links; a link's index is its position.
  const std::vector<Link>& links() const { return links_; }
  /// Indices of the links leaving a node.
  const std::vector<int>& out_links(int node) const { return out_links_.at(node); }
  /// Node index by id, or -1.
  int find_node(std::string_view id) const;

  /// Number of machines (workers).
  int machine_count() const { return machine_count_; }
  /// GPU node indices ordered by global GPU index.
  const std::vector<int>& gpus() const { return gpus_; }
  /// GPU node indices of one machine, ordered by local index.
  std::vector<int> gpus_of_machine(int machine) const;
  /// Number of GPUs per machine if equal on all machines, else -1.
  int gpus_per_machine() const;
  /// Node indices of one kind (in index order), optionally restricted to a machine.
  std::vector<int> nodes_of_kind(NodeKind kind, int machine = -1) const;
  /// The network joining machines, if any.
  const std::optional<NetworkSpec>& network() const { return network_; }
  /// Sets the network spec (clusters).
  void set_network(NetworkSpec spec);

  /// The route from node a to node b (memoised; thread-safe for concurrent readers after finalize()).
  const Route& route(int a, int b) const;
  /// The NIC a node uses to leave its machine (nearest by route class, then index), or -1.
  int nearest_nic(int node) const;
  /// A NIC's port: its link to the network (the port's own speed), or -1 when it has none.
  int network_port(int nic) const;
  /// Bonded NVLink lanes directly between two nodes (0 if none).
  int nvlink_lanes(int a, int b) const;
  /// DMA peer access as TF prints it: true when the route is NVLink or PIX/PXB (same node counts).
  bool peer_access(int a, int b) const;

  /// A stable hash of nodes, links and network (decision tables refuse other machines).
  std::string fingerprint() const;
  /// A machine as seen from inside it, by place (a node's kind and local index): its nodes with their
  /// architectures and fabrics, the links between them and the links leaving it (kind, bandwidth, lanes,
  /// latency; the far end of a leaving link by id, e.g. net_switch). Two machines with equal shapes are
  /// interchangeable place for place; bus ids and names do not count.
  std::string machine_shape(int machine) const;

 private:
  std::string name_;
  std::string description_;
  std::vector<Node> nodes_;
  std::unordered_map<std::string, int> index_by_id_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> out_links_;
  std::vector<std::vector<int>> in_links_;  // per node: links into it (machine_shape)
  std::vector<int> gpus_;
  int machine_count_ = 0;
  std::optional<NetworkSpec> network_;
  /// Network links from one NIC to another (through network switches), empty if none.
  std::vector<int> network_path(int nic_a, int nic_b) const;
  struct RouteCache;
  std::unique_ptr<RouteCache> cache_;
  /// Drops the memoised fingerprint and machine shapes (what they cover changed).
  void forget_traits();
};

/// Short name of a kind ("gpu", "cpu", "pcie_switch", "nvswitch", "nic", "net_switch").
std::string_view to_string(NodeKind kind) noexcept;
/// Short name of a link kind ("nvlink", "pcie", "smp", "network", "loopback").
std::string_view to_string(LinkKind kind) noexcept;
/// nvidia-smi style name of a path type ("X", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "NODE", "SYS", "NET").
std::string_view to_string(PathType type) noexcept;
/// Parses a node kind name; nullopt if unknown.
std::optional<NodeKind> parse_node_kind(std::string_view text);
/// Parses a link kind name; nullopt if unknown.
std::optional<LinkKind> parse_link_kind(std::string_view text);
/// Short name of a network kind ("ib", "roce", "efa", "socket").
std::string_view to_string(NetKind kind) noexcept;
/// Parses a network kind name; nullopt if unknown.
std::optional<NetKind> parse_net_kind(std::string_view text);

/// A CPU's instruction set and vendor as NCCL tells them apart (src/graph/xml.cc kvDictCpuArch, kvDictCpuVendor).
enum class CpuIsa { kUnknown, kX86, kArm, kPower };
enum class CpuVendor { kUnknown, kIntel, kAmd, kZhaoxin };
struct CpuArch {
  CpuIsa isa = CpuIsa::kUnknown;
  CpuVendor vendor = CpuVendor::kUnknown;  ///< x86_64 only
  friend bool operator==(const CpuArch&, const CpuArch&) = default;
};
/// The values a CPU node's `arch` may take (configs/README.md), for messages: "x86_64-intel, …, arm64 or
/// ppc64", from the same table parse_cpu_arch reads.
std::string cpu_arch_choices();
/// Parses a CPU node's `arch`: "" (not stated), "x86_64" (vendor not stated), "x86_64-intel", "x86_64-amd",
/// "x86_64-zhaoxin", "arm64", "ppc64"; nullopt for anything else.
std::optional<CpuArch> parse_cpu_arch(std::string_view text);
/// Canonical `arch` text of a CPU (parse_cpu_arch's inverse; "" when nothing is known).
std::string to_string(CpuArch arch);
/// A CPU node's `arch` from NCCL's `<cpu arch= vendor=>` attributes (xml.cc writes x86_64, arm64, ppc64 and the
/// CPUID vendor: GenuineIntel, AuthenticAMD, CentaurHauls or "  Shanghai  "), uname's machine (aarch64,
/// ppc64le also taken) and hwloc's CPUVendor: "" for an architecture NCCL does not know, "x86_64" for an
/// x86_64 vendor it does not know.
std::string cpu_arch_from_nccl(std::string_view arch, std::string_view vendor);

/// GPU×GPU DMA peer matrix (row/column = global GPU index).
std::vector<std::vector<bool>> peer_matrix(const Topology& topo);
/// GPU×GPU bonded NVLink lanes: direct links, or the narrowest hop of a route through NVSwitches.
std::vector<std::vector<int>> nvlink_matrix(const Topology& topo);
/// GPU×GPU route bottleneck bandwidth in GB/s (0 on the diagonal).
std::vector<std::vector<double>> bandwidth_matrix(const Topology& topo);
/// GPU×GPU route classes.
std::vector<std::vector<PathType>> path_type_matrix(const Topology& topo);

}  // namespace artune
