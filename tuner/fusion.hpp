#pragma once
// Tensor fusion: TF's group_by_size packing and the choice of the pack size
// that minimises a training step's total predicted all-reduce time.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/types.hpp"

namespace artune {

/// TF's group_by_size on tensor sizes in bytes: packs of consecutive tensor indices. A new pack
/// starts when the current one already holds more than `bytes_per_pack` bytes (packs err on the
/// side of few and large); bytes_per_pack = 0 puts everything into one pack.
std::vector<std::vector<std::size_t>> group_by_size(const std::vector<std::uint64_t>& tensor_bytes,
                                                    std::uint64_t bytes_per_pack);

/// A model's gradient tensors, in variable order.
struct GradientList {
  std::string model;                  ///< e.g. "resnet50"
  std::string source;                 ///< the file it came from
  DataType type = DataType::kFloat32;
  std::vector<std::string> names;     ///< tensor names (may be empty strings)
  std::vector<std::uint64_t> elements;

  /// Bytes of each tensor.
  std::vector<std::uint64_t> bytes() const;
  /// Sum of all elements.
  std::uint64_t total_elements() const;
};

/// Reads a gradient list: {"model","type","unit":"elements"|"bytes","tensors":[{"name","shape"}|{"name","elements"}|N, …]}.
GradientList load_gradient_list(const std::string& path);
/// Parses a gradient list from JSON; `source` prefixes errors.
GradientList gradient_list_from_json(const nlohmann::json& doc, const std::string& source);

/// One pack size and what it costs.
struct FusionOption {
  std::uint64_t bytes_per_pack = 0;         ///< group_by_size threshold (0 = one pack)
  std::vector<std::uint64_t> pack_bytes;    ///< bytes of each resulting pack
  double allreduce_us = 0;                  ///< Σ all-reduce time of the packs
  double packing_us = 0;                    ///< Σ concat + split copies of packs holding > 1 tensor
  double total_us = 0;                      ///< allreduce_us + packing_us
};

/// The pack sizes tried and the best one.
struct FusionResult {
  std::vector<FusionOption> options;        ///< in the order tried
  std::size_t best = 0;                     ///< index of the smallest total_us (first on ties)
  std::uint64_t total_bytes = 0;
  std::size_t tensors = 0;
};

/// Costs of one all-reduce of `bytes` bytes, in µs (e.g. the decision table's pick, simulated).
using AllReduceTimeFn = std::function<double(std::uint64_t bytes)>;

/// Pack thresholds worth trying for tensors totalling `total_bytes`: one tensor per pack (1),
/// powers of two from 4 KiB up to the total, and everything in one pack (0).
std::vector<std::uint64_t> default_pack_sizes(std::uint64_t total_bytes);

/// Evaluates every threshold: packs from group_by_size, each all-reduced once (`allreduce_time`) and,
/// when it holds more than one tensor, concatenated before and split after at `copy_gbps` (two copies).
FusionResult tune_fusion(const std::vector<std::uint64_t>& tensor_bytes, const std::vector<std::uint64_t>& pack_sizes,
                         const AllReduceTimeFn& allreduce_time, double copy_gbps);

/// How a threshold reads in tables: "one pack" (0), "per tensor" (1, every tensor alone), else "64M".
std::string pack_size_text(std::uint64_t bytes_per_pack);

/// The result as JSON (for results.json).
nlohmann::json fusion_to_json(const FusionResult& result, const GradientList& list);

}  // namespace artune
