#pragma once
// The decision table's file identity and its size ranges' rules, shared by its writer and reader in the tuner
// (tuner/decision_table.hpp) and by the NCCL tuner plugin's own reader (nccl_tuner/nccl_table.hpp), which links no
// artune library: both accept the same ranges, say the same about bad ones and pick the same range for a size. The
// fields themselves are documented in docs/decision-table.md and docs/nccl-plugin.md.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace artune {

/// The value of the "schema" field that marks a decision table.
inline constexpr std::string_view kDecisionTableSchema = "artune.decision_table";
/// The schema version of a file holding one (type, op) table; written for single tables, read by the tuner and
/// by the plugin.
inline constexpr int kDecisionTableSchemaVersion = 1;
/// The schema version of a file holding several (type, op) tables (`autotune -d float,half --op sum,avg`): the
/// common header plus "tables": [version-1 tables]. Written only when there is more than one; the plugin reads
/// only version 1 (one table per communicator's type and op is what NCCL asks it for).
inline constexpr int kDecisionTableMultiSchemaVersion = 2;

/// What is wrong with a size range [min_bytes, max_bytes] read after one that ended at `*previous_max` (null for
/// the first range): the field to blame ("min_bytes" or "max_bytes") and why.
struct RangeBoundsProblem {
  std::string_view field;
  std::string message;
};
inline std::optional<RangeBoundsProblem> range_bounds_problem(std::uint64_t min_bytes, std::uint64_t max_bytes,
                                                              const std::uint64_t* previous_max) {
  if (max_bytes < min_bytes) {
    return RangeBoundsProblem{"max_bytes", "must be ≥ min_bytes " + std::to_string(min_bytes) + ", not " +
                                               std::to_string(max_bytes)};
  }
  if (previous_max != nullptr && min_bytes <= *previous_max) {
    return RangeBoundsProblem{"min_bytes", "must be above the previous range's max_bytes " +
                                               std::to_string(*previous_max) + ", not " + std::to_string(min_bytes) +
                                               " (ranges must ascend without overlapping)"};
  }
  return std::nullopt;
}

/// The range of `ranges` (non-empty, ascending as range_bounds_problem requires) that serves a message of `bytes`:
/// the last one starting at or below it, the first one for sizes below them all (and the last beyond them all).
template <class Range>
const Range& range_for(const std::vector<Range>& ranges, std::uint64_t bytes) {
  const auto after = std::upper_bound(ranges.begin(), ranges.end(), bytes,
                                      [](std::uint64_t b, const Range& r) { return b < r.min_bytes; });
  return after == ranges.begin() ? ranges.front() : *(after - 1);
}

}  // namespace artune
