// artune::Communicator beyond all-reduce and at odd counts (cpu backend): all-gather and reduce-scatter
// with NCCL's buffer conventions (every type, reduce-scatter every op, in place and out of place, odd
// counts), plans from a table per collective or tuned in memory; and bucket plans re-targeted to the
// call's exact count (same plan shape, verified) instead of padded.

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/communicator.hpp"
#include "artune/executor/cpu/cpu_backend.hpp"
#include "artune/executor/schedule.hpp"
#include "artune/executor/harness/verification.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/collective_tuning.hpp"
#include "artune/tuner/decision_table.hpp"
#include "artune/tuner/search.hpp"
#include "tests/executor/collective_calls.hpp"
#include "tests/executor/comm_threads.hpp"
#include "tests/test_support.hpp"

using namespace artune;
using artune_test::message_of;
using artune_test::on_threads;
using artune_test::require_no_errors;

namespace {

// Wrong elements over every rank of one collective call.
std::int64_t group_wrong(std::vector<Communicator>& comms, Collective c, DataType type, ReduceOp op,
                         std::int64_t count_per_rank, bool in_place, int iteration = 0) {
  std::atomic<std::int64_t> wrong{0};
  require_no_errors(on_threads(comms, [&](int r) {
    wrong += artune_test::collective_wrong(comms[static_cast<std::size_t>(r)], c, type, op, count_per_rank, in_place,
                                           iteration);
  }));
  return wrong.load();
}

CommOptions small_options(const std::string& topology) {
  CommOptions o;
  o.topology = topology;
  o.tune_sizes = {64, 4096, 65536};
  o.timeout_s = 30;
  return o;
}

}  // namespace

TEST_CASE("communicator.cpu_allgather_and_reducescatter_every_type_and_op") {
  // Three ranks (blocks of odd counts), plans tuned in memory for each collective at its first call.
  auto comms = Communicator::create_local(BackendKind::kCpu, small_options("uniform:3"), 3);
  for (DataType type : all_data_types()) {
    for (std::int64_t count : {1, 5, 333, 4001}) {
      for (bool in_place : {true, false}) {
        INFO(to_string(type) << " count " << count << " in place " << in_place);
        CHECK(group_wrong(comms, Collective::kAllGather, type, ReduceOp::kSum, count, in_place) == 0);
        CHECK(comms[1].last_plan().collective == Collective::kAllGather);
        CHECK(comms[1].last_plan().count == 3 * count);
        for (ReduceOp op : all_reduce_ops()) {
          if (max_verifiable_ranks(type, op) < 3) continue;
          INFO(to_string(op));
          CHECK(group_wrong(comms, Collective::kReduceScatter, type, op, count, in_place, 1) == 0);
        }
      }
    }
  }
  CHECK(comms[0].last_plan().collective == Collective::kReduceScatter);
  CHECK(comms[0].retargeted_plans() > 0);  // blocks of 1, 5, 333 and 4001 from three bucket plans per type
  CHECK(comms[0].size_buckets(Collective::kAllGather) == std::vector<std::uint64_t>{64, 4096, 65536});
  // Both collectives' plans share the cache (and the all-reduce's) by (collective, bucket, type, op).
  CHECK(comms[0].dump_cache().find("reducescatter ") == 0);
  CHECK(comms[0].worker_threads() == 3);
}

TEST_CASE("communicator.cpu_collective_plans_from_a_table_per_collective") {
  const Topology topo = load_topology("uniform:4");
  artune_test::ScratchDir dir("artune-comm-coll");
  std::string paths[2];
  DecisionTable tables[2];
  const Collective kinds[2] = {Collective::kAllGather, Collective::kReduceScatter};
  for (int i = 0; i < 2; ++i) {
    SearchOptions s;
    s.sizes = {1024, 1 << 20};
    s.candidates.collective = kinds[i];
    tables[i] = search(topo, s).table;
    paths[i] = (dir.path() / (std::string(collective_flag_name(kinds[i])) + ".json")).string();
    write_decision_table(paths[i], tables[i]);
  }
  CommOptions o;
  o.topology = "uniform:4";
  o.spec = "xring";
  o.allgather_table = paths[0];
  o.reducescatter_table = paths[1];
  auto comms = Communicator::create_local(BackendKind::kCpu, o, 4);
  CHECK(comms[0].size_buckets(Collective::kAllGather) == std::vector<std::uint64_t>{1024, 1 << 20});
  for (int i = 0; i < 2; ++i) {
    for (std::int64_t count : {3, 1000, 50000}) {
      CHECK(group_wrong(comms, kinds[i], DataType::kFloat32, ReduceOp::kSum, count, false) == 0);
      const PlanInfo p = comms[2].last_plan();
      const std::uint64_t bucket = count * 4 * 4 <= 1024 ? 1024 : 1 << 20;
      CHECK(p.collective == kinds[i]);
      CHECK(p.bucket_bytes == bucket);
      CHECK(p.label == tables[i].lookup(bucket).plan.label());
      CHECK(p.count == 4 * count);
    }
  }
  // The all-reduce still runs the spec.
  std::vector<std::vector<float>> x(4, std::vector<float>(1, 1.0f));
  require_no_errors(on_threads(
      comms, [&](int r) { comms[r].allreduce(x[r].data(), x[r].data(), 1, DataType::kFloat32, ReduceOp::kSum); }));
  CHECK(x[3][0] == 4.0f);
  CHECK(comms[0].last_plan().label == "xring");
  // A table of the other collective is refused at the first call, naming the option.
  CommOptions swapped = o;
  swapped.allgather_table = paths[1];
  auto bad = Communicator::create_local(BackendKind::kCpu, swapped, 4);
  const auto errors = on_threads(bad, [&](int r) {
    std::vector<float> v(4, 1.0f);
    bad[r].allgather(v.data() + r, v.data(), 1, DataType::kFloat32);
  });
  const std::string message = message_of(errors[0]);
  CHECK(message.find("CommOptions::allgather_table: ") == 0);
  CHECK(message.find("was tuned for reducescatter, not allgather") != std::string::npos);
}

