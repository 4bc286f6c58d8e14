#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "hand_plans.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;
using namespace artune::test;

namespace {

std::string dump(const VerifyResult& r) {
  std::string out;
  for (const auto& p : r.problems) out += p + "\n";
  return out;
}

Op copy_with_id(int id, Location src, Location dst, std::vector<int> deps) {
  Op op = copy_op(src, dst, std::move(deps));
  op.id = id;
  return op;
}

}  // namespace

TEST_CASE("pipeline.identity_and_limits") {
  const Plan p = ring_plan(3, 30);
  CHECK(pipeline(p, 1) == p);
  CHECK_THROWS_AS(pipeline(p, 0), InvalidInput);
  CHECK_THROWS_AS(pipeline(p, 5000), InvalidInput);
  CHECK_THROWS_WITH(pipeline(p, -1), "pipeline: segments must be between 1 and 4096 (got -1)");
}

TEST_CASE("pipeline.chain_exact") {
  // a → b → c; two copies forwarding 8 elements, split in two.
  Plan p = empty_plan(3, 8);
  const int sb = p.add_buffer(1, 8);
  p.add(copy_op(loc(0, 0, 0, 8), loc(1, sb, 0, 8), {}));
  p.add(copy_op(loc(1, sb, 0, 8), loc(2, 0, 0, 8), {0}));
  const Plan q = pipeline(p, 2);
  REQUIRE(q.ops.size() == 4);
  CHECK(q.ops[0] == copy_with_id(0, loc(0, 0, 0, 4), loc(1, sb, 0, 4), {}));
  CHECK(q.ops[1] == copy_with_id(1, loc(0, 0, 4, 4), loc(1, sb, 4, 4), {0}));
  // Segment 0 of the second copy waits only for segment 0 of the first: the transfers overlap.
  CHECK(q.ops[2] == copy_with_id(2, loc(1, sb, 0, 4), loc(2, 0, 0, 4), {0}));
  CHECK(q.ops[3] == copy_with_id(3, loc(1, sb, 4, 4), loc(2, 0, 4, 4), {1, 2}));
  CHECK(q.spec == p.spec);
  CHECK(q.buffers == p.buffers);
  CHECK(q.devices == p.devices);
}

TEST_CASE("pipeline.staggered_phases") {
  // 12 elements in 4 segments of 3 at phase 1/3: boundaries at round((k - 1/3) * 3) = 2, 5, 8, 11.
  CHECK(staggered_pieces(12, 4, 1.0 / 3) == std::vector<std::int64_t>{0, 2, 5, 8, 11});
  // Phase 1/2 of one segment of 8: a first piece of 4 and a last of 4.
  CHECK(staggered_pieces(8, 1, 0.5) == std::vector<std::int64_t>{0, 4});
  // Fewer elements than pieces: empty pieces dropped.
  CHECK(staggered_pieces(2, 4, 0.5) == std::vector<std::int64_t>{0, 1});
  CHECK(staggered_pieces(0, 4, 0.5) == std::vector<std::int64_t>{0});
  CHECK_THROWS_AS(staggered_pieces(8, 2, 0.0), InvalidInput);
  CHECK_THROWS_AS(staggered_pieces(8, 2, 1.0), InvalidInput);
  CHECK_THROWS_AS(staggered_pieces(8, 0, 0.5), InvalidInput);

  // a -> b -> c forwarding 12 elements at phase 1/3 in 4 segments: both copies cut alike (5 pieces each), and
  // piece j of the second waits for piece j of the first and its own piece j - 1.
  Plan p = empty_plan(3, 12);
  const int sb = p.add_buffer(1, 12);
  Op first = copy_op(loc(0, 0, 0, 12), loc(1, sb, 0, 12), {});
  first.phase = 1.0 / 3;
  p.add(first);
  Op second = copy_op(loc(1, sb, 0, 12), loc(2, 0, 0, 12), {0});
  second.phase = 1.0 / 3;
  p.add(second);
  const Plan q = pipeline(p, 4);
  REQUIRE(q.ops.size() == 10);
  const std::vector<std::pair<std::int64_t, std::int64_t>> cuts = {{0, 2}, {2, 3}, {5, 3}, {8, 3}, {11, 1}};
  for (int j = 0; j < 5; ++j) {
    const Op& a = q.ops[static_cast<std::size_t>(j)];
    const Op& b = q.ops[static_cast<std::size_t>(5 + j)];
    CHECK(a.src.offset == cuts[static_cast<std::size_t>(j)].first);
    CHECK(a.src.count == cuts[static_cast<std::size_t>(j)].second);
    CHECK(b.dst.offset == cuts[static_cast<std::size_t>(j)].first);
    CHECK(a.phase == doctest::Approx(1.0 / 3));
    CHECK(b.deps == (j == 0 ? std::vector<int>{0} : std::vector<int>{j, 5 + j - 1}));
  }
  // The op limit counts the extra piece a phase adds: 128 ops of 4096 segments fit artune's 524288, of 4097 not.
  Plan wide = empty_plan(2, 1 << 20);
  for (int i = 0; i < 128; ++i) {
    Op op = copy_op(loc(0, 0, 0, 1 << 20), loc(1, 0, 0, 1 << 20), i == 0 ? std::vector<int>{} : std::vector<int>{i - 1});
    op.phase = 0.5;
    wide.add(op);
  }
  CHECK_THROWS_AS(pipeline(wide, 4096), InvalidInput);
  for (Op& op : wide.ops) op.phase = 0;
  CHECK(pipeline(wide, 4096).ops.size() == 128u * 4096u);
}

