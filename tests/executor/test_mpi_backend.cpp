// The mpi backend, run by meson under `mpirun -np 8` (every rank runs these
// test cases in lockstep). ARTUNE_TEST_TOPOLOGY picks the topology (default
// uniform:8); the 2x4 / 4x2 variants run through machine_index.sh, which sets
// ARTUNE_MACHINE_INDEX from the rank so the backend checks it against the
// topology. #wrong is summed over all ranks.

#include <doctest/doctest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/executor/backend.hpp"
#include "artune/executor/harness/sparse_allreduce.hpp"
#include "hand_plans.hpp"
#include "sparse_inputs.hpp"
#include "artune/executor/backend_factory.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;
using namespace artune::test;

namespace {

std::string topology_name() {
  const char* env = std::getenv("ARTUNE_TEST_TOPOLOGY");
  return env != nullptr && *env != '\0' ? env : "uniform:8";
}

const Topology& topology() {
  static const Topology topo = load_topology(topology_name());
  return topo;
}

// One backend for the whole program: MPI can be initialised only once per process.
HarnessBackend& mpi() {
  static std::unique_ptr<HarnessBackend> backend = [] {
    BackendOptions options;
    options.timeout_s = 60;
    options.topology = &topology();
    return make_backend(BackendKind::kMpi, options);
  }();
  return *backend;
}

// Hand-built plans number their devices 0..R-1; place rank r on the topology's GPU r so the
// declared machine indices match.
Plan on_topology(Plan plan) {
  for (int r = 0; r < plan.ranks() && r < static_cast<int>(topology().gpus().size()); ++r) {
    plan.devices[static_cast<std::size_t>(r)].node = topology().gpus()[static_cast<std::size_t>(r)];
  }
  return plan;
}

// Runs twice; returns #wrong of the second run summed over ranks.
std::int64_t wrong_after_runs(const Plan& plan, DataType type, ReduceOp op, int flip_rank = -1) {
  HarnessBackend& b = mpi();
  b.prepare(on_topology(plan), type, op);
  double wrong = 0;
  for (int it = 0; it < 2; ++it) {
    const bool flipped = it == 1 && b.local_ranks().front() == flip_rank;
    b.fill_inputs(flipped ? 7 : it);  // a flipped rank feeds other inputs than expected
    b.run();
    wrong = b.all_sum(static_cast<double>(b.count_wrong(it)));
  }
  return static_cast<std::int64_t>(wrong);
}

Plan verified_plan(const std::string& spec, std::int64_t count, ReduceOp op, int segments = 1) {
  BuildOptions options;
  options.count = count;
  options.reduce_op = op;
  options.segments = segments;
  Plan plan = build_plan(topology(), spec, options);
  verify_or_throw(plan);
  return plan;
}

const char* const kSpecs[] = {"xring",        "xring#2",     "rechd",       "pscpu",      "psgpu",
                              "psgpu#2",      "shuffle",     "hiercopy",    "nccl",       "mring",
                              "tree",         "2d",          "nccl/xring",  "nccl/rechd", "nccl/pscpu",
                              "nccl/shuffle", "pscpu/xring", "pscpu/pscpu", "pscpu/rechd"};

}  // namespace

TEST_CASE("mpi_backend.rank_layout") {
  HarnessBackend& b = mpi();
  CHECK(b.name() == "mpi");
  CHECK(b.local_ranks().size() == 1);
  CHECK(b.is_root() == (b.local_ranks().front() == 0));
  CHECK(b.all_sum(1) == 8);
  CHECK(b.all_max(b.local_ranks().front()) == 7);
}

TEST_CASE("mpi_backend.families_every_type_and_op") {
  for (const char* spec : kSpecs) {
    for (ReduceOp op : all_reduce_ops()) {
      const Plan plan = verified_plan(spec, 1031, op);
      for (DataType type : all_data_types()) {
        INFO(topology_name() << " " << spec << " " << to_string(type) << " " << to_string(op));
        REQUIRE(wrong_after_runs(plan, type, op) == 0);
      }
    }
  }
}

