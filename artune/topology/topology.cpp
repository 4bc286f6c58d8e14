#include "artune/topology/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <tuple>

#include "artune/core/error.hpp"

namespace artune {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Figures a link may carry. Outside them no hardware exists, and the simulator's times would
// lose all meaning (1e-300 GB/s predicts 1e302 µs); the JSON loader caps figures at the same 1e9.
constexpr double kMinLinkBandwidthGbps = 1e-6;  // 1 KB/s
constexpr double kMaxLinkFigure = 1e9;          // GB/s and µs

constexpr std::array<std::pair<NodeKind, std::string_view>, 6> kNodeKindNames = {{
    {NodeKind::kGpu, "gpu"},
    {NodeKind::kCpu, "cpu"},
    {NodeKind::kPcieSwitch, "pcie_switch"},
    {NodeKind::kNvSwitch, "nvswitch"},
    {NodeKind::kNic, "nic"},
    {NodeKind::kNetSwitch, "net_switch"},
}};

constexpr std::array<std::pair<LinkKind, std::string_view>, 5> kLinkKindNames = {{
    {LinkKind::kNvLink, "nvlink"},
    {LinkKind::kPcie, "pcie"},
    {LinkKind::kSmp, "smp"},
    {LinkKind::kNetwork, "network"},
    {LinkKind::kLoopback, "loopback"},
}};

constexpr std::array<std::pair<NetKind, std::string_view>, 4> kNetKindNames = {{
    {NetKind::kInfiniBand, "ib"},
    {NetKind::kRoce, "roce"},
    {NetKind::kEfa, "efa"},
    {NetKind::kSocket, "socket"},
}};

// A breadth-first search by hop count that, among the shortest paths, keeps
// the widest one (largest bottleneck). `allowed_link` filters links and
// `may_cross` filters the intermediate nodes a path may pass through.
struct PathSearch {
  const std::vector<Node>& nodes;
  const std::vector<Link>& links;
  const std::vector<std::vector<int>>& out_links;

