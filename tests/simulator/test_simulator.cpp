// The event-driven simulator on hand-built topologies and plans: exact times.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/simulator/simulator.hpp"
#include "tests/simulator/sim_fixtures.hpp"

using namespace artune;
using namespace artune::testing;

namespace {

// Two GPUs joined by one NVLink of 20 GB/s each way, 1 µs latency.
Topology pair_topology() {
  Topology t = gpu_nodes(2);
  t.add_duplex_link(0, 1, LinkKind::kNvLink, 20.0, 1.0);
  t.finalize();
  return t;
}

// k GPUs, every pair joined by NVLink (20 GB/s, 1 µs).
Topology mesh_topology(int k) {
  Topology t = gpu_nodes(k);
  for (int i = 0; i < k; ++i) {
    for (int j = i + 1; j < k; ++j) t.add_duplex_link(i, j, LinkKind::kNvLink, 20.0, 1.0);
  }
  t.finalize();
  return t;
}

// With round_model(): NVLink carries 10 GB/s = 1e4 B/µs; a transfer waits 2 + 1 + 0.5 µs.
constexpr std::int64_t kMillionBytes = 250000;  // floats

}  // namespace

namespace {

// A million bytes copied from device 0 to 1, then reduced from 1 back into 0 after it.
Plan copy_then_reduce_back(const Topology& t) {
  Plan chain = plan_over(t, {0, 1}, kMillionBytes);
  const int a = add_xfer(chain, OpKind::kCopy, 0, 1, 0, kMillionBytes);
  add_xfer(chain, OpKind::kReduce, 1, 0, 0, kMillionBytes, {a});
  return chain;
}

}  // namespace

TEST_CASE("simulator.single_copy_and_reduce") {
  const Topology t = pair_topology();
  const CostModel m = round_model();
  Plan copy = plan_over(t, {0, 1}, kMillionBytes);
  add_xfer(copy, OpKind::kCopy, 0, 1, 0, kMillionBytes);
  const SimResult r = simulate(copy, t, m, 4);
  CHECK(r.time_us == doctest::Approx(103.5).epsilon(1e-12));
  CHECK(r.bytes == 1000000);
  CHECK(r.ranks == 2);
  CHECK(r.algbw_gbps == doctest::Approx(1e6 / 103.5e3));
  CHECK(r.busbw_gbps == doctest::Approx(r.algbw_gbps));  // 2(n−1)/n = 1 for n = 2
  REQUIRE(r.links.size() == 1);
  CHECK(r.links[0].link == 0);
  CHECK(r.links[0].bytes == 1e6);
  CHECK(r.links[0].busy_us == doctest::Approx(100.0));
  CHECK(r.links[0].saturated_us == doctest::Approx(100.0));
  // The bytes move after the copy's 3.5 µs of latency and end with it.
  CHECK(r.links[0].first_busy_us == doctest::Approx(3.5));
  CHECK(r.links[0].last_busy_us == doctest::Approx(103.5));
  CHECK(r.links[0].utilisation == doctest::Approx(100.0 / 103.5));
  CHECK(r.bottleneck_link == 0);
  REQUIRE(r.critical_path.size() == 1);
  CHECK(r.critical_path[0].links == std::vector<int>{0});
  CHECK(r.critical_path[0].limiting_link == 0);

  Plan reduce = plan_over(t, {0, 1}, kMillionBytes);
  add_xfer(reduce, OpKind::kReduce, 0, 1, 0, kMillionBytes);
  // + 1e6 B at 100 GB/s on the destination.
  CHECK(simulate(reduce, t, m, 4).time_us == doctest::Approx(113.5).epsilon(1e-12));
}

