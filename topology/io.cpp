// The native JSON topology format (full, compact and cluster forms), the
// built-in configs embedded at build time, the generators and join_machines.
//
// Every rejected input ends in one InvalidInput whose message is a single
// line "SOURCE: json.path: reason" (configs/README.md documents the format).

#include "topology/io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "core/error.hpp"
#include "core/input.hpp"
#include "core/json_input.hpp"
#include "core/json_reader.hpp"
#include "topology/io_embedded.hpp"

namespace artune {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Per-hop latencies (µs) used when a config gives none: NCCL's hop latencies
// for the LL protocol (src/graph/tuning.cc, hwLat: NVLink 0.6, PCIe 1.0,
// network 2.7). An SMP hop is a host-bridge hop like PCIe's.
constexpr double kNvlinkLatencyUs = 0.6;
constexpr double kPcieLatencyUs = 1.0;
constexpr double kSmpLatencyUs = 1.0;
constexpr double kNetworkLatencyUs = 2.7;

// Compact-form defaults (GB/s per direction): PCIe Gen3 x16 as NCCL counts it,
// Skylake UPI as NCCL counts it for P2P (SKL_QPI_BW), an EDR InfiniBand port.
constexpr double kDefaultPcieBandwidth = 12.0;
constexpr double kDefaultSmpBandwidth = 10.0;
constexpr double kDefaultNicBandwidth = 12.5;

// The uniform:G generator: NVLink 2-4 lane rate and PCIe Gen3.
constexpr double kUniformNvlinkBandwidth = 25.0;
constexpr double kUniformPcieBandwidth = 12.0;

// Bounds that turn a typo ("uniform:80000") into a message instead of an
// allocation failure. uniform:G is all-to-all: G·(G−1) directed links.
constexpr int kMaxGpusPerMachine = 1024;
constexpr int kMaxUniformGpus = 256;
constexpr int kMaxMachines = 4096;
constexpr long long kMaxTotalGpus = 65536;
constexpr long long kMaxTotalLinks = 4'000'000;
constexpr int kMaxLanes = 1024;
constexpr double kMaxFigure = 1e9;
// Bandwidths below 1 KB/s (1e-6 GB/s) are typos too, and near-zero values such as 1e-300
// would turn transfer times into infinities in the simulator.
constexpr double kMinBandwidth = 1e-6;
constexpr std::uintmax_t kMaxFileBytes = 64u << 20;

// Output keys that topology_to_json derives from the model; readers ignore
// them so that `topo show --json` output loads back.
constexpr std::string_view kDerivedKeys[] = {"machine_count",    "gpus_per_machine", "gpus",
                                             "peer_matrix",      "nvlink_matrix",    "path_matrix",
                                             "bandwidth_matrix", "fingerprint"};

double default_latency(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvLink: return kNvlinkLatencyUs;
    case LinkKind::kPcie: return kPcieLatencyUs;
    case LinkKind::kSmp: return kSmpLatencyUs;
    case LinkKind::kNetwork: return kNetworkLatencyUs;
    case LinkKind::kLoopback: return 0.0;
  }
  return 0.0;
}

// Quotes a user-supplied string for a one-line message.
std::string quote_text(std::string_view text) {
  std::string out = "'";
  for (unsigned char c : text.substr(0, 80)) {
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > 80) out += "...";
  return out + "'";
}

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text;
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string field(const std::string& path, std::string_view key) { return json_reader::member_path(path, key); }

std::string item(const std::string& path, std::size_t index) { return json_reader::index_path(path, index); }

bool is_ignored_key(std::string_view key) { return json_reader::is_free_key(key); }

// Reads typed fields and reports errors as "SOURCE: path: reason".
class Reader {
 public:
  Reader(std::string source, fs::path base_dir) : source_(std::move(source)), base_dir_(std::move(base_dir)) {}

  const std::string& source() const { return source_; }
  const fs::path& base_dir() const { return base_dir_; }

  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw InvalidInput(one_line(json_reader::message(source_, path, reason)));
  }

  void expect_object(const json& value, const std::string& path) const {
    if (!value.is_object()) fail(path, json_reader::type_error("an object", value));
  }

  void expect_array(const json& value, const std::string& path) const {
    if (!value.is_array()) fail(path, json_reader::type_error("an array", value));
  }

  // Rejects keys outside `allowed` (typos such as "bandwith" would otherwise
  // be silently ignored); "comment" and keys starting with '_' are free.
  void allow_keys(const json& object, const std::string& path, std::initializer_list<std::string_view> allowed,
                  bool allow_derived = false) const {
    for (const auto& [key, value] : object.items()) {
      if (is_ignored_key(key)) continue;
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      if (allow_derived && std::find(std::begin(kDerivedKeys), std::end(kDerivedKeys), key) != std::end(kDerivedKeys)) {
        continue;
      }
      std::vector<std::string> names(allowed.begin(), allowed.end());
      fail(field(path, key), fmt::format("unknown field (expected {})", join_list(names)));
    }
  }

  static const json* find(const json& object, std::string_view key) {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }

  const json& required(const json& object, const std::string& path, std::string_view key) const {
    const json* value = find(object, key);
    if (value == nullptr) fail(field(path, key), "missing");
    return *value;
  }

  std::string string(const json& value, const std::string& path) const {
    if (!value.is_string()) fail(path, json_reader::type_error("a string", value));
    return value.get<std::string>();
  }

  std::string name(const json& value, const std::string& path) const {
    std::string text = string(value, path);
    if (text.empty()) fail(path, "must not be empty");
    for (unsigned char c : text) {
      if (c < 0x20 || c == 0x7f) fail(path, fmt::format("{} contains a control character", quote_text(text)));
    }
    return text;
  }

  double number(const json& value, const std::string& path) const {
    if (!value.is_number()) fail(path, json_reader::type_error("a number", value));
    const double x = value.get<double>();
    if (!std::isfinite(x)) fail(path, "must be a finite number");
    return x;
  }

  // Bandwidths (GB/s) and latencies (µs) beyond kMaxFigure are typos; the cap
  // also keeps lanes × lane bandwidth finite.
  double positive(const json& value, const std::string& path) const {
    const double x = number(value, path);
    if (!(x > 0)) fail(path, fmt::format("must be > 0 (got {:g})", x));
    if (x < kMinBandwidth) fail(path, fmt::format("must be at least {:g} (got {:g})", kMinBandwidth, x));
    if (x > kMaxFigure) fail(path, fmt::format("must be at most {:g} (got {:g})", kMaxFigure, x));
    return x;
  }

  double non_negative(const json& value, const std::string& path) const {
    const double x = number(value, path);
    if (x < 0) fail(path, fmt::format("must be >= 0 (got {:g})", x));
    if (x > kMaxFigure) fail(path, fmt::format("must be at most {:g} (got {:g})", kMaxFigure, x));
    return x;
  }

  long long integer(const json& value, const std::string& path, long long lo, long long hi) const {
    if (!value.is_number_integer()) fail(path, json_reader::type_error("an integer", value));
    long long x = 0;
    if (value.is_number_unsigned()) {
      const auto u = value.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(hi)) fail(path, fmt::format("must be between {} and {} (got {})", lo, hi, u));
      x = static_cast<long long>(u);
    } else {
      x = value.get<long long>();
    }
    if (x < lo || x > hi) fail(path, fmt::format("must be between {} and {} (got {})", lo, hi, x));
    return x;
  }

  bool boolean(const json& value, const std::string& path) const {
    if (!value.is_boolean()) fail(path, json_reader::type_error("true or false", value));
    return value.get<bool>();
  }

  static std::string describe(const json& value) { return json_reader::describe(value); }

 private:
  std::string source_;
  fs::path base_dir_;
};

