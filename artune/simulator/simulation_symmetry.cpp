// Machines a plan treats alike, simulated once (Simulation::find_symmetry).
//
// On a cluster of identical machines many plans do the same thing on every machine: a ring through the
// machines in order is the same ring after renaming machine m as machine m+1, recursive halving-doubling
// the same after renaming m as m xor 2^j. Such a renaming σ of the machines, lifted to the topology's nodes
// and links and to the plan's devices and ops, maps the run to itself: max-min sharing has one solution and
// σ maps it to itself, so every op ends when its images do, every link carries what its images carry. The
// simulation then runs one op per orbit (the one of smallest id) and one resource per orbit: a flow crosses
// its resources' representatives with the weight of the copies of it each of them carries.
//
// σ is accepted only where all of this is checked, not assumed: machines with the same nodes (kinds, GPU and CPU
// architectures and NIC fabrics, in the same order) and links (kind, bandwidth, latency, lanes), routes that σ
// maps link by link, a plan whose devices sit on distinct nodes, and a bijection of the ops that keeps every op's
// kind, element counts, devices (mapped), group and dependencies (mapped). Every op orbit must have as many ops
// as the group has elements (the machines): an op that σ fixes (a library collective over every machine) or one
// that two elements map alike would need its flows split, so such plans are simulated whole. Library groups must
// stay inside one machine (σ maps their channels with the machine). Host models share the host's cores
// and memory between all machines' threads, serialised per device: they are simulated whole too.

#include <limits>
#include <numeric>
#include <unordered_set>

#include "artune/simulator/simulation.hpp"

namespace artune::sim_detail {

namespace {

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[static_cast<std::size_t>(x)] != x) {
      parent[static_cast<std::size_t>(x)] = parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
      x = parent[static_cast<std::size_t>(x)];
    }
    return x;
  }
  void unite(int a, int b) {
    a = find(a), b = find(b);
    if (a != b) parent[static_cast<std::size_t>(std::max(a, b))] = std::min(a, b);  // the root is the smallest
  }
};

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  // splitmix64's finaliser over the running hash
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  return h;
}

// What the simulation reads of an op, with its devices renamed by `dev` (identity: the op's own): ops that σ
// may map onto each other have equal keys.
std::uint64_t op_key(const Op& op, const std::vector<int>& dev) {
  auto d = [&](int device) { return device < 0 ? -1 : dev[static_cast<std::size_t>(device)]; };
  std::uint64_t h = mix(static_cast<std::uint64_t>(op.kind), static_cast<std::uint64_t>(op.src.count));
  h = mix(h, static_cast<std::uint64_t>(op.dst.count));
  if (op.kind == OpKind::kGroup) {
    h = mix(h, static_cast<std::uint64_t>(op.collective));
    h = mix(h, static_cast<std::uint64_t>(d(op.root)));
    h = mix(h, std::hash<std::string>{}(op.algo));
    for (const int g : op.group) h = mix(h, static_cast<std::uint64_t>(d(g)));
  } else {
    h = mix(h, static_cast<std::uint64_t>(op.kind == OpKind::kScale ? -1 : d(op.src.device)));
    h = mix(h, static_cast<std::uint64_t>(d(op.dst.device)));
    h = mix(h, static_cast<std::uint64_t>(op.divisor));
  }
  return mix(h, op.deps.size());
}

// Whether `to` is `from` with its devices renamed by `dev`, as far as the simulation reads them.
bool same_op(const Op& from, const Op& to, const std::vector<int>& dev) {
  auto d = [&](int device) { return device < 0 ? -1 : dev[static_cast<std::size_t>(device)]; };
  if (from.kind != to.kind || from.src.count != to.src.count || from.dst.count != to.dst.count ||
      from.deps.size() != to.deps.size()) {
    return false;
  }
  if (from.kind == OpKind::kGroup) {
    if (from.collective != to.collective || d(from.root) != to.root || from.algo != to.algo ||
        from.group.size() != to.group.size()) {
      return false;
    }
    for (std::size_t k = 0; k < from.group.size(); ++k) {
      if (d(from.group[k]) != to.group[k]) return false;
    }
    return true;
  }
  return (from.kind == OpKind::kScale || d(from.src.device) == to.src.device) && d(from.dst.device) == to.dst.device &&
         from.divisor == to.divisor;
}