  std::vector<int> find(int from, int to, const std::function<bool(const Link&)>& allowed_link,
                        const std::function<bool(const Node&)>& may_cross) const {
    const std::size_t n = nodes.size();
    std::vector<int> hops(n, -1);
    std::vector<double> width(n, 0.0);
    std::vector<int> via(n, -1);
    std::deque<int> queue{from};
    hops[from] = 0;
    width[from] = kInfinity;
    while (!queue.empty()) {
      const int u = queue.front();
      queue.pop_front();
      if (u == to) break;
      if (u != from && !may_cross(nodes[u])) continue;
      for (int l : out_links[u]) {
        const Link& link = links[l];
        if (!allowed_link(link)) continue;
        const int v = link.dst;
        const double w = std::min(width[u], link.bandwidth_gbps);
        if (hops[v] < 0) {
          hops[v] = hops[u] + 1;
          width[v] = w;
          via[v] = l;
          queue.push_back(v);
        } else if (hops[v] == hops[u] + 1 && w > width[v]) {
          width[v] = w;
          via[v] = l;
        }
      }
    }
    if (hops[to] < 0) return {};
    std::vector<int> path;
    for (int v = to; v != from; v = links[via[v]].src) path.push_back(via[v]);
    std::reverse(path.begin(), path.end());
    return path;
  }
};

std::uint64_t fnv1a(std::uint64_t hash, std::string_view text) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

struct Topology::RouteCache {
  mutable std::shared_mutex mutex;
  std::unordered_map<std::uint64_t, Route> routes;
  std::unordered_map<int, int> nearest_nic;
  // Per source NIC: the link by which the network BFS reached each node (-1 = not reached).
  std::unordered_map<int, std::vector<int>> network_tree;
  // fingerprint() and machine_shape(), which format every node and link they cover: the plan builders and the
  // NCCL model key their caches by them on every build (autotune -t 128xdgx-h100 -j 1: 112 s recomputing them, 39.5 s
  // memoised; docs/workflow.md).
  // Dropped by whatever changes what they cover (add_node, add_link, set_network, finalize).
  std::optional<std::string> fingerprint;
  std::unordered_map<int, std::string> machine_shape;
};

Topology::Topology() : cache_(std::make_unique<RouteCache>()) {}
Topology::~Topology() = default;
Topology::Topology(const Topology& other)
    : name_(other.name_),
      description_(other.description_),
      nodes_(other.nodes_),
      index_by_id_(other.index_by_id_),
      links_(other.links_),
      out_links_(other.out_links_),
      in_links_(other.in_links_),
      gpus_(other.gpus_),
      machine_count_(other.machine_count_),
      network_(other.network_),
      cache_(std::make_unique<RouteCache>()) {}
Topology& Topology::operator=(const Topology& other) {
  if (this != &other) *this = Topology(other);
  return *this;
}
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

int Topology::add_node(Node node) {
  if (node.id.empty()) throw InvalidInput("topology: a device has an empty id");
  if (index_by_id_.count(node.id) != 0) {
    throw InvalidInput(fmt::format("topology: duplicate device id '{}'", node.id));
  }
  const int index = static_cast<int>(nodes_.size());
  index_by_id_.emplace(node.id, index);
  nodes_.push_back(std::move(node));
  out_links_.emplace_back();
  in_links_.emplace_back();
  forget_traits();
  return index;
}

int Topology::add_link(Link link) {
  const int n = static_cast<int>(nodes_.size());
  if (link.src < 0 || link.src >= n || link.dst < 0 || link.dst >= n) {
    throw InvalidInput(fmt::format("topology: link {}->{} names a device that does not exist", link.src, link.dst));
  }
  const auto where = [&] { return fmt::format("topology: link {}->{}", nodes_[link.src].id, nodes_[link.dst].id); };
  if (link.src == link.dst && link.kind != LinkKind::kLoopback)
    throw InvalidInput(where() + ": a device cannot link to itself");
  if (!(link.bandwidth_gbps > 0) || link.bandwidth_gbps == kInfinity)
    throw InvalidInput(where() + ": bandwidth must be > 0");
  if (!(link.latency_us >= 0) || link.latency_us == kInfinity) throw InvalidInput(where() + ": latency must be >= 0");
  if (link.lanes < 1) throw InvalidInput(where() + ": lanes must be >= 1");
  if (link.bandwidth_gbps < kMinLinkBandwidthGbps || link.bandwidth_gbps > kMaxLinkFigure) {
    throw InvalidInput(fmt::format("{}: bandwidth must be between {:g} and {:g} GB/s (got {:g})", where(),
                                   kMinLinkBandwidthGbps, kMaxLinkFigure, link.bandwidth_gbps));
  }
  if (link.latency_us > kMaxLinkFigure) {
    throw InvalidInput(
        fmt::format("{}: latency must be at most {:g} us (got {:g})", where(), kMaxLinkFigure, link.latency_us));
  }
  const int index = static_cast<int>(links_.size());
  out_links_[link.src].push_back(index);
  in_links_[link.dst].push_back(index);
  links_.push_back(link);
  forget_traits();
  return index;
}

int Topology::add_duplex_link(int a, int b, LinkKind kind, double bandwidth_gbps, double latency_us, int lanes) {
  const int forward = add_link({a, b, kind, bandwidth_gbps, latency_us, lanes});
  add_link({b, a, kind, bandwidth_gbps, latency_us, lanes});
  return forward;
}

void Topology::finalize() {
  machine_count_ = 0;
  for (const Node& node : nodes_) {
    if (node.machine < -1) throw InvalidInput(fmt::format("topology: device '{}': machine must be >= 0", node.id));
    if (node.machine == -1 && node.kind != NodeKind::kNetSwitch) {
      throw InvalidInput(fmt::format("topology: device '{}': only a network switch may sit outside machines", node.id));
    }
    machine_count_ = std::max(machine_count_, node.machine + 1);
  }
  // Local indices: given ones must be unique per (machine, kind); missing ones
  // continue after the largest given one in node order.
  std::map<std::pair<int, NodeKind>, std::vector<int>> by_group;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) by_group[{nodes_[i].machine, nodes_[i].kind}].push_back(i);
  for (auto& [key, members] : by_group) {
    std::vector<bool> taken;
    int next = 0;
    for (int i : members) {
      const int local = nodes_[i].local_index;
      if (local < 0) continue;
      if (local >= static_cast<int>(taken.size())) taken.resize(local + 1, false);
      if (taken[local]) {
        throw InvalidInput(fmt::format("topology: device '{}': {} local index {} is used twice in machine {}",
                                       nodes_[i].id, to_string(key.second), local, key.first));
      }
      taken[local] = true;
      next = std::max(next, local + 1);
    }
    for (int i : members) {
      if (nodes_[i].local_index < 0) nodes_[i].local_index = next++;
    }
  }
  // GPUs: global index = machine·G + local when every machine has G GPUs with
  // local indices 0..G−1 (as TF numbers workers' devices), else consecutive.
  gpus_ = nodes_of_kind(NodeKind::kGpu);
  std::sort(gpus_.begin(), gpus_.end(), [&](int a, int b) {
    return std::pair(nodes_[a].machine, nodes_[a].local_index) < std::pair(nodes_[b].machine, nodes_[b].local_index);
  });
  const int per_machine = gpus_per_machine();
  for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
    Node& node = nodes_[gpus_[g]];
    const bool dense = per_machine > 0 && node.local_index < per_machine;
    node.global_index = dense ? node.machine * per_machine + node.local_index : g;
  }
  std::map<NodeKind, int> counters;
  for (Node& node : nodes_) {
    if (node.kind != NodeKind::kGpu) node.global_index = counters[node.kind]++;
  }
  for (auto& out : out_links_) {
    std::sort(out.begin(), out.end());
  }
  cache_ = std::make_unique<RouteCache>();
}

