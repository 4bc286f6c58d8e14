// The host model of host backends (cpu, mpi): run overhead, one thread per
// device, cores and memory bandwidth shared by every op, cache-resident or
// DRAM rate by working set. Exact closed-form times on hand-built plans.
#include <doctest/doctest.h>

#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"
#include "tests/simulator/sim_fixtures.hpp"

using namespace artune;
using namespace artune::testing;

namespace {

// k GPUs (host threads on host backends), every pair joined by a link far faster than any host rate
// (1000 GB/s, 1 µs), so only the host limits a flow.
Topology host_mesh(int k) {
  Topology t = gpu_nodes(k);
  for (int i = 0; i < k; ++i) {
    for (int j = i + 1; j < k; ++j) t.add_duplex_link(i, j, LinkKind::kNvLink, 1000.0, 1.0);
  }
  t.finalize();
  return t;
}

// A cpu-profile model with round numbers: op overhead 2 µs, no link α; one thread copies at 10 GB/s
// (1e4 B/µs) and reduces at 5 GB/s. The host model is off; each test turns on what it checks.
CostModel host_model() {
  CostModel m = CostModel::defaults(BackendProfile::kCpu);
  m.op_overhead_us = 2.0;
  for (auto& [kind, cost] : m.link) cost = {0.0, 1.0};
  m.transfer_cap_gbps = 10.0;
  m.memory_gbps[NodeKind::kGpu] = 10.0;
  m.reduce_gbps[NodeKind::kGpu] = 5.0;
  m.host = HostModel{};
  return m;
}

constexpr std::int64_t kMillionBytes = 250000;  // floats
// A transfer waits op overhead 2 + route latency 1 µs before its bytes move.
constexpr double kWait = 3.0;
// 1e6 bytes at one thread's copy rate (1e4 B/µs).
constexpr double kCopyUs = 100.0;

}  // namespace

TEST_CASE("host_model.defaults") {
  // Only the cpu backend runs one thread per device; the machine's figures wait for calibration.
  const CostModel cpu = CostModel::defaults(BackendProfile::kCpu);
  CHECK(cpu.host.serial_devices);
  CHECK(cpu.host.run_overhead_us == 0.0);
  CHECK(!cpu.host.shares_resources());
  for (const auto profile : {BackendProfile::kNccl, BackendProfile::kCuda, BackendProfile::kMpi}) {
    CHECK(CostModel::defaults(profile).host == HostModel{});
  }
  HostModel h;
  h.cache_bytes = 100;
  h.cache_gbps = 40;
  h.dram_gbps = 8;
  CHECK(h.shares_resources());
  CHECK(h.memory_gbps(100) == 40.0);  // at most cache_bytes: cache-resident
  // Above it the cache holds cache_bytes / W of the working set: 1/rate = (C/W)/40 + (1 − C/W)/8.
  CHECK(h.memory_gbps(200) == doctest::Approx(1.0 / (0.5 / 40 + 0.5 / 8)).epsilon(1e-15));
  CHECK(h.memory_gbps(1e12) == doctest::Approx(8.0).epsilon(1e-9));  // far above: the DRAM rate
  h.cache_bytes = 0;
  CHECK(h.memory_gbps(1) == 8.0);  // no cache: DRAM for every working set
  h.dram_gbps = 0;
  CHECK(h.memory_gbps(1) == 0.0);  // 0 = no limit
  h.cache_bytes = 100;
  CHECK(h.memory_gbps(200) == 80.0);  // only the cached half is limited
}

TEST_CASE("host_model.run_overhead_delays_the_first_op") {
  const Topology t = host_mesh(2);
  CostModel m = host_model();
  Plan p = plan_over(t, {0, 1}, kMillionBytes);
  add_xfer(p, OpKind::kCopy, 0, 1, 0, kMillionBytes);
  const double before = simulate(p, t, m, 4).time_us;
  CHECK(before == kWait + kCopyUs);
  m.host.run_overhead_us = 7.0;
  const SimResult r = simulate(p, t, m, 4);
  CHECK(r.time_us == 7.0 + kWait + kCopyUs);
  REQUIRE(r.critical_path.size() == 1);
  CHECK(r.critical_path[0].start_us == 7.0);
}