// A single machine (or a flat cluster from the full form) plus the NIC port
// speed the document states for joining it into clusters (0 when absent).
struct Loaded {
  Topology topo;
  double nic_bandwidth = 0;
};

// Runs Topology's own checks (finalize) and names the source on failure.
void finalize_checked(Topology& topo, const Reader& reader, const std::string& path) {
  try {
    topo.finalize();
  } catch (const InvalidInput& e) {
    std::string what = e.what();
    if (what.rfind("topology: ", 0) == 0) what = what.substr(10);
    reader.fail(path, what);
  }
}

NetworkSpec parse_network(const json& value, const Reader& reader, const std::string& path, double default_nic) {
  reader.expect_object(value, path);
  reader.allow_keys(value, path, {"nic_bandwidth", "latency", "oversubscription"});
  NetworkSpec spec;
  spec.nic_bandwidth_gbps = default_nic > 0 ? default_nic : kDefaultNicBandwidth;
  if (const json* v = Reader::find(value, "nic_bandwidth"))
    spec.nic_bandwidth_gbps = reader.positive(*v, field(path, "nic_bandwidth"));
  if (const json* v = Reader::find(value, "latency")) spec.latency_us = reader.non_negative(*v, field(path, "latency"));
  if (const json* v = Reader::find(value, "oversubscription")) {
    spec.oversubscription = reader.number(*v, field(path, "oversubscription"));
    if (spec.oversubscription < 1)
      reader.fail(field(path, "oversubscription"), fmt::format("must be >= 1 (got {})", spec.oversubscription));
  }
  return spec;
}

// Which link kinds may join which node kinds.
bool endpoint_allowed(LinkKind link, NodeKind node) {
  switch (link) {
    case LinkKind::kNvLink: return node == NodeKind::kGpu || node == NodeKind::kNvSwitch || node == NodeKind::kCpu;
    case LinkKind::kPcie: return node != NodeKind::kNetSwitch;
    case LinkKind::kSmp: return node == NodeKind::kCpu;
    case LinkKind::kNetwork: return node == NodeKind::kNic || node == NodeKind::kNetSwitch;
    case LinkKind::kLoopback: return false;
  }
  return false;
}

// Fails when some device cannot be reached from the first one.
void check_connected(const Topology& topo, const std::vector<std::pair<int, int>>& edges, const Reader& reader,
                     const std::string& path) {
  const int n = static_cast<int>(topo.nodes().size());
  if (n <= 1) return;
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  const auto root = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (const auto& [a, b] : edges) parent[root(a)] = root(b);
  for (int i = 1; i < n; ++i) {
    if (root(i) != root(0)) {
      reader.fail(path, fmt::format("device {} is not connected to {}", quote_text(topo.nodes()[i].id),
                                    quote_text(topo.nodes()[0].id)));
    }
  }
}

// ---- full form -------------------------------------------------------------