int Topology::find_node(std::string_view id) const {
  const auto it = index_by_id_.find(std::string(id));
  return it == index_by_id_.end() ? -1 : it->second;
}

std::vector<int> Topology::gpus_of_machine(int machine) const {
  std::vector<int> out;
  for (int g : gpus_) {
    if (nodes_[g].machine == machine) out.push_back(g);
  }
  return out;
}

int Topology::gpus_per_machine() const {
  if (machine_count_ == 0) return -1;
  std::vector<int> counts(machine_count_, 0);
  for (const Node& node : nodes_) {
    if (node.kind == NodeKind::kGpu && node.machine >= 0) ++counts[node.machine];
  }
  for (int c : counts) {
    if (c != counts[0]) return -1;
  }
  return counts[0];
}

std::vector<int> Topology::nodes_of_kind(NodeKind kind, int machine) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    if (nodes_[i].kind == kind && (machine < 0 || nodes_[i].machine == machine)) out.push_back(i);
  }
  return out;
}

namespace {

// Classifies a path that stays on PCIe and SMP links inside one machine, the
// way nvidia-smi / NCCL name them.
PathType classify_host_path(const std::vector<Node>& nodes, const std::vector<Link>& links,
                            const std::vector<int>& path, int from, int to) {
  bool crosses_smp = false;
  bool touches_cpu = nodes[from].kind == NodeKind::kCpu || nodes[to].kind == NodeKind::kCpu;
  int switches = 0;
  for (std::size_t i = 0; i < path.size(); ++i) {
    const Link& link = links[path[i]];
    if (link.kind == LinkKind::kSmp) crosses_smp = true;
    if (i + 1 < path.size()) {
      const Node& mid = nodes[link.dst];
      if (mid.kind == NodeKind::kCpu) touches_cpu = true;
      if (mid.kind == NodeKind::kPcieSwitch) ++switches;
    }
  }
  if (crosses_smp) return PathType::kSys;
  if (touches_cpu) return PathType::kPhb;
  return switches <= 1 ? PathType::kPix : PathType::kPxb;
}

}  // namespace

