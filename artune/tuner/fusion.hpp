#pragma once
// Tensor fusion: TF's group_by_size packing and the choice of the pack size
// that minimises a training step's total predicted all-reduce time.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "artune/core/types.hpp"

namespace artune {

/// TF's group_by_size on tensor sizes in bytes: packs of consecutive tensor indices. A new pack
/// starts when the current one already holds more than `bytes_per_pack` bytes (packs err on the
/// side of few and large); bytes_per_pack = 0 puts everything into one pack.
std::vector<std::vector<std::size_t>> group_by_size(const std::vector<std::uint64_t>& tensor_bytes,
                                                    std::uint64_t bytes_per_pack);

/// A tensor the list marks sparse (an embedding gradient, "sparse": {"rows", "width", "density" | "nnz"}):
/// a table of `rows` rows of `width` values (rows · width = the tensor's elements) of which every rank
/// touches round(density · rows) rows.
struct SparseMark {
  std::size_t tensor = 0;  ///< index in the list
  std::int64_t rows = 0;
  std::int64_t width = 0;
  double density = 0;  ///< in (0, 1]; "nnz" N reads as N / rows
};

/// A model's gradient tensors, in variable order.
struct GradientList {
  std::string model;   ///< e.g. "resnet50"
  std::string source;  ///< the file it came from
  DataType type = DataType::kFloat32;
  std::vector<std::string> names;  ///< tensor names (may be empty strings)
  std::vector<std::uint64_t> elements;
  /// Backward compute time per tensor in µs, from the list ("backward_us" on every tensor, or a top-level
  /// "backward_us" total split in proportion to the elements); empty when the list gives none.
  std::vector<double> backward_us;
  std::vector<SparseMark> sparse;  ///< the tensors marked sparse, in list order

  /// Backward time of each tensor's layer (µs): the list's own times, else a bandwidth model in which the
  /// backward step of a layer reads its weights and writes and reads its gradient once (3 · bytes at
  /// `memory_gbps`) — a lower bound, as compute-bound layers take longer; give real times with "backward_us".
  std::vector<double> backward_times(double memory_gbps) const;
  /// Bytes of each tensor.
  std::vector<std::uint64_t> bytes() const;
  /// Sum of all elements.
  std::uint64_t total_elements() const;
};

/// Reads a gradient list: {"model","type","unit":"elements"|"bytes","tensors":[{"name","shape"}|{"name","elements"}|N,
/// …]}; a tensor object may carry "backward_us" and "sparse" (SparseMark).
GradientList load_gradient_list(const std::string& path);
/// Parses a gradient list from JSON; `source` prefixes errors.
GradientList gradient_list_from_json(const nlohmann::json& doc, const std::string& source);

/// A tensor that is not packed: it communicates on its own, in `us` (a gradient picked sparse: its sparse
/// all-reduce, the all-gather of its indices and rows; issue 17).
struct SeparateTensor {
  std::size_t tensor = 0;  ///< index in the list
  double us = 0;           ///< its own communication time
};

/// One pack size and what it costs.
struct FusionOption {
  std::uint64_t bytes_per_pack = 0;       ///< group_by_size threshold (0 = one pack)
  std::vector<std::uint64_t> pack_bytes;  ///< bytes of each resulting pack (separate tensors excluded)
  std::vector<std::vector<std::size_t>> packs;  ///< tensor indices (in the list) of each pack
  double allreduce_us = 0;                ///< Σ all-reduce time of the packs
  double packing_us = 0;                  ///< Σ concat + split copies of packs holding > 1 tensor
  double separate_us = 0;                 ///< Σ time of the separate (sparse) tensors, each on its own
  double total_us = 0;                    ///< allreduce_us + packing_us + separate_us (no overlap: all after backward)
  double backward_us = 0;                 ///< Σ backward time of the layers (0 without a backward model)
  double step_us = 0;                     ///< backward overlapped with the all-reduces of packs ready so far
  double exposed_us = 0;                  ///< step_us − backward_us: communication not hidden by compute
};

/// The pack sizes tried and the best one.
struct FusionResult {
  std::vector<FusionOption> options;  ///< in the order tried
  std::size_t best = 0;               ///< index of the smallest step_us (first on ties)
  std::size_t best_no_overlap = 0;    ///< index of the smallest total_us (first on ties)
  bool overlap = false;               ///< a backward model was given (else step_us = total_us)
  std::uint64_t total_bytes = 0;
  std::size_t tensors = 0;
  std::vector<SeparateTensor> separate;  ///< the tensors kept out of the packs, in list order
  std::uint64_t packed_bytes = 0;        ///< total_bytes less the separate tensors' bytes
};

/// Costs of one all-reduce of `bytes` bytes, in µs (e.g. the decision table's pick, simulated).
using AllReduceTimeFn = std::function<double(std::uint64_t bytes)>;

/// Pack thresholds worth trying for tensors totalling `total_bytes`: one tensor per pack (1),
/// powers of two from 4 KiB up to the total, and everything in one pack (0).
std::vector<std::uint64_t> default_pack_sizes(std::uint64_t total_bytes);

/// Evaluates every threshold: packs from group_by_size, each all-reduced once (`allreduce_time`) and,
/// when it holds more than one tensor, concatenated before and split after at `copy_gbps` (two copies).
///
/// With `backward_us` (one time per tensor, variable order) the step is modelled with overlap: backward runs
/// from the last tensor to the first, so tensor i's gradient is ready at Σ_{j ≥ i} backward_us[j]; a pack is
/// ready when its first tensor's gradient is; packs are all-reduced one at a time in the order they become
/// ready, each starting when it is ready and the previous all-reduce (with its packing copies) has finished.
/// step_us = max(backward, end of the last all-reduce). The best pack size minimises step_us; total_us (no
/// overlap) is kept beside it. Without `backward_us`, step_us = total_us.
///
/// `separate` tensors (each index once) stay out of the packs: group_by_size packs the others, in order, and
/// each separate tensor communicates alone in its own time, ready with its gradient, queued with the packs in
/// the order they all become ready (a later index first).
FusionResult tune_fusion(const std::vector<std::uint64_t>& tensor_bytes, const std::vector<std::uint64_t>& pack_sizes,
                         const AllReduceTimeFn& allreduce_time, double copy_gbps,
                         const std::vector<double>& backward_us = {}, const std::vector<SeparateTensor>& separate = {});

/// How a threshold reads in tables: "one pack" (0), "per tensor" (1, every tensor alone), else "64M".
std::string pack_size_text(std::uint64_t bytes_per_pack);

/// The result as JSON (for results.json).
nlohmann::json fusion_to_json(const FusionResult& result, const GradientList& list);

}  // namespace artune
