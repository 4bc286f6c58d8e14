// All-gather and reduce-scatter plans (issue 17) executed on the cpu backend: every family, every
// element type and reduce op, odd counts, pipelines, uneven per-rank blocks, with #wrong = 0; planted
// faults are caught; the runner's row carries nccl-tests' (n−1)/n bus factor.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/executor/cpu/cpu_backend.hpp"
#include "artune/executor/harness/runner.hpp"
#include "artune/executor/harness/verification.hpp"
#include "artune/topology/io/io.hpp"
#include "tests/test_support.hpp"

using namespace artune;

namespace {

using artune_test::wrong_after_runs;

Plan kind_plan(const Topology& topo, Collective c, const std::string& spec, std::int64_t count, ReduceOp op,
               int segments = 1) {
  BuildOptions o;
  o.count = count;
  o.reduce_op = op;
  o.collective = c;
  o.segments = segments;
  return build_collective_plan(topo, spec, o);
}

struct Case {
  Collective collective;
  const char* spec;
};
const std::vector<Case> kCases = {
    {Collective::kAllGather, "ring"},     {Collective::kAllGather, "bruck"},    {Collective::kAllGather, "rd"},
    {Collective::kAllGather, "nccl"},     {Collective::kReduceScatter, "ring"}, {Collective::kReduceScatter, "halving"},
    {Collective::kReduceScatter, "nccl"},
};

}  // namespace

TEST_CASE("collectives_exec.cpu_every_family_type_op_and_odd_count") {
  CpuBackend backend(BackendOptions{});
  for (int p : {2, 3, 5, 8}) {
    const Topology topo = load_topology(fmt::format("uniform:{}", p));
    for (const Case& k : kCases) {
      for (ReduceOp op : all_reduce_ops()) {
        const Plan plan = kind_plan(topo, k.collective, k.spec, 1031, op);
        for (DataType type : all_data_types()) {
          INFO(p << " " << collective_flag_name(k.collective) << " " << k.spec << " " << to_string(type) << " "
                 << to_string(op));
          REQUIRE(wrong_after_runs(backend, plan, type, op) == 0);
        }
      }
      for (std::int64_t count : {1, 2, p - 1, p + 1, 13, 97}) {
        if (count < 1) continue;
        INFO(p << " " << collective_flag_name(k.collective) << " " << k.spec << " count=" << count);
        REQUIRE(wrong_after_runs(backend, kind_plan(topo, k.collective, k.spec, count, ReduceOp::kSum),
                                 DataType::kFloat32, ReduceOp::kSum) == 0);
        REQUIRE(wrong_after_runs(backend, kind_plan(topo, k.collective, k.spec, count, ReduceOp::kAvg),
                                 DataType::kFloat16, ReduceOp::kAvg) == 0);
      }
      INFO(p << " " << collective_flag_name(k.collective) << " " << k.spec << " segments=3");
      REQUIRE(wrong_after_runs(backend, kind_plan(topo, k.collective, k.spec, 1031, ReduceOp::kMax, 3),
                               DataType::kInt64, ReduceOp::kMax) == 0);
    }
  }
}

TEST_CASE("collectives_exec.cpu_two_d_across_machines") {
  CpuBackend backend(BackendOptions{});
  for (const char* name : {"uniform:2x4", "uniform:3x2"}) {
    const Topology topo = load_topology(name);
    for (Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
      for (ReduceOp op : all_reduce_ops()) {
        for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kUInt8, DataType::kInt64}) {
          INFO(name << " " << collective_flag_name(c) << " 2d " << to_string(type) << " " << to_string(op));
          REQUIRE(wrong_after_runs(backend, kind_plan(topo, c, "2d", 1031, op), type, op) == 0);
        }
      }
      for (std::int64_t count : {1, 5, 97}) {
        INFO(name << " " << collective_flag_name(c) << " 2d count=" << count);
        REQUIRE(wrong_after_runs(backend, kind_plan(topo, c, "2d", count, ReduceOp::kSum), DataType::kFloat32,
                                 ReduceOp::kSum) == 0);
      }
    }
  }
}

