#pragma once
// Tuning the other collectives (issue 17): the choice between a dense all-reduce and a sparse all-reduce (all-gather
// of indices and rows) for embedding gradients. (The candidates of an all-gather or reduce-scatter
// table: generate_candidates with CandidateOptions::collective.)

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "artune/algorithms/plan.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/candidates.hpp"
#include "artune/tuner/fusion.hpp"

namespace artune {

/// Simulated time of a sparse all-reduce (algorithms/sparse_allreduce.hpp) with the all-gather family
/// `spec`: the header, index (int64) and row (`type`) all-gathers one after another, rank k holding
/// nnz[k] rows of `width` values (all-gather-v: the real sizes; nccl pads to the largest nnz). Only the
/// header when every nnz is 0.
double simulate_sparse_us(const Topology& topo, const CostModel& model, std::string_view spec,
                          const std::vector<std::int64_t>& nnz, std::int64_t width, DataType type);

/// Dense all-reduce of a whole embedding gradient or sparse all-gather of the rows it touches.
struct SparseDecision {
  std::int64_t rows = 0;   ///< table rows
  std::int64_t width = 0;  ///< values per row
  double density = 0;      ///< fraction of rows each rank touches
  std::int64_t nnz = 0;    ///< rows each rank touches: round(density · rows), at least 1
  std::string dense_spec;  ///< fastest dense all-reduce spec
  double dense_us = 0;
  std::string sparse_spec;  ///< fastest all-gather spec of the sparse all-reduce
  double sparse_us = 0;
  bool sparse = false;  ///< the sparse all-reduce is faster at `density`
  /// Largest density at which the sparse all-reduce is still no slower than the dense one (sparse wins at
  /// or below it); 0 when it never wins, 1 when it wins even with every row touched.
  double crossover = 0;
};

/// The all-reduce specs tried for the dense side and the all-gather specs for the sparse one.
const std::vector<std::string>& sparse_dense_specs();
const std::vector<std::string>& sparse_gather_specs();

/// Decides one tensor from simulated times (every rank touching nnz rows) and finds its crossover density;
/// the dense side is the fastest of `dense_specs` (all-reduce), the sparse one the fastest of `gather_specs`
/// (all-gather families); empty lists = sparse_dense_specs() and sparse_gather_specs().
SparseDecision decide_sparse(const Topology& topo, const CostModel& model, std::int64_t rows, std::int64_t width,
                             double density, DataType type, const std::vector<std::string>& dense_specs = {},
                             const std::vector<std::string>& gather_specs = {});

/// The choice of every tensor `list` marks sparse (GradientList::sparse, in list order), in the list's type.
std::vector<SparseDecision> decide_sparse_tensors(const GradientList& list, const Topology& topo,
                                                  const CostModel& model);

/// A decision as JSON (rows, width, bytes of the dense table in `type`, density, nnz_per_rank, the two
/// specs and times, pick "dense"/"sparse", crossover_density).
nlohmann::json sparse_decision_to_json(const SparseDecision& d, DataType type);
/// How autotune --fusion prints a marked tensor's choice: "# sparse tensor NAME (ROWS rows x WIDTH, density
/// D): PICK (dense all-reduce SPEC T us, sparse all-gather SPEC T us; sparse wins up to density C)".
std::string sparse_choice_line(std::string_view name, const SparseDecision& d);

}  // namespace artune