Loaded parse_full(const json& doc, const Reader& reader, const std::string& path, const std::string& default_name) {
  reader.allow_keys(doc, path, {"name", "description", "devices", "links", "network", "nic_bandwidth"}, true);
  Loaded out;
  Topology& topo = out.topo;
  topo.set_name(Reader::find(doc, "name") ? reader.name(doc["name"], field(path, "name")) : default_name);
  if (const json* d = Reader::find(doc, "description"))
    topo.set_description(reader.string(*d, field(path, "description")));
  if (const json* v = Reader::find(doc, "nic_bandwidth"))
    out.nic_bandwidth = reader.positive(*v, field(path, "nic_bandwidth"));

  const std::string devices_path = field(path, "devices");
  const json& devices = reader.required(doc, path, "devices");
  reader.expect_array(devices, devices_path);
  if (devices.empty()) reader.fail(devices_path, "must list at least one device");

  std::unordered_map<std::string, std::size_t> index_of;
  std::map<std::tuple<int, NodeKind, int>, std::size_t> local_owner;
  std::vector<Node> nodes;
  nodes.reserve(devices.size());
  int max_machine = -1;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string p = item(devices_path, i);
    const json& d = devices[i];
    reader.expect_object(d, p);
    reader.allow_keys(d, p, {"id", "kind", "machine", "local", "arch", "bus_id"});
    Node node;
    node.id = reader.name(reader.required(d, p, "id"), field(p, "id"));
    const std::string kind_text = reader.string(reader.required(d, p, "kind"), field(p, "kind"));
    const auto kind = parse_node_kind(kind_text);
    if (!kind) {
      reader.fail(field(p, "kind"),
                  fmt::format("unknown kind {} (expected gpu, cpu, pcie_switch, nvswitch, nic or net_switch)",
                              quote_text(kind_text)));
    }
    node.kind = *kind;
    node.machine = node.kind == NodeKind::kNetSwitch ? -1 : 0;
    if (const json* m = Reader::find(d, "machine")) {
      node.machine = static_cast<int>(reader.integer(*m, field(p, "machine"), -1, kMaxMachines - 1));
      if (node.kind == NodeKind::kNetSwitch && node.machine != -1) {
        reader.fail(field(p, "machine"), "a net_switch belongs to no machine (omit the field or give -1)");
      }
      if (node.kind != NodeKind::kNetSwitch && node.machine < 0) {
        reader.fail(field(p, "machine"), "must be >= 0 (only a net_switch sits outside machines)");
      }
    }
    if (const json* l = Reader::find(d, "local")) {
      node.local_index = static_cast<int>(reader.integer(*l, field(p, "local"), 0, 1 << 20));
      const auto [it, fresh] = local_owner.emplace(std::tuple(node.machine, node.kind, node.local_index), i);
      if (!fresh) {
        reader.fail(field(p, "local"), fmt::format("local index {} is already used by {} ({})", node.local_index,
                                                   quote_text(nodes[it->second].id), item(devices_path, it->second)));
      }
    }
    if (const json* a = Reader::find(d, "arch")) node.arch = reader.string(*a, field(p, "arch"));
    if (const json* b = Reader::find(d, "bus_id")) node.bus_id = reader.string(*b, field(p, "bus_id"));
    const auto [it, fresh] = index_of.emplace(node.id, i);
    if (!fresh) {
      reader.fail(field(p, "id"), fmt::format("duplicate id {} (first given at {})", quote_text(node.id),
                                              item(devices_path, it->second)));
    }
    max_machine = std::max(max_machine, node.machine);
    nodes.push_back(std::move(node));
  }

  // Machines must be numbered 0..M-1, and each machine's GPUs 0..G-1:
  // a GPU's global index is machine·G + local.
  std::vector<int> gpus_in_machine(max_machine + 1, 0);
  std::vector<bool> machine_seen(max_machine + 1, false);
  std::vector<std::set<int>> given_gpu_locals(max_machine + 1);
  for (const Node& node : nodes) {
    if (node.machine < 0) continue;
    machine_seen[node.machine] = true;
    if (node.kind == NodeKind::kGpu) {
      ++gpus_in_machine[node.machine];
      if (node.local_index >= 0) given_gpu_locals[node.machine].insert(node.local_index);
    }
  }
  // The generators' limits hold for full-form files too: the GPU-pair matrices of routes and candidates grow
  // with the square of these counts.
  long long total_gpus = 0;
  for (int m = 0; m <= max_machine; ++m) {
    total_gpus += gpus_in_machine[m];
    if (gpus_in_machine[m] > kMaxGpusPerMachine) {
      reader.fail(devices_path, fmt::format("machine {} has {} GPUs, more than the supported {} per machine", m,
                                            gpus_in_machine[m], kMaxGpusPerMachine));
    }
  }
  if (total_gpus > kMaxTotalGpus) {
    reader.fail(devices_path, fmt::format("{} GPUs in all is more than the supported {}", total_gpus, kMaxTotalGpus));
  }
  for (int m = 0; m <= max_machine; ++m) {
    if (!machine_seen[m]) {
      reader.fail(devices_path,
                  fmt::format("no device belongs to machine {} (machines must be numbered 0..{} without gaps)", m,
                              max_machine));
    }
    // Devices without "local" take the indices after the largest given one,
    // so the final set has no gap exactly when the given ones are 0..k-1.
    const auto& given = given_gpu_locals[m];
    if (!given.empty() && static_cast<int>(given.size()) != *given.rbegin() + 1) {
      int missing = 0;
      while (given.count(missing) != 0) ++missing;
      reader.fail(devices_path,
                  fmt::format("no GPU of machine {} has local index {} (GPU local indices must run 0..{})", m, missing,
                              gpus_in_machine[m] - 1));
    }
  }

  for (Node& node : nodes) topo.add_node(std::move(node));

  const std::string links_path = field(path, "links");
  const json& links = reader.required(doc, path, "links");
  reader.expect_array(links, links_path);
  // (src, dst, kind) → the links[] entry that gave it.
  std::map<std::tuple<int, int, LinkKind>, std::size_t> given;
  std::vector<std::tuple<int, int, LinkKind, std::size_t>> directed;
  std::vector<std::pair<int, int>> edges;
  const auto& all = topo.nodes();
  for (std::size_t j = 0; j < links.size(); ++j) {
    const std::string p = item(links_path, j);
    const json& l = links[j];
    reader.expect_object(l, p);
    reader.allow_keys(l, p, {"a", "b", "kind", "bandwidth", "latency", "lanes", "directed"});
    int ends[2] = {-1, -1};
    for (int e = 0; e < 2; ++e) {
      const char* key = e == 0 ? "a" : "b";
      const std::string id = reader.string(reader.required(l, p, key), field(p, key));
      ends[e] = topo.find_node(id);
      if (ends[e] < 0) reader.fail(field(p, key), fmt::format("unknown device {}", quote_text(id)));
    }
    const int a = ends[0];
    const int b = ends[1];
    const std::string kind_text = reader.string(reader.required(l, p, "kind"), field(p, "kind"));
    const auto kind = parse_link_kind(kind_text);
    if (!kind) {
      reader.fail(field(p, "kind"),
                  fmt::format("unknown kind {} (expected nvlink, pcie, smp or network)", quote_text(kind_text)));
    }
    if (*kind == LinkKind::kLoopback) reader.fail(field(p, "kind"), "loopback links are implicit and cannot be given");
    if (a == b) reader.fail(field(p, "b"), fmt::format("a device cannot link to itself ({})", quote_text(all[a].id)));
    for (int end : {a, b}) {
      if (!endpoint_allowed(*kind, all[end].kind)) {
        reader.fail(p, fmt::format("a {} link cannot attach to a {} ({})", to_string(*kind), to_string(all[end].kind),
                                   quote_text(all[end].id)));
      }
    }
    if (all[a].machine >= 0 && all[b].machine >= 0 && all[a].machine != all[b].machine && *kind != LinkKind::kNetwork) {
      reader.fail(
          p,
          fmt::format("a {} link cannot join machine {} ({}) and machine {} ({}); only network links cross machines",
                      to_string(*kind), all[a].machine, quote_text(all[a].id), all[b].machine, quote_text(all[b].id)));
    }
    const double bandwidth = reader.positive(reader.required(l, p, "bandwidth"), field(p, "bandwidth"));
    double latency = default_latency(*kind);
    if (const json* v = Reader::find(l, "latency")) latency = reader.non_negative(*v, field(p, "latency"));
    int lanes = 1;
    if (const json* v = Reader::find(l, "lanes"))
      lanes = static_cast<int>(reader.integer(*v, field(p, "lanes"), 1, kMaxLanes));
    bool is_directed = false;
    if (const json* v = Reader::find(l, "directed")) is_directed = reader.boolean(*v, field(p, "directed"));

    // Two entries for the same direction and kind contradict each other (or
    // double-count); bonded links are one entry with "lanes".
    const auto claim = [&](int src, int dst) {
      const auto [it, fresh] = given.emplace(std::tuple(src, dst, *kind), j);
      if (!fresh) {
        reader.fail(
            p, fmt::format(
                   "duplicate {} link between {} and {} (already given by {}); give one link with \"lanes\" instead",
                   to_string(*kind), quote_text(all[a].id), quote_text(all[b].id), item(links_path, it->second)));
      }
    };
    claim(a, b);
    if (is_directed) {
      topo.add_link({a, b, *kind, bandwidth, latency, lanes});
      directed.emplace_back(a, b, *kind, j);
    } else {
      claim(b, a);
      topo.add_duplex_link(a, b, *kind, bandwidth, latency, lanes);
    }
    edges.emplace_back(a, b);
  }
  // Every physical link is full duplex: a directed entry needs its reverse
  // (directed entries exist for asymmetric bandwidths or latencies).
  for (const auto& [a, b, kind, j] : directed) {
    if (given.count(std::tuple(b, a, kind)) == 0) {
      reader.fail(
          item(links_path, j),
          fmt::format("directed {} link {} -> {} has no reverse link (omit \"directed\" for a full-duplex link)",
                      to_string(kind), quote_text(all[a].id), quote_text(all[b].id)));
    }
  }
  check_connected(topo, edges, reader, links_path);
  if (const json* n = Reader::find(doc, "network"))
    topo.set_network(parse_network(*n, reader, field(path, "network"), out.nic_bandwidth));
  finalize_checked(topo, reader, devices_path);
  return out;
}