TEST_CASE("mpi_backend.odd_counts_and_pipelines") {
  for (const char* spec : kSpecs) {
    for (std::int64_t count : {1, 2, 7, 9, 97}) {
      INFO(topology_name() << " " << spec << " count=" << count);
      REQUIRE(wrong_after_runs(verified_plan(spec, count, ReduceOp::kSum), DataType::kFloat32, ReduceOp::kSum) == 0);
      REQUIRE(wrong_after_runs(verified_plan(spec, count, ReduceOp::kAvg), DataType::kFloat16, ReduceOp::kAvg) == 0);
    }
    INFO(topology_name() << " " << spec << " segments=3");
    REQUIRE(wrong_after_runs(verified_plan(spec, 1031, ReduceOp::kMax, 3), DataType::kInt64, ReduceOp::kMax) == 0);
  }
}

TEST_CASE("mpi_backend.hand_plans_with_library_collectives") {
  // Reduce-scatter/all-gather, reduce/broadcast and all-reduce groups in a rotated member order.
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kReduce}) {
    for (std::int64_t count : {3, 1000}) {
      for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kUInt8}) {
        for (ReduceOp op : all_reduce_ops()) {
          INFO(to_string(c) << " count=" << count << " " << to_string(type) << " " << to_string(op));
          REQUIRE(wrong_after_runs(group_plan(8, count, op, c), type, op) == 0);
        }
      }
    }
  }
  REQUIRE(wrong_after_runs(hierarchical_plan(8, 3, 100, ReduceOp::kSum), DataType::kInt32, ReduceOp::kSum) == 0);
}

TEST_CASE("mpi_backend.allgather_reducescatter_families") {
  // Issue 17: every all-gather and reduce-scatter family and hybrid, every type and op, odd counts, a pipeline.
  const std::pair<Collective, const char*> cases[] = {
      {Collective::kAllGather, "ring"},
      {Collective::kAllGather, "bruck"},
      {Collective::kAllGather, "rd"},
      {Collective::kAllGather, "nccl"},
      {Collective::kReduceScatter, "ring"},
      {Collective::kReduceScatter, "halving"},
      {Collective::kReduceScatter, "nccl"},
      {Collective::kAllGather, "2d"},
      {Collective::kReduceScatter, "2d"},
      // The hybrids (the library inside machines, a point-to-point family across; on uniform:8 the library alone).
      {Collective::kAllGather, "nccl/ring"},
      {Collective::kAllGather, "nccl/bruck"},
      {Collective::kAllGather, "nccl/rd"},
      {Collective::kReduceScatter, "nccl/ring"},
      {Collective::kReduceScatter, "nccl/halving"}};
  auto plan_of = [](Collective c, const char* spec, std::int64_t count, ReduceOp op, int segments = 1) {
    BuildOptions options;
    options.count = count;
    options.reduce_op = op;
    options.collective = c;
    options.segments = segments;
    return build_collective_plan(topology(), spec, options);
  };
  for (const auto& [c, spec] : cases) {
    for (ReduceOp op : all_reduce_ops()) {
      const Plan plan = plan_of(c, spec, 1031, op);
      for (DataType type : all_data_types()) {
        INFO(topology_name() << " " << collective_flag_name(c) << " " << spec << " " << to_string(type) << " "
                             << to_string(op));
        REQUIRE(wrong_after_runs(plan, type, op) == 0);
      }
    }
    for (std::int64_t count : {1, 7, 9, 97}) {
      INFO(topology_name() << " " << collective_flag_name(c) << " " << spec << " count=" << count);
      REQUIRE(wrong_after_runs(plan_of(c, spec, count, ReduceOp::kSum), DataType::kFloat32, ReduceOp::kSum) == 0);
      REQUIRE(wrong_after_runs(plan_of(c, spec, count, ReduceOp::kAvg), DataType::kFloat16, ReduceOp::kAvg) == 0);
    }
    INFO(topology_name() << " " << collective_flag_name(c) << " " << spec << " segments=3");
    REQUIRE(wrong_after_runs(plan_of(c, spec, 1031, ReduceOp::kMax, 3), DataType::kInt64, ReduceOp::kMax) == 0);
  }
}

