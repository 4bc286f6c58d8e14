// Spanning-tree packing (issue 25): plans derived from the topology's capacity rather than laid over it.
// For every root, weighted trees found by synthesis/tree_packing.hpp (LP and max flows on LEMON) at the
// links' usable rates (topology/link_rates.hpp): all-gather broadcasts each rank's block down its out-trees,
// reduce-scatter reduces each block up its in-trees into its owner, all-reduce runs the two (the owner
// scales its block for avg in between). A tree edge is a transfer over NCCL's route, or two transfers
// staged through a CPU socket's scratch memory. Each tree carries its whole chunks of the root's block;
// --segments pipelines the pieces down and up the trees.
//
// Cost: within the packing's rate of the min-cut bound (cut_bound.hpp) in bandwidth; latency grows with
// the trees' depth (one transfer per level, two for a staged edge).

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <tuple>

#include "artune/algorithms/collective_families.hpp"
#include "artune/algorithms/synthesis/tree_packing.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/topology/link_rates.hpp"

namespace artune::detail {

namespace {

using synthesis::TreeEdge;
using synthesis::TreePacking;
using synthesis::WeightedTree;

// The tuner and a size sweep build the same plan at many counts: the packing depends on the topology and
// the participants only, so it is found once per process (bounded: the oldest goes first).
constexpr std::size_t kPackingCacheEntries = 64;

std::shared_ptr<const TreePacking> packing_for(const Topology& topo, const std::vector<int>& participants,
                                               bool toward_root) {
  using Key = std::tuple<std::string, std::vector<int>, bool>;
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const TreePacking>> cache;
  static std::vector<Key> order;
  Key key{topo.fingerprint(), participants, toward_root};
  {
    std::lock_guard lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto packing = std::make_shared<const TreePacking>(
      synthesis::pack_trees(topo, participants, usable_link_rates(topo), toward_root));
  std::lock_guard lock(mutex);
  if (cache.emplace(key, packing).second) {
    order.push_back(key);
    if (order.size() > kPackingCacheEntries) {
      cache.erase(order.front());
      order.erase(order.begin());
    }
  }
  return packing;
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
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return depth[static_cast<std::size_t>(a)] < depth[static_cast<std::size_t>(b)]; });
  return order;
}

// The elements [first, first + count) of the buffer that tree `t` carries: its chunks of its root's block.
struct Piece {
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

std::vector<Piece> pieces(Emitter& e, const TreePacking& p) {
  std::vector<Piece> out;
  std::vector<int> next_chunk(p.trees.empty() ? 0 : p.trees.front().parent_edge.size(), 0);
  for (const WeightedTree& t : p.trees) {
    const auto [block_offset, block_count] = collective_block(e.plan(), t.root);
    int& first = next_chunk[static_cast<std::size_t>(t.root)];
    const std::int64_t begin = even_piece(block_count, p.chunks, first).first;
    const int last = first + t.chunks - 1;
    const auto [last_offset, last_count] = even_piece(block_count, p.chunks, last);
    out.push_back({block_offset + begin, last_offset + last_count - begin});
    first += t.chunks;
  }
  return out;
}

// One tree edge over `piece`: a copy (or reduce) from participant `from` to `to`, directly or through the
// CPU's scratch.
void transfer(Emitter& e, const std::vector<Slot>& slots, const TreeEdge& edge, const Piece& piece, bool reduce) {
  const Location src = at(slots[static_cast<std::size_t>(edge.from)], piece.offset, piece.count);
  const Location dst = at(slots[static_cast<std::size_t>(edge.to)], piece.offset, piece.count);
  if (edge.via < 0) {
    reduce ? e.reduce(src, dst) : e.copy(src, dst);
    return;
  }
  const int cpu = e.device_for_node(edge.via);
  const Location stage{cpu, e.scratch(cpu, piece.count), 0, piece.count};
  e.copy(src, stage);
  reduce ? e.reduce(stage, dst) : e.copy(stage, dst);
}

// Every root's block down its out-trees.
void emit_out_trees(Emitter& e, const std::vector<Slot>& slots, const TreePacking& p) {
  const std::vector<Piece> piece = pieces(e, p);
  for (std::size_t i = 0; i < p.trees.size(); ++i) {
    const WeightedTree& t = p.trees[i];
    if (piece[i].count == 0) continue;
    for (int v : by_depth(p, t)) {
      const int edge = t.parent_edge[static_cast<std::size_t>(v)];
      if (edge >= 0) transfer(e, slots, p.edges[static_cast<std::size_t>(edge)], piece[i], false);
    }
  }
}

// Every root's block up its in-trees, deepest first (a participant forwards its subtree's sum); the root
// scales its pieces for avg.
void emit_in_trees(Emitter& e, const std::vector<Slot>& slots, const TreePacking& p, int scale_by) {
  const std::vector<Piece> piece = pieces(e, p);
  for (std::size_t i = 0; i < p.trees.size(); ++i) {
    const WeightedTree& t = p.trees[i];
    if (piece[i].count == 0) continue;
    const std::vector<int> order = by_depth(p, t);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const int edge = t.parent_edge[static_cast<std::size_t>(*it)];
      if (edge >= 0) transfer(e, slots, p.edges[static_cast<std::size_t>(edge)], piece[i], true);
    }
    if (scale_by != kNoScale) {
      e.scale(at(slots[static_cast<std::size_t>(t.root)], piece[i].offset, piece[i].count), scale_by);
    }
  }
}

void require_blocks_fit(const Setup& s) {
  if (!s.options.blocks.empty()) {
    // The packing splits even blocks; all-gather-v blocks would leave some trees idle and others overfull.
    throw InvalidInput(fmt::format("{} trees: per-rank block sizes (all-gather-v) are not supported; use ring, "
                                   "bruck or rd",
                                   parameter("spec")));
  }
}

void emit_trees_allreduce(Emitter& e, const Setup& s, const AlgToken&) {
  const std::vector<Slot> slots = user_slots(ranks(s));
  emit_in_trees(e, slots, *packing_for(s.topo, s.nodes, true), s.scale_by);
  emit_out_trees(e, slots, *packing_for(s.topo, s.nodes, false));
}

void emit_trees_allgather(Emitter& e, const Setup& s, const AlgToken&) {
  require_blocks_fit(s);
  emit_out_trees(e, user_slots(ranks(s)), *packing_for(s.topo, s.nodes, false));
}

void emit_trees_reducescatter(Emitter& e, const Setup& s, const AlgToken&) {
  require_blocks_fit(s);
  emit_in_trees(e, user_slots(ranks(s)), *packing_for(s.topo, s.nodes, true), s.scale_by);
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

// Tried on every topology whose machines the packing takes whole (its LP grows with the square of the GPUs).
constexpr int kMaxTunedGpus = 64;

void trees_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (ctx.gpus * ctx.machines >= 2 && ctx.gpus * ctx.machines <= kMaxTunedGpus) out.push_back({"trees", {}, {}});
}

}  // namespace

}  // namespace artune::detail

namespace artune::family {
const Family trees{
    .name = "trees",
    .readable = "tree-packing",
    .specs = {{"trees", "tree-packing", ArgKind::kNone,
               "spanning trees per root packed over the topology's capacity (reduce-scatter up, all-gather down)"}},
    .emit = detail::emit_trees_allreduce,
    .closed_form = detail::trees_allreduce_closed_form,
    .candidates = detail::trees_candidates,
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
