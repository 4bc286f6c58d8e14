#pragma once
// Sparse all-reduce of IndexedSlices (issue 17), as TF/AutoDist aggregate embedding gradients:
// instead of all-reducing the dense table, every rank all-gathers the row indices and the rows it
// touched, then sums duplicate rows locally; every rank ends with the same IndexedSlices (sorted
// unique indices, summed rows).
//
// Three all-gather plans of one spec (collective_algorithms(kAllGather)): the header exchange (per
// rank its nnz, its row width and its value type, or -1 when its input is invalid: 3 int64), then the
// indices (int64) and the rows (of the value type) as all-gather-v plans whose blocks have each rank's
// real size (Plan::blocks, so the traffic is the sum of the real sizes; nccl, which has no
// all-gather-v, pads every block to the largest), then the local combine.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/core/types.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// A sparse gradient: rows `indices` of a table of rows of `width` values of `type` (TF IndexedSlices).
struct IndexedSlices {
  std::int64_t width = 1;             ///< values per row (d)
  std::vector<std::int64_t> indices;  ///< nnz row indices, any order, duplicates allowed
  DataType type = DataType::kFloat64;  ///< element type of the values (float16/bfloat16: their 16-bit storage)
  std::vector<std::byte> values;       ///< nnz × width elements of `type`, row-major (row i from element i·width)
  friend bool operator==(const IndexedSlices&, const IndexedSlices&) = default;
};

/// int64 elements of each rank's header block: nnz, width, value type (sparse_type_code; -1: invalid input).
inline constexpr std::int64_t kSparseHeader = 3;
/// A value type's code in the header (its place in all_data_types()).
std::int64_t sparse_type_code(DataType type);

/// The header all-gather: kSparseHeader int64 per rank (base.collective and base.count are set here).
Plan sparse_header_plan(const Topology& topo, std::string_view spec, BuildOptions base);
/// The indices (per_row = 1 int64) or rows (per_row = width float64) all-gather-v: rank k's block holds
/// nnz[k]·per_row elements (the nccl spec: every block padded to the largest).
Plan sparse_payload_plan(const Topology& topo, std::string_view spec, const std::vector<std::int64_t>& nnz,
                         std::int64_t per_row, BuildOptions base);
/// Where rank k's rows start in a payload plan's buffer (its block's offset / per_row).
std::vector<std::int64_t> sparse_first_rows(const Plan& payload, std::int64_t per_row);

/// One line naming what is wrong with a rank's input ("" when valid): values size ≠ nnz·width elements
/// of its type, width < 1, or a negative index.
std::string sparse_input_problem(const IndexedSlices& input);

}  // namespace artune
