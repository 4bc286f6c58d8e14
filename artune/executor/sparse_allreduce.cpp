#include "artune/executor/sparse_allreduce.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "artune/algorithms/verifier.hpp"
#include "artune/core/error.hpp"

namespace artune {

namespace {

// Runs a verified all-gather plan of `type` on one buffer per local rank.
template <class T>
void gather(Backend& backend, const Plan& plan, DataType type, std::vector<std::vector<T>>& buffers) {
  verify_or_throw(plan);
  backend.prepare_for_user_buffers(plan, type, ReduceOp::kSum);
  std::vector<void*> user;
  for (auto& b : buffers) user.push_back(b.data());
  backend.run_on(user);
}

}  // namespace

std::vector<IndexedSlices> sparse_allreduce(Backend& backend, const Topology& topo, std::string_view spec,
                                            const std::vector<IndexedSlices>& inputs, const BuildOptions& base) {
  // 1. Headers: (nnz, width, valid) of every rank.
  const Plan header = sparse_header_plan(topo, spec, base);
  const int ranks = header.ranks();
  backend.prepare_for_user_buffers(header, DataType::kInt64, ReduceOp::kSum);
  const std::vector<int> local = backend.local_ranks();
  if (inputs.size() != local.size()) {
    throw InvalidInput(
        fmt::format("sparse all-reduce: {} inputs for the {} ranks of this process", inputs.size(), local.size()));
  }
  std::vector<std::vector<std::int64_t>> heads(local.size(),
                                               std::vector<std::int64_t>(static_cast<std::size_t>(header.count), 0));
  std::vector<std::string> problems(local.size());
  for (std::size_t i = 0; i < local.size(); ++i) {
    problems[i] = sparse_input_problem(inputs[i]);
    auto* h = heads[i].data() + kSparseHeader * local[i];
    h[0] = static_cast<std::int64_t>(inputs[i].indices.size());
    h[1] = inputs[i].width;
    h[2] = problems[i].empty() ? 1 : 0;
  }
  gather(backend, header, DataType::kInt64, heads);
  // Every rank now holds every header: all ranks agree on what follows (or all refuse alike).
  const auto& all = heads.front();
  std::vector<std::int64_t> nnz(static_cast<std::size_t>(ranks));
  std::int64_t max_nnz = 0;
  const std::int64_t width = all[1];
  for (int k = 0; k < ranks; ++k) {
    const std::int64_t* h = all.data() + kSparseHeader * k;
    if (h[2] != 1) {
      const auto mine = std::find(local.begin(), local.end(), k);
      const std::string why =
          mine != local.end() ? problems[static_cast<std::size_t>(mine - local.begin())] : "its input is invalid";
      throw InvalidInput(fmt::format("sparse all-reduce: rank {}: {}", k, why));
    }
    if (h[1] != width) {
      throw InvalidInput(
          fmt::format("sparse all-reduce: rank {} has rows of width {} but rank 0 of width {}", k, h[1], width));
    }
    nnz[static_cast<std::size_t>(k)] = h[0];
    max_nnz = std::max(max_nnz, h[0]);
  }
  std::vector<IndexedSlices> out(local.size());
  if (max_nnz == 0) {
    for (auto& o : out) o.width = width;
    return out;
  }
  // 2. Indices, each rank's block of its own nnz (all-gather-v).
  const Plan idx_plan = sparse_payload_plan(topo, spec, nnz, 1, base);
  const std::vector<std::int64_t> first_row = sparse_first_rows(idx_plan, 1);
  std::vector<std::vector<std::int64_t>> idx(local.size(),
                                             std::vector<std::int64_t>(static_cast<std::size_t>(idx_plan.count), -1));
  for (std::size_t i = 0; i < local.size(); ++i) {
    std::copy(inputs[i].indices.begin(), inputs[i].indices.end(),
              idx[i].begin() + first_row[static_cast<std::size_t>(local[i])]);
  }
  gather(backend, idx_plan, DataType::kInt64, idx);
  // 3. Rows alike (the same rank order and row offsets).
  const Plan val_plan = sparse_payload_plan(topo, spec, nnz, width, base);
  ARTUNE_CHECK(sparse_first_rows(val_plan, width) == first_row, "index and row all-gathers disagree on blocks");
  std::vector<std::vector<double>> val(local.size(), std::vector<double>(static_cast<std::size_t>(val_plan.count), 0));
  for (std::size_t i = 0; i < local.size(); ++i) {
    std::copy(inputs[i].values.begin(), inputs[i].values.end(),
              val[i].begin() + first_row[static_cast<std::size_t>(local[i])] * width);
  }
  gather(backend, val_plan, DataType::kFloat64, val);
  // 4. Each rank sums duplicate rows of what it gathered.
  for (std::size_t i = 0; i < local.size(); ++i) {
    out[i] = combine_gathered(nnz, first_row, width, idx[i].data(), val[i].data());
  }
  return out;
}

}  // namespace artune
