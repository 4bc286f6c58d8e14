// nccl and the hybrids: TF's _build_nccl_hybrid and _build_shuffle_hybrid.
#include <doctest/doctest.h>

#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

TEST_CASE("nccl.one_group") {
  const Plan plan = build_verified("dgx1-v100", "nccl", opts(1000));
  REQUIRE(plan.ops.size() == 1);
  const Op& op = plan.ops[0];
  CHECK(op.kind == OpKind::kGroup);
  CHECK(op.collective == Collective::kAllReduce);
  CHECK(op.group == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(op.dst == Location{-1, 0, 0, 1000});
  // avg: the group sums, every rank scales its copy once.
  const Plan avg = build_verified("dgx1-v100", "nccl", opts(1000, ReduceOp::kAvg));
  REQUIRE(avg.ops.size() == 9);
  for (int i = 1; i <= 8; ++i) {
    CHECK(avg.ops[static_cast<std::size_t>(i)].kind == OpKind::kScale);
    CHECK(avg.ops[static_cast<std::size_t>(i)].deps == std::vector<int>{0});
  }
}

TEST_CASE("hybrid.nccl_xring_structure") {
  // 4 machines of 8: group all-reduce per machine, ring over GPUs 0, 8, 16, 24, group broadcast.
  const Plan plan = build_verified("4xdgx1-v100", "nccl/xring", opts(4000));
  std::vector<Op> groups = ops_of(plan, OpKind::kGroup);
  REQUIRE(groups.size() == 8);
  for (int m = 0; m < 4; ++m) {
    const Op& up = groups[static_cast<std::size_t>(m)];
    CHECK(up.collective == Collective::kAllReduce);
    CHECK(up.group.front() == 8 * m);
    CHECK(up.group.size() == 8);
    const Op& down = groups[static_cast<std::size_t>(4 + m)];
    CHECK(down.collective == Collective::kBroadcast);
    CHECK(down.root == 8 * m);
  }
  // The upper ring: 3 ticks of reduces and 3 of copies over 4 chunks of 1000.
  const auto reduces = ops_of(plan, OpKind::kReduce);
  CHECK(reduces.size() == 12);
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kGroup) continue;
    CHECK(op.src.device % 8 == 0);
    CHECK(op.dst.device % 8 == 0);
    CHECK(op.dst.count == 1000);
  }
  // TF's upper ring uses gpu_perm [0]: more subchunks than one device per worker is an error.
  CHECK(
      throws_mentioning([] { build_plan(topo("4xdgx1-v100"), "nccl/xring#2", opts(100)); }, {"xring#2", "subchunks"}));
}

TEST_CASE("hybrid.single_machine_is_the_intra_algorithm") {
  const Plan hybrid = build_verified("dgx1-v100", "nccl/xring", opts(100));
  const Plan flat = build_verified("dgx1-v100", "nccl", opts(100));
  CHECK(hybrid.ops == flat.ops);
  const Plan shuffle_hybrid = build_verified("dgx1-v100", "pscpu/pscpu#2", opts(100));
  const Plan pscpu = build_verified("dgx1-v100", "pscpu", opts(100));
  CHECK(shuffle_hybrid.ops == pscpu.ops);
}

TEST_CASE("hybrid.pscpu_pscpu") {
  // Each machine gathers on its first CPU socket; the second level gathers on the first #n of
  // those (TF second_gather_devices = aux_devices[:num_shards], default 1).
  const Topology& t = topo("uniform:2x8");
  const Plan plan = build_verified("uniform:2x8", "pscpu/pscpu", opts(64));
  REQUIRE(plan.devices.size() == 18);
  for (int h = 16; h < 18; ++h) {
    const PlanDevice& d = plan.devices[static_cast<std::size_t>(h)];
    CHECK_FALSE(d.participant);
    CHECK(t.nodes()[static_cast<std::size_t>(d.node)].kind == NodeKind::kCpu);
    CHECK(t.nodes()[static_cast<std::size_t>(d.node)].machine == h - 16);
  }
  // Gather into m0's CPU, then m1's CPU, then the upper shuffle reduces m1's CPU into m0's.
  int cross = 0;
  for (const Op& op : plan.ops) {
    const int ma =
        t.nodes()[static_cast<std::size_t>(plan.devices[static_cast<std::size_t>(op.src.device)].node)].machine;
    const int mb =
        t.nodes()[static_cast<std::size_t>(plan.devices[static_cast<std::size_t>(op.dst.device)].node)].machine;
    if (ma != mb) ++cross;
  }
  // Upper shuffle with one shard on m0's CPU: m1's sum goes there, the result comes back.
  CHECK(cross == 2);
  build_verified("uniform:4x8", "pscpu/pscpu#2", opts(1000, ReduceOp::kAvg));
}

TEST_CASE("hybrid.all_supported_pairs") {
  for (const std::string spec : {"nccl/xring", "nccl/rechd", "nccl/pscpu", "nccl/shuffle", "pscpu/xring", "pscpu/pscpu",
                                 "pscpu/rechd", "pscpu/pscpu#3", "nccl/pscpu#2"}) {
    for (const std::string t : {"uniform:2x8", "uniform:4x8", "4xdgx1-v100", "dgx1-v100"}) {
      for (std::int64_t count : {1, 7, 1000}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
          CAPTURE(spec);
          CAPTURE(t);
          build_verified(t, spec, opts(count, op));
        }
      }
    }
  }
}

TEST_CASE("hybrid.avg_scales_once_in_the_upper_level") {
  const Plan plan = build_verified("uniform:4x8", "nccl/rechd", opts(64, ReduceOp::kAvg));
  std::int64_t scaled = 0;
  for (const Op& op : ops_of(plan, OpKind::kScale)) {
    CHECK(op.divisor == 32);
    CHECK(op.dst.device % 8 == 0);
    scaled += op.dst.count;
  }
  CHECK(scaled == 64);
}

TEST_CASE("hybrid.nccl_pscpu_gathers_on_every_machine_cpu") {
  // TF's nccl/pscpu: the upper shuffle's gather devices are every worker's CPU (W shards).
  const Plan plan = build_verified("uniform:4x8", "nccl/pscpu", opts(400));
  CHECK(plan.devices.size() == 32 + 4);
  for (std::size_t h = 32; h < plan.devices.size(); ++h) CHECK(plan.buffers[h] == std::vector<std::int64_t>{100});
}
