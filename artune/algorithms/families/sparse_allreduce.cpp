#include "artune/algorithms/sparse_allreduce.hpp"

#include <fmt/format.h>

#include <algorithm>
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

std::int64_t sparse_type_code(DataType type) {
  const auto& all = all_data_types();
  return std::find(all.begin(), all.end(), type) - all.begin();
}

std::string sparse_input_problem(const IndexedSlices& input) {
  if (input.width < 1) return fmt::format("width {} must be ≥ 1", input.width);
  const std::size_t bytes = element_size(input.type);
  const std::size_t expected = input.indices.size() * static_cast<std::size_t>(input.width);
  if (input.values.size() != expected * bytes) {
    return fmt::format("{} bytes of {} values for {} indices of width {} (expected {} values, {} bytes)",
                       input.values.size(), to_string(input.type), input.indices.size(), input.width, expected,
                       expected * bytes);
  }
  for (std::size_t i = 0; i < input.indices.size(); ++i) {
    if (input.indices[i] < 0) return fmt::format("indices[{}] = {} is negative", i, input.indices[i]);
  }
  return {};
}

}  // namespace artune