TEST_CASE("host_model.serial_devices_run_their_ops_in_plan_order") {
  // Device 0 pulls from 1 and from 2 (two halves of its buffer); device 3 pulls from 1.
  const Topology t = host_mesh(4);
  CostModel m = host_model();
  Plan p = plan_over(t, {0, 1, 2, 3}, 2 * kMillionBytes);
  add_xfer(p, OpKind::kCopy, 1, 0, 0, kMillionBytes);
  add_xfer(p, OpKind::kCopy, 2, 0, kMillionBytes, kMillionBytes);
  add_xfer(p, OpKind::kCopy, 1, 3, 0, kMillionBytes);
  // Without serial devices (and no host resources) all three overlap, each at one thread's rate.
  CHECK(simulate(p, t, m, 4).time_us == kWait + kCopyUs);
  m.host.serial_devices = true;
  const SimResult r = simulate(p, t, m, 4);
  // Device 0's thread runs op 1 after op 0; device 3's op runs beside them.
  CHECK(r.time_us == 2 * (kWait + kCopyUs));
  REQUIRE(r.critical_path.size() == 2);
  CHECK(r.critical_path[0].op == 0);
  CHECK(r.critical_path[1].op == 1);
  CHECK(r.critical_path[1].start_us == kWait + kCopyUs);
}

TEST_CASE("host_model.serial_group_waits_for_every_member_thread") {
  // A group over devices 0 and 1 after a copy into 1: the group starts when device 1's thread is free.
  const Topology t = host_mesh(2);
  CostModel m = host_model();
  m.group_base_latency_us = 10.0;
  Plan p = plan_over(t, {0, 1}, kMillionBytes);
  add_xfer(p, OpKind::kCopy, 0, 1, 0, 1);
  Op g;
  g.kind = OpKind::kGroup;
  g.collective = Collective::kBroadcast;
  g.group = {0, 1};
  g.root = 0;
  g.dst = {0, 0, 0, 0};  // an empty broadcast: only its latencies
  g.src = g.dst;
  p.add(g);
  const double copy = kWait + 4.0 / 1e4;
  const double group = m.group_base_latency_us + m.group_hop_latency_us + 1.0;
  CHECK(simulate(p, t, m, 4).time_us == doctest::Approx(std::max(copy, group)).epsilon(1e-12));
  m.host.serial_devices = true;
  CHECK(simulate(p, t, m, 4).time_us == doctest::Approx(copy + group).epsilon(1e-12));
}

TEST_CASE("host_model.reducing_transfer_is_one_pass_of_the_reduce_kernel") {
  const Topology t = host_mesh(2);
  CostModel m = host_model();
  m.host.cores = 8;  // host resources on, never the limit here
  Plan p = plan_over(t, {0, 1}, kMillionBytes);
  add_xfer(p, OpKind::kReduce, 0, 1, 0, kMillionBytes);
  // 1e6 bytes at 5 GB/s; no separate copy at the transfer cap.
  CHECK(simulate(p, t, m, 4).time_us == doctest::Approx(kWait + 200.0).epsilon(1e-12));
}

TEST_CASE("host_model.two_ops_share_the_aggregate_memory_bandwidth") {
  const Topology t = host_mesh(4);
  CostModel m = host_model();
  m.host.dram_gbps = 10.0;  // the whole host moves what one thread does
  Plan one = plan_over(t, {0, 1, 2, 3}, kMillionBytes);
  add_xfer(one, OpKind::kCopy, 1, 0, 0, kMillionBytes);
  const double alone = simulate(one, t, m, 4).time_us - kWait;
  CHECK(alone == doctest::Approx(kCopyUs).epsilon(1e-12));
  Plan two = one;
  add_xfer(two, OpKind::kCopy, 3, 2, 0, kMillionBytes);  // another device: no thread in common
  const double both = simulate(two, t, m, 4).time_us - kWait;
  CHECK(both == doctest::Approx(2 * alone).epsilon(1e-12));
  // With twice the bandwidth they run side by side again.
  m.host.dram_gbps = 20.0;
  CHECK(simulate(two, t, m, 4).time_us == doctest::Approx(kWait + kCopyUs).epsilon(1e-12));
}