const Route& Topology::route(int a, int b) const {
  const int n = static_cast<int>(nodes_.size());
  if (a < 0 || a >= n || b < 0 || b >= n) {
    throw InvalidInput(fmt::format("topology: route between unknown nodes {} and {}", a, b));
  }
  const std::uint64_t key =
      static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(n) + static_cast<std::uint64_t>(b);
  {
    std::shared_lock lock(cache_->mutex);
    const auto it = cache_->routes.find(key);
    if (it != cache_->routes.end()) return it->second;
  }

  Route result;
  const PathSearch search{nodes_, links_, out_links_};
  const auto finish = [&](PathType type, std::vector<int> path) {
    result.type = type;
    result.links = std::move(path);
    result.bandwidth_gbps = kInfinity;
    result.latency_us = 0;
    for (int l : result.links) {
      result.bandwidth_gbps = std::min(result.bandwidth_gbps, links_[l].bandwidth_gbps);
      result.latency_us += links_[l].latency_us;
    }
  };
  const auto no_route = [&] {
    return Unsupported(fmt::format("topology '{}': no route from {} to {}", name_, nodes_[a].id, nodes_[b].id));
  };

  if (a == b) {
    finish(PathType::kLoc, {});
  } else if (nodes_[a].machine != nodes_[b].machine || nodes_[a].machine < 0) {
    // Leave through the nearest NIC, cross the network, enter through the
    // destination's nearest NIC. NICs and the network switch themselves are
    // endpoints of the corresponding legs.
    const int nic_a = nodes_[a].kind == NodeKind::kNic || nodes_[a].machine < 0 ? a : nearest_nic(a);
    const int nic_b = nodes_[b].kind == NodeKind::kNic || nodes_[b].machine < 0 ? b : nearest_nic(b);
    if (nic_a < 0 || nic_b < 0) throw no_route();
    std::vector<int> path = route(a, nic_a).links;
    const auto net = network_path(nic_a, nic_b);
    if (net.empty() && nic_a != nic_b) throw no_route();
    path.insert(path.end(), net.begin(), net.end());
    const auto& tail = route(nic_b, b).links;
    path.insert(path.end(), tail.begin(), tail.end());
    finish(PathType::kNet, std::move(path));
  } else {
    // NVLink first, directly or through NVSwitches only: a copy engine does
    // not forward through another GPU, so GPU-relayed NVLink (NVB) is not a
    // transfer route here.
    auto path = search.find(
        a, b, [](const Link& l) { return l.kind == LinkKind::kNvLink; },
        [](const Node& node) { return node.kind == NodeKind::kNvSwitch; });
    if (!path.empty()) {
      finish(PathType::kNvl, std::move(path));
    } else {
      path = search.find(
          a, b, [](const Link& l) { return l.kind == LinkKind::kPcie || l.kind == LinkKind::kSmp; },
          [](const Node& node) { return node.kind == NodeKind::kPcieSwitch || node.kind == NodeKind::kCpu; });
      if (path.empty()) {
        path = search.find(
            a, b, [](const Link& l) { return l.kind != LinkKind::kNetwork; }, [](const Node&) { return true; });
        if (path.empty()) throw no_route();
        finish(PathType::kSys, std::move(path));
      } else {
        const PathType type = classify_host_path(nodes_, links_, path, a, b);
        finish(type, std::move(path));
      }
    }
  }

  std::unique_lock lock(cache_->mutex);
  return cache_->routes.emplace(key, std::move(result)).first->second;
}

