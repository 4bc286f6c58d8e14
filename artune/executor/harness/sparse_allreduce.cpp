#include "artune/executor/harness/sparse_allreduce.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>

#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/executor/reduce_kernels.hpp"

namespace artune {

namespace {

// Runs a verified all-gather plan of `type` on one buffer per local rank.
template <class T>
void gather(HarnessBackend& backend, const Plan& plan, DataType type, std::vector<std::vector<T>>& buffers) {
  verify_or_throw(plan);
  backend.prepare_for_user_buffers(plan, type, ReduceOp::kSum);
  std::vector<void*> user;
  for (auto& b : buffers) user.push_back(b.data());
  backend.run_on(user);
}

// Local sum of gathered slices: rank k's nnz[k] indices at indices[first_row[k] …] and its rows at row
// first_row[k] of `values`; duplicates summed (reduce kernels, in `type`) in rank order, then input order;
// sorted unique result.
IndexedSlices combine_gathered(const std::vector<std::int64_t>& nnz, const std::vector<std::int64_t>& first_row,
                               std::int64_t width, DataType type, const std::int64_t* indices,
                               const std::byte* values) {
  const auto row_bytes = static_cast<std::size_t>(width) * element_size(type);
  std::map<std::int64_t, std::vector<std::byte>> rows;
  for (std::size_t k = 0; k < nnz.size(); ++k) {
    const std::int64_t base = first_row[k];
    for (std::int64_t i = 0; i < nnz[k]; ++i) {
      const std::byte* row = values + static_cast<std::size_t>(base + i) * row_bytes;
      auto [it, fresh] = rows.try_emplace(indices[base + i], row, row + row_bytes);
      if (!fresh) reduce_into(it->second.data(), row, width, type, ReduceOp::kSum);
    }
  }
  IndexedSlices out;
  out.width = width;
  out.type = type;
  out.indices.reserve(rows.size());
  out.values.reserve(rows.size() * row_bytes);
  for (const auto& [index, row] : rows) {
    out.indices.push_back(index);
    out.values.insert(out.values.end(), row.begin(), row.end());
  }
  return out;
}

}  // namespace

std::vector<IndexedSlices> sparse_allreduce(HarnessBackend& backend, const Topology& topo, std::string_view spec,
                                            const std::vector<IndexedSlices>& inputs, const BuildOptions& base) {
  // 1. Headers: (nnz, width, value type or -1) of every rank.
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
    h[2] = problems[i].empty() ? sparse_type_code(inputs[i].type) : -1;
  }
  gather(backend, header, DataType::kInt64, heads);
  // Every rank now holds every header: all ranks agree on what follows (or all refuse alike).
  const auto& all = heads.front();
  std::vector<std::int64_t> nnz(static_cast<std::size_t>(ranks));
  std::int64_t max_nnz = 0;
  const std::int64_t width = all[1];
  const std::int64_t type_code = all[2];
  for (int k = 0; k < ranks; ++k) {
    const std::int64_t* h = all.data() + kSparseHeader * k;
    if (h[2] < 0) {
      const auto mine = std::find(local.begin(), local.end(), k);
      const std::string why =
          mine != local.end() ? problems[static_cast<std::size_t>(mine - local.begin())] : "its input is invalid";
      throw InvalidInput(fmt::format("sparse all-reduce: rank {}: {}", k, why));
    }
    if (h[1] != width) {
      throw InvalidInput(
          fmt::format("sparse all-reduce: rank {} has rows of width {} but rank 0 of width {}", k, h[1], width));
    }
    if (h[2] != type_code) {
      throw InvalidInput(fmt::format("sparse all-reduce: rank {} has {} values but rank 0 {}", k,
                                     to_string(all_data_types()[static_cast<std::size_t>(h[2])]),
                                     to_string(all_data_types()[static_cast<std::size_t>(type_code)])));
    }
    nnz[static_cast<std::size_t>(k)] = h[0];
    max_nnz = std::max(max_nnz, h[0]);
  }
  const DataType type = all_data_types()[static_cast<std::size_t>(type_code)];
  std::vector<IndexedSlices> out(local.size());
  if (max_nnz == 0) {
    for (auto& o : out) {
      o.width = width;
      o.type = type;
    }
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
  const auto bytes = static_cast<std::int64_t>(element_size(type));
  std::vector<std::vector<std::byte>> val(local.size(),
                                          std::vector<std::byte>(static_cast<std::size_t>(val_plan.count * bytes)));
  for (std::size_t i = 0; i < local.size(); ++i) {
    std::copy(inputs[i].values.begin(), inputs[i].values.end(),
              val[i].begin() + first_row[static_cast<std::size_t>(local[i])] * width * bytes);
  }
  gather(backend, val_plan, type, val);
  // 4. Each rank sums duplicate rows of what it gathered.
  for (std::size_t i = 0; i < local.size(); ++i) {
    out[i] = combine_gathered(nnz, first_row, width, type, idx[i].data(), val[i].data());
  }
  return out;
}

}  // namespace artune