TEST_CASE("host_model.working_set_above_the_cache_blends_in_the_dram_rate") {
  // Two devices of 1e6 bytes each: a working set of 2e6 bytes.
  const Topology t = host_mesh(2);
  CostModel m = host_model();
  m.transfer_cap_gbps = 40.0;  // one thread is faster than either memory rate
  m.host.cache_gbps = 20.0;
  m.host.dram_gbps = 4.0;
  Plan p = plan_over(t, {0, 1}, kMillionBytes);
  add_xfer(p, OpKind::kCopy, 0, 1, 0, kMillionBytes);
  m.host.cache_bytes = 2e6;  // fits exactly: the cache rate
  CHECK(simulate(p, t, m, 4).time_us == doctest::Approx(kWait + 1e6 / 20e3).epsilon(1e-12));
  m.host.cache_bytes = 1e6;  // holds half: 1e6 bytes at 1 / (0.5/20 + 0.5/4) GB/s
  CHECK(simulate(p, t, m, 4).time_us == doctest::Approx(kWait + 1e6 * (0.5 / 20e3 + 0.5 / 4e3)).epsilon(1e-12));
  m.host.cache_bytes = 0;  // no cache: the DRAM rate
  CHECK(simulate(p, t, m, 4).time_us == doctest::Approx(kWait + 1e6 / 4e3).epsilon(1e-12));
  // Scratch buffers count too: with a second buffer per device the cache holds a quarter.
  m.host.cache_bytes = 1e6;
  p.buffers = {{kMillionBytes, kMillionBytes}, {kMillionBytes, kMillionBytes}};
  CHECK(simulate(p, t, m, 4).time_us == doctest::Approx(kWait + 1e6 * (0.25 / 20e3 + 0.75 / 4e3)).epsilon(1e-12));
}

TEST_CASE("host_model.cores_time_slice_the_threads") {
  // A ring step: four threads copy at once on two cores, each at half its rate.
  const Topology t = host_mesh(4);
  CostModel m = host_model();
  m.host.cores = 2;
  Plan p = plan_over(t, {0, 1, 2, 3}, kMillionBytes);
  for (int i = 0; i < 4; ++i) add_xfer(p, OpKind::kCopy, i, (i + 1) % 4, 0, kMillionBytes);
  CHECK(simulate(p, t, m, 4).time_us == doctest::Approx(kWait + 2 * kCopyUs).epsilon(1e-12));
  // One core, a copy (10 GB/s) beside a reduce (5 GB/s): each gets half the core until the copy ends
  // (1e6 bytes at 5 GB/s: 200 µs, when the reduce has 0.5e6 bytes left), then the reduce a whole core.
  m.host.cores = 1;
  Plan q = plan_over(t, {0, 1, 2, 3}, kMillionBytes);
  add_xfer(q, OpKind::kCopy, 0, 1, 0, kMillionBytes);
  add_xfer(q, OpKind::kReduce, 2, 3, 0, kMillionBytes);
  const SimResult r = simulate(q, t, m, 4);
  CHECK(r.time_us == doctest::Approx(kWait + 200.0 + 100.0).epsilon(1e-12));
  CHECK(r.critical_path.back().op == 1);
}

