// Spanning-tree packing (issue 25): plans derived from the topology's capacity rather than laid over it.
// For every root, weighted trees found by synthesis/tree_packing.hpp (LP and max flows on LEMON) at the
// links' usable rates (topology/link_rates.hpp): all-gather broadcasts each rank's block down its out-trees,
// reduce-scatter reduces each block up its in-trees into its owner, all-reduce runs the two (the owner
// scales its block for avg in between; `trees2` reduces every block whole first). `rbtrees` packs spanning
// trees instead (each rooted at its centre) and reduces the whole buffer up and broadcasts it down each (Blink's
// all-reduce):
// it alone can reach the all-reduce's split, partition and volume bounds, which the two phases' packings cannot
// where one link splits the GPUs. A tree edge is a transfer
// over NCCL's route, or two transfers staged through a CPU socket's scratch memory; going up, a piece lands in
// scratch of the parent, which reduces it locally. Each tree carries its share of the root's block (its weight,
// in 1/1024ths), whole or as copies in proportion to the weight; --segments pipelines the pieces down and up the
// trees. On clusters of machines with equal GPU counts the trees stay inside the machines (one packing for
// machines built alike) and rings of the same local GPU cross them, for all three collectives; `trees#P` runs the
// all-reduce in P slices through its phases, so that they overlap (emit_in_slices). `prings` packs
// Hamiltonian rings instead (synthesis/ring_packing.hpp; a ring is a spanning path closed by one more hop): on
// machines whose GPUs all take in alike it reaches the bound where the trees' schedules fall short of theirs.
//
// Cost: the packing's rate is the min-cut bound's for each phase (cut_bound.hpp) where the routes allow it;
// latency grows with the trees' depth (one transfer per level, two for a staged edge). docs/bound.md has
// the simulated share of the bound on every DGX-1 subset.

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <tuple>

#include "artune/algorithms/families/collective_families.hpp"
#include "artune/algorithms/synthesis/ring_packing.hpp"
#include "artune/algorithms/synthesis/tree_packing.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/topology/link_rates.hpp"

