// Graph helpers over a machine's GPUs: NVLink Hamiltonian cycles, packings of
// link-disjoint rings, and NVLink cliques. All of them speak in local GPU
// indices (0..G−1 inside the machine).
//
// The NVLink graph: GPUs a and b are adjacent when the route between them is
// NVLink (direct, or through NVSwitches only). A ring direction a→b consumes
// capacity: a direct connection has one unit per bonded lane (NV2 = 2), so a
// full-duplex lane carries one ring per direction; through an NVSwitch the
// GPU's lanes into the switch fabric (out of a) and out of it (into b) are the
// shared resources. Without any NVLink Hamiltonian cycle, rings fall back to
// the routed graph (PCIe trees): every directed link of the route is a
// resource with one unit per lane.

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <tuple>

#include "artune/algorithms/builders.hpp"
#include "artune/core/error.hpp"

namespace artune {

namespace {

// DFS budgets: these searches run on small machines, and the budgets only
// guarantee an answer in bounded time on large or dense ones.
constexpr long kCycleSearchSteps = 4'000'000;
constexpr long kPackingSteps = 50'000;
constexpr int kCandidateCycles = 256;
constexpr int kMaxRingsAsked = 1024;

struct RingGraph {
  int n = 0;
  std::vector<std::vector<char>> usable;            // usable[a][b]: a ring may go a→b
  std::vector<int> capacity;                        // per resource
  std::vector<std::vector<std::vector<int>>> uses;  // uses[a][b]: resources one ring a→b consumes
};

class ResourceTable {
 public:
  int get(const std::tuple<int, int, int>& key, int capacity, RingGraph& g) {
    const auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
    const int id = static_cast<int>(g.capacity.size());
    g.capacity.push_back(capacity);
    ids_.emplace(key, id);
    return id;
  }

