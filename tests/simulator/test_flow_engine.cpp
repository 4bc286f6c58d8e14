// Max-min fair sharing in the simulator's private flow engine.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "artune/simulator/flow_engine.hpp"

using artune::detail::FlowEngine;

namespace {

// Runs the engine until every flow has finished; returns each tag's end time.
std::vector<double> drain(FlowEngine& e, int tags) {
  std::vector<double> end(tags, -1);
  for (;;) {
    const auto [t, f] = e.next_completion();
    if (f < 0) break;
    const auto done = e.finish(f, t);
    end[done.tag] = t;
    e.settle(t);
  }
  return end;
}

}  // namespace

TEST_CASE("flow_engine.single_flow") {
  FlowEngine e({10.0});
  const int r[] = {0};
  const int f = e.start(0.0, 100.0, r, 0, 0);
  e.settle(0.0);
  CHECK(e.rate(f) == 10.0);
  const auto end = drain(e, 1);
  CHECK(end[0] == 10.0);
  CHECK(e.stats(0).work == 100.0);
  CHECK(e.stats(0).busy_us == 10.0);
  CHECK(e.stats(0).saturated_us == 10.0);
}

TEST_CASE("flow_engine.two_flows_share_equally_then_release") {
  FlowEngine e({10.0});
  const int r[] = {0};
  const int a = e.start(0.0, 10.0, r, 0, 0);
  const int b = e.start(0.0, 30.0, r, 0, 1);
  e.settle(0.0);
  CHECK(e.rate(a) == 5.0);
  CHECK(e.rate(b) == 5.0);
  const auto end = drain(e, 2);
  CHECK(end[0] == 2.0);                   // 10 units at 5/µs
  CHECK(end[1] == doctest::Approx(4.0));  // 10 moved by t=2, then 20 at 10/µs
  CHECK(e.stats(0).busy_us == doctest::Approx(4.0));
  CHECK(e.stats(0).first_busy_us == 0.0);
  CHECK(e.stats(0).last_busy_us == doctest::Approx(4.0));
}

TEST_CASE("flow_engine.first_and_last_busy_bound_the_busy_time") {
  // One flow over [1, 3], none over [3, 5], one over [5, 6]: busy 3 µs within [1, 6], idle 2 µs between.
  FlowEngine e({10.0, 10.0});
  const int r0[] = {0};
  CHECK(e.stats(0).first_busy_us == -1.0);  // nothing yet
  const int a = e.start(1.0, 20.0, r0, 0, 0);
  e.settle(1.0);
  CHECK(e.next_completion().first == doctest::Approx(3.0));
  e.finish(a, 3.0);
  e.settle(3.0);
  const int b = e.start(5.0, 10.0, r0, 0, 1);
  e.settle(5.0);
  CHECK(e.next_completion().first == doctest::Approx(6.0));
  e.finish(b, 6.0);
  e.settle(6.0);
  CHECK(e.stats(0).first_busy_us == 1.0);
  CHECK(e.stats(0).last_busy_us == doctest::Approx(6.0));
  CHECK(e.stats(0).busy_us == doctest::Approx(3.0));
  CHECK(e.stats(1).first_busy_us == -1.0);  // never used
  CHECK(e.stats(1).busy_us == 0.0);
}

TEST_CASE("flow_engine.max_min_progressive_filling") {
  // A crosses both resources, B only r0 (cap 10), C only r1 (cap 4):
  // r1 is the tightest (2 each for A and C); B then takes what A leaves on r0.
  FlowEngine e({10.0, 4.0});
  const int ab[] = {0, 1};
  const int b0[] = {0};
  const int c1[] = {1};
  const int A = e.start(0.0, 1000.0, ab, 0, 0);
  const int B = e.start(0.0, 1000.0, b0, 0, 1);
  const int C = e.start(0.0, 1000.0, c1, 0, 2);
  e.settle(0.0);
  CHECK(e.rate(A) == 2.0);
  CHECK(e.rate(C) == 2.0);
  CHECK(e.rate(B) == 8.0);
}

