#pragma once
// Sparse all-reduce of IndexedSlices (issue 17), as TF/AutoDist aggregate embedding gradients:
// instead of all-reducing the dense table, every rank all-gathers the row indices and the rows it
// touched, then sums duplicate rows locally; every rank ends with the same IndexedSlices (sorted
// unique indices, summed rows).
//
// Three all-gather plans of one spec (collective_algorithms(kAllGather)): the header exchange (per
// rank its nnz, its row width and whether its input is valid: 3 int64), then the indices (int64)
// and the rows (float64), each padded to the largest nnz of any rank (an all-gather-v whose blocks
// are the largest block: the plan IR's blocks are even pieces), then the local combine.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// A sparse gradient: rows `indices` of a table of rows of `width` values (TF IndexedSlices).
struct IndexedSlices {
  std::int64_t width = 1;             ///< values per row (d)
  std::vector<std::int64_t> indices;  ///< nnz row indices, any order, duplicates allowed
  std::vector<double> values;         ///< nnz × width, row-major (row i is values[i·width …])
  friend bool operator==(const IndexedSlices&, const IndexedSlices&) = default;
};

/// int64 elements of each rank's header block: nnz, width, valid (1/0).
inline constexpr std::int64_t kSparseHeader = 3;

/// The header all-gather: kSparseHeader int64 per rank (base.collective and base.count are set here).
Plan sparse_header_plan(const Topology& topo, std::string_view spec, BuildOptions base);
/// The indices (max_nnz int64 per rank) or rows (max_nnz·width float64 per rank) all-gather.
Plan sparse_payload_plan(const Topology& topo, std::string_view spec, std::int64_t per_rank, BuildOptions base);

/// Local sum of gathered slices: rank k's nnz[k] indices at indices[k·max_nnz …] and its rows at
/// values[k·max_nnz·width …]; duplicates summed in rank order, then input order; sorted unique result.
IndexedSlices combine_gathered(const std::vector<std::int64_t>& nnz, std::int64_t max_nnz, std::int64_t width,
                               const std::int64_t* indices, const double* values);
/// One line naming what is wrong with a rank's input ("" when valid): values size ≠ nnz·width,
/// width < 1, or a negative index.
std::string sparse_input_problem(const IndexedSlices& input);

}  // namespace artune
