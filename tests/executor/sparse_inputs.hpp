#pragma once
// Sparse all-reduce test inputs (issue 17) and the dense reference they are checked against: the
// whole table summed row by row, then its touched rows in index order. Values are small integers, so
// every sum is exact in each floating type (bfloat16: up to 256) and the comparison is exact.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "artune/algorithms/sparse_allreduce.hpp"
#include "artune/executor/harness/verification.hpp"

namespace artune::test {

/// IndexedSlices of `type` holding `values` (converted by store_from_double).
inline IndexedSlices slices(std::int64_t width, std::vector<std::int64_t> indices, const std::vector<double>& values,
                            DataType type = DataType::kFloat64) {
  IndexedSlices s{width, std::move(indices), type, std::vector<std::byte>(values.size() * element_size(type))};
  for (std::size_t i = 0; i < values.size(); ++i) {
    store_from_double(s.values.data(), type, static_cast<std::int64_t>(i), values[i]);
  }
  return s;
}

/// Rank `rank`'s input of pattern `pattern` over a table of `rows` rows of `width`:
/// 0 random (duplicates within and across ranks), 1 like 0 with ranks 0 and 2 empty,
/// 2 every rank touching row 7 three times, 3 all empty.
inline IndexedSlices sparse_input(int pattern, int rank, std::int64_t rows, std::int64_t width,
                                  DataType type = DataType::kFloat64) {
  std::vector<std::int64_t> indices;
  std::vector<double> values;
  std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(rank + 1) + static_cast<std::uint64_t>(pattern);
  auto next = [&x] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  std::int64_t nnz = 0;
  if (pattern == 0 || pattern == 1) nnz = static_cast<std::int64_t>(next() % 16);
  if (pattern == 1 && (rank == 0 || rank == 2)) nnz = 0;
  if (pattern == 2) nnz = 3;
  for (std::int64_t i = 0; i < nnz; ++i) {
    indices.push_back(pattern == 2 ? 7 : static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(rows)));
    for (std::int64_t j = 0; j < width; ++j) values.push_back(static_cast<double>(1 + next() % 9));
  }
  return slices(width, std::move(indices), values, type);
}

/// The dense reference, summed in double and stored in the inputs' type (float64 when there are none).
inline IndexedSlices dense_reference(const std::vector<IndexedSlices>& inputs, std::int64_t rows, std::int64_t width) {
  const DataType type = inputs.empty() ? DataType::kFloat64 : inputs.front().type;
  std::vector<double> table(static_cast<std::size_t>(rows * width), 0.0);
  std::vector<bool> touched(static_cast<std::size_t>(rows), false);
  for (const IndexedSlices& in : inputs) {
    for (std::size_t i = 0; i < in.indices.size(); ++i) {
      touched[static_cast<std::size_t>(in.indices[i])] = true;
      for (std::int64_t j = 0; j < width; ++j) {
        const auto at = i * static_cast<std::size_t>(width) + static_cast<std::size_t>(j);
        table[static_cast<std::size_t>(in.indices[i] * width + j)] +=
            load_as_double(in.values.data(), type, static_cast<std::int64_t>(at));
      }
    }
  }
  std::vector<std::int64_t> indices;
  std::vector<double> values;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!touched[static_cast<std::size_t>(r)]) continue;
    indices.push_back(r);
    for (std::int64_t j = 0; j < width; ++j) values.push_back(table[static_cast<std::size_t>(r * width + j)]);
  }
  return slices(width, std::move(indices), values, type);
}

}  // namespace artune::test