TEST_CASE("pipeline.overlap_rules") {
  Plan p = empty_plan(3, 10);
  const int sb = p.add_buffer(1, 10);
  p.add(copy_op(loc(0, 0, 0, 10), loc(1, sb, 0, 10), {}));  // segments [0,4) [4,7) [7,10)
  p.add(copy_op(loc(1, sb, 5, 5), loc(2, 0, 5, 5), {0}));   // segments [5,7) [7,9) [9,10)
  p.add(copy_op(loc(1, 0, 0, 3), loc(2, 0, 0, 3), {0}));    // no overlap with op 0: pure ordering
  const Plan q = pipeline(p, 3);
  REQUIRE(q.ops.size() == 9);
  CHECK(q.ops[3].src == loc(1, sb, 5, 2));
  CHECK(q.ops[3].deps == std::vector<int>{1});  // [5,7) lies in segment 1 of op 0
  CHECK(q.ops[4].src == loc(1, sb, 7, 2));
  CHECK(q.ops[4].deps == std::vector<int>{2, 3});  // [7,9) in segment 2, plus its own predecessor
  CHECK(q.ops[5].deps == std::vector<int>{2, 4});
  // Pure ordering: every segment waits for the last segment of op 0 (which follows the others).
  CHECK(q.ops[6].deps == std::vector<int>{2});
  CHECK(q.ops[7].deps == std::vector<int>{2, 6});
  CHECK(q.ops[8].deps == std::vector<int>{2, 7});
}

