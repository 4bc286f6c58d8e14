// GPU subsets of a topology (subset.hpp): the selection grammar and the cut.

#include "artune/topology/subset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include "artune/core/error.hpp"

namespace artune {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<long long> parse_index(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// The GPU node of a global index, or -1.
int gpu_by_index(const Topology& topo, long long index) {
  for (int g : topo.gpus()) {
    if (topo.nodes()[static_cast<std::size_t>(g)].global_index == index) return g;
  }
  return -1;
}

std::string index_range_text(const Topology& topo) {
  if (topo.gpus().empty()) return "no GPUs";
  int lo = topo.nodes()[static_cast<std::size_t>(topo.gpus().front())].global_index;
  int hi = lo;
  for (int g : topo.gpus()) {
    lo = std::min(lo, topo.nodes()[static_cast<std::size_t>(g)].global_index);
    hi = std::max(hi, topo.nodes()[static_cast<std::size_t>(g)].global_index);
  }
  return lo == hi ? fmt::format("GPU {}", lo) : fmt::format("GPUs {}-{}", lo, hi);
}

}  // namespace

SubsetSpec split_subset_spec(std::string_view spec) {
  if (spec.size() < 3 || spec.back() != ']') return {};
  const std::size_t open = spec.rfind('[');
  if (open == std::string_view::npos || open == 0) return {};
  return {std::string(spec.substr(0, open)), std::string(spec.substr(open + 1, spec.size() - open - 2))};
}

std::vector<int> parse_gpu_selection(const Topology& topo, std::string_view list, std::string_view where) {
  std::vector<int> out;
  const auto add = [&](int node) {
    if (std::find(out.begin(), out.end(), node) != out.end()) {
      throw InvalidInput(
          fmt::format("{}: GPU '{}' is named twice", where, topo.nodes()[static_cast<std::size_t>(node)].id));
    }
    out.push_back(node);
  };
  if (trim(list).empty()) throw InvalidInput(fmt::format("{}: the GPU list is empty", where));
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string_view item = trim(list.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) throw InvalidInput(fmt::format("{}: empty item in the GPU list", where));
    const std::size_t dash = item.find('-');
    const auto first = parse_index(dash == std::string_view::npos ? item : trim(item.substr(0, dash)));
    const auto last = dash == std::string_view::npos ? first : parse_index(trim(item.substr(dash + 1)));
    if (first && last) {
      if (*last < *first) throw InvalidInput(fmt::format("{}: range '{}' runs backwards", where, item));
      for (long long i = *first; i <= *last; ++i) {
        const int node = gpu_by_index(topo, i);
        if (node < 0) {
          throw InvalidInput(
              fmt::format("{}: GPU {} does not exist ('{}' has {})", where, i, topo.name(), index_range_text(topo)));
        }
        add(node);
      }
      continue;
    }
    const int node = topo.find_node(item);
    if (node < 0) {
      throw InvalidInput(fmt::format("{}: '{}' is neither a GPU index, a range a-b nor a device id of '{}'", where,
                                     item, topo.name()));
    }
    const Node& n = topo.nodes()[static_cast<std::size_t>(node)];
    if (n.kind != NodeKind::kGpu) {
      throw InvalidInput(fmt::format("{}: '{}' is a {}, not a GPU", where, item, to_string(n.kind)));
    }
    add(node);
  }
  return out;
}

Topology subset_topology(const Topology& topo, const std::vector<int>& gpus, std::string name) {
  if (gpus.empty()) throw InvalidInput(fmt::format("topology '{}': a subset needs at least one GPU", topo.name()));
  const auto& nodes = topo.nodes();
  std::vector<bool> kept_gpu(nodes.size(), false);
  for (int g : gpus) {
    if (g < 0 || g >= static_cast<int>(nodes.size()) || nodes[static_cast<std::size_t>(g)].kind != NodeKind::kGpu) {
      throw InvalidInput(fmt::format("topology '{}': subset node {} is not a GPU", topo.name(), g));
    }
    if (kept_gpu[static_cast<std::size_t>(g)]) {
      throw InvalidInput(fmt::format("topology '{}': subset names GPU '{}' twice", topo.name(),
                                     nodes[static_cast<std::size_t>(g)].id));
    }
    kept_gpu[static_cast<std::size_t>(g)] = true;
  }
  // Machines that keep a GPU, renumbered in machine order.
  std::map<int, int> machine_of;
  for (int g : gpus) machine_of[nodes[static_cast<std::size_t>(g)].machine] = 0;
  int next_machine = 0;
  for (auto& [old, fresh] : machine_of) fresh = next_machine++;
  const bool cluster = machine_of.size() > 1;

  // GPU local indices in the order listed, per machine.
  std::map<int, int> local_of;
  std::map<int, int> next_local;
  for (int g : gpus) local_of[g] = next_local[nodes[static_cast<std::size_t>(g)].machine]++;

  Topology out;
  out.set_name(std::move(name));
  std::string kept;
  for (int g : gpus) kept += (kept.empty() ? "" : ",") + nodes[static_cast<std::size_t>(g)].id;
  out.set_description(fmt::format("{} GPUs ({}) of {}{}{}", gpus.size(), kept, topo.name(),
                                  topo.description().empty() ? "" : ": ", topo.description()));
  std::vector<int> new_index(nodes.size(), -1);
  // GPUs first, in the order listed, then the other devices in their order.
  for (int g : gpus) {
    Node n = nodes[static_cast<std::size_t>(g)];
    n.machine = machine_of[n.machine];
    n.local_index = local_of[g];
    n.global_index = -1;
    new_index[static_cast<std::size_t>(g)] = out.add_node(std::move(n));
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.kind == NodeKind::kGpu) continue;
    if (n.machine < 0 ? !cluster : machine_of.count(n.machine) == 0) continue;
    Node copy = n;
    if (copy.machine >= 0) copy.machine = machine_of[copy.machine];
    copy.global_index = -1;
    new_index[i] = out.add_node(std::move(copy));
  }
  for (const Link& l : topo.links()) {
    const int a = new_index[static_cast<std::size_t>(l.src)];
    const int b = new_index[static_cast<std::size_t>(l.dst)];
    if (a < 0 || b < 0) continue;
    Link copy = l;
    copy.src = a;
    copy.dst = b;
    out.add_link(copy);
  }
  if (cluster && topo.network()) out.set_network(*topo.network());
  out.finalize();
  return out;
}

std::string gpu_list_text(const Topology& topo, const std::vector<int>& gpus) {
  std::string text;
  for (int g : gpus) {
    const Node& n = topo.nodes()[static_cast<std::size_t>(g)];
    text += (text.empty() ? "" : ",") + (n.global_index >= 0 ? std::to_string(n.global_index) : n.id);
  }
  return text;
}

}  // namespace artune
