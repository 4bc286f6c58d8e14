#include "artune/algorithms/sparse_allreduce.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "artune/algorithms/collectives.hpp"
#include "artune/core/error.hpp"

namespace artune {

Plan sparse_header_plan(const Topology& topo, std::string_view spec, BuildOptions base) {
  base.collective = Collective::kAllGather;
  base.reduce_op = ReduceOp::kSum;
  base.count = 1;  // counted after the participants are known
  const int ranks =
      base.participants.empty() ? static_cast<int>(topo.gpus().size()) : static_cast<int>(base.participants.size());
  base.count = kSparseHeader * std::max(ranks, 1);
  return build_collective_plan(topo, spec, base);
}

Plan sparse_payload_plan(const Topology& topo, std::string_view spec, const std::vector<std::int64_t>& nnz,
                         std::int64_t per_row, BuildOptions base) {
  base.collective = Collective::kAllGather;
  base.reduce_op = ReduceOp::kSum;
  const std::int64_t most = nnz.empty() ? 0 : *std::max_element(nnz.begin(), nnz.end());
  const bool even = std::all_of(nnz.begin(), nnz.end(), [&](std::int64_t n) { return n == most; });
  // NCCL's all-gather takes one count for every rank: no all-gather-v, so its blocks are the largest.
  const bool padded = parse_collective_spec(Collective::kAllGather, spec).ranges.front().intra.name == "nccl";
  base.count = 0;
  base.blocks.clear();
  for (const std::int64_t n : nnz) {
    base.count += (padded ? most : n) * per_row;
    if (!even && !padded) base.blocks.push_back(n * per_row);
  }
  return build_collective_plan(topo, spec, base);
}

std::vector<std::int64_t> sparse_first_rows(const Plan& payload, std::int64_t per_row) {
  std::vector<std::int64_t> out;
  for (int k = 0; k < payload.ranks(); ++k) out.push_back(collective_block(payload, k).first / per_row);
  return out;
}

IndexedSlices combine_gathered(const std::vector<std::int64_t>& nnz, const std::vector<std::int64_t>& first_row,
                               std::int64_t width, const std::int64_t* indices, const double* values) {
  std::map<std::int64_t, std::vector<double>> rows;
  for (std::size_t k = 0; k < nnz.size(); ++k) {
    const std::int64_t base = first_row[k];
    for (std::int64_t i = 0; i < nnz[k]; ++i) {
      auto [it, fresh] = rows.try_emplace(indices[base + i], static_cast<std::size_t>(width), 0.0);
      (void)fresh;
      const double* row = values + (base + i) * width;
      for (std::int64_t j = 0; j < width; ++j) it->second[static_cast<std::size_t>(j)] += row[j];
    }
  }
  IndexedSlices out;
  out.width = width;
  out.indices.reserve(rows.size());
  out.values.reserve(rows.size() * static_cast<std::size_t>(width));
  for (const auto& [index, row] : rows) {
    out.indices.push_back(index);
    out.values.insert(out.values.end(), row.begin(), row.end());
  }
  return out;
}

std::string sparse_input_problem(const IndexedSlices& input) {
  if (input.width < 1) return fmt::format("width {} must be ≥ 1", input.width);
  if (input.values.size() != input.indices.size() * static_cast<std::size_t>(input.width)) {
    return fmt::format("{} values for {} indices of width {} (expected {})", input.values.size(), input.indices.size(),
                       input.width, input.indices.size() * static_cast<std::size_t>(input.width));
  }
  for (std::size_t i = 0; i < input.indices.size(); ++i) {
    if (input.indices[i] < 0) return fmt::format("indices[{}] = {} is negative", i, input.indices[i]);
  }
  return {};
}

}  // namespace artune