TEST_CASE("pipeline.kinds") {
  Plan p = empty_plan(3, 10, ReduceOp::kAvg);
  const int ar = p.add(group_op(Collective::kAllReduce, {0, 1, 2}, 0, 0, 10, {}));
  const int rs = p.add(group_op(Collective::kReduceScatter, {0, 1, 2}, 0, 0, 10, {ar}));
  const int ag = p.add(group_op(Collective::kAllGather, {0, 1, 2}, 0, 0, 10, {rs}));
  p.add(scale_op(loc(0, 0, 0, 10), 3, {ag}));
  p.add(copy_op(loc(0, 0, 0, 0), loc(1, 0, 0, 0), {}));  // zero elements stays one op
  p.add(copy_op(loc(0, 0, 0, 2), loc(1, 0, 0, 2), {}));  // fewer elements than segments
  const Plan q = pipeline(p, 4);
  std::vector<std::string> kinds;
  for (const Op& op : q.ops) {
    kinds.push_back(op.kind == OpKind::kGroup ? std::string(to_string(op.collective))
                                              : std::string(to_string(op.kind)));
  }
  CHECK(kinds == std::vector<std::string>{"all_reduce", "all_reduce", "all_reduce", "all_reduce", "reduce_scatter",
                                          "all_gather", "scale", "scale", "scale", "scale", "copy", "copy", "copy"});
  CHECK(q.ops[1].dst == Location{-1, 0, 3, 3});
  CHECK(q.ops[1].group == std::vector<int>{0, 1, 2});
  CHECK(q.ops[4].dst == Location{-1, 0, 0, 10});
  CHECK(q.ops[4].deps == std::vector<int>{3});  // the whole reduce-scatter waits for all of the all-reduce
  CHECK(q.ops[6].deps == std::vector<int>{5});
  CHECK(q.ops[6].divisor == 3);
  CHECK(q.ops[10].src.count == 0);
  CHECK(q.ops[11].src == loc(0, 0, 0, 1));
  CHECK(q.ops[12].src == loc(0, 0, 1, 1));
}

TEST_CASE("pipeline.verified_plans") {
  for (int segments : {2, 3, 4, 8}) {
    for (int ranks : {2, 3, 4, 5}) {
      for (std::int64_t count : {1, 5, 17, 100}) {
        CAPTURE(segments);
        CAPTURE(ranks);
        CAPTURE(count);
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          const Plan ring = pipeline(ring_plan(ranks, count, op), segments);
          VerifyResult r = verify(ring);
          INFO(dump(r));
          CHECK(r.ok);
          for (bool helpers : {true, false}) {
            const VerifyResult s = verify(pipeline(shuffle_plan(ranks, count, 2, helpers, op), segments));
            INFO(dump(s));
            CHECK(s.ok);
          }
        }
      }
    }
  }
}

TEST_CASE("pipeline.more_segments_more_ops") {
  const Plan p = ring_plan(4, 1000);
  const Plan q = pipeline(p, 4);
  CHECK(q.ops.size() == 4 * p.ops.size());
  // Pipelining twice is still a valid plan.
  const Plan r = pipeline(q, 2);
  CHECK(r.ops.size() == 8 * p.ops.size());
  CHECK(verify(r).ok);
  // And it survives the JSON round trip.
  CHECK(plan_from_json(plan_to_json(q), "q") == q);
}

TEST_CASE("pipeline.builder_plans") {
  // Every family's plans stay correct when pipelined, and pipelining moves the same data.
  int pipelined = 0;
  for (const char* name : {"uniform:4", "uniform:2x4", "dgx1-v100"}) {
    const Topology topo = load_topology(name);
    for (const auto& [spec, description] : spec_algorithms()) {
      for (std::int64_t count : {7, 1000}) {
        BuildOptions o;
        o.count = count;
        o.reduce_op = ReduceOp::kAvg;
        Plan plan;
        try {
          plan = build_plan(topo, spec, o);
        } catch (const InvalidInput&) {
          continue;  // the algorithm does not apply to this topology (the builders' tests cover why)
        }
        for (int segments : {2, 5}) {
          CAPTURE(name);
          CAPTURE(spec);
          CAPTURE(count);
          CAPTURE(segments);
          const Plan q = pipeline(plan, segments);
          const VerifyResult r = verify(q);
          INFO(dump(r));
          CHECK(r.ok);
          for (OpKind kind : {OpKind::kCopy, OpKind::kReduce, OpKind::kScale, OpKind::kGroup}) {
            std::int64_t before = 0, after = 0;
            for (const Op& op : plan.ops) before += op.kind == kind ? op.dst.count : 0;
            for (const Op& op : q.ops) after += op.kind == kind ? op.dst.count : 0;
            CHECK(before == after);
          }
          ++pipelined;
        }
      }
    }
  }
  MESSAGE("pipelined and verified ", pipelined, " builder plans");
  CHECK(pipelined > 100);
}