TEST_CASE("host_model.local_ops_run_on_their_device_thread") {
  // Local copies and scales at the copy rate, local reduces at the reduce rate.
  const Topology t = host_mesh(2);
  CostModel m = host_model();
  m.host.cores = 4;
  Plan p = plan_over(t, {0, 1}, kMillionBytes);
  p.buffers = {{kMillionBytes, kMillionBytes}, {kMillionBytes}};
  Op local;
  local.kind = OpKind::kReduce;
  local.src = {0, 1, 0, kMillionBytes};
  local.dst = {0, 0, 0, kMillionBytes};
  const int reduce = p.add(local);
  Op scale;
  scale.kind = OpKind::kScale;
  scale.dst = {0, 0, 0, kMillionBytes};
  scale.src = scale.dst;
  scale.divisor = 2;
  scale.deps = {reduce};
  const int sc = p.add(scale);
  add_xfer(p, OpKind::kCopy, 0, 1, 0, kMillionBytes, {sc});
  CHECK(simulate(p, t, m, 4).time_us ==
        doctest::Approx((2.0 + 200.0) + (2.0 + kCopyUs) + (kWait + kCopyUs)).epsilon(1e-12));
  // Two local copies on one device share its thread even without serial devices.
  Plan q = plan_over(t, {0, 1}, kMillionBytes);
  q.buffers = {{kMillionBytes, kMillionBytes, kMillionBytes}, {kMillionBytes}};
  for (int b = 1; b <= 2; ++b) {
    Op c;
    c.kind = OpKind::kCopy;
    c.src = {0, b, 0, kMillionBytes};
    c.dst = {0, b == 1 ? 0 : 1, 0, kMillionBytes};
    q.add(c);
  }
  CHECK(simulate(q, t, m, 4).time_us == doctest::Approx(2.0 + 2 * kCopyUs).epsilon(1e-12));
}

TEST_CASE("host_model.only_network_links_carry_host_bytes") {
  // uniform:2x2: inside a machine NVLink (25 GB/s) and PCIe (12 GB/s) join GPUs that host threads stand in
  // for; between machines 12.5 GB/s NICs. A thread copying at 100 GB/s is held only by the network.
  const Topology t = load_topology("uniform:2x2");
  CostModel m = host_model();
  m.transfer_cap_gbps = 100.0;
  m.host.cores = 8;
  const int a = t.find_node("m0/gpu0"), b = t.find_node("m0/gpu1"), c = t.find_node("m1/gpu0");
  Plan p = plan_over(t, {a, b, c}, kMillionBytes);
  add_xfer(p, OpKind::kCopy, 0, 1, 0, kMillionBytes);
  const SimResult inside = simulate(p, t, m, 4);
  CHECK(inside.time_us == doctest::Approx(2.0 + t.route(a, b).latency_us + 1e6 / 1e5).epsilon(1e-12));
  CHECK(inside.links.empty());
  Plan q = plan_over(t, {a, b, c}, kMillionBytes);
  add_xfer(q, OpKind::kCopy, 0, 2, 0, kMillionBytes);
  const SimResult across = simulate(q, t, m, 4);
  CHECK(across.time_us == doctest::Approx(2.0 + t.route(a, c).latency_us + 1e6 / 12.5e3).epsilon(1e-12));
  REQUIRE(across.links.size() == 2);  // NIC to switch, switch to NIC
  for (const LinkUsage& u : across.links) {
    CHECK(t.links()[u.link].kind == LinkKind::kNetwork);
    CHECK(u.bytes == doctest::Approx(1e6).epsilon(1e-12));
  }
}

TEST_CASE("host_model.deterministic") {
  const Topology t = host_mesh(4);
  CostModel m = host_model();
  m.host = {5.0, true, 2.0, 1e6, 30.0, 7.0};  // 4e6 bytes of buffers: a quarter in cache
  Plan p = plan_over(t, {0, 1, 2, 3}, kMillionBytes);
  for (int i = 0; i < 4; ++i) add_xfer(p, i % 2 ? OpKind::kReduce : OpKind::kCopy, i, (i + 1) % 4, 0, kMillionBytes);
  for (int i = 0; i < 4; ++i) add_xfer(p, OpKind::kCopy, (i + 2) % 4, i, 0, kMillionBytes / 2, {i == 0 ? 3 : i - 1});
  const SimResult a = simulate(p, t, m, 4);
  CHECK(a == simulate(p, t, m, 4));
  CHECK(a.time_us > 5.0);
}
