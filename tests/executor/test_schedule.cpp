#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "artune/core/error.hpp"
#include "artune/executor/schedule.hpp"
#include "hand_plans.hpp"

using namespace artune;
using namespace artune::test;

TEST_CASE("schedule.ring_sends_match_receives") {
  const Plan plan = ring_plan(4, 100, ReduceOp::kSum);
  const auto schedules = split_by_device(plan);
  REQUIRE(schedules.size() == 4);
  std::map<int, const Action*> sends, recvs;
  for (const auto& s : schedules) {
    int last = -1;
    for (const Action& a : s.actions) {
      CHECK(a.device == s.device);
      CHECK(a.op > last);  // plan order
      last = a.op;
      if (a.kind == ActionKind::kSend) sends[a.op] = &a;
      if (a.kind == ActionKind::kRecv) recvs[a.op] = &a;
    }
  }
  // Every op of a ring is a transfer: exactly one send and one receive each.
  CHECK(sends.size() == plan.ops.size());
  CHECK(recvs.size() == plan.ops.size());
  for (const Op& op : plan.ops) {
    const Action& s = *sends.at(op.id);
    const Action& r = *recvs.at(op.id);
    CHECK(s.device == op.src.device);
    CHECK(s.peer == op.dst.device);
    CHECK(s.local == op.src);
    CHECK(r.device == op.dst.device);
    CHECK(r.peer == op.src.device);
    CHECK(r.local == op.dst);
    CHECK(r.remote == op.src);
    CHECK(r.reduce == (op.kind == OpKind::kReduce));
  }
  // 2(R-1) sends and receives per device.
  for (const auto& s : schedules) CHECK(s.actions.size() == 2 * 2 * 3);
}

TEST_CASE("schedule.deps_keep_only_ops_on_the_device") {
  const Plan plan = ring_plan(4, 100, ReduceOp::kSum);
  const auto schedules = split_by_device(plan);
  for (const auto& s : schedules) {
    for (const Action& a : s.actions) {
      const Op& op = plan.ops[static_cast<std::size_t>(a.op)];
      for (int dep : op.deps) {
        const auto devs = op_devices(plan.ops[static_cast<std::size_t>(dep)]);
        const bool here = std::find(devs.begin(), devs.end(), s.device) != devs.end();
        CHECK(here == (std::find(a.deps.begin(), a.deps.end(), dep) != a.deps.end()));
      }
    }
  }
}

TEST_CASE("schedule.process_split_turns_helper_transfers_local") {
  const Plan plan = helper_plan(4, 10, ReduceOp::kAvg);
  // The helper (device 4) sits on machine 1 with ranks 2 and 3: it lives on process 2.
  const std::vector<int> machines = {0, 0, 1, 1, 1};
  const auto host = host_processes(plan, machines);
  CHECK(host == std::vector<int>{0, 1, 2, 3, 2});
  const ProcessSchedule p2 = split_for_process(plan, host, 2);
  CHECK(p2.devices == std::vector<int>{2, 4});
  std::multiset<ActionKind> kinds;
  for (const Action& a : p2.actions) kinds.insert(a.kind);
  // Receives from ranks 0, 1, 3 (copy from 0, reduces from 1 and 3), local reduce from rank 2,
  // the scale, sends back to 0, 1, 3 and a local copy back to rank 2.
  CHECK(kinds.count(ActionKind::kRecv) == 3);
  CHECK(kinds.count(ActionKind::kReduce) == 1);
  CHECK(kinds.count(ActionKind::kScale) == 1);
  CHECK(kinds.count(ActionKind::kSend) == 3);
  CHECK(kinds.count(ActionKind::kCopy) == 1);
  const ProcessSchedule p0 = split_for_process(plan, host, 0);
  CHECK(p0.actions.size() == 2);  // send its input, receive the result
  CHECK(p0.actions[0].kind == ActionKind::kSend);
  CHECK(p0.actions[0].peer == 4);
  CHECK(p0.actions[1].kind == ActionKind::kRecv);
  // Helper on a machine without participants: process 0.
  CHECK(host_processes(plan, {0, 0, 0, 0, 5})[4] == 0);
}

TEST_CASE("schedule.groups") {
  const Plan plan = hierarchical_plan(8, 4, 64, ReduceOp::kSum);
  const auto groups = distinct_groups(plan);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0] == std::vector<int>{0, 1, 2, 3});
  CHECK(groups[1] == std::vector<int>{4, 5, 6, 7});
  const auto index = group_index_of_ops(plan);
  int group_ops = 0;
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kGroup) {
      ++group_ops;
      CHECK(groups[static_cast<std::size_t>(index[static_cast<std::size_t>(op.id)])] == op.group);
    } else {
      CHECK(index[static_cast<std::size_t>(op.id)] == -1);
    }
  }
  CHECK(group_ops == 4);
  const auto schedules = split_by_device(plan);
  for (int d = 0; d < 8; ++d) {
    const auto& acts = schedules[static_cast<std::size_t>(d)].actions;
    CHECK(std::count_if(acts.begin(), acts.end(), [](const Action& a) { return a.kind == ActionKind::kGroup; }) == 2);
    for (const Action& a : acts) {
      if (a.kind == ActionKind::kGroup) CHECK(a.local == Location{d, 0, 0, 64});
    }
  }
}

TEST_CASE("schedule.check_plan_shape_rejects_unsafe_plans") {
  const Plan good = ring_plan(3, 30, ReduceOp::kSum);
  CHECK_NOTHROW(check_plan_shape(good));

  Plan p = good;
  p.ops[2].src.offset = 25;  // runs past the end
  CHECK_THROWS_WITH_AS(check_plan_shape(p), doctest::Contains("op 2: src region"), InvalidInput);

  p = good;
  p.ops[1].deps = {4};
  CHECK_THROWS_WITH_AS(check_plan_shape(p), doctest::Contains("not an earlier op"), InvalidInput);

  p = good;
  // Op 0 is gpu0 → gpu1; op 2 is gpu2 → gpu0 ... find a pair sharing no device.
  int a = -1, b = -1;
  for (const Op& x : p.ops) {
    for (const Op& y : p.ops) {
      if (y.id >= x.id) break;
      const auto dx = op_devices(x), dy = op_devices(y);
      bool share = false;
      for (int d : dx) share = share || std::find(dy.begin(), dy.end(), d) != dy.end();
      if (!share && a < 0) {
        a = x.id;
        b = y.id;
      }
    }
  }
  if (a >= 0) {
    p.ops[static_cast<std::size_t>(a)].deps.push_back(b);
    CHECK_THROWS_WITH_AS(check_plan_shape(p), doctest::Contains("shares no device"), InvalidInput);
  }

  p = good;
  p.ops[0].dst.count = 3;
  CHECK_THROWS_WITH_AS(check_plan_shape(p), doctest::Contains("elements"), InvalidInput);

  p = group_plan(4, 16, ReduceOp::kSum, Collective::kReduce);
  p.ops[0].root = 9;
  CHECK_THROWS_WITH_AS(check_plan_shape(p), doctest::Contains("root"), InvalidInput);

  p = good;
  p.ops[0].src = Location{0, 0, 0, 5};
  p.ops[0].dst = Location{0, 0, 3, 5};
  CHECK_THROWS_WITH_AS(check_plan_shape(p), doctest::Contains("overlap"), InvalidInput);

  p = good;
  p.buffers[1][0] = 29;
  CHECK_THROWS_AS(check_plan_shape(p), InvalidInput);
}