TEST_CASE("collectives_exec.cpu_hybrids_across_machines") {
  // nccl/ring, nccl/bruck, nccl/rd and nccl/halving: the cpu backend runs each machine's group ops with the
  // library's semantics (shard k of the chunk to member k) around the point-to-point columns.
  CpuBackend backend(BackendOptions{});
  const std::vector<Case> hybrids = {{Collective::kAllGather, "nccl/ring"},
                                     {Collective::kAllGather, "nccl/bruck"},
                                     {Collective::kAllGather, "nccl/rd"},
                                     {Collective::kReduceScatter, "nccl/ring"},
                                     {Collective::kReduceScatter, "nccl/halving"}};
  for (const char* name : {"uniform:2x2", "uniform:3x2", "uniform:2x3", "uniform:4x2"}) {
    const Topology topo = load_topology(name);
    for (const Case& k : hybrids) {
      for (ReduceOp op : all_reduce_ops()) {
        const Plan plan = kind_plan(topo, k.collective, k.spec, 1031, op);
        for (DataType type : all_data_types()) {
          INFO(name << " " << collective_flag_name(k.collective) << " " << k.spec << " " << to_string(type) << " "
                    << to_string(op));
          REQUIRE(wrong_after_runs(backend, plan, type, op) == 0);
        }
      }
      const int p = static_cast<int>(topo.gpus().size());
      for (std::int64_t count : {1, 2, p - 1, p + 1, 13, 97}) {
        INFO(name << " " << collective_flag_name(k.collective) << " " << k.spec << " count=" << count);
        REQUIRE(wrong_after_runs(backend, kind_plan(topo, k.collective, k.spec, count, ReduceOp::kSum),
                                 DataType::kFloat32, ReduceOp::kSum) == 0);
        REQUIRE(wrong_after_runs(backend, kind_plan(topo, k.collective, k.spec, count, ReduceOp::kAvg),
                                 DataType::kBFloat16, ReduceOp::kAvg) == 0);
      }
      INFO(name << " " << collective_flag_name(k.collective) << " " << k.spec << " segments=3");
      REQUIRE(wrong_after_runs(backend, kind_plan(topo, k.collective, k.spec, 1031, ReduceOp::kMax, 3),
                               DataType::kInt64, ReduceOp::kMax) == 0);
    }
  }
}

TEST_CASE("collectives_exec.planted_faults_are_caught") {
  const Topology topo = load_topology("uniform:4");
  CpuBackend backend(BackendOptions{});
  for (const Case& k : kCases) {
    if (std::string(k.spec) == "nccl") continue;
    Plan plan = kind_plan(topo, k.collective, k.spec, 400, ReduceOp::kSum);
    // Drop the last transfer: its destination block stays stale (all-gather: 0; reduce-scatter: a partial).
    int victim = -1;
    for (const Op& op : plan.ops) {
      if (is_transfer(op)) victim = op.id;
    }
    REQUIRE(victim >= 0);
    Plan broken = plan;
    broken.ops[static_cast<std::size_t>(victim)].dst.count = 0;
    broken.ops[static_cast<std::size_t>(victim)].src.count = 0;
    CHECK_FALSE(verify(broken).ok);
    INFO(collective_flag_name(k.collective) << " " << k.spec);
    CHECK(wrong_after_runs(backend, broken, DataType::kInt32, ReduceOp::kSum) > 0);
  }
}

TEST_CASE("collectives_exec.check_is_per_block") {
  // All-gather: rank k's input in block k on every rank; reduce-scatter: only rank k's block k counts.
  const int ranks = 3;
  const std::int64_t count = 10;  // blocks of 4, 3, 3
  std::vector<float> buf(static_cast<std::size_t>(count));
  fill_collective_input(buf.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kAllGather, ranks, 1, count, 0);
  for (std::int64_t i = 0; i < count; ++i) {
    CAPTURE(i);
    if (i >= 4 && i < 7) {
      CHECK(buf[static_cast<std::size_t>(i)] == input_value(ReduceOp::kSum, ranks, 1, i, 0));
    } else {
      CHECK(buf[static_cast<std::size_t>(i)] == 0.0f);
    }
  }
  // Blocks 0 and 2 never arrived: 7 wrong elements.
  CHECK(count_collective_wrong(buf.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kAllGather, ranks, 1, count,
                               0) == 7);
  for (int k = 0; k < ranks; ++k) {
    for (std::int64_t i = 0; i < count; ++i) {
      const auto [off, n] = collective_block(count, ranks, k);
      if (i >= off && i < off + n) {
        buf[static_cast<std::size_t>(i)] = static_cast<float>(input_value(ReduceOp::kSum, ranks, k, i, 0));
      }
    }
  }
  CHECK(count_collective_wrong(buf.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kAllGather, ranks, 2, count,
                               0) == 0);
  // Reduce-scatter: rank 2 is judged on elements [7, 10) alone.
  std::vector<float> rs(static_cast<std::size_t>(count), -1.0f);
  for (std::int64_t i = 7; i < 10; ++i) {
    rs[static_cast<std::size_t>(i)] = static_cast<float>(expected_value(ReduceOp::kSum, ranks, i, 0));
  }
  CHECK(count_collective_wrong(rs.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kReduceScatter, ranks, 2,
                               count, 0) == 0);
  CHECK(count_collective_wrong(rs.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kReduceScatter, ranks, 0,
                               count, 0) == 4);
}