TEST_CASE("flow_engine.rate_cap") {
  FlowEngine e({10.0});
  const int r[] = {0};
  const int a = e.start(0.0, 30.0, r, 3.0, 0);
  const int b = e.start(0.0, 70.0, r, 0, 1);
  e.settle(0.0);
  CHECK(e.rate(a) == 3.0);
  CHECK(e.rate(b) == 7.0);
  const auto end = drain(e, 2);
  CHECK(end[0] == doctest::Approx(10.0));
  CHECK(end[1] == doctest::Approx(10.0));
  // A cap-limited flow does not saturate its link on its own.
  FlowEngine lone({10.0});
  lone.start(0.0, 30.0, r, 3.0, 0);
  lone.settle(0.0);
  drain(lone, 1);
  CHECK(lone.stats(0).busy_us == doctest::Approx(10.0));
  CHECK(lone.stats(0).saturated_us == 0.0);
}

TEST_CASE("flow_engine.independent_components_untouched") {
  // A flow on r1 keeps its rate when flows come and go on r0.
  FlowEngine e({10.0, 10.0});
  const int r0[] = {0};
  const int r1[] = {1};
  const int x = e.start(0.0, 100.0, r1, 0, 0);
  e.settle(0.0);
  e.start(1.0, 5.0, r0, 0, 1);
  e.settle(1.0);
  CHECK(e.rate(x) == 10.0);
  const auto end = drain(e, 2);
  CHECK(end[0] == 10.0);
  CHECK(end[1] == 1.5);
}

TEST_CASE("flow_engine.limiter_reported") {
  FlowEngine e({10.0, 4.0});
  const int ab[] = {0, 1};
  e.start(0.0, 40.0, ab, 0, 0);
  e.settle(0.0);
  const auto [t, f] = e.next_completion();
  CHECK(t == 10.0);
  CHECK(e.finish(f, t).limiter == 1);
}

TEST_CASE("flow_engine.class_of_flows_started_apart") {
  // Three flows over the same two resources (one class) start at 0, 2 and 4, with a flow over r1 alone from 0 to
  // its end. r0 (capacity 6) limits the class while it holds three flows and r1 (capacity 8) shares evenly before:
  //   0-2: A and D share r1 (4 each; r0 has 6 for A alone): A 8 served;
  //   2-4: A, B, D on r1 (8/3 each; r0: 6/2 = 3 for A and B, not binding): A 8 + 16/3, B 16/3;
  //   from 4: A, B, C on r0 (2 each, the binding share), D takes r1's rest (8 - 6 = 2).
  // A (work 20) has 20 - 40/3 = 20/3 left at 4: ends at 4 + 10/3. Its limiter: r1 for 40/3 units, r0 for 20/3.
  FlowEngine e({6.0, 8.0});
  const int both[] = {0, 1};
  const int r1[] = {1};
  const int a = e.start(0.0, 20.0, both, 0, 0);
  e.start(0.0, 1000.0, r1, 0, 1);
  e.settle(0.0);
  CHECK(e.rate(a) == doctest::Approx(4.0));
  const auto [t1, none] = e.next_completion();
  CHECK(t1 > 2.0);
  const int b = e.start(2.0, 100.0, both, 0, 2);
  e.settle(2.0);
  CHECK(e.rate(a) == doctest::Approx(8.0 / 3));
  CHECK(e.rate(b) == doctest::Approx(8.0 / 3));
  e.start(4.0, 100.0, both, 0, 3);
  e.settle(4.0);
  CHECK(e.rate(a) == doctest::Approx(2.0));
  const auto [t, f] = e.next_completion();
  CHECK(f == a);
  CHECK(t == doctest::Approx(4.0 + 10.0 / 3));
  const auto end = e.finish(f, t);
  CHECK(end.tag == 0);
  CHECK(end.limiter == 1);  // 40/3 units under r1, 20/3 under r0
  e.settle(t);
  CHECK(e.rate(b) == doctest::Approx(8.0 / 3));  // r1 shared by B, C, D binds before r0 (6 / 2)
  // The class empties and forms again: a new flow over the same resources is served from its own start.
  // B has 100 - 16/3 - 20/3 = 88 left at 22/3, C 100 - 20/3: both at 8/3 until B ends at 22/3 + 33; C then runs at
  // 4 (r1 shared with D) and ends 4/3 later.
  const auto rest = drain(e, 4);
  CHECK(rest[2] == doctest::Approx(22.0 / 3 + 33));
  CHECK(rest[3] == doctest::Approx(22.0 / 3 + 33 + 4.0 / 3));
  FlowEngine g({5.0});
  const int r0[] = {0};
  g.start(0.0, 10.0, r0, 0, 0);
  g.settle(0.0);
  const auto [t2, f2] = g.next_completion();
  CHECK(t2 == 2.0);
  g.finish(f2, t2);
  g.settle(t2);
  g.start(7.0, 15.0, r0, 0, 1);
  g.settle(7.0);
  CHECK(g.next_completion().first == 10.0);
  CHECK(g.stats(0).busy_us == 2.0);
}

