// The min-cut bound (cut_bound.hpp): Dinkelbach's iteration over LEMON max flows.

#include "artune/algorithms/synthesis/cut_bound.hpp"

#include <fmt/format.h>
#include <lemon/lp.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <set>
#include <tuple>

#include "artune/algorithms/synthesis/max_flow.hpp"
#include "artune/core/error.hpp"

namespace artune {

namespace {

constexpr double kBytesPerUsPerGbps = 1e3;
// Relative slack under which a max flow counts as meeting its demand: rates are sums of a few link figures,
// so anything below it is rounding, not a cut.
constexpr double kRelativeSlack = 1e-9;
// Dinkelbach moves through distinct cut ratios, each strictly lower; on the shipped configs it stops after
// 2–4 steps. This only guards against a loop that floating point could keep alive.
constexpr int kMaxSteps = 200;

// The flow network of a topology, with data moving the way routes move it. Devices that hold data (GPUs,
// CPU sockets' memory, which can stage a copy) and switches through which routes turn every way between
// such devices (NVSwitch, network switches) are one vertex each. A PCIe switch or a NIC is one vertex per
// link end instead, joined by an arc of unbounded capacity for each turn a route takes through it (a PCIe
// switch: the turns of the routes between the GPUs, CPUs and NICs of its machine; a NIC: between its
// PCIe link and the network), so that no flow turns where no transfer can: not through a PCIe switch
// between two NVLink peers below it, whose route is their NVLink, nor back out of a NIC. One arc per link
// with a positive rate (reversed for the reduce-scatter), plus a source vertex (the last) with an arc of
// capacity 0 to each participant.
struct Network {
  synthesis::FlowNetwork flow{0};
  int source = -1;
  std::vector<int> vertex_of_node;  // -1 for a switch split into link ends
  std::vector<int> node_of_vertex;
  std::vector<int> link_of_arc;  // -1 for turns and source arcs
  std::vector<int> source_arcs;  // per participant
  struct Arc {
    int from, to;
    double capacity;
    int link;  // -1 for turns
  };
  std::vector<Arc> arcs;  // the links' and turns' arcs (not the source's), as added
};

// Turns (link in, link out) that routes take through each PCIe switch, from the routes between every GPU,
// CPU and NIC of each machine (a route across machines is such routes joined by the network).
std::vector<std::set<std::pair<int, int>>> pcie_turns(const Topology& topo) {
  const auto& nodes = topo.nodes();
  std::vector<std::set<std::pair<int, int>>> turns(nodes.size());
  for (int m = 0; m < topo.machine_count(); ++m) {
    std::vector<int> ends;
    for (NodeKind kind : {NodeKind::kGpu, NodeKind::kCpu, NodeKind::kNic}) {
      const auto of_kind = topo.nodes_of_kind(kind, m);
      ends.insert(ends.end(), of_kind.begin(), of_kind.end());
    }
    for (int a : ends) {
      for (int b : ends) {
        if (a == b) continue;
        const std::vector<int>& path = topo.route(a, b).links;
        for (std::size_t k = 0; k + 1 < path.size(); ++k) {
          const int w = topo.links()[static_cast<std::size_t>(path[k])].dst;
          if (nodes[static_cast<std::size_t>(w)].kind == NodeKind::kPcieSwitch)
            turns[static_cast<std::size_t>(w)].emplace(path[k], path[k + 1]);
        }
      }
    }
  }
  return turns;
}

Network make_network(const Topology& topo, const std::vector<int>& participants, const LinkRates& rates, bool reverse) {
  const auto& nodes = topo.nodes();
  const auto& links = topo.links();
  auto turns = pcie_turns(topo);
  std::vector<bool> split(nodes.size(), false);
  std::vector<std::vector<int>> in_links(nodes.size());
  for (std::size_t l = 0; l < links.size(); ++l)
    in_links[static_cast<std::size_t>(links[l].dst)].push_back(static_cast<int>(l));
  for (std::size_t w = 0; w < nodes.size(); ++w) {
    split[w] = nodes[w].kind == NodeKind::kPcieSwitch || nodes[w].kind == NodeKind::kNic;
    if (nodes[w].kind != NodeKind::kNic) continue;
    for (int a : in_links[w]) {
      for (int b : topo.out_links(static_cast<int>(w))) {
        if (links[static_cast<std::size_t>(a)].src != links[static_cast<std::size_t>(b)].dst) turns[w].emplace(a, b);
      }
    }
  }
  Network net;
  int vertices = 0;
  net.vertex_of_node.assign(nodes.size(), -1);
  for (std::size_t v = 0; v < nodes.size(); ++v) {
    if (split[v]) continue;
    net.vertex_of_node[v] = vertices++;
    net.node_of_vertex.push_back(static_cast<int>(v));
  }
  // Link ends of split switches: the vertex where link l enters its destination, and where it leaves its source.
  std::vector<int> enter(links.size(), -1), leave(links.size(), -1);
  for (std::size_t l = 0; l < links.size(); ++l) {
    const auto dst = static_cast<std::size_t>(links[l].dst), src = static_cast<std::size_t>(links[l].src);
    if (split[dst]) {
      enter[l] = vertices++;
      net.node_of_vertex.push_back(static_cast<int>(dst));
    }
    if (split[src]) {
      leave[l] = vertices++;
      net.node_of_vertex.push_back(static_cast<int>(src));
    }
  }
  net.source = vertices++;
  net.node_of_vertex.push_back(-1);
  net.flow = synthesis::FlowNetwork(vertices);
  double unbounded = 1;
  for (double r : rates) unbounded += r;
  const auto add = [&](int from, int to, double cap, int link) {
    if (reverse) std::swap(from, to);
    net.flow.add_arc(from, to, cap);
    net.link_of_arc.push_back(link);
    net.arcs.push_back({from, to, cap, link});
  };
  for (std::size_t l = 0; l < links.size(); ++l) {
    const Link& link = links[l];
    if (!(rates[l] > 0) || link.src == link.dst) continue;
    const int from = leave[l] >= 0 ? leave[l] : net.vertex_of_node[static_cast<std::size_t>(link.src)];
    const int to = enter[l] >= 0 ? enter[l] : net.vertex_of_node[static_cast<std::size_t>(link.dst)];
    add(from, to, rates[l], static_cast<int>(l));
  }
  for (std::size_t w = 0; w < nodes.size(); ++w) {
    if (!split[w]) continue;
    for (const auto& [a, b] : turns[w])
      add(enter[static_cast<std::size_t>(a)], leave[static_cast<std::size_t>(b)], unbounded, -1);
  }
  for (int p : participants) {
    net.source_arcs.push_back(net.flow.add_arc(net.source, net.vertex_of_node[static_cast<std::size_t>(p)], 0.0));
    net.link_of_arc.push_back(-1);
  }
  return net;
}

void check_rates(const Topology& topo, const LinkRates& rates) {
  ARTUNE_CHECK(rates.size() == topo.links().size(),
               fmt::format("cut bound: {} link rates for {} links", rates.size(), topo.links().size()));
}

// Participants of the first machine when every machine of a cluster is built alike and all GPUs take part
// (the max flow to a GPU is then the same as to its twins elsewhere); otherwise every participant.
struct Twins {
  bool alike = false;
  std::vector<int> first;   // participants of machine 0
  std::vector<int> second;  // participants of machine 1
};

Twins machine_twins(const Topology& topo, const std::vector<int>& participants) {
  Twins t;
  if (topo.machine_count() < 2) return t;
  std::vector<int> sorted = participants;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> gpus = topo.gpus();
  std::sort(gpus.begin(), gpus.end());
  if (sorted != gpus) return t;
  const std::string shape = topo.machine_shape(0);
  for (int m = 1; m < topo.machine_count(); ++m) {
    if (topo.machine_shape(m) != shape) return t;
  }
  t.alike = true;
  t.first = topo.gpus_of_machine(0);
  t.second = topo.gpus_of_machine(1);
  return t;
}

// The links a vertex set S leaves (in the network's direction, i.e. reversed for the reduce-scatter).
double boundary_rate(const Network& net, const LinkRates& rates, const std::vector<bool>& side,
                     std::vector<int>* links) {
  double sum = 0;
  for (int a = 0; a < net.flow.arcs(); ++a) {
    const int l = net.link_of_arc[static_cast<std::size_t>(a)];
    if (l < 0) continue;
    const auto [tail, head] = net.flow.ends(a);
    if (side[static_cast<std::size_t>(tail)] && !side[static_cast<std::size_t>(head)]) {
      sum += rates[static_cast<std::size_t>(l)];
      if (links != nullptr) links->push_back(l);
    }
  }
  if (links != nullptr) std::sort(links->begin(), links->end());
  return sum;
}

int ranks_in(const Network& net, const std::vector<int>& participants, const std::vector<bool>& side) {
  int inside = 0;
  for (int p : participants)
    inside += side[static_cast<std::size_t>(net.vertex_of_node[static_cast<std::size_t>(p)])] ? 1 : 0;
  return inside;
}

// The cut of the vertex set `side` (source excluded): the nodes any of whose vertices it holds.
BoundCut make_cut(const Topology& topo, const Network& net, const std::vector<int>& participants,
                  const LinkRates& rates, const std::vector<bool>& side, std::string what) {
  BoundCut cut;
  cut.what = std::move(what);
  std::vector<bool> node_inside(topo.nodes().size(), false);
  for (std::size_t v = 0; v < side.size(); ++v) {
    const int node = net.node_of_vertex[v];
    if (side[v] && node >= 0) node_inside[static_cast<std::size_t>(node)] = true;
  }
  for (std::size_t v = 0; v < node_inside.size(); ++v) {
    if (node_inside[v]) cut.inside.push_back(static_cast<int>(v));
  }
  cut.ranks_inside = ranks_in(net, participants, side);
  cut.ranks_outside = static_cast<int>(participants.size()) - cut.ranks_inside;
  cut.gbps = boundary_rate(net, rates, side, &cut.links);
  return cut;
}

// The most the participants `receivers` can take in together over their own links (all-gather; their
// links out for the reduce-scatter, on the reversed network), with every GPU and CPU sending as much as it
// likes: a max flow from a source joined to every data-holding device to a sink that collects the links
// into the receivers. Each receiver needs N−1 blocks, so the rate per block is that flow over |R|·(N−1).
BoundCut reception_cut(const Topology& topo, const Network& net, const std::vector<int>& participants,
                       const LinkRates& rates, const std::vector<int>& receivers, const std::string& what) {
  const int base = net.flow.nodes();  // the old source vertex stays unused
  synthesis::FlowNetwork flow(base + 2);
  const int source = base, sink = base + 1;
  std::vector<bool> receiver(static_cast<std::size_t>(base), false);
  for (int r : receivers) receiver[static_cast<std::size_t>(net.vertex_of_node[static_cast<std::size_t>(r)])] = true;
  std::vector<int> link_of;
  double unbounded = 1;
  for (double r : rates) unbounded += r;
  for (const Network::Arc& a : net.arcs) {
    // Into a receiver: to the sink. Out of a receiver: from its own vertex, which the source feeds.
    flow.add_arc(a.from, receiver[static_cast<std::size_t>(a.to)] ? sink : a.to, a.capacity);
    link_of.push_back(a.link);
  }
  for (std::size_t v = 0; v < topo.nodes().size(); ++v) {
    const NodeKind kind = topo.nodes()[v].kind;
    if (kind == NodeKind::kGpu || kind == NodeKind::kCpu) {
      flow.add_arc(source, net.vertex_of_node[v], unbounded);
      link_of.push_back(-1);
    }
  }
  std::vector<bool> side;
  const double total = flow.max_flow(source, sink, &side);
  BoundCut cut;
  cut.what = what;
  cut.receivers = receivers;
  std::sort(cut.receivers.begin(), cut.receivers.end());
  for (int a = 0; a < flow.arcs(); ++a) {
    const auto [tail, head] = flow.ends(a);
    if (link_of[static_cast<std::size_t>(a)] >= 0 && side[static_cast<std::size_t>(tail)] &&
        !side[static_cast<std::size_t>(head)]) {
      cut.links.push_back(link_of[static_cast<std::size_t>(a)]);
      cut.gbps += rates[static_cast<std::size_t>(link_of[static_cast<std::size_t>(a)])];
    }
  }
  std::sort(cut.links.begin(), cut.links.end());
  cut.ranks_inside = static_cast<int>(participants.size()) - static_cast<int>(receivers.size());
  cut.ranks_outside = static_cast<int>(receivers.size());
  cut.rate_gbps = total / (static_cast<double>(receivers.size()) * (static_cast<double>(participants.size()) - 1));
  return cut;
}

// The vertices reached from `seeds` along the network's arcs (against them: `forward` false), never entering a
// participant (`rank` ≥ 0): the seeds themselves and the non-participants that forward between them and the rest.
std::vector<bool> reach_through_relays(const Network& net, const std::vector<int>& rank, std::vector<bool> seeds,
                                       bool forward) {
  std::vector<int> stack;
  for (std::size_t v = 0; v < seeds.size(); ++v) {
    if (seeds[v]) stack.push_back(static_cast<int>(v));
  }
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    for (const Network::Arc& a : net.arcs) {
      const int from = forward ? a.from : a.to, to = forward ? a.to : a.from;
      if (from != v || seeds[static_cast<std::size_t>(to)] || rank[static_cast<std::size_t>(to)] >= 0) continue;
      seeds[static_cast<std::size_t>(to)] = true;
      stack.push_back(to);
    }
  }
  return seeds;
}

// What each vertex of a network does with the bytes of a plan over `participants`. A participant (its rank) sends
// and receives them. A device that holds memory but no part of the plan (a CPU socket, a GPU outside it) can keep a
// byte and send copies of it several ways, or combine bytes. A switch's or NIC's link end forwards each byte, as it
// came, one way. So one byte on a link can reach several places only if it meets a copying device on its way.
struct Relays {
  std::vector<int> rank;           // per vertex: the participant's rank, or -1
  std::vector<bool> from_copying;  // a copying device, or reached from one through forwarding ends only
  std::vector<bool> to_copying;    // a copying device, or reaching one through forwarding ends only
};

Relays relays_of(const Topology& topo, const Network& net, const std::vector<int>& participants) {
  const int vertices = net.flow.nodes();
  Relays r;
  r.rank.assign(static_cast<std::size_t>(vertices), -1);
  for (std::size_t i = 0; i < participants.size(); ++i)
    r.rank[static_cast<std::size_t>(net.vertex_of_node[static_cast<std::size_t>(participants[i])])] =
        static_cast<int>(i);
  std::vector<bool> copies(static_cast<std::size_t>(vertices), false);
  for (std::size_t v = 0; v < topo.nodes().size(); ++v) {
    const int vertex = net.vertex_of_node[v];
    const NodeKind kind = topo.nodes()[v].kind;
    if (vertex >= 0 && r.rank[static_cast<std::size_t>(vertex)] < 0)
      copies[static_cast<std::size_t>(vertex)] = kind == NodeKind::kCpu || kind == NodeKind::kGpu;
  }
  r.from_copying = reach_through_relays(net, r.rank, copies, true);
  r.to_copying = reach_through_relays(net, r.rank, copies, false);
  return r;
}

// The link arcs on which one byte may count for several flows: those a byte crosses before a copying device
// (relays_of) that can send it several ways; where those devices may also combine bytes (`combining`), only those
// between two of them, since a byte a participant emits is useless to its own part and switches pass it on as it
// came.
std::vector<bool> shared_arcs(const Network& net, const Relays& relays, bool combining) {
  std::vector<bool> shared(net.arcs.size(), false);
  for (std::size_t k = 0; k < net.arcs.size(); ++k) {
    const Network::Arc& a = net.arcs[k];
    shared[k] = a.link >= 0 && relays.to_copying[static_cast<std::size_t>(a.to)] &&
                (!combining || relays.from_copying[static_cast<std::size_t>(a.from)]);
  }
  return shared;
}

// The links an LP's optimum fills, into `cut.links` and `cut.gbps`: `flows` per arc holds the columns of the flows
// over it, which load it together, or on a shared arc (one byte counting for every flow it serves) each on its own.
void fill_links(const Network& net, const LinkRates& rates, const std::vector<bool>& shared, const lemon::Lp& lp,
                const std::vector<std::vector<lemon::Lp::Col>>& flows, BoundCut& cut) {
  for (std::size_t k = 0; k < net.arcs.size(); ++k) {
    const Network::Arc& a = net.arcs[k];
    double load = 0;
    for (const lemon::Lp::Col& f : flows[k]) load = shared[k] ? std::max(load, lp.primal(f)) : load + lp.primal(f);
    if (a.link >= 0 && load >= a.capacity * (1 - 1e-6)) cut.links.push_back(a.link);
  }
  std::sort(cut.links.begin(), cut.links.end());
  cut.links.erase(std::unique(cut.links.begin(), cut.links.end()), cut.links.end());
  for (int l : cut.links) cut.gbps += rates[static_cast<std::size_t>(l)];
}

// The arcs of a network that a flow from a participant `starts` accepts (by rank) to one `ends` accepts can take,
// forwarded by non-participants only: those whose tail such a flow reaches and whose head reaches its end. Flows in
// an LP get columns on these alone.
template <typename Starts, typename Ends>
std::vector<bool> arcs_between(const Network& net, const std::vector<int>& rank, Starts starts, Ends ends) {
  std::vector<bool> starting(rank.size(), false), ending(rank.size(), false);
  for (std::size_t v = 0; v < rank.size(); ++v) {
    starting[v] = rank[v] >= 0 && starts(rank[v]);
    ending[v] = rank[v] >= 0 && ends(rank[v]);
  }
  const std::vector<bool> reached = reach_through_relays(net, rank, std::move(starting), true),
                          reaching = reach_through_relays(net, rank, std::move(ending), false);
  std::vector<bool> usable(net.arcs.size(), false);
  for (std::size_t k = 0; k < net.arcs.size(); ++k) {
    const Network::Arc& a = net.arcs[k];
    const int tail = rank[static_cast<std::size_t>(a.from)], head = rank[static_cast<std::size_t>(a.to)];
    usable[k] = (tail < 0 ? reached[static_cast<std::size_t>(a.from)] : starts(tail)) &&
                (head < 0 ? reaching[static_cast<std::size_t>(a.to)] : ends(head));
  }
  return usable;
}

// The gossip bound among the parts of a partition of the participants (`part` per rank, parts 0..p−1), as flows (an
// LP): every byte crosses between parts 2(p−1) times in all and into each part at least once. Each part takes in
// what the other parts' participants send it, no participant forwarding a byte for another part; switches
// forward; a copying device (relays_of) can send a byte it was sent several ways, so a byte loads a link once per
// part it reaches unless such a device lies ahead. Where those devices may also combine bytes (`combining`: two
// parts, the split both ways), a byte serves both parts only between two of them: what a participant emits is
// useless to its own part, and a switch passes it on unchanged. Returns the largest algbw x with every part
// taking in x and all of them 2(p−1)·x, and the links that optimum fills.
BoundCut receptions_as_flows(const Topology& topo, const Network& net, const Relays& relays, const LinkRates& rates,
                             const std::vector<int>& part, bool combining) {
  const std::vector<int>& rank = relays.rank;
  const int vertices = net.flow.nodes();
  const int parts = *std::max_element(part.begin(), part.end()) + 1;
  lemon::Lp lp;
  lp.messageLevel(lemon::LpBase::MESSAGE_NOTHING);
  const lemon::Lp::Col x = lp.addCol();
  lp.colLowerBound(x, 0);
  lemon::Lp::Expr received;
  std::vector<lemon::Lp::Expr> load(net.arcs.size());
  std::vector<std::vector<lemon::Lp::Col>> flows(net.arcs.size());
  const std::vector<bool> shared = shared_arcs(net, relays, combining);
  const auto part_of = [&](int vertex) {
    const int r = rank[static_cast<std::size_t>(vertex)];
    return r < 0 ? -1 : part[static_cast<std::size_t>(r)];
  };
  for (int j = 0; j < parts; ++j) {
    std::vector<lemon::Lp::Expr> balance(static_cast<std::size_t>(vertices));
    lemon::Lp::Expr into_j;
    // Participants of the other parts start part j's flow, j's end it; none forwards it.
    const std::vector<bool> usable = arcs_between(
        net, rank, [&](int r) { return part[static_cast<std::size_t>(r)] != j; },
        [&](int r) { return part[static_cast<std::size_t>(r)] == j; });
    for (std::size_t k = 0; k < net.arcs.size(); ++k) {
      const Network::Arc& a = net.arcs[k];
      if (!usable[k]) continue;
      const int tail = part_of(a.from), head = part_of(a.to);
      const lemon::Lp::Col f = lp.addCol();
      lp.colLowerBound(f, 0);
      if (shared[k]) lp.colUpperBound(f, a.capacity);
      load[k] += f;
      flows[k].push_back(f);
      if (tail < 0) balance[static_cast<std::size_t>(a.from)] -= f;
      if (head < 0) balance[static_cast<std::size_t>(a.to)] += f;
      if (head == j) into_j += f;
    }
    for (int v = 0; v < vertices; ++v) {
      if (rank[static_cast<std::size_t>(v)] < 0 && v != net.source)
        lp.addRow(balance[static_cast<std::size_t>(v)] == 0);
    }
    lp.addRow(into_j - x >= 0);
    received += into_j;
  }
  for (std::size_t k = 0; k < net.arcs.size(); ++k) {
    if (net.arcs[k].link >= 0 && !shared[k]) lp.addRow(load[k] <= net.arcs[k].capacity);
  }
  lp.addRow(received - 2.0 * (parts - 1) * x >= 0);
  lp.max();
  lp.obj(x);
  if (lp.solve() != lemon::LpBase::SOLVED || lp.primalType() != lemon::Lp::OPTIMAL) {
    throw InternalError(fmt::format("cut bound: the receptions LP of '{}' found no optimum", topo.name()));
  }
  BoundCut cut;
  cut.rate_gbps = lp.primal(x);
  fill_links(net, rates, shared, lp, flows, cut);
  return cut;
}

std::vector<int> default_participants(const Topology& topo, std::vector<int> participants) {
  if (participants.empty()) participants = topo.gpus();
  return participants;
}

// A cut of kind `what` that bounds nothing (infinite rate): what a bound returns where it does not apply, and
// where a search starts.
BoundCut no_cut(std::string what) {
  BoundCut none;
  none.what = std::move(what);
  none.rate_gbps = std::numeric_limits<double>::infinity();
  return none;
}

}  // namespace

