#pragma once
// The all-reduce spec grammar: tf_cnn_benchmarks' --all_reduce_spec
// (`alg[#n][/alg[#n]]`, ranges `spec:limit:spec`) plus artune's own names.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace artune {

/// One algorithm token: a name and its optional `#n` argument.
struct AlgToken {
  std::string name;     ///< canonical name: xring, rechd, pscpu, psgpu, shuffle, hiercopy, nccl, mring, tree, 2d
  int arg = -1;         ///< the `#n` value, -1 when absent
  std::string variant;  ///< nccl only: the forced NCCL algorithm[.protocol] ("ring", "tree.ll"); empty = NCCL's choice
  friend bool operator==(const AlgToken&, const AlgToken&) = default;
};

/// One range of a spec: intra-machine algorithm, optional inter-machine one, and its upper limit.
struct SpecRange {
  AlgToken intra;                 ///< alone: the whole all-reduce; with `inter`: the in-machine level
  std::optional<AlgToken> inter;  ///< across machines (after '/')
  std::int64_t limit = -1;        ///< this range applies to counts ≤ limit elements; -1 = no limit (last range)
  friend bool operator==(const SpecRange&, const SpecRange&) = default;
};

/// A parsed spec.
struct AllReduceSpec {
  std::vector<SpecRange> ranges;  ///< ascending limits, the last unlimited
  /// The range that applies to `count` elements.
  const SpecRange& pick(std::int64_t count) const;
  friend bool operator==(const AllReduceSpec&, const AllReduceSpec&) = default;
};

/// Parses a spec; InvalidInput names the offending token ("--spec: 'xrng': unknown algorithm …").
AllReduceSpec parse_spec(std::string_view text);
/// Canonical text of a spec (parse_spec(to_string(s)) == s).
std::string to_string(const AllReduceSpec& spec);
/// Canonical text of one range (no limit).
std::string to_string(const SpecRange& range);
/// Names accepted by the grammar, with one-line descriptions (for --help).
std::vector<std::pair<std::string, std::string>> spec_algorithms();

}  // namespace artune