std::vector<int> Topology::network_path(int nic_a, int nic_b) const {
  // One breadth-first tree per source NIC over network links (through network
  // switches only), so a cluster of N NICs costs N searches, not N² of them.
  const std::vector<int>* tree = nullptr;
  {
    std::shared_lock lock(cache_->mutex);
    const auto it = cache_->network_tree.find(nic_a);
    if (it != cache_->network_tree.end()) tree = &it->second;
  }
  if (tree == nullptr) {
    std::vector<int> via(nodes_.size(), -1);
    std::vector<bool> seen(nodes_.size(), false);
    std::deque<int> queue{nic_a};
    seen[nic_a] = true;
    while (!queue.empty()) {
      const int u = queue.front();
      queue.pop_front();
      if (u != nic_a && nodes_[u].kind != NodeKind::kNetSwitch) continue;
      for (int l : out_links_[u]) {
        const Link& link = links_[l];
        if (link.kind != LinkKind::kNetwork || seen[link.dst]) continue;
        seen[link.dst] = true;
        via[link.dst] = l;
        queue.push_back(link.dst);
      }
    }
    std::unique_lock lock(cache_->mutex);
    tree = &cache_->network_tree.emplace(nic_a, std::move(via)).first->second;
  }
  std::vector<int> path;
  if (nic_a == nic_b || (*tree)[nic_b] < 0) return path;
  for (int v = nic_b; v != nic_a; v = links_[(*tree)[v]].src) path.push_back((*tree)[v]);
  std::reverse(path.begin(), path.end());
  return path;
}

int Topology::network_port(int nic) const {
  for (const int l : out_links(nic)) {
    if (links_[static_cast<std::size_t>(l)].kind == LinkKind::kNetwork) return l;
  }
  return -1;
}

int Topology::nearest_nic(int node) const {
  {
    std::shared_lock lock(cache_->mutex);
    const auto it = cache_->nearest_nic.find(node);
    if (it != cache_->nearest_nic.end()) return it->second;
  }
  // The NICs tied for the best route class, bandwidth and hop count; GPUs
  // spread over tied NICs by local index (two NICs under one PCIe switch serve
  // one GPU each, as NCCL assigns them).
  std::vector<int> tied;
  std::tuple<PathType, double, int> best_key{PathType::kNet, 0.0, 0};
  for (int nic : nodes_of_kind(NodeKind::kNic, nodes_.at(node).machine)) {
    const Route& r = route(node, nic);
    const std::tuple<PathType, double, int> key{r.type, -r.bandwidth_gbps, static_cast<int>(r.links.size())};
    if (tied.empty() || key < best_key) {
      tied.assign(1, nic);
      best_key = key;
    } else if (key == best_key) {
      tied.push_back(nic);
    }
  }
  const int spread = nodes_[node].kind == NodeKind::kGpu ? std::max(0, nodes_[node].local_index) : 0;
  const int best = tied.empty() ? -1 : tied[spread % tied.size()];
  std::unique_lock lock(cache_->mutex);
  cache_->nearest_nic[node] = best;
  return best;
}

int Topology::nvlink_lanes(int a, int b) const {
  int lanes = 0;
  for (int l : out_links_.at(a)) {
    if (links_[l].dst == b && links_[l].kind == LinkKind::kNvLink) lanes += links_[l].lanes;
  }
  return lanes;
}

bool Topology::peer_access(int a, int b) const { return route(a, b).type <= PathType::kPxb; }

namespace {
// A NIC's stated fabric (changes what the machine runs; topologies that state none keep their fingerprints).
std::string fabric_traits(const Node& node) {
  if (!node.net.stated()) return {};
  return fmt::format("nn|{}|{:.6g}|{:.6g}|{:.6g}|{};", node.net.kind ? to_string(*node.net.kind) : "-",
                     node.net.reported_latency_us, node.net.extra_step_us, node.net.efficiency, node.net.protocols);
}

std::string link_traits(const Link& link) {
  return fmt::format("{}|{:.6g}|{:.6g}|{}", to_string(link.kind), link.bandwidth_gbps, link.latency_us, link.lanes);
}
}  // namespace

std::string node_traits(const Node& node) {
  return fmt::format("{}|{}", node.kind == NodeKind::kNic ? "" : node.arch, fabric_traits(node));
}

void Topology::forget_traits() {
  std::unique_lock lock(cache_->mutex);
  cache_->fingerprint.reset();
  cache_->machine_shape.clear();
}

void Topology::set_network(NetworkSpec spec) {
  network_ = spec;
  forget_traits();
}