BoundCut spread_cut(const Topology& topo, const std::vector<int>& participants_in, const LinkRates& rates,
                    bool reverse) {
  check_rates(topo, rates);
  const std::vector<int> participants = default_participants(topo, participants_in);
  const int n = static_cast<int>(participants.size());
  const std::string what = reverse ? "reduce-scatter" : "all-gather";
  if (n < 2) return no_cut(what);
  Network net = make_network(topo, participants, rates, reverse);
  const int vertices = net.flow.nodes();
  // Start from the best single-participant cut: every vertex but u's sends u the N−1 other blocks.
  std::vector<bool> in_s;
  double x = std::numeric_limits<double>::infinity();
  for (int u : participants) {
    std::vector<bool> all_but_u(static_cast<std::size_t>(vertices), true);
    all_but_u[static_cast<std::size_t>(net.vertex_of_node[static_cast<std::size_t>(u)])] = false;
    all_but_u[static_cast<std::size_t>(net.source)] = false;
    const double ratio = boundary_rate(net, rates, all_but_u, nullptr) / (n - 1);
    if (ratio < x) {
      x = ratio;
      in_s = std::move(all_but_u);
    }
  }
  if (!(x > 0)) {
    throw InvalidInput(fmt::format("topology '{}': a participant has no link to the others", topo.name()));
  }
  const Twins twins = machine_twins(topo, participants);
  const std::vector<int>& targets = twins.alike ? twins.first : participants;
  std::vector<bool> side;
  for (int step = 0; step < kMaxSteps; ++step) {
    for (int arc : net.source_arcs) net.flow.set_capacity(arc, x);
    const double demand = x * n;
    double best_ratio = x;
    std::vector<bool> best_side;
    for (int u : targets) {
      const double flow = net.flow.max_flow(net.source, net.vertex_of_node[static_cast<std::size_t>(u)], &side);
      if (flow >= demand * (1 - kRelativeSlack)) continue;
      side[static_cast<std::size_t>(net.source)] = false;
      const int inside = ranks_in(net, participants, side);
      if (inside == 0) continue;
      const double ratio = boundary_rate(net, rates, side, nullptr) / inside;
      if (ratio < best_ratio * (1 - kRelativeSlack)) {
        best_ratio = ratio;
        best_side = side;
      }
    }
    if (best_side.empty()) break;
    x = best_ratio;
    in_s = std::move(best_side);
  }
  BoundCut cut = make_cut(topo, net, participants, rates, in_s, what);
  cut.rate_gbps = x;
  // Two participants whose links share an upstream link (the uplink of the PCIe switch they sit under) can
  // be fed less together than apart: every one of them takes N−1 blocks in over its own links.
  {
    const std::vector<int> firsts = twins.alike ? twins.first : participants;
    std::vector<int> seconds = participants;
    if (twins.alike) {
      seconds = twins.first;
      seconds.insert(seconds.end(), twins.second.begin(), twins.second.end());
    }
    for (int a : firsts) {
      for (int b : seconds) {
        if (b <= a && std::find(firsts.begin(), firsts.end(), b) != firsts.end()) continue;
        if (a == b) continue;
        BoundCut pair = reception_cut(topo, net, participants, rates, {a, b}, what);
        if (pair.rate_gbps < cut.rate_gbps * (1 - kRelativeSlack)) cut = std::move(pair);
      }
    }
  }
  return cut;
}