namespace artune::detail {

namespace {

using synthesis::PackedRing;
using synthesis::RingPacking;
using synthesis::TreeEdge;
using synthesis::TreePacking;
using synthesis::WeightedTree;

// Packings kept per process (packing_for).
constexpr std::size_t kPackingCacheEntries = 64;
// The packing's weights are rounded to 1/1024 of a block (a tree's load is then within 0.05 % of its
// weight's); its copies, about 32 per block, keep plans at a few thousand ops on 8 GPUs.
constexpr int kChunksPerBlock = 1024;
constexpr int kCopiesPerBlock = 32;
// rbtrees carries the whole buffer over its trees (each rooted at its centre), as 64 equal pieces (copies)
// apportioned to the trees by weight and balanced over the links (reduce_broadcast_pieces; simulated at 256 MiB and
// 64 segments on dgx1-v100[0,1,2,4], [0,1,2,4,5] and the whole machine: 32 pieces reach 94.4, 93.6 and 85.8 % of the
// bound, 64 pieces 93.8, 96.5 and 94.1 %, 128 pieces 94.5, 97.3 and 96.6 %, with twice the plan's ops to simulate).
// The copies pipeline at kPhases phases (Op::phase). `rbtrees#C` asks for C pieces instead (docs/bound.md: 128 lift
// the subsets, at twice the simulation's time).
constexpr int kCopiesPerBuffer = 64;
// Pipeline phases the copies stagger over (Op::phase: 0, 1/4, 1/2, 3/4). While one quarter of the copies on a link
// waits for its pieces' latency the others carry on; more phases gain nothing and make the simulation slower, as
// every phase ends its pieces at its own moment (dgx1-v100[1,2,3,4,5,6,7], rbtrees at 256 MiB and 64 segments:
// 91.3 % of the bound with 2 phases, 94.1 % with 4 or 8, 93.1 % with one per copy; all 247 subsets of dgx1-v100 in
// bench_synthesis: 8.9 s with 2 phases, 19.7 s with one per copy).
constexpr int kPhases = 4;
// prings cuts the buffer into 256 equal pieces, each all-reduced around one ring (ring_packing.hpp: equal pieces
// make the fabric's even sharing between transfers give each ring the rate the LP asks for). Fewer pieces round
// the rings' shares more coarsely: on dgx1-v100 at 256 MiB and 4 segments, 64 pieces reached 91.9 % of the bound
// and 128 pieces 94.6 % when this constant was set so (`artune simulate -t dgx1-v100 -s prings --segments 4 -b 256M
// -e 256M`), 256 pieces 96.8 % (docs/bound.md holds it: 176 k ops, about 0.5 s to build and simulate a size).
constexpr int kPiecesPerRingBuffer = 256;

// The tuner and a size sweep build the same plan at many counts: the packing depends on the topology and
// the participants only, so it is found once per process (bounded: the oldest goes first).
enum class Packing { kOutTrees, kInTrees, kReduceBroadcast };

// What a packing is for: a plan on its own, or one machine's part of a plan across machines.
enum class Use { kAlone, kBesideNetwork };

// Packings found once per process, the oldest dropped first past kPackingCacheEntries.
template <typename Key, typename Packed>
class PackingCache {
 public:
  template <typename Make>
  std::shared_ptr<const Packed> get(const Key& key, Make make) {
    {
      std::lock_guard lock(mutex_);
      const auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    auto packed = std::make_shared<const Packed>(make());
    std::lock_guard lock(mutex_);
    if (cache_.emplace(key, packed).second) {
      order_.push_back(key);
      if (order_.size() > kPackingCacheEntries) {
        cache_.erase(order_.front());
        order_.erase(order_.begin());
      }
    }
    return packed;
  }

 private:
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<const Packed>> cache_;
  std::vector<Key> order_;
};

std::shared_ptr<const TreePacking> packing_for(const Topology& topo, const std::vector<int>& participants,
                                               Packing kind, Use use = Use::kAlone) {
  using Key = std::tuple<std::string, std::vector<int>, Packing, Use>;
  static PackingCache<Key, TreePacking> cache;
  return cache.get(Key{topo.fingerprint(), participants, kind, use}, [&] {
    // Beside the network: routes only, no staging through the CPUs (see machine_packing_for).
    const synthesis::PackingOptions options{kChunksPerBlock, use == Use::kAlone};
    auto pack = [&](const LinkRates& rates) {
      return kind == Packing::kReduceBroadcast
                 ? synthesis::pack_reduce_broadcast_trees(topo, participants, rates, options)
                 : synthesis::pack_trees(topo, participants, rates, kind == Packing::kInTrees, options);
    };
    if (use == Use::kAlone) return pack(usable_link_rates(topo));
    try {
      return pack(rates_beside_network(topo, participants));
    } catch (const InvalidInput&) {
      // The network's shares fill every link of some participant (a GPU whose only link is the PCIe one its NIC
      // fills): the trees then share those links with it.
      return pack(usable_link_rates(topo));
    }
  });
}

// The ring packing of the participants (prings), found once per process.
std::shared_ptr<const RingPacking> ring_packing_for(const Topology& topo, const std::vector<int>& participants) {
  using Key = std::tuple<std::string, std::vector<int>>;
  static PackingCache<Key, RingPacking> cache;
  return cache.get(Key{topo.fingerprint(), participants}, [&] {
    return synthesis::pack_rings(topo, participants, usable_link_rates(topo), {kPiecesPerRingBuffer, true});
  });
}

// A node's place inside its machine: its kind and local index (machines built alike match place for place).
using Place = std::pair<NodeKind, int>;
Place place_of(const Topology& topo, int node) {
  const Node& n = topo.nodes()[static_cast<std::size_t>(node)];
  return {n.kind, n.local_index};
}

// The packing of one machine's participants (topology nodes, all on `machine`, in rank order) for a plan across
// machines: routes only, no staging through the CPUs, whose PCIe links carry the network's traffic to and from
// the NICs (staged, the trees on 2 x DGX A100 reached 113 GB/s busbw instead of 159; on PCIe-only machines staging
// would gain 10 %), and at the rates the network's traffic leaves (rates_beside_network: the rings across machines
// run beside the trees, pipelined, and fill each GPU's share of its NIC's links; packed over the whole rates, the
// trees met them there: 2xpcie-8gpu, 256 MiB, best of 1-16 segments, all-gather 10.45 -> 11.04 GB/s busbw,
// reduce-scatter 8.97 -> 10.20, all-reduce 8.78 -> 8.67; the NVLink machines' trees keep off those links either
// way). Where those shares fill every link of a participant, the whole rates. Machines built alike share one
// packing: it is found on the first that asks and carried to the others place for place (the links its edges
// cross), so a cluster of identical machines solves one machine.
std::shared_ptr<const TreePacking> machine_packing_for(const Topology& topo, int machine,
                                                       const std::vector<int>& participants, Packing kind) {
  using Key = std::tuple<std::string, std::vector<Place>, Packing>;
  struct Solved {
    std::shared_ptr<const TreePacking> packing;
    std::string fingerprint;  // the topology and machine it was solved on
    int machine = -1;
  };
  static std::mutex mutex;
  static std::map<Key, Solved> solved;
  std::vector<Place> places;
  for (int node : participants) places.push_back(place_of(topo, node));
  const Key key{topo.machine_shape(machine), places, kind};
  Solved found;
  {
    std::lock_guard lock(mutex);
    const auto it = solved.find(key);
    if (it != solved.end() && it->second.fingerprint == topo.fingerprint()) found = it->second;
  }
  if (!found.packing) {
    found = {packing_for(topo, participants, kind, Use::kBesideNetwork), topo.fingerprint(), machine};
    std::lock_guard lock(mutex);
    if (solved.size() >= kPackingCacheEntries) solved.clear();
    solved.insert_or_assign(key, found);  // the latest topology's (its links are what carrying maps)
  }
  if (found.machine == machine) return found.packing;
  // Carried over: the links of every edge, by place.
  std::map<std::tuple<Place, Place, LinkKind>, int> link_here;
  for (std::size_t l = 0; l < topo.links().size(); ++l) {
    const Link& link = topo.links()[l];
    if (topo.nodes()[static_cast<std::size_t>(link.src)].machine != machine ||
        topo.nodes()[static_cast<std::size_t>(link.dst)].machine != machine)
      continue;
    link_here.emplace(std::tuple{place_of(topo, link.src), place_of(topo, link.dst), link.kind}, static_cast<int>(l));
  }
  auto carried = std::make_shared<TreePacking>(*found.packing);
  for (TreeEdge& edge : carried->edges) {
    for (int& l : edge.links) {
      const Link& link = topo.links()[static_cast<std::size_t>(l)];
      const auto it = link_here.find({place_of(topo, link.src), place_of(topo, link.dst), link.kind});
      // A route leaves the machine: its own packing.
      if (it == link_here.end()) return packing_for(topo, participants, kind, Use::kBesideNetwork);
      l = it->second;
    }
  }
  return carried;
}

// The participant at the other end of v's parent edge.
int parent_of(const TreePacking& p, const WeightedTree& t, int v) {
  const int e = t.parent_edge[static_cast<std::size_t>(v)];
  if (e < 0) return -1;
  const TreeEdge& edge = p.edges[static_cast<std::size_t>(e)];
  return p.toward_root ? edge.to : edge.from;
}

// Participants of a tree, root first, by depth.
std::vector<int> by_depth(const TreePacking& p, const WeightedTree& t) {
  const int n = static_cast<int>(t.parent_edge.size());
  std::vector<int> depth(static_cast<std::size_t>(n), 0);
  for (int v = 0; v < n; ++v) {
    int d = 0;
    for (int u = v; parent_of(p, t, u) >= 0 && d <= n; u = parent_of(p, t, u)) ++d;
    ARTUNE_CHECK(d <= n, fmt::format("trees: tree of root {} has a cycle", t.root));
    depth[static_cast<std::size_t>(v)] = d;
  }
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return depth[static_cast<std::size_t>(a)] < depth[static_cast<std::size_t>(b)];
  });
  return order;
}

// The elements [offset, offset + count) of the buffer one chunk of a tree carries.
struct Piece {
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

// `block(root)`: the (offset, count) of the root's block in the slots' region.
using BlockOf = std::function<std::pair<std::int64_t, std::int64_t>(int root)>;

// The plan's own blocks (collective_block): rank r owns block r.
BlockOf plan_blocks(Emitter& e) {
  return [&e](int root) { return collective_block(e.plan(), root); };
}

// Per tree, its share of its root's block (its chunks), cut into copies that move side by side: a tree of weight
// w runs as about w·copies_per_block copies (1: whole), so that a link shared by trees of different weights, which
// the simulator and the fabrics share evenly between the transfers on it, gives each tree the share its weight
// asks for.
std::vector<std::vector<Piece>> pieces(const TreePacking& p, int copies_per_block, const BlockOf& block) {
  std::vector<std::vector<Piece>> out;
  // Each block's next chunk, by the block's offset: the trees of one root share their root's block.
  std::map<std::int64_t, int> next_chunk;
  for (const WeightedTree& t : p.trees) {
    const auto [block_offset, block_count] = block(t.root);
    int& first = next_chunk[block_offset];
    const int copies = std::clamp(
        static_cast<int>(std::lround(static_cast<double>(t.chunks) * copies_per_block / p.chunks)), 1, t.chunks);
    // Copies cut along chunk boundaries, which sit in proportion to the block: a block of twice the elements gives
    // twice the pieces (plan_scaling.hpp scales a sweep's plans), and one of fewer elements than chunks still
    // splits by weight.
    std::vector<Piece> mine;
    for (int c = 0; c < copies; ++c) {
      const std::int64_t lo = block_count * (first + t.chunks * c / copies) / p.chunks;
      const std::int64_t hi = block_count * (first + t.chunks * (c + 1) / copies) / p.chunks;
      if (hi > lo) mine.push_back({block_offset + lo, hi - lo});
    }
    out.push_back(std::move(mine));
    first += t.chunks;
  }
  return out;
}

// One tree edge: a copy from `src` to `dst`, directly or through the scratch of the CPU `via`.
void transfer(Emitter& e, const Location& src, const Location& dst, int via) {
  if (via < 0) {
    e.copy(src, dst);
    return;
  }
  const int cpu = e.device_for_node(via);
  const Location stage{cpu, e.scratch(cpu, src.count), 0, src.count};
  e.copy(src, stage);
  e.copy(stage, dst);
}

// One piece up a tree into its root, deepest first, each participant's subtree sum into its parent: every child's
// sum arrives in scratch of the parent and is reduced there locally. The transfers then never wait for a reduce:
// a transfer that reduced on arrival would hold its next pipeline segment behind the reduce (the model and the
// executors' own receive-then-reduce run the two one after the other), idling the link for it (dgx1-v100[0,3],
// 256 MiB, 32 segments: 91.4 % of the bound reducing on arrival, 95.8 % through scratch), and several children's
// transfers run side by side instead of behind each other's write to the same piece. The packing's edges point
// toward the root (in-trees) or away from it.
void reduce_up(Emitter& e, const std::vector<Slot>& slots, const TreePacking& p, const WeightedTree& t,
               const std::vector<int>& order, const Piece& piece) {
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int edge = t.parent_edge[static_cast<std::size_t>(*it)];
    if (edge < 0) continue;
    const TreeEdge& te = p.edges[static_cast<std::size_t>(edge)];
    const int child = p.toward_root ? te.from : te.to;
    const int parent = p.toward_root ? te.to : te.from;
    const Location src = at(slots[static_cast<std::size_t>(child)], piece.offset, piece.count);
    const Location dst = at(slots[static_cast<std::size_t>(parent)], piece.offset, piece.count);
    const Location side{dst.device, e.scratch(dst.device, dst.count), 0, dst.count};
    transfer(e, src, side, te.via);
    e.reduce(side, dst);
  }
}

// One piece down an out-tree from its root, shallowest first; `root_slot`, when given, is where the root's own
// sends read it.
void copy_down(Emitter& e, const std::vector<Slot>& slots, const TreePacking& p, const WeightedTree& t,
               const std::vector<int>& order, const Piece& piece, const Slot* root_slot = nullptr) {
  for (int v : order) {
    const int edge = t.parent_edge[static_cast<std::size_t>(v)];
    if (edge < 0) continue;
    const TreeEdge& te = p.edges[static_cast<std::size_t>(edge)];
    const Slot& from =
        te.from == t.root && root_slot != nullptr ? *root_slot : slots[static_cast<std::size_t>(te.from)];
    transfer(e, at(from, piece.offset, piece.count),
             at(slots[static_cast<std::size_t>(te.to)], piece.offset, piece.count), te.via);
  }
}

// A copy's pipeline phase (Op::phase): where it starts in its block, as a fraction of the block, so that the copies
// of one block stagger. Not rounded to kPhases as rbtrees' copies are: rounded, dgx-a100's trees at 256 MiB and
// 32 segments reached 220.06 GB/s busbw instead of 234.09.
double phase_in_block(const Piece& piece, std::pair<std::int64_t, std::int64_t> block) {
  const auto [offset, count] = block;
  if (count <= 0) return 0;
  return std::clamp(static_cast<double>(piece.offset - offset) / static_cast<double>(count), 0.0, 0.999);
}

// Every root's block down its out-trees; `root_copy`, when given, holds each root's whole block (in a
// scratch of the root), which its own sends read.
void emit_out_trees(Emitter& e, const std::vector<Slot>& slots, const TreePacking& p, bool split,
                    const BlockOf& block, const std::vector<Slot>& root_copy = {}) {
  const auto chunk_pieces = pieces(p, split ? kCopiesPerBlock : 1, block);
  for (std::size_t i = 0; i < p.trees.size(); ++i) {
    const WeightedTree& t = p.trees[i];
    const std::vector<int> order = by_depth(p, t);
    for (const Piece& piece : chunk_pieces[i]) {
      e.set_phase(phase_in_block(piece, block(t.root)));
      copy_down(e, slots, p, t, order, piece, root_copy.empty() ? nullptr : &root_copy[static_cast<std::size_t>(t.root)]);
    }
  }
  e.set_phase(0);
}

// Every root's block up its in-trees, deepest first (a participant forwards its subtree's sum); the root
// scales its pieces for avg.
void emit_in_trees(Emitter& e, const std::vector<Slot>& slots, const TreePacking& p, int scale_by, bool split,
                   const BlockOf& block) {
  const auto chunk_pieces = pieces(p, split ? kCopiesPerBlock : 1, block);
  for (std::size_t i = 0; i < p.trees.size(); ++i) {
    const WeightedTree& t = p.trees[i];
    const std::vector<int> order = by_depth(p, t);
    for (const Piece& piece : chunk_pieces[i]) {
      e.set_phase(phase_in_block(piece, block(t.root)));
      reduce_up(e, slots, p, t, order, piece);
      if (scale_by != kNoScale)
        e.scale(at(slots[static_cast<std::size_t>(t.root)], piece.offset, piece.count), scale_by);
    }
  }
  e.set_phase(0);
}

void require_blocks_fit(const Setup& s) {
  if (!s.options.blocks.empty()) {
    // The packing splits even blocks; all-gather-v blocks would leave some trees idle and others overfull.
    throw InvalidInput(
        fmt::format("{} trees: per-rank block sizes (all-gather-v) are not supported; use ring, "
                    "bruck or rd",
                    parameter("spec")));
  }
}

// One copy of a reduce-broadcast tree: up into the root, scaled there for avg, down from it.
void emit_reduce_broadcast_tree(Emitter& e, const std::vector<Slot>& slots, const TreePacking& p,
                                const WeightedTree& t, const std::vector<int>& order, const Piece& piece, int scale_by) {
  reduce_up(e, slots, p, t, order, piece);
  if (scale_by != kNoScale) e.scale(at(slots[static_cast<std::size_t>(t.root)], piece.offset, piece.count), scale_by);
  copy_down(e, slots, p, t, order, piece);
}

// rbtrees' copies: the buffer in `copies` equal pieces, apportioned to the trees by weight and balanced over the
// links (synthesis::apportion_by_load: a piece of a tree crosses the links of its edges both ways, up and down), as
// prings apportions its pieces. Pieces of one size are what the fabric's even sharing of a link between its
// transfers needs to give each tree its share: copies of a tree's own share, cut per tree (rounded to whole
// copies per tree), were of different sizes from tree to tree, and the trees with the larger ones fell behind
// (docs/bound.md: the DGX-1 V100 subsets at 95 % of the bound from 182 to 196, P100 194 to 198).
std::vector<std::vector<Piece>> reduce_broadcast_pieces(const Setup& s, const TreePacking& p, int copies) {
  std::vector<double> weights;
  std::vector<std::map<int, int>> crossings;
  for (const WeightedTree& t : p.trees) {
    weights.push_back(t.chunks);
    std::map<int, int>& crossed = crossings.emplace_back();
    for (const int e : t.parent_edge) {
      if (e < 0) continue;
      const TreeEdge& te = p.edges[static_cast<std::size_t>(e)];
      for (const int l : te.links) ++crossed[l];                                      // down
      for (const int l : synthesis::reverse_links(s.topo, s.nodes, te)) ++crossed[l];  // up
    }
  }
  const std::vector<int> n = synthesis::apportion_by_load(weights, copies, crossings, usable_link_rates(s.topo)).pieces;
  std::vector<std::vector<Piece>> out(p.trees.size());
  int next = 0;
  for (std::size_t i = 0; i < p.trees.size(); ++i) {
    for (int c = 0; c < n[i]; ++c, ++next) {
      const auto [offset, length] = even_piece(s.options.count, copies, next);
      if (length > 0) out[i].push_back({offset, length});
    }
  }
  return out;
}

// rbtrees: the whole buffer in equal pieces shared out among the trees (reduce_broadcast_pieces), each piece reduced
// up its tree into the tree's root and broadcast down it; --segments pipelines the two, so every
// tree edge carries pieces both ways at once.
void emit_reduce_broadcast_trees(Emitter& e, const Setup& s, int copies_per_buffer) {
  const std::vector<Slot> slots = user_slots(ranks(s));
  const std::shared_ptr<const TreePacking> packing = packing_for(s.topo, s.nodes, Packing::kReduceBroadcast);
  const TreePacking& p = *packing;
  const auto chunk_pieces = reduce_broadcast_pieces(s, p, copies_per_buffer);
  // Copy c pipelines at phase (c mod kPhases)/kPhases: the copies sharing a link pause between their pieces (each
  // piece waits its latency) at four different moments instead of all at once, which left the link idle for that time on every
  // piece (docs/bound.md).
  int copy = 0;
  for (std::size_t i = 0; i < p.trees.size(); ++i) {
    const std::vector<int> order = by_depth(p, p.trees[i]);
    for (const Piece& piece : chunk_pieces[i]) {
      e.set_phase(static_cast<double>(copy++ % kPhases) / kPhases);
      emit_reduce_broadcast_tree(e, slots, p, p.trees[i], order, piece, s.scale_by);
    }
  }
  e.set_phase(0);
}

// One piece of the buffer around a packed ring: the piece cut into one chunk per participant, a
// reduce-scatter around the ring (at step t position i sends chunk i − t to position i + 1, which receives it into
// scratch and reduces it there, so a hop never waits for a reduce), each chunk scaled by its owner for avg, then an
// all-gather around the ring (position i ends the reduce-scatter with chunk i + 1 and passes on what it received).
void emit_packed_ring(Emitter& e, const std::vector<Slot>& slots, const RingPacking& p, const PackedRing& ring,
                      const Piece& piece, int scale_by) {
  const int n = static_cast<int>(ring.order.size());
  auto chunk = [&](int k) {
    const auto [offset, count] = even_piece(piece.count, n, ((k % n) + n) % n);
    return Piece{piece.offset + offset, count};
  };
  auto slot = [&](int position) {
    return slots[static_cast<std::size_t>(ring.order[static_cast<std::size_t>(position % n)])];
  };
  auto via = [&](int position) {
    return p.edges[static_cast<std::size_t>(ring.hops[static_cast<std::size_t>(position)])].via;
  };
  for (int t = 0; t + 1 < n; ++t) {
    for (int i = 0; i < n; ++i) {
      const Piece c = chunk(i - t);
      if (c.count == 0) continue;
      const Location dst = at(slot(i + 1), c.offset, c.count);
      const Location side{dst.device, e.scratch(dst.device, c.count), 0, c.count};
      transfer(e, at(slot(i), c.offset, c.count), side, via(i));
      e.reduce(side, dst);
    }
  }
  if (scale_by != kNoScale) {
    for (int i = 0; i < n; ++i) {
      const Piece c = chunk(i + 1);
      if (c.count > 0) e.scale(at(slot(i), c.offset, c.count), scale_by);
    }
  }
  for (int t = 0; t + 1 < n; ++t) {
    for (int i = 0; i < n; ++i) {
      const Piece c = chunk(i + 1 - t);
      if (c.count > 0) transfer(e, at(slot(i), c.offset, c.count), at(slot(i + 1), c.offset, c.count), via(i));
    }
  }
}

// prings: the buffer in the packing's equal pieces, each ring all-reducing the pieces it was given, all rings and
// pieces side by side; --segments pipelines each piece's chunks around its ring.
void emit_packed_rings(Emitter& e, const Setup& s) {
  if (ranks(s) < 2) return;  // one rank holds the result already (avg divides by 1)
  const std::vector<Slot> slots = user_slots(ranks(s));
  const std::shared_ptr<const RingPacking> packing = ring_packing_for(s.topo, s.nodes);
  const RingPacking& p = *packing;
  const std::int64_t count = s.options.count;
  int next = 0;
  for (const PackedRing& ring : p.rings) {
    for (int c = 0; c < ring.chunks; ++c, ++next) {
      const auto [offset, length] = even_piece(count, p.chunks, next);
      if (length > 0) emit_packed_ring(e, slots, p, ring, Piece{offset, length}, s.scale_by);
    }
  }
}

// Slice k's ops follow slice k − 1's one for one: op i of the slice starting at `first` waits for op i of the one in
// [prev_first, prev_end) where both are the same step (kind and devices), as pipeline() chains an op's segments. The
// slices' plans are alike (the same emission over ranges of the same size, give or take an element); where a piece
// came out empty and the two drift apart, an op is left without the extra wait, which costs overlap, not correctness.
void follow_previous_slice(Plan& plan, std::size_t prev_first, std::size_t prev_end, std::size_t first) {
  for (std::size_t i = 0; prev_first + i < prev_end && first + i < plan.ops.size(); ++i) {
    const Op& before = plan.ops[prev_first + i];
    Op& op = plan.ops[first + i];
    if (op.kind != before.kind || op.src.device != before.src.device || op.dst.device != before.dst.device) continue;
    op.deps.insert(std::upper_bound(op.deps.begin(), op.deps.end(), before.id), before.id);
    op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
  }
}

// `trees#P`: the buffer in P slices, each through every phase of the plan (in-trees, the rings across machines,
// out-trees) as a plan of its own over `blocks` even blocks of the slice, and every step of a slice after the same
// step of the slice before. The phases then overlap as a pipeline: slice k + 1 goes up the in-trees while slice k
// crosses the machines. pipeline()'s segments cannot do this: a segment waits for what it reads, and a ring's
// chunk spans whole trees' pieces, each reduced up its tree at the pace of all the others, so on clusters the
// rings waited for every in-tree to finish (4xdgx-h100, 256 MiB: 214 GB/s busbw at 8 segments, the three phases'
// times added; 322 in 8 slices, docs/bound.md). With one slice, the plan of `trees`.
void emit_in_slices(Emitter& e, std::int64_t count, int blocks, int slices,
                    const std::function<void(const BlockOf&)>& emit_slice) {
  std::size_t prev_first = 0;
  std::size_t prev_end = 0;
  for (int k = 0; k < slices; ++k) {
    const auto [offset, length] = even_piece(count, slices, k);
    if (length == 0) continue;
    const BlockOf block = [offset, length, blocks](int b) {
      const auto [o, n] = even_piece(length, blocks, b);
      return std::pair<std::int64_t, std::int64_t>{offset + o, n};
    };
    const std::size_t first = e.plan().ops.size();
    emit_slice(block);
    const std::size_t ops = e.plan().ops.size() - first;
    if (k == 0 && ops * static_cast<std::size_t>(slices) > kMaxPlanOps) {
      // Refused before the others are emitted (the emitter's own limit would stop them only at the limit).
      throw InvalidInput(
          fmt::format("{} {}: {} slices of {} ops each pass artune's limit of {} ops per plan (use "
                      "fewer slices)",
                      parameter("spec"), e.plan().spec, slices, ops, kMaxPlanOps));
    }
    if (k > 0) follow_previous_slice(e.plan(), prev_first, prev_end, first);
    prev_first = first;
    prev_end = e.plan().ops.size();
  }
}

// Whether the plan runs across machines that each hold the same number of its GPUs (two or more): the trees then
// go inside the machines and rings across them.
bool across_machines(const Setup& s) { return s.workers.size() > 1 && s.per_worker > 1; }

// The ranks' user slots and topology nodes, machine by machine (s.workers' order).
struct Machines {
  std::vector<std::vector<Slot>> slots;
  std::vector<std::vector<int>> nodes;
};
Machines machines_of(const Setup& s, const std::vector<Slot>& slots) {
  Machines m;
  for (const std::vector<int>& worker : s.workers) {
    m.slots.emplace_back();
    m.nodes.emplace_back();
    for (int r : worker) {
      m.slots.back().push_back(slots[static_cast<std::size_t>(r)]);
      m.nodes.back().push_back(s.nodes[static_cast<std::size_t>(r)]);
    }
  }
  return m;
}

// Machine w's packing of `kind`, solved once for machines built alike (machine_packing_for).
std::shared_ptr<const TreePacking> packing_of(const Setup& s, const Machines& m, std::size_t w, Packing kind) {
  return machine_packing_for(s.topo, s.worker_machine[w], m.nodes[w], kind);
}

// Clusters of machines with the same number of GPUs (`trees` all-reduce): in every machine a reduce-scatter up its
// in-trees (local GPU k ends with block k of the machine's sum, G even blocks), then each block all-reduced across
// machines by a ring of the GPUs holding it (one ring per local GPU, over the NICs, all at once), then an all-gather
// down the out-trees. Each machine's packings are its own LP over its GPUs only, solved once for machines built
// alike (machine_packing_for); the network takes rings, as NCCL's do.
void emit_trees_across_machines(Emitter& e, const Setup& s, int slices) {
  const std::vector<Slot> slots = user_slots(ranks(s));
  const Machines m = machines_of(s, slots);
  emit_in_slices(e, s.options.count, s.per_worker, slices, [&](const BlockOf& block) {
    for (std::size_t w = 0; w < s.workers.size(); ++w) {
      const auto in = packing_of(s, m, w, Packing::kInTrees);
      emit_in_trees(e, m.slots[w], *in, kNoScale, false, block);
    }
    emit_rings_across_machines(e, m.slots, block, s.scale_by);
    for (std::size_t w = 0; w < s.workers.size(); ++w) {
      const auto out = packing_of(s, m, w, Packing::kOutTrees);
      emit_out_trees(e, m.slots[w], *out, false, block);
    }
  });
}

// The plan's blocks of one machine's ranks (`row`, in local order): local GPU k is the root of row[k]'s block.
BlockOf row_blocks(Emitter& e, const std::vector<int>& row) {
  return [&e, &row](int k) { return collective_block(e.plan(), row[static_cast<std::size_t>(k)]); };
}

// All-gather across machines of equal GPUs, as the 2d all-gather splits it: a ring across the machines per local
// GPU (GPU k of every machine collects the blocks of GPU k of the others), then in every machine each machine's
// row of blocks down the out-trees (local GPU k the root of the row's block k). The machine's packing is solved
// once for machines built alike (machine_packing_for).
void emit_trees_allgather_across_machines(Emitter& e, const Setup& s) {
  const std::vector<Slot> slots = user_slots(ranks(s));
  const Machines m = machines_of(s, slots);
  ring_columns_across_machines(e, slots, s.workers, false);
  for (std::size_t w = 0; w < s.workers.size(); ++w) {
    const auto out = packing_of(s, m, w, Packing::kOutTrees);
    for (const std::vector<int>& row : s.workers) emit_out_trees(e, m.slots[w], *out, false, row_blocks(e, row));
  }
}

// Reduce-scatter across machines, the all-gather in reverse: every machine reduces each row of blocks up its in-trees
// (local GPU k ends with the machine's sum of the row's block k), then a ring across the machines per local GPU
// reduces each block into its owner, which scales it for avg.
void emit_trees_reducescatter_across_machines(Emitter& e, const Setup& s) {
  const std::vector<Slot> slots = user_slots(ranks(s));
  const Machines m = machines_of(s, slots);
  for (std::size_t w = 0; w < s.workers.size(); ++w) {
    const auto in = packing_of(s, m, w, Packing::kInTrees);
    for (const std::vector<int>& row : s.workers) emit_in_trees(e, m.slots[w], *in, kNoScale, false, row_blocks(e, row));
  }
  ring_columns_across_machines(e, slots, s.workers, true);
  scale_owned_blocks(e, slots, s.scale_by);
}

// Both phases take the packings of the reduce-scatter and the all-gather, each at its own best rate.
// trees: each piece goes down its out-trees as soon as its root has reduced it, so the phases overlap (best
// where the links that bind carry one phase each way, as on most GPU subsets); `trees#P` runs the buffer in P
// slices through them (emit_in_slices), which clusters need. trees2: every root has its
// whole block reduced first (one local copy of the block, which its sends down read, waits for all of it),
// and every tree runs as copies in proportion to its weight (best where both phases load the same links:
// 7 or 8 GPUs of a DGX-1).
void emit_trees_allreduce(Emitter& e, const Setup& s, const AlgToken& token) {
  if (token.name == std::string_view("rbtrees")) {
    emit_reduce_broadcast_trees(e, s, token.arg < 0 ? kCopiesPerBuffer : token.arg);
    return;
  }
  if (token.name == std::string_view("prings")) {
    emit_packed_rings(e, s);
    return;
  }
  const int slices = token.arg < 0 ? 1 : token.arg;
  if (token.name == std::string_view("trees") && across_machines(s)) {
    emit_trees_across_machines(e, s, slices);
    return;
  }
  const std::vector<Slot> slots = user_slots(ranks(s));
  if (token.name == std::string_view("trees")) {
    emit_in_slices(e, s.options.count, ranks(s), slices, [&](const BlockOf& block) {
      emit_in_trees(e, slots, *packing_for(s.topo, s.nodes, Packing::kInTrees), s.scale_by, false, block);
      emit_out_trees(e, slots, *packing_for(s.topo, s.nodes, Packing::kOutTrees), false, block);
    });
    return;
  }
  // trees2: every root's block reduced whole and copied aside (its sends down read the copy) before it goes down.
  emit_in_trees(e, slots, *packing_for(s.topo, s.nodes, Packing::kInTrees), s.scale_by, true, plan_blocks(e));
  std::vector<Slot> root_copy;
  for (int r = 0; r < ranks(s); ++r) {
    const auto [offset, count] = collective_block(e.plan(), r);
    const Slot copy{r, e.scratch(r, count), -offset};
    e.copy(at(slots[static_cast<std::size_t>(r)], offset, count), at(copy, offset, count));
    root_copy.push_back(copy);
  }
  emit_out_trees(e, slots, *packing_for(s.topo, s.nodes, Packing::kOutTrees), true, plan_blocks(e), root_copy);
}

void emit_trees_allgather(Emitter& e, const Setup& s, const AlgToken&) {
  require_blocks_fit(s);
  if (across_machines(s)) {
    emit_trees_allgather_across_machines(e, s);
    return;
  }
  emit_out_trees(e, user_slots(ranks(s)), *packing_for(s.topo, s.nodes, Packing::kOutTrees), true, plan_blocks(e));
}

void emit_trees_reducescatter(Emitter& e, const Setup& s, const AlgToken&) {
  require_blocks_fit(s);
  if (across_machines(s)) {
    emit_trees_reducescatter_across_machines(e, s);
    return;
  }
  emit_in_trees(e, user_slots(ranks(s)), *packing_for(s.topo, s.nodes, Packing::kInTrees), s.scale_by, true,
                plan_blocks(e));
}

// A lower bound: what every plan needs on a uniform topology, each GPU receiving (p−1)/p of the buffer per
// phase over all of its links (the single-GPU cut of the min-cut bound).
ClosedForm trees_allreduce_closed_form(const ClosedFormInput& in) {
  const double p = in.ranks;
  return {2 * (p - 1) / p * in.bytes * in.ingress_us_per_byte, Exactness::kLowerBound};
}

ClosedForm trees_collective_closed_form(const ClosedFormInput& in) {
  const double p = in.ranks;
  return {(p - 1) / p * in.bytes * in.ingress_us_per_byte, Exactness::kLowerBound};
}

// Tried where every machine's GPUs fit one packing (CandidateContext::gpus counts machine 0's; the trees of a
// cluster are packed per machine, and only on machines of equal GPU counts).
bool packable(const CandidateContext& ctx) {
  return ctx.gpus >= 2 && ctx.gpus <= synthesis::kMaxTreePackingParticipants;
}

// Trees need deeper pipelines than the tuner's default depths: every piece crosses a tree's depth.
const std::vector<int> kTreeSegments = {1, 4, 8, 16, 32};
// trees2 keeps shallow pipelines: its copies by weight put every tree's pieces on the same links at once, and the
// simulator's max-min sharing grows with those flows (pcie-8gpu, 1 MiB - 1 GiB: 0.14 s at 1 segment, 3.7 s at
// 8, 66 s at 32, where trees takes 0.3 s at 32), which made one autotune of pcie-8gpu take 3.5 minutes.
const std::vector<int> kTwoPhaseTreeSegments = {1, 2, 4};

// rbtrees pipelines deeper: both directions of every tree edge wait for the pieces before them, and its copies
// keep the plan's flows few enough to simulate at 64 and 128 segments. 128 pays where the staggered copies'
// latency leaves room (dgx1-v100[1,2,3,4,5,6,7] at 256 MiB: 94.1 % of the bound at 64, 96.4 % at 128;
// dgx1-v100[0,1,2,4]: 93.8 and 94.6 %).
const std::vector<int> kReduceBroadcastSegments = {1, 4, 16, 32, 64, 128};

// rbtrees#128, twice the default pieces, on sets of up to 7 GPUs: on 3-7 GPUs of a DGX-1 the finer pieces lift the
// worst sets (dgx1-v100[0,1,2,3,4,5] at 256 MiB and 32 segments: 84.7 % of the bound at 64 pieces, 86.7 % at 128;
// the three seven-GPU sets of dgx1-p100 below 95 % at 64 pieces, 94.7-95.0 %, reach 95.2-95.9 %; with the per-tree
// copies of the time, the V100 subset table of docs/bound.md went from 169 sets at 95 % of the bound to 182). Not
// tried on whole 8-GPU machines, whose autotune is the main job and where these plans are the slowest of all
// candidates to simulate (the flows of twice the pieces share every link).
constexpr int kFineCopiesMaxGpus = 7;
const std::vector<int> kFineCopiesSegments = {32, 64, 128};

// prings: its 256 pieces already run side by side, so shallow pipelines do (dgx1-v100, 256 MiB: 83.0, 94.4, 96.8
// and 97.3 % of the bound at 1, 2, 4 and 8 segments; 8 take 2.7 times the simulation of 4).
const std::vector<int> kPackedRingSegments = {2, 4};

// Clusters: `trees` in every machine and rings across, where every machine has the same GPUs; shallower pipelines
// (the plan carries every machine's trees: 4xdgx1-v100 at 32 segments passes the plan's op limit).
const std::vector<int> kAcrossMachinesSegments = {1, 4, 8, 16};
// The all-reduce there in slices besides (trees#P, one segment each: slices pipeline the phases, and segments on
// top gained little for P times the plan). At 256 MiB, busbw in GB/s at 8 / 16 slices (docs/bound.md): 4xdgx-h100
// 321.9 / 316.4 (whole, the best of its depths: 214.1), 4xdgx1-v100 49.9 / 53.1 (41.7).
const std::vector<int> kAcrossMachinesSlices = {8, 16};

bool machines_of_equal_gpus(const Topology& topo) {
  for (int m = 1; m < topo.machine_count(); ++m) {
    if (topo.gpus_of_machine(m).size() != topo.gpus_of_machine(0).size()) return false;
  }
  return true;
}

// All-gather and reduce-scatter: one machine's packing, or on clusters of equal machines its trees inside them and
// rings across.
void trees_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (!packable(ctx)) return;
  if (ctx.machines > 1) {
    if (machines_of_equal_gpus(ctx.topo))
      out.push_back({"trees", {}, {}, CandidateSeed::Segments::kAll, kAcrossMachinesSegments});
    return;
  }
  out.push_back({"trees", {}, {}, CandidateSeed::Segments::kAll, kTreeSegments});
}

