// Hierarchical copy: TF's DGX-1 algorithm over NVLink cliques.
#include <doctest/doctest.h>

#include <set>

#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

namespace {

struct Move {
  OpKind kind;
  int src;
  int dst;
  friend bool operator==(const Move&, const Move&) = default;
};

std::vector<Move> moves(const Plan& plan, std::int64_t offset) {
  std::vector<Move> out;
  for (const Op& op : plan.ops) {
    if (op.dst.offset == offset && op.kind != OpKind::kScale) out.push_back({op.kind, op.src.device, op.dst.device});
  }
  return out;
}

}  // namespace

TEST_CASE("hiercopy.tf_dgx1_pack_structure") {
  // hiercopy#8 on DGX-1 (TF: num_packs = len(devices)); 8 packs of 100 elements.
  const Plan plan = build_verified("dgx1-v100", "hiercopy#8", opts(800));
  const auto R = OpKind::kReduce;
  const auto C = OpKind::kCopy;
  // Pack 0: group 0 main = 0, group 1 main = (0 + 4) % 8 = 4: reduce each quad into its main,
  // group 1 main into group 0 main, copy back to 4, broadcast inside each quad.
  CHECK(moves(plan, 0) == std::vector<Move>{{R, 1, 0},
                                            {R, 2, 0},
                                            {R, 3, 0},
                                            {R, 5, 4},
                                            {R, 6, 4},
                                            {R, 7, 4},
                                            {R, 4, 0},
                                            {C, 0, 4},
                                            {C, 0, 1},
                                            {C, 0, 2},
                                            {C, 0, 3},
                                            {C, 4, 5},
                                            {C, 4, 6},
                                            {C, 4, 7}});
  // Pack 5: group 0 main = 5 (quad 4-7), group 1 main = (5 + 4) % 8 = 1.
  CHECK(moves(plan, 500) == std::vector<Move>{{R, 4, 5},
                                              {R, 6, 5},
                                              {R, 7, 5},
                                              {R, 0, 1},
                                              {R, 2, 1},
                                              {R, 3, 1},
                                              {R, 1, 5},
                                              {C, 5, 1},
                                              {C, 5, 4},
                                              {C, 5, 6},
                                              {C, 5, 7},
                                              {C, 1, 0},
                                              {C, 1, 2},
                                              {C, 1, 3}});
  // Every reduce and copy crosses NVLink on DGX-1 (quads plus i ↔ i+4).
  const Topology& t = topo("dgx1-v100");
  for (const Op& op : plan.ops) {
    const int a = plan.devices[static_cast<std::size_t>(op.src.device)].node;
    const int b = plan.devices[static_cast<std::size_t>(op.dst.device)].node;
    CHECK(t.nvlink_lanes(a, b) > 0);
  }
}

TEST_CASE("hiercopy.default_packs_and_sizes") {
  // Default packs = number of participants; 13 elements over 8 packs: even pieces 2,2,2,2,2,1,1,1.
  const Plan plan = build_verified("dgx1-p100", "hiercopy", opts(13));
  std::set<std::pair<std::int64_t, std::int64_t>> regions;
  for (const Op& op : plan.ops) regions.insert({op.dst.offset, op.dst.count});
  CHECK(regions.size() == 8);
  // Fewer elements than packs: empty packs emit nothing.
  const Plan tiny = build_verified("dgx1-p100", "hiercopy", opts(3));
  CHECK(tiny.ops.size() == 3 * 14);
}

TEST_CASE("hiercopy.avg_scales_on_group0_main") {
  const Plan plan = build_verified("dgx1-v100", "hiercopy#2", opts(64, ReduceOp::kAvg));
  const auto scales = ops_of(plan, OpKind::kScale);
  REQUIRE(scales.size() == 2);
  CHECK(scales[0].dst == Location{0, 0, 0, 32});
  CHECK(scales[1].dst == Location{1, 0, 32, 32});
}

TEST_CASE("hiercopy.generalised_groups") {
  // DGX-2 and uniform:G are one NVLink clique: reduce into the main, broadcast from it.
  const Plan plan = build_verified("dgx2", "hiercopy#1", opts(100));
  CHECK(count_of(plan, OpKind::kReduce) == 15);
  CHECK(count_of(plan, OpKind::kCopy) == 15);
  // Across machines the groups are each machine's cliques.
  build_verified("4xdgx1-v100", "hiercopy", opts(1000));
  build_verified("uniform:2x8", "hiercopy#3", opts(1000, ReduceOp::kAvg));
}

TEST_CASE("hiercopy.needs_nvlink_groups") {
  CHECK(throws_mentioning([] { build_plan(topo("pcie-8gpu"), "hiercopy", opts(100)); },
                          {"hiercopy", "pcie-8gpu", "no NVLink groups"}));
}