BoundCut splitting_cut(const Topology& topo, const std::vector<int>& participants_in, const LinkRates& rates) {
  check_rates(topo, rates);
  const std::vector<int> participants = default_participants(topo, participants_in);
  BoundCut best = no_cut("in-network");
  if (participants.size() < 2) return best;
  Network net = make_network(topo, participants, rates, false);
  const Twins twins = machine_twins(topo, participants);
  const int v0 = twins.alike ? twins.first.front() : participants.front();
  std::vector<int> others;
  if (twins.alike) {
    others = twins.first;
    others.insert(others.end(), twins.second.begin(), twins.second.end());
  } else {
    others = participants;
  }
  std::vector<bool> side;
  std::vector<bool> best_side;
  const int a0 = net.vertex_of_node[static_cast<std::size_t>(v0)];
  for (int u : others) {
    if (u == v0) continue;
    const int b0 = net.vertex_of_node[static_cast<std::size_t>(u)];
    for (const auto& [a, b] : {std::pair{a0, b0}, std::pair{b0, a0}}) {
      const double flow = net.flow.max_flow(a, b, &side);
      if (flow < best.rate_gbps) {
        best.rate_gbps = flow;
        side[static_cast<std::size_t>(net.source)] = false;
        best_side = side;
      }
    }
  }
  const double rate = best.rate_gbps;
  best = make_cut(topo, net, participants, rates, best_side, "in-network");
  best.rate_gbps = rate;
  return best;
}