// ---- compact form ----------------------------------------------------------

// Reads a list of lists of indices in [0, limit) in which every index appears
// at most once; returns the lists and, per index, the list holding it (-1).
std::pair<std::vector<std::vector<int>>, std::vector<int>> parse_partition(const json& value, const Reader& reader,
                                                                           const std::string& path, int limit,
                                                                           std::string_view what) {
  reader.expect_array(value, path);
  std::vector<std::vector<int>> groups;
  std::vector<int> owner(limit, -1);
  for (std::size_t g = 0; g < value.size(); ++g) {
    const std::string gp = item(path, g);
    reader.expect_array(value[g], gp);
    groups.emplace_back();
    for (std::size_t k = 0; k < value[g].size(); ++k) {
      const std::string ip = item(gp, k);
      const int index = static_cast<int>(reader.integer(value[g][k], ip, 0, limit - 1));
      if (owner[index] >= 0)
        reader.fail(ip, fmt::format("{} {} is already listed in {}", what, index, item(path, owner[index])));
      owner[index] = static_cast<int>(g);
      groups.back().push_back(index);
    }
  }
  return {std::move(groups), std::move(owner)};
}

Loaded parse_compact(const json& doc, const Reader& reader, const std::string& path, const std::string& default_name) {
  reader.allow_keys(doc, path, {"name", "description", "compact"});
  Loaded out;
  Topology& topo = out.topo;
  topo.set_name(Reader::find(doc, "name") ? reader.name(doc["name"], field(path, "name")) : default_name);
  if (const json* d = Reader::find(doc, "description"))
    topo.set_description(reader.string(*d, field(path, "description")));

  const std::string cp = field(path, "compact");
  const json& c = doc["compact"];
  reader.expect_object(c, cp);
  reader.allow_keys(
      c, cp,
      {"gpus", "arch", "nvlink", "nvlink_lane_bandwidth", "nvswitch", "pcie_switches", "sockets", "pcie_bandwidth",
       "smp_bandwidth", "nics_per_switch", "nics_per_socket", "nic_bandwidth", "latency"});
  const int gpus =
      static_cast<int>(reader.integer(reader.required(c, cp, "gpus"), field(cp, "gpus"), 1, kMaxGpusPerMachine));
  std::string arch;
  if (const json* a = Reader::find(c, "arch")) arch = reader.string(*a, field(cp, "arch"));

  // Latencies: per kind, overridable.
  double lat_nvlink = kNvlinkLatencyUs, lat_pcie = kPcieLatencyUs, lat_smp = kSmpLatencyUs;
  if (const json* l = Reader::find(c, "latency")) {
    const std::string lp = field(cp, "latency");
    reader.expect_object(*l, lp);
    reader.allow_keys(*l, lp, {"nvlink", "pcie", "smp"});
    if (const json* v = Reader::find(*l, "nvlink")) lat_nvlink = reader.non_negative(*v, field(lp, "nvlink"));
    if (const json* v = Reader::find(*l, "pcie")) lat_pcie = reader.non_negative(*v, field(lp, "pcie"));
    if (const json* v = Reader::find(*l, "smp")) lat_smp = reader.non_negative(*v, field(lp, "smp"));
  }

  // NVLink: a symmetric matrix of bonded lane counts.
  std::vector<std::vector<int>> nvlink(gpus, std::vector<int>(gpus, 0));
  bool any_nvlink = false;
  if (const json* m = Reader::find(c, "nvlink")) {
    const std::string mp = field(cp, "nvlink");
    reader.expect_array(*m, mp);
    if (static_cast<int>(m->size()) != gpus) {
      reader.fail(mp, fmt::format("must have {} rows, one per GPU (got {})", gpus, m->size()));
    }
    for (int i = 0; i < gpus; ++i) {
      const std::string rp = item(mp, i);
      reader.expect_array((*m)[i], rp);
      if (static_cast<int>((*m)[i].size()) != gpus) {
        reader.fail(rp, fmt::format("must have {} entries, one per GPU (got {}); the matrix must be square", gpus,
                                    (*m)[i].size()));
      }
      for (int j = 0; j < gpus; ++j) {
        nvlink[i][j] = static_cast<int>(reader.integer((*m)[i][j], item(rp, j), 0, kMaxLanes));
      }
    }
    for (int i = 0; i < gpus; ++i) {
      if (nvlink[i][i] != 0) reader.fail(item(item(mp, i), i), "must be 0: a GPU has no NVLink to itself");
      for (int j = 0; j < i; ++j) {
        if (nvlink[i][j] != nvlink[j][i]) {
          reader.fail(item(item(mp, i), j), fmt::format("{} differs from {} = {}: the matrix must be symmetric",
                                                        nvlink[i][j], item(item(mp, j), i), nvlink[j][i]));
        }
        any_nvlink = any_nvlink || nvlink[i][j] > 0;
      }
    }
  }
  double lane_bandwidth = 0;
  if (const json* v = Reader::find(c, "nvlink_lane_bandwidth")) {
    lane_bandwidth = reader.positive(*v, field(cp, "nvlink_lane_bandwidth"));
  } else if (any_nvlink) {
    reader.fail(field(cp, "nvlink_lane_bandwidth"),
                "missing (required when nvlink lists links: GB/s per lane and direction)");
  }

  int switch_lanes = 0;
  double switch_lane_bandwidth = 0;
  if (const json* s = Reader::find(c, "nvswitch")) {
    const std::string sp = field(cp, "nvswitch");
    reader.expect_object(*s, sp);
    reader.allow_keys(*s, sp, {"lanes_per_gpu", "lane_bandwidth"});
    switch_lanes = static_cast<int>(
        reader.integer(reader.required(*s, sp, "lanes_per_gpu"), field(sp, "lanes_per_gpu"), 1, kMaxLanes));
    switch_lane_bandwidth = reader.positive(reader.required(*s, sp, "lane_bandwidth"), field(sp, "lane_bandwidth"));
  }

  // PCIe: GPUs under switches, switches (or GPUs when there are no switches)
  // under sockets.
  std::vector<std::vector<int>> switches;
  const json* switches_json = Reader::find(c, "pcie_switches");
  if (switches_json != nullptr) {
    const std::string sp = field(cp, "pcie_switches");
    auto [groups, owner] = parse_partition(*switches_json, reader, sp, gpus, "GPU");
    if (groups.empty())
      reader.fail(sp, "must list at least one switch (omit the field when GPUs sit directly under CPUs)");
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (groups[g].empty()) reader.fail(item(sp, g), "a switch must hold at least one GPU");
    }
    for (int i = 0; i < gpus; ++i) {
      if (owner[i] < 0) reader.fail(sp, fmt::format("GPU {} is under no switch (list every GPU exactly once)", i));
    }
    switches = std::move(groups);
  }
  const bool has_switches = !switches.empty();
  const int socket_items = has_switches ? static_cast<int>(switches.size()) : gpus;
  const std::string_view socket_item_name = has_switches ? "switch" : "GPU";
  std::vector<std::vector<int>> sockets;
  if (const json* s = Reader::find(c, "sockets")) {
    const std::string sp = field(cp, "sockets");
    auto [groups, owner] = parse_partition(*s, reader, sp, socket_items, socket_item_name);
    if (groups.empty()) reader.fail(sp, "must list at least one socket");
    for (int i = 0; i < socket_items; ++i) {
      if (owner[i] < 0)
        reader.fail(sp, fmt::format("{} {} is in no socket (list every {} exactly once)", socket_item_name, i,
                                    socket_item_name));
    }
    sockets = std::move(groups);
  } else {
    sockets.emplace_back(socket_items);
    std::iota(sockets.back().begin(), sockets.back().end(), 0);
  }

  double pcie_bandwidth = kDefaultPcieBandwidth;
  if (const json* v = Reader::find(c, "pcie_bandwidth"))
    pcie_bandwidth = reader.positive(*v, field(cp, "pcie_bandwidth"));
  double smp_bandwidth = kDefaultSmpBandwidth;
  if (const json* v = Reader::find(c, "smp_bandwidth")) smp_bandwidth = reader.positive(*v, field(cp, "smp_bandwidth"));
  int nics_per_switch = 0;
  if (const json* v = Reader::find(c, "nics_per_switch")) {
    nics_per_switch = static_cast<int>(reader.integer(*v, field(cp, "nics_per_switch"), 0, 64));
    if (!has_switches && nics_per_switch > 0)
      reader.fail(field(cp, "nics_per_switch"), "needs pcie_switches (use nics_per_socket)");
  }
  int nics_per_socket = 0;
  if (const json* v = Reader::find(c, "nics_per_socket"))
    nics_per_socket = static_cast<int>(reader.integer(*v, field(cp, "nics_per_socket"), 0, 64));
  if (const json* v = Reader::find(c, "nic_bandwidth"))
    out.nic_bandwidth = reader.positive(*v, field(cp, "nic_bandwidth"));

  // Nodes: GPUs first (local index = position), then the merged NVSwitch,
  // CPU sockets, PCIe switches and NICs.
  for (int g = 0; g < gpus; ++g) topo.add_node({fmt::format("gpu{}", g), NodeKind::kGpu, 0, g, -1, arch, ""});
  const int nvswitch = switch_lanes > 0 ? topo.add_node({"nvswitch0", NodeKind::kNvSwitch, 0, 0, -1, "", ""}) : -1;
  std::vector<int> cpu(sockets.size());
  for (std::size_t s = 0; s < sockets.size(); ++s) {
    cpu[s] = topo.add_node({fmt::format("cpu{}", s), NodeKind::kCpu, 0, static_cast<int>(s), -1, "", ""});
  }
  std::vector<int> pcisw(switches.size());
  for (std::size_t k = 0; k < switches.size(); ++k) {
    pcisw[k] = topo.add_node({fmt::format("pcisw{}", k), NodeKind::kPcieSwitch, 0, static_cast<int>(k), -1, "", ""});
  }
  int nic_count = 0;
  const auto add_nic = [&](int parent) {
    const int nic = topo.add_node(
        {fmt::format("nic{}", nic_count), NodeKind::kNic, 0, nic_count, -1, fmt::format("mlx5_{}", nic_count), ""});
    ++nic_count;
    topo.add_duplex_link(nic, parent, LinkKind::kPcie, pcie_bandwidth, lat_pcie);
  };

  for (int i = 0; i < gpus; ++i) {
    for (int j = i + 1; j < gpus; ++j) {
      if (nvlink[i][j] > 0) {
        topo.add_duplex_link(i, j, LinkKind::kNvLink, nvlink[i][j] * lane_bandwidth, lat_nvlink, nvlink[i][j]);
      }
    }
  }
  if (nvswitch >= 0) {
    // One merged NVSwitch node, as NCCL models it: each GPU reaches it with
    // all its lanes, so a single route gets the GPU's whole NVLink bandwidth.
    for (int g = 0; g < gpus; ++g) {
      topo.add_duplex_link(g, nvswitch, LinkKind::kNvLink, switch_lanes * switch_lane_bandwidth, lat_nvlink,
                           switch_lanes);
    }
  }
  for (std::size_t s = 0; s < sockets.size(); ++s) {
    for (int member : sockets[s]) {
      if (has_switches) {
        for (int g : switches[member])
          topo.add_duplex_link(g, pcisw[member], LinkKind::kPcie, pcie_bandwidth, lat_pcie);
        topo.add_duplex_link(pcisw[member], cpu[s], LinkKind::kPcie, pcie_bandwidth, lat_pcie);
        for (int n = 0; n < nics_per_switch; ++n) add_nic(pcisw[member]);
      } else {
        topo.add_duplex_link(member, cpu[s], LinkKind::kPcie, pcie_bandwidth, lat_pcie);
      }
    }
    for (int n = 0; n < nics_per_socket; ++n) add_nic(cpu[s]);
  }
  for (std::size_t s = 0; s < cpu.size(); ++s) {
    for (std::size_t t = s + 1; t < cpu.size(); ++t) {
      topo.add_duplex_link(cpu[s], cpu[t], LinkKind::kSmp, smp_bandwidth, lat_smp);
    }
  }
  finalize_checked(topo, reader, cp);
  return out;
}

