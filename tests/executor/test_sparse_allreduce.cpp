// Sparse all-reduce of IndexedSlices on the cpu backend (issue 17): every all-gather family, rank
// counts 2…8, values in float64, float32, float16 and bfloat16, against a dense reference; duplicates
// within and across ranks, empty ranks, every rank on one row, all empty; float16 sums rounded in
// float16; bad inputs (and mixed widths or value types) refused naming the rank.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include "artune/core/error.hpp"
#include "artune/executor/cpu/cpu_backend.hpp"
#include "artune/executor/harness/sparse_allreduce.hpp"
#include "sparse_inputs.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;
using namespace artune::test;

namespace {
// Row widths × value types of the reference test (every float type at width 3, float64 at 1 too).
const std::vector<std::pair<std::int64_t, DataType>> kWidthsAndTypes = {{1, DataType::kFloat64},
                                                                        {3, DataType::kFloat64},
                                                                        {3, DataType::kFloat32},
                                                                        {3, DataType::kFloat16},
                                                                        {3, DataType::kBFloat16}};
}  // namespace

TEST_CASE("sparse_allreduce.cpu_matches_dense_reference") {
  CpuBackend backend(BackendOptions{});
  const std::int64_t rows = 40;
  for (int p : {2, 3, 5, 8}) {
    const Topology topo = load_topology(fmt::format("uniform:{}", p));
    for (const char* spec : {"ring", "bruck", "rd", "nccl"}) {
      for (int pattern = 0; pattern < 4; ++pattern) {
        for (const auto& [width, type] : kWidthsAndTypes) {
          std::vector<IndexedSlices> inputs;
          for (int r = 0; r < p; ++r) inputs.push_back(sparse_input(pattern, r, rows, width, type));
          const IndexedSlices want = dense_reference(inputs, rows, width);
          CHECK(want.type == type);
          const auto got = sparse_allreduce(backend, topo, spec, inputs);
          REQUIRE(got.size() == static_cast<std::size_t>(p));
          for (int r = 0; r < p; ++r) {
            INFO("p=" << p << " " << spec << " pattern " << pattern << " width " << width << " " << to_string(type)
                      << " rank " << r);
            CHECK(got[static_cast<std::size_t>(r)] == want);
          }
          if (pattern == 2) CHECK(want.indices == std::vector<std::int64_t>{7});
          if (pattern == 3) CHECK(want.indices.empty());
        }
      }
    }
  }
}

TEST_CASE("sparse_allreduce.duplicates_are_summed") {
  CpuBackend backend(BackendOptions{});
  const Topology topo = load_topology("uniform:3");
  for (const DataType type :
       {DataType::kFloat64, DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt32}) {
    CAPTURE(to_string(type));
    std::vector<IndexedSlices> in(3);
    in[0] = slices(2, {5, 1, 5}, {1, 2, 10, 20, 100, 200}, type);
    in[1] = slices(2, {}, {}, type);
    in[2] = slices(2, {1, 9}, {3, 4, 5, 6}, type);
    const IndexedSlices want = slices(2, {1, 5, 9}, {13, 24, 101, 202, 5, 6}, type);
    CHECK(want.values.size() == 6 * element_size(type));
    for (const auto& got : sparse_allreduce(backend, topo, "bruck", in)) CHECK(got == want);
  }
}

TEST_CASE("sparse_allreduce.sums_round_in_the_value_type") {
  // 1 + 2^-11 is not a float16 (11 significand bits): each float16 addition rounds, in rank order.
  CpuBackend backend(BackendOptions{});
  const Topology topo = load_topology("uniform:2");
  const double tiny = 1.0 / 2048;
  const std::vector<IndexedSlices> in = {slices(1, {0}, {1.0}, DataType::kFloat16),
                                         slices(1, {0}, {tiny}, DataType::kFloat16)};
  const IndexedSlices want = slices(1, {0}, {1.0}, DataType::kFloat16);  // ties to even: 1 + 2^-11 → 1
  for (const auto& got : sparse_allreduce(backend, topo, "ring", in)) CHECK(got == want);
  const std::vector<IndexedSlices> wide = {slices(1, {0}, {1.0}, DataType::kFloat32),
                                           slices(1, {0}, {tiny}, DataType::kFloat32)};
  for (const auto& got : sparse_allreduce(backend, topo, "ring", wide)) {
    CHECK(got == slices(1, {0}, {1.0 + tiny}, DataType::kFloat32));
  }
}

TEST_CASE("sparse_allreduce.bad_inputs_name_the_rank") {
  CpuBackend backend(BackendOptions{});
  const Topology topo = load_topology("uniform:2");
  std::vector<IndexedSlices> in(2);
  in[0] = slices(1, {0}, {1});
  in[1] = slices(1, {-3}, {1});
  CHECK_THROWS_WITH_AS(sparse_allreduce(backend, topo, "ring", in),
                       "sparse all-reduce: rank 1: indices[0] = -3 is negative", InvalidInput);
  in[1] = slices(2, {3}, {1, 2});
  CHECK_THROWS_WITH_AS(sparse_allreduce(backend, topo, "ring", in),
                       "sparse all-reduce: rank 1 has rows of width 2 but rank 0 of width 1", InvalidInput);
  in[1] = slices(1, {3}, {1, 2});
  CHECK_THROWS_WITH_AS(
      sparse_allreduce(backend, topo, "ring", in),
      "sparse all-reduce: rank 1: 16 bytes of double values for 1 indices of width 1 (expected 1 values, 8 bytes)",
      InvalidInput);
  in[1] = slices(1, {3}, {2}, DataType::kFloat32);
  CHECK_THROWS_WITH_AS(sparse_allreduce(backend, topo, "ring", in),
                       "sparse all-reduce: rank 1 has float values but rank 0 double", InvalidInput);
  CHECK_THROWS_AS(sparse_allreduce(backend, topo, "ring", {in[0]}), InvalidInput);
  CHECK_THROWS_AS(sparse_allreduce(backend, topo, "halving", {in[0], in[0]}), InvalidInput);
}

TEST_CASE("sparse_allreduce.payload_is_an_allgather_v") {
  // Each rank's block has its real nnz (empty ranks included): the traffic is the sum of the real sizes;
  // nccl, without an all-gather-v, pads every block to the largest nnz.
  const Topology t = load_topology("uniform:5");
  const std::vector<std::int64_t> nnz = {5, 0, 3, 9, 1};
  const std::int64_t width = 4;
  for (const char* spec : {"ring", "bruck"}) {
    CAPTURE(spec);
    const Plan rows = sparse_payload_plan(t, spec, nnz, width, {});
    CHECK(rows.count == 18 * width);
    CHECK(rows.blocks == std::vector<std::int64_t>{20, 0, 12, 36, 4});
    CHECK(sparse_first_rows(rows, width) == std::vector<std::int64_t>{0, 5, 5, 8, 17});
    std::int64_t moved = 0;
    for (const Op& op : rows.ops) moved += is_transfer(op) ? op.dst.count : 0;
    CHECK(moved == 4 * 18 * width);  // every rank receives the other ranks' real rows once
  }
  const Plan padded = sparse_payload_plan(t, "nccl", nnz, width, {});
  CHECK(padded.blocks.empty());
  CHECK(padded.count == 5 * 9 * width);
  CHECK(sparse_first_rows(padded, width) == std::vector<std::int64_t>{0, 9, 18, 27, 36});
  // Equal nnz everywhere: even blocks, no per-rank sizes needed.
  CHECK(sparse_payload_plan(t, "ring", {2, 2, 2, 2, 2}, 1, {}).blocks.empty());
}
