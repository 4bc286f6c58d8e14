// Double binary tree, as NCCL's trees: two complementary binary trees over
// the ranks (a leaf of one is an inner node of the other), each reducing half
// of the buffer up to its root and broadcasting it back down.
//
// Cost: 2·lg n steps of latency per tree (logarithmic, unlike a ring's 2(n−1));
// with pipelining (--segments) the bandwidth term approaches m/B per direction.

#include <algorithm>
#include <numeric>

#include "artune/algorithms/families/families.hpp"

namespace artune::detail {

std::vector<int> btree_parents(int n) {
  std::vector<int> parent(static_cast<std::size_t>(std::max(n, 0)), -1);
  for (int rank = 1; rank < n; ++rank) {
    // NCCL ncclGetBtree: a rank's level is its lowest set bit; its parent clears that bit and
    // sets the next one, or only clears it when that lands beyond the last rank.
    int bit = 1;
    while (bit < n && (bit & rank) == 0) bit <<= 1;
    int up = (rank ^ bit) | (bit << 1);
    if (up >= n) up = rank ^ bit;
    parent[static_cast<std::size_t>(rank)] = up;
  }
  return parent;
}

std::pair<std::vector<int>, std::vector<int>> double_btree_parents(int n) {
  std::vector<int> first = btree_parents(n);
  std::vector<int> second(first.size(), -1);
  for (int rank = 0; rank < n; ++rank) {
    if (n % 2 == 1) {
      // Odd: the same tree shifted by one rank.
      const int u = first[static_cast<std::size_t>((rank - 1 + n) % n)];
      second[static_cast<std::size_t>(rank)] = u < 0 ? -1 : (u + 1) % n;
    } else {
      // Even: the mirror image.
      const int u = first[static_cast<std::size_t>(n - 1 - rank)];
      second[static_cast<std::size_t>(rank)] = u < 0 ? -1 : n - 1 - u;
    }
  }
  return {std::move(first), std::move(second)};
}

void emit_tree(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, int scale_by) {
  const int n = static_cast<int>(slots.size());
  if (n == 0) return;
  const auto trees = double_btree_parents(n);
  for (int t = 0; t < 2; ++t) {
    const auto [off, len] = even_piece(count, 2, t);
    if (len == 0) continue;
    const std::vector<int>& parent = t == 0 ? trees.first : trees.second;
    std::vector<int> depth(static_cast<std::size_t>(n), 0);
    int root = -1;
    for (int v = 0; v < n; ++v) {
      int d = 0;
      for (int u = v; parent[static_cast<std::size_t>(u)] >= 0; u = parent[static_cast<std::size_t>(u)]) ++d;
      depth[static_cast<std::size_t>(v)] = d;
      if (parent[static_cast<std::size_t>(v)] < 0) root = v;
    }
    std::vector<int> by_depth(static_cast<std::size_t>(n));
    std::iota(by_depth.begin(), by_depth.end(), 0);
    std::stable_sort(by_depth.begin(), by_depth.end(), [&](int a, int b) {
      return depth[static_cast<std::size_t>(a)] > depth[static_cast<std::size_t>(b)];
    });
    // Reduce up: deepest first, so every node forwards its whole subtree's sum.
    for (int v : by_depth) {
      const int u = parent[static_cast<std::size_t>(v)];
      if (u >= 0)
        e.reduce(at(slots[static_cast<std::size_t>(v)], off, len), at(slots[static_cast<std::size_t>(u)], off, len));
    }
    if (scale_by != kNoScale) e.scale(at(slots[static_cast<std::size_t>(root)], off, len), scale_by);
    // Broadcast down: shallowest first.
    for (auto it = by_depth.rbegin(); it != by_depth.rend(); ++it) {
      const int v = *it;
      const int u = parent[static_cast<std::size_t>(v)];
      if (u >= 0)
        e.copy(at(slots[static_cast<std::size_t>(u)], off, len), at(slots[static_cast<std::size_t>(v)], off, len));
    }
  }
}

// ---------------------------------------------------------------------------
// The double-binary-tree family's record.

namespace {

void emit_tree_family(Emitter& e, const Setup& s, const AlgToken& token) {
  emit_tree(e, ordered_slots(s, token), s.options.count, s.scale_by);
}

// One tree of the pair over `bytes`, every op alone on its link and reducer: the reduces into a node
// run one after another in emission order (they write the same region), each waiting for its child's
// subtree; then the copies down, each waiting for its parent's.
double tree_alone_us(const std::vector<int>& parent, double bytes, const AlphaBetaGamma& c) {
  const int n = static_cast<int>(parent.size());
  std::vector<int> depth(static_cast<std::size_t>(n), 0);
  for (int v = 0; v < n; ++v) {
    for (int u = v; parent[static_cast<std::size_t>(u)] >= 0; u = parent[static_cast<std::size_t>(u)]) {
      ++depth[static_cast<std::size_t>(v)];
    }
  }
  std::vector<int> by_depth(static_cast<std::size_t>(n));
  std::iota(by_depth.begin(), by_depth.end(), 0);
  std::stable_sort(by_depth.begin(), by_depth.end(), [&](int a, int b) {
    return depth[static_cast<std::size_t>(a)] > depth[static_cast<std::size_t>(b)];
  });
  const double up = c.alpha_us + bytes * (c.beta_us_per_byte + c.gamma_us_per_byte);
  const double down = c.alpha_us + bytes * c.beta_us_per_byte;
  std::vector<double> written(static_cast<std::size_t>(n), 0.0);  // when a node's region was last written
  for (int v : by_depth) {
    const int u = parent[static_cast<std::size_t>(v)];
    if (u < 0) continue;
    written[static_cast<std::size_t>(u)] =
        std::max(written[static_cast<std::size_t>(u)], written[static_cast<std::size_t>(v)]) + up;
  }
  double end = 0;
  std::vector<double> has(static_cast<std::size_t>(n), 0.0);  // when a node holds the result
  for (auto it = by_depth.rbegin(); it != by_depth.rend(); ++it) {
    const int v = *it;
    const int u = parent[static_cast<std::size_t>(v)];
    const auto vi = static_cast<std::size_t>(v);
    const auto ui = static_cast<std::size_t>(u);
    has[vi] = u < 0 ? written[vi] : std::max(has[ui], written[ui]) + down;
    end = std::max(end, has[static_cast<std::size_t>(v)]);
  }
  return end;
}

// The slower of the two trees, each as if alone (each carries half the buffer): a lower bound, as the
// trees share links and reducers where they meet.
ClosedForm tree_closed_form(const ClosedFormInput& in) {
  if (in.ranks < 2) return {0.0, Exactness::kLowerBound};
  const auto [first, second] = double_btree_parents(in.ranks);
  const double half = in.bytes / 2;
  return {std::max(tree_alone_us(first, half, in.link), tree_alone_us(second, half, in.link)), Exactness::kLowerBound};
}

void tree_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (ctx.machines == 1) out.push_back({"tree", {}, {}});
}

}  // namespace

}  // namespace artune::detail

namespace artune::family {
const Family double_binary_tree{
    .name = "tree",
    .readable = "double-binary-tree",
    .specs = {{"tree", "double-binary-tree", ArgKind::kNone, "double binary tree"}},
    .emit = detail::emit_tree_family,
    .closed_form = detail::tree_closed_form,
    .candidates = detail::tree_candidates,
    .tuner_position = 60,
};
}  // namespace artune::family
