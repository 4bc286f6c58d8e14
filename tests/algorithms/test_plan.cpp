#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "artune/algorithms/plan.hpp"
#include "artune/core/error.hpp"
#include "hand_plans.hpp"

using namespace artune;
using namespace artune::test;
using nlohmann::json;

namespace {

// The InvalidInput message plan_from_json throws for `doc`, or "" when it parses.
std::string load_error(const json& doc) {
  try {
    plan_from_json(doc, "plan.json");
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("plan.pieces") {
  SUBCASE("ragged as TF's _ragged_split") {
    // 10 over 3: chunk 3, the last takes the remainder.
    CHECK(ragged_piece(10, 3, 0) == std::pair<std::int64_t, std::int64_t>{0, 3});
    CHECK(ragged_piece(10, 3, 1) == std::pair<std::int64_t, std::int64_t>{3, 3});
    CHECK(ragged_piece(10, 3, 2) == std::pair<std::int64_t, std::int64_t>{6, 4});
    CHECK(ragged_piece(12, 4, 3) == std::pair<std::int64_t, std::int64_t>{9, 3});
    // Fewer elements than pieces: empty pieces, the last holds everything.
    CHECK(ragged_piece(2, 4, 0) == std::pair<std::int64_t, std::int64_t>{0, 0});
    CHECK(ragged_piece(2, 4, 3) == std::pair<std::int64_t, std::int64_t>{0, 2});
    CHECK(ragged_piece(0, 1, 0) == std::pair<std::int64_t, std::int64_t>{0, 0});
  }
  SUBCASE("even: larger pieces first") {
    CHECK(even_piece(10, 3, 0) == std::pair<std::int64_t, std::int64_t>{0, 4});
    CHECK(even_piece(10, 3, 1) == std::pair<std::int64_t, std::int64_t>{4, 3});
    CHECK(even_piece(10, 3, 2) == std::pair<std::int64_t, std::int64_t>{7, 3});
    CHECK(even_piece(2, 4, 1) == std::pair<std::int64_t, std::int64_t>{1, 1});
    CHECK(even_piece(2, 4, 2) == std::pair<std::int64_t, std::int64_t>{2, 0});
    CHECK(even_piece(2, 4, 3) == std::pair<std::int64_t, std::int64_t>{2, 0});
  }
  SUBCASE("both tile the range") {
    for (std::int64_t count : {0, 1, 5, 17, 1000, 1001}) {
      for (int pieces : {1, 2, 3, 7, 16}) {
        std::int64_t next_r = 0, next_e = 0;
        for (int i = 0; i < pieces; ++i) {
          const auto [ro, rc] = ragged_piece(count, pieces, i);
          const auto [eo, ec] = even_piece(count, pieces, i);
          CHECK(ro == next_r);
          CHECK(eo == next_e);
          CHECK(ec >= count / pieces);
          CHECK(ec <= count / pieces + 1);
          next_r = ro + rc;
          next_e = eo + ec;
        }
        CHECK(next_r == count);
        CHECK(next_e == count);
      }
    }
  }
  CHECK_THROWS_AS(even_piece(10, 0, 0), InvalidInput);
  CHECK_THROWS_AS(ragged_piece(10, 3, 3), InvalidInput);
}

TEST_CASE("plan.basics") {
  Plan p = empty_plan(2, 16, ReduceOp::kSum, 1);
  CHECK(p.ranks() == 2);
  CHECK(p.add_buffer(0, 8) == 1);  // buffer 0 is the user buffer
  CHECK(p.add_buffer(0, 4) == 2);
  CHECK(p.add_buffer(2, 5) == 0);  // a helper has no user buffer
  CHECK(p.buffers == std::vector<std::vector<std::int64_t>>{{16, 8, 4}, {16}, {5}});
  CHECK_THROWS_AS(p.add_buffer(3, 1), InvalidInput);
  CHECK_THROWS_AS(p.add_buffer(0, -1), InvalidInput);

  CHECK(p.add(copy_op(loc(0, 0, 0, 8), loc(1, 0, 0, 8), {})) == 0);
  CHECK(p.add(reduce_op(loc(1, 0, 0, 8), loc(1, 0, 8, 8), {0})) == 1);
  CHECK(p.add(group_op(Collective::kAllReduce, {1, 0, 1}, 0, 0, 16, {})) == 2);
  CHECK(p.add(scale_op(loc(0, 0, 0, 16), 2, {})) == 3);
  CHECK(op_devices(p.ops[0]) == std::vector<int>{0, 1});
  CHECK(op_devices(p.ops[1]) == std::vector<int>{1});
  CHECK(op_devices(p.ops[2]) == std::vector<int>{0, 1});
  CHECK(op_devices(p.ops[3]) == std::vector<int>{0});
  CHECK(is_transfer(p.ops[0]));
  CHECK_FALSE(is_transfer(p.ops[1]));
  CHECK(is_transfer(p.ops[2]));
  CHECK_FALSE(is_transfer(p.ops[3]));
  CHECK(to_string(OpKind::kReduce) == "reduce");
  CHECK(to_string(Collective::kReduceScatter) == "reduce_scatter");
  CHECK(to_string(Collective::kAllGather) == "all_gather");
}

TEST_CASE("plan.json_round_trip") {
  std::vector<Plan> plans = {ring_plan(4, 1001, ReduceOp::kAvg), shuffle_plan(3, 10, 2, true, ReduceOp::kMax),
                             empty_plan(1, 0)};
  Plan g = empty_plan(3, 12, ReduceOp::kProd);
  g.add(group_op(Collective::kReduce, {2, 0, 1}, 0, 0, 12, {}, 0));
  g.add(group_op(Collective::kBroadcast, {0, 1, 2}, 0, 0, 12, {0}, 0));
  g.add(group_op(Collective::kReduceScatter, {0, 1, 2}, 0, 2, 10, {1}));
  g.add(group_op(Collective::kAllGather, {0, 1, 2}, 0, 2, 10, {2}));
  plans.push_back(g);
  Plan staggered = ring_plan(3, 30);
  staggered.ops[1].phase = 0.25;
  plans.push_back(staggered);
  for (const Plan& p : plans) {
    const json doc = plan_to_json(p);
    CHECK(plan_from_json(doc, "x") == p);
    // Also through text.
    CHECK(plan_from_json(json::parse(doc.dump()), "x") == p);
    CHECK(plan_to_json(plan_from_json(doc, "x")) == doc);
  }
}

TEST_CASE("plan.json_layout") {
  Plan p = empty_plan(2, 4, ReduceOp::kAvg, 1);
  const int s = p.add_buffer(2, 4);
  p.add(copy_op(loc(0, 0, 0, 4), loc(2, s, 0, 4), {}));
  p.add(scale_op(loc(2, s, 0, 4), 2, {0}));
  p.add(group_op(Collective::kBroadcast, {0, 1}, 0, 0, 4, {}, 1));
  const json doc = plan_to_json(p);
  CHECK(doc["spec"] == "hand");
  CHECK(doc["count"] == 4);
  CHECK(doc["op"] == "avg");
  CHECK(doc["ranks"] == json::parse(R"([{"rank":0,"device":"gpu0","node":0},{"rank":1,"device":"gpu1","node":1}])"));
  CHECK(doc["helpers"] == json::parse(R"([{"index":2,"device":"cpu0","node":2}])"));
  CHECK(doc["buffers"] == json::parse("[[4],[4],[4]]"));
  CHECK(doc["ops"][0] == json::parse(R"({"id":0,"kind":"copy","src":{"device":0,"buffer":0,"offset":0,"count":4},
      "dst":{"device":2,"buffer":0,"offset":0,"count":4},"deps":[]})"));
  CHECK(doc["ops"][1] == json::parse(R"({"id":1,"kind":"scale","dst":{"device":2,"buffer":0,"offset":0,"count":4},
      "deps":[0],"divisor":2})"));
  CHECK(doc["ops"][2] == json::parse(R"({"id":2,"kind":"group","dst":{"device":-1,"buffer":0,"offset":0,"count":4},
      "deps":[],"collective":"broadcast","group":[0,1],"root":1})"));
}

TEST_CASE("plan.json_errors") {
  Plan p = ring_plan(3, 9);
  const json good = plan_to_json(p);
  CHECK(load_error(good).empty());
  {
    // `artune plan --json` adds a verdict at the top level; reading it back ignores it.
    json annotated = good;
    annotated["verified"] = true;
    CHECK(plan_from_json(annotated, "x") == p);
  }
  auto with = [&](const std::string& pointer, const json& value) {
    json d = good;
    d[json::json_pointer(pointer)] = value;
    return load_error(d);
  };
  CHECK(with("/ops/3/deps/0", 3) == "plan.json: ops[3].deps[0]: dependency 3 must name an earlier op (0..2)");
  CHECK(with("/ops/3/deps/0", -1) == "plan.json: ops[3].deps[0]: dependency -1 must name an earlier op (0..2)");
  CHECK(with("/ops/2/id", 7) == "plan.json: ops[2].id: must be 2 (ids are positions)");
  CHECK(with("/ops/1/src/device", 9) == "plan.json: ops[1].src.device: device 9 out of range (plan has 3 devices)");
  CHECK(with("/ops/1/dst/buffer", 4) == "plan.json: ops[1].dst.buffer: buffer 4 out of range (device 2 has 2)");
  CHECK(with("/ops/1/dst/count", -2) == "plan.json: ops[1].dst.count: must be ≥ 0");
  CHECK(with("/ops/1/dst/offset", 8) == "plan.json: ops[1].dst: [8, 11) exceeds device 2 buffer 1 of 3 elements");
  CHECK(with("/ops/1/kind", "move") == "plan.json: ops[1].kind: unknown op kind 'move' (copy, reduce, scale, group)");
  CHECK(with("/ops/1/dst/count", "3") == "plan.json: ops[1].dst.count: must be an integer, not a string");
  CHECK(with("/ops/1/phase", 1.0) == "plan.json: ops[1].phase: must be in [0, 1)");
  CHECK(with("/ops/1/phase", -0.5) == "plan.json: ops[1].phase: must be in [0, 1)");
  CHECK(with("/ops/1/phase", "x") == "plan.json: ops[1].phase: must be a number, not a string");
  CHECK(with("/ops/1/dst/count", 2.5) == "plan.json: ops[1].dst.count: must be an integer, not a number");
  CHECK(with("/ops/1/colour", 1) ==
        "plan.json: ops[1].colour: unknown field (expected id, kind, src, dst, deps, collective, group, root, divisor, "
        "algo, phase)");
  CHECK(with("/count", -1) == "plan.json: count: must be ≥ 0");
  CHECK(with("/op", "median").find("plan.json: op: ") == 0);
  CHECK(with("/ranks/1/rank", 2) == "plan.json: ranks[1].rank: must be 1 (ranks first, then helpers, in order)");
  CHECK(with("/buffers/1/0", 5) == "plan.json: buffers[1][0]: user buffer must hold count = 9 elements (has 5)");
  CHECK(with("/buffers/1", json::array()) == "plan.json: buffers[1]: a rank needs its user buffer 0");
  CHECK(with("/buffers", json::parse("[[9]]")) ==
        "plan.json: buffers: must list the buffers of each of the 3 devices (has 1)");
  CHECK(with("/ops", 3) == "plan.json: ops: must be an array, not a number");
  {
    json d = good;
    d["ops"][0].erase("src");
    CHECK(load_error(d) == "plan.json: ops[0]: missing field 'src'");
    d = good;
    d.erase("count");
    CHECK(load_error(d) == "plan.json: count: missing");
  }
  // Group ops.
  Plan g = empty_plan(2, 4);
  g.add(group_op(Collective::kBroadcast, {0, 1}, 0, 0, 4, {}, 0));
  const json gd = plan_to_json(g);
  auto gwith = [&](const std::string& pointer, const json& value) {
    json d = gd;
    d[json::json_pointer(pointer)] = value;
    return load_error(d);
  };
  CHECK(load_error(gd).empty());
  CHECK(gwith("/ops/0/root", 5) == "plan.json: ops[0].root: root 5 is not a member of the group");
  CHECK(gwith("/ops/0/group/1", 0) == "plan.json: ops[0].group[1]: device 0 twice");
  CHECK(gwith("/ops/0/group", json::array()) == "plan.json: ops[0].group: must list at least one device");
  CHECK(gwith("/ops/0/collective", "gather") ==
        "plan.json: ops[0].collective: unknown collective 'gather' (all_reduce, broadcast, reduce, reduce_scatter, "
        "all_gather)");
  CHECK(gwith("/ops/0/dst/count", 5) == "plan.json: ops[0].dst: [0, 5) exceeds device 0 buffer 0 of 4 elements");
  CHECK(load_error(json::array()) == "plan.json: must be an object, not an array");
}
