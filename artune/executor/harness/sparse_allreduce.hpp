#pragma once
// Running a sparse all-reduce (algorithms/sparse_allreduce.hpp) on a backend: the header, index and
// row all-gathers on caller memory (Backend::run_on), then the local combine (issue 17).

#include <string_view>
#include <vector>

#include "artune/algorithms/sparse_allreduce.hpp"
#include "artune/executor/harness/harness.hpp"

namespace artune {

/// Sparse all-reduce over every rank of `topo` (base.participants, else all GPUs) with the all-gather
/// family `spec`. inputs[i] is the input of backend.local_ranks()[i] (cpu: every rank in this process;
/// mpi: this process's rank); returns each local rank's result, identical on every rank: sorted unique
/// indices and their summed rows. The rows travel in the inputs' value type (IndexedSlices::type, any
/// DataType) and duplicates are summed in it by the reduce kernels (float16/bfloat16 through float, rounded
/// once per addition). An invalid input on any rank (values ≠ nnz·width elements, width < 1, a negative
/// index) or widths or value types that differ between ranks is InvalidInput on every rank, naming the rank.
std::vector<IndexedSlices> sparse_allreduce(HarnessBackend& backend, const Topology& topo, std::string_view spec,
                                            const std::vector<IndexedSlices>& inputs, const BuildOptions& base = {});

}  // namespace artune