// All-reduce: `trees` as the other collectives take it, on clusters in slices besides, and on one machine
// `trees2` and `rbtrees` besides.
void trees_allreduce_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  const std::size_t before = out.size();
  trees_candidates(ctx, out);
  if (ctx.machines > 1) {
    if (out.size() == before) return;  // no `trees` here
    // The rings across machines alone take 2·G·W·(W − 1) ops per slice (W machines of G GPUs: a ring per local GPU,
    // W − 1 steps of reduce-scatter and of all-gather with W chunks each); past the plan's op limit the slices are
    // left out here rather than refused at every size (128xdgx-h100: 260,096 per slice).
    const auto w = static_cast<std::size_t>(ctx.machines);
    const std::size_t ring_ops = 2 * static_cast<std::size_t>(ctx.gpus) * w * (w - 1);
    for (const int slices : kAcrossMachinesSlices) {
      if (ring_ops * static_cast<std::size_t>(slices) > kMaxPlanOps) continue;
      out.push_back({fmt::format("trees#{}", slices), {}, {}, CandidateSeed::Segments::kOne});
    }
    return;
  }
  if (!packable(ctx)) return;
  out.push_back({"trees2", {}, {}, CandidateSeed::Segments::kAll, kTwoPhaseTreeSegments});
  out.push_back({"rbtrees", {}, {}, CandidateSeed::Segments::kAll, kReduceBroadcastSegments});
  if (ctx.gpus <= kFineCopiesMaxGpus)
    out.push_back({fmt::format("rbtrees#{}", 2 * kCopiesPerBuffer), {}, {}, CandidateSeed::Segments::kAll,
                   kFineCopiesSegments});
  if (ctx.gpus <= synthesis::kMaxRingPackingParticipants)
    out.push_back({"prings", {}, {}, CandidateSeed::Segments::kAll, kPackedRingSegments});
}

}  // namespace

}  // namespace artune::detail