BoundCut volume_cut(const Topology& topo, const std::vector<int>& participants_in, const LinkRates& rates) {
  check_rates(topo, rates);
  const std::vector<int> participants = default_participants(topo, participants_in);
  const double n = static_cast<double>(participants.size());
  if (participants.size() < 2) return no_cut("volume");
  const Network net = make_network(topo, participants, rates, false);
  BoundCut cut = reception_cut(topo, net, participants, rates, participants, "volume");
  // reception_cut's rate is per block of N−1 per receiver: the receptions' total is that times N(N−1).
  cut.rate_gbps = cut.rate_gbps * n * (n - 1) / (2 * (n - 1));
  if (participants.size() > static_cast<std::size_t>(kPartitionParticipants) || topo.machine_count() != 1) return cut;
  // On one machine, the receptions as flows, every participant a part of its own (the max flow above lets every GPU
  // and CPU send as much as it likes, so a socket feeding a GPU below it counted bytes that never reached it).
  std::vector<int> own(participants.size());
  std::iota(own.begin(), own.end(), 0);
  BoundCut flows = receptions_as_flows(topo, net, relays_of(topo, net, participants), rates, own, false);
  if (flows.rate_gbps < cut.rate_gbps * (1 - kRelativeSlack)) {
    cut.rate_gbps = flows.rate_gbps;
    cut.links = std::move(flows.links);
    cut.gbps = flows.gbps;
    cut.as_flows = true;
  }
  return cut;
}

