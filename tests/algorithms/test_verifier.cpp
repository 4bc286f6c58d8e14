#include <doctest/doctest.h>

#include <ctime>
#include <string>

#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "hand_plans.hpp"

using namespace artune;
using namespace artune::test;

namespace {

// True when some problem line contains every fragment.
bool mentions(const VerifyResult& r, std::initializer_list<std::string> fragments) {
  for (const std::string& line : r.problems) {
    bool all = true;
    for (const std::string& f : fragments) all = all && line.find(f) != std::string::npos;
    if (all) return true;
  }
  return false;
}

std::string dump(const VerifyResult& r) {
  std::string out;
  for (const auto& p : r.problems) out += p + "\n";
  return out;
}

}  // namespace

TEST_CASE("verifier.ring_positive") {
  for (int ranks : {1, 2, 3, 4, 5, 8}) {
    for (std::int64_t count : {0, 1, 3, 7, 64, 1000}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        CAPTURE(ranks);
        CAPTURE(count);
        const Plan p = ring_plan(ranks, count, op);
        const VerifyResult r = verify(p);
        INFO(dump(r));
        CHECK(r.ok);
        CHECK(r.problems.empty());
      }
    }
  }
}

TEST_CASE("verifier.shuffle_positive") {
  for (int ranks : {1, 2, 3, 4}) {
    for (int shards : {1, 2, 3}) {
      for (bool helpers : {true, false}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          CAPTURE(ranks);
          CAPTURE(shards);
          CAPTURE(helpers);
          const VerifyResult r = verify(shuffle_plan(ranks, 10, shards, helpers, op));
          INFO(dump(r));
          CHECK(r.ok);
        }
      }
    }
  }
  CHECK_NOTHROW(verify_or_throw(shuffle_plan(3, 10, 2, true)));
}

TEST_CASE("verifier.group_ops_positive") {
  SUBCASE("one all-reduce (nccl)") {
    Plan p = empty_plan(4, 100);
    p.add(group_op(Collective::kAllReduce, {0, 1, 2, 3}, 0, 0, 100, {}));
    CHECK(verify(p).ok);
  }
  SUBCASE("avg all-reduce then local scales") {
    Plan p = empty_plan(3, 10, ReduceOp::kAvg);
    const int g = p.add(group_op(Collective::kAllReduce, {2, 0, 1}, 0, 0, 10, {}));
    for (int r = 0; r < 3; ++r) p.add(scale_op(loc(r, 0, 0, 10), 3, {g}));
    CHECK(verify(p).ok);
  }
  SUBCASE("reduce-scatter then all-gather (2-D inner level)") {
    Plan p = empty_plan(3, 10);
    const int rs = p.add(group_op(Collective::kReduceScatter, {0, 1, 2}, 0, 0, 10, {}));
    p.add(group_op(Collective::kAllGather, {0, 1, 2}, 0, 0, 10, {rs}));
    const VerifyResult r = verify(p);
    INFO(dump(r));
    CHECK(r.ok);
  }
  SUBCASE("hybrid: reduce to roots, ring-like exchange of roots, broadcast back") {
    // Two machines of two ranks: {0,1} and {2,3}, roots 0 and 2.
    Plan p = empty_plan(4, 8);
    const int s0 = p.add_buffer(0, 8);
    const int s2 = p.add_buffer(2, 8);
    const int r0 = p.add(group_op(Collective::kReduce, {0, 1}, 0, 0, 8, {}, 0));
    const int r1 = p.add(group_op(Collective::kReduce, {2, 3}, 0, 0, 8, {}, 2));
    const int c0 = p.add(copy_op(loc(0, 0, 0, 8), loc(2, s2, 0, 8), {r0, r1}));
    const int c1 = p.add(copy_op(loc(2, 0, 0, 8), loc(0, s0, 0, 8), {r0, r1}));
    const int a0 = p.add(reduce_op(loc(0, s0, 0, 8), loc(0, 0, 0, 8), {c1, c0}));
    const int a1 = p.add(reduce_op(loc(2, s2, 0, 8), loc(2, 0, 0, 8), {c0, c1}));
    p.add(group_op(Collective::kBroadcast, {0, 1}, 0, 0, 8, {a0}, 0));
    p.add(group_op(Collective::kBroadcast, {2, 3}, 0, 0, 8, {a1}, 2));
    const VerifyResult r = verify(p);
    INFO(dump(r));
    CHECK(r.ok);
  }
}