std::string Topology::fingerprint() const {
  {
    std::shared_lock lock(cache_->mutex);
    if (cache_->fingerprint) return *cache_->fingerprint;
  }
  std::uint64_t hash = 1469598103934665603ull;
  for (const Node& node : nodes_) {
    hash = fnv1a(hash, fmt::format("n|{}|{}|{}|{};", node.id, to_string(node.kind), node.machine, node.local_index));
    hash = fnv1a(hash, fabric_traits(node));
  }
  for (const Link& link : links_) {
    hash = fnv1a(hash, fmt::format("l|{}|{}|{};", nodes_[link.src].id, nodes_[link.dst].id, link_traits(link)));
  }
  if (network_) {
    hash = fnv1a(hash, fmt::format("net|{:.6g}|{:.6g}|{:.6g};", network_->nic_bandwidth_gbps, network_->latency_us,
                                   network_->oversubscription));
  }
  std::string out = fmt::format("{:016x}", hash);
  std::unique_lock lock(cache_->mutex);
  cache_->fingerprint = out;
  return out;
}

std::string Topology::machine_shape(int machine) const {
  {
    std::shared_lock lock(cache_->mutex);
    const auto it = cache_->machine_shape.find(machine);
    if (it != cache_->machine_shape.end()) return it->second;
  }
  const auto place = [&](int node) {
    const Node& n = nodes_[static_cast<std::size_t>(node)];
    return n.machine == machine ? fmt::format("{}:{}", to_string(n.kind), n.local_index) : "x:" + n.id;
  };
  std::vector<std::string> parts;
  const auto add_link = [&](int l) {
    const Link& link = links_[static_cast<std::size_t>(l)];
    parts.push_back(fmt::format("l{}>{}|{}", place(link.src), place(link.dst), link_traits(link)));
  };
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].machine != machine) continue;
    parts.push_back(fmt::format("n{}|{}", place(static_cast<int>(i)), node_traits(nodes_[i])));
    for (const int l : out_links_[i]) add_link(l);
    for (const int l : in_links_[i]) {
      if (nodes_[static_cast<std::size_t>(links_[static_cast<std::size_t>(l)].src)].machine != machine) add_link(l);
    }
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const std::string& part : parts) out += part + ";";
  std::unique_lock lock(cache_->mutex);
  cache_->machine_shape.emplace(machine, out);
  return out;
}

std::string_view to_string(NodeKind kind) noexcept {
  for (const auto& [k, name] : kNodeKindNames) {
    if (k == kind) return name;
  }
  return "?";
}

std::string_view to_string(LinkKind kind) noexcept {
  for (const auto& [k, name] : kLinkKindNames) {
    if (k == kind) return name;
  }
  return "?";
}

std::string_view to_string(PathType type) noexcept {
  switch (type) {
    case PathType::kLoc: return "X";
    case PathType::kNvl: return "NVL";
    case PathType::kNvb: return "NVB";
    case PathType::kPix: return "PIX";
    case PathType::kPxb: return "PXB";
    case PathType::kPxn: return "PXN";
    case PathType::kPhb: return "PHB";
    case PathType::kNode: return "NODE";
    case PathType::kSys: return "SYS";
    case PathType::kNet: return "NET";
  }
  return "?";
}

std::optional<NodeKind> parse_node_kind(std::string_view text) {
  for (const auto& [k, name] : kNodeKindNames) {
    if (name == text) return k;
  }
  return std::nullopt;
}

std::optional<LinkKind> parse_link_kind(std::string_view text) {
  for (const auto& [k, name] : kLinkKindNames) {
    if (name == text) return k;
  }
  return std::nullopt;
}

std::string_view to_string(NetKind kind) noexcept {
  for (const auto& [k, name] : kNetKindNames) {
    if (k == kind) return name;
  }
  return "?";
}

std::optional<NetKind> parse_net_kind(std::string_view text) {
  for (const auto& [k, name] : kNetKindNames) {
    if (name == text) return k;
  }
  return std::nullopt;
}