BoundCut partition_cut(const Topology& topo, const std::vector<int>& participants_in, const LinkRates& rates,
                       bool as_flows, double below) {
  check_rates(topo, rates);
  const std::vector<int> participants = default_participants(topo, participants_in);
  const int n = static_cast<int>(participants.size());
  BoundCut best = no_cut("partition");
  if (n < 3 || n > kPartitionParticipants) return best;
  // Searched on one machine: the participants' machine's devices each on their own, everything beyond its NICs
  // (the network, other machines) as one more unit, kept in a single part.
  const int machine = topo.nodes()[static_cast<std::size_t>(participants.front())].machine;
  for (int p : participants) {
    if (topo.nodes()[static_cast<std::size_t>(p)].machine != machine) return best;
  }
  const auto& links = topo.links();
  const auto nodes = static_cast<int>(topo.nodes().size());
  const int outside = nodes;  // the unit of every device off the machine
  const auto unit_of = [&](int v) { return topo.nodes()[static_cast<std::size_t>(v)].machine == machine ? v : outside; };
  // Neighbouring units and the rate between them, both ways together (parallel links summed).
  std::map<std::pair<int, int>, double> summed;
  for (std::size_t l = 0; l < links.size(); ++l) {
    const int a = unit_of(links[l].src), b = unit_of(links[l].dst);
    if (!(rates[l] > 0) || a == b) continue;
    summed[{std::min(a, b), std::max(a, b)}] += rates[l];
  }
  std::vector<std::vector<std::pair<int, double>>> adjacent(static_cast<std::size_t>(nodes) + 1);
  for (const auto& [ends, rate] : summed) {
    adjacent[static_cast<std::size_t>(ends.first)].emplace_back(ends.second, rate);
    adjacent[static_cast<std::size_t>(ends.second)].emplace_back(ends.first, rate);
  }
  // A unit that is not a participant and has one neighbour (a NIC, the network behind it) always joins that
  // neighbour's part: left out, peeled until none is left.
  std::vector<bool> is_participant(static_cast<std::size_t>(nodes) + 1, false);
  for (int p : participants) is_participant[static_cast<std::size_t>(p)] = true;
  std::vector<bool> peeled(static_cast<std::size_t>(nodes) + 1, false);
  std::vector<std::pair<int, int>> peels;  // (unit, the neighbour it joins), in the order peeled
  {
    std::vector<int> degree(static_cast<std::size_t>(nodes) + 1, 0);
    std::vector<int> leaves;
    for (std::size_t v = 0; v < adjacent.size(); ++v) {
      degree[v] = static_cast<int>(adjacent[v].size());
      if (degree[v] == 1 && !is_participant[v]) leaves.push_back(static_cast<int>(v));
    }
    while (!leaves.empty()) {
      const int v = leaves.back();
      leaves.pop_back();
      peeled[static_cast<std::size_t>(v)] = true;
      for (const auto& [u, rate] : adjacent[static_cast<std::size_t>(v)]) {
        if (peeled[static_cast<std::size_t>(u)]) continue;
        peels.emplace_back(v, u);
        if (--degree[static_cast<std::size_t>(u)] == 1 && !is_participant[static_cast<std::size_t>(u)]) leaves.push_back(u);
      }
    }
    for (auto& list : adjacent) {
      std::erase_if(list, [&](const std::pair<int, double>& e) { return peeled[static_cast<std::size_t>(e.first)]; });
    }
  }
  struct Between {
    int a, b;
    double rate;
  };
  std::vector<Between> between;
  for (const auto& [ends, rate] : summed) {
    if (!peeled[static_cast<std::size_t>(ends.first)] && !peeled[static_cast<std::size_t>(ends.second)])
      between.push_back({ends.first, ends.second, rate});
  }
  // The other devices, nearest the participants first (breadth-first), in the order they are assigned.
  std::vector<int> label(static_cast<std::size_t>(nodes) + 1, -1);
  std::vector<bool> seen = is_participant;
  std::vector<int> others;
  {
    std::vector<int> frontier = participants;
    while (!frontier.empty()) {
      std::vector<int> next;
      for (int u : frontier) {
        for (const auto& [v, rate] : adjacent[static_cast<std::size_t>(u)]) {
          if (seen[static_cast<std::size_t>(v)]) continue;
          seen[static_cast<std::size_t>(v)] = true;
          others.push_back(v);
          next.push_back(v);
        }
      }
      frontier = std::move(next);
    }
  }
  std::vector<double> to_part(static_cast<std::size_t>(n), 0.0);
  // The part `v` has the most rate to (its own on ties), among its labelled neighbours.
  const auto closest_part = [&](int v, int parts) {
    std::fill(to_part.begin(), to_part.begin() + parts, 0.0);
    for (const auto& [u, rate] : adjacent[static_cast<std::size_t>(v)]) {
      if (label[static_cast<std::size_t>(u)] >= 0) to_part[static_cast<std::size_t>(label[static_cast<std::size_t>(u)])] += rate;
    }
    int chosen = label[static_cast<std::size_t>(v)] >= 0 ? label[static_cast<std::size_t>(v)] : 0;
    for (int k = 0; k < parts; ++k) {
      if (to_part[static_cast<std::size_t>(k)] > to_part[static_cast<std::size_t>(chosen)] * (1 + kRelativeSlack)) chosen = k;
    }
    return chosen;
  };
  // Moves of one device at a time lower the rate between parts; they stop within a few passes.
  constexpr int kMaxPasses = 8;
  std::vector<int> part(static_cast<std::size_t>(n), 0), best_label;
  int best_parts = 0;
  std::vector<std::pair<double, std::vector<int>>>
      least;  // the partitions of least rate, and their participants' parts
  const auto evaluate = [&](int parts) {
    for (int i = 0; i < n; ++i) label[static_cast<std::size_t>(participants[static_cast<std::size_t>(i)])] = part[static_cast<std::size_t>(i)];
    for (int v : others) label[static_cast<std::size_t>(v)] = -1;
    for (int v : others) label[static_cast<std::size_t>(v)] = closest_part(v, parts);
    for (int pass = 0; pass < kMaxPasses; ++pass) {
      bool moved = false;
      for (int v : others) {
        const int k = closest_part(v, parts);
        moved = moved || k != label[static_cast<std::size_t>(v)];
        label[static_cast<std::size_t>(v)] = k;
      }
      if (!moved) break;
    }
    double crossing = 0;
    for (const Between& e : between) {
      const int a = label[static_cast<std::size_t>(e.a)], b = label[static_cast<std::size_t>(e.b)];
      if (a >= 0 && b >= 0 && a != b) crossing += e.rate;
    }
    const double rate = crossing / (2.0 * (parts - 1));
    // The least few, for the flows below (every participant a part of its own is the volume bound's LP).
    if (parts < n && (least.size() < static_cast<std::size_t>(kPartitionsAsFlows) || rate < least.back().first)) {
      if (least.size() == static_cast<std::size_t>(kPartitionsAsFlows)) least.pop_back();
      least.emplace(std::upper_bound(least.begin(), least.end(), rate,
                                     [](double r, const auto& entry) { return r < entry.first; }),
                    rate, part);
    }
    if (rate < best.rate_gbps * (1 - kRelativeSlack)) {
      best.rate_gbps = rate;
      best_label = label;
      best_parts = parts;
    }
  };
  // Every partition of the participants into 3 or more parts, as restricted growth strings (participant i
  // joins one of the parts of those before it, or opens the next).
  const auto grow = [&](const auto& self, int i, int parts) -> void {
    if (parts + (n - i) < 3) return;
    if (i == n) {
      evaluate(parts);
      return;
    }
    for (int k = 0; k <= parts; ++k) {
      part[static_cast<std::size_t>(i)] = k;
      self(self, i + 1, std::max(parts, k + 1));
    }
  };
  grow(grow, 0, 0);
  // The peeled units join their neighbours' parts, the last peeled first.
  for (auto it = peels.rbegin(); it != peels.rend(); ++it)
    best_label[static_cast<std::size_t>(it->first)] = best_label[static_cast<std::size_t>(it->second)];
  const auto part_of = [&](int v) { return best_label[static_cast<std::size_t>(unit_of(v))]; };
  best.parts.assign(static_cast<std::size_t>(best_parts), {});
  for (int v = 0; v < nodes; ++v) {
    const int k = part_of(v);
    if (k >= 0) best.parts[static_cast<std::size_t>(k)].push_back(v);
  }
  for (std::size_t l = 0; l < links.size(); ++l) {
    const int a = part_of(links[l].src), b = part_of(links[l].dst);
    if (rates[l] > 0 && a >= 0 && b >= 0 && a != b) {
      best.links.push_back(static_cast<int>(l));
      best.gbps += rates[l];
    }
  }
  best.ranks_outside = n;
  // The partitions whose links between parts allow least, asked again as flows on a machine of its own: a link that
  // carries a byte across two boundaries (a PCIe uplink both to and from a part) counts once between the parts but
  // twice as flows. Any partition bounds, so asking only the first few leaves the bound looser, never wrong.
  if (!as_flows || topo.machine_count() != 1) return best;
  const Network net = make_network(topo, participants, rates, false);
  const Relays relays = relays_of(topo, net, participants);
  for (const auto& [rate, parts_of] : least) {
    if (rate >= kFlowsBelowCut * std::min(below, best.rate_gbps)) break;
    BoundCut flows = receptions_as_flows(topo, net, relays, rates, parts_of, false);
    if (!(flows.rate_gbps < best.rate_gbps * (1 - kRelativeSlack))) continue;
    flows.what = "partition";
    flows.as_flows = true;
    flows.ranks_outside = n;
    flows.parts.assign(static_cast<std::size_t>(*std::max_element(parts_of.begin(), parts_of.end()) + 1), {});
    for (int i = 0; i < n; ++i)
      flows.parts[static_cast<std::size_t>(parts_of[static_cast<std::size_t>(i)])].push_back(
          participants[static_cast<std::size_t>(i)]);
    best = std::move(flows);
  }
  return best;
}

