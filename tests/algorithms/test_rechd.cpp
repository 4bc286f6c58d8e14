// Recursive halving-doubling: TF's pairing for powers of two, the fold otherwise.
#include <doctest/doctest.h>

#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

namespace {

void check_op(const Op& op, OpKind kind, Location src, Location dst) {
  CAPTURE(op.id);
  CHECK(op.kind == kind);
  CHECK(op.src == src);
  CHECK(op.dst == dst);
}

}  // namespace

TEST_CASE("rechd.tf_pairing_power_of_two") {
  // 4 devices, 8 elements. Gather hop 0 (span 1): pairs (0,1), (2,3); the left keeps the first
  // half. Hop 1 (span 2): pairs (0,2), (1,3) on the halves they hold. Scatter in reverse.
  const Plan plan = build_verified("uniform:4", "rechd", opts(8));
  REQUIRE(plan.ops.size() == 16);
  const auto& o = plan.ops;
  check_op(o[0], OpKind::kReduce, {1, 0, 0, 4}, {0, 0, 0, 4});
  check_op(o[1], OpKind::kReduce, {0, 0, 4, 4}, {1, 0, 4, 4});
  check_op(o[2], OpKind::kReduce, {3, 0, 0, 4}, {2, 0, 0, 4});
  check_op(o[3], OpKind::kReduce, {2, 0, 4, 4}, {3, 0, 4, 4});
  check_op(o[4], OpKind::kReduce, {2, 0, 0, 2}, {0, 0, 0, 2});
  check_op(o[5], OpKind::kReduce, {0, 0, 2, 2}, {2, 0, 2, 2});
  check_op(o[6], OpKind::kReduce, {3, 0, 4, 2}, {1, 0, 4, 2});
  check_op(o[7], OpKind::kReduce, {1, 0, 6, 2}, {3, 0, 6, 2});
  // Scatter, span 2 first: each side copies the other's reduced quarter (TF's concat).
  check_op(o[8], OpKind::kCopy, {2, 0, 2, 2}, {0, 0, 2, 2});
  check_op(o[9], OpKind::kCopy, {0, 0, 0, 2}, {2, 0, 0, 2});
  check_op(o[10], OpKind::kCopy, {3, 0, 6, 2}, {1, 0, 6, 2});
  check_op(o[11], OpKind::kCopy, {1, 0, 4, 2}, {3, 0, 4, 2});
  check_op(o[12], OpKind::kCopy, {1, 0, 4, 4}, {0, 0, 4, 4});
  check_op(o[13], OpKind::kCopy, {0, 0, 0, 4}, {1, 0, 0, 4});
  check_op(o[14], OpKind::kCopy, {3, 0, 4, 4}, {2, 0, 4, 4});
  check_op(o[15], OpKind::kCopy, {2, 0, 0, 4}, {3, 0, 0, 4});
  // Hop 1 waits for hop 0 on the same devices, not for everything.
  CHECK(o[4].deps == std::vector<int>{0, 2});
}

TEST_CASE("rechd.volume") {
  // p = 2^k devices: each device sends (p−1)/p of the buffer in each phase.
  const Plan plan = build_verified("dgx1-v100", "rechd", opts(8000));
  std::int64_t reduced = 0;
  std::int64_t copied = 0;
  for (const Op& op : plan.ops) (op.kind == OpKind::kReduce ? reduced : copied) += op.dst.count;
  CHECK(reduced == 7000 * 8);
  CHECK(copied == 7000 * 8);
  CHECK(count_of(plan, OpKind::kReduce) == 8 * 3);
}

TEST_CASE("rechd.fold_for_other_counts") {
  // 6 devices: devices 4, 5 fold into 0, 1, the core of 4 runs, results go back.
  BuildOptions o = opts(10);
  const Topology& t = topo("uniform:8");
  for (int i = 0; i < 6; ++i) o.participants.push_back(t.gpus()[static_cast<std::size_t>(i)]);
  const Plan plan = build_plan(t, "rechd", o);
  const VerifyResult r = verify(plan);
  INFO(problems(r));
  CHECK(r.ok);
  check_op(plan.ops[0], OpKind::kReduce, {4, 0, 0, 10}, {0, 0, 0, 10});
  check_op(plan.ops[1], OpKind::kReduce, {5, 0, 0, 10}, {1, 0, 0, 10});
  check_op(plan.ops[plan.ops.size() - 2], OpKind::kCopy, {0, 0, 0, 10}, {4, 0, 0, 10});
  check_op(plan.ops.back(), OpKind::kCopy, {1, 0, 0, 10}, {5, 0, 0, 10});
}

TEST_CASE("rechd.any_count_and_size") {
  for (int n : {1, 2, 3, 5, 6, 7, 8}) {
    for (std::int64_t count : {1, 2, 3, 7, 13, 1000}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        BuildOptions o = opts(count, op);
        const Topology& t = topo("uniform:8");
        for (int i = 0; i < n; ++i) o.participants.push_back(t.gpus()[static_cast<std::size_t>(i)]);
        const Plan plan = build_plan(t, "rechd", o);
        const VerifyResult r = verify(plan);
        INFO("n=", n, " count=", count, "\n", problems(r));
        CHECK(r.ok);
      }
    }
  }
}

TEST_CASE("rechd.uneven_halves") {
  // 7 elements on 2 devices: halves of 4 and 3.
  const Plan plan = build_verified("uniform:2", "rechd", opts(7));
  REQUIRE(plan.ops.size() == 4);
  CHECK(plan.ops[0].dst == Location{0, 0, 0, 4});
  CHECK(plan.ops[1].dst == Location{1, 0, 4, 3});
}

TEST_CASE("rechd.device_order_from_gpu_perm") {
  // TF pairs devices in list order: with order 0,3,2,1 hop 0 pairs (0,3) and (2,1).
  const Plan plan = build_verified("uniform:4", "rechd", opts(8, ReduceOp::kSum, {0, 3, 2, 1}));
  check_op(plan.ops[0], OpKind::kReduce, {3, 0, 0, 4}, {0, 0, 0, 4});
  check_op(plan.ops[1], OpKind::kReduce, {0, 0, 4, 4}, {3, 0, 4, 4});
  check_op(plan.ops[2], OpKind::kReduce, {1, 0, 0, 4}, {2, 0, 0, 4});
  // Hop 1 pairs positions (0,2) and (1,3): devices 0 with 2, 3 with 1.
  check_op(plan.ops[4], OpKind::kReduce, {2, 0, 0, 2}, {0, 0, 0, 2});
  check_op(plan.ops[6], OpKind::kReduce, {1, 0, 4, 2}, {3, 0, 4, 2});
  build_verified("4xdgx1-v100", "rechd", opts(1000, ReduceOp::kAvg, {0, 3, 2, 1, 5, 6, 7, 4}));
  build_verified("dgx1-v100", "tree", opts(1000, ReduceOp::kAvg, {0, 3, 2, 1, 5, 6, 7, 4}));
}
