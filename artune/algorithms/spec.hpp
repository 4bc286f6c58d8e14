#pragma once
// The all-reduce spec grammar: tf_cnn_benchmarks' --all_reduce_spec
// (`alg[#n][/alg[#n]]`, ranges `spec:limit:spec`) plus artune's own names.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "artune/core/nccl_names.hpp"

namespace artune {

/// One algorithm token: a name and its optional `#n` argument.
struct AlgToken {
  std::string name;     ///< canonical name: xring, rechd, pscpu, psgpu, shuffle, hiercopy, nccl, mring, tree, 2d
  int arg = -1;         ///< the `#n` value, -1 when absent
  std::string variant;  ///< nccl only: the forced NCCL choice ALGO[.PROTO][.cN] ("ring.simple.c8"); "" = NCCL's
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
/// What a `nccl.VARIANT` token forces, VARIANT = ALGO[.PROTO][.cN]: NCCL's algorithm (ring, tree, nvls,
/// nvlstree, pat), protocol (ll, ll128, simple) and channel count (1..kNcclMaxChannels), as
/// NCCL_ALGO, NCCL_PROTO and ncclConfig_t's minCTAs = maxCTAs force them. The one parser of this grammar in
/// the library (the simulator's NCCL model and the nccl backend's forcing read their names from it).
struct NcclVariant {
  std::string algo;   ///< "ring", "tree", "nvls", "nvlstree", "pat"; empty only for an empty variant
  std::string proto;  ///< "ll", "ll128", "simple"; empty = NCCL's cheapest protocol of `algo`
  int channels = 0;   ///< `.cN`; 0 = NCCL's own channel count
  friend bool operator==(const NcclVariant&, const NcclVariant&) = default;
};
/// Parses a variant ("" = nothing forced); InvalidInput "WHAT: unknown NCCL algorithm …" otherwise.
NcclVariant parse_nccl_variant(std::string_view variant, std::string_view what);
/// Canonical text of a variant ("ring.simple.c8"; "" when nothing is forced).
std::string to_string(const NcclVariant& variant);

/// Names accepted by the grammar, with one-line descriptions (for --help).
std::vector<std::pair<std::string, std::string>> spec_algorithms();

}  // namespace artune