// The key of an op and its dependencies (sorted here).
std::uint64_t structure_key(std::uint64_t key, std::vector<int>& deps) {
  std::sort(deps.begin(), deps.end());
  for (const int d : deps) key = mix(key, static_cast<std::uint64_t>(d));
  return key;
}

std::uint64_t ends(int a, int b) { return (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b); }

}  // namespace

// What every renaming looks ops and links up in, made once per plan.
struct Simulation::SymmetryIndex {
  std::vector<std::vector<int>> machines;  // every machine's nodes in index order
  std::vector<int> local;                  // node → its position in its machine's list
  std::vector<int> device_of_node;         // node → the plan device on it, -1 = none
  std::unordered_map<std::uint64_t, std::vector<int>> links_by_ends;  // parallel links in index order
  std::vector<int> link_rank;                                          // link → its position there
  std::vector<std::pair<std::uint64_t, int>> structures;  // (structure key, op), sorted: ops alike in id order
  std::vector<int> structure_rank;                        // op → its position among the ops of its structure key
};

// One renaming of the machines (machine m → machine_map[m]) lifted to nodes, links, devices and ops, or false
// where the topology or the plan is not invariant under it (the header above lists the checks).
bool Simulation::lift_machine_map(const std::vector<int>& machine_map, const SymmetryIndex& index, Lift& out) {
  const std::vector<std::vector<int>>& machines = index.machines;
  const std::vector<int>& local = index.local;
  const std::vector<int>& device_of_node = index.device_of_node;
  const auto& nodes = topo_.nodes();
  const auto& links = topo_.links();
  out.node.resize(nodes.size());
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const int m = nodes[n].machine;
    const int image =
        m < 0 ? static_cast<int>(n)
              : machines[static_cast<std::size_t>(machine_map[static_cast<std::size_t>(m)])][static_cast<std::size_t>(local[n])];
    const Node& to = nodes[static_cast<std::size_t>(image)];
    // Kinds, and what else makes nodes act alike (architectures: the NCCL model's choice; fabrics: network costs).
    if (to.kind != nodes[n].kind || node_traits(to) != node_traits(nodes[n])) return false;
    out.node[n] = image;
  }
  out.link.resize(links.size());
  for (std::size_t l = 0; l < links.size(); ++l) {
    const Link& a = links[l];
    const auto it = index.links_by_ends.find(
        ends(out.node[static_cast<std::size_t>(a.src)], out.node[static_cast<std::size_t>(a.dst)]));
    if (it == index.links_by_ends.end() || static_cast<int>(it->second.size()) <= index.link_rank[l]) return false;
    const int image = it->second[static_cast<std::size_t>(index.link_rank[l])];
    const Link& b = links[static_cast<std::size_t>(image)];
    if (a.kind != b.kind || a.bandwidth_gbps != b.bandwidth_gbps || a.latency_us != b.latency_us || a.lanes != b.lanes) {
      return false;
    }
    out.link[l] = image;
  }
  // Devices.
  std::vector<int> dev(plan_.devices.size());
  for (std::size_t d = 0; d < plan_.devices.size(); ++d) {
    dev[d] = device_of_node[static_cast<std::size_t>(out.node[static_cast<std::size_t>(plan_.devices[d].node)])];
    if (dev[d] < 0) return false;
  }
  // Ops, in id order (dependencies first): the image of op i is an op of i's key with its devices renamed whose
  // dependencies are the images of i's; ops alike in both (interchangeable) pair up in id order.
  const auto& ops = plan_.ops;
  std::vector<int> deps;
  out.op.resize(ops.size());
  std::vector<char> taken(ops.size(), 0);
  std::vector<int> image_deps;
  std::unordered_set<std::uint64_t> routes_checked;  // (source, destination) nodes
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    deps.clear();
    for (const int d : op.deps) deps.push_back(out.op[static_cast<std::size_t>(d)]);
    const std::uint64_t wanted = structure_key(op_key(op, dev), deps);
    const auto range = std::equal_range(index.structures.begin(), index.structures.end(),
                                        std::make_pair(wanted, std::numeric_limits<int>::min()),
                                        [](const auto& x, const auto& y) { return x.first < y.first; });
    if (range.second - range.first <= index.structure_rank[i]) return false;
    const int image = (range.first + index.structure_rank[i])->second;
    image_deps = ops[static_cast<std::size_t>(image)].deps;
    std::sort(image_deps.begin(), image_deps.end());
    if (taken[static_cast<std::size_t>(image)] || !same_op(op, ops[static_cast<std::size_t>(image)], dev) ||
        deps != image_deps) {
      return false;
    }
    taken[static_cast<std::size_t>(image)] = 1;
    out.op[i] = image;
    if (op.kind == OpKind::kCopy || op.kind == OpKind::kReduce) {
      const int a = plan_.devices[static_cast<std::size_t>(op.src.device)].node;
      const int b = plan_.devices[static_cast<std::size_t>(op.dst.device)].node;
      if (a != b && routes_checked.insert(ends(a, b)).second) {
        const Route& r = topo_.route(a, b);
        const Route& s = topo_.route(out.node[static_cast<std::size_t>(a)], out.node[static_cast<std::size_t>(b)]);
        if (r.links.size() != s.links.size() || r.latency_us != s.latency_us) return false;
        for (std::size_t k = 0; k < r.links.size(); ++k) {
          if (out.link[static_cast<std::size_t>(r.links[k])] != s.links[k]) return false;
        }
      }
    }
  }
  return true;
}