TEST_CASE("collectives_exec.uneven_blocks_run_and_are_checked") {
  // Per-rank blocks (Plan::blocks, empty ones included): inputs are written into, and results checked
  // against, each rank's real block; a dropped transfer is still caught.
  CpuBackend backend(BackendOptions{});
  const Topology topo = load_topology("uniform:5");
  const std::vector<std::int64_t> blocks = {5, 0, 3, 9, 1};
  for (const Case& k : kCases) {
    if (std::string(k.spec) == "nccl") continue;  // NCCL has no all-gather-v / reduce-scatter-v
    BuildOptions o;
    o.count = 18;
    o.collective = k.collective;
    o.blocks = blocks;
    const Plan plan = build_collective_plan(topo, k.spec, o);
    REQUIRE(plan.blocks == blocks);
    INFO(collective_flag_name(k.collective) << " " << k.spec);
    for (DataType type : {DataType::kFloat32, DataType::kInt64, DataType::kBFloat16}) {
      CHECK(wrong_after_runs(backend, plan, type, ReduceOp::kSum) == 0);
    }
    Plan broken = plan;
    for (Op& op : broken.ops) {
      if (is_transfer(op) && op.dst.count > 0) {
        op.dst.count = op.src.count = 0;
        break;
      }
    }
    CHECK(wrong_after_runs(backend, broken, DataType::kInt32, ReduceOp::kSum) > 0);
  }
  // Rank 2's all-gather input fills its block [5, 8) alone; the same buffer after a full gather of the
  // even layout is wrong outside the blocks they share.
  std::vector<float> buf(18, -1.0f);
  fill_collective_input(buf.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kAllGather, 5, 2, 18, 0, blocks);
  for (std::int64_t i = 0; i < 18; ++i) {
    CAPTURE(i);
    const float want = i >= 5 && i < 8 ? static_cast<float>(input_value(ReduceOp::kSum, 5, 2, i, 0)) : 0.0f;
    CHECK(buf[static_cast<std::size_t>(i)] == want);
  }
  CHECK(count_collective_wrong(buf.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kAllGather, 5, 2, 18, 0,
                               blocks) == 15);
  // Reduce-scatter: rank 3 is judged on its block [8, 17) alone.
  std::vector<float> rs(18, -1.0f);
  for (std::int64_t i = 8; i < 17; ++i) {
    rs[static_cast<std::size_t>(i)] = static_cast<float>(expected_value(ReduceOp::kSum, 5, i, 0));
  }
  CHECK(count_collective_wrong(rs.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kReduceScatter, 5, 3, 18, 0,
                               blocks) == 0);
  CHECK(count_collective_wrong(rs.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kReduceScatter, 5, 1, 18, 0,
                               blocks) == 0);  // rank 1's block is empty
  CHECK(count_collective_wrong(rs.data(), DataType::kFloat32, ReduceOp::kSum, Collective::kReduceScatter, 5, 0, 18, 0,
                               blocks) == 5);
}

TEST_CASE("collectives_exec.runner_row_bus_factor") {
  const Topology topo = load_topology("uniform:4");
  CpuBackend backend(BackendOptions{});
  SweepConfig config;
  config.iterations = 3;
  config.warmup = 1;
  config.check = 1;
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    const RunRow row = run_plan(backend, kind_plan(topo, c, "ring", 4096, ReduceOp::kSum), config);
    CHECK(row.collective == c);
    CHECK(row.wrong == 0);
    CHECK(row.bytes == 4096 * 4);
    REQUIRE(row.algbw_gbps > 0);
    CHECK(row.busbw_gbps == doctest::Approx(row.algbw_gbps * 0.75));
  }
}