TEST_CASE("verifier.missing_op") {
  const Plan good = ring_plan(4, 64);
  // Drop the first reduce into rank 1's buffer 0: its chunk never gets rank 0's input.
  const int victim = find_op(good, OpKind::kReduce, 1, 0);
  REQUIRE(victim >= 0);
  const VerifyResult r = verify(remove_op(good, victim));
  INFO(dump(r));
  CHECK_FALSE(r.ok);
  CHECK(mentions(r, {"result: rank", "misses the input of ranks"}));
  CHECK_THROWS_AS(verify_or_throw(remove_op(good, victim)), InvalidInput);
}

TEST_CASE("verifier.duplicated_reduce") {
  Plan p = shuffle_plan(3, 12, 1, true);
  // Reduce rank 1's shard into the accumulator a second time.
  const Op first = p.ops[1];
  REQUIRE(first.kind == OpKind::kReduce);
  Plan bad = empty_plan(3, 12, ReduceOp::kSum, 1);
  bad.buffers = p.buffers;
  for (const Op& op : p.ops) {
    Op c = op;
    for (int& d : c.deps) d = d >= 2 ? d + 1 : d;
    bad.add(c);
    if (op.id == 1) bad.add(reduce_op(first.src, first.dst, {1}));
  }
  // Keep the chain: the next reduce depends on the duplicate.
  bad.ops[3].deps = {2};
  const VerifyResult r = verify(bad);
  INFO(dump(r));
  CHECK_FALSE(r.ok);
  CHECK(mentions(r, {"op 2:", "adds the input of rank 1 twice", "device 3 buffer 0 [0, 12)"}));
  CHECK(mentions(r, {"holds the input of ranks 1 more than once"}));
}

TEST_CASE("verifier.missing_dependency_race") {
  SUBCASE("reduce no longer waits for the copy into scratch") {
    Plan p = ring_plan(3, 30);
    const int red = find_op(p, OpKind::kReduce, 1, 0);
    REQUIRE(red >= 0);
    const int copy = p.ops[static_cast<std::size_t>(red)].deps.at(0);
    p.ops[static_cast<std::size_t>(red)].deps.clear();
    const VerifyResult r = verify(p);
    INFO(dump(r));
    CHECK_FALSE(r.ok);
    CHECK(mentions(r, {fmt::format("op {}: races with op {}", red, copy), "device 1 buffer 1 [0, 10)"}));
  }
  SUBCASE("two unordered writers of one region") {
    Plan p = empty_plan(2, 4);
    p.add(copy_op(loc(0, 0, 0, 4), loc(1, 0, 0, 4), {}));
    p.add(copy_op(loc(0, 0, 0, 2), loc(1, 0, 0, 2), {}));
    const VerifyResult r = verify(p);
    CHECK(mentions(r, {"op 1: races with op 0 on device 1 buffer 0 [0, 2)"}));
  }
  SUBCASE("ordering through a chain of deps is enough") {
    Plan p = empty_plan(3, 4);
    const int s1 = p.add_buffer(1, 4);
    const int a = p.add(copy_op(loc(0, 0, 0, 4), loc(1, s1, 0, 4), {}));
    const int b = p.add(copy_op(loc(1, 0, 0, 4), loc(2, 0, 0, 4), {a}));  // unrelated data, orders a before c
    p.add(reduce_op(loc(1, s1, 0, 4), loc(2, 0, 0, 4), {b}));
    const VerifyResult r = verify(p);
    // No race; the result is wrong (rank 2 lost its own input), which the verifier says instead.
    CHECK_FALSE(mentions(r, {"races"}));
    CHECK(mentions(r, {"result: rank 2 buffer 0 [0, 4) misses the input of ranks 2"}));
  }
}

TEST_CASE("verifier.scratch_read_before_write") {
  const Plan good = ring_plan(3, 9);
  // Drop the very first copy: the reduce it fed now reads scratch nobody wrote.
  const VerifyResult r = verify(remove_op(good, 0));
  INFO(dump(r));
  CHECK_FALSE(r.ok);
  CHECK(mentions(r, {"reduces undefined data", "device 1 buffer 0 [0, 3)"}));

  Plan p = empty_plan(2, 4, ReduceOp::kSum, 1);
  const int h = p.add_buffer(2, 4);
  p.add(copy_op(loc(2, h, 0, 4), loc(0, 0, 0, 4), {}));
  CHECK(mentions(verify(p), {"op 0: copies undefined data from device 2 buffer 0 [0, 4)"}));
}