namespace artune::family {
const Family trees{
    .name = "trees",
    .readable = "tree-packing",
    .specs = {{"trees", "tree-packing", ArgKind::kSlices,
               "spanning trees per root packed over the topology's capacity: reduce-scatter up in-trees "
               "(across machines then rings of the same local GPU), all-gather down out-trees, each piece as "
               "soon as it is reduced; #P = slices the buffer is pipelined in through these phases (default 1)"},
              {"trees2", "tree-packing-two-phase", ArgKind::kNone,
               "trees with each block reduced whole before it goes down, the trees as copies by weight"},
              {"rbtrees", "reduce-broadcast-trees", ArgKind::kCopies,
               "spanning trees of one root packed over the topology's capacity, the buffer reduced up and "
               "broadcast down each at once (Blink); #C = equal pieces the buffer is cut into, apportioned to the "
               "trees by weight (default 64)"},
              {"prings", "ring-packing", ArgKind::kNone,
               "Hamiltonian rings packed over the topology's capacity (LP by column generation), each "
               "all-reducing its share of the buffer around the ring (one machine, at most 12 GPUs)"}},
    .emit = detail::emit_trees_allreduce,
    .closed_form = detail::trees_allreduce_closed_form,
    .candidates = detail::trees_allreduce_candidates,
    .tuner_position = 62,
};
const Family allgather_trees{
    .collective = Collective::kAllGather,
    .name = "trees",
    .readable = "tree-packing",
    .specs = {{"trees", "tree-packing", ArgKind::kNone,
               "spanning out-trees per root packed over the topology's capacity"}},
    .emit = detail::emit_trees_allgather,
    .closed_form = detail::trees_collective_closed_form,
    .candidates = detail::trees_candidates,
    .tuner_position = 40,
};
const Family reducescatter_trees{
    .collective = Collective::kReduceScatter,
    .name = "trees",
    .readable = "tree-packing",
    .specs = {{"trees", "tree-packing", ArgKind::kNone,
               "spanning in-trees per root packed over the topology's capacity"}},
    .emit = detail::emit_trees_reducescatter,
    .closed_form = detail::trees_collective_closed_form,
    .candidates = detail::trees_candidates,
    .tuner_position = 40,
};
}  // namespace artune::family