// ---- generators and name resolution ---------------------------------------

std::optional<long long> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

Topology make_uniform_machine(int gpus) {
  Topology topo;
  topo.set_name(fmt::format("uniform:{}", gpus));
  topo.set_description(
      fmt::format("{} GPUs joined all-to-all by {} GB/s NVLink links, one CPU socket with a {} GB/s PCIe link to each "
                  "GPU and one NIC",
                  gpus, kUniformNvlinkBandwidth, kUniformPcieBandwidth));
  for (int g = 0; g < gpus; ++g) topo.add_node({fmt::format("gpu{}", g), NodeKind::kGpu, 0, g, -1, "", ""});
  const int cpu = topo.add_node({"cpu0", NodeKind::kCpu, 0, 0, -1, "", ""});
  const int nic = topo.add_node({"nic0", NodeKind::kNic, 0, 0, -1, "mlx5_0", ""});
  for (int i = 0; i < gpus; ++i) {
    for (int j = i + 1; j < gpus; ++j)
      topo.add_duplex_link(i, j, LinkKind::kNvLink, kUniformNvlinkBandwidth, kNvlinkLatencyUs, 1);
  }
  for (int g = 0; g < gpus; ++g) topo.add_duplex_link(g, cpu, LinkKind::kPcie, kUniformPcieBandwidth, kPcieLatencyUs);
  topo.add_duplex_link(nic, cpu, LinkKind::kPcie, kUniformPcieBandwidth, kPcieLatencyUs);
  topo.finalize();
  return topo;
}