TEST_CASE("communicator.bucket_plans_retarget_to_any_smaller_count") {
  // What re-targeting relies on: a plan built for any count in (bucket/2, bucket] has the bucket plan's shape
  // (same ops, deps, groups; only element ranges differ) and passes the static verifier (build_plan runs it).
  const Topology four = load_topology("uniform:4");
  const Topology three = load_topology("uniform:3");
  struct Case {
    const Topology* topo;
    Collective c;
    const char* spec;
  };
  const std::vector<Case> cases = {
      {&four, Collective::kAllReduce, "xring"},       {&four, Collective::kAllReduce, "rechd"},
      {&four, Collective::kAllReduce, "tree"},        {&four, Collective::kAllReduce, "pscpu"},
      {&four, Collective::kAllReduce, "2d"},          {&three, Collective::kAllReduce, "ring"},
      {&four, Collective::kAllGather, "ring"},        {&three, Collective::kAllGather, "bruck"},
      {&three, Collective::kAllGather, "rd"},         {&four, Collective::kReduceScatter, "ring"},
      {&three, Collective::kReduceScatter, "halving"}};
  for (const Case& k : cases) {
    const int p = k.topo->gpus().size();
    for (std::int64_t bucket : {std::int64_t{96}, std::int64_t{4096 * 3}, std::int64_t{3 << 16}}) {
      BuildOptions b;
      b.collective = k.c;
      b.count = bucket;
      const Plan base = build_collective_plan(*k.topo, k.spec, b);
      int checked = 0;
      for (std::int64_t n = bucket / 2 + 1; n <= bucket; n += 1 + bucket / 61) {
        b.count = k.c == Collective::kAllReduce ? n : n / p * p;
        INFO(k.spec << " " << collective_flag_name(k.c) << " bucket " << bucket << " count " << b.count);
        const Plan at = build_collective_plan(*k.topo, k.spec, b);  // verified
        CHECK(same_shape(base, at));
        CHECK(at.count == b.count);
        ++checked;
      }
      CHECK(checked >= 20);
    }
  }
  // A different plan is not the same shape.
  BuildOptions b;
  b.count = 1000;
  CHECK_FALSE(same_shape(build_plan(four, "xring", b), build_plan(four, "rechd", b)));
}

TEST_CASE("communicator.cpu_odd_counts_run_one_exact_plan") {
  // Counts around the buckets (64 B, 4 KiB, 64 KiB of floats) and beyond the largest: exact sums; each call is
  // one run of the smallest bucket holding it, re-targeted to the count (beyond the largest: runs of it, then
  // the rest re-targeted); one compile per bucket.
  CommOptions o = small_options("uniform:4");
  o.spec = "xring";
  auto comms = Communicator::create_local(BackendKind::kCpu, o, 4);
  std::vector<std::vector<float>> data(4);
  std::atomic<std::int64_t> wrong{0};
  const std::vector<std::int64_t> counts = {15, 16, 17, 1023, 1025, 16383, 16384, 16385, 40000};
  require_no_errors(on_threads(comms, [&](int r) {
    for (std::int64_t n : counts) {
      auto& v = data[static_cast<std::size_t>(r)];
      v.assign(static_cast<std::size_t>(n), 0.0f);
      for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>((i * 3 + r) % 11);
      comms[r].allreduce(v.data(), v.data(), n, DataType::kFloat32, ReduceOp::kSum);
      for (std::int64_t i = 0; i < n; ++i) {
        float expect = 0;
        for (int q = 0; q < 4; ++q) expect += static_cast<float>((i * 3 + q) % 11);
        if (v[static_cast<std::size_t>(i)] != expect) ++wrong;
      }
      if (r == 0 && n <= 16384) CHECK(comms[0].last_plan().count == n);
    }
  }));
  CHECK(wrong.load() == 0);
  CHECK(comms[0].compiled_plans() == 3);
  // 16385 and 40000 floats: runs of the 64 KiB bucket, then the rest (1 and 7232 floats) re-targeted.
  CHECK(comms[0].last_plan().count == 40000 - 2 * 16384);
  CHECK(comms[0].last_plan().bucket == 2);
  CHECK(comms[0].retargeted_plans() >= 7);
}

