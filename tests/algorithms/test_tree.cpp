// Double binary tree: NCCL's trees and the plan they give.
#include <doctest/doctest.h>

#include "artune/algorithms/families/families.hpp"
#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

namespace {

// Children count per node, and every node reaches the root.
void check_tree(const std::vector<int>& parent) {
  const int n = static_cast<int>(parent.size());
  std::vector<int> children(static_cast<std::size_t>(n), 0);
  int roots = 0;
  for (int v = 0; v < n; ++v) {
    if (parent[static_cast<std::size_t>(v)] < 0) {
      ++roots;
      continue;
    }
    ++children[static_cast<std::size_t>(parent[static_cast<std::size_t>(v)])];
    int steps = 0;
    for (int u = v; parent[static_cast<std::size_t>(u)] >= 0; u = parent[static_cast<std::size_t>(u)]) {
      REQUIRE(++steps <= n);
    }
  }
  CHECK(roots == 1);
  for (int c : children) CHECK(c <= 2);
}

}  // namespace

TEST_CASE("tree.nccl_btree") {
  // NCCL's example for 14 ranks: 0 → 8; 8 → 4, 12; 4 → 2, 6; 12 → 10, 13; 2 → 1, 3; …
  const auto p = detail::btree_parents(14);
  CHECK(p == std::vector<int>{-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12});
  for (int n = 1; n <= 70; ++n) {
    CAPTURE(n);
    const auto [a, b] = detail::double_btree_parents(n);
    check_tree(a);
    check_tree(b);
  }
  // Even n: the second tree mirrors the first; odd: shifts it by one.
  const auto [a8, b8] = detail::double_btree_parents(8);
  CHECK(a8 == std::vector<int>{-1, 2, 4, 2, 0, 6, 4, 6});
  CHECK(b8 == std::vector<int>{1, 3, 1, 7, 5, 3, 5, -1});
  const auto [a5, b5] = detail::double_btree_parents(5);
  CHECK(a5 == std::vector<int>{-1, 2, 4, 2, 0});
  CHECK(b5 == std::vector<int>{1, -1, 3, 0, 3});
}

TEST_CASE("tree.complementary_for_even_counts") {
  // In the mirrored tree of an even count, no rank is an inner node of both trees.
  for (int n : {2, 4, 8, 16, 32}) {
    const auto [a, b] = detail::double_btree_parents(n);
    std::vector<int> inner_a(static_cast<std::size_t>(n), 0);
    std::vector<int> inner_b(static_cast<std::size_t>(n), 0);
    for (int v = 0; v < n; ++v) {
      if (a[static_cast<std::size_t>(v)] >= 0) inner_a[static_cast<std::size_t>(a[static_cast<std::size_t>(v)])] = 1;
      if (b[static_cast<std::size_t>(v)] >= 0) inner_b[static_cast<std::size_t>(b[static_cast<std::size_t>(v)])] = 1;
    }
    for (int v = 0; v < n; ++v) CHECK(!(inner_a[static_cast<std::size_t>(v)] && inner_b[static_cast<std::size_t>(v)]));
  }
}

TEST_CASE("tree.plan") {
  // Each tree reduces its half up (n−1 reduces) and broadcasts it down (n−1 copies).
  const Plan plan = build_verified("dgx1-v100", "tree", opts(1000));
  CHECK(count_of(plan, OpKind::kReduce) == 14);
  CHECK(count_of(plan, OpKind::kCopy) == 14);
  for (const Op& op : plan.ops) CHECK(op.dst.count == 500);
  const Plan avg = build_verified("dgx1-v100", "tree", opts(1001, ReduceOp::kAvg));
  const auto scales = ops_of(avg, OpKind::kScale);
  REQUIRE(scales.size() == 2);
  CHECK(scales[0].dst == Location{0, 0, 0, 501});
  CHECK(scales[1].dst == Location{7, 0, 501, 500});
  // A single element uses only the first tree.
  CHECK(count_of(build_verified("dgx2", "tree", opts(1)), OpKind::kReduce) == 15);
  build_verified("dgx2", "tree", opts(1000, ReduceOp::kAvg, {}, 4));
}