const std::map<std::string, std::string, std::less<>>& builtin_map() {
  static const std::map<std::string, std::string, std::less<>> configs = [] {
    std::map<std::string, std::string, std::less<>> m;
    for (std::size_t i = 0; i < detail::kEmbeddedConfigCount; ++i) {
      m.emplace(detail::kEmbeddedConfigs[i].name, detail::kEmbeddedConfigs[i].text);
    }
    return m;
  }();
  return configs;
}

std::string builtin_source(std::string_view name) { return fmt::format("configs/{}.json", name); }

std::string builtin_list() { return join_list(builtin_topology_names()); }

// Every nlohmann exception (syntax, numbers that overflow a double such as 1e400,
// invalid UTF-8, excessive nesting) becomes one InvalidInput naming the source.
json parse_json_text(std::string_view text, const std::string& source) { return parse_json_input(text, source); }

// Missing files, directories, devices such as /dev/zero and endless pipes end in
// one InvalidInput at the size limit instead of exhausting memory.
std::string read_file_text(const std::string& path) { return read_input_file(path, "", kMaxFileBytes); }

std::string default_name_for(std::string_view source) {
  const std::string stem = fs::path(std::string(source)).stem().string();
  return stem.empty() ? "topology" : stem;
}

Loaded parse_document(const json& doc, const Reader& reader, const std::string& path, bool allow_cluster);

Loaded load_builtin(std::string_view name, bool allow_cluster) {
  const std::string& text = builtin_topology_text(name);
  const std::string source = builtin_source(name);
  return parse_document(parse_json_text(text, source), Reader(source, {}), "", allow_cluster);
}

Loaded load_file(const std::string& path, bool allow_cluster) {
  const std::string text = read_file_text(path);
  return parse_document(parse_json_text(text, path), Reader(path, fs::path(path).parent_path()), "", allow_cluster);
}

Topology make_generated_cluster(std::string_view spec, long long machines, Loaded machine) {
  if (machines < 1 || machines > kMaxMachines) {
    throw InvalidInput(
        fmt::format("topology {}: the machine count must be between 1 and {}", quote_text(spec), kMaxMachines));
  }
  if (machine.topo.machine_count() > 1 || !machine.topo.nodes_of_kind(NodeKind::kNetSwitch).empty()) {
    throw InvalidInput(fmt::format("topology {}: {} is already a cluster; NxNAME repeats a single machine",
                                   quote_text(spec), quote_text(machine.topo.name())));
  }
  const long long total = machines * static_cast<long long>(machine.topo.gpus().size());
  if (total > kMaxTotalGpus) {
    throw InvalidInput(fmt::format("topology {}: {} GPUs in all is more than the supported {}", quote_text(spec), total,
                                   kMaxTotalGpus));
  }
  const long long links = machines * static_cast<long long>(machine.topo.links().size() +
                                                            2 * machine.topo.nodes_of_kind(NodeKind::kNic).size());
  if (links > kMaxTotalLinks) {
    throw InvalidInput(fmt::format("topology {}: {} directed links in all is more than the supported {}",
                                   quote_text(spec), links, kMaxTotalLinks));
  }
  NetworkSpec network;
  if (machine.nic_bandwidth > 0) network.nic_bandwidth_gbps = machine.nic_bandwidth;
  std::vector<Topology> copies(static_cast<std::size_t>(machines), machine.topo);
  return join_machines(copies, network, std::string(spec));
}

// Generators: uniform:G, uniform:NxG, NxNAME. nullopt when `spec` is not one.
std::optional<Topology> generate(std::string_view spec) {
  constexpr std::string_view kUniform = "uniform:";
  if (spec.rfind(kUniform, 0) == 0) {
    const std::string_view rest = spec.substr(kUniform.size());
    const auto x = rest.find('x');
    const auto machines = x == std::string_view::npos ? std::optional<long long>(1) : parse_count(rest.substr(0, x));
    const auto gpus = parse_count(x == std::string_view::npos ? rest : rest.substr(x + 1));
    if (!machines || !gpus) {
      throw InvalidInput(
          fmt::format("topology {}: expected uniform:G or uniform:NxG (N machines of G GPUs)", quote_text(spec)));
    }
    if (*gpus < 1 || *gpus > kMaxUniformGpus) {
      throw InvalidInput(
          fmt::format("topology {}: G must be between 1 and {} GPUs per machine", quote_text(spec), kMaxUniformGpus));
    }
    if (x == std::string_view::npos) return make_uniform_machine(static_cast<int>(*gpus));
    Loaded machine{make_uniform_machine(static_cast<int>(*gpus)), 0};
    return make_generated_cluster(spec, *machines, std::move(machine));
  }
  const auto x = spec.find('x');
  if (x == std::string_view::npos || x == 0) return std::nullopt;
  const auto machines = parse_count(spec.substr(0, x));
  const std::string_view base = spec.substr(x + 1);
  if (!machines) return std::nullopt;
  if (builtin_map().count(base) != 0) return make_generated_cluster(spec, *machines, load_builtin(base, true));
  if (base.rfind(kUniform, 0) == 0) {
    auto machine = generate(base);
    if (machine) return make_generated_cluster(spec, *machines, Loaded{std::move(*machine), 0});
  }
  return std::nullopt;
}