TEST_CASE("flow_engine.rejects_bad_input") {
  CHECK_THROWS(FlowEngine({0.0}));
  FlowEngine e({1.0});
  const int r[] = {0};
  CHECK_THROWS(e.start(0.0, 0.0, r, 0, 0));
  CHECK_THROWS(e.start(0.0, 1.0, {}, 0, 0));
}

TEST_CASE("flow_engine.weighted_shares") {
  // r0 (capacity 12) is used 1 unit per unit of A's rate and 3 per unit of B's: the fair level s
  // solves s + 3s = 12, so both run at 3 and r0 is full.
  FlowEngine e({12.0, 100.0}, true);
  const int r0[] = {0};
  const int r01[] = {0, 1};
  const double wa[] = {1.0};
  const double wb[] = {3.0, 2.0};
  const int a = e.start(0.0, 30.0, r0, 0, 0, wa);
  const int b = e.start(0.0, 6.0, r01, 0, 1, wb);
  e.settle(0.0);
  CHECK(e.rate(a) == 3.0);
  CHECK(e.rate(b) == 3.0);
  const auto end = drain(e, 2);
  // B ends at 2; A then has r0 alone: 24 left at 12/µs.
  CHECK(end[1] == 2.0);
  CHECK(end[0] == doctest::Approx(4.0));
  CHECK(e.stats(0).work == 30.0 + 3 * 6.0);  // weighted units
  CHECK(e.stats(1).work == 2 * 6.0);
  CHECK(e.stats(0).saturated_us == doctest::Approx(4.0));
}

TEST_CASE("flow_engine.unit_weights_equal_no_weights") {
  FlowEngine plain({10.0, 4.0});
  FlowEngine unit({10.0, 4.0}, true);
  const int ab[] = {0, 1};
  const int b0[] = {0};
  const double w2[] = {1.0, 1.0};
  const double w1[] = {1.0};
  plain.start(0.0, 40.0, ab, 0, 0);
  plain.start(0.0, 25.0, b0, 0, 1);
  unit.start(0.0, 40.0, ab, 0, 0, w2);
  unit.start(0.0, 25.0, b0, 0, 1, w1);
  plain.settle(0.0);
  unit.settle(0.0);
  CHECK(drain(plain, 2) == drain(unit, 2));
}

TEST_CASE("flow_engine.rejects_bad_weights") {
  FlowEngine e({1.0, 1.0}, true);
  const int r[] = {0, 1};
  const double one[] = {1.0};
  const double zero[] = {1.0, 0.0};
  const double two[] = {1.0, 2.0};
  CHECK_THROWS(e.start(0.0, 1.0, r, 0, 0, one));   // one weight per resource
  CHECK_THROWS(e.start(0.0, 1.0, r, 0, 0, zero));  // weights > 0
  CHECK(e.active_flows() == 0);
  FlowEngine plain({1.0, 1.0});
  CHECK_THROWS(plain.start(0.0, 1.0, r, 0, 0, two));  // an engine made without weights refuses them
  CHECK(plain.active_flows() == 0);
}

