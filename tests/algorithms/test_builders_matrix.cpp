// Every family on every shipped shape and awkward counts: the verifier proves each plan.
#include <doctest/doctest.h>

#include <set>

#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

namespace {

const std::vector<std::string> kSpecs = {
    "xring",      "xring#2",    "rechd",      "pscpu",        "pscpu#2",     "psgpu#2",     "shuffle",
    "hiercopy",   "hiercopy#3", "nccl",       "mring",        "mring#2",     "tree",        "2d",
    "nccl/xring", "nccl/rechd", "nccl/pscpu", "nccl/shuffle", "pscpu/xring", "pscpu/pscpu", "pscpu/rechd",
};

const std::vector<std::string> kTopologies = {"uniform:2", "uniform:8", "uniform:2x8", "uniform:4x8",
                                              "dgx1-p100", "dgx1-v100", "dgx2"};

// Shapes a spec cannot apply to, with the reason the builder must give.
const std::set<std::pair<std::string, std::string>> kRejected = {
    {"mring#2", "uniform:2"},  // two GPUs on one link hold a single ring
};

}  // namespace

TEST_CASE("builders.matrix") {
  int built = 0;
  for (const std::string& t : kTopologies) {
    const int ranks = static_cast<int>(topo(t).gpus().size());
    // 1, small primes, a round size, a prime above the rank count, fewer elements than ranks.
    const std::vector<std::int64_t> counts = {1, 7, 13, 1000, 1009, std::max(1, ranks - 1)};
    for (const std::string& spec : kSpecs) {
      for (std::int64_t count : counts) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          CAPTURE(t);
          CAPTURE(spec);
          CAPTURE(count);
          if (kRejected.count({spec, t})) {
            CHECK_THROWS_AS(build_plan(topo(t), spec, opts(count, op)), InvalidInput);
            continue;
          }
          const Plan plan = build_plan(topo(t), spec, opts(count, op));
          const VerifyResult r = verify(plan);
          INFO(problems(r));
          CHECK(r.ok);
          CHECK(plan.ranks() == ranks);
          CHECK(plan.count == count);
          ++built;
        }
      }
    }
  }
  CHECK(built == 2 * (static_cast<int>(kSpecs.size() * kTopologies.size()) - static_cast<int>(kRejected.size())) * 6);
}

TEST_CASE("builders.matrix_other_ops_and_pipelining") {
  for (const std::string& spec : kSpecs) {
    for (ReduceOp op : {ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      CAPTURE(spec);
      const Plan plan = build_verified("uniform:2x8", spec, opts(101, op));
      CHECK(plan.reduce_op == op);
      CHECK(count_of(plan, OpKind::kScale) == 0);
    }
    for (int segments : {2, 3}) {
      CAPTURE(spec);
      build_verified("dgx1-v100", spec, opts(1000, ReduceOp::kAvg, {}, segments));
    }
  }
}

TEST_CASE("builders.ranges_pick_by_count") {
  // tf_cnn_benchmarks style: small messages one way, large ones another.
  const Plan small = build_verified("dgx1-v100", "pscpu:1K:xring#2", opts(1024));
  CHECK(small.spec == "pscpu");
  const Plan large = build_verified("dgx1-v100", "pscpu:1K:xring#2", opts(1025));
  CHECK(large.spec == "xring#2");
}

TEST_CASE("builders.participants") {
  // A subset of GPUs in a chosen order: ranks follow the given order.
  const Topology& t = topo("dgx1-v100");
  BuildOptions o = opts(100);
  o.participants = {t.gpus()[5], t.gpus()[2], t.gpus()[7]};
  for (const std::string spec : {"xring", "rechd", "tree", "nccl", "psgpu", "shuffle", "pscpu", "hiercopy"}) {
    CAPTURE(spec);
    const Plan plan = build_plan(t, spec, o);
    CHECK(verify(plan).ok);
    REQUIRE(plan.ranks() == 3);
    CHECK(plan.devices[0].node == t.gpus()[5]);
  }
  // mring needs whole machines.
  CHECK(throws_mentioning([&] { build_plan(t, "mring", o); }, {"mring", "every GPU"}));
  o.participants = {t.gpus()[0], t.gpus()[0]};
  CHECK(throws_mentioning([&] { build_plan(t, "xring", o); }, {"participants[1]", "twice"}));
  o.participants = {9999};
  CHECK(throws_mentioning([&] { build_plan(t, "xring", o); }, {"participants[0]"}));
}

TEST_CASE("builders.large_cluster") {
  // 64 participants: the builders and the verifier stay fast and correct.
  for (const std::string spec : {"xring#2", "2d", "nccl/xring", "tree", "rechd"}) {
    CAPTURE(spec);
    build_verified("4xdgx2", spec, opts(1 << 20));
  }
}