// The regions a reduce or a scale names are formatted only when it reports (Verifier::combine, execute): every
// message still names them.
TEST_CASE("verifier.reduce_and_scale_messages_name_their_regions") {
  SUBCASE("reduce into scratch nobody wrote") {
    Plan p = empty_plan(2, 4);
    const int h = p.add_buffer(1, 4);
    p.add(reduce_op(loc(0, 0, 0, 4), loc(1, h, 0, 4), {}));
    const VerifyResult r = verify(p);
    INFO(dump(r));
    CHECK(
        mentions(r, {"op 0: reduces into undefined data at device 1 buffer 1 [0, 4) (from device 0 buffer 0 [0, 4))"}));
  }
  SUBCASE("reduce of scaled data") {
    Plan p = empty_plan(2, 4, ReduceOp::kAvg);
    p.add(scale_op(loc(1, 0, 0, 4), 2, {}));
    p.add(reduce_op(loc(1, 0, 0, 4), loc(0, 0, 0, 4), {0}));
    const VerifyResult r = verify(p);
    INFO(dump(r));
    CHECK(mentions(r, {"op 0: scales a partial result at device 1 buffer 0 [0, 4)"}));
    CHECK(
        mentions(r, {"op 1: reduces already scaled data from device 1 buffer 0 [0, 4) into device 0 buffer 0 [0, 4)"}));
  }
  SUBCASE("scale of scratch nobody wrote") {
    Plan p = empty_plan(2, 4, ReduceOp::kAvg);
    const int h = p.add_buffer(0, 4);
    p.add(scale_op(loc(0, h, 0, 4), 2, {}));
    const VerifyResult r = verify(p);
    INFO(dump(r));
    CHECK(mentions(r, {"op 0: scales undefined data at device 0 buffer 1 [0, 4)"}));
  }
}

TEST_CASE("verifier.scale_rules") {
  SUBCASE("double scale") {
    Plan p = ring_plan(2, 8, ReduceOp::kAvg);
    const int s = find_op(p, OpKind::kScale, 0);
    REQUIRE(s >= 0);
    // Ordered after everything that touches rank 0, so the only defect is the second scale.
    std::vector<int> deps;
    for (const Op& op : p.ops) {
      if (op.src.device == 0 || op.dst.device == 0) deps.push_back(op.id);
    }
    p.add(scale_op(p.ops[static_cast<std::size_t>(s)].dst, 2, deps));
    const VerifyResult r = verify(p);
    INFO(dump(r));
    CHECK_FALSE(mentions(r, {"races"}));
    CHECK(mentions(r, {"scales device 0 buffer 0 [4, 8) a second time"}));
    CHECK(mentions(r, {"is scaled 2 times"}));
  }
  SUBCASE("avg never scaled") {
    Plan p = ring_plan(2, 8);
    p.reduce_op = ReduceOp::kAvg;
    CHECK(mentions(verify(p), {"result: rank 0 buffer 0 [0, 8) is not scaled"}));
  }
  SUBCASE("scale in a sum plan") {
    Plan p = empty_plan(1, 4);
    p.add(scale_op(loc(0, 0, 0, 4), 1, {}));
    CHECK(mentions(verify(p), {"op 0: scale in a 'sum' plan"}));
  }
  SUBCASE("scale of a partial sum and a wrong divisor") {
    Plan p = empty_plan(2, 4, ReduceOp::kAvg);
    p.add(scale_op(loc(0, 0, 0, 4), 3, {}));
    const VerifyResult r = verify(p);
    CHECK(mentions(r, {"op 0: scale divides by 3 but the plan has 2 ranks"}));
    CHECK(mentions(r, {"op 0: scales a partial result at device 0 buffer 0 [0, 4) (inputs {0})"}));
  }
}