void Simulation::find_symmetry() {
  const int n_machines = topo_.machine_count();
  if (host_ || model_.host.serial_devices || n_machines < 2 || plan_.ops.size() < 2) return;
  const auto& nodes = topo_.nodes();
  // Every machine's nodes in index order; machines must list the same kinds.
  SymmetryIndex index;
  index.machines.resize(static_cast<std::size_t>(n_machines));
  index.local.assign(nodes.size(), -1);
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const int m = nodes[n].machine;
    if (m >= n_machines) return;
    if (m < 0) continue;
    index.local[n] = static_cast<int>(index.machines[static_cast<std::size_t>(m)].size());
    index.machines[static_cast<std::size_t>(m)].push_back(static_cast<int>(n));
  }
  for (const auto& m : index.machines) {
    if (m.size() != index.machines.front().size()) return;
  }
  // Library groups inside one machine only.
  for (const Op& op : plan_.ops) {
    if (op.kind != OpKind::kGroup) continue;
    for (const int g : op.group) {
      const auto machine = [&](int device) {
        return nodes[static_cast<std::size_t>(plan_.devices[static_cast<std::size_t>(device)].node)].machine;
      };
      if (machine(g) != machine(op.group.front())) return;
    }
  }
  index.device_of_node.assign(nodes.size(), -1);
  for (std::size_t d = 0; d < plan_.devices.size(); ++d) {
    int& slot = index.device_of_node[static_cast<std::size_t>(plan_.devices[d].node)];
    if (slot >= 0) return;  // two devices on one node: σ could not say which maps where
    slot = static_cast<int>(d);
  }
  const auto& links = topo_.links();
  index.link_rank.resize(links.size());
  for (std::size_t l = 0; l < links.size(); ++l) {
    auto& list = index.links_by_ends[ends(links[l].src, links[l].dst)];
    index.link_rank[l] = static_cast<int>(list.size());
    list.push_back(static_cast<int>(l));
  }
  const std::size_t n_ops = plan_.ops.size();
  std::vector<int> identity(plan_.devices.size());
  std::iota(identity.begin(), identity.end(), 0);
  index.structures.resize(n_ops);
  std::vector<int> deps;
  for (std::size_t i = 0; i < n_ops; ++i) {
    deps = plan_.ops[i].deps;
    index.structures[i] = {structure_key(op_key(plan_.ops[i], identity), deps), static_cast<int>(i)};
  }
  std::sort(index.structures.begin(), index.structures.end());
  index.structure_rank.resize(n_ops);
  for (std::size_t k = 0; k < n_ops; ++k) {
    const bool same = k > 0 && index.structures[k].first == index.structures[k - 1].first;
    index.structure_rank[static_cast<std::size_t>(index.structures[k].second)] =
        same ? index.structure_rank[static_cast<std::size_t>(index.structures[k - 1].second)] + 1 : 0;
  }

  // The group: rotation by one machine, else (a power of two of machines) every xor with a power of two.
  std::vector<Lift> lifts;
  {
    std::vector<int> rotate(static_cast<std::size_t>(n_machines));
    for (int m = 0; m < n_machines; ++m) rotate[static_cast<std::size_t>(m)] = (m + 1) % n_machines;
    Lift lift;
    if (lift_machine_map(rotate, index, lift)) lifts.push_back(std::move(lift));
  }
  if (lifts.empty() && (n_machines & (n_machines - 1)) == 0) {
    for (int bit = 1; bit < n_machines; bit <<= 1) {
      std::vector<int> flip(static_cast<std::size_t>(n_machines));
      for (int m = 0; m < n_machines; ++m) flip[static_cast<std::size_t>(m)] = m ^ bit;
      Lift lift;
      if (!lift_machine_map(flip, index, lift)) {
        lifts.clear();
        break;
      }
      lifts.push_back(std::move(lift));
    }
  }
  if (lifts.empty()) return;
  // Both groups act on the machines simply transitively: n_machines elements. Op orbits of that size only.
  UnionFind op_orbits(n_ops);
  for (const Lift& lift : lifts) {
    for (std::size_t i = 0; i < n_ops; ++i) op_orbits.unite(static_cast<int>(i), lift.op[i]);
  }
  std::vector<int> rep(n_ops), size(n_ops, 0);
  for (std::size_t i = 0; i < n_ops; ++i) ++size[static_cast<std::size_t>(rep[i] = op_orbits.find(static_cast<int>(i)))];
  for (std::size_t i = 0; i < n_ops; ++i) {
    if (size[static_cast<std::size_t>(rep[i])] != n_machines) return;
  }
  // Engine resources: links, then nodes' compute engines (host resources: never, host models are whole).
  const std::size_t n_res = capacity_.size();
  UnionFind res_orbits(n_res);
  for (const Lift& lift : lifts) {
    for (int l = 0; l < links_; ++l) res_orbits.unite(l, lift.link[static_cast<std::size_t>(l)]);
    for (int n = 0; n < nodes_; ++n) res_orbits.unite(links_ + n, links_ + lift.node[static_cast<std::size_t>(n)]);
  }
  sym_.order = n_machines;
  sym_.op_rep = std::move(rep);
  sym_.res_rep.resize(n_res);
  sym_.res_orbit.assign(n_res, 0);
  for (std::size_t r = 0; r < n_res; ++r) ++sym_.res_orbit[static_cast<std::size_t>(sym_.res_rep[r] = res_orbits.find(static_cast<int>(r)))];
  for (std::size_t r = 0; r < n_res; ++r) sym_.res_orbit[r] = sym_.res_orbit[static_cast<std::size_t>(sym_.res_rep[r])];
}