TEST_CASE("mpi_backend.uneven_blocks") {
  // Per-rank blocks (Plan::blocks; rank 1's is empty): each rank fills and checks its real block.
  const int ranks = static_cast<int>(topology().gpus().size());
  BuildOptions options;
  for (int k = 0; k < ranks; ++k) options.blocks.push_back(k == 1 ? 0 : 2 * k + 1);
  for (const std::int64_t b : options.blocks) options.count += b;
  const std::pair<Collective, const char*> cases[] = {{Collective::kAllGather, "ring"},
                                                      {Collective::kAllGather, "bruck"},
                                                      {Collective::kAllGather, "rd"},
                                                      {Collective::kReduceScatter, "ring"},
                                                      {Collective::kReduceScatter, "halving"}};
  for (const auto& [c, spec] : cases) {
    options.collective = c;
    const Plan plan = build_collective_plan(topology(), spec, options);
    INFO(topology_name() << " " << collective_flag_name(c) << " " << spec);
    REQUIRE(plan.blocks == options.blocks);
    REQUIRE(wrong_after_runs(plan, DataType::kFloat32, ReduceOp::kSum) == 0);
  }
}

TEST_CASE("mpi_backend.sparse_allreduce") {
  // Issue 17: IndexedSlices (every float type) all-gathered (every family) and summed, against a dense
  // reference of all ranks.
  const int ranks = static_cast<int>(topology().gpus().size());
  const int me = mpi().local_ranks().empty() ? 0 : mpi().local_ranks().front();
  for (const char* spec : {"ring", "bruck", "rd", "nccl"}) {
    for (int pattern = 0; pattern < 4; ++pattern) {
      for (const DataType type : {DataType::kFloat64, DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
        std::vector<IndexedSlices> all;
        for (int r = 0; r < ranks; ++r) all.push_back(sparse_input(pattern, r, 40, 3, type));
        const auto got = sparse_allreduce(mpi(), topology(), spec, {all[static_cast<std::size_t>(me)]});
        INFO(topology_name() << " " << spec << " pattern " << pattern << " " << to_string(type) << " rank " << me);
        REQUIRE(got.size() == 1);
        const bool same = got.front() == dense_reference(all, 40, 3);
        REQUIRE(mpi().all_sum(same ? 0 : 1) == 0);
      }
    }
  }
}

TEST_CASE("mpi_backend.planted_faults_are_caught") {
  const Plan plan = verified_plan("xring", 1000, ReduceOp::kSum);
  REQUIRE(wrong_after_runs(plan, DataType::kInt32, ReduceOp::kSum) == 0);
  int victim = -1;
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kReduce && op.src.count > 1) victim = op.id;
  }
  REQUIRE(victim >= 0);
  CHECK(wrong_after_runs(without_op(plan, victim), DataType::kInt32, ReduceOp::kSum) > 0);
  CHECK(wrong_after_runs(plan, DataType::kInt32, ReduceOp::kSum, /*flip_rank=*/2) > 0);
  // And a clean run afterwards still passes.
  CHECK(wrong_after_runs(plan, DataType::kInt32, ReduceOp::kSum) == 0);
}

TEST_CASE("mpi_backend.rejects_plans_of_another_size") {
  // Every rank throws the same error; no rank is left waiting.
  CHECK_THROWS_WITH_AS(mpi().prepare(ring_plan(4, 10, ReduceOp::kSum), DataType::kFloat32, ReduceOp::kSum),
                       doctest::Contains("mpirun -np 4"), InvalidInput);
  CHECK(wrong_after_runs(ring_plan(8, 10, ReduceOp::kSum), DataType::kFloat32, ReduceOp::kSum) == 0);
}