// A machine named by a cluster's {"config": ...}: a built-in, uniform:G, or a
// file relative to the cluster file. Clusters are refused before their own
// machines are loaded, so files cannot recurse.
Loaded load_machine_reference(const std::string& spec, const Reader& reader, const std::string& path) {
  std::string source;
  std::string text;
  fs::path base_dir;
  if (builtin_map().count(spec) != 0) {
    source = builtin_source(spec);
    text = builtin_topology_text(spec);
  } else if (spec.rfind("uniform:", 0) == 0) {
    if (spec.find('x') != std::string::npos)
      reader.fail(path, fmt::format("{} is a cluster; list single machines", quote_text(spec)));
    try {
      return Loaded{*generate(spec), 0};
    } catch (const InvalidInput& e) {
      reader.fail(path, e.what());
    }
  } else {
    fs::path file(spec);
    if (file.is_relative() && !reader.base_dir().empty()) file = reader.base_dir() / file;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      reader.fail(path, fmt::format("{} is neither a built-in machine, uniform:G nor a file (built-ins: {})",
                                    quote_text(spec), builtin_list()));
    }
    source = file.string();
    text = read_file_text(source);
    base_dir = file.parent_path();
  }
  const json doc = parse_json_text(text, source);
  if (doc.is_object() && doc.contains("machines"))
    reader.fail(path, fmt::format("{} is a cluster; list single machines", quote_text(spec)));
  return parse_document(doc, Reader(source, base_dir), "", false);
}

// ---- cluster form ----------------------------------------------------------

Loaded parse_cluster(const json& doc, const Reader& reader, const std::string& path, const std::string& default_name) {
  reader.allow_keys(doc, path, {"name", "description", "machines", "network"});
  const std::string name = Reader::find(doc, "name") ? reader.name(doc["name"], field(path, "name")) : default_name;
  const std::string mp = field(path, "machines");
  const json& list = doc["machines"];
  reader.expect_array(list, mp);
  if (list.empty()) reader.fail(mp, "must list at least one machine");
  std::vector<Topology> machines;
  double first_nic_bandwidth = 0;
  long long total_gpus = 0;
  long long total_links = 0;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const std::string p = item(mp, k);
    const json& entry = list[k];
    reader.expect_object(entry, p);
    Loaded machine;
    long long count = 1;
    if (Reader::find(entry, "config") != nullptr) {
      reader.allow_keys(entry, p, {"config", "count"});
      const std::string spec = reader.name(entry["config"], field(p, "config"));
      if (const json* c = Reader::find(entry, "count")) count = reader.integer(*c, field(p, "count"), 1, kMaxMachines);
      machine = load_machine_reference(spec, reader, field(p, "config"));
    } else {
      machine = parse_document(entry, reader, p, false);
    }
    if (machine.topo.machine_count() > 1 || !machine.topo.nodes_of_kind(NodeKind::kNetSwitch).empty()) {
      reader.fail(p, fmt::format("{} is a cluster; list single machines", quote_text(machine.topo.name())));
    }
    if (machine.topo.nodes_of_kind(NodeKind::kNic).empty()) {
      reader.fail(p, fmt::format("machine {} has no NIC to join the network", quote_text(machine.topo.name())));
    }
    if (machines.size() + static_cast<std::size_t>(count) > static_cast<std::size_t>(kMaxMachines)) {
      reader.fail(p, fmt::format("more than {} machines in all", kMaxMachines));
    }
    // The same GPU and link limits as the NxNAME generator, checked before the copies are made.
    total_gpus += count * static_cast<long long>(machine.topo.gpus().size());
    total_links += count * static_cast<long long>(machine.topo.links().size() +
                                                  2 * machine.topo.nodes_of_kind(NodeKind::kNic).size());
    if (total_gpus > kMaxTotalGpus) {
      reader.fail(p, fmt::format("{} GPUs in all is more than the supported {}", total_gpus, kMaxTotalGpus));
    }
    if (total_links > kMaxTotalLinks) {
      reader.fail(p,
                  fmt::format("{} directed links in all is more than the supported {}", total_links, kMaxTotalLinks));
    }
    if (machines.empty()) first_nic_bandwidth = machine.nic_bandwidth;
    for (long long i = 0; i < count; ++i) machines.push_back(machine.topo);
  }
  NetworkSpec network;
  network.nic_bandwidth_gbps = first_nic_bandwidth > 0 ? first_nic_bandwidth : kDefaultNicBandwidth;
  if (const json* n = Reader::find(doc, "network"))
    network = parse_network(*n, reader, field(path, "network"), first_nic_bandwidth);
  Loaded out;
  out.topo = join_machines(machines, network, name);
  if (const json* d = Reader::find(doc, "description"))
    out.topo.set_description(reader.string(*d, field(path, "description")));
  return out;
}

Loaded parse_document(const json& doc, const Reader& reader, const std::string& path, bool allow_cluster) {
  reader.expect_object(doc, path);
  const bool full = doc.contains("devices");
  const bool compact = doc.contains("compact");
  const bool cluster = doc.contains("machines");
  if (full + compact + cluster > 1) {
    reader.fail(path, "give exactly one of \"devices\" (full form), \"compact\" or \"machines\" (cluster)");
  }
  const std::string default_name = default_name_for(reader.source());
  if (full) return parse_full(doc, reader, path, default_name);
  if (compact) return parse_compact(doc, reader, path, default_name);
  if (cluster) {
    if (!allow_cluster) reader.fail(field(path, "machines"), "a cluster cannot be a machine of another cluster");
    return parse_cluster(doc, reader, path, default_name);
  }
  reader.fail(path, "missing \"devices\" (full form), \"compact\" or \"machines\" (cluster)");
}

}  // namespace

// ---- public API ------------------------------------------------------------

std::vector<std::string> builtin_topology_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : builtin_map()) names.push_back(name);
  return names;
}

const std::string& builtin_topology_text(std::string_view name) {
  const auto& configs = builtin_map();
  const auto it = configs.find(name);
  if (it == configs.end()) {
    throw InvalidInput(fmt::format("{} is not a built-in topology (built-ins: {})", quote_text(name), builtin_list()));
  }
  return it->second;
}

Topology topology_from_json(const nlohmann::json& doc, std::string_view source) {
  const std::string src(source);
  return parse_document(doc, Reader(src, fs::path(src).parent_path()), "", true).topo;
}

Topology load_topology_file(const std::string& path) { return load_file(path, true).topo; }

Topology load_topology(std::string_view spec) {
  if (spec.empty()) {
    throw InvalidInput(fmt::format(
        "topology: empty name (give a built-in: {}; a generator: uniform:G, uniform:NxG, NxNAME; or a JSON file)",
        builtin_list()));
  }
  if (builtin_map().count(spec) != 0) return load_builtin(spec, true).topo;
  if (auto generated = generate(spec)) return std::move(*generated);
  std::error_code ec;
  const std::string path(spec);
  if (fs::exists(path, ec)) return load_topology_file(path);
  throw InvalidInput(
      fmt::format("topology {}: not a built-in, a generator or an existing file (built-ins: {}; generators: uniform:G, "
                  "uniform:NxG, NxNAME such as 4xdgx1-v100)",
                  quote_text(spec), builtin_list()));
}

