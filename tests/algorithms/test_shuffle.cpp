// Shuffle (parameter-server) all-reduce: gather devices, _ragged_split shards.
#include <doctest/doctest.h>

#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

namespace {

int node_of(const std::string& topology, const std::string& id) {
  const int n = topo(topology).find_node(id);
  REQUIRE(n >= 0);
  return n;
}

// Topology nodes of one kind (machine 0).
std::vector<int> kind_nodes(const std::string& topology, NodeKind kind) {
  return topo(topology).nodes_of_kind(kind, 0);
}

}  // namespace

TEST_CASE("shuffle.pscpu_on_first_socket") {
  const Plan plan = build_verified("dgx1-v100", "pscpu", opts(1000));
  REQUIRE(plan.devices.size() == 9);
  const PlanDevice& helper = plan.devices[8];
  CHECK_FALSE(helper.participant);
  CHECK(helper.node == kind_nodes("dgx1-v100", NodeKind::kCpu).front());
  CHECK(plan.buffers[8] == std::vector<std::int64_t>{1000});
  // TF's _build_shuffle_gather + scatter: the first input lands, the other 7 are reduced in,
  // then every rank gets a copy.
  REQUIRE(plan.ops.size() == 1 + 7 + 8);
  CHECK(plan.ops[0].kind == OpKind::kCopy);
  CHECK(plan.ops[0].src == Location{0, 0, 0, 1000});
  CHECK(plan.ops[0].dst == Location{8, 0, 0, 1000});
  for (int i = 1; i <= 7; ++i) {
    CHECK(plan.ops[static_cast<std::size_t>(i)].kind == OpKind::kReduce);
    CHECK(plan.ops[static_cast<std::size_t>(i)].src.device == i);
  }
  for (int i = 0; i < 8; ++i) {
    const Op& op = plan.ops[static_cast<std::size_t>(8 + i)];
    CHECK(op.kind == OpKind::kCopy);
    CHECK(op.src == Location{8, 0, 0, 1000});
    CHECK(op.dst == Location{i, 0, 0, 1000});
  }
}

TEST_CASE("shuffle.pscpu_shards_round_robin_over_sockets") {
  const Plan plan = build_verified("dgx1-v100", "pscpu#2", opts(7));
  const auto cpus = kind_nodes("dgx1-v100", NodeKind::kCpu);
  REQUIRE(cpus.size() == 2);
  REQUIRE(plan.devices.size() == 10);
  CHECK(plan.devices[8].node == cpus[0]);
  CHECK(plan.devices[9].node == cpus[1]);
  // _ragged_split(7, 2): 3 then 4.
  CHECK(plan.buffers[8] == std::vector<std::int64_t>{3});
  CHECK(plan.buffers[9] == std::vector<std::int64_t>{4});
  // pscpu#3: the third shard shares socket 0 in a second scratch buffer.
  const Plan three = build_verified("dgx1-v100", "pscpu#3", opts(100));
  CHECK(three.buffers[8] == std::vector<std::int64_t>{33, 34});
  CHECK(three.buffers[9] == std::vector<std::int64_t>{33});
}

TEST_CASE("shuffle.psgpu_in_place") {
  // 13 elements, 2 shards: [0,6) on GPU 0, [6,13) on GPU 1, reduced in their user buffers.
  const Plan plan = build_verified("dgx1-v100", "psgpu#2", opts(13));
  CHECK(plan.devices.size() == 8);
  std::vector<Op> into0;
  std::vector<Op> into1;
  for (const Op& op : ops_of(plan, OpKind::kReduce)) (op.dst.device == 0 ? into0 : into1).push_back(op);
  REQUIRE(into0.size() == 7);
  REQUIRE(into1.size() == 7);
  for (const Op& op : into0) CHECK(op.dst == Location{0, 0, 0, 6});
  for (const Op& op : into1) CHECK(op.dst == Location{1, 0, 6, 7});
  CHECK(count_of(plan, OpKind::kCopy) == 14);
}

TEST_CASE("shuffle.default_shards_on_every_rank") {
  // shuffle without --gather: one shard per rank, ragged: 10 over 4 → 2, 2, 2, 4.
  const Plan plan = build_verified("uniform:4", "shuffle", opts(10));
  std::vector<std::int64_t> per_rank(4, 0);
  for (const Op& op : ops_of(plan, OpKind::kReduce)) {
    per_rank[static_cast<std::size_t>(op.dst.device)] = op.dst.count;
    CHECK(op.dst.device != op.src.device);
  }
  CHECK(per_rank == std::vector<std::int64_t>{2, 2, 2, 4});
}

TEST_CASE("shuffle.gather_devices_and_avg") {
  BuildOptions o = opts(90, ReduceOp::kAvg);
  o.gather = {kind_nodes("uniform:8", NodeKind::kCpu).front(), node_of("uniform:8", "gpu5")};
  const Plan plan = build_plan(topo("uniform:8"), "shuffle#3", o);
  const VerifyResult r = verify(plan);
  INFO(problems(r));
  CHECK(r.ok);
  // Shards 0 and 2 on the CPU (two scratch buffers), shard 1 in place on rank 5.
  REQUIRE(plan.devices.size() == 9);
  CHECK(plan.buffers[8] == std::vector<std::int64_t>{30, 30});
  const auto scales = ops_of(plan, OpKind::kScale);
  REQUIRE(scales.size() == 3);
  CHECK(scales[0].dst == Location{8, 0, 0, 30});
  CHECK(scales[1].dst == Location{5, 0, 30, 30});
  CHECK(scales[2].dst == Location{8, 1, 0, 30});
  for (const Op& s : scales) CHECK(s.divisor == 8);
}

TEST_CASE("shuffle.more_shards_than_elements") {
  // _ragged_split(3, 8): pieces of 0 and a last piece of 3; empty shards emit nothing.
  const Plan plan = build_verified("uniform:8", "shuffle", opts(3));
  for (const Op& op : plan.ops) CHECK(op.dst.count == 3);
  CHECK(count_of(plan, OpKind::kReduce) == 7);
}

TEST_CASE("shuffle.needs_a_cpu_for_pscpu") {
  Topology t;
  t.set_name("two-gpus");
  const int a = t.add_node({"gpu0", NodeKind::kGpu, 0, 0, -1, "", ""});
  const int b = t.add_node({"gpu1", NodeKind::kGpu, 0, 1, -1, "", ""});
  t.add_duplex_link(a, b, LinkKind::kNvLink, 25, 1);
  t.finalize();
  CHECK(throws_mentioning([&] { build_plan(t, "pscpu", opts(10)); }, {"pscpu", "two-gpus", "CPU"}));
  CHECK(verify(build_plan(t, "psgpu", opts(10))).ok);
  BuildOptions o = opts(10);
  o.gather = {42};
  CHECK(throws_mentioning([&] { build_plan(t, "shuffle", o); }, {"parameter gather", "42"}));
}