// The flows compiled for the simulated ops, moved onto the resources' representatives: a flow that crosses k
// resources of one orbit of size s stands for the `order` copies of itself, which put order·k/s flows on each
// resource of that orbit: its weight on the representative.
void Simulation::fold_flows_onto_orbits() {
  std::vector<std::pair<int, int>> crossed;  // (representative, resources of its orbit crossed)
  w_pool_.resize(res_pool_.size(), 1.0);
  for (FlowSpec& f : flows_) {
    crossed.clear();
    for (int j = 0; j < f.res_count; ++j) {
      const int r = sym_.res_rep[static_cast<std::size_t>(res_pool_[static_cast<std::size_t>(f.res_begin + j)])];
      auto it = std::find_if(crossed.begin(), crossed.end(), [&](const auto& c) { return c.first == r; });
      if (it == crossed.end()) {
        crossed.emplace_back(r, 1);
      } else {
        ++it->second;
      }
    }
    f.res_begin = static_cast<int>(res_pool_.size());
    f.res_count = static_cast<int>(crossed.size());
    for (const auto& [r, k] : crossed) {
      const double w = static_cast<double>(sym_.order) * k / sym_.res_orbit[static_cast<std::size_t>(r)];
      res_pool_.push_back(r);
      w_pool_.push_back(w);
      if (w != 1.0) {
        f.weighted = true;
        sym_.weighted = true;
      }
    }
  }
  // A weighted flow reads its weights from w_pool_; the others keep weight 1 implicitly.
}

}  // namespace artune::sim_detail