TEST_CASE("flow_engine.completion_heap_orders_many_flows") {
  // Two resources of capacity 1, each shared by its flows alike (processor sharing): 40 flows of distinct work
  // start at 0, half on each; 20 more start at 40 on resource 0 only. Each end raises its resource's rates
  // (entries move up the completion heap); the late starts lower resource 0's and leave resource 1's (entries move
  // down past others). The ends must come in time order at the times of a plain processor-sharing reference. A heap
  // that never sifts down still passes here (the next raise sifts the entries back before they surface): that is
  // flow_engine.slowed_flow_moves_behind_others' case.
  constexpr int kEarly = 40, kFlows = 60;
  constexpr double kLateStart = 40;
  std::vector<double> work(kFlows);
  for (int i = 0; i < kFlows; ++i) work[static_cast<std::size_t>(i)] = 1 + (i * 37 % kFlows) + 0.25 * (i % 3);
  const auto starts_at = [&](int i) { return i < kEarly ? 0.0 : kLateStart; };
  const auto resource_of = [&](int i) { return i < kEarly ? i % 2 : 0; };
  // The reference: from event to event, each active flow of a resource moves dt / (its flows active).
  std::vector<double> expected(kFlows, -1);
  for (int res = 0; res < 2; ++res) {
    std::vector<double> left = work;
    double now = 0;
    for (;;) {
      std::vector<int> active;
      for (int i = 0; i < kFlows; ++i) {
        if (resource_of(i) == res && starts_at(i) <= now && expected[static_cast<std::size_t>(i)] < 0)
          active.push_back(i);
      }
      if (active.empty() && now >= kLateStart) break;
      const auto n = static_cast<double>(active.size());
      double dt = now < kLateStart ? kLateStart - now : 1e300;
      for (int i : active) dt = std::min(dt, left[static_cast<std::size_t>(i)] * n);
      for (int i : active) left[static_cast<std::size_t>(i)] -= dt / n;
      now += dt;
      for (int i : active) {
        if (left[static_cast<std::size_t>(i)] <= 1e-9) expected[static_cast<std::size_t>(i)] = now;
      }
    }
  }
  FlowEngine e({1.0, 1.0});
  const auto start = [&](int i) {
    const int r[] = {resource_of(i)};
    e.start(starts_at(i), work[static_cast<std::size_t>(i)], r, 0, i);
  };
  for (int i = 0; i < kEarly; ++i) start(i);
  e.settle(0.0);
  std::vector<double> end(kFlows, -1);
  bool late_started = false;
  double last = 0;
  for (;;) {
    const auto [t, f] = e.next_completion();
    if (!late_started && (f < 0 || t > kLateStart)) {
      for (int i = kEarly; i < kFlows; ++i) start(i);
      e.settle(kLateStart);
      late_started = true;
      continue;
    }
    if (f < 0) break;
    CHECK(t >= last);
    last = t;
    const auto done = e.finish(f, t);
    end[static_cast<std::size_t>(done.tag)] = t;
    e.settle(t);
  }
  for (int i = 0; i < kFlows; ++i) {
    INFO("flow " << i);
    CHECK(end[static_cast<std::size_t>(i)] == doctest::Approx(expected[static_cast<std::size_t>(i)]).epsilon(1e-9));
  }
}

TEST_CASE("flow_engine.slowed_flow_moves_behind_others") {
  // A (10 units, resource 0) and B (12, resource 1) at rate 1: A would end first, at 10. At 1, C starts on resource
  // 0 and halves A's rate: A now ends at 1 + 9·2 = 19, after B (12), and the next completion must be B's.
  FlowEngine e({1.0, 1.0});
  const int r0[] = {0}, r1[] = {1};
  e.start(0.0, 10.0, r0, 0, 0);
  e.start(0.0, 12.0, r1, 0, 1);
  e.settle(0.0);
  CHECK(e.next_completion().first == 10.0);
  e.start(1.0, 100.0, r0, 0, 2);
  e.settle(1.0);
  const auto [t, next] = e.next_completion();
  CHECK(t == 12.0);
  CHECK(next == 1);
  const auto end = drain(e, 3);
  CHECK(end[1] == 12.0);
  CHECK(end[0] == 19.0);
  CHECK(end[2] == doctest::Approx(19 + 91));  // 9 of its 100 units by 19, the other 91 alone
}