BoundCut two_way_split_cut(const Topology& topo, const std::vector<int>& participants_in, const LinkRates& rates,
                           double below) {
  check_rates(topo, rates);
  const std::vector<int> participants = default_participants(topo, participants_in);
  const int n = static_cast<int>(participants.size());
  BoundCut best = no_cut("two-way split");
  if (n < 2 || n > kPartitionParticipants || topo.machine_count() != 1) return best;
  const Network net = make_network(topo, participants, rates, false);
  const int vertices = net.flow.nodes();
  const Relays relays = relays_of(topo, net, participants);
  const std::vector<int>& rank = relays.rank;
  const std::vector<bool> shared = shared_arcs(net, relays, true);
  // One direction's max flow on its own, participants only sending or receiving (m: the smaller of the two), holds
  // the split's x between m/2 (half of each flow fits beside the other) and m: splits are asked in the order of m,
  // and one whose m/2 cannot go below `below` or the best x found is skipped.
  synthesis::FlowNetwork single(vertices + 2 * n + 2);
  const int source = vertices + 2 * n, sink = source + 1;
  const auto end_of = [&](int vertex, bool leaving) {
    const int r = rank[static_cast<std::size_t>(vertex)];
    return r < 0 ? vertex : vertices + 2 * r + (leaving ? 1 : 0);
  };
  for (const Network::Arc& a : net.arcs)
    single.add_arc(end_of(a.from, true), end_of(a.to, false), a.capacity);  // arc k
  std::vector<int> from_source, to_sink;
  double unbounded = 1;
  for (double r : rates) unbounded += r;
  for (int i = 0; i < n; ++i) {
    from_source.push_back(single.add_arc(source, vertices + 2 * i + 1, 0.0));
    to_sink.push_back(single.add_arc(vertices + 2 * i, sink, 0.0));
  }
  const auto one_way = [&](unsigned senders) {
    for (int i = 0; i < n; ++i) {
      const bool sends = ((senders >> i) & 1U) != 0;
      single.set_capacity(from_source[static_cast<std::size_t>(i)], sends ? unbounded : 0.0);
      single.set_capacity(to_sink[static_cast<std::size_t>(i)], sends ? 0.0 : unbounded);
    }
    return single.max_flow(source, sink);
  };
  // Splits S as bit masks over the ranks, rank 0 always outside (S and its complement are one split).
  const unsigned all = (1U << n) - 1;
  std::vector<std::pair<double, unsigned>> splits;
  for (unsigned s = 2; s <= all; s += 2) splits.emplace_back(std::min(one_way(s), one_way(all & ~s)), s);
  std::sort(splits.begin(), splits.end());
  for (const auto& [single_rate, s] : splits) {
    if (single_rate / 2 >= std::min(below, best.rate_gbps) * (1 - kRelativeSlack)) break;
    // Direction "in" carries the rest's bytes towards S, "out" S's towards the rest; participants only start or
    // end a flow.
    const auto in_s = [&](int r) { return ((s >> r) & 1U) != 0; };
    const auto outside = [&](int r) { return !in_s(r); };
    const std::vector<bool> into = arcs_between(net, rank, outside, in_s),
                            out_of = arcs_between(net, rank, in_s, outside);
    // Half of every link both directions could use to each, and the two max flows are a point of the LP: where
    // they cannot go below the limit either, neither can the LP.
    {
      std::vector<int> halved;
      for (std::size_t k = 0; k < net.arcs.size(); ++k) {
        if (into[k] && out_of[k] && !shared[k] && net.arcs[k].link >= 0) halved.push_back(static_cast<int>(k));
      }
      for (int k : halved) single.set_capacity(k, net.arcs[static_cast<std::size_t>(k)].capacity / 2);
      const double apart = std::min(one_way(s), one_way(all & ~s));
      for (int k : halved) single.set_capacity(k, net.arcs[static_cast<std::size_t>(k)].capacity);
      if (apart >= std::min(below, best.rate_gbps) * (1 - kRelativeSlack)) continue;
    }
    std::vector<int> part(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) part[static_cast<std::size_t>(i)] = in_s(i) ? 1 : 0;
    BoundCut both_ways = receptions_as_flows(topo, net, relays, rates, part, true);
    if (!(both_ways.rate_gbps < best.rate_gbps * (1 - kRelativeSlack))) continue;
    // Named by its smaller side.
    const bool smaller = 2 * std::popcount(s) <= n;
    for (int i = 0; i < n; ++i) {
      if (in_s(i) == smaller) both_ways.inside.push_back(participants[static_cast<std::size_t>(i)]);
    }
    both_ways.what = best.what;
    best = std::move(both_ways);
  }
  if (best.inside.empty()) return best;
  std::sort(best.inside.begin(), best.inside.end());
  best.ranks_inside = static_cast<int>(best.inside.size());
  best.ranks_outside = n - best.ranks_inside;
  return best;
}

