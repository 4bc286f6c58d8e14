#pragma once
// Forcing NCCL's algorithm, protocol and channel count for one communicator, so that the nccl backend runs
// `nccl.ALGO.PROTO` plans as NCCL would with that choice (what `artune autotune --target nccl --measure nccl`
// measures). Plain C++, without NCCL's headers, so it builds and is tested on every machine.
//
// How NCCL 2.28 takes each setting (NVIDIA/nccl, src/graph/tuning.cc and src/init.cc):
//  * algorithm and protocol: the NCCL_ALGO and NCCL_PROTO environment variables, read when a communicator is
//    created (its tuning model), so they are set around ncclCommInitRank/ncclCommSplit and restored after the
//    new communicator is ready (NCCL's non-blocking init reads them from its own thread until then);
//  * channels: ncclConfig_t's minCTAs/maxCTAs, per communicator (NCCL_MIN/MAX_NCHANNELS are read once per
//    process, so they could not differ between communicators).

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "artune/algorithms/plan.hpp"

namespace artune {

/// What one communicator is forced to; empty fields leave NCCL's own choice.
struct NcclForcedChoice {
  std::string algo;   ///< NCCL_ALGO value ("Ring", "Tree", "NVLS", "NVLSTree", "PAT"); "" = NCCL's choice
  std::string proto;  ///< NCCL_PROTO value ("LL", "LL128", "Simple"); "" = NCCL's choice
  int channels = 0;   ///< channels (CTAs) per collective, 1..64 (`.cN`); 0 = NCCL's choice
  bool empty() const noexcept { return algo.empty() && proto.empty() && channels == 0; }
  friend bool operator==(const NcclForcedChoice&, const NcclForcedChoice&) = default;
};

/// Parses a group op's `algo` field ("ring", "tree.ll", "nvlstree.simple", "ring.simple.c8"; "" = none; the
/// grammar of algorithms/spec.hpp parse_nccl_variant) into NCCL's spelling and channel count. InvalidInput
/// naming `where` for an unknown algorithm or protocol or a channel count outside 1..64.
NcclForcedChoice parse_nccl_forced_choice(std::string_view algo, std::string_view where);

/// The choice for each of distinct_groups(plan), from the algo fields of its group ops (empty when they
/// force nothing). InvalidInput when two ops of one group force different choices: one NCCL communicator
/// per group cannot run both.
std::vector<NcclForcedChoice> nccl_forced_choices(const Plan& plan);

/// The environment settings for `choice`: (name, value) pairs; NCCL_ALGO / NCCL_PROTO only where forced.
std::vector<std::pair<std::string, std::string>> nccl_forced_environment(const NcclForcedChoice& choice);

/// Sets ncclConfig_t's minCTAs and maxCTAs (passed as references, so NCCL's header is not needed) to the
/// forced channel count; leaves them as they are when channels is 0.
void apply_nccl_forced_channels(const NcclForcedChoice& choice, int& min_ctas, int& max_ctas);

/// Sets the environment of `choice` for its lifetime and restores the previous values (or their absence)
/// when destroyed. Hold it until the communicator created under it is ready. Not thread-safe against other
/// threads changing the same variables.
class ScopedNcclForcedChoice {
 public:
  explicit ScopedNcclForcedChoice(const NcclForcedChoice& choice);
  ~ScopedNcclForcedChoice();
  ScopedNcclForcedChoice(const ScopedNcclForcedChoice&) = delete;
  ScopedNcclForcedChoice& operator=(const ScopedNcclForcedChoice&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;  // name, previous value
};

}  // namespace artune
