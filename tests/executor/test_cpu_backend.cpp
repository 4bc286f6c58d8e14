#include <doctest/doctest.h>

#include <cstdlib>

#include "artune/executor/test_fault.hpp"

#include <string>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/executor/backend.hpp"
#include "artune/executor/backend_factory.hpp"
#include "artune/executor/cpu/cpu_backend.hpp"
#include "artune/executor/harness/runner.hpp"
#include "artune/executor/harness/verification.hpp"
#include "hand_plans.hpp"
#include "tests/test_support.hpp"

using namespace artune;
using namespace artune::test;

namespace {

using artune_test::wrong_after_runs;

std::vector<std::int64_t> odd_counts(int ranks) { return {1, 2, static_cast<std::int64_t>(ranks) - 1, 13, 97, 1031}; }

}  // namespace

TEST_CASE("cpu_backend.hand_plans_every_type_and_op") {
  CpuBackend backend(BackendOptions{});
  for (int ranks : {1, 2, 3, 8}) {
    for (std::int64_t count : odd_counts(ranks)) {
      if (count < 1) continue;
      for (ReduceOp op : all_reduce_ops()) {
        const std::vector<std::pair<std::string, Plan>> plans = {
            {"ring", ring_plan(ranks, count, op)},
            {"helper", helper_plan(ranks, count, op)},
            {"allreduce", group_plan(ranks, count, op, Collective::kAllReduce)},
            {"rs+ag", group_plan(ranks, count, op, Collective::kReduceScatter)},
            {"reduce+bcast", group_plan(ranks, count, op, Collective::kReduce)},
            {"hier", hierarchical_plan(ranks, 2, count, op)},
        };
        for (const auto& [name, plan] : plans) {
          for (DataType type : all_data_types()) {
            INFO(name << " ranks=" << ranks << " count=" << count << " " << to_string(type) << " " << to_string(op));
            REQUIRE(wrong_after_runs(backend, plan, type, op) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("cpu_backend.in_place_and_repeatable") {
  CpuBackend backend(BackendOptions{});
  const Plan plan = ring_plan(4, 1000, ReduceOp::kSum);
  backend.prepare(plan, DataType::kFloat32, ReduceOp::kSum);
  CHECK(backend.local_ranks() == std::vector<int>{0, 1, 2, 3});
  CHECK(backend.is_root());
  CHECK(backend.name() == "cpu");
  for (int it = 0; it < 20; ++it) {
    backend.fill_inputs(it);
    backend.run();
    REQUIRE(backend.count_wrong(it) == 0);
    CHECK(backend.count_wrong(it + 1) > 0);  // other iterations' values differ
  }
  // The result sits in buffer 0 of every rank.
  for (int r = 0; r < 4; ++r) {
    const auto* data = static_cast<const float*>(backend.buffer_data(r, 0));
    CHECK(data[5] == static_cast<float>(expected_value(ReduceOp::kSum, 4, 5, 19)));
  }
}

TEST_CASE("cpu_backend.flipped_input_is_caught") {
  CpuBackend backend(BackendOptions{});
  const int ranks = 8;
  const Plan plan = ring_plan(ranks, 4096, ReduceOp::kSum);
  backend.prepare(plan, DataType::kFloat32, ReduceOp::kSum);
  backend.fill_inputs(1);
  backend.run();
  CHECK(backend.count_wrong(1) == 0);
  backend.fill_inputs(1);
  static_cast<float*>(backend.buffer_data(2, 0))[100] += 1;  // one input element of rank 2
  backend.run();
  CHECK(backend.count_wrong(1) == ranks);  // that element is wrong on every rank
}

TEST_CASE("test_fault.only_where_the_tests_are_built") {
  // ARTUNE_TEST_FAULT plants a fault in a build with the tests; a production build (enabled = false, what
  // -Dtests=false compiles) ignores the variable, even a malformed one.
  ::setenv("ARTUNE_TEST_FAULT", "kill:rank0:iter1", 1);
  CHECK(read_test_fault(true).fires("kill", 0, 1));
  CHECK(read_test_fault(false).kind.empty());
  ::setenv("ARTUNE_TEST_FAULT", "nonsense", 1);
  CHECK_THROWS_AS((void)read_test_fault(true), InvalidInput);
  CHECK(read_test_fault(false).kind.empty());
  ::unsetenv("ARTUNE_TEST_FAULT");
  CHECK(read_test_fault().kind.empty());
  CHECK(ARTUNE_HAVE_TEST_FAULTS == 1);  // this build has the tests
}

TEST_CASE("cpu_backend.corrupted_plans_are_caught") {
  CpuBackend backend(BackendOptions{});
  const int ranks = 8;
  const std::int64_t count = 800;
  const Plan plan = ring_plan(ranks, count, ReduceOp::kSum);
  REQUIRE(wrong_after_runs(backend, plan, DataType::kFloat32, ReduceOp::kSum) == 0);

  // A reduce op removed.
  int reduce_id = -1;
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kReduce && op.id > 10) {
      reduce_id = op.id;
      break;
    }
  }
  REQUIRE(reduce_id >= 0);
  CHECK(wrong_after_runs(backend, without_op(plan, reduce_id), DataType::kFloat32, ReduceOp::kSum) > 0);

  // A reduce reading one element off.
  Plan shifted = plan;
  Op& victim = shifted.ops[static_cast<std::size_t>(reduce_id)];
  victim.src.offset += victim.src.offset > 0 ? -1 : 1;
  CHECK(wrong_after_runs(backend, shifted, DataType::kFloat32, ReduceOp::kSum) > 0);

  // A copy of the all-gather sent to the wrong place.
  Plan misrouted = plan;
  Op& last = misrouted.ops.back();
  last.dst.device = (last.dst.device + 1) % ranks;
  if (last.dst.device == last.src.device) last.dst.device = (last.dst.device + 1) % ranks;
  CHECK(wrong_after_runs(backend, misrouted, DataType::kInt32, ReduceOp::kSum) > 0);

  // avg without its scale ops.
  Plan avg = ring_plan(ranks, count, ReduceOp::kAvg);
  CHECK(wrong_after_runs(backend, avg, DataType::kFloat16, ReduceOp::kAvg) == 0);
  Plan unscaled = avg;
  unscaled.ops.resize(unscaled.ops.size() - ranks);
  CHECK(wrong_after_runs(backend, unscaled, DataType::kFloat16, ReduceOp::kAvg) > 0);
}

TEST_CASE("cpu_backend.rejects_malformed_plans") {
  CpuBackend backend(BackendOptions{});
  Plan plan = ring_plan(4, 100, ReduceOp::kSum);
  plan.ops[3].dst.offset = 99;
  CHECK_THROWS_AS(backend.prepare(plan, DataType::kFloat32, ReduceOp::kSum), InvalidInput);
  CHECK_THROWS_AS(backend.run(), InvalidInput);
  // Still usable after a rejected plan.
  CHECK(wrong_after_runs(backend, ring_plan(4, 100, ReduceOp::kSum), DataType::kFloat32, ReduceOp::kSum) == 0);
}

TEST_CASE("cpu_backend.runner_rows") {
  auto backend = make_backend(BackendKind::kCpu, BackendOptions{});
  SweepConfig config;
  config.sizes = {4, 1024, 1000000};
  config.type = DataType::kFloat32;
  config.op = ReduceOp::kSum;
  config.iterations = 3;
  config.warmup = 1;
  config.check = 2;
  const auto rows = run_sweep(
      *backend, [](std::int64_t count) { return ring_plan(4, count, ReduceOp::kSum); }, config);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].count == 1);
  CHECK(rows[1].count == 256);
  CHECK(rows[2].count == 250000);
  CHECK(rows[2].bytes == 1000000);
  for (const RunRow& r : rows) {
    CHECK(r.wrong == 0);
    CHECK(r.ranks == 4);
    CHECK(r.time_us > 0);
    CHECK(r.busbw_gbps == doctest::Approx(r.algbw_gbps * 1.5));
    CHECK(r.algbw_gbps == doctest::Approx(static_cast<double>(r.bytes) / r.time_us / 1e3));
  }
  // A planted fault shows up in the row's #wrong.
  config.sizes = {4096};
  const auto bad = run_sweep(
      *backend, [](std::int64_t count) { return without_op(ring_plan(4, count, ReduceOp::kSum), 5); }, config);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].wrong > 0);
  CHECK(allreduce_bus_factor(1) == 0);
  CHECK(allreduce_bus_factor(8) == 1.75);
}

TEST_CASE("cpu_backend.backend_kinds") {
  CHECK(parse_backend_kind("cpu") == BackendKind::kCpu);
  CHECK(parse_backend_kind("nccl") == BackendKind::kNccl);
  CHECK_THROWS_WITH_AS(parse_backend_kind("gpu", "--backend"), doctest::Contains("--backend"), InvalidInput);
  CHECK(to_string(BackendKind::kMpi) == "mpi");
  CHECK(make_backend(BackendKind::kCpu, {})->name() == "cpu");
  // The cpu backend holds several prepared plans (the communicator's plan cache shares it and asks
  // holds_slots() first; a backend that cannot keeps the default, false, and a null new_slot()).
  const std::unique_ptr<HarnessBackend> cpu = make_backend(BackendKind::kCpu, {});
  CHECK(cpu->holds_slots());
  CHECK(cpu->new_slot() != nullptr);
  // Which backends run on caller streams (the communicator queues their calls there, the others on threads).
  static_assert(runs_on_streams(BackendKind::kCuda) && runs_on_streams(BackendKind::kNccl));
  static_assert(!runs_on_streams(BackendKind::kCpu) && !runs_on_streams(BackendKind::kMpi));
}

// ---------------------------------------------------------------------------
// Every algorithm family of the builders, verified statically, then run.

#include <set>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/topology/io/io.hpp"

namespace {

const std::vector<std::string>& all_family_specs() {
  static const std::vector<std::string> kSpecs = {
      "xring",      "xring#2",    "rechd",        "pscpu",       "psgpu",       "psgpu#2",    "shuffle",
      "hiercopy",   "nccl",       "mring",        "mring#2",     "tree",        "2d",         "nccl/xring",
      "nccl/rechd", "nccl/pscpu", "nccl/shuffle", "pscpu/xring", "pscpu/pscpu", "pscpu/rechd"};
  return kSpecs;
}

// Combinations the builders rightly refuse (a 2-GPU machine holds one link-disjoint ring).
bool inapplicable(const std::string& topo, const std::string& spec) { return topo == "uniform:2" && spec == "mring#2"; }

Plan verified_plan(const Topology& topo, const std::string& spec, std::int64_t count, ReduceOp op, int segments = 1) {
  BuildOptions options;
  options.count = count;
  options.reduce_op = op;
  options.segments = segments;
  Plan plan = build_plan(topo, spec, options);
  verify_or_throw(plan);
  return plan;
}

void check_family(CpuBackend& backend, const Topology& topo, const std::string& topo_name, const std::string& spec) {
  // Every type × op at a prime count.
  for (ReduceOp op : all_reduce_ops()) {
    const Plan plan = verified_plan(topo, spec, 1031, op);
    for (DataType type : all_data_types()) {
      INFO(topo_name << " " << spec << " count=1031 " << to_string(type) << " " << to_string(op));
      REQUIRE(wrong_after_runs(backend, plan, type, op) == 0);
    }
  }
  // Odd counts, fewer elements than ranks included.
  const std::int64_t ranks = static_cast<std::int64_t>(topo.gpus().size());
  for (std::int64_t count :
       {std::int64_t{1}, std::int64_t{2}, std::int64_t{7}, ranks - 1, ranks + 1, std::int64_t{97}}) {
    if (count < 1) continue;
    for (auto [type, op] : {std::pair{DataType::kFloat32, ReduceOp::kSum}, std::pair{DataType::kInt32, ReduceOp::kMax},
                            std::pair{DataType::kFloat16, ReduceOp::kAvg}}) {
      INFO(topo_name << " " << spec << " count=" << count << " " << to_string(type) << " " << to_string(op));
      REQUIRE(wrong_after_runs(backend, verified_plan(topo, spec, count, op), type, op) == 0);
    }
  }
  // Pipelined.
  INFO(topo_name << " " << spec << " segments=3");
  REQUIRE(wrong_after_runs(backend, verified_plan(topo, spec, 1031, ReduceOp::kSum, 3), DataType::kBFloat16,
                           ReduceOp::kSum) == 0);
}

void check_families_on(const std::string& topo_name) {
  const Topology topo = load_topology(topo_name);
  CpuBackend backend(BackendOptions{});
  for (const std::string& spec : all_family_specs()) {
    if (inapplicable(topo_name, spec)) {
      CHECK_THROWS_AS(verified_plan(topo, spec, 1031, ReduceOp::kSum), InvalidInput);
      continue;
    }
    check_family(backend, topo, topo_name, spec);
  }
}

}  // namespace

TEST_CASE("cpu_backend.families_uniform_2") { check_families_on("uniform:2"); }
TEST_CASE("cpu_backend.families_uniform_8") { check_families_on("uniform:8"); }
TEST_CASE("cpu_backend.families_uniform_2x8") { check_families_on("uniform:2x8"); }
TEST_CASE("cpu_backend.families_uniform_4x8") { check_families_on("uniform:4x8"); }
TEST_CASE("cpu_backend.families_dgx1_v100") { check_families_on("dgx1-v100"); }

TEST_CASE("cpu_backend.corrupted_builder_plans_are_caught") {
  // Plans from the builders with a planted fault, bypassing the verifier.
  const Topology topo = load_topology("dgx1-v100");
  CpuBackend backend(BackendOptions{});
  for (const std::string spec : {"xring", "rechd", "2d", "hiercopy", "pscpu"}) {
    const Plan plan = verified_plan(topo, spec, 1000, ReduceOp::kSum);
    REQUIRE(wrong_after_runs(backend, plan, DataType::kInt64, ReduceOp::kSum) == 0);
    int victim = -1;
    for (const Op& op : plan.ops) {
      if (op.kind == OpKind::kReduce && op.src.count > 1) victim = op.id;
    }
    REQUIRE(victim >= 0);
    INFO(spec << " without op " << victim);
    CHECK_FALSE(verify(without_op(plan, victim)).ok);
    CHECK(wrong_after_runs(backend, without_op(plan, victim), DataType::kInt64, ReduceOp::kSum) > 0);
    Plan shifted = plan;
    Location& src = shifted.ops[static_cast<std::size_t>(victim)].src;
    src.offset += src.offset > 0 ? -1 : 1;
    if (src.offset + src.count >
        shifted.buffers[static_cast<std::size_t>(src.device)][static_cast<std::size_t>(src.buffer)])
      continue;
    CHECK(wrong_after_runs(backend, shifted, DataType::kInt64, ReduceOp::kSum) > 0);
  }
}

TEST_CASE("cpu_backend.run_on_caller_buffers_and_swapped_plans") {
  CpuBackend backend(BackendOptions{});
  const Plan ring = ring_plan(3, 10, ReduceOp::kSum);
  const Plan small = ring_plan(2, 5, ReduceOp::kMax);
  backend.prepare_for_user_buffers(ring, DataType::kInt32, ReduceOp::kSum);
  // Prepared for caller buffers: nothing to run on until run_on binds them.
  CHECK_THROWS_WITH_AS(backend.run(), "cpu backend: a plan prepared for caller buffers runs through run_on()",
                       InvalidInput);
  std::vector<std::vector<std::int32_t>> a(3, std::vector<std::int32_t>(10));
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 10; ++i) a[r][i] = (r + 1) * 100 + i;
  }
  std::vector<void*> ptrs = {a[0].data(), a[1].data(), a[2].data()};
  backend.run_on(ptrs);
  for (int r = 0; r < 3; ++r) CHECK(a[r][9] == 600 + 3 * 9);
  CHECK(backend.buffer_data(1, 0) == a[1].data());  // the workers worked in the caller's memory

  // Park the ring, prepare another plan on the same workers, swap back: both still run right.
  CpuBackend::Prepared parked;
  backend.swap_prepared(parked);
  CHECK(parked.plan().ranks() == 3);
  backend.prepare_for_user_buffers(small, DataType::kInt32, ReduceOp::kMax);
  std::vector<std::int32_t> x = {1, 9, 3, 4, 5}, y = {6, 2, 8, 0, 5};
  std::vector<void*> xy = {x.data(), y.data()};
  backend.run_on(xy);
  CHECK(x == std::vector<std::int32_t>{6, 9, 8, 4, 5});
  CHECK(y == x);
  CHECK(backend.worker_count() == 3);  // workers only grow; the 2-device plan leaves one idle
  CpuBackend::Prepared second;
  backend.swap_prepared(second);
  backend.swap_prepared(parked);
  std::vector<std::vector<std::int32_t>> b(3, std::vector<std::int32_t>(10, 1));
  std::vector<void*> bp = {b[0].data(), b[1].data(), b[2].data()};
  backend.run_on(bp);  // new pointers: the tasks are rebound
  for (int r = 0; r < 3; ++r) CHECK(b[r] == std::vector<std::int32_t>(10, 3));
  CHECK_THROWS_WITH_AS(backend.run_on(xy), "cpu backend: run_on() got 2 buffers for 3 ranks", InvalidInput);
}