TEST_CASE("communicator.collective_calls_refuse_bad_usage") {
  auto comms = Communicator::create_local(BackendKind::kCpu, small_options("uniform:2"), 2);
  std::vector<float> v(8, 1.0f);
  int stream = 0;
  const auto message = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Checked before the rendezvous: one rank alone gets the error.
  CHECK(message([&] { comms[0].allgather(v.data(), v.data() + 4, 2, DataType::kFloat32, &stream); }) ==
        "allgather: a stream is for the cuda and nccl backends");
  CHECK(message([&] { comms[0].reducescatter(v.data(), v.data(), -1, DataType::kFloat32, ReduceOp::kSum); }) ==
        "reducescatter: count -1 is negative");
  CHECK(message([&] { comms[1].allgather(v.data(), v.data(), 2, DataType::kFloat32); }) ==
        "allgather: send overlaps recv without being this rank's block of it");
  CHECK(message([&] { comms[0].reducescatter(v.data(), v.data() + 1, 2, DataType::kFloat32, ReduceOp::kSum); }) ==
        "reducescatter: recv overlaps send without being this rank's block of it");
  // Ranks that call different collectives: every rank gets the error, naming both.
  std::vector<std::vector<float>> w(2, std::vector<float>(8, 1.0f));
  const auto errors = on_threads(comms, [&](int r) {
    auto& x = w[static_cast<std::size_t>(r)];
    if (r == 0) comms[0].allgather(x.data(), x.data(), 2, DataType::kFloat32);
    if (r == 1) comms[1].reducescatter(x.data(), x.data() + 2, 2, DataType::kFloat32, ReduceOp::kSum);
  });
  for (const auto& e : errors) {
    const std::string text = message_of(e);
    CHECK((text == "allgather: rank 1 called reducescatter but rank 0 allgather" ||
           text == "reducescatter: rank 1 called reducescatter but rank 0 allgather"));
  }
}

TEST_CASE("communicator.cpu_backend_retarget_keeps_buffers_and_refuses_other_shapes") {
  const Topology topo = load_topology("uniform:3");
  BuildOptions b;
  b.count = 1000;
  CpuBackend backend(BackendOptions{});
  backend.prepare_for_user_buffers(build_plan(topo, "pscpu", b), DataType::kInt32, ReduceOp::kSum);
  // A smaller count of the same plan: re-targeted, then exact on caller buffers of that count.
  b.count = 777;
  REQUIRE(backend.retarget(build_plan(topo, "pscpu", b)));
  std::vector<std::vector<std::int32_t>> data(3, std::vector<std::int32_t>(777));
  for (int r = 0; r < 3; ++r) fill_input(data[r].data(), DataType::kInt32, ReduceOp::kSum, 3, r, 0, 777, 0);
  std::vector<void*> user = {data[0].data(), data[1].data(), data[2].data()};
  backend.run_on(user);
  std::vector<std::int32_t> expected(777);
  fill_expected(expected.data(), DataType::kInt32, ReduceOp::kSum, 3, 0, 777, 0);
  for (int r = 0; r < 3; ++r) CHECK(data[r] == expected);
  // A larger count needs more scratch than was allocated (the helper's gather buffer); another algorithm has
  // another shape: both refused, the prepared plan unchanged.
  b.count = 2000;
  CHECK_FALSE(backend.retarget(build_plan(topo, "pscpu", b)));
  b.count = 777;
  CHECK_FALSE(backend.retarget(build_plan(topo, "xring", b)));
  CHECK(backend.buffer_data(3, 0) != nullptr);  // the helper keeps its gather buffer
  backend.run_on(user);
  for (int r = 0; r < 3; ++r) {
    for (std::int64_t i = 0; i < 777; ++i)
      CHECK(data[r][static_cast<std::size_t>(i)] == 3 * expected[static_cast<std::size_t>(i)]);
  }
}