TEST_CASE("simulator.critical_runs_fold_alike_steps") {
  const Topology t = pair_topology();
  const CostModel m = round_model();
  const Plan chain = copy_then_reduce_back(t);
  // Unpipelined: one run per op, tiling the time.
  const SimResult whole = simulate(chain, t, m, 4);
  const std::vector<CriticalRun> two = critical_runs(chain, whole);
  REQUIRE(two.size() == 2);
  CHECK(two[0].kind == OpKind::kCopy);
  CHECK(two[0].src_device == 0);
  CHECK(two[0].dst_device == 1);
  CHECK(two[0].ops == 1);
  CHECK(two[0].start_us == 0.0);
  CHECK(two[0].end_us == doctest::Approx(103.5));
  CHECK(two[1].kind == OpKind::kReduce);
  CHECK(two[1].first_step == 1);
  CHECK(two[0].limiting_link == 0);  // the copy: by the link 0 -> 1
  CHECK(two[1].limiting_link == whole.critical_path[1].limiting_link);
  CHECK(two[1].end_us == whole.time_us);

  // In four segments a reduce segment (3.5 + 25 + the destination's 2.5) outlasts a copy segment (3.5 + 25): the
  // path takes the first copy segment, then every reduce segment, which fold into one run.
  const Plan piped = pipeline(chain, 4);
  const SimResult r = simulate(piped, t, m, 4);
  const std::vector<CriticalRun> runs = critical_runs(piped, r);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].kind == OpKind::kCopy);
  CHECK(runs[0].ops == 1);
  CHECK(runs[1].kind == OpKind::kReduce);
  CHECK(runs[1].ops == 4);
  CHECK(runs[1].first_step == 1);
  CHECK(runs[0].end_us == runs[1].start_us);
  CHECK(runs[1].end_us == r.time_us);
  int steps = 0;
  for (const CriticalRun& run : runs) steps += run.ops;
  CHECK(steps == static_cast<int>(r.critical_path.size()));

  // A result that does not belong to the plan is refused.
  SimResult alien = r;
  alien.critical_path.back().op = static_cast<int>(piped.ops.size());
  CHECK_THROWS_AS(critical_runs(piped, alien), InvalidInput);
}

TEST_CASE("simulator.local_ops_cost_memory_bandwidth") {
  const Topology t = pair_topology();
  const CostModel m = round_model();
  Plan p = plan_over(t, {0, 1}, kMillionBytes);
  const int scratch = p.add_buffer(0, kMillionBytes);
  Op copy;
  copy.kind = OpKind::kCopy;
  copy.src = {0, 0, 0, kMillionBytes};
  copy.dst = {0, scratch, 0, kMillionBytes};
  const int c = p.add(copy);
  Op scale;
  scale.kind = OpKind::kScale;
  scale.dst = {0, 0, 0, kMillionBytes};
  scale.divisor = 2;
  scale.deps = {c};
  const int s = p.add(scale);
  Op red = copy;
  red.kind = OpKind::kReduce;
  red.deps = {s};
  p.add(red);
  // copy 2 + 5, scale 2 + 5, local reduce 2 + 10.
  const SimResult r = simulate(p, t, m, 4);
  CHECK(r.time_us == doctest::Approx(26.0).epsilon(1e-12));
  CHECK(r.links.empty());
  CHECK(r.bottleneck_link == -1);
  CHECK(r.critical_path.size() == 3);
}

TEST_CASE("simulator.dependencies_chain_and_parallel_directions") {
  const Topology t = pair_topology();
  const CostModel m = round_model();
  const Plan chain = copy_then_reduce_back(t);
  const SimResult r = simulate(chain, t, m, 4);
  CHECK(r.time_us == doctest::Approx(103.5 + 113.5).epsilon(1e-12));
  REQUIRE(r.critical_path.size() == 2);
  CHECK(r.critical_path[0].op == 0);
  CHECK(r.critical_path[0].end_us == doctest::Approx(103.5));
  CHECK(r.critical_path[1].start_us == doctest::Approx(103.5));
  CHECK(r.critical_path[1].links == std::vector<int>{1});

  // The two directions of a duplex link do not interfere.
  Plan both = plan_over(t, {0, 1}, kMillionBytes);
  add_xfer(both, OpKind::kCopy, 0, 1, 0, kMillionBytes);
  add_xfer(both, OpKind::kCopy, 1, 0, 0, kMillionBytes);
  CHECK(simulate(both, t, m, 4).time_us == doctest::Approx(103.5).epsilon(1e-12));
}