CollectiveBound collective_bound(const Topology& topo, std::vector<int> participants, Collective collective,
                                 const LinkRates& rates, bool in_network_reduction) {
  participants = default_participants(topo, std::move(participants));
  CollectiveBound b;
  b.collective = collective;
  b.ranks = static_cast<int>(participants.size());
  const int n = b.ranks;
  if (n < 2) return b;
  // Per block of M/N bytes at `x` GB/s: M/(N·x·1e3) µs per byte.
  const auto per_block = [&](double x) { return 1.0 / (n * x * kBytesPerUsPerGbps); };
  switch (collective) {
    case Collective::kAllGather:
    case Collective::kReduceScatter: {
      BoundCut cut = spread_cut(topo, participants, rates, collective == Collective::kReduceScatter);
      b.us_per_byte = per_block(cut.rate_gbps);
      b.cuts.push_back(std::move(cut));
      break;
    }
    case Collective::kAllReduce: {
      // Every set splitting the participants sends the other side M bytes of results (in-network reduction
      // included); without it, the GPUs also take in 2(N−1)·M bytes in all (reduce N inputs, then spread).
      // Partitions into three or more parts refine both (a gossip among the parts, whatever combines where).
      BoundCut split = splitting_cut(topo, participants, rates);
      split.what = in_network_reduction ? "in-network" : "split";
      b.in_network = in_network_reduction;
      BoundCut binding = std::move(split);
      const auto tighter = [&](BoundCut cut) {
        if (cut.rate_gbps < binding.rate_gbps * (1 - kRelativeSlack)) binding = std::move(cut);
      };
      if (!in_network_reduction) tighter(volume_cut(topo, participants, rates));
      // As flows only where the GPUs combine: a switch that reduces (NVLS) sits in no part.
      tighter(partition_cut(topo, participants, rates, !in_network_reduction, binding.rate_gbps));
      // Where the switches reduce, results leave S as sums the switch forms from both sides: only the split.
      if (!in_network_reduction) tighter(two_way_split_cut(topo, participants, rates, binding.rate_gbps));
      b.us_per_byte = 1.0 / (binding.rate_gbps * kBytesPerUsPerGbps);
      b.cuts.push_back(std::move(binding));
      break;
    }
    default: throw InvalidInput(fmt::format("cut bound: {} is not a plan-level collective", to_string(collective)));
  }
  b.algbw_gbps = 1.0 / (b.us_per_byte * kBytesPerUsPerGbps);
  b.busbw_gbps = b.algbw_gbps * bus_factor(collective, n);
  return b;
}

