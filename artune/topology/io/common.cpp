// Helpers shared by the topology JSON readers (io/detail.hpp).

#include "artune/topology/io/detail.hpp"
#include "artune/topology/net_kind.hpp"

namespace artune::io_detail {

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
  reader.allow_keys(value, path, {"nic_bandwidth", "latency", "oversubscription", "fabric"});
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
  if (const json* f = Reader::find(value, "fabric")) spec.fabric = parse_fabric(*f, reader, field(path, "fabric"));
  return spec;
}

NicNet parse_fabric(const json& value, const Reader& reader, const std::string& path) {
  NicNet net;
  auto kind_at = [&](const json& v, const std::string& p) {
    const std::string text = reader.string(v, p);
    const auto kind = parse_net_kind(text);
    if (!kind)
      reader.fail(p, fmt::format("unknown network kind {} (expected ib, roce, efa or socket)", quote_text(text)));
    return *kind;
  };
  if (value.is_string()) {
    net.kind = kind_at(value, path);
    return net;
  }
  if (!value.is_object()) reader.fail(path, json_reader::type_error("a network kind or an object", value));
  reader.allow_keys(value, path, {"kind", "reported_latency_us", "extra_step_us", "efficiency", "protocols"});
  if (const json* v = Reader::find(value, "kind")) net.kind = kind_at(*v, field(path, "kind"));
  if (const json* v = Reader::find(value, "reported_latency_us"))
    net.reported_latency_us = reader.non_negative(*v, field(path, "reported_latency_us"));
  if (const json* v = Reader::find(value, "extra_step_us"))
    net.extra_step_us = reader.non_negative(*v, field(path, "extra_step_us"));
  if (const json* v = Reader::find(value, "efficiency")) {
    net.efficiency = reader.number(*v, field(path, "efficiency"));
    if (!(net.efficiency > 0) || net.efficiency > 1)
      reader.fail(field(path, "efficiency"), fmt::format("must be in (0, 1] (got {:g})", net.efficiency));
  }
  if (const json* v = Reader::find(value, "protocols")) {
    const std::string p = field(path, "protocols");
    reader.expect_array(*v, p);
    if (v->empty()) reader.fail(p, "must list at least one protocol (ll, ll128, simple)");
    unsigned bits = 0;
    for (std::size_t i = 0; i < v->size(); ++i) {
      const std::string text = reader.string((*v)[i], item(p, i));
      const auto proto = nccl_proto_of(text);
      if (!proto)
        reader.fail(item(p, i), fmt::format("unknown protocol {} (expected ll, ll128 or simple)", quote_text(text)));
      bits |= nccl_proto_bit(*proto);
    }
    net.protocols = static_cast<int>(bits);
  }
  return net;
}

json fabric_to_json(const NicNet& net) {
  json f = json::object();
  if (net.kind) f["kind"] = std::string(to_string(*net.kind));
  if (net.reported_latency_us >= 0) f["reported_latency_us"] = net.reported_latency_us;
  if (net.extra_step_us >= 0) f["extra_step_us"] = net.extra_step_us;
  if (net.efficiency >= 0) f["efficiency"] = net.efficiency;
  if (net.protocols >= 0) {
    json list = json::array();
    for (const std::string_view name : protocol_names(static_cast<unsigned>(net.protocols)))
      list.push_back(std::string(name));
    f["protocols"] = std::move(list);
  }
  return f;
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

}  // namespace artune::io_detail