TEST_CASE("simulator.zero_count_ops_cost_latency_only") {
  const Topology t = pair_topology();
  Plan p = plan_over(t, {0, 1}, 0);
  add_xfer(p, OpKind::kReduce, 0, 1, 0, 0);
  const SimResult r = simulate(p, t, round_model(), 4);
  CHECK(r.time_us == doctest::Approx(3.5));
  CHECK(r.algbw_gbps == 0.0);
  CHECK(r.links.empty());
}

TEST_CASE("simulator.group_collectives_follow_ring_formula") {
  const Topology t = mesh_topology(4);
  // The one-ring formula is how host backends (mpi, cpu) run a group; GPU profiles run all-reduce as
  // NCCL does (channels, algorithms, protocols: test_nccl_model.cpp), so this test uses the mpi profile.
  CostModel m = round_model();
  m.profile = BackendProfile::kMpi;
  const std::int64_t count = 400000;  // 1.6e6 B, chunks of 4e5 B take 40 µs
  auto run = [&](Collective c, int root = -1) {
    Plan p = plan_over(t, {0, 1, 2, 3}, count);
    add_group(p, c, {0, 1, 2, 3}, count, root);
    return simulate(p, t, m, 4);
  };
  // base 10; per step hop 1 + route latency 1 + NVLink α 0.5 = 2.5, plus the chunk.
  const SimResult ar = run(Collective::kAllReduce);
  CHECK(ar.time_us == doctest::Approx(10 + 6 * (2.5 + 40)).epsilon(1e-12));
  CHECK(ar.links.size() == 4);  // one ring, one direction
  for (const LinkUsage& u : ar.links) CHECK(u.bytes == doctest::Approx(6 * 4e5));
  CHECK(run(Collective::kReduceScatter).time_us == doctest::Approx(10 + 3 * 42.5).epsilon(1e-12));
  CHECK(run(Collective::kAllGather).time_us == doctest::Approx(10 + 3 * 42.5).epsilon(1e-12));
  CHECK(run(Collective::kBroadcast, 2).time_us == doctest::Approx(10 + 3 * 2.5 + 160).epsilon(1e-12));
  CHECK(run(Collective::kReduce, 1).time_us == doctest::Approx(10 + 3 * 2.5 + 160).epsilon(1e-12));
  CHECK(run(Collective::kAllReduce).critical_path.at(0).links.size() == 4);

  Plan single = plan_over(t, {0, 1, 2, 3}, count);
  add_group(single, Collective::kAllReduce, {2}, count);
  CHECK(simulate(single, t, m, 4).time_us == 10.0);
}

TEST_CASE("simulator.group_contends_with_point_to_point_traffic") {
  const Topology t = mesh_topology(2);
  // mpi profile: the one-ring group formula (see group_collectives_follow_ring_formula).
  CostModel m = round_model();
  m.profile = BackendProfile::kMpi;
  Plan p = plan_over(t, {0, 1}, 200000);
  add_group(p, Collective::kAllReduce, {0, 1}, 200000);  // 2 steps of 4e5 B on 0→1 and 1→0
  add_xfer(p, OpKind::kCopy, 0, 1, 0, 200000);           // 8e5 B on 0→1 from t = 3.5
  const SimResult r = simulate(p, t, m, 4);
  const SimResult alone = [&] {
    Plan q = plan_over(t, {0, 1}, 200000);
    add_group(q, Collective::kAllReduce, {0, 1}, 200000);
    return simulate(q, t, m, 4);
  }();
  CHECK(alone.time_us == doctest::Approx(10 + 2 * (2.5 + 40)));
  CHECK(r.time_us > alone.time_us + 1.0);
}

TEST_CASE("simulator.best_ring_order") {
  // 0-2, 2-1, 1-3, 3-0 are fast; 0-1 and 2-3 slow.
  Topology t = gpu_nodes(4);
  t.add_duplex_link(0, 1, LinkKind::kNvLink, 10.0, 1.0);
  t.add_duplex_link(2, 3, LinkKind::kNvLink, 10.0, 1.0);
  t.add_duplex_link(0, 2, LinkKind::kNvLink, 50.0, 1.0);
  t.add_duplex_link(1, 2, LinkKind::kNvLink, 50.0, 1.0);
  t.add_duplex_link(1, 3, LinkKind::kNvLink, 50.0, 1.0);
  t.add_duplex_link(0, 3, LinkKind::kNvLink, 50.0, 1.0);
  t.finalize();
  CHECK(best_ring_order(t, {0, 1, 2, 3}) == std::vector<int>{0, 2, 1, 3});
  CHECK(best_ring_order(t, {1, 0, 2}) == std::vector<int>{1, 0, 2});
}