TEST_CASE("verifier.structure") {
  SUBCASE("cross-device dependency") {
    Plan p = empty_plan(4, 4);
    p.add(copy_op(loc(0, 0, 0, 4), loc(1, 0, 0, 4), {}));
    p.add(copy_op(loc(2, 0, 0, 4), loc(3, 0, 0, 4), {0}));
    CHECK(mentions(verify(p), {"op 1: depends on op 0 which shares no device"}));
  }
  SUBCASE("dependency on a later op") {
    Plan p = empty_plan(2, 4);
    p.add(copy_op(loc(0, 0, 0, 4), loc(1, 0, 0, 4), {1}));
    p.add(copy_op(loc(1, 0, 0, 4), loc(0, 0, 0, 4), {}));
    CHECK(mentions(verify(p), {"op 0: depends on op 1 which does not come before it"}));
  }
  SUBCASE("out-of-range locations") {
    Plan p = empty_plan(2, 4);
    p.add(copy_op(loc(0, 0, 2, 4), loc(1, 0, 0, 4), {}));
    p.add(copy_op(loc(0, 3, 0, 4), loc(1, 0, 0, 4), {}));
    p.add(copy_op(loc(0, 0, 0, 4), loc(5, 0, 0, 4), {}));
    const VerifyResult r = verify(p);
    CHECK(mentions(r, {"op 0: src device 0 buffer 0 [2, 6) lies outside the buffer of 4 elements"}));
    CHECK(mentions(r, {"op 1: src buffer 3 out of range (device 0 has 1 buffers)"}));
    CHECK(mentions(r, {"op 2: dst device 5 out of range"}));
  }
  SUBCASE("src and dst overlap") {
    Plan p = empty_plan(1, 8);
    p.add(reduce_op(loc(0, 0, 0, 4), loc(0, 0, 2, 4), {}));
    CHECK(mentions(verify(p), {"op 0: src device 0 buffer 0 [0, 4) and dst [2, 6) overlap"}));
  }
  SUBCASE("bad group") {
    Plan p = empty_plan(2, 8);
    p.add(group_op(Collective::kBroadcast, {0, 1}, 0, 0, 8, {}, 3));
    p.add(group_op(Collective::kAllReduce, {0, 0}, 0, 0, 8, {}));
    const VerifyResult r = verify(p);
    CHECK(mentions(r, {"op 0: broadcast root 3 is not in the group"}));
    CHECK(mentions(r, {"op 1: group lists device 0 twice"}));
  }
  SUBCASE("ids and participants") {
    Plan p = empty_plan(2, 4);
    p.ops.push_back(copy_op(loc(0, 0, 0, 4), loc(1, 0, 0, 4), {}));  // id stays -1
    CHECK(mentions(verify(p), {"op at position 0 has id -1"}));
    Plan q = empty_plan(2, 4);
    q.devices[0].participant = false;
    CHECK_FALSE(verify(q).ok);
  }
  SUBCASE("misaligned reduce") {
    Plan p = empty_plan(2, 8);
    const int s = p.add_buffer(1, 4);
    const int c = p.add(copy_op(loc(0, 0, 0, 4), loc(1, s, 0, 4), {}));
    p.add(reduce_op(loc(1, s, 0, 4), loc(1, 0, 4, 4), {c}));
    CHECK(mentions(verify(p), {"op 1: reduces misaligned data", "device 1 buffer 0 [4, 8)"}));
  }
}

TEST_CASE("verifier.long_orderings") {
  // Op 0 writes rank 1's buffer; the last op overwrites it. Only a 600-op chain of
  // unrelated transfers orders them, longer than any quick search goes.
  for (bool broken : {false, true}) {
    Plan p = empty_plan(2, 4);
    const int s0 = p.add_buffer(0, 4);
    const int s1 = p.add_buffer(1, 4);
    int last = p.add(copy_op(loc(0, 0, 0, 4), loc(1, s1, 0, 4), {}));
    for (int i = 0; i < 600; ++i) {
      const bool forward = i % 2 == 0;
      std::vector<int> deps{last};
      if (broken && i == 300) deps.clear();
      last = p.add(
          copy_op(forward ? loc(1, s1, 0, 1) : loc(0, s0, 0, 1), forward ? loc(0, s0, 0, 1) : loc(1, s1, 0, 1), deps));
    }
    p.add(copy_op(loc(0, 0, 0, 4), loc(1, s1, 0, 4), {last}));
    const VerifyResult r = verify(p);
    INFO(dump(r));
    CHECK(mentions(r, {"op 601: races with op 0 on device 1 buffer 1 [1, 4)"}) == broken);
    CHECK(mentions(r, {"races"}) == broken);
  }
}

TEST_CASE("verifier.large_plans") {
  // A 64-participant ring (12096 ops) and the same pipelined 4 ways (48384 ops).
  const Plan ring = ring_plan(64, 1 << 20);
  CHECK(ring.ops.size() == 3 * 63 * 64);
  // CPU time: the wall clock on a shared build machine says little.
  const std::clock_t t0 = std::clock();
  const VerifyResult r = verify(ring);
  const std::clock_t t1 = std::clock();
  CHECK(r.ok);
  const Plan piped = pipeline(ring, 4);
  const std::clock_t t2 = std::clock();
  const VerifyResult rp = verify(piped);
  const std::clock_t t3 = std::clock();
  INFO(dump(rp));
  CHECK(rp.ok);
  auto ms = [](std::clock_t a, std::clock_t b) { return 1000.0 * static_cast<double>(b - a) / CLOCKS_PER_SEC; };
  MESSAGE(fmt::format("verify (CPU): 64-rank ring {} ops {:.1f} ms; pipelined x4 {} ops {:.1f} ms", ring.ops.size(),
                      ms(t0, t1), piped.ops.size(), ms(t2, t3)));
  // A broken large plan stays bounded in its report.
  Plan broken = ring;
  for (Op& op : broken.ops) op.deps.clear();
  const VerifyResult rb = verify(broken);
  CHECK_FALSE(rb.ok);
  CHECK(rb.problems.size() <= 65);
  CHECK(rb.problems.back().find("more problems") != std::string::npos);
}
