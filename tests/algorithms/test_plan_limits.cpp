// The documented limits of plan building (kMaxPlanOps, kMaxPlanRanks, kMaxSegments,
// kMaxMessageBytes) and the up-front checks of build_plan options: oversized or
// malformed requests end in InvalidInput naming the flag before any work is done.
#include <doctest/doctest.h>

#include <string>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/core/error.hpp"
#include "tests/test_support.hpp"
#include "artune/core/sizes.hpp"
#include "artune/topology/io.hpp"

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