std::string cut_text(const Topology& topo, const BoundCut& cut) {
  // The GPUs on each side, senders first: S sends (all-gather, in-network); for the reduce-scatter the links
  // were reversed, so the participants outside S send their partial sums into S.
  std::vector<bool> in_s(topo.nodes().size(), false);
  for (int v : cut.inside) in_s[static_cast<std::size_t>(v)] = true;
  // A side of more than kNamedGpus GPUs is named by its first ones and its count (clusters of thousands).
  constexpr std::size_t kNamedGpus = 16;
  std::vector<std::string> sides[2];
  for (int g : topo.gpus())
    sides[in_s[static_cast<std::size_t>(g)] ? 0 : 1].push_back(topo.nodes()[static_cast<std::size_t>(g)].id);
  const auto names = [&](const std::vector<std::string>& ids) {
    std::string text;
    for (std::size_t i = 0; i < ids.size() && i < kNamedGpus; ++i) {
      if (!text.empty()) text += ',';  // piecewise: g++ 12's false -Wrestrict (GCC bug 105329) on "," + string
      text += ids[i];
    }
    if (ids.size() > kNamedGpus) text += fmt::format(",… ({} GPUs)", ids.size());
    return text;
  };
  std::string inside = names(sides[0]);
  std::string outside = names(sides[1]);
  if (cut.what == "reduce-scatter") std::swap(inside, outside);
  std::set<LinkKind> kinds_crossed;
  for (int l : cut.links) kinds_crossed.insert(topo.links()[static_cast<std::size_t>(l)].kind);
  std::string kinds;
  for (const LinkKind kind : kinds_crossed) {
    if (!kinds.empty()) kinds += '+';
    kinds += to_string(kind);
  }
  if (!cut.parts.empty()) {
    std::string parts;
    for (const std::vector<int>& part : cut.parts) {
      std::vector<std::string> ids;
      for (int v : part) {
        if (topo.nodes()[static_cast<std::size_t>(v)].kind == NodeKind::kGpu) ids.push_back(topo.nodes()[static_cast<std::size_t>(v)].id);
      }
      parts += fmt::format("{}{{{}}}", parts.empty() ? "" : " | ", names(ids));
    }
    return fmt::format("{}: {} links ({}) {}, {:.2f} GB/s", parts, cut.links.size(), kinds.empty() ? "none" : kinds,
                       cut.as_flows ? "full" : "between the parts", cut.gbps);
  }
  if (!cut.receivers.empty()) {
    std::vector<std::string> ids;
    for (int r : cut.receivers) ids.push_back(topo.nodes()[static_cast<std::size_t>(r)].id);
    const std::string who = names(ids);
    return fmt::format(
        "{{{}}} {} {} {} links ({}), {:.2f} GB/s", who, cut.what == "reduce-scatter" ? "send out" : "take in",
        cut.as_flows ? "as flows filling" : "over", cut.links.size(), kinds.empty() ? "none" : kinds, cut.gbps);
  }
  if (cut.what == "two-way split") {
    return fmt::format("{{{}}} <-> {{{}}} at once: {} links ({}) full, {:.2f} GB/s", inside, outside, cut.links.size(),
                       kinds.empty() ? "none" : kinds, cut.gbps);
  }
  return fmt::format("{{{}}} -> {{{}}}: {} links ({}), {:.2f} GB/s", inside.empty() ? "-" : inside,
                     outside.empty() ? "-" : outside, cut.links.size(), kinds.empty() ? "none" : kinds, cut.gbps);
}

}  // namespace artune
