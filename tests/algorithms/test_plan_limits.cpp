// The documented limits of plan building (kMaxPlanOps, kMaxPlanRanks, kMaxSegments,
// kMaxMessageBytes) and the up-front checks of build_plan options: oversized or
// malformed requests end in InvalidInput naming the flag before any work is done.
#include <doctest/doctest.h>

#include <string>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"
#include "tests/test_support.hpp"
#include "artune/core/sizes.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;

namespace {

using artune_test::error_of;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

BuildOptions with_count(std::int64_t count) {
  BuildOptions o;
  o.count = count;
  return o;
}

}  // namespace

TEST_CASE("plan_limits.ring_ops_refused_up_front") {
  const Topology big = load_topology("128xdgx-h100");
  // 2·1023·1024·8 ops: computed in closed form, refused without emitting any.
  const std::string e = error_of([&] { build_plan(big, "xring#8", with_count(std::int64_t{1} << 30)); });
  CHECK(contains(e, "parameter spec xring#8"));
  CHECK(contains(e, "16760832 ops"));
  CHECK(contains(error_of([&] { build_plan(big, "mring", with_count(1 << 20)); }), "ops"));
  // Few elements leave most ring pieces empty: such a plan is small and builds.
  const Plan tiny = build_plan(big, "xring", with_count(3));
  CHECK(tiny.ops.size() == 2u * 1023u * 3u);
}

TEST_CASE("plan_limits.estimate_bounds_real_op_counts") {
  // Family::max_ops against the ops build_plan really emits: never below them, on one and several machines,
  // with and without avg's scales, in every count regime (fewer elements than pieces, a ragged split, many).
  for (const char* topo_name : {"dgx1-v100", "uniform:3x4", "4xdgx1-v100"}) {
    const Topology topo = load_topology(topo_name);
    for (const char* spec : {"xring", "xring#2", "mring", "2d"}) {
      for (const std::int64_t count : {std::int64_t{1}, std::int64_t{5}, std::int64_t{77}, std::int64_t{1} << 16}) {
        for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          INFO(std::string(topo_name) << " " << std::string(spec) << " count " << count << " " << to_string(op));
          BuildOptions o = with_count(count);
          o.reduce_op = op;
          o.verify = false;
          const std::uint64_t estimate = estimated_plan_ops(topo, parse_spec(spec), o);
          const std::size_t actual = build_plan(topo, spec, o).ops.size();
          CHECK(estimate >= actual);
          // Exact where every piece is non-empty (a multiple of the pieces) or only the first (1 element).
          if (op == ReduceOp::kSum && std::string(spec) == "xring" && (count == 1 || count == std::int64_t{1} << 16))
            CHECK(estimate == actual);
        }
      }
    }
  }
  // Families and levels with no closed-form bound say so (0): the emitter's limit applies to them.
  const Topology two = load_topology("2xdgx1-v100");
  CHECK(estimated_plan_ops(two, parse_spec("pscpu"), with_count(1024)) == 0);
  CHECK(estimated_plan_ops(two, parse_spec("nccl/xring"), with_count(1024)) == 0);
}

TEST_CASE("plan_limits.refused_before_building") {
  // The check a caller makes for every size first: the same refusal as build_plan's, with nothing built.
  const Topology big = load_topology("128xdgx-h100");
  const AllReduceSpec xring = parse_spec("xring");
  const std::string e = error_of([&] { require_plan_fits(big, xring, with_count(1 << 20)); });
  CHECK(e == error_of([&] { build_plan(big, xring, with_count(1 << 20)); }));
  CHECK(contains(e, "parameter spec xring: the plan over 1024 ranks would hold 2095104 ops"));
  CHECK(estimated_plan_ops(big, xring, with_count(1 << 20)) == 2095104u);
  require_plan_fits(big, xring, with_count(3));  // few elements: most pieces empty, within the limit
}

TEST_CASE("plan_limits.emitter_backstop") {
  // Shuffle shards have no closed-form estimate: the emitter stops at kMaxPlanOps.
  const Topology dgx1 = load_topology("dgx1-v100");
  const std::string e = error_of([&] { build_plan(dgx1, "pscpu#65536", with_count(1 << 20)); });
  CHECK(contains(e, "parameter spec pscpu#65536"));
  CHECK(contains(e, std::to_string(kMaxPlanOps)));
}

TEST_CASE("plan_limits.pipeline_counts_exactly") {
  const Topology dgx2 = load_topology("dgx2");
  BuildOptions o = with_count(1 << 20);
  o.segments = kMaxSegments;
  CHECK(contains(error_of([&] { build_plan(dgx2, "xring#16", o); }), "parameter segments 4096"));
  // Ops shorter than the segment count split into one piece per element only: 112 ops of ≤ 1 element stay 112.
  const Topology dgx1 = load_topology("dgx1-v100");
  const Plan p = build_plan(dgx1, "xring", with_count(8));
  CHECK(pipeline(p, kMaxSegments).ops.size() == p.ops.size());
  o.segments = kMaxSegments + 1;
  CHECK(contains(error_of([&] { build_plan(dgx1, "xring", o); }), "parameter segments: must be between 1 and 4096"));
}

TEST_CASE("plan_limits.ranks") {
  const Topology huge = load_topology("uniform:1025x8");  // 8200 GPUs
  const std::string e = error_of([&] { build_plan(huge, "nccl", with_count(1024)); });
  CHECK(contains(e, "8200 GPUs"));
  CHECK(contains(e, std::to_string(kMaxPlanRanks)));
}

TEST_CASE("plan_limits.options") {
  const Topology dgx1 = load_topology("dgx1-v100");
  const auto too_many = static_cast<std::int64_t>(kMaxMessageBytes) + 1;
  CHECK(contains(error_of([&] { build_plan(dgx1, "xring", with_count(too_many)); }), "parameter count"));
  CHECK(contains(error_of([&] { build_plan(dgx1, "xring", with_count(0)); }), "parameter count"));
  // --gpu-perm is checked whatever the family, even where the family does not use it.
  BuildOptions perm = with_count(64);
  perm.gpu_perm = {5, 5};
  CHECK(contains(error_of([&] { build_plan(dgx1, "nccl", perm); }), "parameter gpu_perm"));
  CHECK(contains(error_of([&] { build_plan(dgx1, "pscpu", perm); }), "parameter gpu_perm"));
  // Gather shards must be devices that hold data.
  BuildOptions gather = with_count(64);
  gather.gather = {dgx1.find_node("pcisw0")};
  CHECK(contains(error_of([&] { build_plan(dgx1, "shuffle", gather); }), "parameter gather: pcisw0 is a pcie_switch"));
  gather.gather = {dgx1.find_node("cpu1")};
  CHECK(build_plan(dgx1, "shuffle", gather).devices.size() == 9);
}
