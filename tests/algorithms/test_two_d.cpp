// 2-D hierarchical all-reduce.
#include <doctest/doctest.h>

#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

TEST_CASE("two_d.single_machine_is_a_ring") {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    for (std::int64_t count : {1, 13, 1000}) {
      const Plan two_d = build_verified("dgx1-v100", "2d", opts(count, op, {0, 3, 2, 1, 5, 6, 7, 4}));
      const Plan ring = build_verified("dgx1-v100", "xring", opts(count, op, {0, 3, 2, 1, 5, 6, 7, 4}));
      CHECK(two_d.ops == ring.ops);
    }
  }
}

TEST_CASE("two_d.structure_across_machines") {
  // 4 machines of 8: cross-machine transfers only between GPUs of the same local index, and each
  // moves a piece of that GPU's 1/8 shard.
  const Topology& t = topo("uniform:4x8");
  const Plan plan = build_verified("uniform:4x8", "2d", opts(3200));
  int cross = 0;
  for (const Op& op : plan.ops) {
    const Node& a = t.nodes()[static_cast<std::size_t>(plan.devices[static_cast<std::size_t>(op.src.device)].node)];
    const Node& b = t.nodes()[static_cast<std::size_t>(plan.devices[static_cast<std::size_t>(op.dst.device)].node)];
    if (a.machine == b.machine) continue;
    ++cross;
    CHECK(a.local_index == b.local_index);
    CHECK(op.dst.count == 100);  // 3200 / 8 local shards / 4 machines
    // The shard of local GPU l (identity ring order) is [400 l, 400 (l + 1)).
    CHECK(op.dst.offset / 400 == a.local_index);
  }
  // Per local index: a 4-ring, 3 reduce ticks and 3 copy ticks of 4 transfers each.
  CHECK(cross == 8 * 2 * 3 * 4);
  // Machines only ever exchange 2(W−1)/W of each shard per GPU, far below a flat ring's volume.
  build_verified("4xdgx1-v100", "2d", opts(1000, ReduceOp::kAvg, {0, 3, 2, 1, 5, 6, 7, 4}));
  build_verified("uniform:2x8", "2d", opts(7, ReduceOp::kAvg));
}