Topology join_machines(const std::vector<Topology>& machines, const NetworkSpec& network, std::string name) {
  if (machines.empty()) throw InvalidInput("join_machines: no machines to join");
  if (!(network.nic_bandwidth_gbps > 0) || !std::isfinite(network.nic_bandwidth_gbps)) {
    throw InvalidInput("join_machines: network nic_bandwidth must be > 0");
  }
  if (!(network.latency_us >= 0) || !std::isfinite(network.latency_us))
    throw InvalidInput("join_machines: network latency must be >= 0");
  if (!(network.oversubscription >= 1) || !std::isfinite(network.oversubscription)) {
    throw InvalidInput("join_machines: network oversubscription must be >= 1");
  }
  Topology out;
  out.set_name(std::move(name));
  std::size_t node_total = 1;
  for (const Topology& m : machines) node_total += m.nodes().size();
  std::vector<int> nics;
  for (std::size_t k = 0; k < machines.size(); ++k) {
    const Topology& machine = machines[k];
    if (machine.machine_count() > 1 || !machine.nodes_of_kind(NodeKind::kNetSwitch).empty()) {
      throw InvalidInput(
          fmt::format("join_machines: machine {} ({}) is itself a cluster", k, quote_text(machine.name())));
    }
    const std::string prefix = fmt::format("m{}/", k);
    const int offset = static_cast<int>(out.nodes().size());
    bool has_nic = false;
    for (const Node& node : machine.nodes()) {
      Node copy = node;
      copy.id = prefix + node.id;
      copy.machine = static_cast<int>(k);
      copy.global_index = -1;
      const int index = out.add_node(std::move(copy));
      if (node.kind == NodeKind::kNic) {
        nics.push_back(index);
        has_nic = true;
      }
    }
    if (!has_nic)
      throw InvalidInput(
          fmt::format("join_machines: machine {} ({}) has no NIC to join the network", k, quote_text(machine.name())));
    for (Link link : machine.links()) {
      link.src += offset;
      link.dst += offset;
      out.add_link(link);
    }
  }
  const int net_switch = out.add_node({"net_switch", NodeKind::kNetSwitch, -1, 0, -1, "", ""});
  const double uplink = network.nic_bandwidth_gbps / network.oversubscription;
  for (int nic : nics) out.add_duplex_link(nic, net_switch, LinkKind::kNetwork, uplink, network.latency_us);
  out.set_network(network);

  bool same = true;
  for (const Topology& m : machines) same = same && m.name() == machines.front().name();
  const std::string what = same ? fmt::format("{} x {}", machines.size(), machines.front().name())
                                : fmt::format("{} machines", machines.size());
  out.set_description(fmt::format(
      "{} joined by one network switch ({:g} GB/s per NIC{}, {:g} us per hop)", what, network.nic_bandwidth_gbps,
      network.oversubscription > 1 ? fmt::format(", oversubscribed {:g}:1", network.oversubscription) : "",
      network.latency_us));
  out.finalize();
  return out;
}

nlohmann::json topology_model_to_json(const Topology& topo) {
  json doc = json::object();
  doc["name"] = topo.name();
  if (!topo.description().empty()) doc["description"] = topo.description();
  const bool cluster = topo.machine_count() > 1;
  json devices = json::array();
  for (const Node& node : topo.nodes()) {
    json d = {{"id", node.id}, {"kind", std::string(to_string(node.kind))}};
    if (node.kind == NodeKind::kNetSwitch ? node.machine != -1 : (cluster || node.machine != 0))
      d["machine"] = node.machine;
    d["local"] = node.local_index;
    if (!node.arch.empty()) d["arch"] = node.arch;
    if (!node.bus_id.empty()) d["bus_id"] = node.bus_id;
    devices.push_back(std::move(d));
  }
  doc["devices"] = std::move(devices);

  // Pairs of opposite links with equal attributes print as one full-duplex
  // entry; anything else prints as directed entries.
  const auto& links = topo.links();
  const auto& nodes = topo.nodes();
  std::map<std::tuple<int, int, LinkKind>, std::vector<int>> by_ends;
  for (int i = 0; i < static_cast<int>(links.size()); ++i)
    by_ends[{links[i].src, links[i].dst, links[i].kind}].push_back(i);
  std::vector<bool> used(links.size(), false);
  json out_links = json::array();
  for (int i = 0; i < static_cast<int>(links.size()); ++i) {
    if (used[i]) continue;
    used[i] = true;
    const Link& l = links[i];
    bool duplex = false;
    const auto it = by_ends.find({l.dst, l.src, l.kind});
    if (it != by_ends.end()) {
      for (int j : it->second) {
        const Link& r = links[j];
        if (!used[j] && r.bandwidth_gbps == l.bandwidth_gbps && r.latency_us == l.latency_us && r.lanes == l.lanes) {
          used[j] = true;
          duplex = true;
          break;
        }
      }
    }
    json e = {{"a", nodes[l.src].id},
              {"b", nodes[l.dst].id},
              {"kind", std::string(to_string(l.kind))},
              {"bandwidth", l.bandwidth_gbps},
              {"latency", l.latency_us}};
    if (l.lanes != 1) e["lanes"] = l.lanes;
    if (!duplex) e["directed"] = true;
    out_links.push_back(std::move(e));
  }
  doc["links"] = std::move(out_links);
  if (const auto& net = topo.network()) {
    doc["network"] = {{"nic_bandwidth", net->nic_bandwidth_gbps},
                      {"latency", net->latency_us},
                      {"oversubscription", net->oversubscription}};
  }
  return doc;
}

nlohmann::json topology_to_json(const Topology& topo) {
  json doc = topology_model_to_json(topo);
  doc["machine_count"] = topo.machine_count();
  doc["gpus_per_machine"] = topo.gpus_per_machine();
  json gpus = json::array();
  for (int g : topo.gpus()) gpus.push_back(topo.nodes()[g].id);
  doc["gpus"] = std::move(gpus);
  doc["peer_matrix"] = peer_matrix(topo);
  doc["nvlink_matrix"] = nvlink_matrix(topo);
  json paths = json::array();
  for (const auto& row : path_type_matrix(topo)) {
    json r = json::array();
    for (PathType t : row) r.push_back(std::string(to_string(t)));
    paths.push_back(std::move(r));
  }
  doc["path_matrix"] = std::move(paths);
  doc["bandwidth_matrix"] = bandwidth_matrix(topo);
  doc["fingerprint"] = topo.fingerprint();
  return doc;
}

}  // namespace artune