 private:
  std::map<std::tuple<int, int, int>, int> ids_;
};

std::vector<int> machine_gpus(const Topology& topo, int machine) {
  if (machine < 0 || machine >= std::max(topo.machine_count(), 1)) {
    throw InvalidInput(fmt::format("topology '{}' has no machine {}", topo.name(), machine));
  }
  return topo.gpus_of_machine(machine);
}

const Route* try_route(const Topology& topo, int a, int b) {
  try {
    return &topo.route(a, b);
  } catch (const Error&) {
    return nullptr;
  }
}

RingGraph nvlink_graph(const Topology& topo, const std::vector<int>& gpus) {
  RingGraph g;
  g.n = static_cast<int>(gpus.size());
  g.usable.assign(static_cast<std::size_t>(g.n), std::vector<char>(static_cast<std::size_t>(g.n), 0));
  g.uses.assign(static_cast<std::size_t>(g.n), std::vector<std::vector<int>>(static_cast<std::size_t>(g.n)));
  ResourceTable table;
  const auto& nodes = topo.nodes();
  const auto& links = topo.links();
  // NVLink lanes between a GPU and the switch fabric, each way.
  auto switch_lanes = [&](int gpu, bool outward) {
    int lanes = 0;
    for (const Link& l : links) {
      if (l.kind != LinkKind::kNvLink) continue;
      const int self = outward ? l.src : l.dst;
      const int other = outward ? l.dst : l.src;
      if (self == gpu && nodes[static_cast<std::size_t>(other)].kind == NodeKind::kNvSwitch) lanes += l.lanes;
    }
    return lanes;
  };
  for (int a = 0; a < g.n; ++a) {
    for (int b = 0; b < g.n; ++b) {
      if (a == b) continue;
      const int ga = gpus[static_cast<std::size_t>(a)];
      const int gb = gpus[static_cast<std::size_t>(b)];
      const int lanes = topo.nvlink_lanes(ga, gb);
      auto& uses = g.uses[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
      if (lanes > 0) {
        uses.push_back(table.get({0, a, b}, lanes, g));
      } else {
        const Route* r = try_route(topo, ga, gb);
        if (r == nullptr || r->type != PathType::kNvl) continue;
        uses.push_back(table.get({1, a, -1}, std::max(1, switch_lanes(ga, true)), g));
        uses.push_back(table.get({2, b, -1}, std::max(1, switch_lanes(gb, false)), g));
      }
      g.usable[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] = 1;
    }
  }
  return g;
}

RingGraph routed_graph(const Topology& topo, const std::vector<int>& gpus) {
  RingGraph g;
  g.n = static_cast<int>(gpus.size());
  g.usable.assign(static_cast<std::size_t>(g.n), std::vector<char>(static_cast<std::size_t>(g.n), 0));
  g.uses.assign(static_cast<std::size_t>(g.n), std::vector<std::vector<int>>(static_cast<std::size_t>(g.n)));
  ResourceTable table;
  for (int a = 0; a < g.n; ++a) {
    for (int b = 0; b < g.n; ++b) {
      if (a == b) continue;
      const Route* r = try_route(topo, gpus[static_cast<std::size_t>(a)], gpus[static_cast<std::size_t>(b)]);
      if (r == nullptr) continue;
      auto& uses = g.uses[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
      for (int l : r->links)
        uses.push_back(table.get({3, l, -1}, std::max(1, topo.links()[static_cast<std::size_t>(l)].lanes), g));
      g.usable[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] = 1;
    }
  }
  return g;
}

bool adjacent(const RingGraph& g, int a, int b) {
  return g.usable[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] &&
         g.usable[static_cast<std::size_t>(b)][static_cast<std::size_t>(a)];
}

// Undirected Hamiltonian cycles, each once: start at 0, second vertex below the last.
std::vector<std::vector<int>> hamiltonian_cycles(const RingGraph& g, int limit) {
  std::vector<std::vector<int>> out;
  if (g.n == 0 || limit < 1) return out;
  if (g.n == 1) return {{0}};
  if (g.n == 2) {
    if (adjacent(g, 0, 1)) out.push_back({0, 1});
    return out;
  }
  std::vector<int> path{0};
  std::vector<char> used(static_cast<std::size_t>(g.n), 0);
  used[0] = 1;
  long steps = 0;
  std::function<void()> dfs = [&] {
    if (static_cast<int>(out.size()) >= limit || ++steps > kCycleSearchSteps) return;
    const int last = path.back();
    if (static_cast<int>(path.size()) == g.n) {
      if (adjacent(g, last, 0) && path[1] < path.back()) out.push_back(path);
      return;
    }
    for (int v = 1; v < g.n; ++v) {
      if (used[static_cast<std::size_t>(v)] || !adjacent(g, last, v)) continue;
      used[static_cast<std::size_t>(v)] = 1;
      path.push_back(v);
      dfs();
      path.pop_back();
      used[static_cast<std::size_t>(v)] = 0;
      if (static_cast<int>(out.size()) >= limit) return;
    }
  };
  dfs();
  return out;
}

// Resources consumed by one directed ring.
std::vector<int> ring_uses(const RingGraph& g, const std::vector<int>& ring) {
  std::vector<int> out;
  const int n = static_cast<int>(ring.size());
  if (n < 2) return out;
  for (int i = 0; i < n; ++i) {
    const int a = ring[static_cast<std::size_t>(i)];
    const int b = ring[static_cast<std::size_t>((i + 1) % n)];
    const auto& u = g.uses[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
    out.insert(out.end(), u.begin(), u.end());
  }
  return out;
}

// Most rings any packing can hold: each ring leaves every GPU once, through one of the
// resources that start its outgoing connections.
int ring_bound(const RingGraph& g) {
  int bound = kMaxRingsAsked;
  for (int a = 0; a < g.n; ++a) {
    std::vector<int> first;
    for (int b = 0; b < g.n; ++b) {
      const auto& u = g.uses[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
      if (g.usable[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] && !u.empty()) first.push_back(u.front());
    }
    std::sort(first.begin(), first.end());
    first.erase(std::unique(first.begin(), first.end()), first.end());
    int units = 0;
    for (int r : first) units += g.capacity[static_cast<std::size_t>(r)];
    bound = std::min(bound, units);
  }
  return bound;
}

// The largest set of directed rings (up to `want`) from the candidate cycles, in both
// directions, that fits the capacities; ties keep the earliest candidates.
std::vector<std::vector<int>> pack_rings(const RingGraph& g, const std::vector<std::vector<int>>& cycles, int want) {
  std::vector<std::vector<int>> candidates;
  for (const auto& c : cycles) {
    candidates.push_back(c);
    if (c.size() > 2) {
      std::vector<int> reverse{c.front()};
      reverse.insert(reverse.end(), c.rbegin(), c.rend() - 1);
      candidates.push_back(std::move(reverse));
    }
  }
  std::vector<std::vector<int>> uses;
  for (const auto& c : candidates) uses.push_back(ring_uses(g, c));
  const int goal = std::min(want, ring_bound(g));
  std::vector<int> left = g.capacity;
  std::vector<int> chosen;
  std::vector<int> best;
  long steps = 0;
  std::function<bool(std::size_t)> search = [&](std::size_t i) -> bool {
    if (chosen.size() > best.size()) best = chosen;
    if (static_cast<int>(chosen.size()) >= goal) return true;
    if (i >= candidates.size() || ++steps > kPackingSteps) return false;
    // Take as many copies of candidate i as fit (most first), then move on.
    int copies = 0;
    while (static_cast<int>(chosen.size()) < goal) {
      for (int r : uses[i]) --left[static_cast<std::size_t>(r)];
      bool fits = true;
      for (int r : uses[i]) fits = fits && left[static_cast<std::size_t>(r)] >= 0;
      if (!fits) {
        for (int r : uses[i]) ++left[static_cast<std::size_t>(r)];
        break;
      }
      chosen.push_back(static_cast<int>(i));
      ++copies;
      if (uses[i].empty()) break;  // a one-GPU ring uses nothing; one copy is enough here
    }
    for (;;) {
      if (search(i + 1)) return true;
      if (copies == 0) return false;
      for (int r : uses[i]) ++left[static_cast<std::size_t>(r)];
      chosen.pop_back();
      --copies;
    }
  };
  search(0);
  std::vector<std::vector<int>> out;
  for (int i : best) out.push_back(candidates[static_cast<std::size_t>(i)]);
  return out;
}

// One directed Hamiltonian ring from GPU 0 that fits the remaining capacity (DFS, ascending
// neighbours, resources consumed as the path grows); empty when none is found within budget.
std::vector<int> find_ring(const RingGraph& g, std::vector<int>& left) {
  std::vector<int> path{0};
  std::vector<char> used(static_cast<std::size_t>(g.n), 0);
  used[0] = 1;
  long steps = 0;
  auto take = [&](int a, int b) {
    const auto& u = g.uses[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
    for (int r : u) --left[static_cast<std::size_t>(r)];
    bool fits = true;
    for (int r : u) fits = fits && left[static_cast<std::size_t>(r)] >= 0;
    if (!fits) {
      for (int r : u) ++left[static_cast<std::size_t>(r)];
    }
    return fits;
  };
  auto give = [&](int a, int b) {
    for (int r : g.uses[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)]) ++left[static_cast<std::size_t>(r)];
  };
  std::function<bool()> dfs = [&]() -> bool {
    if (++steps > kPackingSteps) return false;
    const int last = path.back();
    if (static_cast<int>(path.size()) == g.n) {
      return g.usable[static_cast<std::size_t>(last)][0] && take(last, 0);
    }
    for (int v = 1; v < g.n; ++v) {
      if (used[static_cast<std::size_t>(v)] || !g.usable[static_cast<std::size_t>(last)][static_cast<std::size_t>(v)])
        continue;
      if (!take(last, v)) continue;
      used[static_cast<std::size_t>(v)] = 1;
      path.push_back(v);
      if (dfs()) return true;
      path.pop_back();
      used[static_cast<std::size_t>(v)] = 0;
      give(last, v);
    }
    return false;
  };
  if (g.n < 2 || !dfs()) return {};
  return path;  // its resources stay consumed
}

// Greedy packing for dense graphs, where the lexicographically first cycles all share edges:
// find a ring in what is left, take it and its reverse when that fits too, repeat.
std::vector<std::vector<int>> greedy_rings(const RingGraph& g, int goal) {
  std::vector<int> left = g.capacity;
  std::vector<std::vector<int>> out;
  while (static_cast<int>(out.size()) < goal) {
    std::vector<int> ring = find_ring(g, left);
    if (ring.empty()) break;
    out.push_back(ring);
    if (static_cast<int>(out.size()) >= goal || g.n <= 2) continue;
    std::vector<int> reverse{ring.front()};
    reverse.insert(reverse.end(), ring.rbegin(), ring.rend() - 1);
    const auto uses = ring_uses(g, reverse);
    for (int r : uses) --left[static_cast<std::size_t>(r)];
    bool fits = true;
    for (int r : uses) fits = fits && left[static_cast<std::size_t>(r)] >= 0;
    if (fits) {
      out.push_back(std::move(reverse));
    } else {
      for (int r : uses) ++left[static_cast<std::size_t>(r)];
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<int>> nvlink_hamiltonian_cycles(const Topology& topo, int machine, int limit) {
  const auto gpus = machine_gpus(topo, machine);
  return hamiltonian_cycles(nvlink_graph(topo, gpus), limit);
}

std::vector<std::vector<int>> link_disjoint_rings(const Topology& topo, int machine, int k) {
  const auto gpus = machine_gpus(topo, machine);
  const int n = static_cast<int>(gpus.size());
  k = std::min(k, kMaxRingsAsked);
  if (k < 1 || n == 0) return {};
  if (n == 1) return {{0}};  // no links to share: one trivial ring stands for any number
  RingGraph g = nvlink_graph(topo, gpus);
  auto cycles = hamiltonian_cycles(g, kCandidateCycles);
  if (cycles.empty()) {
    g = routed_graph(topo, gpus);
    cycles = hamiltonian_cycles(g, kCandidateCycles);
  }
  auto rings = pack_rings(g, cycles, k);
  const int goal = std::min(k, ring_bound(g));
  if (static_cast<int>(rings.size()) < goal) {
    auto greedy = greedy_rings(g, goal);
    if (greedy.size() > rings.size()) rings = std::move(greedy);
  }
  return rings;
}

std::vector<std::vector<int>> nvlink_cliques(const Topology& topo, int machine) {
  const auto gpus = machine_gpus(topo, machine);
  const RingGraph g = nvlink_graph(topo, gpus);
  std::vector<char> left(static_cast<std::size_t>(g.n), 1);
  std::vector<std::vector<int>> out;
  for (int remaining = g.n; remaining > 0;) {
    // The largest clique among the GPUs left; DFS in ascending order finds the
    // lexicographically smallest one first, and only a larger one replaces it.
    std::vector<int> best;
    std::vector<int> clique;
    long steps = 0;
    std::function<void(int)> extend = [&](int from) {
      if (clique.size() > best.size()) best = clique;
      if (++steps > kCycleSearchSteps) return;
      for (int v = from; v < g.n; ++v) {
        if (!left[static_cast<std::size_t>(v)]) continue;
        if (clique.size() + static_cast<std::size_t>(g.n - v) <= best.size()) return;
        bool ok = true;
        for (int u : clique) ok = ok && adjacent(g, u, v);
        if (!ok) continue;
        clique.push_back(v);
        extend(v + 1);
        clique.pop_back();
      }
    };
    extend(0);
    for (int v : best) left[static_cast<std::size_t>(v)] = 0;
    remaining -= static_cast<int>(best.size());
    out.push_back(std::move(best));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace artune