TEST_CASE("flow_engine.progressive_filling_matches_water_filling") {
  // 200 flows, each over 1–3 of 6 resources of different capacities, some with a cap of their own: many bottleneck
  // levels, and resources whose flows are fixed by several others one batch after another (the share heap takes
  // each such resource once per batch, after the batch's last flow). The rates must equal a plain water-filling:
  // raise every unfixed flow's rate alike until a resource fills or a flow reaches its cap, fix those flows, repeat.
  const std::vector<double> capacity = {10.0, 3.0, 7.5, 40.0, 1.25, 16.0};
  constexpr int kFlows = 200;
  std::vector<std::vector<int>> route(kFlows);
  std::vector<double> cap(kFlows, 0);
  unsigned seed = 12345;
  const auto next = [&seed](unsigned n) {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) % n;
  };
  for (int i = 0; i < kFlows; ++i) {
    const unsigned hops = 1 + next(3);
    while (route[static_cast<std::size_t>(i)].size() < hops) {
      const int r = static_cast<int>(next(static_cast<unsigned>(capacity.size())));
      auto& path = route[static_cast<std::size_t>(i)];
      if (std::find(path.begin(), path.end(), r) == path.end()) path.push_back(r);
    }
    if (next(5) == 0) cap[static_cast<std::size_t>(i)] = 0.01 + 0.02 * next(10);
  }
  // The reference.
  std::vector<double> expected(kFlows, -1);
  std::vector<double> left = capacity;
  double level = 0;
  for (;;) {
    double step = 1e300;
    for (std::size_t r = 0; r < capacity.size(); ++r) {
      int unfixed = 0;
      for (int i = 0; i < kFlows; ++i) {
        const auto& path = route[static_cast<std::size_t>(i)];
        if (expected[static_cast<std::size_t>(i)] < 0 && std::find(path.begin(), path.end(), r) != path.end())
          ++unfixed;
      }
      if (unfixed > 0) step = std::min(step, left[r] / unfixed);
    }
    for (int i = 0; i < kFlows; ++i) {
      if (expected[static_cast<std::size_t>(i)] < 0 && cap[static_cast<std::size_t>(i)] > 0)
        step = std::min(step, cap[static_cast<std::size_t>(i)] - level);
    }
    if (step == 1e300) break;
    level += step;
    for (int i = 0; i < kFlows; ++i) {
      if (expected[static_cast<std::size_t>(i)] < 0) {
        for (int r : route[static_cast<std::size_t>(i)]) left[static_cast<std::size_t>(r)] -= step;
      }
    }
    for (int i = 0; i < kFlows; ++i) {
      if (expected[static_cast<std::size_t>(i)] >= 0) continue;
      bool fixed = cap[static_cast<std::size_t>(i)] > 0 && cap[static_cast<std::size_t>(i)] <= level * (1 + 1e-12);
      for (int r : route[static_cast<std::size_t>(i)]) fixed = fixed || left[static_cast<std::size_t>(r)] <= 1e-9;
      if (fixed) expected[static_cast<std::size_t>(i)] = level;
    }
  }
  FlowEngine e(capacity);
  std::vector<int> id(kFlows);
  for (int i = 0; i < kFlows; ++i) {
    id[static_cast<std::size_t>(i)] =
        e.start(0.0, 100.0, route[static_cast<std::size_t>(i)], cap[static_cast<std::size_t>(i)], i);
  }
  e.settle(0.0);
  int capped = 0;
  for (int i = 0; i < kFlows; ++i) {
    INFO("flow " << i);
    REQUIRE(expected[static_cast<std::size_t>(i)] > 0);
    CHECK(e.rate(id[static_cast<std::size_t>(i)]) == doctest::Approx(expected[static_cast<std::size_t>(i)]).epsilon(1e-9));
    if (e.rate(id[static_cast<std::size_t>(i)]) == doctest::Approx(cap[static_cast<std::size_t>(i)])) ++capped;
  }
  // The case has flows held by their caps and several distinct levels besides.
  CHECK(capped > 0);
  std::vector<double> levels(expected);
  std::sort(levels.begin(), levels.end());
  CHECK(std::unique(levels.begin(), levels.end(), [](double a, double b) { return std::abs(a - b) < 1e-9; }) -
            levels.begin() >= 4);
}