namespace {
// In the order messages list them (cpu_arch_choices).
constexpr std::pair<CpuArch, std::string_view> kCpuArchNames[] = {
    {{CpuIsa::kUnknown, CpuVendor::kUnknown}, ""},
    {{CpuIsa::kX86, CpuVendor::kIntel}, "x86_64-intel"},
    {{CpuIsa::kX86, CpuVendor::kAmd}, "x86_64-amd"},
    {{CpuIsa::kX86, CpuVendor::kZhaoxin}, "x86_64-zhaoxin"},
    {{CpuIsa::kX86, CpuVendor::kUnknown}, "x86_64"},
    {{CpuIsa::kArm, CpuVendor::kUnknown}, "arm64"},
    {{CpuIsa::kPower, CpuVendor::kUnknown}, "ppc64"},
};
}  // namespace

std::optional<CpuArch> parse_cpu_arch(std::string_view text) {
  for (const auto& [arch, name] : kCpuArchNames) {
    if (name == text) return arch;
  }
  return std::nullopt;
}

std::string cpu_arch_choices() {
  std::vector<std::string_view> names;
  for (const auto& [arch, name] : kCpuArchNames) {
    if (!name.empty()) names.push_back(name);
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

std::string to_string(CpuArch arch) {
  for (const auto& [a, name] : kCpuArchNames) {
    if (a == arch) return std::string(name);
  }
  return {};
}

std::string cpu_arch_from_nccl(std::string_view arch, std::string_view vendor) {
  CpuArch out;
  if (arch == "x86_64") {
    out.isa = CpuIsa::kX86;
    std::string_view v = vendor;  // xml.cc pads Zhaoxin's "  Shanghai  " as CPUID returns it
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    if (v == "GenuineIntel") out.vendor = CpuVendor::kIntel;
    else if (v == "AuthenticAMD") out.vendor = CpuVendor::kAmd;
    else if (v == "CentaurHauls" || v == "Shanghai") out.vendor = CpuVendor::kZhaoxin;
  } else if (arch == "arm64" || arch == "aarch64") {
    out.isa = CpuIsa::kArm;
  } else if (arch == "ppc64" || arch == "ppc64le") {
    out.isa = CpuIsa::kPower;
  }
  return to_string(out);
}

namespace {
template <typename T, typename F>
std::vector<std::vector<T>> gpu_matrix(const Topology& topo, F&& cell) {
  const auto& gpus = topo.gpus();
  std::vector<std::vector<T>> m(gpus.size(), std::vector<T>(gpus.size()));
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = 0; j < gpus.size(); ++j) m[i][j] = cell(gpus[i], gpus[j]);
  }
  return m;
}
}  // namespace

std::vector<std::vector<bool>> peer_matrix(const Topology& topo) {
  return gpu_matrix<bool>(topo, [&](int a, int b) { return topo.peer_access(a, b); });
}

std::vector<std::vector<int>> nvlink_matrix(const Topology& topo) {
  // Direct bonded lanes; through an NVSwitch, the narrowest hop of the route
  // (what nvidia-smi prints as NV18 on a DGX H100).
  return gpu_matrix<int>(topo, [&](int a, int b) {
    if (a == b) return 0;
    const int direct = topo.nvlink_lanes(a, b);
    if (direct > 0) return direct;
    const Route& r = topo.route(a, b);
    if (r.type != PathType::kNvl) return 0;
    int lanes = std::numeric_limits<int>::max();
    for (int l : r.links) lanes = std::min(lanes, topo.links()[l].lanes);
    return lanes;
  });
}

std::vector<std::vector<double>> bandwidth_matrix(const Topology& topo) {
  return gpu_matrix<double>(topo, [&](int a, int b) { return a == b ? 0.0 : topo.route(a, b).bandwidth_gbps; });
}

std::vector<std::vector<PathType>> path_type_matrix(const Topology& topo) {
  return gpu_matrix<PathType>(topo, [&](int a, int b) { return topo.route(a, b).type; });
}

}  // namespace artune
