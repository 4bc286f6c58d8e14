#pragma once
// `artune autotune --target nccl`: the search restricted to NCCL's own
// choices, so that the decision table can steer NCCL through the tuner plugin
// (nccl_tuner/, libnccl-tuner-artune.so) in programs that never call artune.

#include <vector>

#include "artune/executor/backend.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/candidates.hpp"

namespace artune {

/// The channel counts tried for `algo` besides the search's own (nccl::max_channels): the powers of two from
/// nccl::min_channels(algo) below it (e.g. 1, 2, 4, 8 where the search finds 12 channels).
std::vector<int> nccl_channel_counts(const nccl::Graph& graph, nccl::Algo algo);

/// NCCL's algorithm × protocol pairs that NCCL enables for `collective` (all-reduce, all-gather or
/// reduce-scatter) over every GPU of `topo` (its cost table, simulator/nccl_model.hpp), as candidates
/// `nccl.ALGO.PROTO` (on the channels NCCL's search finds), each followed by `nccl.ALGO.PROTO.cN` for N in
/// nccl_channel_counts, then plain `nccl` (NCCL's own pick, the baseline; last, so that a tie goes to the
/// explicit pair the plugin can steer to). Each is built and verified
/// like generate_candidates' (at options.verify_count elements). Unsupported (one line) on a topology without
/// two GPUs or whose machines hold different GPU counts (NCCL's model needs the same count on each).
CandidateSet generate_nccl_candidates(const Topology& topo, const CandidateOptions& options,
                                      Collective collective = Collective::kAllReduce);

/// `--target nccl --measure BACKEND`, checked before any search: only real NCCL measures NCCL's own choices
/// (InvalidInput naming --measure for another backend), and it needs the nccl backend in this build and a CUDA
/// device here (Unsupported, one line, otherwise). The nccl backend forces each candidate's algorithm and
/// protocol on its communicator (executor/nccl/nccl_forced_choice.hpp), so every candidate is measured as such.
void check_nccl_measurement(BackendKind backend);

/// Candidates per size measured with --target nccl --measure nccl: all of them (NCCL has at most 5 x 3 pairs,
/// each on at most 1 + log2(64) channel counts, + 1).
inline constexpr int kNcclMeasureAll = 128;

}  // namespace artune