TEST_CASE("simulator.deterministic") {
  const Topology t = mesh_topology(4);
  const CostModel m = round_model();
  Plan p = plan_over(t, {0, 1, 2, 3}, 1000003);
  std::vector<int> last(4, -1);
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 4; ++i) {
      const int dst = (i + 1 + round % 3) % 4;
      std::vector<int> deps;
      if (last[i] >= 0) deps.push_back(last[i]);
      last[i] = add_xfer(p, round % 2 ? OpKind::kReduce : OpKind::kCopy, i, dst, 0, 1000003 - round * 77, deps);
    }
  }
  const SimResult a = simulate(p, t, m, 4);
  const SimResult b = simulate(p, t, m, 4);
  CHECK(a == b);
  CHECK(sim_result_to_json(a, t).dump() == sim_result_to_json(b, t).dump());
}

TEST_CASE("simulator.rejects_bad_plans") {
  const Topology t = pair_topology();
  const CostModel m = round_model();
  Plan bad_dep = plan_over(t, {0, 1}, 8);
  add_xfer(bad_dep, OpKind::kCopy, 0, 1, 0, 8, {0});
  CHECK_THROWS_AS(simulate(bad_dep, t, m, 4), InvalidInput);
  Plan bad_dev = plan_over(t, {0, 1}, 8);
  add_xfer(bad_dev, OpKind::kCopy, 0, 5, 0, 8);
  CHECK_THROWS_AS(simulate(bad_dev, t, m, 4), InvalidInput);
  Plan bad_node = plan_over(t, {0, 1}, 8);
  bad_node.devices[1].node = 9;
  CHECK_THROWS_AS(simulate(bad_node, t, m, 4), InvalidInput);
  Plan bad_root = plan_over(t, {0, 1}, 8);
  add_group(bad_root, Collective::kBroadcast, {0}, 8, 1);
  add_group(bad_root, Collective::kBroadcast, {0, 1}, 8, 5);
  CHECK_THROWS_AS(simulate(bad_root, t, m, 4), InvalidInput);
  CHECK_THROWS_AS(simulate(plan_over(t, {0, 1}, 8), t, m, 0), InvalidInput);
}

TEST_CASE("simulator.json_names_links") {
  const Topology t = pair_topology();
  Plan p = plan_over(t, {0, 1}, kMillionBytes);
  add_xfer(p, OpKind::kCopy, 1, 0, 0, kMillionBytes);
  const SimResult r = simulate(p, t, round_model(), 4);
  const nlohmann::json j = sim_result_to_json(r, t);
  CHECK(j["bottleneck"]["name"] == "gpu1->gpu0 (nvlink)");
  CHECK(j["links"].size() == 1);
  CHECK(j["links"][0]["bytes"] == 1e6);
  CHECK(j["critical_path"][0]["limiting_link"] == "gpu1->gpu0 (nvlink)");
  CHECK(link_name(t, 0) == "gpu0->gpu1 (nvlink)");
}

TEST_CASE("simulator.transfer_cap_limits_host_backends") {
  const Topology t = pair_topology();
  CostModel m = round_model();
  m.link[LinkKind::kNvLink] = {0.0, 1.0};  // the link could carry 20 GB/s
  m.transfer_cap_gbps = 5.0;               // one host thread copies at 5 GB/s
  Plan p = plan_over(t, {0, 1}, kMillionBytes);
  add_xfer(p, OpKind::kCopy, 0, 1, 0, kMillionBytes);
  const SimResult r = simulate(p, t, m, 4);
  CHECK(r.time_us == doctest::Approx(2.0 + 1.0 + 200.0).epsilon(1e-12));
  REQUIRE(r.links.size() == 1);
  CHECK(r.links[0].saturated_us == 0.0);  // the link was never the limit
  CHECK(r.bottleneck_link == 0);          // but it is the busiest one
  CHECK(r.critical_path.at(0).limiting_link == -1);
}
